/* cmd_bench_floor.c - `onigpu bench floor`: the latency floor of each way the
 * host can move a 4 KiB block into GPU memory and learn that it landed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static int parse_arg(struct bench_floor_opts *o, const char *a, const char *v)
{
    uint64_t x;
    if (!strcmp(a, "--reps"))
        return cli_parse_u64(v, &x) || !x || x > FLOOR_MAX_REPS ? -1 : (o->reps = x, 0); /* counts: whole */
    if (!strcmp(a, "--size"))
        return cli_parse_size(v, &x) || x < 8 || x > FLOOR_MAX_SIZE ? -1 : (o->size = (uint32_t)x, 0);
    if (!strcmp(a, "--mechs"))
        return cli_parse_names("onigpu bench floor", "mechanism", v, floor_mech_parse, FLOOR_ALL_MECHS, &o->mechs);
    if (!strcmp(a, "--rounds"))
        return cli_parse_u64(v, &x) || !x || x > 1000000 ? -1 : (o->rounds = (unsigned)x, 0);
    if (!strcmp(a, "--timeout-ms"))
        return cli_parse_u64(v, &x) || !x || x > 600000 ? -1 : (o->timeout_ms = (uint32_t)x, 0);
    if (!strcmp(a, "--out"))
        return o->out_dir = v, 0;
    return -1;
}

static int run(int argc, char **argv)
{
    struct bench_floor_opts o = {.reps = 100000, .size = 4096, .mechs = FLOOR_ALL_MECHS, .rounds = 10,
                                 .timeout_ms = 1000, .out_dir = "docs/results", .log = stderr};
    o.argc = cli_command_line(&o.argv);
    for (int i = 1; i < argc; i++) {
        char opt[64];
        const char *a, *v;
        cli_opt_split(argc, argv, &i, opt, sizeof opt, &a, &v);
        if (!v || parse_arg(&o, a, v)) {
            fprintf(stderr, "onigpu bench floor: bad option or value: %s %s\n", a, v ? v : "");
            return cli_usage(&cli_cmd_bench_floor);
        }
    }
    int st = bench_cli_out("bench floor", o.out_dir);
    if (st)
        return st;
    char why[200];
    if (!gpu_available(why, sizeof why)) {
        printf("onigpu bench floor: no GPU: skipped (%s)\n", why);
        return 0;
    }
    if (bench_cli_signals("bench floor"))
        return 1;
    int rc = bench_floor_run(&o);
    bench_cli_signals_end("bench floor");
    return rc ? cli_fail("bench floor", rc) : 0;
}
