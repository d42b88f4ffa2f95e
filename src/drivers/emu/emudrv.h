/* emudrv.h - the `emu` driver's context, as far as the rest of the driver
 * (gpustream.c, the GPU data stream options) needs to see it.
 *
 * A context runs in one of two modes, fixed at init from the spec string:
 * in-process (an emu_card in this process) or daemon (the card lives in an
 * onix-emu process, reached over a UNIX socket and shared-memory rings, see
 * docs/daemon.md). The accessors below work in both modes where they can. */
#ifndef EMUDRV_H
#define EMUDRV_H

#include <stddef.h>
#include <stdint.h>
#include "emu/emu.h"

struct emudrv;
struct gpustream;

/* The in-process card, or NULL before init and in daemon mode. Owned by the
 * context: valid until the context is destroyed (emu_gpu_close runs first). */
struct emu_card *emudrv_card(struct emudrv *d);

/* The session with the onix-emu daemon (emuclient.h), or NULL in-process
 * and before init. Owned by the context, like the card. */
struct emuc;
struct emuc *emudrv_daemon(struct emudrv *d);

/* The context's ONI_OPT_TIMEOUTMS, for every wait the caller makes. */
uint32_t emudrv_timeout_ms(struct emudrv *d);

/* Slot for the GPU stream state of this context: NULL until gpustream code
 * stores something there; released by emu_gpu_close (gpustream.h). */
struct gpustream **emudrv_gpustream(struct emudrv *d);

/* Read exactly n bytes (signal stream: 1..n) of read stream s into host
 * memory dst, in either mode, waiting up to timeout_ms in all.
 * Returns the bytes read, ONI_ETIMEOUT, ONI_EDISCONNECTED (daemon gone),
 * ONI_EINVALSTATE before init, or another ONI error. Streams:
 * EMU_STREAM_DATA, _SIGNAL, _GPU. In-process a block is one card read
 * (emu_card_read). Through the daemon it may come in pieces (larger than the
 * ring, at the ring's end, after bytes a late answer left): on an error, dst
 * holds the pieces that came before it, and those bytes are gone from the
 * stream (the next read starts after them); the bytes of a piece whose
 * answer came too late are kept and start the next read. */
int emudrv_stream_read(struct emudrv *d, enum emu_stream s, void *dst, size_t n, uint32_t timeout_ms);

/* Write n bytes of whole write frames from host memory src to write stream s
 * (EMU_STREAM_WRITE or EMU_STREAM_GPU_WRITE), in either mode, waiting up to
 * timeout_ms. Returns n or an ONI error (ONI_EBADFRAME, ONI_EWRITESIZE when
 * larger than the daemon's write ring, ONI_EDISCONNECTED, ...). */
int emudrv_stream_write(struct emudrv *d, enum emu_stream s, const void *src, size_t n, uint32_t timeout_ms);

#endif
