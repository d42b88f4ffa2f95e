/* cmd_run.c - `onigpu run`: the closed loop on the emulated card
 * (src/loop/run.h does the work, src/bench writes the result set):
 * arguments, the stages, the truth file, the live lines, the summary.
 * SIGINT and SIGTERM end the run as --seconds would. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "bench/bench.h"
#include "cli.h"
#include "cli_oni.h"
#include "common/stopsig.h"
#include "loop/run.h"
#include "record.h"
#include "view.h"

static int run(int argc, char **argv);

CLI_COMMAND(run, "run",
            "[--backend NAME] [--emu SPEC] [--block FRAMES] [--seconds T] [--link PRESET] [--out DIR]\n"
            "          [--stage NAME|FILE[:OPTIONS]]... [--record DIR [--format openephys|nwb]]\n"
            "          [--view [HOST:]PORT [--view-token FILE]]",
            "closed loop on the emulated card: NP2.0e -> spike detection -> digital outputs; latency and accuracy",
            NULL, run)

struct opts {
    const char *backend, *out;
    struct loop_stage_spec stages[LOOP_MAXCHAIN];
    struct loop_run_config c;
    struct rec_cli rec; /* --record DIR, --format (record.h) */
    struct view_cli view; /* --view, --view-token (view.h) */
};

/* --stage NAME|FILE[:OPTIONS]: loaded and checked now (its options when the loop is made). */
static int add_stage(const struct cli_command *cmd, const char *a, const char *v, struct opts *o)
{
    char why[400];
    if (!v)
        return cli_bad_value(cmd, a, v, "a built-in stage (filter, reference, detect, decide) or a shared object "
                             "(a path with a '/'), then :OPTIONS");
    if (o->c.nstages == LOOP_MAXCHAIN)
        return cli_bad_value(cmd, a, v, "at most %d stages", LOOP_MAXCHAIN);
    if (loop_stage_check(v, why, sizeof why))
        return cli_bad_value(cmd, a, v, "a stage that loads: %s", why);
    o->stages[o->c.nstages++] = (struct loop_stage_spec){v, NULL, NULL};
    o->c.stages = o->stages;
    return 0;
}

/* Parse argv into o: 0, or exit status 2 after saying what was wrong. */
static int parse(int argc, char **argv, struct opts *o)
{
    const struct cli_command *cmd = &cli_cmd_run;
    for (int i = 1; i < argc; i++) {
        int st = rec_cli_arg(cmd, &o->rec, argc, argv, &i);
        if (st > 1)
            return st;
        if (st || (st = view_cli_arg(cmd, &o->view, argc, argv, &i)) == 1)
            continue;
        if (st)
            return st;
        char opt[64];
        const char *a, *v;
        cli_opt_split(argc, argv, &i, opt, sizeof opt, &a, &v);
        uint64_t n;
        if (!strcmp(a, "--backend")) {
            st = cli_arg_name(cmd, a, v, loop_backend_parse, loop_backend_name, LOOP_NBACKENDS, &o->c.backend);
            o->backend = v;
        } else if (!strcmp(a, "--emu") || !strcmp(a, "--devices")) {
            st = cli_arg_text(cmd, a, v, "the emulated card's spec string (oniemu.h)", &o->c.spec);
        } else if (!strcmp(a, "--link")) {
            st = cli_arg_text(cmd, a, v, cli_link_allowed(), &o->c.link);
        } else if (!strcmp(a, "--out")) {
            st = cli_arg_text(cmd, a, v, "the name of a directory", &o->out);
        } else if (!strcmp(a, "--block")) {
            /* at most 50 ms: more would be owed at the stop than the backlog
             * a loop that keeps up may leave */
            if (!(st = cli_arg_count(cmd, a, v, 1, LOOP_RUN_MAX_BLOCK, &n)))
                o->c.block = (uint32_t)n;
        } else if (!strcmp(a, "--stage")) {
            st = add_stage(cmd, a, v, o);
        } else if (!strcmp(a, "--seconds")) {
            st = cli_arg_seconds(cmd, a, v, LOOP_RUN_MIN_SECONDS, 0, 86400, &o->c.seconds);
        } else {
            st = cli_bad_arg(cmd, a == opt ? argv[i] : a);
        }
        if (st)
            return st;
    }
    int st = rec_cli_check(cmd, &o->rec);
    if (!st)
        st = view_cli_check(cmd, &o->view);
    return st ? st : cli_check_link(cmd, o->c.link);
}

/* The ground-truth file the card appends to, a new file of the run's own:
 * DIR/truth-<UTC date>.csv with --out (DIR made by cli_arg_outdir; an
 * existing file of that name is refused, never replaced),
 * else a temporary one (mkstemps: O_EXCL, not a name another user could
 * have put a link at). 0, or exit status 2 (said why). */
static int make_truth(const struct opts *o, char *truth, size_t cap)
{
    if (!o->out) {
        snprintf(truth, cap, "/tmp/onigpu-truth-%d-XXXXXX.csv", (int)getpid());
        int fd = mkstemps(truth, 4);
        if (fd < 0) {
            fprintf(stderr, "onigpu run: cannot create a temporary file in /tmp: %s\n", strerror(errno));
            return 1;
        }
        close(fd);
        return 0;
    }
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", gmtime_r(&now, &tm));
    snprintf(truth, cap, "%s/truth-%s.csv", o->out, stamp);
    int fd = open(truth, O_WRONLY | O_CREAT | O_EXCL, 0666);
    if (fd < 0)
        return cli_bad_value(&cli_cmd_run, "--out", o->out, "a directory where %s can be made: %s%s", truth,
                             strerror(errno), errno == EEXIST ? " (a run started in the same second: not replaced)" : "");
    close(fd);
    return 0;
}

