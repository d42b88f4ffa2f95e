/* stats.c - see stats.h. */
#include "stats.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

size_t loop_percentile_rank(size_t n, double p)
{
    if (!(p > 0)) /* NaN too: a cast of NaN to size_t is undefined */
        return 1;
    if (p >= 100)
        return n;
    /* Nearest rank: ceil(p/100 * n). The product carries a few ulps of
     * rounding (p/100 is inexact), which must not push an exact rank such as
     * 0.999 * 1000 up by one; a fixed margin would be larger than a real
     * fraction (1/1000 of a rank) once n passes 10^6. */
    double r = p / 100.0 * (double)n;
    size_t rank = (size_t)ceil(r * (1 - 4 * DBL_EPSILON));
    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return rank;
}

double loop_percentile_sorted(const uint64_t *sorted, size_t n, double p)
{
    return (double)sorted[loop_percentile_rank(n, p) - 1];
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

void loop_sort_u64(uint64_t *v, size_t n)
{
    if (n > 1)
        qsort(v, n, sizeof *v, cmp_u64);
}

double loop_percentile_sorted_f64(const double *sorted, size_t n, double p)
{
    return sorted[loop_percentile_rank(n, p) - 1];
}

static int cmp_f64(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void loop_sort_f64(double *v, size_t n)
{
    if (n > 1)
        qsort(v, n, sizeof *v, cmp_f64);
}
