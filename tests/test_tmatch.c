/* test_tmatch.c - the template-matching stage (src/loop/stage_tmatch.c) on
 * the CPU: labels on data made here (tests/fixtures/tmatch_data.h) scored
 * per unit, overlapping spikes found by the subtraction, the templates
 * through the chain's own filter, decide naming units, and the file set's
 * refusals (src/loop/tmatch_files.c, src/oni/util/npy.c) naming file and
 * field. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "oni.h"
#include "unit.h"
#include "loop/loop.h"
#include "loop/stage.h"
#include "loop/tmatch.h"
#include "loop/tmatch_files.h"
#include "tmatch_data.h"

#define FRAMES 16
#define SECONDS 3.0
#define TOL 12 /* 0.4 ms at 30 kHz: LOOP_SCORE_WINDOW_S */

static struct td d;
static char dir[256];

static void cleanup(void)
{
    if (dir[0] && unit_sh("rm -rf '%s'", dir))
        fprintf(stderr, "could not remove %s\n", dir);
    td_free(&d);
}

static void make_data(int collisions)
{
    if (!dir[0])
        atexit(cleanup);
    td_free(&d);
    REQUIRE(td_make(&d, (uint64_t)(SECONDS * TD_FS), 11, 20.0, collisions) == 0);
    snprintf(dir, sizeof dir, "/tmp/test_tmatch.%d", (int)getpid());
    REQUIRE(td_write_set(&d, dir) == 0);
}

/* The chain of specs over all of d, block by block; the spikes into *det
 * (malloc'd), their count returned (-1 when the chain was refused: why). */
static long run(const struct loop_stage_spec *s, uint32_t n, struct loop_spike **det, uint64_t *stims,
                struct onigpu_out **outs, char *why, size_t cap)
{
    static struct loop_ephys_state init;
    struct loop_ephys_params p;
    loop_ephys_defaults(&p);
    if (loop_ephys_init(&init, &p, &d.lay))
        return -1;
    struct loop_config c = {0};
    c.stages = s;
    c.nstages = n;
    c.fs_hz = TD_FS;
    c.clock_hz = TD_FS;
    struct loop_chain *ch = NULL;
    if (loop_chain_create(&c, &init, FRAMES, &ch, why, cap))
        return -1;
    uint64_t blocks = d.nsamp / FRAMES;
    uint8_t *blk = malloc((size_t)FRAMES * d.lay.stride);
    struct onigpu_out *out = malloc(sizeof *out);
    size_t cap_det = 8192, nd = 0;
    *det = malloc(cap_det * sizeof **det);
    if (outs)
        *outs = calloc(blocks, sizeof **outs);
    d.next = 0;
    *stims = 0;
    loop_chain_start(ch);
    for (uint64_t b = 0; b < blocks && blk && out && *det; b++) {
        td_block(&d, blk, FRAMES);
        int rc = loop_chain_process(ch, blk, b, out, why, cap);
        if (rc) {
            UNIT_FAIL("block %llu: %s", (unsigned long long)b, why);
            break;
        }
        for (uint32_t i = 0; i < out->nspikes && nd < cap_det; i++)
            (*det)[nd++] = out->spikes[i];
        *stims += out->stim;
        if (outs && *outs)
            (*outs)[b] = *out;
    }
    loop_chain_stop(ch);
    loop_chain_destroy(ch);
    free(blk);
    free(out);
    return (long)nd;
}

static struct loop_score score(const struct loop_spike *det, long nd)
{
    struct loop_score sc;
    uint64_t lo = (uint64_t)(0.3 * TD_FS), hi = d.nsamp - 200;
    CHECK_RC(loop_score_spikes(d.truth, d.ntruth, det, (size_t)nd, TOL, LOOP_SCORE_RADIUS_UM, lo, hi, &sc), 0);
    return sc;
}

static void per_unit(const struct loop_spike *det, long nd, double want)
{
    struct loop_unit_score *u;
    size_t nu;
    uint64_t lo = (uint64_t)(0.3 * TD_FS), hi = d.nsamp - 200;
    CHECK_RC(loop_score_units(d.truth, d.ntruth, det, (size_t)nd, TOL, lo, hi, &u, &nu), 0);
    CHECK_EQ(nu, TD_K);
    for (size_t i = 0; i < nu; i++) {
        fprintf(stderr, "  unit %u (snr %.0f): truth %llu detected %llu matched %llu accuracy %.3f\n", u[i].unit,
                u[i].snr, (unsigned long long)u[i].truth, (unsigned long long)u[i].detected,
                (unsigned long long)u[i].matched, u[i].accuracy);
        CHECK(u[i].accuracy >= want);
    }
    free(u);
}

