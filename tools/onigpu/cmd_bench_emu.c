/* cmd_bench_emu.c - `onigpu bench emu`: the emulated card's generation rate
 * with one core (fast mode) and its PCIe link model per preset; results as
 * CSV + JSON under --out (default docs/results). */
#include <stdio.h>
#include <string.h>
#include "bench/bench_emu.h"
#include "cli.h"

static int emu_bench_run(int argc, char **argv);
CLI_COMMAND(bench_emu, "bench emu", "[--seconds T] [--only gen,link,liboni,echo,age] [--out DIR]",
            "card generation MB/s with one core (fast mode) and link-model throughput per PCIe preset",
            emu_bench_run)

/* Every comma-separated name in list is a part of the benchmark. */
static int parts_ok(const char *list)
{
    static const char *const parts[] = {"gen", "link", "liboni", "echo", "age"};
    const char *p = list;
    for (;;) {
        size_t n = strcspn(p, ",");
        int ok = 0;
        for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
            ok |= n == strlen(parts[i]) && !strncmp(p, parts[i], n);
        if (!ok)
            return 0;
        if (!p[n])
            return 1;
        p += n + 1;
    }
}

static int emu_bench_run(int argc, char **argv)
{
    struct bench_emu_opts o = {1.0, 0, NULL};
    const char *out = "docs/results";
    if (cli_wants_help(argc, argv))
        return cli_usage(&cli_cmd_bench_emu);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
            if (cli_parse_seconds(argv[++i], &o.seconds) || !(o.seconds > 0) || o.seconds > 3600) {
                fprintf(stderr, "onigpu bench emu: bad --seconds '%s'\n", argv[i]);
                return cli_usage(&cli_cmd_bench_emu);
            }
        } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            o.only = argv[++i];
            if (!parts_ok(o.only)) {
                fprintf(stderr, "onigpu bench emu: --only '%s': parts are gen, link, liboni, echo, age\n", o.only);
                return cli_usage(&cli_cmd_bench_emu);
            }
        } else if (!strcmp(argv[i], "--out") && i + 1 < argc) {
            out = argv[++i];
        } else {
            fprintf(stderr, "onigpu bench emu: unexpected argument '%s'\n", argv[i]);
            return cli_usage(&cli_cmd_bench_emu);
        }
    }
    char *full[64 + 2] = {"onigpu", "bench"};
    int nfull = 2;
    for (int i = 0; i < argc && nfull < 66; i++)
        full[nfull++] = argv[i];
    int rc;
    struct bench_report *r = bench_report_open(out, "emu", nfull, full, NULL, &rc);
    if (!r)
        return cli_fail(out, rc);
    bench_report_meta_num(r, "seconds_per_measurement", o.seconds);
    bench_report_meta(r, "method",
                      "generation: fast mode, link unlimited, one thread reads 1 MiB blocks (read = "
                      "emu_card_read copy, peek = in place, generation only); MB/s = 10^6 stream bytes "
                      "(headers included) per s; per CPU s of the reading thread = one core. link: block generated first (untimed), then one "
                      "emu_card_read timed (copy + link model wait). liboni: oni_read_frame, "
                      "BLOCKREADSIZE 1 MiB, generation included. echo: realtime, write frame to the stimulator -> "
                      "its echo frame read back (header, then payload), per round trip. age: realtime np2, "
                      "frame read time minus its timestamp (clock reset at a known instant)");
    if (o.only)
        bench_report_meta(r, "only", o.only);
    rc = bench_emu_run(&o, r);
    if (rc) {
        bench_report_close(r);
        return cli_fail("bench emu", rc);
    }
    const char *json = bench_report_path(r, ".json");
    char where[1024];
    snprintf(where, sizeof where, "%s", json ? json : out);
    if ((rc = bench_report_close(r)) != 0)
        return cli_fail("writing results", rc);
    printf("results: %s (and .csv, -link.csv, -liboni.csv, -echo.csv, -age.csv)\n", where);
    return 0;
}
