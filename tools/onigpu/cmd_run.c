/* cmd_run.c - `onigpu run`: the main job. Neuropixels 2.0 frames from the
 * emulated card's GPU data stream into spike detection on the chosen backend,
 * a stimulation decision written back to the stimulator as a write frame,
 * and the stimulator's echo (receipt time in the acquisition clock) read
 * from the default stream to measure closed-loop latency end to end:
 * from the spike's sample time to the stimulator's receipt time. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "bench/bench.h"
#include "cli.h"
#include "cli_oni.h"
#include "oniemu.h"
#include "onigpu.h"
#include "onix.h"
#include "loop/loop.h"
#include "loop/source.h"
#include "loop/synth.h"

static int run(int argc, char **argv);

CLI_COMMAND(run, "run",
            "[--backend NAME] [--emu SPEC] [--block FRAMES] [--seconds T] [--link PRESET] [--out DIR]",
            "closed loop on the emulated card: Neuropixels -> spike detection -> stimulator; latency and accuracy",
            NULL, run)

#define NP2_CHANNELS 384
#define TAGS 65536      /* stimulation tags remembered for the echo */
#define MAX_DET (1u << 22)
#define MAX_LAT (1u << 22)
#define TOL_S 1e-3      /* spike match tolerance */
#define OWED_MAX_MS 100.0   /* data left in the card at the end beyond which the loop fell behind */
#define KEEP_UP_SHARE 0.95  /* ... or a processed frame rate below this share of the probe's */
#define MAX_BLOCK_MS 50     /* --block at most this long at 30 kHz (1500 frames) */

struct run {
    oni_ctx ctx;
    uint32_t np2, stim, stim_wsize;
    double acq_hz;
    uint64_t tag_time[TAGS];
    _Atomic uint32_t ntags;
    struct loop_spike *det;
    _Atomic size_t ndet;
    uint64_t *lat, *lat_tag;     /* acquisition ticks, tag */
    _Atomic size_t nlat;
    _Atomic uint64_t stims, det_overflow, echo_other;
    _Atomic uint64_t det_unkept, lat_unkept; /* past MAX_DET / MAX_LAT: counted, not scored */
    _Atomic uint64_t t_block;    /* time of the last processed frame */
    uint64_t t_first_block;      /* time of the first block's last frame */
    _Atomic int echo_stop, echo_err;
    uint8_t *wbuf;
    /* the loop and what it was set up with (setup) */
    struct loop_ephys_state *st;
    struct loop_ephys_layout lay;
    struct loop_ephys_params p;
    struct loop_cardsrc cs;
    struct loop_config c;
    struct loop *lp;
    pthread_t echo;
    int echo_started;
    char link[32]; /* the card's link preset, as it reports it */
};

/* What the card held and had dropped as the loop stopped, and the loop's error. */
struct run_end {
    double owed_ms; /* NaN: unknown (ss_rc) */
    uint64_t dropped;
    int ss_rc, loop_rc;
};

static int sink_write(void *ctx, uint64_t seq, const void *outp, size_t len, uint32_t timeout_ms)
{
    struct run *r = ctx;
    const struct loop_ephys_out *o = outp;
    size_t n = atomic_load(&r->ndet);
    uint32_t i = 0;
    for (; i < o->nspikes && n < MAX_DET; i++)
        r->det[n++] = o->spikes[i];
    atomic_store(&r->ndet, n);
    atomic_fetch_add(&r->det_unkept, o->nspikes - i);
    atomic_fetch_add(&r->det_overflow, o->overflow);
    atomic_store(&r->t_block, o->t_block);
    if (seq == 0)
        r->t_first_block = o->t_block;
    if (!o->nspikes)
        return 0;
    /* Stimulate: one write frame per block with spikes, tagged so the echo
     * names the spike it answers. */
    uint32_t tag = atomic_load(&r->ntags);
    r->tag_time[tag % TAGS] = o->t_first;
    atomic_store(&r->ntags, tag + 1);
    memcpy(r->wbuf, &tag, 4);
    oni_frame_t *f = NULL;
    int rc = oni_create_frame(r->ctx, &f, r->stim, r->wbuf, r->stim_wsize);
    if (rc)
        return rc;
    rc = oni_write_frame(r->ctx, f);
    oni_destroy_frame(f);
    if (rc < 0)
        return rc;
    atomic_fetch_add(&r->stims, 1);
    return 0;
}

