/* bench_loop.c - `onigpu bench loop` (bench_loop.h).
 *
 * Method: for each scenario (data size, compute size), AI and backend, the
 * engine runs in latency mode (two slots, one block in flight) on the
 * in-memory source with an unlimited link (--source mem, the default) or on
 * the emulated card through its link preset (--source emu), so the round
 * trip of a block is read -> compute -> send back with nothing queued ahead
 * of it. A second,
 * pipelined run (double buffering, two blocks in flight) gives the
 * throughput. Times are host monotonic ns per block. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "bench/bench.h"
#include "bench/bench_loop.h"
#include "gpu/gpu.h"
#include "loop/loop.h"
#include "loop/source.h"
#include "oniemu.h"
#include "onix.h"

void bench_loop_defaults(struct bench_loop_opts *o)
{
    memset(o, 0, sizeof *o);
    const uint64_t d[] = {4000, 4000, 10000000, 10000000}, c[] = {4000, 400000, 10000000, 1000000000};
    for (int i = 0; i < 4; i++) {
        o->data[i] = d[i];
        o->compute[i] = c[i];
    }
    o->nscen = 4;
    o->ai[0] = 0.75;
    o->ai[1] = 10;
    o->nai = 2;
    for (int b = 0; b < LOOP_NBACKENDS; b++)
        if (loop_backend_available(b, NULL, 0))
            o->backends |= 1u << b;
    o->blocks = 2000;
    o->seconds = 2.0;
    o->source = "mem";
    o->out_dir = "docs/results";
}

/* The emulated card for source "emu": the test core on the GPU data stream,
 * generated as fast as it is read, and the test sink for the results. */
struct card {
    oni_ctx ctx;
    struct loop_cardsrc src;
    struct loop_cardsink sink;
};

static int card_open(struct card *c, const char *link, uint64_t data)
{
    char spec[160];
    memset(c, 0, sizeof *c);
    snprintf(spec, sizeof spec, "devices=testcore:bytes=4080:route=1,testsink;mode=fast%s%s", link ? ";link=" : "",
             link ? link : "");
    c->ctx = oni_create_ctx("emu");
    if (!c->ctx)
        return ONI_EPATHINVALID;
    int rc = oni_set_driver_opt(c->ctx, ONI_DRV_EMU_SPEC, spec, strlen(spec) + 1);
    if (!rc)
        rc = oni_init_ctx(c->ctx, -1);
    oni_size_t n = 0;
    size_t sz = sizeof n;
    if (!rc)
        rc = oni_get_opt(c->ctx, ONI_OPT_NUMDEVICES, &n, &sz);
    oni_device_t dev[64];
    sz = sizeof dev;
    if (!rc)
        rc = n <= 64 ? oni_get_opt(c->ctx, ONI_OPT_DEVICETABLE, dev, &sz) : ONI_EBUFFERSIZE;
    uint32_t sinkdev = UINT32_MAX, one = 1;
    for (oni_size_t i = 0; !rc && i < n; i++)
        if (dev[i].id == ONIX_ONIGPU_TESTSINK)
            sinkdev = dev[i].idx;
    if (!rc && sinkdev == UINT32_MAX)
        rc = ONI_EDEVID;
    if (!rc)
        rc = loop_cardsrc_init(&c->src, c->ctx, (uint32_t)data);
    if (!rc)
        rc = loop_cardsink_init(&c->sink, c->ctx, sinkdev, (uint32_t)data);
    if (!rc)
        rc = oni_set_opt(c->ctx, ONI_OPT_RUNNING, &one, sizeof one);
    return rc;
}

static void card_close(struct card *c)
{
    loop_cardsink_free(&c->sink);
    if (c->ctx)
        oni_destroy_ctx(c->ctx);
    c->ctx = NULL;
}

/* The "card" that receives results: a copy into its memory (unlimited link). */
struct card_sink {
    void *mem;
    size_t cap;
};

