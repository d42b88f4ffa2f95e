/* dma.c - the emulated card's DMA engine for the GPU data streams (dma.h). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include "dma.h"
#include "gpu/gpu.h"
#include "onii.h"

#define DMA_QUEUE 256          /* queued asynchronous jobs */
#define DMA_MAX_LOCKED 64      /* page-locked windows of ring memory */
#define DMA_WINDOW (64u << 20) /* ring memory is page-locked in windows of this size */

struct dma_job {
    int write, buf_gpu, done_gpu;
    onigpu_xfer_t x;
    uint32_t timeout_ms;
};

struct locked {
    uintptr_t lo, hi;
    int direct; /* page-locked and locked in RAM: the copy engine reads it in place */
    int ours;   /* registered by the engine: undone at destroy */
};

struct emu_dma {
    struct emu_card *card;
    pthread_mutex_t xfer;   /* one transfer at a time; guards everything below up to q_lock */
    struct gpu_stream *stream;
    uint8_t *wstage;        /* page-locked: the card's memory for GPU -> card payload */
    size_t wstage_cap;
    uint8_t *bounce;        /* page-locked: ring memory that could not be locked goes through it */
    size_t bounce_cap;
    struct locked locked[DMA_MAX_LOCKED];
    int nlocked;
    int link_free;          /* link model adds nothing: completion words go in-stream */
    struct emu_dma_stats st;

    pthread_mutex_t q_lock; /* the job queue */
    pthread_cond_t q_cond, q_idle;
    struct dma_job q[DMA_QUEUE];
    size_t q_head, q_count;
    int busy, stop, thread_up, job_err;
    pthread_t thread;
};

static void *engine(void *arg);

int emu_dma_create(struct emu_card *card, struct emu_dma **out)
{
    if (!card || !out)
        return ONI_EINVALARG;
    struct emu_dma *d = calloc(1, sizeof *d);
    if (!d)
        return ONI_EBADALLOC;
    d->card = card;
    pthread_mutex_init(&d->xfer, NULL);
    pthread_mutex_init(&d->q_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&d->q_cond, &ca);
    pthread_cond_init(&d->q_idle, &ca);
    pthread_condattr_destroy(&ca);
    oniemu_link_t link;
    memset(&link, 0, sizeof link);
    emu_card_link(card, &link);
    d->link_free = link.bandwidth_Bps == 0 && link.latency_s == 0;
    *out = d;
    return 0;
}

void emu_dma_destroy(struct emu_dma *d)
{
    if (!d)
        return;
    pthread_mutex_lock(&d->q_lock);
    d->stop = 1;
    pthread_cond_broadcast(&d->q_cond);
    int up = d->thread_up;
    pthread_mutex_unlock(&d->q_lock);
    if (up)
        pthread_join(d->thread, NULL);
    gpu_stream_destroy(d->stream);
    for (int i = 0; i < d->nlocked; i++)
        if (d->locked[i].ours) {
            munlock((void *)d->locked[i].lo, d->locked[i].hi - d->locked[i].lo);
            gpu_host_unregister((void *)d->locked[i].lo);
        }
    gpu_host_free(d->wstage);
    gpu_host_free(d->bounce);
    pthread_cond_destroy(&d->q_cond);
    pthread_cond_destroy(&d->q_idle);
    pthread_mutex_destroy(&d->q_lock);
    pthread_mutex_destroy(&d->xfer);
    free(d);
}

/* Bounds of the memory mapping that holds address a (from /proc/self/maps). */
static int map_bounds(uintptr_t a, uintptr_t *lo, uintptr_t *hi)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return ONI_EREADFAILURE;
    char line[512];
    int rc = ONI_EREADFAILURE;
    while (fgets(line, sizeof line, f)) {
        unsigned long l, h;
        if (sscanf(line, "%lx-%lx", &l, &h) == 2 && a >= l && a < h) {
            *lo = l, *hi = h;
            rc = 0;
            break;
        }
    }
    fclose(f);
    return rc;
}