/* Default stream: the stimulator's echo frames [u32 tag][u32 words received][u64 receipt]. */
static void *echo_main(void *p)
{
    struct run *r = p;
    while (!atomic_load(&r->echo_stop)) {
        oni_frame_t *f = NULL;
        int rc = oni_read_frame(r->ctx, &f);
        if (rc == ONI_ETIMEOUT)
            continue;
        if (rc < 0) {
            atomic_store(&r->echo_err, rc);
            break;
        }
        if (f->dev_idx == r->stim && f->data_sz >= 16) {
            uint32_t tag;
            uint64_t receipt;
            memcpy(&tag, f->data, 4);
            memcpy(&receipt, f->data + 8, 8);
            size_t n = atomic_load(&r->nlat);
            if (tag < atomic_load(&r->ntags) && n < MAX_LAT) {
                r->lat[n] = receipt - r->tag_time[tag % TAGS];
                r->lat_tag[n] = tag;
                atomic_store(&r->nlat, n + 1);
            } else if (tag < atomic_load(&r->ntags)) {
                atomic_fetch_add(&r->lat_unkept, 1);
            }
        } else {
            atomic_fetch_add(&r->echo_other, 1);
        }
        oni_destroy_frame(f);
    }
    return NULL;
}

struct loop_thread {
    struct loop *lp;
    int rc;
};

static void *loop_main(void *p)
{
    struct loop_thread *t = p;
    t->rc = loop_run(t->lp);
    return NULL;
}

static double ticks_us(const struct run *r, double ticks)
{
    return ticks / r->acq_hz * 1e6;
}

/* Latency percentiles (us) of the echoes seen so far. */
static int lat_stats(const struct run *r, struct bench_stats *st)
{
    size_t n = atomic_load(&((struct run *)r)->nlat);
    if (!n)
        return -1;
    return bench_stats_compute(r->lat, n, st);
}

static int find_devices(struct run *r, uint32_t *np2_read)
{
    oni_size_t ndev = 0;
    oni_device_t *t;
    int rc = cli_devtable(r->ctx, &t, &ndev);
    if (rc)
        return rc;
    int have_np2 = 0, have_stim = 0;
    uint32_t shared = 0; /* a device other than the probe on the GPU stream (+1) */
    for (oni_size_t i = 0; i < ndev; i++) {
        oni_reg_val_t route = 0;
        if (t[i].read_size && !shared && (t[i].id != ONIX_ONIGPU_NEUROPIX2 || have_np2) &&
            oni_read_reg(r->ctx, t[i].idx, ONIEMU_REG_ROUTE, &route) == 0 && route == 1)
            shared = t[i].idx + 1;
        if (t[i].id == ONIX_ONIGPU_NEUROPIX2 && !have_np2) {
            r->np2 = t[i].idx;
            *np2_read = t[i].read_size;
            have_np2 = 1;
        } else if (t[i].id == ONIX_ONIGPU_STIM && !have_stim) {
            r->stim = t[i].idx;
            r->stim_wsize = t[i].write_size;
            have_stim = 1;
        }
    }
    free(t);
    if (!have_np2 || !have_stim || !r->stim_wsize) {
        fprintf(stderr, "onigpu run: the card needs a Neuropixels 2.0 device and a stimulator (devices=np2,stim)\n");
        return ONI_EDEVID;
    }
    /* The loop takes the GPU stream as the probe's frames alone. */
    if (shared) {
        fprintf(stderr, "onigpu run: device 0x%x is routed to the GPU stream too; the loop needs it for the "
                        "first Neuropixels 2.0 alone (route=0 for the others)\n", shared - 1);
        return ONI_EINVALARG;
    }
    return 0;
}

/* Ground truth CSV "dev_idx,unit,channel,sample_time" (a header line is skipped). */
/* The ground truth of device dev from the card's truth file: *out (the
 * caller frees it) and *n events. 0, or ONI_EREADFAILURE (the file cannot be
 * read: scoring against nothing would say the detector missed every spike)
 * or ONI_EBADALLOC; *out is then NULL. */
