/* test_bench_stats.c - statistics, histograms and the sample recorder of src/bench. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <time.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include "bench/bench.h"
#include "loop/stats.h"
#include "unit.h"

#define NEAR(a, b, tol) (fabs((double)(a) - (double)(b)) <= (tol))

/* Allocations counted for this program (a sanitizer build skips what needs them). */
#include "bench/alloc_hook.h"

TEST(stats_one_to_ten)
{
    uint64_t v[10] = {7, 3, 10, 1, 5, 9, 2, 8, 6, 4};
    uint64_t copy[10];
    memcpy(copy, v, sizeof v);
    struct bench_stats s;
    CHECK_RC(bench_stats_compute(v, 10, &s), ONI_ESUCCESS);
    CHECK_EQ(s.n, 10);
    CHECK(NEAR(s.mean, 5.5, 1e-12));
    CHECK(NEAR(s.sd, sqrt(82.5 / 9), 1e-12)); /* sum of squared deviations 82.5, n - 1 = 9 */
    CHECK_EQ(s.min, 1);
    CHECK_EQ(s.max, 10);
    CHECK_EQ(s.p50, 5);   /* rank ceil(5) = 5 */
    CHECK_EQ(s.p90, 9);   /* rank 9 */
    CHECK_EQ(s.p99, 10);  /* rank ceil(9.9) = 10 */
    CHECK_EQ(s.p999, 10);
    CHECK(!memcmp(v, copy, sizeof v)); /* input untouched */
}

TEST(stats_percentiles_of_thousand)
{
    enum { N = 1000 };
    uint64_t v[N];
    for (int i = 0; i < N; i++)
        v[i] = (uint64_t)((i * 7919) % N) + 1; /* 1..1000, shuffled */
    struct bench_stats s;
    CHECK_RC(bench_stats_compute(v, N, &s), ONI_ESUCCESS);
    CHECK_EQ(s.p50, 500);
    CHECK_EQ(s.p90, 900);
    CHECK_EQ(s.p99, 990);
    CHECK_EQ(s.p999, 999);
    CHECK_EQ(s.min, 1);
    CHECK_EQ(s.max, 1000);
    CHECK(NEAR(s.mean, 500.5, 1e-9));
}

TEST(stats_percentile_edges)
{
    uint64_t v[] = {10, 20, 30, 40};
    CHECK_EQ(loop_percentile_sorted(v, 4, 0), 10);
    CHECK_EQ(loop_percentile_sorted(v, 4, 25), 10);
    CHECK_EQ(loop_percentile_sorted(v, 4, 25.1), 20);
    CHECK_EQ(loop_percentile_sorted(v, 4, 100), 40);
    CHECK_EQ(loop_percentile_sorted(v, 4, 150), 40);
}

/* pX is the sample of rank ceil(X/100 * n), also where n is large enough
 * that a real fraction of a rank (1/1000) is below a fixed 1e-9 * rank:
 * checked against the same rank in integers, in tenths of a percent. */
TEST(stats_percentile_rank_for_large_n)
{
    static const unsigned tenths[] = {500, 900, 990, 999};
    uint64_t x = 88172645463325252ull;
    int bad = 0;
    for (int k = 0; k < 200000; k++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t n = 1 + (size_t)(x % 20000000); /* the sample values are their ranks, but virtual */
        for (size_t i = 0; i < sizeof tenths / sizeof *tenths; i++) {
            uint64_t want = ((uint64_t)tenths[i] * n + 999) / 1000;
            bad += loop_percentile_rank(n, tenths[i] / 10.0) != want;
        }
    }
    CHECK_EQ(bad, 0);
    /* out of range and NaN (a cast of NaN to size_t is undefined: UBSan) */
    CHECK_EQ(loop_percentile_rank(10, NAN), 1);
    CHECK_EQ(loop_percentile_rank(10, -5), 1);
    CHECK_EQ(loop_percentile_rank(10, 1e300), 10);
    /* a p so small that p/100 * n is 0: still the first sample, not rank 0 */
    CHECK_EQ(loop_percentile_rank(10, DBL_TRUE_MIN), 1);
    enum { N = 1001999 };
    uint64_t *v = malloc(N * sizeof *v);
    REQUIRE(v);
    for (size_t i = 0; i < N; i++)
        v[i] = i + 1;
    struct bench_stats st;
    CHECK_RC(bench_stats_compute(v, N, &st), ONI_ESUCCESS);
    CHECK_EQ(st.p999, 1000998); /* ceil(1000997.001) */
    free(v);
}

