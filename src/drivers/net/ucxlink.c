/* ucxlink.c - message links over UCP active messages (ucxlink.h).
 *
 * UCX facts used here (UCX 1.13 API, /usr/include/ucp/api/ucp.h):
 * ucp_worker_set_am_recv_handler with UCP_AM_FLAG_WHOLE_MSG and
 * UCP_AM_FLAG_PERSISTENT_DATA delivers a message's header whole and keeps
 * an eager body until ucp_am_data_release; a rendezvous body
 * (UCP_AM_RECV_ATTR_FLAG_RNDV) is pulled with ucp_am_recv_data_nbx into the
 * receiver's buffer. Waiting is ucp_worker_arm then poll on
 * ucp_worker_get_efd; ucp_worker_signal wakes it from another thread. A
 * connection request on a listener may be accepted on another worker (UCX
 * pull request 2840), so each accepted link has a worker and thread of its
 * own. Endpoints use UCP_ERR_HANDLING_MODE_PEER: a peer that dies or closes
 * calls the error handler.
 *
 * Every link has a mutex (prog) that whoever progresses its worker holds:
 * the owner throughout a call except while it sleeps in poll, ulink_gone
 * from another thread only when the owner does not. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>
#include "oni.h"
#include "oni/util/clock.h"
#include "ucxlink.h"

#define AM_ID 1
#define AM_BYE 2 /* no header, no body: the peer closes or broke the link (before UCX would tell) */
/* Progress without sleeping this long before arming the worker's wakeup
 * (ONIGPU_NET_SPIN_US overrides it): an answer of a shared-memory peer comes
 * within microseconds, and going to sleep and waking costs tens of them. */
#define SPIN_US_DEFAULT 100u
#define SPIN_US_MAX 1000000u
#define MAXPENDING 16 /* connection requests queued on a listener */

struct ulink_ctx {
    ucp_context_h ucp;
    uint64_t spin_ns;
};

struct ulink {
    ucp_worker_h w;
    ucp_ep_h ep;
    int efd;
    size_t max_body;
    uint64_t spin_ns;
    pthread_mutex_t prog;
    _Atomic int broken; /* ulink_break, or a protocol error */
    _Atomic int failed; /* the endpoint's error handler ran */
    int bye_sent;
    int stuck; /* a request of UCX's own may still be pending: not to be destroyed */
    /* The message not yet taken (prog held). */
    int has_msg, has_body;
    int given; /* ulink_next gave its header: the body waits for ulink_take */
    uint8_t hdr[ULINK_MAXHDR];
    size_t hlen, blen;
    void *desc;
    int rndv;
    /* Operations in flight: set by their callbacks. */
    _Atomic int send_done, recv_done;
    ucs_status_t send_st, recv_st;
};

struct ulink_listener {
    struct ulink_ctx *c;
    ucp_worker_h w;
    ucp_listener_h l;
    int efd;
    size_t max_body;
    ucp_conn_request_h pending[MAXPENDING];
    int npending;
};

static int oni_of(ucs_status_t st)
{
    switch (st) {
    case UCS_OK: return 0;
    case UCS_ERR_NO_MEMORY: return ONI_EBADALLOC;
    case UCS_ERR_TIMED_OUT: return ONI_ETIMEOUT;
    case UCS_ERR_REJECTED:
    case UCS_ERR_UNREACHABLE: return ONI_ECONNREFUSED;
    default: return ONI_EDISCONNECTED;
    }
}

