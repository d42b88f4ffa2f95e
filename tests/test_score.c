/* test_score.c - one-to-one scoring of detections against ground truth
 * (src/loop/score.h), on hand-made lists. Times are ticks; the window is
 * 100 ticks, the channel radius 2, unless a test says otherwise. */
#include <math.h>
#include <stdlib.h>
#include "oni.h"
#include "unit.h"
#include "loop/score.h"

#define W 100

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
    CHECK_EQ(loop_score_spikes(t, nt, d, nd, W, 2, 0, 1000000, &sc), 0);
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

/* Outside the window in time or in channel: a false positive and a miss. */
TEST(outside_the_window_is_a_false_positive_and_a_miss)
{
    struct loop_truth t = tru(1000, 5, 1, 10);
    struct loop_spike late = det(1000 + W + 1, 5), far = det(1000, 8);
    struct loop_score sc = score(&t, 1, &late, 1);
    CHECK_EQ(counts(&sc), 11);
    sc = score(&t, 1, &far, 1);
    CHECK_EQ(counts(&sc), 11);
}

/* The window's edges are inclusive: W ticks either side, 2 channels away. */
TEST(window_edges_are_inclusive)
{
    struct loop_truth t = tru(1000, 5, 1, 10);
    const struct {
        uint64_t time;
        uint32_t chan;
        int want;
    } c[] = {
        {1000 - W, 5, 100}, {1000 - W - 1, 5, 11}, {1000 + W, 5, 100}, {1000 + W + 1, 5, 11},
        {1000, 7, 100},     {1000, 3, 100},        {1000, 8, 11},      {1000, 2, 11},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        struct loop_spike d = det(c[i].time, c[i].chan);
        struct loop_score sc = score(&t, 1, &d, 1);
        CHECK_EQ(counts(&sc), c[i].want);
    }
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
    CHECK_EQ(loop_score_spikes(t, 3, d, 3, W, 2, 1000, 3000, &sc), 0);
    /* 900 is out (its match at 950 counts as nothing), 2000 a tp, 2500 a
     * fp, 3100 out (unmatched, not a miss) */
    CHECK_EQ(sc.events, 1);
    CHECK_EQ(counts(&sc), 110);
    /* the edges are inclusive */
    CHECK_EQ(loop_score_spikes(t, 3, d, 3, W, 2, 900, 3100, &sc), 0);
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
