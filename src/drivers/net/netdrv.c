/* netdrv.c - the `net` driver: every driver call sent over UCX (ucxlink.h)
 * to `onigpu serve` (netserve.c), which makes it on the driver that holds
 * the hardware there. Protocol: netproto.h; options: oninet.h; behaviour on
 * failures: docs/net.md.
 *
 * One link per group of calls the host library may make concurrently
 * (CTRL, DATA, WRITE, GPU, GPUW), each with its own lock and sequence numbers. A call
 * waits for its answer twice the context's timeout and a margin
 * (ANSWER_MARGIN_MS); a connection that fails, times out or answers out of
 * turn ends the session (its late answer could not be told from the next
 * one), and every call after that returns ONI_EDISCONNECTED. The server then
 * closes the served driver's context, so the hardware is free for the next
 * session. Reads keep what comes beyond what was asked (struct kept), and the
 * data stream has one READ on its way ahead (read_data). */
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include "gpu/gpu.h"
#include "netproto.h"
#include "ucxlink.h"
#include "onigpu.h"
#include "oni/driver.h"
#include "oni/util/opt.h"
#include "oni/util/clock.h"
#include "oninet.h"

#define ADDR_MAX 256
/* Beyond the timeout, what a healthy server may take to answer: the served
 * driver's read slice and a network's round trip. A served call may itself
 * wait the whole timeout (a register answer that is late), so an answer is
 * waited for twice the timeout and this: the call that timed out there comes
 * back as ONI_ETIMEOUT with the session whole. */
#define ANSWER_MARGIN_MS (ONI_READ_SLICE_MS + 200u)
/* Bytes asked for at once when the core asks for fewer; the driver keeps
 * what one read brings beyond what was asked (struct kept). The core reads
 * the signal stream a byte at a time (it must not read past a packet's end),
 * and the data stream a block at a time, by default a block of one frame:
 * through the network each read would be a round trip. */
#define SIG_AHEAD 4096
#define CONNECT_MARGIN_MS 2000u
#define DATA_AHEAD (64u << 10)

/* A stream's bytes received and not yet read. They are dropped where the
 * host library drops the bytes it holds: the signal stream's at RESET (the
 * hardware starts the stream afresh), the data stream's at RESET and at each
 * write of RUNNING (the library flushes its block then: frame.c,
 * oni_read_flush). So they behave as part of the library's block. */
struct kept {
    uint8_t *buf;
    size_t cap, pos, len;
    uint32_t gen; /* the flush count they were received under */
};

struct stage {
    uint8_t *buf;
    size_t cap;
};

/* The CUDA IPC handle of the last GPU allocation a link's blocks used, by
 * its buffer id (never reused: a new allocation at the same address gets a
 * new handle). */
struct ipc_export {
    uint64_t buffer_id; /* 0: none */
    uint8_t handle[NETP_IPC_HANDLE];
};

struct chan {
    pthread_mutex_t lock;
    struct ulink *l; /* NULL until connected */
    uint32_t seq;
};

struct netdrv {
    pthread_mutex_t lock; /* connecting and the address */
    char addr[ADDR_MAX];
    char remote[NETP_MAXNAME];
    char transport[64];  /* UCX's transports of the DATA link, once connected */
    uint8_t secret[NETP_MAXSECRET];
    size_t secret_n;
    struct ulink_ctx *uc; /* made at the first connect, freed at destroy */
    _Atomic int connected;
    _Atomic int broken; /* the session ended: every call is ONI_EDISCONNECTED */
    _Atomic uint32_t timeout_ms;
    struct chan ch[NETP_NCHAN];
    struct kept sig, data; /* used by the CTRL group and the data reader, each its own */
    _Atomic uint32_t resets, runs; /* RESET and RUNNING writes (flush counts) */
    /* The data stream's READ sent ahead, answer not taken yet (DATA's lock). */
    int ahead;
    uint32_t ahead_seq;
    size_t ahead_size;
    _Atomic uint32_t wr_sz;  /* the served driver's WR_SZ, 0 until known (wr_size) */
    struct stage stage[2];   /* device memory's blocks on their way: [0] GPU's, [1] GPUW's (their locks) */
    struct ipc_export ipc[2]; /* the same links' CUDA IPC handles */
    int local;                /* every address of the server is a loopback one: it may share our GPU */
    _Atomic int no_ipc;       /* the server said it cannot take GPU memory by CUDA IPC: stage */
    _Atomic uint32_t ipc_blocks; /* GPU-stream blocks moved by CUDA IPC in this session */
};

static const oni_driver_info_t info = {"net", 1, 0, 0, NULL};

static const oni_driver_info_t *drv_info(void) { return &info; }

