/* stats.c - summary statistics, histograms and the sample recorder. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include "bench.h"
#include "loop/stats.h"


void bench_cpu_mark(struct bench_cpu_mark *m)
{
    struct rusage ru;
    struct timespec ts;
    m->voluntary = getrusage(RUSAGE_THREAD, &ru) ? -1 : ru.ru_nvcsw;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)) {
        m->voluntary = -1; /* unknown: no off-CPU time is claimed from this mark */
        ts.tv_sec = ts.tv_nsec = 0;
    }
    m->cpu_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t bench_off_cpu_ns(const struct bench_cpu_mark *a, uint64_t w0, uint64_t w1,
                          const struct bench_cpu_mark *b)
{
    uint64_t cpu = b->cpu_ns - a->cpu_ns;
    if (a->voluntary < 0 || b->voluntary != a->voluntary || w1 - w0 <= cpu)
        return 0;
    return (w1 - w0) - cpu;
}

double bench_mb_per_s(double bytes, double ns)
{
    return ns > 0 ? bytes / ns * 1e3 : 0;
}

size_t bench_count_above(const uint64_t *ns, size_t n, double limit)
{
    size_t k = 0;
    for (size_t i = 0; ns && i < n; i++)
        k += (double)ns[i] > limit;
    return k;
}

int bench_stats_compute(const uint64_t *ns, size_t n, struct bench_stats *out)
{
    if (!ns || !n || !out)
        return ONI_EINVALARG;
    uint64_t *s = malloc(n * sizeof *s);
    if (!s)
        return ONI_EBADALLOC;
    memcpy(s, ns, n * sizeof *s);
    loop_sort_u64(s, n);

    /* Welford's update keeps the SD accurate when the mean is large
     * compared with the spread (e.g. 1e9 ns +- 10 ns). */
    double mean = 0, m2 = 0;
    for (size_t i = 0; i < n; i++) {
        double x = (double)s[i], d = x - mean;
        mean += d / (double)(i + 1);
        m2 += d * (x - mean);
    }
    out->n = n;
    out->mean = mean;
    out->sd = n > 1 ? sqrt(m2 / (double)(n - 1)) : 0;
    out->min = (double)s[0];
    out->max = (double)s[n - 1];
    out->p50 = loop_percentile_sorted(s, n, 50);
    out->p90 = loop_percentile_sorted(s, n, 90);
    out->p99 = loop_percentile_sorted(s, n, 99);
    out->p999 = loop_percentile_sorted(s, n, 99.9);
    free(s);
    return ONI_ESUCCESS;
}

double bench_hist_edge(const struct bench_hist *h, size_t i)
{
    if (i >= h->nbins)
        return h->hi;
    double f = (double)i / (double)h->nbins;
    if (h->log_bins)
        return h->lo * pow(h->hi / h->lo, f);
    return h->lo + (h->hi - h->lo) * f;
}

/* Bin index of x in [lo, hi]; the caller has range-checked x. */
static size_t hist_bin(const struct bench_hist *h, double x)
{
    double f;
    if (h->hi <= h->lo)
        return 0;
    if (h->log_bins)
        f = log(x / h->lo) / log(h->hi / h->lo);
    else
        f = (x - h->lo) / (h->hi - h->lo);
    size_t b = (size_t)(f * (double)h->nbins);
    if (b >= h->nbins)
        b = h->nbins - 1;
    /* Floating-point rounding may land a value exactly on an edge in the
     * neighbouring bin: correct against the edges themselves. */
    while (b > 0 && x < bench_hist_edge(h, b))
        b--;
    while (b + 1 < h->nbins && x >= bench_hist_edge(h, b + 1))
        b++;
    return b;
}

int bench_hist_make(struct bench_hist *h, const uint64_t *ns, size_t n, size_t nbins,
                    int log_bins, double lo, double hi)
{
    if (!h || !ns || !n || !nbins || lo > hi || !isfinite(lo) || !isfinite(hi))
        return ONI_EINVALARG;
    int auto_range = lo == 0 && hi == 0;
    if (log_bins && !auto_range && lo <= 0)
        return ONI_EINVALARG;
    if (auto_range) {
        uint64_t mn = ns[0], mx = ns[0];
        for (size_t i = 1; i < n; i++) {
            if (ns[i] < mn) mn = ns[i];
            if (ns[i] > mx) mx = ns[i];
        }
        lo = (double)mn;
        hi = (double)mx;
        if (log_bins && lo < 1)
            lo = 1;
        if (hi < lo)
            hi = lo;
    }
    memset(h, 0, sizeof *h);
    h->count = calloc(nbins, sizeof *h->count);
    if (!h->count)
        return ONI_EBADALLOC;
    h->nbins = nbins;
    h->log_bins = log_bins != 0;
    h->lo = lo;
    h->hi = hi;
    for (size_t i = 0; i < n; i++) {
        double x = (double)ns[i];
        if (x < lo)
            h->under++;
        else if (x > hi)
            h->over++;
        else
            h->count[hist_bin(h, x)]++;
    }
    return ONI_ESUCCESS;
}

