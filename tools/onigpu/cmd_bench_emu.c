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

static int emu_bench_run(int argc, char **argv)
{
    struct bench_emu_opts o = {1.0, 0, 0};
    const char *out = "docs/results";
    for (int i = 1; i < argc; i++) {
        char opt[64];
        const char *a, *v;
        cli_opt_split(argc, argv, &i, opt, sizeof opt, &a, &v);
        if (v && !strcmp(a, "--seconds")) {
            if (cli_parse_seconds(v, &o.seconds) || !(o.seconds > 0) || o.seconds > 3600) {
                fprintf(stderr, "onigpu bench emu: bad --seconds '%s'\n", v);
                return cli_usage(&cli_cmd_bench_emu);
            }
        } else if (v && !strcmp(a, "--only")) {
            if (cli_parse_names("onigpu bench emu", "part", v, part_bit, BENCH_EMU_ALL, &o.parts) || !o.parts)
                return cli_usage(&cli_cmd_bench_emu);
        } else if (v && !strcmp(a, "--out")) {
            out = v;
        } else {
            fprintf(stderr, "onigpu bench emu: unexpected argument '%s'\n", a);
            return cli_usage(&cli_cmd_bench_emu);
        }
    }
    int rc = bench_cli_out("bench emu", out);
    if (rc)
        return rc;
    if (bench_cli_signals("bench emu"))
        return 1;
    char **full;
    int nfull = cli_command_line(&full);
    struct bench_report *r = bench_report_open(out, "emu-liboni", nfull, full, NULL, &rc);
    if (!r) {
        bench_cli_signals_end("bench emu");
        return cli_fail(out, rc);
    }
    bench_report_meta_num(r, "seconds_per_measurement", o.seconds);
    rc = bench_emu_run(&o, r);
    bench_cli_signals_end("bench emu");
    const char *json = bench_report_path(r, ".json");
    char where[1024];
    snprintf(where, sizeof where, "%s", json ? json : out);
    int wrc = bench_report_close(r); /* what was measured, also after a failed part */
    if (rc)
        return cli_fail("bench emu", rc);
    if (wrc)
        return cli_fail("writing results", wrc);
    printf("results: %s (and .csv, -gen.csv, -echo.csv, -age.csv)\n", where);
    return 0;
}
