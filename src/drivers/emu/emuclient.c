/* emuclient.c - daemon mode of the emu driver: requests over the session's
 * channels, payload through the shared rings (emuproto.h, docs/daemon.md).
 *
 * Each channel carries one request at a time (its mutex). A request the
 * client stopped waiting for (timeout) may still be answered later; a late
 * READ answer is kept (its bytes are in the ring and already taken from the
 * card's FIFO, so dropping them would tear frames), any other late answer is
 * discarded by its sequence number. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "emuclient.h"
#include "emuproto.h"
#include "gpu/gpu.h"
#include "oni.h"
#include "oni/util/clock.h"

#define MAXSEG 4                 /* produced segments a read ring may hold */
/* On top of the timeout the daemon itself applies to a read or write: time
 * for its answer to arrive. Waiting less is safe too (a late READ answer is
 * kept), so this only makes a timeout in the daemon look like one here. */
#define REPLY_MARGIN_MS 20u

/* a + b milliseconds, saturated: a timeout near UINT32_MAX must not wrap
 * to a few ms. */
static uint32_t ms_add(uint32_t a, uint32_t b) { return a > UINT32_MAX - b ? UINT32_MAX : a + b; }

struct seg {
    uint64_t start, len;
    uint32_t epoch; /* the card's flush count when the daemon took these bytes */
};

struct ring {
    uint8_t *base;
    uint64_t cap;
    uint64_t head;          /* end of the last segment produced (or of the last write sent) */
    struct seg seg[MAXSEG]; /* read rings: unconsumed segments, oldest first */
    int nseg;
    int flushable;          /* read rings of the card's FIFOs (DATA, GPU): see drop_stale */
    int write_pending;      /* write rings: a WRITE whose answer was not seen yet */
    int read_pending;       /* read rings: a READ whose answer was not seen yet (it timed out here) */
    uint32_t pending_seq;   /* and its sequence number */
};

struct chan {
    int fd;
    pthread_mutex_t lock;
    uint32_t seq;
    int read_ring;  /* ring its READ answers fill, or -1 */
    int write_ring; /* ring its WRITE requests use, or -1 */
    uint8_t buf[EMUP_MAXMSG];
};

struct emuc {
    struct chan ch[EMUP_NCHAN];
    struct ring ring[EMUP_NRING];
    uint8_t *shm;
    size_t shm_size;
    atomic_int dead;
    atomic_uint flushes; /* the card's latest flush count seen (CONFIG_WRITE and READ answers) */
};

/* The channel and ring of a stream; -1 for a stream that has none. */
static int stream_route(enum emu_stream s, int *chan, int *ring)
{
    switch (s) {
    case EMU_STREAM_DATA: *chan = EMUP_CHAN_DATA; *ring = EMUP_RING_DATA; return 0;
    case EMU_STREAM_SIGNAL: *chan = EMUP_CHAN_CTRL; *ring = EMUP_RING_SIGNAL; return 0;
    case EMU_STREAM_GPU: *chan = EMUP_CHAN_GPU; *ring = EMUP_RING_GPU; return 0;
    case EMU_STREAM_WRITE: *chan = EMUP_CHAN_WRITE; *ring = EMUP_RING_WRITE; return 0;
    case EMU_STREAM_GPU_WRITE: *chan = EMUP_CHAN_GPUW; *ring = EMUP_RING_GPUW; return 0;
    }
    return -1;
}

static uint64_t ring_tail(const struct ring *r) { return r->nseg ? r->seg[0].start : r->head; }

/* Flush counts wrap: a is older than b when a - b is negative. */
static int older(uint32_t a, uint32_t b) { return (int32_t)(a - b) < 0; }

/* The card emptied its FIFOs n times (any thread): remember the latest count. */
static void note_flushes(struct emuc *c, uint32_t n)
{
    unsigned cur = atomic_load(&c->flushes);
    while (older(cur, n) && !atomic_compare_exchange_weak(&c->flushes, &cur, n))
        ;
}

/* A RESET, or acquisition starting, empties the card's FIFOs: bytes this side
 * holds that the daemon took out of them before (read ahead, or a late
 * answer) go too, as they would had they stayed in the card. Segments are in
 * stream order, so the stale ones are at the front. Channel lock held. */
