/* kernels.c - CPU versions of the closed-loop kernels (kernels.h).
 *
 * The float operations and their order here are the contract the GPU
 * versions (kernels.cu) follow: ISO C mode compiles without contraction, so
 * every a*b+c below is a rounded multiply then a rounded add, which the GPU
 * code spells __fmul_rn/__fadd_rn. That is why CPU and GPU find the same spikes. */
#include <math.h>
#include <string.h>
#include <float.h>
#include "oni.h"
#include "loop/kernels.h"

/* Above this many element evaluations the MAC uses all cores. */
#define MAC_PARALLEL_MIN (1u << 16)

/* Elements computed together: enough independent dependency chains to keep
 * the SIMD units busy (each chain is x = x*x + seed, latency-bound alone). */
#define MAC_TILE 64

void loop_mac_cpu(const float *in, float *out, size_t n, uint32_t iters, uint32_t passes, float seed)
{
    long long ntiles = (long long)((n + MAC_TILE - 1) / MAC_TILE);
    int big = (double)n * passes * (iters + 1) >= MAC_PARALLEL_MIN;
#if defined(__SANITIZE_THREAD__)
    big = 0; /* libgomp is not instrumented: TSan would see its barriers as races */
#endif
    (void)big;
#pragma omp parallel for if (big) schedule(static)
    for (long long t = 0; t < ntiles; t++) {
        size_t i0 = (size_t)t * MAC_TILE, m = n - i0 < MAC_TILE ? n - i0 : MAC_TILE;
        float x[MAC_TILE], acc[MAC_TILE];
        for (size_t e = 0; e < MAC_TILE; e++)
            acc[e] = 0.0f;
        for (uint32_t k = 0; k < passes; k++) {
            float off = (float)k * LOOP_MAC_STEP;
#pragma omp simd
            for (size_t e = 0; e < MAC_TILE; e++)
                x[e] = (e < m ? in[i0 + e] : 0.0f) + off;
            for (uint32_t j = 0; j < iters; j++) {
#pragma omp simd
                for (size_t e = 0; e < MAC_TILE; e++)
                    x[e] = x[e] * x[e] + seed;
            }
#pragma omp simd
            for (size_t e = 0; e < MAC_TILE; e++)
                acc[e] = acc[e] + x[e];
        }
        for (size_t e = 0; e < m; e++)
            out[i0 + e] = acc[e];
    }
}

double loop_mac_flops(size_t n, uint32_t iters, uint32_t passes)
{
    return 2.0 * (double)n * iters * passes;
}

double loop_ephys_flops(uint32_t nchan, uint32_t nframes)
{
    return ((double)nchan * (2 * 9 + 2) + 33) * nframes;
}

void loop_ephys_defaults(struct loop_ephys_params *p)
{
    p->fs_hz = 30000.0;
    p->lo_hz = 300.0;
    p->hi_hz = 6000.0;
    p->k = 5.0;
    /* Wave_clus detects negative crossings with a dead time of 1.5 ms
     * (csn-le/wave_clus Parameters_files/set_parameters_ascii_spikes.m:
     * ref = 1.5 ms, detection 'neg') */
    p->refractory_s = 1.5e-3;
    /* Locally exclusive detection, as SpikeInterface's detect_peaks
     * method "locally_exclusive" (one peak per radius and sweep; its
     * defaults exclude_sweep_ms 0.1, radius_um 50), made causal: the first
     * crossing of a neighbourhood wins. 3 channels cover a unit of the
     * emulator's (4 neighbouring channels); 0.5 ms its crossings' spread. */
    p->radius = 3;
    p->sweep_s = 0.5e-3;
    p->calib_s = 0.2;
    p->lockout_s = 1.5e-3;
    p->clock_hz = 250e6;
}

/* Second-order Butterworth sections from the bilinear transform (the
 * well-known "audio EQ cookbook" formulas), normalised so a0 = 1. */
