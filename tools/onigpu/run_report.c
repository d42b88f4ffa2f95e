/* run_report.c - the result set of `onigpu run` (run_report.h, written by
 * src/results): one row of the
 * run's summary (struct loop_run_result, src/loop/run.h) and one row per
 * echo's latency, in the benchmarks' CSV/JSON format. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "run_report.h"
#include "results/results.h"

static void cell_lat(struct results *rep, const char *prefix, const struct loop_run_latency *l)
{
    char col[64];
    static const char *const names[] = {"p50", "p99", "p999", "max"};
    const double v[] = {l->p50_us, l->p99_us, l->p999_us, l->max_us};
    for (int i = 0; i < 4; i++) {
        snprintf(col, sizeof col, "%s_%s_us", prefix, names[i]);
        results_cell_num(rep, col, v[i]);
    }
}

int run_report_write(const char *dir, int argc, char **argv, int backend, const char *truth,
                     const struct loop_run_result *r)
{
    int err = 0;
    struct results *rep = results_open(dir, "run", argc, argv, NULL, &err);
    if (!rep)
        return err;
    const char *base = strrchr(truth, '/');
    results_meta(rep, "truth", base ? base + 1 : truth);
    results_meta_num(rep, "warmup_s", r->warmup_s);
    results_cell_str(rep, "backend", loop_backend_name(backend));
    results_cell_str(rep, "link", r->link);
    results_cell_str(rep, "stream", r->gpu_stream ? "gpu" : "default");
    results_cell_int(rep, "block_frames", r->block);
    results_cell_int(rep, "block_picked", r->block_picked);
    /* the workload, for `onigpu advise --workload` */
    results_cell_int(rep, "block_bytes", (long long)r->block_bytes);
    results_cell_num(rep, "ai", r->ai);
    results_cell_num(rep, "seconds", r->seconds);
    results_cell_int(rep, "stopped", r->stopped);
    results_cell_int(rep, "frames", (long long)r->frames);
    results_cell_int(rep, "bytes", (long long)r->bytes);
    results_cell_int(rep, "spikes", (long long)r->spikes);
    results_cell_int(rep, "spikes_unkept", (long long)r->spikes_unkept);
    results_cell_int(rep, "truth_events", (long long)r->score.events);
    results_cell_num(rep, "precision", r->score.precision);
    results_cell_num(rep, "recall", r->score.recall);
    results_cell_num(rep, "f1", r->score.f1);
    results_cell_int(rep, "true_pos", (long long)r->score.tp);
    results_cell_int(rep, "false_pos", (long long)r->score.fp);
    results_cell_int(rep, "misses", (long long)r->score.misses);
    /* recall per SNR band (score.h), NaN for a band without events */
    for (int b = 0; b < LOOP_SCORE_BANDS; b++) {
        static const char *const col[LOOP_SCORE_BANDS] = {"recall_snr_lt5", "recall_snr_5_8", "recall_snr_8_12",
                                                          "recall_snr_ge12"};
        results_cell_num(rep, col[b], loop_score_band_recall(&r->score, b));
    }
    results_cell_num(rep, "f1_snr_ge5", loop_score_band_f1(&r->score, 1));
    results_cell_int(rep, "stims", (long long)r->stims);
    results_cell_int(rep, "echoes", (long long)r->echoes);
    results_cell_int(rep, "echoes_unkept", (long long)r->echoes_unkept);
    cell_lat(rep, "lat", &r->lat);
    cell_lat(rep, "warmup_lat", &r->lat_warmup);
    for (int k = 0; k < LOOP_RUN_NSTAGES; k++)
        cell_lat(rep, loop_run_stage_name(k), &r->stage[k]);
    if (r->stats_rc)
        results_cell_num(rep, "dropped_frames", NAN);
    else
        results_cell_int(rep, "dropped_frames", (long long)r->dropped);
    results_cell_int(rep, "stalled_reads", (long long)r->stalls);
    results_cell_num(rep, "frames_per_s", r->fps);
    results_cell_num(rep, "backlog_ms", r->owed_ms);
    results_cell_num(rep, "emu_lag_max_ms", r->emu_lag_ms);
    results_cell_num(rep, "overrun", r->verdict < 0 ? NAN : !r->verdict);
    results_cell_int(rep, "probes", r->probes);
    results_cell_int(rep, "cards", r->cards);
    results_cell_int(rep, "echoes_unclocked", (long long)r->echoes_unclocked);
    results_row(rep, NULL);
    for (uint32_t p = 0; r->probes > 1 && p < r->probes; p++) { /* scored apart (run.h) */
        const struct loop_score *ps = &r->probe[p].score;
        uint32_t j = r->probe[p].on_card;
        results_cell_int(rep, "probe", p);
        results_cell_int(rep, "card", r->probe[p].card);
        results_cell_str(rep, "port", j < 2 ? "A" : "B");
        results_cell_str(rep, "headstage_probe", j % 2 ? "B" : "A");
        results_cell_int(rep, "spikes", (long long)r->probe[p].spikes);
        results_cell_int(rep, "truth_events", (long long)ps->events);
        results_cell_num(rep, "precision", ps->precision);
        results_cell_num(rep, "recall", ps->recall);
        results_cell_num(rep, "f1", ps->f1);
        results_row(rep, "probes");
    }
    for (size_t i = 0; i < r->nlat; i++) {
        results_cell_int(rep, "tag", r->lat_tag[i]);
        results_cell_num(rep, "latency_us", r->lat_us[i]);
        results_cell_int(rep, "warmup", r->lat_warm[i]);
        results_row(rep, "latency");
    }
    return results_close(rep);
}

