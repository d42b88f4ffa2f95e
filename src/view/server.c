/* server.c - the live view's HTTP server (view.h) on libmicrohttpd: the
 * page's files from memory, the event stream (server-sent events, one
 * thread per connection: a stream's reader may wait), and POST /control
 * with the token. Everything else is answered 404 or 405; a body too long,
 * 413; a body view_parse_control refuses, 400; no or a wrong token, or a
 * Host that names another site, 403. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "onidefs.h"
#include "view/view_int.h"

#ifndef ONIGPU_HAVE_MHD

int view_server_start(struct view *v, char *why, size_t cap)
{
    (void)v;
    snprintf(why, cap, "onigpu was built without libmicrohttpd: no live view (Debian: apt-get install "
                       "libmicrohttpd-dev, tools/deps.sh does it, then build again)");
    return ONI_EUNIMPL;
}

void view_server_stop(struct view *v)
{
    (void)v;
}

#else

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <microhttpd.h>
#include "oni/util/clock.h"

#define BODY_MAX 512

/* One request's state: a POST's body so far, or an event stream. */
struct req {
    int post;
    char body[BODY_MAX];
    size_t len;
    int too_long;
};

struct client {
    struct view *v;
    uint64_t next;      /* the next event to send */
    int hello_sent, done;
    char *buf;
    size_t len, off, cap;
};

static const char keepalive[] = ": keepalive\n\n";

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type, const void *data,
                             size_t len, enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)data, mode);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:");
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, "Allow", "GET, HEAD, POST");
    enum MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

/* A JSON error {"error": why} with that status. */
static enum MHD_Result error(struct MHD_Connection *c, unsigned status, const char *why)
{
    struct view_buf b = {0};
    view_buf_printf(&b, "{\"error\":\"");
    for (const char *s = why; *s; s++)
        view_buf_printf(&b, (*s == '"' || *s == '\\') ? "\\%c" : ((unsigned char)*s < 0x20 ? "?" : "%c"), *s);
    view_buf_printf(&b, "\"}\n");
    enum MHD_Result rc = b.oom ? MHD_NO : reply(c, status, "application/json", b.s, b.len, MHD_RESPMEM_MUST_COPY);
    view_buf_free(&b);
    return rc;
}

/* Copy the client's pending text out (what fits). */
static ssize_t drain(struct client *cl, char *out, size_t max)
{
    size_t n = cl->len - cl->off < max ? cl->len - cl->off : max;
    memcpy(out, cl->buf + cl->off, n);
    cl->off += n;
    return (ssize_t)n;
}

static int hold(struct client *cl, const char *s, size_t n)
{
    if (n > cl->cap) {
        char *b = realloc(cl->buf, n);
        if (!b)
            return -1;
        cl->buf = b;
        cl->cap = n;
    }
    memcpy(cl->buf, s, n);
    cl->len = n;
    cl->off = 0;
    return 0;
}

/* The stream's next bytes: the hello, then every event in order; a client
 * too slow for the queue skips to its oldest event (counted). Waits at
 * most 1 s (then a comment keeps the connection alive). */
static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    struct client *cl = cls;
    struct view *v = cl->v;
    if (cl->off < cl->len)
        return drain(cl, out, max);
    if (cl->done || atomic_load(&v->closing))
        return MHD_CONTENT_READER_END_OF_STREAM;
    struct view_msgq *q = &v->q;
    int rc = 0;
    pthread_mutex_lock(&q->mu);
    if (!cl->hello_sent && q->hello) {
        rc = hold(cl, q->hello, q->hello_len);
        cl->hello_sent = 1;
        cl->next = q->seq > VIEW_QUEUE ? q->seq - VIEW_QUEUE : 0; /* what is kept: the view fills at once */
    } else {
        struct timespec until;
        oni_timespec_at(oni_ms_from_now(1000), &until);
        while (cl->next == q->seq && !q->ended && !atomic_load(&v->closing) &&
               pthread_cond_timedwait(&q->cv, &q->mu, &until) == 0)
            ;
        if (q->seq - cl->next > VIEW_QUEUE) {
            atomic_fetch_add(&v->sent_lost, q->seq - cl->next - VIEW_QUEUE);
            cl->next = q->seq - VIEW_QUEUE;
        }
        if (cl->next < q->seq) {
            uint32_t k = (uint32_t)(cl->next % VIEW_QUEUE);
            rc = hold(cl, q->msg[k], q->len[k]);
            cl->next++;
            cl->done = q->ended && cl->next == q->seq;
        } else if (q->ended || atomic_load(&v->closing)) {
            cl->done = 1;
        } else {
            rc = hold(cl, keepalive, sizeof keepalive - 1);
        }
    }
    pthread_mutex_unlock(&q->mu);
    if (rc)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    if (cl->off < cl->len)
        return drain(cl, out, max);
    return MHD_CONTENT_READER_END_OF_STREAM;
}

static void stream_free(void *cls)
{
    struct client *cl = cls;
    atomic_fetch_sub(&cl->v->clients, 1);
    free(cl->buf);
    free(cl);
}

