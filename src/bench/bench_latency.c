/* bench_latency.c - `onigpu bench latency` (bench_latency.h): loop_run_session
 * per backend x block x spin, rows, ratios and plots. */
#include "bench/bench_latency.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "loop/loop.h"
#include "loop/run.h"

/* Variant v of o: specs x spins x reads, reads varying fastest. */
#define NVAR(o) ((o)->nspecs * (o)->nspins * (o)->nreads)
#define VSPEC(o, v) ((o)->specs[(v) / ((o)->nspins * (o)->nreads)])
#define VSPIN(o, v) ((o)->spins[(v) / (o)->nreads % (o)->nspins])
#define VDMA(o, v) ((o)->reads[(v) % (o)->nreads])
#define SPEC_NAME(s) ((s) ? (s) : LOOP_RUN_DEFAULT_SPEC)

void bench_latency_defaults(struct bench_latency_opts *o)
{
    memset(o, 0, sizeof *o);
    for (int b = 0; b < LOOP_NBACKENDS; b++)
        if (loop_backend_available(b, NULL, 0))
            o->backends |= 1u << b;
    static const uint32_t blocks[] = {1, 2, 4, 8, 16, 32};
    memcpy(o->blocks, blocks, sizeof blocks);
    o->nblocks = 6;
    o->spins[0] = 50;
    o->spins[1] = 1000;
    o->nspins = 2;
    o->reads[0] = 1;
    o->reads[1] = 0;
    o->nreads = 2;
    o->nspecs = 1;
    o->seconds = 2;
    o->repeat = 1;
    o->out_dir = "docs/results";
}

/* What one run gave, for the ratios and the plots. */
struct cell {
    int ok;
    double lat[3];                  /* p50, p99, p99.9 us */
    double after[3];
    double stage_p50[LOOP_RUN_NSTAGES];
};