static int read_truth(const char *path, uint32_t dev, struct loop_truth **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return ONI_EREADFAILURE;
    size_t cap = 4096;
    struct loop_truth *t = malloc(cap * sizeof *t);
    char line[256];
    int rc = t ? 0 : ONI_EBADALLOC;
    while (!rc && fgets(line, sizeof line, f)) {
        unsigned long long d, u, c, time;
        if (sscanf(line, "%llu,%llu,%llu,%llu", &d, &u, &c, &time) != 4 || d != dev)
            continue;
        if (*n == cap) {
            struct loop_truth *g = realloc(t, 2 * cap * sizeof *t);
            if (!g) {
                rc = ONI_EBADALLOC;
                break;
            }
            t = g;
            cap *= 2;
        }
        t[(*n)++] = (struct loop_truth){time, (uint32_t)c, (uint32_t)u};
    }
    if (ferror(f) && !rc)
        rc = ONI_EREADFAILURE;
    fclose(f);
    if (rc) {
        free(t);
        *n = 0;
        return rc;
    }
    *out = t;
    return 0;
}

struct opts {
    const char *backend, *spec, *link, *out;
    uint32_t block;
    double seconds;
};

static int parse(int argc, char **argv, struct opts *o)
{
    for (int i = 1; i < argc; i++) {
        char opt[64];
        const char *a, *v;
        cli_opt_split(argc, argv, &i, opt, sizeof opt, &a, &v);
        int bad = !v;
        if (bad) {
        } else if (!strcmp(a, "--backend")) {
            o->backend = v;
        } else if (!strcmp(a, "--emu") || !strcmp(a, "--devices")) {
            o->spec = v;
        } else if (!strcmp(a, "--link")) {
            o->link = v;
        } else if (!strcmp(a, "--out")) {
            o->out = v;
        } else if (!strcmp(a, "--block")) {
            /* A block of at most MAX_BLOCK_MS: more would be owed at the stop
             * than the backlog a loop that keeps up may leave (OWED_MAX_MS). */
            uint32_t f = 0;
            bad = cli_parse_u32(v, &f) || f < 1 || f > MAX_BLOCK_MS * 30;
            o->block = f;
        } else if (!strcmp(a, "--seconds")) {
            /* the detector calibrates on the first 0.2 s: shorter runs score nothing */
            bad = cli_parse_seconds(v, &o->seconds) || !(o->seconds >= 0.5) || o->seconds > 86400;
        } else {
            bad = 1;
        }
        if (bad) {
            fprintf(stderr, "onigpu run: bad argument '%s'\n", a);
            return -1;
        }
    }
    return 0;
}

static oni_ctx open_card(const struct opts *o, const char *truth)
{
    char spec[512];
    const char *base = o->spec ? o->spec : "devices=np2:route=1,stim;mode=realtime";
    if (o->link)
        snprintf(spec, sizeof spec, "%s;link=%s", base, o->link);
    else
        snprintf(spec, sizeof spec, "%s", base);
    oni_ctx ctx = oni_create_ctx("emu");
    if (!ctx) {
        fprintf(stderr, "onigpu run: cannot load the emu driver: %s\n", strerror(errno));
        return NULL;
    }
    uint32_t tmo = 250; /* every wait of the loop is bounded well below a second */
    int rc = oni_set_driver_opt(ctx, ONI_DRV_EMU_SPEC, spec, strlen(spec) + 1);
    if (!rc)
        rc = oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &tmo, sizeof tmo);
    if (!rc)
        rc = oni_set_driver_opt(ctx, ONI_DRV_EMU_TRUTH_FILE, truth, strlen(truth) + 1);
    if (!rc)
        rc = oni_init_ctx(ctx, -1);
    if (rc) {
        cli_fail("cannot open the emulated card", rc);
        oni_destroy_ctx(ctx);
        return NULL;
    }
    return ctx;
}

/* 1 when the card runs in fast mode: its acquisition clock then follows the
 * reads, not wall time, so neither the latency (acquisition clock) nor the
 * keeping-up verdict (frames per wall second) would mean anything. A driver
 * that cannot say is taken as realtime. */
static int card_is_fast(oni_ctx ctx)
{
    uint32_t fast = 0;
    size_t sz = sizeof fast;
    return oni_get_driver_opt(ctx, ONI_DRV_EMU_MODE, &fast, &sz) == 0 && fast;
}

/* The link preset the card runs with, as it reports it: what --link asked
 * for (or the spec's, or the default), shown beside the results. */
