/* test_score.c - one-to-one scoring of detections against ground truth
 * (src/loop/score.h), on hand-made lists. Times are ticks; the window is
 * 100 ticks, the spatial radius R um on the NP2.0 sites (channel ch at
 * x = 32 um * (ch % 2), y = 15 um * (ch / 2)), unless a test says otherwise. */
#include <math.h>
#include <stdlib.h>
#include "oni.h"
#include "unit.h"
#include "loop/score.h"

#define W 100
#define R 45.0f /* the trough's column 3 rows (45 um) either side; the other column 2 rows (43.9 um) */

static struct loop_truth tru(uint64_t time, uint32_t chan, uint32_t unit, float snr)
{
    return (struct loop_truth){time, chan, unit, snr};
}

static struct loop_spike det(uint64_t time, uint32_t chan)
{
    return (struct loop_spike){time, chan, 0, ONIGPU_UNIT_NONE, 0};
}

static struct loop_score score(const struct loop_truth *t, size_t nt, const struct loop_spike *d, size_t nd)
{
    struct loop_score sc;
    CHECK_EQ(loop_score_spikes(t, nt, d, nd, W, R, 0, 1000000, &sc), 0);
    return sc;
}

/* tp, fp, misses packed: 100 * tp + 10 * fp + misses (each < 10 here). */
static int counts(const struct loop_score *sc)
{
    CHECK_EQ(sc->tp + sc->misses, sc->events);
    CHECK_EQ(sc->tp + sc->fp, sc->detections);
    return (int)(sc->tp * 100 + sc->fp * 10 + sc->misses);
}

TEST(empty_lists_score_zero)
{
    struct loop_truth t = tru(1000, 5, 1, 10);
    struct loop_spike d = det(1000, 5);
    struct loop_score sc = score(NULL, 0, NULL, 0);
    CHECK_EQ(counts(&sc), 0);
    CHECK(sc.precision == 0 && sc.recall == 0 && sc.f1 == 0);
    sc = score(&t, 1, NULL, 0); /* a truth event, no detection: a miss */
    CHECK_EQ(counts(&sc), 1);
    CHECK(sc.recall == 0 && sc.precision == 0 && sc.f1 == 0);
    sc = score(NULL, 0, &d, 1); /* a detection, no truth: a false positive */
    CHECK_EQ(counts(&sc), 10);
    CHECK(sc.precision == 0 && sc.f1 == 0);
}

TEST(one_match_is_perfect)
{
    struct loop_truth t = tru(1000, 5, 1, 10);
    struct loop_spike d = det(1010, 6);
    struct loop_score sc = score(&t, 1, &d, 1);
    CHECK_EQ(counts(&sc), 100);
    CHECK(sc.precision == 1 && sc.recall == 1 && sc.f1 == 1);
}

/* The same spike detected on three channels: one true positive, two false. */
TEST(duplicates_are_false_positives)
{
    struct loop_truth t = tru(1000, 5, 1, 10);
    struct loop_spike d[3] = {det(1002, 4), det(1000, 5), det(1003, 6)};
    struct loop_score sc = score(&t, 1, d, 3);
    CHECK_EQ(counts(&sc), 120);
    CHECK(fabs(sc.precision - 1.0 / 3) < 1e-12 && sc.recall == 1);
    CHECK(fabs(sc.f1 - 2.0 * 1 / (2 * 1 + 2 + 0)) < 1e-12);
}

/* Outside the window in time or in space: a false positive and a miss. */
TEST(outside_the_window_is_a_false_positive_and_a_miss)
{
    struct loop_truth t = tru(1000, 5, 1, 10);
    struct loop_spike late = det(1000 + W + 1, 5), far = det(1000, 12); /* (0, 90) from (32, 30): 68 um */
    struct loop_score sc = score(&t, 1, &late, 1);
    CHECK_EQ(counts(&sc), 11);
    sc = score(&t, 1, &far, 1);
    CHECK_EQ(counts(&sc), 11);
}

/* The window's edges are inclusive: W ticks either side, R um away, on the
 * probe's sites (not channel indices): truth at channel 20, site (0, 150). */
