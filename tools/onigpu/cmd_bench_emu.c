/* cmd_bench_emu.c - `onigpu bench emu`: the emulated card through liboni
 * (src/bench/bench_emu.h: link presets, generation per core, echo, frame
 * age); results as CSV + JSON under --out (default docs/results). */
#include <stdio.h>
#include <string.h>
#include "bench/bench_emu.h"
#include "bench_cli.h"
#include "cli.h"

static int emu_bench_run(int argc, char **argv);
CLI_COMMAND(bench_emu, "bench emu", "[--seconds T] [--only link,gen,echo,age] [--out DIR]",
            "the emulated card through liboni: MB/s per PCIe link preset, generation per core, echo, frame age",
            NULL, emu_bench_run)

static int part_bit(const char *name)
{
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, bench_emu_parts[i]))
            return i;
    return -1;
}

static const char *part_name(int i)
{
    return bench_emu_parts[i];
}

static int body(struct results *r, void *arg, int *measured)
{
    const struct bench_emu_opts *o = arg;
    results_meta_num(r, "seconds_per_measurement", o->seconds);
    return bench_emu_run(o, r);
}

static int emu_bench_run(int argc, char **argv)
{
    const struct cli_command *cmd = &cli_cmd_bench_emu;
    struct bench_emu_opts o = {1.0, 0, 0};
    const char *out = "docs/results";
    for (int i = 1; i < argc; i++) {
        char opt[64];
        const char *a, *v;
        cli_opt_split(argc, argv, &i, opt, sizeof opt, &a, &v);
        int st;
        if (!strcmp(a, "--seconds"))
            st = cli_arg_seconds(cmd, a, v, 0, 1, 3600, &o.seconds);
        else if (!strcmp(a, "--only"))
            st = cli_parse_names(cmd, a, v, part_bit, part_name, 4, BENCH_EMU_ALL, &o.parts);
        else if (!strcmp(a, "--out"))
            st = cli_arg_text(cmd, a, v, "the name of a directory", &out);
        else
            st = cli_bad_arg(cmd, a == opt ? argv[i] : a);
        if (st)
            return st;
    }
    int rc = cli_arg_outdir(cmd, "--out", out, &out);
    if (rc)
        return rc;
    struct bench_cli_set set = {"bench emu", out, "emu-liboni", NULL, NULL, body, &o};
    return bench_cli_run(&set);
}
