/* netserve.c - serves one ONI driver to `net` clients (netserve.h) over UCX
 * links (ucxlink.h).
 *
 * A session is one client: HELLO on its CTRL link creates a driver context
 * (after the shared secret, where the server has one), ATTACH joins its
 * DATA, WRITE, GPU and GPUW links, and each link (a connection below) has
 * its own thread that makes the calls that arrive on it. Which call may
 * arrive on which connection is fixed (netproto.h), so the served driver sees
 * exactly the concurrency onidriver.h allows: one thread per group, init
 * alone (the streams and registers are refused until it succeeded), destroy
 * after every connection's thread is done with the context.
 *
 * When any connection of a session closes or breaks the protocol (a message
 * netp_parse refuses, a body larger than the protocol carries, a second
 * request before the first was answered) the whole session ends: the others
 * are broken, and the last thread out stops acquisition and destroys the
 * driver context, which frees the hardware for the next client. One
 * session at a time; a HELLO while one runs is answered ONI_EBUSY (after
 * waiting for one that is ending: open_session). */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "netproto.h"
#include "netserve.h"
#include "ucxlink.h"
#include "gpu/gpu.h"
#include "onigpu.h"
#include "oni/driver.h"
#include "oni/util/opt.h"
#include "oni/util/clock.h"

#define MAXCONN 16        /* connections at once; more are closed at accept */
#define FIRST_MS 10000u   /* a new connection's first message must come within this */
#define HELLO_WAIT_MS 3000u /* a HELLO waits this long for an ending session to finish (a served call in it
                               may wait out the default timeout, 2 s, first) */
#define ANSWER_MARGIN_MS 1000u /* beyond the session's timeout, for a client to take an answer */
#define LINGER_MS 500u         /* a refused client's time to read why and close */
#define MAXIPC 16              /* a session's GPU allocations mapped by CUDA IPC at once */

/* A client's GPU allocation mapped here (NETP_GPU_IPC), until the session
 * ends or a new one needs its place while no block uses it. */
struct ipc_import {
    uint8_t handle[NETP_IPC_HANDLE];
    uint8_t *base; /* NULL: a free place */
    size_t len;
    int users;
};

struct session {
    oni_driver_ctx dctx;
    uint64_t token;
    unsigned id;
    const struct netserve_io *io[NETP_NCHAN]; /* NULL: not attached, or gone */
    int refs;           /* connections in it */
    int leaving;        /* of them, threads in leave() */
    int ended;          /* its connections are being shut down */
    int gone;           /* the served driver's context is destroyed */
    _Atomic int initialized;
    _Atomic uint32_t timeout_ms;
    _Atomic uint64_t bytes_read, bytes_written; /* stream bytes through the driver */
    pthread_mutex_t ctrl; /* the driver's option calls: CTRL's and the GPU connection's */
    pthread_mutex_t ipc_lock; /* imp, used by the GPU and GPUW connections */
    struct ipc_import imp[MAXIPC];
};

struct netserve {
    struct oni_driver drv;
    void *dl;
    char name[NETP_MAXNAME];
    char addr[96];
    int loopback; /* it listens on a loopback address */
    struct ulink_ctx *uc;
    struct ulink_listener *ls; /* NULL: no listener */
    int wake[2];               /* a byte here wakes netserve_run */
    uint8_t secret[NETP_MAXSECRET];
    size_t secret_n;
    FILE *log;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* a session or a connection ended */
    struct ulink *conn[MAXCONN]; /* the links being served */
    int nconn;
    int nthreads; /* connection threads, until their link is closed */
    struct session *active;
    unsigned opened, ended;
    atomic_int stopping;
    pthread_t runner; /* netserve_start's thread, when has_runner */
    int has_runner;
};

/* A connection's buffers: bytes after a request's call, bytes of an answer. */
struct bufs {
    uint8_t *in, *out;
    size_t in_cap, out_cap;
};


static void say(struct netserve *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct netserve *s, const char *fmt, ...)
{
    if (!s->log)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(s->log, fmt, ap);
    va_end(ap);
    fflush(s->log);
}

static void wake(struct netserve *s)
{
    char b = 1;
    if (write(s->wake[1], &b, 1) < 0) { /* a full pipe wakes the loop already */
    }
}

