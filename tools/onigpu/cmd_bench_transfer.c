/* cmd_bench_transfer.c - `onigpu bench transfer`: thesis chapter 4 on this machine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "onigpu.h"
#include "bench/bench.h"
#include "bench/bench_transfer.h"
#include "bench_cli.h"
#include "cli.h"
#include "cli_oni.h"
#include "gpu/gpu.h"

/* Sizes double from lo to hi: hi must be on that doubling (the largest
 * size's target row and histograms are taken there), and a GPU block. */
static int sizes_ok(uint64_t lo, uint64_t hi)
{
    if (!lo || lo > hi || hi > ONIGPU_MAX_BLOCK || hi % lo)
        return 0;
    uint64_t q = hi / lo;
    return (q & (q - 1)) == 0;
}

static int run(int argc, char **argv);

static const char options[] =
    "  --sizes A:B     sizes doubling from A to B bytes, B = A x 2^k <= 1 GiB (default 64:16M)\n"
    "  --total BYTES   bytes moved per size (default 256M; thesis: 8.6G)\n"
    "  --min-reps N, --max-reps N   bounds on repetitions per size (16, 20000)\n"
    "  --paths LIST    all, or some of reference,original,staged,direct,prepinned,chunked;\n"
    "                  not in all: ring, ring-thp (the reference copy walking a 64 MiB host\n"
    "                  ring in 4 KiB or huge pages, as the card's DMA walks its FIFO), agent\n"
    "                  (prepinned with the card's GPU-resident DMA agent on, ONI_DRV_DMA_AGENT)\n"
    "  --dir D         read (card->GPU), write (GPU->card) or both (default)\n"
    "  --link LIST     emu link presets, one result set each (default gen2x4,unlimited)\n"
    "  --chunk BYTES   chunk size of the chunked path (default 1M)\n"
    "  --agent-max BYTES  the agent path's ONI_DRV_DMA_AGENT limit (default: every size; larger sizes skipped)\n"
    "  --out DIR       result directory (default docs/results)\n";
CLI_COMMAND(bench_transfer, "bench transfer",
            "[--sizes 64:16M] [--total 256M] [--paths all|reference,original,staged,direct,prepinned,chunked] "
            "[--dir read|write|both] [--link gen2x4,unlimited] [--chunk 1M] [--agent-max BYTES] [--max-reps 20000] "
            "[--min-reps 16] [--out docs/results]",
            "time every card<->GPU transfer path per size; t = l + s/b fits; CSV, JSON, PNG", options, run)

static int parse_sizes(const char *s, uint64_t *lo, uint64_t *hi)
{
    char a[64];
    const char *colon = strchr(s, ':');
    if (!colon)
        return cli_parse_size(s, lo) || (*hi = *lo, 0);
    if ((size_t)(colon - s) >= sizeof a)
        return -1;
    memcpy(a, s, (size_t)(colon - s));
    a[colon - s] = 0;
    return cli_parse_size(a, lo) || cli_parse_size(colon + 1, hi) ? -1 : 0;
}

static int dir_parse(const char *name)
{
    return !strcmp(name, "read") ? XFER_DIR_READ : !strcmp(name, "write") ? XFER_DIR_WRITE
         : !strcmp(name, "both") ? XFER_DIR_READ | XFER_DIR_WRITE : -1;
}

/* Parse argv into o (the --link list into links, cap bytes): 0, or exit
 * status 2 after saying what was wrong. */