static void drop_stale(struct emuc *c, struct ring *r)
{
    uint32_t now = atomic_load(&c->flushes);
    while (r->flushable && r->nseg && older(r->seg[0].epoch, now))
        memmove(&r->seg[0], &r->seg[1], --r->nseg * sizeof r->seg[0]);
}

/* Take a READ answer into ring r if it is consistent with what we know. An
 * answer that goes on where the last one ended extends it, so the unconsumed
 * bytes (at most a ring) are at most two segments: one before the ring's end
 * and one after, however many answers brought them. */
static int add_segment(struct emuc *c, struct ring *r, const struct emup_read_reply *rr)
{
    if (!rr->len)
        return 0;
    if (!emup_ring_ok(r->cap, ring_tail(r), r->head, rr->start, rr->len))
        return ONI_EBADFRAME;
    if (r->flushable) {
        note_flushes(c, rr->epoch);
        drop_stale(c, r);
        if (older(rr->epoch, atomic_load(&c->flushes))) {
            r->head = rr->start + rr->len; /* taken before a flush: consumed unseen */
            return 0;
        }
    }
    struct seg *last = r->nseg ? &r->seg[r->nseg - 1] : NULL;
    if (last && last->start + last->len == rr->start && rr->start % r->cap && last->epoch == rr->epoch)
        last->len += rr->len;
    else if (r->nseg == MAXSEG)
        return ONI_EBADFRAME;
    else
        r->seg[r->nseg++] = (struct seg){rr->start, rr->len, rr->epoch};
    r->head = rr->start + rr->len;
    return 0;
}

/* A late answer arrived while waiting for another: keep READ data, note that
 * a WRITE was consumed, drop the rest. */
static void late_answer(struct emuc *c, struct chan *ch, const uint8_t *msg, size_t n)
{
    struct emup_hdr h;
    memcpy(&h, msg, sizeof h);
    if (ch->read_ring >= 0 && c->ring[ch->read_ring].read_pending && h.seq == c->ring[ch->read_ring].pending_seq)
        c->ring[ch->read_ring].read_pending = 0; /* whatever it says: nothing of it is on its way any more */
    if (h.type == (EMUP_READ | EMUP_REPLY) && h.len == sizeof(struct emup_read_reply) && ch->read_ring >= 0) {
        struct emup_read_reply rr;
        memcpy(&rr, msg + sizeof h, sizeof rr);
        if (rr.rc == 0)
            add_segment(c, &c->ring[ch->read_ring], &rr); /* an inconsistent one is dropped */
    } else if (h.type == (EMUP_WRITE | EMUP_REPLY) && ch->write_ring >= 0 &&
               h.seq == c->ring[ch->write_ring].pending_seq) {
        c->ring[ch->write_ring].write_pending = 0;
    } else if (h.type == (EMUP_CONFIG_WRITE | EMUP_REPLY) && h.len == sizeof(struct emup_status_reply)) {
        struct emup_status_reply st;
        memcpy(&st, msg + sizeof h, sizeof st);
        if (st.rc == 0)
            note_flushes(c, st.value); /* a write given up on still emptied the FIFOs, or not */
    }
}

static int disconnected(struct emuc *c)
{
    atomic_store(&c->dead, 1);
    return ONI_EDISCONNECTED;
}

/* Receive the next message on ch into ch->buf until deadline; its length,
 * or a transport error. A message shorter than a header is ONI_EBADFRAME. */
static int receive(struct emuc *c, struct chan *ch, uint64_t deadline, struct emup_hdr *h)
{
    int n = emup_recv(ch->fd, ch->buf, sizeof ch->buf, deadline, NULL);
    if (n == ONI_EDISCONNECTED)
        return disconnected(c);
    if (n < 0)
        return n;
    if ((size_t)n < sizeof *h)
        return ONI_EBADFRAME;
    memcpy(h, ch->buf, sizeof *h);
    return n;
}

/* An answer for an earlier request than seq: one that was given up on. */
static int is_late(const struct emup_hdr *h, uint32_t seq, int n)
{
    return h->magic == EMUP_MAGIC && h->seq != seq && h->len == (size_t)n - sizeof *h;
}