TEST(stats_single_and_large_values)
{
    struct bench_stats s;
    uint64_t one = 42;
    CHECK_RC(bench_stats_compute(&one, 1, &s), ONI_ESUCCESS);
    CHECK_EQ(s.sd, 0);
    CHECK(s.min == 42 && s.p50 == 42 && s.p999 == 42 && s.max == 42 && s.mean == 42);

    /* A large offset must not swamp a small spread. */
    uint64_t big[3] = {1000000000000ull, 1000000000001ull, 1000000000002ull};
    CHECK_RC(bench_stats_compute(big, 3, &s), ONI_ESUCCESS);
    CHECK(NEAR(s.sd, 1.0, 1e-6));
    CHECK(NEAR(s.mean, 1000000000001.0, 1e-3));
}

TEST(count_above_limit)
{
    const uint64_t v[] = {10, 20, 200, 201, 5, 1000};
    CHECK_EQ(bench_count_above(v, 6, 200), 2); /* strictly above */
    CHECK_EQ(bench_count_above(v, 6, 4.5), 6);
    CHECK_EQ(bench_count_above(v, 6, 1000), 0);
    CHECK_EQ(bench_count_above(v, 0, 0), 0);
    CHECK_EQ(bench_count_above(NULL, 6, 0), 0);
}

TEST(stats_bad_args)
{
    struct bench_stats s;
    uint64_t v = 1;
    CHECK_RC(bench_stats_compute(NULL, 1, &s), ONI_EINVALARG);
    CHECK_RC(bench_stats_compute(&v, 0, &s), ONI_EINVALARG);
    CHECK_RC(bench_stats_compute(&v, 1, NULL), ONI_EINVALARG);
}

TEST(mb_per_s)
{
    CHECK(NEAR(bench_mb_per_s(1e6, 1e9), 1.0, 1e-12));     /* 1 MB in 1 s */
    CHECK(NEAR(bench_mb_per_s(4096, 1000), 4096.0, 1e-9)); /* 4096 B in 1 us */
    CHECK_EQ(bench_mb_per_s(100, 0), 0);
}

TEST(hist_linear)
{
    uint64_t v[100];
    for (int i = 0; i < 100; i++)
        v[i] = (uint64_t)i;
    struct bench_hist h;
    CHECK_RC(bench_hist_make(&h, v, 100, 10, 0, 0, 100), ONI_ESUCCESS);
    for (size_t i = 0; i < 10; i++) {
        CHECK_EQ(h.count[i], 10);
        CHECK(NEAR(bench_hist_edge(&h, i), 10.0 * (double)i, 1e-9));
    }
    CHECK_EQ(bench_hist_edge(&h, 10), 100);
    CHECK_EQ(h.under, 0);
    CHECK_EQ(h.over, 0);
    bench_hist_free(&h);
    CHECK(h.count == NULL);

    /* Auto range: min..max, the maximum lands in the last bin. */
    CHECK_RC(bench_hist_make(&h, v, 100, 4, 0, 0, 0), ONI_ESUCCESS);
    CHECK_EQ(h.lo, 0);
    CHECK_EQ(h.hi, 99);
    uint64_t total = 0;
    for (size_t i = 0; i < 4; i++)
        total += h.count[i];
    CHECK_EQ(total, 100);
    CHECK_EQ(h.count[3], 25); /* [74.25, 99] holds 75..99 */
    bench_hist_free(&h);
}

TEST(hist_log_and_range)
{
    uint64_t v[] = {0, 1, 5, 10, 50, 100, 999, 1000, 5000};
    struct bench_hist h;
    CHECK_RC(bench_hist_make(&h, v, 9, 3, 1, 1, 1000), ONI_ESUCCESS);
    CHECK(NEAR(bench_hist_edge(&h, 1), 10, 1e-9));
    CHECK(NEAR(bench_hist_edge(&h, 2), 100, 1e-9));
    CHECK_EQ(h.under, 1);    /* 0 */
    CHECK_EQ(h.over, 1);     /* 5000 */
    CHECK_EQ(h.count[0], 2); /* 1, 5 */
    CHECK_EQ(h.count[1], 2); /* 10, 50 */
    CHECK_EQ(h.count[2], 3); /* 100, 999, 1000 (hi is inclusive) */
    bench_hist_free(&h);

    /* All samples equal: one range, everything in a bin. */
    uint64_t same[5] = {7, 7, 7, 7, 7};
    CHECK_RC(bench_hist_make(&h, same, 5, 8, 1, 0, 0), ONI_ESUCCESS);
    CHECK_EQ(h.count[0], 5);
    bench_hist_free(&h);
}