void bench_hist_free(struct bench_hist *h)
{
    if (!h)
        return;
    free(h->count);
    h->count = NULL;
    h->nbins = 0;
}

int bench_rec_init(struct bench_rec *r, size_t cap)
{
    if (!r || !cap || cap > SIZE_MAX / sizeof(uint64_t))
        return ONI_EINVALARG;
    memset(r, 0, sizeof *r);
    r->ns = malloc(cap * sizeof *r->ns);
    if (!r->ns)
        return ONI_EBADALLOC;
    /* Touch every page now so the timed loop takes no page faults. */
    memset(r->ns, 0, cap * sizeof *r->ns);
    r->cap = cap;
    return ONI_ESUCCESS;
}

void bench_rec_reset(struct bench_rec *r)
{
    r->n = 0;
    r->dropped = 0;
}

int bench_rec_stats(const struct bench_rec *r, struct bench_stats *out)
{
    if (!r)
        return ONI_EINVALARG;
    return bench_stats_compute(r->ns, r->n, out);
}

void bench_rec_free(struct bench_rec *r)
{
    if (!r)
        return;
    free(r->ns);
    memset(r, 0, sizeof *r);
}
void bench_cell_stats(struct results *r, const char *prefix, const struct bench_stats *s)
{
    static const char *names[] = {"mean_ns", "sd_ns", "min_ns", "p50_ns", "p90_ns",
                                  "p99_ns", "p999_ns", "max_ns"};
    if (!r)
        return;
    if (!prefix || !s) {
        results_cell_num(r, "", 0); /* an empty column name: the set's sticky ONI_EINVALARG */
        return;
    }
    const double v[] = {s->mean, s->sd, s->min, s->p50, s->p90, s->p99, s->p999, s->max};
    char col[128];
    snprintf(col, sizeof col, "%s%sn", prefix, *prefix ? "_" : "");
    results_cell_int(r, col, (long long)s->n);
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        snprintf(col, sizeof col, "%s%s%s", prefix, *prefix ? "_" : "", names[i]);
        results_cell_num(r, col, v[i]);
    }
}

/* A histogram's bins as bars (a bin of zero width spans to the top edge). */
static int hist_bars(const struct bench_hist *h, const char *title, const char *xlabel, struct results_bars *b)
{
    if (!h || !h->count || !h->nbins || !isfinite(h->lo) || !isfinite(h->hi) || (h->log_bins && h->lo <= 0))
        return ONI_EINVALARG;
    double *from = malloc(h->nbins * sizeof *from), *to = malloc(h->nbins * sizeof *to);
    if (!from || !to) {
        free(from);
        free(to);
        return ONI_EBADALLOC;
    }
    double hi = h->hi > h->lo ? h->hi : h->lo + (h->log_bins ? h->lo : 1);
    for (size_t i = 0; i < h->nbins; i++) {
        from[i] = bench_hist_edge(h, i);
        to[i] = bench_hist_edge(h, i + 1);
        if (to[i] <= from[i])
            to[i] = hi;
    }
    *b = (struct results_bars){title, xlabel, from, to, h->count, h->nbins, h->under, h->over, h->log_bins};
    return 0;
}

int bench_hist_png(const char *path, const char *title, const char *xlabel, const struct bench_hist *h,
                   char *why, size_t len)
{
    struct results_bars b;
    int rc = hist_bars(h, title, xlabel, &b);
    if (rc)
        return rc;
    rc = results_bars_png(path, &b, why, len);
    free((void *)b.from);
    free((void *)b.to);
    return rc;
}

int bench_report_hist(struct results *r, const char *tag, const char *title, const char *xlabel,
                      const struct bench_hist *h)
{
    struct results_bars b;
    int rc = hist_bars(h, title, xlabel, &b);
    if (rc)
        return rc;
    rc = results_add_bars(r, tag, &b);
    free((void *)b.from);
    free((void *)b.to);
    return rc;
}
