/* cmd_read.c - `onigpu read`: stream frames, print a live rate once a
 * second, then per-device counts and rates, verification results (test
 * driver), per-device drops and rates in acquisition-clock time (emu driver)
 * and FIFO statistics (drivers answering ONI_DRV_STREAM_STATS); with
 * --record DIR every frame also goes to the recording (record.h: the Open
 * Ephys binary format or NWB, written by the recorder's own thread). */
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cli.h"
#include "cli_oni.h"
#include "record.h"
#include "loop/rig.h"
#include "common/stopsig.h"
#include "onigpu.h"
#include "oniemu.h"
#include "onitest.h"
#include "oni/util/clock.h"

/* Whether the frames are onigpu's test driver's (onitest.h), its own or
 * through `net` from a server that serves it: it answers ONITEST_OPT_STATS.
 * Not the driver's name: upstream's own test driver is called "test" too,
 * and its frames are not ours to check. */
static int serves_test_frames(oni_ctx ctx)
{
    onitest_stats_t st;
    size_t len = sizeof st;
    return oni_get_driver_opt(ctx, ONITEST_OPT_STATS, &st, &len) == 0 && len == sizeof st;
}

static int read_run(int argc, char **argv);
CLI_COMMAND(read, "read",
            "[--driver NAME] [--emu SPEC] [--net HOST:PORT] [--host N] [--timeout MS] [--frames N | --seconds T] [--block BYTES] [--verify] [--truth FILE] [--rig] [--record DIR [--format openephys|nwb]]",
            "stream frames: live rate, per-device counts, frames/s, MB/s, drops, content verification", NULL, read_run)

struct dev_stat {
    uint32_t idx, read_size;
    uint64_t frames, bytes;
    uint64_t first_time, last_time; /* acquisition clock of the first and last frame */
    uint64_t expect; /* next frame counter (verify): 0 after the reset of oni_init_ctx */
    uint64_t lost, repeated, bad;
    uint64_t dropped; /* emu: DROPPED registers */
    int have_dropped;
};

/* What the summary shows besides the counts. */
struct extras {
    int verify, dropped; /* columns: verify result, dropped frames */
    double acq_hz;       /* > 0: rate in acquisition-clock time (fast mode) */
};

struct read_opts {
    struct cli_conn conn;
    uint64_t frames;  /* 0: no frame limit */
    double seconds;   /* 0: no time limit */
    uint64_t block;   /* 0: the library's default */
    int verify;
    int rig;           /* --rig: bring the breakout board and NP2.0e up as `run` does (rig.h) */
    const char *truth; /* --truth: ground-truth CSV (emu driver) */
    struct rec_cli rec; /* --record DIR, --format */
};

/* Set on SIGINT/SIGTERM by stopsig's thread, read by the streaming loop. */
static atomic_int interrupted;
static void on_stop(void *arg) { (void)arg; atomic_store(&interrupted, 1); }

static double now_s(void) { return (double)oni_now_ns() / 1e9; }

/* The options into *o. 0, or 2 after saying which argument is bad (cli.h). */
static int parse_args(int argc, char **argv, struct read_opts *o)
{
    const struct cli_command *cmd = &cli_cmd_read;
    memset(o, 0, sizeof *o);
    cli_conn_init(&o->conn);
    int have_frames = 0, have_seconds = 0;
    for (int i = 1; i < argc; i++) {
        int rc = cli_conn_arg(cmd, &o->conn, argc, argv, &i);
        if (rc > 1)
            return rc;
        if (rc)
            continue;
        if ((rc = rec_cli_arg(cmd, &o->rec, argc, argv, &i)) > 1)
            return rc;
        if (rc)
            continue;
        if (!strcmp(argv[i], "--verify")) {
            o->verify = 1;
            continue;
        }
        if (!strcmp(argv[i], "--rig")) {
            o->rig = 1;
            continue;
        }
        char opt[64];
        const char *a, *v;
        cli_opt_split(argc, argv, &i, opt, sizeof opt, &a, &v);
        if (!strcmp(a, "--frames")) {
            rc = cli_arg_count(cmd, a, v, 1, UINT64_MAX, &o->frames);
            have_frames = 1;
        } else if (!strcmp(a, "--seconds")) {
            rc = cli_arg_seconds(cmd, a, v, 0, 1, INFINITY, &o->seconds);
            have_seconds = 1;
        } else if (!strcmp(a, "--block")) {
            rc = cli_arg_size(cmd, a, v, 1, UINT32_MAX, 1, &o->block);
        } else if (!strcmp(a, "--truth")) {
            rc = cli_arg_outfile(cmd, a, v, &o->truth);
        } else {
            return cli_bad_arg(cmd, a == opt ? argv[i] : a);
        }
        if (rc)
            return rc;
        if (have_frames && have_seconds) {
            fprintf(stderr, "onigpu read: --frames and --seconds exclude each other: give one\n");
            return cli_usage(cmd);
        }
    }
    if (!have_frames && !have_seconds)
        o->seconds = 1;
    return rec_cli_check(cmd, &o->rec);
}

