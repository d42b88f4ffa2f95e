/* gpustream.c - the GPU data stream layer (gpustream.h): block sizes, the pin
 * table, routing, chunked staging and async jobs over a driver's DMA
 * operations (struct gpustream_dma).
 *
 * The card moves every transfer with its own DMA (read, write, submit). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "gpustream.h"
#include "gpu/gpu.h"
#include "gpu/pipe.h"
#include "oni.h"
#include "oni/util/opt.h"
#include "oni/util/clock.h"

#define GS_SLOTS 2

struct pin {
    uintptr_t addr;
    size_t len;          /* bytes usable from addr; 0 = unknown (host token) */
    enum gpu_kind kind;
    uint64_t buffer_id;  /* CUDA memory: to notice a freed-and-reallocated buffer */
    int registered;      /* host memory page-locked by PIN: unregistered by UNPIN */
};

/* How a transfer's buffer (or completion word) is reached. */
struct route {
    int on_gpu;          /* the DMA engine must use the copy engine */
    enum gpu_kind kind;
};

/* Thread-safe: lock guards the block sizes and the pin table (held only
 * while a call reads or changes them, never during a transfer);
 * stage_lock makes chunked transfers, which share the staging slots, take
 * turns. The DMA operations are thread-safe themselves. */
struct gpustream {
    const struct gpustream_dma *ops;
    void *card;          /* the driver's, passed to every op */
    pthread_mutex_t lock, stage_lock;
    uint32_t rd_sz, wr_sz, chunk_sz;
    struct pin pins[ONIGPU_MAX_PINS];
    int npins;
    /* chunked staging */
    uint8_t *slot[GS_SLOTS];
    size_t slot_cap;
    struct gpu_stream *copy;
    int copy_unsettled; /* a chunked transfer timed out with copies still queued on copy (stage_lock) */
    struct gpu_event *ev[GS_SLOTS];
};

/* A resolved buffer argument: where, how long, what memory. */
struct buf {
    uint8_t *p;
    size_t len; /* 0 = unknown */
    int explicit_len;
};

int gpustream_opt(int opt) { return opt >= ONI_DRV_RD_SZ && opt <= ONI_DRV_DMA_AGENT && opt != ONI_DRV_STREAM_STATS; }

int gpustream_create(const struct gpustream_dma *ops, void *card, struct gpustream **out)
{
    if (!ops || !ops->read || !ops->write || !out)
        return ONI_EINVALARG;
    struct gpustream *g = calloc(1, sizeof *g);
    if (!g)
        return ONI_EBADALLOC;
    g->ops = ops;
    g->card = card;
    g->rd_sz = g->wr_sz = ONIGPU_DEFAULT_BLOCK;
    pthread_mutex_init(&g->lock, NULL);
    pthread_mutex_init(&g->stage_lock, NULL);
    *out = g;
    return 0;
}

void gpustream_destroy(struct gpustream *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->npins; i++)
        if (g->pins[i].registered)
            gpu_host_unregister((void *)g->pins[i].addr);
    for (int s = 0; s < GS_SLOTS; s++) {
        gpu_event_destroy(g->ev[s]);
        gpu_host_free(g->slot[s]);
    }
    gpu_stream_destroy(g->copy);
    pthread_mutex_destroy(&g->lock);
    pthread_mutex_destroy(&g->stage_lock);
    free(g);
}

/* Card <-> host memory. */
static int host_read(struct gpustream *g, void *dst, size_t n, uint32_t timeout_ms)
{
    return g->ops->read(g->card, dst, n, 0, timeout_ms);
}

static int host_write(struct gpustream *g, const void *src, size_t n, uint32_t timeout_ms)
{
    return g->ops->write(g->card, src, n, 0, timeout_ms);
}

/* --- argument parsing ------------------------------------------------------ */

static int put_u32(void *value, size_t *len, uint32_t v)
{
    if (!value || !len)
        return ONI_EINVALARG;
    if (*len < sizeof v)
        return oni_opt_short(len, sizeof v);
    memcpy(value, &v, sizeof v);
    *len = sizeof v;
    return 0;
}

static int set_size(uint32_t *dst, const void *value, size_t len, int zero_ok)
{
    uint32_t v;
    int rc = oni_opt_u32(value, len, &v);
    if (rc)
        return rc;
    if ((!v && !zero_ok) || v % 4 || v > ONIGPU_MAX_BLOCK)
        return ONI_EINVALARG;
    *dst = v;
    return 0;
}

