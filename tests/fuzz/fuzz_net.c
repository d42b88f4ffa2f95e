/* fuzz_net.c - libFuzzer target for both ends of the net driver's protocol
 * (src/drivers/net): bytes from the network are hostile on either side.
 *
 * The first byte picks what the rest is:
 *   0: raw bytes from a client to the server (netserve_conn serving the
 *      `test` driver, on a socket pair);
 *   1: requests as records [u8 type][u32 what][u32 arg][u8 n][n bytes], each
 *      sent behind a proper header after a HELLO, so the fuzzer explores what
 *      requests ask rather than only how they are framed;
 *   2: a server's answers to the net driver: [u16 n][n bytes] for CTRL,
 *      [u16 n][n bytes] for DATA, the rest for WRITE, each sent on its
 *      connection as it is accepted; the driver then inits, reads and
 *      accesses a register.
 * Whatever comes, nothing crashes or hangs, the server's every answer is a
 * well-formed message for the request it answers, and the driver returns
 * success or an ONI error. */
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include "drivers/net/netproto.h"
#include "drivers/net/netserve.h"
#include "oni.h"
#include "oninet.h"
#include "oni/util/clock.h"

/* Server side: answers are read back and checked on this thread. */
static void *check_answers(void *arg)
{
    int fd = *(int *)arg;
    struct netp_hdr h;
    static uint8_t body[NETP_MAXXFER + sizeof(struct netp_answer)];
    while (!netp_recv(fd, &h, sizeof h, 0)) {
        if (netp_check_hdr(&h, 1) || netp_recv(fd, body, h.len, 0))
            abort(); /* the server sent what no client may be sent */
    }
    return NULL;
}

struct feed {
    int fd;
    const uint8_t *data;
    size_t size;
};

/* The client's bytes, sent while the server reads them (an input larger than
 * the socket's buffer would otherwise wait for a reader that never comes). */
static void *feed_main(void *arg)
{
    struct feed *f = arg;
    struct iovec iov = {(void *)f->data, f->size};
    if (f->size)
        netp_send(f->fd, &iov, 1, 0); /* fails once the server closed: what it did not take is not needed */
    shutdown(f->fd, SHUT_WR);
    return NULL;
}

static void serve_bytes(const uint8_t *data, size_t size)
{
    static struct netserve *srv;
    char err[256];
    if (!srv && netserve_open("test", NULL, NULL, &srv, err, sizeof err))
        abort();
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
        abort();
    pthread_t th, feeder;
    struct feed f = {sv[0], data, size};
    if (pthread_create(&th, NULL, check_answers, &sv[0]) || pthread_create(&feeder, NULL, feed_main, &f))
        abort();
    netserve_conn(srv, sv[1]);
    close(sv[1]);
    pthread_join(feeder, NULL);
    pthread_join(th, NULL);
    close(sv[0]);
}

/* Append one request to out; returns its length. */
static size_t frame(uint8_t *out, uint32_t seq, uint16_t type, uint32_t what, uint32_t arg, const uint8_t *x,
                    size_t n)
{
    struct netp_hdr h = {NETP_MAGIC, NETP_VERSION, type, seq, (uint32_t)(sizeof(struct netp_call) + n)};
    struct netp_call q = {what, arg, 0};
    memcpy(out, &h, sizeof h);
    memcpy(out + sizeof h, &q, sizeof q);
    if (n)
        memcpy(out + sizeof h + sizeof q, x, n); /* x may be NULL for none */
    return sizeof h + sizeof q + n;
}

