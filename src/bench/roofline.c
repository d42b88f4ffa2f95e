/* roofline.c - machine ceilings and the MAC kernel against them (roofline.h).
 *
 * Compute ceiling: the MAC kernel itself at AI 64 on a cache-resident buffer
 * (CPU, every core) or on 64 Mi floats (GPU): what this kernel can reach, as
 * the thesis measured with its source benchmark. Memory ceiling: the best of
 * a few large copies, counting bytes read plus bytes written. The card link:
 * the emulated card's PCIe preset (ONI_DRV_EMU_LINK). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "bench/bench.h"
#include "bench/bench_loop.h"
#include "bench/gputime.h"
#include "bench/roofline.h"
#include "gpu/gpu.h"
#include "loop/loop.h"
#include "loop/source.h"
#include "oniemu.h"
#include "onigpu.h"

/* libgomp is not instrumented: under TSan its barriers look like races. */
#if defined(__SANITIZE_THREAD__)
#define OMP_THREADS 0
#else
#define OMP_THREADS 1
#endif

/* Best of reps timed runs of the CPU MAC. */
static double cpu_mac_best(const float *in, float *out, size_t n, uint32_t iters, uint32_t passes, int reps)
{
    double best = 1e30;
    for (int i = 0; i < reps; i++) {
        uint64_t t0 = oni_now_ns();
        loop_mac_cpu(in, out, n, iters, passes, 0.1f);
        double s = (double)(oni_now_ns() - t0) / 1e9;
        best = s < best ? s : best;
    }
    return best;
}

/* Achieved GFLOP/s of the MAC kernel at arithmetic intensity ai (a multiple
 * of 0.25: bench_loop_iters) on n floats, on the CPU / the GPU. */
static int roofline_point_cpu(double ai, size_t n, double *gflops)
{
    uint32_t it = bench_loop_iters(ai);
    if (!it)
        return ONI_EINVALARG;
    float *in = malloc(n * 4), *out = malloc(n * 4);
    if (!in || !out) {
        free(in);
        free(out);
        return ONI_EBADALLOC;
    }
    loop_fill_floats(NULL, 0, in, n * 4);
    double s = cpu_mac_best(in, out, n, it, 1, 2);
    *gflops = loop_mac_flops(n, it, 1) / s / 1e9;
    free(in);
    free(out);
    return 0;
}

static int roofline_point_gpu(double ai, size_t n, double *gflops)
{
    double s = 0;
    uint32_t it = bench_loop_iters(ai);
    if (!it)
        return ONI_EINVALARG;
    int rc = bench_gpu_time_mac(n, it, 1, 3, &s);
    if (!rc)
        *gflops = loop_mac_flops(n, it, 1) / s / 1e9;
    return rc;
}

static double cpu_copy_gbps(size_t bytes)
{
    char *a = malloc(bytes), *b = malloc(bytes);
    double best = 1e30;
    if (!a || !b) {
        free(a);
        free(b);
        return 0;
    }
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    long long nchunk = 64;
    size_t chunk = bytes / (size_t)nchunk;
    for (int i = 0; i < 4; i++) {
        uint64_t t0 = oni_now_ns();
        /* every core copies its share, as the thesis' CPU figure counts all cores */
#pragma omp parallel for if (OMP_THREADS) schedule(static)
        for (long long k = 0; k < nchunk; k++)
            memcpy(b + (size_t)k * chunk, a + (size_t)k * chunk, chunk);
        double s = (double)(oni_now_ns() - t0) / 1e9;
        best = s < best ? s : best;
    }
    volatile char sink = b[bytes / 2];
    (void)sink;
    free(a);
    free(b);
    return 2.0 * (double)(chunk * (size_t)nchunk) / best / 1e9;
}

/* Read bandwidth of the card's GPU data stream into host memory, blocks of
 * `block` bytes for about `bytes` in all (ONI_DRV_READ), MB/s; 0 on failure. */
