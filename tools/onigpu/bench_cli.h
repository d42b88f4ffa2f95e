/* bench_cli.h - what every `onigpu bench ...` does around its body: take
 * SIGINT/SIGTERM as "end early" (bench_stop), so that a stopped benchmark
 * writes what it measured, and open, keep or discard, and close its result
 * set (docs/benchmarks.md, "One shape"). (--out is checked by
 * cli_arg_outdir, cli.h, before any of this.) */
#ifndef BENCH_CLI_H
#define BENCH_CLI_H

struct results;
struct cli_command;

/* One command's result set and the body that fills it. */
struct bench_cli_set {
    const char *cmd;   /* "bench loop": for the messages */
    const char *out;   /* the checked --out directory */
    const char *name;  /* the set's name (results_open) */
    const char *gpu;   /* the GPU's name for the meta, or NULL */
    const char *const *print; /* tables printed at the end, NULL-ended (NULL: none) */
    /* Adds rows to r; 0 or an ONI error. *measured starts at -1; a body
     * that leaves it so is taken to have measured something when the set
     * holds a row, else it says (0: nothing worth a set, 1: keep it). */
    int (*body)(struct results *r, void *arg, int *measured);
    void *arg;
};

/* Take the signals, open the set, run the body, stop taking the signals;
 * then keep the set when the body measured something (also after its
 * error or a signal: what was measured is written), printing its tables
 * and "results: PATH", or discard it. 0, or 1 after saying why on stderr
 * (the body's error, nothing measured, a file not written). */
int bench_cli_run(const struct bench_cli_set *s);

/* The first two steps alone, for a command that makes several sets: take
 * SIGINT and SIGTERM from now on, on a thread of their own, as bench_stop
 * (call it before any other thread starts: a driver's, a helper's). 0, or
 * 1 after saying why. */
int bench_cli_signals(const char *cmd);

/* Stop taking them (after the body returned), and say on stderr when the
 * run was ended early. */
void bench_cli_signals_end(const char *cmd);

/* --backends all|LIST of cmd into *mask (unchanged for "all": the caller's
 * default, the available ones), each named backend available here. 0; 2:
 * an unknown name (said as cli_parse_names says it); 1: a backend that
 * cannot run here (said). */
int bench_cli_backends(const struct cli_command *cmd, const char *opt, const char *list, unsigned *mask);

#endif