static uint64_t answer_deadline(struct netdrv *d)
{
    return oni_now_ns() + (2 * (uint64_t)atomic_load(&d->timeout_ms) + ANSWER_MARGIN_MS) * 1000000u;
}

/* End the session: wake every call waiting on a link; the server sees them
 * close. The links stay (other threads may be in a call on them) until
 * destroy. */
static void end_session(struct netdrv *d)
{
    atomic_store(&d->broken, 1);
    for (int c = 0; c < NETP_NCHAN; c++)
        if (d->ch[c].l)
            ulink_break(d->ch[c].l);
}

/* Send a request on connection ch (its lock held); out: the bytes after the
 * call. 0 or the transport's error; the request's sequence number is ch->seq. */
static int send_request(struct netdrv *d, struct chan *ch, uint64_t deadline, uint16_t type,
                        const struct netp_call *call, const void *out, size_t out_n)
{
    if (!ch->l)
        return ONI_EINVALSTATE;
    if (atomic_load(&d->broken))
        return ONI_EDISCONNECTED;
    uint8_t m[sizeof(struct netp_hdr) + sizeof *call];
    struct netp_hdr h = {NETP_MAGIC, NETP_VERSION, type, ++ch->seq, (uint32_t)(sizeof *call + out_n)};
    memcpy(m, &h, sizeof h);
    memcpy(m + sizeof h, call, sizeof *call);
    return ulink_send(ch->l, m, sizeof m, out, out_n, deadline);
}

/* Receive the answer to request seq of type on ch (its lock held); in: room
 * for the bytes after the answer, *in_n their count. 0 (the server's result
 * is in a->status) or the transport's error. */
static int recv_answer(struct chan *ch, uint64_t deadline, uint16_t type, uint32_t seq, struct netp_answer *a,
                       void *in, size_t in_cap, size_t *in_n)
{
    struct netp_hdr r;
    uint8_t m[ULINK_MAXHDR];
    size_t hlen, extra;
    int rc = ulink_next(ch->l, m, sizeof m, &hlen, &extra, deadline);
    if (rc)
        return rc;
    if (netp_parse(m, hlen, extra, 1, &r, a) || r.type != (type | NETP_REPLY) || r.seq != seq || extra > in_cap)
        return ONI_EBADCONTROLLER; /* not ours, out of turn, or more than was asked for */
    if (extra && (rc = ulink_take(ch->l, in, deadline)))
        return rc;
    *in_n = extra;
    return 0;
}

/* One request and its answer on connection ch (its lock held). */
static int exchange(struct netdrv *d, struct chan *ch, uint64_t deadline, uint16_t type,
                    const struct netp_call *call, const void *out, size_t out_n, struct netp_answer *a, void *in,
                    size_t in_cap, size_t *in_n)
{
    int rc = send_request(d, ch, deadline, type, call, out, out_n);
    return rc ? rc : recv_answer(ch, deadline, type, ch->seq, a, in, in_cap, in_n);
}

/* A request on connection c answered by deadline: the server's result (>=
 * 0 or its ONI error), or the transport's error, which ends the session. */
static int call_by(struct netdrv *d, int c, uint64_t deadline, uint16_t type, const struct netp_call *q,
                   const void *out, size_t out_n, struct netp_answer *a, void *in, size_t in_cap, size_t *in_n)
{
    struct chan *ch = &d->ch[c];
    struct netp_answer none;
    size_t none_n;
    if (!a)
        a = &none;
    if (!in_n)
        in_n = &none_n;
    pthread_mutex_lock(&ch->lock);
    int rc = exchange(d, ch, deadline, type, q, out, out_n, a, in, in_cap, in_n);
    pthread_mutex_unlock(&ch->lock);
    if (rc == ONI_EINVALSTATE)
        return rc;
    if (rc) {
        end_session(d);
        return rc; /* ONI_ETIMEOUT, ONI_EDISCONNECTED or ONI_EBADCONTROLLER */
    }
    return a->status;
}

/* call_by with a deadline of its own and no token: the calls after the handshake. */
static int call(struct netdrv *d, int c, uint16_t type, uint32_t what, uint32_t arg, const void *out,
                size_t out_n, struct netp_answer *a, void *in, size_t in_cap, size_t *in_n)
{
    struct netp_call q = {what, arg, 0};
    return call_by(d, c, answer_deadline(d), type, &q, out, out_n, a, in, in_cap, in_n);
}

/* A link to one of res's addresses before deadline, or the error:
 * ONI_ECONNREFUSED (nobody listens), ONI_ETIMEOUT, ONI_EPATHINVALID. */
