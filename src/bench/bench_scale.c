/* bench_scale.c - `onigpu bench scale` (bench_scale.h): loop_run_session per
 * probes x algorithm x backend, rows, ratios against cpu, plots. */
#include "bench/bench_scale.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "loop/loop.h"
#include "loop/run.h"

/* threshold: the built-in chain (filter, reference, detect, decide);
 * tmatch: filter, reference, then tmatch against the card's own truth
 * templates, every probe's set in one stage (docs/stages.md "Template
 * matching"). */
static const struct bench_scale_algo algos[] = {
    {"threshold", 0},
    {"tmatch", 1},
};
#define NALGOS ((int)(sizeof algos / sizeof algos[0]))

const struct bench_scale_algo *bench_scale_algo(int i)
{
    return i >= 0 && i < NALGOS ? &algos[i] : NULL;
}

int bench_scale_algo_parse(const char *name)
{
    for (int i = 0; name && i < NALGOS; i++)
        if (!strcmp(name, algos[i].name))
            return i;
    return -1;
}

void bench_scale_defaults(struct bench_scale_opts *o)
{
    memset(o, 0, sizeof *o);
    for (int b = 0; b < LOOP_NBACKENDS; b++)
        if (loop_backend_available(b, NULL, 0))
            o->backends |= 1u << b;
    static const uint32_t probes[] = {1, 2, 4, 8, 16}; /* issue 24's sweep */
    memcpy(o->probes, probes, sizeof probes);
    o->nprobes = 5;
    o->algos = (1u << NALGOS) - 1;
    o->block = 16;
    o->seconds = 3;
    o->repeat = 1;
    o->out_dir = "docs/results";
}

/* What one run gave, for the ratios and the plots. */
struct cell {
    int ok;          /* the run processed frames */
    double keep;     /* frames processed per second / the probes' frame rate */
    double lat[4];   /* p50, p99, p99.9, max us (NaN: no echo) */
};

/* A run's chain and card: the stage text lives in text, the spec in spec. */
struct chain {
    struct loop_stage_spec specs[LOOP_MAXCHAIN];
    uint32_t n;
    char text[LOOP_RUN_MAX_PROBES * 80 + 32];
    char spec[300];
};

/* The chain of algorithm a for probes probes; a templates algorithm has the
 * cards write their truth templates into dir (the set of probe j of a card
 * is D/R-S, D the card's directory (loop_run_card_templates), raw device
 * R = 8 + j / 2, stream S = j % 2, docs/emulator.md). */
static void chain(int a, uint32_t probes, const char *dir, struct chain *c)
{
    memset(c, 0, sizeof *c);
    if (!algos[a].templates)
        return; /* the built-in chain, the default card */
    snprintf(c->spec, sizeof c->spec, "%s;templates=%s", probes > 2 ? LOOP_RUN_DEFAULT_SPEC2 : LOOP_RUN_DEFAULT_SPEC,
             dir);
    c->specs[c->n++] = (struct loop_stage_spec){"filter", NULL, NULL};
    c->specs[c->n++] = (struct loop_stage_spec){"reference", NULL, NULL};
    size_t k = (size_t)snprintf(c->text, sizeof c->text, "tmatch:templates=");
    struct loop_run_config cfg = {.probes = probes}; /* the run's cards, as loop_run_session spreads them */
    for (uint32_t p = 0; p < probes && k < sizeof c->text; p++) { /* sets A+B+...: probe p's channels follow */
        uint32_t j, card = loop_run_probe_card(&cfg, p, &j);
        char cdir[80];
        if (loop_run_card_templates(dir, card, cdir, sizeof cdir))
            cdir[0] = 0; /* dir is a short mkdtemp name: never */
        k += (size_t)snprintf(c->text + k, sizeof c->text - k, "%s%s/%u-%u", p ? "+" : "", cdir, 8 + j / 2, j % 2);
    }
    c->specs[c->n++] = (struct loop_stage_spec){c->text, NULL, NULL};
}

