/* fuzz_daemon_msg.c - libFuzzer target for the emu daemon protocol's message
 * checks (src/drivers/emu/emuproto.c): the parser the daemon runs on every
 * request, the reply check the driver runs on every answer, and the ring
 * placement rules both sides apply to offsets they receive. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "drivers/emu/emuproto.h"
/* Compiled into the target itself, so that libFuzzer's coverage
 * instrumentation sees the parser (the library is built without it). The
 * archive's copy is then never pulled in. */
#include "drivers/emu/emuproto.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a private copy of exactly size bytes, so reads past the message are caught */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    struct emup_msg m;
    if (emup_parse(buf, size, &m) == 0) {
        if (m.type == EMUP_HELLO || m.type == EMUP_TRUTH) {
            if (strlen(m.u.str) + 1 != m.len)
                abort(); /* the parser promised one terminated string filling the body */
        } else if (m.type == EMUP_READ || m.type == EMUP_WRITE) {
            uint64_t cap = 1u << 16;
            uint64_t start = m.type == EMUP_READ ? m.u.read.tail : m.u.write.start;
            uint64_t len = m.type == EMUP_READ ? m.u.read.want : m.u.write.len;
            uint64_t tail = start > 1000 ? start - 1000 : 0;
            if (emup_ring_ok(cap, tail, tail, start, len) &&
                (start % cap + len > cap || start + len - tail > cap))
                abort(); /* accepted a placement outside the ring */
            /* placement from a producer's own head (a counter from 0, far from wrapping u64) */
            uint64_t head = start >> 2, n = len > cap ? cap : len;
            uint64_t at = emup_ring_place(cap, head, n);
            if (at < head || at - head >= cap || at % cap + n > cap)
                abort();
        }
    }
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
