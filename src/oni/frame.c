/* frame.c - the data streams: block reads with zero-copy frames, write
 * frames, and the pool that recycles both so the steady state allocates
 * nothing. */
#include <limits.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#include "ctx.h"

/* ---- pool ---------------------------------------------------------------- */

static int bias_allowed(void);

struct oni_pool *oni_pool_new(void)
{
    struct oni_pool *p = aligned_alloc(_Alignof(struct oni_pool), sizeof *p);
    if (!p)
        return NULL;
    memset(p, 0, sizeof *p);
    atomic_init(&p->refs, 1);
    for (int i = 0; i <= ONI_BIAS_HOLDERS; i++) {
        atomic_init(&p->slot[i].owner, 0);
        atomic_init(&p->slot[i].busy, 0);
    }
    atomic_init(&p->bias, (uintptr_t)&p->slot[0]);
    p->off = !bias_allowed();
    return p;
}

static void free_block(struct oni_block *b)
{
    while (b->segs) {
        struct oni_rseg *next = b->segs->next;
        free(b->segs);
        b->segs = next;
    }
    free(b);
}

static void free_blocks(struct oni_block *b)
{
    while (b) {
        struct oni_block *next = b->next;
        free_block(b);
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
    free(p);
}

/* Lock-free push of node onto the list at head (an _Atomic pointer to the
 * node's type) by whoever gives it back; the owner takes the whole list with
 * one exchange. Used for blocks and for pooled write frames. */
#define LF_PUSH(head, node)                                                                            \
    do {                                                                                               \
        __typeof__(node) old_ = atomic_load_explicit((head), memory_order_relaxed);                    \
        do                                                                                             \
            (node)->next = old_;                                                                       \
        while (!atomic_compare_exchange_weak_explicit((head), &old_, (node), memory_order_release,     \
                                                      memory_order_relaxed));                          \
    } while (0)

/* Give b, whose last reference is gone, back to its pool. */
__attribute__((noinline)) static void block_return(struct oni_block *b)
{
    struct oni_pool *p = b->pool;
    LF_PUSH(&p->ret_blocks, b);
    oni_pool_unref(p);
}

/* Drop n references to b; the last one gives it back to its pool. A plain
 * load and store while the process has one thread (mixing the two forms is
 * safe: starting a thread orders everything before it). */
static inline void block_unref(struct oni_block *b, unsigned n)
{
    unsigned old;
    if (oni_one_thread()) {
        old = atomic_load_explicit(&b->refs, memory_order_relaxed);
        atomic_store_explicit(&b->refs, old - n, memory_order_relaxed);
    } else {
        old = atomic_fetch_sub_explicit(&b->refs, n, memory_order_acq_rel);
    }
    if (old == n)
        block_return(b);
}

/* A segment of descriptors that belong to b. */
static struct oni_rseg *new_seg(struct oni_block *b)
{
    struct oni_rseg *s = malloc(sizeof *s);
    if (!s)
        return NULL;
    s->next = NULL;
    for (int i = 0; i < ONI_SEGFRAMES; i++) {
        s->f[i].h.kind = ONI_FRAME_READ;
        s->f[i].block = b;
    }
    return s;
}

/* A block of at least cap bytes with refs = ONI_BLOCK_BIAS, recycled when
 * one is free, else new (with its first descriptor segment). */
static struct oni_block *take_block(struct oni_pool *p, size_t cap)
{
    struct oni_block *b;
    for (;;) {
        b = p->blocks;
        if (!b)
            b = atomic_exchange_explicit(&p->ret_blocks, NULL, memory_order_acquire);
        if (!b)
            break;
        p->blocks = b->next;
        if (b->cap >= cap)
            goto out;
        free_block(b); /* from before BLOCKREADSIZE grew */
    }
    if (!(b = malloc(sizeof *b + cap)))
        return NULL;
    b->cap = cap;
    b->pool = p;
    if (!(b->segs = new_seg(b))) {
        free(b);
        return NULL;
    }
out:
    atomic_store_explicit(&b->refs, ONI_BLOCK_BIAS, memory_order_relaxed);
    b->odone = 0;
    b->open = 1;
    atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
    return b;
}

/* ---- the read lock and the bias (ctx.h) ----------------------------------- */

static atomic_int membarrier_ok;
static pthread_once_t membarrier_once = PTHREAD_ONCE_INIT;

static void membarrier_register(void)
{
#if defined(__linux__) && defined(SYS_membarrier)
    atomic_store(&membarrier_ok, syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 &&
                                     syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0);
#endif
}

/* Whether new contexts get a read bias: membarrier(2) registered for the
 * process and answering (Linux 4.14 on; a sandbox may refuse it), it has
 * not failed since, and ONIGPU_READ_BIAS is not "0". */
static int bias_allowed(void)
{
    const char *env = getenv("ONIGPU_READ_BIAS");
    if (env && strcmp(env, "0") == 0)
        return 0;
    pthread_once(&membarrier_once, membarrier_register);
    return atomic_load(&membarrier_ok);
}

/* A full memory barrier on every running thread of the process. It can
 * fail although it worked when the bias was handed out (a seccomp filter
 * installed since): then new contexts get no bias, and this caller pauses
 * 1 ms instead. That is no barrier in the memory model's terms, but every
 * CPU makes a store visible long before that (a store buffer drains in
 * nanoseconds, and a thread switched out drains it on the way). */
static void barrier_all(void)
{
#if defined(__linux__) && defined(SYS_membarrier)
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
        return;
#endif
    atomic_store(&membarrier_ok, 0);
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
}

void oni_backoff(unsigned *tries)
{
    if (++*tries < 200)
        return; /* the holder is most likely parsing: nanoseconds */
    if (*tries < 264) {
        sched_yield();
    } else {
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
}

void oni_rlock_wait(struct oni_ctx_impl *ctx, unsigned t)
{
    unsigned tries = 0;
    while (atomic_load_explicit(&ctx->rserve, memory_order_acquire) != t)
        oni_backoff(&tries);
}

/* Keep the holder of slot s out of the read state (read lock held; ctx.h
 * says why this is enough). */
void oni_bias_keep_out(struct oni_pool *p, struct oni_bias_slot *s)
{
    atomic_store_explicit(&p->bias, (uintptr_t)s | 1, memory_order_relaxed);
    barrier_all();
    unsigned tries = 0;
    while (atomic_load_explicit(&s->busy, memory_order_acquire))
        oni_backoff(&tries);
}

/* A reader under the read lock takes the bias, with a fresh slot: the first
 * one, and each later one from the holder oni_rlock kept out, until
 * ONI_BIAS_HOLDERS slots are used; then nobody gets it again. */
static void bias_take(struct oni_pool *p)
{
    struct oni_bias_slot *s = oni_bias_slot(atomic_load_explicit(&p->bias, memory_order_relaxed));
    uintptr_t me = oni_self();
    if (p->off || atomic_load_explicit(&s->owner, memory_order_relaxed) == me)
        return;
    if (p->holders == ONI_BIAS_HOLDERS) {
        p->off = 1;
        s = &p->slot[0];
    } else {
        s = &p->slot[++p->holders];
        atomic_store_explicit(&s->owner, me, memory_order_relaxed);
    }
    atomic_store_explicit(&p->bias, (uintptr_t)s, memory_order_release);
}

/* ---- read path ----------------------------------------------------------- */

void oni_read_flush(struct oni_ctx_impl *ctx)
{
    ctx->pos = ctx->end = 0;
    ctx->fill_left = 0;
}

/* Frames handed out of the current block since it was (re)filled: one
 * descriptor each, taken in order from its segments. */
static inline uint32_t handed(const struct oni_ctx_impl *ctx)
{
    return ctx->seg_base + (uint32_t)(ctx->fnext - ctx->seg->f);
}

/* Hand out descriptors from segment s. */
static void use_seg(struct oni_ctx_impl *ctx, struct oni_rseg *s)
{
    ctx->seg = s;
    ctx->fnext = s->f;
    ctx->fend = s->f + ONI_SEGFRAMES;
}

/* Whether every frame handed out of the current block was destroyed. */
static int cur_idle(const struct oni_ctx_impl *ctx)
{
    const struct oni_block *b = ctx->cur;
    return atomic_load_explicit(&b->refs, memory_order_acquire) == ONI_BLOCK_BIAS - handed(ctx) + b->odone;
}

/* Let go of the current block: fold the counts into refs (ctx.h). */
static void retire_cur(struct oni_ctx_impl *ctx)
{
    struct oni_block *b = ctx->cur;
    b->open = 0;
    block_unref(b, ONI_BLOCK_BIAS - handed(ctx) + b->odone);
}

void oni_read_release(struct oni_ctx_impl *ctx)
{
    if (ctx->cur)
        retire_cur(ctx);
    ctx->cur = NULL;
    ctx->seg = NULL;
    ctx->fnext = ctx->fend = NULL;
    ctx->seg_base = 0;
    oni_read_flush(ctx);
}

/* Bytes a refill needs room for: one block plus a partial frame carried over. */
static size_t block_cap(const struct oni_ctx_impl *ctx)
{
    return (size_t)ctx->block_read + oni_pad4(ctx->max_rframe);
}

/* Start a refill: the unparsed bytes go to the front of the current block
 * when no frame still points into it, else to a fresh block. */
static int start_fill(struct oni_ctx_impl *ctx)
{
    size_t left = ctx->end - ctx->pos;
    struct oni_block *b = ctx->cur;
    if (b && cur_idle(ctx)) {
        if (left)
            memmove(b->data, b->data + ctx->pos, left);
        atomic_store_explicit(&b->refs, ONI_BLOCK_BIAS, memory_order_relaxed);
        b->odone = 0;
    } else {
        if (!(b = take_block(ctx->pool, block_cap(ctx))))
            return ONI_EBADALLOC;
        if (left)
            memcpy(b->data, ctx->cur->data + ctx->pos, left);
        if (ctx->cur)
            retire_cur(ctx);
        ctx->cur = b;
    }
    use_seg(ctx, b->segs);
    ctx->seg_base = 0;
    ctx->pos = 0;
    ctx->end = left;
    ctx->fill_left = ctx->block_read;
    return 0;
}

/* Make sure [pos, pos + need) is in the current block. Starts a new refill
 * of exactly BLOCKREADSIZE bytes when the unparsed bytes are not enough,
 * and finishes an interrupted refill first. The deadline (*deadline, 0 =
 * not yet) starts when the driver answers with no bytes, and every byte that
 * comes clears it (ctx.h, oni_wait_live): a refill is usually one driver call
 * that delivers everything, and then the clock is never read (it costs more
 * than parsing a frame). */
static int refill(struct oni_ctx_impl *ctx, size_t need, uint64_t *deadline)
{
    unsigned idle = 0;
    int rc;
    while (ctx->end - ctx->pos < need) {
        if (ctx->fill_left == 0 && (rc = start_fill(ctx)) < 0)
            return rc;
        rc = ctx->drv.read_stream(ctx->dctx, ONI_READ_STREAM_DATA, ctx->cur->data + ctx->end,
                                  ctx->fill_left);
        if (rc < 0)
            return rc;
        if ((size_t)rc > ctx->fill_left)
            return ONI_EREADFAILURE; /* driver claims more than asked */
        ctx->end += (size_t)rc;
        ctx->fill_left -= (size_t)rc;
        if (rc > 0) {
            *deadline = 0; /* progress: the wait for the next byte starts again */
        } else {
            /* Nothing yet: give way to a call that needs the read state
             * (oni_rlock_opt, ctx.h); it may be the start the data waits for. */
            if (atomic_load_explicit(&ctx->rwant, memory_order_relaxed))
                return ONI_EYIELD;
            if (!*deadline)
                *deadline = oni_deadline(ctx);
            if (oni_idle_wait(*deadline, &idle) < 0 && (rc = oni_wait_live(ctx, deadline)) < 0)
                return rc;
        }
    }
    return 0;
}

/* The header's key (oni_frame_key) at pos. */
static inline uint64_t read_key(const struct oni_ctx_impl *ctx)
{
    uint64_t k;
    memcpy(&k, ctx->cur->data + ctx->pos + 8, 8);
    return k;
}

/* The map slot where a search for the device of key k starts. Fibonacci
 * hashing: the product's high bits, which depend on every bit of dev_idx
 * (device indices differ mostly in the hub byte). */
static inline const struct oni_hslot *home_slot(const struct oni_ctx_impl *ctx, uint64_t k)
{
    return &ctx->hslot[((uint32_t)k * 0x9E3779B1u) >> ctx->hshift];
}

/* Whether a header of key k can start a frame: a readable device of the
 * table with that data_sz as its read_size. */
static int header_ok(const struct oni_ctx_impl *ctx, uint64_t k)
{
    const struct oni_hslot *s = home_slot(ctx, k);
    while (s->want && s->want != k + 1)
        s = &ctx->hslot[(size_t)(s - ctx->hslot + 1) & ctx->hmask];
    return s->want != 0;
}

/* Bytes on the stream of a frame whose header has key k: the header and
 * data_sz padded to a multiple of 4. The header's size being one too, that
 * is one add and one mask, a cycle less on the path from one frame's
 * position to the next. 64-bit, so that the largest data_sz cannot wrap it
 * where size_t is 32-bit. */
_Static_assert(ONI_RFRAMEHEADERSZ == ONI_FRAMEHEADERSZ, "one read frame header size");
_Static_assert(ONI_RFRAMEHEADERSZ % 4 == 0, "frame_len folds the header into the padding");
static inline uint64_t frame_len(uint64_t k)
{
    return ((k >> 32) + ONI_RFRAMEHEADERSZ + 3) & ~(uint64_t)3;
}

/* Not a frame we know at pos: drop words until one starts (frames are
 * word-aligned), at most a block's worth per call, and say so once. The
 * next call starts at the frame found. */
static int skip_bad(struct oni_ctx_impl *ctx, uint64_t *deadline)
{
    size_t skipped = 0;
    do {
        ctx->pos += 4;
        skipped += 4;
        if (refill(ctx, ONI_RFRAMEHEADERSZ, deadline) < 0)
            break; /* the next call meets that error again */
    } while (skipped < ctx->block_read && !header_ok(ctx, read_key(ctx)));
    return ONI_EBADFRAME;
}

/* The next descriptor of the current block, or NULL (out of memory). */
static inline struct oni_rframe *take_rframe(struct oni_ctx_impl *ctx)
{
    if (ctx->fnext == ctx->fend) {
        struct oni_rseg *s = ctx->seg->next;
        if (!s && !(s = ctx->seg->next = new_seg(ctx->cur)))
            return NULL;
        use_seg(ctx, s);
        ctx->seg_base += ONI_SEGFRAMES;
    }
    return ctx->fnext++;
}

/* The header [u64 time][u32 dev_idx][u32 data_sz] is laid out like the
 * frame's first three fields, so hand_out copies it in one go. */
_Static_assert(offsetof(oni_frame_t, dev_idx) == 8 && offsetof(oni_frame_t, data_sz) == 12 &&
                   offsetof(oni_frame_t, data) == ONI_RFRAMEHEADERSZ,
               "oni_frame_t starts like a read frame header");

/* What oni_read_frame and oni_create_frame return for a frame of data_sz
 * bytes: upstream's sizeof(oni_frame_t) + data_sz + data_sz % 4
 * (api/liboni/oni.c:668-688 and 739-744; for a size that is no multiple of
 * 2 that is not the padded size, but it is what upstream answers). */
static inline int frame_answer(uint64_t data_sz)
{
    return (int)(sizeof(oni_frame_t) + data_sz + data_sz % 4);
}

/* Fill f with the frame of len bytes (header included) at pos and step over it. */
static inline int hand_out(struct oni_ctx_impl *ctx, struct oni_rframe *f, size_t len,
                           oni_frame_t **out)
{
    char *h = ctx->cur->data + ctx->pos;
    memcpy(&f->h.u.w, h, ONI_RFRAMEHEADERSZ);
    f->h.u.w.data = h + ONI_RFRAMEHEADERSZ;
    ctx->pos += len;
    *out = &f->h.u.pub;
    return frame_answer(f->h.u.w.data_sz);
}

/* Any case the fast path of oni_read_frame leaves: a refill, a bad header,
 * a new descriptor segment, no readable device. */
/* Kept out of line so the fast path stays small. */
__attribute__((noinline)) static int read_frame_slow(struct oni_ctx_impl *ctx, oni_frame_t **out)
{
    uint64_t deadline = 0;
    int rc;
    if (atomic_load_explicit(&ctx->state, memory_order_relaxed) == ONI_STATE_UNINIT)
        return ONI_EINVALSTATE; /* checked here, not in the fast path: such a ctx has no bytes */
    if (ctx->max_rframe <= ONI_RFRAMEHEADERSZ)
        return ONI_ENOREADDEV;
    if ((rc = refill(ctx, ONI_RFRAMEHEADERSZ, &deadline)) < 0)
        return rc;
    uint64_t k = read_key(ctx);
    if (!header_ok(ctx, k))
        return skip_bad(ctx, &deadline);
    size_t len = (size_t)frame_len(k);
    if ((rc = refill(ctx, len, &deadline)) < 0)
        return rc;
    struct oni_rframe *f = take_rframe(ctx);
    if (!f)
        return ONI_EBADALLOC;
    return hand_out(ctx, f, len, out);
}

/* The common case of oni_read_frame: a descriptor free in the segment and
 * a known frame wholly in the block whose device sits in its home slot
 * (bytes in the block imply a readable device in the table, so an
 * uninitialized ctx never gets here). Returns 0 for everything else: a
 * refill, a bad header, a new segment. The length comes from the header,
 * not the slot: the next call's position waits for it, and a load from the
 * slot would add to that wait. A header of all ones meets an empty slot's
 * want, but not its length check. */
static inline int read_frame_fast(struct oni_ctx_impl *ctx, oni_frame_t **out)
{
    size_t avail = ctx->end - ctx->pos;
    if (avail < ONI_RFRAMEHEADERSZ || ctx->fnext == ctx->fend)
        return 0;
    uint64_t k = read_key(ctx);
    uint64_t len = frame_len(k);
    if (home_slot(ctx, k)->want != k + 1 || avail < len)
        return 0;
    return hand_out(ctx, ctx->fnext++, (size_t)len, out);
}

/* One oni_read_frame under the read lock; may return ONI_EYIELD. */
static int read_frame_locked_once(struct oni_ctx_impl *ctx, oni_frame_t **out)
{
    unsigned ticket = oni_rlock(ctx);
    bias_take(ctx->pool);
    int rc = read_frame_fast(ctx, out);
    if (!rc)
        rc = read_frame_slow(ctx, out);
    oni_runlock(ctx, ticket);
    return rc;
}

/* A refill gave way (ONI_EYIELD, the read state released): let the caller
 * that wanted it go first (it queues on the ticket lock, or is about to),
 * then read again, with a deadline of its own since that caller changed
 * what the stream holds (a start, a reset, a block size). */
__attribute__((noinline)) static int read_frame_after_yield(struct oni_ctx_impl *ctx, oni_frame_t **out)
{
    unsigned tries = 0;
    int rc;
    do {
        oni_backoff(&tries);
        rc = read_frame_locked_once(ctx, out);
    } while (rc == ONI_EYIELD);
    return rc;
}

/* oni_read_frame under the read lock, for a caller without the bias (it
 * takes it here when it may) or kept out of it. Out of line, so that the
 * registers it needs are saved only here. */
__attribute__((noinline)) static int read_frame_locked(struct oni_ctx_impl *ctx, oni_frame_t **out)
{
    int rc = read_frame_locked_once(ctx, out);
    return rc == ONI_EYIELD ? read_frame_after_yield(ctx, out) : rc;
}

/* read_frame_slow in the bias holder's section (slot s), which it ends. */
__attribute__((noinline)) static int read_frame_biased(struct oni_ctx_impl *ctx, oni_frame_t **out,
                                                      struct oni_bias_slot *s)
{
    int rc = read_frame_slow(ctx, out);
    oni_bias_leave(s);
    return rc == ONI_EYIELD ? read_frame_after_yield(ctx, out) : rc;
}

int oni_read_frame(const oni_ctx ctx, oni_frame_t **frame)
{
    if (!ctx)
        return ONI_ENULLCTX;
    if (!frame)
        return ONI_EINVALARG;
    int rc;
    if (oni_one_thread() && (rc = read_frame_fast(ctx, frame)) > 0)
        return rc; /* no other thread: nobody to keep out, nothing to count */
    struct oni_bias_slot *s;
    if (!oni_bias_enter(ctx->pool, &s))
        return read_frame_locked(ctx, frame);
    rc = read_frame_fast(ctx, frame);
    if (!rc)
        return read_frame_biased(ctx, frame, s); /* a tail call: the fast path saves no register */
    oni_bias_leave(s);
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
            f->h.kind = ONI_FRAME_WRITE_HEAP;
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
    f->h.kind = ONI_FRAME_WRITE_POOLED;
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
    else if (data_sz % d->write_size || data_sz > INT_MAX - sizeof(oni_frame_t) - 3)
        rc = ONI_EWRITESIZE; /* 0 is a multiple too, as upstream takes it; the answer must fit an int */
    else if (!(f = take_wframe(ctx, len)))
        rc = ONI_EBADALLOC;
    pthread_mutex_unlock(&ctx->wlock);
    if (rc)
        return rc;
    uint32_t hdr[2] = {dev_idx, (uint32_t)(oni_pad4(data_sz) / 4)};
    memcpy(f->buf, hdr, sizeof hdr);
    if (data_sz) /* data may be NULL then, and memcpy's arguments may not */
        memcpy(f->buf + ONI_WFRAMEHEADERSZ, data, data_sz);
    memset(f->buf + ONI_WFRAMEHEADERSZ + data_sz, 0, oni_pad4(data_sz) - data_sz);
    f->h.u.w.time = 0;
    f->h.u.w.dev_idx = dev_idx;
    f->h.u.w.data_sz = (oni_fifo_dat_t)data_sz;
    f->h.u.w.data = f->buf + ONI_WFRAMEHEADERSZ;
    f->wlen = (uint32_t)len;
    *frame = &f->h.u.pub;
    return frame_answer(data_sz);
}

/* Hand n bytes at p to the driver by deadline (wlock held); *done says how
 * many it took, also on an error. */
static int write_all(struct oni_ctx_impl *ctx, const uint8_t *p, size_t n, uint64_t *deadline, size_t *done)
{
    unsigned idle = 0;
    *done = 0;
    while (*done < n) {
        int rc = ctx->drv.write_stream(ctx->dctx, ONI_WRITE_STREAM_DATA, (const char *)p + *done, n - *done);
        if (rc < 0)
            return rc;
        if ((size_t)rc > n - *done)
            return ONI_EWRITEFAILURE; /* driver claims more than asked */
        if (rc > 0)
            *deadline = oni_deadline(ctx); /* progress: the wait starts again */
        else if (oni_idle_wait(*deadline, &idle) < 0 && (rc = oni_wait_live(ctx, deadline)) < 0)
            return rc;
        *done += (size_t)rc;
    }
    return 0;
}

/* Room to keep the unsent rest of a frame of n bytes (wlock held). Made
 * before a write starts: a frame the driver takes only part of is never torn
 * for want of memory. Returns 0 or ONI_EBADALLOC (nothing sent). */
static int reserve_rest(struct oni_ctx_impl *ctx, size_t n)
{
    if (n <= ctx->wpend_cap)
        return 0;
    if (n < ctx->block_write)
        n = ctx->block_write; /* every pooled frame fits from now on */
    uint8_t *b = realloc(ctx->wpend, n);
    if (!b)
        return ONI_EBADALLOC;
    ctx->wpend = b;
    ctx->wpend_cap = n;
    return 0;
}

/* Keep the rest of a frame the driver took only part of (wlock held, room
 * reserved): the next write sends it first, so the stream stays in whole frames. */
static void keep_rest(struct oni_ctx_impl *ctx, const uint8_t *p, size_t n)
{
    memmove(ctx->wpend, p, n);
    ctx->wpend_len = n;
}

int oni_write_frame(const oni_ctx ctx, const oni_frame_t *frame)
{
    if (!ctx)
        return ONI_ENULLCTX;
    if (!frame)
        return ONI_EINVALARG;
    int kind = ((const struct oni_fhead *)frame)->kind;
    if (kind != ONI_FRAME_WRITE_POOLED && kind != ONI_FRAME_WRITE_HEAP)
        return ONI_EINVALARG; /* a read frame */
    const struct oni_frame *f = (const struct oni_frame *)frame;
    if (atomic_load(&ctx->state) == ONI_STATE_UNINIT)
        return ONI_EINVALSTATE;
    pthread_mutex_lock(&ctx->wlock);
    uint64_t deadline = oni_deadline(ctx);
    size_t done = 0;
    int rc = reserve_rest(ctx, f->wlen);
    if (!rc && ctx->wpend_len) { /* the rest of an earlier frame comes first */
        rc = write_all(ctx, ctx->wpend, ctx->wpend_len, &deadline, &done);
        keep_rest(ctx, ctx->wpend + done, ctx->wpend_len - done);
        done = 0;
    }
    if (!rc) {
        rc = write_all(ctx, (const uint8_t *)f->buf, f->wlen, &deadline, &done);
        if (rc && done)
            keep_rest(ctx, (const uint8_t *)f->buf + done, f->wlen - done);
    }
    pthread_mutex_unlock(&ctx->wlock);
    /* Upstream answers the header and data_sz bytes (api/liboni/oni.c:789-793). */
    return rc < 0 ? rc : (int)(ONI_WFRAMEHEADERSZ + f->h.u.w.data_sz);
}

/* A destroy by the bias holder of a frame of an open block: counted in the
 * block's odone with a plain add. Returns 0 where refs must count it. */
static inline int destroy_biased(struct oni_block *b)
{
    struct oni_bias_slot *s;
    if (!oni_bias_enter(b->pool, &s))
        return 0;
    int open = b->open;
    if (open)
        b->odone++;
    oni_bias_leave(s);
    return open;
}

void oni_destroy_frame(oni_frame_t *frame)
{
    if (!frame)
        return;
    int kind = ((struct oni_fhead *)frame)->kind;
    if (kind == ONI_FRAME_READ) { /* tested first: the case of every frame read */
        /* The descriptor belongs to the block: nothing else to give back. */
        struct oni_block *b = ((struct oni_rframe *)frame)->block;
        if (oni_one_thread() || !destroy_biased(b))
            block_unref(b, 1);
        return;
    }
    switch (kind) {
    case ONI_FRAME_WRITE_POOLED: {
        struct oni_frame *f = (struct oni_frame *)frame;
        struct oni_pool *p = f->pool;
        LF_PUSH(&p->ret_wframes, f);
        oni_pool_unref(p);
        break;
    }
    case ONI_FRAME_WRITE_HEAP:
        free(frame);
        break;
    }
}
