/* dma.c - the emulated card's DMA engine for the GPU data streams (dma.h). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include "dma.h"
#include "dma_agent.h"
#include "gpu/gpu.h"
#include "oni.h"
#include "oni/util/clock.h"

#define DMA_QUEUE 256          /* queued asynchronous jobs */
#define DMA_MAX_LOCKED 64      /* page-locked windows of ring memory */
#define DMA_WINDOW (64u << 20) /* ring memory is page-locked in windows of this size */
#define AGENT_SEGS 8           /* pieces of one agent transfer: two spans, each split at window ends */
#define AGENT_STOP_MS 2000     /* how long destroy waits for the agent kernel to stop */
#define ABORT_SLICE_MS 20      /* a wait for the card's data looks for emu_dma_abort this often */

struct dma_job {
    int buf_gpu, done_gpu;
    onigpu_xfer_t x;
    uint32_t timeout_ms;
};

struct locked {
    uintptr_t lo, hi;
    int direct; /* page-locked and locked in RAM: the copy engine reads it in place */
    int ours;   /* registered by the engine: undone at destroy */
    int mapped; /* agent: 0 not looked up, 1 dev valid, -1 not mapped for the device */
    uint8_t *dev; /* agent: the device address of lo */
};

/* One direction of the engine: its own lock, copy stream and job queue, so
 * that a read waiting for data never holds up a write of results. */
struct dma_chan {
    struct emu_dma *d;
    int write;              /* 0: card -> buffer, 1: buffer -> card */
    pthread_mutex_t xfer;   /* one transfer of this direction at a time */
    struct gpu_stream *stream;
    int unsettled;          /* a wait on stream timed out with work queued (atomic): see settle() */
    size_t owed;            /* read side: FIFO bytes of a committed transfer, consumed once settled */

    pthread_mutex_t q_lock; /* the job queue */
    pthread_cond_t q_cond, q_idle;
    struct dma_job q[DMA_QUEUE];
    size_t q_head, q_count;
    int busy, stop, thread_up, job_err;
    pthread_t thread;
};

struct emu_dma {
    struct emu_card *card;
    int link_free;          /* link model adds nothing: completion words go in-stream */
    struct dma_chan ch[2];
    /* read side, under ch[0].xfer */
    uint8_t *bounce;        /* page-locked: ring memory that could not be locked goes through it */
    size_t bounce_cap;
    struct locked locked[DMA_MAX_LOCKED];
    int nlocked;
    struct locked spill;    /* a window beyond locked[]: not locked, looked up anew each time */
    uint64_t reads, bytes_read, locked_bytes, bounced_bytes;
    /* write side, under ch[1].xfer */
    uint8_t *wstage;        /* page-locked: the card's memory for GPU -> card payload */
    size_t wstage_cap;
    uint64_t writes, bytes_written;
    uint64_t failed;        /* both sides, atomic */
    int aborted;            /* atomic: emu_dma_abort was called */
    /* the agent (dma_agent.h): set under both channels' xfer locks */
    struct emu_agent *agent;
    size_t agent_max;       /* transfers of at most this many bytes go to the agent; 0 = none (atomic) */
    int agent_dead;         /* atomic: it failed; the copy engine takes over */
    uint8_t *wstage_dev;    /* the device address of wstage (write side) */
    uint64_t agent_reads, agent_writes; /* under the channel's xfer lock */
};

static void *engine(void *arg);

static void chan_init(struct emu_dma *d, int write)
{
    struct dma_chan *c = &d->ch[write];
    c->d = d;
    c->write = write;
    pthread_mutex_init(&c->xfer, NULL);
    pthread_mutex_init(&c->q_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->q_cond, &ca);
    pthread_cond_init(&c->q_idle, &ca);
    pthread_condattr_destroy(&ca);
}

/* Let the channel's queued jobs finish (none waits for data any more: see
 * emu_dma_abort), stop its thread, free its stream. */
static void chan_fini(struct dma_chan *c)
{
    pthread_mutex_lock(&c->q_lock);
    c->stop = 1;
    pthread_cond_broadcast(&c->q_cond);
    int up = c->thread_up;
    pthread_mutex_unlock(&c->q_lock);
    if (up)
        pthread_join(c->thread, NULL);
    gpu_stream_destroy(c->stream);
    pthread_cond_destroy(&c->q_cond);
    pthread_cond_destroy(&c->q_idle);
    pthread_mutex_destroy(&c->q_lock);
    pthread_mutex_destroy(&c->xfer);
}

