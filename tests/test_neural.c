/* test_neural.c - the synthetic Neuropixels signal (src/emu/neural.c,
 * docs/emulator.md "Neural data"), measured from the samples it generates:
 * the noise's spectrum and band powers, the LFP's spatial correlation, the
 * common-mode's correlation, the line peak, the ADC sampling skew, the units'
 * footprints and SNR, rates, refractoriness and bursts, drift, saturation,
 * the stimulus artefact, the truth templates' files, reproducibility. */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>
#include "emu/headstages.h"
#include "emu/neural.h"
#include "oni/util/npy.h"
#include "oni/util/probe.h"
#include "test_emu_util.h"
#include "unit.h"

#define FS 30000.0
#define NCH 384
#define UV (1e6 / 80 / 4096) /* NP2.0: uV per code */

static struct emu_card *quiet_card(unsigned seed)
{
    char spec[64];
    snprintf(spec, sizeof spec, "mode=fast;seed=%u;devices=heartbeat", seed);
    return card_open(spec);
}

/* The NP2.0 probe's defaults with everything but the channels' own noise off. */
static struct neural_cfg bare(void)
{
    struct neural_cfg c;
    np2e_signal(&c);
    c.units = 0, c.lfp_uv = 0, c.cm_uv = 0, c.line_uv = 0, c.offset_uv = 0, c.artefact_hz = 0, c.stim_uv = 0;
    c.drift_um = 0;
    return c;
}

/* ns samples of the channels chs[0..nc) into x[c][ns], in uV around 0 V. */
static int gen(struct neural *n, const uint32_t *chs, int nc, size_t ns, double **x)
{
    uint16_t s[NCH];
    for (size_t k = 0; k < ns; k++) {
        neural_sample(n, s, k * (EMU_ACQ_HZ / 30000));
        for (int c = 0; c < nc; c++)
            x[c][k] = ((double)s[chs[c]] - 2048) * UV;
    }
    return 0;
}

static double **alloc2(int rows, size_t cols)
{
    double **x = calloc((size_t)rows, sizeof *x);
    for (int i = 0; x && i < rows; i++)
        if (!(x[i] = calloc(cols, sizeof **x)))
            return NULL;
    return x;
}

static void free2(double **x, int rows)
{
    for (int i = 0; x && i < rows; i++)
        free(x[i]);
    free(x);
}

/* --- spectra: Welch's method, Hann windows of SEG samples, half overlap --- */
#define SEG 4096

static void fft(double *re, double *im, int n)
{
    for (int i = 1, j = 0; i < n; i++) {
        int bit = n >> 1;
        for (; j & bit; bit >>= 1)
            j ^= bit;
        j ^= bit;
        if (i < j) {
            double t = re[i];
            re[i] = re[j], re[j] = t;
            t = im[i], im[i] = im[j], im[j] = t;
        }
    }
    for (int len = 2; len <= n; len <<= 1) {
        double a = -2 * M_PI / len;
        for (int i = 0; i < n; i += len)
            for (int k = 0; k < len / 2; k++) {
                double wr = cos(a * k), wi = sin(a * k);
                double ur = re[i + k], ui = im[i + k];
                double vr = re[i + k + len / 2] * wr - im[i + k + len / 2] * wi;
                double vi = re[i + k + len / 2] * wi + im[i + k + len / 2] * wr;
                re[i + k] = ur + vr, im[i + k] = ui + vi;
                re[i + k + len / 2] = ur - vr, im[i + k + len / 2] = ui - vi;
            }
    }
}

/* One-sided PSD (uV^2/Hz) of x[0..ns), added into psd[SEG/2 + 1]. */
static void welch(const double *x, size_t ns, double *psd)
{
    static double re[SEG], im[SEG], sum[SEG / 2 + 1];
    memset(sum, 0, sizeof sum);
    double wsum = 0;
    for (int i = 0; i < SEG; i++) {
        double w = 0.5 - 0.5 * cos(2 * M_PI * i / SEG);
        wsum += w * w;
    }
    int segs = 0;
    for (size_t at = 0; at + SEG <= ns; at += SEG / 2, segs++) {
        double mean = 0;
        for (int i = 0; i < SEG; i++)
            mean += x[at + i] / SEG;
        for (int i = 0; i < SEG; i++) {
            re[i] = (x[at + i] - mean) * (0.5 - 0.5 * cos(2 * M_PI * i / SEG));
            im[i] = 0;
        }
        fft(re, im, SEG);
        for (int k = 0; k <= SEG / 2; k++)
            sum[k] += (re[k] * re[k] + im[k] * im[k]) / (FS * wsum) * (k && k < SEG / 2 ? 2 : 1);
    }
    for (int k = 0; k <= SEG / 2 && segs; k++)
        psd[k] += sum[k] / segs;
}

