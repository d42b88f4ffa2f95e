/* kernels.h - the closed loop's per-block computations, CPU reference and GPU
 * versions with identical arithmetic (docs/closed-loop.md).
 *
 * (a) MAC: the thesis' multiply-add-accumulate benchmark (seed 000 listing 5.1).
 *     out[i] = sum_{k<passes} f^iters(in[i] + k * LOOP_MAC_STEP), f(x) = x*x + seed.
 *     Per element evaluation: 2*iters FLOP over 8 bytes (one float read, one
 *     written) as the thesis counts it, so AI = iters / 4 (AI 0.75 = 3 iters,
 *     AI 10 = 40). passes = compute size / data size (thesis table 5.2: 4 kB
 *     data with 400 kB of compute is 100 passes).
 * (b) EPHYS: Neuropixels 2.0 frames in, spikes out: per-channel band-pass
 *     (two biquads, state carried across blocks), common-average reference,
 *     a noise level per channel from the median absolute value of a
 *     calibration window, a negative threshold crossing x < -k * MAD / 0.6745
 *     (an extracellular spike is a trough) with a refractory period of 1.5 ms
 *     (the high-pass filter's undershoot after a large trough, 1.0-1.3 ms
 *     later, would cross again after 1 ms), locally exclusive across
 *     channels (a crossing within `radius` channels and `sweep` samples of
 *     a kept one is dropped: loop_ephys_exclusive), and the decision: one
 *     stimulation for a block with a spike, unless that spike follows the
 *     one the last stimulation answered by less than the lockout (1.5 ms:
 *     the same spike seen on a neighbouring channel in the next block). The GPU version does the same float operations in
 *     the same order, so both find exactly the same spikes. */
#ifndef LOOP_KERNELS_H
#define LOOP_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include "onigpu_stage.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LOOP_MAC_STEP 1e-3f

/* The MAC work's parameters: AI = iters / 4 FLOP per byte; compute size =
 * passes * the block; f's constant seed. */
struct loop_mac {
    uint32_t iters, passes;
    float seed;
};

#if !defined(__CUDACC_RTC__)
/* Evaluate the MAC kernel on n floats (OpenMP SIMD; threads when large). */
void loop_mac_cpu(const float *in, float *out, size_t n, uint32_t iters, uint32_t passes, float seed);
/* FLOPs one MAC call performs (the thesis' count: 2 per iteration). */
double loop_mac_flops(size_t n, uint32_t iters, uint32_t passes);
/* Floating-point operations of loop_ephys_cpu on nframes frames of nchan
 * channels: two biquads (9 each), the CAR sum and subtraction per sample,
 * and per frame 32 partial sums and a division. */
double loop_ephys_flops(uint32_t nchan, uint32_t nframes);
#endif

#define LOOP_EPHYS_MAXCHAN ONIGPU_STAGE_MAXCHAN
#define LOOP_EPHYS_BINS 512   /* noise histogram: 8 bins per octave */
#define LOOP_EPHYS_MAXSPIKES ONIGPU_STAGE_MAXSPIKES /* spikes listed per block; more are counted in overflow */
#define LOOP_DECIDE_MAXUNITS 32 /* units a decision may name (decide:units=3+7) */
#define LOOP_EPHYS_CHUNK 8    /* samples filtered before CAR and detection (GPU: in shared memory) */

/* Where the samples are in a block of read frames (the GPU stream's layout:
 * [u64 time][u32 dev_idx][u32 data_sz][payload], docs/transfers.md). One
 * "frame" of the pipeline is one sample of every channel: `stride` bytes,
 * which may span several read frames (two probes). Its timestamp is the u64
 * at time_off (4-byte aligned); channel c is the u16 at off[c], 12-bit offset
 * binary (LOOP_EPHYS_MID = 0 V), as Neuropixels 2.0 sends it. superframe.h builds
 * the layout of the real NP2.0e super-frame. */
#define LOOP_EPHYS_MID 2048.0f
#define LOOP_EPHYS_MAXGROUPS 16 /* common-average groups of a frame at most */