int ulink_ctx_open(struct ulink_ctx **out, char *err, size_t err_cap)
{
    struct ulink_ctx *c = calloc(1, sizeof *c);
    ucp_config_t *cfg = NULL;
    if (!c) {
        snprintf(err, err_cap, "out of memory");
        return ONI_EBADALLOC;
    }
    ucp_params_t p = {.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED,
                      .features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP,
                      .mt_workers_shared = 1};
    ucs_status_t st = ucp_config_read(NULL, NULL, &cfg);
    /* UCX 1.13 leaves shared memory out of endpoints that ask for peer
     * error handling unless told (openucx/ucx issue 8477); the user's
     * UCX_MM_ERROR_HANDLING still decides. */
    const char *mm = getenv("UCX_MM_ERROR_HANDLING"), *tls = getenv("UCX_TLS");
    int shm = !tls || !*tls || strstr(tls, "sm") || strstr(tls, "posix") || strstr(tls, "sysv") ||
              strstr(tls, "mm") || strstr(tls, "all") || strchr(tls, '^');
    if (st == UCS_OK && (!mm || !*mm) && shm)
        ucp_config_modify(cfg, "MM_ERROR_HANDLING", "y");
    /* A peer that vanishes without closing (its machine lost power) is found
     * by UCX's keepalive: every 2 s here rather than UCX's 20 s, unless the
     * user's UCX_KEEPALIVE_INTERVAL says otherwise. */
    const char *ka = getenv("UCX_KEEPALIVE_INTERVAL");
    if (st == UCS_OK && (!ka || !*ka))
        ucp_config_modify(cfg, "KEEPALIVE_INTERVAL", "2s");
    if (st == UCS_OK) {
        st = ucp_init(&p, cfg, &c->ucp);
        ucp_config_release(cfg);
    }
    if (st != UCS_OK) {
        snprintf(err, err_cap, "UCX: %s", ucs_status_string(st));
        free(c);
        return ONI_EBADALLOC;
    }
    const char *spin = getenv("ONIGPU_NET_SPIN_US");
    char *end;
    unsigned long us = spin && *spin ? strtoul(spin, &end, 10) : SPIN_US_DEFAULT;
    if (spin && *spin && (*end || us > SPIN_US_MAX))
        us = SPIN_US_DEFAULT; /* not a count of microseconds: docs/net.md says what it takes */
    c->spin_ns = (uint64_t)us * 1000u;
    *out = c;
    return 0;
}

void ulink_ctx_close(struct ulink_ctx *c)
{
    if (!c)
        return;
    ucp_cleanup(c->ucp);
    free(c);
}

static ucs_status_t on_am(void *arg, const void *header, size_t header_length, void *data, size_t length,
                          const ucp_am_recv_param_t *param)
{
    struct ulink *l = arg;
    int keep = (param->recv_attr & (UCP_AM_RECV_ATTR_FLAG_DATA | UCP_AM_RECV_ATTR_FLAG_RNDV)) != 0;
    if (l->has_msg || header_length > ULINK_MAXHDR || length > l->max_body || (length && !keep)) {
        atomic_store(&l->broken, 1); /* out of turn, or larger than the link takes */
        return UCS_OK;                /* UCX drops the body */
    }
    memcpy(l->hdr, header, header_length);
    l->hlen = header_length;
    l->blen = length;
    l->desc = length ? data : NULL;
    l->rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    l->has_msg = 1;
    l->has_body = length != 0;
    return length ? UCS_INPROGRESS : UCS_OK;
}

static ucs_status_t on_bye(void *arg, const void *header, size_t header_length, void *data, size_t length,
                           const ucp_am_recv_param_t *param)
{
    (void)header;
    (void)header_length;
    (void)data;
    (void)length;
    (void)param;
    struct ulink *l = arg;
    atomic_store(&l->failed, 1);
    return UCS_OK;
}

static void on_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    (void)ep;
    (void)status;
    struct ulink *l = arg;
    atomic_store(&l->failed, 1);
}

static void on_sent(void *req, ucs_status_t st, void *user)
{
    (void)req;
    struct ulink *l = user;
    l->send_st = st;
    atomic_store(&l->send_done, 1);
}

static void on_received(void *req, ucs_status_t st, size_t length, void *user)
{
    (void)req;
    (void)length;
    struct ulink *l = user;
    l->recv_st = st;
    atomic_store(&l->recv_done, 1);
}

