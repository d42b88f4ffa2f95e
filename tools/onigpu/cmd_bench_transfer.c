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
    "  --daemon SOCK   also run the staged, direct, prepinned and chunked paths through\n"
    "                  the onix-emu daemon listening on SOCK (onix-emu --socket SOCK)\n"
    "  --out DIR       result directory (default docs/results)\n";
CLI_COMMAND(bench_transfer, "bench transfer",
            "[--sizes 64:16M] [--total 256M] [--paths all|reference,original,staged,direct,prepinned,chunked] "
            "[--dir read|write|both] [--link gen2x4,unlimited] [--chunk 1M] [--agent-max BYTES] [--max-reps 20000] "
            "[--min-reps 16] [--daemon SOCKET] [--out docs/results]",
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

static int run(int argc, char **argv)
{
    struct xfer_opts o = {.min_size = 64, .max_size = 16u << 20, .total = 256u << 20, .min_reps = 16,
                          .max_reps = 20000, .paths = XFER_ALL_PATHS,
                          .dirs = XFER_DIR_READ | XFER_DIR_WRITE, .chunk = 1u << 20,
                          .out_dir = "docs/results", .log = stderr};
    char links_buf[256] = "gen2x4,unlimited";
    o.argc = cli_command_line(&o.argv);
    for (int i = 1; i < argc; i++) {
        char opt[64];
        const char *a, *v;
        cli_opt_split(argc, argv, &i, opt, sizeof opt, &a, &v);
        uint64_t x;
        int bad = !v;
        if (bad) {
        } else if (!strcmp(a, "--sizes")) {
            bad = parse_sizes(v, &o.min_size, &o.max_size) || !sizes_ok(o.min_size, o.max_size);
        } else if (!strcmp(a, "--total")) {
            bad = cli_parse_size(v, &o.total) || !o.total;
        } else if (!strcmp(a, "--min-reps")) { /* counts: no fraction, no unit */
            bad = cli_parse_u64(v, &o.min_reps);
        } else if (!strcmp(a, "--max-reps")) {
            bad = cli_parse_u64(v, &o.max_reps) || !o.max_reps;
        } else if (!strcmp(a, "--paths")) {
            bad = cli_parse_names("onigpu bench transfer", "path", v, xfer_path_parse, XFER_ALL_PATHS, &o.paths);
        } else if (!strcmp(a, "--dir")) {
            o.dirs = !strcmp(v, "read") ? XFER_DIR_READ : !strcmp(v, "write") ? XFER_DIR_WRITE
                   : !strcmp(v, "both") ? XFER_DIR_READ | XFER_DIR_WRITE : 0;
            bad = !o.dirs;
        } else if (!strcmp(a, "--link")) {
            bad = strlen(v) >= sizeof links_buf;
            if (!bad)
                strcpy(links_buf, v);
        } else if (!strcmp(a, "--chunk")) {
            bad = cli_parse_size(v, &x) || !x || x % 4 || x > (1u << 30);
            o.chunk = (uint32_t)x;
        } else if (!strcmp(a, "--agent-max")) {
            bad = cli_parse_size(v, &x) || !x || x > (1u << 30);
            o.agent_max = (uint32_t)x;
        } else if (!strcmp(a, "--daemon")) {
            o.daemon = v;
        } else if (!strcmp(a, "--out")) {
            o.out_dir = v;
        } else {
            bad = 1;
        }
        if (bad) {
            fprintf(stderr, "onigpu bench transfer: bad option or value: %s %s\n", a, v ? v : "");
            return cli_usage(&cli_cmd_bench_transfer);
        }
    }
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
    if (!nlinks) {
        fprintf(stderr, "onigpu bench transfer: --link names no preset: %s\n", links_buf);
        return cli_usage(&cli_cmd_bench_transfer);
    }
    if (!sizes_ok(o.min_size, 4096) || 4096 > o.max_size) /* the targets are at 4 KiB (TARGETS.md) */
        fprintf(stderr, "onigpu bench transfer: note: 4096 is not among the sizes, so no 4 KiB target row\n");
    int status = bench_cli_out("bench transfer", o.out_dir);
    if (status)
        return status;
    if (bench_cli_signals("bench transfer"))
        return 1;
    for (char *save = NULL, *link = strtok_r(links_buf, ",", &save); link; link = strtok_r(NULL, ",", &save)) {
        o.link = link;
        printf("== onigpu bench transfer, link %s ==\n", link);
        if (bench_stopped())
            break;
        int rc = bench_transfer_run(&o);
        if (rc) {
            status = cli_fail("bench transfer", rc);
            if (rc == ONI_ENOGPU)
                break;
        }
    }
    bench_cli_signals_end("bench transfer");
    return status;
}
