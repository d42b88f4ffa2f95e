/* run_print.c - what `onigpu run` prints (run_print.h): the start, a line
 * per second, the summary. */
#include "run_print.h"

#include <math.h>
#include <stdio.h>
#include "oni.h"

void run_print_started(int backend, double seconds, const struct loop_run_result *r)
{
    printf("onigpu run: backend %s, %u frames per block (%.2f ms), %.1f s on the emulated card (link %s)\n",
           loop_backend_name(backend), r->block, r->block / 30.0, seconds, r->link);
    const char *whose = r->probes > 1 ? "the probes'" : "the probe's";
    if (r->probes > 1)
        printf("onigpu run: %u probes side by side (%u channels), one chain, one decision\n", r->probes,
               384 * r->probes);
    if (r->cards > 1)
        printf("onigpu run: %u emulated cards, the probes spread evenly; card 0's stimulator answers them all, "
               "and only card 0's spikes give a latency (the cards' clocks are their own)\n", r->cards);
    if (r->gpu_stream)
        printf("onigpu run: %s super-frames on the card's GPU data stream\n", whose);
    else
        printf("onigpu run: the card has no GPU data stream: %s super-frames on the default stream "
               "(host backends only)\n", whose);
    fflush(stdout);
}

void run_print_progress(const struct loop_run_progress *p)
{
    printf("%5.1f s  %7.0f frames/s  %6llu stims", p->t, p->fps, (unsigned long long)p->stims);
    if (p->have_lat)
        printf("  latency p50 %7.1f us p99 %7.1f us", p->lat_p50_us, p->lat_p99_us);
    if (p->ss_rc)
        printf("  card statistics: %s\n", oni_error_str(p->ss_rc));
    else
        printf("  fifo %.1f%% (%.1f ms behind)  drops %llu\n", p->fifo_pct, p->behind_ms,
               (unsigned long long)p->dropped);
    fflush(stdout);
}

static void print_lat(const char *what, const struct loop_run_latency *l)
{
    printf("  %s: ", what);
    if (l->n)
        printf("p50 %.1f us, p99 %.1f us, p99.9 %.1f us, max %.1f us (%zu echoes)\n", l->p50_us, l->p99_us,
               l->p999_us, l->max_us, l->n);
    else
        printf("no echo\n");
}

/* Where the time after the block's last sample went (run.h's stages). */
static void print_stages(const struct loop_run_result *r)
{
    if (!r->stage[LOOP_RUN_AFTER].n)
        return;
    printf("  after the block's last sample (p50 / p99 us; clock placed within %.1f us):", r->clock_err_us);
    for (int k = 0; k < LOOP_RUN_NSTAGES; k++)
        if (r->stage[k].n)
            printf(" %s %.1f / %.1f", loop_run_stage_name(k), r->stage[k].p50_us, r->stage[k].p99_us);
    printf("\n");
}

/* The sorting line of a score with labelled detections, after the label what. */
static void print_sorting(const char *what, const struct loop_score *sc)
{
    printf("  %s accuracy %.3f over %llu units (matched / (truth + labelled - matched), per unit); by SNR", what,
           sc->accuracy, (unsigned long long)sc->units);
    for (int b = 0; b < LOOP_SCORE_BANDS; b++)
        if (sc->band_units[b])
            printf(" %s %.3f (%llu)", loop_score_band_name(b), sc->band_accuracy[b],
                   (unsigned long long)sc->band_units[b]);
        else
            printf(" %s -", loop_score_band_name(b));
    printf(" (units)\n");
}

