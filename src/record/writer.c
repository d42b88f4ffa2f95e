/* writer.c - the recording's bounded queue and writer thread (record.h).
 *
 * The queue is a ring of bytes holding whole messages ([u32 type][u32
 * bytes][u64 host ns][body], 8-byte aligned; a message never wraps: a
 * marker sends the reader back to the start). Producers copy under the
 * mutex and never wait: a message with no room is counted as lost. The
 * writer thread decodes the message in place (outside the mutex), then
 * frees its room. Only the writer thread touches the files. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "record/rec_int.h"
#include "oni/util/clock.h"

#define MSG_HDR 16
#define MSG_WRAP 0xFFFFFFFFu
#define MAX_DEVS 64

struct rec {
    struct rec_w w;
    const struct rec_fmt *fmt;
    struct rec_dev dev[MAX_DEVS];
    size_t ndev;
    uint16_t slot[0x10000];  /* dev_idx (low 16 bits) -> dev + 1 */
    /* the queue */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint8_t *q;
    size_t cap, head, tail, used, peak; /* head: next to read; tail: next to write */
    int stop;
    pthread_t thread;
    uint32_t flush_ms;
    /* figures under mu; the writer thread counts into its own and publishes them */
    struct rec_stats s;
    uint64_t frames, frames_other, unwritten; /* the writer thread's */
    int failed;
};

int rec_format_of(const char *s)
{
    if (!strcmp(s, "openephys"))
        return REC_OPENEPHYS;
    if (!strcmp(s, "nwb"))
        return REC_NWB;
    return -1;
}

const char *rec_format_name(int f)
{
    return f == REC_NWB ? "nwb" : "openephys";
}