/* Wait for the answer to (type, seq) on ch until deadline; copy its body
 * (body_len bytes) to out. Returns the answer's rc, or a transport error. */
static int await(struct emuc *c, struct chan *ch, uint16_t type, uint32_t seq, void *out, size_t body_len,
                 uint64_t deadline)
{
    for (;;) {
        struct emup_hdr h;
        int n = receive(c, ch, deadline, &h);
        if (n == ONI_ETIMEOUT && type == EMUP_READ && ch->read_ring >= 0) {
            /* given up on here: its answer may still come, with bytes of the stream */
            c->ring[ch->read_ring].read_pending = 1;
            c->ring[ch->read_ring].pending_seq = seq;
        }
        if (n < 0)
            return n;
        if (is_late(&h, seq, n)) {
            late_answer(c, ch, ch->buf, (size_t)n);
            continue;
        }
        int is_status, bad = emup_check_reply(ch->buf, (size_t)n, type, seq, body_len, &is_status);
        if (bad)
            return bad;
        if (is_status) {
            struct emup_status_reply st;
            memcpy(&st, ch->buf + sizeof h, sizeof st);
            if (body_len == sizeof st)
                memcpy(out, &st, sizeof st);
            return st.rc > 0 ? ONI_EBADFRAME : st.rc;
        }
        memcpy(out, ch->buf + sizeof h, body_len);
        int32_t rc;
        memcpy(&rc, out, sizeof rc);
        return rc > 0 ? ONI_EBADFRAME : rc;
    }
}

/* Send one request on channel ch (its lock held), waiting for room in the
 * socket until deadline; *seq is its sequence number. ONI_ETIMEOUT: the
 * daemon reads no requests (stopped, and its socket full of those given up
 * on); nothing was sent, so no answer will come, and the channel is whole. */
static int request(struct emuc *c, struct chan *ch, uint16_t type, const void *body, size_t len,
                   uint64_t deadline, uint32_t *seq)
{
    if (atomic_load(&c->dead))
        return ONI_EDISCONNECTED;
    *seq = ++ch->seq;
    int rc = emup_send_until(ch->fd, type, *seq, body, len, -1, deadline);
    return rc == ONI_EDISCONNECTED ? disconnected(c) : rc;
}

/* One request on channel ch (its lock held) and its answer, both by deadline. */
static int call_until(struct emuc *c, struct chan *ch, uint16_t type, const void *body, size_t len, void *out,
                      size_t out_len, uint64_t deadline)
{
    uint32_t seq;
    int rc = request(c, ch, type, body, len, deadline, &seq);
    return rc ? rc : await(c, ch, type, seq, out, out_len, deadline);
}

/* call_until within wait_ms from now. */
static int call(struct emuc *c, struct chan *ch, uint16_t type, const void *body, size_t len, void *out,
                size_t out_len, uint32_t wait_ms)
{
    return call_until(c, ch, type, body, len, out, out_len, oni_ms_from_now(wait_ms));
}

/* Wait until deadline for the answer to a request given up on here (*pending:
 * a ring's read_pending or write_pending, cleared by late_answer when it
 * comes); ch's lock held. */
static int settle(struct emuc *c, struct chan *ch, const int *pending, uint64_t deadline)
{
    while (*pending) {
        struct emup_hdr h;
        int n = receive(c, ch, deadline, &h);
        if (n < 0)
            return n;
        if (!is_late(&h, ch->seq + 1, n)) /* nothing was sent after the pending request yet */
            return ONI_EBADFRAME;
        late_answer(c, ch, ch->buf, (size_t)n);
    }
    return 0;
}

/* call() on channel chan with that channel's lock held for it. */
static int locked_call(struct emuc *c, int chan, uint16_t type, const void *body, size_t len, void *out,
                       size_t out_len, uint32_t wait_ms)
{
    struct chan *ch = &c->ch[chan];
    pthread_mutex_lock(&ch->lock);
    int rc = call(c, ch, type, body, len, out, out_len, wait_ms);
    pthread_mutex_unlock(&ch->lock);
    return rc;
}

/* Why connect(path) failed with err: nothing there, something that is no
 * socket, a socket nobody listens on (a daemon that died), no permission. */
