/* stats.h - nearest-rank percentiles of a sample of integers (latencies in
 * clock ticks or ns), for the loop's summaries and the benchmarks (one
 * definition of a percentile for both).
 *
 * pX is the smallest sample v such that at least X% of the samples are <= v
 * (rank ceil(X/100 * n), 1-based): every percentile is a value that was
 * really measured. */
#ifndef LOOP_STATS_H
#define LOOP_STATS_H

#include <stddef.h>
#include <stdint.h>

/* The 1-based rank of percentile p of n >= 1 samples: ceil(p/100 * n)
 * clamped to 1..n (p NaN or <= 0: 1). */
size_t loop_percentile_rank(size_t n, double p);

/* Percentile p (0..100) of n >= 1 samples sorted ascending (p <= 0: the
 * minimum). */
double loop_percentile_sorted(const uint64_t *sorted, size_t n, double p);

/* Sort v[0..n) ascending in place (n may be 0). */
void loop_sort_u64(uint64_t *v, size_t n);

/* The same for signed real values (durations placed on two clocks may come
 * out below zero); no NaN in v. */
double loop_percentile_sorted_f64(const double *sorted, size_t n, double p);
void loop_sort_f64(double *v, size_t n);

#endif