int rec_write_all(int fd, const void *buf, size_t len, int64_t off)
{
    const uint8_t *p = buf;
    while (len) {
        ssize_t w = off < 0 ? write(fd, p, len) : pwrite(fd, p, len, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : EIO;
        p += w, len -= (size_t)w;
        if (off >= 0)
            off += w;
    }
    return 0;
}

int rec_path(char *out, size_t cap, const char *a, const char *b)
{
    int n = snprintf(out, cap, "%s/%s", a, b);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* --- the queue ----------------------------------------------------------- */

/* Room for a message of body bytes, under mu: its start in q, or NULL. */
static uint8_t *q_reserve(struct rec *r, size_t body)
{
    size_t need = (MSG_HDR + body + 7) & ~(size_t)7;
    if (need > r->cap / 2)
        return NULL;
    if (r->tail >= r->head && r->used < r->cap) { /* free: [tail, cap) and [0, head) */
        if (r->cap - r->tail >= need)
            goto ok;
        if (r->head > need) { /* wrap: mark the end unused */
            if (r->cap - r->tail >= 4)
                memcpy(r->q + r->tail, &(uint32_t){MSG_WRAP}, 4);
            r->used += r->cap - r->tail;
            r->tail = 0;
            goto ok;
        }
        return NULL;
    }
    if (r->head - r->tail < need || r->used == r->cap) /* free: [tail, head) */
        return NULL;
ok:;
    uint8_t *m = r->q + r->tail;
    r->tail += need;
    if (r->tail == r->cap)
        r->tail = 0;
    r->used += need;
    if (r->used > r->peak)
        r->peak = r->used;
    return m;
}

/* Queue a message of type with the body parts a (na bytes) and b (nb). */
static int q_put(struct rec *r, uint32_t type, uint64_t host, const void *a, size_t na, const void *b, size_t nb)
{
    if (!host)
        host = oni_now_ns();
    pthread_mutex_lock(&r->mu);
    uint8_t *m = r->stop ? NULL : q_reserve(r, na + nb);
    if (!m) {
        r->s.lost_msgs++;
        r->s.lost_bytes += na + nb;
        pthread_mutex_unlock(&r->mu);
        return ONI_EBUFFERSIZE;
    }
    uint32_t len = (uint32_t)(MSG_HDR + na + nb);
    memcpy(m, &type, 4);
    memcpy(m + 4, &len, 4);
    memcpy(m + 8, &host, 8);
    memcpy(m + MSG_HDR, a, na);
    if (nb)
        memcpy(m + MSG_HDR + na, b, nb);
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    return 0;
}

int rec_frame(struct rec *r, const oni_frame_t *f, uint64_t host_ns)
{
    uint8_t hdr[16];
    uint64_t t = f->time;
    uint32_t idx = f->dev_idx, sz = f->data_sz;
    memcpy(hdr, &t, 8);
    memcpy(hdr + 8, &idx, 4);
    memcpy(hdr + 12, &sz, 4);
    return q_put(r, REC_MSG_BLOCK, host_ns, hdr, 16, f->data, sz);
}

/* 1 when blk[0..len) is whole read frames. */
static int whole_frames(const uint8_t *blk, size_t len)
{
    size_t off = 0;
    while (off + 16 <= len) {
        uint32_t sz;
        memcpy(&sz, blk + off + 12, 4);
        size_t next = off + 16 + (((size_t)sz + 3) & ~(size_t)3);
        if (next > len || next <= off)
            return 0;
        off = next;
    }
    return off == len;
}

int rec_frames(struct rec *r, const void *blk, size_t len, uint64_t host_ns)
{
    if (!whole_frames(blk, len))
        return ONI_EINVALARG;
    return q_put(r, REC_MSG_BLOCK, host_ns, blk, len, NULL, 0);
}

int rec_stim(struct rec *r, uint64_t cause, uint32_t pins, uint64_t host_ns)
{
    uint8_t b[16] = {0};
    memcpy(b, &cause, 8);
    memcpy(b + 8, &pins, 4);
    return q_put(r, REC_MSG_STIM, host_ns, b, 16, NULL, 0);
}

int rec_spikes(struct rec *r, oni_dev_idx_t dev_idx, uint32_t probe, const struct rec_spike *s, uint32_t n,
               uint64_t host_ns)
{
    uint32_t h[4] = {dev_idx, probe, n, 0};
    if ((uint64_t)n * sizeof *s > r->cap / 4)
        return ONI_EBUFFERSIZE;
    return q_put(r, REC_MSG_SPIKES, host_ns, h, sizeof h, s, (size_t)n * sizeof *s);
}

int rec_message(struct rec *r, uint64_t clock, const char *text, uint64_t host_ns)
{
    size_t n = text ? strnlen(text, REC_MSG_TEXT) : 0;
    if (!n)
        return ONI_EINVALARG;
    uint8_t b[8 + REC_MSG_TEXT] = {0};
    memcpy(b, &clock, 8);
    memcpy(b + 8, text, n); /* cut at REC_MSG_TEXT bytes; NUL-padded */
    return q_put(r, REC_MSG_TEXT_MSG, host_ns, b, sizeof b, NULL, 0);
}

/* --- the writer's side ---------------------------------------------------- */

/* Hand stream s's buffered rows to the format. */
static int flush_rows(struct rec_w *w, const struct rec_fmt *f, uint32_t s)
{
    struct rec_stream *st = &w->st[s];
    if (!st->nbuf)
        return 0;
    int rc = f->samples(w, s, st->buf, st->nbuf, st->clk, st->host, st->rows);
    st->rows += st->nbuf;
    st->nbuf = 0;
    return rc;
}

static const struct rec_fmt *w_fmt(const struct rec_w *w);

int rec_w_row(struct rec_w *w, uint32_t s, const int16_t *row, uint64_t clk, uint64_t host)
{
    struct rec_stream *st = &w->st[s];
    memcpy(st->buf + (size_t)st->nbuf * st->nchan, row, st->nchan * sizeof *row);
    st->clk[st->nbuf] = clk;
    st->host[st->nbuf] = host;
    st->ring[(st->rows + st->nbuf) % REC_CLOCK_RING] = clk;
    w->last_clk = clk > w->last_clk ? clk : w->last_clk;
    if (++st->nbuf == REC_ROWS)
        return flush_rows(w, w_fmt(w), s);
    return 0;
}

uint64_t rec_w_sample_of(const struct rec_w *w, uint32_t s, uint64_t clk)
{
    const struct rec_stream *st = &w->st[s];
    uint64_t n = st->rows + st->nbuf; /* rows seen */
    if (!n)
        return 0;
    uint64_t lo = n > REC_CLOCK_RING ? n - REC_CLOCK_RING : 0, hi = n - 1;
    const uint64_t *ring = st->ring;
    if (clk < ring[lo % REC_CLOCK_RING] || clk > ring[hi % REC_CLOCK_RING]) {
        /* outside what is kept: from the rate (clocks grow with the samples) */
        uint64_t ref = clk < ring[lo % REC_CLOCK_RING] ? lo : hi;
        double d = ((double)clk - (double)ring[ref % REC_CLOCK_RING]) * st->rate_hz / w->acq_hz;
        double v = (double)ref + d;
        return v < 0 ? 0 : (uint64_t)(v + 0.5);
    }
    while (lo < hi) { /* the last row whose clock is <= clk */
        uint64_t mid = lo + (hi - lo + 1) / 2;
        if (ring[mid % REC_CLOCK_RING] <= clk)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* The recording stopped at a failure: say why once, count what follows. */
static void w_fail(struct rec *r, int rc)
{
    if (!r->failed) {
        r->failed = 1;
        pthread_mutex_lock(&r->mu);
        r->s.failed = 1;
        snprintf(r->s.why, sizeof r->s.why, "%s", r->w.why[0] ? r->w.why : oni_error_str(rc));
        pthread_mutex_unlock(&r->mu);
    }
}

static struct rec_dev *dev_of(struct rec *r, uint32_t idx)
{
    uint16_t k = idx <= 0xFFFF ? r->slot[idx] : 0;
    return k ? &r->dev[k - 1] : NULL;
}

static uint64_t stream_units(const struct rec_w *w)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < w->nst; i++)
        n += w->st[i].rows + w->st[i].nbuf;
    return n;
}

static uint64_t event_units(const struct rec_w *w)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < w->nev; i++)
        n += w->ev[i].n;
    return n;
}

