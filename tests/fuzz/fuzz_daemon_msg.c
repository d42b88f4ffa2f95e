/* fuzz_daemon_msg.c - libFuzzer target for the emu daemon protocol's message
 * checks (src/drivers/emu/emuproto.c): the parser the daemon runs on every
 * request, the reply check the driver runs on every answer, and the ring
 * placement rules both sides apply to offsets they receive. The input is
 * also sent as the body of READ, WRITE and each GPU message behind a proper
 * header, so that their field checks and the ring rules are reached without
 * the fuzzer first guessing a header. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "drivers/emu/emuproto.h"
/* Compiled into the target itself, so that libFuzzer's coverage
 * instrumentation sees the parser (the library is built without it). The
 * archive's copy is then never pulled in. */
#include "drivers/emu/emuproto.c"

/* What the parser promises about an accepted GPU message. */
static void check_gpu(const struct emup_msg *m)
{
    if (m->type == EMUP_GPU_IMPORT && !m->u.gpu_import.size)
        abort();
    if (m->type == EMUP_GPU_RELEASE && !m->u.gpu_release.id)
        abort();
    if (m->type == EMUP_GPU_DMA) {
        const struct emup_gpu_dma *d = &m->u.gpu_dma;
        int async = (d->flags & EMUP_DMA_ASYNC) != 0;
        if (!d->id || d->dir > 1 || !d->len || !d->timeout_ms || async != (d->done_id != 0))
            abort();
        if (d->offset + d->len < d->offset) /* the daemon adds them before comparing with the size */
            abort();
        if (async && (d->done_offset % 4 || d->done_offset + 4 < d->done_offset))
            abort();
        if (d->flags & ~(uint32_t)(EMUP_DMA_ASYNC | EMUP_DMA_RELEASE_BUF | EMUP_DMA_RELEASE_DONE))
            abort();
    }
}

/* What the parser promises about any message it accepted. */
static void check_msg(const struct emup_msg *m)
{
    check_gpu(m);
    if (m->type == EMUP_HELLO || m->type == EMUP_TRUTH) {
        if (strlen(m->u.str) + 1 != m->len)
            abort(); /* the parser promised one terminated string filling the body */
    } else if (m->type == EMUP_READ || m->type == EMUP_WRITE) {
        uint64_t cap = 1u << 16;
        uint64_t start = m->type == EMUP_READ ? m->u.read.tail : m->u.write.start;
        uint64_t len = m->type == EMUP_READ ? m->u.read.want : m->u.write.len;
        uint64_t tail = start > 1000 ? start - 1000 : 0;
        /* The block must not wrap, nor reach unconsumed bytes ([tail,
         * head)) a lap on; with none (head == tail) the skipped bytes
         * [head, start) are free, and a block of a whole ring fits. */
        for (int k = 0; k < 2; k++) {
            uint64_t head = k ? tail + (start - tail) / 2 : tail;
            if (emup_ring_ok(cap, tail, head, start, len) &&
                (start % cap + len > cap || (head != tail && start + len - tail > cap)))
                abort(); /* accepted a placement outside the ring */
        }
        /* placement from a producer's own head (a counter from 0, far from wrapping u64) */
        uint64_t head = start >> 2, n = len > cap ? cap : len;
        uint64_t at = emup_ring_place(cap, head, n);
        if (at < head || at - head >= cap || at % cap + n > cap)
            abort();
    }
}

/* The input as the body of a message of each type with a body to check,
 * behind a proper header: the fields are reached without the fuzzer first
 * guessing a header. */
static void as_bodies(const uint8_t *data, size_t size)
{
    static const uint16_t types[] = {EMUP_READ, EMUP_WRITE, EMUP_GPU_IMPORT, EMUP_GPU_DMA, EMUP_GPU_RELEASE};
    if (size > EMUP_MAXMSG - sizeof(struct emup_hdr))
        return;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        uint8_t *buf = malloc(sizeof(struct emup_hdr) + size);
        if (!buf)
            return;
        struct emup_hdr h = {EMUP_MAGIC, EMUP_VERSION, types[i], 1, (uint32_t)size};
        memcpy(buf, &h, sizeof h);
        memcpy(buf + sizeof h, data, size);
        struct emup_msg m;
        if (emup_parse(buf, sizeof h + size, &m) == 0)
            check_msg(&m);
        free(buf);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    as_bodies(data, size);
    /* a private copy of exactly size bytes, so reads past the message are caught */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    struct emup_msg m;
    if (emup_parse(buf, size, &m) == 0)
        check_msg(&m);
    int is_status;
    if (size >= sizeof(struct emup_hdr)) {
        struct emup_hdr h;
        memcpy(&h, buf, sizeof h);
        if (emup_check_reply(buf, size, (uint16_t)(h.type & ~EMUP_REPLY), h.seq, sizeof(struct emup_read_reply),
                             &is_status) == 0 &&
            size != sizeof h + (is_status ? sizeof(struct emup_status_reply) : sizeof(struct emup_read_reply)))
            abort();
    }
    free(buf);
    return 0;
}
