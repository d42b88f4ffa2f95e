/* netserve.h - the far end of the `net` driver: serves one ONI driver (and
 * the hardware it holds) to one client at a time over TCP (netproto.h).
 * `onigpu serve` runs it; tests run it in a thread. */
#ifndef NETSERVE_H
#define NETSERVE_H

#include <stdio.h>

struct netserve;

/* Load driver `driver` (as oni_create_ctx finds drivers) and listen on addr
 * ("host:port", port 0: any free one; NULL: no socket, for netserve_conn
 * alone). Session lines go to log (NULL: none). 0, or an ONI error with a
 * message in err: ONI_EPATHINVALID (no such driver, a bad address, or the
 * address is taken), ONI_EBADALLOC. */
int netserve_open(const char *driver, const char *addr, FILE *log, struct netserve **out, char *err,
                  size_t err_cap);

/* The address it listens on, with the port it got ("" without a socket). */
const char *netserve_addr(const struct netserve *s);

/* Accept connections until netserve_stop, or until max_sessions sessions
 * have ended (0: no limit). 0, or ONI_EINVALSTATE without a socket. */
int netserve_run(struct netserve *s, unsigned max_sessions);

/* netserve_run(s, 0) on a thread of its own (tests, a benchmark's own
 * server); netserve_close stops and joins it. 0, ONI_EINVALSTATE without a
 * socket or when already started, ONI_EBADALLOC when no thread. */
int netserve_start(struct netserve *s);

/* Make netserve_run return; safe from any thread and from a signal handler. */
void netserve_stop(struct netserve *s);

/* Serve the connected socket fd (the caller closes it) until its peer
 * closes it, breaks the protocol, or the server stops. netserve_run calls it
 * on a thread per connection; the fuzzer calls it on a socket pair. */
void netserve_conn(struct netserve *s, int fd);

/* End every session (the served driver's contexts are destroyed), wait for
 * the connections to finish, unload the driver and free s. NULL is a no-op. */
void netserve_close(struct netserve *s);

#endif
