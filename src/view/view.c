/* view.c - the live view's tap, pump and events (view.h). The tap's calls
 * run on the loop's threads and only copy into the rings (ring.h); the pump
 * thread drains them every VIEW_TICK_MS into one JSON event; server.c
 * streams the events. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "onix.h"
#include "oni/util/clock.h"
#include "record/record.h"
#include "onigpu_stage.h"
#include "loop/stats.h"
#include "loop/superframe.h"
#include "view/view_int.h"

/* --- text ------------------------------------------------------------------ */

void view_buf_printf(struct view_buf *b, const char *fmt, ...)
{
    for (;;) {
        size_t room = b->cap - b->len;
        va_list ap;
        va_start(ap, fmt);
        int n = b->s && !b->oom ? vsnprintf(b->s + b->len, room, fmt, ap) : -1;
        va_end(ap);
        if (b->oom)
            return;
        if (n >= 0 && (size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (n >= 0 && cap < b->len + (size_t)n + 1)
            cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->oom = 1;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

void view_buf_free(struct view_buf *b)
{
    free(b->s);
    memset(b, 0, sizeof *b);
}

/* JSON number: NaN and infinities become null. */
static void num(struct view_buf *b, double x)
{
    if (isfinite(x))
        view_buf_printf(b, "%.6g", x);
    else
        view_buf_printf(b, "null");
}

/* A JSON string of s (quotes, backslashes and control characters escaped). */
static void str(struct view_buf *b, const char *s)
{
    view_buf_printf(b, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            view_buf_printf(b, "\\%c", c);
        else if (c < 0x20)
            view_buf_printf(b, "\\u%04x", c);
        else
            view_buf_printf(b, "%c", c);
    }
    view_buf_printf(b, "\"");
}

void view_queue(struct view *v, const char *event, struct view_buf *b)
{
    struct view_buf m = {0};
    view_buf_printf(&m, "event: %s\ndata: %s\n\n", event, b->s ? b->s : "{}");
    view_buf_free(b);
    if (m.oom) {
        view_buf_free(&m);
        return;
    }
    pthread_mutex_lock(&v->q.mu);
    if (!v->q.ended) {
        uint32_t k = (uint32_t)(v->q.seq % VIEW_QUEUE);
        free(v->q.msg[k]);
        v->q.msg[k] = m.s;
        v->q.len[k] = m.len;
        v->q.seq++;
        m.s = NULL;
        if (!strcmp(event, "end"))
            v->q.ended = 1;
        pthread_cond_broadcast(&v->q.cv);
    }
    pthread_mutex_unlock(&v->q.mu);
    free(m.s);
}

/* --- the selection of trace channels ------------------------------------------ */

uint64_t view_sel_pack(const uint16_t *ch, uint32_t n)
{
    uint64_t w = 0;
    for (uint32_t i = n > VIEW_TRACES ? VIEW_TRACES : n; i-- > 0;)
        w = w * VIEW_SEL_BASE + (ch[i] < VIEW_MAXCHAN ? ch[i] + 1u : 0u);
    return w;
}

uint32_t view_sel_unpack(uint64_t w, uint16_t *ch)
{
    uint32_t n = 0;
    for (; n < VIEW_TRACES && w % VIEW_SEL_BASE; w /= VIEW_SEL_BASE)
        ch[n++] = (uint16_t)(w % VIEW_SEL_BASE - 1);
    return n;
}

/* --- the tap: on the loop's threads, copies only --------------------------- */

static int tap_open(void *arg, oni_ctx ctx, char *why, size_t cap)
{
    struct view *v = arg;
    oni_size_t n = 0;
    size_t len = sizeof n;
    uint32_t hz = 0;
    size_t hlen = sizeof hz;
    if (!oni_get_opt(ctx, ONI_OPT_ACQCLKHZ, &hz, &hlen))
        v->acq_hz = hz;
    if (!oni_get_opt(ctx, ONI_OPT_NUMDEVICES, &n, &len) && n) {
        oni_device_t *tab = calloc(n, sizeof *tab);
        len = n * sizeof *tab;
        if (tab && !oni_get_opt(ctx, ONI_OPT_DEVICETABLE, tab, &len))
            for (oni_size_t i = 0; i < n; i++)
                if (tab[i].id == ONIX_DS90UB9RAW && !view_probe_layout(v, tab[i].read_size))
                    break;
        free(tab);
    }
    /* the view shows what it can: no probe layout means no traces, not no run */
    if (v->next && v->next->open)
        return v->next->open(v->next->arg, ctx, why, cap);
    return 0;
}

int view_probe_layout(struct view *v, uint32_t read_size)
{
    struct loop_ephys_params p;
    loop_ephys_defaults(&p);
    struct loop_ephys_state *st = calloc(1, sizeof *st);
    if (!st)
        return ONI_EBADALLOC;
    int rc = loop_np2e_layout(&v->lay, read_size, v->nprobes, NULL);
    if (!rc)
        rc = loop_ephys_init(st, &p, &v->lay); /* the detector's band-pass, for the filtered traces */
    if (!rc) {
        memcpy(v->fb, st->b, sizeof v->fb);
        memcpy(v->fa, st->a, sizeof v->fa);
        memset(v->fz, 0, sizeof v->fz);
        atomic_store_explicit(&v->have_lay, 1, memory_order_release);
    }
    free(st);
    return rc;
}

static void bucket_flush(struct view *v)
{
    if (!v->bn)
        return;
    struct view_trace_rec r = {.t = v->bt, .sel = v->bsel};
    memcpy(r.lo, v->blo, sizeof r.lo);
    memcpy(r.hi, v->bhi, sizeof r.hi);
    for (int i = 0; i < VIEW_TRACES; i++) {
        r.flo[i] = (int16_t)lrintf(fmaxf(-32768.0f, fminf(32767.0f, v->bflo[i])));
        r.fhi[i] = (int16_t)lrintf(fmaxf(-32768.0f, fminf(32767.0f, v->bfhi[i])));
    }
    view_ring_put(&v->traces, &r);
    v->bn = 0;
}

/* Every frame of the block into the bucket of its selected channels: the
 * minimum and maximum over decim frames, so a spike stays visible. */
static void tap_block(void *arg, const void *blk, size_t len)
{
    struct view *v = arg;
    if (atomic_load_explicit(&v->have_lay, memory_order_acquire)) {
        const uint8_t *p = blk;
        size_t nf = len / v->lay.stride;
        uint16_t ch[VIEW_TRACES];
        uint64_t sel = atomic_load_explicit(&v->sel, memory_order_relaxed);
        uint32_t nc = view_sel_unpack(sel, ch);
        for (size_t f = 0; f < nf; f++, p += v->lay.stride) {
            if (sel != v->bsel) { /* another channel set: its filters start afresh */
                bucket_flush(v);
                memset(v->fz, 0, sizeof v->fz);
            }
            if (!v->bn) {
                memcpy(&v->bt, p + v->lay.time_off, 8);
                v->bsel = sel;
                uint64_t zero = 0;
                atomic_compare_exchange_strong(&v->t0, &zero, v->bt);
            }
            for (uint32_t i = 0; i < nc; i++) {
                uint16_t raw;
                memcpy(&raw, p + v->lay.off[ch[i]], 2);
                int16_t x = (int16_t)((int)raw - 2048);
                /* the detector's band-pass: high-pass then low-pass biquad */
                float y = loop_biquad_step(v->fb[0], v->fa[0], &v->fz[i][0], (float)x);
                y = loop_biquad_step(v->fb[1], v->fa[1], &v->fz[i][2], y);
                if (!v->bn || x < v->blo[i])
                    v->blo[i] = x;
                if (!v->bn || x > v->bhi[i])
                    v->bhi[i] = x;
                if (!v->bn || y < v->bflo[i])
                    v->bflo[i] = y;
                if (!v->bn || y > v->bfhi[i])
                    v->bfhi[i] = y;
            }
            if (++v->bn == v->cfg.decim)
                bucket_flush(v);
        }
        if (nf) {
            uint64_t t;
            memcpy(&t, (const uint8_t *)blk + (nf - 1) * v->lay.stride + v->lay.time_off, 8);
            atomic_store_explicit(&v->last_clk, t, memory_order_release);
        }
    }
    if (v->next && v->next->block)
        v->next->block(v->next->arg, blk, len);
}

static void tap_frame(void *arg, const oni_frame_t *f)
{
    struct view *v = arg;
    if (v->next && v->next->frame)
        v->next->frame(v->next->arg, f);
}

static void tap_detect(void *arg, const struct loop_ephys_out *o, uint32_t pins, uint64_t host_ns)
{
    struct view *v = arg;
    for (uint32_t i = 0; i < o->nspikes; i++) {
        struct view_event_rec e = {o->spikes[i].time, VIEW_EV_SPIKE, o->spikes[i].chan, o->spikes[i].unit};
        view_ring_put(&v->events, &e);
    }
    if (pins) {
        struct view_event_rec e = {o->t_stim, VIEW_EV_STIM, pins, ONIGPU_UNIT_NONE};
        view_ring_put(&v->events, &e);
    }
    uint64_t zero = 0;
    if (o->nspikes)
        atomic_compare_exchange_strong(&v->t0, &zero, o->spikes[0].time);
    if (v->next && v->next->detect)
        v->next->detect(v->next->arg, o, pins, host_ns);
}

static void tap_echo(void *arg, uint64_t tag, double lat_us)
{
    struct view *v = arg;
    struct view_echo_rec e = {tag, lat_us};
    view_ring_put(&v->echoes, &e);
    if (v->next && v->next->echo)
        v->next->echo(v->next->arg, tag, lat_us);
}

static void tap_loop(void *arg, struct loop *lp)
{
    struct view *v = arg;
    pthread_mutex_lock(&v->lmu);
    v->lp = lp;
    pthread_mutex_unlock(&v->lmu);
    if (v->next && v->next->loop)
        v->next->loop(v->next->arg, lp);
}

const struct loop_run_tap *view_tap(struct view *v, const struct loop_run_tap *next)
{
    v->next = next;
    v->tap = (struct loop_run_tap){v, tap_open, tap_block, tap_frame, tap_detect, tap_echo, tap_loop};
    return &v->tap;
}

/* --- changes from the page ------------------------------------------------------ */

int view_apply(struct view *v, const struct view_control *c, char *why, size_t cap)
{
    char note[160];
    if (c->have_k) {
        if (v->cfg.detect_stage < 0) {
            snprintf(why, cap, "the chain has no detect stage whose threshold could change");
            return ONI_EINVALSTATE;
        }
        char opts[32], err[256] = "";
        snprintf(opts, sizeof opts, "k=%g", c->k);
        pthread_mutex_lock(&v->lmu);
        int rc = v->lp ? loop_stage_reconfigure(v->lp, (uint32_t)v->cfg.detect_stage, opts, err, sizeof err)
                       : ONI_EINVALSTATE;
        if (!rc)
            v->k = c->k;
        pthread_mutex_unlock(&v->lmu);
        if (rc) {
            snprintf(why, cap, "the threshold was not changed: %s", err[0] ? err : "the loop is not running");
            return rc;
        }
        snprintf(note, sizeof note, "threshold k=%g noise SDs (detect stage %d), set from the page", c->k,
                 v->cfg.detect_stage);
        if (v->cfg.note)
            v->cfg.note(v->cfg.arg, atomic_load_explicit(&v->last_clk, memory_order_acquire), note);
    }
    for (uint32_t i = 0; c->have_chans && i < c->nchan; i++)
        if (c->chan[i] >= v->nchan) {
            snprintf(why, cap, "channel %u: the loop has %u (%u probes)", c->chan[i], v->nchan, v->nprobes);
            return ONI_EINVALARG;
        }
    if (c->have_chans) {
        atomic_store(&v->sel_set, 1);
        atomic_store(&v->sel, view_sel_pack(c->chan, c->nchan));
        int n = snprintf(note, sizeof note, "trace channels");
        for (uint32_t i = 0; i < c->nchan && n > 0 && (size_t)n < sizeof note; i++)
            n += snprintf(note + n, sizeof note - (size_t)n, "%s%u", i ? "," : " ", c->chan[i]);
        if (v->cfg.note)
            v->cfg.note(v->cfg.arg, atomic_load_explicit(&v->last_clk, memory_order_acquire), note);
    }
    return 0;
}

/* --- the pump: rings -> one event per tick ------------------------------------ */

static double rel_s(const struct view *v, uint64_t t)
{
    uint64_t t0 = atomic_load(&v->t0);
    double hz = atomic_load(&v->acq_hz);
    hz = hz > 0 ? hz : 250e6;
    return t0 && t >= t0 ? (double)(t - t0) / hz : (t0 ? -(double)(t0 - t) / hz : 0);
}

static void put_traces(struct view *v, struct view_buf *b)
{
    struct view_trace_rec *rec = v->tbuf;
    size_t n = view_ring_take(&v->traces, rec, VIEW_TBUF);
    view_buf_printf(b, "\"traces\":[");
    for (size_t i = 0; i < n; i++) {
        uint16_t ch[VIEW_TRACES];
        uint32_t nc = view_sel_unpack(rec[i].sel, ch);
        view_buf_printf(b, "%s[", i ? "," : "");
        num(b, rel_s(v, rec[i].t));
        view_buf_printf(b, ",[");
        for (uint32_t k = 0; k < nc; k++)
            view_buf_printf(b, "%s[%u,%d,%d,%d,%d]", k ? "," : "", ch[k], rec[i].lo[k], rec[i].hi[k], rec[i].flo[k],
                            rec[i].fhi[k]);
        view_buf_printf(b, "]]");
    }
    view_buf_printf(b, "]");
}

/* Trace the VIEW_TRACES channels with the most spikes over the last second
 * (in channel order), when nobody chose them: the probe's first channels
 * may well be silent. */
static void pick_busiest(struct view *v, uint32_t ticks)
{
    uint32_t sum[VIEW_MAXCHAN];
    for (uint32_t ch = 0; ch < v->nchan; ch++) {
        sum[ch] = 0;
        for (uint32_t k = 0; k < ticks; k++)
            sum[ch] += v->rate[k][ch];
    }
    uint16_t pick[VIEW_TRACES];
    uint32_t n = 0;
    for (; n < VIEW_TRACES; n++) {
        uint32_t best = 0;
        for (uint32_t ch = 1; ch < v->nchan; ch++)
            if (sum[ch] > sum[best])
                best = ch;
        if (!sum[best])
            break;
        pick[n] = (uint16_t)best;
        sum[best] = 0;
    }
    for (uint32_t i = 1; i < n; i++) /* channel order: top to bottom as on the probe's list */
        for (uint32_t j = i; j > 0 && pick[j - 1] > pick[j]; j--) {
            uint16_t t = pick[j];
            pick[j] = pick[j - 1];
            pick[j - 1] = t;
        }
    if (n == VIEW_TRACES && !atomic_load(&v->sel_set))
        atomic_store(&v->sel, view_sel_pack(pick, n));
}

/* "units": the VIEW_TOP_UNITS units with the most spikes over the last
 * second, busiest first: [unit, spikes/s, channel of its last spike]. */
static void put_units(struct view *v, struct view_buf *b, uint32_t ticks)
{
    uint32_t s[VIEW_MAX_UNITS];
    for (uint32_t u = 0; u < VIEW_MAX_UNITS; u++) {
        s[u] = 0;
        for (uint32_t k = 0; k < ticks; k++)
            s[u] += v->urate[k][u];
    }
    view_buf_printf(b, ",\"units\":[");
    for (uint32_t n = 0; n < VIEW_TOP_UNITS; n++) {
        uint32_t best = 0;
        for (uint32_t u = 1; u < VIEW_MAX_UNITS; u++)
            if (s[u] > s[best])
                best = u;
        if (!s[best])
            break;
        view_buf_printf(b, "%s[%u,%.3g,%u]", n ? "," : "", best, s[best] * 1000.0 / (ticks * VIEW_TICK_MS),
                        v->uchan[best]);
        s[best] = 0;
    }
    view_buf_printf(b, "]");
}

static void put_events(struct view *v, struct view_buf *b)
{
    struct view_event_rec *ev = v->ebuf;
    size_t n = view_ring_take(&v->events, ev, VIEW_EBUF);
    uint16_t *cnt = v->rate[v->tick % VIEW_RATE_TICKS], *ucnt = v->urate[v->tick % VIEW_RATE_TICKS];
    memset(cnt, 0, sizeof v->rate[0]);
    memset(ucnt, 0, sizeof v->urate[0]);
    view_buf_printf(b, "\"spikes\":[");
    int first = 1;
    for (size_t i = 0; i < n; i++)
        if (ev[i].kind == VIEW_EV_SPIKE) {
            v->nspikes++;
            if (ev[i].chan < v->nchan && cnt[ev[i].chan] < UINT16_MAX)
                cnt[ev[i].chan]++;
            if (ev[i].unit < VIEW_MAX_UNITS && ucnt[ev[i].unit] < UINT16_MAX) {
                ucnt[ev[i].unit]++;
                v->uchan[ev[i].unit] = (uint16_t)ev[i].chan;
            }
            view_buf_printf(b, "%s[", first ? "" : ",");
            num(b, rel_s(v, ev[i].t));
            if (ev[i].unit == ONIGPU_UNIT_NONE) /* [t, channel], or [t, channel, unit] when labelled */
                view_buf_printf(b, ",%u]", ev[i].chan);
            else
                view_buf_printf(b, ",%u,%u]", ev[i].chan, ev[i].unit);
            first = 0;
        }
    view_buf_printf(b, "],\"stims\":[");
    first = 1;
    for (size_t i = 0; i < n; i++)
        if (ev[i].kind == VIEW_EV_STIM) {
            v->nstims++;
            view_buf_printf(b, "%s", first ? "" : ",");
            num(b, rel_s(v, ev[i].t));
            first = 0;
        }
    /* spikes per second over the last second, per channel */
    view_buf_printf(b, "],\"rate\":[");
    uint32_t ticks = v->tick + 1 < VIEW_RATE_TICKS ? v->tick + 1 : VIEW_RATE_TICKS;
    for (uint32_t ch = 0; ch < v->nchan; ch++) {
        uint32_t s = 0;
        for (uint32_t k = 0; k < ticks; k++)
            s += v->rate[k][ch];
        view_buf_printf(b, "%s%.3g", ch ? "," : "", s * 1000.0 / (ticks * VIEW_TICK_MS));
    }
    view_buf_printf(b, "]");
    put_units(v, b, ticks);
    if (v->tick == VIEW_AUTO_TICKS && !atomic_load(&v->sel_set))
        pick_busiest(v, ticks);
}

/* The latencies so far, each echo counted once in a bin of a log scale
 * (VIEW_LAT_STEP apart: memory and work per second stay the same however
 * long the run): percentiles (nearest rank, stats.h) within half a bin,
 * the exact maximum, and a histogram of 40 bins up to 1.25 x p99.9. */
static double bin_lo(uint32_t i)
{
    return i ? exp((double)i * log(VIEW_LAT_STEP)) : 0.0;
}

static uint32_t bin_of(double us)
{
    if (!(us >= 1.0))
        return 0;
    double i = floor(log(us) / log(VIEW_LAT_STEP));
    return i >= VIEW_LAT_BINS - 1 ? VIEW_LAT_BINS - 1 : (uint32_t)i;
}

/* Percentile p of the nlat echoes binned: the middle of the bin that holds
 * the nearest-rank sample, kept within the minimum and maximum seen. */
static double lat_pct(const struct view *v, double p)
{
    size_t rank = loop_percentile_rank(v->nlat, p), sum = 0;
    for (uint32_t i = 0; i < VIEW_LAT_BINS; i++)
        if ((sum += v->lat_bins[i]) >= rank) {
            double x = i ? bin_lo(i) * sqrt(VIEW_LAT_STEP) : 0.5;
            return x < v->lat_min ? v->lat_min : x > v->lat_max ? v->lat_max : x;
        }
    return v->lat_max;
}

static void put_latency(struct view *v, struct view_buf *b)
{
    struct view_echo_rec e[1024];
    size_t n, got = 0;
    while ((n = view_ring_take(&v->echoes, e, 1024)) > 0)
        for (size_t i = 0; i < n; i++, got++) {
            double x = e[i].lat_us;
            v->lat_bins[bin_of(x)]++;
            v->lat_min = !v->nlat || x < v->lat_min ? x : v->lat_min;
            v->lat_max = !v->nlat || x > v->lat_max ? x : v->lat_max;
            v->nlat++;
        }
    if (!v->nlat || (!got && v->tick % 10))
        return;
    double p50 = lat_pct(v, 50), p99 = lat_pct(v, 99), p999 = lat_pct(v, 99.9);
    double top = p999 * 1.25 > 1 ? p999 * 1.25 : 1;
    enum { BINS = 40 };
    uint64_t h[BINS] = {0}, over = 0;
    for (uint32_t i = 0; i < VIEW_LAT_BINS; i++) {
        if (!v->lat_bins[i])
            continue;
        double x = i ? bin_lo(i) * sqrt(VIEW_LAT_STEP) : 0.5;
        if (x >= top)
            over += v->lat_bins[i];
        else
            h[(int)(x / top * BINS)] += v->lat_bins[i];
    }
    view_buf_printf(b, ",\"lat\":{\"n\":%llu,\"p50\":", (unsigned long long)v->nlat);
    num(b, p50);
    view_buf_printf(b, ",\"p99\":");
    num(b, p99);
    view_buf_printf(b, ",\"p999\":");
    num(b, p999);
    view_buf_printf(b, ",\"max\":");
    num(b, v->lat_max);
    view_buf_printf(b, ",\"bin_us\":");
    num(b, top / BINS);
    view_buf_printf(b, ",\"over\":%llu,\"hist\":[", (unsigned long long)over);
    for (int i = 0; i < BINS; i++)
        view_buf_printf(b, "%s%llu", i ? "," : "", (unsigned long long)h[i]);
    view_buf_printf(b, "]}");
}

static void put_status(struct view *v, struct view_buf *b)
{
    pthread_mutex_lock(&v->smu);
    struct loop_run_progress p = v->prog;
    int have = v->have_prog;
    pthread_mutex_unlock(&v->smu);
    view_buf_printf(b, ",\"status\":{");
    if (have) {
        view_buf_printf(b, "\"t\":");
        num(b, p.t);
        view_buf_printf(b, ",\"fps\":");
        num(b, p.fps);
        view_buf_printf(b, ",\"keeping_up\":%s,\"stims\":%llu,\"stalls\":%llu",
                        v->fs_hz > 0 && p.fps >= 0.98 * v->fs_hz ? "true" : "false", (unsigned long long)p.stims,
                        (unsigned long long)p.stalls);
        if (!p.ss_rc) {
            view_buf_printf(b, ",\"fifo_pct\":");
            num(b, p.fifo_pct);
            view_buf_printf(b, ",\"behind_ms\":");
            num(b, p.behind_ms);
            view_buf_printf(b, ",\"drops\":%llu,", (unsigned long long)p.dropped);
        } else {
            view_buf_printf(b, ",");
        }
    }
    pthread_mutex_lock(&v->lmu);
    double k = v->k;
    pthread_mutex_unlock(&v->lmu);
    view_buf_printf(b, "\"k\":");
    num(b, k);
    view_buf_printf(b, ",\"spikes\":%llu,\"stims_seen\":%llu,\"clients\":%u,\"view_lost\":%llu}",
                    (unsigned long long)v->nspikes, (unsigned long long)v->nstims, atomic_load(&v->clients),
                    (unsigned long long)view_lost(v));
}

static void tick(struct view *v)
{
    struct view_buf b = {0};
    view_buf_printf(&b, "{");
    put_traces(v, &b);
    view_buf_printf(&b, ",");
    put_events(v, &b);
    put_latency(v, &b);
    put_status(v, &b);
    view_buf_printf(&b, "}");
    v->tick++;
    view_queue(v, "tick", &b);
}

static void *pump_main(void *arg)
{
    struct view *v = arg;
    uint64_t next = oni_now_ns();
    while (!atomic_load(&v->stop)) {
        next += VIEW_TICK_MS * 1000000ull;
        struct timespec ts;
        oni_timespec_at(next, &ts);
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            ;
        if (atomic_load_explicit(&v->started, memory_order_acquire))
            tick(v);
    }
    return NULL;
}

/* --- the run's side -------------------------------------------------------------- */

/* What a new client is sent first: the run, the probe, the selection. */
static void hello(struct view *v)
{
    struct view_buf b = {0};
    view_buf_printf(&b, "{\"backend\":");
    str(&b, v->backend);
    view_buf_printf(&b, ",\"block\":%u,\"gpu_stream\":%s,\"fs_hz\":", v->block, v->gpu_stream ? "true" : "false");
    num(&b, v->fs_hz);
    view_buf_printf(&b, ",\"filter\":\"%g-%g Hz band-pass\"", v->lo_hz, v->hi_hz);
    view_buf_printf(&b, ",\"traces\":%s,\"control\":%s,\"decim\":%u,\"k\":",
                    atomic_load(&v->have_lay) || !v->started ? "true" : "false", v->token[0] ? "true" : "false",
                    v->cfg.decim);
    pthread_mutex_lock(&v->lmu);
    double k = v->k;
    pthread_mutex_unlock(&v->lmu);
    num(&b, k);
    /* each probe's sites in its own coordinates; its channels are first + c */
    view_buf_printf(&b, ",\"probes\":[");
    for (uint32_t p = 0; p < v->nprobes; p++) {
        view_buf_printf(&b, "%s{\"name\":\"Probe%c\",\"first\":%u,\"sites\":[", p ? "," : "", 'A' + p,
                        p * VIEW_PROBE_CHAN);
        for (uint32_t ch = 0; ch < VIEW_PROBE_CHAN; ch++) {
            float x, y;
            rec_np2e_site(ch, &x, &y);
            view_buf_printf(&b, "%s[%g,%g]", ch ? "," : "", x, y);
        }
        view_buf_printf(&b, "]}");
    }
    uint16_t sel[VIEW_TRACES];
    uint32_t n = view_sel_unpack(atomic_load(&v->sel), sel);
    view_buf_printf(&b, "],\"channels\":[");
    for (uint32_t i = 0; i < n; i++)
        view_buf_printf(&b, "%s%u", i ? "," : "", sel[i]);
    view_buf_printf(&b, "]}");
    struct view_buf m = {0};
    view_buf_printf(&m, "event: hello\ndata: %s\n\n", b.s ? b.s : "{}");
    view_buf_free(&b);
    pthread_mutex_lock(&v->q.mu);
    free(v->q.hello);
    v->q.hello = m.oom ? NULL : m.s;
    v->q.hello_len = m.oom ? 0 : m.len;
    pthread_mutex_unlock(&v->q.mu);
    if (m.oom)
        view_buf_free(&m);
}

void view_started(struct view *v, const char *backend, const struct loop_run_result *r)
{
    snprintf(v->backend, sizeof v->backend, "%s", backend);
    v->block = r->block;
    v->gpu_stream = r->gpu_stream;
    v->fs_hz = r->fs_hz;
    hello(v);
    atomic_store_explicit(&v->started, 1, memory_order_release);
    /* clients connected during the block trials take the run's hello too */
    struct view_buf b = {0};
    pthread_mutex_lock(&v->q.mu);
    const char *d = v->q.hello ? strstr(v->q.hello, "data: ") : NULL;
    if (d)
        view_buf_printf(&b, "%.*s", (int)(v->q.hello_len - (size_t)(d + 6 - v->q.hello) - 2), d + 6);
    pthread_mutex_unlock(&v->q.mu);
    if (b.s)
        view_queue(v, "hello", &b);
}

void view_progress(struct view *v, const struct loop_run_progress *p)
{
    pthread_mutex_lock(&v->smu);
    v->prog = *p;
    v->have_prog = 1;
    pthread_mutex_unlock(&v->smu);
}

static void lat_json(struct view_buf *b, const char *name, const struct loop_run_latency *l)
{
    view_buf_printf(b, ",\"%s\":{\"n\":%zu,\"p50_us\":", name, l->n);
    num(b, l->p50_us);
    view_buf_printf(b, ",\"p99_us\":");
    num(b, l->p99_us);
    view_buf_printf(b, ",\"p999_us\":");
    num(b, l->p999_us);
    view_buf_printf(b, ",\"max_us\":");
    num(b, l->max_us);
    view_buf_printf(b, "}");
}

void view_end(struct view *v, const struct loop_run_result *r, const char *results)
{
    struct view_buf b = {0};
    view_buf_printf(&b, "{\"ran\":%s,\"seconds\":", r->ran ? "true" : "false");
    num(&b, r->seconds);
    view_buf_printf(&b, ",\"stopped\":%s,\"frames\":%llu,\"fps\":", r->stopped ? "true" : "false",
                    (unsigned long long)r->frames);
    num(&b, r->fps);
    view_buf_printf(&b, ",\"keeping_up\":%s,\"spikes\":%llu,\"stims\":%llu,\"echoes\":%llu,\"dropped\":%llu,"
                    "\"stalls\":%llu,\"precision\":",
                    r->verdict < 0 ? "null" : r->verdict ? "true" : "false", (unsigned long long)r->spikes,
                    (unsigned long long)r->stims, (unsigned long long)r->echoes, (unsigned long long)r->dropped,
                    (unsigned long long)r->stalls);
    num(&b, r->score.precision);
    view_buf_printf(&b, ",\"recall\":");
    num(&b, r->score.recall);
    view_buf_printf(&b, ",\"f1\":");
    num(&b, r->score.f1);
    lat_json(&b, "latency", &r->lat);
    view_buf_printf(&b, ",\"error\":");
    str(&b, r->rc ? r->why : "");
    view_buf_printf(&b, ",\"results\":");
    if (results)
        str(&b, results);
    else
        view_buf_printf(&b, "null");
    view_buf_printf(&b, "}");
    atomic_store(&v->stop, 1);
    if (v->pump_started) {
        pthread_join(v->pump, NULL);
        v->pump_started = 0;
    }
    if (v->started)
        tick(v); /* what the rings still hold */
    view_queue(v, "end", &b);
}

/* --- open / close ----------------------------------------------------------- */

static int read_file(const char *path, char **data, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    struct view_buf b = {0};
    char chunk[8192];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        view_buf_printf(&b, "%.*s", (int)n, chunk);
    int err = ferror(f) || b.oom || !b.s;
    fclose(f);
    if (err) {
        view_buf_free(&b);
        return -1;
    }
    *data = b.s;
    *len = b.len;
    return 0;
}

/* The page's files, every one read now: a page that cannot be served is
 * refused before the run, not found missing by the browser. */
static int load_files(struct view *v, char *why, size_t cap)
{
    static const struct {
        const char *url, *path, *type;
    } tab[] = {
        {"/", "index.html", "text/html; charset=utf-8"},
        {"/view.js", "view.js", "text/javascript; charset=utf-8"},
        {"/view.css", "view.css", "text/css; charset=utf-8"},
        {"/uPlot.iife.min.js", "node_modules/uplot/dist/uPlot.iife.min.js", "text/javascript; charset=utf-8"},
        {"/uPlot.min.css", "node_modules/uplot/dist/uPlot.min.css", "text/css; charset=utf-8"},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", v->cfg.web_dir, tab[i].path);
        struct view_file *f = &v->files[i];
        *f = (struct view_file){tab[i].url, tab[i].path, tab[i].type, NULL, 0};
        if (read_file(path, &f->data, &f->len)) {
            snprintf(why, cap, "the page's file %s cannot be read: %s%s", path, strerror(errno),
                     strstr(tab[i].path, "node_modules") ? " (the charting library: tools/deps.sh installs it "
                                                           "with npm ci in web/view)" : "");
            return ONI_EINVALARG;
        }
    }
    return 0;
}

static void free_view(struct view *v)
{
    for (size_t i = 0; i < sizeof v->files / sizeof v->files[0]; i++)
        free(v->files[i].data);
    for (uint32_t i = 0; i < VIEW_QUEUE; i++)
        free(v->q.msg[i]);
    free(v->q.hello);
    free(v->lat_bins);
    free(v->tbuf);
    free(v->ebuf);
    view_ring_free(&v->traces);
    view_ring_free(&v->events);
    view_ring_free(&v->echoes);
    pthread_mutex_destroy(&v->q.mu);
    pthread_cond_destroy(&v->q.cv);
    pthread_mutex_destroy(&v->lmu);
    pthread_mutex_destroy(&v->smu);
    free(v);
}

int view_open(const struct view_config *c, struct view **out, char *why, size_t cap)
{
    *out = NULL;
    if (c->token && (strlen(c->token) < 8 || strlen(c->token) >= sizeof ((struct view *)0)->token)) {
        snprintf(why, cap, "the token must have 8 to 127 characters");
        return ONI_EINVALARG;
    }
    struct view *v = calloc(1, sizeof *v);
    if (!v) {
        snprintf(why, cap, "out of memory");
        return ONI_EBADALLOC;
    }
    v->cfg = *c;
    if (c->probes > VIEW_MAXPROBES) {
        snprintf(why, cap, "%u probes: the view draws 1 to %d", c->probes, VIEW_MAXPROBES);
        free(v);
        return ONI_EINVALARG;
    }
    v->nprobes = c->probes ? c->probes : 1;
    v->nchan = v->nprobes * VIEW_PROBE_CHAN;
    if (!v->cfg.decim)
        v->cfg.decim = 30;
    if (c->token)
        snprintf(v->token, sizeof v->token, "%s", c->token);
    v->k = NAN;
    struct loop_ephys_params p;
    loop_ephys_defaults(&p);
    v->k = p.k;
    v->lo_hz = p.lo_hz;
    v->hi_hz = p.hi_hz;
    static const uint16_t first[VIEW_TRACES] = {0, 1, 2, 3, 4, 5};
    atomic_store(&v->sel, view_sel_pack(first, VIEW_TRACES));
    pthread_mutex_init(&v->q.mu, NULL);
    pthread_condattr_t ca; /* deadlines are oni_now_ns times (CLOCK_MONOTONIC) */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&v->q.cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&v->lmu, NULL);
    pthread_mutex_init(&v->smu, NULL);
    snprintf(v->backend, sizeof v->backend, "?");
    int rc = view_ring_init(&v->traces, VIEW_TBUF, sizeof(struct view_trace_rec));
    if (!rc)
        rc = view_ring_init(&v->events, VIEW_EBUF, sizeof(struct view_event_rec));
    if (!rc)
        rc = view_ring_init(&v->echoes, 4096, sizeof(struct view_echo_rec));
    v->tbuf = rc ? NULL : malloc(VIEW_TBUF * sizeof *v->tbuf);
    v->ebuf = rc ? NULL : malloc(VIEW_EBUF * sizeof *v->ebuf);
    v->lat_bins = rc ? NULL : calloc(VIEW_LAT_BINS, sizeof *v->lat_bins);
    if (rc || !v->tbuf || !v->ebuf || !v->lat_bins) {
        rc = ONI_EBADALLOC;
        snprintf(why, cap, "out of memory");
        free_view(v);
        return rc;
    }
    if ((rc = load_files(v, why, cap)) != 0) {
        free_view(v);
        return rc;
    }
    hello(v);
    if ((rc = view_server_start(v, why, cap)) != 0) {
        free_view(v);
        return rc;
    }
    if (pthread_create(&v->pump, NULL, pump_main, v)) {
        view_server_stop(v);
        free_view(v);
        snprintf(why, cap, "cannot start the view's thread");
        return ONI_EBADALLOC;
    }
    v->pump_started = 1;
    *out = v;
    return 0;
}

uint16_t view_port(const struct view *v)
{
    return v->port;
}

uint32_t view_clients(const struct view *v)
{
    return atomic_load(&((struct view *)v)->clients);
}

uint64_t view_lost(const struct view *v)
{
    struct view *w = (struct view *)v;
    return atomic_load(&w->traces.lost) + atomic_load(&w->events.lost) + atomic_load(&w->echoes.lost) +
           atomic_load(&w->sent_lost);
}

void view_close(struct view *v, uint32_t linger_ms)
{
    if (!v)
        return;
    atomic_store(&v->stop, 1);
    if (v->pump_started)
        pthread_join(v->pump, NULL);
    pthread_mutex_lock(&v->q.mu);
    if (!v->q.ended) { /* no end event (the run failed to start): end the streams anyway */
        pthread_mutex_unlock(&v->q.mu);
        struct view_buf b = {0};
        view_buf_printf(&b, "{\"ran\":false}");
        view_queue(v, "end", &b);
    } else {
        pthread_mutex_unlock(&v->q.mu);
    }
    uint64_t until = oni_ms_from_now(linger_ms);
    while (atomic_load(&v->clients) && oni_ms_left(until) > 0) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    view_server_stop(v);
    free_view(v);
}
