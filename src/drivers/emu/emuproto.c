/* emuproto.c - message framing and checks of the emu daemon protocol
 * (emuproto.h, docs/daemon.md). Shared by the driver and tools/onix-emu. */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "emuproto.h"
#include "oni.h"
#include "oni/util/clock.h"

/* Body size of each request type; -1: a NUL-terminated string. */
static long body_size(uint16_t type)
{
    switch (type) {
    case EMUP_HELLO:
    case EMUP_TRUTH: return -1;
    case EMUP_ATTACH: return sizeof(struct emup_attach);
    case EMUP_CONFIG_READ:
    case EMUP_CONFIG_WRITE: return sizeof(struct emup_config);
    case EMUP_READ: return sizeof(struct emup_read);
    case EMUP_WRITE: return sizeof(struct emup_write);
    case EMUP_STATS:
    case EMUP_LINK:
    case EMUP_MODE: return 0;
    case EMUP_GPU_IMPORT: return sizeof(struct emup_gpu_import);
    case EMUP_GPU_DMA: return sizeof(struct emup_gpu_dma);
    case EMUP_GPU_RELEASE: return sizeof(struct emup_gpu_release);
    default: return -2;
    }
}

static int parse_header(const uint8_t *buf, size_t n, struct emup_hdr *h)
{
    if (!buf || n < sizeof *h)
        return ONI_EBADFRAME;
    memcpy(h, buf, sizeof *h);
    if (h->magic != EMUP_MAGIC || h->len != n - sizeof *h)
        return ONI_EBADFRAME;
    return 0;
}

int emup_parse(const uint8_t *buf, size_t n, struct emup_msg *m)
{
    struct emup_hdr h;
    memset(m, 0, sizeof *m);
    int rc = parse_header(buf, n, &h);
    if (rc)
        return rc;
    m->type = h.type;
    m->seq = h.seq;
    if (h.version != EMUP_VERSION)
        return ONI_EBADCONTROLLER;
    m->body = buf + sizeof h;
    m->len = h.len;
    long want = body_size(h.type);
    if (want == -2)
        return ONI_EBADFRAME;
    if (want == -1) {
        /* exactly one NUL, at the end */
        if (h.len < 1 || h.len > EMUP_MAXSTR || m->body[h.len - 1] != 0 ||
            memchr(m->body, 0, h.len) != m->body + h.len - 1)
            return ONI_EBADFRAME;
        m->u.str = (const char *)m->body;
        return 0;
    }
    if ((long)h.len != want)
        return ONI_EBADFRAME;
    memcpy(&m->u, m->body, h.len);
    switch (h.type) {
    case EMUP_ATTACH:
        if (m->u.attach.chan == EMUP_CHAN_CTRL || m->u.attach.chan >= EMUP_NCHAN)
            return ONI_EBADFRAME;
        break;
    case EMUP_CONFIG_READ:
    case EMUP_CONFIG_WRITE:
        if (m->u.config.reg > ONI_CONFIG_CUSTOMBEGIN)
            return ONI_EBADFRAME;
        break;
    case EMUP_READ:
        if (!m->u.read.want || !m->u.read.timeout_ms)
            return ONI_EBADFRAME;
        break;
    case EMUP_WRITE:
        if (!m->u.write.len || !m->u.write.timeout_ms)
            return ONI_EBADFRAME;
        break;
    case EMUP_GPU_IMPORT:
        if (!m->u.gpu_import.size)
            return ONI_EBADFRAME;
        break;
    case EMUP_GPU_DMA: {
        const struct emup_gpu_dma *d = &m->u.gpu_dma;
        int async = (d->flags & EMUP_DMA_ASYNC) != 0;
        if (!d->id || d->dir > 1 || !d->len || !d->timeout_ms ||
            (d->flags & ~(uint32_t)(EMUP_DMA_ASYNC | EMUP_DMA_RELEASE_BUF | EMUP_DMA_RELEASE_DONE)) ||
            async != (d->done_id != 0) || (!async && (d->flags & EMUP_DMA_RELEASE_DONE)) ||
            d->offset > UINT64_MAX - d->len || (async && (d->done_offset % 4 || d->done_offset > UINT64_MAX - 4)))
            return ONI_EBADFRAME;
        break;
    }
    case EMUP_GPU_RELEASE:
        if (!m->u.gpu_release.id)
            return ONI_EBADFRAME;
        break;
    }
    return 0;
}

