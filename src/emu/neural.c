/* neural.c - synthetic extracellular signal (neural.h; the model and the
 * sources of its defaults: docs/emulator.md, "Neural data"). */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "neural.h"
#include "oni/util/npy.h"

#define TWO_PI 6.283185307179586

/* the sample path's functions: not instrumented by TSan (channels() says why;
 * what they call in the card, emu_card_truth_add, is) */
#if defined(__SANITIZE_THREAD__)
#define NEURAL_HOT __attribute__((no_sanitize("thread")))
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define NEURAL_HOT __attribute__((no_sanitize("thread")))
#endif
#endif
#ifndef NEURAL_HOT
#define NEURAL_HOT
#endif

/* splitmix64, inlined into the sample loop even in a Debug build (where a
 * call per channel and sample made a sanitized probe slower than real time) */
static NEURAL_HOT inline __attribute__((always_inline)) uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t neural_rand(uint64_t *s) { return rnd(s); }

static NEURAL_HOT double uniform(uint64_t *s) { return ((double)(rnd(s) >> 11) + 0.5) / 9007199254740992.0; }

/* --- normal draws: the ziggurat of Marsaglia and Tsang (J. Stat. Softw. 5(8), 2000), 128 layers ---
 * Layer i spans x in [0, zx[i]); below zx[i+1] it lies wholly under the
 * density, so most draws are one random word, one multiply and a compare.
 * Layer 0 is the base strip, whose part past R is the tail. */
#define ZN 128
#define ZR 3.442619855899      /* where the tail starts, for 128 layers */
#define ZV 9.91256303526217e-3 /* the area of every layer */
static double zx[ZN + 1], zf[ZN + 1];
static int32_t zk[ZN]; /* zx[i + 1] / zx[i] in units of 2^-24: the fast path's bound */
static float zs[ZN];   /* zx[i] / 2^24: the fast path's scale */
static pthread_once_t zonce = PTHREAD_ONCE_INIT;

static void zig_init(void)
{
    zx[0] = ZV / exp(-0.5 * ZR * ZR);
    zx[1] = ZR;
    for (int i = 1; i < ZN; i++) {
        double y = exp(-0.5 * zx[i] * zx[i]) + ZV / zx[i];
        zx[i + 1] = y >= 1 ? 0 : sqrt(-2 * log(y));
    }
    zx[ZN] = 0;
    for (int i = 0; i <= ZN; i++)
        zf[i] = exp(-0.5 * zx[i] * zx[i]);
    for (int i = 0; i < ZN; i++) {
        zk[i] = (int32_t)(zx[i + 1] / zx[i] * 16777216.0);
        zs[i] = (float)(zx[i] / 16777216.0);
    }
}

/* One normal draw from the 32 random bits r (7 pick the layer, 25 the
 * signed position), more from s only off the fast path. */
static NEURAL_HOT inline __attribute__((always_inline)) float zig32(uint32_t r, uint64_t *s)
{
    for (;;) {
        uint32_t i = r & (ZN - 1);
        int32_t u = (int32_t)r >> 7; /* -2^24 .. 2^24 - 1 */
        if ((u < 0 ? -u : u) < zk[i])
            return (float)u * zs[i];
        double x = u * zx[i] / 16777216.0;
        if (i == 0) { /* the tail past R */
            double a, b;
            do {
                a = -log(uniform(s)) / ZR;
                b = -log(uniform(s));
            } while (2 * b < a * a);
            return (float)(u < 0 ? -(ZR + a) : ZR + a);
        }
        if (zf[i] + uniform(s) * (zf[i + 1] - zf[i]) < exp(-0.5 * x * x))
            return (float)x;
        r = (uint32_t)rnd(s);
    }
}

NEURAL_HOT double neural_gauss(uint64_t *s)
{
    pthread_once(&zonce, zig_init);
    return zig32((uint32_t)neural_rand(s), s);
}

/* --- the knobs --- */

void neural_cfg_default(struct neural_cfg *c, enum neural_band band, double uv_per_lsb)
{
    memset(c, 0, sizeof *c);
    c->band = band;
    c->uv_per_lsb = uv_per_lsb;
    c->noise_uv = 7.0;
    c->lfp_uv = band == NEURAL_AP ? 0 : 50.0;
    c->cm_uv = 2.0;
    c->line_uv = 3.0;
    c->line_hz = 50;
    c->offset_uv = band == NEURAL_WIDE ? 60.0 : 0;
    c->lowpass_hz = 7500;
    c->units = band == NEURAL_LFP ? 0 : 300;
    c->snr_median = 5.0;
    c->snr_sigma = 0.5;
    c->snr_min = 2.0;
    c->rate_hz = 3.0;
    c->rate_sigma = 1.0;
    c->burst = 0.2;
    c->refractory_ms = 2.0;
    c->drift_um = 10;
    c->drift_s = 300;
    c->artefact_hz = 0.02;
    c->artefact_uv = 1500;
    c->stim_uv = 200;
}