static int dial(struct netdrv *d, const struct addrinfo *res, uint64_t deadline, struct ulink **l)
{
    int rc = ONI_EPATHINVALID;
    for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int r = ulink_connect(d->uc, ai->ai_addr, ai->ai_addrlen, NETP_MAXXFER, deadline, l);
        if (!r)
            return 0;
        if (rc != ONI_ETIMEOUT)
            rc = r == ONI_EBADALLOC ? rc : r;
    }
    return rc;
}

/* Connect the channels' links and open the session (d->lock held). */
static int session_open(struct netdrv *d)
{
    struct addrinfo *res;
    int rc = netp_resolve(d->addr, 0, &res);
    if (rc)
        return rc;
    d->local = 1;
    for (const struct addrinfo *ai = res; ai; ai = ai->ai_next)
        d->local &= netp_is_loopback(ai->ai_addr);
    atomic_store(&d->no_ipc, 0);
    atomic_store(&d->ipc_blocks, 0);
    d->ipc[0].buffer_id = d->ipc[1].buffer_id = 0;
    char err[128];
    if (!d->uc && ulink_ctx_open(&d->uc, err, sizeof err)) {
        freeaddrinfo(res);
        return ONI_EBADALLOC;
    }
    /* UCX wires each link up with a few round trips of its own: they get a
     * margin beyond what a call is waited for. */
    uint64_t deadline = answer_deadline(d) + CONNECT_MARGIN_MS * 1000000ull;
    struct ulink *links[NETP_NCHAN];
    int n = 0;
    while (n < NETP_NCHAN && !(rc = dial(d, res, deadline, &links[n])))
        n++;
    deadline = answer_deadline(d);

    freeaddrinfo(res);
    for (int c = 0; c < n; c++) {
        pthread_mutex_lock(&d->ch[c].lock);
        d->ch[c].l = links[c];
        pthread_mutex_unlock(&d->ch[c].lock);
    }
    /* the handshake within one answer deadline once the links are up */
    struct netp_answer a;
    struct netp_call q = {0, 0, 0};
    char name[NETP_MAXNAME];
    size_t name_n = 0;
    if (!rc)
        rc = call_by(d, NETP_CHAN_CTRL, deadline, NETP_HELLO, &q, d->secret, d->secret_n, &a, name, sizeof name - 1,
                     &name_n);
    for (int c = NETP_CHAN_DATA; c < NETP_NCHAN && rc >= 0; c++) {
        q = (struct netp_call){(uint32_t)c, 0, a.token};
        rc = call_by(d, c, deadline, NETP_ATTACH, &q, NULL, 0, NULL, NULL, 0, NULL);
    }
    /* The served driver's init may use its timeout: it gets the one set
     * here before init, as a local driver would. */
    uint32_t ms = atomic_load(&d->timeout_ms);
    q = (struct netp_call){ONI_OPT_TIMEOUTMS, sizeof ms, 0};
    if (rc >= 0) { /* the served driver's answer does not matter (upstream drivers refuse it), the way does */
        int r = call_by(d, NETP_CHAN_CTRL, deadline, NETP_SET_OPT_CALLBACK, &q, &ms, sizeof ms, NULL, NULL, 0, NULL);
        if (r < 0 && atomic_load(&d->broken))
            rc = r;
    }
    if (rc < 0) {
        for (int c = 0; c < NETP_NCHAN; c++) {
            pthread_mutex_lock(&d->ch[c].lock);
            ulink_close(d->ch[c].l, oni_ms_from_now(100));
            d->ch[c].l = NULL;
            pthread_mutex_unlock(&d->ch[c].lock);
        }
        atomic_store(&d->broken, 0); /* nothing was open: a later try starts afresh */
        return rc;
    }
    name[name_n] = 0;
    memcpy(d->remote, name, name_n + 1);
    if (ulink_transports(d->ch[NETP_CHAN_DATA].l, d->transport, sizeof d->transport))
        strcpy(d->transport, "?");
    d->connected = 1;
    return 0;
}

static int ensure_session(struct netdrv *d)
{
    pthread_mutex_lock(&d->lock);
    int rc = d->connected ? 0 : session_open(d);
    pthread_mutex_unlock(&d->lock);
    return rc;
}