static int sink_write(void *ctx, uint64_t seq, const void *out, size_t len, uint32_t timeout_ms)
{
    struct card_sink *s = ctx;
    memcpy(s->mem, out, len < s->cap ? len : s->cap);
    return 0;
}

struct result {
    struct bench_stats total, in, compute, out, gpu, wait;
    uint64_t blocks;
    double blocks_per_s;
};

static int run_one(int backend, const char *link, int emu, uint64_t data, uint32_t passes, uint32_t iters,
                   uint32_t inflight, uint64_t blocks, struct card_sink *sink, struct result *res)
{
    struct loop_memsrc src;
    struct card card;
    memset(&card, 0, sizeof card);
    int rc = emu ? card_open(&card, link, data) : loop_memsrc_init(&src, data, 0, 0, loop_fill_floats, NULL);
    if (rc) {
        card_close(&card);
        return rc;
    }
    struct loop_config c;
    memset(&c, 0, sizeof c);
    c.backend = backend;
    c.work = LOOP_WORK_MAC;
    c.in_bytes = c.out_bytes = data;
    c.depth = 2;
    c.inflight = inflight;
    c.blocks = blocks;
    c.timeout_ms = 60000;
    c.mac.iters = iters;
    c.mac.passes = passes;
    c.mac.seed = 0.1f;
    c.record_cap = (uint32_t)blocks;
    c.spin_us = 2000; /* hand-offs by spinning: the stages are timed, not the scheduler */
    c.pin_threads = 1; /* on a machine with cores to spare, the spinning threads keep theirs */
    if (emu) {
        loop_cardsrc_source(&card.src, &c.src);
        loop_cardsink_sink(&card.sink, &c.sink);
    } else {
        loop_memsrc_source(&src, &c.src);
        c.sink = (struct loop_sink){sink, sink_write};
    }
    struct loop *lp = NULL;
    rc = loop_create(&c, &lp);
    if (!rc)
        rc = loop_run(lp);
    if (!rc) {
        struct loop_stats st;
        loop_get_stats(lp, &st);
        const struct loop_record *r = loop_records(lp);
        /* Drop the first tenth (at least one block): warm-up. */
        uint64_t skip = st.nrecords > 10 ? st.nrecords / 10 : (st.nrecords > 1);
        uint64_t n = st.nrecords - skip;
        uint64_t *v[6];
        for (int k = 0; k < 6; k++)
            v[k] = malloc((n ? n : 1) * sizeof *v[k]);
        if (!v[0] || !v[1] || !v[2] || !v[3] || !v[4] || !v[5] || !n) {
            rc = n ? ONI_EBADALLOC : ONI_EINVALARG;
        } else {
            for (uint64_t i = 0; i < n; i++) {
                v[0][i] = r[skip + i].t_total_ns;
                v[1][i] = r[skip + i].t_in_ns;
                v[2][i] = r[skip + i].t_compute_ns;
                v[3][i] = r[skip + i].t_out_ns;
                v[4][i] = r[skip + i].t_gpu_ns;
                v[5][i] = r[skip + i].t_wait_ns;
            }
            struct bench_stats *out[6] = {&res->total, &res->in, &res->compute, &res->out, &res->gpu, &res->wait};
            for (int k = 0; k < 6 && !rc; k++)
                rc = bench_stats_compute(v[k], n, out[k]);
            res->blocks = st.blocks;
            res->blocks_per_s = st.seconds > 0 ? (double)st.blocks / st.seconds : 0;
        }
        for (int k = 0; k < 6; k++)
            free(v[k]);
    }
    loop_destroy(lp);
    if (emu)
        card_close(&card);
    else
        loop_memsrc_free(&src);
    return rc;
}

