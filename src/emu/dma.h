/* dma.h - the emulated card's DMA engine for its GPU data streams.
 *
 * It does what the card's scatter-gather DMA does on real hardware: move a
 * block of the GPU read stream's FIFO straight into a consumer's buffer (GPU
 * or host memory), or a block of write frames from a consumer's buffer into
 * the GPU write stream, then write a completion record after the payload.
 * GPU buffers are written by a GPU copy engine reading the FIFO's ring memory,
 * which the engine page-locks (and mlocks, so the card cannot give those pages
 * back under it) once per 64 MiB window; the CPU never touches such a payload
 * (unless mlock is refused: then that window goes through a bounce buffer,
 * counted). Optionally (emu_dma_set_agent) small GPU transfers are moved
 * instead by a GPU-resident agent kernel (dma_agent.h), with no CUDA call per
 * transfer. Each transfer then waits out the card's PCIe link model
 * (emu_card_link_delay).
 *
 * Used by the emu driver (src/drivers/emu/local.c, for src/gpustream). One engine per card
 * context, thread-safe. The two directions are independent (own lock, copy
 * stream, job queue and thread), so a read waiting for data never holds up a
 * write of results; within a direction, transfers run one at a time, jobs in
 * the order they were queued, and a synchronous call after all of them. */
#ifndef EMU_DMA_H
#define EMU_DMA_H

#include <stddef.h>
#include <stdint.h>
#include "emu.h"

struct emu_dma;

/* Create the engine for card (not owned; it must outlive the engine).
 * Returns 0 or ONI_EBADALLOC. Needs no GPU until a GPU buffer is used. */
int emu_dma_create(struct emu_card *card, struct emu_dma **out);

/* emu_dma_abort, then wait for the queued jobs (those whose data is in the
 * card still move it), stop the engine thread, release page-locked ring
 * memory and staging. NULL-safe. */
void emu_dma_destroy(struct emu_dma *dma);

/* From now on no transfer waits for the card's data: a read waiting for it
 * ends within about 20 ms, and later ones at once, with ONI_ETIMEOUT and
 * nothing consumed (a queued job then writes no record). Data already in the
 * card still moves. For a consumer that is gone or
 * going (destroy). Cannot be undone; NULL-safe, any thread. */
void emu_dma_abort(struct emu_dma *dma);

/* Card -> buffer: wait up to timeout_ms for n bytes of the GPU read stream and
 * move them to dst (dst_gpu: device memory, else host memory). Returns 0,
 * ONI_ETIMEOUT (nothing consumed), ONI_ENOGPU, or ONI_EREADFAILURE when the
 * copy failed (counted in stats; the bytes stay in the card for the next read). */
int emu_dma_read(struct emu_dma *dma, void *dst, size_t n, int dst_gpu, uint32_t timeout_ms);

/* Wait up to timeout_ms, after the queued read jobs, until the card's GPU
 * read stream holds n bytes; they stay in the card. For a transfer moved in
 * pieces (chunked staging): once they are all there, no piece waits for data,
 * so none can time out after earlier ones left the card. 0 (also at once
 * for n above emu_card_read_max, which the FIFO can never hold whole),
 * ONI_ETIMEOUT, ONI_EINVALARG (n = 0). */
int emu_dma_wait_data(struct emu_dma *dma, size_t n, uint32_t timeout_ms);

/* Buffer -> card: n bytes of write frames from src (src_gpu: device memory)
 * into the GPU write stream. Returns 0 or an error (ONI_EBADFRAME for
 * malformed frames, as emu_card_write). */
int emu_dma_write(struct emu_dma *dma, const void *src, size_t n, int src_gpu, uint32_t timeout_ms);

/* Queue the transfer x (buf, len, done, seq) in the given direction (write:
 * 1) and return at once. When the payload is complete the engine writes seq
 * to *done (done_gpu: device memory, written by the copy stream; else host
 * memory, written by the engine after the copy finished). Returns 0,
 * ONI_EBUSY when the queue is full, or an error of an earlier job that failed
 * (its record was not written; reported once). */
int emu_dma_submit(struct emu_dma *dma, int write, const onigpu_xfer_t *x, int buf_gpu, int done_gpu,
                   uint32_t timeout_ms);

/* Wait up to timeout_ms (per direction) until every queued job is done.
 * Returns 0, ONI_ETIMEOUT, or the first error of a job since it was last
 * reported. */
int emu_dma_flush(struct emu_dma *dma, uint32_t timeout_ms);

/* 1 when no job is queued or running in either direction and no copy whose
 * wait timed out is still running (a snapshot). */
int emu_dma_idle(struct emu_dma *dma);

/* Counters: transfers done, bytes moved, failed jobs, ring bytes page-locked,
 * ring bytes that had to go through the bounce buffer (mlock refused); of the
 * transfers, those the agent moved, its kernel launches, and 1 once it failed. */
struct emu_dma_stats {
    uint64_t reads, writes, bytes_read, bytes_written, failed, locked_bytes, bounced_bytes;
    uint64_t agent_reads, agent_writes, agent_launches, agent_failed;
};
void emu_dma_stats(struct emu_dma *dma, struct emu_dma_stats *st);

/* The agent mode (dma_agent.h): GPU transfers of at most max_bytes are moved
 * by a GPU-resident agent kernel instead of the copy engine (no CUDA call per
 * transfer); 0 turns it off. Starts or stops the kernel. Returns 0,
 * ONI_ENOGPU (no GPU: the copy engine stays), ONI_EINIT (the launch failed,
 * said on stderr: the copy engine stays), ONI_ETIMEOUT (the kernel did not
 * stop). If the agent fails later, the transfer returns the error and the
 * copy engine moves every block from then on (emu_dma_agent then says 0). */
int emu_dma_set_agent(struct emu_dma *dma, size_t max_bytes);

/* The agent's current limit in bytes: 0 when off or failed. */
size_t emu_dma_agent(struct emu_dma *dma);

#endif