static oni_driver_ctx drv_create(void)
{
    struct netdrv *d = calloc(1, sizeof *d);
    if (d) {
        d->sig.cap = SIG_AHEAD;
        d->data.cap = DATA_AHEAD;
        d->sig.buf = malloc(SIG_AHEAD);
        d->data.buf = malloc(DATA_AHEAD);
    }
    if (!d || !d->sig.buf || !d->data.buf) {
        if (d) {
            free(d->sig.buf);
            free(d->data.buf);
        }
        free(d);
        return NULL;
    }
    pthread_mutex_init(&d->lock, NULL);
    for (int c = 0; c < NETP_NCHAN; c++) {
        pthread_mutex_init(&d->ch[c].lock, NULL);
    }
    const char *env = getenv(ONIGPU_NET_ENV);
    const char *addr = env && *env ? env : NETP_DEFAULT_ADDR;
    if (strlen(addr) < ADDR_MAX) /* else "": init fails (ONI_EPATHINVALID) rather than use another server */
        memcpy(d->addr, addr, strlen(addr) + 1);
    const char *secret = getenv(ONIGPU_NET_SECRET_ENV);
    if (secret && strlen(secret) <= NETP_MAXSECRET) { /* longer: none, and a server that wants one refuses */
        d->secret_n = strlen(secret);
        memcpy(d->secret, secret, d->secret_n);
    }
    atomic_store(&d->timeout_ms, ONI_DEFAULT_TIMEOUTMS);
    return d;
}

/* Close the session and wait, within the answer deadline, until the server
 * has ended it (it closes CTRL last, after the served driver's context is
 * gone): a context opened right after this one finds the server free. */
static void session_close(struct netdrv *d)
{
    if (!d->connected || atomic_load(&d->broken))
        return;
    uint64_t deadline = answer_deadline(d);
    for (int c = NETP_CHAN_DATA; c < NETP_NCHAN; c++) { /* DATA may hold a READ's answer sent ahead: not wanted */
        ulink_close(d->ch[c].l, deadline);
        d->ch[c].l = NULL;
    }
    struct ulink *l = d->ch[NETP_CHAN_CTRL].l;
    uint8_t m[ULINK_MAXHDR];
    size_t hlen, blen;
    while (ulink_next(l, m, sizeof m, &hlen, &blen, deadline) == 0)
        if (blen && ulink_take(l, NULL, deadline))
            break; /* answers nobody waits for any more, then the end */
}

static int drv_destroy(oni_driver_ctx ctx)
{
    struct netdrv *d = ctx;
    if (!d)
        return ONI_EINVALARG;
    session_close(d);
    for (int c = 0; c < NETP_NCHAN; c++) {
        ulink_close(d->ch[c].l, oni_ms_from_now(100));
        pthread_mutex_destroy(&d->ch[c].lock);
    }
    ulink_ctx_close(d->uc);
    pthread_mutex_destroy(&d->lock);
    free(d->sig.buf);
    free(d->data.buf);
    free(d->stage[0].buf);
    free(d->stage[1].buf);
    free(d);
    return 0;
}

static int drv_init(oni_driver_ctx ctx, int host_idx)
{
    struct netdrv *d = ctx;
    int rc = ensure_session(d);
    return rc ? rc : call(d, NETP_CHAN_CTRL, NETP_INIT, (uint32_t)host_idx, 0, NULL, 0, NULL, NULL, 0, NULL);
}

/* One READ of at most size bytes of stream s into data. */
static int read_remote(struct netdrv *d, oni_read_stream_t s, void *data, size_t size)
{
    int c = s == ONI_READ_STREAM_DATA ? NETP_CHAN_DATA : NETP_CHAN_CTRL;
    if (size > NETP_MAXXFER)
        size = NETP_MAXXFER;
    struct netp_answer a;
    size_t got;
    int rc = call(d, c, NETP_READ, (uint32_t)s, (uint32_t)size, NULL, 0, &a, data, size, &got);
    if (rc >= 0 && (size_t)rc != got) {
        end_session(d); /* the count and the bytes disagree: nothing after can be trusted */
        return ONI_EBADCONTROLLER;
    }
    return rc;
}

/* Up to size of k's bytes into data (k holds some); their count. */
static int take_kept(struct kept *k, void *data, size_t size)
{
    size_t n = k->len - k->pos < size ? k->len - k->pos : size;
    memcpy(data, k->buf + k->pos, n);
    k->pos += n;
    return (int)n;
}

/* Drop k's bytes if the stream was flushed since they came (gen: its flush
 * count now); 1 if k still holds bytes. */
static int kept_valid(struct kept *k, uint32_t gen)
{
    if (k->gen != gen) {
        k->pos = k->len = 0;
        k->gen = gen;
    }
    return k->pos < k->len;
}

/* The signal stream from d->sig, which one READ refills. */
static int read_signal(struct netdrv *d, void *data, size_t size)
{
    struct kept *k = &d->sig;
    if (!kept_valid(k, atomic_load(&d->resets))) {
        int rc = read_remote(d, ONI_READ_STREAM_SIGNAL, k->buf, k->cap);
        if (rc <= 0)
            return rc;
        k->pos = 0;
        k->len = (size_t)rc;
    }
    return take_kept(k, data, size);
}