static uint64_t spike_units(const struct rec_w *w)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < w->nst; i++)
        n += w->st[i].spikes;
    return n;
}

/* One message: decode it into the streams and events. */
static void handle(struct rec *r, const uint8_t *m, uint32_t len)
{
    uint32_t type;
    uint64_t host;
    memcpy(&type, m, 4);
    memcpy(&host, m + 8, 8);
    const uint8_t *b = m + MSG_HDR;
    size_t n = len - MSG_HDR;
    struct rec_w *w = &r->w;
    int rc = 0;
    if (type == REC_MSG_BLOCK) {
        for (size_t off = 0; off + 16 <= n && !rc;) {
            uint64_t t;
            uint32_t idx, sz;
            memcpy(&t, b + off, 8);
            memcpy(&idx, b + off + 8, 4);
            memcpy(&sz, b + off + 12, 4);
            struct rec_dev *d = dev_of(r, idx);
            if (d && sz == d->read_size) {
                if (!r->failed) {
                    rc = rec_decode(w, d, t, b + off + 16, sz, host);
                    r->frames++;
                } else {
                    r->unwritten++;
                }
            } else {
                r->frames_other++;
            }
            off += 16 + (((size_t)sz + 3) & ~(size_t)3);
        }
    } else if (r->failed && (type == REC_MSG_STIM || type == REC_MSG_SPIKES || type == REC_MSG_TEXT_MSG)) {
        r->unwritten++;
    } else if (type == REC_MSG_STIM && w->nev) {
        uint64_t cause;
        uint32_t pins;
        memcpy(&cause, b, 8);
        memcpy(&pins, b + 8, 4);
        uint32_t e = w->nev - 1; /* the stimuli's channel is the last */
        static const int on[2] = {0, 1};
        for (uint32_t line = 0; line < 8 && !rc; line++) /* every pin, its state after the write */
            rc = r->fmt->ttl(w, e, cause, line + 1, on[(pins >> line) & 1], pins & 0xFF, host);
        w->ev[e].n += 8;
    } else if (type == REC_MSG_TEXT_MSG && n == 8 + REC_MSG_TEXT) {
        uint64_t clk;
        char text[REC_MSG_TEXT + 1];
        memcpy(&clk, b, 8);
        memcpy(text, b + 8, REC_MSG_TEXT);
        text[REC_MSG_TEXT] = 0;
        rc = r->fmt->message(w, clk ? clk : w->last_clk, text, host);
        w->messages++;
    } else if (type == REC_MSG_SPIKES && w->spike_streams) {
        uint32_t h[4];
        memcpy(h, b, sizeof h);
        struct rec_dev *d = dev_of(r, h[0]);
        int32_t s = d && h[1] < 2 ? d->stream[h[1]] : -1;
        for (uint32_t i = 0; i < h[2] && s >= 0 && !rc; i++) {
            struct rec_spike sp;
            memcpy(&sp, b + sizeof h + i * sizeof sp, sizeof sp);
            if (sp.chan >= w->st[s].nchan)
                continue;
            rc = r->fmt->spike(w, (uint32_t)s, sp.clock, rec_w_sample_of(w, (uint32_t)s, sp.clock), sp.chan, sp.unit,
                               host);
            w->st[s].spikes++;
        }
    }
    if (rc)
        w_fail(r, rc);
}

static int flush_all(struct rec *r)
{
    int rc = 0;
    for (uint32_t s = 0; s < r->w.nst && !rc; s++)
        rc = flush_rows(&r->w, r->fmt, s);
    if (!rc)
        rc = r->fmt->flush(&r->w);
    return rc;
}