/* PIN/UNPIN/READ/WRITE take the buffer itself (size 4 or 8, as in the thesis'
 * listings) or a const onigpu_buf_t * (size sizeof(onigpu_buf_t)). */
static int parse_buf(const void *value, size_t len, struct buf *b)
{
    memset(b, 0, sizeof *b);
    if (!value)
        return ONI_EINVALARG;
    if (len == 4 || len == 8) {
        b->p = (uint8_t *)value;
        return 0;
    }
    if (len == sizeof(onigpu_buf_t)) {
        const onigpu_buf_t *ob = value;
        if (!ob->addr || !ob->len || ob->len > UINTPTR_MAX - (uintptr_t)ob->addr)
            return ONI_EINVALARG; /* none, or past the end of the address space */
        b->p = ob->addr;
        b->len = (size_t)ob->len;
        b->explicit_len = 1;
        return 0;
    }
    return ONI_EINVALARG;
}

/* Is [p, p+n) ordinary host memory of this process that the card may write
 * (a read into it) or, with read_only, read (a write from it)? CUDA device
 * memory (and anything else) is not. Cached for the process (one mapping,
 * under a lock): the read-write mapping last found (one unmapped or
 * protected since is not noticed). Not thread-local: a driver library's
 * thread-local storage, touched by the main thread and then dlclosed,
 * crashes LeakSanitizer's exit scan (glibc's DTV keeps the stale slot). */
static pthread_mutex_t rw_mu = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t rw_lo, rw_hi;

static int maps_rw(uintptr_t a, size_t n, int read_only, uintptr_t *lo, uintptr_t *hi)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return -1; /* cannot tell */
    char line[512];
    int ok = 0, writable = 1; /* only a range writable throughout goes to the cache */
    uintptr_t cur = a, end = a + n;
    /* mappings are listed in address order; adjacent rw mappings may cover the range */
    while (fgets(line, sizeof line, f)) {
        unsigned long l, h;
        char perm[5] = "";
        if (sscanf(line, "%lx-%lx %4s", &l, &h, perm) != 3)
            continue;
        if (cur >= l && cur < h) {
            if (perm[0] != 'r' || (perm[1] != 'w' && !read_only))
                break;
            writable &= perm[1] == 'w';
            if (cur == a)
                *lo = l;
            *hi = h;
            cur = h;
            if (cur >= end) {
                ok = 1;
                break;
            }
        }
    }
    fclose(f);
    if (!ok || !writable)
        *lo = *hi = 0;
    return ok;
}

static int host_rw(const void *p, size_t n, int read_only)
{
    uintptr_t a = (uintptr_t)p;
    if (a + n < a)
        return 0;
    pthread_mutex_lock(&rw_mu);
    int ok = a >= rw_lo && a + n <= rw_hi;
    if (!ok) {
        uintptr_t lo = 0, hi = 0;
        ok = maps_rw(a, n, read_only, &lo, &hi);
        if (ok < 0)
            ok = 1; /* cannot tell: trust the caller */
        else
            rw_lo = lo, rw_hi = hi;
    }
    pthread_mutex_unlock(&rw_mu);
    return ok;
}

/* Does [a, a + n) overlap a pinned buffer? A pin without a length counts as
 * its first byte. */
static int overlaps_pin(const struct gpustream *g, uintptr_t a, size_t n)
{
    for (int i = 0; i < g->npins; i++) {
        const struct pin *e = &g->pins[i];
        if (a < e->addr + (e->len ? e->len : 1) && e->addr < a + (n ? n : 1))
            return 1;
    }
    return 0;
}

/* The pin whose buffer starts at p (PIN, UNPIN) or, with inside, whose buffer
 * holds p (transfers into part of a pinned buffer use that pin). */
static struct pin *find_pin(struct gpustream *g, const void *p, int inside)
{
    uintptr_t a = (uintptr_t)p;
    for (int i = 0; i < g->npins; i++) {
        const struct pin *e = &g->pins[i];
        if (e->addr == a || (inside && a > e->addr && a < e->addr + e->len))
            return &g->pins[i];
    }
    return NULL;
}

/* --- pinning ----------------------------------------------------------------- */

