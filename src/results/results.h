/* results.h - result sets: named tables of rows written as CSV and JSON (by
 * jansson, with the machine's metadata) into a folder per benchmark, and
 * their plots, drawn by gnuplot (a program of the machine) from a script and
 * data saved beside each PNG. What every benchmark (src/bench) and `onigpu
 * run` write their figures with (docs/benchmarks.md, "Result files").
 *
 * Errors are ONI error codes (onidefs.h): ONI_EINVALARG for bad arguments,
 * ONI_EBADALLOC when memory runs out, ONI_EPATHINVALID when a file cannot be
 * written. Nothing here prints, except results_print and the note of
 * results_add_plot / results_add_bars on a plot gnuplot did not draw. */
#ifndef RESULTS_H
#define RESULTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "oni.h"

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
 * results_meta entries. Times in the date are UTC. */
struct results;

/* Start a result set. argv/argc: the command line to record (may be NULL/0);
 * gpu: GPU name or NULL. dir must exist (the CLI makes --out); the set's
 * folder <dir>/<bench> is made if missing. Returns NULL and sets *err on
 * failure: ONI_EINVALARG (a name with a '/' or starting with '-' or '.'),
 * ONI_EBADALLOC, ONI_EPATHINVALID (dir missing, or the folder not made). */
struct results *results_open(const char *dir, const char *name, int argc,
                                       char **argv, const char *gpu, int *err);

/* Add a meta entry (string or number); the last value for a key wins. */
int results_meta(struct results *r, const char *key, const char *value);
int results_meta_num(struct results *r, const char *key, double value);

/* Cells of the row being built, by column name. Columns are ordered by
 * first appearance; a row that leaves a column out (or a column that first
 * appears in a later row) gives an empty cell: CSV empty, JSON null.
 * Non-finite numbers are written the same way. At most 128 columns. Errors
 * (too many columns, no memory, an empty row) are sticky and returned by
 * results_row and results_close. */
void results_cell_str(struct results *r, const char *col, const char *value);
void results_cell_int(struct results *r, const char *col, long long value);
void results_cell_num(struct results *r, const char *col, double value);

/* Append the row built so far to table (NULL = "results") and start a new row. */
int results_row(struct results *r, const char *table);

/* Rows committed so far, over every table. */
size_t results_rows(const struct results *r);

/* Print table (NULL = "results") as an aligned text table to f. */
void results_print(const struct results *r, const char *table, FILE *f);

/* Path of a file of this result set: "<dir>/<bench>/<name>-<date><suffix>" (e.g.
 * suffix "-sizes.png"). Owned by r, valid until the next call on r. */
const char *results_path(struct results *r, const char *suffix);

/* Write the CSV and JSON files (every committed row, also after a sticky
 * error) and free r. Returns 0 or the first error met (sticky cell errors
 * included). NULL-safe. */
int results_close(struct results *r);

/* Free r without writing a file, and remove its folder <dir>/<bench> when
 * it is empty (as when results_open made it): for a run that measured
 * nothing, which leaves no result set. NULL-safe. */
void results_discard(struct results *r);

/* ---- plots, drawn by gnuplot ---------------------------------------------- */

enum { RESULTS_LINES = 0, RESULTS_POINTS = 1, RESULTS_LINES_POINTS = 2 };

struct results_series {
    const char *name;      /* legend text */
    const double *x, *y;   /* n points; on a log axis points <= 0 are skipped */
    size_t n;
    int style;             /* RESULTS_LINES, RESULTS_POINTS, RESULTS_LINES_POINTS */
};

/* A line/scatter plot, RESULTS_PLOT_W x RESULTS_PLOT_H pixels, several series in
 * distinct colours with a legend; log axes (base 10) get 10^k labels. Axis
 * ranges come from the data (gnuplot's autoscale: whole decades on log axes). */
struct results_plot {
    const char *title, *xlabel, *ylabel;
    int logx, logy;
    const struct results_series *series;
    size_t nseries;
};
#define RESULTS_PLOT_W 800
#define RESULTS_PLOT_H 520

/* Returned when a figure's script and data were written but gnuplot did not
 * draw its PNG (not installed, or it failed): positive, as no result is lost. */
#define RESULTS_NOT_RENDERED 1

/* Draw p to path (ending in ".png") with gnuplot: writes the points to
 * <stem>.dat and the script drawing them to <stem>.gp beside it (re-render
 * with `gnuplot <stem>.gp` in that directory), then runs gnuplot. 0 when the
 * PNG came out; RESULTS_NOT_RENDERED (and why, one line, in why[len] when
 * why is not NULL) when only the script and data did; ONI_EINVALARG: NULL,
 * no series, no plottable point, a path not ending in ".png";
 * ONI_EPATHINVALID: the script or data could not be written. */
int results_plot_png(const char *path, const struct results_plot *p, char *why, size_t len);

/* A bar chart: bar i spans from[i] .. to[i] on x (a log axis when logx)
 * and 0 .. count[i] on y; under and over (counts left of the first bar and
 * right of the last) are noted in the data file. */
struct results_bars {
    const char *title, *xlabel;
    const double *from, *to;
    const uint64_t *count;
    size_t n;
    uint64_t under, over;
    int logx;
};

/* Draw b to path as results_plot_png draws (<stem>.dat holds the bars:
 * from, to, count). Same returns; ONI_EINVALARG also for no bars or a
 * non-finite edge (a non-positive one on a log axis). */
int results_bars_png(const char *path, const struct results_bars *b, char *why, size_t len);

/* results_plot_png / results_bars_png into the result set: draws
 * results_path(r, "-<tag>.png") (with its -<tag>.gp and -<tag>.dat) and
 * lists the PNG in the JSON "plots". Where gnuplot did not draw it, says so
 * on stderr (the one thing here that prints besides results_print) and
 * returns 0: the script and data are the result. ONI_EINVALARG (bad tag or
 * plot) / ONI_EPATHINVALID / ONI_EBADALLOC. */
int results_add_plot(struct results *r, const char *tag, const struct results_plot *p);
int results_add_bars(struct results *r, const char *tag, const struct results_bars *b);

#endif
