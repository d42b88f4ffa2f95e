/* bench_record.c - `onigpu bench record` (bench_record.h). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "bench/bench_record.h"
#include "loop/run.h"
#include "loop/stats.h"
#include "loop/superframe.h"
#include "record/looptap.h"
#include "onix.h"

struct arm {
    double *lat;
    size_t n, cap;
    double fps;
    uint64_t lost, runs;
};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(const double *v, size_t n, double p)
{
    if (!n)
        return NAN;
    double k = p / 100.0 * (double)(n - 1);
    size_t i = (size_t)k;
    return i + 1 < n ? v[i] + (k - (double)i) * (v[i + 1] - v[i]) : v[n - 1];
}

static void rm_rf(const char *dir)
{
    if (bench_rm_tree(dir))
        fprintf(stderr, "bench record: could not remove %s\n", dir);
}

/* One loop run, recording into rec_dir when not NULL; its echoes after
 * the warm-up appended to a. */
static int one_run(const struct bench_record_opts *o, const char *rec_dir, struct arm *a)
{
    char truth[4200];
    snprintf(truth, sizeof truth, "%s/truth-XXXXXX", o->dir);
    int fd = mkstemp(truth);
    if (fd < 0)
        return ONI_EPATHINVALID;
    close(fd);
    struct rec_loop_tap tap;
    struct rec_config rc = {.dir = rec_dir, .format = o->format};
    rec_loop_tap_init(&tap, &rc);
    struct loop_run_config c = {.backend = o->backend, .block = o->block, .seconds = o->seconds, .truth = truth};
    if (rec_dir)
        c.tap = &tap.tap;
    struct loop_run_result res;
    int rc2 = loop_run_session(&c, &res);
    struct rec_stats st;
    int crc = rec_loop_tap_close(&tap, &st);
    unlink(truth);
    if (rc2 || crc) {
        fprintf(stderr, "bench record: %s\n", rc2 ? res.why : st.why);
        if (res.ran)
            loop_run_result_free(&res);
        return rc2 ? rc2 : crc;
    }
    for (size_t i = 0; i < res.nlat; i++) {
        if (res.lat_warm[i])
            continue;
        if (a->n == a->cap) {
            size_t cap = a->cap ? 2 * a->cap : 4096;
            double *g = realloc(a->lat, cap * sizeof *g);
            if (!g) {
                loop_run_result_free(&res);
                return ONI_EBADALLOC;
            }
            a->lat = g, a->cap = cap;
        }
        a->lat[a->n++] = res.lat_us[i];
    }
    a->fps += res.fps;
    a->lost += st.lost_msgs;
    a->runs++;
    loop_run_result_free(&res);
    if (rec_dir && !o->keep)
        rm_rf(rec_dir);
    return 0;
}

static void arm_row(struct results *r, const char *name, struct arm *a, const double *base)
{
    qsort(a->lat, a->n, sizeof *a->lat, cmp_double);
    double v[4] = {pct(a->lat, a->n, 50), pct(a->lat, a->n, 99), pct(a->lat, a->n, 99.9),
                   a->n ? a->lat[a->n - 1] : NAN};
    static const char *const col[4] = {"p50_us", "p99_us", "p999_us", "max_us"};
    results_cell_str(r, "arm", name);
    results_cell_int(r, "runs", (long long)a->runs);
    results_cell_int(r, "echoes", (long long)a->n);
    for (int i = 0; i < 4; i++)
        results_cell_num(r, col[i], v[i]);
    static const char *const ratio[4] = {"p50_ratio", "p99_ratio", "p999_ratio", "max_ratio"};
    for (int i = 0; i < 4; i++) /* recording / no recording, on the same machine in the same command */
        results_cell_num(r, ratio[i], base ? v[i] / base[i] : 1.0);
    results_cell_num(r, "frames_per_s", a->runs ? a->fps / (double)a->runs : NAN);
    results_cell_int(r, "record_lost_msgs", (long long)a->lost);
    results_row(r, "latency");
}

static int latency_part(const struct bench_record_opts *o, struct results *r)
{
    struct arm off = {0}, on = {0};
    int rc = 0;
    for (uint32_t k = 0; k < o->rounds && !rc && !bench_stopped(); k++) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/loop-%u", o->dir, k);
        if (k % 2 == 0) { /* the order alternates: drift of the machine falls on both */
            rc = one_run(o, NULL, &off);
            if (!rc)
                rc = one_run(o, dir, &on);
        } else {
            rc = one_run(o, dir, &on);
            if (!rc)
                rc = one_run(o, NULL, &off);
        }
    }
    arm_row(r, "off", &off, NULL);
    double base[4] = {pct(off.lat, off.n, 50), pct(off.lat, off.n, 99), pct(off.lat, off.n, 99.9),
                      off.n ? off.lat[off.n - 1] : NAN};
    arm_row(r, "recording", &on, base);
    free(off.lat);
    free(on.lat);
    return rc;
}

