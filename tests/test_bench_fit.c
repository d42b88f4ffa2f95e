/* test_bench_fit.c - the t = l + s/b model fit of src/bench. */
#include <math.h>
#include "bench/bench.h"
#include "unit.h"

#define REL(a, b, tol) (fabs((double)(a) - (double)(b)) <= (tol) * fabs((double)(b)))

/* Sizes 64 B doubling to 16 MiB, as the transfer benchmark uses. */
static size_t sizes(double *s)
{
    size_t n = 0;
    for (double v = 64; v <= 16 * 1048576.0; v *= 2)
        s[n++] = v;
    return n;
}

TEST(fit_exact_model_both_weightings)
{
    double s[32], t[32];
    size_t n = sizes(s);
    for (size_t i = 0; i < n; i++)
        t[i] = 5000 + s[i] / 2e9 * 1e9; /* l = 5 us, b = 2 GB/s */
    for (int w = BENCH_FIT_ABSOLUTE; w <= BENCH_FIT_RELATIVE; w++) {
        struct bench_fit f;
        CHECK_RC(bench_fit_model(s, t, n, w, &f), ONI_ESUCCESS);
        CHECK_EQ(f.n, n);
        CHECK(REL(f.lat_ns, 5000, 1e-6));
        CHECK(REL(f.bw_Bps, 2e9, 1e-9));
        CHECK(REL(f.ns_per_byte, 0.5, 1e-9));
        CHECK(REL(f.r2, 1, 1e-9));
    }
}

/* Deterministic noise in [-1, 1). */
static double noise(unsigned *state)
{
    *state = *state * 1103515245u + 12345u;
    return ((*state >> 8) & 0xFFFF) / 32768.0 - 1;
}

TEST(fit_noisy_data_recovers_parameters)
{
    double s[32], t[32];
    size_t n = sizes(s);
    unsigned st = 1;
    for (size_t i = 0; i < n; i++) /* l = 3 us, b = 1.5 GB/s, +-1% multiplicative noise */
        t[i] = (3000 + s[i] / 1.5) * (1 + 0.01 * noise(&st));
    struct bench_fit f;
    CHECK_RC(bench_fit_model(s, t, n, BENCH_FIT_RELATIVE, &f), ONI_ESUCCESS);
    CHECK(REL(f.lat_ns, 3000, 0.03));
    CHECK(REL(f.bw_Bps, 1.5e9, 0.02));
    CHECK(f.r2 > 0.99 && f.r2 <= 1);

    /* Absolute weighting gets b right but lets the big sizes decide l:
     * that is why RELATIVE exists. It must still be a fit of the data. */
    CHECK_RC(bench_fit_model(s, t, n, BENCH_FIT_ABSOLUTE, &f), ONI_ESUCCESS);
    CHECK(REL(f.bw_Bps, 1.5e9, 0.02));
    CHECK(f.r2 > 0.99);
}

TEST(fit_flat_times)
{
    /* Every size took the same time (zero variance): latency only. */
    double s[4] = {64, 128, 256, 512}, t[4] = {100, 100, 100, 100};
    struct bench_fit f;
    CHECK_RC(bench_fit_model(s, t, 4, BENCH_FIT_RELATIVE, &f), ONI_ESUCCESS);
    CHECK(REL(f.lat_ns, 100, 1e-12));
    CHECK_EQ(f.bw_Bps, 0);
    CHECK_EQ(f.r2, 1);

    /* Any equal time, both weightings: the weighted mean of 5964 is not
     * exactly 5964, which once gave a bandwidth of 1e39 B/s and R^2 = 0. */
    int bad = 0;
    for (int w = 0; w < 2; w++)
        for (double v = 1; v <= 20000; v += 7) {
            double tf[4] = {v, v, v, v};
            CHECK_RC(bench_fit_model(s, tf, 4, w ? BENCH_FIT_RELATIVE : BENCH_FIT_ABSOLUTE, &f), 0);
            bad += f.bw_Bps != 0 || f.r2 != 1 || f.lat_ns != v;
        }
    CHECK_EQ(bad, 0);

    /* Time falling with size: no meaningful bandwidth, reported as 0. */
    double t2[4] = {400, 300, 200, 100};
    CHECK_RC(bench_fit_model(s, t2, 4, BENCH_FIT_ABSOLUTE, &f), ONI_ESUCCESS);
    CHECK_EQ(f.bw_Bps, 0);
    CHECK(f.ns_per_byte < 0);
}

