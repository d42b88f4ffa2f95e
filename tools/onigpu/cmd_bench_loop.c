/* cmd_bench_loop.c - `onigpu bench loop`: thesis table 5.2 on every backend. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench/bench.h"
#include "bench/bench_loop.h"
#include "bench_cli.h"
#include "cli.h"
#include "cli_oni.h"
#include "gpu/gpu.h"
#include "loop/loop.h"

static int run(int argc, char **argv);

CLI_COMMAND(bench_loop, "bench loop",
            "[--sizes 4kB/4kB,4kB/400kB,10MB/10MB,10MB/1GB] [--ai 0.75,10] [--backends all|LIST] "
            "[--blocks 2000] [--seconds 2] [--source mem|emu] [--link PRESET] [--out docs/results]",
            "closed-loop round trip per backend (read -> MAC compute -> send back); CSV, JSON, PNG", NULL, run)

static int parse_scen(char *list, struct bench_loop_opts *o)
{
    o->nscen = 0;
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *slash = strchr(t, '/');
        if (!slash || o->nscen >= BENCH_LOOP_MAX)
            return -1;
        *slash = 0;
        if (cli_parse_size(t, &o->data[o->nscen]) || cli_parse_size(slash + 1, &o->compute[o->nscen]) ||
            !bench_loop_sizes_ok(o->data[o->nscen], o->compute[o->nscen]))
            return -1;
        o->nscen++;
    }
    return o->nscen ? 0 : -1;
}

static int parse_ai(char *list, struct bench_loop_opts *o)
{
    o->nai = 0;
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        double v;
        if (cli_parse_decimal(t, &v) || !bench_loop_iters(v) || o->nai >= BENCH_LOOP_MAX)
            return -1;
        o->ai[o->nai++] = v;
    }
    return o->nai ? 0 : -1;
}

/* Lists are split in a copy: argv itself is recorded in the results' meta.
 * 0, or 2 after saying what the list must be. */
static int parse_list(int (*fn)(char *, struct bench_loop_opts *), const char *opt, const char *v, const char *what,
                      struct bench_loop_opts *o)
{
    char *copy = v ? strdup(v) : NULL;
    int rc = copy ? fn(copy, o) : -1;
    free(copy);
    return rc ? cli_bad_value(&cli_cmd_bench_loop, opt, v, "%s; at most %d", what, BENCH_LOOP_MAX) : 0;
}

/* Parse argv into o: 0, or the exit status after a message. */
static int parse_args(int argc, char **argv, struct bench_loop_opts *o)
{
    const struct cli_command *cmd = &cli_cmd_bench_loop;
    for (int i = 1; i < argc; i++) {
        char opt[64];
        const char *a, *v;
        cli_opt_split(argc, argv, &i, opt, sizeof opt, &a, &v);
        int st;
        if (!strcmp(a, "--sizes")) {
            st = parse_list(parse_scen, a, v,
                            "a comma-separated list of DATA/COMPUTE sizes: data a multiple of 4 from 4 B to 1 GiB, "
                            "compute a multiple of data",
                            o);
        } else if (!strcmp(a, "--ai")) {
            st = parse_list(parse_ai, a, v,
                            "a comma-separated list of multiples of 0.25 from 0.25 to 10000 (4 x AI MAC iterations "
                            "per element)",
                            o);
        } else if (!strcmp(a, "--backends")) {
            st = bench_cli_backends(&cli_cmd_bench_loop, a, v, &o->backends);
        } else if (!strcmp(a, "--blocks")) {
            st = cli_arg_count(cmd, a, v, 5, 10000000, &o->blocks); /* a count: no fraction, no unit */
        } else if (!strcmp(a, "--seconds")) {
            st = cli_arg_seconds(cmd, a, v, 0, 1, INFINITY, &o->seconds);
        } else if (!strcmp(a, "--out")) {
            st = cli_arg_text(cmd, a, v, "the name of a directory", &o->out_dir);
        } else if (!strcmp(a, "--source")) {
            st = v && (!strcmp(v, "mem") || !strcmp(v, "emu")) ? 0 : cli_bad_value(cmd, a, v, "mem or emu");
            o->source = v;
        } else if (!strcmp(a, "--link")) {
            st = cli_arg_text(cmd, a, v, cli_link_allowed(), &o->link);
        } else {
            st = cli_bad_arg(cmd, a == opt ? argv[i] : a);
        }
        if (st)
            return st;
    }
    /* The in-memory source has no link: a preset there would be recorded
     * beside rows that never went through it. */
    if (o->link && strcmp(o->source, "emu")) {
        fprintf(stderr, "onigpu bench loop: --link needs --source emu\n");
        return cli_usage(&cli_cmd_bench_loop);
    }
    return cli_check_link(&cli_cmd_bench_loop, o->link);
}

struct loop_run_arg {
    struct bench_loop_opts *o;
    int failed;
};

static int body(struct results *r, void *arg, int *measured)
{
    struct loop_run_arg *a = arg;
    return bench_loop_run(a->o, r, &a->failed, measured);
}

static int run(int argc, char **argv)
{
    struct bench_loop_opts o;
    bench_loop_defaults(&o);
    o.log = stderr;
    int st = parse_args(argc, argv, &o);
    if (st || (st = cli_arg_outdir(&cli_cmd_bench_loop, "--out", o.out_dir, &o.out_dir)) != 0)
        return st;
    int total = 0;
    for (int b = 0; b < LOOP_NBACKENDS; b++) {
        char why[160];
        if (!loop_backend_available(b, why, sizeof why))
            fprintf(stderr, "onigpu bench loop: %s not available: %s\n", loop_backend_name(b), why);
        total += o.backends >> b & 1;
    }
    total *= o.nscen * o.nai;
    char gpu[128] = "";
    gpu_name(gpu, sizeof gpu); /* "" without a GPU */
    static const char *const print[] = {"results", NULL};
    struct loop_run_arg a = {&o, 0};
    struct bench_cli_set set = {"bench loop", o.out_dir, "loop", gpu[0] ? gpu : NULL, print, body, &a};
    st = bench_cli_run(&set);
    if (a.failed && a.failed < total)
        fprintf(stderr, "onigpu bench loop: %d of %d configurations failed (the error column says why)\n", a.failed,
                total);
    return st ? st : a.failed ? 1 : 0;
}