TEST(labels_match_the_truth_units)
{
    make_data(0);
    char opts[400], why[512] = "";
    snprintf(opts, sizeof opts, "tmatch:templates=%s,lo=0,car=0", dir);
    const struct loop_stage_spec s[] = {{opts, NULL, NULL}};
    struct loop_spike *det = NULL;
    uint64_t stims;
    long nd = run(s, 1, &det, &stims, NULL, why, sizeof why);
    if (nd < 0)
        fprintf(stderr, "  %s\n", why);
    REQUIRE(nd > 0);
    struct loop_score sc = score(det, nd);
    fprintf(stderr, "  %ld spikes, %llu events: precision %.3f recall %.3f f1 %.3f; %llu units, accuracy %.3f\n", nd,
            (unsigned long long)sc.events, sc.precision, sc.recall, sc.f1, (unsigned long long)sc.units, sc.accuracy);
    CHECK(sc.f1 >= 0.97);
    CHECK_EQ(sc.units, TD_K);
    CHECK(sc.labelled == sc.detections);
    per_unit(det, nd, 0.95);
    CHECK(stims > 0);
    free(det);
}

/* Unit 1 fires 5 samples after unit 0, 4 channels away, every 50 ms: the
 * larger is matched first, subtracted, and the other then found. */
TEST(overlapping_spikes_are_both_found)
{
    make_data(1);
    REQUIRE(d.ncoll > 40);
    char opts[400], why[512] = "";
    snprintf(opts, sizeof opts, "tmatch:templates=%s,lo=0,car=0", dir);
    const struct loop_stage_spec s[] = {{opts, NULL, NULL}};
    struct loop_spike *det = NULL;
    uint64_t stims;
    long nd = run(s, 1, &det, &stims, NULL, why, sizeof why);
    REQUIRE(nd > 0);
    uint64_t both = 0, counted = 0;
    for (uint64_t i = 0; i < d.ncoll; i++) {
        const struct loop_truth *a = &d.truth[d.coll[i]], *b = &d.truth[d.coll[i] + 1];
        if (a->time < 0.3 * TD_FS)
            continue;
        int fa = 0, fb = 0;
        for (long j = 0; j < nd; j++) {
            fa |= det[j].unit == 0 && llabs((long long)det[j].time - (long long)a->time) <= 2;
            fb |= det[j].unit == 1 && llabs((long long)det[j].time - (long long)b->time) <= 2;
        }
        counted++;
        both += fa && fb;
    }
    fprintf(stderr, "  %llu of %llu collided pairs found whole\n", (unsigned long long)both,
            (unsigned long long)counted);
    CHECK(counted > 40 && both >= counted * 95 / 100);
    per_unit(det, nd, 0.93);
    free(det);
}

/* Twice the noise: the units' SNRs 4 to 7 (trough over noise SD on the peak
 * channel). Scored per unit and per band, as found; what it asserts is what
 * matching gains over a threshold on the peak channel: every unit is found
 * most of the time, at SNRs where a 5-SD threshold misses many. */
TEST(units_near_threshold)
{
    td_free(&d);
    make_data(0);
    td_free(&d);
    REQUIRE(td_make_noisy(&d, (uint64_t)(SECONDS * TD_FS), 11, 20.0, 0, 2.0) == 0);
    char opts[400], why[512] = "";
    snprintf(opts, sizeof opts, "tmatch:templates=%s", dir);
    const struct loop_stage_spec s[] = {{"filter", NULL, NULL}, {"reference", NULL, NULL}, {opts, NULL, NULL}};
    struct loop_spike *det = NULL;
    uint64_t stims;
    long nd = run(s, 3, &det, &stims, NULL, why, sizeof why);
    REQUIRE(nd > 0);
    struct loop_score sc = score(det, nd);
    fprintf(stderr, "  noise x2: precision %.3f recall %.3f f1 %.3f; accuracy %.3f; by band:", sc.precision,
            sc.recall, sc.f1, sc.accuracy);
    for (int b = 0; b < LOOP_SCORE_BANDS; b++)
        fprintf(stderr, " %s %.3f (%llu)", loop_score_band_name(b), sc.band_accuracy[b],
                (unsigned long long)sc.band_units[b]);
    fputc('\n', stderr);
    per_unit(det, nd, 0.0);
    CHECK(sc.units == TD_K && sc.accuracy >= 0.8 && sc.precision >= 0.95);
    free(det);
    /* the built-in threshold detector on the same samples */
    const struct loop_stage_spec t[] = {{"filter", NULL, NULL}, {"reference", NULL, NULL}, {"detect", NULL, NULL}};
    nd = run(t, 3, &det, &stims, NULL, why, sizeof why);
    REQUIRE(nd >= 0);
    struct loop_score th = score(det, nd);
    fprintf(stderr, "  detect (k=5) on the same: precision %.3f recall %.3f f1 %.3f\n", th.precision, th.recall,
            th.f1);
    CHECK(th.recall < sc.recall - 0.1);
    free(det);
}

