/* tmatch.h - the template-matching stage's state and its per-block
 * arithmetic, shared by the CPU stage (stage_tmatch.c) and its GPU version
 * (tmatch.cu, which the loop compiles with NVRTC after this text), so both
 * run the same operations (docs/stages.md "Template matching").
 *
 * The rule, per block, is greedy matching pursuit over the residual:
 * samples go into a ring per channel (the residual: data less the templates
 * already matched); a template k at start position s (its window covering
 * samples s .. s + len - 1) has the projection
 *     c = sum over its footprint channels j, window samples t of
 *         r[chan_j][s + t] * w[k][j][t] / var[chan_j]
 * (the noise-weighted inner product), z = c / sqrt(norm2_k), the amplitude
 * a = c / norm2_k (norm2_k = sum w^2 / var). A match is a (k, s) with the
 * trough sample of its peak channel below -gate noise SDs, z >= th,
 * amin <= a <= amax, and c not below its own c at s +- 1 .. lag (a local
 * maximum in time). The best match of the block's positions (largest z;
 * then earliest s, then lowest k) is taken, a * w[k] is subtracted from the
 * residual, and the next is looked for, until none is left: overlapping
 * spikes are found one after the other. A position s is looked at once its
 * window and the lag after it have arrived, so a spike is labelled after
 * `after + lag` samples past its trough. */
#ifndef LOOP_TMATCH_H
#define LOOP_TMATCH_H

#include "onigpu_stage.h"
#if !defined(__CUDACC_RTC__)
#include <math.h>
#endif

#define TM_MAXT 4800   /* templates, of all sets (16 probes of 300 units) */
#define TM_MAXF 32     /* channels of a template's footprint */
#define TM_MAXL 64     /* samples of a template's window */
#define TM_HIST 512    /* samples kept per channel, a power of two: nframes + len + 2 lag at most */
#define TM_MAXLAG 8
#define TM_MAXITER 64  /* matches taken per block at most (the rest wait for the next block) */
#define TM_BINS 64     /* calibration histogram: |x| from 0 to 4 first estimates of the SD */

/* a + b * c rounded twice, never fused, so that the GPU's sums are the CPU's */
#if defined(__CUDACC__)
#define TM_HD __host__ __device__ static inline
#if defined(__CUDA_ARCH__)
#define TM_MAD(a, b, c) __fadd_rn((a), __fmul_rn((b), (c)))
#else
#define TM_MAD(a, b, c) ((a) + (b) * (c))
#endif
#else
#define TM_HD static inline
#define TM_MAD(a, b, c) ((a) + (b) * (c))
#endif

struct tm_template {
    uint32_t nfoot;          /* footprint channels */
    uint32_t peak;           /* the data channel of its deepest trough */
    uint32_t peak_j;         /* ... as a footprint index */
    uint32_t trough;         /* the trough's sample within the window */
    float norm2;             /* sum of w^2 / var over the footprint (set by calibration) */
    uint32_t reserved;
    uint32_t chan[TM_MAXF];  /* data channel of footprint channel j */
    float w[TM_MAXF][TM_MAXL]; /* the template as the data sees it (filtered), ADC counts */
};

struct tm_state {
    uint32_t nchan, ntpl, len, lag;
    float th, amin, amax, gate;
    uint32_t calib;           /* samples of noise calibration before matching (>= 2) */
    uint32_t ready;           /* calibration done: var, norm2 set */
    uint64_t n;               /* samples seen */
    uint64_t s_next;          /* the next start position to look at */
    float sum_abs[ONIGPU_STAGE_MAXCHAN]; /* calibration, first half: sum of |x| */
    float sd0[ONIGPU_STAGE_MAXCHAN];     /* ... its SD estimate */
    uint32_t hist[ONIGPU_STAGE_MAXCHAN][TM_BINS]; /* second half: |x| in bins of sd0 / 16 */
    float inv_var[ONIGPU_STAGE_MAXCHAN]; /* 1 / noise variance */
    float gate_x[ONIGPU_STAGE_MAXCHAN];  /* -gate * noise SD */
    uint64_t t_ring[TM_HIST];            /* acquisition time of each sample in the ring */
    float r[ONIGPU_STAGE_MAXCHAN][TM_HIST]; /* the residual */
    struct tm_template t[TM_MAXT];
};

#define TM_MASK (TM_HIST - 1)

/* Channel c's sample number idx, x, into the calibration: a first estimate
 * of the noise SD from the mean |x| of the first half (Gaussian: SD =
 * mean|x| sqrt(pi/2)), then the median |x| of the second half from a
 * histogram in steps of a sixteenth of that estimate (Gaussian: SD =
 * median|x| / 0.6745), which spikes move far less than they move a mean.
 * Samples in order, per channel. */
