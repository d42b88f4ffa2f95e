/* neural.h - synthetic extracellular signal for the electrophysiology
 * devices, with exact ground truth (docs/emulator.md, "Neural data").
 *
 * Per channel: Gaussian noise drawn fresh for every sample (no table) and
 * shaped to a white AP band with a 1/f rise below it, a DC offset; shared
 * across channels: an LFP that varies smoothly along the probe, common-mode
 * noise with line-frequency hum, occasional large artefacts and the
 * stimulator's own artefact after each stimulus (emu_card_stimulus), the
 * sum clipped at the ADC's range. Units sit around the probe at positions
 * of its real geometry, each seen on the channels around it with a
 * waveform that widens and lags with distance; waveform type, amplitude
 * (SNR), rate (lognormal), bursts, refractoriness and a slow drift of the
 * probe against the tissue are drawn from the seed. A probe that
 * multiplexes its ADCs samples each channel at its own offset within the
 * sample period, and the units' waveforms, the common-mode and the hum are
 * evaluated at that instant.
 *
 * Ground truth goes to the card (emu_card_truth_add) as the trough sample of
 * each spike is generated: the unit, its peak channel now (with drift), the
 * time and the SNR on that channel. The units' templates can be written as
 * Kilosort/phy files (neural_write_templates). */
#ifndef EMU_NEURAL_H
#define EMU_NEURAL_H

#include <stdint.h>
#include "card.h"
#include "oni/util/probe.h" /* the NP2.0 geometry the probes' units sit on (np2_site) */

#define NEURAL_SPIKE_LEN 60   /* samples of one waveform (2 ms at 30 kHz) */
#define NEURAL_TROUGH 20      /* the soma's trough, the ground-truth time */
#define NEURAL_SPAN 32        /* channels a unit is drawn on at most (its nearest) */
#define NEURAL_MAX_UNITS 1024
#define NEURAL_MAX_ACTIVE 512 /* spikes being drawn at once */
#define NEURAL_MAX_CH 1024
#define NEURAL_MUX_SLOTS 16   /* sampling instants within one period (NP2.0: 16 channels per ADC) */
#define NEURAL_PINK_DECIM 8   /* samples between draws of a channel's 1/f part */

/* Which part of the spectrum a device's stream carries. */
enum neural_band {
    NEURAL_WIDE, /* DC-coupled wideband: LFP, offsets, 1/f, AP band, spikes (NP2.0, RHD2164) */
    NEURAL_AP,   /* the AP band only, high-passed on the probe (NP1.0 AP stream): no LFP, no offsets */
    NEURAL_LFP,  /* the LFP band only (NP1.0 LFP stream): no AP-band noise, no spikes */
};

/* The knobs (spec arguments of the device, docs/emulator.md). Voltages are
 * at the electrode, in uV; the device says how many uV one code is. */
struct neural_cfg {
    enum neural_band band;
    double uv_per_lsb;     /* ADC step */
    double noise_uv;       /* noise=: rms of one channel's own noise in 300 Hz-10 kHz (the SNR's unit) */
    double lfp_uv;         /* lfp=: rms of the shared LFP */
    double cm_uv;          /* cm=: rms of the common-mode noise (every channel) */
    double line_uv;        /* line=: amplitude of the line hum (and a third of it at 3x) */
    double line_hz;        /* line_hz= */
    double offset_uv;      /* offset=: SD of the channels' DC offsets */
    double lowpass_hz;     /* the AP band's upper corner (one pole) */
    uint32_t units;        /* units= */
    double snr_median;     /* snr=: median peak-channel trough / noise_uv, lognormal */
    double snr_sigma;      /* snr_sigma=: its log SD */
    double snr_min;        /* snr_min=: none drawn below */
    double rate_hz;        /* rate=: median rate, lognormal */
    double rate_sigma;     /* rate_sigma=: its log SD */
    double burst;          /* burst=: fraction of units that fire bursts */
    double refractory_ms;  /* refractory=: no two spikes of a unit closer */
    double drift_um;       /* drift=: amplitude of the probe's movement along the shank */
    double drift_s;        /* drift_s=: its period */
    double artefact_hz;    /* artefacts=: rate of large shared artefacts */
    double artefact_uv;    /* artefact_uv=: their typical size */
    double stim_uv;        /* stim_uv=: the stimulus artefact's size (0: none) */
    /* Where channel ch is, um (NULL: a line of sites 20 um apart). */
    void (*site)(uint32_t ch, float *x_um, float *y_um);
    /* Sampling slot (0..NEURAL_MUX_SLOTS-1) of channel ch within the period;
     * NULL: every channel at the period's start. */
    uint32_t (*slot)(uint32_t ch);
};

/* Defaults of a band, at uv_per_lsb (docs/emulator.md gives each one's source). */
void neural_cfg_default(struct neural_cfg *c, enum neural_band band, double uv_per_lsb);
/* Override c's knobs from a device's spec arguments (each marked used).
 * 0, or ONI_EINVALARG with a message naming the argument in err. */
int neural_cfg_args(struct neural_cfg *c, struct emu_args *a, char *err, size_t cap);

