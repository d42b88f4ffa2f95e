/* cmd_bench_view.c - `onigpu bench view`: the closed loop's latency with
 * no live view, and with its server and 0, 1 and 3 connected clients
 * (src/bench/bench_view.h); results as CSV + JSON + PNG under --out
 * (default docs/results). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench/bench_view.h"
#include "bench_cli.h"
#include "cli.h"
#include "loop/run.h"

static int view_bench_run(int argc, char **argv);
CLI_COMMAND(bench_view, "bench view", "[--backend NAME] [--block FRAMES] [--seconds T] [--rounds N] [--out DIR]",
            "the closed loop's latency without the live view and with 0, 1 and 3 clients (ratios)", NULL,
            view_bench_run)

struct view_arg {
    struct bench_view_opts *o;
    char why[400];
};

static int body(struct results *r, void *arg, int *measured)
{
    struct view_arg *a = arg;
    results_meta(r, "backend", loop_backend_name(a->o->backend));
    results_meta_num(r, "block_frames", a->o->block);
    results_meta_num(r, "seconds_per_run", a->o->seconds);
    results_meta_num(r, "rounds", a->o->rounds);
    return bench_view_run(a->o, r, a->why, sizeof a->why);
}

static int view_bench_run(int argc, char **argv)
{
    const struct cli_command *cmd = &cli_cmd_bench_view;
    struct bench_view_opts o = {.backend = LOOP_CPU, .block = 30, .seconds = 5, .rounds = 3, .tmp_dir = "/tmp"};
    const char *out = "docs/results";
    for (int i = 1; i < argc; i++) {
        char opt[64];
        const char *a, *v;
        cli_opt_split(argc, argv, &i, opt, sizeof opt, &a, &v);
        uint64_t n;
        int st;
        if (!strcmp(a, "--backend"))
            st = cli_arg_name(cmd, a, v, loop_backend_parse, loop_backend_name, LOOP_NBACKENDS, &o.backend);
        else if (!strcmp(a, "--block"))
            st = (st = cli_arg_count(cmd, a, v, 1, LOOP_RUN_MAX_BLOCK, &n)) ? st : (o.block = (uint32_t)n, 0);
        else if (!strcmp(a, "--seconds"))
            st = cli_arg_seconds(cmd, a, v, 2, 0, 3600, &o.seconds);
        else if (!strcmp(a, "--rounds"))
            st = (st = cli_arg_count(cmd, a, v, 1, 100, &n)) ? st : (o.rounds = (uint32_t)n, 0);
        else if (!strcmp(a, "--out"))
            st = cli_arg_text(cmd, a, v, "the name of a directory", &out);
        else
            st = cli_bad_arg(cmd, a == opt ? argv[i] : a);
        if (st)
            return st;
    }
    char why[400];
    if (!loop_backend_available(o.backend, why, sizeof why)) {
        fprintf(stderr, "onigpu bench view: backend %s is not available: %s\n", loop_backend_name(o.backend), why);
        return 1;
    }
    const char *dir = getenv("ONIGPU_WEB_DIR");
    o.web_dir = dir && *dir ? dir : ONIGPU_WEB_DIR;
    int rc = cli_arg_outdir(cmd, "--out", out, &out);
    if (rc)
        return rc;
    static const char *const print[] = {"latency", NULL};
    struct view_arg va = {&o, ""};
    struct bench_cli_set set = {"bench view", out, "view", NULL, print, body, &va};
    int st = bench_cli_run(&set);
    if (va.why[0])
        fprintf(stderr, "onigpu bench view: %s\n", va.why);
    return st;
}
