/* bench.h - onigpu's benchmark library: timing, statistics, the t = l + s/b
 * model fit, the statistics' cells and histograms in result sets (written by
 * src/results), and the frames/s benchmark.
 *
 * Units, everywhere in this header:
 *   - a duration sample is a uint64_t count of nanoseconds (CLOCK_MONOTONIC);
 *   - statistics are doubles in nanoseconds;
 *   - sizes are bytes; "MB" is 10^6 bytes, so MB/s = bytes / seconds / 1e6.
 *
 * Errors are ONI error codes (onidefs.h): ONI_EINVALARG for bad arguments,
 * ONI_EBADALLOC when memory runs out, ONI_EPATHINVALID when a file cannot be
 * written. Nothing here prints, except the note of bench_report_hist on a
 * plot gnuplot did not draw.
 *
 * The shape of a benchmark: its command (tools/onigpu) parses and checks the
 * arguments and calls bench_cli_run (tools/onigpu/bench_cli.h), which takes
 * the signals, opens the result set (results_open) and passes it to the
 * body; the body measures, adds meta, rows, tables and plots through
 * results_* and returns 0 or an ONI error, keeping in the set what it
 * measured before an error; bench_cli_run prints the tables and closes the
 * set, or discards it (results_discard) where the body measured
 * nothing. A body neither opens nor closes nor prints a set. */
#ifndef BENCH_H
#define BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "oni.h"
#include "oni/util/clock.h"
#include "results/results.h"

/* ---- time -------------------------------------------------------------- */

/* The clock is oni_now_ns (oni/util/clock.h), as everywhere. */

/* Where the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID) and its
 * voluntary context switches stand (-1: not known). Two system calls: take
 * marks outside timed windows. */
struct bench_cpu_mark {
    uint64_t cpu_ns;
    long voluntary;
};
void bench_cpu_mark(struct bench_cpu_mark *m);

/* Of the wall time w0..w1, how long the calling thread was kept off its CPU
 * (by another thread, the kernel, or the hypervisor where the guest
 * accounts steal time), given a mark a taken before w0 and b after w1:
 * wall minus CPU time, which the marks' wider window can only understate.
 * 0 when the thread gave up its CPU itself in between (a wait that sleeps),
 * as then the two cannot be told apart, or when a mark is not known. */
uint64_t bench_off_cpu_ns(const struct bench_cpu_mark *a, uint64_t w0, uint64_t w1,
                          const struct bench_cpu_mark *b);

/* ---- scratch files ------------------------------------------------------- */

/* Remove dir and everything under it (a benchmark's scratch directory;
 * links are removed, not followed). 0, or -1 with errno when something
 * could not be removed. */
int bench_rm_tree(const char *dir);

/* ---- stopping early ------------------------------------------------------ */

/* Ask the benchmark that runs to end early (any thread; async-signal-safe):
 * every body checks between its measurements and in its timed loops, and
 * then ends as at its normal end, with the rows measured so far (a
 * measurement cut short is of the time it ran). The CLI calls it on SIGINT
 * and SIGTERM. bench_stopped: whether it was asked (it stays asked). */
void bench_stop(void);
int bench_stopped(void);

/* ---- statistics ---------------------------------------------------------- */

/* Summary of a sample of durations (ns). Percentiles are nearest-rank
 * (loop/stats.h) on a sorted copy. sd is the sample standard
 * deviation (n - 1 in the denominator; 0 when n == 1). */
struct bench_stats {
    size_t n;
    double mean, sd, min, p50, p90, p99, p999, max;
};

/* Compute stats of n >= 1 samples. Does not modify ns (sorts a private copy).
 * ONI_EINVALARG: NULL or n == 0; ONI_EBADALLOC: no memory for the copy. */
int bench_stats_compute(const uint64_t *ns, size_t n, struct bench_stats *out);

/* How many of the n samples are above limit (0 for NULL): e.g. the
 * transfers over 20x the median, which tells one outlier from many. */
size_t bench_count_above(const uint64_t *ns, size_t n, double limit);

/* MB/s (10^6 bytes per second) for `bytes` moved in `ns` nanoseconds; 0 when ns <= 0. */
double bench_mb_per_s(double bytes, double ns);

/* Frequency histogram of durations. Bin i covers [edge(i), edge(i+1)); the
 * last bin also holds samples equal to hi. With log bins the edges are
 * geometric (lo must be > 0; samples of 0 ns count as under). */
struct bench_hist {
    size_t nbins;
    int log_bins;          /* 1: geometric edges, 0: linear */
    double lo, hi;         /* ns, first and last edge */
    uint64_t *count;       /* nbins counts, owned by the histogram */
    uint64_t under, over;  /* samples below lo / above hi */
};

/* Build a histogram of n samples into h (h's previous contents are ignored;
 * free with bench_hist_free). lo == hi == 0 picks the range from the data
 * (min..max; for log bins min is raised to 1 ns). ONI_EINVALARG: NULL, n == 0,
 * nbins == 0, lo > hi, or log bins with lo <= 0 explicitly given. */
int bench_hist_make(struct bench_hist *h, const uint64_t *ns, size_t n, size_t nbins,
                    int log_bins, double lo, double hi);

/* Lower edge of bin i (i == nbins gives hi). */
double bench_hist_edge(const struct bench_hist *h, size_t i);

/* Free the counts of h (h itself is the caller's). NULL-safe. */
void bench_hist_free(struct bench_hist *h);

/* Streaming recorder: preallocated at init, so bench_rec_add inside a timed
 * loop never allocates. Samples past capacity are not stored but counted in
 * `dropped` (report it). */
struct bench_rec {
    uint64_t *ns;
    size_t n, cap;
    uint64_t dropped;
};