/* The bounds on a match: unit 5 fires at 0.35 of its template's amplitude
 * (below amin=0.5): not labelled 5 then, and found with amin=0.2; a gate
 * no trough reaches (gate=40 noise SDs) lets nothing through. */
static uint64_t unit_spikes(const struct loop_spike *det, long nd, uint32_t unit)
{
    uint64_t n = 0;
    for (long i = 0; i < nd; i++)
        n += det[i].unit == unit;
    return n;
}

TEST(amplitude_bounds_and_gate_hold)
{
    make_data(0);
    td_free(&d);
    REQUIRE(td_make_scaled(&d, (uint64_t)(SECONDS * TD_FS), 11, 20.0, 0, 1.0, 5, 0.35f) == 0);
    char opts[400], why[512] = "";
    struct loop_spike *det = NULL;
    uint64_t stims, truth5 = 0;
    for (size_t i = 0; i < d.ntruth; i++)
        truth5 += d.truth[i].unit == 5;
    snprintf(opts, sizeof opts, "tmatch:templates=%s,lo=0,car=0", dir);
    const struct loop_stage_spec s[] = {{opts, NULL, NULL}};
    long nd = run(s, 1, &det, &stims, NULL, why, sizeof why);
    REQUIRE(nd > 0);
    uint64_t bounded = unit_spikes(det, nd, 5);
    free(det);
    snprintf(opts, sizeof opts, "tmatch:templates=%s,lo=0,car=0,amin=0.2", dir);
    nd = run(s, 1, &det, &stims, NULL, why, sizeof why);
    REQUIRE(nd > 0);
    uint64_t free_ = unit_spikes(det, nd, 5);
    free(det);
    fprintf(stderr, "  unit 5 at 0.35 of its template: %llu of %llu labelled 5 with amin=0.5, %llu with amin=0.2\n",
            (unsigned long long)bounded, (unsigned long long)truth5, (unsigned long long)free_);
    CHECK(bounded * 10 < truth5 && free_ * 10 > truth5 * 8);
    snprintf(opts, sizeof opts, "tmatch:templates=%s,lo=0,car=0,gate=40", dir);
    nd = run(s, 1, &det, &stims, NULL, why, sizeof why);
    CHECK(nd == 0);
    free(det);
}

/* The chain's filter and reference ahead of tmatch: the raw templates go
 * through the same band and common average before matching (defaults). */
TEST(templates_are_filtered_as_the_data)
{
    make_data(0);
    char opts[400], why[512] = "";
    snprintf(opts, sizeof opts, "tmatch:templates=%s", dir);
    const struct loop_stage_spec s[] = {{"filter", NULL, NULL}, {"reference", NULL, NULL}, {opts, NULL, NULL}};
    struct loop_spike *det = NULL;
    uint64_t stims;
    long nd = run(s, 3, &det, &stims, NULL, why, sizeof why);
    if (nd < 0)
        fprintf(stderr, "  %s\n", why);
    REQUIRE(nd > 0);
    struct loop_score sc = score(det, nd);
    fprintf(stderr, "  filtered: precision %.3f recall %.3f f1 %.3f accuracy %.3f\n", sc.precision, sc.recall,
            sc.f1, sc.accuracy);
    CHECK(sc.f1 >= 0.95);
    per_unit(det, nd, 0.9);
    free(det);
}

/* What the stage matches with: template k through the filter stage's band
 * and the common average, from 10 samples before its trough to 15 after,
 * on the peak channel first. */