static int send_ahead(struct netdrv *d, struct chan *ch, size_t want)
{
    struct netp_call q = {ONI_READ_STREAM_DATA, (uint32_t)want, 0};
    int rc = send_request(d, ch, answer_deadline(d), NETP_READ, &q, NULL, 0);
    d->ahead = !rc;
    d->ahead_seq = ch->seq;
    d->ahead_size = want;
    return rc;
}

static uint32_t data_flushes(struct netdrv *d) { return atomic_load(&d->resets) + atomic_load(&d->runs); }

/* Take the answer of the READ sent ahead into data (cap bytes), or into
 * d->data when data is NULL or smaller than what was asked (DATA's lock
 * held): *direct says which, *status is the served driver's result. 0, or
 * the transport's error (ONI_EBADALLOC: nothing taken, the answer waits). */
static int take_ahead(struct netdrv *d, struct chan *ch, void *data, size_t cap, int *direct, int *status)
{
    struct kept *k = &d->data;
    *direct = data && cap >= d->ahead_size;
    if (!*direct && netp_grow(&k->buf, &k->cap, d->ahead_size)) /* asked for more than the kept buffer holds */
        return ONI_EBADALLOC;
    struct netp_answer a;
    size_t got;
    d->ahead = 0;
    int rc = recv_answer(ch, answer_deadline(d), NETP_READ, d->ahead_seq, &a, *direct ? data : k->buf,
                         d->ahead_size, &got);
    if (!rc && a.status >= 0 && (size_t)a.status != got)
        rc = ONI_EBADCONTROLLER; /* the count and the bytes disagree: nothing after can be trusted */
    if (rc)
        return rc;
    *status = a.status;
    if (!*direct && a.status >= 0) {
        k->pos = 0;
        k->len = got;
        k->gen = data_flushes(d); /* no flush since it was sent: a flush settles first */
    }
    return 0;
}

/* The data stream, one READ ahead: a read takes the answer to the READ sent
 * by the read before it (or sends one now), then sends the next, so that the
 * server reads the card while the library parses. A read smaller than 64 KiB
 * asks for 64 KiB and keeps the rest. The host library changes RUNNING or
 * resets only between reads (docs/threads.md), and drv_write_config takes
 * the answer on its way before such a write (settle_ahead), so what is kept
 * always predates the flush that drops it. */
static int read_data(struct netdrv *d, void *data, size_t size)
{
    struct kept *k = &d->data;
    if (kept_valid(k, data_flushes(d)))
        return take_kept(k, data, size);
    struct chan *ch = &d->ch[NETP_CHAN_DATA];
    size_t want = size > k->cap ? size : k->cap;
    if (want > NETP_MAXXFER)
        want = NETP_MAXXFER;
    int direct = 0, status = 0;
    pthread_mutex_lock(&ch->lock);
    int rc = d->ahead ? 0 : send_ahead(d, ch, want);
    if (!rc)
        rc = take_ahead(d, ch, data, size, &direct, &status);
    if (!rc && status >= 0)
        rc = send_ahead(d, ch, want);
    pthread_mutex_unlock(&ch->lock);
    if (rc) {
        if (rc != ONI_EBADALLOC && rc != ONI_EINVALSTATE)
            end_session(d);
        return rc;
    }
    return status < 0 || direct ? status : take_kept(k, data, size);
}

/* Before a write of RUNNING or RESET: the data answer on its way (from
 * before the write) goes into d->data, where the flush the write makes drops
 * it; a write that fails leaves it to be read. */
static int settle_ahead(struct netdrv *d)
{
    struct chan *ch = &d->ch[NETP_CHAN_DATA];
    int rc = 0, direct, status;
    pthread_mutex_lock(&ch->lock);
    if (d->ahead)
        rc = take_ahead(d, ch, NULL, 0, &direct, &status);
    pthread_mutex_unlock(&ch->lock);
    if (rc && rc != ONI_EBADALLOC)
        end_session(d);
    return rc;
}

static int drv_read_stream(oni_driver_ctx ctx, oni_read_stream_t s, void *data, size_t size)
{
    if (s == ONI_READ_STREAM_SIGNAL)
        return read_signal(ctx, data, size);
    if (s == ONI_READ_STREAM_DATA)
        return read_data(ctx, data, size);
    return read_remote(ctx, s, data, size); /* the server refuses it, as the driver there would */
}

