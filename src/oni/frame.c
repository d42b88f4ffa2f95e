/* frame.c - the data streams: block reads with zero-copy frames, write
 * frames, and the pool that recycles both so the steady state allocates
 * nothing. */
#include <stdlib.h>
#include <string.h>
#include "ctx.h"

#define SLAB_FRAMES 256

/* ---- pool ---------------------------------------------------------------- */

struct oni_pool *oni_pool_new(void)
{
    struct oni_pool *p = calloc(1, sizeof *p);
    if (p)
        atomic_init(&p->refs, 1);
    return p;
}

static void free_blocks(struct oni_block *b)
{
    while (b) {
        struct oni_block *next = b->next;
        free(b);
        b = next;
    }
}

static void free_wframes(struct oni_frame *f)
{
    while (f) {
        struct oni_frame *next = f->next;
        free(f);
        f = next;
    }
}

/* Drop one reference; the last one frees everything the pool holds. */
void oni_pool_unref(struct oni_pool *p)
{
    if (atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) != 1)
        return;
    free_blocks(p->blocks);
    free_blocks(atomic_load(&p->ret_blocks));
    free_wframes(p->wframes);
    free_wframes(atomic_load(&p->ret_wframes));
    while (p->slabs) {
        struct oni_slab *next = p->slabs->next;
        free(p->slabs);
        p->slabs = next;
    }
    free(p);
}

/* Lock-free push by whoever gives a frame back. */
static void push_frame(_Atomic(struct oni_frame *) *head, struct oni_frame *f)
{
    struct oni_frame *old = atomic_load_explicit(head, memory_order_relaxed);
    do
        f->next = old;
    while (!atomic_compare_exchange_weak_explicit(head, &old, f, memory_order_release,
                                                  memory_order_relaxed));
}

static void block_unref(struct oni_block *b)
{
    if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1)
        return;
    struct oni_pool *p = b->pool;
    struct oni_block *old = atomic_load_explicit(&p->ret_blocks, memory_order_relaxed);
    do
        b->next = old;
    while (!atomic_compare_exchange_weak_explicit(&p->ret_blocks, &old, b, memory_order_release,
                                                  memory_order_relaxed));
    oni_pool_unref(p);
}

/* A read descriptor: own list, else everything given back, else a new slab. */
static struct oni_frame *take_frame(struct oni_pool *p)
{
    struct oni_frame *f = p->frames;
    if (!f) {
        f = atomic_exchange_explicit(&p->ret_frames, NULL, memory_order_acquire);
        if (!f) {
            struct oni_slab *s = malloc(sizeof *s + SLAB_FRAMES * sizeof s->f[0]);
            if (!s)
                return NULL;
            s->next = p->slabs;
            p->slabs = s;
            for (int i = 0; i < SLAB_FRAMES; i++) {
                s->f[i].kind = ONI_FRAME_READ;
                s->f[i].pool = p;
                s->f[i].next = i + 1 < SLAB_FRAMES ? &s->f[i + 1] : NULL;
            }
            f = &s->f[0];
        }
    }
    p->frames = f->next;
    return f;
}