/* A link on a worker of its own, without its endpoint yet. */
static int link_new(struct ulink_ctx *c, size_t max_body, struct ulink **out)
{
    struct ulink *l = calloc(1, sizeof *l);
    if (!l)
        return ONI_EBADALLOC;
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SERIALIZED};
    if (ucp_worker_create(c->ucp, &wp, &l->w) != UCS_OK) {
        free(l);
        return ONI_EBADALLOC;
    }
    ucp_am_handler_param_t hp = {.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                                               UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG,
                                 .id = AM_ID,
                                 .flags = UCP_AM_FLAG_WHOLE_MSG | UCP_AM_FLAG_PERSISTENT_DATA,
                                 .cb = on_am,
                                 .arg = l};
    ucp_am_handler_param_t bp = hp;
    bp.id = AM_BYE;
    bp.flags = UCP_AM_FLAG_WHOLE_MSG;
    bp.cb = on_bye;
    if (ucp_worker_set_am_recv_handler(l->w, &hp) != UCS_OK || ucp_worker_set_am_recv_handler(l->w, &bp) != UCS_OK ||
        ucp_worker_get_efd(l->w, &l->efd) != UCS_OK) {
        ucp_worker_destroy(l->w);
        free(l);
        return ONI_EBADALLOC;
    }
    l->max_body = max_body;
    l->spin_ns = c->spin_ns;
    pthread_mutex_init(&l->prog, NULL);
    *out = l;
    return 0;
}

static void link_free(struct ulink *l)
{
    ucp_worker_destroy(l->w);
    pthread_mutex_destroy(&l->prog);
    free(l);
}

/* Tell the peer the link is done, once (prog held): a short message that
 * goes out at once or within a few milliseconds, or not at all. */
static void send_bye(struct ulink *l)
{
    if (l->bye_sent || !l->ep || atomic_load(&l->failed))
        return;
    l->bye_sent = 1;
    ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_AM_SEND_FLAG_EAGER};
    void *req = ucp_am_send_nbx(l->ep, AM_BYE, NULL, 0, NULL, 0, &rp);
    if (!req || UCS_PTR_IS_ERR(req))
        return;
    uint64_t until = oni_ms_from_now(10);
    while (ucp_request_check_status(req) == UCS_INPROGRESS && oni_now_ns() < until)
        ucp_worker_progress(l->w);
    ucp_request_free(req);
}

static int link_state(struct ulink *l)
{
    if (atomic_load(&l->broken))
        return l->has_msg ? ONI_EBADCONTROLLER : ONI_EDISCONNECTED;
    return atomic_load(&l->failed) ? ONI_EDISCONNECTED : 0;
}

/* Progress l (prog held) until done(l) or an error, or until deadline:
 * spin a little, then sleep on the worker's descriptor (prog released). */
static int wait_for(struct ulink *l, int (*done)(struct ulink *), uint64_t deadline)
{
    uint64_t spin_until = oni_now_ns() + l->spin_ns;
    for (;;) {
        while (ucp_worker_progress(l->w)) {
        }
        if (done(l))
            return 0;
        int rc = link_state(l);
        if (rc && atomic_load(&l->broken))
            send_bye(l);
        if (rc)
            return rc;
        uint64_t now = oni_now_ns();
        if (deadline && now >= deadline)
            return ONI_ETIMEOUT;
        if (now < spin_until)
            continue;
        ucs_status_t st = ucp_worker_arm(l->w);
        if (st == UCS_ERR_BUSY)
            continue;
        if (st != UCS_OK)
            return ONI_EDISCONNECTED;
        int ms = 100; /* bounded: a wakeup lost to a race costs no more than this */
        if (deadline) {
            uint64_t left = (deadline - now + 999999u) / 1000000u;
            ms = left < (uint64_t)ms ? (int)left : ms;
        }
        struct pollfd p = {.fd = l->efd, .events = POLLIN};
        pthread_mutex_unlock(&l->prog);
        poll(&p, 1, ms);
        pthread_mutex_lock(&l->prog);
    }
}

static int sent(struct ulink *l) { return atomic_load(&l->send_done); }
static int received(struct ulink *l) { return atomic_load(&l->recv_done); }
static int has_msg(struct ulink *l) { return l->has_msg; }