static int arg_f64(struct emu_args *a, const char *key, double lo, double hi, double *v, char *err, size_t cap)
{
    const char *s = emu_arg(a, key);
    if (!s)
        return 0;
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(x) || x < lo || x > hi) {
        snprintf(err, cap, "%s=%s: a number from %g to %g", key, s, lo, hi);
        return ONI_EINVALARG;
    }
    *v = x;
    return 0;
}

int neural_cfg_args(struct neural_cfg *c, struct emu_args *a, char *err, size_t cap)
{
    uint64_t units;
    int rc;
    if ((rc = emu_arg_u64(a, "units", c->units, 0, NEURAL_MAX_UNITS, 1, &units, err, cap)))
        return rc;
    c->units = (uint32_t)units;
    const struct {
        const char *key;
        double *v, lo, hi;
    } k[] = {
        {"noise", &c->noise_uv, 0, 1000},       {"lfp", &c->lfp_uv, 0, 10000},
        {"cm", &c->cm_uv, 0, 10000},            {"line", &c->line_uv, 0, 10000},
        {"line_hz", &c->line_hz, 1, 1000},      {"offset", &c->offset_uv, 0, 100000},
        {"snr", &c->snr_median, 0.1, 1000},     {"snr_sigma", &c->snr_sigma, 0, 3},
        {"snr_min", &c->snr_min, 0, 1000},      {"rate", &c->rate_hz, 0.001, 500},
        {"rate_sigma", &c->rate_sigma, 0, 3},   {"burst", &c->burst, 0, 1},
        {"refractory", &c->refractory_ms, 0.5, 100}, {"drift", &c->drift_um, 0, 1000},
        {"drift_s", &c->drift_s, 1, 1e6},       {"artefacts", &c->artefact_hz, 0, 100},
        {"artefact_uv", &c->artefact_uv, 0, 1e6}, {"stim_uv", &c->stim_uv, 0, 1e6},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if ((rc = arg_f64(a, k[i].key, k[i].lo, k[i].hi, k[i].v, err, cap)))
            return rc;
    if (c->snr_min > c->snr_median) {
        snprintf(err, cap, "snr_min=%g is above snr=%g", c->snr_min, c->snr_median);
        return ONI_EINVALARG;
    }
    return 0;
}

/* --- geometry and waveforms --- */

static void line_site(uint32_t ch, float *x, float *y)
{
    *x = 0;
    *y = (float)ch * 20.0f;
}

static NEURAL_HOT void site(const struct neural *n, uint32_t ch, float *x, float *y)
{
    (n->cfg.site ? n->cfg.site : line_site)(ch, x, y);
}

/* One-pole low-pass y = a y + b g at corner fc: a. */
static float pole(double fc, double fs) { return (float)exp(-TWO_PI * fc / fs); }

/* |1 / (1 - a e^-jw)|^2 */
static double pole_gain2(double a, double w) { return 1.0 / (1 - 2 * a * cos(w) + a * a); }

/* The drift of the probe along the shank at sample k, um. */
static NEURAL_HOT double drift_at(const struct neural *n, uint64_t k)
{
    if (n->cfg.drift_um <= 0)
        return 0;
    return n->cfg.drift_um * sin(TWO_PI * (double)k / n->fs_hz / n->cfg.drift_s);
}

/* The waveform of unit u at in-plane distance d (um) from its soma, time
 * t (ms from the soma's trough): a trough, a later positive lobe and, for
 * some types, an earlier one; wider, later and with relatively larger lobes
 * further from the soma. Trough depth ~1 at d = 0. */
static NEURAL_HOT double shape(const struct neural_unit *u, double d, double t)
{
    double sw = 1 + d / 150, lag = d * 0.0015, rr = 1 + d / 100;
    t -= lag;
    double a = t / (u->w_trough * sw), b = (t - u->t_peak * sw) / (u->w_peak * sw);
    double v = -exp(-a * a / 2) + u->r_peak * rr * exp(-b * b / 2);
    if (u->r_pre > 0) {
        double c = (t + 0.15 * sw) / (0.06 * sw);
        v += u->r_pre * rr * exp(-c * c / 2);
    }
    return v;
}

/* Compute u's waveforms (LSB, per channel of its span) for the probe moved
 * by dy um, its peak channel and SNR. */
static NEURAL_HOT void draw_unit(const struct neural *n, struct neural_unit *u, double dy)
{
    double noise_lsb = n->cfg.noise_uv / n->cfg.uv_per_lsb;
    double y = u->y - dy, best = 1e30, rs2 = 100.0; /* soma radius 10 um */
    uint32_t near = 0, span = n->nch < NEURAL_SPAN ? n->nch : NEURAL_SPAN;
    for (uint32_t c = 0; c < n->nch; c++) {
        float sx, sy;
        site(n, c, &sx, &sy);
        double d2 = (sx - u->x) * (sx - u->x) + (sy - y) * (sy - y);
        if (d2 < best)
            best = d2, near = c;
    }
    double r_near2 = best + u->z * u->z + rs2;
    u->ch0 = near < span / 2 ? 0 : near - span / 2;
    if (u->ch0 + span > n->nch)
        u->ch0 = n->nch - span;
    double norm = -shape(u, 0, 0), deepest = 0;
    u->peak_ch = near;
    for (uint32_t j = 0; j < span; j++) {
        float sx, sy;
        site(n, u->ch0 + j, &sx, &sy);
        double d2 = (sx - u->x) * (sx - u->x) + (sy - y) * (sy - y);
        double amp = u->apk / n->cfg.uv_per_lsb * pow(r_near2 / (d2 + u->z * u->z + rs2), 1.5);
        double d = sqrt(d2), off = n->cfg.slot ? n->cfg.slot(u->ch0 + j) / (double)NEURAL_MUX_SLOTS : 0;
        float *w = u->w + (size_t)j * NEURAL_SPIKE_LEN;
        for (int i = 0; i < NEURAL_SPIKE_LEN; i++) {
            double t = (i - NEURAL_TROUGH + off) * 1000.0 / n->fs_hz;
            w[i] = (float)(amp * shape(u, d, t) / norm);
            if (w[i] < deepest)
                deepest = w[i], u->peak_ch = u->ch0 + j;
        }
    }
    u->snr = noise_lsb > 0 ? (float)(-deepest / noise_lsb) : 0.0f;
    u->drawn_at = (float)dy;
}

/* Samples to unit u's next spike after one at now. */
static NEURAL_HOT uint64_t gap(struct neural *n, struct neural_unit *u)
{
    double refr = n->cfg.refractory_ms * n->fs_hz / 1000.0;
    if (u->burst_left) {
        u->burst_left--;
        u->burst_scale *= 0.85f; /* spikes late in a burst are smaller */
        double isi = n->fs_hz * (0.003 + 0.003 * uniform(&n->rng));
        return (uint64_t)(isi > refr ? isi : refr) + 1;
    }
    u->burst_scale = 1.0f;
    if (u->bursty && uniform(&n->rng) < 0.4)
        u->burst_left = 1 + (uint32_t)(neural_rand(&n->rng) % 3); /* 2 to 4 spikes */
    return (uint64_t)refr + 1 + (uint64_t)(-log(uniform(&n->rng)) * u->mean_gap);
}

static NEURAL_HOT double lognormal(uint64_t *s, double median, double sigma) { return median * exp(sigma * neural_gauss(s)); }

static void make_unit(struct neural *n, struct neural_unit *u, float xmin, float xmax, float ymin, float ymax)
{
    /* waveform types: broad (regular spiking), narrow (fast spiking), triphasic */
    static const float type[3][5] = {
        {0.11f, 0.22f, 0.45f, 0.30f, 0.00f},
        {0.07f, 0.10f, 0.22f, 0.45f, 0.00f},
        {0.06f, 0.10f, 0.20f, 0.25f, 0.25f},
    };
    double p = uniform(&n->rng);
    const float *t = type[p < 0.6 ? 0 : p < 0.85 ? 1 : 2];
    float j[5];
    for (int i = 0; i < 5; i++)
        j[i] = t[i] * (float)(0.85 + 0.3 * uniform(&n->rng));
    u->w_trough = j[0], u->w_peak = j[1], u->t_peak = j[2], u->r_peak = j[3], u->r_pre = j[4];
    u->x = (float)(xmin - 30 + (xmax - xmin + 60) * uniform(&n->rng));
    u->y = (float)(ymin - 50 + (ymax - ymin + 100) * uniform(&n->rng));
    u->z = (float)(15 + 30 * uniform(&n->rng));
    double snr = lognormal(&n->rng, n->cfg.snr_median, n->cfg.snr_sigma);
    for (int i = 0; i < 1000 && snr < n->cfg.snr_min; i++) /* truncated below (bounded: snr_min near the median) */
        snr = lognormal(&n->rng, n->cfg.snr_median, n->cfg.snr_sigma);
    snr = snr < n->cfg.snr_min ? n->cfg.snr_min : snr;
    /* apk is the depth on the nearest site; draw_unit gives the peak channel's
     * (it may lie between sites or be sampled off its trough) */
    u->apk = (float)(snr * n->cfg.noise_uv);
    double hz = lognormal(&n->rng, n->cfg.rate_hz, n->cfg.rate_sigma);
    hz = hz < 0.01 ? 0.01 : hz > 200 ? 200 : hz;
    u->mean_gap = n->fs_hz / hz;
    u->bursty = uniform(&n->rng) < n->cfg.burst;
    u->burst_scale = 1.0f;
}

/* --- the noise --- */

/* Filter coefficients of each channel's own noise: white low-passed at the
 * AP band's corner, plus a 1/f rise (two one-pole low-passes at 20 and 200
 * Hz of a second draw, 1/f from ~20 Hz to where it meets the white part
 * near 300 Hz), scaled so that its rms in 300 Hz - 10 kHz (the LFP band: 1
 * Hz up) is noise_uv. */
static void noise_filters(struct neural *n)
{
    double fs = n->fs_hz, lp = n->cfg.lowpass_hz < fs / 2 ? n->cfg.lowpass_hz : fs / 2 * 0.9;
    n->a_w = pole(lp, fs);
    n->a1 = pole(20, fs);
    n->a2 = pole(200, fs);
    double bw = 1 - n->a_w; /* white: unit gain at DC */
    /* pink: the LP k's DC power is knee / fc_k of the white's (x 1.7: the
     * sum of the two poles then follows knee / f within ~10%) */
    double knee = n->cfg.band == NEURAL_AP ? 0 : 300;
    double b1 = sqrt(1.7 * knee / 20) * (1 - n->a1), b2 = sqrt(1.7 * knee / 200) * (1 - n->a2);
    double f0 = n->cfg.band == NEURAL_LFP ? 1 : 300, f1 = fs / 2 < 10000 ? fs / 2 : 10000, p = 0;
    for (int i = 0; i < 4000; i++) {
        double f = f0 + (f1 - f0) * (i + 0.5) / 4000, w = TWO_PI * f / fs;
        /* p1 and p2 share their draw: their sum's gain is complex */
        double re1 = (1 - n->a1 * cos(w)) * pole_gain2(n->a1, w), im1 = -n->a1 * sin(w) * pole_gain2(n->a1, w);
        double re2 = (1 - n->a2 * cos(w)) * pole_gain2(n->a2, w), im2 = -n->a2 * sin(w) * pole_gain2(n->a2, w);
        double re = b1 * re1 + b2 * re2, im = b1 * im1 + b2 * im2;
        p += (bw * bw * pole_gain2(n->a_w, w) + re * re + im * im) * 2.0 / fs * (f1 - f0) / 4000;
    }
    double scale = p > 0 ? n->cfg.noise_uv / n->cfg.uv_per_lsb / sqrt(p) : 0;
    n->b_w = (float)(bw * scale), n->b1 = (float)(b1 * scale), n->b2 = (float)(b2 * scale);
    /* the 1/f poles stepped every NEURAL_PINK_DECIM samples: the same
     * process sampled there (a^D; the same stationary variance) */
    double a1 = n->a1, a2 = n->a2, d = NEURAL_PINK_DECIM;
    n->a1d = (float)pow(a1, d), n->a2d = (float)pow(a2, d);
    n->b1d = (float)(n->b1 * sqrt((1 - pow(a1, 2 * d)) / (1 - a1 * a1)));
    n->b2d = (float)(n->b2 * sqrt((1 - pow(a2, 2 * d)) / (1 - a2 * a2)));
}

/* LFP sources every 100 um along the probe, each the sum of three one-pole
 * low-passes (1, 10, 100 Hz) with DC powers as 1/fc, then one more pole at
 * 60 Hz: a 1/f spectrum from ~1 Hz to ~60 Hz falling as 1/f^4 above 100 Hz,
 * so the LFP adds ~2% to the AP band's noise; rms lfp_uv. Channels
 * interpolate between the two nearest. */
static int lfp_setup(struct neural *n, float ymin, float ymax)
{
    n->nlfp = (uint32_t)((ymax - ymin) / 100.0f) + 2;
    n->lfp = calloc(n->nlfp, sizeof *n->lfp);
    n->lfp_now = calloc(n->nlfp, sizeof *n->lfp_now);
    if (!n->lfp || !n->lfp_now)
        return ONI_EBADALLOC;
    static const double fc[3] = {1, 10, 100};
    double var = 0, b[3], fs = n->fs_hz;
    n->lfp_post = pole(60, fs);
    for (int k = 0; k < 3; k++) {
        n->lfp_a[k] = pole(fc[k], fs);
        b[k] = sqrt(1.0 / fc[k]) * (1 - n->lfp_a[k]);
    }
    /* the output's variance: its PSD integrated on a log grid, 1 mHz to fs/2 */
    double pa = (1 - n->lfp_post) * (1 - n->lfp_post), lf0 = log(1e-3), lf1 = log(fs / 2), prev = -1;
    for (int i = 0; i <= 4000; i++) {
        double f = exp(lf0 + (lf1 - lf0) * i / 4000), w = TWO_PI * f / fs, s = 0;
        for (int k = 0; k < 3; k++)
            s += b[k] * b[k] * pole_gain2(n->lfp_a[k], w);
        s *= pa * pole_gain2(n->lfp_post, w) * 2.0 / fs;
        if (prev >= 0)
            var += (s + prev) / 2 * (f - exp(lf0 + (lf1 - lf0) * (i - 1) / 4000));
        else
            var += s * f; /* below 1 mHz: flat */
        prev = s;
    }
    double s = var > 0 ? n->cfg.lfp_uv / n->cfg.uv_per_lsb / sqrt(var) : 0;
    for (int k = 0; k < 3; k++) {
        n->lfp_b[k] = (float)(b[k] * s);
        for (uint32_t i = 0; i < n->nlfp; i++) /* start in the stationary state */
            n->lfp[i][k] = (float)(neural_gauss(&n->rng) * b[k] * s / sqrt(1 - (double)n->lfp_a[k] * n->lfp_a[k]));
    }
    for (uint32_t i = 0; i < n->nlfp; i++)
        n->lfp_now[i] = n->lfp[i][0] + n->lfp[i][1] + n->lfp[i][2];
    for (uint32_t c = 0; c < n->nch; c++) {
        float x, y;
        site(n, c, &x, &y);
        float at = (y - ymin) / 100.0f;
        uint32_t i = (uint32_t)at;
        if (i + 1 >= n->nlfp)
            i = n->nlfp - 2;
        n->ch[c].lfp_i = i;
        n->ch[c].lfp_w = at - (float)i;
    }
    return 0;
}

/* --- the card's list of generators (stimuli reach them all) --- */

static int enrol(struct neural *n)
{
    struct emu_card *c = n->card;
    if (c->nneural >= EMU_MAX_NEURAL)
        return ONI_EINVALARG;
    c->neural[c->nneural++] = n;
    return 0;
}

static void unenrol(struct neural *n)
{
    struct emu_card *c = n->card;
    for (int i = 0; c && i < c->nneural; i++)
        if (c->neural[i] == n) {
            c->neural[i] = c->neural[--c->nneural];
            return;
        }
}

int neural_init(struct neural *n, struct emu_card *card, uint32_t dev_idx, uint32_t stream, uint32_t nch,
                uint32_t fs_hz, int32_t lo, int32_t hi, int32_t mid, const struct neural_cfg *cfg)
{
    pthread_once(&zonce, zig_init);
    memset(n, 0, sizeof *n);
    if (!nch || nch > NEURAL_MAX_CH || cfg->units > NEURAL_MAX_UNITS || !fs_hz || cfg->uv_per_lsb <= 0)
        return ONI_EINVALARG;
    n->card = card;
    n->dev_idx = dev_idx;
    n->stream = stream;
    n->nch = nch;
    n->fs_hz = fs_hz;
    n->lo = lo, n->hi = hi, n->mid = mid;
    n->cfg = *cfg;
    if (n->cfg.band == NEURAL_LFP)
        n->cfg.units = 0;
    /* stream 0 keeps the seeding of a one-stream device */
    n->rng = card->seed * 0x2545F4914F6CDD1Dull ^ (dev_idx + 1) * 0x9E3779B97F4A7C15ull ^
             (uint64_t)stream * 0xD1B54A32D192ED03ull;
    n->ch = calloc(nch, sizeof *n->ch);
    n->acc = calloc(nch, sizeof *n->acc);
    n->unit = calloc(n->cfg.units ? n->cfg.units : 1, sizeof *n->unit);
    if (!n->ch || !n->acc || !n->unit)
        goto nomem;
    float xmin = 1e9f, xmax = -1e9f, ymin = 1e9f, ymax = -1e9f;
    for (uint32_t c = 0; c < nch; c++) {
        float x, y;
        site(n, c, &x, &y);
        xmin = x < xmin ? x : xmin, xmax = x > xmax ? x : xmax;
        ymin = y < ymin ? y : ymin, ymax = y > ymax ? y : ymax;
    }
    noise_filters(n);
    if (lfp_setup(n, ymin, ymax))
        goto nomem;
    for (uint32_t c = 0; c < nch; c++) {
        struct neural_chan *h = &n->ch[c];
        h->offset = (float)(neural_gauss(&n->rng) * n->cfg.offset_uv / n->cfg.uv_per_lsb);
        h->cm_gain = (float)(1 + 0.03 * neural_gauss(&n->rng));
        /* artefacts: on every channel alike but for a 2% spread (a reference's
         * pick-up: a common-average reference takes out all but that) */
        h->art_gain = (float)(1 + 0.02 * neural_gauss(&n->rng));
        h->slot = n->cfg.slot ? n->cfg.slot(c) % NEURAL_MUX_SLOTS : 0;
        /* the filters start in their stationary state */
        h->w = (float)(neural_gauss(&n->rng) * n->b_w / sqrt(1 - (double)n->a_w * n->a_w));
        h->p1 = (float)(neural_gauss(&n->rng) * n->b1 / sqrt(1 - (double)n->a1 * n->a1));
        h->p2 = (float)(neural_gauss(&n->rng) * n->b2 / sqrt(1 - (double)n->a2 * n->a2));
        h->pnow = h->p1 + h->p2;
    }
    for (uint32_t s = 0; s < NEURAL_MUX_SLOTS; s++) {
        double d = TWO_PI * n->cfg.line_hz * s / NEURAL_MUX_SLOTS / fs_hz;
        n->hum[s][0] = (float)cos(d), n->hum[s][1] = (float)sin(d);
        n->hum[s][2] = (float)cos(3 * d), n->hum[s][3] = (float)sin(3 * d);
    }
    n->cm_a = pole(3000, fs_hz);
    n->cm_b = (float)(n->cfg.cm_uv / n->cfg.uv_per_lsb * sqrt(1 - (double)n->cm_a * n->cm_a));
    n->art_next = n->cfg.artefact_hz > 0 ? (uint64_t)(-log(uniform(&n->rng)) * fs_hz / n->cfg.artefact_hz) : UINT64_MAX;
    n->nunits = n->cfg.units;
    n->next_any = UINT64_MAX;
    for (uint32_t i = 0; i < n->nunits; i++) {
        struct neural_unit *u = &n->unit[i];
        make_unit(n, u, xmin, xmax, ymin, ymax);
        /* its waveforms are drawn at its first spike (spikes()): a card that
         * never streams the probe pays nothing for its units */
        if (!(u->w = malloc(sizeof(float) * NEURAL_SPAN * NEURAL_SPIKE_LEN)))
            goto nomem;
        u->next = gap(n, u);
        if (u->next < n->next_any)
            n->next_any = u->next;
    }
    if (enrol(n)) {
        neural_fini(n);
        return ONI_EINVALARG;
    }
    return 0;
nomem:
    neural_fini(n);
    return ONI_EBADALLOC;
}

void neural_fini(struct neural *n)
{
    unenrol(n);
    for (uint32_t i = 0; n->unit && i < n->cfg.units; i++)
        free(n->unit[i].w);
    free(n->unit);
    free(n->ch);
    free(n->acc);
    free(n->lfp);
    free(n->lfp_now);
    n->unit = NULL, n->ch = NULL, n->acc = NULL, n->lfp = NULL, n->lfp_now = NULL;
    n->card = NULL;
}

void neural_stimulus(struct neural *n)
{
    n->stim_on = n->cfg.stim_uv > 0;
    n->stim_start = n->k;
    n->stim_count++;
}

/* The stimulus artefact s samples after its start (LSB): a charge-balanced
 * biphasic pulse of 0.2 ms per phase, then the amplifier's recovery, a tail
 * of 15% decaying over 1 ms; 0 after 8 ms. */
static NEURAL_HOT float stim_art(const struct neural *n, uint64_t s, int *on)
{
    double t = (double)s * 1000.0 / n->fs_hz, a = n->cfg.stim_uv / n->cfg.uv_per_lsb;
    if (t >= 8) {
        *on = 0;
        return 0;
    }
    if (t < 0.2)
        return (float)a;
    if (t < 0.4)
        return (float)-a;
    return (float)(0.15 * a * exp(-(t - 0.4) / 1.0));
}

/* The large artefact s samples after its start: a fast rise (0.5 ms) and a
 * 20 ms decay; 0 after 150 ms. */
static NEURAL_HOT float big_art(struct neural *n, uint64_t s)
{
    double t = (double)s * 1000.0 / n->fs_hz;
    if (t >= 150) {
        n->art_on = 0;
        return 0;
    }
    return (float)(n->art_amp * (1 - exp(-t / 0.5)) * exp(-t / n->art_tau));
}

/* Start the spikes due now and add the drawn ones into acc; truth at troughs. */
static NEURAL_HOT void spikes(struct neural *n, uint64_t t)
{
    if (n->k >= n->next_any) {
        uint64_t next = UINT64_MAX;
        double dy = -1e9;
        for (uint32_t i = 0; i < n->nunits; i++) {
            struct neural_unit *u = &n->unit[i];
            if (u->next == n->k) {
                if (!u->drawn || n->cfg.drift_um > 0) {
                    if (dy < -1e8)
                        dy = drift_at(n, n->k);
                    if (!u->drawn) {
                        draw_unit(n, u, dy);
                        u->drawn = 1;
                    } else if (fabs(dy - u->drawn_at) > 0.5) { /* a spike of u still drawn keeps its waveform */
                        int busy = 0;
                        for (uint32_t s = 0; s < n->nactive && !busy; s++)
                            busy = n->active[s].unit == i;
                        if (!busy)
                            draw_unit(n, u, dy);
                    }
                }
                if (n->nactive < NEURAL_MAX_ACTIVE)
                    n->active[n->nactive++] = (struct neural_spike){i, u->burst_scale, n->k};
                else
                    n->lost++;
                u->next = n->k + gap(n, u);
            }
            if (u->next < next)
                next = u->next;
        }
        n->next_any = next;
    }
    uint32_t live = 0;
    for (uint32_t s = 0; s < n->nactive; s++) {
        struct neural_spike sp = n->active[s];
        const struct neural_unit *u = &n->unit[sp.unit];
        uint32_t at = (uint32_t)(n->k - sp.start);
        uint32_t span = n->nch < NEURAL_SPAN ? n->nch : NEURAL_SPAN;
        const float *w = u->w + at;
        float *acc = n->acc + u->ch0;
        for (uint32_t j = 0; j < span; j++)
            acc[j] += sp.scale * w[(size_t)j * NEURAL_SPIKE_LEN];
        if (at == NEURAL_TROUGH)
            emu_card_truth_add(n->card, n->dev_idx, sp.unit, n->stream * n->nch + u->peak_ch, t, u->snr * sp.scale);
        if (at + 1 < NEURAL_SPIKE_LEN)
            n->active[live++] = sp;
    }
    n->nactive = live;
}

/* Each channel's own noise: the white part's draw every sample (two
 * channels' from one random word), the 1/f part's every NEURAL_PINK_DECIM
 * samples (it lies below ~300 Hz), interpolated between; plus the shared
 * terms and the spikes in acc, rounded and clipped. The hot loop of the
 * card: not instrumented by TSan (NEURAL_HOT), which made it 40x slower
 * (bench emu under TSan: one probe at 0.2x real time, the generator thread
 * then takes a whole core in every threaded test). It touches only this
 * generator's state, under the card lock. */
static NEURAL_HOT void channels(struct neural *n, uint16_t *out, const float *slot, float art)
{
    float a_w = n->a_w, b_w = n->b_w, a1 = n->a1d, b1 = n->b1d, a2 = n->a2d, b2 = n->b2d;
    int pink = (n->k % NEURAL_PINK_DECIM) == 0;
    uint64_t r = 0;
    for (uint32_t c = 0; c < n->nch; c++) {
        struct neural_chan *h = &n->ch[c];
        if (!(c & 1))
            r = rnd(&n->rng);
        float g1 = zig32(c & 1 ? (uint32_t)(r >> 32) : (uint32_t)r, &n->rng);
        h->w = a_w * h->w + b_w * g1;
        if (pink) {
            float g2 = zig32((uint32_t)rnd(&n->rng), &n->rng);
            h->p1 = a1 * h->p1 + b1 * g2;
            h->p2 = a2 * h->p2 + b2 * g2;
            h->pstep = (h->p1 + h->p2 - h->pnow) / NEURAL_PINK_DECIM;
        }
        h->pnow += h->pstep;
        float lfp = n->lfp_now[h->lfp_i] + (n->lfp_now[h->lfp_i + 1] - n->lfp_now[h->lfp_i]) * h->lfp_w;
        float v = h->w + h->pnow + h->offset + lfp + h->cm_gain * slot[h->slot] + h->art_gain * art + n->acc[c];
        n->acc[c] = 0;
        int32_t q = n->mid + (int32_t)(v + (v >= 0 ? 0.5f : -0.5f));
        out[c] = (uint16_t)(q < n->lo ? n->lo : q > n->hi ? n->hi : q); /* the ADC saturates */
    }
}

NEURAL_HOT void neural_sample(struct neural *n, uint16_t *out, uint64_t t)
{
    spikes(n, t);
    /* shared terms: LFP sources, common-mode and hum per sampling slot, artefacts */
    for (uint32_t i = 0; i < n->nlfp; i++) {
        float v = 0;
        for (int k = 0; k < 3; k++) {
            n->lfp[i][k] = n->lfp_a[k] * n->lfp[i][k] + n->lfp_b[k] * zig32((uint32_t)neural_rand(&n->rng), &n->rng);
            v += n->lfp[i][k];
        }
        n->lfp_now[i] = n->lfp_post * n->lfp_now[i] + (1 - n->lfp_post) * v;
    }
    float cm_prev = n->cm_state;
    n->cm_state = n->cm_a * n->cm_state + n->cm_b * zig32((uint32_t)neural_rand(&n->rng), &n->rng);
    float slot[NEURAL_MUX_SLOTS];
    uint32_t nslots = n->cfg.slot ? NEURAL_MUX_SLOTS : 1;
    double line = n->cfg.line_uv / n->cfg.uv_per_lsb;
    /* the hum's phase at this sample (whole cycles dropped first: the sine
     * of a large argument loses digits) */
    double ph = TWO_PI * fmod((double)n->k * n->cfg.line_hz / n->fs_hz, 1.0);
    double s1 = sin(ph), c1 = cos(ph), s3 = sin(3 * ph + 1.0), c3 = cos(3 * ph + 1.0);
    for (uint32_t s = 0; s < nslots; s++) {
        /* sin(a + d) = sin a cos d + cos a sin d, d the slot's offset */
        double h1 = s1 * n->hum[s][0] + c1 * n->hum[s][1], h3 = s3 * n->hum[s][2] + c3 * n->hum[s][3];
        slot[s] = (float)(cm_prev + (n->cm_state - cm_prev) * ((float)s / NEURAL_MUX_SLOTS) + line * h1 + line / 3 * h3);
    }
    if (n->k >= n->art_next) {
        n->art_on = 1;
        n->art_start = n->k;
        n->art_amp = (float)((neural_rand(&n->rng) & 1 ? 1 : -1) *
                             lognormal(&n->rng, n->cfg.artefact_uv, 0.5) / n->cfg.uv_per_lsb);
        n->art_tau = (float)(10 + 20 * uniform(&n->rng));
        n->art_next = n->k + 1 + (uint64_t)(-log(uniform(&n->rng)) * n->fs_hz / n->cfg.artefact_hz);
    }
    float art = n->art_on ? big_art(n, n->k - n->art_start) : 0;
    if (n->stim_on)
        art += stim_art(n, n->k - n->stim_start, &n->stim_on);
    channels(n, out, slot, art);
    n->k++;
}

/* --- the truth templates as Kilosort/phy files --- */

static int put_npy(const char *dir, const char *name, const char *descr, int ndim, const uint64_t *shape,
                   const void *data, size_t bytes, char *err, size_t cap)
{
    char path[1024], h[NPY_HDR];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) {
        snprintf(err, cap, "templates: path too long in %s", dir);
        return ONI_EPATHINVALID;
    }
    FILE *f = fopen(path, "wb");
    if (!f) {
        snprintf(err, cap, "templates: cannot create %s: %s", path, strerror(errno));
        return ONI_EPATHINVALID;
    }
    npy_header(h, descr, ndim, shape);
    int ok = fwrite(h, 1, NPY_HDR, f) == NPY_HDR && fwrite(data, 1, bytes, f) == bytes;
    ok = fclose(f) == 0 && ok;
    if (!ok) {
        snprintf(err, cap, "templates: cannot write %s: %s", path, strerror(errno));
        return ONI_EWRITEFAILURE;
    }
    return 0;
}

