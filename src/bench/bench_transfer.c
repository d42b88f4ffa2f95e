/* bench_transfer.c - `onigpu bench transfer` (bench_transfer.h). Above the
 * hardware boundary: the card is reached only through oni.h, onigpu.h and
 * oniemu.h; GPU memory through src/gpu. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include "bench.h"
#include "bench_transfer.h"
#include "gpu/gpu.h"
#include "oni.h"
#include "onigpu.h"
#include "oniemu.h"
#include "onix.h"

#define FILL_WAIT_MS 5000     /* longest wait for the card to have a block ready */
#define HIST_BINS 60
#define CORE_REG_ENABLE 0     /* the test core's ENABLE register (docs/devices.md) */
#define CORE_MAX_FRAME (1u << 20) /* largest test core frame payload (docs/devices.md) */
#define REFILL_BYTES (64u << 20)  /* how far ahead the card is filled before timing */
#define RING_BYTES (64u << 20)    /* host ring of the ring paths: the card's FIFO size here */

static const char *const path_names[XFER_NPATHS] = {"reference", "original", "staged", "direct",
                                                    "prepinned", "chunked",   "ring",   "ring-thp", "agent"};

const char *xfer_path_name(int path)
{
    return path >= 0 && path < XFER_NPATHS ? path_names[path] : "?";
}

int xfer_path_parse(const char *name)
{
    for (int i = 0; i < XFER_NPATHS; i++)
        if (!strcmp(name, path_names[i]))
            return i;
    return -1;
}

/* One benchmark context: the card, the device indices, the buffers. */
struct bx {
    const struct xfer_opts *o;
    oni_ctx ctx;
    oni_dev_idx_t core, sink; /* test core (source) and test sink */
    uint32_t sink_wsize;      /* sink's write_size, bytes */
    uint8_t *host;            /* page-locked host block, max_size (+ header room) */
    uint8_t *dev;             /* GPU block, max_size */
    uint8_t *frames_host;     /* write frames for the sink, max_size */
    struct gpu_stream *stream;
    uint8_t *ring[2];         /* the ring paths' page-locked host rings (4 KiB pages, huge pages) */
    size_t ring_pos;
    struct bench_rec rec;
    struct bench_rec on_cpu;  /* per transfer: rec's time less what the thread spent off its CPU */
    struct bench_rec start;   /* per transfer: when its timed part started, ns after the first one's */
    struct bench_cpu_mark mark; /* the thread's CPU clock where the transfer being timed began */
    /* per direction and path: stats at 4 KiB and at the largest size, for the targets table */
    struct bench_stats at4k[3][XFER_NPATHS], atmax[3][XFER_NPATHS];
};

/* A line of the progress log (o->log, none when NULL), flushed. */
__attribute__((format(printf, 2, 3))) static void logf_(const struct xfer_opts *o, const char *fmt, ...)
{
    if (!o->log)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(o->log, fmt, ap);
    va_end(ap);
    fflush(o->log);
}

/* --- the card ----------------------------------------------------------------- */

static int core_enable(struct bx *b, int on)
{
    return oni_write_reg(b->ctx, b->core, CORE_REG_ENABLE, on ? 1 : 0);
}

/* Open the emulated card with the test core routed to `route` (0: default
 * stream, 1: GPU stream), emitting frames of `frame` payload bytes. The core
 * is left disabled: it runs only while the FIFO is refilled, never during a
 * timed transfer, so that the card's generator does not compete with it.
 * block_read: ONI_OPT_BLOCKREADSIZE to set, 0 = the default.
 * ddr=128M: 64 MiB per stream FIFO. The emulator gives FIFO pages back after
 * a backlog above 64 MiB (a consume then pays for it inside a timed transfer),
 * and the DMA engine page-locks the ring in 64 MiB windows (the first touch
 * of a window costs milliseconds): with one window, both happen once, in the
 * warm-up, not at random inside the timed loop. */