struct loop_ephys_layout {
    uint32_t nchan;
    uint32_t stride;   /* bytes per pipeline frame, a multiple of 4 */
    uint32_t time_off; /* byte offset of the frame's u64 timestamp */
    uint32_t group;    /* channels of one probe: the common average is taken over each run of group
                          channels (0: over all nchan; else a divisor of nchan, at most
                          LOOP_EPHYS_MAXGROUPS groups) */
    uint16_t off[LOOP_EPHYS_MAXCHAN]; /* byte offset of channel c's sample */
};

struct loop_ephys_params {
    double fs_hz;            /* sample rate (Neuropixels AP: 30000) */
    double lo_hz, hi_hz;     /* band-pass edges (300, 6000) */
    double k;                /* threshold in noise SDs (5) */
    double refractory_s;     /* per channel dead time after a spike (1.5e-3) */
    uint32_t radius;         /* locally exclusive detection: channels either side (3; 0: off) */
    double sweep_s;          /* ... and the time after a kept spike (0.5e-3) */
    double calib_s;          /* calibration window before detection starts (0.2) */
    double lockout_s;        /* no stimulation for a spike this soon after the one the last
                                stimulation answered (1.5e-3) */
    double clock_hz;         /* ticks per second of the frames' times (250e6, the ONIX hub clock) */
};

/* Filter state and thresholds: plain arrays so the GPU keeps an identical copy. */
struct loop_ephys_state {
    struct loop_ephys_layout lay;
    float b[2][3], a[2][2];          /* biquads: high-pass then low-pass, a0 = 1 */
    uint32_t refractory;             /* samples */
    uint32_t radius, sweep;          /* locally exclusive: channels either side, samples (0: off) */
    uint32_t calib;                  /* samples */
    float k;
    uint64_t nsamples;               /* samples processed so far */
    uint64_t lockout;                /* decide: clock ticks */
    uint64_t stim_last;              /* decide: time of the spike the last stimulation answered + 1 (0 = none) */
    uint32_t nunits;                 /* decide: 0, or only spikes of units[0 .. nunits) count */
    uint32_t units[LOOP_DECIDE_MAXUNITS];
    float z[LOOP_EPHYS_MAXCHAN][4];  /* direct form II transposed state, 2 per biquad */
    float thr[LOOP_EPHYS_MAXCHAN];   /* 0 until calibrated */
    uint64_t last[LOOP_EPHYS_MAXCHAN]; /* sample index of the last spike + 1 (0 = none) */
    uint64_t excl[LOOP_EPHYS_MAXCHAN]; /* no spike kept on it before this sample index (a neighbour's) */
    uint32_t hist[LOOP_EPHYS_MAXCHAN][LOOP_EPHYS_BINS];
};

/* A block's spikes and stimulation decision are the stage API's
 * (include/onigpu_stage.h); the engine's names for them: */
#define loop_spike onigpu_spike
#define loop_ephys_out onigpu_out

/* Host functions (NVRTC, compiling the GPU chain, sees the types alone). */
#if !defined(__CUDACC_RTC__)
#if defined(__CUDACC__)
#define LOOP_HD __host__ __device__ static inline
#else
#define LOOP_HD static inline
#endif

/* Whether decide counts a spike of this unit: every spike when it names no
 * units, else only spikes labelled with one it names. */
LOOP_HD int loop_ephys_decides_on(const struct loop_ephys_state *st, uint32_t unit)
{
    if (!st->nunits)
        return 1;
    for (uint32_t i = 0; i < st->nunits && i < LOOP_DECIDE_MAXUNITS; i++)
        if (st->units[i] == unit)
            return 1;
    return 0;
}

/* Spike i before spike j: by frame, then the most negative sample, then
 * by channel. */
LOOP_HD int loop_spike_deeper(const struct loop_ephys_out *o, const float *x, uint32_t nchan, uint32_t f0,
                              uint32_t i, uint32_t j)
{
    const struct loop_spike *a = &o->spikes[i], *b = &o->spikes[j];
    if (a->frame != b->frame)
        return a->frame < b->frame;
    float va = x[(size_t)(a->frame - f0) * nchan + a->chan], vb = x[(size_t)(b->frame - f0) * nchan + b->chan];
    if (va != vb)
        return va < vb;
    return a->chan < b->chan;
}