static double band_power(const double *psd, double f0, double f1)
{
    double df = FS / SEG, p = 0;
    for (int k = 1; k < SEG / 2; k++)
        if (k * df >= f0 && k * df < f1)
            p += psd[k] * df;
    return p;
}

static double band_mean(const double *psd, double f0, double f1)
{
    double df = FS / SEG, p = 0;
    int n = 0;
    for (int k = 1; k < SEG / 2; k++)
        if (k * df >= f0 && k * df < f1)
            p += psd[k], n++;
    return n ? p / n : 0;
}

static double corr(const double *a, const double *b, size_t n)
{
    double ma = 0, mb = 0, sab = 0, saa = 0, sbb = 0;
    for (size_t i = 0; i < n; i++)
        ma += a[i] / n, mb += b[i] / n;
    for (size_t i = 0; i < n; i++) {
        sab += (a[i] - ma) * (b[i] - mb);
        saa += (a[i] - ma) * (a[i] - ma);
        sbb += (b[i] - mb) * (b[i] - mb);
    }
    return saa > 0 && sbb > 0 ? sab / sqrt(saa * sbb) : 0;
}

/* The channels' own noise: a white AP band of noise_uv rms (300 Hz - 10
 * kHz), a 1/f rise below it, Gaussian tails, drawn fresh (no table: no
 * repetition at the old table's period). */
TEST(neural_noise_spectrum_and_tails)
{
    struct emu_card *c = quiet_card(3);
    REQUIRE(c);
    static struct neural n;
    struct neural_cfg cfg = bare();
    REQUIRE(neural_init(&n, c, 8, 0, NCH, 30000, 0, 4095, 2048, &cfg) == 0);
    enum { NC = 6 };
    const uint32_t chs[NC] = {5, 70, 141, 200, 299, 383};
    const size_t ns = 1 << 16;
    double **x = alloc2(NC, ns);
    REQUIRE(x);
    gen(&n, chs, NC, ns, x);
    static double psd[SEG / 2 + 1];
    memset(psd, 0, sizeof psd);
    for (int i = 0; i < NC; i++)
        welch(x[i], ns, psd);
    for (int k = 0; k <= SEG / 2; k++)
        psd[k] /= NC;
    double ap = sqrt(band_power(psd, 300, 10000));
    if (!(ap > 7.0 * 0.9 && ap < 7.0 * 1.1))
        UNIT_FAIL("AP-band noise %.2f uV rms, want 7 +- 10%%", ap);
    /* 1/f below ~300 Hz: the log-log slope over 30-150 Hz */
    double sx = 0, sy = 0, sxx = 0, sxy = 0, df = FS / SEG;
    int m = 0;
    for (int k = 1; k < SEG / 2; k++)
        if (k * df >= 30 && k * df < 150) {
            double lx = log(k * df), ly = log(psd[k]);
            sx += lx, sy += ly, sxx += lx * lx, sxy += lx * ly, m++;
        }
    double slope = (m * sxy - sx * sy) / (m * sxx - sx * sx);
    if (!(slope > -1.4 && slope < -0.6))
        UNIT_FAIL("spectrum slope %.2f over 30-150 Hz, want 1/f (-1 +- 0.4)", slope);
    double flat = band_mean(psd, 1000, 2000) / band_mean(psd, 2000, 4000);
    if (!(flat > 0.9 && flat < 1.4))
        UNIT_FAIL("AP band not flat: PSD 1-2 kHz / 2-4 kHz = %.2f", flat);
    double rise = band_mean(psd, 25, 35) / band_mean(psd, 1000, 2000);
    fprintf(stderr, "  AP band %.2f uV rms, slope %.2f (30-150 Hz), PSD 1-2k/2-4k %.2f, 30 Hz/1-2k %.1f\n", ap, slope,
            flat, rise);
    if (!(rise > 4))
        UNIT_FAIL("no 1/f rise: PSD at 30 Hz / 1-2 kHz = %.2f", rise);
    /* fresh noise: no table's period (the old one: 32768 samples) */
    CHECK(fabs(corr(x[0], x[0] + 32768, ns - 32768)) < 0.05);
    /* Gaussian tails in the AP band (x less its 1 ms mean): past 4.3 SD somewhere */
    double s2 = 0, peak = 0;
    size_t cnt = 0;
    for (int i = 0; i < NC; i++)
        for (size_t k = 30; k < ns; k++) {
            double mean = 0;
            for (int j = 1; j <= 30; j++)
                mean += x[i][k - j] / 30;
            double h = x[i][k] - mean;
            s2 += h * h, cnt++;
            if (fabs(h) > peak)
                peak = fabs(h);
        }
    double sd = sqrt(s2 / cnt);
    if (!(peak > 4.3 * sd))
        UNIT_FAIL("largest AP-band excursion %.2f SD in %zu samples: tails cut", peak / sd, cnt);
    free2(x, NC);
    neural_fini(&n);
    emu_card_destroy(c);
}

