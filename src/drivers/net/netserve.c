/* netserve.c - serves one ONI driver to `net` clients (netserve.h).
 *
 * A session is one client: HELLO on its CTRL connection creates a driver
 * context, ATTACH joins its DATA, WRITE, GPU and GPUW connections, and each connection
 * has its own thread that makes the calls that arrive on it. Which call may
 * arrive on which connection is fixed (netproto.h), so the served driver sees
 * exactly the concurrency onidriver.h allows: one thread per group, init
 * alone (the streams and registers are refused until it succeeded), destroy
 * after every connection's thread is done with the context.
 *
 * When any connection of a session closes or breaks the protocol the whole
 * session ends: the others are shut down, and the last thread out destroys
 * the driver context, which frees the hardware for the next client. One
 * session at a time; a HELLO while one runs is answered ONI_EBUSY (after
 * waiting for one that is ending: open_session). */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include "netproto.h"
#include "netserve.h"
#include "onigpu.h"
#include "oni/driver.h"
#include "oni/util/opt.h"
#include "oni/util/clock.h"

#define MAXCONN 16        /* connections at once; more are closed at accept */
#define FIRST_MS 10000u   /* a new connection's first message must come within this */
#define HELLO_WAIT_MS 3000u /* a HELLO waits this long for an ending session to finish (a served call in it
                               may wait out the default timeout, 2 s, first) */
#define ANSWER_MARGIN_MS 1000u /* beyond the session's timeout, for a client to take an answer */
#define KEEPALIVE_IDLE_S 5 /* a silent peer is probed after this, then 3 probes 1 s apart */

struct session {
    oni_driver_ctx dctx;
    uint64_t token;
    unsigned id;
    int fd[NETP_NCHAN]; /* -1: not attached, or gone */
    int refs;           /* connections in it */
    int leaving;        /* of them, threads in leave() */
    int ended;          /* its connections are being shut down */
    int gone;           /* the served driver's context is destroyed */
    _Atomic int initialized;
    _Atomic uint32_t timeout_ms;
    _Atomic uint64_t bytes_read, bytes_written; /* stream bytes through the driver */
    pthread_mutex_t ctrl; /* the driver's option calls: CTRL's and the GPU connection's */
};

struct netserve {
    struct oni_driver drv;
    void *dl;
    char name[NETP_MAXNAME];
    char addr[96];
    int lfd;     /* listening socket, or -1 */
    int wake[2]; /* a byte here wakes netserve_run */
    FILE *log;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* a session or a connection ended */
    int conn[MAXCONN];
    int nconn;
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
static int read_request(int fd, uint64_t deadline, struct netp_hdr *h, struct netp_call *q, struct bufs *b,
                        size_t *extra)
{
    int rc = netp_recv(fd, h, sizeof *h, deadline);
    if (!rc)
        rc = netp_check_hdr(h, 0);
    if (!rc)
        rc = netp_recv(fd, q, sizeof *q, deadline);
    if (rc)
        return rc;
    *extra = h->len - sizeof *q;
    if ((rc = netp_grow(&b->in, &b->in_cap, *extra)))
        return rc;
    return netp_recv(fd, b->in, *extra, deadline);
}

static int answer(int fd, const struct netp_hdr *h, int32_t status, uint32_t value, uint64_t token,
                  const void *extra, size_t n, uint64_t deadline)
{
    struct netp_hdr r = {NETP_MAGIC, NETP_VERSION, (uint16_t)(h->type | NETP_REPLY), h->seq,
                         (uint32_t)(sizeof(struct netp_answer) + n)};
    struct netp_answer a = {status, value, token};
    struct iovec iov[3] = {{&r, sizeof r}, {&a, sizeof a}, {(void *)extra, n}};
    return netp_send(fd, iov, n ? 3 : 2, deadline);
}

static uint64_t new_token(void)
{
    uint64_t t = 0;
    if (getrandom(&t, sizeof t, 0) != sizeof t)
        t = oni_now_ns() ^ ((uint64_t)getpid() << 32);
    return t ? t : 1;
}

/* Whether a peer of ss closed a connection that its thread has not seen
 * close yet, being inside a served call (s->lock held: the descriptors stay
 * open meanwhile). */
static int peer_gone(const struct session *ss)
{
    for (int c = 0; c < NETP_NCHAN; c++) {
        struct pollfd p = {.fd = ss->fd[c], .events = POLLRDHUP};
        if (ss->fd[c] >= 0 && poll(&p, 1, 0) > 0)
            return 1;
    }
    return 0;
}

/* HELLO: a new session on fd as its CTRL connection (s->lock held). It
 * waits for a session that is ending, or whose client has gone (a client
 * killed and started again at once) while a thread of it is still inside a
 * served call. */
static int open_session(struct netserve *s, int fd, struct session **out)
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
    for (int c = 0; c < NETP_NCHAN; c++)
        ss->fd[c] = -1;
    ss->fd[NETP_CHAN_CTRL] = fd;
    ss->refs = 1;
    pthread_mutex_init(&ss->ctrl, NULL);
    atomic_store(&ss->timeout_ms, ONI_DEFAULT_TIMEOUTMS);
    s->active = ss;
    *out = ss;
    return 0;
}