static void card_link(oni_ctx ctx, char *name, size_t cap)
{
    oniemu_link_t l;
    size_t sz = sizeof l;
    if (oni_get_driver_opt(ctx, ONI_DRV_EMU_LINK, &l, &sz))
        snprintf(name, cap, "unknown");
    else
        snprintf(name, cap, "%.*s", (int)sizeof l.name, l.name);
}

/* Data waiting in the card's GPU-stream FIFO (the probe's route), in ms of
 * acquisition: what the loop owes the card. */
static double backlog_ms(const onigpu_stream_stats_t *ss, size_t stride, double fs_hz)
{
    return stride && fs_hz > 0 ? (double)ss->fifo_bytes[1] / (double)stride / fs_hz * 1e3 : 0;
}

/* The card's stream statistics into *ss (zeros on an error, which is
 * returned: the callers then say the figures are unknown, never 0). */
static int card_stats(struct run *r, onigpu_stream_stats_t *ss)
{
    size_t sz = sizeof *ss;
    memset(ss, 0, sizeof *ss);
    return oni_get_driver_opt(r->ctx, ONI_DRV_STREAM_STATS, ss, &sz);
}

/* One live line: frame rate over the last interval, stimulations, latency
 * percentiles so far, GPU-stream FIFO fill and backlog, drops. */
static void progress(struct run *r, struct loop *lp, double t, uint32_t block, size_t stride, double fs_hz,
                     uint64_t *last_blocks, double *last_t)
{
    struct loop_stats ls;
    struct bench_stats st;
    onigpu_stream_stats_t ss;
    loop_get_stats(lp, &ls);
    int ss_rc = card_stats(r, &ss);
    double rate = t > *last_t ? (double)(ls.blocks - *last_blocks) * block / (t - *last_t) : 0;
    *last_blocks = ls.blocks;
    *last_t = t;
    printf("%5.1f s  %7.0f frames/s  %6llu stims", t, rate, (unsigned long long)atomic_load(&r->stims));
    if (!lat_stats(r, &st))
        printf("  latency p50 %7.1f us p99 %7.1f us", ticks_us(r, st.p50), ticks_us(r, st.p99));
    if (ss_rc) {
        printf("  card statistics: %s\n", oni_error_str(ss_rc));
        return;
    }
    printf("  fifo %.1f%% (%.1f ms behind)  drops %llu\n",
           ss.fifo_capacity[1] ? 100.0 * (double)ss.fifo_bytes[1] / (double)ss.fifo_capacity[1] : 0.0,
           backlog_ms(&ss, stride, fs_hz), (unsigned long long)(ss.dropped_frames[0] + ss.dropped_frames[1]));
    fflush(stdout);
}

/* Stop the echo reader (nothing if it is not running). */
static void stop_echo(struct run *r)
{
    if (r->echo_started) {
        atomic_store(&r->echo_stop, 1);
        pthread_join(r->echo, NULL);
        r->echo_started = 0;
    }
}

/* Stop what still runs and free r and all it holds (NULL ok). */
static void run_free(struct run *r)
{
    if (!r)
        return;
    stop_echo(r);
    loop_destroy(r->lp);
    if (r->ctx)
        oni_destroy_ctx(r->ctx);
    free(r->det);
    free(r->lat);
    free(r->lat_tag);
    free(r->wbuf);
    free(r->st);
    free(r);
}

/* The ground-truth file the card appends to: DIR/truth.csv with --out, else
 * a new temporary file of the run's own. 0, or an exit status (said why). */
static int make_truth_path(const struct opts *o, char *truth, size_t cap)
{
    if (o->out) {
        if (mkdir(o->out, 0777) && errno != EEXIST) {
            fprintf(stderr, "onigpu run: cannot create %s: %s\n", o->out, strerror(errno));
            return 1;
        }
        snprintf(truth, cap, "%s/truth.csv", o->out);
        remove(truth); /* the card appends */
        return 0;
    }
    /* A new file of our own (mkstemps: O_EXCL), not a name another user
     * could have put a link at before the card opens it. */
    snprintf(truth, cap, "/tmp/onigpu-truth-%d-XXXXXX.csv", (int)getpid());
    int fd = mkstemps(truth, 4);
    if (fd < 0) {
        fprintf(stderr, "onigpu run: cannot create a temporary file in /tmp: %s\n", strerror(errno));
        return 1;
    }
    close(fd);
    return 0;
}

