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
    if (bench_cli_signals("bench view"))
        return 1;
    char **full;
    int nfull = cli_command_line(&full);
    struct bench_report *r = bench_report_open(out, "view", nfull, full, NULL, &rc);
    if (!r) {
        bench_cli_signals_end("bench view");
        return cli_fail(out, rc);
    }
    bench_report_meta(r, "backend", loop_backend_name(o.backend));
    bench_report_meta_num(r, "block_frames", o.block);
    bench_report_meta_num(r, "seconds_per_run", o.seconds);
    bench_report_meta_num(r, "rounds", o.rounds);
    rc = bench_view_run(&o, r, why, sizeof why);
    bench_cli_signals_end("bench view");
    bench_report_print(r, "latency", stdout);
    const char *json = bench_report_path(r, ".json");
    char where[1024];
    snprintf(where, sizeof where, "%s", json ? json : out);
    int wrc = bench_report_close(r);
    if (rc) {
        fprintf(stderr, "onigpu bench view: %s\n", why[0] ? why : oni_error_str(rc));
        return 1;
    }
    if (wrc)
        return cli_fail("writing results", wrc);
    printf("results: %s (and the -latency .csv, -latency.png)\n", where);
    return 0;
}