int bench_loop_measure(int backend, uint64_t data, uint64_t compute, double ai, uint64_t blocks, double *p50_ns)
{
    data &= ~(uint64_t)3;
    uint32_t iters = bench_loop_iters(ai);
    if (data < 4 || compute < data || compute / data > UINT32_MAX || !iters || blocks < 2 || !p50_ns)
        return ONI_EINVALARG;
    struct card_sink sink = {malloc(data), data};
    if (!sink.mem)
        return ONI_EBADALLOC;
    struct result res;
    int rc = run_one(backend, NULL, 0, data, (uint32_t)(compute / data), iters, 1, blocks, &sink, &res);
    if (!rc)
        *p50_ns = res.total.p50;
    free(sink.mem);
    return rc;
}


static void size_name(uint64_t b, char *buf, size_t n)
{
    if (b >= 1000000000 && b % 1000000000 == 0)
        snprintf(buf, n, "%lluGB", (unsigned long long)(b / 1000000000));
    else if (b >= 1000000 && b % 1000000 == 0)
        snprintf(buf, n, "%lluMB", (unsigned long long)(b / 1000000));
    else if (b >= 1000 && b % 1000 == 0)
        snprintf(buf, n, "%llukB", (unsigned long long)(b / 1000));
    else
        snprintf(buf, n, "%lluB", (unsigned long long)b);
}

int bench_loop_sizes_ok(uint64_t data, uint64_t compute)
{
    return data >= 4 && data <= (1u << 30) && data % 4 == 0 && compute >= data && compute % data == 0 &&
           compute / data <= UINT32_MAX;
}

uint32_t bench_loop_iters(double ai)
{
    double it = 4.0 * ai;
    return it >= 1 && it <= 40000 && it == floor(it) ? (uint32_t)it : 0;
}

/* One configuration (scenario s, AI a, backend b) and what it measured. */
struct config {
    int s, a, b, rc;
    uint32_t iters, passes;
    struct result lat;
    double thr_blocks_per_s;
};

/* The latency run, sized to the time budget from a short probe, then the
 * pipelined run; c->rc the first error. */
static void run_config(const struct bench_loop_opts *o, int emu, struct card_sink *sink, struct config *c)
{
    uint64_t data = o->data[c->s];
    struct result probe, thr;
    int rc = run_one(c->b, o->link, emu, data, c->passes, c->iters, 1, 3, sink, &probe);
    uint64_t blocks = o->blocks;
    if (!rc) {
        /* Compared in double: a huge --seconds over a short block overflows the cast. */
        double per = probe.total.max / 1e9;
        double fit = per > 0 ? o->seconds / 2 / per : (double)blocks;
        if (fit < (double)blocks)
            blocks = fit < 5 ? 5 : (uint64_t)fit;
        rc = run_one(c->b, o->link, emu, data, c->passes, c->iters, 1, blocks, sink, &c->lat);
    }
    if (!rc)
        rc = run_one(c->b, o->link, emu, data, c->passes, c->iters, 2, blocks, sink, &thr);
    c->thr_blocks_per_s = rc ? 0 : thr.blocks_per_s;
    c->rc = rc;
}

/* The configurations cf[0..n) into rep: rows, the TARGETS.md figure,
 * plots. */