static void design(float b[3], float a[2], double fc, double fs, int highpass)
{
    double w = 2.0 * M_PI * fc / fs, cw = cos(w), alpha = sin(w) / (2.0 * M_SQRT1_2);
    double a0 = 1.0 + alpha;
    double b1 = highpass ? -(1.0 + cw) : (1.0 - cw);
    double b0 = highpass ? (1.0 + cw) / 2.0 : (1.0 - cw) / 2.0;
    b[0] = (float)(b0 / a0);
    b[1] = (float)(b1 / a0);
    b[2] = (float)(b0 / a0);
    a[0] = (float)(-2.0 * cw / a0);
    a[1] = (float)((1.0 - alpha) / a0);
}

int loop_ephys_layout_ok(const struct loop_ephys_layout *lay)
{
    if (!lay || lay->nchan == 0 || lay->nchan > LOOP_EPHYS_MAXCHAN || lay->stride < 8 || lay->stride % 4 ||
        lay->time_off % 4 || (uint64_t)lay->time_off + 8 > lay->stride)
        return 0;
    if (lay->group && (lay->nchan % lay->group || lay->nchan / lay->group > LOOP_EPHYS_MAXGROUPS))
        return 0;
    for (uint32_t c = 0; c < lay->nchan; c++)
        if ((lay->off[c] & 1) || (uint32_t)lay->off[c] + 2 > lay->stride)
            return 0;
    return 1;
}

/* A window of s seconds counts its samples in 32 bits (false for NaN too). */
static int samples_ok(double s, double fs)
{
    return s >= 0 && s * fs <= (double)UINT32_MAX;
}

static int band_ok(double lo_hz, double hi_hz, double fs_hz)
{
    return fs_hz > 0 && isfinite(fs_hz) && lo_hz > 0 && hi_hz > lo_hz && hi_hz < fs_hz / 2;
}

static int detect_ok(double k, double refractory_s, double calib_s, double fs_hz)
{
    return fs_hz > 0 && isfinite(fs_hz) && k > 0 && isfinite(k) && samples_ok(refractory_s, fs_hz) &&
           samples_ok(calib_s, fs_hz);
}

int loop_ephys_set_band(struct loop_ephys_state *st, double lo_hz, double hi_hz, double fs_hz)
{
    if (!band_ok(lo_hz, hi_hz, fs_hz))
        return ONI_EINVALARG;
    design(st->b[0], st->a[0], lo_hz, fs_hz, 1);
    design(st->b[1], st->a[1], hi_hz, fs_hz, 0);
    return 0;
}

int loop_ephys_set_detect(struct loop_ephys_state *st, double k, double refractory_s, double calib_s, double fs_hz)
{
    if (!detect_ok(k, refractory_s, calib_s, fs_hz))
        return ONI_EINVALARG;
    st->refractory = (uint32_t)llround(refractory_s * fs_hz);
    st->calib = (uint32_t)llround(calib_s * fs_hz);
    if (st->calib < 100)
        st->calib = 100; /* a median needs samples */
    float nk = (float)(k / 0.6745);
    /* thresholds calibrated already (median x k) follow a new k: a change
     * while running (the live view's) takes effect at once */
    for (uint32_t c = 0; st->k > 0.0f && nk != st->k && c < LOOP_EPHYS_MAXCHAN; c++)
        if (st->thr[c] > 0.0f && st->thr[c] < FLT_MAX)
            st->thr[c] = st->thr[c] / st->k * nk;
    st->k = nk;
    return 0;
}

int loop_ephys_set_exclusive(struct loop_ephys_state *st, uint32_t radius, double sweep_s, double fs_hz)
{
    if (!(fs_hz > 0) || !isfinite(fs_hz) || !samples_ok(sweep_s, fs_hz) || radius >= LOOP_EPHYS_MAXCHAN)
        return ONI_EINVALARG;
    st->radius = radius;
    st->sweep = radius ? (uint32_t)llround(sweep_s * fs_hz) : 0;
    return 0;
}

int loop_ephys_set_lockout(struct loop_ephys_state *st, double lockout_s, double clock_hz)
{
    if (!(clock_hz > 0) || !isfinite(clock_hz) || !(lockout_s >= 0) || lockout_s > 3600)
        return ONI_EINVALARG;
    st->lockout = (uint64_t)llround(lockout_s * clock_hz);
    return 0;
}