/* PIN under g->lock. */
static int pin(struct gpustream *g, const void *value, size_t len)
{
    struct buf b;
    int rc = parse_buf(value, len, &b);
    if (rc)
        return rc;
    if (find_pin(g, b.p, 1))
        return ONI_EPINNED;
    if (g->npins == ONIGPU_MAX_PINS)
        return ONI_EBUSY; /* every slot of the pin table in use */
    struct gpu_ptr_info info;
    rc = gpu_query(b.p, &info);
    if (rc)
        return rc;
    struct pin e = {.addr = (uintptr_t)b.p, .len = b.len, .kind = info.kind};
    if (info.kind == GPU_KIND_DEVICE) {
        rc = gpu_pin_device(b.p, &info);
        if (rc)
            return rc;
    }
    if (info.kind != GPU_KIND_HOST) {
        size_t avail = (size_t)((uintptr_t)info.base + info.len - e.addr);
        if (b.explicit_len && b.len > avail)
            return ONI_EBUFFERSIZE;
        e.len = b.explicit_len ? b.len : avail;
        if (overlaps_pin(g, e.addr, e.len))
            return ONI_EPINNED; /* it would hold a pinned buffer */
        e.buffer_id = info.buffer_id;
    } else {
        if (!host_rw(b.p, b.len ? b.len : 1, 0))
            return gpu_available(NULL, 0) ? ONI_EINVALARG : ONI_ENOGPU;
        if (overlaps_pin(g, e.addr, b.len))
            return ONI_EPINNED;
        /* The card's DMA into host memory needs nothing. With CUDA and a known
         * length the buffer is page-locked too, so that the user's own copies
         * between it and the GPU are fast. */
        e.len = b.len;
        if (b.explicit_len && gpu_available(NULL, 0)) {
            rc = gpu_host_register(b.p, b.len);
            if (rc)
                return rc;
            e.registered = 1;
        }
    }
    g->pins[g->npins++] = e;
    return 0;
}

/* UNPIN under g->lock. */
static int unpin(struct gpustream *g, const void *value, size_t len)
{
    struct buf b;
    int rc = parse_buf(value, len, &b);
    if (rc)
        return rc;
    struct pin *e = find_pin(g, b.p, 0);
    if (!e)
        return ONI_ENOTPINNED;
    if (e->registered)
        rc = gpu_host_unregister(b.p);
    *e = g->pins[--g->npins];
    return rc;
}

/* resolve for a pinned buffer (pin table entry e): the allocation must still
 * be the one pinned, and long enough from b's address. */
static int resolve_pinned(const struct pin *e, int write, const struct buf *b, size_t n, struct route *rt)
{
    rt->kind = e->kind;
    if (e->kind == GPU_KIND_DEVICE || e->kind == GPU_KIND_MANAGED) {
        /* prepinned: only check that the allocation is still the one pinned
         * (an id is never reused, so the same id is the same allocation) */
        unsigned long long id;
        int rc = gpu_buffer_id(b->p, &id);
        if (rc)
            return rc;
        if (id != e->buffer_id)
            return ONI_EPINNED; /* freed (and maybe reallocated) while pinned */
        rt->on_gpu = 1;
    }
    size_t have = e->len ? e->len - (size_t)((uintptr_t)b->p - e->addr) : 0;
    if (b->explicit_len && (!have || b->len < have))
        have = b->len;
    if (have && have < n)
        return ONI_EBUFFERSIZE;
    if (((e->kind == GPU_KIND_HOST && !e->len) || e->kind == GPU_KIND_HOST_PINNED) && !host_rw(b->p, n, write))
        return ONI_EINVALARG; /* pinned without a length, or page-locked (maybe read-only): checked as unpinned */
    return 0;
}

/* resolve for a buffer not pinned: what CUDA says it is; device memory gets
 * the unpinned path's per-transfer pin. */
static int resolve_unpinned(int write, const struct buf *b, size_t n, struct route *rt)
{
    struct gpu_ptr_info info;
    int rc = gpu_query(b->p, &info);
    if (rc)
        return rc;
    rt->kind = info.kind;
    if (info.kind == GPU_KIND_DEVICE && (rc = gpu_pin_device(b->p, &info)) != 0)
        return rc;
    if (info.kind == GPU_KIND_HOST) {
        if (!host_rw(b->p, b->explicit_len ? b->len : n, write))
            return gpu_available(NULL, 0) ? ONI_EINVALARG : ONI_ENOGPU;
        return b->explicit_len && b->len < n ? ONI_EBUFFERSIZE : 0;
    }
    size_t avail = (size_t)((uintptr_t)info.base + info.len - (uintptr_t)b->p);
    if (avail < n || (b->explicit_len && b->len < n))
        return ONI_EBUFFERSIZE;
    /* Page-locked host memory may be read-only (cudaHostRegisterReadOnly):
     * the card's copy into it would crash the engine's thread. */
    if (info.kind == GPU_KIND_HOST_PINNED && !host_rw(b->p, n, write))
        return ONI_EINVALARG;
    rt->on_gpu = info.kind != GPU_KIND_HOST_PINNED;
    return 0;
}

