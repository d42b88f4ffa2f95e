/* test_loop_kernels.c - the closed loop's kernels on the CPU: MAC against a
 * scalar reference, band-pass response, common-average reference, noise
 * estimate, detection with refractory period, scoring; CPU vs GPU when a GPU
 * is present (bit-identical spikes, MAC within float tolerance). */
#include <math.h>
#include <stdlib.h>
#include "oni.h"
#include "unit.h"
#include "bench/gputime.h"
#include "loop/kernels.h"
#include "loop/loop.h"
#include "loop/source.h"
#include "loop/superframe.h"
#include "loop/synth.h"
#include "ephys_layout.h"

static float mac_ref(float v, uint32_t iters, uint32_t passes, float seed)
{
    float acc = 0.0f;
    for (uint32_t k = 0; k < passes; k++) {
        float x = v + (float)k * LOOP_MAC_STEP;
        for (uint32_t j = 0; j < iters; j++) {
            float sq = x * x;
            x = sq + seed;
        }
        acc = acc + x;
    }
    return acc;
}

TEST(mac_matches_scalar_reference)
{
    enum { N = 4099 };
    float *in = malloc(N * 4), *out = malloc(N * 4);
    REQUIRE(in && out);
    loop_fill_floats(NULL, 7, in, N * 4);
    const uint32_t iters[] = {0, 1, 3, 40};
    for (size_t t = 0; t < 4; t++) {
        for (int i = 0; i < N; i++)
            out[i] = NAN;
        loop_mac_cpu(in, out, N, iters[t], 5, 0.1f);
        int bad = 0;
        for (int i = 0; i < N; i++)
            bad += !(out[i] == mac_ref(in[i], iters[t], 5, 0.1f));
        CHECK_EQ(bad, 0);
    }
    /* Large enough for the OpenMP path, compared with a double reference. */
    loop_mac_cpu(in, out, N, 3, 100, 0.1f);
    double worst = 0;
    for (int i = 0; i < N; i++) {
        double acc = 0;
        for (int k = 0; k < 100; k++) {
            double x = (double)in[i] + (double)((float)k * LOOP_MAC_STEP);
            for (int j = 0; j < 3; j++)
                x = x * x + 0.1;
            acc += x;
        }
        double e = fabs(out[i] - acc) / fabs(acc);
        worst = e > worst ? e : worst;
    }
    CHECK(worst < 1e-5);
    CHECK(loop_mac_flops(1024, 3, 1) == 6144.0); /* AI 0.75: 6 FLOP per 8 bytes */
    free(in);
    free(out);
}

TEST(fill_is_deterministic_and_in_range)
{
    float a[64], b[64];
    loop_fill_floats(NULL, 3, a, sizeof a);
    loop_fill_floats(NULL, 3, b, sizeof b);
    CHECK(!memcmp(a, b, sizeof a));
    loop_fill_floats(NULL, 4, b, sizeof b);
    CHECK(memcmp(a, b, sizeof a) != 0);
    for (int i = 0; i < 64; i++)
        CHECK(a[i] >= 0.0f && a[i] < 0.5f);
}

/* Gain of the band-pass at frequency hz, from a settled sine. */
static double gain(double hz)
{
    struct loop_ephys_params p;
    struct loop_ephys_state *st = calloc(1, sizeof *st);
    loop_ephys_defaults(&p);
    struct loop_ephys_layout lay = test_layout(1, 24);
    loop_ephys_init(st, &p, &lay);
    double peak = 0;
    for (int n = 0; n < 30000; n++) {
        float x = (float)(1000.0 * sin(2 * M_PI * hz * n / 30000.0));
        float y = loop_biquad_step(st->b[0], st->a[0], &st->z[0][0], x);
        y = loop_biquad_step(st->b[1], st->a[1], &st->z[0][2], y);
        if (n > 15000 && fabsf(y) > peak)
            peak = fabsf(y);
    }
    free(st);
    return peak / 1000.0;
}

TEST(bandpass_passes_spike_band_and_rejects_the_rest)
{
    CHECK(gain(1500) > 0.9 && gain(1500) < 1.05);
    CHECK(gain(300) > 0.6 && gain(300) < 0.8);   /* -3 dB edge */
    CHECK(gain(6000) > 0.6 && gain(6000) < 0.8); /* -3 dB edge */
    CHECK(gain(50) < 0.05);                      /* mains hum */
    CHECK(gain(14000) < 0.1);
}