/* A run's state with its buffers, or NULL without memory. */
static struct run *run_new(void)
{
    struct run *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->st = calloc(1, sizeof *r->st);
    r->det = malloc(MAX_DET * sizeof *r->det);
    r->lat = malloc(MAX_LAT * sizeof *r->lat);
    r->lat_tag = malloc(MAX_LAT * sizeof *r->lat_tag);
    if (!r->st || !r->det || !r->lat || !r->lat_tag) {
        run_free(r);
        return NULL;
    }
    return r;
}

/* Open the card, find the probe and the stimulator, route the probe to the
 * GPU stream, create the loop and start the echo reader. 0, or an exit
 * status (said why). */
static int setup(struct run *r, const struct opts *o, int backend, const char *truth)
{
    if (!(r->ctx = open_card(o, truth)))
        return 1;
    if (card_is_fast(r->ctx)) {
        fprintf(stderr, "onigpu run: the card's mode=fast has no real-time clock to close the loop against "
                        "(latency and keeping up need mode=realtime)\n");
        return 2;
    }
    uint32_t hz = 0, np2_read = 0;
    int rc = find_devices(r, &np2_read);
    if (!rc)
        rc = oni_get_opt(r->ctx, ONI_OPT_ACQCLKHZ, &hz, &(size_t){sizeof hz});
    if (rc)
        return cli_fail("device table", rc);
    r->acq_hz = hz ? hz : 250e6;
    r->wbuf = calloc(1, r->stim_wsize);
    /* Neuropixels payload: [u64 sample count][u16 ch[384]], 12-bit offset
     * binary (docs/devices.md): the samples end the payload. The offset (2048)
     * is DC, which the band-pass removes. */
    if (np2_read < 2 * NP2_CHANNELS || !r->wbuf) {
        fprintf(stderr, "onigpu run: Neuropixels frames of %u bytes hold no %d channels\n", np2_read, NP2_CHANNELS);
        return 1;
    }
    if ((rc = oni_write_reg(r->ctx, r->np2, ONIEMU_REG_ROUTE, 1)) != 0)
        return cli_fail("routing the probe to the GPU stream", rc);
    r->lay = (struct loop_ephys_layout){NP2_CHANNELS, 16 + ((np2_read + 3u) & ~3u), 16 + np2_read - 2 * NP2_CHANNELS};
    loop_ephys_defaults(&r->p);
    rc = loop_ephys_init(r->st, &r->p, &r->lay);
    if (!rc)
        rc = loop_cardsrc_init(&r->cs, r->ctx, o->block * r->lay.stride);
    if (rc)
        return cli_fail("setting up the GPU stream", rc);
    struct loop_config *c = &r->c;
    memset(c, 0, sizeof *c);
    c->backend = backend;
    c->work = LOOP_WORK_EPHYS;
    c->in_bytes = (size_t)o->block * r->lay.stride;
    c->depth = 4;
    c->timeout_ms = 1000;
    c->ephys = r->st;
    loop_cardsrc_source(&r->cs, &c->src);
    c->sink = (struct loop_sink){r, sink_write};
    if ((rc = loop_create(c, &r->lp)) != 0)
        return cli_fail("creating the loop", rc);
    if (pthread_create(&r->echo, NULL, echo_main, r))
        return cli_fail("starting the echo reader", ONI_EBADALLOC);
    r->echo_started = 1;
    return 0;
}

/* Acquire for o->seconds with a live line each second, then stop the loop,
 * the echo reader and acquisition; *end: what the card held and dropped as
 * the loop stopped, end->loop_rc: the loop's error. 0, or an error of the
 * start (said why; nothing ran then). */
