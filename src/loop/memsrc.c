/* memsrc.c - the in-memory block source (source.h). */
#include <math.h>
#include <string.h>
#include <time.h>
#include "loop/source.h"
#include "loop/engine.h"

int loop_memsrc_init(struct loop_memsrc *m, size_t len, double rate, uint32_t fifo_blocks, loop_fill_fn fill, void *arg)
{
    /* NaN and infinite rates, or rates so extreme that the pacing's block
     * counts leave 64 bits, would count garbage drops. */
    int rate_ok = rate == 0 || (rate >= LOOP_MEMSRC_MIN_RATE && rate <= LOOP_MEMSRC_MAX_RATE);
    if (!m || !len || !fill || !rate_ok || (rate > 0 && fifo_blocks == 0))
        return ONI_EINVALARG;
    memset(m, 0, sizeof *m);
    m->len = len;
    m->rate = rate;
    m->fifo_blocks = fifo_blocks;
    m->fill = fill;
    m->arg = arg;
    return 0;
}

/* Pace to the block rate: drop what the bounded FIFO could not hold, then
 * wait (with the deadline) until the next block is due. */
static int pace(struct loop_memsrc *m, uint32_t timeout_ms)
{
    uint64_t now = oni_now_ns();
    if (m->seq == 0 && m->t0 == 0)
        m->t0 = now;
    if (m->rate <= 0)
        return 0;
    double period = 1e9 / m->rate;
    uint64_t produced = (uint64_t)floor((double)(now - m->t0) / period) + 1;
    if (produced > m->seq + m->fifo_blocks) {
        uint64_t drop = produced - m->seq - m->fifo_blocks;
        atomic_fetch_add(&m->dropped, drop);
        m->seq += drop;
    }
    uint64_t due = m->t0 + (uint64_t)llround((double)m->seq * period);
    if (due > now + (uint64_t)timeout_ms * 1000000ull)
        return ONI_ETIMEOUT;
    while ((now = oni_now_ns()) < due) {
        if (due - now > 100000) {
            struct timespec ts = {0, (long)(due - now - 50000)};
            nanosleep(&ts, NULL);
        }
    }
    return 0;
}

int loop_memsrc_next(struct loop_memsrc *m, void *buf, uint32_t timeout_ms)
{
    int rc = pace(m, timeout_ms);
    if (!rc)
        m->fill(m->arg, m->seq++, buf, m->len);
    return rc;
}

static int mem_read(void *ctx, void *buf, size_t len, uint32_t timeout_ms)
{
    struct loop_memsrc *m = ctx;
    return len == m->len ? loop_memsrc_next(m, buf, timeout_ms) : ONI_EBUFFERSIZE;
}

static uint64_t mem_dropped(void *ctx)
{
    return atomic_load(&((struct loop_memsrc *)ctx)->dropped);
}

void loop_memsrc_source(struct loop_memsrc *m, struct loop_source *src)
{
    memset(src, 0, sizeof *src);
    src->ctx = m;
    src->read = mem_read;
    /* The GPU path only where there is a GPU; a direct backend's pin of its
     * GPU buffers sets up the staging. */
    if (loop_memsrc_gpu_ok()) {
        src->read_async = loop_memsrc_read_async;
        src->pin = loop_memsrc_pin;
        src->unpin = loop_memsrc_unpin;
    }
    src->dropped = mem_dropped;
}

void loop_memsrc_free(struct loop_memsrc *m)
{
    if (m)
        loop_memsrc_gpu_free(m);
}

void loop_fill_floats(void *arg, uint64_t seq, void *buf, size_t len)
{
    float *f = buf;
    for (size_t i = 0; i < len / 4; i++) {
        uint32_t h = (uint32_t)(seq * 2654435761u) ^ (uint32_t)(i * 2246822519u);
        h ^= h >> 15;
        h *= 2654435761u;
        f[i] = (float)(h >> 16) / 131072.0f;
    }
}