/* Resolve the buffer of a transfer of n bytes (write: the card reads it):
 * how it is reached (*rt) and whether it is long enough. */
static int resolve(struct gpustream *g, int write, const struct buf *b, size_t n, struct route *rt)
{
    memset(rt, 0, sizeof *rt);
    struct pin *e = find_pin(g, b->p, 1);
    return e ? resolve_pinned(e, write, b, n, rt) : resolve_unpinned(write, b, n, rt);
}

/* --- chunked staging ------------------------------------------------------- */

struct staged {
    struct gpustream *g;
    uint8_t *gpu;      /* the GPU buffer */
    uint64_t deadline; /* of the whole block: every chunk's wait takes what is left */
};

/* Milliseconds left for st's block; 0 once it is over (the step then times out). */
static uint32_t left_ms(const struct staged *st) { return oni_ms_left(st->deadline); }

static int need_staging(struct gpustream *g, uint32_t chunk)
{
    int rc = 0;
    if (!g->copy)
        rc = gpu_stream_create(&g->copy);
    for (int s = 0; !rc && s < GS_SLOTS; s++)
        if (!g->ev[s])
            rc = gpu_event_create(&g->ev[s]);
    if (!rc && g->slot_cap < chunk) {
        for (int s = 0; s < GS_SLOTS; s++) {
            gpu_host_free(g->slot[s]);
            g->slot[s] = NULL;
        }
        g->slot_cap = 0;
        for (int s = 0; !rc && s < GS_SLOTS; s++)
            rc = gpu_host_alloc((void **)&g->slot[s], chunk);
        if (!rc)
            g->slot_cap = chunk;
    }
    return rc;
}

/* Read: A = the card's DMA of a chunk into a host slot, B = host -> GPU copy. */
static int rd_a(void *ctx, int s, size_t off, size_t n)
{
    struct staged *st = ctx;
    uint32_t ms = left_ms(st);
    return ms ? host_read(st->g, st->g->slot[s], n, ms) : ONI_ETIMEOUT;
}

static int rd_b(void *ctx, int s, size_t off, size_t n)
{
    struct staged *st = ctx;
    int rc = gpu_copy_async(st->g->copy, st->gpu + off, st->g->slot[s], n);
    return rc ? rc : gpu_event_record(st->g->ev[s], st->g->copy);
}

static int wait_ev(void *ctx, int s)
{
    struct staged *st = ctx;
    return gpu_event_wait(st->g->ev[s], left_ms(st)); /* 0: only checks */
}

/* Write: A = GPU -> host copy of a chunk, B = the card takes the slot. */
static int wr_a(void *ctx, int s, size_t off, size_t n)
{
    struct staged *st = ctx;
    int rc = gpu_copy_async(st->g->copy, st->g->slot[s], st->gpu + off, n);
    return rc ? rc : gpu_event_record(st->g->ev[s], st->g->copy);
}

static int wr_b(void *ctx, int s, size_t off, size_t n)
{
    struct staged *st = ctx;
    uint32_t ms = left_ms(st);
    return ms ? host_write(st->g, st->g->slot[s], n, ms) : ONI_ETIMEOUT;
}

/* Wait for the copies a timed-out chunked transfer left queued (stage_lock held). */
static int settle_copies(struct gpustream *g, uint32_t timeout_ms)
{
    int rc = gpu_stream_wait(g->copy, timeout_ms);
    if (!rc)
        g->copy_unsettled = 0;
    return rc;
}

