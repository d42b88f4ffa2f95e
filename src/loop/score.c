/* score.c - one-to-one scoring of detections against ground truth (score.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "oni.h"
#include "loop/score.h"
#include "loop/superframe.h"
#include "oni/util/probe.h"

/* A candidate pair: truth i and detection j, dt ticks and d2 um^2 apart. */
struct pair {
    uint64_t dt;
    float d2;
    uint32_t i, j;
};

struct item {
    uint64_t time;
    uint32_t chan, idx;
};

static int by_time(const void *a, const void *b)
{
    const struct item *x = a, *y = b;
    if (x->time != y->time)
        return x->time < y->time ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Closest in time, then in space, then the earliest truth, then detection:
 * a total order, so the outcome does not depend on qsort. */
static int by_distance(const void *a, const void *b)
{
    const struct pair *x = a, *y = b;
    if (x->dt != y->dt)
        return x->dt < y->dt ? -1 : 1;
    if (x->d2 != y->d2)
        return x->d2 < y->d2 ? -1 : 1;
    if (x->i != y->i)
        return x->i < y->i ? -1 : 1;
    return x->j < y->j ? -1 : x->j > y->j;
}

static uint64_t absdiff(uint64_t a, uint64_t b) { return a > b ? a - b : b - a; }

/* The squared distance in um between the sites of channels a and b (probe *
 * 384 + the probe's channel, NP2.0 sites), INFINITY for two probes'. */
static float dist2_um(uint32_t a, uint32_t b)
{
    if (a / LOOP_NP2E_CHANNELS != b / LOOP_NP2E_CHANNELS)
        return INFINITY;
    float xa, ya, xb, yb;
    np2_site(a % LOOP_NP2E_CHANNELS, &xa, &ya);
    np2_site(b % LOOP_NP2E_CHANNELS, &xb, &yb);
    return (xa - xb) * (xa - xb) + (ya - yb) * (ya - yb);
}

/* Every pair within tol and radius_um (< 0: time alone), into *out (the
 * caller frees it). */
static int candidates(const struct item *t, size_t nt, const struct item *d, size_t nd, uint64_t tol,
                      float radius_um, struct pair **out, size_t *np)
{
    size_t cap = 64, n = 0, lo = 0;
    struct pair *p = malloc(cap * sizeof *p);
    if (!p)
        return ONI_EBADALLOC;
    for (size_t j = 0; j < nd; j++) {
        while (lo < nt && t[lo].time + tol < d[j].time)
            lo++;
        for (size_t i = lo; i < nt && t[i].time <= d[j].time + tol; i++) {
            float d2 = radius_um < 0 ? 0.0f : dist2_um(t[i].chan, d[j].chan);
            if (d2 > radius_um * radius_um)
                continue;
            if (n == cap) {
                struct pair *g = realloc(p, 2 * cap * sizeof *p);
                if (!g) {
                    free(p);
                    return ONI_EBADALLOC;
                }
                p = g;
                cap *= 2;
            }
            p[n++] = (struct pair){absdiff(t[i].time, d[j].time), d2, t[i].idx, d[j].idx};
        }
    }
    *out = p;
    *np = n;
    return 0;
}

int loop_score_band(double snr)
{
    if (!(snr > 0))
        return -1;
    return snr < 5 ? 0 : snr < 8 ? 1 : snr < 12 ? 2 : 3;
}

const char *loop_score_band_name(int band)
{
    static const char *const names[LOOP_SCORE_BANDS] = {"<5", "5-8", "8-12", ">=12"};
    return band >= 0 && band < LOOP_SCORE_BANDS ? names[band] : NULL;
}

double loop_score_band_recall(const struct loop_score *sc, int band)
{
    if (band < 0 || band >= LOOP_SCORE_BANDS || !sc->band_events[band])
        return NAN;
    return (double)sc->band_tp[band] / (double)sc->band_events[band];
}

double loop_score_band_f1(const struct loop_score *sc, int from)
{
    if (from < 0 || from >= LOOP_SCORE_BANDS)
        return NAN;
    uint64_t tp = 0, events = 0;
    for (int b = from; b < LOOP_SCORE_BANDS; b++) {
        tp += sc->band_tp[b];
        events += sc->band_events[b];
    }
    return events ? 2.0 * (double)tp / (double)(tp + events + sc->fp) : NAN;
}

static void count(const struct loop_truth *truth, size_t nt, const struct loop_spike *det, size_t nd,
                  const uint8_t *t_matched, const uint8_t *d_matched, uint64_t t_lo, uint64_t t_hi,
                  struct loop_score *out)
{
    for (size_t i = 0; i < nt; i++) {
        if (truth[i].time < t_lo || truth[i].time > t_hi)
            continue;
        int hit = t_matched[i], band = loop_score_band(truth[i].snr);
        out->events++;
        out->tp += (uint64_t)hit;
        out->misses += (uint64_t)!hit;
        if (band >= 0) {
            out->band_events[band]++;
            out->band_tp[band] += (uint64_t)hit;
        }
    }
    for (size_t j = 0; j < nd; j++)
        if (!d_matched[j] && det[j].time >= t_lo && det[j].time <= t_hi)
            out->fp++;
    out->detections = out->tp + out->fp;
    out->precision = out->detections ? (double)out->tp / (double)out->detections : 0.0;
    out->recall = out->events ? (double)out->tp / (double)out->events : 0.0;
    uint64_t f1d = 2 * out->tp + out->fp + out->misses;
    out->f1 = f1d ? 2.0 * (double)out->tp / (double)f1d : 0.0;
}

/* Match t[0..nt) against d[0..nd) (both sorted by time) one to one, greedy
 * by distance (above), marking t_matched[t[i].idx], d_matched[d[j].idx]. */
static int match(const struct item *t, size_t nt, const struct item *d, size_t nd, uint64_t tol, float radius_um,
                 uint8_t *t_matched, uint8_t *d_matched)
{
    struct pair *p = NULL;
    size_t np = 0;
    int rc = candidates(t, nt, d, nd, tol, radius_um, &p, &np);
    if (rc)
        return rc;
    qsort(p, np, sizeof *p, by_distance);
    for (size_t k = 0; k < np; k++)
        if (!t_matched[p[k].i] && !d_matched[p[k].j]) {
            t_matched[p[k].i] = 1;
            d_matched[p[k].j] = 1;
        }
    free(p);
    return 0;
}

/* By unit (the item's chan holds it here), then time, then index. */
static int by_unit(const void *a, const void *b)
{
    const struct item *x = a, *y = b;
    if (x->chan != y->chan)
        return x->chan < y->chan ? -1 : 1;
    return by_time(a, b);
}

int loop_score_units(const struct loop_truth *truth, size_t nt, const struct loop_spike *det, size_t nd, uint64_t tol,
                     uint64_t t_lo, uint64_t t_hi, struct loop_unit_score **out, size_t *n)
{
    *out = NULL, *n = 0;
    if (nt >= UINT32_MAX || nd >= UINT32_MAX)
        return ONI_EBADALLOC;
    size_t nl = 0;
    for (size_t j = 0; j < nd; j++)
        nl += det[j].unit != ONIGPU_UNIT_NONE;
    struct item *t = malloc((nt ? nt : 1) * sizeof *t), *d = malloc((nl ? nl : 1) * sizeof *d);
    uint8_t *t_matched = calloc(nt ? nt : 1, 1), *d_matched = calloc(nd ? nd : 1, 1);
    struct loop_unit_score *u = calloc(nt ? nt : 1, sizeof *u); /* at most one unit per event */
    int rc = t && d && t_matched && d_matched && u ? 0 : ONI_EBADALLOC;
    size_t nu = 0;
    if (!rc) {
        /* items keyed by unit (the chan field holds the unit), each unit's
         * matched apart by time alone */
        for (size_t i = 0; i < nt; i++)
            t[i] = (struct item){truth[i].time, truth[i].unit, (uint32_t)i};
        for (size_t j = 0, k = 0; j < nd; j++)
            if (det[j].unit != ONIGPU_UNIT_NONE)
                d[k++] = (struct item){det[j].time, det[j].unit, (uint32_t)j};
        qsort(t, nt, sizeof *t, by_unit);
        qsort(d, nl, sizeof *d, by_unit);
        for (size_t i = 0, j = 0; i < nt && !rc;) {
            uint32_t unit = t[i].chan;
            size_t i1 = i, j0, j1;
            while (i1 < nt && t[i1].chan == unit)
                i1++;
            while (j < nl && d[j].chan < unit)
                j++;
            for (j0 = j, j1 = j; j1 < nl && d[j1].chan == unit; j1++)
                ;
            rc = match(t + i, i1 - i, d + j0, j1 - j0, tol, -1.0f, t_matched, d_matched);
            struct loop_unit_score *r = &u[nu];
            double snr = 0;
            uint64_t nsnr = 0;
            *r = (struct loop_unit_score){.unit = unit};
            for (size_t a = i; a < i1; a++) {
                const struct loop_truth *e = &truth[t[a].idx];
                if (e->snr > 0)
                    snr += e->snr, nsnr++;
                if (e->time < t_lo || e->time > t_hi)
                    continue;
                r->truth++;
                r->matched += t_matched[t[a].idx];
            }
            /* as loop_score_spikes counts: a pair by its truth event, a free
             * detection by its own time */
            r->detected = r->matched;
            for (size_t b = j0; b < j1; b++)
                r->detected += !d_matched[d[b].idx] && det[d[b].idx].time >= t_lo && det[d[b].idx].time <= t_hi;
            r->snr = nsnr ? (float)(snr / (double)nsnr) : 0.0f;
            uint64_t den = r->truth + r->detected - r->matched;
            r->accuracy = den ? (double)r->matched / (double)den : 0.0;
            nu += r->truth > 0;
            i = i1, j = j1;
        }
    }
    free(t);
    free(d);
    free(t_matched);
    free(d_matched);
    if (rc || !nu) {
        free(u);
        return rc;
    }
    *out = u;
    *n = nu;
    return 0;
}

/* The sorting part of out (score.h), from the per-unit scores. */
static int score_sorting(const struct loop_truth *truth, size_t nt, const struct loop_spike *det, size_t nd,
                         uint64_t tol, uint64_t t_lo, uint64_t t_hi, struct loop_score *out)
{
    for (size_t j = 0; j < nd; j++)
        out->labelled += det[j].unit != ONIGPU_UNIT_NONE && det[j].time >= t_lo && det[j].time <= t_hi;
    if (!out->labelled)
        return 0;
    struct loop_unit_score *u;
    size_t nu;
    int rc = loop_score_units(truth, nt, det, nd, tol, t_lo, t_hi, &u, &nu);
    if (rc)
        return rc;
    double sum = 0, band[LOOP_SCORE_BANDS] = {0};
    for (size_t i = 0; i < nu; i++) {
        int b = loop_score_band(u[i].snr);
        sum += u[i].accuracy;
        if (b >= 0) {
            out->band_units[b]++;
            band[b] += u[i].accuracy;
        }
    }
    out->units = nu;
    out->accuracy = nu ? sum / (double)nu : 0.0;
    for (int b = 0; b < LOOP_SCORE_BANDS; b++)
        out->band_accuracy[b] = out->band_units[b] ? band[b] / (double)out->band_units[b] : 0.0;
    free(u);
    return 0;
}

int loop_score_spikes(const struct loop_truth *truth, size_t nt, const struct loop_spike *det, size_t nd,
                      uint64_t tol, float radius_um, uint64_t t_lo, uint64_t t_hi, struct loop_score *out)
{
    memset(out, 0, sizeof *out);
    if (nt >= UINT32_MAX || nd >= UINT32_MAX)
        return ONI_EBADALLOC;
    struct item *t = malloc((nt ? nt : 1) * sizeof *t), *d = malloc((nd ? nd : 1) * sizeof *d);
    uint8_t *t_matched = calloc(nt ? nt : 1, 1);
    uint8_t *d_matched = calloc(nd ? nd : 1, 1);
    int rc = t && d && t_matched && d_matched ? 0 : ONI_EBADALLOC;
    if (!rc) {
        for (size_t i = 0; i < nt; i++)
            t[i] = (struct item){truth[i].time, truth[i].chan, (uint32_t)i};
        for (size_t j = 0; j < nd; j++)
            d[j] = (struct item){det[j].time, det[j].chan, (uint32_t)j};
        qsort(t, nt, sizeof *t, by_time);
        qsort(d, nd, sizeof *d, by_time);
        rc = match(t, nt, d, nd, tol, radius_um, t_matched, d_matched);
    }
    if (!rc)
        count(truth, nt, det, nd, t_matched, d_matched, t_lo, t_hi, out);
    free(t);
    free(d);
    free(t_matched);
    free(d_matched);
    if (!rc)
        rc = score_sorting(truth, nt, det, nd, tol, t_lo, t_hi, out);
    if (rc)
        memset(out, 0, sizeof *out);
    return rc;
}
