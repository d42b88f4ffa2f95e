/* cmd_bench_latency.c - `onigpu bench latency`: spike -> stimulus latency
 * of the closed loop on the emulated card, swept over blocks per backend
 * and spin budget (src/bench/bench_latency.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench/bench.h"
#include "bench/bench_latency.h"
#include "bench_cli.h"
#include "cli.h"
#include "gpu/gpu.h"
#include "loop/loop.h"
#include "loop/run.h"

static int run(int argc, char **argv);

CLI_COMMAND(bench_latency, "bench latency",
            "[--backends all|LIST] [--blocks 1,2,4,8,16,32] [--spins 50,1000] [--reads dma,blocking] [--seconds 2] "
            "[--repeat 1] "
            "[--emu SPEC]... [--out docs/results]",
            "closed-loop latency on the emulated card against block size, per backend and spin; "
            "where the time after the block's last sample goes; CSV, JSON, PNG", NULL, run)

/* A comma-separated list of whole numbers lo..hi into v[0..BENCH_LATENCY_MAX). 0 or 2. */
static int parse_u32s(const char *opt, const char *list, uint32_t lo, uint32_t hi, uint32_t *v, int *n)
{
    size_t k = 0;
    int st = cli_parse_u32s(&cli_cmd_bench_latency, opt, list, lo, hi, v, BENCH_LATENCY_MAX, &k);
    *n = (int)k;
    return st;
}

/* "dma", "blocking" or both, in order. 0 or 2. */
static int parse_reads(const char *opt, const char *v, struct bench_latency_opts *o)
{
    o->nreads = 0;
    if (v && (!strcmp(v, "dma") || !strcmp(v, "dma,blocking")))
        o->reads[o->nreads++] = 1;
    if (v && (!strcmp(v, "blocking") || !strcmp(v, "dma,blocking") || !strcmp(v, "blocking,dma")))
        o->reads[o->nreads++] = 0;
    if (v && !strcmp(v, "blocking,dma"))
        o->reads[o->nreads++] = 1;
    return o->nreads ? 0 : cli_bad_value(&cli_cmd_bench_latency, opt, v, "dma, blocking, or both comma-separated");
}

static int parse_args(int argc, char **argv, struct bench_latency_opts *o)
{
    const struct cli_command *cmd = &cli_cmd_bench_latency;
    int nspec = 0;
    for (int i = 1; i < argc; i++) {
        char opt[64];
        const char *a, *v;
        cli_opt_split(argc, argv, &i, opt, sizeof opt, &a, &v);
        int st;
        uint64_t n;
        if (!strcmp(a, "--backends")) {
            st = bench_cli_backends(cmd, a, v, &o->backends);
        } else if (!strcmp(a, "--blocks")) {
            st = parse_u32s(a, v, 1, LOOP_RUN_MAX_BLOCK, o->blocks, &o->nblocks);
        } else if (!strcmp(a, "--spins")) {
            st = parse_u32s(a, v, 1, 1000000, o->spins, &o->nspins);
        } else if (!strcmp(a, "--reads")) {
            st = parse_reads(a, v, o);
        } else if (!strcmp(a, "--seconds")) {
            st = cli_arg_seconds(cmd, a, v, LOOP_RUN_MIN_SECONDS, 0, 3600, &o->seconds);
        } else if (!strcmp(a, "--repeat")) {
            if (!(st = cli_arg_count(cmd, a, v, 1, 64, &n)))
                o->repeat = (int)n;
        } else if (!strcmp(a, "--emu") || !strcmp(a, "--devices")) {
            /* repeatable: each card is a variant */
            if (nspec == 4)
                st = cli_bad_value(cmd, a, v, "given at most 4 times");
            else if (!(st = cli_arg_text(cmd, a, v, "the emulated card's spec string (oniemu.h)", &o->specs[nspec])))
                o->nspecs = ++nspec;
        } else if (!strcmp(a, "--out")) {
            st = cli_arg_text(cmd, a, v, "the name of a directory", &o->out_dir);
        } else {
            st = cli_bad_arg(cmd, a == opt ? argv[i] : a);
        }
        if (st)
            return st;
    }
    if (o->nspecs * o->nspins * o->nreads > 16) {
        fprintf(stderr, "onigpu bench latency: at most 16 variants (cards x spins x reads)\n");
        return cli_usage(cmd);
    }
    return 0;
}

struct latency_arg {
    struct bench_latency_opts *o;
    int failed, measured;
};

/* Every run has its row, one without an echo too (a slow sanitized build):
 * the set is kept unless an error or a signal ended the sweep before any
 * run gave a latency or failed. */
static int body(struct results *r, void *arg, int *measured)
{
    struct latency_arg *a = arg;
    int rc = bench_latency_run(a->o, r, &a->failed, &a->measured);
    *measured = a->measured || a->failed || (!rc && !bench_stopped());
    return rc;
}

static int run(int argc, char **argv)
{
    struct bench_latency_opts o;
    bench_latency_defaults(&o);
    o.log = stderr;
    int st = parse_args(argc, argv, &o);
    if (st || (st = cli_arg_outdir(&cli_cmd_bench_latency, "--out", o.out_dir, &o.out_dir)) != 0)
        return st;
    char gpu[128] = "";
    gpu_name(gpu, sizeof gpu);
    static const char *const print[] = {"ratios", NULL};
    struct latency_arg a = {&o, 0, 0};
    struct bench_cli_set set = {"bench latency", o.out_dir, "latency", gpu[0] ? gpu : NULL, print, body, &a};
    st = bench_cli_run(&set);
    if (st)
        return st;
    if (!a.measured)
        fprintf(stderr, "onigpu bench latency: no run gave a latency\n");
    else if (a.failed)
        fprintf(stderr, "onigpu bench latency: %d runs failed (the error column says why)\n", a.failed);
    return a.failed || !a.measured ? 1 : 0;
}