static void write_results(const struct bench_loop_opts *o, struct results *rep, int emu,
                          const struct config *cf, size_t n)
{
    results_meta(rep, "source", emu ? "emu: test core on the GPU data stream -> test sink (ONI_DRV_READ[_ASYNC], "
                                           "ONI_DRV_WRITE), fast mode"
                                         : "mem: in-memory source, unlimited link");
    if (emu)
        results_meta(rep, "link", o->link ? o->link : "card default");
    results_meta(rep, "method", "latency mode: 2 slots, 1 block in flight; "
                                     "throughput: 2 in flight; first 10% of blocks dropped as warm-up");
    double staged_p50 = 0, best_p50 = 0, best_p999 = 0;
    const char *best_name = NULL;
    for (size_t i = 0; i < n; i++) {
        const struct config *c = &cf[i];
        uint64_t data = o->data[c->s], compute = o->compute[c->s];
        double ai = o->ai[c->a];
        char dn[32], cn[32];
        size_name(data, dn, sizeof dn);
        size_name(compute, cn, sizeof cn);
        results_cell_str(rep, "backend", loop_backend_name(c->b));
        results_cell_str(rep, "data", dn);
        results_cell_str(rep, "compute", cn);
        results_cell_num(rep, "ai", ai);
        results_cell_int(rep, "iters", c->iters);
        results_cell_int(rep, "passes", c->passes);
        results_cell_str(rep, "error", c->rc ? oni_error_str(c->rc) : "");
        if (c->rc) {
            results_row(rep, NULL);
            continue;
        }
        const struct result *lat = &c->lat;
        bench_cell_stats(rep, "rt", &lat->total);
        results_cell_num(rep, "in_p50_ns", lat->in.p50);
        results_cell_num(rep, "compute_p50_ns", lat->compute.p50);
        results_cell_num(rep, "out_p50_ns", lat->out.p50);
        /* persistent kernels: GPU time from the completion word seen to the
         * results fenced; the rest of the round trip is host work and the
         * two notifications (host -> GPU, GPU -> host). */
        results_cell_num(rep, "gpu_p50_ns", lat->gpu.p50);
        /* launch backends: the part of compute spent waiting for the doorbell
         * after the last CUDA call (compute - wait = the calls themselves) */
        results_cell_num(rep, "wait_p50_ns", lat->wait.p50);
        results_cell_num(rep, "pipelined_blocks_per_s", c->thr_blocks_per_s);
        results_cell_num(rep, "pipelined_MBps", c->thr_blocks_per_s * (double)data / 1e6);
        results_cell_num(rep, "gflops", loop_mac_flops(data / 4, c->iters, c->passes) / lat->total.p50);
        results_row(rep, NULL);
        /* The TARGETS.md figure: 4 kB in / AI 0.75 / 4 kB out. */
        if (data <= 4096 && compute == data && fabs(ai - 0.75) < 1e-9) {
            if (c->b == LOOP_GPU_STAGED)
                staged_p50 = lat->total.p50;
            if (c->b > LOOP_GPU_STAGED && (!best_name || lat->total.p50 < best_p50)) {
                best_p50 = lat->total.p50;
                best_p999 = lat->total.p999;
                best_name = loop_backend_name(c->b);
            }
        }
    }
    if (best_name) {
        results_meta(rep, "target_best_gpu_backend", best_name);
        results_meta_num(rep, "target_best_p50_us", best_p50 / 1e3);
        results_meta_num(rep, "target_best_p999_us", best_p999 / 1e3);
        if (staged_p50 > 0)
            results_meta_num(rep, "target_staged_over_best_p50", staged_p50 / best_p50);
        if (o->log)
            fprintf(o->log, "4 kB / AI 0.75 / 4 kB: best GPU backend %s p50 %.1f us, p99.9 %.1f us; gpu-staged p50 / best = %.2f\n",
                    best_name, best_p50 / 1e3, best_p999 / 1e3, staged_p50 > 0 ? staged_p50 / best_p50 : NAN);
    }
    /* p50 per backend over compute size, one plot per AI */
    for (int a = 0; a < o->nai; a++) {
        double px[LOOP_NBACKENDS][BENCH_LOOP_MAX], py[LOOP_NBACKENDS][BENCH_LOOP_MAX];
        size_t np[LOOP_NBACKENDS] = {0};
        for (size_t i = 0; i < n; i++) {
            if (cf[i].a != a || cf[i].rc)
                continue;
            size_t k = np[cf[i].b]++;
            px[cf[i].b][k] = (double)o->compute[cf[i].s];
            py[cf[i].b][k] = cf[i].lat.total.p50 / 1e3;
        }
        struct results_series ser[LOOP_NBACKENDS];
        size_t ns = 0;
        for (int b = 0; b < LOOP_NBACKENDS; b++)
            if (np[b])
                ser[ns++] = (struct results_series){loop_backend_name(b), px[b], py[b], np[b], RESULTS_LINES_POINTS};
        if (!ns)
            continue;
        char title[96], tag[32];
        snprintf(title, sizeof title, "closed loop round trip p50, AI %g", o->ai[a]);
        snprintf(tag, sizeof tag, "ai%g", o->ai[a]);
        struct results_plot p = {title, "compute size (bytes)", "round trip p50 (us)", 1, 1, ser, ns};
        results_add_plot(rep, tag, &p);
    }
}

