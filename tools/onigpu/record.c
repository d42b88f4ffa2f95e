/* record.c - the CLI's side of recording (record.h). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "record.h"
#include "cli_oni.h"
#include "common/mkdirs.h"
#include "onix.h"

static int format_parse(const char *s)
{
    return rec_format_of(s);
}

int rec_cli_arg(const struct cli_command *cmd, struct rec_cli *o, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    if (strcmp(a, "--record") && strncmp(a, "--record=", 9) && strcmp(a, "--format") && strncmp(a, "--format=", 9))
        return 0;
    char opt[64];
    const char *name, *v;
    cli_opt_split(argc, argv, i, opt, sizeof opt, &name, &v);
    if (!strcmp(name, "--record"))
        return cli_arg_text(cmd, name, v, "the directory of the recording", &o->dir) ? 2 : 1;
    o->have_format = 1;
    return cli_arg_name(cmd, name, v, format_parse, rec_format_name, REC_NFORMATS, &o->format) ? 2 : 1;
}

int rec_cli_check(const struct cli_command *cmd, const struct rec_cli *o)
{
    if (o->have_format && !o->dir) {
        fprintf(stderr, "onigpu %s: --format is the format of --record DIR: give --record too\n", cmd->name);
        return cli_usage(cmd);
    }
    return 0;
}

struct rec *rec_cli_open(const char *prog, const struct rec_cli *o, oni_ctx ctx, int stim_spikes)
{
    /* a file size limit must fail a write, not end the process */
    if (signal(SIGXFSZ, SIG_IGN) == SIG_ERR) {
        fprintf(stderr, "onigpu %s: cannot ignore SIGXFSZ\n", prog);
        return NULL;
    }
    oni_device_t *t = NULL;
    oni_size_t n = 0;
    int rc = cli_devtable(ctx, &t, &n);
    if (rc) {
        cli_fail("cannot read the device table", rc);
        return NULL;
    }
    struct rec_config c = {.dir = o->dir, .format = o->format, .stim_stream = stim_spikes,
                           .spike_stream = stim_spikes};
    char why[300];
    struct rec *r = NULL;
    int err = make_dirs(o->dir);
    if (err)
        fprintf(stderr, "onigpu %s: cannot make the directory %s: %s\n", prog, o->dir, strerror(err));
    else if ((rc = rec_open(&c, ctx, t, n, &r, why, sizeof why)))
        fprintf(stderr, "onigpu %s: cannot record into %s: %s\n", prog, o->dir, why);
    free(t);
    if (r) {
        char d[512];
        rec_describe(r, d, sizeof d);
        printf("recording (%s) into %s: %s\n", rec_format_name(o->format), o->dir, d);
    }
    return r;
}

int rec_cli_close(const char *prog, struct rec *r, const struct rec_cli *o)
{
    struct rec_stats s;
    int rc = rec_close(r, &s);
    printf("recorded into %s (%s): %llu frames, %llu samples, %llu events, %llu spikes, %.1f MB; queue peak %.1f MB\n",
           o->dir, rec_format_name(o->format), (unsigned long long)s.frames, (unsigned long long)s.samples,
           (unsigned long long)s.events, (unsigned long long)s.spikes, (double)s.bytes / 1e6,
           (double)s.queue_peak / 1e6);
    int bad = 0;
    if (s.lost_msgs) {
        printf("recording LOST %llu messages (%llu bytes): the writer fell behind and its queue was full\n",
               (unsigned long long)s.lost_msgs, (unsigned long long)s.lost_bytes);
        bad = 1;
    }
    if (s.unwritten)
        printf("recording could not write %llu frames after it stopped\n", (unsigned long long)s.unwritten);
    if (rc) {
        fprintf(stderr, "onigpu %s: recording stopped: %s (what was written before is whole)\n", prog,
                s.why[0] ? s.why : oni_error_str(rc));
        bad = 1;
    }
    return bad;
}

int rec_cli_run_check(int backend)
{
    if (backend == LOOP_CPU || backend == LOOP_GPU_STAGED || backend == LOOP_GPU_MAPPED)
        return 0;
    fprintf(stderr, "onigpu run: --record needs the probe's blocks in host memory, and backend %s reads them into "
                    "GPU memory: record with cpu, gpu-staged or gpu-mapped\n", loop_backend_name(backend));
    return 2;
}

static void tap_opened(void *arg, struct rec *r)
{
    const struct rec_cli *o = arg;
    char d[512];
    rec_describe(r, d, sizeof d);
    printf("recording (%s) into %s: %s\n", rec_format_name(o->format), o->dir, d);
}

const struct loop_run_tap *rec_cli_tap(struct rec_tap *t, const struct rec_cli *o)
{
    if (signal(SIGXFSZ, SIG_IGN) == SIG_ERR) { /* a file size limit must fail a write */
        fprintf(stderr, "onigpu run: cannot ignore SIGXFSZ\n");
        return NULL;
    }
    int err = make_dirs(o->dir);
    if (err) {
        fprintf(stderr, "onigpu run: cannot make the directory %s: %s\n", o->dir, strerror(err));
        return NULL;
    }
    struct rec_config c = {.dir = o->dir, .format = o->format};
    rec_loop_tap_init(&t->t, &c);
    t->t.opened = tap_opened;
    t->t.arg = (void *)o;
    t->o = o;
    return &t->t.tap;
}

int rec_cli_tap_close(struct rec_tap *t)
{
    if (!t->t.r)
        return 0;
    struct rec *r = t->t.r;
    t->t.r = NULL;
    return rec_cli_close("run", r, t->o);
}