/* Bins as documented, [edge(i), edge(i + 1)) and the last one closed, for
 * samples on or next to the edges, also where (x - lo) / (hi - lo) * nbins
 * rounds to a hair under an edge's index (45 of [0, 66] in 22 bins gives
 * 14.999..., and 45 is edge 15 exactly). Checked against bench_hist_edge. */
static int hist_by_edges_bad(uint64_t *v, size_t n, size_t nb, int log_bins, double lo, double hi)
{
    struct bench_hist h;
    if (bench_hist_make(&h, v, n, nb, log_bins, lo, hi) != ONI_ESUCCESS)
        return 1;
    uint64_t want[64] = {0};
    for (size_t k = 0; k < n; k++) {
        size_t b = 0;
        while (b + 1 < nb && (double)v[k] >= bench_hist_edge(&h, b + 1))
            b++;
        want[b]++;
    }
    int bad = 0;
    for (size_t b = 0; b < nb; b++)
        bad += h.count[b] != want[b];
    bench_hist_free(&h);
    return bad;
}

TEST(hist_values_on_edges)
{
    int bad = 0;
    uint64_t v[200];
    for (size_t nb = 1; nb < 60; nb++) {
        size_t n = 0;
        for (size_t i = 0; i <= nb; i++) /* 3i - 1, 3i, 3i + 1 round edge i of [0, 3 nb] */
            for (int d = -1; d <= 1; d++)
                if ((i || d >= 0) && (i < nb || d <= 0))
                    v[n++] = 3 * i + (uint64_t)(int64_t)d;
        bad += hist_by_edges_bad(v, n, nb, 0, 0, (double)(3 * nb));
    }
    CHECK_EQ(bad, 0);
    for (size_t nb = 2; nb <= 8; nb++) { /* decades: 1, 10, ..., 10^nb, and their neighbours */
        size_t n = 0;
        uint64_t p = 1;
        for (size_t i = 0; i <= nb; i++, p *= 10) {
            v[n++] = p;
            if (i)
                v[n++] = p - 1;
            if (i < nb)
                v[n++] = p + 1;
        }
        bad += hist_by_edges_bad(v, n, nb, 1, 1, (double)(p / 10));
    }
    CHECK_EQ(bad, 0);
    /* the case itself: 45 of [0, 66] in 22 bins is in bin 15 */
    uint64_t one = 45;
    struct bench_hist h;
    REQUIRE(bench_hist_make(&h, &one, 1, 22, 0, 0, 66) == ONI_ESUCCESS);
    CHECK_EQ(h.count[15], 1);
    bench_hist_free(&h);
}

/* Log bins over the data's range start at 1: a 0 (a clock that did not move)
 * is counted under the range, not binned through log(0). */
TEST(hist_log_auto_range_with_zeros)
{
    uint64_t v[] = {0, 0, 1, 10, 100};
    struct bench_hist h;
    CHECK_RC(bench_hist_make(&h, v, 5, 2, 1, 0, 0), ONI_ESUCCESS);
    CHECK_EQ(h.lo, 1);
    CHECK_EQ(h.hi, 100);
    CHECK_EQ(h.under, 2);
    CHECK_EQ(h.count[0], 1); /* 1 */
    CHECK_EQ(h.count[1], 2); /* 10, 100 */
    CHECK_EQ(h.over, 0);
    bench_hist_free(&h);
    /* only zeros: an empty range at 1, every sample under it */
    uint64_t z[3] = {0, 0, 0};
    CHECK_RC(bench_hist_make(&h, z, 3, 4, 1, 0, 0), ONI_ESUCCESS);
    CHECK_EQ(h.lo, 1);
    CHECK_EQ(h.hi, 1);
    CHECK_EQ(h.under, 3);
    bench_hist_free(&h);
}

TEST(hist_bad_args)
{
    uint64_t v[2] = {1, 2};
    struct bench_hist h;
    CHECK_RC(bench_hist_make(NULL, v, 2, 4, 0, 0, 0), ONI_EINVALARG);
    CHECK_RC(bench_hist_make(&h, NULL, 2, 4, 0, 0, 0), ONI_EINVALARG);
    CHECK_RC(bench_hist_make(&h, v, 0, 4, 0, 0, 0), ONI_EINVALARG);
    CHECK_RC(bench_hist_make(&h, v, 2, 0, 0, 0, 0), ONI_EINVALARG);
    CHECK_RC(bench_hist_make(&h, v, 2, 4, 0, 5, 1), ONI_EINVALARG);
    CHECK_RC(bench_hist_make(&h, v, 2, 4, 1, 0, 10), ONI_EINVALARG); /* log with lo 0 */
    bench_hist_free(NULL);
}

