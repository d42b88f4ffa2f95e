/* cmd_run.c - `onigpu run`: the closed loop on the emulated card
 * (src/loop/run.h does the work, run_print.c prints it, run_report.c
 * writes the result set): arguments, the stages, the files.
 * SIGINT and SIGTERM end the run as --seconds would. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"
#include "cli_oni.h"
#include "common/stopsig.h"
#include "loop/run.h"
#include "record.h"
#include "run_print.h"
#include "run_report.h"
#include "view.h"

static int run(int argc, char **argv);

CLI_COMMAND(run, "run",
            "[--backend NAME] [--emu SPEC] [--probes N] [--cards K] [--block FRAMES] [--seconds T] [--link PRESET]\n"
            "          [--out DIR]"
            " [--stage NAME|FILE[:OPTIONS]]... [--record DIR [--format openephys|nwb]]\n"
            "          [--view [HOST:]PORT [--view-token FILE]]",
            "closed loop on the emulated card: NP2.0e -> spike detection -> digital outputs; latency and accuracy",
            NULL, run)

struct opts {
    const char *backend, *out;
    struct loop_stage_spec stages[LOOP_MAXCHAIN];
    struct loop_run_config c;
    struct rec_cli rec; /* --record DIR, --format (record.h) */
    struct view_cli view; /* --view, --view-token (view.h) */
    int gpu_left_running; /* the run left a GPU kernel that will not stop (run.h) */
};

/* --stage NAME|FILE[:OPTIONS]: loaded and checked now (its options when the loop is made). */
static int add_stage(const struct cli_command *cmd, const char *a, const char *v, struct opts *o)
{
    char why[400];
    if (!v)
        return cli_bad_value(cmd, a, v, "a built-in stage (filter, reference, detect, decide, tmatch) or a shared object "
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
        } else if (!strcmp(a, "--probes")) {
            if (!(st = cli_arg_count(cmd, a, v, 1, LOOP_RUN_MAX_PROBES, &n)))
                o->c.probes = (uint32_t)n;
        } else if (!strcmp(a, "--cards")) {
            if (!(st = cli_arg_count(cmd, a, v, 1, LOOP_RUN_MAX_CARDS, &n)))
                o->c.cards = (uint32_t)n;
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

static void on_started(void *arg, const struct loop_run_result *r)
{
    struct opts *o = arg;
    view_cli_started(&o->view, loop_backend_name(o->c.backend), r);
    run_print_started(o->c.backend, o->c.seconds, r);
}

static void on_progress(void *arg, const struct loop_run_progress *p)
{
    view_cli_progress(&((struct opts *)arg)->view, p);
    run_print_progress(p);
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
            loop_run_truth_remove(truth);
        view_cli_close(&o->view, &r, NULL);
        return rc == ONI_EINVALSTATE ? 2 : 1;
    }
    o->gpu_left_running = r.gpu_left_running;
    run_print_summary(o->c.backend, truth, o->out != NULL, &r);
    if (o->out) {
        char **full;
        int nfull = cli_command_line(&full);
        int err = run_report_write(o->out, nfull, full, o->c.backend, truth, &r);
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
    char why[4200];
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
        o.view.rec = &tap.t.r; /* the page's changes become the recording's messages */
    }
    char truth[4096];
    if (o.out && (status = cli_arg_outdir(&cli_cmd_run, "--out", o.out, &o.out)) != 0)
        return status;
    if (loop_run_truth_new(o.out, truth, sizeof truth, why, sizeof why)) {
        if (o.out)
            return cli_bad_value(&cli_cmd_run, "--out", o.out, "%s", why);
        fprintf(stderr, "onigpu run: %s\n", why);
        return 1;
    }
    o.c.truth = truth;
    if (o.view.addr && view_cli_open(&o.view, &o.c)) {
        loop_run_truth_remove(truth);
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
        loop_run_truth_remove(truth);
    view_cli_close(&o.view, NULL, NULL);
    if (o.gpu_left_running) {
        /* A kernel that never returns: the CUDA runtime's teardown at exit
         * would wait for it for good. Ending the process without it lets
         * the driver destroy the context, which stops the kernel. */
        fprintf(stderr, "onigpu run: ending without the CUDA runtime's teardown, which would wait for the kernel\n");
        fflush(NULL);
        _exit(status ? status : 1);
    }
    return status;
}