TEST(the_stage_holds_the_filtered_window)
{
    make_data(0);
    char opts[400], why[512] = "";
    snprintf(opts, sizeof opts, "tmatch:templates=%s", dir);
    const struct loop_stage_spec s[] = {{"filter", NULL, NULL}, {"reference", NULL, NULL}, {opts, NULL, NULL}};
    static struct loop_ephys_state init, flt;
    struct loop_ephys_params p;
    loop_ephys_defaults(&p);
    REQUIRE(loop_ephys_init(&init, &p, &d.lay) == 0);
    struct loop_config c = {.stages = s, .nstages = 3, .fs_hz = TD_FS, .clock_hz = TD_FS};
    struct loop_chain *ch = NULL;
    REQUIRE(loop_chain_create(&c, &init, FRAMES, &ch, why, sizeof why) == 0);
    void *state = NULL;
    REQUIRE(loop_chain_stage(ch, 2, &state, NULL) == &loop_stage_tmatch && state);
    const struct tm_state *st = state;
    CHECK(st->ntpl == TD_K && st->len == 26 && st->lag == 2 && st->nchan == TD_NCH);
    REQUIRE(loop_ephys_set_band(&flt, 300, 6000, TD_FS) == 0);
    flt.lay.nchan = TD_NCH;
    static float x[TD_NS][TD_NCH];
    for (int k = 0; k < TD_K; k++) {
        memcpy(x, d.tpl[k], sizeof x);
        memset(flt.z, 0, sizeof flt.z);
        loop_ephys_filter(&flt, &x[0][0], TD_NS);
        loop_ephys_reference(&x[0][0], TD_NCH, 0, TD_NS);
        int ts = 0, tc = 0;
        for (int t = 0; t < TD_NS; t++)
            for (int ch2 = 0; ch2 < TD_NCH; ch2++)
                if (x[t][ch2] < x[ts][tc])
                    ts = t, tc = ch2;
        const struct tm_template *m = &st->t[k];
        CHECK(m->peak == (uint32_t)tc && m->chan[0] == (uint32_t)tc && m->trough == 10);
        CHECK(m->nfoot >= 5 && m->nfoot <= 16);
        for (uint32_t i = 0; i < st->len; i++) {
            int t = ts - 10 + (int)i;
            CHECK(m->w[0][i] == (t >= 0 && t < TD_NS ? x[t][tc] : 0.0f));
        }
        /* the filter moved the trough: filtered and raw differ */
        CHECK(fabsf(m->w[0][10] - d.tpl[k][TD_TROUGH][d.peak[k]]) > 0.05f * fabsf(d.tpl[k][TD_TROUGH][d.peak[k]]));
    }
    loop_chain_destroy(ch);
}

/* The noise SD each channel is weighted by, from the first 0.2 s, on
 * channels full of spikes (units at 60 Hz each): within 8% of the noise's
 * on every channel (the median of 3000 samples alone is +-2%), and on the
 * units' peak channels less than half as far off as the plain mean |x|. */
TEST(noise_is_calibrated_under_spikes)
{
    make_data(0); /* the file set (the waveforms do not depend on the rate) */
    td_free(&d);
    REQUIRE(td_make(&d, (uint64_t)(0.5 * TD_FS), 3, 60.0, 0) == 0);
    char opts[400], why[512] = "";
    snprintf(opts, sizeof opts, "tmatch:templates=%s,lo=0,car=0", dir);
    const struct loop_stage_spec s[] = {{opts, NULL, NULL}};
    static struct loop_ephys_state init;
    struct loop_ephys_params p;
    loop_ephys_defaults(&p);
    REQUIRE(loop_ephys_init(&init, &p, &d.lay) == 0);
    struct loop_config c = {.stages = s, .nstages = 1, .fs_hz = TD_FS, .clock_hz = TD_FS};
    struct loop_chain *ch = NULL;
    REQUIRE(loop_chain_create(&c, &init, FRAMES, &ch, why, sizeof why) == 0);
    void *state = NULL;
    REQUIRE(loop_chain_stage(ch, 0, &state, NULL) && state);
    uint8_t *blk = malloc((size_t)FRAMES * d.lay.stride);
    struct onigpu_out *out = malloc(sizeof *out);
    REQUIRE(blk && out);
    d.next = 0;
    for (uint64_t b = 0; b < (uint64_t)(0.25 * TD_FS) / FRAMES; b++) {
        td_block(&d, blk, FRAMES);
        CHECK_RC(loop_chain_process(ch, blk, b, out, why, sizeof why), 0);
    }
    const struct tm_state *st = state;
    CHECK(st->ready);
    /* over the units' peak channels: the estimate's bias there, and the
     * plain mean |x|'s */
    double worst = 0, bias = 0, plain = 0;
    for (uint32_t ch2 = 0; ch2 < TD_NCH; ch2++) {
        double err = 1.0 / sqrt(st->inv_var[ch2]) / TD_SIGMA - 1;
        worst = fabs(err) > worst ? fabs(err) : worst;
    }
    for (int k = 0; k < TD_K; k++) {
        double m = 0;
        for (uint64_t i = 0; i < st->calib; i++)
            m += fabs(roundf(d.x[i * TD_NCH + d.peak[k]]));
        plain += (m / st->calib * 1.2533141 / TD_SIGMA - 1) / TD_K;
        bias += (1.0 / sqrt(st->inv_var[d.peak[k]]) / TD_SIGMA - 1) / TD_K;
    }
    fprintf(stderr, "  noise SD within %.1f%% of %.0f on every channel; on the peak channels %+.1f%% on average "
            "(the mean |x|: %+.1f%%)\n", worst * 100, TD_SIGMA, bias * 100, plain * 100);
    CHECK(worst < 0.08 && fabs(bias) < 0.04 && fabs(bias) < plain / 2);
    free(blk);
    free(out);
    loop_chain_destroy(ch);
}

