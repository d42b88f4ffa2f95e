/* score.h - spike detections scored against ground truth, one to one, as
 * spike-sorting benchmarks score a sorter against ground truth.
 *
 * Each truth event is matched by at most one detection and each detection
 * matches at most one truth event: candidate pairs are those within the time
 * window and the spatial radius (um between the two channels' sites on the
 * probe, oni/util/probe.h; channels of two probes are never near); they are
 * taken greedily, closest in time first (then closest in space, then
 * earliest), each pair only while both of
 * its members are still free (greedy, not a maximum matching: a detection
 * between two events takes the closer even where the farther one's taking
 * it would let a third detection match the other). A detection left over is a false positive, so a
 * second detection of one event (a duplicate) is one; a truth event left over
 * is a miss. precision = tp / (tp + fp), recall = tp / (tp + misses),
 * F1 = 2 tp / (2 tp + fp + misses).
 *
 * Only a window [t_lo, t_hi] of the recording is scored: matching is done
 * over everything given, then a pair counts (as a true positive) when its truth
 * event lies in the window, a free detection (false positive) or a free truth
 * event (miss) when it lies in the window. So a detection just inside the
 * window that matches a truth event just outside it counts as neither.
 *
 * Sorting (detections labelled with a unit, onigpu_spike.unit: tmatch's
 * template index, which for the emulator's templates is the truth unit, the
 * truth of several probes numbered as tmatch numbers their sets: run.c):
 * per truth unit u, its truth events and the detections labelled u are
 * matched one to one in the same way, by time alone (the label says which
 * unit; no spatial radius), and the unit's accuracy is
 * matched / (truth + detected - matched), as SpikeInterface's ground-truth
 * comparison defines it (doc/modules/comparison.rst: agreement score =
 * matches / (events GT + events tested - matches), accuracy = tp / (tp + fn
 * + fp)), with the label taken as the unit (no Hungarian search for the
 * best-agreeing label: the emulator's template i is its unit i). A unit's
 * SNR is the mean of its events' SNRs. */
#ifndef LOOP_SCORE_H
#define LOOP_SCORE_H

#include <stddef.h>
#include <stdint.h>
#include "loop/kernels.h"

/* Time window: +-0.4 ms, SpikeInterface's default for comparing spike trains
 * to ground truth (delta_time=0.4 ms, MixinSpikeTrainComparison in
 * src/spikeinterface/comparison/basecomparison.py). At 30 kHz that is +-12
 * samples: wide enough for the detector's crossing on the trough's falling
 * edge (every emulated spike is matched: docs/closed-loop.md "Scoring"),
 * narrower than the 2 ms refractory gap between two spikes of one unit
 * (src/emu/neural.c). */
#define LOOP_SCORE_WINDOW_S 0.4e-3
/* Spatial radius: a detection counts within 50 um of the truth event's trough
 * site, the distance on the probe's real site positions (NP2.0: 32 um between
 * its two columns, 15 um between rows; oni/util/probe.h). 50 um is a
 * choice (SpikeInterface's peak detectors take a radius_um of this order,
 * sortingcomponents/peak_detection): it covers the trough
 * site's neighbourhood, 12 sites (the trough's column 3 rows either side, the
 * other column 2 rows either side), where a unit that now spans 10-20
 * channels (docs/emulator.md) crosses the threshold most. */
#define LOOP_SCORE_RADIUS_UM 50.0f

/* Recall is also reported per SNR band of the truth events: the trough's
 * depth on its trough channel over the noise SD, as the emulator writes it
 * (docs/emulator.md "Ground truth"). Bands: < 5, 5-8, 8-12, >= 12. */
#define LOOP_SCORE_BANDS 4

struct loop_truth {
    uint64_t time;  /* acquisition clock of the spike's trough */
    uint32_t chan;  /* its trough channel: probe * 384 + the probe's channel */
    uint32_t unit;
    float snr;      /* trough depth / noise SD; 0: unknown (in no band) */
};

struct loop_score {
    uint64_t events;      /* truth events in the window: tp + misses */
    uint64_t detections;  /* detections counted: tp + fp */
    uint64_t tp, fp, misses;
    double precision, recall, f1; /* 0 where the denominator is 0 */
    uint64_t band_events[LOOP_SCORE_BANDS], band_tp[LOOP_SCORE_BANDS];
    /* Sorting, when some detection carries a unit label (labelled > 0; else
     * all of these are 0): */
    uint64_t labelled;    /* detections in the window with a label */
    uint64_t units;       /* truth units with events in the window */
    double accuracy;      /* their mean accuracy */
    uint64_t band_units[LOOP_SCORE_BANDS]; /* units per SNR band (of the unit's SNR) */
    double band_accuracy[LOOP_SCORE_BANDS]; /* their mean accuracy, 0 without units */
};

/* One truth unit's sorting score (loop_score_units). */
struct loop_unit_score {
    uint32_t unit;
    float snr;            /* mean SNR of its events (0: unknown) */
    uint64_t truth, detected, matched; /* in the window */
    double accuracy;      /* matched / (truth + detected - matched), 0 when both are 0 */
};

/* Score nd detections against nt truth events (neither need be sorted; both
 * are only read), window tol ticks either side, spatial radius radius_um
 * (channels are probe * 384 + the probe's channel, on NP2.0 sites),
 * counting in [t_lo, t_hi] (inclusive) as above, into *out. 0, or
 * ONI_EBADALLOC (*out is then all zero). */
int loop_score_spikes(const struct loop_truth *truth, size_t nt, const struct loop_spike *det, size_t nd,
                      uint64_t tol, float radius_um, uint64_t t_lo, uint64_t t_hi, struct loop_score *out);

/* Per-unit accuracy (above) of detections labelled with units: one row per
 * truth unit with events in [t_lo, t_hi], by unit number, into *out (malloc'd,
 * the caller frees it; NULL when *n is 0). Unlabelled detections
 * (ONIGPU_UNIT_NONE) are not looked at. 0, or ONI_EBADALLOC (*out NULL, *n 0). */
int loop_score_units(const struct loop_truth *truth, size_t nt, const struct loop_spike *det, size_t nd, uint64_t tol,
                     uint64_t t_lo, uint64_t t_hi, struct loop_unit_score **out, size_t *n);

/* The band (0 .. LOOP_SCORE_BANDS - 1) of an SNR, -1 for an unknown (<= 0) one. */
int loop_score_band(double snr);
/* A band's name ("<5", "5-8", "8-12", ">=12"), NULL for another number. */
const char *loop_score_band_name(int band);
/* A band's recall: band_tp / band_events, NAN without events. */
double loop_score_band_recall(const struct loop_score *sc, int band);
/* F1 of the truth events of bands from .. LOOP_SCORE_BANDS - 1 (from 1:
 * SNR >= 5): their matches and misses against every free detection as a
 * false positive (a detection matched to a quieter event counts neither
 * way: it found a real spike). NAN for another from, or without such
 * events. */
double loop_score_band_f1(const struct loop_score *sc, int from);

#endif