/* The window holding ring address a, set up on first use: the window of
 * DMA_WINDOW bytes of a's memory mapping that holds a (windows never overlap,
 * so registrations never collide), page-locked for the copy engine
 * (cudaHostRegister) and locked in RAM (mlock). The second matters: the card
 * may give FIFO pages back with madvise(MADV_DONTNEED) after a backlog, which
 * would silently detach page-locked pages from the ring; the kernel refuses
 * that for locked memory. Where mlock is not allowed (RLIMIT_MEMLOCK) the
 * window is not used in place: its bytes go through a page-locked bounce
 * buffer (counted in bounced_bytes). Cached for the engine's lifetime; NULL
 * on failure (rc set). */
static const struct locked *window(struct emu_dma *d, uintptr_t a, int *rc)
{
    for (int i = 0; i < d->nlocked; i++)
        if (a >= d->locked[i].lo && a < d->locked[i].hi)
            return &d->locked[i];
    uintptr_t lo, hi;
    if ((*rc = map_bounds(a, &lo, &hi)))
        return NULL;
    if (d->nlocked == DMA_MAX_LOCKED) {
        *rc = ONI_EBADALLOC;
        return NULL;
    }
    uintptr_t wlo = a - (a - lo) % DMA_WINDOW, whi = wlo + DMA_WINDOW;
    if (whi > hi)
        whi = hi;
    struct locked w = {wlo, whi, 1, 0};
    *rc = gpu_host_register((void *)wlo, whi - wlo);
    if (*rc == ONI_EPINNED) { /* page-locked by its owner already: the owner keeps it in place */
        *rc = 0;
    } else if (!*rc) {
        if (mlock((void *)wlo, whi - wlo)) {
            gpu_host_unregister((void *)wlo);
            w.direct = 0;
        } else {
            w.ours = 1;
            d->st.locked_bytes += whi - wlo;
        }
    } else {
        return NULL;
    }
    d->locked[d->nlocked] = w;
    return &d->locked[d->nlocked++];
}

static int grow(uint8_t **buf, size_t *cap, size_t n)
{
    if (*cap >= n)
        return 0;
    gpu_host_free(*buf);
    *buf = NULL;
    *cap = 0;
    size_t c = 4096;
    while (c < n)
        c *= 2;
    int rc = gpu_host_alloc((void **)buf, c);
    if (!rc)
        *cap = c;
    return rc;
}

/* Queue the copy of n bytes of ring memory at p to dst + off with the copy
 * engine: one copy per window it touches (a copy may not span two
 * registrations), read in place or, for a window that is not, through the
 * bounce buffer at off (the caller sized it to the whole block). */
static int copy_from_ring(struct emu_dma *d, uint8_t *dst, size_t off, const uint8_t *p, size_t n)
{
    while (n) {
        int rc = 0;
        const struct locked *w = window(d, (uintptr_t)p, &rc);
        if (!w)
            return rc;
        size_t k = w->hi - (uintptr_t)p < n ? w->hi - (uintptr_t)p : n;
        if (w->direct) {
            rc = gpu_copy_async(d->stream, dst + off, p, k);
        } else {
            memcpy(d->bounce + off, p, k);
            d->st.bounced_bytes += k;
            rc = gpu_copy_async(d->stream, dst + off, d->bounce + off, k);
        }
        if (rc)
            return rc;
        off += k, p += k, n -= k;
    }
    return 0;
}

static int need_stream(struct emu_dma *d)
{
    return d->stream ? 0 : gpu_stream_create(&d->stream);
}

/* Write the completion word from the CPU, after the payload is complete. */
static void post_host(volatile uint32_t *done, uint32_t seq)
{
    __atomic_store_n((uint32_t *)done, seq, __ATOMIC_RELEASE);
}

