/* cmd_bench_loop.c - `onigpu bench loop`: thesis table 5.2 on every backend. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench/bench_loop.h"
#include "bench_cli.h"
#include "cli.h"
#include "cli_oni.h"
#include "loop/loop.h"

static int run(int argc, char **argv);

CLI_COMMAND(bench_loop, "bench loop",
            "[--sizes 4kB/4kB,4kB/400kB,10MB/10MB,10MB/1GB] [--ai 0.75,10] [--backends all|LIST] "
            "[--blocks 2000] [--seconds 2] [--source mem|emu] [--link PRESET] [--out docs/results]",
            "closed-loop round trip per backend (read -> MAC compute -> send back); CSV, JSON, PNG", NULL, run)

static int parse_scen(char *list, struct bench_loop_opts *o)
{
    o->nscen = 0;
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *slash = strchr(t, '/');
        if (!slash || o->nscen >= BENCH_LOOP_MAX)
            return -1;
        *slash = 0;
        if (cli_parse_size(t, &o->data[o->nscen]) || cli_parse_size(slash + 1, &o->compute[o->nscen]) ||
            !bench_loop_sizes_ok(o->data[o->nscen], o->compute[o->nscen]))
            return -1;
        o->nscen++;
    }
    return o->nscen ? 0 : -1;
}

static int parse_ai(char *list, struct bench_loop_opts *o)
{
    o->nai = 0;
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        double v;
        if (cli_parse_decimal(t, &v) || !bench_loop_iters(v) || o->nai >= BENCH_LOOP_MAX)
            return -1;
        o->ai[o->nai++] = v;
    }
    return o->nai ? 0 : -1;
}

/* "all" keeps the defaults (every available backend); a list must name
 * available ones only. 0; 2: an unknown name (a bad argument); 1: a backend
 * that cannot run here (the message printed). */
static int parse_backends(const char *list, struct bench_loop_opts *o)
{
    if (!strcmp(list, "all"))
        return 0;
    if (cli_parse_names("onigpu bench loop", "backend", list, loop_backend_parse, 0, &o->backends))
        return 2;
    for (int b = 0; b < 32; b++) {
        char why[160];
        if ((o->backends >> b & 1) && !loop_backend_available(b, why, sizeof why)) {
            fprintf(stderr, "onigpu bench loop: backend %s is not available: %s\n", loop_backend_name(b), why);
            return 1;
        }
    }
    return 0;
}

/* Lists are split in a copy: argv itself is recorded in the results' meta. */
static int parse_list(int (*fn)(char *, struct bench_loop_opts *), const char *v, struct bench_loop_opts *o)
{
    char *copy = strdup(v);
    int rc = copy ? fn(copy, o) : -1;
    free(copy);
    return rc;
}

/* Parse argv into o: 0, or the exit status after a message. */
static int parse_args(int argc, char **argv, struct bench_loop_opts *o)
{
    for (int i = 1; i < argc; i++) {
        char opt[64];
        const char *a, *v, *why = NULL;
        cli_opt_split(argc, argv, &i, opt, sizeof opt, &a, &v);
        int bad = !v;
        uint64_t n;
        if (bad) {
        } else if (!strcmp(a, "--sizes")) {
            bad = parse_list(parse_scen, v, o);
            why = "each DATA/COMPUTE: data a multiple of 4 in 4 B .. 1 GiB, compute a multiple of data";
        } else if (!strcmp(a, "--ai")) {
            bad = parse_list(parse_ai, v, o);
            why = "multiples of 0.25 in 0.25 .. 10000 (4 x AI MAC iterations per element)";
        } else if (!strcmp(a, "--backends")) {
            int rc = parse_backends(v, o);
            if (rc == 1)
                return 1;
            bad = rc;
        } else if (!strcmp(a, "--blocks")) {
            bad = cli_parse_u64(v, &n) || n < 5 || n > 10000000; /* a count: no fraction, no unit */
            why = "a whole number of blocks, 5 .. 10000000";
            o->blocks = n;
        } else if (!strcmp(a, "--seconds")) {
            bad = cli_parse_seconds(v, &o->seconds) || !(o->seconds > 0);
        } else if (!strcmp(a, "--out")) {
            o->out_dir = v;
        } else if (!strcmp(a, "--source")) {
            bad = strcmp(v, "mem") && strcmp(v, "emu");
            o->source = v;
        } else if (!strcmp(a, "--link")) {
            o->link = v;
        } else {
            bad = 1;
        }
        if (bad) {
            fprintf(stderr, "onigpu bench loop: bad argument '%s%s%s'%s%s\n", a, v ? " " : "", v ? v : "",
                    why ? ": " : "", why ? why : "");
            return cli_usage(&cli_cmd_bench_loop);
        }
    }
    /* The in-memory source has no link: a preset there would be recorded
     * beside rows that never went through it. */
    if (o->link && strcmp(o->source, "emu")) {
        fprintf(stderr, "onigpu bench loop: --link needs --source emu\n");
        return cli_usage(&cli_cmd_bench_loop);
    }
    return cli_check_link(&cli_cmd_bench_loop, o->link);
}

static int run(int argc, char **argv)
{
    struct bench_loop_opts o;
    bench_loop_defaults(&o);
    o.argc = cli_command_line(&o.argv);
    o.log = stderr;
    int st = parse_args(argc, argv, &o);
    if (st || (st = bench_cli_out("bench loop", o.out_dir)) != 0)
        return st;
    if (bench_cli_signals("bench loop"))
        return 1;
    int total = 0;
    for (int b = 0; b < LOOP_NBACKENDS; b++) {
        char why[160];
        if (!loop_backend_available(b, why, sizeof why))
            fprintf(stderr, "onigpu bench loop: %s not available: %s\n", loop_backend_name(b), why);
        total += o.backends >> b & 1;
    }
    total *= o.nscen * o.nai;
    int failed = 0, rc = bench_loop_run(&o, &failed);
    bench_cli_signals_end("bench loop");
    if (rc)
        return cli_fail("bench loop", rc);
    if (failed == total)
        fprintf(stderr, "onigpu bench loop: no configuration could be measured; no results written to %s\n",
                o.out_dir);
    else if (failed)
        fprintf(stderr, "onigpu bench loop: %d of %d configurations failed (the error column says why)\n", failed,
                total);
    return failed ? 1 : 0;
}
