/* source.h - block sources and sinks for the closed-loop engine (loop.h).
 *
 * memsrc: an in-memory stand-in for the card with an unlimited link. Blocks
 * are made by a fill function; with a rate, block k is due at t0 + k / rate
 * and at most fifo_blocks wait (a bounded card FIFO): when the loop falls
 * further behind, the oldest blocks are dropped and counted, never silently
 * skipped. read_async (CUDA builds) copies the block into GPU memory with the
 * copy engine, then writes the completion word with a stream write, the way
 * the card's DMA engine does.
 *
 * cardsrc: blocks of a data stream of an ONI context, through the GPU stream
 * driver options of onigpu.h (ONI_DRV_READ into host memory,
 * ONI_DRV_READ_ASYNC into GPU memory, ONI_DRV_WRITE back).
 *
 * defsrc: blocks of some devices' frames from the default stream
 * (oni_read_frame), for a card without the GPU data stream; host memory
 * only, so only the cpu, gpu-staged and gpu-mapped backends can use it.
 *
 * zipsrc: blocks of several sources side by side, frame by frame (several
 * cards as one: frame i of the block is frame i of each part's block, in
 * part order); host memory only, like defsrc. */
#ifndef LOOP_SOURCE_H
#define LOOP_SOURCE_H

#include <stdatomic.h>
#include <stdint.h>
#include "oni.h"
#include "loop/loop.h"

#define LOOP_MEMSRC_STAGING 32 /* pinned staging buffers for read_async (> LOOP_MAXDEPTH) */

typedef void (*loop_fill_fn)(void *arg, uint64_t seq, void *buf, size_t len);

struct loop_memsrc {
    size_t len;
    double rate;              /* blocks per second; 0 = whenever read */
    uint32_t fifo_blocks;     /* blocks buffered before the oldest is dropped */
    loop_fill_fn fill;
    void *arg;
    uint64_t seq, t0;
    _Atomic uint64_t dropped;
    void *staging[LOOP_MEMSRC_STAGING];
    void *stream;             /* cudaStream_t of the copies */
    uint32_t next_staging;
};

#define LOOP_MEMSRC_MIN_RATE 1e-3
#define LOOP_MEMSRC_MAX_RATE 1e9

/* Set up m (rate 0 = unpaced, else LOOP_MEMSRC_MIN_RATE .. MAX_RATE; fifo_blocks
 * >= 1). ONI_EINVALARG for len 0, no fill, or another rate. */
int loop_memsrc_init(struct loop_memsrc *m, size_t len, double rate, uint32_t fifo_blocks, loop_fill_fn fill, void *arg);
/* The engine's view of m (read_async only in CUDA builds with a GPU). */
void loop_memsrc_source(struct loop_memsrc *m, struct loop_source *src);
/* Release m's GPU resources (NULL-safe). */
void loop_memsrc_free(struct loop_memsrc *m);
/* Fill: deterministic floats in [0, 0.5) from (seq, index), for the MAC. */
void loop_fill_floats(void *arg, uint64_t seq, void *buf, size_t len);

/* Pace to the rate, then fill buf with the next block (for the GPU path). */
int loop_memsrc_next(struct loop_memsrc *m, void *buf, uint32_t timeout_ms);
/* CUDA parts of memsrc (memsrc_cuda.c; memsrc_nocuda.c answers ONI_ENOGPU).
 * read_async: the source's read_async (loop.h): the next block into GPU
 * memory buf, then seq into *done; ONI_EBUFFERSIZE for another len, pacing's
 * ONI_ETIMEOUT, ONI_EBADALLOC, ONI_ENOGPU. gpu_ok: 1 when the GPU path can run.
 * gpu_init: the pinned staging and copy stream, once (ONI_EBADALLOC,
 * ONI_ENOGPU). pin: sets up the staging for a GPU buffer (ONI_EUNIMPL for host
 * memory, ONI_EBUFFERSIZE); unpin: nothing to undo (0). gpu_free: releases
 * the staging and the stream (NULL-safe parts). */