/* Read one request: header, call and the bytes after it into b->in. */
static int read_request(const struct netserve_io *io, uint64_t deadline, struct netp_hdr *h, struct netp_call *q,
                        struct bufs *b, size_t *extra)
{
    uint8_t m[ULINK_MAXHDR];
    size_t hlen;
    memset(h, 0, sizeof *h);
    int rc = io->next(io->arg, m, sizeof m, &hlen, extra, deadline);
    if (!rc)
        rc = netp_parse(m, hlen, *extra, 0, h, q);
    if (!rc)
        rc = netp_grow(&b->in, &b->in_cap, *extra);
    if (rc || !*extra)
        return rc;
    return io->take(io->arg, b->in, deadline);
}

static int answer(const struct netserve_io *io, const struct netp_hdr *h, int32_t status, uint32_t value,
                  uint64_t token, const void *extra, size_t n, uint64_t deadline)
{
    struct netp_hdr r = {NETP_MAGIC, NETP_VERSION, (uint16_t)(h->type | NETP_REPLY), h->seq,
                         (uint32_t)(sizeof(struct netp_answer) + n)};
    struct netp_answer a = {status, value, token};
    uint8_t m[sizeof r + sizeof a];
    memcpy(m, &r, sizeof r);
    memcpy(m + sizeof r, &a, sizeof a);
    return io->send(io->arg, m, sizeof m, extra, n, deadline);
}

static uint64_t new_token(void)
{
    uint64_t t = 0;
    if (getrandom(&t, sizeof t, 0) != sizeof t)
        t = oni_now_ns() ^ ((uint64_t)getpid() << 32);
    return t ? t : 1;
}

/* Whether a peer of ss closed a connection that its thread has not seen
 * close yet, being inside a served call (s->lock held: the connections stay
 * open meanwhile). */
static int peer_gone(const struct session *ss)
{
    for (int c = 0; c < NETP_NCHAN; c++)
        if (ss->io[c] && ss->io[c]->gone(ss->io[c]->arg))
            return 1;
    return 0;
}

/* Whether the client's HELLO body is the server's secret (any, or none,
 * where the server has none); in time independent of where they differ. */
static int secret_ok(const struct netserve *s, const uint8_t *p, size_t n)
{
    if (!s->secret_n)
        return 1;
    unsigned diff = n != s->secret_n;
    for (size_t i = 0; i < s->secret_n; i++)
        diff |= (unsigned)(s->secret[i] ^ (i < n ? p[i] : 0));
    return !diff;
}

/* HELLO: a new session on io as its CTRL connection (s->lock held). It
 * waits for a session that is ending, or whose client has gone (a client
 * killed and started again at once) while a thread of it is still inside a
 * served call. */
static int open_session(struct netserve *s, const struct netserve_io *io, struct session **out)
{
    struct timespec until;
    oni_timespec_at(oni_ms_from_now(HELLO_WAIT_MS), &until);
    while (s->active && (s->active->ended || peer_gone(s->active)) && !atomic_load(&s->stopping))
        if (pthread_cond_timedwait(&s->cond, &s->lock, &until) == ETIMEDOUT)
            break;
    if (s->active || atomic_load(&s->stopping))
        return ONI_EBUSY;
    struct session *ss = calloc(1, sizeof *ss);
    if (!ss)
        return ONI_EBADALLOC;
    if (!(ss->dctx = s->drv.create_ctx())) {
        free(ss);
        return ONI_EBADALLOC;
    }
    ss->token = new_token();
    ss->id = ++s->opened;
    ss->io[NETP_CHAN_CTRL] = io;
    ss->refs = 1;
    pthread_mutex_init(&ss->ctrl, NULL);
    pthread_mutex_init(&ss->ipc_lock, NULL);
    atomic_store(&ss->timeout_ms, ONI_DEFAULT_TIMEOUTMS);
    s->active = ss;
    *out = ss;
    return 0;
}

/* ATTACH: io joins the session as connection chan (s->lock held). */
static int attach(struct netserve *s, const struct netserve_io *io, const struct netp_call *q,
                  struct session **out)
{
    struct session *ss = s->active;
    if (!ss || ss->ended || q->token != ss->token || q->what == NETP_CHAN_CTRL || q->what >= NETP_NCHAN ||
        ss->io[q->what])
        return ONI_EINVALARG;
    ss->io[q->what] = io;
    ss->refs++;
    *out = ss;
    return 0;
}

/* The first message of a connection: it opens a session (with the secret
 * in hello, hello_n bytes) or joins one. */