struct neural_unit {
    float x, y, z;         /* soma, um: across, along (at drift 0), off the probe's plane */
    float w_trough, w_peak, t_peak, r_peak, r_pre; /* waveform: ms, ms, ms, ratios */
    float apk;             /* trough depth on the nearest site at drift 0, uV */
    uint32_t ch0;          /* first channel of the drawn span */
    uint32_t peak_ch;      /* channel of the deepest trough now */
    float snr;             /* trough depth on peak_ch / noise_uv, now */
    float drawn_at;        /* drift (um) the waveforms were computed for */
    int drawn;             /* w, ch0, peak_ch, snr set (at the unit's first spike) */
    float *w;              /* [NEURAL_SPAN][NEURAL_SPIKE_LEN] waveform per channel, LSB */
    uint64_t next;         /* sample index of its next spike's start */
    double mean_gap;       /* mean samples between spike events past the refractory period */
    uint32_t burst_left;   /* spikes still to come in the current burst */
    float burst_scale;     /* amplitude of the next spike in a burst */
    int bursty;
};

struct neural_spike {
    uint32_t unit;
    float scale;
    uint64_t start;
};

struct neural_chan {
    float w, p1, p2;    /* the noise filters' states (p1, p2: at the last decimation point) */
    float pnow, pstep;  /* the 1/f part now, and its step per sample to p1 + p2 */
    float cm_gain;      /* gain of the common-mode / hum on this channel */
    float art_gain;     /* gain of the artefacts */
    float lfp_w;        /* weight of LFP source lfp_i + 1 (1 - of lfp_i) */
    float offset;       /* LSB */
    uint32_t lfp_i, slot;
};

struct neural {
    struct emu_card *card;     /* where ground truth goes */
    uint32_t dev_idx, stream;  /* truth: device index, channel = stream * nch + channel */
    uint32_t nch, fs_hz;
    int32_t lo, hi, mid;       /* code range, code of 0 V */
    struct neural_cfg cfg;
    /* noise: w = a_w w + b_w g; p1, p2 one-pole low-passes of the same g */
    float a_w, b_w, a1, b1, a2, b2;
    float a1d, b1d, a2d, b2d;  /* p1, p2 stepped every NEURAL_PINK_DECIM samples */
    struct neural_chan *ch;
    float *acc;                /* per channel sum of this sample's spikes and shared terms, LSB */
    /* LFP sources along the probe, each the sum of three one-pole low-passes of white noise */
    uint32_t nlfp;
    float (*lfp)[3];
    float lfp_a[3], lfp_b[3], lfp_post, *lfp_now; /* lfp_now: each source after the 60 Hz pole */
    /* common-mode: a low-pass state, its last two values for the slots' interpolation */
    float cm_a, cm_b, cm_state;
    float hum[NEURAL_MUX_SLOTS][4]; /* cos, sin of each slot's offset in the hum's phase (x1, x3) */
    /* artefacts: the current large one and the current stimulus one */
    uint64_t art_next, art_start, stim_start;
    float art_amp, art_tau;
    int art_on, stim_on;
    uint64_t stim_count;       /* stimuli seen (emu_card_stimulus) */
    struct neural_unit *unit;
    uint32_t nunits;
    uint64_t next_any;         /* min over units of next */
    struct neural_spike active[NEURAL_MAX_ACTIVE];
    uint32_t nactive;
    uint64_t lost;             /* spikes not drawn: NEURAL_MAX_ACTIVE were being drawn */
    uint64_t k;                /* next sample index */
    uint64_t rng;
};

/* Set up a generator of nch channels at fs_hz, codes lo..hi with mid at 0 V,
 * knobs cfg; seeded from the card seed, the device index and stream (e.g.
 * the probe of a two-probe headstage). Ground truth is recorded as device
 * dev_idx, channel stream * nch + channel. Registers with the card for
 * stimuli (emu_card_stimulus). 0, ONI_EINVALARG (nch or units out of range)
 * or ONI_EBADALLOC. */
int neural_init(struct neural *n, struct emu_card *card, uint32_t dev_idx, uint32_t stream, uint32_t nch,
                uint32_t fs_hz, int32_t lo, int32_t hi, int32_t mid, const struct neural_cfg *cfg);
/* Free what neural_init allocated and unregister (safe after a failed init). */
void neural_fini(struct neural *n);
/* One sample of every channel into out[0..nch) (codes), taken at
 * acquisition time t (the truth time of a trough in this sample). */
void neural_sample(struct neural *n, uint16_t *out, uint64_t t);
/* A stimulus reached the card: its artefact starts with the next sample. */
void neural_stimulus(struct neural *n);
/* Write the units' templates (at drift 0, as the data holds them: raw, in
 * LSB, with the channels' sampling offsets) as Kilosort/phy files into the
 * directory dir (created if missing): templates.npy, channel_map.npy,
 * channel_positions.npy, whitening_mat.npy, whitening_mat_inv.npy,
 * params.py. 0 or ONI_EPATHINVALID / ONI_EWRITEFAILURE / ONI_EBADALLOC with
 * a message in err. */
int neural_write_templates(const struct neural *n, const char *dir, char *err, size_t cap);

/* splitmix64: the card's seeded random source. */
uint64_t neural_rand(uint64_t *state);
/* A standard normal draw from state (ziggurat). */
double neural_gauss(uint64_t *state);

#endif
