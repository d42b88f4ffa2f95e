/* cmd_bench_record.c - `onigpu bench record`: the closed loop's latency
 * with and without a recording, and the recorder's sustained write rate
 * (src/bench/bench_record.h); results as CSV + JSON under --out (default
 * docs/results), the recordings in --dir (default a new directory in
 * /var/tmp, on disk), removed at the end unless --keep. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bench/bench_record.h"
#include "bench_cli.h"
#include "cli.h"
#include "loop/run.h"
#include "record/record.h"

static int record_bench_run(int argc, char **argv);
CLI_COMMAND(bench_record, "bench record",
            "[--backend cpu|gpu-staged|gpu-mapped] [--block FRAMES] [--seconds T] [--rounds N] [--probes N] "
            "[--only latency,rate] [--format openephys|nwb] [--dir DIR] [--keep] [--out DIR]",
            "the closed loop's latency with and without recording (ratios), and the recorder's write rate", NULL,
            record_bench_run)

static const char *const parts[2] = {"latency", "rate"};
static int part_bit(const char *s)
{
    return !strcmp(s, parts[0]) ? 0 : !strcmp(s, parts[1]) ? 1 : -1;
}
static const char *part_name(int i) { return parts[i]; }
static int fmt_parse(const char *s) { return rec_format_of(s); }


static int body(struct results *r, void *arg, int *measured)
{
    return bench_record_run(arg, r);
}
static int record_bench_run(int argc, char **argv)
{
    const struct cli_command *cmd = &cli_cmd_bench_record;
    struct bench_record_opts o = {.backend = LOOP_CPU, .block = 16, .seconds = 5, .rounds = 3, .probes = 1};
    const char *out = "docs/results", *dir = NULL;
    unsigned only = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--keep")) {
            o.keep = 1;
            continue;
        }
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
            st = cli_arg_seconds(cmd, a, v, 1, 0, 3600, &o.seconds);
        else if (!strcmp(a, "--rounds"))
            st = (st = cli_arg_count(cmd, a, v, 1, 100, &n)) ? st : (o.rounds = (uint32_t)n, 0);
        else if (!strcmp(a, "--probes"))
            st = (st = cli_arg_count(cmd, a, v, 1, 64, &n)) ? st : (o.probes = (uint32_t)n, 0);
        else if (!strcmp(a, "--only"))
            st = cli_parse_names(cmd, a, v, part_bit, part_name, 2, 3, &only);
        else if (!strcmp(a, "--format"))
            st = cli_arg_name(cmd, a, v, fmt_parse, rec_format_name, REC_NFORMATS, &o.format);
        else if (!strcmp(a, "--dir"))
            st = cli_arg_text(cmd, a, v, "a directory for the recordings", &dir);
        else if (!strcmp(a, "--out"))
            st = cli_arg_text(cmd, a, v, "the name of a directory", &out);
        else
            st = cli_bad_arg(cmd, a == opt ? argv[i] : a);
        if (st)
            return st;
    }
    o.latency = only & 1;
    if (!(only & 2))
        o.probes = 0;
    if (o.latency && o.backend != LOOP_CPU && o.backend != LOOP_GPU_STAGED && o.backend != LOOP_GPU_MAPPED)
        return cli_bad_value(cmd, "--backend", loop_backend_name(o.backend),
                             "a backend that reads into host memory, which a recording needs: cpu, gpu-staged, "
                             "gpu-mapped");
    int rc = cli_arg_outdir(cmd, "--out", out, &out);
    if (!rc && dir) /* checked (made if missing) before any work, as --out */
        rc = cli_arg_outdir(cmd, "--dir", dir, &dir);
    if (rc)
        return rc;
    char tmp[64];
    if (!dir) {
        snprintf(tmp, sizeof tmp, "/var/tmp/onigpu-bench-record-XXXXXX");
        if (!mkdtemp(tmp)) {
            fprintf(stderr, "onigpu bench record: cannot make a directory in /var/tmp: %s\n", strerror(errno));
            return 1;
        }
        dir = tmp;
    }
    o.dir = dir;
    const char *print[3] = {NULL}, **p = print;
    if (o.latency)
        *p++ = "latency";
    if (o.probes)
        *p++ = "rate";
    struct bench_cli_set set = {"bench record", out, "record", NULL, print, body, &o};
    int st = bench_cli_run(&set);
    if (dir == tmp && !o.keep)
        rmdir(tmp);
    return st;
}
