/* cmd_bench_frames.c - `onigpu bench frames`: frames/s, MB/s, per-call
 * latency and heap allocations per frame through oni_read_frame +
 * oni_destroy_frame, for a range of BLOCKREADSIZE values. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench/bench.h"
#include "bench_cli.h"
#include "cli.h"
#include "cli_oni.h"
#if defined(__has_include)
#if __has_include(<sys/single_threaded.h>)
#include <sys/single_threaded.h>
#define HAVE_SINGLE_THREADED 1
#endif
#endif

static int frames_run(int argc, char **argv);
static const char options[] =
    "  --driver NAME   ONI driver (default test)\n"
    "  --blocks LIST   BLOCKREADSIZE values, e.g. 1K,4K,64K (default 1K,4K,16K,64K,256K,1M)\n"
    "  --seconds T     time per block size, half throughput, half latency (default 1)\n"
    "  --second-thread start a thread that only waits, so that liboni runs as in a\n"
    "                  threaded program (the JSON's one_thread_path says which ran)\n"
    "  --out DIR       result directory (default docs/results)\n";
CLI_COMMAND(bench_frames, "bench frames",
            "[--driver test] [--blocks 1K,4K,...] [--seconds T] [--second-thread] [--out DIR]",
            "frames/s, MB/s, call latency and heap allocations per frame for each BLOCKREADSIZE",
            options, frames_run)

/* Counting allocator for the whole onigpu program (alloc_hook.h): the
 * benchmark sees allocations made anywhere; a sanitizer build reports them
 * as not counted. */
#include "bench/alloc_hook.h"
#if BENCH_ALLOC_HOOK
#define ALLOC_COUNTER bench_alloc_count
#else
#define ALLOC_COUNTER NULL
#endif

#define MAX_BLOCKS 32

/* Whether liboni's one-thread path applies (docs/threads.md): glibc's flag
 * that the process has never had a second thread; "unknown" without it. */
static const char *one_thread_path(void)
{
#ifdef HAVE_SINGLE_THREADED
    return __libc_single_threaded ? "yes" : "no";
#else
    return "unknown";
#endif
}

/* --second-thread: a thread that only waits for the run to end, so that
 * the process is not single-threaded and liboni takes the path a threaded
 * program takes (the read bias or the lock). */
static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cond = PTHREAD_COND_INITIALIZER;
static int idle_done;

static void *idle_thread(void *arg)
{
    pthread_mutex_lock(&idle_lock);
    while (!idle_done)
        pthread_cond_wait(&idle_cond, &idle_lock);
    pthread_mutex_unlock(&idle_lock);
    return arg;
}

/* Rows, table and plots of a finished run; the number of block sizes that failed. */
static int add_results(struct results *r, const struct bench_frames_opts *o,
                       const struct bench_frames_result *res, const char *one_thread)
{
    int maj, min, pat;
    oni_version(&maj, &min, &pat);
    char ver[32];
    snprintf(ver, sizeof ver, "%d.%d.%d", maj, min, pat);
    results_meta(r, "liboni_version", ver);
    results_meta(r, "driver", o->driver);
    results_meta_num(r, "seconds_per_block", o->seconds);
    results_meta_num(r, "clock_read_ns", res[0].clock_ns);
    results_meta(r, "one_thread_path", one_thread);
    int counted = 0;
    for (size_t i = 0; i < o->nblocks; i++)
        counted |= !res[i].rc && res[i].block && res[i].allocs_per_frame >= 0;
    results_meta(r, "alloc_counting", counted ? "malloc-family hook in onigpu"
                                                   : "not counted (no hook in this build)");
    results_meta(r, "method", "phase 1 (half the time): untimed read+destroy loop -> "
                                   "frames/s, MB/s (payload, 10^6 B), allocations; phase 2: each "
                                   "read+destroy timed (includes one clock read)");

    double x[MAX_BLOCKS], fps[MAX_BLOCKS], sfps[MAX_BLOCKS], p50[MAX_BLOCKS], p99[MAX_BLOCKS], p999[MAX_BLOCKS],
        mx[MAX_BLOCKS];
    size_t n = 0;
    int failures = 0;
    for (size_t i = 0; i < o->nblocks; i++) {
        const struct bench_frames_result *b = &res[i];
        if (!b->block) /* not begun: stopped before */
            continue;
        results_cell_str(r, "driver", o->driver);
        results_cell_int(r, "block", b->block);
        results_cell_str(r, "status", b->rc ? oni_error_str(b->rc) : "ok");
        if (i == 0)
            printf("%8s %12s %12s %9s %12s %8s %8s %8s %8s\n", "block", "frames/s",
                   "slice p50", "MB/s", "allocs/frame", "p50 ns", "p99 ns", "p99.9 ns", "max ns");
        if (!b->rc) {
            results_cell_int(r, "frames", (long long)b->frames);
            results_cell_num(r, "seconds", b->seconds);
            results_cell_num(r, "frames_per_s", b->frames_per_s);
            results_cell_num(r, "slice_fps_min", b->slice_fps_min);
            results_cell_num(r, "slice_fps_p50", b->slice_fps_p50);
            results_cell_num(r, "slice_fps_max", b->slice_fps_max);
            results_cell_num(r, "mb_per_s", b->mb_per_s);
            results_cell_num(r, "stream_mb_per_s",
                           bench_mb_per_s((double)b->stream_bytes, b->seconds * 1e9));
            if (b->allocs_per_frame >= 0) {
                results_cell_int(r, "allocs", (long long)b->allocs);
                results_cell_num(r, "allocs_per_frame", b->allocs_per_frame);
            }
            bench_cell_stats(r, "call", &b->call_ns);
            char allocs[32] = "-";
            if (b->allocs_per_frame >= 0)
                snprintf(allocs, sizeof allocs, "%.3g", b->allocs_per_frame);
            printf("%8u %12.0f %12.0f %9.1f %12s %8.0f %8.0f %8.0f %8.0f\n", b->block,
                   b->frames_per_s, b->slice_fps_p50, b->mb_per_s, allocs, b->call_ns.p50, b->call_ns.p99, b->call_ns.p999,
                   b->call_ns.max);
            x[n] = b->block;
            fps[n] = b->frames_per_s;
            sfps[n] = b->slice_fps_p50;
            p50[n] = b->call_ns.p50;
            p99[n] = b->call_ns.p99;
            p999[n] = b->call_ns.p999;
            mx[n] = b->call_ns.max;
            n++;
        } else {
            failures++;
            printf("%8u  failed: %s (%d)\n", b->block, oni_error_str(b->rc), b->rc);
        }
        results_row(r, NULL);
    }
    printf("(one timed call includes one clock read, %.0f ns here; allocs/frame over the "
           "untimed half)\n", res[0].clock_ns);

    if (n) {
        struct results_series sf[2] = {{"whole phase", x, fps, n, RESULTS_LINES_POINTS},
                                     {"median slice", x, sfps, n, RESULTS_LINES_POINTS}};
        struct results_plot pf = {"oni_read_frame + oni_destroy_frame throughput", "BLOCKREADSIZE (bytes)",
                                "frames/s", 1, 0, sf, 2};
        struct results_series sl[4] = {{"p50", x, p50, n, RESULTS_LINES_POINTS},
                                     {"p99", x, p99, n, RESULTS_LINES_POINTS},
                                     {"p99.9", x, p999, n, RESULTS_LINES_POINTS},
                                     {"max", x, mx, n, RESULTS_LINES_POINTS}};
        struct results_plot pl = {"read + destroy latency per call", "BLOCKREADSIZE (bytes)",
                                "time (ns)", 1, 1, sl, 4};
        int prc = results_add_plot(r, "rate", &pf);
        if (!prc)
            prc = results_add_plot(r, "latency", &pl);
        if (prc)
            fprintf(stderr, "onigpu bench frames: plot: %s\n", oni_error_str(prc));
    }
    return failures;
}