static int acquire(struct run *r, const struct opts *o, int backend, struct run_end *end)
{
    card_link(r->ctx, r->link, sizeof r->link);
    printf("onigpu run: backend %s, %u frames per block (%.2f ms), %.1f s on the emulated card (link %s)\n",
           loop_backend_name(backend), o->block, o->block / 30.0, o->seconds, r->link);
    uint32_t one = 1, zero = 0;
    int rc = oni_set_opt(r->ctx, ONI_OPT_RUNNING, &one, sizeof one);
    if (rc) {
        cli_fail("starting acquisition", rc);
        return rc;
    }
    struct loop_thread lt = {r->lp, 0};
    pthread_t lth;
    uint64_t t0 = oni_now_ns();
    if (pthread_create(&lth, NULL, loop_main, &lt)) {
        cli_fail("starting the loop", ONI_EBADALLOC);
        return ONI_EBADALLOC;
    }
    uint64_t last_blocks = 0;
    double last_t = 0;
    for (int s = 1; s <= (int)ceil(o->seconds) && !loop_error(r->lp); s++) {
        double until = s < o->seconds ? s : o->seconds;
        while ((double)(oni_now_ns() - t0) / 1e9 < until && !loop_error(r->lp)) {
            struct timespec ts = {0, 20000000};
            nanosleep(&ts, NULL);
        }
        progress(r, r->lp, (double)(oni_now_ns() - t0) / 1e9, o->block, r->lay.stride, r->p.fs_hz, &last_blocks,
                 &last_t);
    }
    /* What the loop owes the card as it stops: a loop that keeps up owes a
     * block or two; one slower than the probe owes more every second, and
     * its latency grows with it, long before the 4 GiB FIFO drops anything.
     * The drops counted are those up to here, while the loop read: once it
     * stops, the card drops what nobody reads any more. */
    onigpu_stream_stats_t ss;
    end->ss_rc = card_stats(r, &ss);
    end->owed_ms = end->ss_rc ? NAN : backlog_ms(&ss, r->lay.stride, r->p.fs_hz);
    end->dropped = end->ss_rc ? 0 : ss.dropped_frames[0] + ss.dropped_frames[1];
    loop_stop(r->lp);
    pthread_join(lth, NULL);
    struct timespec settle = {0, 300000000}; /* the last echoes */
    nanosleep(&settle, NULL);
    /* Stop reading before acquisition: stopping flushes the read path, which
     * would wait for the echo reader otherwise. */
    stop_echo(r);
    oni_set_opt(r->ctx, ONI_OPT_RUNNING, &zero, sizeof zero);
    end->loop_rc = lt.rc;
    if (lt.rc)
        cli_fail("closed loop", lt.rc);
    return 0;
}

/* The spikes detected scored against the ground truth, after the detector's
 * calibration and up to the last processed frame (or the last spike kept).
 * 0, or the truth file's error (said why; *sc is then of no events). */
static int score(struct run *r, const char *truth, struct loop_score *sc)
{
    struct loop_truth *tr;
    size_t ntr;
    int rc = read_truth(truth, r->np2, &tr, &ntr);
    if (rc)
        fprintf(stderr, "onigpu run: cannot read the ground truth %s: %s\n", truth, oni_error_str(rc));
    const struct loop_ephys_state *fin = loop_ephys_final(r->lp);
    uint64_t tol = (uint64_t)(TOL_S * r->acq_hz);
    /* The acquisition clock does not start at the first frame read. */
    uint64_t t_lo = r->t_first_block + (uint64_t)((double)fin->calib / r->p.fs_hz * r->acq_hz) + tol;
    uint64_t t_hi = atomic_load(&r->t_block) > tol ? atomic_load(&r->t_block) - tol : 0;
    size_t ndet = atomic_load(&r->ndet);
    if (atomic_load(&r->det_unkept) && ndet && r->det[ndet - 1].time > tol && r->det[ndet - 1].time - tol < t_hi)
        t_hi = r->det[ndet - 1].time - tol; /* none kept after it: scored up to the last one kept */
    loop_score_spikes(tr, ntr, r->det, ndet, tol, 2, t_lo, t_hi, sc);
    free(tr);
    return rc;
}

/* What a run measured, for the summary and the result row. */
struct run_result {
    struct loop_stats ls;
    struct loop_score sc;
    struct bench_stats lat;
    int have_lat;
    uint64_t frames, bytes; /* processed: blocks sent back, not blocks read (after
                               an error the loop has read blocks it never finished) */
    size_t ndet;
    double fps;
    int behind, verdict;    /* verdict 0: unknown */
};

