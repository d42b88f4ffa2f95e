/* client.c - plain-socket HTTP for the benchmark and tests (client.h). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include "oni/util/clock.h"
#include "view/client.h"

static int dial(const char *host, uint16_t port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
        return -1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
        close(fd);
        return -1;
    }
    return fd;
}

static int send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k, n -= (size_t)k;
    }
    return 0;
}

static int status_of(const char *buf)
{
    int st = -1;
    return sscanf(buf, "HTTP/1.%*d %d", &st) == 1 ? st : -1;
}

int view_http(const char *host, uint16_t port, const char *req, size_t n, char *buf, size_t cap,
              uint32_t timeout_ms)
{
    buf[0] = 0;
    int fd = dial(host, port);
    if (fd < 0)
        return -1;
    size_t len = 0;
    uint64_t until = oni_ms_from_now(timeout_ms);
    if (!send_all(fd, req, n))
        for (uint32_t left; (left = oni_ms_left(until)) > 0 && len + 1 < cap;) {
            struct pollfd p = {fd, POLLIN, 0};
            if (poll(&p, 1, (int)left) <= 0)
                break;
            ssize_t k = recv(fd, buf + len, cap - 1 - len, 0);
            if (k <= 0)
                break;
            len += (size_t)k;
        }
    buf[len] = 0;
    close(fd);
    return status_of(buf);
}

/* The stream's event names as they come, across reads: "event: NAME\n". */
struct scan {
    size_t m;       /* characters of "event: " matched */
    int in_name;
    size_t n;
    char name[16];
};

static void scan(struct view_reader *r, struct scan *sc, const char *p, size_t len)
{
    static const char pat[] = "event: ";
    for (size_t i = 0; i < len; i++) {
        char c = p[i];
        if (sc->in_name) {
            if (c != '\n') {
                if (sc->n < sizeof sc->name - 1)
                    sc->name[sc->n++] = c;
                continue;
            }
            sc->name[sc->n] = 0;
            if (!strcmp(sc->name, "tick"))
                atomic_fetch_add(&r->ticks, 1);
            else if (!strcmp(sc->name, "end"))
                atomic_store(&r->ended, 1);
            sc->in_name = 0, sc->m = 0;
        } else if (c == pat[sc->m]) {
            if (++sc->m == sizeof pat - 1)
                sc->in_name = 1, sc->n = 0;
        } else {
            sc->m = c == pat[0];
        }
    }
}

static void *reader_main(void *arg)
{
    struct view_reader *r = arg;
    int fd = dial(r->host, r->port);
    char req[160];
    int n = snprintf(req, sizeof req, "GET /events HTTP/1.1\r\nHost: %s:%u\r\nAccept: text/event-stream\r\n\r\n",
                     r->host, r->port);
    if (fd < 0 || send_all(fd, req, (size_t)n)) {
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    char buf[16384];
    struct scan sc = {0};
    while (!atomic_load(&r->stop)) {
        struct pollfd p = {fd, POLLIN, 0};
        if (r->stall) { /* connected, reading nothing: the server's sends back up */
            struct timespec ts = {0, 20000000};
            nanosleep(&ts, NULL);
            continue;
        }
        if (poll(&p, 1, 50) <= 0)
            continue;
        ssize_t k = recv(fd, buf, sizeof buf - 1, 0);
        if (k <= 0)
            break;
        if (r->status < 0) {
            buf[k] = 0;
            r->status = status_of(buf);
        }
        atomic_fetch_add(&r->bytes, (uint64_t)k);
        scan(r, &sc, buf, (size_t)k);
    }
    close(fd);
    return NULL;
}

int view_reader_start(struct view_reader *r)
{
    r->status = -1;
    pthread_t *t = malloc(sizeof *t);
    if (!t)
        return ENOMEM;
    int rc = pthread_create(t, NULL, reader_main, r);
    if (rc) {
        free(t);
        return rc;
    }
    r->thread = t;
    r->started = 1;
    return 0;
}

void view_reader_join(struct view_reader *r)
{
    if (!r->started)
        return;
    atomic_store(&r->stop, 1);
    pthread_join(*(pthread_t *)r->thread, NULL);
    free(r->thread);
    r->thread = NULL;
    r->started = 0;
}