static int join(struct netserve *s, const struct netserve_io *io, const struct netp_hdr *h,
                const struct netp_call *q, const uint8_t *hello, size_t hello_n, struct session **ss, int *chan)
{
    int rc = ONI_EINVALARG;
    if (h->type == NETP_HELLO && !secret_ok(s, hello, hello_n)) {
        say(s, "refused a client without the secret\n");
        answer(io, h, ONI_EACCESS, 0, 0, NULL, 0, oni_ms_from_now(FIRST_MS));
        return ONI_EACCESS;
    }
    pthread_mutex_lock(&s->lock);
    if (h->type == NETP_HELLO && (rc = open_session(s, io, ss)) == 0)
        *chan = NETP_CHAN_CTRL;
    else if (h->type == NETP_ATTACH && (rc = attach(s, io, q, ss)) == 0)
        *chan = (int)q->what;
    pthread_mutex_unlock(&s->lock);
    if (!rc && *chan == NETP_CHAN_CTRL)
        say(s, "session %u: open\n", (*ss)->id);
    uint64_t token = !rc && h->type == NETP_HELLO ? (*ss)->token : 0;
    const char *name = !rc && h->type == NETP_HELLO ? s->name : "";
    int sent = answer(io, h, rc, 0, token, name, strlen(name), oni_ms_from_now(FIRST_MS));
    return rc ? rc : sent;
}

/* Stop acquisition (best effort, as oni_destroy_ctx does before it closes
 * a driver) and destroy the served driver's context. */
static void end_driver(struct netserve *s, struct session *ss)
{
    if (atomic_load(&ss->initialized))
        (void)s->drv.write_config(ss->dctx, ONI_CONFIG_RUNNING, 0);
    s->drv.destroy_ctx(ss->dctx);
    for (int i = 0; i < MAXIPC; i++) /* the driver is gone: no block uses them */
        if (ss->imp[i].base)
            gpu_ipc_close(ss->imp[i].base);
    say(s, "session %u: ended, %llu bytes read, %llu written\n", ss->id,
        (unsigned long long)atomic_load(&ss->bytes_read), (unsigned long long)atomic_load(&ss->bytes_written));
}

/* A connection leaves its session: the first one out shuts the others down, the last
 * one ends it. Every one returns (and its connection is closed) only once
 * the served driver's context is gone, so a client that sees its
 * connections close may open the next session at once. */
static void leave(struct netserve *s, struct session *ss, int chan)
{
    pthread_mutex_lock(&s->lock);
    ss->io[chan] = NULL;
    if (!ss->ended) {
        ss->ended = 1;
        for (int c = 0; c < NETP_NCHAN; c++)
            if (ss->io[c])
                ss->io[c]->brk(ss->io[c]->arg);
    }
    ss->leaving++;
    if (--ss->refs == 0) {
        pthread_mutex_unlock(&s->lock);
        end_driver(s, ss);
        pthread_mutex_lock(&s->lock);
        ss->gone = 1;
        s->active = NULL;
        s->ended++;
        pthread_cond_broadcast(&s->cond);
        wake(s);
    }
    while (!ss->gone)
        pthread_cond_wait(&s->cond, &s->lock);
    int last = --ss->leaving == 0;
    pthread_mutex_unlock(&s->lock);
    if (last) {
        pthread_mutex_destroy(&ss->ctrl);
        pthread_mutex_destroy(&ss->ipc_lock);
        free(ss);
    }
}

/* Which requests each connection carries: the driver's concurrency rules. */
static int allowed(int chan, uint16_t type, uint32_t what)
{
    switch (type) {
    case NETP_READ:
        return chan == (what == ONI_READ_STREAM_DATA ? NETP_CHAN_DATA : NETP_CHAN_CTRL) &&
               (what == ONI_READ_STREAM_DATA || what == ONI_READ_STREAM_SIGNAL);
    case NETP_WRITE:
        return chan == NETP_CHAN_WRITE && what == ONI_WRITE_STREAM_DATA;
    case NETP_GPU_READ:
        return chan == NETP_CHAN_GPU;
    case NETP_GPU_WRITE:
        return chan == NETP_CHAN_GPUW;
    case NETP_GPU_IPC:
        return what <= 1 && chan == (what ? NETP_CHAN_GPUW : NETP_CHAN_GPU);
    case NETP_INIT:
    case NETP_CONFIG_READ:
    case NETP_CONFIG_WRITE:
    case NETP_SET_OPT_CALLBACK:
    case NETP_SET_OPT:
    case NETP_GET_OPT:
        return chan == NETP_CHAN_CTRL;
    default:
        return 0; /* HELLO and ATTACH only come first */
    }
}

