/* advise.c - figure 6.1 with measured numbers (advise.h).
 *
 * The model: a backend's round trip for one block is
 *     t(D, C, AI) = a + b * D + compute(C, AI) + 2 * (l + D / B)
 * a and b (fixed cost and cost per byte of moving a block through the
 * backend) are fitted from two short measured runs (4 KiB and 1 MiB, AI 0.25)
 * of the real engine with the in-memory source; compute() comes from the
 * measured roofline (max of FLOP / peak and bytes / bandwidth); l and B are
 * the card's link (emulated preset), applied once in and once out. */
#include <math.h>
#include <string.h>
#include "oni.h"
#include "bench/advise.h"
#include "bench/bench_loop.h"
#include "bench/roofline.h"
#include "loop/kernels.h"
#include "loop/loop.h"

#define SMALL 4096.0
#define LARGE 1048576.0

static double compute_s(double c, double ai, double gflops, double gbps)
{
    double f = loop_mac_flops((size_t)(c / 4.0), bench_loop_iters(ai), 1);
    double t_f = gflops > 0 ? f / (gflops * 1e9) : INFINITY;
    double t_m = gbps > 0 ? 2.0 * c / (gbps * 1e9) : INFINITY;
    return fmax(t_f, t_m);
}

struct cand {
    int backend;
    double a, b;      /* s, s/byte */
    double pred, meas;
    int ok;
};

/* The candidates (cpu, gpu-staged, the lowest-latency direct backend) into
 * c[0..*nc): each one's fixed and per-byte cost fitted from two measured
 * round trips, and its predicted round trip for o's block. The index of the
 * best prediction, or -1 when none could be measured. */
static int fit_candidates(const struct advise_opts *o, const struct roofline *r, double link_s, struct cand *c,
                          int *nc)
{
    memset(c, 0, 3 * sizeof *c);
    c[0].backend = LOOP_CPU;
    c[1].backend = LOOP_GPU_STAGED;
    c[2].backend = loop_backend_best();
    *nc = c[2].backend == LOOP_CPU || c[2].backend == LOOP_GPU_STAGED ? 2 : 3;
    int best = -1;
    for (int i = 0; i < *nc; i++) {
        double t1, t2;
        if (!loop_backend_available(c[i].backend, NULL, 0))
            continue;
        if (bench_loop_measure(c[i].backend, (uint64_t)SMALL, (uint64_t)SMALL, 0.25, 300, &t1) ||
            bench_loop_measure(c[i].backend, (uint64_t)LARGE, (uint64_t)LARGE, 0.25, 30, &t2))
            continue;
        double cpu = c[i].backend == LOOP_CPU;
        double gf = cpu ? r->cpu_gflops : r->gpu_gflops, bw = cpu ? r->cpu_gbps : r->gpu_gbps;
        t1 = t1 / 1e9 - compute_s(SMALL, 0.25, gf, bw);
        t2 = t2 / 1e9 - compute_s(LARGE, 0.25, gf, bw);
        c[i].b = fmax(0.0, (t2 - t1) / (LARGE - SMALL));
        c[i].a = fmax(0.0, t1 - c[i].b * SMALL);
        c[i].pred = c[i].a + c[i].b * (double)o->data + compute_s((double)o->compute, o->ai, gf, bw) + link_s;
        c[i].ok = 1;
        if (best < 0 || c[i].pred < c[best].pred)
            best = i;
    }
    return best;
}