static int open_card(struct bx *b, uint32_t frame, int route, uint32_t block_read)
{
    char spec[512];
    snprintf(spec, sizeof spec, "devices=testcore:bytes=%u:rate=2G:route=%d,testsink;mode=realtime;link=%s;ddr=128M",
             frame, route, b->o->link);
    b->ctx = oni_create_ctx("emu");
    if (!b->ctx)
        return ONI_EINIT;
    int rc = oni_set_driver_opt(b->ctx, ONI_DRV_EMU_SPEC, spec, strlen(spec) + 1);
    if (!rc)
        rc = oni_init_ctx(b->ctx, -1);
    oni_size_t ndev = 0;
    size_t sz = sizeof ndev;
    if (!rc)
        rc = oni_get_opt(b->ctx, ONI_OPT_NUMDEVICES, &ndev, &sz);
    oni_device_t *table = NULL;
    if (!rc && !(table = calloc(ndev ? ndev : 1, sizeof *table)))
        rc = ONI_EBADALLOC;
    sz = ndev * sizeof *table;
    if (!rc)
        rc = oni_get_opt(b->ctx, ONI_OPT_DEVICETABLE, table, &sz);
    int have_core = 0, have_sink = 0;
    for (oni_size_t i = 0; !rc && i < ndev; i++) {
        if (table[i].id == ONIX_ONIGPU_TESTCORE && !have_core)
            b->core = table[i].idx, have_core = 1;
        if (table[i].id == ONIX_ONIGPU_TESTSINK && table[i].write_size && !have_sink)
            b->sink = table[i].idx, b->sink_wsize = table[i].write_size, have_sink = 1;
    }
    free(table);
    if (!rc && (!have_core || !have_sink))
        rc = ONI_EDEVID;
    if (!rc)
        rc = core_enable(b, 0);
    if (!rc && block_read) /* settable only while idle */
        rc = oni_set_opt(b->ctx, ONI_OPT_BLOCKREADSIZE, &block_read, sizeof block_read);
    int run = 1;
    if (!rc)
        rc = oni_set_opt(b->ctx, ONI_OPT_RUNNING, &run, sizeof run);
    if (rc && b->ctx) {
        oni_destroy_ctx(b->ctx);
        b->ctx = NULL;
    }
    return rc;
}

static void close_card(struct bx *b)
{
    if (b->ctx)
        oni_destroy_ctx(b->ctx);
    b->ctx = NULL;
}

static int fifo_fill(struct bx *b, int s, uint64_t *fill, uint64_t *cap)
{
    onigpu_stream_stats_t st;
    size_t sz = sizeof st;
    int rc = oni_get_driver_opt(b->ctx, ONI_DRV_STREAM_STATS, &st, &sz);
    *fill = st.fifo_bytes[s];
    *cap = st.fifo_capacity[s];
    return rc;
}

/* Make sure (untimed) that the card's FIFO of stream s holds at least n
 * bytes plus a low-water mark: if not, run the test core until it holds
 * REFILL_BYTES (or half the FIFO), then stop it again. The low-water mark
 * keeps the emulated FIFO from ever running nearly empty: the emulator then
 * moves its last bytes back to the start of its memory inside a consume (a
 * memmove of up to 1/32 of what was read meanwhile), which a real card's ring
 * never does and which would land inside a timed transfer. */