static double card_read_mbps(oni_ctx ctx, uint32_t block, uint64_t bytes)
{
    void *buf = malloc(block);
    onigpu_buf_t b = {buf, block};
    uint64_t n = bytes / block ? bytes / block : 1, t0 = 0;
    int rc = buf ? oni_set_driver_opt(ctx, ONI_DRV_RD_SZ, &block, sizeof block) : ONI_EBADALLOC;
    for (uint64_t i = 0; i <= n && !rc; i++) {
        if (i == 1)
            t0 = oni_now_ns(); /* the first read is warm-up */
        rc = oni_set_driver_opt(ctx, ONI_DRV_READ, &b, sizeof b);
    }
    double s = (double)(oni_now_ns() - t0) / 1e9;
    free(buf);
    return rc || s <= 0 ? 0 : (double)n * block / s / 1e6;
}

/* The card's link: its preset, and reads of 4 kB and 10 MB through it
 * (thesis table 5.1's "PCIe bus" rows), from the test core in fast mode. */
static void card_link(struct roofline *r, const char *link)
{
    oni_ctx ctx = oni_create_ctx("emu");
    if (!ctx)
        return;
    char spec[128];
    snprintf(spec, sizeof spec, "devices=testcore:bytes=4096:route=1;mode=fast%s%s", link ? ";link=" : "",
             link ? link : "");
    oniemu_link_t l;
    size_t sz = sizeof l;
    uint32_t one = 1;
    if (!oni_set_driver_opt(ctx, ONI_DRV_EMU_SPEC, spec, strlen(spec) + 1) && !oni_init_ctx(ctx, -1) &&
        !oni_get_driver_opt(ctx, ONI_DRV_EMU_LINK, &l, &sz)) {
        r->have_link = 1;
        r->link_gbps = l.bandwidth_Bps / 1e9;
        r->link_lat_us = l.latency_s * 1e6;
        snprintf(r->link_name, sizeof r->link_name, "%.15s", l.name);
        if (!oni_set_opt(ctx, ONI_OPT_RUNNING, &one, sizeof one)) {
            r->link_4k_mbps = card_read_mbps(ctx, 4096, 16u << 20);
            r->link_10m_mbps = card_read_mbps(ctx, 10000000, 100000000);
        }
    }
    oni_destroy_ctx(ctx);
}

int roofline_measure(struct roofline *r, int quick, const char *link)
{
    memset(r, 0, sizeof *r);
    /* CPU: MAC at AI 64 in cache (256 KiB), every core. */
    size_t n = 1u << 16;
    float *in = malloc(n * 4), *out = malloc(n * 4);
    if (!in || !out) {
        free(in);
        free(out);
        return ONI_EBADALLOC;
    }
    loop_fill_floats(NULL, 0, in, n * 4);
    uint32_t passes = quick ? 2 : 8;
    double s = cpu_mac_best(in, out, n, 256, passes, 3);
    r->cpu_gflops = loop_mac_flops(n, 256, passes) / s / 1e9;
    free(in);
    free(out);
    r->cpu_gbps = cpu_copy_gbps(quick ? (64u << 20) : (512u << 20));
    /* GPU */
    if (gpu_name(r->gpu_name, sizeof r->gpu_name))
        gpu_available(r->gpu_name, sizeof r->gpu_name); /* the reason, printed instead */
    else {
        r->have_gpu = 1;
        size_t gn = quick ? (16u << 20) : (64u << 20);
        if (bench_gpu_time_mac(gn, 256, 1, 3, &s) == 0)
            r->gpu_gflops = loop_mac_flops(gn, 256, 1) / s / 1e9;
        size_t gb = quick ? (256u << 20) : (1u << 30);
        if (bench_gpu_time_copy(gb, 5, &s) == 0)
            r->gpu_gbps = 2.0 * (double)gb / s / 1e9;
    }
    card_link(r, link);
    return 0;
}

static double roof(double peak, double bw, double ai)
{
    double m = bw * ai;
    return m < peak ? m : peak;
}