static void serve_records(const uint8_t *data, size_t size)
{
    static uint8_t out[1 << 20];
    uint32_t ms = 1, seq = 0;
    size_t len = frame(out, ++seq, NETP_HELLO, 0, 0, NULL, 0);
    len += frame(out + len, ++seq, NETP_SET_OPT_CALLBACK, ONI_OPT_TIMEOUTMS, 4, (const uint8_t *)&ms, 4);
    while (size >= 10 && len < sizeof out - 1024) {
        uint16_t type = (uint16_t)(data[0] % NETP_NTYPE);
        uint32_t what, arg;
        memcpy(&what, data + 1, 4);
        memcpy(&arg, data + 5, 4);
        size_t n = data[9];
        data += 10;
        size -= 10;
        if (n > size)
            n = size;
        if (type == NETP_SET_OPT_CALLBACK && what == ONI_OPT_TIMEOUTMS)
            what = ONI_OPT_BLOCKREADSIZE; /* a long timeout would let a signal read wait that long */
        if (type == NETP_WRITE || type == NETP_SET_OPT || type == NETP_SET_OPT_CALLBACK)
            arg = (uint32_t)n;
        if (type == NETP_READ)
            arg %= 1u << 16;
        len += frame(out + len, ++seq, type, what, arg, data, n);
        data += n;
        size -= n;
    }
    serve_bytes(out, len);
}

/* Client side: a listener that hands each accepted connection its bytes. */
struct fake {
    int lfd;
    const uint8_t *part[NETP_NCHAN];
    size_t len[NETP_NCHAN];
    int fd[NETP_NCHAN];
};

static void *fake_main(void *arg)
{
    struct fake *f = arg;
    for (int c = 0; c < NETP_NCHAN; c++) {
        if ((f->fd[c] = accept(f->lfd, NULL, NULL)) < 0)
            return NULL; /* the listener was shut down: the client gave up */
        struct iovec iov = {(void *)f->part[c], f->len[c]};
        if (f->len[c])
            netp_send(f->fd[c], &iov, 1, oni_now_ns() + 1000000000ull);
        shutdown(f->fd[c], SHUT_WR);
    }
    return NULL;
}

static size_t take_part(const uint8_t **data, size_t *size)
{
    if (*size < 2)
        return 0;
    size_t n = (size_t)(*data)[0] | (size_t)(*data)[1] << 8;
    *data += 2;
    *size -= 2;
    return n < *size ? n : *size;
}

static void answer_client(const uint8_t *data, size_t size)
{
    struct fake f = {.fd = {-1, -1, -1}};
    for (int c = 0; c < NETP_NCHAN; c++) {
        size_t n = c < NETP_NCHAN - 1 ? take_part(&data, &size) : size;
        f.part[c] = data;
        f.len[c] = n;
        data += n;
        size -= n;
    }
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    f.lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (f.lfd < 0 || bind(f.lfd, (struct sockaddr *)&a, sizeof a) || listen(f.lfd, 4) ||
        getsockname(f.lfd, (struct sockaddr *)&a, &alen))
        abort();
    pthread_t th;
    if (pthread_create(&th, NULL, fake_main, &f))
        abort();
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%u", ntohs(a.sin_port));
    oni_ctx ctx = oni_create_ctx("net");
    uint32_t ms = 20;
    oni_set_driver_opt(ctx, ONI_DRV_NET_ADDR, addr, strlen(addr) + 1);
    oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &ms, sizeof ms);
    if (oni_init_ctx(ctx, -1) == 0) {
        oni_reg_val_t v;
        uint32_t one = 1;
        oni_read_reg(ctx, 0, 0, &v);
        if (oni_set_opt(ctx, ONI_OPT_RUNNING, &one, sizeof one) == 0) {
            oni_frame_t *fr;
            for (int i = 0; i < 4 && oni_read_frame(ctx, &fr) >= 0; i++)
                oni_destroy_frame(fr);
        }
    }
    oni_destroy_ctx(ctx);
    shutdown(f.lfd, SHUT_RDWR); /* wakes the accept of a connection the client never made */
    pthread_join(th, NULL);
    for (int c = 0; c < NETP_NCHAN; c++)
        if (f.fd[c] >= 0)
            close(f.fd[c]);
    close(f.lfd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    switch (data[0] % 3) {
    case 0:
        serve_bytes(data + 1, size - 1);
        break;
    case 1:
        serve_records(data + 1, size - 1);
        break;
    default:
        answer_client(data + 1, size - 1);
        break;
    }
    return 0;
}