/* ATTACH: fd joins the session as connection chan (s->lock held). */
static int attach(struct netserve *s, int fd, const struct netp_call *q, struct session **out)
{
    struct session *ss = s->active;
    if (!ss || ss->ended || q->token != ss->token || q->what == NETP_CHAN_CTRL || q->what >= NETP_NCHAN ||
        ss->fd[q->what] >= 0)
        return ONI_EINVALARG;
    ss->fd[q->what] = fd;
    ss->refs++;
    *out = ss;
    return 0;
}

/* The first message of a connection: it opens a session or joins one. */
static int join(struct netserve *s, int fd, const struct netp_hdr *h, const struct netp_call *q,
                struct session **ss, int *chan)
{
    int rc = ONI_EINVALARG;
    pthread_mutex_lock(&s->lock);
    if (h->type == NETP_HELLO && (rc = open_session(s, fd, ss)) == 0)
        *chan = NETP_CHAN_CTRL;
    else if (h->type == NETP_ATTACH && (rc = attach(s, fd, q, ss)) == 0)
        *chan = (int)q->what;
    pthread_mutex_unlock(&s->lock);
    if (!rc && *chan == NETP_CHAN_CTRL)
        say(s, "session %u: open\n", (*ss)->id);
    uint64_t token = !rc && h->type == NETP_HELLO ? (*ss)->token : 0;
    const char *name = !rc && h->type == NETP_HELLO ? s->name : "";
    int sent = answer(fd, h, rc, 0, token, name, strlen(name), oni_ms_from_now(FIRST_MS));
    return rc ? rc : sent;
}

/* Stop acquisition (best effort, as oni_destroy_ctx does before it closes
 * a driver) and destroy the served driver's context. */
static void end_driver(struct netserve *s, struct session *ss)
{
    if (atomic_load(&ss->initialized))
        (void)s->drv.write_config(ss->dctx, ONI_CONFIG_RUNNING, 0);
    s->drv.destroy_ctx(ss->dctx);
    say(s, "session %u: ended, %llu bytes read, %llu written\n", ss->id,
        (unsigned long long)atomic_load(&ss->bytes_read), (unsigned long long)atomic_load(&ss->bytes_written));
}

/* fd leaves its session: the first one out shuts the others down, the last
 * one ends it. Every one returns (and its connection is closed) only once
 * the served driver's context is gone, so a client that sees its
 * connections close may open the next session at once. */