static int drv_write_stream(oni_driver_ctx ctx, oni_write_stream_t s, const char *data, size_t size)
{
    if (size > NETP_MAXXFER)
        size = NETP_MAXXFER;
    int rc = call(ctx, NETP_CHAN_WRITE, NETP_WRITE, (uint32_t)s, (uint32_t)size, data, size, NULL, NULL, 0, NULL);
    return rc > (int)size ? ONI_EWRITEFAILURE : rc;
}

static int drv_read_config(oni_driver_ctx ctx, oni_config_t reg, oni_reg_val_t *value)
{
    struct netp_answer a;
    int rc = call(ctx, NETP_CHAN_CTRL, NETP_CONFIG_READ, (uint32_t)reg, 0, NULL, 0, &a, NULL, 0, NULL);
    if (rc >= 0)
        *value = a.value;
    return rc;
}

static int drv_write_config(oni_driver_ctx ctx, oni_config_t reg, oni_reg_val_t value)
{
    struct netdrv *d = ctx;
    int rc = reg == ONI_CONFIG_RUNNING || (reg == ONI_CONFIG_RESET && value) ? settle_ahead(d) : 0;
    if (rc)
        return rc;
    rc = call(d, NETP_CHAN_CTRL, NETP_CONFIG_WRITE, (uint32_t)reg, value, NULL, 0, NULL, NULL, 0, NULL);
    if (rc >= 0 && reg == ONI_CONFIG_RESET && value)
        atomic_fetch_add(&d->resets, 1);
    if (rc >= 0 && reg == ONI_CONFIG_RUNNING)
        atomic_fetch_add(&d->runs, 1);
    return rc;
}

static int drv_set_opt_callback(oni_driver_ctx ctx, int opt, const void *value, size_t len)
{
    struct netdrv *d = ctx;
    uint32_t ms;
    if (opt == ONI_OPT_TIMEOUTMS && !oni_opt_u32(value, len, &ms))
        atomic_store(&d->timeout_ms, ms);
    if (!d->connected) /* nothing to tell yet: the core tells the timeout again after init */
        return 0;
    if (len > NETP_MAXOPT)
        return ONI_EINVALARG;
    return call(d, NETP_CHAN_CTRL, NETP_SET_OPT_CALLBACK, (uint32_t)opt, (uint32_t)len, value, len, NULL,
                NULL, 0, NULL);
}

/* The served driver's WR_SZ: kept from the last set through this driver,
 * else asked for once. */
static int wr_size(struct netdrv *d, uint32_t *n)
{
    if ((*n = atomic_load(&d->wr_sz)))
        return 0;
    struct netp_answer a;
    size_t got;
    int rc = call(d, NETP_CHAN_CTRL, NETP_GET_OPT, ONI_DRV_WR_SZ, sizeof *n, NULL, 0, &a, n, sizeof *n, &got);
    if (rc < 0)
        return rc;
    if (got != sizeof *n || !*n)
        return ONI_EBADCONTROLLER;
    atomic_store(&d->wr_sz, *n);
    return 0;
}

/* A block of n bytes (a read: room for n) at p in the GPU allocation pi
 * moved by the server's card itself, the allocation shared by CUDA IPC
 * (NETP_GPU_IPC). Returns 0 or the link's error (the caller ends the
 * session then); *status: 0 or the served driver's error, or 1 when the
 * block must be staged instead: the allocation cannot be exported (managed
 * memory, say), or the server cannot map it (another machine's GPU, a
 * server in this very process: then never again in this session). Called
 * with ch's lock held. */
static int ipc_block(struct netdrv *d, struct chan *ch, int write, uint8_t *p, const struct gpu_ptr_info *pi,
                     uint32_t n, int *status)
{
    struct ipc_export *e = &d->ipc[write];
    *status = 1;
    if (e->buffer_id != pi->buffer_id || !pi->buffer_id) {
        e->buffer_id = 0;
        if (!pi->buffer_id || gpu_ipc_export(pi->base, e->handle))
            return 0;
        e->buffer_id = pi->buffer_id;
    }
    struct netp_ipc body = {{0}, pi->len, (uint64_t)(p - (uint8_t *)pi->base)};
    memcpy(body.handle, e->handle, sizeof body.handle);
    struct netp_call q = {(uint32_t)write, n, 0};
    struct netp_answer a = {0, 0, 0};
    size_t got = 0;
    int rc = exchange(d, ch, answer_deadline(d), NETP_GPU_IPC, &q, &body, sizeof body, &a, NULL, 0, &got);
    if (rc)
        return rc;
    if (!write && a.status > (int32_t)n)
        return ONI_EBADCONTROLLER; /* more than there was room for: a broken server */
    if (a.status == ONI_EUNIMPL)
        atomic_store(&d->no_ipc, 1);
    else
        *status = a.status < 0 ? a.status : 0;
    if (*status == 0)
        atomic_fetch_add(&d->ipc_blocks, 1);
    return 0;
}

