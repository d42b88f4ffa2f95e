/* gpustream.h - the seam between the emu driver (emudrv.c) and the GPU data
 * stream options of include/onigpu.h (gpustream.c).
 *
 * The driver routes every driver option in ONI_DRV_RD_SZ .. ONI_DRV_DMA_AGENT
 * except ONI_DRV_STREAM_STATS (which the driver answers itself) to the two
 * functions below, after checking that the context is initialized; it calls
 * emu_gpu_close before the card or the daemon connection goes away. The
 * implementation keeps its per-context state in *emudrv_gpustream(d) and
 * reaches the card through the accessors of emudrv.h: emudrv_card (in-process;
 * NULL in daemon mode), emudrv_timeout_ms, emudrv_stream_read/_write (both
 * modes). */
#ifndef GPUSTREAM_H
#define GPUSTREAM_H

#include <stddef.h>
#include "emudrv.h"

/* Set GPU stream option opt (onigpu.h conventions). Returns 0 or an ONI error;
 * ONI_EINVALOPT for an option it does not implement. */
int emu_gpu_set_opt(struct emudrv *d, int opt, const void *value, size_t len);

/* Get GPU stream option opt into value (*len: capacity in, bytes out).
 * Returns 0 or an ONI error; ONI_EINVALOPT for an option it does not implement. */
int emu_gpu_get_opt(struct emudrv *d, int opt, void *value, size_t *len);

/* Release the context's GPU stream state (*emudrv_gpustream(d)), waiting for
 * its queued transfers. Called by the driver before the card is destroyed;
 * safe when nothing was ever set. */
void emu_gpu_close(struct emudrv *d);

#endif