/* chan0: a set of the probe's channels read at an offset in the loop's
 * frames (the second probe of two). The set here holds channels 4 .. 63
 * as its 0 .. 59; with chan0=4 it labels as the whole set does. */
TEST(chan0_offsets_the_channel_map)
{
    make_data(0);
    char sub[300], opts[400], why[512] = "";
    snprintf(sub, sizeof sub, "%s/shifted", dir);
    REQUIRE(unit_sh("mkdir -p '%s'", sub) == 0);
    enum { N = TD_NCH - 4 };
    static float t[TD_K][TD_NS][N];
    int32_t map[N];
    for (int k = 0; k < TD_K; k++)
        for (int s = 0; s < TD_NS; s++)
            for (int c = 0; c < N; c++)
                t[k][s][c] = d.tpl[k][s][c + 4];
    for (int c = 0; c < N; c++)
        map[c] = c;
    REQUIRE(td_npy(sub, "templates.npy", "<f4", 3, (const uint64_t[]){TD_K, TD_NS, N}, t, sizeof t) == 0);
    REQUIRE(td_npy(sub, "channel_map.npy", "<i4", 1, (const uint64_t[]){N}, map, sizeof map) == 0);
    snprintf(opts, sizeof opts, "tmatch:templates=%s,lo=0,car=0,chan0=4", sub);
    const struct loop_stage_spec s[] = {{opts, NULL, NULL}};
    struct loop_spike *det = NULL;
    uint64_t stims;
    long nd = run(s, 1, &det, &stims, NULL, why, sizeof why);
    if (nd < 0)
        fprintf(stderr, "  %s\n", why);
    REQUIRE(nd > 0);
    struct loop_score sc = score(det, nd);
    CHECK(sc.f1 >= 0.97 && sc.units == TD_K && sc.accuracy >= 0.95);
    free(det);
    /* one more and channel 59 would be the frames' 64th */
    snprintf(opts, sizeof opts, "tmatch:templates=%s,lo=0,car=0,chan0=5", sub);
    const struct loop_stage_spec s5[] = {{opts, NULL, NULL}};
    CHECK(run(s5, 1, &det, &stims, NULL, why, sizeof why) == -1);
    CHECK(strstr(why, "channel_map.npy[59] = 59 + 5 (chan0 and the sets before it), and the loop's frames have 64 "
                      "channels") != NULL);
}

/* Two sets, templates=A+B: A units 0-3 on channels 0-39, B units 4 and 5
 * on channels 40-63 (its channel_map from 0); B's channels follow A's and
 * its templates are numbered on from A's, so the labels are the units'. */