int ulink_connect(struct ulink_ctx *c, const struct sockaddr *sa, socklen_t len, size_t max_body,
                  uint64_t deadline, struct ulink **out)
{
    struct ulink *l;
    int rc = link_new(c, max_body, &l);
    if (rc)
        return rc;
    ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                                        UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER,
                          .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
                          .sockaddr = {.addr = sa, .addrlen = len},
                          .err_mode = UCP_ERR_HANDLING_MODE_PEER,
                          .err_handler = {.cb = on_error, .arg = l}};
    ucs_status_t st = ucp_ep_create(l->w, &ep, &l->ep);
    if (st != UCS_OK) {
        link_free(l);
        return oni_of(st);
    }
    /* UCX connects in the background; a send before the server accepted
     * waits for it. Wait here for the wire-up so that a refused connection
     * is told as such: an empty flush completes once the lanes are up. */
    pthread_mutex_lock(&l->prog);
    ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
                              .cb.send = on_sent,
                              .user_data = l};
    atomic_store(&l->send_done, 0);
    void *req = ucp_ep_flush_nbx(l->ep, &rp);
    if (UCS_PTR_IS_ERR(req)) {
        rc = oni_of(UCS_PTR_STATUS(req));
    } else if (req) {
        rc = wait_for(l, sent, deadline);
        if (!rc && l->send_st != UCS_OK)
            rc = oni_of(l->send_st);
        l->stuck = !atomic_load(&l->send_done); /* the wire-up did not finish */
        ucp_request_free(req);
    }
    if (!rc && atomic_load(&l->failed))
        rc = ONI_ECONNREFUSED;
    pthread_mutex_unlock(&l->prog);
    if (rc) {
        ulink_close(l, oni_ms_from_now(100));
        return rc == ONI_EDISCONNECTED ? ONI_ECONNREFUSED : rc;
    }
    *out = l;
    return 0;
}

int ulink_send(struct ulink *l, const void *hdr, size_t hlen, const void *body, size_t blen, uint64_t deadline)
{
    if (hlen > ULINK_MAXHDR)
        return ONI_EINVALARG;
    pthread_mutex_lock(&l->prog);
    int rc = link_state(l);
    if (rc) {
        pthread_mutex_unlock(&l->prog);
        return rc == ONI_EBADCONTROLLER ? ONI_EDISCONNECTED : rc;
    }
    ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                                              UCP_OP_ATTR_FIELD_FLAGS,
                              .cb.send = on_sent,
                              .user_data = l,
                              .flags = UCP_AM_SEND_FLAG_REPLY};
    atomic_store(&l->send_done, 0);
    void *req = ucp_am_send_nbx(l->ep, AM_ID, hdr, hlen, body, blen, &rp);
    if (UCS_PTR_IS_ERR(req)) {
        rc = oni_of(UCS_PTR_STATUS(req));
    } else if (req) {
        rc = wait_for(l, sent, deadline);
        if (!rc && l->send_st != UCS_OK)
            rc = oni_of(l->send_st);
        ucp_request_free(req); /* one not done is finished by UCX as the link closes */
    }
    if (rc)
        atomic_store(&l->broken, 1);
    pthread_mutex_unlock(&l->prog);
    return rc == ONI_EBADCONTROLLER ? ONI_EDISCONNECTED : rc;
}

int ulink_next(struct ulink *l, void *hdr, size_t hcap, size_t *hlen, size_t *blen, uint64_t deadline)
{
    pthread_mutex_lock(&l->prog);
    int rc = l->given ? ONI_EINVALSTATE : 0; /* the last one's body not taken */
    if (!rc && !l->has_msg)
        rc = wait_for(l, has_msg, deadline);
    /* a message that came before the peer's end is still given */
    if (!rc && (rc = atomic_load(&l->broken) ? link_state(l) : 0) == 0) {
        size_t n = l->hlen < hcap ? l->hlen : hcap;
        memcpy(hdr, l->hdr, n);
        *hlen = l->hlen;
        *blen = l->blen;
        if (!l->has_body)
            l->has_msg = 0;
        l->given = l->has_body;
    }
    pthread_mutex_unlock(&l->prog);
    return rc;
}

