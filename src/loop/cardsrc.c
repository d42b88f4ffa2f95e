/* cardsrc.c - blocks of the card's GPU data stream, and results back to
 * the card, through the driver options of onigpu.h; blocks of the default
 * stream (source.h). */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "onigpu.h"
#include "loop/source.h"
#include "loop/engine.h"

int loop_cardsrc_init(struct loop_cardsrc *c, oni_ctx ctx, uint32_t block)
{
    if (!c || !ctx || !block || block % 4)
        return ONI_EINVALARG;
    memset(c, 0, sizeof *c);
    c->ctx = ctx;
    c->block = block;
    size_t sz = sizeof c->ctx_timeout_ms;
    int rc = oni_get_opt(ctx, ONI_OPT_TIMEOUTMS, &c->ctx_timeout_ms, &sz);
    return rc ? rc : oni_set_driver_opt(ctx, ONI_DRV_RD_SZ, &block, sizeof block);
}

static int read_sync(struct loop_cardsrc *c, void *buf, size_t len)
{
    onigpu_buf_t b = {buf, len};
    int rc = oni_set_driver_opt(c->ctx, ONI_DRV_READ, &b, sizeof b);
    sched_yield(); /* a caller waiting for the context's lock gets in (see card_read) */
    return rc;
}

/* Wait for the completion word, lock free: spin (yielding) for spin_ns,
 * then poll every 20 us, up to timeout_ms. */