/* Indices from .. n of o's spikes into ord[0 .. n - from), in that order
 * (insertion: a chunk has few). */
LOOP_HD void loop_spike_order(const struct loop_ephys_out *o, const float *x, uint32_t nchan, uint32_t f0,
                              uint32_t from, uint32_t n, uint16_t *ord)
{
    for (uint32_t i = from; i < n; i++) {
        uint32_t k = i - from;
        while (k > 0 && loop_spike_deeper(o, x, nchan, f0, i, ord[k - 1])) {
            ord[k] = ord[k - 1];
            k--;
        }
        ord[k] = (uint16_t)i;
    }
}

/* o's spikes from .. n sorted in place by frame, then channel (the GPU
 * lists them as its threads come). */
LOOP_HD void loop_spike_sort(struct loop_ephys_out *o, uint32_t from, uint32_t n)
{
    for (uint32_t i = from + 1; i < n; i++) {
        struct loop_spike s = o->spikes[i];
        uint32_t k = i;
        while (k > from && (o->spikes[k - 1].frame > s.frame ||
                            (o->spikes[k - 1].frame == s.frame && o->spikes[k - 1].chan > s.chan))) {
            o->spikes[k] = o->spikes[k - 1];
            k--;
        }
        o->spikes[k] = s;
    }
}

/* detect's locally exclusive rule (one code for the CPU and the GPU kernel):
 * the spikes listed from index `from` (by frame, then channel), all of frames f0 .. f0 + nframes of
 * the block whose frame 0 is sample base, with x those frames' samples
 * [nframes][nchan], are taken by frame, then the deepest first, then by
 * channel; one within st->radius channels and st->sweep samples of a spike
 * kept before it (this block or an earlier one) is dropped, so a spike that
 * crosses on its neighbouring channels is detected once, on the channel
 * that crossed first (deepest). The kept ones stay listed in order; t_first becomes the earliest listed when nothing
 * overflowed. Crossings still start each channel's own refractory time. */
LOOP_HD void loop_ephys_exclusive(struct loop_ephys_state *st, const float *x, uint32_t f0, uint64_t base,
                                  struct loop_ephys_out *o, uint32_t from)
{
    uint32_t n = o->nspikes < LOOP_EPHYS_MAXSPIKES ? o->nspikes : LOOP_EPHYS_MAXSPIKES, nchan = st->lay.nchan;
    if (!st->sweep || n <= from)
        return;
    uint16_t ord[LOOP_EPHYS_MAXSPIKES];
    uint8_t keep[LOOP_EPHYS_MAXSPIKES];
    loop_spike_order(o, x, nchan, f0, from, n, ord);
    for (uint32_t k = 0; k < n - from; k++) {
        const struct loop_spike *s = &o->spikes[ord[k]];
        uint64_t idx = base + s->frame;
        keep[ord[k]] = idx >= st->excl[s->chan];
        if (!keep[ord[k]])
            continue;
        uint32_t lo = s->chan > st->radius ? s->chan - st->radius : 0;
        uint32_t hi = s->chan + st->radius < nchan ? s->chan + st->radius : nchan - 1;
        for (uint32_t c = lo; c <= hi; c++)
            if (st->excl[c] < idx + st->sweep)
                st->excl[c] = idx + st->sweep;
    }
    uint32_t m = from;
    for (uint32_t i = from; i < n; i++)
        if (keep[i])
            o->spikes[m++] = o->spikes[i];
    o->nspikes = m;
    if (!o->overflow) {
        uint64_t t = ~0ull;
        for (uint32_t k = 0; k < o->nspikes; k++)
            t = o->spikes[k].time < t ? o->spikes[k].time : t;
        o->t_first = t;
    }
}

/* 1 when lay is a layout the ephys kernels can walk: 1..LOOP_EPHYS_MAXCHAN
 * channels, a stride that is a multiple of 4, the timestamp 4-byte aligned
 * and every 16-bit sample at an even offset, all inside the stride. */
int loop_ephys_layout_ok(const struct loop_ephys_layout *lay);
/* Fill st from params and layout (zeroed state, designed filters).
 * ONI_EINVALARG for nchan 0 or > LOOP_EPHYS_MAXCHAN, a stride too small, bad band edges, a
 * NaN or infinite parameter, or a refractory or calibration window over 2^32 - 1 samples. */