static int wait_fill(struct bx *b, int s, uint64_t n)
{
    uint64_t fill, cap;
    int rc = fifo_fill(b, s, &fill, &cap);
    uint64_t low = cap / 16;
    if (rc || fill >= n + low)
        return rc;
    uint64_t want = REFILL_BYTES > cap / 2 ? cap / 2 : REFILL_BYTES;
    if (want < n + low)
        want = n + low;
    if (want > cap)
        return ONI_EBUFFERSIZE;
    rc = core_enable(b, 1);
    uint64_t deadline = oni_ms_from_now(FILL_WAIT_MS);
    while (!rc && !(rc = fifo_fill(b, s, &fill, &cap)) && fill < want) {
        if (oni_now_ns() > deadline)
            rc = ONI_ETIMEOUT;
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    int rc2 = core_enable(b, 0);
    return rc ? rc : rc2;
}

/* Fill frames_host with write frames for the sink covering n bytes, each at
 * most fmax bytes (header included): [u32 dev_idx][u32 words][payload]. */
static int build_frames(struct bx *b, uint8_t *dst, size_t n, size_t fmax)
{
    size_t unit = b->sink_wsize ? b->sink_wsize : 4;
    size_t f = fmax; /* the card takes frames of any whole number of write_size units */
    if (f > n)
        f = n;
    if (n % f || (f - 8) % unit)
        return ONI_EWRITESIZE;
    for (size_t off = 0; off < n; off += f) {
        uint32_t hdr[2] = {b->sink, (uint32_t)((f - 8) / 4)};
        memcpy(dst + off, hdr, sizeof hdr);
        for (size_t i = 8; i < f; i += 4) {
            uint32_t w = (uint32_t)(off + i);
            memcpy(dst + off + i, &w, 4);
        }
    }
    return 0;
}

/* Largest power of two <= v (v >= 1). */
static size_t pow2_floor(size_t v)
{
    size_t p = 1;
    while (p * 2 <= v)
        p *= 2;
    return p;
}

/* --- one timed transfer per path --------------------------------------------- */

static int set_u32(struct bx *b, int opt, uint32_t v)
{
    return oni_set_driver_opt(b->ctx, opt, &v, sizeof v);
}

/* Where a timed transfer starts: the thread's CPU mark, then the clock. */
static uint64_t timing_start(struct bx *b)
{
    bench_cpu_mark(&b->mark);
    return oni_now_ns();
}

/* Time one transfer of n bytes on path p in direction dir: *ns, *off of it
 * the calling thread spent kept off its CPU (bench_off_cpu_ns), and *at, the
 * clock where the timed part began (after any untimed FIFO refill). */
static int one(struct bx *b, int p, int dir, size_t n, uint64_t *ns, uint64_t *off, uint64_t *at)
{
    int rc = 0;
    *ns = *off = 0;
    *at = oni_now_ns(); /* until the timed part begins (an early failure) */
    uint64_t t0;
    if (p == XFER_RING || p == XFER_RING_THP) {
        if (b->ring_pos + n > RING_BYTES)
            b->ring_pos = 0;
        uint8_t *h = b->ring[p == XFER_RING_THP] + b->ring_pos;
        b->ring_pos += n;
        t0 = timing_start(b);
        rc = dir == XFER_DIR_READ ? gpu_copy_async(b->stream, b->dev, h, n) : gpu_copy_async(b->stream, h, b->dev, n);
        if (!rc)
            rc = gpu_stream_wait(b->stream, ONI_DEFAULT_TIMEOUTMS);
    } else if (p == XFER_REFERENCE) {
        t0 = timing_start(b);
        rc = dir == XFER_DIR_READ ? gpu_copy_async(b->stream, b->dev, b->host, n)
                                  : gpu_copy_async(b->stream, b->host, b->dev, n);
        if (!rc)
            rc = gpu_stream_wait(b->stream, ONI_DEFAULT_TIMEOUTMS);
    } else if (p == XFER_ORIGINAL && dir == XFER_DIR_READ) {
        rc = wait_fill(b, 0, n + 16);
        if (rc)
            return rc;
        oni_frame_t *f = NULL;
        for (;;) { /* frames of other devices (e.g. the card's MEMUSAGE) are not timed */
            t0 = timing_start(b);
            rc = oni_read_frame(b->ctx, &f);
            if (rc < 0 || f->dev_idx == b->core)
                break;
            oni_destroy_frame(f);
        }
        if (rc >= 0) {
            rc = f->data_sz == n ? gpu_copy(b->dev, f->data, f->data_sz) : ONI_EREADFAILURE;
            oni_destroy_frame(f);
        }
    } else if (p == XFER_ORIGINAL) {
        oni_frame_t *f = NULL;
        t0 = timing_start(b);
        rc = gpu_copy(b->host, b->dev, n);
        if (!rc)
            rc = oni_create_frame(b->ctx, &f, b->sink, b->host, n);
        if (rc > 0) { /* oni_create_frame answers > 0 on success, as upstream's */
            rc = oni_write_frame(b->ctx, f);
            oni_destroy_frame(f);
        }
    } else if (dir == XFER_DIR_READ) {
        rc = wait_fill(b, 1, n);
        if (rc)
            return rc;
        t0 = timing_start(b);
        if (p == XFER_STAGED) {
            rc = oni_set_driver_opt(b->ctx, ONI_DRV_READ, b->host, 8);
            if (!rc)
                rc = gpu_copy_async(b->stream, b->dev, b->host, n);
            if (!rc)
                rc = gpu_stream_wait(b->stream, ONI_DEFAULT_TIMEOUTMS);
        } else {
            rc = oni_set_driver_opt(b->ctx, ONI_DRV_READ, b->dev, 8);
        }
    } else {
        t0 = timing_start(b);
        if (p == XFER_STAGED) {
            rc = gpu_copy_async(b->stream, b->host, b->dev, n);
            if (!rc)
                rc = gpu_stream_wait(b->stream, ONI_DEFAULT_TIMEOUTMS);
            if (!rc)
                rc = oni_set_driver_opt(b->ctx, ONI_DRV_WRITE, b->host, 8);
        } else {
            rc = oni_set_driver_opt(b->ctx, ONI_DRV_WRITE, b->dev, 8);
        }
    }
    uint64_t t1 = oni_now_ns();
    struct bench_cpu_mark end;
    bench_cpu_mark(&end);
    *ns = t1 - t0;
    *at = t0;
    *off = bench_off_cpu_ns(&b->mark, t0, t1, &end);
    return rc < 0 ? rc : 0;
}

/* Prepare the card and buffers of path p for size n (before timing). */
static int prepare(struct bx *b, int p, int dir, size_t n)
{
    int rc = 0;
    if (p == XFER_REFERENCE || p == XFER_RING || p == XFER_RING_THP)
        return n <= RING_BYTES || p == XFER_REFERENCE ? 0 : ONI_EBUFFERSIZE;
    if (p == XFER_ORIGINAL) {
        close_card(b);
        if (dir == XFER_DIR_READ && n > CORE_MAX_FRAME)
            return ONI_EINVALREADSIZE; /* one frame per transfer, as listing 4.1 */
        if (dir == XFER_DIR_READ)
            rc = open_card(b, (uint32_t)n, 0, (uint32_t)n + 16);
        else
            rc = open_card(b, 4096, 0, 0);
        if (!rc && dir == XFER_DIR_WRITE) {
            size_t unit = b->sink_wsize ? b->sink_wsize : 4;
            if (n % unit)
                rc = ONI_EWRITESIZE;
        }
        return rc;
    }
    rc = set_u32(b, dir == XFER_DIR_READ ? ONI_DRV_RD_SZ : ONI_DRV_WR_SZ, (uint32_t)n);
    if (!rc && dir == XFER_DIR_WRITE) {
        size_t fmax = p == XFER_CHUNKED ? b->o->chunk : n;
        rc = build_frames(b, b->frames_host, n, pow2_floor(fmax));
        if (!rc)
            memcpy(b->host, b->frames_host, n);
        if (!rc)
            rc = gpu_copy(b->dev, b->frames_host, n);
    }
    return rc;
}

/* The DMA agent is still on (it turns itself off when it fails). */
static int agent_on(struct bx *b)
{
    uint32_t v = 0;
    size_t len = sizeof v;
    return oni_get_driver_opt(b->ctx, ONI_DRV_DMA_AGENT, &v, &len) == 0 && v != 0;
}

/* Open the card and set the driver options of path p (once per path). On
 * failure it leaves nothing behind: the PIN undone, the card closed. */
static int begin_path(struct bx *b, int p)
{
    int rc = 0, pinned = 0;
    onigpu_buf_t buf = {b->dev, b->o->max_size};
    if (p == XFER_REFERENCE || p == XFER_ORIGINAL || p == XFER_RING || p == XFER_RING_THP)
        return 0;
    rc = open_card(b, 65536, 1, 0);
    if (!rc && (p == XFER_PREPINNED || p == XFER_AGENT))
        pinned = !(rc = oni_set_driver_opt(b->ctx, ONI_DRV_PIN, &buf, sizeof buf));
    if (!rc && p == XFER_AGENT)
        rc = set_u32(b, ONI_DRV_DMA_AGENT, b->o->agent_max ? b->o->agent_max : ONIGPU_MAX_BLOCK);
    if (!rc && p == XFER_CHUNKED)
        rc = set_u32(b, ONI_DRV_CHUNK_SZ, b->o->chunk);
    if (rc) {
        if (pinned)
            oni_set_driver_opt(b->ctx, ONI_DRV_UNPIN, &buf, sizeof buf);
        close_card(b);
    }
    return rc;
}

/* --- the run ------------------------------------------------------------------ */

struct series_pts {
    double x[64], y[64];
    size_t n;
};

static void hist_out(struct results *r, struct bx *b, const char *dirname, int p, size_t n)
{
    struct bench_hist h;
    if (bench_hist_make(&h, b->rec.ns, b->rec.n, HIST_BINS, 1, 0, 0))
        return;
    char tag[96], title[160];
    snprintf(tag, sizeof tag, "hist-%s-%s-%zu", dirname, xfer_path_name(p), n);
    snprintf(title, sizeof title, "%s %s %zu B, %s: frequency", dirname, xfer_path_name(p), n, b->o->link);
    bench_report_hist(r, tag, title, "transfer time (ns)", &h);
    bench_hist_free(&h);
}

/* Table "outliers": when each transfer above limit ns started and how long
 * it took, on and off the CPU, the first XFER_OUTLIERS_MAX of a row; whether the
 * slow ones keep a rhythm says more about their cause than their count. */
static int outliers_out(struct results *r, struct bx *b, const char *dirname, int p, size_t n,
                        double limit)
{
    int rc = 0;
    for (size_t i = 0, k = 0; i < b->rec.n && k < XFER_OUTLIERS_MAX && !rc; i++) {
        if (b->rec.ns[i] <= limit)
            continue;
        k++;
        results_cell_str(r, "link", b->o->link);
        results_cell_str(r, "dir", dirname);
        results_cell_str(r, "path", xfer_path_name(p));
        results_cell_int(r, "size", (long long)n);
        results_cell_int(r, "index", (long long)i);
        results_cell_num(r, "start_ms", b->start.ns[i] / 1e6);
        results_cell_int(r, "ns", (long long)b->rec.ns[i]);
        results_cell_int(r, "on_cpu_ns", (long long)b->on_cpu.ns[i]);
        rc = results_row(r, "outliers");
    }
    return rc;
}

static int run_path(struct bx *b, struct results *r, int p, int dir, struct series_pts *pts,
                    struct bench_fit *fit)
{
    const struct xfer_opts *o = b->o;
    const char *dirname = dir == XFER_DIR_READ ? "card-to-gpu" : "gpu-to-card";
    pts->n = 0; /* what the caller reads even when the path cannot start */
    memset(fit, 0, sizeof *fit);
    int rc = begin_path(b, p);
    if (rc) {
        logf_(o, "  %s: cannot set up path: %d %s\n", xfer_path_name(p), rc, oni_error_str(rc));
        return rc;
    }
    double sizes[64], med[64];
    size_t npts = 0;
    for (uint64_t n = o->min_size; n <= o->max_size && !rc && !bench_stopped(); n *= 2) {
        /* Above its limit the card moves a block with the copy engine, not the
         * agent (src/emu/dma.c, agent_takes): those times are not the agent's. */
        if (p == XFER_AGENT && o->agent_max && n > o->agent_max) {
            logf_(o, "  agent: sizes from %llu on skipped: above --agent-max (%u), the card's copy engine moves them\n",
                  (unsigned long long)n, o->agent_max);
            break;
        }
        rc = prepare(b, p, dir, (size_t)n);
        if (rc == ONI_EINVALREADSIZE) {
            logf_(o, "  %s: the test core's frames stop at 1 MiB; sizes from %llu on skipped (%d %s)\n",
                  xfer_path_name(p), (unsigned long long)n, rc, oni_error_str(rc));
            rc = 0;
            break;
        }
        uint64_t reps = o->total / n;
        if (reps < o->min_reps)
            reps = o->min_reps;
        if (reps > o->max_reps)
            reps = o->max_reps;
        uint64_t warm = reps / 10 < 10 ? 10 : (reps / 10 > 200 ? 200 : reps / 10);
        uint64_t ns, off, at, first = 0;
        for (uint64_t i = 0; i < warm && !rc; i++)
            rc = one(b, p, dir, (size_t)n, &ns, &off, &at);
        bench_rec_reset(&b->rec);
        bench_rec_reset(&b->on_cpu);
        bench_rec_reset(&b->start);
        for (uint64_t i = 0; i < reps && !rc && !bench_stopped(); i++) {
            rc = one(b, p, dir, (size_t)n, &ns, &off, &at);
            if (!i)
                first = at;
            bench_rec_add(&b->start, at - first); /* where the timed part began, not the untimed refill */
            bench_rec_add(&b->rec, ns);
            bench_rec_add(&b->on_cpu, ns > off ? ns - off : 0);
        }
        if (!rc && p == XFER_AGENT && !agent_on(b))
            rc = ONI_EINIT; /* it fell back to the copy engine: these would not be the agent's times */
        if (rc) {
            logf_(o, "  %s: failed at size %llu: %d %s\n", xfer_path_name(p), (unsigned long long)n, rc,
                  oni_error_str(rc));
            break;
        }
        struct bench_stats st, on;
        rc = bench_rec_stats(&b->rec, &st);
        if (!rc)
            rc = bench_rec_stats(&b->on_cpu, &on);
        if (rc)
            break;
        results_cell_str(r, "link", o->link);
        results_cell_str(r, "dir", dirname);
        results_cell_str(r, "path", xfer_path_name(p));
        results_cell_int(r, "size", (long long)n);
        bench_cell_stats(r, "", &st);
        results_cell_num(r, "mb_s", bench_mb_per_s((double)n, st.mean));
        results_cell_num(r, "max_over_p50", st.max / st.p50);
        results_cell_int(r, "over_20x_p50", (long long)bench_count_above(b->rec.ns, b->rec.n, 20 * st.p50));
        results_cell_int(r, "over_20x_p50_on_cpu",
                       (long long)bench_count_above(b->on_cpu.ns, b->on_cpu.n, 20 * st.p50));
        results_cell_num(r, "max_on_cpu_over_p50", on.max / st.p50);
        rc = results_row(r, NULL);
        if (!rc)
            rc = outliers_out(r, b, dirname, p, (size_t)n, 20 * st.p50);
        if (n == 4096)
            b->at4k[dir][p] = st;
        if (n == o->max_size)
            b->atmax[dir][p] = st;
        /* thesis figure 4.3: frequency plots of the host-staged and GPUDirect paths */
        if ((n == 4096 || n == (8u << 20)) && p != XFER_ORIGINAL && p != XFER_CHUNKED)
            hist_out(r, b, dirname, p, (size_t)n);
        if (npts < 64) {
            sizes[npts] = (double)n;
            med[npts] = st.p50;
            pts->x[npts] = (double)n;
            pts->y[npts] = st.p50 / 1e3;
            npts++;
        }
    }
    pts->n = npts;
    if ((p == XFER_PREPINNED || p == XFER_AGENT) && b->ctx) {
        onigpu_buf_t buf = {b->dev, o->max_size};
        oni_set_driver_opt(b->ctx, ONI_DRV_UNPIN, &buf, sizeof buf);
    }
    close_card(b);
    if (!rc && npts >= 2)
        bench_fit_model(sizes, med, npts, BENCH_FIT_RELATIVE, fit);
    return rc;
}

/* The ring paths' host rings: anonymous memory with or without transparent
 * huge pages, written once (faulted in), then page-locked. */
static int alloc_rings(struct bx *b)
{
    for (int k = 0; k < 2; k++) {
        void *p = mmap(NULL, RING_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return ONI_EBADALLOC;
        madvise(p, RING_BYTES, k ? MADV_HUGEPAGE : MADV_NOHUGEPAGE); /* advice: THP may be off */
        memset(p, 0xA5, RING_BYTES);
        int rc = gpu_host_register(p, RING_BYTES);
        if (rc) {
            munmap(p, RING_BYTES);
            return rc;
        }
        b->ring[k] = p;
    }
    return 0;
}

static int alloc_buffers(struct bx *b)
{
    size_t n = (size_t)b->o->max_size + 64;
    int rc = gpu_host_alloc((void **)&b->host, n);
    if (!rc)
        rc = gpu_alloc((void **)&b->dev, n);
    if (!rc)
        rc = gpu_stream_create(&b->stream);
    if (!rc && !(b->frames_host = malloc(n)))
        rc = ONI_EBADALLOC;
    if (!rc)
        rc = gpu_memset(b->dev, 0x5A, n);
    if (!rc)
        memset(b->host, 0xA5, n);
    if (!rc)
        rc = bench_rec_init(&b->rec, (size_t)b->o->max_reps);
    if (!rc)
        rc = bench_rec_init(&b->on_cpu, (size_t)b->o->max_reps);
    if (!rc)
        rc = bench_rec_init(&b->start, (size_t)b->o->max_reps);
    if (!rc && (b->o->paths & (1u << XFER_RING | 1u << XFER_RING_THP)))
        rc = alloc_rings(b);
    return rc;
}

static void free_buffers(struct bx *b)
{
    for (int k = 0; k < 2; k++)
        if (b->ring[k]) {
            gpu_host_unregister(b->ring[k]);
            munmap(b->ring[k], RING_BYTES);
        }
    gpu_host_free(b->host);
    gpu_free(b->dev);
    gpu_stream_destroy(b->stream);
    free(b->frames_host);
    bench_rec_free(&b->rec);
    bench_rec_free(&b->on_cpu);
    bench_rec_free(&b->start);
}

/* What pinning costs, one ONI_DRV_PIN and one ONI_DRV_UNPIN timed apart, for
 * a GPU buffer (the lookup and SYNC_MEMOPS that the unpinned direct path pays
 * per transfer) and for a host buffer of known length (page-locking with
 * cudaHostRegister), at 4 KiB, 1 MiB and the largest size: table "pin". */
static int pin_costs(struct bx *b, struct results *r)
{
    struct bench_rec pin_ns = {0}, unpin_ns = {0};
    uint8_t *host = NULL;
    int rc = open_card(b, 65536, 1, 0);
    if (!rc)
        rc = bench_rec_init(&pin_ns, 2000);
    if (!rc)
        rc = bench_rec_init(&unpin_ns, 2000);
    if (!rc && !(host = malloc((size_t)b->o->max_size)))
        rc = ONI_EBADALLOC;
    if (!rc)
        memset(host, 1, (size_t)b->o->max_size); /* commit the pages: page-locking is timed, not faulting */
    uint64_t sizes[3] = {4096, 1u << 20, b->o->max_size};
    for (int kind = 0; kind < 2 && !rc; kind++) {
        for (int k = 0; k < 3 && !rc; k++) {
            uint64_t n = sizes[k];
            if (n > b->o->max_size || (k == 2 && (n == sizes[0] || n == sizes[1])))
                continue;
            onigpu_buf_t buf = {kind ? (void *)host : (void *)b->dev, n};
            int reps = n >= (1u << 20) ? 200 : 2000;
            bench_rec_reset(&pin_ns);
            bench_rec_reset(&unpin_ns);
            for (int i = 0; i < reps && !rc; i++) {
                uint64_t t0 = oni_now_ns();
                rc = oni_set_driver_opt(b->ctx, ONI_DRV_PIN, &buf, sizeof buf);
                uint64_t t1 = oni_now_ns();
                if (!rc)
                    rc = oni_set_driver_opt(b->ctx, ONI_DRV_UNPIN, &buf, sizeof buf);
                bench_rec_add(&pin_ns, t1 - t0);
                bench_rec_add(&unpin_ns, oni_now_ns() - t1);
            }
            for (int op = 0; op < 2 && !rc; op++) {
                struct bench_stats st;
                rc = bench_rec_stats(op ? &unpin_ns : &pin_ns, &st);
                if (rc)
                    break;
                results_cell_str(r, "memory", kind ? "host" : "gpu");
                        results_cell_int(r, "size", (long long)n);
                results_cell_str(r, "op", op ? "unpin" : "pin");
                bench_cell_stats(r, "", &st);
                rc = results_row(r, "pin");
            }
        }
    }
    free(host);
    bench_rec_free(&pin_ns);
    bench_rec_free(&unpin_ns);
    close_card(b);
    return rc;
}

static void target_row(struct results *r, const char *link, const char *dir, const char *what,
                       double value, const char *goal, int met)
{
    results_cell_str(r, "link", link);
    results_cell_str(r, "dir", dir);
    results_cell_str(r, "metric", what);
    results_cell_num(r, "value", value);
    results_cell_str(r, "target", goal);
    results_cell_str(r, "met", met ? "yes" : "no");
    results_row(r, "targets");
}

/* The TARGETS.md figures of the direct prepinned path, from this run: 4 KiB
 * p50 and p99.9, max / p50 at 4 KiB, and the largest size's bandwidth
 * against plain page-locked cudaMemcpyAsync. Only what was measured. */
static void targets(struct bx *b, struct results *r)
{
    static const char *dirs[3] = {"", "card-to-gpu", "gpu-to-card"};
    if (strcmp(b->o->link, "unlimited"))
        return; /* the targets are set for the unlimited link */
    for (int dir = XFER_DIR_READ; dir <= XFER_DIR_WRITE; dir++) {
        const struct bench_stats *p4 = &b->at4k[dir][XFER_PREPINNED], *pm = &b->atmax[dir][XFER_PREPINNED],
                                 *rm = &b->atmax[dir][XFER_REFERENCE];
        if (p4->n) {
            target_row(r, b->o->link, dirs[dir], "prepinned 4KiB p50 us", p4->p50 / 1e3, "<= 8", p4->p50 <= 8e3);
            target_row(r, b->o->link, dirs[dir], "prepinned 4KiB p99.9 us", p4->p999 / 1e3, "<= 30",
                       p4->p999 <= 30e3);
            char goal[64];
            snprintf(goal, sizeof goal, "<= 20 (n = %zu)", p4->n);
            target_row(r, b->o->link, dirs[dir], "prepinned 4KiB max/p50", p4->max / p4->p50, goal,
                       p4->max <= 20 * p4->p50);
        }
        const struct bench_stats *a4 = &b->at4k[dir][XFER_AGENT];
        if (a4->n) {
            target_row(r, b->o->link, dirs[dir], "agent 4KiB p50 us", a4->p50 / 1e3, "<= 8", a4->p50 <= 8e3);
            target_row(r, b->o->link, dirs[dir], "agent 4KiB p99.9 us", a4->p999 / 1e3, "<= 30", a4->p999 <= 30e3);
            char goal[64];
            snprintf(goal, sizeof goal, "<= 20 (n = %zu)", a4->n);
            target_row(r, b->o->link, dirs[dir], "agent 4KiB max/p50", a4->max / a4->p50, goal,
                       a4->max <= 20 * a4->p50);
        }
        if (pm->n && rm->n && b->o->max_size >= (1u << 20)) {
            char what[96];
            snprintf(what, sizeof what, "prepinned/reference MB/s at %llu B (means)",
                     (unsigned long long)b->o->max_size);
            double ratio = rm->mean / pm->mean;
            target_row(r, b->o->link, dirs[dir], what, ratio, ">= 0.85", ratio >= 0.85);
        }
    }
}

int bench_transfer_run(const struct xfer_opts *o, struct results *r)
{
    if (!o || !r || !o->min_size || o->min_size > o->max_size || !o->total || !o->max_reps || !o->link ||
        !o->paths || !o->dirs || !o->chunk || o->max_size > ONIGPU_MAX_BLOCK)
        return ONI_EINVALARG;
    char why[200];
    if (!gpu_available(why, sizeof why)) /* the command checks it before it opens r */
        return ONI_ENOGPU;
    struct bx b = {.o = o};
    int rc = alloc_buffers(&b);
    if (rc) {
        free_buffers(&b);
        return rc;
    }
    results_meta(r, "link", o->link);
    results_meta_num(r, "total_bytes_per_size", (double)o->total);
    results_meta_num(r, "chunk_bytes", o->chunk);
    results_meta_num(r, "max_reps", (double)o->max_reps);
    if (o->paths & (1u << XFER_AGENT)) /* 0: every size */
        results_meta_num(r, "agent_max_bytes", o->agent_max);
    int first_rc = 0;
    for (int dir = XFER_DIR_READ; dir <= XFER_DIR_WRITE; dir++) {
        if (!(o->dirs & dir))
            continue;
        const char *dirname = dir == XFER_DIR_READ ? "card-to-gpu" : "gpu-to-card";
        struct series_pts pts[XFER_NPATHS];
        struct results_series ser[XFER_NPATHS];
        memset(pts, 0, sizeof pts); /* a path that fails or is skipped has no points */
        size_t nser = 0;
        for (int p = 0; p < XFER_NPATHS; p++) {
            if (!(o->paths & (1u << p)))
                continue;
            logf_(o, "%s %s ...\n", dirname, xfer_path_name(p));
            struct bench_fit fit;
            int prc = run_path(&b, r, p, dir, &pts[p], &fit);
            if (prc && !first_rc)
                first_rc = prc;
            if (pts[p].n)
                ser[nser++] = (struct results_series){xfer_path_name(p), pts[p].x, pts[p].y, pts[p].n, RESULTS_LINES_POINTS};
            if (!prc && fit.n) {
                results_cell_str(r, "link", o->link);
                results_cell_str(r, "dir", dirname);
                results_cell_str(r, "path", xfer_path_name(p));
                        results_cell_num(r, "lat_us", fit.lat_ns / 1e3);
                results_cell_num(r, "bw_MBps", fit.bw_Bps / 1e6);
                results_cell_num(r, "r2", fit.r2);
                results_row(r, "fit");
            }
        }
        if (nser) {
            char title[128], tag[64];
            snprintf(title, sizeof title, "%s, link %s: median transfer time", dirname, o->link);
            snprintf(tag, sizeof tag, "time-%s", dirname);
            struct results_plot pl = {title, "bytes per transfer", "p50 time (us)", 1, 1, ser, nser};
            results_add_plot(r, tag, &pl);
        }
    }
    int prc = pin_costs(&b, r);
    if (prc)
        logf_(o, "pin costs: %s\n", oni_error_str(prc));
    if (prc && !first_rc)
        first_rc = prc;
    targets(&b, r);
    free_buffers(&b);
    return first_rc;
}
