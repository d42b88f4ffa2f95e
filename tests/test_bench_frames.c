/* test_bench_frames.c - the frames/s benchmark (bench_frames_run) against the
 * built-in test driver: results are consistent, failures are per block size,
 * allocation counting is used only when it works; phase 1's slices, on a
 * made-up clock. */
#include <errno.h>
#include <stdatomic.h>
#include "bench/bench.h"
#include "unit.h"

/* The slices are internal to bench_frames.c: its copy here (renamed, so the
 * tests below still run the library's bench_frames_run) exposes them. */
#define bench_frames_run bench_frames_run_copy_for_slices
#include "bench/bench_frames.c"
#undef bench_frames_run

/* Allocations counted for this program (a sanitizer build skips what needs them). */
#include "bench/alloc_hook.h"

static uint64_t frozen_counter(void)
{
    return 7; /* sees nothing */
}

TEST(frames_bad_options)
{
    uint32_t blocks[1] = {4096};
    struct bench_frames_result res[1];
    struct bench_frames_opts o = {"test", blocks, 1, 0.1, NULL};
    CHECK_RC(bench_frames_run(NULL, res), ONI_EINVALARG);
    CHECK_RC(bench_frames_run(&o, NULL), ONI_EINVALARG);
    o.seconds = 0;
    CHECK_RC(bench_frames_run(&o, res), ONI_EINVALARG);
    o.seconds = 0.1;
    o.nblocks = 0;
    CHECK_RC(bench_frames_run(&o, res), ONI_EINVALARG);
    o.nblocks = 1;
    o.driver = NULL;
    CHECK_RC(bench_frames_run(&o, res), ONI_EINVALARG);
}

TEST(frames_test_driver)
{
    /* 64 is below the test driver's largest frame (792 bytes): that block
     * size fails alone and the others still run. */
    uint32_t blocks[3] = {64, 4096, 65536};
    struct bench_frames_result res[3];
    struct bench_frames_opts o = {"test", blocks, 3, 0.3, NULL};
#if BENCH_ALLOC_HOOK
    o.alloc_count = bench_alloc_count;
#endif
    REQUIRE(bench_frames_run(&o, res) == ONI_ESUCCESS);
    CHECK_EQ(res[0].block, 64);
    CHECK(res[0].rc < 0);
    CHECK_EQ(res[0].frames, 0);
    for (int i = 1; i < 3; i++) {
        const struct bench_frames_result *r = &res[i];
        CHECK_EQ(r->block, blocks[i]);
        CHECK_RC(r->rc, ONI_ESUCCESS);
        CHECK(r->frames > 0);
        CHECK(r->bytes > 0);
        CHECK(r->stream_bytes > r->bytes); /* every frame has a 16-byte header */
        CHECK(r->stream_bytes >= r->bytes + 16 * r->frames);
        CHECK(r->seconds > 0.1 && r->seconds < 2);
        CHECK(r->frames_per_s > 0);
        CHECK(r->slice_fps_min > 0);
        CHECK(r->slice_fps_min <= r->slice_fps_p50 && r->slice_fps_p50 <= r->slice_fps_max);
        CHECK(r->mb_per_s > 0);
        /* the rates are phase 1's frames and payload bytes over its time */
        CHECK(fabs(r->frames_per_s * r->seconds - (double)r->frames) <= 1e-9 * (double)r->frames);
        CHECK(fabs(r->mb_per_s * r->seconds * 1e6 - (double)r->bytes) <= 1e-9 * (double)r->bytes);
        CHECK(r->call_ns.n > 0);
        CHECK(r->call_ns.min <= r->call_ns.p50 && r->call_ns.p50 <= r->call_ns.p99);
        CHECK(r->call_ns.p99 <= r->call_ns.p999 && r->call_ns.p999 <= r->call_ns.max);
        /* Phase 2 times calls one after the other: together they last as
         * long as the phase (half of 0.3 s), at most one call more; each
         * timed from the phase's start they would add up to far more. */
        CHECK(r->call_ns.mean * (double)r->call_ns.n <= (0.15e9 + r->call_ns.max) * (1 + 1e-9));
        CHECK(r->clock_ns < 1e5); /* one clock read costs ns, not 100 us */
        /* The core allocates nothing per frame in steady state (its own
         * tests say so); a count here means the benchmark allocated. */
        if (BENCH_ALLOC_HOOK) {
            CHECK_EQ(r->allocs, 0);
            /* -1 would mean the counter was dropped as not working: a false zero */
            CHECK(r->allocs_per_frame == 0);
        } else
            CHECK(r->allocs_per_frame < 0);
    }
}

