/* cmd_bench_emu.c - `onigpu bench emu`: the emulated card's generation rate
 * with one core (fast mode) and its PCIe link model per preset; results as
 * CSV + JSON under --out (default docs/results). */
#include <stdio.h>
#include <string.h>
#include "bench/bench_emu.h"
#include "cli.h"

static int emu_bench_run(int argc, char **argv);
CLI_COMMAND(bench_emu, "bench emu", "[--seconds T] [--out DIR]",
            "card generation MB/s with one core (fast mode) and link-model throughput per PCIe preset",
            emu_bench_run)

static int emu_bench_run(int argc, char **argv)
{
    struct bench_emu_opts o = {1.0, 0};
    const char *out = "docs/results";
    if (cli_wants_help(argc, argv))
        return cli_usage(&cli_cmd_bench_emu);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
            if (cli_parse_seconds(argv[++i], &o.seconds) || !(o.seconds > 0) || o.seconds > 3600) {
                fprintf(stderr, "onigpu bench emu: bad --seconds '%s'\n", argv[i]);
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