TEST(init_rejects_bad_parameters)
{
    struct loop_ephys_params p;
    struct loop_ephys_state *st = calloc(1, sizeof *st);
    REQUIRE(st);
    loop_ephys_defaults(&p);
    struct loop_ephys_layout lay = test_layout(384, 784);
    CHECK_RC(loop_ephys_init(st, &p, &lay), ONI_ESUCCESS);
    CHECK_RC(loop_ephys_init(NULL, &p, &lay), ONI_EINVALARG);
    lay.nchan = 0;
    CHECK_RC(loop_ephys_init(st, &p, &lay), ONI_EINVALARG);
    lay = test_layout(384, 700); /* stride too small for 384 samples */
    CHECK_RC(loop_ephys_init(st, &p, &lay), ONI_EINVALARG);
    lay = test_layout(384, 784);
    p.hi_hz = 16000; /* above Nyquist */
    CHECK_RC(loop_ephys_init(st, &p, &lay), ONI_EINVALARG);
    /* windows whose samples do not fit the state's 32-bit counts, and NaN or
     * infinite parameters (taken before: a 2e5 s calibration became 1705032704
     * samples, 56840 s; a NaN refractory period 0 samples) */
    const double huge_s = 2e5;
    double *fields[] = {&p.calib_s, &p.refractory_s, &p.k, &p.fs_hz, &p.lo_hz};
    const double bad[] = {huge_s, NAN, INFINITY};
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++)
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            if (f >= 2 && bad[i] == huge_s)
                continue; /* a large k or rate is no overflow */
            loop_ephys_defaults(&p);
            *fields[f] = bad[i];
            if (loop_ephys_init(st, &p, &lay) != ONI_EINVALARG) {
                fprintf(stderr, "  field %zu = %g taken (calib %u, refractory %u samples)\n", f, bad[i], st->calib,
                        st->refractory);
                CHECK(0);
            }
        }
    free(st);
}

TEST(noise_histogram_median)
{
    uint32_t hist[LOOP_EPHYS_BINS] = {0};
    /* |x| uniform-ish around 10: the median lands in 10's bin. */
    for (int i = 0; i < 1000; i++)
        hist[loop_ephys_bin(5.0f + 10.0f * (float)i / 1000.0f)]++;
    float m = loop_ephys_hist_median(hist, 1000);
    CHECK(m > 9.0f && m < 11.0f);
    CHECK_EQ(loop_ephys_bin(0.0f), 0);
    CHECK_EQ(loop_ephys_bin(1e30f), LOOP_EPHYS_BINS - 1);
    CHECK(loop_ephys_bin(2.0f) > loop_ephys_bin(1.0f));
}

/* Frames with a constant value on every channel plus one spike: CAR removes
 * the common part, so only the spiking channel fires. */
TEST(car_removes_common_signal)
{
    struct loop_ephys_params p;
    loop_ephys_defaults(&p);
    p.calib_s = 0.01; /* 300 samples */
    struct loop_synth *sy = calloc(1, sizeof *sy);
    struct loop_ephys_state *st = calloc(1, sizeof *st);
    struct loop_ephys_out *out = calloc(1, sizeof *out);
    REQUIRE(sy && st && out);
    loop_synth_init(sy, 1, 1.0, 1);
    sy->spike_amp = 0;    /* no spikes from the generator */
    sy->hum_amp = 1500;   /* huge common-mode hum, inside the 12-bit range */
    sy->noise_sd = 10;
    loop_ephys_init(st, &p, &sy->lay);
    uint8_t *blk = malloc(32u * sy->lay.stride);
    uint64_t spikes = 0;
    for (int b = 0; b < 300; b++) {
        loop_synth_block(sy, blk, 32);
        loop_ephys_cpu(st, blk, 32, out);
        spikes += out->nspikes + out->overflow;
    }
    /* Without CAR the hum (150 x noise) would cross every threshold. */
    CHECK(spikes < 20);
    free(sy);
    free(st);
    free(out);
    free(blk);
}

/* Each probe is its own common-average group: two probes whose rows carry
 * different offsets each come out with a mean of zero (one average over
 * both would leave each probe half the difference); group 0 is the whole
 * row; a layout whose group does not divide the channels is refused. */
TEST(car_is_taken_per_probe)
{
    struct loop_ephys_layout lay;
    REQUIRE(loop_np2e_layout(&lay, LOOP_NP2E_PAYLOAD, 2, NULL) == 0);
    CHECK_EQ(lay.group, 384);
    enum { F = 3, N = 768 };
    static float x[F * N];
    for (int f = 0; f < F; f++)
        for (int c = 0; c < N; c++)
            x[f * N + c] = (c < 384 ? 100.0f : -40.0f) + (float)(c % 7) + f;
    loop_ephys_reference(x, N, lay.group, F);
    for (int f = 0; f < F; f++)
        for (int g = 0; g < 2; g++) {
            double m = 0;
            for (int c = 0; c < 384; c++)
                m += x[f * N + g * 384 + c];
            CHECK(fabs(m / 384) < 1e-3);
        }
    for (int c = 0; c < N; c++)
        x[c] = c < 384 ? 1.0f : 3.0f;
    loop_ephys_reference(x, N, 0, 1); /* one average: 2 */
    CHECK(x[0] == -1.0f && x[500] == 1.0f);
    lay.group = 500;
    CHECK(!loop_ephys_layout_ok(&lay));
    lay.group = 24; /* 32 groups: more than LOOP_EPHYS_MAXGROUPS */
    CHECK(!loop_ephys_layout_ok(&lay));
    lay.group = 0;
    CHECK(loop_ephys_layout_ok(&lay));
}