/* One run into *c and a row of "results". 0 or the run's error. */
static int one(const struct bench_scale_opts *o, struct results *rep, int backend, int a, uint32_t probes, int round,
               struct cell *c)
{
    char truth[64], dir[64];
    snprintf(truth, sizeof truth, "/tmp/onigpu-benchscale-XXXXXX");
    snprintf(dir, sizeof dir, "/tmp/onigpu-benchscale-tpl-XXXXXX");
    int fd = mkstemp(truth);
    if (fd < 0)
        return ONI_EPATHINVALID;
    close(fd);
    if (algos[a].templates && !mkdtemp(dir)) {
        remove(truth);
        return ONI_EPATHINVALID;
    }
    static struct chain ch; /* one run at a time */
    chain(a, probes, dir, &ch);
    struct loop_run_config cfg = {.backend = backend, .spec = ch.spec[0] ? ch.spec : NULL, .probes = probes,
                                  .block = o->block, .seconds = o->seconds, .truth = truth, .stages = ch.specs,
                                  .nstages = ch.n};
    struct loop_run_result r;
    char why[sizeof r.why];
    if (loop_run_check(&cfg, why, sizeof why)) { /* a combination the run refuses: said, not run */
        remove(truth);
        if (algos[a].templates)
            bench_rm_tree(dir);
        memset(c, 0, sizeof *c);
        if (o->log)
            fprintf(o->log, "bench scale: %s %s %u probe%s: not run: %s\n", loop_backend_name(backend),
                    algos[a].name, probes, probes > 1 ? "s" : "", why);
        return 0;
    }
    int rc = loop_run_session(&cfg, &r);
    loop_run_truth_remove(truth);
    if (algos[a].templates)
        bench_rm_tree(dir);
    const char *err = rc ? (r.why[0] ? r.why : oni_error_str(rc)) : "";
    memset(c, 0, sizeof *c);
    c->ok = r.ran && r.frames > 0;
    c->keep = c->ok && r.fs_hz > 0 ? r.fps / r.fs_hz : NAN;
    c->lat[0] = r.lat.p50_us, c->lat[1] = r.lat.p99_us, c->lat[2] = r.lat.p999_us, c->lat[3] = r.lat.max_us;
    results_cell_str(rep, "backend", loop_backend_name(backend));
    results_cell_str(rep, "algo", algos[a].name);
    results_cell_int(rep, "probes", probes);
    results_cell_int(rep, "channels", 384 * (long long)probes);
    results_cell_int(rep, "block_frames", o->block);
    results_cell_int(rep, "round", round);
    results_cell_str(rep, "error", err);
    results_cell_str(rep, "stream", r.gpu_stream ? "gpu" : "default");
    results_cell_num(rep, "seconds", r.seconds);
    results_cell_num(rep, "frames_per_s", r.fps);
    results_cell_num(rep, "keeping_share", c->keep);
    results_cell_num(rep, "keeping_up", r.verdict < 0 ? NAN : r.verdict);
    results_cell_int(rep, "dropped_frames", (long long)r.dropped);
    results_cell_num(rep, "backlog_ms", r.owed_ms);
    results_cell_num(rep, "emu_lag_max_ms", r.emu_lag_ms);
    results_cell_int(rep, "spikes", (long long)r.spikes);
    results_cell_num(rep, "precision", r.score.precision);
    results_cell_num(rep, "recall", r.score.recall);
    results_cell_num(rep, "f1", r.score.f1);
    results_cell_num(rep, "f1_snr_ge5", loop_score_band_f1(&r.score, 1));
    results_cell_int(rep, "echoes", (long long)r.lat.n);
    static const char *const pn[] = {"p50", "p99", "p999", "max"};
    char col[32];
    for (int i = 0; i < 4; i++) {
        snprintf(col, sizeof col, "lat_%s_us", pn[i]);
        results_cell_num(rep, col, c->lat[i]);
    }
    int rrc = results_row(rep, NULL);
    if (o->log)
        fprintf(o->log, "bench scale: %s %s %u probe%s (round %d): %s%s%.0f frames/s (%.2f of the probes' rate)%s, "
                "F1 %.3f, latency p50 %.1f p99.9 %.1f us\n", loop_backend_name(backend), algos[a].name, probes,
                probes > 1 ? "s" : "", round, rc ? "error: " : "", rc ? err : "", r.fps, c->keep,
                r.verdict == 0 ? " NOT keeping up" : "", r.score.f1, c->lat[0], c->lat[2]);
    loop_run_result_free(&r);
    return rc ? rc : rrc < 0 ? rrc : 0;
}

static double ratio(double a, double b)
{
    return b > 0 ? a / b : NAN;
}

#define MAX_SERIES 64

/* Per backend and algorithm, the cells' field f (round 0) against probes. */
static int plot(const struct bench_scale_opts *o, struct results *rep, const struct cell *cells, const int *bes,
                int nbe, const int *as, int na, const char *name, const char *title, const char *ylabel, int logy,
                double (*f)(const struct cell *))
{
    static double x[MAX_SERIES][BENCH_SCALE_MAX], y[MAX_SERIES][BENCH_SCALE_MAX];
    static char names[MAX_SERIES][64];
    struct results_series ser[MAX_SERIES];
    size_t ns = 0;
    for (int e = 0; e < nbe; e++)
        for (int a = 0; a < na && ns < MAX_SERIES; a++) {
            size_t n = 0;
            for (int p = 0; p < o->nprobes; p++) {
                const struct cell *c = &cells[((size_t)e * na + a) * o->nprobes + p];
                double v = c->ok ? f(c) : NAN;
                if (isnan(v) || (logy && v <= 0))
                    continue;
                x[ns][n] = o->probes[p];
                y[ns][n++] = v;
            }
            if (!n)
                continue;
            snprintf(names[ns], sizeof names[ns], "%s %s", loop_backend_name(bes[e]), algos[as[a]].name);
            ser[ns] = (struct results_series){names[ns], x[ns], y[ns], n, RESULTS_LINES_POINTS};
            ns++;
        }
    struct results_plot pl = {title, "probes (384 channels each)", ylabel, 1, logy, ser, ns};
    return ns ? results_add_plot(rep, name, &pl) : 0;
}