/* Give the driver a write; it may take the bytes in parts. */
static int write_all(struct netserve *s, struct session *ss, const uint8_t *p, size_t n)
{
    size_t done = 0;
    uint64_t until = oni_ms_from_now(ONI_READ_SLICE_MS);
    while (done < n) {
        int rc = s->drv.write_stream(ss->dctx, ONI_WRITE_STREAM_DATA, (const char *)p + done, n - done);
        if (rc < 0)
            return done ? (int)done : rc;
        if ((size_t)rc > n - done)
            return ONI_EWRITEFAILURE;
        done += (size_t)rc;
        if (rc == 0 && !oni_ms_left(until))
            break;
        if (rc == 0)
            sched_yield();
    }
    return (int)done;
}

/* The served driver's call for request type t (checked by serve); its
 * result, *value and the *out_n answer bytes in b->out. */
static int32_t call_driver(struct netserve *s, struct session *ss, uint16_t t, const struct netp_call *q,
                           struct bufs *b, size_t extra, uint32_t *value, size_t *out_n)
{
    const struct oni_driver *d = &s->drv;
    int32_t st = ONI_EINVALARG;
    const void *in = extra ? b->in : NULL;
    int open = atomic_load(&ss->initialized);
    if (t == NETP_INIT) {
        st = open ? ONI_EINVALSTATE : d->init(ss->dctx, (int)q->what);
        if (st >= 0)
            atomic_store(&ss->initialized, 1);
    } else if (t == NETP_READ) {
        size_t want = q->arg < NETP_MAXXFER ? q->arg : NETP_MAXXFER;
        st = netp_grow(&b->out, &b->out_cap, want);
        if (!st && want) /* nothing asked: nothing to ask the driver (its buffer could be NULL) */
            st = d->read_stream(ss->dctx, (oni_read_stream_t)q->what, b->out, want);
        if (st > (int32_t)want)
            st = ONI_EREADFAILURE; /* the driver said it wrote past the buffer: pass on none of it */
        *out_n = st > 0 ? (size_t)st : 0;
        atomic_fetch_add(&ss->bytes_read, *out_n);
    } else if (t == NETP_WRITE) {
        st = write_all(s, ss, b->in, extra);
        if (st > 0)
            atomic_fetch_add(&ss->bytes_written, (uint64_t)st);
    } else if (t == NETP_CONFIG_READ) {
        oni_reg_val_t v = 0;
        st = d->read_config(ss->dctx, (oni_config_t)q->what, &v);
        *value = v;
    } else if (t == NETP_CONFIG_WRITE) {
        st = d->write_config(ss->dctx, (oni_config_t)q->what, q->arg);
    } else if (t == NETP_SET_OPT_CALLBACK) {
        uint32_t ms;
        if ((int)q->what == ONI_OPT_TIMEOUTMS && !oni_opt_u32(in, extra, &ms))
            atomic_store(&ss->timeout_ms, ms);
        st = d->set_opt_callback(ss->dctx, (int)q->what, in, extra);
    } else if ((t == NETP_SET_OPT || t == NETP_GET_OPT) && netp_names_memory((int)q->what)) {
        st = ONI_EUNIMPL; /* the value would be taken as an address in this process */
    } else if (t == NETP_SET_OPT) {
        /* Something of this machine (a path here, driver.h local_opt): not a client's to name. */
        st = d->local_opt && d->local_opt((int)q->what) ? ONI_EUNIMPL : d->set_opt(ss->dctx, (int)q->what, in, extra);
    } else if (t == NETP_GET_OPT) {
        size_t cap = q->arg < NETP_MAXOPT ? q->arg : NETP_MAXOPT, len = cap;
        st = netp_grow(&b->out, &b->out_cap, cap ? cap : 1);
        if (!st)
            st = d->get_opt(ss->dctx, (int)q->what, b->out, &len);
        if (st >= 0 && len > cap)
            len = cap; /* the driver claims more than it had room for: send what fits */
        if (st >= 0)
            *out_n = len;
        *value = (uint32_t)len;
    }
    return st;
}

/* ONI_DRV_READ (GPU_READ) or ONI_DRV_WRITE (GPU_WRITE) of one block, through
 * b. The served driver may not take these beside its other options
 * (concurrent_opt): then they go one at a time with CTRL's calls. */