/* Run the CPU pipeline over synthetic data; returns the score. */
static void run_synth(uint32_t nprobes, uint32_t block, int gpu, struct loop_score *sc, int *skipped)
{
    struct loop_ephys_params p;
    loop_ephys_defaults(&p);
    struct loop_synth *sy = calloc(1, sizeof *sy);
    struct loop_ephys_state *st = calloc(1, sizeof *st), *st2 = calloc(1, sizeof *st2);
    struct loop_ephys_out *out = calloc(1, sizeof *out), *out2 = calloc(1, sizeof *out2);
    struct loop_spike *det = calloc(100000, sizeof *det);
    uint8_t *blk = malloc((size_t)block * nprobes * loop_np2e_read_stride(LOOP_NP2E_PAYLOAD));
    *skipped = 0;
    if (!sy || !st || !st2 || !out || !out2 || !det || !blk) {
        CHECK(0);
        goto done;
    }
    loop_synth_init(sy, nprobes, 40.0, 42);
    CHECK_RC(loop_ephys_init(st, &p, &sy->lay), ONI_ESUCCESS);
    *st2 = *st;
    size_t nd = 0;
    int mism = 0;
    uint64_t blocks = 30000 * 2 / block; /* two seconds */
    for (uint64_t b = 0; b < blocks; b++) {
        loop_synth_block(sy, blk, block);
        loop_ephys_cpu(st, blk, block, out);
        for (uint32_t i = 0; i < out->nspikes && nd < 100000; i++)
            det[nd++] = out->spikes[i];
        if (gpu) {
            int rc = loop_gpu_ephys_once(st2, blk, block, out2);
            if (rc == ONI_ENOGPU) {
                *skipped = 1;
                goto done;
            }
            REQUIRE(rc == 0);
            /* Same spikes (as sets: the GPU lists them in arrival order; a
             * block that overflows lists different subsets, kernels.h). */
            if (out2->nspikes != out->nspikes || out2->overflow != out->overflow ||
                (out->nspikes && out2->t_first != out->t_first))
                mism++;
            for (uint32_t i = 0; !out->overflow && i < out->nspikes; i++) {
                int found = 0;
                for (uint32_t j = 0; j < out2->nspikes; j++)
                    found |= out2->spikes[j].time == out->spikes[i].time && out2->spikes[j].chan == out->spikes[i].chan;
                mism += !found;
            }
        }
    }
    if (gpu) {
        CHECK_EQ(mism, 0);
        CHECK(!memcmp(st->thr, st2->thr, sizeof st->thr));
    }
    uint64_t tol = (uint64_t)(LOOP_SCORE_WINDOW_S * 250e6); /* synth.h: a 250 MHz clock */
    uint64_t t_lo = (uint64_t)st->calib * sy->ticks_per_sample + tol, t_hi = (sy->n - 64) * sy->ticks_per_sample;
    CHECK_EQ(loop_score_spikes(sy->truth, sy->ntruth, det, nd, tol, LOOP_SCORE_RADIUS_UM, t_lo, t_hi, sc), 0);
done:
    free(sy);
    free(st);
    free(st2);
    free(out);
    free(out2);
    free(det);
    free(blk);
}

TEST(detector_finds_synthetic_spikes)
{
    struct loop_score sc;
    int skipped;
    run_synth(1, 16, 0, &sc, &skipped);
    fprintf(stderr, "  events %llu detections %llu: tp %llu fp %llu missed %llu, precision %.3f recall %.3f F1 %.3f\n",
            (unsigned long long)sc.events, (unsigned long long)sc.detections, (unsigned long long)sc.tp,
            (unsigned long long)sc.fp, (unsigned long long)sc.misses, sc.precision, sc.recall, sc.f1);
    CHECK(sc.events > 40);
    /* One to one (score.h): a synthetic spike crosses the threshold on its
     * centre channel and both neighbours (synth.h), 3 detections, so the
     * precision is about 1/3 (0.323-0.331 measured); below 0.28, detections
     * were lost or false ones added. */
    CHECK(sc.recall >= 0.95);
    CHECK(sc.precision >= 0.28);
}

/* A new k after calibration rescales the thresholds already set (the
 * live view changes it while the loop runs): double k, double thresholds;
 * channels not yet calibrated stay 0. */
TEST(new_k_after_calibration_moves_the_thresholds)
{
    struct loop_ephys_params p;
    loop_ephys_defaults(&p);
    struct loop_synth *sy = calloc(1, sizeof *sy);
    struct loop_ephys_state *st = calloc(1, sizeof *st);
    struct loop_ephys_out *out = calloc(1, sizeof *out);
    REQUIRE(sy && st && out);
    loop_synth_init(sy, 1, 40.0, 7);
    uint8_t *blk = malloc(32u * sy->lay.stride);
    REQUIRE(blk);
    CHECK_RC(loop_ephys_init(st, &p, &sy->lay), ONI_ESUCCESS);
    for (uint32_t n = 0; n < st->calib + 64; n += 32) {
        loop_synth_block(sy, blk, 32);
        loop_ephys_cpu(st, blk, 32, out);
    }
    float before[LOOP_EPHYS_MAXCHAN];
    memcpy(before, st->thr, sizeof before);
    REQUIRE(before[0] > 0.0f && before[0] < 1e30f);
    CHECK_RC(loop_ephys_set_detect(st, 2 * p.k, p.refractory_s, p.calib_s, p.fs_hz), ONI_ESUCCESS);
    int off = 0;
    for (uint32_t c = 0; c < sy->lay.nchan; c++)
        off += fabsf(st->thr[c] - 2.0f * before[c]) > 1e-5f * before[c];
    CHECK_EQ(off, 0);
    free(sy);
    free(st);
    free(out);
    free(blk);
}