static double keep_of(const struct cell *c) { return c->keep; }
static double p999_of(const struct cell *c) { return c->lat[2]; }

static int bad_opts(const struct bench_scale_opts *o)
{
    if (!o->backends || !o->algos || o->nprobes < 1 || o->nprobes > BENCH_SCALE_MAX || o->block < 1 ||
        o->block > LOOP_RUN_MAX_BLOCK || !(o->seconds >= LOOP_RUN_MIN_SECONDS) || o->repeat < 1 || o->repeat > 64)
        return 1;
    for (int p = 0; p < o->nprobes; p++)
        if (o->probes[p] < 1 || o->probes[p] > LOOP_RUN_MAX_PROBES)
            return 1;
    return 0;
}

int bench_scale_run(const struct bench_scale_opts *o, struct results *rep, int *failed, int *measured)
{
    int bes[LOOP_NBACKENDS], nbe = 0, as[NALGOS], na = 0;
    *failed = *measured = 0;
    if (bad_opts(o))
        return ONI_EINVALARG;
    for (int b = 0; b < LOOP_NBACKENDS; b++)
        if (o->backends >> b & 1)
            bes[nbe++] = b;
    for (int a = 0; a < NALGOS; a++)
        if (o->algos >> a & 1)
            as[na++] = a;
    size_t stride = (size_t)nbe * na * o->nprobes; /* cells of one round */
    struct cell *cells = calloc(stride * (size_t)o->repeat, sizeof *cells);
    if (!cells)
        return ONI_EBADALLOC;
    results_meta_num(rep, "seconds_per_run", o->seconds);
    results_meta_num(rep, "repeat", o->repeat);
    results_meta_num(rep, "block_frames", o->block);
    int rc = 0;
    for (int r = 0; r < o->repeat && !rc && !bench_stopped(); r++)
        for (int p = 0; p < o->nprobes && !rc && !bench_stopped(); p++)
            for (int a = 0; a < na && !rc && !bench_stopped(); a++)
                for (int e = 0; e < nbe && !rc && !bench_stopped(); e++) {
                    struct cell *c = &cells[(size_t)r * stride + ((size_t)e * na + a) * o->nprobes + p];
                    int err = one(o, rep, bes[e], as[a], o->probes[p], r, c);
                    if (err == ONI_EPATHINVALID || err == ONI_EBADALLOC)
                        rc = err; /* the benchmark itself cannot go on */
                    else if (err)
                        ++*failed;
                    *measured += c->ok;
                }
    /* every backend against cpu, same probes, algorithm and round */
    int cpu = -1;
    for (int e = 0; e < nbe; e++)
        if (bes[e] == LOOP_CPU)
            cpu = e;
    for (int r = 0; r < o->repeat && cpu >= 0; r++)
        for (int e = 0; e < nbe; e++)
            for (int a = 0; a < na && e != cpu; a++)
                for (int p = 0; p < o->nprobes; p++) {
                    const struct cell *ref = &cells[(size_t)r * stride + ((size_t)cpu * na + a) * o->nprobes + p];
                    const struct cell *c = &cells[(size_t)r * stride + ((size_t)e * na + a) * o->nprobes + p];
                    if (!ref->ok || !c->ok)
                        continue;
                    results_cell_str(rep, "backend", loop_backend_name(bes[e]));
                    results_cell_str(rep, "vs_backend", "cpu");
                    results_cell_str(rep, "algo", algos[as[a]].name);
                    results_cell_int(rep, "probes", o->probes[p]);
                    results_cell_int(rep, "round", r);
                    results_cell_num(rep, "keeping_ratio", ratio(c->keep, ref->keep));
                    results_cell_num(rep, "lat_p50_ratio", ratio(c->lat[0], ref->lat[0]));
                    results_cell_num(rep, "lat_p99_ratio", ratio(c->lat[1], ref->lat[1]));
                    results_cell_num(rep, "lat_p999_ratio", ratio(c->lat[2], ref->lat[2]));
                    results_row(rep, "ratios");
                }
    int prc = 0;
    if (*measured) {
        prc = plot(o, rep, cells, bes, nbe, as, na, "keeping", "share of the probes' frame rate processed (round 0)",
                   "frames processed / frames made", 0, keep_of);
        int p2 = plot(o, rep, cells, bes, nbe, as, na, "latency", "spike -> stimulus latency p99.9 (round 0)",
                      "p99.9 (us)", 1, p999_of);
        prc = prc ? prc : p2;
    }
    free(cells);
    return rc ? rc : prc;
}
