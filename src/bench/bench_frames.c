/* bench_frames.c - frames/s through oni_read_frame + oni_destroy_frame for a
 * range of BLOCKREADSIZE values, with per-call latency and heap allocations. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "bench.h"
#include "loop/stats.h"

/* Latency samples are capped so a fast driver cannot make phase 2 eat memory:
 * 8 Mi samples = 64 MiB. Phase 2 ends early when the recorder is full. */
#define MAX_SAMPLES (8u << 20)
#define CLOCK_CHECK_EVERY 256 /* phase 1 reads the clock once per this many frames */
#define NSLICES 10

/* Median cost of one oni_now_ns call, from back-to-back pairs. */
static double clock_cost_ns(void)
{
    enum { N = 2001 };
    uint64_t d[N];
    for (int i = 0; i < N; i++) {
        uint64_t a = oni_now_ns();
        uint64_t b = oni_now_ns();
        d[i] = b - a;
    }
    struct bench_stats s;
    return bench_stats_compute(d, N, &s) == 0 ? s.p50 : 0;
}

static int open_ctx(const char *driver, uint32_t block, oni_ctx *out)
{
    oni_ctx ctx = oni_create_ctx(driver);
    if (!ctx)
        return ONI_EINIT;
    int rc = oni_init_ctx(ctx, -1);
    if (!rc)
        rc = oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &block, sizeof block);
    if (!rc) {
        uint32_t run = 1;
        rc = oni_set_opt(ctx, ONI_OPT_RUNNING, &run, sizeof run);
    }
    if (rc) {
        oni_destroy_ctx(ctx);
        return rc;
    }
    *out = ctx;
    return ONI_ESUCCESS;
}

/* Phase 1's slices: slice k (0 .. NSLICES - 1) is meant to span
 * [t0 + k * len, t0 + (k + 1) * len), the last one up to the phase's end.
 * The clock is read only now and then (every CLOCK_CHECK_EVERY frames), so a
 * slice closes at the first reading at or past its end on that fixed grid
 * (the error does not add up from slice to slice), and its rate is the
 * frames read since the previous close over the time since then. A reading
 * that passes several grid points (the thread lost its CPU for longer than a
 * slice) closes one slice over all of that time. The last slice is closed
 * when the phase ends: every frame of the phase is in exactly one slice. */
struct slices {
    uint64_t t0, len;   /* the grid */
    uint64_t end;       /* where the open slice ends */
    uint64_t start;     /* the reading where the open slice began */
    uint64_t frames;    /* frames read in the open slice */
    uint64_t rate[NSLICES]; /* frames per second of each closed slice, truncated */
    size_t n;           /* slices closed */
};

static void slices_init(struct slices *s, uint64_t t0, uint64_t until_ns)
{
    s->t0 = s->start = t0;
    s->len = (until_ns - t0) / NSLICES;
    s->end = t0 + s->len;
    s->frames = 0;
    s->n = 0;
}

/* Close the open slice at `now` (> its start) and open the next one. */
static void slices_close(struct slices *s, uint64_t now)
{
    s->rate[s->n++] = s->frames * 1000000000u / (now - s->start);
    s->frames = 0;
    s->start = now;
}

/* `frames` more were read; `now` is the clock read after them. All but the
 * last slice close here; slices_end closes the last. */
static void slices_add(struct slices *s, uint64_t frames, uint64_t now)
{
    s->frames += frames;
    if (now < s->end || s->n >= NSLICES - 1 || now <= s->start)
        return;
    slices_close(s, now);
    /* the open slice ends at the first grid point after now; from grid
     * point NSLICES on (the phase's end) it is the last one */
    uint64_t k = s->len ? (now - s->t0) / s->len + 1 : NSLICES;
    s->end = k < NSLICES && s->n < NSLICES - 1 ? s->t0 + k * s->len : UINT64_MAX;
}

/* The phase ended at `now`: close the last slice. */
static void slices_end(struct slices *s, uint64_t now)
{
    if (s->frames && now > s->start && s->n < NSLICES)
        slices_close(s, now);
}

/* The closed slices' lowest, median (nearest rank) and highest rate into r;
 * sorts s->rate. Insertion sort in place: this runs before the allocation
 * count is read, so it must not allocate (bench_stats_compute would). */
static void slices_summary(struct slices *s, struct bench_frames_result *r)
{
    uint64_t *rate = s->rate;
    size_t nrate = s->n;
    for (size_t i = 1; i < nrate; i++)
        for (size_t j = i; j > 0 && rate[j - 1] > rate[j]; j--) {
            uint64_t t = rate[j];
            rate[j] = rate[j - 1];
            rate[j - 1] = t;
        }
    if (nrate) {
        r->slice_fps_min = (double)rate[0];
        r->slice_fps_p50 = loop_percentile_sorted(rate, nrate, 50);
        r->slice_fps_max = (double)rate[nrate - 1];
    }
}

/* Read and release frames from t0 until `until_ns`; counts into r. The
 * span is cut in NSLICES slices whose rates are kept too: on a shared
 * machine the median slice shows the rate when nothing else ran. */