static int32_t gpu_block(struct netserve *s, struct session *ss, uint16_t t, const struct netp_call *q,
                         struct bufs *b, size_t extra, size_t *out_n)
{
    const struct oni_driver *d = &s->drv;
    int write = t == NETP_GPU_WRITE, opt = write ? ONI_DRV_WRITE : ONI_DRV_READ;
    int alone = !d->concurrent_opt || !d->concurrent_opt(opt);
    uint32_t n = 0;
    size_t len = sizeof n;
    int32_t st = 0;
    if (!write) { /* the block is RD_SZ: what to take room for, and to send */
        pthread_mutex_lock(&ss->ctrl);
        st = d->get_opt(ss->dctx, ONI_DRV_RD_SZ, &n, &len);
        pthread_mutex_unlock(&ss->ctrl);
        if (st >= 0 && (len != sizeof n || !n || n > NETP_MAXXFER))
            st = ONI_EINVALARG; /* a block larger than the protocol carries */
        if (st >= 0 && q->arg && q->arg < n)
            st = ONI_EBUFFERSIZE;
        if (st >= 0)
            st = netp_grow(&b->out, &b->out_cap, n);
    } else if (!extra) {
        st = ONI_EINVALARG;
    }
    if (st < 0)
        return st;
    onigpu_buf_t ob = {write ? b->in : b->out, write ? extra : n};
    if (alone)
        pthread_mutex_lock(&ss->ctrl);
    st = d->set_opt(ss->dctx, opt, &ob, sizeof ob);
    if (alone)
        pthread_mutex_unlock(&ss->ctrl);
    if (st >= 0) {
        *out_n = write ? 0 : n;
        atomic_fetch_add(write ? &ss->bytes_written : &ss->bytes_read, write ? extra : n);
    }
    return st >= 0 && !write ? (int32_t)n : st; /* a READ's status counts the bytes that follow */
}

/* The client's GPU allocation named by handle, mapped here (once per
 * session), held for one block: its place in ss->imp, or NULL when it
 * cannot be mapped (no GPU here, another machine's handle, a handle of this
 * very process) or every place is in use. */
static struct ipc_import *ipc_hold(struct session *ss, const uint8_t *handle)
{
    pthread_mutex_lock(&ss->ipc_lock);
    struct ipc_import *e = NULL, *spare = NULL;
    for (int i = 0; i < MAXIPC && !e; i++) {
        struct ipc_import *m = &ss->imp[i];
        if (m->base && !memcmp(m->handle, handle, NETP_IPC_HANDLE))
            e = m;
        else if (!spare || (spare->base && !m->base) || (spare->users && !m->users))
            spare = m; /* a free place first, else one no block uses */
    }
    if (!e && spare && !spare->users) {
        if (spare->base)
            gpu_ipc_close(spare->base);
        spare->base = NULL;
        struct gpu_ptr_info pi;
        void *p = NULL;
        if (!gpu_ipc_open(handle, &p)) {
            if (!gpu_query(p, &pi) && pi.kind == GPU_KIND_DEVICE) {
                memcpy(spare->handle, handle, NETP_IPC_HANDLE);
                spare->base = p;
                spare->len = pi.len;
                e = spare;
            } else {
                gpu_ipc_close(p);
            }
        }
    }
    if (e)
        e->users++;
    pthread_mutex_unlock(&ss->ipc_lock);
    return e;
}

static void ipc_release(struct session *ss, struct ipc_import *e)
{
    pthread_mutex_lock(&ss->ipc_lock);
    e->users--;
    pthread_mutex_unlock(&ss->ipc_lock);
}

/* NETP_GPU_IPC: one block of q->what's direction moved by the served
 * driver straight into (out of) the client's GPU memory, mapped here by
 * CUDA IPC; ONI_EUNIMPL when that cannot be (the client then stages the
 * block through host memory): a server beyond the loopback (the client is
 * on another machine), or memory this process cannot map. */