/* probes super-frames (probe p of raw device 8 + p / 2) at clock t into blk. */
static size_t make_block(uint8_t *blk, uint32_t probes, uint64_t *t, uint32_t samples, uint64_t *n)
{
    size_t off = 0, stride = LOOP_NP2E_READ_HDR + ((LOOP_NP2E_PAYLOAD + 3u) & ~3u);
    for (uint32_t s = 0; s < samples; s++, (*n)++) {
        uint64_t clk = *t + (*n * 25000) / 3; /* 30 kHz on the 250 MHz clock */
        for (uint32_t p = 0; p < probes; p++) {
            uint8_t *f = blk + off;
            uint32_t idx = 8 + p / 2, sz = LOOP_NP2E_PAYLOAD;
            uint16_t probe = (uint16_t)(p % 2);
            memcpy(f, &clk, 8);
            memcpy(f + 8, &idx, 4);
            memcpy(f + 12, &sz, 4);
            memcpy(f + 16, &clk, 8);
            memcpy(f + 16 + LOOP_NP2E_PROBE_OFF, &probe, 2);
            off += stride;
        }
    }
    return off;
}

/* One rate measurement: paced (30 kHz a probe) or as fast as it goes. */
static int rate_run(const struct bench_record_opts *o, struct results *r, int paced)
{
    uint32_t probes = o->probes, ndev = (probes + 1) / 2;
    oni_device_t t[64];
    for (uint32_t i = 0; i < ndev; i++)
        t[i] = (oni_device_t){.idx = 8 + i, .id = ONIX_DS90UB9RAW, .version = 3, .read_size = LOOP_NP2E_PAYLOAD};
    char dir[4200], why[300];
    snprintf(dir, sizeof dir, "%s/rate-%u-%s", o->dir, probes, paced ? "paced" : "max");
    struct rec_config c = {.dir = dir, .format = o->format, .queue_bytes = 256u << 20};
    struct rec *rec = NULL;
    int rc = rec_open(&c, NULL, t, ndev, &rec, why, sizeof why);
    if (rc) {
        fprintf(stderr, "bench record: %s\n", why);
        return rc;
    }
    const uint32_t per = 30; /* samples a block: 1 ms */
    size_t stride = LOOP_NP2E_READ_HDR + ((LOOP_NP2E_PAYLOAD + 3u) & ~3u);
    uint8_t *blk = calloc((size_t)per * probes, stride);
    if (!blk) {
        rec_close(rec, NULL);
        return ONI_EBADALLOC;
    }
    uint64_t t0 = oni_now_ns(), n = 0, blocks = 0, clk0 = 1000000;
    uint64_t end = t0 + (uint64_t)(o->seconds * 1e9);
    while (oni_now_ns() < end && !bench_stopped()) {
        if (paced) { /* block k is due at t0 + k ms */
            uint64_t due = t0 + blocks * 1000000u, now = oni_now_ns();
            if (due > now) {
                struct timespec ts = {0, (long)(due - now)};
                nanosleep(&ts, NULL);
            }
        } else { /* as fast as the writer empties the queue: never more than half full */
            struct rec_stats q;
            for (rec_get_stats(rec, &q); q.queued > q.queue_cap / 2 && oni_now_ns() < end; rec_get_stats(rec, &q)) {
                struct timespec ts = {0, 100000};
                nanosleep(&ts, NULL);
            }
        }
        size_t len = make_block(blk, probes, &clk0, per, &n);
        rec_frames(rec, blk, len, 0);
        blocks++;
    }
    uint64_t t_in = oni_now_ns() - t0;
    struct rec_stats st;
    int crc = rec_close(rec, &st);
    uint64_t t_all = oni_now_ns() - t0; /* until every byte was written */
    if (st.failed)
        fprintf(stderr, "bench record: %u probes: the recording stopped: %s\n", probes, st.why);
    free(blk);
    double data = (double)st.samples * 384 * 2; /* continuous.dat bytes of the rows written */
    results_cell_str(r, "mode", paced ? "paced" : "max");
    results_cell_int(r, "probes", probes);
    results_cell_num(r, "offered_MBps", (double)n * probes * 768 / ((double)t_in / 1e9) / 1e6);
    results_cell_num(r, "written_MBps", data / ((double)t_all / 1e9) / 1e6);
    results_cell_num(r, "files_MBps", (double)st.bytes / ((double)t_all / 1e9) / 1e6);
    results_cell_num(r, "seconds", (double)t_all / 1e9);
    results_cell_int(r, "lost_msgs", (long long)st.lost_msgs);
    results_cell_num(r, "queue_peak_MB", (double)st.queue_peak / 1e6);
    results_cell_int(r, "failed", st.failed);
    results_row(r, "rate");
    if (!o->keep)
        rm_rf(dir);
    return crc;
}

int bench_record_run(const struct bench_record_opts *o, struct results *r)
{
    results_meta(r, "backend", loop_backend_name(o->backend));
    results_meta_num(r, "block_frames", o->block);
    results_meta_num(r, "seconds", o->seconds);
    results_meta(r, "format", rec_format_name(o->format));
    int rc = 0;
    if (o->latency)
        rc = latency_part(o, r);
    if (!rc && o->probes && !bench_stopped())
        rc = rate_run(o, r, 1);
    if (!rc && o->probes && !bench_stopped())
        rc = rate_run(o, r, 0);
    return rc;
}
