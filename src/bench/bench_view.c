/* bench_view.c - `onigpu bench view` (bench_view.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bench/bench_view.h"
#include "loop/run.h"
#include "loop/stats.h"
#include "view/client.h"
#include "view/view.h"

#define ARMS 4
static const int arm_clients[ARMS] = {-1, 0, 1, 3}; /* -1: no view at all */
static const char *const arm_name[ARMS] = {"off", "0 clients", "1 client", "3 clients"};

struct arm {
    double *lat;
    size_t n, cap;
    double fps, events, kb; /* sums over runs (and clients) */
    uint64_t lost, runs, client_runs;
};

struct hooks {
    struct view *v;
    int backend;
};

static void on_started(void *arg, const struct loop_run_result *r)
{
    struct hooks *h = arg;
    if (h->v)
        view_started(h->v, loop_backend_name(h->backend), r);
}

static void on_progress(void *arg, const struct loop_run_progress *p)
{
    struct hooks *h = arg;
    if (h->v)
        view_progress(h->v, p);
}

static int keep(struct arm *a, const struct loop_run_result *res)
{
    for (size_t i = 0; i < res->nlat; i++) {
        if (res->lat_warm[i])
            continue;
        if (a->n == a->cap) {
            size_t cap = a->cap ? 2 * a->cap : 4096;
            double *g = realloc(a->lat, cap * sizeof *g);
            if (!g)
                return ONI_EBADALLOC;
            a->lat = g, a->cap = cap;
        }
        a->lat[a->n++] = res->lat_us[i];
    }
    return 0;
}

/* One loop run with nclients readers of the view (-1: no view). */
static int one_run(const struct bench_view_opts *o, int nclients, struct arm *a, char *why, size_t cap)
{
    char truth[4200];
    snprintf(truth, sizeof truth, "%s/onigpu-bench-view-truth-XXXXXX", o->tmp_dir);
    int fd = mkstemp(truth);
    if (fd < 0) {
        snprintf(why, cap, "cannot make a truth file in %s", o->tmp_dir);
        return ONI_EPATHINVALID;
    }
    close(fd);
    struct hooks h = {NULL, o->backend};
    struct loop_run_config c = {.backend = o->backend, .block = o->block, .seconds = o->seconds, .truth = truth,
                                .started = on_started, .progress = on_progress, .arg = &h};
    struct view_reader rd[3];
    memset(rd, 0, sizeof rd);
    int rc = 0;
    if (nclients >= 0) {
        struct view_config vc = {.port = 0, .web_dir = o->web_dir, .detect_stage = -1};
        snprintf(vc.host, sizeof vc.host, "127.0.0.1");
        if ((rc = view_open(&vc, &h.v, why, cap)) != 0) {
            unlink(truth);
            return rc;
        }
        c.tap = view_tap(h.v, NULL);
        for (int i = 0; i < nclients && !rc; i++) {
            snprintf(rd[i].host, sizeof rd[i].host, "127.0.0.1");
            rd[i].port = view_port(h.v);
            if (view_reader_start(&rd[i])) {
                snprintf(why, cap, "cannot start a client thread");
                rc = ONI_EBADALLOC;
            }
        }
    }
    struct loop_run_result res;
    memset(&res, 0, sizeof res);
    if (!rc && (rc = loop_run_session(&c, &res)) != 0)
        snprintf(why, cap, "%s", res.why[0] ? res.why : oni_error_str(rc));
    if (h.v) {
        if (res.ran)
            view_end(h.v, &res, NULL);
        a->lost += view_lost(h.v);
        view_close(h.v, 2000);
    }
    for (int i = 0; i < nclients; i++) {
        view_reader_join(&rd[i]);
        if (!rc && (!atomic_load(&rd[i].ticks) || rd[i].status != 200)) {
            snprintf(why, cap, "a client of the view got no events (status %d)", rd[i].status);
            rc = ONI_EREADFAILURE;
        }
        a->events += (double)atomic_load(&rd[i].ticks);
        a->kb += (double)atomic_load(&rd[i].bytes) / 1e3;
        a->client_runs++;
    }
    unlink(truth);
    if (!rc)
        rc = keep(a, &res);
    a->fps += res.fps;
    a->runs++;
    loop_run_result_free(&res);
    return rc;
}