int emu_dma_create(struct emu_card *card, struct emu_dma **out)
{
    if (!card || !out)
        return ONI_EINVALARG;
    struct emu_dma *d = calloc(1, sizeof *d);
    if (!d)
        return ONI_EBADALLOC;
    d->card = card;
    chan_init(d, 0);
    chan_init(d, 1);
    oniemu_link_t link;
    memset(&link, 0, sizeof link);
    emu_card_link(card, &link);
    d->link_free = link.bandwidth_Bps == 0 && link.latency_s == 0;
    *out = d;
    return 0;
}

void emu_dma_abort(struct emu_dma *d)
{
    if (d)
        __atomic_store_n(&d->aborted, 1, __ATOMIC_RELEASE);
}

void emu_dma_destroy(struct emu_dma *d)
{
    if (!d)
        return;
    emu_dma_abort(d);
    chan_fini(&d->ch[0]);
    chan_fini(&d->ch[1]);
    emu_agent_stop(d->agent, AGENT_STOP_MS); /* says so when the kernel is stuck; never waits longer */
    for (int i = 0; i < d->nlocked; i++)
        if (d->locked[i].ours) {
            munlock((void *)d->locked[i].lo, d->locked[i].hi - d->locked[i].lo);
            gpu_host_unregister((void *)d->locked[i].lo);
        }
    gpu_host_free(d->wstage);
    gpu_host_free(d->bounce);
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
 * buffer (counted in bounced_bytes). Cached for the engine's lifetime, up
 * to DMA_MAX_LOCKED windows; NULL on failure (rc set). */
static const struct locked *window(struct emu_dma *d, uintptr_t a, int *rc)
{
    for (int i = 0; i < d->nlocked; i++)
        if (a >= d->locked[i].lo && a < d->locked[i].hi)
            return &d->locked[i];
    uintptr_t lo, hi;
    if ((*rc = map_bounds(a, &lo, &hi)))
        return NULL;
    uintptr_t wlo = a - (a - lo) % DMA_WINDOW, whi = wlo + DMA_WINDOW;
    if (whi > hi)
        whi = hi;
    if (d->nlocked == DMA_MAX_LOCKED) {
        /* Every slot taken (a FIFO of more windows, a backlog far into it):
         * this window's bytes go through the bounce buffer, as those of
         * memory that could not be locked do; the agent leaves them alone. */
        d->spill = (struct locked){wlo, whi, 0, 0, -1, NULL};
        return &d->spill;
    }
    struct locked w = {wlo, whi, 1, 0, 0, NULL};
    *rc = gpu_host_register((void *)wlo, whi - wlo);
    if (*rc == ONI_EPINNED) { /* page-locked by its owner already: the owner keeps it in place */
        *rc = 0;
    } else if (!*rc) {
        if (mlock((void *)wlo, whi - wlo)) {
            gpu_host_unregister((void *)wlo);
            w.direct = 0;
        } else {
            w.ours = 1;
            d->locked_bytes += whi - wlo;
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
            rc = gpu_copy_async(d->ch[0].stream, dst + off, p, k);
        } else {
            memcpy(d->bounce + off, p, k);
            d->bounced_bytes += k;
            rc = gpu_copy_async(d->ch[0].stream, dst + off, d->bounce + off, k);
        }
        if (rc)
            return rc;
        off += k, p += k, n -= k;
    }
    return 0;
}

static void count_failure(struct emu_dma *d)
{
    __atomic_fetch_add(&d->failed, 1, __ATOMIC_RELAXED);
}

/* --- the agent (dma_agent.h): small transfers without a CUDA call ------------ */

/* The agent takes an n-byte transfer when it runs, has not failed, and n is
 * within its limit. The caller holds its channel's xfer lock. */
static int agent_takes(struct emu_dma *d, size_t n)
{
    return d->agent && n <= d->agent_max && !__atomic_load_n(&d->agent_dead, __ATOMIC_ACQUIRE);
}

/* The agent failed (rc): say so once, stop it from taking any descriptor
 * still in its ring (so a late copy can never land in a buffer its owner
 * has reused), and let the copy engine move everything from now on. */
static void agent_fail(struct emu_dma *d, int rc)
{
    if (!__atomic_exchange_n(&d->agent_dead, 1, __ATOMIC_ACQ_REL)) {
        /* the code only: the card is below liboni (oni_error_str), docs/errors.md names it */
        fprintf(stderr, "emu: DMA agent failed (ONI error %d); the copy engine moves every block from now on\n", rc);
        emu_agent_halt(d->agent);
    }
}

struct seg {
    const uint8_t *src; /* device address */
    size_t off, n;
};

/* Split ring span p..p+n (landing at dst offset off) into device-addressable
 * pieces, one per window. Returns the number added, or -1 when a window is
 * not mapped for the device (then the copy engine must do this block). */
static int agent_segs(struct emu_dma *d, const uint8_t *p, size_t n, size_t off, struct seg *sg, int room)
{
    int k = 0;
    while (n) {
        int rc = 0;
        struct locked *w = (struct locked *)window(d, (uintptr_t)p, &rc);
        if (!w || !w->direct || k == room)
            return -1;
        if (!w->mapped) {
            void *dev = NULL;
            w->mapped = emu_agent_devptr((void *)w->lo, &dev) ? -1 : 1;
            w->dev = dev;
        }
        if (w->mapped < 0)
            return -1;
        size_t m = w->hi - (uintptr_t)p < n ? w->hi - (uintptr_t)p : n;
        sg[k++] = (struct seg){w->dev + ((uintptr_t)p - w->lo), off, m};
        off += m, p += m, n -= m;
    }
    return k;
}

/* Post the pieces to dst (record on the last, if any) and wait for them.
 * Returns 0, 1 when nothing was posted and the copy engine must do it, or an
 * error (the agent is then out of service). */
static int agent_run(struct emu_dma *d, uint8_t *dst, const struct seg *sg, int k, uint32_t *done, uint32_t seq,
                     int host_reader, uint32_t timeout_ms)
{
    uint64_t end = oni_ms_from_now(timeout_ms), ticket = 0;
    int rc = 0, posted = 0;
    for (int i = 0; i < k && !rc; i++) {
        int last = i == k - 1;
        rc = emu_agent_post(d->agent, dst + sg[i].off, sg[i].src, sg[i].n, last ? done : NULL, seq, host_reader,
                            end, &ticket);
        if (rc == ONI_EINIT && i == 0) {
            agent_fail(d, rc);
            return 1; /* nothing posted: the copy engine takes this one */
        }
        posted += !rc;
    }
    if (!rc)
        rc = emu_agent_wait(d->agent, ticket, end);
    if (rc) {
        agent_fail(d, rc); /* halts it: a copy it had taken lands first */
        /* Late, but done (its record written too): the transfer happened, and
         * failing it would deliver its bytes again. Only if every piece was
         * posted: the last one's ticket then covers them all. */
        if (posted == k && ticket && emu_agent_done(d->agent, ticket))
            rc = 0;
    }
    return rc;
}

/* Card -> GPU by the agent: the pieces of the FIFO spans straight into dst;
 * a GPU completion record written by the agent behind them when in_rec.
 * Returns 0, 1 (copy engine instead) or an error. */
static int agent_read(struct emu_dma *d, uint8_t *dst, const struct emu_span sp[2], uint32_t *done, uint32_t seq,
                      uint32_t timeout_ms)
{
    struct seg sg[AGENT_SEGS];
    int k = agent_segs(d, sp[0].p, sp[0].n, 0, sg, AGENT_SEGS), k2 = 0;
    if (k >= 0 && sp[1].n)
        k2 = agent_segs(d, sp[1].p, sp[1].n, sp[0].n, sg + k, AGENT_SEGS - k);
    if (k < 0 || k2 < 0)
        return 1;
    return agent_run(d, dst, sg, k + k2, done, seq, 0, timeout_ms);
}

/* emu_card_fifo_peek of the GPU stream, its wait cut in slices so that
 * emu_dma_abort ends it: then the FIFO is looked at once more, without
 * waiting. The clock is read only after a slice passed empty. */
static int peek(struct emu_dma *d, size_t n, struct emu_span sp[2], uint32_t timeout_ms)
{
    uint64_t end = 0;
    for (;;) {
        int aborted = __atomic_load_n(&d->aborted, __ATOMIC_ACQUIRE);
        uint32_t slice = aborted ? 0 : timeout_ms < ABORT_SLICE_MS ? timeout_ms : ABORT_SLICE_MS;
        int rc = emu_card_fifo_peek(d->card, EMU_STREAM_GPU, n, sp, slice);
        if (rc != ONI_ETIMEOUT || aborted)
            return rc;
        uint64_t now = oni_now_ns();
        if (!end)
            end = now + (uint64_t)(timeout_ms - slice) * 1000000u;
        if (now >= end)
            return rc;
        timeout_ms = (uint32_t)((end - now + 999999) / 1000000);
    }
}

static int need_stream(struct dma_chan *c)
{
    return c->stream ? 0 : gpu_stream_create(&c->stream);
}

/* Wait for the work queued on the channel's stream; the caller holds
 * c->xfer. A timeout leaves that work running, still reading and writing
 * its buffers: c->unsettled then says so until a later wait sees it done.
 * Meanwhile the next transfer of the channel waits for it first, a read
 * leaves its FIFO span in the card (the generator must not overwrite what
 * the copy reads; the data is delivered again, not lost), and
 * emu_dma_idle is false (an UNPIN waits before the buffer may be freed). */
static int settle(struct dma_chan *c, uint32_t timeout_ms)
{
    int rc = gpu_stream_wait(c->stream, timeout_ms);
    __atomic_store_n(&c->unsettled, rc == ONI_ETIMEOUT, __ATOMIC_RELAXED);
    if (rc != ONI_ETIMEOUT && c->owed) {
        /* The copy has read them (or the stream failed: then they stay in
         * the card, delivered again): the card may have them back. */
        emu_card_fifo_consume(c->d->card, EMU_STREAM_GPU, rc ? 0 : c->owed);
        c->owed = 0;
    }
    return rc;
}

static int is_unsettled(struct dma_chan *c) { return __atomic_load_n(&c->unsettled, __ATOMIC_RELAXED); }

/* Write the completion record once the payload is complete: GPU memory by
 * the channel's stream, host memory by the CPU (release order). A GPU record
 * queued in time lands even if the wait for it does not end in time: the
 * transfer has happened, so that is no failure (the next transfer of the
 * channel waits for the stream first). */
static int post(struct dma_chan *c, volatile uint32_t *done, int done_gpu, uint32_t seq, uint32_t timeout_ms)
{
    if (!done_gpu) {
        __atomic_store_n((uint32_t *)done, seq, __ATOMIC_RELEASE);
        return 0;
    }
    int rc = gpu_write_word_async(c->stream, done, seq);
    if (!rc)
        rc = settle(c, timeout_ms);
    return rc == ONI_ETIMEOUT ? 0 : rc;
}

/* One card -> buffer transfer; the caller holds ch[0].xfer. done may be NULL. */
static int do_read(struct emu_dma *d, void *dst, size_t n, int dst_gpu, volatile uint32_t *done,
                   int done_gpu, uint32_t seq, uint32_t timeout_ms)
{
    struct dma_chan *c = &d->ch[0];
    struct emu_span sp[2];
    int rc = is_unsettled(c) ? settle(c, timeout_ms) : 0;
    if (rc)
        return rc;
    rc = peek(d, n, sp, timeout_ms);
    if (rc < 0)
        return rc;
    rc = 0;
    uint64_t t0 = d->link_free ? 0 : oni_now_ns(); /* the link carries the payload from here on */
    int in_stream = 0, moved = 0;
    if (dst_gpu || done_gpu) {
        rc = need_stream(c);
        if (!rc && dst_gpu)
            rc = grow(&d->bounce, &d->bounce_cap, n);
        if (rc) {
            emu_card_fifo_consume(d->card, EMU_STREAM_GPU, 0); /* nothing consumed: the data stays */
            return rc;
        }
    }
    if (dst_gpu && agent_takes(d, n)) {
        /* The agent writes a GPU record itself when no link time is left to model. */
        int rec = done && done_gpu && d->link_free;
        rc = agent_read(d, dst, sp, rec ? (uint32_t *)done : NULL, seq, timeout_ms);
        if (rc == 1) {
            rc = 0; /* the agent cannot reach this block: the copy engine moves it */
        } else {
            moved = 1;
            in_stream = rec;
            if (!rc)
                d->agent_reads++;
        }
    }
    if (dst_gpu && !moved) {
        rc = copy_from_ring(d, dst, 0, sp[0].p, sp[0].n);
        if (!rc && sp[1].n)
            rc = copy_from_ring(d, dst, sp[0].n, sp[1].p, sp[1].n);
        if (!rc && done && done_gpu && d->link_free) {
            rc = gpu_write_word_async(c->stream, done, seq);
            in_stream = !rc;
        }
        if (!rc)
            rc = settle(c, timeout_ms);
        if (rc == ONI_ETIMEOUT && in_stream) {
            /* The record is queued behind the copy: the transfer will have
             * happened once the stream gets there, and cannot be called back.
             * So it counts as done; its bytes leave the card (and the stream
             * holds them till then) when a later wait sees the copy finish. */
            c->owed = n;
            rc = 0;
        }
    } else if (!dst_gpu) {
        memcpy(dst, sp[0].p, sp[0].n);
        if (sp[1].n)
            memcpy((uint8_t *)dst + sp[0].n, sp[1].p, sp[1].n);
    }
    if (!d->link_free)
        emu_card_link_delay(d->card, n, oni_now_ns() - t0);
    /* A transfer that failed or timed out leaves its data in the card, for
     * the next read: a copy may still be reading it (see settle), and a
     * timed-out agent was halted before it finished. */
    if (!c->owed)
        emu_card_fifo_consume(d->card, EMU_STREAM_GPU, rc ? 0 : n);
    if (rc) {
        count_failure(d);
        return rc == ONI_ETIMEOUT ? rc : ONI_EREADFAILURE;
    }
    if (done && !in_stream)
        rc = post(c, done, done_gpu, seq, timeout_ms);
    d->reads++;
    d->bytes_read += n;
    return rc;
}

/* One buffer -> card transfer; the caller holds ch[1].xfer. done may be NULL. */
static int do_write(struct emu_dma *d, const void *src, size_t n, int src_gpu, volatile uint32_t *done,
                    int done_gpu, uint32_t seq, uint32_t timeout_ms)
{
    struct dma_chan *c = &d->ch[1];
    const void *from = src;
    int rc = is_unsettled(c) ? settle(c, timeout_ms) : 0; /* before wstage is reused */
    if (!rc && (src_gpu || done_gpu))
        rc = need_stream(c);
    if (!rc && src_gpu) {
        /* The card reads the GPU buffer into its own (page-locked) memory. */
        size_t cap = d->wstage_cap;
        rc = grow(&d->wstage, &d->wstage_cap, n);
        if (d->wstage_cap != cap)
            d->wstage_dev = NULL; /* reallocated */
        int moved = 0;
        if (!rc && agent_takes(d, n)) {
            void *dev = d->wstage_dev;
            if (dev || !emu_agent_devptr(d->wstage, &dev)) {
                d->wstage_dev = dev;
                struct seg sg = {src, 0, n};
                rc = agent_run(d, d->wstage_dev, &sg, 1, NULL, 0, 1, timeout_ms);
                if (rc == 1) {
                    rc = 0;
                } else {
                    moved = 1;
                    if (!rc)
                        d->agent_writes++;
                }
            }
        }
        if (!rc && !moved)
            rc = gpu_copy_async(c->stream, d->wstage, src, n);
        if (!rc && !moved)
            rc = settle(c, timeout_ms);
        from = d->wstage;
    }
    /* emu_card_write applies the link model to the whole transfer. */
    if (!rc && (rc = emu_card_write(d->card, EMU_STREAM_GPU_WRITE, from, n, timeout_ms)) >= 0)
        rc = 0;
    if (rc) {
        count_failure(d);
        return rc;
    }
    if (done)
        rc = post(c, done, done_gpu, seq, timeout_ms);
    d->writes++;
    d->bytes_written += n;
    return rc;
}

/* Wait until the channel's queue is empty and no job runs; the caller holds
 * q_lock. The clock is read only when there is something to wait for. */
static int wait_idle(struct dma_chan *c, uint32_t timeout_ms)
{
    if (!c->q_count && !c->busy)
        return 0;
    struct timespec ts;
    oni_timespec_at(oni_ms_from_now(timeout_ms), &ts);
    while (c->q_count || c->busy)
        if (pthread_cond_timedwait(&c->q_idle, &c->q_lock, &ts) == ETIMEDOUT)
            return (c->q_count || c->busy) ? ONI_ETIMEOUT : 0;
    return 0;
}

/* Synchronous transfers run in the caller's thread (lowest latency), after
 * every job queued in their direction, so each stream is moved in call order. */
static int sync_begin(struct dma_chan *c, uint32_t timeout_ms)
{
    pthread_mutex_lock(&c->q_lock);
    int rc = wait_idle(c, timeout_ms);
    if (!rc && c->job_err) {
        rc = c->job_err;
        c->job_err = 0;
    }
    pthread_mutex_unlock(&c->q_lock);
    if (!rc)
        pthread_mutex_lock(&c->xfer);
    return rc;
}

int emu_dma_read(struct emu_dma *d, void *dst, size_t n, int dst_gpu, uint32_t timeout_ms)
{
    if (!d || !dst || !n)
        return ONI_EINVALARG;
    int rc = sync_begin(&d->ch[0], timeout_ms);
    if (rc)
        return rc;
    rc = do_read(d, dst, n, dst_gpu, NULL, 0, 0, timeout_ms);
    pthread_mutex_unlock(&d->ch[0].xfer);
    return rc;
}

int emu_dma_wait_data(struct emu_dma *d, size_t n, uint32_t timeout_ms)
{
    if (!d || !n)
        return ONI_EINVALARG;
    struct dma_chan *c = &d->ch[0];
    if (n > emu_card_read_max(d->card, EMU_STREAM_GPU))
        return 0; /* can never be whole in the card: the pieces wait in turn */
    int rc = sync_begin(c, timeout_ms);
    if (rc)
        return rc;
    rc = is_unsettled(c) ? settle(c, timeout_ms) : 0;
    struct emu_span sp[2];
    if (!rc && (rc = peek(d, n, sp, timeout_ms)) == 0)
        emu_card_fifo_consume(d->card, EMU_STREAM_GPU, 0); /* only looked */
    pthread_mutex_unlock(&c->xfer);
    return rc;
}

int emu_dma_write(struct emu_dma *d, const void *src, size_t n, int src_gpu, uint32_t timeout_ms)
{
    if (!d || !src || !n)
        return ONI_EINVALARG;
    int rc = sync_begin(&d->ch[1], timeout_ms);
    if (rc)
        return rc;
    rc = do_write(d, src, n, src_gpu, NULL, 0, 0, timeout_ms);
    pthread_mutex_unlock(&d->ch[1].xfer);
    return rc;
}

/* The thread of one channel: runs its jobs in order until stopped and drained. */
static void *engine(void *arg)
{
    struct dma_chan *c = arg;
    struct emu_dma *d = c->d;
    pthread_mutex_lock(&c->q_lock);
    for (;;) {
        while (!c->q_count && !c->stop)
            pthread_cond_wait(&c->q_cond, &c->q_lock);
        if (!c->q_count)
            break; /* stopping, queue drained */
        struct dma_job j = c->q[c->q_head];
        c->q_head = (c->q_head + 1) % DMA_QUEUE;
        c->q_count--;
        c->busy = 1;
        pthread_mutex_unlock(&c->q_lock);

        pthread_mutex_lock(&c->xfer);
        int rc = c->write ? do_write(d, j.x.buf, j.x.len, j.buf_gpu, j.x.done, j.done_gpu, j.x.seq, j.timeout_ms)
                          : do_read(d, j.x.buf, j.x.len, j.buf_gpu, j.x.done, j.done_gpu, j.x.seq, j.timeout_ms);
        pthread_mutex_unlock(&c->xfer);

        pthread_mutex_lock(&c->q_lock);
        if (rc && !c->job_err)
            c->job_err = rc;
        c->busy = 0;
        if (!c->q_count)
            pthread_cond_broadcast(&c->q_idle);
    }
    pthread_mutex_unlock(&c->q_lock);
    return NULL;
}

int emu_dma_submit(struct emu_dma *d, int write, const onigpu_xfer_t *x, int buf_gpu, int done_gpu,
                   uint32_t timeout_ms)
{
    if (!d || !x || !x->buf || !x->len || !x->done)
        return ONI_EINVALARG;
    struct dma_chan *c = &d->ch[write ? 1 : 0];
    pthread_mutex_lock(&c->q_lock);
    int rc = 0;
    if (c->job_err) {
        rc = c->job_err;
        c->job_err = 0;
    } else if (c->q_count == DMA_QUEUE) {
        rc = ONI_EBUSY;
    } else if (!c->thread_up) {
        if (pthread_create(&c->thread, NULL, engine, c))
            rc = ONI_EBADALLOC;
        else
            c->thread_up = 1;
    }
    if (!rc) {
        c->q[(c->q_head + c->q_count) % DMA_QUEUE] =
            (struct dma_job){.buf_gpu = buf_gpu, .done_gpu = done_gpu, .x = *x, .timeout_ms = timeout_ms};
        c->q_count++;
        pthread_cond_signal(&c->q_cond);
    }
    pthread_mutex_unlock(&c->q_lock);
    return rc;
}

int emu_dma_flush(struct emu_dma *d, uint32_t timeout_ms)
{
    if (!d)
        return ONI_EINVALARG;
    int first = 0;
    for (int k = 0; k < 2; k++) {
        struct dma_chan *c = &d->ch[k];
        pthread_mutex_lock(&c->q_lock);
        int rc = wait_idle(c, timeout_ms);
        if (!rc && c->job_err) {
            rc = c->job_err;
            c->job_err = 0;
        }
        pthread_mutex_unlock(&c->q_lock);
        if (rc && !first)
            first = rc;
    }
    return first;
}

int emu_dma_idle(struct emu_dma *d)
{
    int idle = 1;
    for (int k = 0; k < 2; k++) {
        struct dma_chan *c = &d->ch[k];
        pthread_mutex_lock(&c->q_lock);
        if (c->q_count || c->busy)
            idle = 0;
        pthread_mutex_unlock(&c->q_lock);
        /* Work left by a timed-out wait: done by now? (A running transfer
         * holds xfer; it waits for that work itself.) */
        if (is_unsettled(c)) {
            if (pthread_mutex_trylock(&c->xfer) == 0) {
                if (is_unsettled(c))
                    settle(c, 0);
                pthread_mutex_unlock(&c->xfer);
            }
            if (is_unsettled(c))
                idle = 0;
        }
    }
    return idle;
}

void emu_dma_stats(struct emu_dma *d, struct emu_dma_stats *st)
{
    pthread_mutex_lock(&d->ch[0].xfer);
    pthread_mutex_lock(&d->ch[1].xfer);
    *st = (struct emu_dma_stats){d->reads, d->writes, d->bytes_read, d->bytes_written,
                                 __atomic_load_n(&d->failed, __ATOMIC_RELAXED), d->locked_bytes,
                                 d->bounced_bytes, d->agent_reads, d->agent_writes,
                                 d->agent ? emu_agent_launches(d->agent) : 0,
                                 (uint64_t)__atomic_load_n(&d->agent_dead, __ATOMIC_RELAXED)};
    pthread_mutex_unlock(&d->ch[1].xfer);
    pthread_mutex_unlock(&d->ch[0].xfer);
}

int emu_dma_set_agent(struct emu_dma *d, size_t max_bytes)
{
    if (!d)
        return ONI_EINVALARG;
    pthread_mutex_lock(&d->ch[0].xfer);
    pthread_mutex_lock(&d->ch[1].xfer);
    int rc = 0;
    if (max_bytes && (!d->agent || __atomic_load_n(&d->agent_dead, __ATOMIC_ACQUIRE))) {
        /* (Re)start: a failed agent is stopped first, then a fresh one launched. */
        if (d->agent && (rc = emu_agent_stop(d->agent, AGENT_STOP_MS)) == 0)
            d->agent = NULL;
        if (!rc && (rc = emu_agent_start(&d->agent)) == 0)
            __atomic_store_n(&d->agent_dead, 0, __ATOMIC_RELEASE);
    } else if (!max_bytes && d->agent) {
        rc = emu_agent_stop(d->agent, AGENT_STOP_MS);
        d->agent = NULL; /* a stuck kernel's memory stays allocated (said on stderr) */
        __atomic_store_n(&d->agent_dead, 0, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&d->agent_max, rc ? 0 : max_bytes, __ATOMIC_RELEASE); /* non-zero: d->agent runs */
    pthread_mutex_unlock(&d->ch[1].xfer);
    pthread_mutex_unlock(&d->ch[0].xfer);
    return rc;
}

size_t emu_dma_agent(struct emu_dma *d)
{
    if (!d)
        return 0;
    /* No lock: a read waiting for data holds its channel's for as long. */
    size_t m = __atomic_load_n(&d->agent_max, __ATOMIC_ACQUIRE);
    return m && !__atomic_load_n(&d->agent_dead, __ATOMIC_ACQUIRE) ? m : 0;
}
