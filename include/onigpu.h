/* onigpu.h - onigpu's extension to the ONI API: the GPU data stream and its
 * driver options (thesis seed 000, table 3.1), used through
 * oni_set_driver_opt / oni_get_driver_opt. Drivers that implement it: emu
 * (emulated ONIX host); net (oninet.h:
 * the served driver's, READ and WRITE through the network and, for GPU
 * memory, a host buffer; PIN, UNPIN and the asynchronous jobs ONI_EUNIMPL).
 * Other drivers answer ONI_EINVALOPT. The options are thread-safe on one context (docs/transfers.md).
 *
 * Value/size conventions (the thesis' listings 4.2-4.4 work unchanged except
 * that C needs &size where a listing passes a size):
 *   ONI_DRV_RD_SZ, ONI_DRV_WR_SZ,  set: value = const uint32_t *, size = 4; a multiple of 4,
 *   ONI_DRV_CHUNK_SZ               1 .. ONIGPU_MAX_BLOCK (CHUNK_SZ: 0 turns chunking off)
 *                                  get: value = uint32_t *, *size >= 4 (set to 4)
 *   ONI_DRV_PIN, ONI_DRV_UNPIN,    value = the buffer address itself, size = 4 or 8
 *   ONI_DRV_READ, ONI_DRV_WRITE    (an "address token", as in the listings); the
 *                                  buffer must hold at least RD_SZ / WR_SZ bytes.
 *                                  Or value = const onigpu_buf_t *, size =
 *                                  sizeof(onigpu_buf_t), giving the length explicitly.
 *   ONI_DRV_READ_ASYNC, ONI_DRV_WRITE_ASYNC  value = onigpu_xfer_t *, size = sizeof(onigpu_xfer_t)
 *   ONI_DRV_STREAM_STATS           get: value = onigpu_stream_stats_t *, *size >= sizeof
 *   ONI_DRV_DMA_AGENT              set/get as RD_SZ, 0 .. ONIGPU_MAX_BLOCK: direct GPU transfers
 *                                  of at most this many bytes are moved by a GPU-resident agent
 *                                  kernel polling a descriptor ring (no CUDA call per transfer;
 *                                  it occupies one SM while on); 0 = off. Set: ONI_ENOGPU without a
 *                                  GPU, ONI_EINIT if the kernel cannot start (the copy engine stays).
 *                                  Get: 0 when off or after the
 *                                  agent failed (the copy engine then moves every block).
 * Defaults: RD_SZ = WR_SZ = 4096 (ONIGPU_DEFAULT_BLOCK), CHUNK_SZ = 0, DMA_AGENT = 0
 * (ONIGPU_DMA_AGENT_DEFAULT is the limit to use when turning the agent on).
 *
 * Buffers may be host memory or GPU memory (cudaMalloc); the driver tells which
 * from CUDA pointer attributes and picks the path:
 *   GPU buffer, pinned (ONI_DRV_PIN once): the card's DMA engine writes it
 *     directly (a GPU copy engine reading the card's memory); nothing is looked
 *     up per transfer beyond a check that the allocation is still the same.
 *   GPU buffer, not pinned: the same, but the buffer is looked up and made
 *     reachable ("pinned") for every transfer, and that cost is paid each time.
 *   GPU buffer with CHUNK_SZ > 0: staged through page-locked host memory in
 *     chunks; the host->GPU copy of chunk k overlaps the card's DMA of chunk
 *     k+1 (WRITE: the reverse). For comparison with the direct paths.
 *   host buffer: the card's DMA writes (reads) host memory.
 * In the GPU write stream a block is whole write frames; with CHUNK_SZ a frame
 * must not straddle a chunk boundary.
 *
 * Errors: ONI_EINVALARG (NULL value, wrong size, bad block size, host memory
 * the card may not write for a read or read for a write), ONI_EBUFFERSIZE
 * (buffer shorter than the block: from the explicit length or, for CUDA memory,
 * the allocation's range), ONI_EPINNED (pinned twice or overlapping a pinned
 * buffer, or a pinned GPU buffer
 * was freed: its allocation is gone or changed), ONI_ENOTPINNED (unpin of a
 * buffer never pinned), ONI_ENOGPU (GPU memory, but no CUDA build or device),
 * ONI_ETIMEOUT (no block within ONI_OPT_TIMEOUTMS; for UNPIN: the card's DMA
 * engine still had asynchronous jobs queued or running after it, and the buffer
 * stays pinned, since one of them may still write it), ONI_EBUSY (async queue full,
 * or ONIGPU_MAX_PINS buffers pinned already).
 * A READ that times out waiting for data takes nothing; with CHUNK_SZ, a chunk's
 * host -> GPU copy that times out has taken the chunks before it from the card
 * (docs/transfers.md).
 * Freeing host memory while it is pinned cannot be detected: unpin first. */
