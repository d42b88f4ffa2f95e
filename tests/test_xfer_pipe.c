/* test_xfer_pipe.c - the chunked/concurrent staging schedule (src/gpu/pipe.c)
 * against host memory: asynchronous stages are simulated by deferring the
 * actual copy until the stage is waited for, so a slot reused too early
 * corrupts the result and the test sees it. */
#include <stdint.h>
#include "unit.h"
#include "oni.h"
#include "gpu/pipe.h"

#define MAXSLOT 16

struct sim {
    const uint8_t *src;
    uint8_t *dst;
    uint8_t *slot[MAXSLOT];
    size_t chunk;
    int async_a, async_b;
    /* deferred operations, one per slot and stage */
    size_t a_off[MAXSLOT], a_n[MAXSLOT], b_off[MAXSLOT], b_n[MAXSLOT];
    int a_pending[MAXSLOT], b_pending[MAXSLOT];
    int fail_at_b;        /* fail the start_b with this offset index (-1 = never) */
    int calls_b, max_inflight, inflight;
};

static void do_a(struct sim *m, int s) { memcpy(m->slot[s], m->src + m->a_off[s], m->a_n[s]); }
static void do_b(struct sim *m, int s) { memcpy(m->dst + m->b_off[s], m->slot[s], m->b_n[s]); }

static int start_a(void *ctx, int s, size_t off, size_t n)
{
    struct sim *m = ctx;
    if (m->a_pending[s] || m->b_pending[s]) /* slot still in use: schedule bug */
        return ONI_EINVALSTATE;
    m->a_off[s] = off, m->a_n[s] = n;
    if (m->async_a)
        m->a_pending[s] = 1;
    else
        do_a(m, s);
    return 0;
}

static int wait_a(void *ctx, int s)
{
    struct sim *m = ctx;
    if (m->a_pending[s])
        do_a(m, s);
    m->a_pending[s] = 0;
    return 0;
}

static int start_b(void *ctx, int s, size_t off, size_t n)
{
    struct sim *m = ctx;
    if (m->a_pending[s] || m->b_pending[s])
        return ONI_EINVALSTATE;
    if (m->fail_at_b >= 0 && m->calls_b++ == m->fail_at_b)
        return ONI_EWRITEFAILURE;
    m->b_off[s] = off, m->b_n[s] = n;
    if (m->async_b) {
        m->b_pending[s] = 1;
        if (++m->inflight > m->max_inflight)
            m->max_inflight = m->inflight;
    } else {
        do_b(m, s);
    }
    return 0;
}

static int wait_b(void *ctx, int s)
{
    struct sim *m = ctx;
    if (m->b_pending[s]) {
        do_b(m, s);
        m->inflight--;
    }
    m->b_pending[s] = 0;
    return 0;
}

static int run_case(size_t total, size_t chunk, int nslots, int async_a, int async_b, int fail_at_b)
{
    uint8_t *src = malloc(total + 1), *dst = malloc(total + 1);
    struct sim m = {.src = src, .dst = dst, .chunk = chunk, .async_a = async_a, .async_b = async_b,
                    .fail_at_b = fail_at_b};
    for (size_t i = 0; i < total; i++)
        src[i] = (uint8_t)(i * 7 + i / 251), dst[i] = 0xEE;
    for (int s = 0; s < nslots; s++)
        m.slot[s] = malloc(chunk);
    struct gpu_pipe_ops ops = {&m, start_a, async_a ? wait_a : NULL, start_b, async_b ? wait_b : NULL};
    int rc = gpu_pipe_run(total, chunk, nslots, &ops);
    int bad = 0;
    for (int s = 0; s < nslots; s++)
        bad |= m.a_pending[s] | m.b_pending[s]; /* nothing may be left in flight */
    if (!rc && memcmp(src, dst, total))
        rc = ONI_EREADFAILURE;
    if (!rc && bad)
        rc = ONI_EINVALSTATE;
    if (!rc && async_b && nslots > 1 && total > chunk && m.max_inflight < 2 && !async_a)
        rc = ONI_EUNIMPL; /* B of chunk k must overlap A of chunk k+1 */
    for (int s = 0; s < nslots; s++)
        free(m.slot[s]);
    free(src);
    free(dst);
    return bad ? ONI_EINVALSTATE : rc;
}

TEST(pipe_read_shape_many_sizes)
{
    /* card -> GPU: synchronous A, asynchronous B */
    size_t totals[] = {1, 4, 63, 64, 4096, 4097, 65536, 1000003};
    size_t chunks[] = {1, 3, 64, 4096, 65536, 1 << 20};
    for (size_t i = 0; i < sizeof totals / sizeof *totals; i++)
        for (size_t j = 0; j < sizeof chunks / sizeof *chunks; j++)
            for (int slots = 1; slots <= 3; slots++) {
                if (totals[i] / chunks[j] > 100000)
                    continue;
                int rc = run_case(totals[i], chunks[j], slots, 0, 1, -1);
                if (rc)
                    UNIT_FAIL("total %zu chunk %zu slots %d: rc %d", totals[i], chunks[j], slots, rc);
            }
}

TEST(pipe_write_shape_many_sizes)
{
    /* GPU -> card: asynchronous A, synchronous B */
    size_t totals[] = {1, 64, 4095, 65536, 1000003};
    size_t chunks[] = {1, 64, 4096, 100000};
    for (size_t i = 0; i < sizeof totals / sizeof *totals; i++)
        for (size_t j = 0; j < sizeof chunks / sizeof *chunks; j++)
            for (int slots = 1; slots <= 4; slots++) {
                if (totals[i] / chunks[j] > 100000)
                    continue;
                int rc = run_case(totals[i], chunks[j], slots, 1, 0, -1);
                if (rc)
                    UNIT_FAIL("total %zu chunk %zu slots %d: rc %d", totals[i], chunks[j], slots, rc);
            }
}

TEST(pipe_both_async)
{
    CHECK_RC(run_case(123457, 1000, 2, 1, 1, -1), 0);
    CHECK_RC(run_case(123457, 1000, 1, 1, 1, -1), 0);
    CHECK_RC(run_case(123457, 1000, 5, 1, 1, -1), 0);
}

TEST(pipe_error_drains_and_reports)
{
    /* a failing stage B in the middle: the error comes back and nothing stays in flight */
    CHECK_RC(run_case(100000, 1000, 2, 0, 1, 7), ONI_EWRITEFAILURE);
    CHECK_RC(run_case(100000, 1000, 3, 1, 1, 0), ONI_EWRITEFAILURE);
}

TEST(pipe_bad_arguments)
{
    struct sim m = {0};
    struct gpu_pipe_ops ops = {&m, start_a, NULL, start_b, NULL};
    CHECK_RC(gpu_pipe_run(100, 0, 2, &ops), ONI_EINVALARG);
    CHECK_RC(gpu_pipe_run(100, 10, 0, &ops), ONI_EINVALARG);
    CHECK_RC(gpu_pipe_run(100, 10, 17, &ops), ONI_EINVALARG);
    CHECK_RC(gpu_pipe_run(100, 10, 2, NULL), ONI_EINVALARG);
    struct gpu_pipe_ops no_b = {&m, start_a, NULL, NULL, NULL};
    CHECK_RC(gpu_pipe_run(100, 10, 2, &no_b), ONI_EINVALARG);
    CHECK_RC(gpu_pipe_run(0, 10, 2, &ops), 0); /* nothing to move */
}