TEST(refractory_period_holds)
{
    struct loop_ephys_params p;
    loop_ephys_defaults(&p);
    p.calib_s = 0.01;
    p.radius = 0; /* each channel by its own rule: CAR makes the others cross too */
    struct loop_ephys_layout lay = test_layout(4, 24);
    struct loop_ephys_state *st = calloc(1, sizeof *st);
    struct loop_ephys_out *out = calloc(1, sizeof *out);
    REQUIRE(st && out);
    REQUIRE(loop_ephys_init(st, &p, &lay) == 0);
    uint8_t blk[64 * 24];
    uint64_t seed = 5, last_spike = 0, n = 0;
    int spikes = 0, violations = 0;
    for (int b = 0; b < 400; b++) {
        for (int f = 0; f < 64; f++, n++) {
            uint8_t *fr = blk + f * 24;
            memcpy(fr, &n, 8);
            for (int c = 0; c < 4; c++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                int v = (int)(seed >> 58) - 32;
                /* channel 0 gets a 3 kHz burst of large oscillation every 100 ms */
                if (c == 0 && n > 600 && n % 3000 < 60)
                    v = (int)(2000 * sin(2 * M_PI * 3000.0 * n / 30000.0));
                test_put(fr, (uint32_t)c, v);
            }
        }
        loop_ephys_cpu(st, blk, 64, out);
        for (uint32_t i = 0; i < out->nspikes; i++) {
            if (out->spikes[i].chan != 0)
                continue;
            if (spikes && out->spikes[i].time - last_spike < st->refractory)
                violations++;
            last_spike = out->spikes[i].time;
            spikes++;
        }
    }
    CHECK_EQ(violations, 0);
    /* 8 bursts of 60 samples (plus filter ringing) with a 30-sample dead
     * time: at least one spike per burst, at most one per 30 samples of it. */
    fprintf(stderr, "  channel 0: %d spikes\n", spikes);
    CHECK(spikes >= 8 && spikes <= 32);
    free(st);
    free(out);
}

/* kernels.h: a block's spikes are listed by frame, then channel (so a block
 * that overflows lists its earliest). Synthetic spikes hit a channel and its
 * neighbours, which cross the threshold a sample or two apart. */
TEST(spikes_listed_by_frame_then_channel)
{
    struct loop_synth *sy = calloc(1, sizeof *sy);
    struct loop_ephys_state *st = calloc(1, sizeof *st);
    struct loop_ephys_out *out = calloc(1, sizeof *out);
    uint8_t *blk = NULL;
    REQUIRE(sy && st && out);
    REQUIRE(loop_synth_init(sy, 1, 200.0, 3) == 0);
    struct loop_ephys_params p;
    loop_ephys_defaults(&p);
    p.radius = 0; /* every crossing listed (locally_exclusive_detection: with the rule on) */
    REQUIRE(loop_ephys_init(st, &p, &sy->lay) == 0);
    blk = malloc((size_t)16 * sy->lay.stride);
    REQUIRE(blk);
    uint64_t pairs = 0, unordered = 0;
    for (int b = 0; b < 30000 * 2 / 16; b++) {
        loop_synth_block(sy, blk, 16);
        loop_ephys_cpu(st, blk, 16, out);
        for (uint32_t i = 1; i < out->nspikes; i++, pairs++) {
            const struct loop_spike *a = &out->spikes[i - 1], *z = &out->spikes[i];
            unordered += a->frame > z->frame || (a->frame == z->frame && a->chan >= z->chan);
        }
    }
    fprintf(stderr, "  %llu neighbouring pairs, %llu out of order\n", (unsigned long long)pairs,
            (unsigned long long)unordered);
    CHECK(pairs > 100);
    CHECK_EQ(unordered, 0);
    free(sy);
    free(st);
    free(out);
    free(blk);
}

/* Without noise and hum the synthetic signal is the spikes alone: each truth
 * row's channel has the trough at the peak and the rebound's last sample
 * 15 samples later (the waveform window is +-15), before the next spike is
 * drawn, read back through the super-frame's channel map; the headers are
 * the real super-frame's (probe index, hub clock = the read frame's time). */
