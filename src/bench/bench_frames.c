/* bench_frames.c - frames/s through oni_read_frame + oni_destroy_frame for a
 * range of BLOCKREADSIZE values, with per-call latency and heap allocations. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "bench.h"

/* Latency samples are capped so a fast driver cannot make phase 2 eat memory:
 * 8 Mi samples = 64 MiB. Phase 2 ends early when the recorder is full. */
#define MAX_SAMPLES (8u << 20)
#define CLOCK_CHECK_EVERY 256 /* phase 1 reads the clock once per this many frames */
#define NSLICES 10

/* Median cost of one bench_now_ns call, from back-to-back pairs. */
static double clock_cost_ns(void)
{
    enum { N = 2001 };
    uint64_t d[N];
    for (int i = 0; i < N; i++) {
        uint64_t a = bench_now_ns();
        uint64_t b = bench_now_ns();
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

/* Read and release frames from t0 until `until_ns`; counts into r. The
 * span is cut in NSLICES slices whose rates are kept too: on a shared
 * machine the median slice shows the rate when nothing else ran. */
static int phase_throughput(oni_ctx ctx, uint64_t t0, uint64_t until_ns,
                            struct bench_frames_result *r)
{
    uint64_t frames = 0, bytes = 0, sbytes = 0;
    uint64_t slice_ns = (until_ns - t0) / NSLICES, slice_end = t0 + slice_ns, slice_frames = 0;
    uint64_t slice_start = t0, now;
    uint64_t rate[NSLICES]; /* frames per second of each slice, truncated */
    size_t nrate = 0;
    do {
        for (int i = 0; i < CLOCK_CHECK_EVERY; i++) {
            oni_frame_t *f;
            int n = oni_read_frame(ctx, &f);
            if (n < 0)
                return n;
            bytes += f->data_sz;
            sbytes += (uint64_t)n;
            oni_destroy_frame(f);
        }
        frames += CLOCK_CHECK_EVERY;
        slice_frames += CLOCK_CHECK_EVERY;
        now = bench_now_ns();
        if (now >= slice_end && nrate < NSLICES && now > slice_start) {
            rate[nrate++] = slice_frames * 1000000000u / (now - slice_start);
            slice_frames = 0;
            slice_start = now;
            slice_end = now + slice_ns;
        }
    } while (now < until_ns);
    r->frames = frames;
    r->bytes = bytes;
    r->stream_bytes = sbytes;
    /* Insertion sort in place: this runs before the allocation count is
     * read, so it must not allocate (bench_stats_compute would). */
    for (size_t i = 1; i < nrate; i++)
        for (size_t j = i; j > 0 && rate[j - 1] > rate[j]; j--) {
            uint64_t t = rate[j];
            rate[j] = rate[j - 1];
            rate[j - 1] = t;
        }
    if (nrate) {
        r->slice_fps_min = (double)rate[0];
        r->slice_fps_p50 = bench_percentile_sorted(rate, nrate, 50);
        r->slice_fps_max = (double)rate[nrate - 1];
    }
    return ONI_ESUCCESS;
}

/* Time each read+destroy pair until `until_ns` or the recorder is full. */
static int phase_latency(oni_ctx ctx, uint64_t until_ns, struct bench_rec *rec)
{
    uint64_t t0 = bench_now_ns();
    while (rec->n < rec->cap && t0 < until_ns) {
        oni_frame_t *f;
        int n = oni_read_frame(ctx, &f);
        if (n < 0)
            return n;
        oni_destroy_frame(f);
        uint64_t t1 = bench_now_ns();
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
    uint64_t w0 = bench_now_ns();
    rc = phase_throughput(ctx, w0, w0 + warm, &scratch);
    if (rc)
        goto out;

    uint64_t a0 = o->alloc_count ? o->alloc_count() : 0;
    uint64_t t0 = bench_now_ns();
    rc = phase_throughput(ctx, t0, t0 + span / 2, r);
    uint64_t t1 = bench_now_ns();
    uint64_t a1 = o->alloc_count ? o->alloc_count() : 0;
    if (rc)
        goto out;
    r->seconds = (double)(t1 - t0) / 1e9;
    r->frames_per_s = (double)r->frames / r->seconds;
    r->mb_per_s = bench_mb_per_s((double)r->bytes, (double)(t1 - t0));
    r->allocs = a1 - a0;
    r->allocs_per_frame = o->alloc_count ? (double)r->allocs / (double)r->frames : -1;

    bench_rec_reset(rec);
    rc = phase_latency(ctx, bench_now_ns() + span / 2, rec);
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
        res[i].block = o->blocks[i];
        res[i].allocs_per_frame = -1;
        res[i].clock_ns = clk;
        res[i].rc = run_block(o, &rec, &res[i]);
    }
    bench_rec_free(&rec);
    return ONI_ESUCCESS;
}