/* Table t[0..n) as per-device counters, and a 16-bit index -> slot map. */
static struct dev_stat *load_devices(const oni_device_t *t, oni_size_t n, uint16_t *slot)
{
    struct dev_stat *s = calloc(n ? n : 1, sizeof *s);
    if (!s) {
        cli_fail("cannot read the device table", ONI_EBADALLOC);
        return NULL;
    }
    for (oni_size_t i = 0; i < n; i++) {
        s[i].idx = t[i].idx;
        s[i].read_size = t[i].read_size;
        if (i < 0xFFFF && t[i].idx <= 0xFFFF)
            slot[t[i].idx] = (uint16_t)(i + 1);
    }
    return s;
}

/* Frames/s of d in acquisition-clock time (first to last frame), or -1 if unknown. */
static double acq_rate(const struct dev_stat *d, double acq_hz)
{
    if (d->frames < 2 || d->last_time <= d->first_time)
        return -1;
    return (double)(d->frames - 1) * acq_hz / (double)(d->last_time - d->first_time);
}

static void print_summary(const struct dev_stat *s, oni_size_t n, uint64_t unknown, double secs,
                          const struct extras *x)
{
    uint64_t frames = 0, bytes = 0, stream = 0;
    char idx[16];
    for (oni_size_t i = 0; i < n; i++) {
        frames += s[i].frames;
        bytes += s[i].bytes;
        stream += s[i].frames * (16 + ((s[i].read_size + 3u) & ~3u));
    }
    printf("read %llu frames in %.3f s: %.0f frames/s, %.2f MB/s payload, %.2f MB/s stream\n",
           (unsigned long long)frames, secs, frames / secs, bytes / secs / 1e6, stream / secs / 1e6);
    printf("  %-9s %12s %14s %10s", "idx", "frames", "frames/s", "MB/s");
    if (x->dropped)
        printf(" %10s", "dropped");
    if (x->acq_hz > 0)
        printf(" %16s", "acq frames/s");
    printf("%s\n", x->verify ? "  verify" : "");
    for (oni_size_t i = 0; i < n; i++) {
        if (!s[i].read_size)
            continue;
        printf("  %-9s %12llu %14.0f %10.3f", cli_fmt_dev(s[i].idx, idx, sizeof idx),
               (unsigned long long)s[i].frames, s[i].frames / secs, s[i].bytes / secs / 1e6);
        if (x->dropped && s[i].have_dropped)
            printf(" %10llu", (unsigned long long)s[i].dropped);
        else if (x->dropped)
            printf(" %10s", "?");
        if (x->acq_hz > 0) {
            double r = acq_rate(&s[i], x->acq_hz);
            if (r < 0)
                printf(" %16s", "-");
            else
                printf(" %16.1f", r);
        }
        if (x->verify) {
            if (!s[i].lost && !s[i].repeated && !s[i].bad)
                printf("  ok");
            else
                printf("  lost %llu, repeated/reordered %llu, bad %llu", (unsigned long long)s[i].lost,
                       (unsigned long long)s[i].repeated, (unsigned long long)s[i].bad);
        }
        printf("\n");
    }
    if (unknown)
        printf("  %llu frames from devices not in the device table\n", (unsigned long long)unknown);
    if (x->acq_hz > 0)
        printf("  (fast mode: frames/s in wall-clock time; acq frames/s in emulated time, from the first and\n"
               "   last frame's timestamp at %.0f Hz, comparable with the device's nominal rate)\n", x->acq_hz);
}

/* emu: each readable device's DROPPED_LO/HI registers (after acquisition stopped). Returns
 * 1 if any could be read. */
static int read_dropped(oni_ctx ctx, struct dev_stat *s, oni_size_t n)
{
    int any = 0;
    for (oni_size_t i = 0; i < n; i++) {
        oni_reg_val_t lo, hi;
        if (!s[i].read_size || oni_read_reg(ctx, s[i].idx, ONIEMU_REG_DROPPED_LO, &lo) ||
            oni_read_reg(ctx, s[i].idx, ONIEMU_REG_DROPPED_HI, &hi))
            continue;
        s[i].dropped = (uint64_t)hi << 32 | lo;
        s[i].have_dropped = any = 1;
    }
    return any;
}