TEST(synth_spike_waveform_is_whole)
{
    struct loop_synth *sy = calloc(1, sizeof *sy);
    REQUIRE(sy);
    REQUIRE(loop_synth_init(sy, 2, 300.0, 7) == 0);
    CHECK_EQ(sy->lay.stride, 2 * (16 + 1164)); /* two 1162-byte payloads, padded */
    CHECK_EQ(sy->lay.nchan, 768);
    sy->noise_sd = 0;
    sy->hum_amp = 0;
    enum { N = 30000 };
    uint8_t *blk = malloc((size_t)N * sy->lay.stride);
    REQUIRE(blk);
    loop_synth_block(sy, blk, N);
    REQUIRE(sy->ntruth > 100);
    CHECK_EQ(loop_np2e_check_lanes((const struct loop_np2e_lane[]){{0, 0}, {0, 1}}, 2, sy->lay.stride / 2, blk, N), -1);
    int bad = 0;
    for (size_t i = 0; i < sy->ntruth; i++) {
        uint64_t k = sy->truth[i].time / sy->ticks_per_sample;
        REQUIRE(k + 15 < N);
        uint16_t peak, last;
        memcpy(&peak, blk + k * sy->lay.stride + sy->lay.off[sy->truth[i].chan], 2);
        memcpy(&last, blk + (k + 15) * sy->lay.stride + sy->lay.off[sy->truth[i].chan], 2);
        bad += peak > 2048 - 200 || last < 2048 + 50;
        uint64_t hub, t;
        uint32_t probe_rs = sy->truth[i].chan / 384 * (16 + 1164);
        memcpy(&t, blk + k * sy->lay.stride + probe_rs, 8);
        memcpy(&hub, blk + k * sy->lay.stride + probe_rs + 16, 8);
        bad += hub != sy->truth[i].time || t != hub;
    }
    CHECK_EQ(bad, 0);
    free(blk);
    free(sy);
}

/* Two channels (CAR needs two): small noise through calibration, then a
 * 3 kHz sine of amplitude 2000 on channel 0 from its trough at sample `from`
 * (channel 1 silent: after CAR it carries minus half of channel 0). The sine
 * repeats every 10 samples, so channel 0 is over its threshold at the same
 * phase every refractory period (30 samples) and fires exactly that far apart.
 * dead: a state whose calibration saw nothing (its histograms empty, as a
 * state made elsewhere than loop_ephys_init may be): no channel has a noise
 * level, and none fires. Returns the number of
 * channel-0 spikes in n samples; first and the smallest gap through *first, *gap. */
static int sine_spikes(int dead, uint64_t from, uint64_t n, struct loop_ephys_state *st, uint64_t *first, uint64_t *gap)
{
    struct loop_ephys_params p;
    loop_ephys_defaults(&p);
    p.calib_s = 0; /* the least: 100 samples */
    p.refractory_s = 1e-3; /* 30 samples, three periods of the sine */
    struct loop_ephys_layout lay = test_layout(2, 20);
    struct loop_ephys_out *out = calloc(1, sizeof *out);
    if (!out || loop_ephys_init(st, &p, &lay))
        return -1;
    if (dead)
        st->nsamples = st->calib;
    uint8_t blk[50 * 20];
    uint64_t seed = 11, last = 0;
    int spikes = 0;
    *first = *gap = UINT64_MAX;
    for (uint64_t i = 0; i < n; i += 50) {
        for (uint64_t f = 0; f < 50; f++) {
            uint64_t k = i + f;
            uint8_t *fr = blk + f * 20;
            memcpy(fr, &k, 8);
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            int v0 = (int)(seed >> 58) - 32;
            if (k >= from)
                v0 = (int)lround(-2000 * cos(2 * M_PI * (double)(k - from) / 10));
            test_put(fr, 0, v0);
            test_put(fr, 1, 0);
        }
        loop_ephys_cpu(st, blk, 50, out);
        for (uint32_t j = 0; j < out->nspikes; j++) {
            if (out->spikes[j].chan != 0)
                continue;
            uint64_t t = out->spikes[j].time;
            if (spikes && t - last < *gap)
                *gap = t - last;
            if (!spikes)
                *first = t;
            last = t;
            spikes++;
        }
    }
    free(out);
    return spikes;
}

TEST(detection_starts_right_after_calibration_and_refires_after_refractory)
{
    struct loop_ephys_state *st = calloc(1, sizeof *st);
    REQUIRE(st);
    uint64_t first, gap;
    int n = sine_spikes(0, 100, 3000, st, &first, &gap);
    CHECK_EQ(st->calib, 100);
    CHECK_EQ(st->refractory, 30);
    CHECK(n >= 90); /* about one per 30 samples over 2900 */
    CHECK_EQ(first, st->calib); /* the first sample past calibration, at the sine's trough */
    CHECK_EQ(gap, st->refractory);
    /* no calibration samples: every channel dead, none fires */
    CHECK_EQ(sine_spikes(1, 100, 3000, st, &first, &gap), 0);
    free(st);
}

