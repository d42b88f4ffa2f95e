/* cmd_bench_floor.c - `onigpu bench floor`: the latency floor of each way the
 * host can move a 4 KiB block into GPU memory and learn that it landed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench/bench.h"
#include "bench/floor.h"
#include "bench_cli.h"
#include "cli.h"
#include "cli_oni.h"
#include "gpu/gpu.h"

static int run(int argc, char **argv);

CLI_COMMAND(bench_floor, "bench floor",
            "[--reps 100000] [--size 4096] [--mechs all|memcpy-query,memcpy-flag,memcpy-sync,drv-memcpy-flag,"
            "armed,kernel-pull,doorbell-rtt,launch-query,ptr-attrs,ptr-id] [--rounds 10] [--timeout-ms 1000] [--out docs/results]",
            "latency floor of host -> GPU copy-and-know mechanisms, interleaved; CSV, JSON", NULL, run)

/* One option of argv: 0, or exit status 2 after saying what was wrong. */
static int parse_arg(struct bench_floor_opts *o, const char *a, const char *v)
{
    const struct cli_command *cmd = &cli_cmd_bench_floor;
    uint64_t x;
    int st;
    if (!strcmp(a, "--reps")) /* counts: whole */
        return cli_arg_count(cmd, a, v, 1, FLOOR_MAX_REPS, &o->reps);
    if (!strcmp(a, "--size")) {
        if (!(st = cli_arg_size(cmd, a, v, 8, FLOOR_MAX_SIZE, 1, &x)))
            o->size = (uint32_t)x;
        return st;
    }
    if (!strcmp(a, "--mechs"))
        return cli_parse_names(cmd, a, v, floor_mech_parse, floor_mech_name, FLOOR_NMECH, FLOOR_ALL_MECHS, &o->mechs);
    if (!strcmp(a, "--rounds")) {
        if (!(st = cli_arg_count(cmd, a, v, 1, 1000000, &x)))
            o->rounds = (unsigned)x;
        return st;
    }
    if (!strcmp(a, "--timeout-ms")) {
        if (!(st = cli_arg_count(cmd, a, v, 1, 600000, &x)))
            o->timeout_ms = (uint32_t)x;
        return st;
    }
    if (!strcmp(a, "--out"))
        return cli_arg_text(cmd, a, v, "the name of a directory", &o->out_dir);
    return -1;
}

/* No set without every mechanism measured (bench_floor_run says). */
static int body(struct results *r, void *arg, int *measured)
{
    return bench_floor_run(arg, r, measured);
}

static int run(int argc, char **argv)
{
    struct bench_floor_opts o = {.reps = 100000, .size = 4096, .mechs = FLOOR_ALL_MECHS, .rounds = 10,
                                 .timeout_ms = 1000, .out_dir = "docs/results", .log = stderr};
    for (int i = 1; i < argc; i++) {
        char opt[64];
        const char *a, *v;
        cli_opt_split(argc, argv, &i, opt, sizeof opt, &a, &v);
        int st = parse_arg(&o, a, v);
        if (st < 0)
            st = cli_bad_arg(&cli_cmd_bench_floor, a == opt ? argv[i] : a);
        if (st)
            return st;
    }
    int st = cli_arg_outdir(&cli_cmd_bench_floor, "--out", o.out_dir, &o.out_dir);
    if (st)
        return st;
    char why[200];
    if (!gpu_available(why, sizeof why)) {
        printf("onigpu bench floor: no GPU: skipped (%s)\n", why);
        return 0;
    }
    char gpu[128] = "";
    gpu_name(gpu, sizeof gpu);
    static const char *const print[] = {"results", NULL};
    struct bench_cli_set set = {"bench floor", o.out_dir, "floor", gpu, print, body, &o};
    return bench_cli_run(&set);
}