int roofline_bench(const char *link, struct results *rep, FILE *log)
{
    struct roofline r;
    int rc = roofline_measure(&r, 0, link);
    if (rc)
        return rc;
    results_meta(rep, "method", "compute: MAC kernel at AI 64 (CPU in cache, all cores; GPU 64 Mi floats); "
                                     "memory: best large copy, read + write bytes; link: emulated card preset");
    /* MAC points over AI, and the roofs. */
    static const double ais[] = {0.25, 0.75, 2.5, 10, 40, 160};
    enum { NA = sizeof ais / sizeof ais[0] };
    double cpu_pt[NA], gpu_pt[NA], cpu_roof[NA], gpu_roof[NA], x[NA];
    size_t ngpu = 0;
    for (int i = 0; i < NA; i++) {
        x[i] = ais[i];
        if ((rc = roofline_point_cpu(ais[i], 1u << 20, &cpu_pt[i])))
            break;
        /* The ceiling is the best the kernel reached anywhere. */
        if (cpu_pt[i] > r.cpu_gflops)
            r.cpu_gflops = cpu_pt[i];
        results_cell_str(rep, "device", "cpu");
        results_cell_num(rep, "ai", ais[i]);
        results_cell_num(rep, "gflops", cpu_pt[i]);
        results_row(rep, "points");
        if (r.have_gpu && roofline_point_gpu(ais[i], 64u << 20, &gpu_pt[i]) == 0) {
            if (gpu_pt[i] > r.gpu_gflops)
                r.gpu_gflops = gpu_pt[i];
            ngpu++;
            results_cell_str(rep, "device", "gpu");
            results_cell_num(rep, "ai", ais[i]);
            results_cell_num(rep, "gflops", gpu_pt[i]);
            results_row(rep, "points");
        }
    }
    for (int i = 0; i < NA; i++) {
        cpu_roof[i] = roof(r.cpu_gflops, r.cpu_gbps, ais[i]);
        gpu_roof[i] = roof(r.gpu_gflops, r.gpu_gbps, ais[i]);
    }
    /* Table 5.1: the ceilings (after the points, which may raise the compute ones). */
    const char *what[] = {"cpu compute", "cpu memory", "gpu compute", "gpu memory", "card link",
                          "card read 4kB", "card read 10MB"};
    double val[] = {r.cpu_gflops, r.cpu_gbps, r.gpu_gflops, r.gpu_gbps, r.link_gbps, r.link_4k_mbps / 1e3,
                    r.link_10m_mbps / 1e3};
    const char *unit[] = {"GFLOP/s", "GB/s", "GFLOP/s", "GB/s", "GB/s", "GB/s", "GB/s"};
    for (int i = 0; i < 7; i++) {
        if ((i == 2 || i == 3) && !r.have_gpu)
            continue;
        if (i >= 4 && (!r.have_link || (i > 4 && val[i] <= 0)))
            continue;
        results_cell_str(rep, "ceiling", what[i]);
        results_cell_num(rep, "value", val[i]);
        results_cell_str(rep, "unit", i == 4 && r.link_gbps == 0 ? "unlimited" : unit[i]);
        results_cell_str(rep, "detail", i == 4 ? r.link_name : i > 4 ? "measured: ONI_DRV_READ, host memory" : "");
        results_row(rep, NULL);
    }
    if (!rc) {
        struct results_series s[4] = {
            {"CPU roof", x, cpu_roof, NA, RESULTS_LINES},
            {"CPU MAC", x, cpu_pt, NA, RESULTS_LINES_POINTS},
            {"GPU roof", x, gpu_roof, NA, RESULTS_LINES},
            {"GPU MAC", x, gpu_pt, ngpu == NA ? NA : 0, RESULTS_LINES_POINTS},
        };
        struct results_plot p = {"roofline: MAC kernel", "arithmetic intensity (FLOP/byte)", "GFLOP/s", 1, 1, s,
                               r.have_gpu && ngpu == NA ? 4 : 2};
        results_add_plot(rep, "roofline", &p);
    }
    if (log) {
        fprintf(log, "table 5.1 on this machine:\n  CPU compute %.1f GFLOP/s, memory %.1f GB/s\n", r.cpu_gflops, r.cpu_gbps);
        if (r.have_gpu)
            fprintf(log, "  GPU (%s) compute %.1f GFLOP/s, memory %.1f GB/s\n", r.gpu_name, r.gpu_gflops, r.gpu_gbps);
        else
            fprintf(log, "  GPU: %s\n", r.gpu_name);
        if (r.have_link)
            fprintf(log, "  card link %s: %.2f GB/s, %.2f us per transfer; measured reads: 4 kB %.0f MB/s, "
                         "10 MB %.0f MB/s\n",
                    r.link_name, r.link_gbps, r.link_lat_us, r.link_4k_mbps, r.link_10m_mbps);
        else
            fprintf(log, "  card link: the emulated card could not be opened\n");
    }
    if (rc) /* the rows measured are kept; the files say the run did not finish */
        results_meta(rep, "error", oni_error_str(rc));
    return rc;
}