TEST(two_sets_follow_one_another)
{
    make_data(0);
    char a[300], b[300], opts[700], why[512] = "";
    snprintf(a, sizeof a, "%s/setA", dir);
    snprintf(b, sizeof b, "%s/setB", dir);
    REQUIRE(unit_sh("mkdir -p '%s' '%s'", a, b) == 0);
    enum { NA = 40, NB = TD_NCH - NA };
    static float ta[4][TD_NS][NA], tb[2][TD_NS][NB];
    int32_t ma[NA], mb[NB];
    for (int s = 0; s < TD_NS; s++) {
        for (int c = 0; c < NA; c++)
            for (int k = 0; k < 4; k++)
                ta[k][s][c] = d.tpl[k][s][c];
        for (int c = 0; c < NB; c++)
            for (int k = 0; k < 2; k++)
                tb[k][s][c] = d.tpl[4 + k][s][NA + c];
    }
    for (int c = 0; c < NA; c++)
        ma[c] = c;
    for (int c = 0; c < NB; c++)
        mb[c] = c;
    REQUIRE(td_npy(a, "templates.npy", "<f4", 3, (const uint64_t[]){4, TD_NS, NA}, ta, sizeof ta) == 0);
    REQUIRE(td_npy(a, "channel_map.npy", "<i4", 1, (const uint64_t[]){NA}, ma, sizeof ma) == 0);
    REQUIRE(td_npy(b, "templates.npy", "<f4", 3, (const uint64_t[]){2, TD_NS, NB}, tb, sizeof tb) == 0);
    REQUIRE(td_npy(b, "channel_map.npy", "<i4", 1, (const uint64_t[]){NB}, mb, sizeof mb) == 0);
    snprintf(opts, sizeof opts, "tmatch:templates=%s+%s,lo=0,car=0", a, b);
    const struct loop_stage_spec s[] = {{opts, NULL, NULL}};
    struct loop_spike *det = NULL;
    uint64_t stims;
    long nd = run(s, 1, &det, &stims, NULL, why, sizeof why);
    if (nd < 0)
        fprintf(stderr, "  %s\n", why);
    REQUIRE(nd > 0);
    struct loop_score sc = score(det, nd);
    fprintf(stderr, "  two sets: f1 %.3f, %llu units, accuracy %.3f\n", sc.f1, (unsigned long long)sc.units,
            sc.accuracy);
    CHECK(sc.f1 >= 0.97 && sc.units == TD_K);
    per_unit(det, nd, 0.95);
    free(det);
    /* B before A: B's 24 channels then A's 40 overrun the frames' 64 only by
     * A's channel_map past 24; refused, naming A */
    snprintf(opts, sizeof opts, "tmatch:templates=%s+%s,lo=0,car=0,chan0=1", a, b);
    CHECK(run(s, 1, &det, &stims, NULL, why, sizeof why) == -1);
    CHECK(strstr(why, "setB: channel_map.npy[23] = 23 + 41") != NULL);
    snprintf(opts, sizeof opts, "tmatch:templates=%s+,lo=0", a);
    CHECK(run(s, 1, &det, &stims, NULL, why, sizeof why) == -1 && strstr(why, "ends in '+'"));
}

/* decide:units= stimulates only for spikes of the units it names. */
TEST(decide_names_units)
{
    make_data(0);
    char opts[400], why[512] = "";
    snprintf(opts, sizeof opts, "tmatch:templates=%s,lo=0,car=0", dir);
    const struct loop_stage_spec s[] = {{opts, NULL, NULL}, {"decide:units=2+4,lockout_ms=0", NULL, NULL}};
    struct loop_spike *det = NULL;
    struct onigpu_out *outs = NULL;
    uint64_t stims;
    long nd = run(s, 2, &det, &stims, &outs, why, sizeof why);
    if (nd < 0)
        fprintf(stderr, "  %s\n", why);
    REQUIRE(nd > 0 && outs);
    uint64_t named = 0, other_only = 0;
    for (uint64_t b = 0; b < d.nsamp / FRAMES; b++) {
        int has = 0, stim_ok = 0;
        for (uint32_t i = 0; i < outs[b].nspikes; i++) {
            uint32_t u = outs[b].spikes[i].unit;
            has |= u == 2 || u == 4;
            stim_ok |= (u == 2 || u == 4) && outs[b].spikes[i].time == outs[b].t_stim;
        }
        other_only += !has && outs[b].nspikes > 0;
        CHECK(outs[b].stim == (uint32_t)has); /* lockout 0: every block with one */
        if (outs[b].stim) {
            CHECK(stim_ok);
            named++;
        }
    }
    fprintf(stderr, "  %llu stimulations, all for units 2 and 4; %llu blocks of other units only\n",
            (unsigned long long)named, (unsigned long long)other_only);
    CHECK(named > 50 && other_only > 50);
    free(det);
    free(outs);
    /* the refusals */
    const char *bad[] = {"decide:units=", "decide:units=3+", "decide:units=a", "decide:units=1++2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const struct loop_stage_spec b[] = {{opts, NULL, NULL}, {bad[i], NULL, NULL}};
        CHECK(run(b, 2, &det, &stims, NULL, why, sizeof why) == -1);
        CHECK(strstr(why, "units=") != NULL);
    }
}