/* One card -> buffer transfer; the caller holds d->xfer. done may be NULL. */
static int do_read(struct emu_dma *d, void *dst, size_t n, int dst_gpu, volatile uint32_t *done,
                   int done_gpu, uint32_t seq, uint32_t timeout_ms)
{
    struct emu_span sp[2];
    int rc = emu_card_fifo_peek(d->card, EMU_STREAM_GPU, n, sp, timeout_ms);
    if (rc < 0)
        return rc;
    rc = 0;
    uint64_t t0 = oni_now_ns(); /* the link carries the payload from here on */
    int in_stream = 0;
    if (dst_gpu || done_gpu) {
        rc = need_stream(d);
        if (!rc && dst_gpu)
            rc = grow(&d->bounce, &d->bounce_cap, n);
        if (rc)
            return rc; /* nothing consumed: the data stays in the FIFO */
    }
    if (dst_gpu) {
        rc = copy_from_ring(d, dst, 0, sp[0].p, sp[0].n);
        if (!rc && sp[1].n)
            rc = copy_from_ring(d, dst, sp[0].n, sp[1].p, sp[1].n);
        if (!rc && done && done_gpu && d->link_free) {
            rc = gpu_write_word_async(d->stream, done, seq);
            in_stream = 1;
        }
        if (!rc)
            rc = gpu_stream_wait(d->stream, timeout_ms);
    } else {
        memcpy(dst, sp[0].p, sp[0].n);
        if (sp[1].n)
            memcpy((uint8_t *)dst + sp[0].n, sp[1].p, sp[1].n);
    }
    emu_card_link_delay(d->card, n, oni_now_ns() - t0);
    emu_card_fifo_consume(d->card, EMU_STREAM_GPU, n);
    if (rc) {
        d->st.failed++;
        return rc == ONI_ETIMEOUT ? rc : ONI_EREADFAILURE;
    }
    if (done && !in_stream) {
        if (done_gpu) {
            rc = gpu_write_word_async(d->stream, done, seq);
            if (!rc)
                rc = gpu_stream_wait(d->stream, timeout_ms);
        } else {
            post_host(done, seq);
        }
    }
    d->st.reads++;
    d->st.bytes_read += n;
    return rc;
}

/* One buffer -> card transfer; the caller holds d->xfer. done may be NULL. */
static int do_write(struct emu_dma *d, const void *src, size_t n, int src_gpu, volatile uint32_t *done,
                    int done_gpu, uint32_t seq, uint32_t timeout_ms)
{
    const void *from = src;
    int rc = 0;
    if (src_gpu || done_gpu)
        rc = need_stream(d);
    if (!rc && src_gpu) {
        /* The card reads the GPU buffer into its own (page-locked) memory. */
        rc = grow(&d->wstage, &d->wstage_cap, n);
        if (!rc)
            rc = gpu_copy_async(d->stream, d->wstage, src, n);
        if (!rc)
            rc = gpu_stream_wait(d->stream, timeout_ms);
        from = d->wstage;
    }
    if (rc) {
        d->st.failed++;
        return rc;
    }
    /* emu_card_write applies the link model to the whole transfer. */
    rc = emu_card_write(d->card, EMU_STREAM_GPU_WRITE, from, n, timeout_ms);
    if (rc < 0) {
        d->st.failed++;
        return rc;
    }
    rc = 0;
    if (done) {
        if (done_gpu) {
            rc = gpu_write_word_async(d->stream, done, seq);
            if (!rc)
                rc = gpu_stream_wait(d->stream, timeout_ms);
        } else {
            post_host(done, seq);
        }
    }
    d->st.writes++;
    d->st.bytes_written += n;
    return rc;
}