void run_print_summary(int backend, const char *truth, int truth_kept, const struct loop_run_result *r)
{
    printf("\nsummary (%s, %.2f s%s)\n", loop_backend_name(backend), r->seconds,
           r->stopped ? ", ended early by a signal" : "");
    printf("  frames processed   %llu (%llu bytes, %.0f frames/s)\n", (unsigned long long)r->frames,
           (unsigned long long)r->bytes, r->fps);
    char left[64] = "data left in the card unknown";
    if (!isnan(r->owed_ms))
        snprintf(left, sizeof left, "%.1f ms of data left in the card at the end", r->owed_ms);
    printf("  keeping up         %s: %.0f of %.0f frames/s, %s%s\n",
           r->verdict < 0 ? "unknown" : r->verdict ? "yes" : "NO (overrun)", r->fps, r->fs_hz, left,
           r->dropped    ? "; the card dropped frames"
           : !r->verdict ? "; latency grows with the backlog, and drops follow once the FIFO is full" : "");
    if (!isnan(r->emu_lag_ms))
        printf("  emulated card      its generator fell at most %.3f ms behind real time%s\n", r->emu_lag_ms,
               r->emu_lag_ms >= 1.0 ? ": the frames came that late, and the latencies below include it (a real "
                                      "card makes each frame at its time)" : "");
    printf("  spikes detected    %llu (%llu not listed: block overflow)\n", (unsigned long long)r->spikes,
           (unsigned long long)r->spikes_overflow);
    if (r->spikes_unkept)
        printf("                     %llu more past those kept: not scored (scored up to the last kept)\n",
               (unsigned long long)r->spikes_unkept);
    const struct loop_score *sc = &r->score;
    printf("  vs ground truth    %llu events scored, precision %.3f, recall %.3f, F1 %.3f\n",
           (unsigned long long)sc->events, sc->precision, sc->recall, sc->f1);
    printf("                     one to one (+-%.1f ms, %.0f um): %llu true positives, %llu false positives "
           "(duplicates included), %llu missed\n",
           LOOP_SCORE_WINDOW_S * 1e3, (double)LOOP_SCORE_RADIUS_UM, (unsigned long long)sc->tp, (unsigned long long)sc->fp,
           (unsigned long long)sc->misses);
    printf("                     recall by SNR (trough / noise SD):");
    for (int b = 0; b < LOOP_SCORE_BANDS; b++)
        if (sc->band_events[b])
            printf(" %s %.3f (%llu)", loop_score_band_name(b), loop_score_band_recall(sc, b),
                   (unsigned long long)sc->band_events[b]);
        else
            printf(" %s -", loop_score_band_name(b));
    printf("\n");
    printf("                     F1 of the events at SNR >= 5 (every false positive counted): %.3f\n",
           loop_score_band_f1(sc, 1));
    if (sc->labelled)
        print_sorting("sorting           ", sc);
    for (uint32_t p = 0; r->probes > 1 && p < r->probes; p++) {
        const struct loop_score *ps = &r->probe[p].score;
        uint32_t j = r->probe[p].on_card;
        char card[16] = "";
        if (r->cards > 1)
            snprintf(card, sizeof card, "card %u, ", r->probe[p].card);
        printf("  probe %u (%sport %c, probe %c)  %llu spikes; %llu events, precision %.3f, recall %.3f, F1 %.3f\n", p,
               card, j < 2 ? 'A' : 'B', j % 2 ? 'B' : 'A', (unsigned long long)r->probe[p].spikes,
               (unsigned long long)ps->events, ps->precision, ps->recall, ps->f1);
        if (sc->labelled)
            print_sorting("  its sorting     ", ps);
    }
    if (!truth_kept)
        printf("  truth file         %s (temporary: removed at the end)\n", truth);
    for (uint32_t k = 1; k < r->cards; k++) {
        char path[4200];
        if (!loop_run_card_truth(truth, k, path, sizeof path))
            printf("  card %u's truth    %s%s\n", k, path, truth_kept ? "" : " (temporary: removed at the end)");
    }
    printf("  stimulations       %llu sent, %llu echoed (one per block the chain decided to stimulate)", (unsigned long long)r->stims,
           (unsigned long long)r->echoes);
    if (r->echoes_unkept)
        printf(" (latencies of the first %zu)", r->nlat);
    if (r->echoes_unclocked)
        printf(", %llu of them answering other cards' spikes (no latency: not card 0's clock)",
               (unsigned long long)r->echoes_unclocked);
    printf("\n");
    print_lat("closed-loop latency (spike sample -> the digital outputs' change, hub clock, after the warm-up)",
              &r->lat);
    char warm[96];
    snprintf(warm, sizeof warm, "warm-up latency (spikes of the first %.1f s, not in the figures above)", r->warmup_s);
    print_lat(warm, &r->lat_warmup);
    if (r->block_picked)
        printf("  block              %u frames: %s\n", r->block, r->block_why);
    print_stages(r);
    if (r->stats_rc)
        printf("  dropped            unknown (card statistics: %s), %llu stalled reads\n", oni_error_str(r->stats_rc),
               (unsigned long long)r->stalls);
    else
        printf("  dropped            %llu frames in the card FIFOs while the loop ran, %llu stalled reads\n",
               (unsigned long long)r->dropped, (unsigned long long)r->stalls);
    printf("                     (a stalled read waited for a free block slot: back-pressure on the card, no loss)\n");
}
