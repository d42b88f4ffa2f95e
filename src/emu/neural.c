/* neural.c - synthetic extracellular signal (neural.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "neural.h"

#define NEURAL_TABLE 32768u /* noise samples (power of two), ~1.1 s at 30 kHz */

uint64_t neural_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double uniform(uint64_t *s) { return ((double)(neural_rand(s) >> 11) + 0.5) / 9007199254740992.0; }

/* Box-Muller. The two draws are taken in statements of their own: within one
 * expression their order is unspecified, and another compiler could swap
 * them, giving other data for the same seed. */
static double gauss(uint64_t *s)
{
    double u1 = uniform(s), u2 = uniform(s);
    return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

/* White noise, band-passed by two one-pole filters (high-pass 300 Hz,
 * low-pass lowpass_hz), scaled to SD sigma. Computed once per device. */
static int make_noise(struct neural *n, double sigma, uint32_t lowpass_hz)
{
    double *x = malloc(NEURAL_TABLE * sizeof *x);
    n->noise = malloc(NEURAL_TABLE * sizeof *n->noise);
    if (!x || !n->noise) {
        free(x);
        return ONI_EBADALLOC;
    }
    double a_lp = exp(-6.283185307179586 * lowpass_hz / n->fs_hz);
    double a_hp = exp(-6.283185307179586 * 300.0 / n->fs_hz);
    double lp = 0, slow = 0, sum2 = 0;
    for (uint32_t i = 0; i < 2 * NEURAL_TABLE; i++) { /* first pass settles the filters */
        lp = a_lp * lp + (1 - a_lp) * gauss(&n->rng);
        slow = a_hp * slow + (1 - a_hp) * lp;
        if (i >= NEURAL_TABLE) {
            x[i - NEURAL_TABLE] = lowpass_hz > 300 ? lp - slow : lp;
            sum2 += x[i - NEURAL_TABLE] * x[i - NEURAL_TABLE];
        }
    }
    double scale = sigma / sqrt(sum2 / NEURAL_TABLE);
    for (uint32_t i = 0; i < NEURAL_TABLE; i++)
        n->noise[i] = (int16_t)lrint(x[i] * scale);
    free(x);
    return 0;
}

/* A biphasic extracellular spike: a sharp trough, then a slower positive lobe. */
static void make_template(struct neural *n)
{
    for (int i = 0; i < NEURAL_SPIKE_LEN; i++) {
        double a = (i - NEURAL_TROUGH) / 3.0, b = (i - NEURAL_TROUGH - 12) / 8.0;
        n->tmpl[i] = (int16_t)lrint(-1024 * exp(-a * a / 2) + 300 * exp(-b * b / 2));
    }
}

static uint64_t gap(struct neural *n, struct neural_unit *u)
{
    /* refractory 2 ms + exponential */
    return (uint64_t)(n->fs_hz / 500) + (uint64_t)(-log(uniform(&n->rng)) * u->mean_gap);
}

int neural_init(struct neural *n, struct emu_card *card, uint32_t dev_idx, uint32_t stream, uint32_t nch,
                uint32_t fs_hz, int32_t lo, int32_t hi, int32_t mid, double sigma, uint32_t nunits,
                uint32_t lowpass_hz)
{
    memset(n, 0, sizeof *n);
    n->card = card;
    n->dev_idx = dev_idx;
    n->ch_base = stream * nch;
    n->nch = nch;
    n->fs_hz = fs_hz;
    n->lo = lo, n->hi = hi, n->mid = (uint32_t)mid;
    n->ticks_per_sample = EMU_ACQ_HZ / fs_hz;
    /* stream 0 keeps the seeding of a one-stream device */
    n->rng = card->seed * 0x2545F4914F6CDD1Dull ^ (dev_idx + 1) * 0x9E3779B97F4A7C15ull ^
             (uint64_t)stream * 0xD1B54A32D192ED03ull;
    n->off = malloc(nch * sizeof *n->off);
    n->acc = calloc(nch, sizeof *n->acc);
    if (!n->off || !n->acc || make_noise(n, sigma, lowpass_hz)) {
        neural_fini(n);
        return ONI_EBADALLOC;
    }
    for (uint32_t c = 0; c < nch; c++)
        n->off[c] = (uint32_t)neural_rand(&n->rng) & (NEURAL_TABLE - 1);
    make_template(n);
    if (nunits > NEURAL_MAX_UNITS)
        nunits = NEURAL_MAX_UNITS;
    if (nch < NEURAL_SPREAD)
        nunits = 0;
    n->nunits = nunits;
    for (uint32_t i = 0; i < nunits; i++) {
        struct neural_unit *u = &n->unit[i];
        u->ch0 = (uint32_t)(neural_rand(&n->rng) % (nch - NEURAL_SPREAD + 1));
        double depth = sigma * (8 + 8 * uniform(&n->rng)); /* 8-16 sigma at the centre */
        static const double fall[NEURAL_SPREAD] = {0.6, 1.0, 0.7, 0.4};
        for (int j = 0; j < NEURAL_SPREAD; j++)
            u->amp[j] = (int32_t)lrint(depth * fall[j]);
        /* the trough sample as neural_sample adds it (the positive lobe's
         * tail makes it shallower than depth) */
        u->snr = sigma > 0 ? (float)(-(double)(n->tmpl[NEURAL_TROUGH] * u->amp[1] / 1024) / sigma) : 0.0f;
        double hz = 3 + 17 * uniform(&n->rng);
        u->mean_gap = (uint32_t)(fs_hz / hz);
        u->next = gap(n, u);
    }
    return 0;
}

void neural_fini(struct neural *n)
{
    free(n->noise);
    free(n->off);
    free(n->acc);
    n->noise = NULL, n->off = NULL, n->acc = NULL;
}

static uint16_t clamp(const struct neural *n, int32_t v)
{
    return (uint16_t)(v < n->lo ? n->lo : v > n->hi ? n->hi : v);
}

void neural_noise(struct neural *n, uint16_t *out)
{
    uint32_t k = (uint32_t)n->k;
    for (uint32_t c = 0; c < n->nch; c++)
        out[c] = clamp(n, (int32_t)n->mid + n->noise[(k + n->off[c]) & (NEURAL_TABLE - 1)]);
    n->k++;
}

void neural_sample(struct neural *n, uint16_t *out, uint64_t t)
{
    /* spikes starting now */
    for (uint32_t i = 0; i < n->nunits; i++) {
        struct neural_unit *u = &n->unit[i];
        if (u->next == n->k) {
            if (n->nactive < NEURAL_MAX_ACTIVE)
                n->active[n->nactive++] = (struct neural_spike){i, n->k};
            u->next = n->k + gap(n, u);
        }
    }
    if (!n->nactive) {
        neural_noise(n, out);
        return;
    }
    /* add the active spikes' samples, retire finished ones */
    uint32_t live = 0;
    for (uint32_t s = 0; s < n->nactive; s++) {
        struct neural_spike sp = n->active[s];
        const struct neural_unit *u = &n->unit[sp.unit];
        uint32_t at = (uint32_t)(n->k - sp.start);
        int32_t w = n->tmpl[at];
        for (int j = 0; j < NEURAL_SPREAD; j++)
            n->acc[u->ch0 + j] += (w * u->amp[j]) / 1024;
        if (at == NEURAL_TROUGH)
            emu_card_truth_add(n->card, n->dev_idx, sp.unit, n->ch_base + u->ch0 + 1, t, u->snr);
        if (at + 1 < NEURAL_SPIKE_LEN)
            n->active[live++] = sp;
    }
    n->nactive = live;
    uint32_t k = (uint32_t)n->k;
    for (uint32_t c = 0; c < n->nch; c++) {
        out[c] = clamp(n, (int32_t)n->mid + n->noise[(k + n->off[c]) & (NEURAL_TABLE - 1)] + n->acc[c]);
        n->acc[c] = 0;
    }
    n->k++;
}