/* A file set broken one way at a time: refused, naming the file and what. */
static void refused(const char *options, const char *want1, const char *want2)
{
    char opts[600], why[1024] = "";
    snprintf(opts, sizeof opts, "tmatch:templates=%s%s", dir, options);
    const struct loop_stage_spec s[] = {{opts, NULL, NULL}};
    struct loop_spike *det = NULL;
    uint64_t stims;
    long nd = run(s, 1, &det, &stims, NULL, why, sizeof why);
    fprintf(stderr, "  %s\n", why);
    CHECK(nd == -1);
    CHECK(strstr(why, want1) != NULL);
    CHECK(!want2 || strstr(why, want2) != NULL);
}

static void put(const char *name, const char *descr, int ndim, const uint64_t *shape, size_t bytes)
{
    void *z = calloc(1, bytes ? bytes : 1);
    REQUIRE(z && td_npy(dir, name, descr, ndim, shape, z, bytes) == 0);
    free(z);
}

static void put_text(const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fputs(text, f);
    fclose(f);
}

TEST(bad_file_sets_are_refused)
{
    make_data(0);
    char why[512];
    refused(",th=0", "th=0", NULL);
    refused(",before=40,after=40", "before + after", NULL);
    refused(",nope=1", "option 'nope=1'", NULL);
    const struct loop_stage_spec none[] = {{"tmatch", NULL, NULL}};
    struct loop_spike *det;
    uint64_t stims;
    CHECK(run(none, 1, &det, &stims, NULL, why, sizeof why) == -1 && strstr(why, "templates=DIR is needed"));
    /* templates.npy: dtype, dimensions, size, not .npy, missing */
    put("templates.npy", "<f8", 3, (const uint64_t[]){TD_K, TD_NS, TD_NCH}, (size_t)TD_K * TD_NS * TD_NCH * 8);
    refused("", "templates.npy: dtype '<f8', expected <f4", NULL);
    put("templates.npy", "<f4", 2, (const uint64_t[]){TD_K, TD_NS}, (size_t)TD_K * TD_NS * 4);
    refused("", "templates.npy: 2 dimensions, expected 3", NULL);
    put("templates.npy", "<f4", 3, (const uint64_t[]){TD_K, TD_NS, TD_NCH}, 100);
    refused("", "templates.npy: 100 bytes of data, its shape needs", NULL);
    put("templates.npy", "<f4", 3, (const uint64_t[]){1, 2, 3}, 2 * 3 * 4 + 8); /* 8 bytes more */
    refused("", "templates.npy: 32 bytes of data, its shape needs 24", NULL);
    put_text("templates.npy", "not numpy at all\n");
    refused("", "templates.npy: not a .npy file", NULL);
    put("templates.npy", "<f4", 3, (const uint64_t[]){0, TD_NS, TD_NCH}, 0);
    refused("", "must not be 0", NULL);
    char path[512];
    snprintf(path, sizeof path, "%s/templates.npy", dir);
    unlink(path);
    refused("", "templates.npy: cannot open", NULL);
    /* more channels than a frame may have (the optional files of 64 gone) */
    REQUIRE(unit_sh("rm %s/whitening_mat_inv.npy %s/channel_positions.npy", dir, dir) == 0);
    enum { MANY = ONIGPU_STAGE_MAXCHAN + 1 };
    char many[80];
    snprintf(many, sizeof many, "templates of %d channels (%d at most)", MANY, ONIGPU_STAGE_MAXCHAN);
    put("templates.npy", "<f4", 3, (const uint64_t[]){1, 2, MANY}, 2 * MANY * 4);
    put("channel_map.npy", "<i4", 1, (const uint64_t[]){MANY}, MANY * 4);
    refused(",lo=0", many, NULL);
    REQUIRE(td_write_set(&d, dir) == 0);
    /* channel_map.npy: length, a channel the frames do not have, dtype */
    put("channel_map.npy", "<i4", 1, (const uint64_t[]){TD_NCH - 1}, (TD_NCH - 1) * 4);
    refused("", "channel_map.npy: 63 channels, templates.npy has 64", NULL);
    int32_t map[TD_NCH];
    for (int c = 0; c < TD_NCH; c++)
        map[c] = c;
    map[5] = 999;
    REQUIRE(td_npy(dir, "channel_map.npy", "<i4", 1, (const uint64_t[]){TD_NCH}, map, sizeof map) == 0);
    refused("", "channel_map.npy[5] = 999", "64 channels");
    put("channel_map.npy", "<f4", 1, (const uint64_t[]){TD_NCH}, TD_NCH * 4);
    refused("", "channel_map.npy: dtype '<f4', expected <i4,<i8", NULL);
    REQUIRE(td_write_set(&d, dir) == 0);
    /* the optional ones: shapes; params.py values */
    put("whitening_mat_inv.npy", "<f4", 2, (const uint64_t[]){TD_NCH, 3}, TD_NCH * 3 * 4);
    refused("", "whitening_mat_inv.npy: shape (64, 3), expected (64, 64)", NULL);
    REQUIRE(td_write_set(&d, dir) == 0);
    put("channel_positions.npy", "<f4", 2, (const uint64_t[]){TD_NCH, 3}, TD_NCH * 3 * 4);
    refused("", "channel_positions.npy: shape (64, 3)", NULL);
    REQUIRE(td_write_set(&d, dir) == 0);
    put_text("params.py", "sample_rate = 25000.0\nhp_filtered = False\n");
    refused("", "sample_rate 25000 Hz", "30000 Hz");
    put_text("params.py", "sample_rate = fast\n");
    refused("", "params.py: sample_rate = 'fast' is not a positive number", NULL);
    put_text("params.py", "hp_filtered = maybe\n");
    refused("", "params.py: hp_filtered = 'maybe' (True or False)", NULL);
    /* a set without the optional files loads */
    REQUIRE(td_write_set(&d, dir) == 0);
    const char *opt[] = {"params.py", "whitening_mat_inv.npy", "channel_positions.npy"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, opt[i]);
        unlink(path);
    }
    struct tm_files f;
    CHECK_RC(tm_files_load(dir, &f, why, sizeof why), 0);
    CHECK(f.ntpl == TD_K && f.nsamp == TD_NS && f.nch == TD_NCH && f.hp_filtered == -1 && f.fs_hz == 0);
    tm_files_free(&f);
}