/* The LFP is shared by neighbouring sites, not by distant ones. */
TEST(neural_lfp_is_spatially_smooth)
{
    struct emu_card *c = quiet_card(4);
    REQUIRE(c);
    static struct neural n;
    struct neural_cfg cfg = bare();
    cfg.lfp_uv = 50;
    REQUIRE(neural_init(&n, c, 8, 0, NCH, 30000, 0, 4095, 2048, &cfg) == 0);
    const uint32_t chs[3] = {100, 102, 380}; /* 15 um above 100; 2.1 mm away */
    const size_t ns = 1 << 16;
    double **x = alloc2(3, ns);
    REQUIRE(x);
    gen(&n, chs, 3, ns, x);
    static double psd[SEG / 2 + 1];
    memset(psd, 0, sizeof psd);
    welch(x[0], ns, psd);
    /* 50 uV rms with the channel's own 8.9: the whole SD (a third of the
     * LFP's power is below 2 Hz: 2.2 s sample it loosely) */
    double m = 0, v = 0;
    for (size_t k = 0; k < ns; k++)
        m += x[0][k] / ns;
    for (size_t k = 0; k < ns; k++)
        v += (x[0][k] - m) * (x[0][k] - m) / ns;
    double lfp = sqrt(v);
    if (!(lfp > 30 && lfp < 80))
        UNIT_FAIL("LFP channel SD %.1f uV, want about 51", lfp);
    double lfp7 = sqrt(band_power(psd, 7, 300));
    if (!(lfp7 > 15))
        UNIT_FAIL("LFP band 7-300 Hz %.1f uV rms, want 15 or more", lfp7);
    double near = corr(x[0], x[1], ns), far = corr(x[0], x[2], ns);
    fprintf(stderr, "  LFP channel SD %.1f uV (7-300 Hz: %.1f); correlation 15 um %.2f, 2.1 mm %.2f\n", lfp, lfp7, near, far);
    if (!(near > 0.8 && far < 0.5))
        UNIT_FAIL("LFP correlation 15 um apart %.2f (want > 0.8), 2.1 mm apart %.2f (want < 0.5)", near, far);
    free2(x, 3);
    neural_fini(&n);
    emu_card_destroy(c);
}

/* Common-mode noise correlates every channel; without it they are independent. */
TEST(neural_common_mode_correlates_channels)
{
    for (int on = 0; on < 2; on++) {
        struct emu_card *c = quiet_card(5);
        REQUIRE(c);
        static struct neural n;
        struct neural_cfg cfg = bare();
        cfg.cm_uv = on ? 10 : 0;
        REQUIRE(neural_init(&n, c, 8, 0, NCH, 30000, 0, 4095, 2048, &cfg) == 0);
        const uint32_t chs[2] = {10, 300};
        const size_t ns = 1 << 15;
        double **x = alloc2(2, ns);
        REQUIRE(x);
        gen(&n, chs, 2, ns, x);
        double r = corr(x[0], x[1], ns);
        fprintf(stderr, "  common-mode %s: r = %.3f\n", on ? "10 uV" : "off", r);
        /* on: 10^2 / (10^2 + the channel's own ~7.5^2) = 0.64 */
        if (on ? !(r > 0.45 && r < 0.8) : !(fabs(r) < 0.05))
            UNIT_FAIL("common-mode %s: correlation of channels 10 and 300 %.3f", on ? "on" : "off", r);
        free2(x, 2);
        neural_fini(&n);
        emu_card_destroy(c);
    }
}

/* Line hum stands out at its frequency and the third harmonic. */
TEST(neural_line_peak)
{
    struct emu_card *c = quiet_card(6);
    REQUIRE(c);
    static struct neural n;
    struct neural_cfg cfg = bare();
    cfg.line_uv = 20, cfg.line_hz = 50;
    REQUIRE(neural_init(&n, c, 8, 0, NCH, 30000, 0, 4095, 2048, &cfg) == 0);
    const uint32_t ch = 77;
    const size_t ns = 1 << 16;
    double **x = alloc2(1, ns);
    REQUIRE(x);
    gen(&n, &ch, 1, ns, x);
    static double psd[SEG / 2 + 1];
    memset(psd, 0, sizeof psd);
    welch(x[0], ns, psd);
    double at50 = band_mean(psd, 45, 56), around = band_mean(psd, 70, 130);
    double at150 = band_mean(psd, 145, 156), around150 = band_mean(psd, 170, 250);
    if (!(at50 > 20 * around && at150 > 5 * around150))
        UNIT_FAIL("line: PSD at 50 Hz %.3g vs %.3g around, at 150 Hz %.3g vs %.3g", at50, around, at150, around150);
    free2(x, 1);
    neural_fini(&n);
    emu_card_destroy(c);
}