struct frames_arg {
    struct bench_frames_opts o;
    int second_thread, failures;
};

/* The run (with the idle thread when asked), then its rows; a run that
 * measured no block size says why for each and leaves no set. */
static int body(struct results *r, void *arg, int *measured)
{
    struct frames_arg *a = arg;
    struct bench_frames_result res[MAX_BLOCKS];
    pthread_t idle;
    if (a->second_thread && pthread_create(&idle, NULL, idle_thread, NULL))
        return ONI_EBADALLOC;
    const char *one_thread = one_thread_path();
    int rc = bench_frames_run(&a->o, res);
    if (a->second_thread) {
        pthread_mutex_lock(&idle_lock);
        idle_done = 1;
        pthread_cond_signal(&idle_cond);
        pthread_mutex_unlock(&idle_lock);
        pthread_join(idle, NULL);
    }
    *measured = 0;
    for (size_t i = 0; !rc && i < a->o.nblocks; i++)
        *measured |= !res[i].rc && res[i].block;
    if (!rc && !*measured) {
        for (size_t i = 0; i < a->o.nblocks; i++)
            fprintf(stderr, "onigpu bench frames: block %u: %s (%d)\n", res[i].block, oni_error_str(res[i].rc),
                    res[i].rc);
        fprintf(stderr, "onigpu bench frames: no block size could be measured with driver '%s'\n", a->o.driver);
    }
    if (*measured)
        a->failures = add_results(r, &a->o, res, one_thread);
    return rc;
}

static int frames_run(int argc, char **argv)
{
    static const uint32_t def_blocks[] = {1024, 4096, 16384, 65536, 262144, 1048576};
    uint32_t blocks[MAX_BLOCKS];
    struct frames_arg fa = {.o = {.driver = "test", .blocks = def_blocks,
                                  .nblocks = sizeof def_blocks / sizeof def_blocks[0],
                                  .seconds = 1, .alloc_count = ALLOC_COUNTER}};
    struct bench_frames_opts *o = &fa.o;
    const char *out_dir = "docs/results";
    const struct cli_command *cmd = &cli_cmd_bench_frames;
    for (int i = 1; i < argc; i++) {
        char opt[64];
        const char *a, *v;
        int st = 0;
        if (!strcmp(argv[i], "--second-thread")) {
            fa.second_thread = 1;
            continue;
        }
        cli_opt_split(argc, argv, &i, opt, sizeof opt, &a, &v);
        if (!strcmp(a, "--driver")) {
            st = cli_arg_text(cmd, a, v, "a driver name (test, emu, net, or NAME of libonidriver_NAME.so)", &o->driver);
        } else if (!strcmp(a, "--blocks")) {
            st = cli_parse_sizes(cmd, a, v, UINT32_MAX, 1, blocks, MAX_BLOCKS, &o->nblocks);
            o->blocks = blocks;
        } else if (!strcmp(a, "--seconds")) {
            st = cli_arg_seconds(cmd, a, v, 0, 1, 3600, &o->seconds);
        } else if (!strcmp(a, "--out")) {
            st = cli_arg_text(cmd, a, v, "the name of a directory", &out_dir);
        } else {
            st = cli_bad_arg(cmd, a == opt ? argv[i] : a);
        }
        if (st)
            return st;
    }
    int st = cli_arg_outdir(cmd, "--out", out_dir, &out_dir);
    if (st)
        return st;
    struct bench_cli_set set = {"bench frames", out_dir, "frames", NULL, NULL, body, &fa};
    st = bench_cli_run(&set);
    return st ? st : fa.failures ? 1 : 0;
}
