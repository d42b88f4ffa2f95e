/* cardsrc.c - blocks of the card's GPU data stream, and results back to
 * the card, through the driver options of onigpu.h (source.h). */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include "onigpu.h"
#include "loop/source.h"

int loop_cardsrc_init(struct loop_cardsrc *c, oni_ctx ctx, uint32_t block)
{
    if (!c || !ctx || !block || block % 4)
        return ONI_EINVALARG;
    c->ctx = ctx;
    c->block = block;
    return oni_set_driver_opt(ctx, ONI_DRV_RD_SZ, &block, sizeof block);
}

static int card_read(void *ctx, void *buf, size_t len, uint32_t timeout_ms)
{
    struct loop_cardsrc *c = ctx;
    onigpu_buf_t b = {buf, len};
    if (len != c->block)
        return ONI_EBUFFERSIZE;
    /* The context's own timeout (ONI_OPT_TIMEOUTMS) bounds the wait. The
     * read holds the context's option lock while it waits for data; yield
     * after it so other callers (stream statistics, stop) are not starved by
     * back-to-back reads. */
    int rc = oni_set_driver_opt(c->ctx, ONI_DRV_READ, &b, sizeof b);
    sched_yield();
    return rc;
}

static int card_read_async(void *ctx, void *buf, size_t len, volatile uint32_t *done, uint32_t seq)
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
    memcpy(c->stage + 8, out, len < c->block - 8 ? len : c->block - 8);
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
        oni_set_driver_opt(c->ctx, ONI_DRV_UNPIN, &b, sizeof b);
    }
    free(c->stage);
    c->stage = NULL;
}
