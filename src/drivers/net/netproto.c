/* netproto.c - message checks and socket I/O with deadlines, shared by the
 * net driver and its server (netproto.h). */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include "netproto.h"
#include "onigpu.h"
#include "oni.h"
#include "oni/util/clock.h"

int netp_names_memory(int opt)
{
    return opt == ONI_DRV_PIN || opt == ONI_DRV_UNPIN || opt == ONI_DRV_READ || opt == ONI_DRV_WRITE ||
           opt == ONI_DRV_READ_ASYNC || opt == ONI_DRV_WRITE_ASYNC;
}

int netp_grow(uint8_t **buf, size_t *cap, size_t n)
{
    if (n <= *cap)
        return 0;
    uint8_t *p = realloc(*buf, n);
    if (!p)
        return ONI_EBADALLOC;
    *buf = p;
    *cap = n;
    return 0;
}

size_t netp_max_extra(uint16_t t, int answer)
{
    switch (t) {
    case NETP_HELLO:
        return answer ? NETP_MAXNAME : 0;
    case NETP_READ:
    case NETP_GPU_READ:
        return answer ? NETP_MAXXFER : 0;
    case NETP_WRITE:
    case NETP_GPU_WRITE:
        return answer ? 0 : NETP_MAXXFER;
    case NETP_SET_OPT_CALLBACK:
    case NETP_SET_OPT:
        return answer ? 0 : NETP_MAXOPT;
    case NETP_GET_OPT:
        return answer ? NETP_MAXOPT : 0;
    default:
        return 0;
    }
}

int netp_check_hdr(const struct netp_hdr *h, int answer)
{
    if (h->magic != NETP_MAGIC || h->version != NETP_VERSION)
        return ONI_EBADCONTROLLER;
    uint16_t t = h->type;
    if (!!(t & NETP_REPLY) != !!answer)
        return ONI_EINVALARG;
    t &= (uint16_t)~NETP_REPLY;
    if (t < NETP_HELLO || t >= NETP_NTYPE)
        return ONI_EINVALARG;
    size_t fixed = answer ? sizeof(struct netp_answer) : sizeof(struct netp_call);
    if (h->len < fixed || h->len - fixed > netp_max_extra(t, answer))
        return ONI_EINVALARG;
    return 0;
}

int netp_wait(int fd, short events, uint64_t deadline_ns)
{
    for (;;) {
        int ms = -1;
        if (deadline_ns) {
            uint32_t left = oni_ms_left(deadline_ns);
            if (!left)
                return ONI_ETIMEOUT;
            ms = left > INT32_MAX ? INT32_MAX : (int)left;
        }
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, ms);
        if (r > 0)
            return 0; /* POLLHUP and POLLERR too: the next send or recv says which */
        if (r < 0 && errno != EINTR)
            return ONI_EDISCONNECTED;
    }
}

int netp_send(int fd, struct iovec *iov, int niov, uint64_t deadline_ns)
{
    while (niov > 0) {
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)niov};
        ssize_t r = sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                return ONI_EDISCONNECTED;
            int rc = netp_wait(fd, POLLOUT, deadline_ns);
            if (rc)
                return rc;
            continue;
        }
        size_t sent = (size_t)r;
        while (niov > 0 && sent >= iov->iov_len) {
            sent -= iov->iov_len;
            iov++;
            niov--;
        }
        if (niov > 0) {
            iov->iov_base = (char *)iov->iov_base + sent;
            iov->iov_len -= sent;
        }
    }
    return 0;
}

int netp_recv(int fd, void *buf, size_t n, uint64_t deadline_ns)
{
    char *p = buf;
    while (n > 0) {
        ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
        if (r > 0) {
            p += r;
            n -= (size_t)r;
            continue;
        }
        if (r == 0)
            return ONI_EDISCONNECTED;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return ONI_EDISCONNECTED;
        int rc = netp_wait(fd, POLLIN, deadline_ns);
        if (rc)
            return rc;
    }
    return 0;
}

int netp_resolve(const char *addr, int passive, struct addrinfo **res)
{
    char host[256];
    const char *colon = addr ? strrchr(addr, ':') : NULL;
    if (!colon || !colon[1])
        return ONI_EBADADDR;
    size_t n = (size_t)(colon - addr);
    if (n >= 2 && addr[0] == '[' && addr[n - 1] == ']') { /* [v6]:port */
        addr++;
        n -= 2;
    } else if (memchr(addr, ':', n)) {
        return ONI_EBADADDR; /* a bare IPv6 address: its port cannot be told from it */
    }
    if (n >= sizeof host)
        return ONI_EBADADDR;
    memcpy(host, addr, n);
    host[n] = 0;
    unsigned long port = 0;
    for (const char *c = colon + 1; *c; c++) {
        if (*c < '0' || *c > '9' || (port = port * 10 + (unsigned long)(*c - '0')) > 65535)
            return ONI_EBADADDR; /* getaddrinfo would take the port modulo 65536 */
    }
    if (!port && !passive)
        return ONI_EBADADDR; /* port 0: "any" to listen on, nothing to connect to */
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0)};
    switch (getaddrinfo(n ? host : NULL, colon + 1, &hints, res)) {
    case 0: return 0;
    case EAI_NONAME:
    case EAI_AGAIN:
    case EAI_FAIL: return ONI_ENOHOST;
    case EAI_MEMORY: return ONI_EBADALLOC;
    default: return ONI_EBADADDR;
    }
}
