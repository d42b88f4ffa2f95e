/* netserve.h - the far end of the `net` driver: serves one ONI driver (and
 * the hardware it holds) to one client at a time over UCX (netproto.h,
 * ucxlink.h). `onigpu serve` runs it; tests run it in a thread. */
#ifndef NETSERVE_H
#define NETSERVE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct netserve;

/* Load driver `driver` (as oni_create_ctx finds drivers) and listen on addr
 * ("host:port", port 0: any free one; NULL: no listener, for netserve_conn
 * alone). Session lines go to log (NULL: none). 0, or an ONI error with a
 * message in err: ONI_EPATHINVALID (no such driver, a bad address, or the
 * address is taken), ONI_EBADALLOC (also: UCX has no transport). */
int netserve_open(const char *driver, const char *addr, FILE *log, struct netserve **out, char *err,
                  size_t err_cap);

/* The address it listens on, with the port it got ("" without a listener). */
const char *netserve_addr(const struct netserve *s);

/* The shared secret a client's HELLO must carry (n bytes, at most
 * NETP_MAXSECRET; 0: none), set before netserve_run or netserve_start. 0, or
 * ONI_EINVALARG (too long, or the server runs). */
int netserve_set_secret(struct netserve *s, const void *secret, size_t n);

/* Whether s may serve: 0, or ONI_EACCESS when it listens beyond the
 * loopback without a secret (netserve_run and netserve_start refuse then). */
int netserve_ready(const struct netserve *s);

/* Accept connections until netserve_stop, or until max_sessions sessions
 * have ended (0: no limit). 0, ONI_EINVALSTATE without a listener, or
 * ONI_EACCESS, at once, when it listens beyond the loopback without a
 * secret. */
int netserve_run(struct netserve *s, unsigned max_sessions);

/* netserve_run(s, 0) on a thread of its own (tests, a benchmark's own
 * server); netserve_close stops and joins it. 0, ONI_EINVALSTATE without a
 * listener or when already started, ONI_EACCESS as netserve_run, or
 * ONI_EBADALLOC when no thread. */
int netserve_start(struct netserve *s);

/* Make netserve_run return; safe from any thread and from a signal handler. */
void netserve_stop(struct netserve *s);

/* One connection's messages, as ucxlink.h's calls on a link (arg): the
 * server runs them on its links, the fuzzer on bytes of its own. */
struct netserve_io {
    int (*next)(void *arg, void *hdr, size_t cap, size_t *hlen, size_t *blen, uint64_t deadline);
    int (*take)(void *arg, void *dst, uint64_t deadline);
    int (*send)(void *arg, const void *hdr, size_t hlen, const void *body, size_t blen, uint64_t deadline);
    int (*gone)(void *arg);
    void (*brk)(void *arg);
    void *arg;
};

/* Serve connection io (the caller closes it) until its peer closes it,
 * breaks the protocol, or the server stops. netserve_run calls it on a
 * thread per connection; io stays valid until it returns. */
void netserve_conn(struct netserve *s, const struct netserve_io *io);

/* End every session (the served driver's contexts are destroyed), wait for
 * the connections to finish, unload the driver and free s. NULL is a no-op. */
void netserve_close(struct netserve *s);

#endif