int ulink_take(struct ulink *l, void *dst, uint64_t deadline)
{
    pthread_mutex_lock(&l->prog);
    int rc = l->given ? 0 : ONI_EINVALSTATE;
    if (rc) {
        pthread_mutex_unlock(&l->prog);
        return rc;
    }
    void *desc = l->desc;
    l->has_msg = l->has_body = l->given = 0;
    l->desc = NULL;
    if (!dst) {
        ucp_am_data_release(l->w, desc);
    } else if (!l->rndv) {
        memcpy(dst, desc, l->blen);
        ucp_am_data_release(l->w, desc);
    } else {
        ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                                                  UCP_OP_ATTR_FIELD_MEMORY_TYPE,
                                  .cb.recv_am = on_received,
                                  .user_data = l,
                                  .memory_type = UCS_MEMORY_TYPE_HOST};
        atomic_store(&l->recv_done, 0);
        void *req = ucp_am_recv_data_nbx(l->w, desc, dst, l->blen, &rp);
        if (UCS_PTR_IS_ERR(req)) {
            rc = oni_of(UCS_PTR_STATUS(req));
        } else if (req) {
            rc = wait_for(l, received, deadline);
            if (!rc && l->recv_st != UCS_OK)
                rc = oni_of(l->recv_st);
            if (!atomic_load(&l->recv_done))
                ucp_request_cancel(l->w, req);
            ucp_request_free(req);
        }
    }
    if (rc)
        atomic_store(&l->broken, 1);
    pthread_mutex_unlock(&l->prog);
    return rc == ONI_EBADCONTROLLER ? ONI_EDISCONNECTED : rc;
}

void ulink_break(struct ulink *l)
{
    atomic_store(&l->broken, 1);
    if (!pthread_mutex_trylock(&l->prog)) { /* else its owner, in a call, tells the peer */
        send_bye(l);
        pthread_mutex_unlock(&l->prog);
    }
    ucp_worker_signal(l->w);
}

int ulink_gone(struct ulink *l)
{
    if (!pthread_mutex_trylock(&l->prog)) { /* the owner is not in a call: look for the peer's end */
        while (ucp_worker_progress(l->w)) {
        }
        pthread_mutex_unlock(&l->prog);
    }
    return atomic_load(&l->broken) || atomic_load(&l->failed);
}

/* UCX's lane lines (ucp_ep_print_info) name "md/transport" pairs, e.g.
 * "lane[0]:  2:posix/memory.0 md[2] ...": the transports, once each. */
int ulink_transports(struct ulink *l, char *buf, size_t cap)
{
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    if (!f)
        return ONI_EBADALLOC;
    pthread_mutex_lock(&l->prog);
    ucp_ep_print_info(l->ep, f);
    pthread_mutex_unlock(&l->prog);
    fclose(f);
    size_t used = 0;
    int rc = 0;
    if (cap)
        buf[0] = 0;
    for (char *p = text; p && (p = strstr(p, "lane[")); p++) {
        char *colon = strchr(p, ':');
        char *slash = colon ? strchr(colon, '/') : NULL;
        char *nl = strchr(p, '\n');
        if (!slash || (nl && slash > nl))
            continue;
        char *tl = slash + 1;
        size_t tn = strcspn(tl, "/ \n");
        /* the transport's name stands between "idx:" and "/": back up to it */
        char *start = slash;
        while (start > colon + 1 && start[-1] != ':' && start[-1] != ' ')
            start--;
        (void)tl;
        (void)tn;
        size_t len = (size_t)(slash - start);
        char name[32];
        if (!len || len >= sizeof name)
            continue;
        memcpy(name, start, len);
        name[len] = 0;
        int dup = 0;
        for (char *q = buf; q && *q;) {
            size_t ql = strcspn(q, ",");
            if (ql == len && !memcmp(q, name, len))
                dup = 1;
            q += ql + (q[ql] == ',');
        }
        if (dup)
            continue;
        if (used + len + 2 > cap) {
            rc = ONI_EBUFFERSIZE;
            break;
        }
        used += (size_t)snprintf(buf + used, cap - used, "%s%s", used ? "," : "", name);
    }
    free(text);
    return rc;
}

void ulink_close(struct ulink *l, uint64_t deadline)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->prog);
    if (l->has_body)
        ucp_am_data_release(l->w, l->desc);
    l->has_msg = l->has_body = l->given = 0;
    int done = !l->stuck;
    send_bye(l); /* the peer's waiting call returns at once */
    if (l->ep && done) {
        /* Forced: a close that flushes first waits for the peer to
         * progress, which an idle or stuck peer may never do. What the
         * protocol needs delivered was answered before (netserve.c's
         * linger covers the refusals). */
        ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK |
                                                  UCP_OP_ATTR_FIELD_USER_DATA,
                                  .flags = UCP_EP_CLOSE_FLAG_FORCE,
                                  .cb.send = on_sent,
                                  .user_data = l};
        atomic_store(&l->send_done, 0);
        void *req = ucp_ep_close_nbx(l->ep, &rp);
        if (req && !UCS_PTR_IS_ERR(req)) {
            while (!atomic_load(&l->send_done) && oni_now_ns() < deadline)
                ucp_worker_progress(l->w);
            done = atomic_load(&l->send_done);
            ucp_request_free(req);
        }
    }
    pthread_mutex_unlock(&l->prog);
    /* A link whose wire-up or close did not finish is left to UCX: UCX 1.13
     * aborts when a worker is destroyed with a request still pending on an
     * endpoint (ucp_ep.c, "should have been flushed"). Only a peer that
     * takes a connection and never progresses it does that. */
    if (done)
        link_free(l);
}

