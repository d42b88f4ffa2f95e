/* neural.h - synthetic extracellular signal for the electrophysiology devices:
 * band-limited noise plus spikes of a small population of units at known,
 * reproducible times (seeded), each unit on a few neighbouring channels.
 * Ground truth goes to the card (emu_card_truth_add) as the trough of each
 * spike is generated. Cheap enough for 384 channels x 30 kHz many times over:
 * noise is read from a precomputed table at a per-channel offset, spikes are
 * integer templates scaled per channel. */
#ifndef EMU_NEURAL_H
#define EMU_NEURAL_H

#include <stdint.h>
#include "card.h"

#define NEURAL_SPIKE_LEN 60 /* samples of one waveform (2 ms at 30 kHz) */
#define NEURAL_TROUGH 20    /* its trough, the ground-truth time */
#define NEURAL_SPREAD 4     /* channels a unit is seen on */
#define NEURAL_MAX_UNITS 64
#define NEURAL_MAX_ACTIVE 128

struct neural_unit {
    uint32_t ch0;                 /* first of NEURAL_SPREAD neighbouring channels */
    int32_t amp[NEURAL_SPREAD];   /* trough depth per channel, LSB */
    uint64_t next;                /* sample index of its next spike's start */
    uint32_t mean_gap;            /* mean samples between spikes */
    float snr;                    /* trough depth on ch0 + 1 (the truth channel) / noise SD */
};

struct neural_spike {
    uint32_t unit;
    uint64_t start;
};

struct neural {
    struct emu_card *card;        /* where ground truth goes */
    uint32_t dev_idx, ch_base;    /* truth: device index, channel = ch_base + channel */
    uint32_t nch, fs_hz, mid;     /* channels, sample rate, code of 0 V */
    int32_t lo, hi;               /* code range */
    int16_t *noise;               /* NEURAL_TABLE samples, SD = sigma LSB */
    uint32_t *off;                /* per channel table offset */
    int16_t tmpl[NEURAL_SPIKE_LEN]; /* waveform, trough = -1024 */
    struct neural_unit unit[NEURAL_MAX_UNITS];
    uint32_t nunits;
    struct neural_spike active[NEURAL_MAX_ACTIVE];
    uint32_t nactive;
    int32_t *acc;                 /* per channel spike sum of the current sample */
    uint64_t k;                   /* next sample index */
    uint64_t ticks_per_sample;    /* acquisition ticks between samples (truth times within a frame) */
    uint64_t rng;
};

/* Set up a generator of nch channels at fs_hz, codes lo..hi around mid, noise
 * SD sigma LSB, nunits units with troughs of 8-16 sigma firing 3-20 Hz; seeded
 * from the card seed, the device index and stream (e.g. the probe of a
 * two-probe headstage). Ground truth is recorded as device dev_idx, channel
 * stream * nch + channel. 0 or ONI_EBADALLOC. */
int neural_init(struct neural *n, struct emu_card *card, uint32_t dev_idx, uint32_t stream, uint32_t nch,
                uint32_t fs_hz, int32_t lo, int32_t hi, int32_t mid, double sigma, uint32_t nunits,
                uint32_t lowpass_hz);
/* Free what neural_init allocated (safe after a failed init). */
void neural_fini(struct neural *n);
/* One sample of every channel into out[0..nch) (16-bit codes), taken at
 * acquisition time t (the truth time of a trough in this sample). */
void neural_sample(struct neural *n, uint16_t *out, uint64_t t);
/* Noise only (no spikes), e.g. an LFP band: one sample into out. */
void neural_noise(struct neural *n, uint16_t *out);

/* splitmix64: the card's seeded random source. */
uint64_t neural_rand(uint64_t *state);

#endif