static int32_t gpu_ipc(struct netserve *s, struct session *ss, const struct netp_call *q, const struct bufs *b,
                       size_t extra)
{
    const struct oni_driver *d = &s->drv;
    int write = q->what == 1, opt = write ? ONI_DRV_WRITE : ONI_DRV_READ;
    struct netp_ipc body;
    if (extra != sizeof body)
        return ONI_EINVALARG;
    if (!s->loopback)
        return ONI_EUNIMPL;
    memcpy(&body, b->in, sizeof body);
    uint32_t n = q->arg;
    int32_t st = 0;
    if (!write) { /* the block is RD_SZ, at most the room the client has */
        size_t len = sizeof n;
        pthread_mutex_lock(&ss->ctrl);
        st = d->get_opt(ss->dctx, ONI_DRV_RD_SZ, &n, &len);
        pthread_mutex_unlock(&ss->ctrl);
        if (st >= 0 && (len != sizeof n || !n))
            st = ONI_EINVALARG;
        if (st >= 0 && n > q->arg)
            st = ONI_EBUFFERSIZE;
    }
    if (st >= 0 && (!n || n > NETP_MAXXFER))
        st = ONI_EINVALARG;
    if (st < 0)
        return st;
    struct ipc_import *e = ipc_hold(ss, body.handle);
    if (!e)
        return ONI_EUNIMPL;
    if (body.offset > e->len || n > e->len - body.offset) {
        ipc_release(ss, e);
        return ONI_EBUFFERSIZE; /* beyond the allocation, whatever the client said of it */
    }
    onigpu_buf_t ob = {e->base + body.offset, n};
    int alone = !d->concurrent_opt || !d->concurrent_opt(opt);
    if (alone)
        pthread_mutex_lock(&ss->ctrl);
    st = d->set_opt(ss->dctx, opt, &ob, sizeof ob);
    if (alone)
        pthread_mutex_unlock(&ss->ctrl);
    ipc_release(ss, e);
    if (st < 0)
        return st;
    atomic_fetch_add(write ? &ss->bytes_written : &ss->bytes_read, n);
    return write ? 0 : (int32_t)n; /* a read's status: the bytes now in the client's memory */
}

/* Check a request, make its call on the driver (CTRL's one at a time with
 * the GPU connection's, see gpu_block) and answer it. */
static int serve(struct netserve *s, struct session *ss, int chan, const struct netserve_io *io,
                 const struct netp_hdr *h,
                 const struct netp_call *q, struct bufs *b, size_t extra)
{
    int32_t st;
    uint32_t value = 0;
    size_t out_n = 0;
    int open = atomic_load(&ss->initialized);
    uint16_t t = h->type;
    if (!allowed(chan, t, q->what))
        st = ONI_EINVALARG;
    else if (!open && t != NETP_INIT && t != NETP_SET_OPT && t != NETP_GET_OPT && t != NETP_SET_OPT_CALLBACK)
        st = ONI_EINVALSTATE;
    else if ((t == NETP_WRITE || t == NETP_GPU_WRITE || t == NETP_SET_OPT || t == NETP_SET_OPT_CALLBACK) &&
             q->arg != extra)
        st = ONI_EINVALARG;
    else if (t == NETP_GPU_READ || t == NETP_GPU_WRITE)
        st = gpu_block(s, ss, t, q, b, extra, &out_n);
    else if (t == NETP_GPU_IPC)
        st = gpu_ipc(s, ss, q, b, extra);
    else if (chan == NETP_CHAN_CTRL) {
        pthread_mutex_lock(&ss->ctrl);
        st = call_driver(s, ss, t, q, b, extra, &value, &out_n);
        pthread_mutex_unlock(&ss->ctrl);
    } else {
        st = call_driver(s, ss, t, q, b, extra, &value, &out_n);
    }
    uint64_t deadline = oni_ms_from_now(atomic_load(&ss->timeout_ms)) + ANSWER_MARGIN_MS * 1000000ull;
    return answer(io, h, st, value, 0, b->out, out_n, deadline);
}

/* After an answer that refuses a connection: wait a little for the client to
 * close it. Closing at once could lose the answer (UCX may drop what arrives
 * on an endpoint it has seen fail), and the client closes once it reads it. */
static void linger(const struct netserve_io *io)
{
    uint8_t m[ULINK_MAXHDR];
    size_t hlen, blen;
    uint64_t until = oni_ms_from_now(LINGER_MS);
    while (!io->next(io->arg, m, sizeof m, &hlen, &blen, until))
        if (blen && io->take(io->arg, NULL, until))
            break;
}