TEST(fit_two_points_and_bad_input)
{
    double s[2] = {1000, 2000}, t[2] = {2000, 3000};
    struct bench_fit f;
    CHECK_RC(bench_fit_model(s, t, 2, BENCH_FIT_ABSOLUTE, &f), ONI_ESUCCESS);
    CHECK(REL(f.lat_ns, 1000, 1e-12));
    CHECK(REL(f.bw_Bps, 1e9, 1e-12));

    double same[3] = {64, 64, 64}, t3[3] = {1, 2, 3};
    CHECK_RC(bench_fit_model(same, t3, 3, BENCH_FIT_ABSOLUTE, &f), ONI_EINVALARG);
    CHECK_RC(bench_fit_model(s, t, 1, BENCH_FIT_ABSOLUTE, &f), ONI_EINVALARG);
    CHECK_RC(bench_fit_model(NULL, t, 2, BENCH_FIT_ABSOLUTE, &f), ONI_EINVALARG);
    CHECK_RC(bench_fit_model(s, NULL, 2, BENCH_FIT_ABSOLUTE, &f), ONI_EINVALARG);
    CHECK_RC(bench_fit_model(s, t, 2, BENCH_FIT_ABSOLUTE, NULL), ONI_EINVALARG);
    CHECK_RC(bench_fit_model(s, t, 2, 7, &f), ONI_EINVALARG);
    double tz[2] = {0, 10};
    CHECK_RC(bench_fit_model(s, tz, 2, BENCH_FIT_RELATIVE, &f), ONI_EINVALARG);
    CHECK_RC(bench_fit_model(s, tz, 2, BENCH_FIT_ABSOLUTE, &f), ONI_ESUCCESS);
    double tn[2] = {NAN, 10};
    CHECK_RC(bench_fit_model(s, tn, 2, BENCH_FIT_ABSOLUTE, &f), ONI_EINVALARG);
}

/* The weighted least squares of a few noisy points against the normal
 * equations solved directly (small numbers: the raw sums are exact enough):
 * a fit with the wrong weights somewhere still recovers an exact model, so
 * only noisy points tell. */
static void oracle(const double *s, const double *t, size_t n, int relative, double *lat, double *nspb, double *r2)
{
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (size_t i = 0; i < n; i++) {
        double w = relative ? 1 / (t[i] * t[i]) : 1;
        sw += w, sx += w * s[i], sy += w * t[i], sxx += w * s[i] * s[i], sxy += w * s[i] * t[i];
    }
    *nspb = (sw * sxy - sx * sy) / (sw * sxx - sx * sx);
    *lat = (sy - *nspb * sx) / sw;
    double ym = sy / sw, res = 0, tot = 0;
    for (size_t i = 0; i < n; i++) {
        double w = relative ? 1 / (t[i] * t[i]) : 1, r = t[i] - (*lat + *nspb * s[i]);
        res += w * r * r;
        tot += w * (t[i] - ym) * (t[i] - ym);
    }
    *r2 = 1 - res / tot;
}

TEST(fit_matches_the_normal_equations)
{
    double s[5] = {1000, 2000, 4000, 8000, 16000}, t[5] = {3000, 4100, 5900, 10200, 17500};
    for (int w = BENCH_FIT_ABSOLUTE; w <= BENCH_FIT_RELATIVE; w++) {
        struct bench_fit f;
        double lat, nspb, r2;
        oracle(s, t, 5, w == BENCH_FIT_RELATIVE, &lat, &nspb, &r2);
        CHECK_RC(bench_fit_model(s, t, 5, w, &f), ONI_ESUCCESS);
        CHECK(REL(f.lat_ns, lat, 1e-9));
        CHECK(REL(f.ns_per_byte, nspb, 1e-9));
        CHECK(REL(f.bw_Bps, 1e9 / nspb, 1e-9));
        CHECK(REL(f.r2, r2, 1e-9));
        CHECK(f.r2 < 0.9999); /* noisy enough for a wrong weight to show */
    }
}
