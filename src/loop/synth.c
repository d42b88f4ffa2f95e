/* synth.c - synthetic frames with ground truth (synth.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "oni.h"
#include "loop/superframe.h"
#include "loop/synth.h"

#define FS 30000.0
#define SPIKE_HALF 15 /* samples either side of the peak a waveform covers */

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static double uniform(uint64_t *s)
{
    return ((double)(rnd(s) >> 11) + 0.5) / 9007199254740992.0;
}

static double gauss(uint64_t *s)
{
    return sqrt(-2.0 * log(uniform(s))) * cos(2.0 * M_PI * uniform(s));
}

static uint64_t next_gap(struct loop_synth *s)
{
    /* Poisson arrivals, at least two waveform widths apart. */
    double gap = -log(uniform(&s->rng)) * FS / s->spike_hz;
    return (uint64_t)gap + 3 * SPIKE_HALF;
}

int loop_synth_init(struct loop_synth *s, uint32_t nprobes, double spike_hz, uint64_t seed)
{
    if (!s || nprobes < 1 || nprobes > 2 || !(spike_hz > 0))
        return ONI_EINVALARG;
    memset(s, 0, sizeof *s);
    loop_np2e_layout(&s->lay, LOOP_NP2E_PAYLOAD, nprobes, NULL);
    s->nprobes = nprobes;
    s->ticks_per_sample = 250000000ull / 30000ull;
    s->noise_sd = 20.0;
    s->hum_amp = 100.0;
    s->spike_amp = 250.0;
    s->spike_hz = spike_hz;
    s->rng = seed * 0x9E3779B97F4A7C15ull + 1;
    s->next_spike = 2 * SPIKE_HALF + next_gap(s);
    s->spike_chan = (uint32_t)(rnd(&s->rng) % s->lay.nchan);
    for (int i = 0; i < 65536; i++)
        s->noise[i] = (float)gauss(&s->rng);
    return 0;
}

/* Spike waveform at offset d samples from its peak: a sharp trough and a slower rebound. */
static double wave(int d)
{
    double t = d / FS * 1e3; /* ms */
    return -exp(-(t * t) / (2 * 0.12 * 0.12)) + 0.35 * exp(-((t - 0.45) * (t - 0.45)) / (2 * 0.25 * 0.25));
}

/* The read frame headers and super-frame headers of pipeline frame fr:
 * zeros where no sample goes (trash and padding words). */
static void frame_headers(const struct loop_synth *s, uint8_t *fr, uint64_t t)
{
    uint32_t rs = s->lay.stride / s->nprobes, idx = 0, sz = LOOP_NP2E_PAYLOAD;
    memset(fr, 0, s->lay.stride);
    for (uint32_t p = 0; p < s->nprobes; p++) {
        uint8_t *r = fr + p * rs;
        uint16_t probe = (uint16_t)p;
        memcpy(r, &t, 8);
        memcpy(r + 8, &idx, 4);
        memcpy(r + 12, &sz, 4);
        memcpy(r + LOOP_NP2E_READ_HDR, &t, 8);
        memcpy(r + LOOP_NP2E_READ_HDR + LOOP_NP2E_PROBE_OFF, &probe, 2);
    }
}

void loop_synth_block(struct loop_synth *s, uint8_t *blk, uint32_t nframes)
{
    const uint32_t nchan = s->lay.nchan;
    for (uint32_t f = 0; f < nframes; f++, s->n++) {
        uint8_t *fr = blk + (size_t)f * s->lay.stride;
        frame_headers(s, fr, s->n * s->ticks_per_sample);
        /* A spike whose waveform window has passed: record it, draw the next. */
        if (s->n > s->next_spike + SPIKE_HALF) {
            if (s->ntruth < LOOP_SYNTH_MAXTRUTH) {
                float snr = s->noise_sd > 0 ? (float)(-wave(0) * s->spike_amp / s->noise_sd) : 0.0f;
                s->truth[s->ntruth++] = (struct loop_truth){s->next_spike * s->ticks_per_sample, s->spike_chan,
                                                            s->spike_chan, snr};
            }
            s->next_spike += next_gap(s);
            s->spike_chan = (uint32_t)(rnd(&s->rng) % nchan);
        }
        double hum = s->hum_amp * sin(2 * M_PI * 50.0 * (double)s->n / FS);
        int d = (int)((int64_t)s->n - (int64_t)s->next_spike);
        for (uint32_t c = 0; c < nchan; c++) {
            double v = s->noise_sd * s->noise[rnd(&s->rng) & 0xFFFF] + hum;
            if (d >= -SPIKE_HALF && d <= SPIKE_HALF) {
                uint32_t dc = c > s->spike_chan ? c - s->spike_chan : s->spike_chan - c;
                if (dc == 0)
                    v += s->spike_amp * wave(d);
                else if (dc == 1)
                    v += 0.6 * s->spike_amp * wave(d);
            }
            long q = lround(v + LOOP_EPHYS_MID); /* 12-bit offset binary */
            uint16_t x = (uint16_t)(q > 4095 ? 4095 : q < 0 ? 0 : q);
            memcpy(fr + s->lay.off[c], &x, 2);
        }
    }
}