TEST(window_edges_are_inclusive)
{
    struct loop_truth t = tru(1000, 20, 1, 10);
    const struct {
        uint64_t time;
        uint32_t chan;
        int want;
    } c[] = {
        {1000 - W, 20, 100}, {1000 - W - 1, 20, 11}, {1000 + W, 20, 100}, {1000 + W + 1, 20, 11},
        {1000, 26, 100}, /* (0, 195): 45 um, on the edge */
        {1000, 14, 100}, /* (0, 105): 45 um below */
        {1000, 28, 11},  /* (0, 210): 60 um */
        {1000, 25, 100}, /* (32, 180): 43.9 um, 5 indices away */
        {1000, 27, 11},  /* (32, 195): 55.2 um */
        {1000, 21, 100}, /* (32, 150): 32 um */
        {1000, 384 + 20, 11}, /* probe 1's channel 20: another probe, never near */
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        struct loop_spike d = det(c[i].time, c[i].chan);
        struct loop_score sc = score(&t, 1, &d, 1);
        CHECK_EQ(counts(&sc), c[i].want);
    }
}

/* At equal times the closer site pairs first: a at channel 20 (0, 150), b at
 * 30 (0, 225); x at 26 (0, 195) is 45 um from a, 30 from b; y at 16 (0, 120)
 * is 30 um from a only. Pairs by distance: a-y and b-x, both matched (by
 * index alone a-x would come first, leaving y and b free). */
TEST(closer_sites_pair_first)
{
    struct loop_truth t[2] = {tru(1000, 20, 1, 10), tru(1000, 30, 2, 10)};
    struct loop_spike d[2] = {det(1000, 26), det(1000, 16)};
    struct loop_score sc = score(t, 2, d, 2);
    CHECK_EQ(counts(&sc), 200);
}

/* Two units fire 20 ticks apart on neighbouring channels: each detection
 * matches one of them, none matches both. One detection: one match, one miss. */
TEST(close_events_of_two_units_each_get_at_most_one_match)
{
    struct loop_truth t[2] = {tru(1000, 10, 1, 10), tru(1020, 11, 2, 10)};
    struct loop_spike one = det(1010, 10);
    struct loop_score sc = score(t, 2, &one, 1);
    CHECK_EQ(counts(&sc), 101);
    struct loop_spike two[2] = {det(1010, 10), det(1012, 11)};
    sc = score(t, 2, two, 2);
    CHECK_EQ(counts(&sc), 200);
    /* three detections for the two: the third is a duplicate */
    struct loop_spike three[3] = {det(1001, 10), det(1019, 11), det(1005, 12)};
    sc = score(t, 2, three, 3);
    CHECK_EQ(counts(&sc), 210);
}

/* Greedy by time distance: the closest pair is taken first, whatever the
 * order of the lists. Truth a at 1000, b at 1150; a detection at 1080 is 80
 * from a and 70 from b, one at 1010 is 10 from a: pairs (a, 1010) and then
 * (b, 1080). */
TEST(closest_pairs_are_taken_first)
{
    struct loop_truth t[2] = {tru(1000, 5, 1, 10), tru(1150, 5, 2, 10)}, rev[2] = {t[1], t[0]};
    struct loop_spike d[2] = {det(1080, 5), det(1010, 5)};
    struct loop_score sc = score(t, 2, d, 2);
    CHECK_EQ(counts(&sc), 200);
    struct loop_spike mid = det(1080, 5); /* alone: it takes b, the closer */
    sc = score(rev, 2, &mid, 1);
    CHECK_EQ(counts(&sc), 101);
    struct loop_spike near_a[2] = {det(1045, 5), det(1040, 5)}; /* both > W from b: 1040 takes a */
    sc = score(t, 2, near_a, 2);
    CHECK_EQ(counts(&sc), 111);
}

/* Greedy is not a maximum matching (score.h): a at 1000, b at 1100; x at
 * 1049 (49 from a, 51 from b), y at 950 (50 from a only). x takes a first,
 * leaving y and b unmatched, where a-y and b-x would have matched both. */
TEST(greedy_is_not_a_maximum_matching)
{
    struct loop_truth t[2] = {tru(1000, 5, 1, 10), tru(1100, 5, 2, 10)};
    struct loop_spike d[2] = {det(1049, 5), det(950, 5)};
    struct loop_score sc = score(t, 2, d, 2);
    CHECK_EQ(counts(&sc), 111);
}

/* Counting is in [t_lo, t_hi]; matching is over everything. A detection in
 * the window that matches a truth event outside it counts as neither. */