static void measure(struct run *r, const struct opts *o, const struct run_end *end, struct run_result *res)
{
    loop_get_stats(r->lp, &res->ls);
    res->have_lat = !lat_stats(r, &res->lat);
    res->frames = res->ls.blocks * o->block;
    res->bytes = res->ls.blocks * r->c.in_bytes;
    res->ndet = atomic_load(&r->ndet);
    res->fps = res->ls.seconds > 0 ? res->frames / res->ls.seconds : 0.0;
    int slow = res->fps < KEEP_UP_SHARE * r->p.fs_hz;
    res->behind = slow || end->owed_ms > OWED_MAX_MS || end->dropped;
    /* Without the card's statistics the backlog is unknown: only a slow
     * frame rate gives a verdict then. */
    res->verdict = res->behind || !isnan(end->owed_ms);
}

static void print_summary(struct run *r, const struct opts *o, int backend, const char *truth,
                          const struct run_end *end, const struct run_result *res)
{
    printf("\nsummary (%s, %.2f s)\n", loop_backend_name(backend), res->ls.seconds);
    printf("  frames processed   %llu (%llu bytes, %.0f frames/s)\n", (unsigned long long)res->frames,
           (unsigned long long)res->bytes, res->fps);
    char left[64] = "data left in the card unknown";
    if (!isnan(end->owed_ms))
        snprintf(left, sizeof left, "%.1f ms of data left in the card at the end", end->owed_ms);
    printf("  keeping up         %s: %.0f of %.0f frames/s, %s%s\n",
           !res->verdict ? "unknown" : res->behind ? "NO (overrun)" : "yes", res->fps, r->p.fs_hz, left,
           end->dropped  ? "; the card dropped frames"
           : res->behind ? "; latency grows with the backlog, and drops follow once the FIFO is full" : "");
    printf("  spikes detected    %llu (%llu not listed: block overflow)\n",
           (unsigned long long)res->ndet, (unsigned long long)atomic_load(&r->det_overflow));
    if (atomic_load(&r->det_unkept))
        printf("                     %llu more past the first %u kept: not scored (scored up to the last kept)\n",
               (unsigned long long)atomic_load(&r->det_unkept), MAX_DET);
    printf("  vs ground truth    %llu events scored, recall %.3f, precision %.3f (+-%.1f ms, +-2 channels)\n",
           (unsigned long long)res->sc.events, res->sc.recall, res->sc.precision, TOL_S * 1e3);
    if (!o->out)
        printf("  truth file         %s (temporary: removed at the end)\n", truth);
    printf("  stimulations       %llu sent, %llu echoed", (unsigned long long)atomic_load(&r->stims),
           (unsigned long long)(atomic_load(&r->nlat) + atomic_load(&r->lat_unkept)));
    if (atomic_load(&r->lat_unkept))
        printf(" (the latencies below: the first %u)", MAX_LAT);
    printf("\n");
    const struct bench_stats *lat = &res->lat;
    if (res->have_lat)
        printf("  closed-loop latency (spike sample -> stimulator receipt, acquisition clock): p50 %.1f us, p99 %.1f "
               "us, p99.9 %.1f us, max %.1f us\n",
               ticks_us(r, lat->p50), ticks_us(r, lat->p99), ticks_us(r, lat->p999), ticks_us(r, lat->max));
    if (end->ss_rc)
        printf("  dropped            unknown (card statistics: %s), %llu stalled reads\n", oni_error_str(end->ss_rc),
               (unsigned long long)res->ls.stalls);
    else
        printf("  dropped            %llu frames in the card FIFOs while the loop ran, %llu stalled reads\n",
               (unsigned long long)end->dropped, (unsigned long long)res->ls.stalls);
}