int loop_memsrc_read_async(void *ctx, void *buf, size_t len, volatile uint32_t *done, uint32_t seq,
                           uint32_t timeout_ms);
int loop_memsrc_gpu_ok(void);
int loop_memsrc_gpu_init(struct loop_memsrc *m);
int loop_memsrc_pin(void *ctx, void *buf, size_t len);
int loop_memsrc_unpin(void *ctx, void *buf, size_t len);
void loop_memsrc_gpu_free(struct loop_memsrc *m);

/* cardsrc: blocks of the GPU data stream of an initialized ONI context
 * (onigpu.h). The block size is set with ONI_DRV_RD_SZ by loop_cardsrc_init. */
struct loop_cardsrc {
    oni_ctx ctx;
    uint32_t block;
    uint32_t seq;             /* of the last host read through READ_ASYNC */
    int sync_only;            /* blocking reads only (ONI_DRV_READ): set by the caller, or on
                                 finding that the driver has no READ_ASYNC into host memory */
    uint32_t ctx_timeout_ms;  /* ONI_OPT_TIMEOUTMS at init: each READ_ASYNC job's own deadline */
    volatile uint32_t done;   /* its completion word */
    uint64_t spin_ns;         /* waiting for it: spin (yielding) this long, then 20 us sleeps (0: 50 us) */
};

/* ONI_DRV_RD_SZ = block; errors of oni_set_driver_opt (ONI_EINVALOPT: the
 * driver has no GPU stream). */
int loop_cardsrc_init(struct loop_cardsrc *c, oni_ctx ctx, uint32_t block);
/* The engine's view: read = ONI_DRV_READ, read_async = ONI_DRV_READ_ASYNC,
 * pin/unpin = ONI_DRV_PIN/UNPIN. */
void loop_cardsrc_source(struct loop_cardsrc *c, struct loop_source *src);

/* defsrc: frames of the devices dev[0 .. ndev) (each data_sz bytes), in the
 * order they come, from the default stream, laid out in the block as the GPU
 * stream lays them out: [u64 time]
 * [u32 dev_idx][u32 data_sz][payload, padded to 4 bytes]. Every other frame
 * goes to other(arg, frame) on the reading thread (the frame is the
 * callee's: it destroys it), so one reader serves the whole stream. */
typedef void (*loop_frame_fn)(void *arg, oni_frame_t *f);
#define LOOP_DEFSRC_MAXDEV 4
#define LOOP_DEFSRC_MAXLANES 4

/* A lane: one device's frames whose payload holds key at the lanes' key_off
 * (an NP2.0e probe: its raw device and its probe index). */
struct loop_defsrc_lane {
    oni_dev_idx_t dev;
    uint16_t key;
};

struct loop_defsrc {
    oni_ctx ctx;
    oni_dev_idx_t dev[LOOP_DEFSRC_MAXDEV];
    uint32_t ndev;
    uint32_t data_sz, stride;
    size_t have;              /* bytes of the next block read so far */
    uint8_t *part;            /* they wait here between reads */
    size_t part_cap;
    /* lanes (loop_defsrc_lanes): the block being filled, each lane's frames
     * in it, and the frames of a lane already past it (at most a block) */
    struct loop_defsrc_lane lane[LOOP_DEFSRC_MAXLANES];
    uint32_t nlanes, key_off;
    size_t block;             /* bytes of a block (0: none read yet) */
    uint8_t *blk, *ahead[LOOP_DEFSRC_MAXLANES];
    uint32_t fill[LOOP_DEFSRC_MAXLANES], nahead[LOOP_DEFSRC_MAXLANES];
    loop_frame_fn other;
    void *arg;
    uint64_t frames, others;
};

/* ONI_EINVALARG for no ctx, ndev 0 or over LOOP_DEFSRC_MAXDEV, a data_sz of
 * 0 or over 64 KiB. */
int loop_defsrc_init(struct loop_defsrc *d, oni_ctx ctx, const oni_dev_idx_t *dev, uint32_t ndev, uint32_t data_sz,
                     loop_frame_fn other, void *arg);