static int connect_error(const char *path, int err)
{
    struct stat sb;
    switch (err) {
    case ENOENT:
    case ENOTDIR: return ONI_ENOSOCKET;
    case EACCES:
    case EPERM: return ONI_EACCESS;
    case ECONNREFUSED:
        return stat(path, &sb) == 0 && !S_ISSOCK(sb.st_mode) ? ONI_ENOTSOCKET : ONI_ECONNREFUSED;
    case EPROTOTYPE: return ONI_ENOTSOCKET; /* a socket, but not a daemon's (SOCK_SEQPACKET) */
    default: return ONI_EPATHINVALID;
    }
}

/* Connect to the daemon's socket, waiting at most until deadline: a daemon
 * that stopped accepting (its backlog full) must not hang the caller. 0,
 * ONI_ETIMEOUT, ONI_EBADADDR (path too long), connect_error's codes, or
 * ONI_EPATHINVALID: no socket to be had (out of descriptors, say). */
static int connect_to(const char *path, int *fd, uint64_t deadline)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof a.sun_path)
        return ONI_EBADADDR;
    strcpy(a.sun_path, path);
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0)
        return ONI_EPATHINVALID;
    while (connect(s, (struct sockaddr *)&a, sizeof a)) {
        if (errno != EAGAIN && errno != EINTR) {
            int rc = connect_error(path, errno);
            close(s);
            return rc;
        }
        if (oni_now_ns() >= deadline) {
            close(s);
            return ONI_ETIMEOUT;
        }
        usleep(1000);
    }
    int fl = fcntl(s, F_GETFL);
    if (fl < 0 || fcntl(s, F_SETFL, fl & ~O_NONBLOCK)) {
        close(s);
        return ONI_EPATHINVALID;
    }
    *fd = s;
    return 0;
}