/* Allocate room for cap >= 1 samples (touched once so page faults happen
 * now, not in the timed loop). ONI_EINVALARG / ONI_EBADALLOC. */
int bench_rec_init(struct bench_rec *r, size_t cap);

/* Record one sample: O(1), never allocates. */
static inline void bench_rec_add(struct bench_rec *r, uint64_t ns)
{
    if (r->n < r->cap)
        r->ns[r->n++] = ns;
    else
        r->dropped++;
}

/* Forget all samples (keeps the allocation). */
void bench_rec_reset(struct bench_rec *r);

/* Stats of the recorded samples (ONI_EINVALARG when empty). */
int bench_rec_stats(const struct bench_rec *r, struct bench_stats *out);

/* Free the sample storage. NULL-safe; r may be reused after bench_rec_init. */
void bench_rec_free(struct bench_rec *r);

/* ---- model fit: t = l + s / b (seed 001) --------------------------------- */

/* Result of fitting transfer time t (ns) against size s (bytes). */
struct bench_fit {
    size_t n;            /* points used */
    double lat_ns;       /* l: the intercept (may come out negative on noisy data) */
    double ns_per_byte;  /* 1 / b: the slope */
    double bw_Bps;       /* b in bytes/s; 0 when the slope is <= 0 (no measurable size dependence) */
    double r2;           /* coefficient of determination, in the fit's own weighting */
};

/* Weighting of bench_fit_model. Sizes usually span decades, and plain least
 * squares lets the largest sizes decide the intercept alone; RELATIVE weights
 * each point by 1/t^2, minimizing relative error, so small sizes pin l. */
enum { BENCH_FIT_ABSOLUTE = 0, BENCH_FIT_RELATIVE = 1 };

/* Least-squares fit of t[i] (ns; pass per-size medians) against size[i]
 * (bytes), n >= 2 points with at least two distinct sizes. Points whose
 * samples all had the same value are fine (only the given t[i] matter).
 * ONI_EINVALARG: NULL, n < 2, all sizes equal, a non-finite value, or
 * (RELATIVE) a t[i] <= 0. */
int bench_fit_model(const double *size, const double *t_ns, size_t n, int weighting,
                    struct bench_fit *out);

/* ---- result sets (src/results/results.h) ------------------------------- */

/* Shorthand: cells <prefix>n, _mean_ns, _sd_ns, _min_ns, _p50_ns, _p90_ns,
 * _p99_ns, _p999_ns, _max_ns for s (prefix "" gives "n", "mean_ns", ...). */
void bench_cell_stats(struct results *r, const char *prefix, const struct bench_stats *s);

/* Bar chart of a histogram (x: bin range in ns, log axis for log bins; y:
 * count), results_bars_png of its bins. Same returns; ONI_EINVALARG also
 * for a histogram without counts or with non-finite edges. */
int bench_hist_png(const char *path, const char *title, const char *xlabel, const struct bench_hist *h,
                   char *why, size_t len);
/* The same into the result set r as results_add_bars. */
int bench_report_hist(struct results *r, const char *tag, const char *title, const char *xlabel,
                      const struct bench_hist *h);

/* ---- frames/s benchmark (`onigpu bench frames`) ---------------------------- */

/* For each block size: open and init a context of `driver`, set
 * ONI_OPT_BLOCKREADSIZE, start acquisition, warm up, then
 *   phase 1 (half the time): oni_read_frame + oni_destroy_frame untimed per
 *           call -> frames/s, MB/s and heap allocations per frame;
 *   phase 2 (other half):    each read+destroy pair timed -> latency stats. */
struct bench_frames_opts {
    const char *driver;         /* ONI driver name, e.g. "test" */
    const uint32_t *blocks;     /* BLOCKREADSIZE values, bytes */
    size_t nblocks;
    double seconds;             /* per block size, both phases together (> 0) */
    /* Heap allocations made so far by the process, or NULL when they cannot
     * be counted (the CLI installs a malloc hook; tests may pass their own).
     * A counter that does not see a test malloc is ignored (not counted). */
    uint64_t (*alloc_count)(void);
};

struct bench_frames_result {
    uint32_t block;
    int rc;                     /* 0, or the ONI error that stopped this block size
                                 * (e.g. ONI_EINVALREADSIZE below the largest frame) */
    uint64_t frames;            /* phase 1: frames read */
    uint64_t bytes;             /* phase 1: payload bytes (sum of data_sz) */
    uint64_t stream_bytes;      /* phase 1: bytes in the stream (oni_read_frame's returns) */
    double seconds;             /* phase 1 wall time */
    double frames_per_s, mb_per_s; /* mb_per_s: payload */
    /* Phase 1 cut in 10 slices of equal time: the lowest, median (nearest
     * rank) and highest slice rate, frames/s. On a shared machine the median
     * slice is the steadier figure; frames_per_s is the whole phase. */
    double slice_fps_min, slice_fps_p50, slice_fps_max;
    double allocs_per_frame;    /* phase 1; < 0 when not counted */
    uint64_t allocs;            /* phase 1 total */
    struct bench_stats call_ns; /* phase 2: one oni_read_frame + oni_destroy_frame,
                                 * including one clock read (see clock_ns) */
    double clock_ns;            /* median cost of one oni_now_ns() on this machine */
};

/* Run the benchmark for every block size into res[nblocks]; a block size that
 * fails gets its error in res[i].rc and the run goes on with the next one.
 * After bench_stop the block sizes not begun, and one the stop cut short
 * before it could be measured, get res[i].block == 0.
 * Returns ONI_EINVALARG for bad options (nothing run), ONI_EBADALLOC, else 0. */
int bench_frames_run(const struct bench_frames_opts *o, struct bench_frames_result *res);

#endif
