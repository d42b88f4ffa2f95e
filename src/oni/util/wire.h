/* wire.h - sizes of the ONI stream formats, shared by the core, the drivers
 * and the emulated card. */
#ifndef ONI_UTIL_WIRE_H
#define ONI_UTIL_WIRE_H

#include <stddef.h>

/* ONI_RFRAMEHEADERSZ is onidefs.h's ONI_FRAMEHEADERSZ as a plain integer
 * constant (that one is a sizeof expression; frame.c checks they agree). */
#define ONI_RFRAMEHEADERSZ 16 /* [u64 time][u32 dev_idx][u32 data_sz] */
#define ONI_WFRAMEHEADERSZ 8  /* [u32 dev_idx][u32 payload words] */
#define ONI_COBSMAXPACKET 255 /* encoded bytes, excluding the 0 delimiter */
#define ONI_SIGMAXPAYLOAD 250 /* decoded bytes after the u32 type (fits one COBS packet) */

/* Bytes a payload of n bytes occupies in a stream: padded to 32-bit words. */
static inline size_t oni_pad4(size_t n) { return (n + 3u) & ~(size_t)3u; }

#endif