static void publish(struct rec *r)
{
    pthread_mutex_lock(&r->mu);
    r->s.samples = stream_units(&r->w);
    r->s.events = event_units(&r->w);
    r->s.spikes = spike_units(&r->w);
    r->s.messages = r->w.messages;
    r->s.bytes = r->w.bytes;
    r->s.frames = r->frames;
    r->s.frames_other = r->frames_other;
    r->s.unwritten = r->unwritten;
    pthread_mutex_unlock(&r->mu);
}

static void *writer_main(void *arg)
{
    struct rec *r = arg;
    uint64_t next_flush = oni_now_ns() + (uint64_t)r->flush_ms * 1000000u;
    for (;;) {
        pthread_mutex_lock(&r->mu);
        while (!r->used && !r->stop && oni_now_ns() < next_flush) {
            struct timespec ts;
            oni_timespec_at(next_flush, &ts);
            pthread_cond_timedwait(&r->cv, &r->mu, &ts);
        }
        int stop = r->stop && !r->used;
        uint8_t *m = NULL;
        uint32_t len = 0;
        if (r->used) {
            uint32_t type;
            if (r->cap - r->head < 4 || (memcpy(&type, r->q + r->head, 4), type == MSG_WRAP)) {
                r->used -= r->cap - r->head;
                r->head = 0;
            }
            m = r->q + r->head;
            memcpy(&len, m + 4, 4);
        }
        pthread_mutex_unlock(&r->mu);
        if (m) {
            handle(r, m, len);
            pthread_mutex_lock(&r->mu);
            size_t room = ((size_t)len + 7) & ~(size_t)7;
            r->head += room;
            if (r->head == r->cap)
                r->head = 0;
            r->used -= room;
            pthread_mutex_unlock(&r->mu);
        }
        if (stop)
            break;
        if (oni_now_ns() >= next_flush) {
            if (!r->failed) {
                int rc = flush_all(r);
                if (rc)
                    w_fail(r, rc);
            }
            publish(r);
            next_flush = oni_now_ns() + (uint64_t)r->flush_ms * 1000000u;
        }
    }
    return NULL;
}

/* The format every decoder's rows go to (one recording, one format). */
const struct rec_fmt *rec_w_format(const struct rec_w *w)
{
    return w_fmt(w);
}

static const struct rec_fmt *w_fmt(const struct rec_w *w)
{
    const struct rec *r = (const struct rec *)(const void *)w; /* w is r's first member */
    return r->fmt;
}

/* --- open and close ------------------------------------------------------- */

static void free_w(struct rec_w *w)
{
    for (uint32_t i = 0; i < w->nst; i++) {
        free(w->st[i].chan);
        free(w->st[i].buf);
        free(w->st[i].clk);
        free(w->st[i].host);
        free(w->st[i].ring);
    }
    free(w->st);
    free(w->ev);
    free(w->dir);
}

static int alloc_streams(struct rec_w *w)
{
    for (uint32_t i = 0; i < w->nst; i++) {
        struct rec_stream *s = &w->st[i];
        s->buf = malloc((size_t)REC_ROWS * s->nchan * sizeof *s->buf);
        s->clk = malloc(REC_ROWS * sizeof *s->clk);
        s->host = malloc(REC_ROWS * sizeof *s->host);
        s->ring = calloc(REC_CLOCK_RING, sizeof *s->ring);
        if (!s->buf || !s->clk || !s->host || !s->ring)
            return ONI_EBADALLOC;
    }
    return 0;
}

/* Add the stimuli's event channel (the last one). */
static int add_stim_channel(struct rec_w *w)
{
    struct rec_events *e = realloc(w->ev, (w->nev + 1) * sizeof *e);
    if (!e)
        return ONI_EBADALLOC;
    w->ev = e;
    e = &w->ev[w->nev++];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "Stimuli");
    snprintf(e->desc, sizeof e->desc, "stimulator output pins written (line k = pin k-1), at the triggering sample");
    e->lines = 8;
    return 0;
}

