/* cardsrc.c - blocks of the card's GPU data stream, and results back to
 * the card, through the driver options of onigpu.h (source.h). */
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

/* Wait for the completion word, lock free: spin (yielding) for 50 us, then
 * poll every 20 us, up to timeout_ms. */
static int wait_done(struct loop_cardsrc *c, uint32_t seq, uint32_t timeout_ms)
{
    uint64_t t0 = oni_now_ns(), limit = t0 + (uint64_t)timeout_ms * 1000000ull;
    for (;;) {
        if (__atomic_load_n((const uint32_t *)&c->done, __ATOMIC_ACQUIRE) == seq)
            return 0;
        uint64_t t = oni_now_ns();
        if (t > limit)
            return ONI_ETIMEOUT;
        if (t - t0 < 50000) {
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
        c->sync_only = 1; /* e.g. a daemon context: no DMA engine in this process */
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