void netserve_conn(struct netserve *s, const struct netserve_io *io)
{
    struct bufs b = {0};
    struct session *ss = NULL;
    int chan = -1;
    uint64_t first = oni_ms_from_now(FIRST_MS);
    while (!atomic_load(&s->stopping)) {
        struct netp_hdr h;
        struct netp_call q;
        size_t extra;
        int rc = read_request(io, ss ? 0 : first, &h, &q, &b, &extra);
        if (rc == ONI_EBADCONTROLLER && h.magic == NETP_MAGIC && h.version != NETP_VERSION &&
            h.type >= NETP_HELLO && h.type < NETP_NTYPE) {
            /* another onigpu: say why before closing (the value: our version),
             * in an answer of a type we know (fuzz_net found one we did not) */
            say(s, "refused a client of protocol version %u (this server: %u)\n", h.version, NETP_VERSION);
            answer(io, &h, ONI_EBADCONTROLLER, NETP_VERSION, 0, NULL, 0, oni_ms_from_now(1000));
        }
        if (rc == ONI_EBADCONTROLLER && h.magic == NETP_MAGIC && h.version != NETP_VERSION)
            linger(io);
        if (rc)
            break;
        if (ss ? serve(s, ss, chan, io, &h, &q, &b, extra) : join(s, io, &h, &q, b.in, extra, &ss, &chan)) {
            if (!ss)
                linger(io); /* refused: the client reads why */
            break;
        }
    }
    if (ss)
        leave(s, ss, chan);
    free(b.in);
    free(b.out);
}

/* A link as a connection of netserve_conn. */
static int link_next(void *a, void *hdr, size_t cap, size_t *hlen, size_t *blen, uint64_t deadline)
{
    return ulink_next(a, hdr, cap, hlen, blen, deadline);
}
static int link_take(void *a, void *dst, uint64_t deadline) { return ulink_take(a, dst, deadline); }
static int link_send(void *a, const void *hdr, size_t hlen, const void *body, size_t blen, uint64_t deadline)
{
    return ulink_send(a, hdr, hlen, body, blen, deadline);
}
static int link_gone(void *a) { return ulink_gone(a); }
static void link_break(void *a) { ulink_break(a); }

struct conn_arg {
    struct netserve *s;
    struct ulink *l;
};

static void *conn_main(void *arg)
{
    struct conn_arg c = *(struct conn_arg *)arg;
    free(arg);
    struct netserve_io io = {link_next, link_take, link_send, link_gone, link_break, c.l};
    netserve_conn(c.s, &io);
    pthread_mutex_lock(&c.s->lock);
    for (int i = 0; i < c.s->nconn; i++)
        if (c.s->conn[i] == c.l)
            c.s->conn[i] = c.s->conn[--c.s->nconn];
    pthread_mutex_unlock(&c.s->lock);
    ulink_close(c.l, oni_ms_from_now(ANSWER_MARGIN_MS));
    pthread_mutex_lock(&c.s->lock);
    c.s->nthreads--;
    pthread_cond_broadcast(&c.s->cond);
    pthread_mutex_unlock(&c.s->lock);
    return NULL;
}

/* A thread for a new connection, or the connection closed when there is
 * no room (MAXCONN) or no thread. A client whose machine or network
 * vanished is found by UCX's own keepalive (UCX_KEEPALIVE_INTERVAL). */
static void start_conn(struct netserve *s, struct ulink *l)
{
    struct conn_arg *c = malloc(sizeof *c);
    pthread_mutex_lock(&s->lock);
    int room = c && s->nconn < MAXCONN && !atomic_load(&s->stopping);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (room) {
        *c = (struct conn_arg){s, l};
        s->conn[s->nconn++] = l;
        s->nthreads++;
        if (pthread_create(&t, &attr, conn_main, c)) {
            s->nconn--;
            s->nthreads--;
            room = 0;
        }
    }
    pthread_attr_destroy(&attr);
    pthread_mutex_unlock(&s->lock);
    if (!room) {
        free(c);
        ulink_break(l);
        ulink_close(l, oni_ms_from_now(100));
    }
}

int netserve_run(struct netserve *s, unsigned max_sessions)
{
    if (!s->ls)
        return ONI_EINVALSTATE;
    if (netserve_ready(s))
        return ONI_EACCESS;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        int done = atomic_load(&s->stopping) || (max_sessions && s->ended >= max_sessions);
        pthread_mutex_unlock(&s->lock);
        if (done)
            return 0;
        struct ulink *l;
        int rc = ulink_accept(s->ls, &l);
        if (l) {
            start_conn(s, l);
            continue;
        }
        if (rc)
            usleep(10000); /* no memory for a link: the request stays queued meanwhile */
        struct pollfd p[2] = {{.fd = ulink_listener_fd(s->ls), .events = POLLIN},
                              {.fd = s->wake[0], .events = POLLIN}};
        if (poll(p, 2, 100) < 0 && errno != EINTR)
            return ONI_EINVALSTATE;
        if (p[1].revents) {
            char buf[64];
            while (read(s->wake[0], buf, sizeof buf) > 0) {
            }
        }
    }
}

static void *runner_main(void *arg)
{
    netserve_run(arg, 0);
    return NULL;
}