static void deadline_ts(struct timespec *ts, uint32_t ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* Wait until the queue is empty and no job runs; the caller holds q_lock. */
static int wait_idle(struct emu_dma *d, uint32_t timeout_ms)
{
    struct timespec ts;
    deadline_ts(&ts, timeout_ms);
    while (d->q_count || d->busy)
        if (pthread_cond_timedwait(&d->q_idle, &d->q_lock, &ts) == ETIMEDOUT)
            return (d->q_count || d->busy) ? ONI_ETIMEOUT : 0;
    return 0;
}

/* Synchronous transfers run in the caller's thread (lowest latency), after
 * every queued job, so the stream order is the order of the calls. */
static int sync_begin(struct emu_dma *d, uint32_t timeout_ms)
{
    pthread_mutex_lock(&d->q_lock);
    int rc = wait_idle(d, timeout_ms);
    if (!rc && d->job_err) {
        rc = d->job_err;
        d->job_err = 0;
    }
    pthread_mutex_unlock(&d->q_lock);
    if (!rc)
        pthread_mutex_lock(&d->xfer);
    return rc;
}

int emu_dma_read(struct emu_dma *d, void *dst, size_t n, int dst_gpu, uint32_t timeout_ms)
{
    if (!d || !dst || !n)
        return ONI_EINVALARG;
    int rc = sync_begin(d, timeout_ms);
    if (rc)
        return rc;
    rc = do_read(d, dst, n, dst_gpu, NULL, 0, 0, timeout_ms);
    pthread_mutex_unlock(&d->xfer);
    return rc;
}

int emu_dma_write(struct emu_dma *d, const void *src, size_t n, int src_gpu, uint32_t timeout_ms)
{
    if (!d || !src || !n)
        return ONI_EINVALARG;
    int rc = sync_begin(d, timeout_ms);
    if (rc)
        return rc;
    rc = do_write(d, src, n, src_gpu, NULL, 0, 0, timeout_ms);
    pthread_mutex_unlock(&d->xfer);
    return rc;
}

static void *engine(void *arg)
{
    struct emu_dma *d = arg;
    pthread_mutex_lock(&d->q_lock);
    for (;;) {
        while (!d->q_count && !d->stop)
            pthread_cond_wait(&d->q_cond, &d->q_lock);
        if (!d->q_count)
            break; /* stopping, queue drained */
        struct dma_job j = d->q[d->q_head];
        d->q_head = (d->q_head + 1) % DMA_QUEUE;
        d->q_count--;
        d->busy = 1;
        pthread_mutex_unlock(&d->q_lock);

        pthread_mutex_lock(&d->xfer);
        int rc = j.write ? do_write(d, j.x.buf, j.x.len, j.buf_gpu, j.x.done, j.done_gpu, j.x.seq, j.timeout_ms)
                         : do_read(d, j.x.buf, j.x.len, j.buf_gpu, j.x.done, j.done_gpu, j.x.seq, j.timeout_ms);
        pthread_mutex_unlock(&d->xfer);

        pthread_mutex_lock(&d->q_lock);
        if (rc && !d->job_err)
            d->job_err = rc;
        d->busy = 0;
        if (!d->q_count)
            pthread_cond_broadcast(&d->q_idle);
    }
    pthread_mutex_unlock(&d->q_lock);
    return NULL;
}

int emu_dma_submit(struct emu_dma *d, int write, const onigpu_xfer_t *x, int buf_gpu, int done_gpu,
                   uint32_t timeout_ms)
{
    if (!d || !x || !x->buf || !x->len || !x->done)
        return ONI_EINVALARG;
    pthread_mutex_lock(&d->q_lock);
    int rc = 0;
    if (d->job_err) {
        rc = d->job_err;
        d->job_err = 0;
    } else if (d->q_count == DMA_QUEUE) {
        rc = ONI_EBUSY;
    } else if (!d->thread_up) {
        if (pthread_create(&d->thread, NULL, engine, d))
            rc = ONI_EBADALLOC;
        else
            d->thread_up = 1;
    }
    if (!rc) {
        d->q[(d->q_head + d->q_count) % DMA_QUEUE] =
            (struct dma_job){.write = write, .buf_gpu = buf_gpu, .done_gpu = done_gpu, .x = *x,
                             .timeout_ms = timeout_ms};
        d->q_count++;
        pthread_cond_signal(&d->q_cond);
    }
    pthread_mutex_unlock(&d->q_lock);
    return rc;
}

int emu_dma_flush(struct emu_dma *d, uint32_t timeout_ms)
{
    if (!d)
        return ONI_EINVALARG;
    pthread_mutex_lock(&d->q_lock);
    int rc = wait_idle(d, timeout_ms);
    if (!rc && d->job_err) {
        rc = d->job_err;
        d->job_err = 0;
    }
    pthread_mutex_unlock(&d->q_lock);
    return rc;
}

void emu_dma_stats(struct emu_dma *d, struct emu_dma_stats *st)
{
    pthread_mutex_lock(&d->xfer);
    *st = d->st;
    pthread_mutex_unlock(&d->xfer);
}