TEST(only_the_window_counts)
{
    struct loop_truth t[3] = {tru(900, 5, 1, 10), tru(2000, 5, 1, 10), tru(3100, 5, 1, 10)};
    struct loop_spike d[3] = {det(950, 5), det(2000, 5), det(2500, 5)};
    struct loop_score sc;
    CHECK_EQ(loop_score_spikes(t, 3, d, 3, W, R, 1000, 3000, &sc), 0);
    /* 900 is out (its match at 950 counts as nothing), 2000 a tp, 2500 a
     * fp, 3100 out (unmatched, not a miss) */
    CHECK_EQ(sc.events, 1);
    CHECK_EQ(counts(&sc), 110);
    /* the edges are inclusive */
    CHECK_EQ(loop_score_spikes(t, 3, d, 3, W, R, 900, 3100, &sc), 0);
    CHECK_EQ(counts(&sc), 211);
}

TEST(recall_by_snr_band)
{
    CHECK_EQ(loop_score_band(0), -1);
    CHECK_EQ(loop_score_band(NAN), -1);
    CHECK_EQ(loop_score_band(4.99), 0);
    CHECK_EQ(loop_score_band(5), 1);
    CHECK_EQ(loop_score_band(7.99), 1);
    CHECK_EQ(loop_score_band(8), 2);
    CHECK_EQ(loop_score_band(12), 3);
    CHECK(!strcmp(loop_score_band_name(0), "<5") && !strcmp(loop_score_band_name(3), ">=12"));
    CHECK(loop_score_band_name(4) == NULL && loop_score_band_name(-1) == NULL);
    /* events of SNR 4, 6, 6, 10, 0 (unknown): the 4 and one 6 found */
    struct loop_truth t[5] = {tru(1000, 5, 1, 4), tru(2000, 5, 2, 6), tru(3000, 5, 2, 6), tru(4000, 5, 3, 10),
                              tru(5000, 5, 4, 0)};
    struct loop_spike d[2] = {det(1000, 5), det(3000, 5)};
    struct loop_score sc = score(t, 5, d, 2);
    CHECK_EQ(sc.events, 5);
    CHECK_EQ(sc.band_events[0], 1);
    CHECK_EQ(sc.band_events[1], 2);
    CHECK_EQ(sc.band_events[2], 1);
    CHECK_EQ(sc.band_events[3], 0);
    CHECK(loop_score_band_recall(&sc, 0) == 1.0);
    CHECK(loop_score_band_recall(&sc, 1) == 0.5);
    CHECK(loop_score_band_recall(&sc, 2) == 0.0);
    CHECK(isnan(loop_score_band_recall(&sc, 3)));
    CHECK(isnan(loop_score_band_recall(&sc, LOOP_SCORE_BANDS)));
    /* F1 at SNR >= 5: 3 such events, 1 found; the detection of the SNR 4
     * event counts neither way, a duplicate and a stray one are false
     * positives: 2 * 1 / (2 * 1 + 2 fp + 2 misses) */
    CHECK(fabs(loop_score_band_f1(&sc, 1) - 2.0 / 4.0) < 1e-12); /* no fp yet: 2 / (2 + 0 + 2) */
    struct loop_spike d2[4] = {det(1000, 5), det(3000, 5), det(3001, 5), det(9000, 5)};
    sc = score(t, 5, d2, 4);
    CHECK_EQ(sc.fp, 2);
    CHECK(fabs(loop_score_band_f1(&sc, 1) - 2.0 / 6.0) < 1e-12);
    CHECK(fabs(loop_score_band_f1(&sc, 0) - 4.0 / 8.0) < 1e-12); /* every band: 2 tp, 4 events (one has no SNR), 2 fp */
    CHECK(isnan(loop_score_band_f1(&sc, 3)));                   /* no event at SNR >= 12 */
    CHECK(isnan(loop_score_band_f1(&sc, -1)) && isnan(loop_score_band_f1(&sc, LOOP_SCORE_BANDS)));
}

/* Many events and detections at random (a fixed seed): every count adds up,
 * and each side is matched at most once (tp <= both). */
