/* netproto.c - message checks and addresses, shared by the net driver and
 * its server (netproto.h). */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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
        return answer ? NETP_MAXNAME : NETP_MAXSECRET;
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
    case NETP_GPU_IPC:
        return answer ? 0 : sizeof(struct netp_ipc);
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

int netp_parse(const void *hdr, size_t hlen, size_t blen, int answer, struct netp_hdr *h, void *fixed)
{
    size_t fn = answer ? sizeof(struct netp_answer) : sizeof(struct netp_call);
    if (hlen != sizeof *h + fn) {
        memset(h, 0, sizeof *h);
        if (hlen >= sizeof *h)
            memcpy(h, hdr, sizeof *h); /* for the caller to tell another protocol version */
        return hlen >= sizeof *h && h->magic == NETP_MAGIC && h->version != NETP_VERSION ? ONI_EBADCONTROLLER
                                                                                         : ONI_EINVALARG;
    }
    memcpy(h, hdr, sizeof *h);
    memcpy(fixed, (const uint8_t *)hdr + sizeof *h, fn);
    int rc = netp_check_hdr(h, answer);
    if (rc)
        return rc;
    return h->len - fn == blen ? 0 : ONI_EINVALARG;
}

int netp_is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
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