int netserve_start(struct netserve *s)
{
    if (!s->ls || s->has_runner)
        return ONI_EINVALSTATE;
    if (netserve_ready(s))
        return ONI_EACCESS;
    if (pthread_create(&s->runner, NULL, runner_main, s))
        return ONI_EBADALLOC;
    s->has_runner = 1;
    return 0;
}

void netserve_stop(struct netserve *s)
{
    atomic_store(&s->stopping, 1);
    wake(s);
}

const char *netserve_addr(const struct netserve *s) { return s->addr; }

int netserve_ready(const struct netserve *s)
{
    return s->ls && !s->loopback && !s->secret_n ? ONI_EACCESS : 0; /* beyond the loopback only with a secret */
}

int netserve_set_secret(struct netserve *s, const void *secret, size_t n)
{
    if (n > NETP_MAXSECRET || (n && !secret) || s->has_runner)
        return ONI_EINVALARG;
    memcpy(s->secret, secret, n);
    s->secret_n = n;
    return 0;
}

/* Listen on addr; fills s->ls, s->addr and s->loopback. */
static int listen_on(struct netserve *s, const char *addr, char *err, size_t err_cap)
{
    struct addrinfo *res;
    int rc = netp_resolve(addr, 1, &res);
    if (rc) {
        snprintf(err, err_cap, rc == ONI_ENOHOST ? "unknown host in '%s'" : "bad address '%s' (want host:port)", addr);
        return ONI_EPATHINVALID;
    }
    if ((rc = ulink_ctx_open(&s->uc, err, err_cap))) {
        freeaddrinfo(res);
        return rc;
    }
    char why[160] = "";
    for (struct addrinfo *ai = res; ai && !s->ls; ai = ai->ai_next)
        if (!ulink_listen(s->uc, ai->ai_addr, ai->ai_addrlen, NETP_MAXXFER, &s->ls, why, sizeof why))
            s->loopback = netp_is_loopback(ai->ai_addr);
    freeaddrinfo(res);
    if (!s->ls) {
        snprintf(err, err_cap, "cannot listen on %s: %s", addr, why);
        return ONI_EPATHINVALID;
    }
    struct sockaddr_storage sa;
    socklen_t len;
    char host[64] = "?", port[16] = "?";
    if (!ulink_listener_addr(s->ls, &sa, &len))
        getnameinfo((struct sockaddr *)&sa, len, host, sizeof host, port, sizeof port,
                    NI_NUMERICHOST | NI_NUMERICSERV);
    snprintf(s->addr, sizeof s->addr, strchr(host, ':') ? "[%s]:%s" : "%s:%s", host, port);
    return 0;
}

int netserve_open(const char *driver, const char *addr, FILE *log, struct netserve **out, char *err,
                  size_t err_cap)
{
    struct netserve *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, err_cap, "out of memory");
        return ONI_EBADALLOC;
    }
    s->log = log;
    if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK)) {
        free(s);
        snprintf(err, err_cap, "no pipe: %s", strerror(errno));
        return ONI_EBADALLOC;
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_condattr_t ca; /* open_session's wait is on the monotonic clock */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cond, &ca);
    pthread_condattr_destroy(&ca);
    int rc = 0;
    if (oni_load_driver(driver, &s->drv, &s->dl)) {
        snprintf(err, err_cap, "no driver '%s' (built in, or libonidriver_%s.so)", driver ? driver : "",
                 driver ? driver : "");
        rc = ONI_EPATHINVALID;
    } else {
        const oni_driver_info_t *i = s->drv.info();
        snprintf(s->name, sizeof s->name, "%s %d.%d.%d", i && i->name ? i->name : driver, i ? i->major : 0,
                 i ? i->minor : 0, i ? i->patch : 0);
        if (addr)
            rc = listen_on(s, addr, err, err_cap);
    }
    if (rc) {
        netserve_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

void netserve_close(struct netserve *s)
{
    if (!s)
        return;
    netserve_stop(s);
    if (s->has_runner)
        pthread_join(s->runner, NULL);
    pthread_mutex_lock(&s->lock);
    pthread_cond_broadcast(&s->cond); /* a HELLO waiting for an ending session */
    for (int i = 0; i < s->nconn; i++)
        ulink_break(s->conn[i]);
    while (s->nthreads > 0)
        pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
    ulink_listener_close(s->ls);
    ulink_ctx_close(s->uc);
    close(s->wake[0]);
    close(s->wake[1]);
    if (s->dl)
        dlclose(s->dl);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
