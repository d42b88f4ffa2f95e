/* bench.h - onigpu's benchmark library: timing, statistics, the t = l + s/b
 * model fit, result files (CSV + JSON with machine metadata, JSON by jansson),
 * plots (drawn by gnuplot, a program of the machine), and the frames/s
 * benchmark.
 *
 * Units, everywhere in this header:
 *   - a duration sample is a uint64_t count of nanoseconds (CLOCK_MONOTONIC);
 *   - statistics are doubles in nanoseconds;
 *   - sizes are bytes; "MB" is 10^6 bytes, so MB/s = bytes / seconds / 1e6.
 *
 * Errors are ONI error codes (onidefs.h): ONI_EINVALARG for bad arguments,
 * ONI_EBADALLOC when memory runs out, ONI_EPATHINVALID when a file cannot be
 * written. Nothing here prints, except bench_report_print and the note of
 * bench_report_plot / bench_report_hist on a plot gnuplot did not draw.
 *
 * The shape of a benchmark: its command (tools/onigpu) parses and checks the
 * arguments, takes the signals (bench_cli_signals), opens the result set
 * (bench_report_open) and passes it to the body; the body (src/bench)
 * measures, adds meta, rows, tables and plots through bench_report_* and
 * returns 0 or an ONI error, keeping in the set what it measured before an
 * error; the command prints the tables and closes the set, or discards it
 * (bench_report_discard) where the body measured nothing. A body neither
 * opens nor closes nor prints a set. Followed by `roofline`, `bench emu`,
 * `bench transfer`, `bench loop` and `bench floor`; `bench frames` and
 * `bench remote` still open (or get) their set their own way. */
#ifndef BENCH_H
#define BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "oni.h"
#include "oni/util/clock.h"

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

/* ---- results: CSV + JSON + PNG in a directory ----------------------------- */

/* A result set: named tables of rows, written at close into the folder of
 * its benchmark, <dir>/<bench>, where <bench> is the name up to its first
 * '-' (name "run-cpu" goes to <dir>/run/):
 *   <dir>/<bench>/<name>-<YYYYMMDD-HHMMSS>.csv          the table "results"
 *   <dir>/<bench>/<name>-<YYYYMMDD-HHMMSS>-<table>.csv  every other table
 *   <dir>/<bench>/<name>-<YYYYMMDD-HHMMSS>.json         {"meta": {...}, "results": [rows],
 *                                                "tables": {"<table>": [rows]}, "plots": [files]}
 * meta holds: hostname, cpu (model from /proc/cpuinfo), cores, kernel, gpu
 * (when given), loadavg (/proc/loadavg at open: the machine may be shared),
 * command (the argv, each argument one shell word: quoted when it needs
 * it), date (UTC, ISO 8601), git_commit (HEAD of the checkout holding the
 * working directory, from `git rev-parse HEAD`; ONIGPU_GIT_COMMIT when set)
 * and git_dirty ("yes" when `git status` shows tracked files changed, "no"),
 * both "unknown" without git or a checkout, plus the caller's
 * bench_report_meta entries. Times in the date are UTC. */
struct bench_report;

/* Start a result set. argv/argc: the command line to record (may be NULL/0);
 * gpu: GPU name or NULL. dir must exist (the CLI makes --out); the set's
 * folder <dir>/<bench> is made if missing. Returns NULL and sets *err on
 * failure: ONI_EINVALARG (a name with a '/' or starting with '-' or '.'),
 * ONI_EBADALLOC, ONI_EPATHINVALID (dir missing, or the folder not made). */
struct bench_report *bench_report_open(const char *dir, const char *name, int argc,
                                       char **argv, const char *gpu, int *err);

/* Add a meta entry (string or number); the last value for a key wins. */
int bench_report_meta(struct bench_report *r, const char *key, const char *value);
int bench_report_meta_num(struct bench_report *r, const char *key, double value);

/* Cells of the row being built, by column name. Columns are ordered by
 * first appearance; a row that leaves a column out (or a column that first
 * appears in a later row) gives an empty cell: CSV empty, JSON null.
 * Non-finite numbers are written the same way. At most 64 columns. Errors
 * (too many columns, no memory, an empty row) are sticky and returned by
 * bench_report_row and bench_report_close. */
void bench_cell_str(struct bench_report *r, const char *col, const char *value);
void bench_cell_int(struct bench_report *r, const char *col, long long value);
void bench_cell_num(struct bench_report *r, const char *col, double value);