static void leave(struct netserve *s, struct session *ss, int chan)
{
    pthread_mutex_lock(&s->lock);
    ss->fd[chan] = -1;
    if (!ss->ended) {
        ss->ended = 1;
        for (int c = 0; c < NETP_NCHAN; c++)
            if (ss->fd[c] >= 0)
                shutdown(ss->fd[c], SHUT_RDWR);
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

/* Check a request, make its call on the driver (CTRL's one at a time with
 * the GPU connection's, see gpu_block) and answer it. */
static int serve(struct netserve *s, struct session *ss, int chan, int fd, const struct netp_hdr *h,
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
    else if (chan == NETP_CHAN_CTRL) {
        pthread_mutex_lock(&ss->ctrl);
        st = call_driver(s, ss, t, q, b, extra, &value, &out_n);
        pthread_mutex_unlock(&ss->ctrl);
    } else {
        st = call_driver(s, ss, t, q, b, extra, &value, &out_n);
    }
    uint64_t deadline = oni_ms_from_now(atomic_load(&ss->timeout_ms)) + ANSWER_MARGIN_MS * 1000000ull;
    return answer(fd, h, st, value, 0, b->out, out_n, deadline);
}

void netserve_conn(struct netserve *s, int fd)
{
    struct bufs b = {0};
    struct session *ss = NULL;
    int chan = -1;
    uint64_t first = oni_ms_from_now(FIRST_MS);
    while (!atomic_load(&s->stopping)) {
        struct netp_hdr h;
        struct netp_call q;
        size_t extra;
        int rc = read_request(fd, ss ? 0 : first, &h, &q, &b, &extra);
        if (rc == ONI_EBADCONTROLLER && h.magic == NETP_MAGIC && h.version != NETP_VERSION &&
            h.type >= NETP_HELLO && h.type < NETP_NTYPE) {
            /* another onigpu: say why before closing (the value: our version),
             * in an answer of a type we know (fuzz_net found one we did not) */
            say(s, "refused a client of protocol version %u (this server: %u)\n", h.version, NETP_VERSION);
            answer(fd, &h, ONI_EBADCONTROLLER, NETP_VERSION, 0, NULL, 0, oni_ms_from_now(1000));
        }
        if (rc)
            break;
        if (ss ? serve(s, ss, chan, fd, &h, &q, &b, extra) : join(s, fd, &h, &q, &ss, &chan))
            break;
    }
    if (ss)
        leave(s, ss, chan);
    free(b.in);
    free(b.out);
}

struct conn_arg {
    struct netserve *s;
    int fd;
};

static void *conn_main(void *arg)
{
    struct conn_arg c = *(struct conn_arg *)arg;
    free(arg);
    netserve_conn(c.s, c.fd);
    pthread_mutex_lock(&c.s->lock);
    for (int i = 0; i < c.s->nconn; i++)
        if (c.s->conn[i] == c.fd)
            c.s->conn[i] = c.s->conn[--c.s->nconn];
    close(c.fd);
    pthread_cond_broadcast(&c.s->cond);
    pthread_mutex_unlock(&c.s->lock);
    return NULL;
}

/* A thread for a new connection, or the connection closed when there is
 * no room (MAXCONN) or no thread. */
static void start_conn(struct netserve *s, int fd)
{
    /* A client whose machine or network vanished sends no FIN: without
     * keepalive probes its session, and the hardware, would be held forever. */
    int one = 1, idle = KEEPALIVE_IDLE_S, intvl = 1, cnt = 3;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
    struct conn_arg *c = malloc(sizeof *c);
    pthread_mutex_lock(&s->lock);
    int room = c && s->nconn < MAXCONN && !atomic_load(&s->stopping);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (room) {
        *c = (struct conn_arg){s, fd};
        s->conn[s->nconn++] = fd;
        if (pthread_create(&t, &attr, conn_main, c)) {
            s->nconn--;
            room = 0;
        }
    }
    pthread_attr_destroy(&attr);
    pthread_mutex_unlock(&s->lock);
    if (!room) {
        free(c);
        close(fd);
    }
}

int netserve_run(struct netserve *s, unsigned max_sessions)
{
    if (s->lfd < 0)
        return ONI_EINVALSTATE;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        int done = atomic_load(&s->stopping) || (max_sessions && s->ended >= max_sessions);
        pthread_mutex_unlock(&s->lock);
        if (done)
            return 0;
        struct pollfd p[2] = {{.fd = s->lfd, .events = POLLIN}, {.fd = s->wake[0], .events = POLLIN}};
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            return ONI_EINVALSTATE;
        if (p[1].revents) {
            char buf[64];
            while (read(s->wake[0], buf, sizeof buf) > 0) {
            }
        }
        if (p[0].revents & POLLIN) {
            int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
            if (fd >= 0)
                start_conn(s, fd);
            else if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                usleep(10000); /* the connection stays queued: do not spin on it meanwhile */
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
    if (s->lfd < 0 || s->has_runner)
        return ONI_EINVALSTATE;
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

/* Bind and listen on addr; fills s->lfd and s->addr. */
static int listen_on(struct netserve *s, const char *addr, char *err, size_t err_cap)
{
    struct addrinfo *res;
    int rc = netp_resolve(addr, 1, &res);
    if (rc) {
        snprintf(err, err_cap, rc == ONI_ENOHOST ? "unknown host in '%s'" : "bad address '%s' (want host:port)", addr);
        return ONI_EPATHINVALID;
    }
    int fd = -1, one = 1;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
        if (fd < 0) {
            snprintf(err, err_cap, "cannot listen on %s: %s", addr, strerror(errno));
            continue;
        }
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, MAXCONN)) {
            snprintf(err, err_cap, "cannot listen on %s: %s", addr, strerror(errno));
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0)
        return ONI_EPATHINVALID;
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    char host[64] = "?", port[16] = "?";
    if (!getsockname(fd, (struct sockaddr *)&sa, &len))
        getnameinfo((struct sockaddr *)&sa, len, host, sizeof host, port, sizeof port,
                    NI_NUMERICHOST | NI_NUMERICSERV);
    snprintf(s->addr, sizeof s->addr, strchr(host, ':') ? "[%s]:%s" : "%s:%s", host, port);
    s->lfd = fd;
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
    s->lfd = -1;
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
        shutdown(s->conn[i], SHUT_RDWR);
    while (s->nconn > 0)
        pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
    if (s->lfd >= 0)
        close(s->lfd);
    close(s->wake[0]);
    close(s->wake[1]);
    if (s->dl)
        dlclose(s->dl);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