/* A block through the host slots in chunks, all within timeout_ms. */
static int staged(struct gpustream *g, int write, uint8_t *gpu, size_t n, uint32_t chunk, uint32_t timeout_ms)
{
    uint64_t deadline = oni_ms_from_now(timeout_ms);
    pthread_mutex_lock(&g->stage_lock);
    /* Copies a timed-out run left queued may still read or write the slots:
     * settled before the slots are reused, or freed for a larger chunk. */
    int rc = g->copy_unsettled ? settle_copies(g, oni_ms_left(deadline)) : 0;
    if (!rc)
        rc = need_staging(g, chunk);
    /* A read waits for the whole block first: a chunk that timed out after
     * earlier chunks left the card would lose them. (A card without
     * wait_data reads its chunks as they come.) */
    if (!rc && !write && g->ops->wait_data)
        rc = g->ops->wait_data(g->card, n, oni_ms_left(deadline));
    if (!rc) {
        struct staged st = {g, gpu, deadline};
        struct gpu_pipe_ops rd = {&st, rd_a, NULL, rd_b, wait_ev};
        struct gpu_pipe_ops wr = {&st, wr_a, wait_ev, wr_b, NULL};
        rc = gpu_pipe_run(n, chunk, GS_SLOTS, write ? &wr : &rd);
        g->copy_unsettled = rc == ONI_ETIMEOUT;
    }
    pthread_mutex_unlock(&g->stage_lock);
    return rc;
}

/* --- transfers --------------------------------------------------------------- */

/* Under the lock: the block size, the chunk size, and how buf is reached. */
static int plan(struct gpustream *g, int write, const struct buf *b, size_t *n, uint32_t *chunk, struct route *rt)
{
    pthread_mutex_lock(&g->lock);
    *n = write ? g->wr_sz : g->rd_sz;
    *chunk = g->chunk_sz;
    int rc = resolve(g, write, b, *n, rt);
    pthread_mutex_unlock(&g->lock);
    return rc;
}

/* What memory the completion word at p is. */
static int done_route(const volatile uint32_t *p, struct route *rt)
{
    struct gpu_ptr_info info;
    memset(rt, 0, sizeof *rt);
    int rc = gpu_query((const void *)p, &info);
    if (rc)
        return rc;
    rt->kind = info.kind;
    if (info.kind == GPU_KIND_HOST && !host_rw((const void *)p, sizeof *p, 0))
        return gpu_available(NULL, 0) ? ONI_EINVALARG : ONI_ENOGPU;
    return 0;
}

static int transfer(struct gpustream *g, int write, const void *value, size_t len, uint32_t timeout_ms)
{
    struct buf b;
    int rc = parse_buf(value, len, &b);
    if (rc)
        return rc;
    size_t n;
    uint32_t chunk;
    struct route rt;
    rc = plan(g, write, &b, &n, &chunk, &rt);
    if (rc)
        return rc;
    if (rt.on_gpu && chunk)
        return staged(g, write, b.p, n, chunk, timeout_ms);
    if (!rt.on_gpu)
        return write ? host_write(g, b.p, n, timeout_ms) : host_read(g, b.p, n, timeout_ms);
    return write ? g->ops->write(g->card, b.p, n, 1, timeout_ms) : g->ops->read(g->card, b.p, n, 1, timeout_ms);
}

static int submit(struct gpustream *g, int write, const void *value, size_t len, uint32_t timeout_ms)
{
    if (!value || len != sizeof(onigpu_xfer_t))
        return ONI_EINVALARG;
    const onigpu_xfer_t *x = value;
    if (!x->buf || !x->done || (uintptr_t)x->done % sizeof *x->done)
        return ONI_EINVALARG; /* a record must be one aligned word: written at once */
    struct buf b = {.p = x->buf, .len = (size_t)x->len, .explicit_len = x->len != 0};
    size_t n;
    uint32_t chunk;
    struct route rt, done;
    int rc = plan(g, write, &b, &n, &chunk, &rt);
    if (!rc)
        rc = done_route(x->done, &done);
    if (rc)
        return rc;
    if (!g->ops->submit)
        return ONI_EUNIMPL;
    onigpu_xfer_t job = *x;
    job.len = n;
    return g->ops->submit(g->card, write, &job, rt.on_gpu, done.kind == GPU_KIND_DEVICE, timeout_ms);
}

/* Wait up to timeout_ms until the DMA engine has no job queued or running
 * and no copy that outlived its wait (ops->idle), nor a chunked transfer's
 * staging copy: a buffer about to be unpinned (and then freed) may be one
 * they still write. */