static int parse_args(int argc, char **argv, struct xfer_opts *o, char *links, size_t cap)
{
    const struct cli_command *cmd = &cli_cmd_bench_transfer;
    for (int i = 1; i < argc; i++) {
        char opt[64];
        const char *a, *v;
        cli_opt_split(argc, argv, &i, opt, sizeof opt, &a, &v);
        uint64_t x, lo, hi;
        int st, d;
        if (!strcmp(a, "--sizes")) {
            st = v && !parse_sizes(v, &lo, &hi) && sizes_ok(lo, hi)
                   ? 0
                   : cli_bad_value(cmd, a, v, "A:B or A, sizes doubling from A to B, B = A x 2^k, at most 1 GiB "
                                              "(as 64:16M)");
            if (!st)
                o->min_size = lo, o->max_size = hi;
        } else if (!strcmp(a, "--total")) {
            st = cli_arg_size(cmd, a, v, 1, UINT64_MAX, 1, &o->total);
        } else if (!strcmp(a, "--min-reps")) { /* counts: no fraction, no unit */
            st = cli_arg_count(cmd, a, v, 0, UINT64_MAX, &o->min_reps);
        } else if (!strcmp(a, "--max-reps")) {
            st = cli_arg_count(cmd, a, v, 1, UINT64_MAX, &o->max_reps);
        } else if (!strcmp(a, "--paths")) {
            st = cli_parse_names(cmd, a, v, xfer_path_parse, xfer_path_name, XFER_NPATHS, XFER_ALL_PATHS, &o->paths);
        } else if (!strcmp(a, "--dir")) {
            d = v ? dir_parse(v) : -1;
            st = d < 0 ? cli_bad_value(cmd, a, v, "read, write or both") : 0;
            if (!st)
                o->dirs = (unsigned)d;
        } else if (!strcmp(a, "--link")) {
            st = v && *v && strlen(v) < cap ? 0 : cli_bad_value(cmd, a, v, "a comma-separated list, each %s, shorter "
                                                                            "than %zu bytes", cli_link_allowed(), cap);
            if (!st)
                strcpy(links, v);
        } else if (!strcmp(a, "--chunk")) {
            if (!(st = cli_arg_size(cmd, a, v, 4, 1u << 30, 4, &x)))
                o->chunk = (uint32_t)x;
        } else if (!strcmp(a, "--agent-max")) {
            if (!(st = cli_arg_size(cmd, a, v, 1, 1u << 30, 1, &x)))
                o->agent_max = (uint32_t)x;
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

/* One link: the set "transfer-<link>" opened, measured into by the body,
 * its tables printed, closed. 0 or an ONI error. */
static int transfer_link(const struct xfer_opts *o, int argc, char **argv)
{
    char why[200], gpu[128] = "";
    if (!gpu_available(why, sizeof why)) {
        fprintf(stderr, "onigpu bench transfer: every path needs a GPU: %s\n", why);
        return ONI_ENOGPU;
    }
    gpu_name(gpu, sizeof gpu);
    char name[64];
    snprintf(name, sizeof name, "transfer-%s", o->link);
    int rc = 0;
    struct results *r = results_open(o->out_dir, name, argc, argv, gpu, &rc);
    if (!r)
        return rc;
    rc = bench_transfer_run(o, r);
    results_print(r, NULL, stdout);
    if ((o->paths & (1u << XFER_AGENT)) && o->agent_max && o->agent_max < o->max_size)
        printf("(agent: sizes above --agent-max = %u bytes not measured; the card moves them with its copy engine)\n",
               o->agent_max);
    printf("\nfit t = l + s/b (per-size medians, relative weighting):\n");
    results_print(r, "fit", stdout);
    printf("\nwhat pinning costs (ONI_DRV_PIN, ONI_DRV_UNPIN; onigpu_buf_t with the length):\n");
    results_print(r, "pin", stdout);
    printf("\ntransfers above 20x their row's p50 (the first %d of a row; start_ms after its first):\n",
           XFER_OUTLIERS_MAX);
    results_print(r, "outliers", stdout);
    if (!strcmp(o->link, "unlimited")) {
        printf("\ntargets (TARGETS.md, unlimited link; measured in this run):\n");
        results_print(r, "targets", stdout);
    }
    int crc = results_close(r);
    return rc ? rc : crc;
}

static int run(int argc, char **argv)
{
    struct xfer_opts o = {.min_size = 64, .max_size = 16u << 20, .total = 256u << 20, .min_reps = 16,
                          .max_reps = 20000, .paths = XFER_ALL_PATHS,
                          .dirs = XFER_DIR_READ | XFER_DIR_WRITE, .chunk = 1u << 20,
                          .out_dir = "docs/results", .log = stderr};
    char links_buf[256] = "gen2x4,unlimited";
    char **full;
    int nfull = cli_command_line(&full);
    int status = parse_args(argc, argv, &o, links_buf, sizeof links_buf);
    if (status)
        return status;
    if (o.min_reps > o.max_reps)
        o.min_reps = o.max_reps;
    char links[sizeof links_buf];
    strcpy(links, links_buf); /* every preset checked before the first runs */
    int nlinks = 0;
    for (char *save = NULL, *link = strtok_r(links, ",", &save); link; link = strtok_r(NULL, ",", &save)) {
        int st = cli_check_link(&cli_cmd_bench_transfer, link);
        if (st)
            return st;
        nlinks++;
    }
    if (!nlinks)
        return cli_bad_value(&cli_cmd_bench_transfer, "--link", links_buf, "a comma-separated list, each %s",
                             cli_link_allowed());
    if (!sizes_ok(o.min_size, 4096) || 4096 > o.max_size) /* the targets are at 4 KiB (TARGETS.md) */
        fprintf(stderr, "onigpu bench transfer: note: 4096 is not among the sizes, so no 4 KiB target row\n");
    if ((status = cli_arg_outdir(&cli_cmd_bench_transfer, "--out", o.out_dir, &o.out_dir)) != 0)
        return status;
    if (bench_cli_signals("bench transfer"))
        return 1;
    for (char *save = NULL, *link = strtok_r(links_buf, ",", &save); link; link = strtok_r(NULL, ",", &save)) {
        o.link = link;
        printf("== onigpu bench transfer, link %s ==\n", link);
        if (bench_stopped())
            break;
        int rc = transfer_link(&o, nfull, full);
        if (rc) {
            status = cli_fail("bench transfer", rc);
            if (rc == ONI_ENOGPU)
                break;
        }
    }
    bench_cli_signals_end("bench transfer");
    return status;
}