int rec_open(const struct rec_config *c, oni_ctx ctx, const oni_device_t *t, size_t n, struct rec **out,
             char *why, size_t cap)
{
    *out = NULL;
    why[0] = 0;
    if (!c || !c->dir || !c->dir[0] || c->format < 0 || c->format >= REC_NFORMATS ||
        (c->queue_bytes && c->queue_bytes < (1u << 20))) {
        snprintf(why, cap, "bad recording configuration (a directory, a format, a queue of at least 1 MiB)");
        return ONI_EINVALARG;
    }
    struct rec *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(why, cap, "out of memory");
        return ONI_EBADALLOC;
    }
    r->fmt = c->format == REC_NWB ? &rec_fmt_nwb : &rec_fmt_openephys;
    r->cap = c->queue_bytes ? c->queue_bytes & ~(size_t)7 : REC_QUEUE_DEFAULT;
    r->flush_ms = c->flush_ms ? c->flush_ms : REC_FLUSH_MS;
    struct rec_w *w = &r->w;
    snprintf(w->session, sizeof w->session, "%s", c->session ? c->session : "onigpu recording");
    w->spike_streams = c->spike_stream;
    oni_size_t hz = 0;
    size_t hl = sizeof hz;
    w->acq_hz = oni_get_opt(ctx, ONI_OPT_ACQCLKHZ, &hz, &hl) == 0 && hz ? hz : 250e6;
    int rc = ONI_EBADALLOC;
    if (!(w->dir = strdup(c->dir)) || !(r->q = malloc(r->cap)))
        goto fail;
    if ((rc = rec_map_devices(ctx, t, n, r->dev, MAX_DEVS, &r->ndev, w)))
        goto fail;
    if (!r->ndev && !c->stim_stream) {
        snprintf(why, cap, "no device of the table is one the recording knows (NP2.0e, RHD2164, AnalogIO, DigitalIO)");
        rc = ONI_EINVALARG;
        goto fail;
    }
    if (c->stim_stream && (rc = add_stim_channel(w)))
        goto fail;
    if ((rc = alloc_streams(w)))
        goto fail;
    for (size_t i = 0; i < r->ndev; i++)
        if (r->dev[i].idx <= 0xFFFF)
            r->slot[r->dev[i].idx] = (uint16_t)(i + 1);
    if ((rc = r->fmt->open(w))) {
        snprintf(why, cap, "%s", w->why);
        r->fmt->close(w, 1); /* frees what open made; touches no recording it did not make */
        goto fail_nofmt;
    }
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    if (pthread_create(&r->thread, NULL, writer_main, r)) {
        r->fmt->close(w, 1);
        pthread_mutex_destroy(&r->mu);
        pthread_cond_destroy(&r->cv);
        rc = ONI_EBADALLOC;
        snprintf(why, cap, "cannot start the writer thread");
        goto fail_nofmt;
    }
    *out = r;
    return 0;
fail:
    if (!why[0])
        snprintf(why, cap, "out of memory");
fail_nofmt:
    free_w(w);
    free(r->q);
    free(r);
    return rc;
}

void rec_get_stats(struct rec *r, struct rec_stats *st)
{
    pthread_mutex_lock(&r->mu);
    *st = r->s;
    st->queue_peak = r->peak;
    st->queued = r->used;
    st->queue_cap = r->cap;
    pthread_mutex_unlock(&r->mu);
}

int rec_close(struct rec *r, struct rec_stats *st)
{
    pthread_mutex_lock(&r->mu);
    r->stop = 1;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->thread, NULL);
    uint64_t before = stream_units(&r->w) + event_units(&r->w) + spike_units(&r->w);
    int rc = r->failed ? ONI_EWRITEFAILURE : 0;
    if (!r->failed && (rc = flush_all(r)))
        w_fail(r, rc);
    int crc = r->fmt->close(&r->w, r->failed);
    if (crc && !r->failed)
        w_fail(r, crc);
    publish(r);
    if (r->failed) {
        rc = ONI_EWRITEFAILURE;
        (void)before;
    }
    if (st)
        rec_get_stats(r, st);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free_w(&r->w);
    free(r->q);
    free(r);
    return rc;
}

void rec_describe(const struct rec *r, char *buf, size_t cap)
{
    static const char *const what[] = {"", "NP2.0e probes A and B", "RHD2164", "AnalogIO", "DigitalIO events"};
    size_t n = 0;
    buf[0] = 0;
    for (size_t i = 0; i < r->ndev && n + 1 < cap; i++) {
        int k = snprintf(buf + n, cap - n, "%s0x%x %s", i ? ", " : "", r->dev[i].idx, what[r->dev[i].kind]);
        n += k > 0 ? (size_t)k : 0;
    }
    if (r->w.nev && !strcmp(r->w.ev[r->w.nev - 1].name, "Stimuli") && n + 1 < cap) {
        int k = snprintf(buf + n, cap - n, "%sstimuli", n ? ", " : "");
        n += k > 0 ? (size_t)k : 0;
    }
    if (r->w.spike_streams && n + 1 < cap)
        snprintf(buf + n, cap - n, ", detected spikes");
}