static void arm_row(struct results *r, int k, struct arm *a, const double *base, double *out)
{
    loop_sort_f64(a->lat, a->n);
    double v[4] = {NAN, NAN, NAN, NAN};
    if (a->n) {
        v[0] = loop_percentile_sorted_f64(a->lat, a->n, 50);
        v[1] = loop_percentile_sorted_f64(a->lat, a->n, 99);
        v[2] = loop_percentile_sorted_f64(a->lat, a->n, 99.9);
        v[3] = a->lat[a->n - 1];
    }
    static const char *const col[4] = {"p50_us", "p99_us", "p999_us", "max_us"};
    static const char *const ratio[4] = {"p50_ratio", "p99_ratio", "p999_ratio", "max_ratio"};
    results_cell_str(r, "arm", arm_name[k]);
    results_cell_int(r, "clients", arm_clients[k]);
    results_cell_int(r, "runs", (long long)a->runs);
    results_cell_int(r, "echoes", (long long)a->n);
    for (int i = 0; i < 4; i++)
        results_cell_num(r, col[i], v[i]);
    for (int i = 0; i < 4; i++) /* the view's arm / no view, same machine, same command */
        results_cell_num(r, ratio[i], base ? v[i] / base[i] : 1.0);
    results_cell_num(r, "frames_per_s", a->runs ? a->fps / (double)a->runs : NAN);
    /* per client and run: ticks (one per 100 ms from acquisition's start to the summary) and bytes read */
    results_cell_num(r, "client_events", a->client_runs ? a->events / (double)a->client_runs : NAN);
    results_cell_num(r, "client_kb", a->client_runs ? a->kb / (double)a->client_runs : NAN);
    results_cell_int(r, "view_lost", (long long)a->lost);
    results_row(r, "latency");
    if (out)
        memcpy(out, v, sizeof v);
}

int bench_view_run(const struct bench_view_opts *o, struct results *r, char *why, size_t cap)
{
    struct arm a[ARMS];
    memset(a, 0, sizeof a);
    int rc = 0;
    why[0] = 0;
    for (uint32_t round = 0; round < o->rounds && !rc && !bench_stopped(); round++)
        for (int j = 0; j < ARMS && !rc && !bench_stopped(); j++) {
            int k = (int)((round + (uint32_t)j) % ARMS); /* the order rotates */
            rc = one_run(o, arm_clients[k], &a[k], why, cap);
        }
    double base[4];
    arm_row(r, 0, &a[0], NULL, base);
    for (int k = 1; k < ARMS; k++)
        arm_row(r, k, &a[k], base, NULL);
    double x[ARMS], p50[ARMS], p999[ARMS];
    for (int k = 0; k < ARMS; k++) {
        x[k] = arm_clients[k];
        p50[k] = a[k].n ? loop_percentile_sorted_f64(a[k].lat, a[k].n, 50) : NAN;
        p999[k] = a[k].n ? loop_percentile_sorted_f64(a[k].lat, a[k].n, 99.9) : NAN;
    }
    struct results_series s[2] = {{"p50", x, p50, ARMS, RESULTS_LINES_POINTS},
                                {"p99.9", x, p999, ARMS, RESULTS_LINES_POINTS}};
    struct results_plot p = {"closed-loop latency with the live view's clients (-1: no view)", "clients of the view",
                           "latency (us)", 0, 1, s, 2};
    int prc = results_add_plot(r, "latency", &p);
    for (int k = 0; k < ARMS; k++)
        free(a[k].lat);
    return rc ? rc : prc;
}
