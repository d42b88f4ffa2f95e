/* emuclient.h - the emu driver's side of the onix-emu daemon protocol
 * (emuproto.h): one session with the daemon = the card of one driver context.
 * Calls on different channels may run concurrently; calls on one channel are
 * serialized. Once the daemon is found gone, every call returns
 * ONI_EDISCONNECTED; a new session (a new context) is the way back. */
#ifndef EMUCLIENT_H
#define EMUCLIENT_H

#include <stddef.h>
#include <stdint.h>
#include "emu/emu.h"
#include "gpustream/gpustream.h"

struct emuc;

/* Connect to the daemon at socket path, open a session with a card made from
 * spec (NULL or "": the daemon's own spec), map the rings and attach every
 * channel, all within timeout_ms (one deadline, however slowly each answer comes). Returns 0,
 * ONI_ENOSOCKET (nothing at path), ONI_ENOTSOCKET (no socket there),
 * ONI_ECONNREFUSED (a socket no daemon listens on), ONI_EACCESS, ONI_EBADADDR
 * (path too long), ONI_EPATHINVALID (no socket to reach it: out of
 * descriptors), ONI_EBADALLOC (out of memory), ONI_EBUSY (it serves another
 * session), ONI_EINVALARG (bad spec; why in err), ONI_EBADCONTROLLER (other
 * protocol version), ONI_ETIMEOUT or ONI_EDISCONNECTED. */
int emuc_open(const char *path, const char *spec, uint32_t timeout_ms, struct emuc **out, char *err,
              size_t err_cap);

/* End the session (the daemon destroys its card) and free c. NULL-safe. */
void emuc_close(struct emuc *c);

/* The card's configuration registers, as emu_card_read_config/_write_config.
 * A write that empties the card's FIFOs (RESET, acquisition starting) also
 * drops what this side holds of them (see emuclient.c, drop_stale). Errors: the card's, or ONI_ETIMEOUT, ONI_EDISCONNECTED, ONI_EBADFRAME
 * (a malformed answer). */
int emuc_read_config(struct emuc *c, oni_config_t reg, uint32_t *value, uint32_t timeout_ms);
int emuc_write_config(struct emuc *c, oni_config_t reg, uint32_t value, uint32_t timeout_ms);

/* As emu_card_read / emu_card_write, through the rings, except that a read
 * may return fewer than n bytes (at least 1) when it is served from bytes the
 * daemon sent ahead. A write larger than the stream's ring gives
 * ONI_EWRITESIZE; a write that gives ONI_ETIMEOUT was not delivered (the
 * daemon refuses it after its deadline), as in-process. */
int emuc_read(struct emuc *c, enum emu_stream s, void *dst, size_t n, uint32_t timeout_ms);
int emuc_write(struct emuc *c, enum emu_stream s, const void *src, size_t n, uint32_t timeout_ms);

/* The card's FIFO counters and link preset (emu_card_stats, emu_card_link). */
int emuc_stats(struct emuc *c, onigpu_stream_stats_t *st, uint32_t timeout_ms);
int emuc_link(struct emuc *c, oniemu_link_t *link, uint32_t timeout_ms);
/* The card's EMU_FEAT_* bits (emu.h). */
int emuc_features(struct emuc *c, uint32_t *bits, uint32_t timeout_ms);
/* Ground truth to a file the daemon writes: an absolute path, or "" to stop. */
int emuc_truth_file(struct emuc *c, const char *path, uint32_t timeout_ms);

/* GPU memory for the daemon's DMA engine (CUDA IPC, docs/daemon.md). Import
 * the device allocation named by handle (gpu_ipc_export of its base) of size
 * bytes: *id names it until released. The request goes over the channel of
 * the GPU write stream when write is set (a write's own import), else over
 * that of the GPU read stream, so neither waits behind the other. Errors: ONI_ENOGPU (the daemon has no
 * CUDA), ONI_EINVALARG (the daemon cannot open the handle), ONI_EBUFFERSIZE
 * (size exceeds the allocation), ONI_EBADALLOC (too many imports), and the
 * transport's (ONI_ETIMEOUT, ONI_EDISCONNECTED). Release: ONI_ENOTPINNED for
 * an id the daemon does not hold. */
int emuc_gpu_import(struct emuc *c, int write, const uint8_t *handle, uint64_t size, uint32_t *id,
                    uint32_t timeout_ms);
int emuc_gpu_release(struct emuc *c, int write, uint32_t id, uint32_t timeout_ms);

/* Run or queue transfer d (gpustream.h) on the daemon's DMA engine. Synchronous: returns when the payload is complete, within
 * twice the timeout (queued jobs first, as in-process). Returns 0, the DMA
 * engine's errors (emu/dma.h), ONI_ENOTPINNED (unknown id), ONI_EBUFFERSIZE,
 * ONI_ETIMEOUT, ONI_EDISCONNECTED (the daemon died meanwhile). */
int emuc_gpu_dma(struct emuc *c, const struct gpustream_remote *d, uint32_t timeout_ms);

#endif