/* One run into *c and a row of "results". 0 or the run's error. */
static int one(const struct bench_latency_opts *o, struct results *rep, int backend, uint32_t block, int v,
               int round, struct cell *c)
{
    char truth[64];
    snprintf(truth, sizeof truth, "/tmp/onigpu-benchlat-XXXXXX");
    int fd = mkstemp(truth);
    if (fd < 0)
        return ONI_EPATHINVALID;
    close(fd);
    uint32_t spin = VSPIN(o, v);
    int dma = VDMA(o, v);
    struct loop_run_config cfg = {.backend = backend, .spec = VSPEC(o, v), .block = block, .seconds = o->seconds,
                                  .truth = truth, .spin_us = spin, .dma_reads = dma};
    struct loop_run_result r;
    int rc = loop_run_session(&cfg, &r);
    remove(truth);
    results_cell_str(rep, "backend", loop_backend_name(backend));
    results_cell_int(rep, "block_frames", block);
    results_cell_int(rep, "spin_us", spin);
    results_cell_str(rep, "reads", dma ? "dma" : "blocking");
    results_cell_str(rep, "spec", SPEC_NAME(VSPEC(o, v)));
    results_cell_int(rep, "round", round);
    results_cell_str(rep, "error", rc ? (r.why[0] ? r.why : oni_error_str(rc)) : "");
    results_cell_str(rep, "stream", r.gpu_stream ? "gpu" : "default");
    results_cell_num(rep, "seconds", r.seconds);
    results_cell_num(rep, "frames_per_s", r.fps);
    results_cell_num(rep, "keeping_up", r.verdict < 0 ? NAN : r.verdict);
    results_cell_int(rep, "dropped_frames", (long long)r.dropped);
    results_cell_num(rep, "backlog_ms", r.owed_ms);
    results_cell_int(rep, "stims", (long long)r.stims);
    results_cell_int(rep, "echoes", (long long)r.lat.n);
    /* a spike waits on average for (block - 1) / 2 frames to follow it */
    double wait_us = r.fs_hz > 0 ? (block - 1) / 2.0 / r.fs_hz * 1e6 : NAN;
    results_cell_num(rep, "block_wait_us", wait_us);
    const char *pn[] = {"p50", "p99", "p999", "max"};
    char col[64];
    const double lat[] = {r.lat.p50_us, r.lat.p99_us, r.lat.p999_us, r.lat.max_us};
    for (int i = 0; i < 4; i++) {
        snprintf(col, sizeof col, "lat_%s_us", pn[i]);
        results_cell_num(rep, col, lat[i]);
    }
    for (int k = 0; k < LOOP_RUN_NSTAGES; k++) {
        const struct loop_run_latency *s = &r.stage[k];
        const double v[] = {s->p50_us, s->p99_us, s->p999_us, s->max_us};
        for (int i = 0; i < 4; i++) {
            snprintf(col, sizeof col, "%s_%s_us", loop_run_stage_name(k), pn[i]);
            results_cell_num(rep, col, v[i]);
        }
    }
    /* each stage's share of the time after the last sample, at p50 */
    double after = r.stage[LOOP_RUN_AFTER].p50_us;
    for (int k = LOOP_RUN_READY; k <= LOOP_RUN_WRITE; k++) {
        snprintf(col, sizeof col, "share_%s", loop_run_stage_name(k));
        results_cell_num(rep, col, after > 0 ? r.stage[k].p50_us / after : NAN);
    }
    results_cell_num(rep, "clock_err_us", r.clock_err_us);
    results_cell_num(rep, "link_read_us", r.link_read_us);
    results_cell_num(rep, "link_write_us", r.link_write_us);
    int rrc = results_row(rep, NULL);
    memset(c, 0, sizeof *c);
    c->ok = !rc && r.lat.n > 0;
    c->lat[0] = r.lat.p50_us, c->lat[1] = r.lat.p99_us, c->lat[2] = r.lat.p999_us;
    const struct loop_run_latency *a = &r.stage[LOOP_RUN_AFTER];
    c->after[0] = a->p50_us, c->after[1] = a->p99_us, c->after[2] = a->p999_us;
    for (int k = 0; k < LOOP_RUN_NSTAGES; k++)
        c->stage_p50[k] = r.stage[k].p50_us;
    if (o->log)
        fprintf(o->log, "bench latency: %s block %u spin %u us %s reads %s (round %d): %s%s latency p50 %.1f p99 %.1f "
                "p99.9 %.1f us, after the last sample p50 %.1f us, %.0f frames/s%s\n", loop_backend_name(backend), block,
                spin, dma ? "dma" : "blocking", SPEC_NAME(VSPEC(o, v)), round,
                rc ? "error: " : "", rc ? (r.why[0] ? r.why : oni_error_str(rc)) : "", c->lat[0], c->lat[1], c->lat[2],
                c->after[0], r.fps, r.verdict == 0 ? " (NOT keeping up)" : "");
    loop_run_result_free(&r);
    return rc ? rc : rrc < 0 ? rrc : 0;
}

static double ratio(double a, double b)
{
    return b > 0 ? a / b : NAN;
}

/* Median over the rounds of what cells[i * stride + r] hold at field f. */
static double median_of(const struct cell *cells, size_t base, size_t stride, int rounds, size_t off)
{
    double v[64];
    int n = 0;
    for (int r = 0; r < rounds && n < 64; r++) {
        const struct cell *c = &cells[base + (size_t)r * stride];
        if (c->ok)
            v[n++] = *(const double *)((const char *)c + off);
    }
    if (!n)
        return NAN;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return v[(n - 1) / 2];
}

#define MAX_SERIES 64