/* whitening_mat_inv.npy other than the identity: templates @ inv. */
TEST(templates_are_unwhitened)
{
    make_data(0);
    static float inv[TD_NCH][TD_NCH];
    memset(inv, 0, sizeof inv);
    for (int c = 0; c < TD_NCH; c++)
        inv[c][c] = 2.0f, inv[c][(c + 1) % TD_NCH] = 0.5f;
    REQUIRE(td_npy(dir, "whitening_mat_inv.npy", "<f4", 2, (const uint64_t[]){TD_NCH, TD_NCH}, inv, sizeof inv) == 0);
    struct tm_files f;
    char why[512];
    CHECK_RC(tm_files_load(dir, &f, why, sizeof why), 0);
    CHECK(f.unwhitened == 1);
    for (int k = 0; k < TD_K; k++)
        for (int t = 0; t < TD_NS; t += 7)
            for (int c = 0; c < TD_NCH; c++) {
                float want = 2.0f * d.tpl[k][t][c] + 0.5f * d.tpl[k][t][(c + TD_NCH - 1) % TD_NCH];
                CHECK(fabsf(f.templates[((size_t)k * TD_NS + t) * TD_NCH + c] - want) < 1e-3f);
            }
    tm_files_free(&f);
}

TEST(npy_reads_what_it_writes)
{
    char h[NPY_HDR];
    struct npy_info in;
    CHECK_EQ(npy_header(h, "<f4", 3, (const uint64_t[]){2, 61, 384}), 0);
    CHECK_EQ(npy_parse((const uint8_t *)h, NPY_HDR, &in), 0);
    CHECK(in.ndim == 3 && in.shape[0] == 2 && in.shape[1] == 61 && in.shape[2] == 384 && in.item == 4);
    CHECK(memmem(h, NPY_HDR, "'shape': (2, 61, 384)", 21) != NULL);
    CHECK_EQ(npy_header(h, "<i8", 1, (const uint64_t[]){7}), 0);
    CHECK(memmem(h, NPY_HDR, "'shape': (7,)", 13) != NULL);
    CHECK_EQ(npy_parse((const uint8_t *)h, NPY_HDR, &in), 0);
    CHECK(in.ndim == 1 && in.shape[0] == 7 && in.shape[1] == 1 && in.shape[2] == 1);
    CHECK(npy_header(h, "<f4", 4, (const uint64_t[]){1, 1, 1, 1}) == -1);
    /* a shape whose bytes overflow is no header */
    CHECK_EQ(npy_header(h, "<f8", 3, (const uint64_t[]){1ull << 30, 1ull << 30, 1ull << 10}), 0);
    CHECK(npy_parse((const uint8_t *)h, NPY_HDR, &in) == -1);
}