#ifndef ONIGPU_H
#define ONIGPU_H

#include <stdint.h>
#include "oni.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    ONI_DRV_RD_SZ = 0x4F470200, /* GPU read stream block size, bytes (multiple of 4) */
    ONI_DRV_WR_SZ,              /* GPU write stream block size, bytes (multiple of 4) */
    ONI_DRV_PIN,                /* make a buffer reachable by the card's DMA, once */
    ONI_DRV_UNPIN,              /* undo ONI_DRV_PIN, once no queued transfer may still use it */
    ONI_DRV_READ,               /* card -> buffer: one block of RD_SZ bytes, returns when complete */
    ONI_DRV_WRITE,              /* buffer -> card: one block of WR_SZ bytes of write frames */
    ONI_DRV_READ_ASYNC,         /* start card -> buffer; completion record written after the payload */
    ONI_DRV_WRITE_ASYNC,        /* start buffer -> card; completion record written when consumed */
    ONI_DRV_STREAM_STATS,       /* FIFO fill and drop counters of both data streams */
    ONI_DRV_CHUNK_SZ,           /* chunk size of staged GPU transfers, bytes; 0 = direct (default) */
    ONI_DRV_DMA_AGENT,          /* GPU transfers up to this many bytes by the GPU-resident DMA agent; 0 = off */
    ONI_DRV_GPU_STREAM          /* get only: uint32_t, 1 if the card's firmware has the GPU data stream
                                   (the thesis' extension; emu: spec gpustream=, default 1), 0 if it has
                                   the default stream only (as today's ONIX firmware): then no device
                                   can be routed to the GPU stream */
};

/* The ONI_DRV_DMA_AGENT limit to use when turning the agent on: up to 16 KiB its
 * time stayed flat on the H100; above, its one thread block's pull over PCIe
 * (about 11 GB/s) makes it fall behind the copy engine (docs/transfers.md, DMA agent). */
#define ONIGPU_DMA_AGENT_DEFAULT (16u << 10)

/* RD_SZ and WR_SZ of a new context, bytes. */
#define ONIGPU_DEFAULT_BLOCK 4096u

/* Most buffers pinned at once on one context. */
#define ONIGPU_MAX_PINS 64

/* Largest RD_SZ / WR_SZ / CHUNK_SZ, bytes. */
#define ONIGPU_MAX_BLOCK (1u << 30)

/* An explicit buffer for PIN/UNPIN/READ/WRITE. */
typedef struct {
    void *addr;
    uint64_t len;
} onigpu_buf_t;

/* An asynchronous block transfer of RD_SZ (READ_ASYNC) or WR_SZ (WRITE_ASYNC)
 * bytes; len is the buffer's capacity (0: taken from its CUDA allocation).
 * After the last payload byte is visible at buf (READ) or has been taken by
 * the card (WRITE), the card writes seq to *done, a 4-byte aligned word
 * (else ONI_EINVALARG). done may be GPU memory
 * (written by the card's copy stream, cuStreamWriteValue32: a kernel or
 * cuStreamWaitValue32 can wait on it) or host memory (written by the card
 * after the payload is complete; for a GPU-side waiter use page-locked,
 * mapped memory). Jobs complete in the order they were started; a job that
 * fails writes no record and its error is returned by the next call.
 * Consumers wait for *done == seq with a deadline, never for a guess. */
typedef struct {
    void *buf;
    uint64_t len;
    volatile uint32_t *done;
    uint32_t seq;
    uint32_t reserved;
} onigpu_xfer_t;

typedef struct {
    uint64_t fifo_bytes[2];    /* bytes waiting in the card FIFO: [0] default stream, [1] GPU stream */
    uint64_t fifo_capacity[2]; /* bytes */
    uint64_t dropped_frames[2];
    uint64_t dropped_bytes[2];
    uint64_t bad_wframes;      /* writes rejected as malformed write frames (ONI_EBADFRAME), both write streams */
} onigpu_stream_stats_t;

#ifdef __cplusplus
}
#endif
#endif