static void on_conn(ucp_conn_request_h req, void *arg)
{
    struct ulink_listener *ls = arg;
    if (ls->npending < MAXPENDING)
        ls->pending[ls->npending++] = req;
    else
        ucp_listener_reject(ls->l, req);
}

int ulink_listen(struct ulink_ctx *c, const struct sockaddr *sa, socklen_t len, size_t max_body,
                 struct ulink_listener **out, char *err, size_t err_cap)
{
    struct ulink_listener *ls = calloc(1, sizeof *ls);
    if (!ls) {
        snprintf(err, err_cap, "out of memory");
        return ONI_EBADALLOC;
    }
    ls->c = c;
    ls->max_body = max_body;
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
    ucs_status_t st = ucp_worker_create(c->ucp, &wp, &ls->w);
    if (st == UCS_OK && (st = ucp_worker_get_efd(ls->w, &ls->efd)) == UCS_OK) {
        ucp_listener_params_t lp = {.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
                                                  UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
                                    .sockaddr = {.addr = sa, .addrlen = len},
                                    .conn_handler = {.cb = on_conn, .arg = ls}};
        st = ucp_listener_create(ls->w, &lp, &ls->l);
    }
    if (st != UCS_OK) {
        snprintf(err, err_cap, "cannot listen: %s", ucs_status_string(st));
        if (ls->w)
            ucp_worker_destroy(ls->w);
        free(ls);
        return ONI_EPATHINVALID;
    }
    *out = ls;
    return 0;
}

int ulink_listener_addr(struct ulink_listener *ls, struct sockaddr_storage *sa, socklen_t *len)
{
    ucp_listener_attr_t a = {.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR};
    if (ucp_listener_query(ls->l, &a) != UCS_OK)
        return ONI_EINVALSTATE;
    *sa = a.sockaddr;
    *len = a.sockaddr.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    return 0;
}

int ulink_listener_fd(struct ulink_listener *ls) { return ls->efd; }

int ulink_accept(struct ulink_listener *ls, struct ulink **out)
{
    *out = NULL;
    while (ucp_worker_progress(ls->w)) {
    }
    if (!ls->npending) {
        ucp_worker_arm(ls->w); /* UCS_ERR_BUSY: there is more; the caller's poll returns at once */
        while (ucp_worker_progress(ls->w)) {
        }
        if (!ls->npending)
            return 0;
    }
    ucp_conn_request_h req = ls->pending[0];
    memmove(ls->pending, ls->pending + 1, (size_t)--ls->npending * sizeof *ls->pending);
    struct ulink *l;
    int rc = link_new(ls->c, ls->max_body, &l);
    if (rc) {
        ucp_listener_reject(ls->l, req);
        return rc;
    }
    ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                                        UCP_EP_PARAM_FIELD_ERR_HANDLER,
                          .conn_request = req,
                          .err_mode = UCP_ERR_HANDLING_MODE_PEER,
                          .err_handler = {.cb = on_error, .arg = l}};
    if (ucp_ep_create(l->w, &ep, &l->ep) != UCS_OK) {
        link_free(l);
        return 0; /* the request is gone with the failed endpoint: the client sees it refused */
    }
    *out = l;
    return 0;
}

void ulink_listener_close(struct ulink_listener *ls)
{
    if (!ls)
        return;
    for (int i = 0; i < ls->npending; i++)
        ucp_listener_reject(ls->l, ls->pending[i]);
    ucp_listener_destroy(ls->l);
    ucp_worker_destroy(ls->w);
    free(ls);
}
