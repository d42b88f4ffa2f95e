/* probe.h - where a probe's recording sites are: the one table of the
 * NP2.0 geometry that the emulated probe's units (src/emu/neural.c), the
 * recordings' channel positions (src/record, the live view) and the scorer's
 * spatial radius (src/loop/score.c) share.
 *
 * NP2.0 single-shank probe, the 384 channels in their default bank 0
 * (electrodes 0..383, channel = electrode): two columns 32 um apart,
 * rows 15 um apart, channel ch at column ch % 2, row ch / 2 (the positions
 * the recording writes; imec's NP2.0 probe layout as SpikeGLX and
 * ProbeInterface give it: 2 columns, 32 um horizontal and 15 um vertical
 * pitch). */
#ifndef ONI_UTIL_PROBE_H
#define ONI_UTIL_PROBE_H

#include <stdint.h>

#define NP2_PITCH_X_UM 32.0f
#define NP2_PITCH_Y_UM 15.0f

/* x (across the shank) and y (along it, up from the tip row) of channel ch, um. */
static inline void np2_site(uint32_t ch, float *x_um, float *y_um)
{
    *x_um = (float)(ch % 2) * NP2_PITCH_X_UM;
    *y_um = (float)(ch / 2) * NP2_PITCH_Y_UM;
}

#endif