static void verify_frame(struct dev_stat *d, const oni_frame_t *f)
{
    uint64_t before = d->expect;
    int rc = onitest_check_frame(f, &d->expect);
    if (rc < 0) {
        d->bad++;
    } else if (rc == 1) {
        if (d->expect - 1 > before)
            d->lost += d->expect - 1 - before;
        else
            d->repeated++;
    }
}

static void print_fifo(oni_ctx ctx)
{
    onigpu_stream_stats_t st;
    size_t len = sizeof st;
    if (oni_get_driver_opt(ctx, ONI_DRV_STREAM_STATS, &st, &len))
        return;
    for (int k = 0; k < 2; k++)
        printf("fifo %-8s %llu / %llu bytes, dropped %llu frames (%llu bytes)\n", k ? "gpu" : "default",
               (unsigned long long)st.fifo_bytes[k], (unsigned long long)st.fifo_capacity[k],
               (unsigned long long)st.dropped_frames[k], (unsigned long long)st.dropped_bytes[k]);
    printf("write frames rejected as malformed: %llu\n", (unsigned long long)st.bad_wframes);
}

/* Count frame f (per device, payload bytes, verification), then destroy it. */
static void count_frame(const struct read_opts *o, struct dev_stat *s, const uint16_t *slot, oni_frame_t *f,
                        uint64_t *unknown, uint64_t *bytes)
{
    uint16_t k = f->dev_idx <= 0xFFFF ? slot[f->dev_idx] : 0;
    if (k) {
        struct dev_stat *d = &s[k - 1];
        if (!d->frames)
            d->first_time = f->time;
        d->last_time = f->time;
        d->frames++;
        d->bytes += f->data_sz;
        if (o->verify)
            verify_frame(d, f);
    } else {
        (*unknown)++;
    }
    *bytes += f->data_sz;
    oni_destroy_frame(f);
}

/* Stream until the limit; returns 0 or the ONI error that stopped it. Each
 * frame also goes to the recording rec (NULL: none), which never blocks:
 * what it could not take it counts itself. A corrupt
 * frame header (ONI_EBADFRAME: the library skips past it, the stream goes
 * on) is counted in *bad and does not stop it. */
static int stream(oni_ctx ctx, const struct read_opts *o, struct dev_stat *s, const uint16_t *slot,
                  struct rec *rec, uint64_t *unknown, uint64_t *bad, double *secs)
{
    uint64_t total = 0, last_total = 0, mask = 0, bytes = 0, last_bytes = 0, calls = 0;
    double t0 = now_s(), last = t0, now = t0;
    int rc = 0;
    while (!atomic_load(&interrupted)) {
        oni_frame_t *f;
        rc = oni_read_frame(ctx, &f);
        if (rc == ONI_EBADFRAME) {
            (*bad)++;
            f = NULL;
        } else if (rc < 0) {
            break;
        }
        rc = 0;
        if (f && rec)
            rec_frame(rec, f, 0);
        if (f) {
            count_frame(o, s, slot, f, unknown, &bytes);
            if (++total == o->frames)
                break;
        }
        /* Look at the clock only every mask+1 calls: it costs as much as a frame. */
        if (++calls & mask)
            continue;
        now = now_s();
        if (now - last >= 1.0) {
            double dt = now - last;
            printf("%7.1f s %14.0f frames/s %10.2f MB/s\n", now - t0, (total - last_total) / dt,
                   (bytes - last_bytes) / dt / 1e6);
            fflush(stdout);
            uint64_t per_ms = (uint64_t)((total - last_total) / dt / 1000);
            for (mask = 0; (mask << 1 | 1) <= per_ms; mask = mask << 1 | 1)
                ;
            last = now, last_total = total, last_bytes = bytes;
        }
        if (o->seconds && now - t0 >= o->seconds)
            break;
    }
    *secs = now_s() - t0;
    return rc;
}