static int plots(const struct bench_latency_opts *o, struct results *rep, const struct cell *cells,
                 const int *bes, int nbe, size_t stride)
{
    static double x[MAX_SERIES][BENCH_LATENCY_MAX], y[MAX_SERIES][BENCH_LATENCY_MAX];
    static char names[MAX_SERIES][64];
    struct results_series ser[MAX_SERIES];
    size_t ns = 0;
    static const char *const pn[] = {"p50", "p99", "p99.9"};
    /* the block's own wait: (block - 1) / 2 frames at 30 kHz */
    for (int b = 0; b < o->nblocks; b++) {
        x[0][b] = o->blocks[b];
        y[0][b] = (o->blocks[b] - 1) / 2.0 / 30000.0 * 1e6;
    }
    snprintf(names[0], sizeof names[0], "block arithmetic: (block-1)/2 frames");
    ser[ns++] = (struct results_series){names[0], x[0], y[0], (size_t)o->nblocks, RESULTS_LINES};
    for (int e = 0; e < nbe; e++)
        for (int s = 0; s < NVAR(o); s++)
            for (int p = 0; p < 3 && ns < MAX_SERIES; p++) {
                size_t n = 0;
                for (int b = 0; b < o->nblocks; b++) {
                    size_t base = ((size_t)e * NVAR(o) + s) * o->nblocks + b;
                    double v = median_of(cells, base, stride, o->repeat, offsetof(struct cell, lat) + p * sizeof(double));
                    if (isnan(v))
                        continue;
                    x[ns][n] = o->blocks[b];
                    y[ns][n++] = v;
                }
                if (!n)
                    continue;
                snprintf(names[ns], sizeof names[ns], "%s v%d %s", loop_backend_name(bes[e]), s, pn[p]);
                ser[ns] = (struct results_series){names[ns], x[ns], y[ns], n, RESULTS_LINES_POINTS};
                ns++;
            }
    struct results_plot pl = {"spike -> stimulus latency against block size (median of rounds)", "block (frames)",
                            "latency (us)", 1, 1, ser, ns};
    int rc = ns > 1 ? results_add_plot(rep, "blocks", &pl) : 0;
    /* the stages' p50, last spin, every backend */
    ns = 0;
    int s = NVAR(o) - 1;
    for (int e = 0; e < nbe; e++)
        for (int k = 0; k < LOOP_RUN_NSTAGES && ns < MAX_SERIES; k++) {
            if (k == LOOP_RUN_ECHO)
                continue; /* not part of the latency */
            size_t n = 0;
            for (int b = 0; b < o->nblocks; b++) {
                size_t base = ((size_t)e * NVAR(o) + s) * o->nblocks + b;
                double v = median_of(cells, base, stride, o->repeat,
                                     offsetof(struct cell, stage_p50) + (size_t)k * sizeof(double));
                if (isnan(v) || v <= 0)
                    continue;
                x[ns][n] = o->blocks[b];
                y[ns][n++] = v;
            }
            if (!n)
                continue;
            snprintf(names[ns], sizeof names[ns], "%s %s", loop_backend_name(bes[e]), loop_run_stage_name(k));
            ser[ns] = (struct results_series){names[ns], x[ns], y[ns], n, RESULTS_LINES_POINTS};
            ns++;
        }
    char title[96];
    snprintf(title, sizeof title, "after the block's last sample: each stage's p50 (variant v%d)", s);
    struct results_plot st = {title, "block (frames)", "p50 (us)", 1, 1, ser, ns};
    int rc2 = ns ? results_add_plot(rep, "stages", &st) : 0;
    return rc ? rc : rc2;
}