int loop_ephys_init(struct loop_ephys_state *st, const struct loop_ephys_params *p, const struct loop_ephys_layout *lay)
{
    if (!st || !p || !loop_ephys_layout_ok(lay))
        return ONI_EINVALARG;
    if (!band_ok(p->lo_hz, p->hi_hz, p->fs_hz) || !detect_ok(p->k, p->refractory_s, p->calib_s, p->fs_hz) ||
        !(p->clock_hz > 0) || !isfinite(p->clock_hz) || !(p->lockout_s >= 0) || p->lockout_s > 3600 ||
        !samples_ok(p->sweep_s, p->fs_hz) || p->radius >= LOOP_EPHYS_MAXCHAN)
        return ONI_EINVALARG;
    memset(st, 0, sizeof *st);
    st->lay = *lay;
    loop_ephys_set_band(st, p->lo_hz, p->hi_hz, p->fs_hz);
    loop_ephys_set_detect(st, p->k, p->refractory_s, p->calib_s, p->fs_hz);
    loop_ephys_set_exclusive(st, p->radius, p->sweep_s, p->fs_hz);
    loop_ephys_set_lockout(st, p->lockout_s, p->clock_hz);
    return ONI_ESUCCESS;
}

float loop_biquad_step(const float b[3], const float a[2], float z[2], float x)
{
    float y = b[0] * x + z[0];
    z[0] = (b[1] * x - a[0] * y) + z[1];
    z[1] = b[2] * x - a[1] * y;
    return y;
}

/* Histogram bin of a non-negative float: its exponent and top 3 mantissa
 * bits (1/8 octave), offset so that 2^-16 is bin 0. Pure bit arithmetic, so
 * identical on every processor. */
#define BIN_BASE ((uint32_t)(127 - 16) << 3)
uint32_t loop_ephys_bin(float absx)
{
    uint32_t u;
    memcpy(&u, &absx, 4);
    u >>= 20;
    if (u < BIN_BASE)
        return 0;
    u -= BIN_BASE;
    return u >= LOOP_EPHYS_BINS ? LOOP_EPHYS_BINS - 1 : u;
}