/* The probe's ADCs take a channel at its slot of the sample period: a hum
 * of 1 kHz reaches the channel of slot 15 (30) 15/16 of a sample after
 * the one of slot 0 (channel 0), a phase of 2 pi 1000 (15/16) / 30000. */
TEST(neural_adc_multiplexing_skew)
{
    CHECK_EQ(np2e_slot(0), 0);
    CHECK_EQ(np2e_slot(30), 15);
    for (uint32_t k = 0; k < NP2E_ADCS; k++) /* the slot is the frame that carries the channel */
        for (uint32_t i = 0; i < NP2E_FRAMES; i++)
            CHECK_EQ(np2e_slot(np2e_channel(k, i)), i);
    struct emu_card *c = quiet_card(7);
    REQUIRE(c);
    static struct neural n;
    struct neural_cfg cfg = bare();
    cfg.noise_uv = 1, cfg.line_uv = 300, cfg.line_hz = 1000;
    REQUIRE(neural_init(&n, c, 8, 0, NCH, 30000, 0, 4095, 2048, &cfg) == 0);
    const uint32_t chs[2] = {0, 30};
    const size_t ns = 30000;
    double **x = alloc2(2, ns);
    REQUIRE(x);
    gen(&n, chs, 2, ns, x);
    double ph[2];
    for (int i = 0; i < 2; i++) {
        double sc = 0, cc = 0;
        for (size_t k = 0; k < ns; k++) {
            double a = 2 * M_PI * 1000.0 * k / FS;
            sc += x[i][k] * sin(a), cc += x[i][k] * cos(a);
        }
        ph[i] = atan2(cc, sc);
    }
    double want = 2 * M_PI * 1000.0 * (15.0 / 16) / FS, got = ph[1] - ph[0];
    if (fabs(got - want) > 0.02)
        UNIT_FAIL("channel 30 lags channel 0 by %.4f rad, want %.4f", got, want);
    free2(x, 2);
    neural_fini(&n);
    emu_card_destroy(c);
}

/* Spike-triggered averages from the truth: each unit's trough spreads over
 * 10-20 channels and decays with distance; the truth's SNR is the peak
 * channel's trough over the AP-band noise. */