int bench_loop_run(const struct bench_loop_opts *o, struct results *rep, int *failed, int *measured)
{
    *failed = *measured = 0;
    if (o->nscen < 1 || o->nscen > BENCH_LOOP_MAX || o->nai < 1 || o->nai > BENCH_LOOP_MAX || o->blocks < 5 ||
        !(o->seconds > 0) || !(o->backends & ((1u << LOOP_NBACKENDS) - 1)))
        return ONI_EINVALARG;
    /* Refused rather than rounded: each row says what ran (data, passes, iters). */
    for (int s = 0; s < o->nscen; s++)
        if (!bench_loop_sizes_ok(o->data[s], o->compute[s]))
            return ONI_EINVALARG;
    for (int a = 0; a < o->nai; a++)
        if (!bench_loop_iters(o->ai[a]))
            return ONI_EINVALARG;
    struct config *cf = calloc((size_t)o->nscen * (size_t)o->nai * LOOP_NBACKENDS, sizeof *cf);
    if (!cf)
        return ONI_EBADALLOC;
    int emu = o->source && !strcmp(o->source, "emu"), rc = 0;
    size_t n = 0;
    for (int s = 0; s < o->nscen && !rc && !bench_stopped(); s++) {
        uint64_t data = o->data[s];
        struct card_sink sink = {malloc(data), data};
        if (!sink.mem)
            rc = ONI_EBADALLOC;
        for (int a = 0; a < o->nai && !rc; a++) {
            for (int b = 0; b < LOOP_NBACKENDS && !bench_stopped(); b++) {
                if (!(o->backends & (1u << b)))
                    continue;
                struct config *c = &cf[n++];
                *c = (struct config){.s = s, .a = a, .b = b, .iters = bench_loop_iters(o->ai[a]),
                                     .passes = (uint32_t)(o->compute[s] / data)};
                run_config(o, emu, &sink, c);
                *failed += c->rc != 0;
                if (!o->log)
                    continue;
                char dn[32], cn[32];
                size_name(data, dn, sizeof dn);
                size_name(o->compute[s], cn, sizeof cn);
                const struct bench_stats *t = &c->lat.total;
                if (c->rc)
                    fprintf(o->log, "bench loop: %s %s/%s AI %g: %s\n", loop_backend_name(b), dn, cn, o->ai[a],
                            oni_error_str(c->rc));
                else
                    fprintf(o->log, "%-15s %6s/%-6s AI %5.2f  p50 %9.1f  p99 %9.1f  p99.9 %9.1f  max %9.1f us  "
                                    "(n=%zu; p50 in %.1f compute %.1f wait %.1f gpu %.1f out %.1f)\n",
                            loop_backend_name(b), dn, cn, o->ai[a], t->p50 / 1e3, t->p99 / 1e3, t->p999 / 1e3,
                            t->max / 1e3, t->n, c->lat.in.p50 / 1e3, c->lat.compute.p50 / 1e3,
                            c->lat.wait.p50 / 1e3, c->lat.gpu.p50 / 1e3, c->lat.out.p50 / 1e3);
            }
        }
        free(sink.mem);
    }
    if (!rc && (size_t)*failed < n) {
        write_results(o, rep, emu, cf, n);
        *measured = (int)n - *failed;
    }
    free(cf);
    return rc;
}