static void on_started(void *arg, const struct loop_run_result *r)
{
    struct opts *o = arg;
    view_cli_started(&o->view, loop_backend_name(o->c.backend), r);
    printf("onigpu run: backend %s, %u frames per block (%.2f ms), %.1f s on the emulated card (link %s)\n",
           loop_backend_name(o->c.backend), r->block, r->block / 30.0, o->c.seconds, r->link);
    if (r->gpu_stream)
        printf("onigpu run: the probe's super-frames on the card's GPU data stream\n");
    else
        printf("onigpu run: the card has no GPU data stream: the probe's super-frames on the default stream "
               "(host backends only)\n");
    fflush(stdout);
}

static void on_progress(void *arg, const struct loop_run_progress *p)
{
    view_cli_progress(&((struct opts *)arg)->view, p);
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

static void print_summary(const struct opts *o, const char *truth, const struct loop_run_result *r)
{
    printf("\nsummary (%s, %.2f s%s)\n", loop_backend_name(o->c.backend), r->seconds,
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
    printf("  spikes detected    %llu (%llu not listed: block overflow)\n", (unsigned long long)r->spikes,
           (unsigned long long)r->spikes_overflow);
    if (r->spikes_unkept)
        printf("                     %llu more past those kept: not scored (scored up to the last kept)\n",
               (unsigned long long)r->spikes_unkept);
    const struct loop_score *sc = &r->score;
    printf("  vs ground truth    %llu events scored, precision %.3f, recall %.3f, F1 %.3f\n",
           (unsigned long long)sc->events, sc->precision, sc->recall, sc->f1);
    printf("                     one to one (+-%.1f ms, +-%d channels): %llu true positives, %llu false positives "
           "(duplicates included), %llu missed\n",
           LOOP_SCORE_WINDOW_S * 1e3, LOOP_SCORE_RADIUS, (unsigned long long)sc->tp, (unsigned long long)sc->fp,
           (unsigned long long)sc->misses);
    printf("                     recall by SNR (trough / noise SD):");
    for (int b = 0; b < LOOP_SCORE_BANDS; b++)
        if (sc->band_events[b])
            printf(" %s %.3f (%llu)", loop_score_band_name(b), loop_score_band_recall(sc, b),
                   (unsigned long long)sc->band_events[b]);
        else
            printf(" %s -", loop_score_band_name(b));
    printf("\n");
    if (!o->out)
        printf("  truth file         %s (temporary: removed at the end)\n", truth);
    printf("  stimulations       %llu sent, %llu echoed (one per block the chain decided to stimulate)", (unsigned long long)r->stims,
           (unsigned long long)r->echoes);
    if (r->echoes_unkept)
        printf(" (latencies of the first %zu)", r->nlat);
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

static _Atomic int stop_flag;

static void on_stop(void *arg)
{
    (void)arg;
    atomic_store(&stop_flag, 1);
}

/* The run, its summary and its files; the exit status. */
static int session(struct opts *o, const char *truth)
{
    struct loop_run_result r;
    int rc = loop_run_session(&o->c, &r);
    if (rc)
        fprintf(stderr, "onigpu run: %s\n", r.why[0] ? r.why : oni_error_str(rc));
    if (!r.ran) { /* nothing ran: a card that cannot serve the loop */
        if (o->out)
            remove(truth);
        view_cli_close(&o->view, &r, NULL);
        return rc == ONI_EINVALSTATE ? 2 : 1;
    }
    print_summary(o, truth, &r);
    if (o->out) {
        char **full;
        int nfull = cli_command_line(&full);
        int err = bench_run_report(o->out, nfull, full, o->c.backend, truth, &r);
        if (err)
            rc = rc ? rc : cli_fail("writing results", err);
        else
            printf("  results in %s\n", o->out);
    }
    view_cli_close(&o->view, &r, o->out);
    loop_run_result_free(&r);
    return rc ? 1 : 0;
}

static int run(int argc, char **argv)
{
    struct opts o = {.c = {.block = 0, .seconds = 5.0}}; /* block 0: picked by trials (run.h) */
    o.c.started = on_started;
    o.c.progress = on_progress;
    o.c.arg = &o;
    o.c.stop = &stop_flag;
    int status = parse(argc, argv, &o);
    if (status)
        return status;
    if (!o.backend)
        o.c.backend = loop_backend_best();
    char why[160];
    if (!loop_backend_available(o.c.backend, why, sizeof why)) {
        fprintf(stderr, "onigpu run: backend %s is not available: %s\n", loop_backend_name(o.c.backend), why);
        return 1;
    }
    struct rec_tap tap;
    if (o.rec.dir) {
        if ((status = rec_cli_run_check(o.c.backend)))
            return status;
        if (!(o.c.tap = rec_cli_tap(&tap, &o.rec)))
            return 1;
    }
    char truth[4096];
    if (o.out && (status = cli_arg_outdir(&cli_cmd_run, "--out", o.out, &o.out)) != 0)
        return status;
    status = make_truth(&o, truth, sizeof truth);
    if (status)
        return status;
    o.c.truth = truth;
    if (o.view.addr && view_cli_open(&o.view, &o.c)) {
        remove(truth);
        return 1;
    }
    /* before the driver starts any thread: every later one blocks the signals */
    int src = stopsig_start(on_stop, NULL);
    if (src) {
        fprintf(stderr, "onigpu run: cannot take SIGINT/SIGTERM: %s\n", strerror(src));
        status = 1;
    } else {
        status = session(&o, truth);
        if (o.rec.dir && rec_cli_tap_close(&tap))
            status = status ? status : 1;
        stopsig_end();
    }
    if (!o.out)
        remove(truth);
    view_cli_close(&o.view, NULL, NULL);
    return status;
}