/* One spike, one detection, one stimulus (issue 23 item 7). The emulated
 * card's waveform (src/emu/neural.c: a trough of sigma 3 samples, a positive
 * lobe of 0.29 of its depth 12 samples later, sigma 8), 16 noise SDs deep
 * on its centre channel and 0.6, 0.7, 0.4 of that on three neighbours, as
 * the card spreads a unit; one spike every 10 ms, on the synthetic probe's
 * noise and hum, in blocks of 16 frames. After the 300 Hz high-pass, the
 * trough is followed by a positive overshoot still above 5 SDs after the
 * 1 ms refractory period: a detector of |x| fires on it again. Each spike
 * must give exactly one detection on its centre channel, none in the 3 ms
 * after it on any of its channels, and exactly one stimulation. */
static double emu_wave(int d)
{
    double a = d / 3.0, b = (d - 12) / 8.0;
    return -exp(-a * a / 2) + 300.0 / 1024.0 * exp(-b * b / 2);
}

TEST(one_spike_one_detection_one_stimulus)
{
    enum { B = 16, NB = 30000 * 2 / B, PERIOD = 300, CH = 100 };
    static const double fall[4] = {0.6, 1.0, 0.7, 0.4};
    struct loop_synth *sy = calloc(1, sizeof *sy);
    struct loop_ephys_state *st = calloc(1, sizeof *st);
    struct loop_ephys_out *out = calloc(1, sizeof *out);
    uint8_t *blk = malloc((size_t)B * 1180);
    REQUIRE(sy && st && out && blk);
    REQUIRE(loop_synth_init(sy, 1, 0.001, 3) == 0);
    sy->spike_amp = 0; /* its own spikes off: the noise and hum only */
    REQUIRE(sy->lay.stride == 1180);
    struct loop_ephys_params p;
    loop_ephys_defaults(&p);
    REQUIRE(loop_ephys_init(st, &p, &sy->lay) == 0);
    uint64_t first = st->calib + PERIOD; /* troughs at first + i * PERIOD */
    uint64_t nspk = 0, centre = 0, again = 0, stims = 0, extra_stims = 0;
    uint64_t stim_of[NB * B / PERIOD + 1] = {0}, det_of[NB * B / PERIOD + 1] = {0};
    for (uint64_t b = 0; b < NB; b++) {
        loop_synth_block(sy, blk, B);
        for (uint32_t f = 0; f < B; f++) {
            uint64_t k = b * B + f;
            int d = k >= first ? (int)((k - first + PERIOD / 2) % PERIOD) - PERIOD / 2 : 1000;
            if (d < -20 || d > 40)
                continue;
            for (int j = 0; j < 4; j++) {
                uint8_t *s = blk + (size_t)f * sy->lay.stride + sy->lay.off[CH + j];
                uint16_t v;
                memcpy(&v, s, 2);
                v = (uint16_t)lrint(v + 16 * sy->noise_sd * fall[j] * emu_wave(d));
                memcpy(s, &v, 2);
            }
        }
        loop_ephys_cpu(st, blk, B, out);
        for (uint32_t i = 0; i < out->nspikes; i++) {
            uint64_t k = out->spikes[i].time / sy->ticks_per_sample;
            if (k + 20 < first || k + 40 >= (uint64_t)NB * B || out->spikes[i].chan < CH || out->spikes[i].chan >= CH + 4)
                continue;
            int64_t d = (int64_t)((k - first + 20) % PERIOD) - 20; /* from the nearest trough before */
            if (d > 5) {
                again++; /* after the spike's own crossing: a re-trigger */
            } else {
                uint64_t n = (k + 20 - first) / PERIOD;
                if (n < sizeof det_of / sizeof det_of[0])
                    det_of[n]++;
                centre += out->spikes[i].chan == CH + 1;
            }
        }
        if (out->stim) {
            uint64_t k = out->t_stim / sy->ticks_per_sample;
            uint64_t n = (k + 20 - first) / PERIOD, d = (k + 20 - first) % PERIOD;
            stims++;
            if (k + 20 >= first && d <= 60 && n < sizeof stim_of / sizeof stim_of[0] && stim_of[n]++)
                extra_stims++; /* a second stimulation for spike n (-20 .. +40 samples of its trough) */
        }
    }
    uint64_t once = 0;
    for (uint64_t k = first; k + 20 + 40 < (uint64_t)NB * B; k += PERIOD)
        once += det_of[nspk++] == 1;
    fprintf(stderr, "  %llu spikes: %llu detected once (%llu on the centre channel), %llu re-triggers, "
            "%llu stimulations (%llu extra)\n", (unsigned long long)nspk, (unsigned long long)once,
            (unsigned long long)centre, (unsigned long long)again, (unsigned long long)stims,
            (unsigned long long)extra_stims);
    CHECK(nspk > 150);
    CHECK_EQ(once, nspk);        /* four channels, one detection (the exclusive rule) */
    CHECK(centre >= nspk * 3 / 4); /* mostly the deepest channel's */
    CHECK_EQ(again, 0);
    CHECK_EQ(extra_stims, 0);
    CHECK(stims >= nspk); /* one each; noise may add a few of its own */
    CHECK(stims <= nspk + nspk / 50);
    free(sy);
    free(st);
    free(out);
    free(blk);
}