/* ONI_DRV_READ / ONI_DRV_WRITE: one block of the GPU streams through the GPU
 * (GPUW) link, into (out of) a buffer of this process given as onigpu.h says
 * (the buffer itself, size 4 or 8, or an onigpu_buf_t): host memory straight
 * from (to) UCX, device memory through a host staging buffer kept for the
 * session (Debian's UCX has no CUDA memory support: docs/net.md). The
 * served driver checks the block against its RD_SZ, WR_SZ and the length. */
static int gpu_block(struct netdrv *d, int write, const void *value, size_t len)
{
    void *p = (void *)value;
    size_t cap = 0; /* the buffer's bytes, 0 when not given (the token form on host memory) */
    if (value && len == sizeof(onigpu_buf_t)) {
        onigpu_buf_t b;
        memcpy(&b, value, sizeof b);
        p = b.addr;
        cap = (size_t)b.len;
        if (!p || !cap)
            return ONI_EINVALARG;
    } else if (!value || (len != 4 && len != 8)) {
        return ONI_EINVALARG;
    }
    struct gpu_ptr_info pi;
    int rc = ensure_session(d);
    if (rc || (rc = gpu_query(p, &pi)))
        return rc;
    int dev = pi.kind == GPU_KIND_DEVICE;
    if (dev) { /* its allocation bounds it, as a local driver checks */
        size_t avail = (size_t)((uintptr_t)pi.base + pi.len - (uintptr_t)p);
        cap = cap && cap < avail ? cap : avail;
    }
    uint32_t n = 0;
    if (write && (rc = wr_size(d, &n)))
        return rc;
    if (write && cap && cap < n)
        return ONI_EBUFFERSIZE;
    size_t room = write ? n : cap && cap < NETP_MAXXFER ? cap : NETP_MAXXFER;
    if (write && n > NETP_MAXXFER)
        return ONI_EINVALARG; /* a block larger than the protocol carries */
    struct chan *ch = &d->ch[write ? NETP_CHAN_GPUW : NETP_CHAN_GPU];
    pthread_mutex_lock(&ch->lock);
    if (dev && d->local && !atomic_load(&d->no_ipc)) {
        int st;
        rc = ipc_block(d, ch, write, p, &pi, write ? n : (uint32_t)room, &st);
        if (rc || st != 1) {
            pthread_mutex_unlock(&ch->lock);
            if (rc)
                end_session(d);
            return rc ? rc : st;
        }
    }
    struct stage *sb = &d->stage[write]; /* device memory's staging room (its connection's lock held) */
    uint8_t *host = !dev ? p : netp_grow(&sb->buf, &sb->cap, room) ? NULL : sb->buf;
    struct netp_call q = {0, write ? n : (uint32_t)(cap < NETP_MAXXFER ? cap : NETP_MAXXFER), 0};
    struct netp_answer a = {0, 0, 0};
    size_t got = 0;
    rc = host ? 0 : ONI_EBADALLOC;
    if (!rc && write && dev)
        rc = gpu_copy(host, p, n);
    int sent = 0; /* transport errors end the session; the others do not */
    if (!rc) {
        sent = 1;
        rc = exchange(d, ch, answer_deadline(d), write ? NETP_GPU_WRITE : NETP_GPU_READ, &q, write ? host : NULL,
                      write ? n : 0, &a, write ? NULL : host, write ? 0 : room, &got);
        if (!rc && !write && a.status >= 0 && got != (size_t)a.status)
            rc = ONI_EBADCONTROLLER;
    }
    int transport = sent && rc;
    if (!rc && a.status >= 0 && !write && dev)
        rc = gpu_copy(p, host, got);
    pthread_mutex_unlock(&ch->lock);
    if (transport)
        end_session(d);
    return rc ? rc : a.status < 0 ? a.status : 0;
}

static int set_secret(struct netdrv *d, const void *value, size_t len)
{
    if ((!value && len) || len > NETP_MAXSECRET)
        return ONI_EINVALARG;
    pthread_mutex_lock(&d->lock);
    int rc = d->connected ? ONI_EINVALSTATE : 0;
    if (!rc) {
        memcpy(d->secret, value, len);
        d->secret_n = len;
    }
    pthread_mutex_unlock(&d->lock);
    return rc;
}

