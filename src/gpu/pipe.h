/* pipe.h - chunked, concurrent two-stage transfers (seed 001's "concurrent
 * indirect transfers"): a block of `total` bytes moves in chunks through a few
 * staging slots; stage A fills a slot, stage B empties it, and the two stages
 * of neighbouring chunks overlap. Reading card -> GPU: A = the card's DMA into
 * a pinned host slot (synchronous), B = host -> GPU copy (asynchronous), so the
 * copy of chunk k runs while the card moves chunk k+1. Writing GPU -> card:
 * A = GPU -> host copy (asynchronous), B = the card consumes the slot.
 *
 * The logic knows nothing about GPUs: tests drive it with plain memcpy. */
#ifndef ONIGPU_PIPE_H
#define ONIGPU_PIPE_H

#include <stddef.h>

struct gpu_pipe_ops {
    void *ctx;
    /* Start filling slot with the n bytes at offset off of the block. */
    int (*start_a)(void *ctx, int slot, size_t off, size_t n);
    /* Wait until the last start_a of slot is done; NULL = start_a is synchronous. */
    int (*wait_a)(void *ctx, int slot);
    /* Start emptying slot (n bytes that belong at offset off). */
    int (*start_b)(void *ctx, int slot, size_t off, size_t n);
    /* Wait until the last start_b of slot is done; NULL = start_b is synchronous. */
    int (*wait_b)(void *ctx, int slot);
};

/* Move total bytes in chunks of at most chunk bytes through nslots (1..16)
 * slots. A slot is refilled only after its previous stage B is done. Returns
 * 0, ONI_EINVALARG for bad sizes, or the first error of an op; on error every
 * stage already started is waited for before returning, so no slot is in use
 * afterwards, unless a wait itself failed (e.g. ONI_ETIMEOUT): the stages it
 * waited for may still run, and the caller must settle them before reusing
 * or freeing the slots. */
int gpu_pipe_run(size_t total, size_t chunk, int nslots, const struct gpu_pipe_ops *ops);

#endif