/* The locally exclusive rule (kernels.h): a spike seen on four neighbouring
 * channels is one detection, on the deepest of the first frame to cross;
 * one beyond the radius, or after the sweep, is a detection of its own;
 * radius 0 keeps every crossing. Troughs are written straight into the
 * samples the rule sees (x), as detect receives them. */
static uint32_t exclusive_count(uint32_t radius, const int *chans, const float *depth, int n, const uint32_t *frames,
                                struct loop_ephys_out *out)
{
    struct loop_ephys_params p;
    loop_ephys_defaults(&p);
    p.calib_s = 0;
    p.radius = radius;
    struct loop_ephys_layout lay = test_layout(16, 16 + 2 * 16);
    static struct loop_ephys_state st;
    static float x[40 * 16];
    static uint8_t blk[40 * 48];
    if (loop_ephys_init(&st, &p, &lay)) {
        UNIT_FAIL("loop_ephys_init");
        return 0;
    }
    st.nsamples = st.calib; /* calibrated already: */
    for (int c = 0; c < 16; c++)
        st.thr[c] = 10.0f;
    for (uint64_t f = 0; f < 40; f++)
        memcpy(blk + f * 48, &f, 8);
    memset(x, 0, sizeof x);
    for (int i = 0; i < n; i++)
        x[frames[i] * 16 + (uint32_t)chans[i]] = depth[i];
    loop_ephys_out_reset(out);
    loop_ephys_detect(&st, x, 40, blk, 0, out);
    return out->nspikes;
}

TEST(locally_exclusive_detection)
{
    struct loop_ephys_out *out = calloc(1, sizeof *out);
    REQUIRE(out);
    /* one spike on channels 4-7, crossing at frames 5-6, deepest on 5 */
    const int ch[] = {4, 5, 6, 7, 4, 7};
    const float dep[] = {-12, -20, -15, -11, -30, -30};
    const uint32_t fr[] = {5, 5, 6, 6, 6, 7};
    CHECK_EQ(exclusive_count(3, ch, dep, 4, fr, out), 1);
    CHECK(out->spikes[0].chan == 5 && out->spikes[0].frame == 5 && out->t_first == 5);
    CHECK_EQ(exclusive_count(0, ch, dep, 4, fr, out), 4); /* the rule off */
    CHECK_EQ(exclusive_count(1, ch, dep, 4, fr, out), 2); /* 5 covers 4-6; 7 is past it */
    CHECK(out->spikes[0].chan == 5 && out->spikes[1].chan == 7);
    /* two spikes at once, 8 channels apart: both; listed by channel */
    const int ch2[] = {12, 3};
    const float dep2[] = {-40, -20};
    const uint32_t fr2[] = {9, 9};
    CHECK_EQ(exclusive_count(3, ch2, dep2, 2, fr2, out), 2);
    CHECK(out->spikes[0].chan == 3 && out->spikes[1].chan == 12);
    /* a second spike on a neighbour 20 frames later (past the 15-sample sweep): kept */
    const int ch3[] = {5, 6};
    const float dep3[] = {-20, -20};
    const uint32_t fr3[] = {5, 25};
    CHECK_EQ(exclusive_count(3, ch3, dep3, 2, fr3, out), 2);
    const uint32_t fr4[] = {5, 15}; /* 10 frames later: within the sweep, dropped */
    CHECK_EQ(exclusive_count(3, ch3, dep3, 2, fr4, out), 1);
    free(out);
}

/* More spikes in a block than the list holds: the list is full, the rest
 * counted. */
TEST(spike_list_overflow_is_counted)
{
    struct loop_ephys_params p;
    loop_ephys_defaults(&p);
    p.calib_s = 0;
    p.refractory_s = 1e-3; /* 30 samples: 6 crossings of each channel a block */
    p.radius = 0;          /* every crossing listed */
    enum { C = 64, F = 200 };
    struct loop_ephys_layout lay = test_layout(C, 16 + 2 * C);
    struct loop_ephys_state *st = calloc(1, sizeof *st);
    struct loop_ephys_out *out = calloc(1, sizeof *out);
    uint8_t *blk = malloc((size_t)F * lay.stride);
    REQUIRE(st && out && blk);
    REQUIRE(loop_ephys_init(st, &p, &lay) == 0);
    uint64_t seed = 3;
    uint64_t listed = 0, overflow = 0;
    for (uint64_t b = 0; b < 5; b++) {
        for (uint64_t f = 0; f < F; f++) {
            uint64_t k = b * F + f;
            uint8_t *fr = blk + f * lay.stride;
            memcpy(fr, &k, 8);
            for (int c = 0; c < C; c++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                int v = (int)(seed >> 58) - 32;
                if (k >= 100 && c % 2 == 0) /* half the channels oscillate: CAR leaves them */
                    v = (int)lround(2000 * cos(2 * M_PI * (double)(k - 100) / 10));
                test_put(fr, (uint32_t)c, v);
            }
        }
        loop_ephys_cpu(st, blk, F, out);
        CHECK(out->nspikes <= LOOP_EPHYS_MAXSPIKES);
        listed += out->nspikes;
        overflow += out->overflow;
    }
    CHECK(overflow > 0);
    CHECK(listed >= 4 * LOOP_EPHYS_MAXSPIKES);
    free(st);
    free(out);
    free(blk);
}