float loop_ephys_bin_value(uint32_t bin)
{
    uint32_t u = ((bin + BIN_BASE) << 20) | (1u << 19); /* centre of the bin */
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float loop_ephys_hist_median(const uint32_t *hist, uint64_t count)
{
    uint64_t half = (count + 1) / 2, seen = 0;
    for (uint32_t i = 0; i < LOOP_EPHYS_BINS; i++) {
        seen += hist[i];
        if (seen >= half && seen > 0)
            return loop_ephys_bin_value(i);
    }
    return 0.0f;
}

/* Threshold of channel c once calibration is over; a dead channel never fires. */
static float threshold(const struct loop_ephys_state *st, uint32_t c)
{
    float med = loop_ephys_hist_median(st->hist[c], st->calib);
    return med > 0.0f ? med * st->k : FLT_MAX;
}

/* Common average of n channels of a sample row: 32 interleaved partial
 * sums, then their sum in order (the GPU warp does the same). */
static float row_mean(const float *row, uint32_t nchan)
{
    float part[32];
    for (int p = 0; p < 32; p++) {
        float s = 0.0f;
        for (uint32_t c = (uint32_t)p; c < nchan; c += 32)
            s = s + row[c];
        part[p] = s;
    }
    float s = 0.0f;
    for (int p = 0; p < 32; p++)
        s = s + part[p];
    return s / (float)nchan;
}

void loop_ephys_decode(const struct loop_ephys_layout *lay, const uint8_t *block, uint32_t nframes, float *x)
{
    const uint32_t nchan = lay->nchan;
    for (uint32_t f = 0; f < nframes; f++) {
        const uint8_t *fr = block + (size_t)f * lay->stride;
        float *row = x + (size_t)f * nchan;
        for (uint32_t c = 0; c < nchan; c++) {
            uint16_t v;
            memcpy(&v, fr + lay->off[c], 2);
            row[c] = (float)v - LOOP_EPHYS_MID;
        }
    }
}

void loop_ephys_filter(struct loop_ephys_state *st, float *x, uint32_t nframes)
{
    const uint32_t nchan = st->lay.nchan;
    for (uint32_t f = 0; f < nframes; f++) {
        float *row = x + (size_t)f * nchan;
#pragma omp simd
        for (uint32_t c = 0; c < nchan; c++) {
            float y = loop_biquad_step(st->b[0], st->a[0], &st->z[c][0], row[c]);
            row[c] = loop_biquad_step(st->b[1], st->a[1], &st->z[c][2], y);
        }
    }
}

void loop_ephys_reference(float *x, uint32_t nchan, uint32_t group, uint32_t nframes)
{
    uint32_t g = group ? group : nchan;
    for (uint32_t f = 0; f < nframes; f++)
        for (uint32_t c0 = 0; c0 < nchan; c0 += g) {
            float *row = x + (size_t)f * nchan + c0;
            float m = row_mean(row, g);
            for (uint32_t c = 0; c < g; c++)
                row[c] = row[c] - m;
        }
}

void loop_ephys_out_reset(struct loop_ephys_out *out)
{
    out->nspikes = 0;
    out->overflow = 0;
    out->t_first = UINT64_MAX;
    out->t_block = 0;
    out->stim = 0;
    out->reserved = 0;
    out->t_stim = 0;
}

/* Frame by frame, so spikes are listed by frame, then channel (each
 * channel's state is its own: the order changes nothing else). */
void loop_ephys_detect(struct loop_ephys_state *st, const float *x, uint32_t nframes, const uint8_t *block, uint32_t f0,
                       struct loop_ephys_out *out)
{
    const uint32_t nchan = st->lay.nchan, from = out->nspikes;
    for (uint32_t f = 0; f < nframes; f++) {
        uint64_t idx = st->nsamples + f;
        for (uint32_t c = 0; c < nchan; c++) {
            float v = x[(size_t)f * nchan + c];
            if (idx < st->calib) {
                st->hist[c][loop_ephys_bin(fabsf(v))]++;
                continue;
            }
            if (st->thr[c] == 0.0f)
                st->thr[c] = threshold(st, c);
            /* negative crossings only: an extracellular spike is a trough,
             * and the high-pass turns its end into a positive overshoot that
             * outlasts the refractory period (test_loop_kernels:
             * one_spike_one_detection_one_stimulus) */
            if (v < -st->thr[c] && idx >= st->last[c]) {
                st->last[c] = idx + st->refractory;
                uint64_t t;
                memcpy(&t, block + (size_t)(f0 + f) * st->lay.stride + st->lay.time_off, 8);
                onigpu_add_spike(out, t, c, f0 + f);
            }
        }
    }
    loop_ephys_exclusive(st, x, f0, st->nsamples - f0, out, from);
    st->nsamples += nframes;
}

void loop_ephys_decide(struct loop_ephys_state *st, struct loop_ephys_out *out)
{
    uint64_t from = st->stim_last ? st->stim_last - 1 + st->lockout : 0, t = UINT64_MAX;
    for (uint32_t i = 0; i < out->nspikes; i++)
        if (out->spikes[i].time >= from && out->spikes[i].time < t && loop_ephys_decides_on(st, out->spikes[i].unit))
            t = out->spikes[i].time;
    out->stim = t != UINT64_MAX;
    out->t_stim = out->stim ? t : 0;
    if (out->stim)
        st->stim_last = t + 1;
}

void loop_ephys_cpu(struct loop_ephys_state *st, const uint8_t *block, uint32_t nframes, struct loop_ephys_out *out)
{
    float buf[LOOP_EPHYS_CHUNK * LOOP_EPHYS_MAXCHAN];
    loop_ephys_out_reset(out);
    for (uint32_t f0 = 0; f0 < nframes; f0 += LOOP_EPHYS_CHUNK) {
        uint32_t nf = nframes - f0 < LOOP_EPHYS_CHUNK ? nframes - f0 : LOOP_EPHYS_CHUNK;
        loop_ephys_decode(&st->lay, block + (size_t)f0 * st->lay.stride, nf, buf);
        loop_ephys_filter(st, buf, nf);
        loop_ephys_reference(buf, st->lay.nchan, st->lay.group, nf);
        loop_ephys_detect(st, buf, nf, block, f0, out);
    }
    if (nframes)
        memcpy(&out->t_block, block + (size_t)(nframes - 1) * st->lay.stride + st->lay.time_off, 8);
    loop_ephys_decide(st, out);
}