/* The result set in o->out: one row of the run, and its latencies. 0 or an error. */
static int write_results(struct run *r, const struct opts *o, int backend, const struct run_end *end,
                         const struct run_result *res)
{
    int err = 0;
    char **full;
    int nfull = cli_command_line(&full);
    struct bench_report *rep = bench_report_open(o->out, "run", nfull, full, NULL, &err);
    if (!rep)
        return err;
    const struct bench_stats *lat = &res->lat;
    bench_cell_str(rep, "backend", loop_backend_name(backend));
    bench_cell_str(rep, "link", r->link);
    bench_cell_int(rep, "block_frames", o->block);
    /* the workload, for `onigpu advise --workload` */
    bench_cell_int(rep, "block_bytes", (long long)r->c.in_bytes);
    bench_cell_num(rep, "ai", loop_ephys_flops(r->lay.nchan, o->block) / (double)r->c.in_bytes);
    bench_cell_num(rep, "seconds", res->ls.seconds);
    bench_cell_int(rep, "frames", (long long)res->frames);
    bench_cell_int(rep, "bytes", (long long)res->bytes);
    bench_cell_int(rep, "spikes", (long long)res->ndet);
    bench_cell_int(rep, "spikes_unkept", (long long)atomic_load(&r->det_unkept));
    bench_cell_int(rep, "truth_events", (long long)res->sc.events);
    bench_cell_num(rep, "recall", res->sc.recall);
    bench_cell_num(rep, "precision", res->sc.precision);
    bench_cell_int(rep, "stims", (long long)atomic_load(&r->stims));
    bench_cell_int(rep, "echoes_unkept", (long long)atomic_load(&r->lat_unkept));
    bench_cell_num(rep, "lat_p50_us", res->have_lat ? ticks_us(r, lat->p50) : NAN);
    bench_cell_num(rep, "lat_p99_us", res->have_lat ? ticks_us(r, lat->p99) : NAN);
    bench_cell_num(rep, "lat_p999_us", res->have_lat ? ticks_us(r, lat->p999) : NAN);
    bench_cell_num(rep, "lat_max_us", res->have_lat ? ticks_us(r, lat->max) : NAN);
    if (end->ss_rc)
        bench_cell_num(rep, "dropped_frames", NAN);
    else
        bench_cell_int(rep, "dropped_frames", (long long)end->dropped);
    bench_cell_num(rep, "frames_per_s", res->fps);
    bench_cell_num(rep, "backlog_ms", end->owed_ms);
    bench_cell_num(rep, "overrun", res->verdict ? res->behind : NAN);
    bench_report_row(rep, NULL);
    for (size_t i = 0; i < atomic_load(&r->nlat); i++) {
        bench_cell_int(rep, "tag", (long long)r->lat_tag[i]);
        bench_cell_num(rep, "latency_us", ticks_us(r, (double)r->lat[i]));
        bench_report_row(rep, "latency");
    }
    return bench_report_close(rep);
}

/* Score, print the summary, write the result set. The loop's error, or
 * the first error of these (each said). */
static int summarize(struct run *r, const struct opts *o, int backend, const char *truth, const struct run_end *end)
{
    struct run_result res;
    int rc = end->loop_rc, trc = score(r, truth, &res.sc);
    rc = rc ? rc : trc;
    measure(r, o, end, &res);
    print_summary(r, o, backend, truth, end, &res);
    int erc = atomic_load(&r->echo_err);
    if (erc) { /* the latency figures above then miss the echoes not read */
        cli_fail("reading the stimulator's echoes", erc);
        rc = rc ? rc : erc;
    }
    if (o->out) {
        int err = write_results(r, o, backend, end, &res);
        if (err) {
            cli_fail("writing results", err);
            rc = rc ? rc : err;
        } else {
            printf("  results in %s\n", o->out);
        }
    }
    return rc;
}

static int run(int argc, char **argv)
{
    struct opts o = {NULL, NULL, NULL, NULL, 16, 5.0};
    if (parse(argc, argv, &o))
        return cli_usage(&cli_cmd_run);
    int bad_link = cli_check_link(&cli_cmd_run, o.link);
    if (bad_link)
        return bad_link;
    int backend = o.backend ? loop_backend_parse(o.backend) : loop_backend_best();
    char why[160];
    if (backend < 0) {
        fprintf(stderr, "onigpu run: unknown backend '%s' (cpu, gpu-staged, gpu-direct, gpu-graph, gpu-flag, "
                        "gpu-persistent, gpu-mapped)\n", o.backend);
        return cli_usage(&cli_cmd_run);
    }
    if (!loop_backend_available(backend, why, sizeof why)) {
        fprintf(stderr, "onigpu run: backend %s is not available: %s\n", loop_backend_name(backend), why);
        return 1;
    }
    char truth[512];
    int status = make_truth_path(&o, truth, sizeof truth);
    if (status)
        return status;
    struct run *r = run_new();
    status = r ? setup(r, &o, backend, truth) : cli_fail("run", ONI_EBADALLOC);
    struct run_end end;
    if (!status && acquire(r, &o, backend, &end))
        status = 1;
    if (!status)
        status = summarize(r, &o, backend, truth, &end) ? 1 : 0;
    run_free(r);
    if (!o.out)
        remove(truth);
    return status;
}
