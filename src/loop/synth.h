/* synth.h - synthetic NP2.0e super-frames with known spikes, for tests and
 * benchmarks that must not depend on the emulated card. Frames are what a
 * block of the card's data stream holds (superframe.h): per sample period, one read
 * frame [u64 time][u32 dev_idx][u32 data_sz] per probe, its payload the real
 * super-frame [u64 hub clock][u16 probe index][16 x 36 u16 words], 12-bit
 * offset binary. The read frame's time and the hub clock are the same count. */
#ifndef LOOP_SYNTH_H
#define LOOP_SYNTH_H

#include <stdint.h>
#include <stddef.h>
#include "loop/kernels.h"
#include "loop/score.h"

#define LOOP_SYNTH_MAXTRUTH 65536

struct loop_synth {
    struct loop_ephys_layout lay;
    uint32_t nprobes;
    uint64_t ticks_per_sample;  /* acquisition clock ticks per sample */
    double noise_sd, hum_amp, spike_amp, spike_hz;
    uint64_t n;                 /* samples generated */
    uint64_t rng;
    uint64_t next_spike;        /* sample index of the next spike peak */
    uint32_t spike_chan;
    float noise[65536];         /* unit gaussian table: cheap noise in real time */
    struct loop_truth truth[LOOP_SYNTH_MAXTRUTH];
    size_t ntruth;
};

/* nprobes probes (1 or 2) of 384 channels, 30 kHz at a 250 MHz clock, noise
 * SD 20 LSB, 50 Hz common hum, spikes of amplitude 250 at spike_hz (Poisson)
 * on a random channel and its two neighbours (60%); one truth row per spike,
 * on its centre channel, its SNR the trough's depth over noise_sd. ONI_EINVALARG for another
 * probe count or a spike rate <= 0. */
int loop_synth_init(struct loop_synth *s, uint32_t nprobes, double spike_hz, uint64_t seed);
/* Write nframes pipeline frames (nprobes super-frames each) into blk
 * (nframes * s->lay.stride bytes). */
void loop_synth_block(struct loop_synth *s, uint8_t *blk, uint32_t nframes);

#endif