int bench_latency_run(const struct bench_latency_opts *o, struct results *rep, int *failed, int *measured)
{
    int bes[LOOP_NBACKENDS], nbe = 0;
    for (int b = 0; b < LOOP_NBACKENDS; b++)
        if (o->backends >> b & 1)
            bes[nbe++] = b;
    *failed = *measured = 0;
    if (!nbe || o->nblocks < 1 || o->nspecs < 1 || o->nspins < 1 || o->nreads < 1 || NVAR(o) > 16 || o->repeat < 1 ||
        o->repeat > 64)
        return ONI_EINVALARG;
    size_t stride = (size_t)nbe * NVAR(o) * o->nblocks; /* cells of one round */
    struct cell *cells = calloc(stride * (size_t)o->repeat, sizeof *cells);
    if (!cells)
        return ONI_EBADALLOC;
    results_meta_num(rep, "seconds_per_run", o->seconds);
    results_meta_num(rep, "repeat", o->repeat);
    /* the plots name variants v0, v1, ...: what each is */
    for (int v = 0; v < NVAR(o); v++) {
        char key[16], val[700];
        snprintf(key, sizeof key, "v%d", v);
        snprintf(val, sizeof val, "spec %s, spin %u us, %s reads", SPEC_NAME(VSPEC(o, v)), VSPIN(o, v),
                 VDMA(o, v) ? "dma" : "blocking");
        results_meta(rep, key, val);
        if (o->log)
            fprintf(o->log, "bench latency: variant %s: %s\n", key, val);
    }
    int rc = 0;
    for (int r = 0; r < o->repeat && !rc && !bench_stopped(); r++)
        for (int b = 0; b < o->nblocks && !rc && !bench_stopped(); b++)
            for (int e = 0; e < nbe && !rc && !bench_stopped(); e++)
                for (int s = 0; s < NVAR(o) && !rc && !bench_stopped(); s++) {
                    size_t i = (size_t)r * stride + ((size_t)e * NVAR(o) + s) * o->nblocks + b;
                    int err = one(o, rep, bes[e], o->blocks[b], s, r, &cells[i]);
                    if (err == ONI_EPATHINVALID || err == ONI_EBADALLOC)
                        rc = err; /* the benchmark itself cannot go on */
                    else if (err)
                        ++*failed;
                    *measured += cells[i].ok;
                }
    /* every spin against the first, same backend, block and round */
    for (int r = 0; r < o->repeat; r++)
        for (int e = 0; e < nbe; e++)
            for (int b = 0; b < o->nblocks; b++)
                for (int s = 1; s < NVAR(o); s++) {
                    const struct cell *ref = &cells[(size_t)r * stride + ((size_t)e * NVAR(o)) * o->nblocks + b];
                    const struct cell *c = &cells[(size_t)r * stride + ((size_t)e * NVAR(o) + s) * o->nblocks + b];
                    if (!ref->ok || !c->ok)
                        continue;
                    results_cell_str(rep, "backend", loop_backend_name(bes[e]));
                    results_cell_int(rep, "block_frames", o->blocks[b]);
                    results_cell_int(rep, "round", r);
                    results_cell_int(rep, "spin_us", VSPIN(o, s));
                    results_cell_str(rep, "reads", VDMA(o, s) ? "dma" : "blocking");
                    results_cell_int(rep, "vs_spin_us", VSPIN(o, 0));
                    results_cell_str(rep, "vs_reads", VDMA(o, 0) ? "dma" : "blocking");
                    results_cell_str(rep, "spec", SPEC_NAME(VSPEC(o, s)));
                    results_cell_str(rep, "vs_spec", SPEC_NAME(VSPEC(o, 0)));
                    results_cell_num(rep, "lat_p50_ratio", ratio(c->lat[0], ref->lat[0]));
                    results_cell_num(rep, "lat_p99_ratio", ratio(c->lat[1], ref->lat[1]));
                    results_cell_num(rep, "lat_p999_ratio", ratio(c->lat[2], ref->lat[2]));
                    results_cell_num(rep, "after_p50_ratio", ratio(c->after[0], ref->after[0]));
                    results_cell_num(rep, "after_p99_ratio", ratio(c->after[1], ref->after[1]));
                    results_row(rep, "ratios");
                }
    int prc = *measured ? plots(o, rep, cells, bes, nbe, stride) : 0;
    free(cells);
    return rc ? rc : prc;
}