/* The kernels' parameter and layout edges, and the median of a few samples. */
TEST(ephys_edges)
{
    struct loop_ephys_params p;
    loop_ephys_defaults(&p);
    struct loop_ephys_state *st = calloc(1, sizeof *st);
    REQUIRE(st);
    struct loop_ephys_layout lay = test_layout(4, 24);
    lay.off[3] = 17; /* an odd offset: samples are 16-bit */
    CHECK_RC(loop_ephys_init(st, &p, &lay), ONI_EINVALARG);
    lay.off[3] = 23; /* past the stride */
    CHECK_RC(loop_ephys_init(st, &p, &lay), ONI_EINVALARG);
    lay = test_layout(4, 26); /* a stride of no whole 32-bit words */
    CHECK_RC(loop_ephys_init(st, &p, &lay), ONI_EINVALARG);
    lay = test_layout(4, 24);
    lay.time_off = 2; /* a timestamp the GPU cannot load in 32-bit words */
    CHECK_RC(loop_ephys_init(st, &p, &lay), ONI_EINVALARG);
    lay.time_off = 20; /* a timestamp past the stride */
    CHECK_RC(loop_ephys_init(st, &p, &lay), ONI_EINVALARG);
    lay = test_layout(4, 24); /* the samples end at the stride */
    CHECK_RC(loop_ephys_init(st, &p, &lay), ONI_ESUCCESS);
    p.hi_hz = p.fs_hz / 2; /* Nyquist itself */
    CHECK_RC(loop_ephys_init(st, &p, &lay), ONI_EINVALARG);
    free(st);
    uint32_t hist[LOOP_EPHYS_BINS] = {0};
    CHECK(loop_ephys_hist_median(hist, 0) == 0.0f); /* nothing counted */
    hist[loop_ephys_bin(1.0f)]++;
    hist[loop_ephys_bin(2.0f)]++;
    hist[loop_ephys_bin(4.0f)]++;
    CHECK(loop_ephys_hist_median(hist, 3) == loop_ephys_bin_value(loop_ephys_bin(2.0f)));
    /* the first value past the last bin's own range is still in the last bin */
    uint32_t bits = (LOOP_EPHYS_BINS + ((127u - 16u) << 3)) << 20;
    float past;
    memcpy(&past, &bits, 4);
    CHECK_EQ(loop_ephys_bin(past), LOOP_EPHYS_BINS - 1);
    bits -= 1u << 20;
    memcpy(&past, &bits, 4);
    CHECK_EQ(loop_ephys_bin(past), LOOP_EPHYS_BINS - 1);
}

TEST(gpu_kernels_match_cpu)
{
    struct loop_score sc;
    int skipped;
    char why[160];
    if (!loop_backend_available(LOOP_GPU_DIRECT, why, sizeof why))
        SKIP("%s", why);
    /* One probe: 1180-byte super-frames, every other hub clock only 4-byte
     * aligned (a 64-bit load of such a timestamp faulted on the GPU until the
     * eighth session of 2026-11-24); two probes: 768 channels. */
    static const uint32_t nprobes[] = {1, 2};
    for (int i = 0; i < 2; i++) {
        run_synth(nprobes[i], 32, 1, &sc, &skipped);
        /* loop_backend_available said the GPU is there: ONI_ENOGPU now is a failure */
        if (skipped) {
            UNIT_FAIL("ONI_ENOGPU after loop_backend_available(LOOP_GPU_DIRECT) said yes");
            return;
        }
    }
    enum { N = 1 << 16 };
    float *in = malloc(N * 4), *a = malloc(N * 4), *b = malloc(N * 4);
    REQUIRE(in && a && b);
    loop_fill_floats(NULL, 1, in, N * 4);
    loop_mac_cpu(in, a, N, 40, 3, 0.1f);
    CHECK_RC(bench_gpu_mac_once(in, b, N, 40, 3, 0.1f), ONI_ESUCCESS);
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += !(fabsf(a[i] - b[i]) <= 1e-6f * fabsf(a[i])); /* a NaN is a mismatch */
    CHECK_EQ(bad, 0);
    free(in);
    free(a);
    free(b);
}

/* Without CUDA the GPU timings and the one-shot MAC say so (ONI_ENOGPU). */
TEST(bench_gpu_parts_answer_enogpu_without_cuda)
{
    if (ONIGPU_HAVE_CUDA)
        SKIP("built with CUDA");
    float in[16] = {0}, out[16];
    double s = 1;
    CHECK_RC(bench_gpu_mac_once(in, out, 16, 1, 1, 0.1f), ONI_ENOGPU);
    CHECK_RC(bench_gpu_time_mac(16, 1, 1, 1, &s), ONI_ENOGPU);
    CHECK_RC(bench_gpu_time_copy(64, 1, &s), ONI_ENOGPU);
}