static int read_run(int argc, char **argv)
{
    struct read_opts o;
    int st = parse_args(argc, argv, &o);
    if (st)
        return st;
    int rc = stopsig_start(on_stop, NULL); /* before the driver starts threads */
    if (rc) {
        fprintf(stderr, "onigpu read: cannot take SIGINT/SIGTERM: %s\n", strerror(rc));
        return 1;
    }
    oni_ctx ctx = cli_conn_open(&o.conn);
    if (!ctx) {
        stopsig_end();
        return 1;
    }
    int status = 1;
    static uint16_t slot[0x10000];
    oni_size_t n = 0;
    uint64_t unknown = 0, badframes = 0;
    double secs = 0;
    oni_device_t *table = NULL;
    struct dev_stat *s = NULL;
    struct rec *rec = NULL;
    char why[256];
    if (o.rig && (rc = loop_rig_open(ctx, 1, &(struct loop_rig){0}, why, sizeof why))) {
        fprintf(stderr, "onigpu read: --rig: %s\n", why);
        goto out;
    }
    if ((rc = cli_devtable(ctx, &table, &n))) {
        cli_fail("cannot read the device table", rc);
        goto out;
    }
    if (!(s = load_devices(table, n, slot)))
        goto out;
    const oni_driver_info_t *di = oni_get_driver_info(ctx);
    if (o.verify && !serves_test_frames(ctx)) {
        printf("verify: skipped (driver '%s' %d.%d.%d is not onigpu's test driver, the one whose frame "
               "contents can be checked: --driver test)\n",
               di ? di->name : "?", di ? di->major : 0, di ? di->minor : 0, di ? di->patch : 0);
        o.verify = 0;
    }
    if (o.block) {
        oni_size_t b = (oni_size_t)o.block;
        rc = oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &b, sizeof b);
        if (rc) {
            oni_size_t max = 0;
            size_t len = sizeof max;
            oni_get_opt(ctx, ONI_OPT_MAXREADFRAMESIZE, &max, &len);
            fprintf(stderr, "onigpu read: block size %u refused: %s (it must be a multiple of 4, at least the max read frame, %u, and at most 1 GiB)\n",
                    b, oni_error_str(rc), max);
            goto out;
        }
    }
    int emu = di && !strcmp(di->name, "emu");
    if (o.truth && !emu) {
        fprintf(stderr, "onigpu read: --truth needs the emu driver\n");
        goto out;
    }
    if (o.truth) {
        remove(o.truth); /* the card appends: start the file afresh */
        if ((rc = oni_set_driver_opt(ctx, ONI_DRV_EMU_TRUTH_FILE, o.truth, strlen(o.truth) + 1))) {
            fprintf(stderr, "onigpu read: cannot write the ground truth to %s: %s\n", o.truth, oni_error_str(rc));
            goto out;
        }
    }
    struct extras x = {o.verify, 0, 0};
    uint32_t fast = 0;
    size_t flen = sizeof fast;
    oni_size_t acq_hz = 0;
    size_t alen = sizeof acq_hz;
    if (emu && !oni_get_driver_opt(ctx, ONI_DRV_EMU_MODE, &fast, &flen) && fast &&
        !oni_get_opt(ctx, ONI_OPT_ACQCLKHZ, &acq_hz, &alen))
        x.acq_hz = acq_hz;
    oni_size_t block = 0;
    size_t blen = sizeof block;
    oni_get_opt(ctx, ONI_OPT_BLOCKREADSIZE, &block, &blen);
    if (o.frames)
        printf("reading %llu frames from driver %s, block %u B\n", (unsigned long long)o.frames,
               di ? di->name : "?", block);
    else
        printf("reading for %.3g s from driver %s, block %u B\n", o.seconds, di ? di->name : "?", block);
    /* Last before the start: a refused option above leaves no recording. */
    if (o.rec.dir && !(rec = rec_cli_open("read", &o.rec, ctx, 0)))
        goto out;
    oni_size_t one = 1, zero = 0;
    if ((rc = oni_set_opt(ctx, ONI_OPT_RUNNING, &one, sizeof one))) {
        cli_fail("cannot start acquisition", rc);
        goto out;
    }
    rc = stream(ctx, &o, s, slot, rec, &unknown, &badframes, &secs);
    oni_set_opt(ctx, ONI_OPT_RUNNING, &zero, sizeof zero);
    x.dropped = emu && read_dropped(ctx, s, n);
    print_summary(s, n, unknown, secs > 0 ? secs : 1e-9, &x);
    if (badframes)
        printf("  %llu corrupt frame headers skipped (ONI_EBADFRAME)\n", (unsigned long long)badframes);
    print_fifo(ctx);
    status = 0;
    if (rc < 0)
        status = cli_fail("read stopped", rc);
    if (rec) {
        if (rec_cli_close("read", rec, &o.rec))
            status = 1;
        rec = NULL;
    }
    if (o.verify) {
        uint64_t lost = 0, rep = 0, bad = 0;
        for (oni_size_t i = 0; i < n; i++)
            lost += s[i].lost, rep += s[i].repeated, bad += s[i].bad;
        if (lost || rep || bad || badframes) {
            printf("verify: FAILED: %llu lost, %llu repeated/reordered, %llu bad frames, %llu corrupt headers\n",
                   (unsigned long long)lost, (unsigned long long)rep, (unsigned long long)bad,
                   (unsigned long long)badframes);
            status = 1;
        } else {
            printf("verify: ok (every frame's contents right, no device lost or reordered a frame)\n");
        }
    }
out:
    if (rec)
        rec_cli_close("read", rec, &o.rec); /* acquisition never started: an empty recording */
    free(s);
    free(table);
    oni_destroy_ctx(ctx);
    stopsig_end();
    return status;
}