/* Figure 6.1, each branch with the number that decides it; returns the leaf. */
static const char *print_tree(FILE *f, const struct advise_opts *o, const struct roofline *r, double link_s,
                              const struct cand *c, int nc)
{
    /* The GPU path the tree talks about: the faster of the two measured,
     * so that its answer and the recommendation agree. */
    int gi = -1;
    for (int i = 1; i < nc; i++)
        if (c[i].ok && (gi < 0 || c[i].pred < c[gi].pred))
            gi = i;
    fprintf(f, "\ndecision tree (thesis figure 6.1) for %llu B in / %llu B compute / AI %g:\n",
            (unsigned long long)o->data, (unsigned long long)o->compute, o->ai);
    if (o->serial) {
        fprintf(f, "  1. highly parallel?            no (--serial)\n");
        return "optimize on the CPU (SIMD, threads)";
    }
    fprintf(f, "  1. highly parallel?            yes\n");
    double size = (double)o->data + (double)o->compute;
    fprintf(f, "  2. data + algorithm > ~1 MB?   %s (%.0f kB)\n", size > 1e6 ? "yes" : "no", size / 1e3);
    if (gi < 0)
        return "no GPU here: optimize on the CPU";
    if (size <= 1e6 && c[0].ok && c[0].pred <= c[gi].pred)
        return "optimize on the CPU (SIMD, threads)";
    double xfer = link_s + (c[1].ok ? c[1].b * (double)o->data : 0);
    double total = c[1].ok ? c[1].pred : c[gi].pred;
    fprintf(f, "  3. transfer a large part?      %s (%.0f%% of the staged GPU round trip)\n",
            xfer / total > 0.3 ? "yes" : "no", 100.0 * xfer / total);
    if (xfer / total <= 0.3)
        return "speed up the algorithm on the GPU; GPUDirect changes little";
    /* The host <-> GPU link as the staged backend saw it: its per-byte cost
     * covers the block in and the result out. */
    double gpu_link = c[1].ok && c[1].b > 0 ? 2.0 / c[1].b / 1e9 : 0;
    int better = r->have_link && r->link_gbps > 0 && gpu_link > 10 * r->link_gbps;
    fprintf(f, "  4. GPU link >> card link?      %s (%.1f against %.1f GB/s)\n",
            better ? "yes: GPUDirect gives a slight speedup" : "no: GPUDirect can give a real speedup", gpu_link,
            r->link_gbps);
    return better ? "GPUDirect helps a little; the card's link is the limit" : "GPUDirect (direct-to-GPU backends) pays";
}

/* The predicted (and with o->measure, measured) round trip of each
 * candidate. 0, or the error of a measurement that failed (its cell: nan). */
static int print_table(FILE *f, const struct advise_opts *o, const struct roofline *r, double link_s,
                       struct cand *c, int nc)
{
    int failed = 0;
    fprintf(f, "%-16s %14s %14s\n", "backend", "predicted us", o->measure ? "measured us" : "");
    for (int i = 0; i < nc; i++) {
        if (!c[i].ok)
            continue;
        if (o->measure) {
            double p50;
            uint64_t blocks = c[i].pred < 1e-3 ? 500 : c[i].pred < 0.1 ? 20 : 5;
            int mrc = bench_loop_measure(c[i].backend, o->data, o->compute, o->ai, blocks, &p50);
            if (mrc) {
                fprintf(stderr, "advise: measuring %s failed: %s\n", loop_backend_name(c[i].backend), oni_error_str(mrc));
                failed = mrc;
            }
            c[i].meas = mrc ? NAN : p50 / 1e9;
            if (r->have_link)
                c[i].meas += link_s; /* the in-memory source has no link: add the card's */
        }
        fprintf(f, "%-16s %14.1f", loop_backend_name(c[i].backend), c[i].pred * 1e6);
        if (o->measure)
            fprintf(f, " %14.1f", c[i].meas * 1e6);
        fprintf(f, "\n");
    }
    return failed;
}

int advise_run(const struct advise_opts *o)
{
    if (!bench_loop_iters(o->ai))
        return ONI_EINVALARG; /* the MAC kernel's AI comes in quarters */
    FILE *f = o->out ? o->out : stdout;
    struct roofline r;
    int rc = roofline_measure(&r, 1, o->link);
    if (rc)
        return rc;
    double link_s = 0;
    if (r.have_link)
        link_s = 2.0 * (r.link_lat_us * 1e-6 + (r.link_gbps > 0 ? (double)o->data / (r.link_gbps * 1e9) : 0));
    fprintf(f, "measured: CPU %.0f GFLOP/s, %.1f GB/s", r.cpu_gflops, r.cpu_gbps);
    if (r.have_gpu)
        fprintf(f, "; GPU %.0f GFLOP/s, %.0f GB/s (%s)", r.gpu_gflops, r.gpu_gbps, r.gpu_name);
    if (r.have_link)
        fprintf(f, "; card link %s %.2f GB/s + %.1f us", r.link_name, r.link_gbps, r.link_lat_us);
    fprintf(f, "\n");
    struct cand c[3];
    int nc, best = fit_candidates(o, &r, link_s, c, &nc);
    if (best < 0)
        return ONI_EINVALSTATE;
    fprintf(f, "  -> %s\n\n", print_tree(f, o, &r, link_s, c, nc));
    int failed = print_table(f, o, &r, link_s, c, nc);
    fprintf(f, "\nrecommended backend: %s\n", o->serial ? "cpu" : loop_backend_name(c[best].backend));
    return failed; /* a measurement that failed: the table says nan, the caller exits 1 */
}