static enum MHD_Result events(struct view *v, struct MHD_Connection *c)
{
    if (atomic_fetch_add(&v->clients, 1) >= VIEW_MAX_CLIENTS) {
        atomic_fetch_sub(&v->clients, 1);
        return error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "too many event streams");
    }
    struct client *cl = calloc(1, sizeof *cl);
    struct MHD_Response *r = cl ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, cl,
                                                                    stream_free)
                                : NULL;
    if (!r) {
        free(cl);
        atomic_fetch_sub(&v->clients, 1);
        return error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    }
    cl->v = v;
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return rc;
}

/* Equal strings, in a time that does not tell how much of them matched. */
static int same(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    unsigned char d = na != nb;
    for (size_t i = 0; i < na; i++)
        d |= (unsigned char)(a[i] ^ b[i % (nb ? nb : 1)]);
    return d == 0;
}

static enum MHD_Result control(struct view *v, struct MHD_Connection *c, const struct req *rq)
{
    if (!v->token[0])
        return error(c, MHD_HTTP_FORBIDDEN, "read-only: the run was started without a view token");
    const char *tok = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Onigpu-Token");
    if (!tok || !same(tok, v->token))
        return error(c, MHD_HTTP_FORBIDDEN, "no or a wrong X-Onigpu-Token");
    if (rq->too_long)
        return error(c, MHD_HTTP_CONTENT_TOO_LARGE, "the body is longer than 512 bytes");
    struct view_control ctl;
    char why[256];
    if (view_parse_control(rq->body, rq->len, v->nchan, &ctl, why, sizeof why))
        return error(c, MHD_HTTP_BAD_REQUEST, why);
    if (view_apply(v, &ctl, why, sizeof why))
        return error(c, MHD_HTTP_CONFLICT, why);
    static const char ok[] = "{\"ok\":true}\n";
    return reply(c, MHD_HTTP_OK, "application/json", ok, sizeof ok - 1, MHD_RESPMEM_PERSISTENT);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)version;
    struct view *v = cls;
    int post = !strcmp(method, "POST"), get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    if (!*con_cls) { /* the first call: headers only */
        struct req *rq = calloc(1, sizeof *rq);
        if (!rq)
            return MHD_NO;
        rq->post = post;
        *con_cls = rq;
        return MHD_YES;
    }
    struct req *rq = *con_cls;
    if (!view_host_ok(v->cfg.host, MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host"))) {
        *upload_size = 0;
        return error(c, MHD_HTTP_FORBIDDEN, "the Host header names no address of this server");
    }
    if (*upload_size) { /* a body, in pieces: kept up to BODY_MAX */
        if (rq->len + *upload_size > BODY_MAX)
            rq->too_long = 1;
        else
            memcpy(rq->body + rq->len, upload, *upload_size), rq->len += *upload_size;
        *upload_size = 0;
        return MHD_YES;
    }
    if (post && !strcmp(url, "/control"))
        return control(v, c, rq);
    if (!get)
        return error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "GET, HEAD or POST /control only");
    if (rq->len || rq->too_long)
        return error(c, MHD_HTTP_BAD_REQUEST, "a GET with a body");
    if (!strcmp(url, "/events"))
        return events(v, c);
    if (!strcmp(url, "/index.html"))
        url = "/";
    for (size_t i = 0; i < sizeof v->files / sizeof v->files[0]; i++)
        if (v->files[i].url && !strcmp(url, v->files[i].url))
            return reply(c, MHD_HTTP_OK, v->files[i].type, v->files[i].data, v->files[i].len,
                         MHD_RESPMEM_PERSISTENT);
    return error(c, MHD_HTTP_NOT_FOUND, "no such page");
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)c, (void)toe;
    free(*con_cls);
    *con_cls = NULL;
}

int view_server_start(struct view *v, char *why, size_t cap)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(v->cfg.port)};
    if (inet_pton(AF_INET, v->cfg.host[0] ? v->cfg.host : "127.0.0.1", &sa.sin_addr) != 1) {
        snprintf(why, cap, "'%s' is no IPv4 address", v->cfg.host);
        return ONI_EINVALARG;
    }
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD, v->cfg.port, NULL, NULL, handle, v,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_LIMIT, (unsigned)(VIEW_MAX_CLIENTS + 8),
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30, MHD_OPTION_NOTIFY_COMPLETED, completed, v, MHD_OPTION_END);
    if (!d) {
        snprintf(why, cap, "cannot listen on %s:%u (in use, or not an address of this machine)",
                 v->cfg.host[0] ? v->cfg.host : "127.0.0.1", v->cfg.port);
        return ONI_EINVALARG;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    v->port = di ? di->port : v->cfg.port;
    v->mhd = d;
    return 0;
}

void view_server_stop(struct view *v)
{
    if (!v->mhd)
        return;
    atomic_store(&v->closing, 1);
    pthread_mutex_lock(&v->q.mu);
    pthread_cond_broadcast(&v->q.cv);
    pthread_mutex_unlock(&v->q.mu);
    MHD_stop_daemon(v->mhd);
    v->mhd = NULL;
}

#endif
