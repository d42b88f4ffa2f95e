/* client.h - the live view's own HTTP client, over plain sockets: one
 * request and its whole answer, and a reader of the event stream as a
 * browser's EventSource reads it. For `onigpu bench view` (its connected
 * clients) and the tests; the page itself is the browser's. */
#ifndef VIEW_CLIENT_H
#define VIEW_CLIENT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Send the n bytes of req to host:port (dotted IPv4) and read the answer
 * into buf (cap bytes, NUL-terminated, cut at cap - 1) until the server
 * closes or timeout_ms pass. The HTTP status (e.g. 200, 404), or -1 when
 * no connection or no status line came. */
int view_http(const char *host, uint16_t port, const char *req, size_t n, char *buf, size_t cap,
              uint32_t timeout_ms);

/* A reader of GET /events, on a thread of its own. */
struct view_reader {
    char host[64];
    uint16_t port;
    int stall;                   /* 1: connect, then read nothing (a frozen browser) */
    _Atomic int stop;            /* set to end it */
    _Atomic uint64_t bytes, ticks; /* read so far; "event: tick" lines seen */
    _Atomic int ended;           /* the "end" event came */
    int status;                  /* the answer's status (-1: none) */
    int started;
    void *thread;                /* pthread_t, when started */
};

/* Start r's thread (r->host, port, stall set). 0, or an errno. */
int view_reader_start(struct view_reader *r);
/* Stop r (stop set, the socket shut) and wait for its thread. */
void view_reader_join(struct view_reader *r);

#endif
