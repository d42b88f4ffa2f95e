/* cmd_bench_scale.c - `onigpu bench scale`: the closed loop on the emulated
 * card swept over probes x algorithm x backend (src/bench/bench_scale.h). */
#include <stdio.h>
#include <string.h>
#include "bench/bench.h"
#include "bench/bench_scale.h"
#include "bench_cli.h"
#include "cli.h"
#include "gpu/gpu.h"
#include "loop/loop.h"
#include "loop/run.h"

static int run(int argc, char **argv);

CLI_COMMAND(bench_scale, "bench scale",
            "[--backends all|LIST] [--probes 1,2,4,8,16] [--algos all|threshold,tmatch] [--block 16] [--seconds 3] "
            "[--repeat 1] [--out docs/results]",
            "where the GPU pays: the closed loop against probes per algorithm and backend; keeping up, latency, F1; "
            "CSV, JSON, PNG", NULL, run)

static const char *algo_name(int i)
{
    const struct bench_scale_algo *a = bench_scale_algo(i);
    return a ? a->name : NULL;
}

static int nalgos(void)
{
    int n = 0;
    while (bench_scale_algo(n))
        n++;
    return n;
}

static int parse_args(int argc, char **argv, struct bench_scale_opts *o)
{
    const struct cli_command *cmd = &cli_cmd_bench_scale;
    for (int i = 1; i < argc; i++) {
        char opt[64];
        const char *a, *v;
        cli_opt_split(argc, argv, &i, opt, sizeof opt, &a, &v);
        int st;
        uint64_t n;
        size_t k;
        if (!strcmp(a, "--backends")) {
            st = bench_cli_backends(cmd, a, v, &o->backends);
        } else if (!strcmp(a, "--probes")) {
            if (!(st = cli_parse_u32s(cmd, a, v, 1, LOOP_RUN_MAX_PROBES, o->probes, BENCH_SCALE_MAX, &k)))
                o->nprobes = (int)k;
        } else if (!strcmp(a, "--algos")) {
            st = cli_parse_names(cmd, a, v, bench_scale_algo_parse, algo_name, nalgos(), (1u << nalgos()) - 1,
                                 &o->algos);
        } else if (!strcmp(a, "--block")) {
            if (!(st = cli_arg_count(cmd, a, v, 1, LOOP_RUN_MAX_BLOCK, &n)))
                o->block = (uint32_t)n;
        } else if (!strcmp(a, "--seconds")) {
            st = cli_arg_seconds(cmd, a, v, LOOP_RUN_MIN_SECONDS, 0, 3600, &o->seconds);
        } else if (!strcmp(a, "--repeat")) {
            if (!(st = cli_arg_count(cmd, a, v, 1, 64, &n)))
                o->repeat = (int)n;
        } else if (!strcmp(a, "--out")) {
            st = cli_arg_text(cmd, a, v, "the name of a directory", &o->out_dir);
        } else {
            st = cli_bad_arg(cmd, a == opt ? argv[i] : a);
        }
        if (st)
            return st;
    }
    return 0;
}

struct scale_arg {
    struct bench_scale_opts *o;
    int failed, measured;
};

/* Every run has its row; the set is kept unless an error or a signal ended
 * the sweep before any run processed frames or failed. */
static int body(struct results *r, void *arg, int *measured)
{
    struct scale_arg *a = arg;
    int rc = bench_scale_run(a->o, r, &a->failed, &a->measured);
    *measured = a->measured || a->failed || (!rc && !bench_stopped());
    return rc;
}

static int run(int argc, char **argv)
{
    struct bench_scale_opts o;
    bench_scale_defaults(&o);
    o.log = stderr;
    int st = parse_args(argc, argv, &o);
    if (st || (st = cli_arg_outdir(&cli_cmd_bench_scale, "--out", o.out_dir, &o.out_dir)) != 0)
        return st;
    char gpu[128] = "";
    gpu_name(gpu, sizeof gpu);
    static const char *const print[] = {"results", "ratios", NULL};
    struct scale_arg a = {&o, 0, 0};
    struct bench_cli_set set = {"bench scale", o.out_dir, "scale", gpu[0] ? gpu : NULL, print, body, &a};
    st = bench_cli_run(&set);
    if (st)
        return st;
    if (!a.measured)
        fprintf(stderr, "onigpu bench scale: no run processed a frame\n");
    else if (a.failed)
        fprintf(stderr, "onigpu bench scale: %d runs failed (the error column says why)\n", a.failed);
    return a.failed || !a.measured ? 1 : 0;
}
