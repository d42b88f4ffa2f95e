/* ucxlink.h - one message channel between two processes over UCX (UCP),
 * which picks the transport (shared memory on one host, TCP, verbs) by
 * itself or as UCX_TLS says. The net driver (netdrv.c) and its server
 * (netserve.c) carry their protocol (netproto.h) on links; nothing here
 * knows that protocol.
 *
 * A link is one UCP worker with one endpoint, used by one thread at a time
 * (its owner), except ulink_break and ulink_gone, which any thread may call.
 * A message is one UCP active message: a small header (at most
 * ULINK_MAXHDR bytes, delivered whole) and a body of any size up to the
 * link's limit, which UCX sends eagerly or by rendezvous (the receiver's
 * ulink_take pulls it straight into its buffer). The protocol on top is
 * request and answer, so a link holds at most one message not yet taken; a
 * second one is a protocol error, which breaks the link.
 *
 * Errors are ONI codes: ONI_ETIMEOUT (the deadline passed; the link is
 * broken only where the call says so), ONI_EDISCONNECTED (the peer went,
 * closed, or the link was broken), ONI_EBADCONTROLLER (the peer broke the
 * rules of the link), ONI_EBADALLOC, ONI_ECONNREFUSED. Deadlines are
 * oni_now_ns() times, 0: none. */
#ifndef UCXLINK_H
#define UCXLINK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define ULINK_MAXHDR 64u

struct ulink_ctx;
struct ulink;
struct ulink_listener;

/* A UCP context for links (active messages, wakeup): 0, or ONI_EBADALLOC
 * with a message in err (no UCX transport could be opened). */
int ulink_ctx_open(struct ulink_ctx **out, char *err, size_t err_cap);

/* Free a context whose links and listeners are all closed. NULL: no-op. */
void ulink_ctx_close(struct ulink_ctx *c);

/* A link to the listener at sa, connected by deadline; bodies of at most
 * max_body bytes come in (a larger one breaks the link). 0, ONI_ECONNREFUSED
 * (nobody listens there), ONI_ETIMEOUT, ONI_EDISCONNECTED, ONI_EBADALLOC. */
int ulink_connect(struct ulink_ctx *c, const struct sockaddr *sa, socklen_t len, size_t max_body,
                  uint64_t deadline, struct ulink **out);

/* Send one message (hdr of hlen <= ULINK_MAXHDR bytes, then body) and wait
 * until UCX is done with both buffers. 0 or the error; any error but
 * ONI_EBADALLOC breaks the link (a message half sent cannot be told from
 * the next). */
int ulink_send(struct ulink *l, const void *hdr, size_t hlen, const void *body, size_t blen, uint64_t deadline);

/* Wait for the next message: its header into hdr (hcap bytes, at least
 * ULINK_MAXHDR), *hlen and *blen its sizes. The body waits for ulink_take.
 * 0, ONI_ETIMEOUT (the link stays whole), ONI_EDISCONNECTED,
 * ONI_EBADCONTROLLER. */
int ulink_next(struct ulink *l, void *hdr, size_t hcap, size_t *hlen, size_t *blen, uint64_t deadline);

/* The body of the message ulink_next gave, exactly blen bytes into dst
 * (NULL: dropped). 0 or the error; an error breaks the link. */
int ulink_take(struct ulink *l, void *dst, uint64_t deadline);

/* Make every call on l, waiting or to come, fail with ONI_EDISCONNECTED.
 * Any thread, any time before ulink_close. */
void ulink_break(struct ulink *l);

/* 1 once the peer has gone or l is broken. Any thread. */
int ulink_gone(struct ulink *l);

/* Which transports UCX uses for l's messages, as "posix,cma" or "tcp":
 * UCX's own names (ucx_info -d), one for each lane. 0 or ONI_EBUFFERSIZE. */
int ulink_transports(struct ulink *l, char *buf, size_t cap);

/* Close l: a whole link first delivers what it sent, by deadline; then it
 * is freed. NULL: no-op. */
void ulink_close(struct ulink *l, uint64_t deadline);

/* Listen on sa (port 0: a free one), its links taking bodies of at most
 * max_body bytes. 0, or ONI_EPATHINVALID (taken, or not an address here)
 * with a message in err. */
int ulink_listen(struct ulink_ctx *c, const struct sockaddr *sa, socklen_t len, size_t max_body,
                 struct ulink_listener **out, char *err, size_t err_cap);

/* The address listened on, with its port. */
int ulink_listener_addr(struct ulink_listener *ls, struct sockaddr_storage *sa, socklen_t *len);

/* A descriptor that polls readable when ulink_accept may have work. */
int ulink_listener_fd(struct ulink_listener *ls);

/* Progress the listener; a connection that came is accepted as a new link
 * in *out (each on a worker of its own), else *out is NULL. 0 or
 * ONI_EBADALLOC. Call again until *out is NULL, then poll the descriptor. */
int ulink_accept(struct ulink_listener *ls, struct ulink **out);

/* Stop listening and free ls (connections not accepted are refused). */
void ulink_listener_close(struct ulink_listener *ls);

#endif