static int phase_throughput(oni_ctx ctx, uint64_t t0, uint64_t until_ns,
                            struct bench_frames_result *r)
{
    uint64_t frames = 0, bytes = 0, sbytes = 0, now;
    struct slices sl;
    slices_init(&sl, t0, until_ns);
    do {
        for (int i = 0; i < CLOCK_CHECK_EVERY; i++) {
            oni_frame_t *f;
            int n = oni_read_frame(ctx, &f);
            if (n < 0)
                return n;
            bytes += f->data_sz;
            sbytes += 16 + ((f->data_sz + 3u) & ~3u); /* the frame's bytes in the stream */
            oni_destroy_frame(f);
        }
        frames += CLOCK_CHECK_EVERY;
        now = oni_now_ns();
        slices_add(&sl, CLOCK_CHECK_EVERY, now);
    } while (now < until_ns && !bench_stopped());
    slices_end(&sl, now);
    r->frames = frames;
    r->bytes = bytes;
    r->stream_bytes = sbytes;
    slices_summary(&sl, r);
    return ONI_ESUCCESS;
}

/* Time each read+destroy pair until `until_ns` or the recorder is full. */
static int phase_latency(oni_ctx ctx, uint64_t until_ns, struct bench_rec *rec)
{
    uint64_t t0 = oni_now_ns();
    while (rec->n < rec->cap && t0 < until_ns && !bench_stopped()) {
        oni_frame_t *f;
        int n = oni_read_frame(ctx, &f);
        if (n < 0)
            return n;
        oni_destroy_frame(f);
        uint64_t t1 = oni_now_ns();
        bench_rec_add(rec, t1 - t0);
        t0 = t1; /* the end of one call is the start of the next: one clock read per call */
    }
    return ONI_ESUCCESS;
}

static int run_block(const struct bench_frames_opts *o, struct bench_rec *rec,
                     struct bench_frames_result *r)
{
    oni_ctx ctx;
    int rc = open_ctx(o->driver, r->block, &ctx);
    if (rc)
        return rc;
    uint64_t span = (uint64_t)(o->seconds * 1e9);
    uint64_t warm = span / 20 < 100000000u ? span / 20 : 100000000u; /* 5%, at most 0.1 s */
    struct bench_frames_result scratch = {0};

    /* Warm-up: pools, blocks and caches reach their steady state. */
    uint64_t w0 = oni_now_ns();
    rc = phase_throughput(ctx, w0, w0 + warm, &scratch);
    if (rc)
        goto out;

    uint64_t a0 = o->alloc_count ? o->alloc_count() : 0;
    uint64_t t0 = oni_now_ns();
    rc = phase_throughput(ctx, t0, t0 + span / 2, r);
    uint64_t t1 = oni_now_ns();
    uint64_t a1 = o->alloc_count ? o->alloc_count() : 0;
    if (rc)
        goto out;
    r->seconds = (double)(t1 - t0) / 1e9;
    r->frames_per_s = (double)r->frames / r->seconds;
    r->mb_per_s = bench_mb_per_s((double)r->bytes, (double)(t1 - t0));
    r->allocs = a1 - a0;
    r->allocs_per_frame = o->alloc_count ? (double)r->allocs / (double)r->frames : -1;

    bench_rec_reset(rec);
    rc = phase_latency(ctx, oni_now_ns() + span / 2, rec);
    if (!rc)
        rc = bench_rec_stats(rec, &r->call_ns);
out:
    oni_destroy_ctx(ctx);
    return rc;
}

/* True if the caller's allocation counter sees a malloc: a counter that
 * misses allocations would report a false zero per frame. */
static int counter_works(uint64_t (*count)(void))
{
    if (!count)
        return 0;
    uint64_t before = count();
    void *volatile p = malloc(64); /* volatile: the pair must not be optimized away */
    free(p);
    return count() > before;
}

int bench_frames_run(const struct bench_frames_opts *o, struct bench_frames_result *res)
{
    if (!o || !o->driver || !o->blocks || !o->nblocks || !res || !(o->seconds > 0) ||
        o->seconds > 1e6)
        return ONI_EINVALARG;
    struct bench_frames_opts opts = *o;
    if (!counter_works(opts.alloc_count))
        opts.alloc_count = NULL;
    o = &opts;
    struct bench_rec rec;
    /* Room for the whole latency phase at up to 100 M calls/s, within the cap. */
    double want = o->seconds / 2 * 1e8;
    int rc = bench_rec_init(&rec, want < MAX_SAMPLES ? (size_t)want + 1 : MAX_SAMPLES);
    if (rc)
        return rc;
    double clk = clock_cost_ns();
    for (size_t i = 0; i < o->nblocks; i++) {
        memset(&res[i], 0, sizeof res[i]);
        if (bench_stopped())
            continue;
        res[i].block = o->blocks[i];
        res[i].allocs_per_frame = -1;
        res[i].clock_ns = clk;
        res[i].rc = run_block(o, &rec, &res[i]);
        if (res[i].rc && bench_stopped()) /* cut short before it had a sample: not measured, not failed */
            memset(&res[i], 0, sizeof res[i]);
    }
    bench_rec_free(&rec);
    return ONI_ESUCCESS;
}