static int set_addr(struct netdrv *d, const char *value, size_t len)
{
    if (!value || len == 0 || len > ADDR_MAX || memchr(value, 0, len) != value + len - 1)
        return ONI_EINVALARG;
    pthread_mutex_lock(&d->lock);
    int rc = d->connected ? ONI_EINVALSTATE : 0;
    if (!rc)
        memcpy(d->addr, value, len);
    pthread_mutex_unlock(&d->lock);
    return rc;
}

static int get_string(const char *s, void *value, size_t *len)
{
    size_t need = strlen(s) + 1;
    if (*len < need)
        return oni_opt_short(len, need);
    memcpy(value, s, need);
    *len = need;
    return 0;
}

static int drv_set_opt(oni_driver_ctx ctx, int opt, const void *value, size_t len)
{
    struct netdrv *d = ctx;
    if (opt == ONI_DRV_NET_ADDR)
        return set_addr(d, value, len);
    if (opt == ONI_DRV_NET_SECRET)
        return set_secret(d, value, len);
    if (opt == ONI_DRV_NET_REMOTE || opt == ONI_DRV_NET_TRANSPORT || opt == ONI_DRV_NET_GPU_IPC)
        return ONI_EREADONLY;
    if (opt == ONI_DRV_READ || opt == ONI_DRV_WRITE)
        return gpu_block(d, opt == ONI_DRV_WRITE, value, len);
    if (netp_names_memory(opt))
        return ONI_EUNIMPL;
    if (len > NETP_MAXOPT)
        return ONI_EINVALARG;
    int rc = ensure_session(d);
    if (!rc)
        rc = call(d, NETP_CHAN_CTRL, NETP_SET_OPT, (uint32_t)opt, (uint32_t)len, value, len, NULL, NULL, 0, NULL);
    uint32_t wr;
    if (rc >= 0 && opt == ONI_DRV_WR_SZ && !oni_opt_u32(value, len, &wr))
        atomic_store(&d->wr_sz, wr);
    return rc;
}

static int drv_get_opt(oni_driver_ctx ctx, int opt, void *value, size_t *len)
{
    struct netdrv *d = ctx;
    if (opt == ONI_DRV_NET_SECRET)
        return ONI_EWRITEONLY;
    if (opt == ONI_DRV_NET_GPU_IPC) {
        uint32_t n = atomic_load(&d->ipc_blocks);
        if (!value || !len)
            return ONI_EINVALARG;
        if (*len < sizeof n)
            return oni_opt_short(len, sizeof n);
        if (!atomic_load(&d->connected))
            return ONI_EINVALSTATE;
        memcpy(value, &n, sizeof n);
        *len = sizeof n;
        return 0;
    }
    if (opt == ONI_DRV_NET_ADDR || opt == ONI_DRV_NET_REMOTE || opt == ONI_DRV_NET_TRANSPORT) {
        pthread_mutex_lock(&d->lock);
        const char *v = opt == ONI_DRV_NET_ADDR ? d->addr : opt == ONI_DRV_NET_REMOTE ? d->remote : d->transport;
        int rc = opt != ONI_DRV_NET_ADDR && !d->connected ? ONI_EINVALSTATE : get_string(v, value, len);
        pthread_mutex_unlock(&d->lock);
        return rc;
    }
    if (netp_names_memory(opt))
        return ONI_EUNIMPL;
    int rc = ensure_session(d);
    if (rc)
        return rc;
    size_t cap = *len < NETP_MAXOPT ? *len : NETP_MAXOPT, got;
    struct netp_answer a;
    rc = call(d, NETP_CHAN_CTRL, NETP_GET_OPT, (uint32_t)opt, (uint32_t)cap, NULL, 0, &a, value, cap, &got);
    if (rc >= 0 && got != a.value) {
        end_session(d);
        return ONI_EBADCONTROLLER;
    }
    if (rc == ONI_EBUFFERSIZE && a.value > NETP_MAXOPT)
        return ONI_EINVALARG; /* a value larger than the protocol carries: no size would do */
    if (rc >= 0 || rc == ONI_EBUFFERSIZE)
        *len = a.value;
    return rc;
}

/* GPU blocks go on their own connection, beside the other options' calls. */
static int drv_concurrent_opt(int opt) { return opt == ONI_DRV_READ || opt == ONI_DRV_WRITE; }

const struct oni_driver onidrv_net = {
    .name = "net",
    .create_ctx = drv_create,
    .destroy_ctx = drv_destroy,
    .init = drv_init,
    .read_stream = drv_read_stream,
    .write_stream = drv_write_stream,
    .read_config = drv_read_config,
    .write_config = drv_write_config,
    .set_opt_callback = drv_set_opt_callback,
    .set_opt = drv_set_opt,
    .get_opt = drv_get_opt,
    .info = drv_info,
    .concurrent_opt = drv_concurrent_opt,
};