TEST(random_lists_add_up)
{
    enum { NT = 2000, ND = 3000 };
    struct loop_truth *t = malloc(NT * sizeof *t);
    struct loop_spike *d = malloc(ND * sizeof *d);
    REQUIRE(t && d);
    uint64_t s = 12345;
    for (int i = 0; i < NT; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        t[i] = tru((s >> 20) % 1000000, (uint32_t)((s >> 50) % 16), (uint32_t)i, 8);
    }
    for (int j = 0; j < ND; j++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        d[j] = det((s >> 20) % 1000000, (uint32_t)((s >> 50) % 16));
    }
    struct loop_score sc = score(t, NT, d, ND);
    CHECK_EQ(sc.events, NT);
    CHECK_EQ(sc.detections, ND);
    CHECK_EQ(sc.tp + sc.misses, NT);
    CHECK_EQ(sc.tp + sc.fp, ND);
    CHECK(sc.tp > 0 && sc.tp <= NT);
    fprintf(stderr, "  %llu matches of %d events and %d detections\n", (unsigned long long)sc.tp, NT, ND);
    free(t);
    free(d);
}

static struct loop_spike lab(uint64_t time, uint32_t chan, uint32_t unit)
{
    return (struct loop_spike){time, chan, 0, unit, 0};
}

/* Sorting: per truth unit, its events against the detections labelled
 * with it, one to one by time; accuracy = matched / (truth + detected -
 * matched); a label on another unit's event matches nothing. */
TEST(units_are_scored_by_their_labels)
{
    struct loop_truth t[] = {tru(1000, 5, 1, 6),  tru(5000, 5, 1, 6),  tru(9000, 5, 1, 6),
                             tru(3000, 40, 2, 20), tru(7000, 40, 2, 20)};
    struct loop_spike d[] = {
        lab(1005, 5, 1),  lab(5010, 6, 1),  /* two of unit 1's three */
        lab(12000, 5, 1),                   /* unit 1's false positive */
        lab(3000, 40, 2), lab(7020, 41, 2), /* both of unit 2's */
        lab(9000, 5, 2),                    /* unit 2's label on unit 1's event: matches nothing */
        det(9001, 5),                       /* unlabelled: not a sorting detection */
    };
    struct loop_unit_score *u;
    size_t nu;
    CHECK_RC(loop_score_units(t, 5, d, 7, W, 0, 1000000, &u, &nu), 0);
    REQUIRE(nu == 2);
    CHECK(u[0].unit == 1 && u[0].truth == 3 && u[0].detected == 3 && u[0].matched == 2);
    CHECK(fabs(u[0].accuracy - 2.0 / 4.0) < 1e-12 && fabs(u[0].snr - 6) < 1e-6);
    CHECK(u[1].unit == 2 && u[1].truth == 2 && u[1].detected == 3 && u[1].matched == 2);
    CHECK(fabs(u[1].accuracy - 2.0 / 3.0) < 1e-12);
    free(u);
    struct loop_score sc = score(t, 5, d, 7);
    CHECK_EQ(sc.labelled, 6);
    CHECK_EQ(sc.units, 2);
    CHECK(fabs(sc.accuracy - (0.5 + 2.0 / 3.0) / 2) < 1e-12);
    CHECK(sc.band_units[1] == 1 && sc.band_units[3] == 1 && sc.band_units[0] == 0 && sc.band_units[2] == 0);
    CHECK(fabs(sc.band_accuracy[1] - 0.5) < 1e-12 && fabs(sc.band_accuracy[3] - 2.0 / 3.0) < 1e-12);
    /* the window: unit 1's event at 9000 and unit 2's at 7000 outside it */
    CHECK_RC(loop_score_units(t, 5, d, 7, W, 0, 6000, &u, &nu), 0);
    REQUIRE(nu == 2);
    CHECK(u[0].truth == 2 && u[0].matched == 2 && u[0].detected == 2); /* the 12000 one is outside too */
    CHECK(u[1].truth == 1 && u[1].matched == 1 && u[1].detected == 1);
    free(u);
}

TEST(unlabelled_detections_score_no_units)
{
    struct loop_truth t = tru(1000, 5, 1, 10);
    struct loop_spike d = det(1000, 5);
    struct loop_score sc = score(&t, 1, &d, 1);
    CHECK(sc.labelled == 0 && sc.units == 0 && sc.accuracy == 0);
    struct loop_unit_score *u = (void *)1;
    size_t nu = 9;
    CHECK_RC(loop_score_units(&t, 1, &d, 1, W, 0, 1000000, &u, &nu), 0);
    /* the unit is there, with nothing labelled for it */
    REQUIRE(nu == 1);
    CHECK(u[0].truth == 1 && u[0].detected == 0 && u[0].accuracy == 0);
    free(u);
    CHECK_RC(loop_score_units(NULL, 0, NULL, 0, W, 0, 1000000, &u, &nu), 0);
    CHECK(u == NULL && nu == 0);
}