static int dma_quiet(struct gpustream *g, uint32_t timeout_ms)
{
    uint64_t deadline = oni_ms_from_now(timeout_ms);
    while (g->ops->idle && !g->ops->idle(g->card)) {
        if (oni_now_ns() >= deadline)
            return ONI_ETIMEOUT;
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
    uint64_t now = oni_now_ns();
    uint32_t left = now < deadline ? (uint32_t)((deadline - now) / 1000000u) : 0;
    pthread_mutex_lock(&g->stage_lock); /* and the staging copies of a chunked transfer */
    int rc = g->copy_unsettled ? settle_copies(g, left ? left : 1) : 0;
    pthread_mutex_unlock(&g->stage_lock);
    return rc;
}

/* Before an UNPIN: a bad argument or a buffer not pinned is answered at
 * once; a pinned one waits for the DMA engine (dma_quiet). */
static int unpin_ready(struct gpustream *g, const void *value, size_t len, uint32_t timeout_ms)
{
    struct buf b;
    int rc = parse_buf(value, len, &b);
    if (rc)
        return rc;
    pthread_mutex_lock(&g->lock);
    int pinned = find_pin(g, b.p, 0) != NULL;
    pthread_mutex_unlock(&g->lock);
    return pinned ? dma_quiet(g, timeout_ms) : ONI_ENOTPINNED;
}

/* An option that only changes state: under the lock (an UNPIN once the
 * DMA engine is quiet). */
static int locked_opt(struct gpustream *g, int opt, const void *value, size_t len, uint32_t timeout_ms)
{
    int rc = opt == ONI_DRV_UNPIN ? unpin_ready(g, value, len, timeout_ms) : 0;
    if (rc)
        return rc;
    pthread_mutex_lock(&g->lock);
    switch (opt) {
    case ONI_DRV_RD_SZ:
        rc = set_size(&g->rd_sz, value, len, 0);
        break;
    case ONI_DRV_WR_SZ:
        rc = set_size(&g->wr_sz, value, len, 0);
        break;
    case ONI_DRV_CHUNK_SZ:
        rc = set_size(&g->chunk_sz, value, len, 1);
        break;
    case ONI_DRV_PIN:
        rc = pin(g, value, len);
        break;
    default: /* ONI_DRV_UNPIN */
        rc = unpin(g, value, len);
        break;
    }
    pthread_mutex_unlock(&g->lock);
    return rc;
}

/* ONI_DRV_DMA_AGENT: the DMA engine's agent limit (where the card has one). */
static int set_agent(struct gpustream *g, const void *value, size_t len)
{
    uint32_t v;
    int rc = oni_opt_u32(value, len, &v);
    if (rc)
        return rc;
    if (v > ONIGPU_MAX_BLOCK)
        return ONI_EINVALARG;
    return g->ops->set_agent ? g->ops->set_agent(g->card, v) : ONI_EUNIMPL;
}

int gpustream_set_opt(struct gpustream *g, int opt, const void *value, size_t len, uint32_t timeout_ms)
{
    switch (opt) {
    case ONI_DRV_RD_SZ:
    case ONI_DRV_WR_SZ:
    case ONI_DRV_CHUNK_SZ:
    case ONI_DRV_PIN:
    case ONI_DRV_UNPIN:
        return locked_opt(g, opt, value, len, timeout_ms);
    case ONI_DRV_READ:
        return transfer(g, 0, value, len, timeout_ms);
    case ONI_DRV_WRITE:
        return transfer(g, 1, value, len, timeout_ms);
    case ONI_DRV_DMA_AGENT:
        return set_agent(g, value, len);
    case ONI_DRV_READ_ASYNC:
        return submit(g, 0, value, len, timeout_ms);
    case ONI_DRV_WRITE_ASYNC:
        return submit(g, 1, value, len, timeout_ms);
    default:
        return ONI_EINVALOPT;
    }
}

int gpustream_get_opt(struct gpustream *g, int opt, void *value, size_t *len)
{
    pthread_mutex_lock(&g->lock);
    uint32_t v = opt == ONI_DRV_RD_SZ ? g->rd_sz : opt == ONI_DRV_WR_SZ ? g->wr_sz : g->chunk_sz;
    pthread_mutex_unlock(&g->lock);
    switch (opt) {
    case ONI_DRV_RD_SZ:
    case ONI_DRV_WR_SZ:
    case ONI_DRV_CHUNK_SZ:
        return put_u32(value, len, v);
    case ONI_DRV_DMA_AGENT:
        return put_u32(value, len, g->ops->agent ? (uint32_t)g->ops->agent(g->card) : 0);
    default:
        return ONI_EINVALOPT;
    }
}