/* Sort the frames into lanes: frame k of every lane side by side makes
 * pipeline frame k of a block (lane 0's first; lanes[i].dev among d's
 * devices), whatever order the devices' frames come in; a frame of those
 * devices whose u16 at payload byte key_off names no lane goes to other().
 * A lane that runs a whole block ahead of another makes a read fail with
 * ONI_EBADFRAME (a lane that stopped, or a frame mislabelled). Call before
 * the first read. ONI_EINVALARG for n 0 or over LOOP_DEFSRC_MAXLANES, a lane
 * on none of d's devices, or key_off + 2 past data_sz. */
int loop_defsrc_lanes(struct loop_defsrc *d, const struct loop_defsrc_lane *lanes, uint32_t n, uint32_t key_off);
/* The engine's view: read only (no pin, no read_async). A read takes
 * frames until the block is full (0), or returns ONI_ETIMEOUT when no frame
 * of its devices came for timeout_ms (what it took waits for the next read;
 * a block that fills slowly is no timeout), a frame of
 * those devices of another size (ONI_EBUFFERSIZE), or oni_read_frame's error. */
void loop_defsrc_source(struct loop_defsrc *d, struct loop_source *src);
/* Free what loop_defsrc_init allocated (NULL-safe). */
void loop_defsrc_free(struct loop_defsrc *d);

/* zipsrc: a block of n frames from parts[0 .. nparts), part k giving
 * width[k] bytes a frame: each part's block of n frames is read (in part
 * order, each with the read's timeout) into its own buffer, then frame i of
 * the block is frame i of part 0, then of part 1, and so on. */
#define LOOP_ZIPSRC_MAXPARTS 4
struct loop_zipsrc {
    struct loop_source part[LOOP_ZIPSRC_MAXPARTS];
    uint32_t width[LOOP_ZIPSRC_MAXPARTS], nparts, frame; /* frame: the widths' sum */
    uint8_t *buf[LOOP_ZIPSRC_MAXPARTS];
    size_t block;             /* bytes of a block (0: none read yet): one size for the run */
};

/* ONI_EINVALARG for no parts or more than LOOP_ZIPSRC_MAXPARTS, a part
 * without read, or a width of 0 or not a multiple of 4. */
int loop_zipsrc_init(struct loop_zipsrc *z, const struct loop_source *parts, const uint32_t *width, uint32_t nparts);
/* The engine's view: read only. A read of len bytes (a multiple of the
 * frame's width, the same every read: else ONI_EBUFFERSIZE) fails with the
 * first part's error that fails it (ONI_EBADALLOC for no buffers); the parts
 * read before it have then given their frames, so the zip is out of step
 * and only good for loop_zipsrc_free (the loop ends on a read error). The
 * parts' dropped counts are summed. */
void loop_zipsrc_source(struct loop_zipsrc *z, struct loop_source *src);
/* Free the block buffers (NULL-safe); the parts are the caller's. */
void loop_zipsrc_free(struct loop_zipsrc *z);

/* cardsink: results back to the card as one write frame per block to device
 * dev (ONI_DRV_WRITE, WR_SZ = the block size): a frame header [dev][payload
 * words] and the first block - 8 bytes of the result, through a staging
 * buffer pinned once. */
struct loop_cardsink {
    oni_ctx ctx;
    uint32_t dev, block;
    uint8_t *stage;
    int pinned;
};

/* ONI_DRV_WR_SZ = block (a multiple of 4, > 8); allocates the staging buffer.
 * Errors of oni_set_driver_opt, ONI_EBADALLOC. Release with loop_cardsink_free. */
int loop_cardsink_init(struct loop_cardsink *c, oni_ctx ctx, uint32_t dev, uint32_t block);
/* The engine's view: write = one ONI_DRV_WRITE of the staged frame. */
void loop_cardsink_sink(struct loop_cardsink *c, struct loop_sink *sink);
/* Unpin and free the staging buffer (kept, leaked, if the driver refuses the unpin). */
void loop_cardsink_free(struct loop_cardsink *c);

#endif