TEST(neural_footprints_decay_and_snr)
{
    struct emu_card *c = quiet_card(8);
    REQUIRE(c);
    REQUIRE(emu_card_truth_keep(c, 200000) == 0);
    static struct neural n;
    struct neural_cfg cfg = bare();
    cfg.units = 24, cfg.snr_median = 25, cfg.snr_sigma = 0.2, cfg.snr_min = 15, cfg.rate_hz = 15;
    cfg.rate_sigma = 0.2, cfg.burst = 0;
    REQUIRE(neural_init(&n, c, 8, 0, NCH, 30000, 0, 4095, 2048, &cfg) == 0);
    enum { NS = 60000, W = NEURAL_SPIKE_LEN };
    static uint16_t s[NS][NCH];
    emu_card_lock(c);
    for (size_t k = 0; k < NS; k++)
        neural_sample(&n, s[k], k * (EMU_ACQ_HZ / 30000));
    pthread_mutex_unlock(&c->lock);
    static struct emu_truth tr[200000];
    size_t nt = emu_card_truth_get(c, tr, 200000);
    CHECK(nt > 24 * 15 * 2 / 2);
    static double sta[24][NCH];
    static int cnt[24];
    static float snr_sum[24];
    memset(sta, 0, sizeof sta), memset(cnt, 0, sizeof cnt), memset(snr_sum, 0, sizeof snr_sum);
    uint32_t peak_of[24] = {0};
    for (size_t i = 0; i < nt; i++) {
        uint64_t k = tr[i].time / (EMU_ACQ_HZ / 30000);
        uint32_t u = tr[i].unit;
        if (u >= 24 || k < NEURAL_TROUGH || k + W >= NS)
            continue;
        /* the deepest sample within +-0.33 ms, per channel, less the level
         * just before the spike */
        for (uint32_t ch = 0; ch < NCH; ch++) {
            int lo = 0;
            for (int d = -10; d <= 10; d++) {
                int v = (int)s[k + d][ch] - (int)s[k - NEURAL_TROUGH][ch];
                lo = v < lo ? v : lo;
            }
            sta[u][ch] += lo;
        }
        cnt[u]++;
        snr_sum[u] += tr[i].snr;
        peak_of[u] = tr[i].channel;
    }
    double ratio[3] = {0}, ratio_n[3] = {0}, noise_lsb = 7.0 / UV;
    int wide = 0, units = 0, snr_ok = 0;
    for (int u = 0; u < 24; u++) {
        if (cnt[u] < 5)
            continue;
        units++;
        double peak = 0;
        for (uint32_t ch = 0; ch < NCH; ch++)
            peak = sta[u][ch] / cnt[u] < peak ? sta[u][ch] / cnt[u] : peak;
        int foot = 0;
        float px, py;
        np2_site(peak_of[u], &px, &py);
        for (uint32_t ch = 0; ch < NCH; ch++) {
            double a = sta[u][ch] / cnt[u] / peak;
            foot += a >= 0.2;
            float x, y;
            np2_site(ch, &x, &y);
            double d = sqrt((x - px) * (x - px) + (y - py) * (y - py));
            int b = d < 20 ? 0 : d >= 30 && d < 60 ? 1 : d >= 75 && d < 120 ? 2 : -1;
            if (b >= 0)
                ratio[b] += a, ratio_n[b]++;
        }
        wide += foot >= 6 && foot <= 26;
        /* the trough against the level before it: the depth plus at most ~2 SD of noise */
        double measured = -peak / noise_lsb, truth = snr_sum[u] / cnt[u];
        snr_ok += measured > truth * 0.85 && measured < truth * 1.25 + 1;
    }
    fprintf(stderr, "  %d units: %d with 6..26 channels >= 20%%; trough ratio %.2f / %.2f / %.2f at <20 / 30-60 / 75-120 um\n",
            units, wide, ratio[0] / (ratio_n[0] ? ratio_n[0] : 1), ratio[1] / (ratio_n[1] ? ratio_n[1] : 1),
            ratio[2] / (ratio_n[2] ? ratio_n[2] : 1));
    CHECK(units >= 20);
    if (wide < units * 8 / 10)
        UNIT_FAIL("%d of %d units with 6..26 channels at 20%% of their trough or more", wide, units);
    for (int b = 0; b < 3; b++)
        ratio[b] /= ratio_n[b] > 0 ? ratio_n[b] : 1;
    if (!(ratio[0] > 0.6 && ratio[1] < ratio[0] && ratio[2] < ratio[1] && ratio[2] < 0.3))
        UNIT_FAIL("trough vs distance: %.2f (<20 um), %.2f (30-60), %.2f (75-120): no decay", ratio[0], ratio[1],
                  ratio[2]);
    if (snr_ok < units * 9 / 10)
        UNIT_FAIL("%d of %d units' measured troughs match their truth SNR", snr_ok, units);
    neural_fini(&n);
    emu_card_destroy(c);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Rates over 60 s of 300 units: lognormal around the median rate; no unit
 * fires twice within its refractory period; bursting units fire short
 * intervals that Poisson units rarely do. */
TEST(neural_rates_refractoriness_bursts)
{
    double short_frac[2] = {0, 0};
    for (int burst = 0; burst < 2; burst++) {
        struct emu_card *c = quiet_card(9);
        REQUIRE(c);
        REQUIRE(emu_card_truth_keep(c, 2000000) == 0);
        static struct neural n;
        struct neural_cfg cfg = bare();
        cfg.site = NULL, cfg.slot = NULL; /* 4 sites in a line: rates do not need the probe */
        cfg.units = 300, cfg.rate_hz = 3, cfg.rate_sigma = 1.0, cfg.burst = burst ? 1.0 : 0;
        REQUIRE(neural_init(&n, c, 8, 0, 4, 30000, 0, 4095, 2048, &cfg) == 0);
        const size_t ns = 60 * 30000;
        uint16_t s[4];
        emu_card_lock(c);
        for (size_t k = 0; k < ns; k++)
            neural_sample(&n, s, k * (EMU_ACQ_HZ / 30000));
        pthread_mutex_unlock(&c->lock);
        size_t nt = emu_card_truth_get(c, NULL, 0);
        struct emu_truth *tr = malloc((nt + 1) * sizeof *tr);
        REQUIRE(tr);
        nt = emu_card_truth_get(c, tr, nt);
        static uint64_t last[300];
        static int count[300];
        memset(last, 0, sizeof last), memset(count, 0, sizeof count);
        uint64_t min_isi = UINT64_MAX;
        size_t isis = 0, shorts = 0;
        for (size_t i = 0; i < nt; i++) {
            uint32_t u = tr[i].unit;
            REQUIRE(u < 300);
            if (count[u]) {
                uint64_t isi = tr[i].time - last[u];
                min_isi = isi < min_isi ? isi : min_isi;
                isis++;
                shorts += isi < EMU_ACQ_HZ * 8 / 1000;
            }
            count[u]++;
            last[u] = tr[i].time;
        }
        if (min_isi < EMU_ACQ_HZ * 2 / 1000)
            UNIT_FAIL("burst=%d: a unit fired again after %.3f ms (refractory 2 ms)", burst, min_isi * 1e3 / EMU_ACQ_HZ);
        short_frac[burst] = isis ? (double)shorts / isis : 0;
        if (!burst) {
            /* log rates of units with 20 spikes or more: median near log 3 Hz */
            static double lr[300];
            int m = 0;
            for (int u = 0; u < 300; u++)
                lr[m++] = log((count[u] + 0.5) / 60.0);
            qsort(lr, (size_t)m, sizeof *lr, cmp_d);
            double med = exp(lr[m / 2]), iqr = lr[m * 3 / 4] - lr[m / 4];
            fprintf(stderr, "  rates: median %.2f Hz, log IQR %.2f, %zu spikes of 300 units in 60 s\n", med, iqr, nt);
            /* lognormal sigma 1: the interquartile range of log rates is 1.35 */
            if (!(med > 3 / 1.3 && med < 3 * 1.3 && iqr > 1.0 && iqr < 1.7))
                UNIT_FAIL("rates: median %.2f Hz (want 3), log IQR %.2f (want 1.35)", med, iqr);
        }
        free(tr);
        neural_fini(&n);
        emu_card_destroy(c);
    }
    if (!(short_frac[1] > 3 * short_frac[0] && short_frac[1] > 0.1))
        UNIT_FAIL("ISIs under 8 ms: %.3f bursting, %.3f not", short_frac[1], short_frac[0]);
}

/* The same seed, device and probe give the same samples; any other, others. */
TEST(neural_reproducible_by_seed)
{
    static const unsigned seed[4] = {21, 21, 22, 21};
    static const uint32_t stream[4] = {0, 0, 0, 1};
    static uint16_t s[4][300][NCH];
    for (int r = 0; r < 4; r++) {
        struct emu_card *c = quiet_card(seed[r]);
        REQUIRE(c);
        static struct neural n;
        struct neural_cfg cfg;
        np2e_signal(&cfg);
        REQUIRE(neural_init(&n, c, 8, stream[r], NCH, 30000, 0, 4095, 2048, &cfg) == 0);
        emu_card_lock(c);
        for (int k = 0; k < 300; k++)
            neural_sample(&n, s[r][k], (uint64_t)k * (EMU_ACQ_HZ / 30000));
        pthread_mutex_unlock(&c->lock);
        neural_fini(&n);
        emu_card_destroy(c);
    }
    CHECK(!memcmp(s[0], s[1], sizeof s[0]));
    CHECK(memcmp(s[0], s[2], sizeof s[0]) != 0);
    CHECK(memcmp(s[0], s[3], sizeof s[0]) != 0);
}

/* The probe moving along the shank moves the units' peak channels. */
TEST(neural_drift_moves_peak_channels)
{
    struct emu_card *c = quiet_card(10);
    REQUIRE(c);
    REQUIRE(emu_card_truth_keep(c, 200000) == 0);
    static struct neural n;
    struct neural_cfg cfg = bare();
    cfg.units = 10, cfg.snr_median = 20, cfg.snr_min = 10, cfg.rate_hz = 30, cfg.rate_sigma = 0;
    cfg.drift_um = 60, cfg.drift_s = 4; /* 60 um up within the first second */
    REQUIRE(neural_init(&n, c, 8, 0, NCH, 30000, 0, 4095, 2048, &cfg) == 0);
    uint16_t s[NCH];
    emu_card_lock(c);
    for (uint64_t k = 0; k < 30000; k++)
        neural_sample(&n, s, k * (EMU_ACQ_HZ / 30000));
    pthread_mutex_unlock(&c->lock);
    static struct emu_truth tr[200000];
    size_t nt = emu_card_truth_get(c, tr, 200000);
    uint32_t first[10], lastc[10];
    int seen[10] = {0}, moved = 0;
    for (size_t i = 0; i < nt; i++) {
        uint32_t u = tr[i].unit;
        if (!seen[u]++)
            first[u] = tr[i].channel;
        lastc[u] = tr[i].channel;
    }
    for (int u = 0; u < 10; u++)
        /* 60 um = 4 rows = 8 channels down the probe's numbering */
        moved += seen[u] && (int)first[u] - (int)lastc[u] >= 6;
    if (moved < 7)
        UNIT_FAIL("%d of 10 units' peak channels moved 3 rows or more with 60 um of drift", moved);
    neural_fini(&n);
    emu_card_destroy(c);
}

/* Large artefacts reach the ADC's limits; the stimulator's artefact is a
 * biphasic pulse on every channel from the next sample on. */
TEST(neural_saturation_and_stimulus_artefact)
{
    struct emu_card *c = quiet_card(11);
    REQUIRE(c);
    static struct neural n;
    struct neural_cfg cfg = bare();
    cfg.artefact_hz = 20, cfg.artefact_uv = 20000;
    REQUIRE(neural_init(&n, c, 8, 0, NCH, 30000, 0, 4095, 2048, &cfg) == 0);
    uint16_t s[NCH];
    size_t railed = 0;
    for (uint64_t k = 0; k < 30000; k++) {
        neural_sample(&n, s, k);
        for (int ch = 0; ch < NCH; ch++)
            railed += s[ch] == 0 || s[ch] == 4095;
    }
    CHECK(railed > 0);
    neural_fini(&n);

    cfg = bare();
    cfg.noise_uv = 1, cfg.stim_uv = 200;
    REQUIRE(neural_init(&n, c, 8, 0, NCH, 30000, 0, 4095, 2048, &cfg) == 0);
    double mean[4] = {0};
    for (int k = 0; k < 10; k++)
        neural_sample(&n, s, 0);
    emu_card_lock(c);
    emu_card_stimulus(c); /* as a DigitalIO write does */
    pthread_mutex_unlock(&c->lock);
    for (int k = 0; k < 300; k++) {
        neural_sample(&n, s, 0);
        int at = k == 2 ? 0 : k == 8 ? 1 : k == 15 ? 2 : k == 299 ? 3 : -1;
        for (int ch = 0; at >= 0 && ch < NCH; ch++)
            mean[at] += ((double)s[ch] - 2048) * UV / NCH;
    }
    /* +200 uV in the first 0.2 ms, -200 uV in the next, a 30 uV tail, gone by 10 ms
     * (the artefact's gain falls by up to 40% to the probe's ends) */
    if (!(mean[0] > 130 && mean[1] < -130 && mean[2] > 5 && mean[2] < 40 && fabs(mean[3]) < 3))
        UNIT_FAIL("stimulus artefact: %.1f %.1f %.1f %.1f uV at 0.07, 0.27, 0.5, 10 ms", mean[0], mean[1], mean[2],
                  mean[3]);
    neural_fini(&n);
    emu_card_destroy(c);
}

static int read_file(const char *path, uint8_t **buf, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    *buf = malloc(*len + 1);
    int ok = *buf && fread(*buf, 1, *len, f) == *len;
    fclose(f);
    return ok ? 0 : -1;
}

/* The card's templates=DIR: Kilosort/phy files per probe, the templates as
 * the data holds them (against spike-triggered averages of the samples). */
TEST(neural_templates_files_match_the_data)
{
    char dir[] = "/tmp/onigpu-neural-XXXXXX";
    REQUIRE(mkdtemp(dir));
    char spec[160];
    snprintf(spec, sizeof spec,
             "mode=fast;seed=12;templates=%s;devices=heartbeat,rhd2164:units=6:snr=30:snr_min=20:lfp=0:offset=0:"
             "rate=20:burst=0:drift=0",
             dir);
    struct emu_card *c = card_open(spec);
    REQUIRE(c);
    REQUIRE(c->nneural == 1);
    const struct neural *n = c->neural[0];
    char sub[300], path[400];
    snprintf(sub, sizeof sub, "%s/%u-0", dir, n->dev_idx);
    snprintf(path, sizeof path, "%s/templates.npy", sub);
    uint8_t *b = NULL;
    size_t len = 0;
    REQUIRE(read_file(path, &b, &len) == 0);
    struct npy_info h;
    REQUIRE(npy_parse(b, len, &h) == 0);
    CHECK(!strcmp(h.descr, "<f4") && h.ndim == 3 && !h.fortran);
    CHECK(h.shape[0] == 6 && h.shape[1] == NEURAL_SPIKE_LEN && h.shape[2] == 64);
    REQUIRE(len == h.data_off + 6 * NEURAL_SPIKE_LEN * 64 * 4);
    const float *t = (const float *)(b + h.data_off);
    /* the samples: spike-triggered averages per unit against its template */
    REQUIRE(emu_card_truth_keep(c, 100000) == 0);
    static struct neural *gen;
    gen = c->neural[0];
    enum { NS = 60000 };
    static uint16_t s[NS][64];
    emu_card_lock(c);
    for (size_t k = 0; k < NS; k++)
        neural_sample(gen, s[k], k * (EMU_ACQ_HZ / 30000));
    pthread_mutex_unlock(&c->lock);
    static struct emu_truth tr[100000];
    size_t nt = emu_card_truth_get(c, tr, 100000);
    static double sta[6][NEURAL_SPIKE_LEN][64];
    int cnt[6] = {0};
    memset(sta, 0, sizeof sta);
    for (size_t i = 0; i < nt; i++) {
        uint64_t k = tr[i].time / (EMU_ACQ_HZ / 30000);
        if (k < NEURAL_TROUGH || k + NEURAL_SPIKE_LEN >= NS)
            continue;
        uint64_t k0 = k - NEURAL_TROUGH;
        for (int j = 0; j < NEURAL_SPIKE_LEN; j++)
            for (int ch = 0; ch < 64; ch++)
                sta[tr[i].unit][j][ch] += (double)s[k0 + j][ch] - s[k0][ch];
        cnt[tr[i].unit]++;
    }
    int match = 0, units = 0;
    for (int u = 0; u < 6; u++) {
        if (cnt[u] < 10)
            continue;
        units++;
        static double a[NEURAL_SPIKE_LEN * 64], m[NEURAL_SPIKE_LEN * 64];
        for (int j = 0; j < NEURAL_SPIKE_LEN; j++)
            for (int ch = 0; ch < 64; ch++) {
                a[j * 64 + ch] = sta[u][j][ch] / cnt[u];
                m[j * 64 + ch] = t[((size_t)u * NEURAL_SPIKE_LEN + j) * 64 + ch] - t[(size_t)u * NEURAL_SPIKE_LEN * 64 + ch];
            }
        double r = corr(a, m, NEURAL_SPIKE_LEN * 64);
        match += r > 0.95;
        if (r <= 0.95)
            fprintf(stderr, "  unit %d: template vs average r = %.3f (%d spikes)\n", u, r, cnt[u]);
    }
    CHECK(units >= 5);
    CHECK_EQ(match, units);
    free(b);
    /* the other files */
    snprintf(path, sizeof path, "%s/channel_positions.npy", sub);
    REQUIRE(read_file(path, &b, &len) == 0);
    REQUIRE(npy_parse(b, len, &h) == 0);
    CHECK(!strcmp(h.descr, "<f4") && h.ndim == 2 && h.shape[0] == 64 && h.shape[1] == 2);
    free(b);
    snprintf(path, sizeof path, "%s/whitening_mat.npy", sub);
    REQUIRE(read_file(path, &b, &len) == 0);
    REQUIRE(npy_parse(b, len, &h) == 0);
    const float *wm = (const float *)(b + h.data_off);
    CHECK(h.shape[0] == 64 && h.shape[1] == 64 && wm[0] == 1.0f && wm[1] == 0.0f && wm[65] == 1.0f);
    free(b);
    snprintf(path, sizeof path, "%s/channel_map.npy", sub);
    REQUIRE(read_file(path, &b, &len) == 0);
    REQUIRE(npy_parse(b, len, &h) == 0);
    CHECK(!strcmp(h.descr, "<i4") && h.ndim == 1 && h.shape[0] == 64);
    free(b);
    snprintf(path, sizeof path, "%s/params.py", sub);
    REQUIRE(read_file(path, &b, &len) == 0);
    b[len] = 0;
    CHECK(strstr((char *)b, "n_channels_dat = 64\n") && strstr((char *)b, "hp_filtered = False\n") &&
          strstr((char *)b, "sample_rate = 30000.0\n"));
    free(b);
    emu_card_destroy(c);
    static const char *const files[] = {"templates.npy", "channel_map.npy", "channel_positions.npy",
                                        "whitening_mat.npy", "whitening_mat_inv.npy", "params.py"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", sub, files[i]);
        CHECK(unlink(path) == 0);
    }
    CHECK(rmdir(sub) == 0);
    CHECK(rmdir(dir) == 0);
}

/* Bad knobs are refused before anything runs, naming the key. */
TEST(neural_bad_knobs_refused)
{
    static const char *const bad[][2] = {
        {"devices=breakout,np2e:noise=abc", "noise="},
        {"devices=breakout,np2e:snr=3:snr_min=4", "snr_min"},
        {"devices=breakout,np2e:units=2000", "units"},
        {"devices=rhd2164:rate=0", "rate="},
        {"devices=rhd2164:drift=-1", "drift="},
        {"templates=;devices=rhd2164", "templates"},
        {"templates=/dev/null/x;devices=rhd2164", "templates"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct emu_card *c = NULL;
        char err[256] = "";
        int rc = emu_card_create(bad[i][0], &c, err, sizeof err);
        if (rc == 0 || !strstr(err, bad[i][1]))
            UNIT_FAIL("%s: rc %d, '%s' (want a refusal naming %s)", bad[i][0], rc, err, bad[i][1]);
        CHECK(c == NULL);
    }
}

