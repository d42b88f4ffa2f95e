/* fuzz_net.c - libFuzzer target for the net driver's message parser and
 * server (src/drivers/net): messages from the network are hostile on either
 * side.
 *
 * The first byte picks what the rest is:
 *   0: raw messages from a client to the server, as records [u8 hlen][hlen
 *      bytes of UCX header][u16 blen][blen bytes of body] (ucxlink.h's
 *      message: a header and a body), served by netserve_conn on the `test`
 *      driver through a connection of this file's (struct netserve_io), so
 *      the whole of the server's parsing and dispatch runs without UCX;
 *   1: requests as records [u8 type][u32 what][u32 arg][u8 n][n bytes], each
 *      sent with a proper header after a HELLO, so the fuzzer explores what
 *      requests ask rather than only how they are framed;
 *   2: the client's side: [u8 hlen][u16 blen] and the header's bytes, parsed
 *      as a server's answer (netp_parse), whose every acceptance is checked
 *      against the rules of netproto.h.
 * Whatever comes, nothing crashes or hangs, the server's every answer is a
 * well-formed message for the request it answers, and the parser accepts
 * only what the protocol allows. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "drivers/net/netproto.h"
#include "drivers/net/netserve.h"
#include "drivers/net/ucxlink.h"
#include "oni.h"

/* A connection of the fuzzer's: the input's messages one after the other,
 * the server's answers checked as they are sent. */
struct feed {
    const uint8_t *p;
    size_t n;
    const uint8_t *body;
    size_t blen;
    int given, gone;
    uint32_t last_seq;
    uint16_t last_type;
};

static int feed_next(void *arg, void *hdr, size_t cap, size_t *hlen, size_t *blen, uint64_t deadline)
{
    (void)deadline;
    struct feed *f = arg;
    if (f->gone || f->given || f->n < 1)
        return ONI_EDISCONNECTED; /* the end of the input is the client's going */
    size_t h = f->p[0];
    if (h > ULINK_MAXHDR || f->n < 1 + h + 2)
        return ONI_EDISCONNECTED;
    size_t b = (size_t)f->p[1 + h] | (size_t)f->p[2 + h] << 8;
    if (f->n < 3 + h + b)
        b = f->n - 3 - h; /* the body cut short: what is left */
    memcpy(hdr, f->p + 1, h < cap ? h : cap);
    if (h >= sizeof(struct netp_hdr)) {
        struct netp_hdr q;
        memcpy(&q, f->p + 1, sizeof q);
        f->last_seq = q.seq;
        f->last_type = q.type;
    }
    *hlen = h;
    *blen = b;
    f->body = f->p + 3 + h;
    f->blen = b;
    f->given = b != 0;
    f->p += 3 + h + b;
    f->n -= 3 + h + b;
    return 0;
}

static int feed_take(void *arg, void *dst, uint64_t deadline)
{
    (void)deadline;
    struct feed *f = arg;
    if (!f->given)
        abort(); /* the server took a body no message had */
    if (dst)
        memcpy(dst, f->body, f->blen);
    f->given = 0;
    return 0;
}

/* Every answer must be one a client accepts as well-formed, of the type
 * and sequence number of the request it answers. */
static int feed_send(void *arg, const void *hdr, size_t hlen, const void *body, size_t blen, uint64_t deadline)
{
    (void)deadline;
    struct feed *f = arg;
    struct netp_hdr h;
    struct netp_answer a;
    if (netp_parse(hdr, hlen, blen, 1, &h, &a) || h.seq != f->last_seq ||
        (h.type & (uint16_t)~NETP_REPLY) != (f->last_type & (uint16_t)~NETP_REPLY) || (blen && !body))
        abort(); /* the server sent what no client may be sent */
    return 0;
}

static int feed_gone(void *arg) { return ((struct feed *)arg)->gone; }
static void feed_break(void *arg) { ((struct feed *)arg)->gone = 1; }

static void serve_messages(const uint8_t *data, size_t size)
{
    static struct netserve *srv;
    char err[256];
    if (!srv && netserve_open("test", NULL, NULL, &srv, err, sizeof err))
        abort();
    struct feed f = {.p = data, .n = size};
    struct netserve_io io = {feed_next, feed_take, feed_send, feed_gone, feed_break, &f};
    netserve_conn(srv, &io);
}

/* Append one request to out in mode 0's record form; its length. */
static size_t frame(uint8_t *out, uint32_t seq, uint16_t type, uint32_t what, uint32_t arg, const uint8_t *x,
                    size_t n)
{
    struct netp_hdr h = {NETP_MAGIC, NETP_VERSION, type, seq, (uint32_t)(sizeof(struct netp_call) + n)};
    struct netp_call q = {what, arg, 0};
    out[0] = (uint8_t)(sizeof h + sizeof q);
    memcpy(out + 1, &h, sizeof h);
    memcpy(out + 1 + sizeof h, &q, sizeof q);
    out[1 + sizeof h + sizeof q] = (uint8_t)n;
    out[2 + sizeof h + sizeof q] = (uint8_t)(n >> 8);
    if (n)
        memcpy(out + 3 + sizeof h + sizeof q, x, n); /* x may be NULL for none */
    return 3 + sizeof h + sizeof q + n;
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
    serve_messages(out, len);
}

/* The client's parser on a header the server might send: what it accepts
 * keeps every rule a client relies on. */
static void parse_answer(const uint8_t *data, size_t size)
{
    if (size < 3)
        return;
    size_t hlen = data[0] % (ULINK_MAXHDR + 1), blen = (size_t)data[1] | (size_t)data[2] << 8;
    data += 3;
    size -= 3;
    uint8_t hdr[ULINK_MAXHDR] = {0};
    memcpy(hdr, data, hlen < size ? hlen : size);
    struct netp_hdr h;
    struct netp_answer a;
    if (netp_parse(hdr, hlen, blen, 1, &h, &a))
        return;
    uint16_t t = h.type & (uint16_t)~NETP_REPLY;
    if (h.magic != NETP_MAGIC || h.version != NETP_VERSION || !(h.type & NETP_REPLY) || t < NETP_HELLO ||
        t >= NETP_NTYPE || hlen != sizeof h + sizeof a || h.len != sizeof a + blen || blen > netp_max_extra(t, 1))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    switch (data[0] % 3) {
    case 0:
        serve_messages(data + 1, size - 1);
        break;
    case 1:
        serve_records(data + 1, size - 1);
        break;
    default:
        parse_answer(data + 1, size - 1);
        break;
    }
    return 0;
}