/* A block of at least cap bytes, holding one reference for the caller. */
static struct oni_block *take_block(struct oni_pool *p, size_t cap)
{
    for (;;) {
        struct oni_block *b = p->blocks;
        if (!b)
            b = atomic_exchange_explicit(&p->ret_blocks, NULL, memory_order_acquire);
        if (!b)
            break;
        p->blocks = b->next;
        if (b->cap >= cap) {
            atomic_store_explicit(&b->refs, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
            return b;
        }
        free(b); /* from before BLOCKREADSIZE grew */
    }
    struct oni_block *b = malloc(sizeof *b + cap);
    if (!b)
        return NULL;
    b->cap = cap;
    b->pool = p;
    atomic_init(&b->refs, 1);
    atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
    return b;
}

/* ---- read path ----------------------------------------------------------- */

void oni_read_flush(struct oni_ctx_impl *ctx)
{
    ctx->pos = ctx->end = 0;
    ctx->fill_left = 0;
}

void oni_read_release(struct oni_ctx_impl *ctx)
{
    if (ctx->cur)
        block_unref(ctx->cur);
    ctx->cur = NULL;
    oni_read_flush(ctx);
}

/* Bytes a refill needs room for: one block plus a partial frame carried over. */
static size_t block_cap(const struct oni_ctx_impl *ctx)
{
    return (size_t)ctx->block_read + oni_pad4(ctx->max_rframe);
}

/* Make sure [pos, pos + need) is in the current block. Starts a new refill
 * of exactly BLOCKREADSIZE bytes when the unparsed bytes are not enough,
 * carrying them to the front of the block (in place when no frame still
 * points into it), and finishes an interrupted refill first. *deadline is
 * set when the driver is first asked (0 = not yet): most calls find their
 * frame in the block and never read the clock. */
static int refill(struct oni_ctx_impl *ctx, size_t need, uint64_t *deadline)
{
    unsigned idle = 0;
    while (ctx->end - ctx->pos < need) {
        if (!*deadline)
            *deadline = oni_deadline(ctx);
        if (ctx->fill_left == 0) {
            size_t left = ctx->end - ctx->pos;
            struct oni_block *b = ctx->cur;
            if (!b || atomic_load_explicit(&b->refs, memory_order_acquire) != 1) {
                b = take_block(ctx->pool, block_cap(ctx));
                if (!b)
                    return ONI_EBADALLOC;
                if (left)
                    memcpy(b->data, ctx->cur->data + ctx->pos, left);
                if (ctx->cur)
                    block_unref(ctx->cur);
                ctx->cur = b;
            } else if (left) {
                memmove(b->data, b->data + ctx->pos, left);
            }
            ctx->pos = 0;
            ctx->end = left;
            ctx->fill_left = ctx->block_read;
        }
        int rc = ctx->drv.read_stream(ctx->dctx, ONI_READ_STREAM_DATA,
                                      ctx->cur->data + ctx->end, ctx->fill_left);
        if (rc < 0)
            return rc;
        if (rc == 0 || (size_t)rc > ctx->fill_left) {
            if (rc > 0)
                return ONI_EREADFAILURE; /* driver claims more than asked */
            if ((rc = oni_idle_wait(*deadline, &idle)) < 0)
                return rc;
            continue;
        }
        ctx->end += (size_t)rc;
        ctx->fill_left -= (size_t)rc;
    }
    return 0;
}

/* read_size of dev_idx, or -1 when the device is not in the table. */
static long dev_read_size(const struct oni_ctx_impl *ctx, uint32_t idx)
{
    uint32_t h = (idx * 0x9E3779B1u) & ctx->hmask;
    for (;;) {
        uint32_t k = ctx->hkey[h];
        if (k == idx + 1)
            return ctx->hval[h];
        if (k == 0)
            return -1;
        h = (h + 1) & ctx->hmask;
    }
}

/* A header that can start a frame: a readable device of the table with its
 * own payload size. Sets *sz. */
static int header_ok(const struct oni_ctx_impl *ctx, const char *h, uint32_t *sz)
{
    uint32_t idx;
    memcpy(&idx, h + 8, 4);
    memcpy(sz, h + 12, 4);
    long want = dev_read_size(ctx, idx);
    return want > 0 && (uint32_t)want == *sz;
}

static int read_frame_locked(struct oni_ctx_impl *ctx, oni_frame_t **out)
{
    uint64_t deadline = 0;
    uint32_t sz;
    int rc = refill(ctx, ONI_RFRAMEHEADERSZ, &deadline);
    if (rc < 0)
        return rc;
    if (!header_ok(ctx, ctx->cur->data + ctx->pos, &sz)) {
        /* Not a frame we know: drop words until one starts (frames are
         * word-aligned), at most a block's worth per call, and say so once.
         * The next call starts at the frame found. */
        size_t skipped = 0;
        do {
            ctx->pos += 4;
            skipped += 4;
            if (refill(ctx, ONI_RFRAMEHEADERSZ, &deadline) < 0)
                break; /* the next call meets that error again */
        } while (skipped < ctx->block_read && !header_ok(ctx, ctx->cur->data + ctx->pos, &sz));
        return ONI_EBADFRAME;
    }
    size_t len = ONI_RFRAMEHEADERSZ + oni_pad4(sz);
    if ((rc = refill(ctx, len, &deadline)) < 0)
        return rc;
    struct oni_frame *f = take_frame(ctx->pool);
    if (!f)
        return ONI_EBADALLOC;
    struct oni_block *b = ctx->cur;
    const char *h = b->data + ctx->pos;
    atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
    f->block = b;
    memcpy(&f->u.w.time, h, 8);
    memcpy(&f->u.w.dev_idx, h + 8, 4);
    f->u.w.data_sz = sz;
    f->u.w.data = b->data + ctx->pos + ONI_RFRAMEHEADERSZ;
    ctx->pos += len;
    *out = &f->u.pub;
    return (int)len;
}

int oni_read_frame(const oni_ctx ctx, oni_frame_t **frame)
{
    if (!ctx)
        return ONI_ENULLCTX;
    if (!frame)
        return ONI_EINVALARG;
    if (atomic_load(&ctx->state) == ONI_STATE_UNINIT)
        return ONI_EINVALSTATE;
    pthread_mutex_lock(&ctx->rlock);
    int rc = ctx->max_rframe > ONI_RFRAMEHEADERSZ ? read_frame_locked(ctx, frame) : ONI_ENOREADDEV;
    pthread_mutex_unlock(&ctx->rlock);
    return rc;
}

/* ---- write path ---------------------------------------------------------- */

/* A write frame with room for len bytes: pooled when it fits BLOCKWRITESIZE. */
static struct oni_frame *take_wframe(struct oni_ctx_impl *ctx, size_t len)
{
    struct oni_pool *p = ctx->pool;
    size_t cap = ctx->block_write;
    if (len > cap) {
        struct oni_frame *f = malloc(sizeof *f + len);
        if (f) {
            f->kind = ONI_FRAME_WRITE_HEAP;
            f->cap = len;
            f->pool = NULL;
        }
        return f;
    }
    for (;;) {
        struct oni_frame *f = p->wframes;
        if (!f)
            f = atomic_exchange_explicit(&p->ret_wframes, NULL, memory_order_acquire);
        if (!f)
            break;
        p->wframes = f->next;
        if (f->cap >= cap) {
            atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
            return f;
        }
        free(f); /* from before BLOCKWRITESIZE grew */
    }
    struct oni_frame *f = malloc(sizeof *f + cap);
    if (!f)
        return NULL;
    f->kind = ONI_FRAME_WRITE_POOLED;
    f->cap = cap;
    f->pool = p;
    atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
    return f;
}

static const oni_device_t *find_dev(const struct oni_ctx_impl *ctx, oni_dev_idx_t idx)
{
    size_t lo = 0, hi = ctx->ndev;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ctx->devs[mid].idx == idx)
            return &ctx->devs[mid];
        if (ctx->devs[mid].idx < idx)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

int oni_create_frame(const oni_ctx ctx, oni_frame_t **frame, oni_dev_idx_t dev_idx, void *data,
                     size_t data_sz)
{
    if (!ctx)
        return ONI_ENULLCTX;
    if (!frame || (!data && data_sz))
        return ONI_EINVALARG;
    if (atomic_load(&ctx->state) == ONI_STATE_UNINIT)
        return ONI_EINVALSTATE;
    pthread_mutex_lock(&ctx->wlock);
    int rc = 0;
    const oni_device_t *d = find_dev(ctx, dev_idx);
    size_t len = ONI_WFRAMEHEADERSZ + oni_pad4(data_sz);
    struct oni_frame *f = NULL;
    if (!d)
        rc = ONI_EDEVIDX;
    else if (d->write_size == 0)
        rc = ONI_ENOTWRITEDEV;
    else if (data_sz == 0 || data_sz % d->write_size || data_sz > UINT32_MAX - 8)
        rc = ONI_EWRITESIZE;
    else if (!(f = take_wframe(ctx, len)))
        rc = ONI_EBADALLOC;
    pthread_mutex_unlock(&ctx->wlock);
    if (rc)
        return rc;
    uint32_t hdr[2] = {dev_idx, (uint32_t)(oni_pad4(data_sz) / 4)};
    memcpy(f->buf, hdr, sizeof hdr);
    memcpy(f->buf + ONI_WFRAMEHEADERSZ, data, data_sz);
    memset(f->buf + ONI_WFRAMEHEADERSZ + data_sz, 0, oni_pad4(data_sz) - data_sz);
    f->u.w.time = 0;
    f->u.w.dev_idx = dev_idx;
    f->u.w.data_sz = (oni_fifo_dat_t)data_sz;
    f->u.w.data = f->buf + ONI_WFRAMEHEADERSZ;
    f->wlen = (uint32_t)len;
    f->block = NULL;
    *frame = &f->u.pub;
    return 0;
}

int oni_write_frame(const oni_ctx ctx, const oni_frame_t *frame)
{
    if (!ctx)
        return ONI_ENULLCTX;
    if (!frame)
        return ONI_EINVALARG;
    const struct oni_frame *f = (const struct oni_frame *)frame;
    if (f->kind != ONI_FRAME_WRITE_POOLED && f->kind != ONI_FRAME_WRITE_HEAP)
        return ONI_EINVALARG; /* a read frame */
    if (atomic_load(&ctx->state) == ONI_STATE_UNINIT)
        return ONI_EINVALSTATE;
    pthread_mutex_lock(&ctx->wlock);
    uint64_t deadline = oni_deadline(ctx);
    size_t done = 0;
    unsigned idle = 0;
    int rc = 0;
    while (done < f->wlen) {
        rc = ctx->drv.write_stream(ctx->dctx, ONI_WRITE_STREAM_DATA, f->buf + done, f->wlen - done);
        if (rc < 0)
            break;
        if ((size_t)rc > f->wlen - done) {
            rc = ONI_EWRITEFAILURE; /* driver claims more than asked */
            break;
        }
        if (rc == 0 && (rc = oni_idle_wait(deadline, &idle)) < 0)
            break;
        done += (size_t)rc;
    }
    pthread_mutex_unlock(&ctx->wlock);
    return rc < 0 ? rc : (int)done;
}

void oni_destroy_frame(oni_frame_t *frame)
{
    if (!frame)
        return;
    struct oni_frame *f = (struct oni_frame *)frame;
    switch (f->kind) {
    case ONI_FRAME_READ: {
        /* Give the descriptor back before the block: the block may be the
         * last thing keeping the pool (and so the descriptor's slab) alive. */
        struct oni_block *b = f->block;
        push_frame(&f->pool->ret_frames, f);
        block_unref(b);
        break;
    }
    case ONI_FRAME_WRITE_POOLED: {
        struct oni_pool *p = f->pool;
        push_frame(&p->ret_wframes, f);
        oni_pool_unref(p);
        break;
    }
    case ONI_FRAME_WRITE_HEAP:
        free(f);
        break;
    }
}