TM_HD void tm_calib_take(struct tm_state *st, uint32_t c, uint64_t idx, float x)
{
    uint32_t half = st->calib / 2;
    float a = fabsf(x);
    if (idx < half) {
        st->sum_abs[c] += a;
        return;
    }
    if (idx == half)
        st->sd0[c] = st->sum_abs[c] / (float)half * 1.2533141f;
    if (idx < st->calib) {
        float b = st->sd0[c] > 0.0f ? a / st->sd0[c] * (TM_BINS / 4) : 0.0f;
        st->hist[c][b < (float)(TM_BINS - 1) ? (uint32_t)b : TM_BINS - 1]++;
    }
}

/* Calibration done for channel c: inv_var, gate_x. */
TM_HD void tm_calibrated(struct tm_state *st, uint32_t c)
{
    uint32_t n = st->calib - st->calib / 2, below = 0, k = 0;
    while (k < TM_BINS - 1 && 2 * (below + st->hist[c][k]) < n)
        below += st->hist[c][k++];
    /* the median within bin k, linearly */
    float in = st->hist[c][k] ? (0.5f * (float)n - (float)below) / (float)st->hist[c][k] : 0.0f;
    float sd = ((float)k + in) * (st->sd0[c] / (TM_BINS / 4)) / 0.6745f;
    if (!(sd > 1e-3f))
        sd = 1e-3f;
    st->inv_var[c] = 1.0f / (sd * sd);
    st->gate_x[c] = -st->gate * sd;
}

TM_HD void tm_norm(struct tm_state *st, uint32_t k)
{
    struct tm_template *t = &st->t[k];
    float n2 = 0.0f;
    for (uint32_t j = 0; j < t->nfoot; j++) {
        float e = 0.0f;
        for (uint32_t i = 0; i < st->len; i++)
            e = TM_MAD(e, t->w[j][i], t->w[j][i]);
        n2 = TM_MAD(n2, e, st->inv_var[t->chan[j]]);
    }
    t->norm2 = n2;
}

/* The projection c of template k at start s (above). */
TM_HD float tm_dot(const struct tm_state *st, uint32_t k, uint64_t s)
{
    const struct tm_template *t = &st->t[k];
    float c = 0.0f;
    for (uint32_t j = 0; j < t->nfoot; j++) {
        const float *r = st->r[t->chan[j]];
        float e = 0.0f;
        for (uint32_t i = 0; i < st->len; i++)
            e = TM_MAD(e, r[(s + i) & TM_MASK], t->w[j][i]);
        c = TM_MAD(c, e, st->inv_var[t->chan[j]]);
    }
    return c;
}

/* Template k at s as a match: its z (> 0) with *c, or 0 when it is none. */
TM_HD float tm_match(const struct tm_state *st, uint32_t k, uint64_t s, float *cp)
{
    const struct tm_template *t = &st->t[k];
    if (!(st->r[t->peak][(s + t->trough) & TM_MASK] <= st->gate_x[t->peak]) || !(t->norm2 > 0.0f))
        return 0.0f;
    float c = tm_dot(st, k, s);
    if (!(c > 0.0f))
        return 0.0f;
    float a = c / t->norm2, z = c / sqrtf(t->norm2);
    if (z < st->th || a < st->amin || a > st->amax)
        return 0.0f;
    for (uint32_t d = 1; d <= st->lag; d++)
        if (tm_dot(st, k, s + d) > c || (s >= d && tm_dot(st, k, s - d) > c))
            return 0.0f;
    *cp = c;
    return z;
}

/* The key that orders matches: larger z first, then the lower pair index
 * p = (s - s_next) * ntpl + k (earlier s, then lower k). z > 0, so its bits
 * order as the float does. */
TM_HD uint64_t tm_key(float z, uint32_t p)
{
    union {
        float f;
        uint32_t u;
    } v;
    v.f = z;
    return (uint64_t)v.u << 32 | (uint64_t)(0xFFFFFFFFu - p);
}

/* Subtract a * template k at s from the residual, entries e0, e0 + step, ...
 * of its nfoot * len (a thread's share on the GPU; 0, 1 on the CPU). */
TM_HD void tm_subtract(struct tm_state *st, uint32_t k, uint64_t s, float a, uint32_t e0, uint32_t step)
{
    const struct tm_template *t = &st->t[k];
    for (uint32_t e = e0; e < t->nfoot * st->len; e += step) {
        uint32_t j = e / st->len, i = e % st->len;
        st->r[t->chan[j]][(s + i) & TM_MASK] = TM_MAD(st->r[t->chan[j]][(s + i) & TM_MASK], -a, t->w[j][i]);
    }
}

/* The match's spike into out: the trough's time, the peak channel, unit k;
 * frame: the trough's frame in this block (base: the block's first sample),
 * 0 when it was in an earlier one. */
TM_HD void tm_spike(const struct tm_state *st, uint32_t k, uint64_t s, uint64_t base, uint64_t *time, uint32_t *frame)
{
    uint64_t at = s + st->t[k].trough;
    *time = st->t_ring[at & TM_MASK];
    *frame = at >= base ? (uint32_t)(at - base) : 0u;
}

#endif