int loop_ephys_init(struct loop_ephys_state *st, const struct loop_ephys_params *p, const struct loop_ephys_layout *lay);
/* Redesign st's band-pass (filter state kept) / set its detection
 * parameters (threshold k in noise SDs, refractory and calibration windows);
 * st unchanged and ONI_EINVALARG for values loop_ephys_init refuses. */
int loop_ephys_set_band(struct loop_ephys_state *st, double lo_hz, double hi_hz, double fs_hz);
int loop_ephys_set_detect(struct loop_ephys_state *st, double k, double refractory_s, double calib_s, double fs_hz);
/* Set st's locally exclusive detection: radius channels either side, for
 * sweep_s after a kept spike (radius 0: every crossing is kept); st
 * unchanged and ONI_EINVALARG for a radius past the channels or a bad time. */
int loop_ephys_set_exclusive(struct loop_ephys_state *st, uint32_t radius, double sweep_s, double fs_hz);
/* Set the decision's lockout (s, at a clock of clock_hz); ONI_EINVALARG for a
 * negative, NaN or over-an-hour lockout or a bad clock. */
int loop_ephys_set_lockout(struct loop_ephys_state *st, double lockout_s, double clock_hz);
/* Default parameters (300-6000 Hz at 30 kHz, k = 5, 1.5 ms refractory, 0.2 s calibration,
 * 1.5 ms lockout, 250 MHz clock). */
void loop_ephys_defaults(struct loop_ephys_params *p);
/* Process nframes frames of block on the CPU: the built-in stages below in
 * turn; fills out (spikes ordered by frame, then channel; the decision). */
void loop_ephys_cpu(struct loop_ephys_state *st, const uint8_t *block, uint32_t nframes, struct loop_ephys_out *out);

/* The built-in stages' per-block work (src/loop/stage_builtin.c wraps them
 * as onigpu_stage descriptors). x is [nframes][nchan]. decode: the frames'
 * samples less LOOP_EPHYS_MID; filter: both biquads of every channel, st's
 * b, a, z; reference: each row's run of group channels (a probe's; 0: the
 * whole row) less its mean; detect: calibration, then
 * crossings of frames f0 .. f0 + nframes of block (times read there),
 * st's calib, hist, thr, k, last, refractory and nsamples (advanced by
 * nframes); decide: stimulate for the earliest listed spike at least
 * st->lockout after the one the last stimulation answered (out->stim,
 * out->t_stim; st->stim_last). out_reset
 * readies out for a block (no spikes, t_first UINT64_MAX, no decision). */
void loop_ephys_decode(const struct loop_ephys_layout *lay, const uint8_t *block, uint32_t nframes, float *x);
void loop_ephys_filter(struct loop_ephys_state *st, float *x, uint32_t nframes);
void loop_ephys_reference(float *x, uint32_t nchan, uint32_t group, uint32_t nframes);
void loop_ephys_detect(struct loop_ephys_state *st, const float *x, uint32_t nframes, const uint8_t *block, uint32_t f0,
                       struct loop_ephys_out *out);
void loop_ephys_decide(struct loop_ephys_state *st, struct loop_ephys_out *out);
void loop_ephys_out_reset(struct loop_ephys_out *out);

/* Per-sample helpers, shared by the CPU pipeline and the unit tests.
 * loop_biquad_step: one sample x through the biquad (b, a), state z updated;
 * returns the output. loop_ephys_bin: the histogram bin of |x| (its float
 * exponent and 3 mantissa bits, clamped to 0 .. LOOP_EPHYS_BINS - 1);
 * loop_ephys_bin_value: the value at that bin's centre. */
float loop_biquad_step(const float b[3], const float a[2], float z[2], float x);
uint32_t loop_ephys_bin(float absx);
float loop_ephys_bin_value(uint32_t bin);
/* Median absolute value from a histogram of count samples (bin centre). */
float loop_ephys_hist_median(const uint32_t *hist, uint64_t count);
#endif /* !__CUDACC_RTC__ */

#ifdef __cplusplus
}
#endif
#endif