int emup_check_reply(const uint8_t *buf, size_t n, uint16_t type, uint32_t seq, size_t body_len,
                     int *is_status)
{
    struct emup_hdr h;
    *is_status = 0;
    if (parse_header(buf, n, &h))
        return ONI_EBADFRAME;
    if (h.version != EMUP_VERSION)
        return ONI_EBADCONTROLLER;
    if (h.seq != seq || h.type != (type | EMUP_REPLY))
        return ONI_EBADFRAME;
    if (h.len == body_len)
        return 0;
    if (h.len == sizeof(struct emup_status_reply)) {
        *is_status = 1;
        return 0;
    }
    return ONI_EBADFRAME;
}

int emup_ring_ok(uint64_t cap, uint64_t tail, uint64_t head, uint64_t start, uint64_t len)
{
    if (!cap || tail > head || head > start || len > cap || start - head >= cap)
        return 0;
    if (start % cap + len > cap)
        return 0;
    /* With nothing unconsumed, the bytes skipped to keep the placement
     * contiguous ([head, start)) hold nothing either: a block of a whole
     * ring fits on the next lap. */
    return tail == head || start - tail <= cap - len; /* start + len - tail <= cap, without overflow */
}

uint64_t emup_ring_place(uint64_t cap, uint64_t head, uint64_t len)
{
    if (head % cap + len <= cap)
        return head;
    return head - head % cap + cap;
}

/* poll's wait for a deadline still ahead of now: whole ms, rounded up, at most INT_MAX. */
static int wait_ms(uint64_t deadline, uint64_t now)
{
    uint64_t ms = (deadline - now + 999999) / 1000000;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

int emup_send(int sock, uint16_t type, uint32_t seq, const void *body, size_t len, int fd)
{
    return emup_send_until(sock, type, seq, body, len, fd, 0);
}

int emup_send_until(int sock, uint16_t type, uint32_t seq, const void *body, size_t len, int fd,
                    uint64_t deadline)
{
    struct emup_hdr h = {EMUP_MAGIC, EMUP_VERSION, type, seq, (uint32_t)len};
    struct iovec iov[2] = {{&h, sizeof h}, {(void *)body, len}};
    union {
        struct cmsghdr c;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = len ? 2 : 1};
    if (sizeof h + len > EMUP_MAXMSG)
        return ONI_EINVALARG;
    if (fd >= 0) {
        memset(&ctl, 0, sizeof ctl);
        mh.msg_control = ctl.buf;
        mh.msg_controllen = sizeof ctl.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    /* With a deadline, never block in sendmsg: MSG_DONTWAIT, and poll for
     * room until the deadline. On SOCK_SEQPACKET a message is queued whole
     * or not at all (EAGAIN), so giving up leaves the stream of messages
     * whole. A short count, which that rules out, would leave the peer
     * reading part of a message: the connection is then unusable. */
    for (;;) {
        ssize_t r = sendmsg(sock, &mh, MSG_NOSIGNAL | (deadline ? MSG_DONTWAIT : 0));
        if (r >= 0)
            return r == (ssize_t)(sizeof h + len) ? 0 : ONI_EDISCONNECTED;
        if (errno == EINTR)
            continue;
        if (!deadline || (errno != EAGAIN && errno != EWOULDBLOCK))
            return ONI_EDISCONNECTED;
        uint64_t now = oni_now_ns();
        if (now >= deadline)
            return ONI_ETIMEOUT;
        struct pollfd p = {sock, POLLOUT, 0};
        if (poll(&p, 1, wait_ms(deadline, now)) < 0 && errno != EINTR)
            return ONI_EDISCONNECTED;
    }
}

/* Keep the first passed descriptor in *fd (when wanted), close the rest. */
static void take_fds(struct msghdr *mh, int *fd)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < nfd; i++) {
            int f;
            memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
            if (fd && *fd < 0)
                *fd = f;
            else
                close(f);
        }
    }
}

int emup_recv(int sock, uint8_t *buf, size_t cap, uint64_t deadline, int *fd)
{
    if (fd)
        *fd = -1;
    for (;;) {
        int wait = -1;
        if (deadline) {
            uint64_t now = oni_now_ns();
            if (now >= deadline)
                return ONI_ETIMEOUT;
            wait = wait_ms(deadline, now);
        }
        struct pollfd p = {sock, POLLIN, 0};
        int pr = poll(&p, 1, wait);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr < 0)
            return ONI_EDISCONNECTED;
        if (pr == 0)
            continue; /* the deadline check above decides */
        union {
            struct cmsghdr c;
            char b[CMSG_SPACE(4 * sizeof(int))];
        } ctl;
        struct iovec iov = {buf, cap};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b,
                            .msg_controllen = sizeof ctl.b};
        ssize_t r = recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (r <= 0)
            return ONI_EDISCONNECTED;
        take_fds(&mh, fd);
        if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
            if (fd && *fd >= 0) {
                close(*fd);
                *fd = -1;
            }
            return ONI_EBADFRAME;
        }
        return (int)r;
    }
}