/* Check the ring layout of a HELLO answer against the size of the shared file. */
static int map_rings(struct emuc *c, const struct emup_hello_reply *hr, int memfd)
{
    struct stat sb;
    if (fstat(memfd, &sb) || hr->shm_size == 0 || (uint64_t)sb.st_size < hr->shm_size ||
        hr->shm_size > SIZE_MAX)
        return ONI_EBADFRAME;
    for (int i = 0; i < EMUP_NRING; i++) {
        const struct emup_ring_desc *d = &hr->ring[i];
        if (!d->cap || d->offset > hr->shm_size || d->cap > hr->shm_size - d->offset)
            return ONI_EBADFRAME;
    }
    void *p = mmap(NULL, (size_t)hr->shm_size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    if (p == MAP_FAILED)
        return ONI_EBADALLOC;
    c->shm = p;
    c->shm_size = (size_t)hr->shm_size;
    for (int i = 0; i < EMUP_NRING; i++) {
        c->ring[i].base = c->shm + hr->ring[i].offset;
        c->ring[i].cap = hr->ring[i].cap;
        c->ring[i].flushable = i == EMUP_RING_DATA || i == EMUP_RING_GPU;
    }
    return 0;
}

/* HELLO on CTRL, then ATTACH on each other channel, all by deadline (the
 * one of the whole open: a slow daemon must not get a timeout per step). */
static int hello(struct emuc *c, const char *spec, uint64_t deadline, char *err, size_t err_cap)
{
    struct chan *ch = &c->ch[EMUP_CHAN_CTRL];
    size_t n = strlen(spec) + 1;
    if (n > EMUP_MAXSTR)
        return ONI_EINVALARG;
    uint32_t seq = ++ch->seq;
    int rc = emup_send_until(ch->fd, EMUP_HELLO, seq, spec, n, -1, deadline);
    if (rc)
        return rc;
    int memfd = -1;
    int len = emup_recv(ch->fd, ch->buf, sizeof ch->buf, deadline, &memfd);
    if (len < 0)
        return len;
    struct emup_hello_reply hr;
    int is_status;
    rc = emup_check_reply(ch->buf, (size_t)len, EMUP_HELLO, seq, sizeof hr, &is_status);
    if (!rc && is_status) {
        struct emup_status_reply st;
        memcpy(&st, ch->buf + sizeof(struct emup_hdr), sizeof st);
        rc = st.rc < 0 ? st.rc : ONI_EBADFRAME;
    } else if (!rc) {
        memcpy(&hr, ch->buf + sizeof(struct emup_hdr), sizeof hr);
        hr.err[sizeof hr.err - 1] = 0;
        if (hr.rc < 0) {
            if (err && err_cap)
                snprintf(err, err_cap, "%s", hr.err);
            rc = hr.rc;
        } else if (memfd < 0) {
            rc = ONI_EBADFRAME;
        } else {
            rc = map_rings(c, &hr, memfd);
        }
    }
    if (memfd >= 0)
        close(memfd);
    if (!rc) {
        for (int i = EMUP_CHAN_CTRL + 1; i < EMUP_NCHAN && !rc; i++) {
            struct emup_attach at = {hr.token, (uint32_t)i, 0};
            struct emup_status_reply st;
            pthread_mutex_lock(&c->ch[i].lock);
            rc = call_until(c, &c->ch[i], EMUP_ATTACH, &at, sizeof at, &st, sizeof st, deadline);
            pthread_mutex_unlock(&c->ch[i].lock);
        }
    }
    return rc;
}

int emuc_open(const char *path, const char *spec, uint32_t timeout_ms, struct emuc **out, char *err,
              size_t err_cap)
{
    if (!path || !out || !timeout_ms)
        return ONI_EINVALARG;
    struct emuc *c = calloc(1, sizeof *c);
    if (!c)
        return ONI_EBADALLOC;
    static const int read_ring[EMUP_NCHAN] = {EMUP_RING_SIGNAL, EMUP_RING_DATA, -1, EMUP_RING_GPU, -1};
    static const int write_ring[EMUP_NCHAN] = {-1, -1, EMUP_RING_WRITE, -1, EMUP_RING_GPUW};
    for (int i = 0; i < EMUP_NCHAN; i++) {
        c->ch[i].fd = -1;
        c->ch[i].read_ring = read_ring[i];
        c->ch[i].write_ring = write_ring[i];
        pthread_mutex_init(&c->ch[i].lock, NULL);
    }
    int rc = 0;
    uint64_t deadline = oni_ms_from_now(timeout_ms);
    for (int i = 0; i < EMUP_NCHAN && !rc; i++)
        rc = connect_to(path, &c->ch[i].fd, deadline);
    if (!rc)
        rc = hello(c, spec ? spec : "", deadline, err, err_cap);
    if (rc) {
        emuc_close(c);
        return rc;
    }
    *out = c;
    return 0;
}

void emuc_close(struct emuc *c)
{
    if (!c)
        return;
    /* Channels first: the daemon ends the session when CTRL closes. */
    for (int i = EMUP_NCHAN - 1; i >= 0; i--) {
        if (c->ch[i].fd >= 0)
            close(c->ch[i].fd);
        pthread_mutex_destroy(&c->ch[i].lock);
    }
    if (c->shm)
        munmap(c->shm, c->shm_size);
    free(c);
}

int emuc_read_config(struct emuc *c, oni_config_t reg, uint32_t *value, uint32_t timeout_ms)
{
    struct emup_config rq = {(uint32_t)reg, 0};
    struct emup_status_reply st;
    int rc = locked_call(c, EMUP_CHAN_CTRL, EMUP_CONFIG_READ, &rq, sizeof rq, &st, sizeof st, timeout_ms);
    if (!rc)
        *value = st.value;
    return rc;
}

int emuc_write_config(struct emuc *c, oni_config_t reg, uint32_t value, uint32_t timeout_ms)
{
    struct chan *ch = &c->ch[EMUP_CHAN_CTRL];
    struct emup_config rq = {(uint32_t)reg, value};
    struct emup_status_reply st = {0, 0};
    uint64_t deadline = oni_ms_from_now(timeout_ms);
    uint32_t seq;
    pthread_mutex_lock(&ch->lock);
    int rc = request(c, ch, EMUP_CONFIG_WRITE, &rq, sizeof rq, deadline, &seq);
    int sent = !rc;
    if (sent)
        rc = await(c, ch, EMUP_CONFIG_WRITE, seq, &st, sizeof st, deadline);
    if (!rc) /* the answer's value: the card's flush count after the write (see drop_stale) */
        note_flushes(c, st.value);
    else if (rc == ONI_ETIMEOUT && sent && reg == ONI_CONFIG_RESET && value)
        /* Not answered in time, but the daemon will carry it out, and a RESET
         * always empties the FIFOs: at least one flush more than seen. */
        note_flushes(c, atomic_load(&c->flushes) + 1);
    pthread_mutex_unlock(&ch->lock);
    return rc;
}

/* How drain moves bytes out of a ring: 0 or an ONI error. */
typedef int (*copy_fn)(void *dst, const void *src, size_t n);

/* copy_fn into host memory. */
static int host_copy(void *dst, const void *src, size_t n)
{
    memcpy(dst, src, n);
    return 0;
}

/* Move up to n bytes out of ring r's oldest segments to dst with copy: the
 * bytes moved (at most INT32_MAX, to fit the result), or copy's error (the
 * segments moved before it stay consumed). */
static int drain(struct ring *r, uint8_t *dst, size_t n, copy_fn copy)
{
    if (n > INT32_MAX)
        n = INT32_MAX;
    size_t done = 0;
    while (r->nseg && done < n) {
        struct seg *s = &r->seg[0];
        size_t k = s->len < n - done ? (size_t)s->len : n - done;
        int rc = copy(dst + done, r->base + s->start % r->cap, k);
        if (rc)
            return rc;
        done += k;
        s->start += k;
        s->len -= k;
        if (!s->len)
            memmove(&r->seg[0], &r->seg[1], --r->nseg * sizeof r->seg[0]);
    }
    return (int)done;
}

/* One READ of stream s into ring r on ch (its lock held), for up to n bytes,
 * waiting in the daemon up to left_ms: 0 when the ring gained bytes (this
 * answer's, or those of late answers that came before it; all of them may
 * predate a flush and have been dropped), ONI_ETIMEOUT when none came, or an
 * error. */
static int ask(struct emuc *c, struct chan *ch, struct ring *r, enum emu_stream s, size_t n, uint32_t left_ms)
{
    /* The signal stream asks for as much as fits: the host reads it a byte at a time. */
    uint64_t want = s == EMU_STREAM_SIGNAL ? r->cap : n;
    if (want > r->cap)
        want = r->cap;
    if (want > INT32_MAX)
        want = INT32_MAX & ~(uint64_t)3;
    struct emup_read rq = {(uint32_t)s, (uint32_t)want, left_ms, 0, ring_tail(r)};
    struct emup_read_reply rr;
    uint64_t head = r->head;
    int err = call(c, ch, EMUP_READ, &rq, sizeof rq, &rr, sizeof rr, ms_add(left_ms, REPLY_MARGIN_MS));
    /* The daemon may send more than asked (what the card already held): kept for later reads. */
    if (!err && add_segment(c, r, &rr))
        return ONI_EBADFRAME;
    /* Late answers that came before this one brought bytes: they go now,
     * whatever this one says. They may have filled the ring, so that this
     * READ, which reported the tail from before them, found no room
     * (ONI_EBUSY); when all they brought was from before a flush, the ring
     * has room now and the next READ says so. */
    if (r->head != head && (!err || err == ONI_ETIMEOUT || err == ONI_EBUSY))
        return 0;
    return err ? err : ONI_ETIMEOUT; /* answered with nothing */
}

int emuc_read(struct emuc *c, enum emu_stream s, void *dst, size_t n, uint32_t timeout_ms)
{
    int ci, ri;
    if (stream_route(s, &ci, &ri) || ri == EMUP_RING_WRITE || ri == EMUP_RING_GPUW || !dst || !n)
        return ONI_EINVALARG;
    struct chan *ch = &c->ch[ci];
    struct ring *r = &c->ring[ri];
    pthread_mutex_lock(&ch->lock);
    drop_stale(c, r);
    /* What a late answer left goes first; else ask, again while the answers
     * hold only bytes from before a flush (dropped) and time is left. */
    uint64_t deadline = oni_ms_from_now(timeout_ms);
    uint32_t left = timeout_ms;
    int got = drain(r, dst, n, host_copy), err = 0;
    while (!got && !err) {
        err = ask(c, ch, r, s, n, left);
        if (!err)
            got = drain(r, dst, n, host_copy);
        left = oni_ms_left(deadline);
        if (!got && !err && !left)
            err = ONI_ETIMEOUT;
    }
    pthread_mutex_unlock(&ch->lock);
    return err ? err : got;
}

int emuc_write(struct emuc *c, enum emu_stream s, const void *src, size_t n, uint32_t timeout_ms)
{
    int ci, ri;
    if (stream_route(s, &ci, &ri) || (ri != EMUP_RING_WRITE && ri != EMUP_RING_GPUW) || !src || !n)
        return ONI_EINVALARG;
    struct chan *ch = &c->ch[ci];
    struct ring *r = &c->ring[ri];
    if (n > r->cap || n > INT32_MAX)
        return ONI_EWRITESIZE;
    pthread_mutex_lock(&ch->lock);
    int rc = 0;
    /* The last write's answer never came: its bytes may still be in use.
     * Whatever it says (the daemon answers ONI_ETIMEOUT to a write that
     * came after its deadline), it was reported already. */
    if (r->write_pending)
        rc = settle(c, ch, &r->write_pending, oni_ms_from_now(timeout_ms));
    if (!rc) {
        uint64_t start = emup_ring_place(r->cap, r->head, n);
        memcpy(r->base + start % r->cap, src, n);
        /* The daemon delivers nothing after deadline_ns (answering
         * ONI_ETIMEOUT), so a write that timed out here was not delivered,
         * as in-process, and a retry does not duplicate it. The answer has
         * REPLY_MARGIN_MS on its way back. */
        uint64_t now = oni_now_ns();
        struct emup_write rq = {(uint32_t)s, (uint32_t)n, timeout_ms, 0, start, now + (uint64_t)timeout_ms * 1000000u};
        struct emup_status_reply st;
        uint32_t seq;
        rc = request(c, ch, EMUP_WRITE, &rq, sizeof rq, rq.deadline_ns, &seq);
        if (!rc) { /* sent: the daemon takes [start, start + n), whatever it answers */
            r->head = start + n;
            rc = await(c, ch, EMUP_WRITE, seq, &st, sizeof st, now + (uint64_t)ms_add(timeout_ms, REPLY_MARGIN_MS) * 1000000u);
            if (rc == ONI_ETIMEOUT) {
                r->write_pending = 1; /* until its answer comes, the daemon may be reading the ring */
                r->pending_seq = seq;
            }
        }
        if (!rc)
            rc = (int)n;
    }
    pthread_mutex_unlock(&ch->lock);
    return rc;
}

int emuc_stats(struct emuc *c, onigpu_stream_stats_t *st, uint32_t timeout_ms)
{
    struct emup_stats_reply r;
    int rc = locked_call(c, EMUP_CHAN_CTRL, EMUP_STATS, NULL, 0, &r, sizeof r, timeout_ms);
    if (!rc)
        *st = r.stats;
    return rc;
}

int emuc_link(struct emuc *c, oniemu_link_t *link, uint32_t timeout_ms)
{
    struct emup_link_reply r;
    int rc = locked_call(c, EMUP_CHAN_CTRL, EMUP_LINK, NULL, 0, &r, sizeof r, timeout_ms);
    if (!rc) {
        *link = r.link;
        link->name[sizeof link->name - 1] = 0;
    }
    return rc;
}

int emuc_features(struct emuc *c, uint32_t *bits, uint32_t timeout_ms)
{
    struct emup_status_reply st;
    int rc = locked_call(c, EMUP_CHAN_CTRL, EMUP_MODE, NULL, 0, &st, sizeof st, timeout_ms);
    if (!rc)
        *bits = st.value;
    return rc;
}

int emuc_truth_file(struct emuc *c, const char *path, uint32_t timeout_ms)
{
    size_t n = strlen(path) + 1;
    if (n > EMUP_MAXSTR)
        return ONI_EINVALARG;
    struct emup_status_reply st;
    int rc = locked_call(c, EMUP_CHAN_CTRL, EMUP_TRUTH, path, n, &st, sizeof st, timeout_ms);
    return rc;
}

/* The channel of a GPU memory request: that of the stream it serves. */
static int gpu_chan(int write) { return write ? EMUP_CHAN_GPUW : EMUP_CHAN_GPU; }

int emuc_gpu_import(struct emuc *c, int write, const uint8_t *handle, uint64_t size, uint32_t *id,
                    uint32_t timeout_ms)
{
    struct emup_gpu_import rq = {.size = size};
    memcpy(rq.handle, handle, sizeof rq.handle);
    struct emup_status_reply st;
    int rc = locked_call(c, gpu_chan(write), EMUP_GPU_IMPORT, &rq, sizeof rq, &st, sizeof st, ms_add(timeout_ms, REPLY_MARGIN_MS));
    if (!rc && !st.value)
        rc = ONI_EBADFRAME;
    if (!rc)
        *id = st.value;
    return rc;
}

int emuc_gpu_release(struct emuc *c, int write, uint32_t id, uint32_t timeout_ms)
{
    struct emup_gpu_release rq = {id, 0};
    struct emup_status_reply st;
    int rc = locked_call(c, gpu_chan(write), EMUP_GPU_RELEASE, &rq, sizeof rq, &st, sizeof st, ms_add(timeout_ms, REPLY_MARGIN_MS));
    return rc;
}

int emuc_gpu_dma(struct emuc *c, const struct gpustream_remote *d, uint32_t timeout_ms)
{
    if (!d->len || d->len > UINT32_MAX || !d->id || (d->async && (!d->done_id || !d->done)))
        return ONI_EINVALARG;
    struct chan *ch = &c->ch[gpu_chan(d->write)];
    uint64_t now = oni_now_ns();
    struct emup_gpu_dma rq = {.id = d->id, .dir = d->write ? 1u : 0u, .offset = d->offset, .len = (uint32_t)d->len,
                              .timeout_ms = timeout_ms, .done_id = d->async ? d->done_id : 0,
                              .done_offset = d->done_offset, .seq = d->seq};
    rq.flags = (d->async ? EMUP_DMA_ASYNC : 0) | (d->release_buf ? EMUP_DMA_RELEASE_BUF : 0) |
               (d->async && d->release_done ? EMUP_DMA_RELEASE_DONE : 0);
    /* A synchronous call waits for the jobs queued before it (up to the
     * timeout), then moves its block (up to the timeout); the deadline keeps
     * the daemon from starting it after this side gave up. */
    uint32_t wait_ms = d->async ? timeout_ms : ms_add(timeout_ms, timeout_ms);
    if (!d->async)
        rq.deadline_ns = now + (uint64_t)wait_ms * 1000000u;
    struct emup_status_reply st;
    pthread_mutex_lock(&ch->lock);
    int rc = 0;
    if (!d->write) {
        drop_stale(c, &c->ring[EMUP_RING_GPU]);
        /* A READ given up on here (it timed out) may still be answered, with
         * bytes that come before anything the daemon's DMA would take next:
         * that answer first. */
        rc = settle(c, ch, &c->ring[EMUP_RING_GPU].read_pending, oni_ms_from_now(timeout_ms));
        /* Bytes this side already holds (a late READ answer) go first, copied
         * here: the daemon's DMA takes the stream from its card, after them. */
        int held = rc ? 0 : drain(&c->ring[EMUP_RING_GPU], d->buf, d->len, gpu_copy);
        if (held < 0)
            rc = held;
        else if (!rc && (size_t)held == d->len) /* all of it was here: only the record is left */
            rc = d->async ? gpu_copy((void *)d->done, &d->seq, sizeof d->seq) : 0;
        else if (held) {
            rq.offset += (uint64_t)held;
            rq.len -= (uint32_t)held;
        }
        if (rc || (size_t)held == d->len) {
            pthread_mutex_unlock(&ch->lock);
            if (d->release_buf)
                emuc_gpu_release(c, 0, d->id, timeout_ms);
            if (d->async && d->release_done)
                emuc_gpu_release(c, 0, d->done_id, timeout_ms);
            return rc;
        }
    }
    rc = call(c, ch, EMUP_GPU_DMA, &rq, sizeof rq, &st, sizeof st, ms_add(wait_ms, REPLY_MARGIN_MS));
    pthread_mutex_unlock(&ch->lock);
    return rc;
}
