/* gpustream.h - the GPU data stream layer: the driver options of
 * include/onigpu.h (block sizes, the pin table, READ/WRITE, the chunked
 * staging path, async jobs and their completion records, the DMA agent),
 * for any driver whose card moves blocks by DMA.
 *
 * A driver provides its card's DMA operations (struct gpustream_dma) and
 * routes the options gpustream_opt names to gpustream_set_opt/_get_opt. The
 * layer decides, per transfer, how a buffer is reached: host memory by the
 * card's host DMA, GPU memory by the card's own DMA into it or in chunks
 * through page-locked host slots (ONI_DRV_CHUNK_SZ).
 *
 * How a driver plugs in: fill a const struct gpustream_dma with its card's
 * operations (the required ones at least), gpustream_create(&ops, card, &g)
 * on first use of a GPU option, gpustream_set_opt/_get_opt for every option
 * for which gpustream_opt is 1, gpustream_destroy before the card goes.
 * The emu driver's table is the card's DMA engine (src/drivers/emu/emudrv.c).
 * A driver for a real card maps them onto its scatter-gather engine. (A card
 * in another process is the net driver's: its server hands the served
 * driver the program's GPU memory mapped by CUDA IPC, docs/net.md.)
 *
 * Thread-safe: the options may be set and got concurrently with each other
 * and with the driver's other calls (the DMA operations must be too). */
#ifndef GPUSTREAM_H
#define GPUSTREAM_H

#include <stddef.h>
#include <stdint.h>
#include "onigpu.h"

/* A card's DMA operations; card is the driver's pointer given to
 * gpustream_create. Every function returns 0 or an ONI error and waits at
 * most timeout_ms. Required: read, write. The others may be NULL: the layer
 * then does without (says ONI_EUNIMPL where an option needs one). */
struct gpustream_dma {
    /* Card -> buffer: n bytes of the GPU read stream into dst (dst_gpu: GPU
     * memory). ONI_ETIMEOUT: nothing consumed. */
    int (*read)(void *card, void *dst, size_t n, int dst_gpu, uint32_t timeout_ms);
    /* Buffer -> card: n bytes of write frames from src into the GPU write stream. */
    int (*write)(void *card, const void *src, size_t n, int src_gpu, uint32_t timeout_ms);
    /* Wait until the GPU read stream holds n bytes (they stay in the card),
     * so that a chunked read cannot time out after earlier chunks left it. */
    int (*wait_data)(void *card, size_t n, uint32_t timeout_ms);
    /* Queue transfer x (write: 1) and return; seq goes to *x->done after the
     * payload (done_gpu: the word is GPU memory). ONI_EBUSY: queue full. */
    int (*submit)(void *card, int write, const onigpu_xfer_t *x, int buf_gpu, int done_gpu, uint32_t timeout_ms);
    /* 1 when no job is queued or running (before an UNPIN: quiesce). */
    int (*idle)(void *card);
    /* The DMA agent (ONI_DRV_DMA_AGENT): set its limit in bytes, get it. */
    int (*set_agent)(void *card, size_t max_bytes);
    size_t (*agent)(void *card);
};

struct gpustream;

/* 1 when driver option opt is one of this layer's (ONI_DRV_RD_SZ ..
 * ONI_DRV_DMA_AGENT but ONI_DRV_STREAM_STATS, which the driver answers), else 0. */
int gpustream_opt(int opt);

/* Create the layer's state over ops (not copied: it must outlive the state)
 * and card (not owned). 0, ONI_EBADALLOC or ONI_EINVALARG (read or write
 * missing). */
int gpustream_create(const struct gpustream_dma *ops, void *card, struct gpustream **out);

/* Release the state: unregisters host memory it page-locked, frees its
 * staging. The driver stops its DMA engine's jobs first. NULL-safe. */
void gpustream_destroy(struct gpustream *g);

/* Set option opt (onigpu.h conventions), waiting at most timeout_ms.
 * 0 or an ONI error; ONI_EINVALOPT for an option not of this layer. */
int gpustream_set_opt(struct gpustream *g, int opt, const void *value, size_t len, uint32_t timeout_ms);

/* Get option opt into value (*len: capacity in, bytes out). 0 or an ONI
 * error; ONI_EINVALOPT for an option not of this layer. */
int gpustream_get_opt(struct gpustream *g, int opt, void *value, size_t *len);

#endif