int neural_write_templates(const struct neural *n, const char *dir, char *err, size_t cap)
{
    if (mkdir(dir, 0755) && errno != EEXIST) {
        snprintf(err, cap, "templates: cannot create directory %s: %s", dir, strerror(errno));
        return ONI_EPATHINVALID;
    }
    uint32_t nch = n->nch, span = nch < NEURAL_SPAN ? nch : NEURAL_SPAN;
    size_t per = (size_t)NEURAL_SPIKE_LEN * nch;
    float *t = calloc(n->nunits ? n->nunits * per : 1, sizeof *t), *eye = calloc((size_t)nch * nch, sizeof *eye);
    float *pos = malloc(sizeof(float) * 2 * nch);
    int32_t *map = malloc(sizeof(int32_t) * nch);
    float *w = malloc(sizeof(float) * NEURAL_SPAN * NEURAL_SPIKE_LEN);
    int rc = ONI_EBADALLOC;
    if (!t || !eye || !pos || !map || !w) {
        snprintf(err, cap, "templates: out of memory");
        goto out;
    }
    for (uint32_t i = 0; i < n->nunits; i++) {
        struct neural_unit u = n->unit[i];
        u.w = w;
        draw_unit(n, &u, 0); /* at drift 0, into w: n stays as it is */
        for (uint32_t j = 0; j < span; j++)
            for (int s = 0; s < NEURAL_SPIKE_LEN; s++)
                t[i * per + (size_t)s * nch + u.ch0 + j] = w[(size_t)j * NEURAL_SPIKE_LEN + s];
    }
    for (uint32_t c = 0; c < nch; c++) {
        map[c] = (int32_t)c;
        site(n, c, &pos[2 * c], &pos[2 * c + 1]);
        eye[(size_t)c * nch + c] = 1.0f;
    }
    if ((rc = put_npy(dir, "templates.npy", "<f4", 3, (const uint64_t[]){n->nunits, NEURAL_SPIKE_LEN, nch}, t,
                      sizeof *t * n->nunits * per, err, cap)) ||
        (rc = put_npy(dir, "channel_map.npy", "<i4", 1, (const uint64_t[]){nch}, map, sizeof *map * nch, err, cap)) ||
        (rc = put_npy(dir, "channel_positions.npy", "<f4", 2, (const uint64_t[]){nch, 2}, pos, sizeof *pos * 2 * nch,
                      err, cap)) ||
        (rc = put_npy(dir, "whitening_mat.npy", "<f4", 2, (const uint64_t[]){nch, nch}, eye,
                      sizeof *eye * nch * nch, err, cap)) ||
        (rc = put_npy(dir, "whitening_mat_inv.npy", "<f4", 2, (const uint64_t[]){nch, nch}, eye,
                      sizeof *eye * nch * nch, err, cap)))
        goto out;
    char path[1024];
    snprintf(path, sizeof path, "%s/params.py", dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, cap, "templates: cannot create %s: %s", path, strerror(errno));
        rc = ONI_EPATHINVALID;
        goto out;
    }
    /* no .dat beside them: the samples are the card's stream; dtype and
     * offset describe its codes (offset binary: 0 V at code mid) */
    fprintf(f, "dat_path = ''\nn_channels_dat = %u\ndtype = 'uint16'\noffset = 0\nsample_rate = %u.0\n"
               "hp_filtered = False\n# onigpu emulator: templates in ADC LSB around code %d, %g uV per LSB\n",
            nch, n->fs_hz, n->mid, n->cfg.uv_per_lsb);
    rc = fclose(f) ? ONI_EWRITEFAILURE : 0;
    if (rc)
        snprintf(err, cap, "templates: cannot write %s", path);
out:
    free(t), free(eye), free(pos), free(map), free(w);
    return rc;
}