TEST(frames_counter_that_sees_nothing_is_ignored)
{
    uint32_t blocks[1] = {4096};
    struct bench_frames_result res[1];
    struct bench_frames_opts o = {"test", blocks, 1, 0.05, frozen_counter};
    REQUIRE(bench_frames_run(&o, res) == ONI_ESUCCESS);
    CHECK_RC(res[0].rc, ONI_ESUCCESS);
    CHECK(res[0].allocs_per_frame < 0);
}

TEST(frames_unknown_driver)
{
    uint32_t blocks[2] = {4096, 8192};
    struct bench_frames_result res[2];
    struct bench_frames_opts o = {"no-such-driver-xyz", blocks, 2, 0.05, NULL};
    REQUIRE(bench_frames_run(&o, res) == ONI_ESUCCESS);
    CHECK(res[0].rc < 0);
    CHECK(res[1].rc < 0);
}

/* Feed slices readings of 256 frames every `step` ns from t0 until `until`
 * (as phase_throughput does: the last reading is the first at or past it),
 * except none in [gap_from, gap_to): one reading at gap_to instead. */
static void feed(struct slices *sl, uint64_t t0, uint64_t until, uint64_t step, uint64_t gap_from, uint64_t gap_to)
{
    slices_init(sl, t0, until);
    uint64_t now = t0;
    do {
        now += step;
        if (now > gap_from && now < gap_to)
            now = gap_to;
        slices_add(sl, 256, now);
    } while (now < until);
    slices_end(sl, now);
}

TEST(frames_ten_slices_on_a_fixed_grid)
{
    /* A reading every 3.3 us that does not divide a slice (0.1 s + 0.7 ns):
     * with slice ends at "reading + slice length" they drifted and the
     * tenth slice was never closed (9 slices). */
    struct slices sl;
    uint64_t t0 = 1000, step = 3301;
    feed(&sl, t0, t0 + 1000000007u, step, 0, 0);
    CHECK_EQ(sl.n, NSLICES);
    double want = 256e9 / step;
    for (size_t i = 0; i < sl.n; i++)
        if (sl.rate[i] < want * 0.999 || sl.rate[i] > want * 1.001)
            UNIT_FAIL("slice %zu: %llu frames/s, want %.0f", i, (unsigned long long)sl.rate[i], want);

    /* Readings exactly on the grid points: slices of exactly 4 readings. */
    feed(&sl, t0, t0 + 1000000000u, 25000000u, 0, 0);
    CHECK_EQ(sl.n, NSLICES);
    for (size_t i = 0; i < sl.n; i++)
        CHECK_EQ(sl.rate[i], 256 * 4 * 10);
}

TEST(frames_slice_over_a_stall)
{
    /* No reading from 0.15 s to 0.42 s: slice 1 closes at 0.42 s over all of
     * that time, slice 2 ends on the grid at 0.5 s, then 5 more: 8 slices,
     * the slowest the one with the stall. */
    struct slices sl;
    uint64_t t0 = 0, ms = 1000000u;
    feed(&sl, t0, 1000 * ms, 100000u, 150 * ms, 420 * ms);
    CHECK_EQ(sl.n, 8);
    CHECK(sl.rate[1] < sl.rate[0] / 2);
    for (size_t i = 2; i < sl.n; i++)
        CHECK(sl.rate[i] > sl.rate[1] * 2);

    /* A stall past the phase's end: one slice for it, nothing after. */
    feed(&sl, t0, 1000 * ms, 100000u, 550 * ms, 1200 * ms);
    CHECK_EQ(sl.n, 6);

    /* A phase shorter than NSLICES ns (slice length 0): one slice. */
    feed(&sl, t0, 5, 100000u, 0, 0);
    CHECK_EQ(sl.n, 1);
}

/* Phase 1's summary: the lowest, median (nearest rank) and highest slice
 * rate, whatever order the slices closed in. */
TEST(frames_slice_summary)
{
    static const uint64_t rates[NSLICES] = {70, 10, 100, 40, 90, 20, 60, 30, 80, 50};
    struct slices sl = {.n = NSLICES};
    memcpy(sl.rate, rates, sizeof rates);
    struct bench_frames_result r = {0};
    slices_summary(&sl, &r);
    CHECK(r.slice_fps_min == 10 && r.slice_fps_max == 100);
    CHECK(r.slice_fps_p50 == 50); /* rank 5 of 10 */
    static const uint64_t three[3] = {30, 10, 20};
    sl.n = 3;
    memcpy(sl.rate, three, sizeof three);
    slices_summary(&sl, &r);
    CHECK(r.slice_fps_min == 10 && r.slice_fps_p50 == 20 && r.slice_fps_max == 30);
}
