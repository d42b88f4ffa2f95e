/* onigpu.h - onigpu's extension to the ONI API: the GPU data stream and its
 * driver options (thesis seed 000, table 3.1), used through
 * oni_set_driver_opt / oni_get_driver_opt. Drivers that implement it: emu
 * (emulated ONIX host, in-process and daemon). Other drivers answer
 * ONI_EINVALOPT.
 *
 * Value/size conventions (the thesis' listings 4.2-4.4 work unchanged except
 * that C needs &size where a listing passes a size):
 *   ONI_DRV_RD_SZ, ONI_DRV_WR_SZ   set: value = const uint32_t *, size = 4
 *                                  get: value = uint32_t *, *size >= 4 (set to 4)
 *   ONI_DRV_PIN, ONI_DRV_UNPIN,    value = the buffer address itself, size = 4 or 8
 *   ONI_DRV_READ, ONI_DRV_WRITE    (an "address token", as in the listings); the
 *                                  buffer must hold at least RD_SZ / WR_SZ bytes.
 *                                  Or value = const onigpu_buf_t *, size =
 *                                  sizeof(onigpu_buf_t), giving the length explicitly.
 *   ONI_DRV_READ_ASYNC, ONI_DRV_WRITE_ASYNC  value = onigpu_xfer_t *, size = sizeof(onigpu_xfer_t)
 *   ONI_DRV_STREAM_STATS           get: value = onigpu_stream_stats_t *, *size >= sizeof
 * Buffers may be host memory or GPU memory (cudaMalloc); the driver tells which
 * from CUDA pointer attributes and picks the path. */
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
    ONI_DRV_UNPIN,              /* undo ONI_DRV_PIN */
    ONI_DRV_READ,               /* card -> buffer: one block of RD_SZ bytes, returns when complete */
    ONI_DRV_WRITE,              /* buffer -> card: one block of WR_SZ bytes of write frames */
    ONI_DRV_READ_ASYNC,         /* start card -> buffer; completion record written after the payload */
    ONI_DRV_WRITE_ASYNC,        /* start buffer -> card; completion record written when consumed */
    ONI_DRV_STREAM_STATS        /* FIFO fill and drop counters of both data streams */
};

/* An explicit buffer for PIN/UNPIN/READ/WRITE. */
typedef struct {
    void *addr;
    uint64_t len;
} onigpu_buf_t;

/* An asynchronous block transfer. After the last payload byte is visible at
 * buf, the card writes seq to *done (a 32-bit word in host-mapped or GPU
 * memory). Consumers wait for *done == seq, never for a guess. */
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
} onigpu_stream_stats_t;

#ifdef __cplusplus
}
#endif
#endif