static int wait_done(struct loop_cardsrc *c, uint32_t seq, uint32_t timeout_ms)
{
    uint64_t t0 = oni_now_ns(), limit = t0 + (uint64_t)timeout_ms * 1000000ull;
    uint64_t spin = c->spin_ns ? c->spin_ns : 50000;
    for (;;) {
        if (__atomic_load_n((const uint32_t *)&c->done, __ATOMIC_ACQUIRE) == seq)
            return 0;
        uint64_t t = oni_now_ns();
        if (t > limit)
            return ONI_ETIMEOUT;
        if (t - t0 < spin) {
            sched_yield();
        } else {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
}

/* ONI_DRV_READ waits for data inside oni_set_driver_opt. With a driver that
 * does not declare it concurrent (onidriver.h), that wait holds the context's
 * lock, and back-to-back reads can starve everyone else who needs it (the
 * stimulator's writes, the statistics, and with them the stop; docs/
 * closed-loop.md, "The cpu overrun"). The emu driver declares its GPU options
 * concurrent (since c2e4e75), so there the reads block no one; other drivers
 * may not. So a block is read synchronously only when the card's FIFO
 * already holds it; otherwise the card's DMA engine is given the read
 * (READ_ASYNC into this host buffer) and its completion word is waited for
 * here, holding no lock. A driver without READ_ASYNC gets synchronous reads,
 * each followed by a yield. */
static int card_read(void *ctx, void *buf, size_t len, uint32_t timeout_ms)
{
    struct loop_cardsrc *c = ctx;
    if (len != c->block)
        return ONI_EBUFFERSIZE;
    onigpu_stream_stats_t st;
    size_t sz = sizeof st;
    if (c->sync_only || (oni_get_driver_opt(c->ctx, ONI_DRV_STREAM_STATS, &st, &sz) == 0 && st.fifo_bytes[1] >= len))
        return read_sync(c, buf, len);
    onigpu_xfer_t x;
    memset(&x, 0, sizeof x);
    x.buf = buf;
    x.len = len;
    x.done = &c->done;
    x.seq = ++c->seq;
    int rc = oni_set_driver_opt(c->ctx, ONI_DRV_READ_ASYNC, &x, sizeof x);
    if (rc == ONI_EUNIMPL || rc == ONI_ENOGPU) {
        c->sync_only = 1; /* e.g. a net context: no DMA engine in this process */
        return read_sync(c, buf, len);
    }
    /* The job has its own deadline, the context's timeout from when the
     * engine takes it; waiting twice the longer of the two means that a job
     * given up on no longer writes buf (the caller may free it then). */
    uint32_t wait = timeout_ms > c->ctx_timeout_ms ? timeout_ms : c->ctx_timeout_ms;
    return rc ? rc : wait_done(c, x.seq, wait > UINT32_MAX / 2 ? UINT32_MAX : 2 * wait);
}

/* The DMA job starts at once; its deadline is the context's timeout (onigpu.h), not timeout_ms. */
static int card_read_async(void *ctx, void *buf, size_t len, volatile uint32_t *done, uint32_t seq,
                           uint32_t timeout_ms)
{
    struct loop_cardsrc *c = ctx;
    onigpu_xfer_t x;
    memset(&x, 0, sizeof x);
    x.buf = buf;
    x.len = len;
    x.done = done;
    x.seq = seq;
    return oni_set_driver_opt(c->ctx, ONI_DRV_READ_ASYNC, &x, sizeof x);
}

static int card_pin(void *ctx, void *buf, size_t len)
{
    struct loop_cardsrc *c = ctx;
    onigpu_buf_t b = {buf, len};
    return oni_set_driver_opt(c->ctx, ONI_DRV_PIN, &b, sizeof b);
}

static int card_unpin(void *ctx, void *buf, size_t len)
{
    struct loop_cardsrc *c = ctx;
    onigpu_buf_t b = {buf, len};
    return oni_set_driver_opt(c->ctx, ONI_DRV_UNPIN, &b, sizeof b);
}

void loop_cardsrc_source(struct loop_cardsrc *c, struct loop_source *src)
{
    memset(src, 0, sizeof *src);
    src->ctx = c;
    src->read = card_read;
    src->read_async = card_read_async;
    src->pin = card_pin;
    src->unpin = card_unpin;
}

int loop_defsrc_init(struct loop_defsrc *d, oni_ctx ctx, const oni_dev_idx_t *dev, uint32_t ndev, uint32_t data_sz,
                     loop_frame_fn other, void *arg)
{
    if (!d || !ctx || !dev || !ndev || ndev > LOOP_DEFSRC_MAXDEV || !data_sz || data_sz > 65536)
        return ONI_EINVALARG;
    memset(d, 0, sizeof *d);
    d->ctx = ctx;
    memcpy(d->dev, dev, ndev * sizeof *dev);
    d->ndev = ndev;
    d->data_sz = data_sz;
    d->stride = 16 + ((data_sz + 3u) & ~3u);
    d->other = other;
    d->arg = arg;
    return 0;
}

/* Keep the partial block of buf for the next read. */
static int def_keep(struct loop_defsrc *d, const uint8_t *buf)
{
    if (d->part_cap < d->have) {
        uint8_t *p = realloc(d->part, d->have);
        if (!p)
            return ONI_EBADALLOC;
        d->part = p;
        d->part_cap = d->have;
    }
    memcpy(d->part, buf, d->have);
    return 0;
}

static int def_wants(const struct loop_defsrc *d, oni_dev_idx_t dev)
{
    for (uint32_t i = 0; i < d->ndev; i++)
        if (d->dev[i] == dev)
            return 1;
    return 0;
}

/* Frame f in read-frame form at p (d->stride bytes). */
static void put_frame(const struct loop_defsrc *d, uint8_t *p, const oni_frame_t *f)
{
    uint64_t t = f->time;
    uint32_t idx = f->dev_idx, sz = f->data_sz;
    memcpy(p, &t, 8);
    memcpy(p + 8, &idx, 4);
    memcpy(p + 12, &sz, 4);
    memcpy(p + 16, f->data, sz);
    memset(p + 16 + sz, 0, d->stride - 16 - sz);
}

int loop_defsrc_lanes(struct loop_defsrc *d, const struct loop_defsrc_lane *lanes, uint32_t n, uint32_t key_off)
{
    if (!d || !lanes || !n || n > LOOP_DEFSRC_MAXLANES || (uint64_t)key_off + 2 > d->data_sz)
        return ONI_EINVALARG;
    for (uint32_t i = 0; i < n; i++)
        if (!def_wants(d, lanes[i].dev))
            return ONI_EINVALARG;
    memcpy(d->lane, lanes, n * sizeof *lanes);
    d->nlanes = n;
    d->key_off = key_off;
    return 0;
}

/* The lane of frame f, or -1. */
static int lane_of(const struct loop_defsrc *d, const oni_frame_t *f)
{
    uint16_t key;
    memcpy(&key, f->data + d->key_off, 2);
    for (uint32_t i = 0; i < d->nlanes; i++)
        if (d->lane[i].dev == f->dev_idx && d->lane[i].key == key)
            return (int)i;
    return -1;
}

/* The lanes' first block of len bytes: the buffers it needs. */
static int lanes_start(struct loop_defsrc *d, size_t len)
{
    if (d->block)
        return d->block == len ? 0 : ONI_EBUFFERSIZE; /* one block size for the run */
    if (len % ((size_t)d->nlanes * d->stride))
        return ONI_EBUFFERSIZE;
    size_t per = len / d->nlanes; /* one lane's frames of a block */
    int ok = (d->blk = malloc(len)) != NULL;
    for (uint32_t i = 0; ok && i < d->nlanes; i++)
        ok = (d->ahead[i] = malloc(per)) != NULL;
    if (!ok) {
        loop_defsrc_free(d); /* the next read tries again */
        return ONI_EBADALLOC;
    }
    d->block = len;
    return 0;
}

/* Frame f of lane i into the block, or past it. 0 or ONI_EBADFRAME. */
static int lanes_put(struct loop_defsrc *d, uint32_t i, const oni_frame_t *f)
{
    uint32_t nframes = (uint32_t)(d->block / ((size_t)d->nlanes * d->stride));
    if (d->fill[i] < nframes)
        put_frame(d, d->blk + ((size_t)d->fill[i]++ * d->nlanes + i) * d->stride, f);
    else if (d->nahead[i] < nframes)
        put_frame(d, d->ahead[i] + (size_t)d->nahead[i]++ * d->stride, f);
    else
        return ONI_EBADFRAME; /* a block ahead of another lane */
    return 0;
}

/* The block is whole: to buf, and the frames past it start the next one. */
static int lanes_done(struct loop_defsrc *d, uint8_t *buf)
{
    for (uint32_t i = 0; i < d->nlanes; i++)
        if (d->fill[i] * (size_t)d->nlanes * d->stride < d->block)
            return 0;
    memcpy(buf, d->blk, d->block);
    for (uint32_t i = 0; i < d->nlanes; i++) {
        d->fill[i] = 0;
        for (uint32_t k = 0; k < d->nahead[i]; k++)
            memcpy(d->blk + ((size_t)d->fill[i]++ * d->nlanes + i) * d->stride, d->ahead[i] + (size_t)k * d->stride,
                   d->stride);
        d->nahead[i] = 0;
    }
    return 1;
}

/* The next frame into *f, for a read whose deadline is limit. The deadline
 * counts from the last frame the read wanted (the caller moves it on) and is
 * looked at only when the context's wait came back empty or with a frame of
 * another device: a reader that is slow, or was descheduled with frames
 * waiting in the card, is no device that stopped answering (the core's
 * rule for ONI_OPT_TIMEOUTMS). 0, ONI_ETIMEOUT, or oni_read_frame's error. */
static int def_next(struct loop_defsrc *d, oni_frame_t **f, uint64_t limit)
{
    for (;;) {
        int rc = oni_read_frame(d->ctx, f);
        if (rc >= 0)
            return 0;
        if (rc != ONI_ETIMEOUT || oni_now_ns() > limit)
            return rc;
    }
}

/* A frame of no lane or device the read wants: to the callback, or freed.
 * ONI_ETIMEOUT once the read is past its deadline. */
static int def_other(struct loop_defsrc *d, oni_frame_t *f, uint64_t limit)
{
    d->others++;
    if (d->other)
        d->other(d->arg, f);
    else
        oni_destroy_frame(f);
    return oni_now_ns() > limit ? ONI_ETIMEOUT : 0;
}

/* A read with lanes: frames into their lanes until a block is whole. */
static int lanes_read(struct loop_defsrc *d, uint8_t *buf, size_t len, uint32_t timeout_ms)
{
    int rc = lanes_start(d, len);
    if (rc)
        return rc;
    uint64_t limit = oni_ms_from_now(timeout_ms);
    while (!lanes_done(d, buf)) {
        oni_frame_t *f = NULL;
        if ((rc = def_next(d, &f, limit)))
            return rc;
        int i = def_wants(d, f->dev_idx) && f->data_sz == d->data_sz ? lane_of(d, f) : -1;
        if (i < 0 && def_wants(d, f->dev_idx) && f->data_sz != d->data_sz) {
            oni_destroy_frame(f);
            return ONI_EBUFFERSIZE;
        }
        if (i < 0) {
            if ((rc = def_other(d, f, limit)))
                return rc;
            continue;
        }
        rc = lanes_put(d, (uint32_t)i, f);
        oni_destroy_frame(f);
        if (rc)
            return rc;
        d->frames++;
        limit = oni_ms_from_now(timeout_ms);
    }
    return 0;
}

static int def_read(void *ctx, void *buf, size_t len, uint32_t timeout_ms)
{
    struct loop_defsrc *d = ctx;
    uint8_t *b = buf;
    if (d->nlanes)
        return lanes_read(d, b, len, timeout_ms);
    if (len % d->stride)
        return ONI_EBUFFERSIZE;
    if (d->have)
        memcpy(b, d->part, d->have);
    uint64_t limit = oni_ms_from_now(timeout_ms);
    while (d->have < len) {
        oni_frame_t *f = NULL;
        int rc = def_next(d, &f, limit);
        if (!rc && !def_wants(d, f->dev_idx) && !(rc = def_other(d, f, limit)))
            continue;
        if (rc) {
            int krc = def_keep(d, b);
            return krc ? krc : rc;
        }
        if (f->data_sz != d->data_sz) {
            oni_destroy_frame(f);
            int krc = def_keep(d, b);
            return krc ? krc : ONI_EBUFFERSIZE;
        }
        put_frame(d, b + d->have, f);
        oni_destroy_frame(f);
        d->have += d->stride;
        d->frames++;
        limit = oni_ms_from_now(timeout_ms);
    }
    d->have = 0;
    return 0;
}

void loop_defsrc_source(struct loop_defsrc *d, struct loop_source *src)
{
    memset(src, 0, sizeof *src);
    src->ctx = d;
    src->read = def_read;
}

void loop_defsrc_free(struct loop_defsrc *d)
{
    if (!d)
        return;
    free(d->part);
    d->part = NULL;
    d->part_cap = 0;
    free(d->blk);
    d->blk = NULL;
    for (uint32_t i = 0; i < LOOP_DEFSRC_MAXLANES; i++) {
        free(d->ahead[i]);
        d->ahead[i] = NULL;
    }
    d->block = 0;
}

int loop_cardsink_init(struct loop_cardsink *c, oni_ctx ctx, uint32_t dev, uint32_t block)
{
    if (!c || !ctx || block <= 8 || block % 4)
        return ONI_EINVALARG;
    memset(c, 0, sizeof *c);
    c->ctx = ctx;
    c->dev = dev;
    c->block = block;
    int rc = oni_set_driver_opt(ctx, ONI_DRV_WR_SZ, &block, sizeof block);
    if (rc)
        return rc;
    c->stage = malloc(block);
    if (!c->stage)
        return ONI_EBADALLOC;
    onigpu_buf_t b = {c->stage, block};
    c->pinned = oni_set_driver_opt(ctx, ONI_DRV_PIN, &b, sizeof b) == 0;
    return 0;
}

static int card_write(void *ctx, uint64_t seq, const void *out, size_t len, uint32_t timeout_ms)
{
    struct loop_cardsink *c = ctx;
    uint32_t hdr[2] = {c->dev, (c->block - 8) / 4};
    memcpy(c->stage, hdr, sizeof hdr);
    size_t n = len < c->block - 8 ? len : c->block - 8;
    memcpy(c->stage + 8, out, n);
    memset(c->stage + 8 + n, 0, c->block - 8 - n); /* not the last result's tail */
    onigpu_buf_t b = {c->stage, c->block};
    int rc = oni_set_driver_opt(c->ctx, ONI_DRV_WRITE, &b, sizeof b);
    sched_yield(); /* see card_read */
    return rc;
}

void loop_cardsink_sink(struct loop_cardsink *c, struct loop_sink *sink)
{
    sink->ctx = c;
    sink->write = card_write;
}

void loop_cardsink_free(struct loop_cardsink *c)
{
    if (!c || !c->stage)
        return;
    if (c->pinned) {
        onigpu_buf_t b = {c->stage, c->block};
        if (oni_set_driver_opt(c->ctx, ONI_DRV_UNPIN, &b, sizeof b)) {
            c->stage = NULL; /* still pinned (a job may still read it): leaked, not freed */
            return;
        }
    }
    free(c->stage);
    c->stage = NULL;
}