/* Shorthand: cells <prefix>n, _mean_ns, _sd_ns, _min_ns, _p50_ns, _p90_ns,
 * _p99_ns, _p999_ns, _max_ns for s (prefix "" gives "n", "mean_ns", ...). */
void bench_cell_stats(struct bench_report *r, const char *prefix, const struct bench_stats *s);

/* Append the row built so far to table (NULL = "results") and start a new row. */
int bench_report_row(struct bench_report *r, const char *table);

/* Print table (NULL = "results") as an aligned text table to f. */
void bench_report_print(const struct bench_report *r, const char *table, FILE *f);

/* Path of a file of this result set: "<dir>/<bench>/<name>-<date><suffix>" (e.g.
 * suffix "-sizes.png"). Owned by r, valid until the next call on r. */
const char *bench_report_path(struct bench_report *r, const char *suffix);

/* Write the CSV and JSON files (every committed row, also after a sticky
 * error) and free r. Returns 0 or the first error met (sticky cell errors
 * included). NULL-safe. */
int bench_report_close(struct bench_report *r);

/* Free r without writing a file, and remove its folder <dir>/<bench> when
 * it is empty (as when bench_report_open made it): for a run that measured
 * nothing, which leaves no result set. NULL-safe. */
void bench_report_discard(struct bench_report *r);

/* ---- plots, drawn by gnuplot ---------------------------------------------- */

enum { BENCH_LINES = 0, BENCH_POINTS = 1, BENCH_LINES_POINTS = 2 };

struct bench_series {
    const char *name;      /* legend text */
    const double *x, *y;   /* n points; on a log axis points <= 0 are skipped */
    size_t n;
    int style;             /* BENCH_LINES, BENCH_POINTS, BENCH_LINES_POINTS */
};

/* A line/scatter plot, BENCH_PLOT_W x BENCH_PLOT_H pixels, several series in
 * distinct colours with a legend; log axes (base 10) get 10^k labels. Axis
 * ranges come from the data (gnuplot's autoscale: whole decades on log axes). */
struct bench_plot {
    const char *title, *xlabel, *ylabel;
    int logx, logy;
    const struct bench_series *series;
    size_t nseries;
};
#define BENCH_PLOT_W 800
#define BENCH_PLOT_H 520

/* Returned when a figure's script and data were written but gnuplot did not
 * draw its PNG (not installed, or it failed): positive, as no result is lost. */
#define BENCH_PLOT_NOT_RENDERED 1

/* Draw p to path (ending in ".png") with gnuplot: writes the points to
 * <stem>.dat and the script drawing them to <stem>.gp beside it (re-render
 * with `gnuplot <stem>.gp` in that directory), then runs gnuplot. 0 when the
 * PNG came out; BENCH_PLOT_NOT_RENDERED (and why, one line, in why[len] when
 * why is not NULL) when only the script and data did; ONI_EINVALARG: NULL,
 * no series, no plottable point, a path not ending in ".png";
 * ONI_EPATHINVALID: the script or data could not be written. */
int bench_plot_png(const char *path, const struct bench_plot *p, char *why, size_t len);

/* Bar chart of a histogram (x: bin range in ns, log axis for log bins; y:
 * count), drawn as bench_plot_png draws (<stem>.dat holds the bins: from,
 * to, count). Same returns; ONI_EINVALARG also for a histogram without
 * counts or with non-finite edges. */
int bench_hist_png(const char *path, const char *title, const char *xlabel, const struct bench_hist *h,
                   char *why, size_t len);

/* bench_plot_png / bench_hist_png into the result set: draws
 * bench_report_path(r, "-<tag>.png") (with its -<tag>.gp and -<tag>.dat) and
 * lists the PNG in the JSON "plots". Where gnuplot did not draw it, says so
 * on stderr (the one thing here that prints besides bench_report_print) and
 * returns 0: the script and data are the result. ONI_EINVALARG (bad tag or
 * plot) / ONI_EPATHINVALID / ONI_EBADALLOC. */
int bench_report_plot(struct bench_report *r, const char *tag, const struct bench_plot *p);
int bench_report_hist(struct bench_report *r, const char *tag, const char *title,
                      const char *xlabel, const struct bench_hist *h);

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

/* The result set of `onigpu run` in dir: one row of r (the run on backend,
 * its ground truth in the file truth) and one row of each echo's latency;
 * argc/argv the command line. 0 or an ONI error (bench_report_open's). */
struct loop_run_result;
int bench_run_report(const char *dir, int argc, char **argv, int backend, const char *truth,
                     const struct loop_run_result *r);

#endif