TEST(recorder_capacity_and_drops)
{
    struct bench_rec r;
    CHECK_RC(bench_rec_init(&r, 0), ONI_EINVALARG);
    REQUIRE(bench_rec_init(&r, 4) == ONI_ESUCCESS);
    for (uint64_t i = 1; i <= 6; i++)
        bench_rec_add(&r, i * 10);
    CHECK_EQ(r.n, 4);
    CHECK_EQ(r.dropped, 2);
    struct bench_stats s;
    CHECK_RC(bench_rec_stats(&r, &s), ONI_ESUCCESS);
    CHECK_EQ(s.n, 4);
    CHECK_EQ(s.max, 40);
    bench_rec_reset(&r);
    CHECK_EQ(r.n, 0);
    CHECK_EQ(r.dropped, 0);
    CHECK_RC(bench_rec_stats(&r, &s), ONI_EINVALARG); /* empty */
    bench_rec_free(&r);
    CHECK(r.ns == NULL);
    bench_rec_free(NULL);
}

TEST(recorder_never_allocates)
{
#if BENCH_ALLOC_HOOK
    struct bench_rec r;
    REQUIRE(bench_rec_init(&r, 100000) == ONI_ESUCCESS);
    /* The hook must see allocations at all, or a zero below proves nothing. */
    uint64_t a = bench_alloc_count();
    free(malloc(16));
    CHECK_EQ(bench_alloc_count() - a, 1);

    uint64_t before = bench_alloc_count();
    for (uint64_t i = 0; i < 200000; i++) /* past capacity too */
        bench_rec_add(&r, oni_now_ns() & 0xFFFF);
    uint64_t after = bench_alloc_count();
    CHECK_EQ(after - before, 0);
    CHECK_EQ(r.n, 100000);
    CHECK_EQ(r.dropped, 100000);
    bench_rec_free(&r);
#else
    SKIP("no allocation hook in sanitizer builds (the sanitizer owns malloc)");
#endif
}

/* A sleep is the thread's own doing: no off-CPU time is claimed for it. */
TEST(off_cpu_not_claimed_for_a_sleep)
{
    struct bench_cpu_mark a, b;
    bench_cpu_mark(&a);
    uint64_t w0 = oni_now_ns();
    struct timespec nap = {0, 20 * 1000 * 1000};
    nanosleep(&nap, NULL);
    uint64_t w1 = oni_now_ns();
    bench_cpu_mark(&b);
    CHECK(w1 - w0 >= 20u * 1000 * 1000);
    CHECK(b.voluntary > a.voluntary);
    CHECK_EQ(bench_off_cpu_ns(&a, w0, w1, &b), 0);
}

static atomic_int spin_stop;
static void *spin(void *arg)
{
    (void)arg;
    while (!atomic_load(&spin_stop))
        ;
    return NULL;
}

/* Two threads spinning on one CPU take turns: the measuring one is kept
 * off its CPU about half the time, and the time is seen. */
TEST(off_cpu_seen_when_preempted)
{
    cpu_set_t one, old;
    REQUIRE(pthread_getaffinity_np(pthread_self(), sizeof old, &old) == 0);
    int cpu = 0;
    while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &old))
        cpu++;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (pthread_setaffinity_np(pthread_self(), sizeof one, &one))
        SKIP("cannot pin threads to one CPU here");
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_t t;
    atomic_store(&spin_stop, 0);
    if (pthread_attr_setaffinity_np(&attr, sizeof one, &one) || pthread_create(&t, &attr, spin, NULL)) {
        pthread_attr_destroy(&attr);
        pthread_setaffinity_np(pthread_self(), sizeof old, &old);
        SKIP("cannot start a thread pinned to that CPU");
    }
    struct bench_cpu_mark a, b;
    bench_cpu_mark(&a);
    uint64_t w0 = oni_now_ns(), w1;
    do
        w1 = oni_now_ns();
    while (w1 - w0 < 200u * 1000 * 1000);
    bench_cpu_mark(&b);
    atomic_store(&spin_stop, 1);
    pthread_join(t, NULL);
    pthread_attr_destroy(&attr);
    pthread_setaffinity_np(pthread_self(), sizeof old, &old);
    uint64_t off = bench_off_cpu_ns(&a, w0, w1, &b);
    CHECK_EQ(b.voluntary, a.voluntary); /* it never slept */
    CHECK(off >= 40u * 1000 * 1000);     /* about 100 ms expected */
}
