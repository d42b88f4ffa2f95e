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
    int fail_at_a;        /* fail the start_a with this index (0 = never, k = the k-th call) */
    int calls_a, a_inflight, max_a_inflight;
    int started_b;        /* start_b calls that succeeded */
    int wait_rc;          /* what wait_b returns once a stage has failed (its copy still done) */
    int failed;
};

static void do_a(struct sim *m, int s) { memcpy(m->slot[s], m->src + m->a_off[s], m->a_n[s]); }
static void do_b(struct sim *m, int s) { memcpy(m->dst + m->b_off[s], m->slot[s], m->b_n[s]); }

static int start_a(void *ctx, int s, size_t off, size_t n)
{
    struct sim *m = ctx;
    if (m->a_pending[s] || m->b_pending[s]) /* slot still in use: schedule bug */
        return ONI_EINVALSTATE;
    if (++m->calls_a == m->fail_at_a) {
        m->failed = 1;
        return ONI_EREADFAILURE;
    }
    m->a_off[s] = off, m->a_n[s] = n;
    if (m->async_a) {
        m->a_pending[s] = 1;
        if (++m->a_inflight > m->max_a_inflight)
            m->max_a_inflight = m->a_inflight;
    } else
        do_a(m, s);
    return 0;
}

static int wait_a(void *ctx, int s)
{
    struct sim *m = ctx;
    if (m->a_pending[s]) {
        do_a(m, s);
        m->a_inflight--;
    }
    m->a_pending[s] = 0;
    return 0;
}

static int start_b(void *ctx, int s, size_t off, size_t n)
{
    struct sim *m = ctx;
    if (m->a_pending[s] || m->b_pending[s])
        return ONI_EINVALSTATE;
    if (m->fail_at_b >= 0 && m->calls_b++ == m->fail_at_b) {
        m->failed = 1;
        return ONI_EWRITEFAILURE;
    }
    m->b_off[s] = off, m->b_n[s] = n;
    m->started_b++;
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
    int rc = m->b_pending[s] && m->failed ? m->wait_rc : 0;
    if (m->b_pending[s]) {
        do_b(m, s);
        m->inflight--;
    }
    m->b_pending[s] = 0;
    return rc;
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
    if (!rc && async_a && nslots > 1 && total > chunk && m.max_a_inflight < 2)
        rc = ONI_EUNIMPL; /* an asynchronous A of chunk k+1 starts before A of chunk k is waited for */
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

TEST(pipe_sixteen_slots)
{
    CHECK_RC(run_case(100000, 1000, 16, 0, 1, -1), 0);
    CHECK_RC(run_case(100000, 1000, 16, 1, 0, -1), 0);
}

/* A failing stage A: its error comes back, no stage B runs on that slot's
 * stale bytes, and nothing stays in flight. */
static int run_failing_a(int nslots, int async_a, int fail_at_a, int *calls_b)
{
    enum { TOTAL = 20000, CHUNK = 1000 };
    static uint8_t src[TOTAL], dst[TOTAL], slots[MAXSLOT][CHUNK];
    struct sim m = {.src = src, .dst = dst, .chunk = CHUNK, .async_a = async_a, .async_b = 1, .fail_at_b = -1,
                    .fail_at_a = fail_at_a};
    for (int s = 0; s < nslots; s++)
        m.slot[s] = slots[s];
    struct gpu_pipe_ops ops = {&m, start_a, async_a ? wait_a : NULL, start_b, wait_b};
    int rc = gpu_pipe_run(TOTAL, CHUNK, nslots, &ops);
    for (int s = 0; s < nslots; s++)
        if (m.a_pending[s] || m.b_pending[s])
            return ONI_EINVALSTATE;
    *calls_b = m.started_b;
    return rc;
}

TEST(pipe_error_of_stage_a_stops_the_run)
{
    int calls_b = -1;
    CHECK_RC(run_failing_a(2, 0, 4, &calls_b), ONI_EREADFAILURE);
    CHECK_EQ(calls_b, 3); /* chunks 0..2 emptied, none after the failed fill of chunk 3 */
    CHECK_RC(run_failing_a(3, 1, 5, &calls_b), ONI_EREADFAILURE);
    CHECK(calls_b < 5);
    CHECK_RC(run_failing_a(1, 0, 1, &calls_b), ONI_EREADFAILURE);
    CHECK_EQ(calls_b, 0);
}

/* An error in the schedule is the one reported, not a later error of a wait
 * for a stage still in flight. */
TEST(pipe_first_error_wins_over_the_drain)
{
    enum { TOTAL = 100000, CHUNK = 1000 };
    static uint8_t src[TOTAL], dst[TOTAL], slots[2][CHUNK];
    struct sim m = {.src = src, .dst = dst, .chunk = CHUNK, .async_b = 1, .fail_at_b = 7, .wait_rc = ONI_ETIMEOUT};
    m.slot[0] = slots[0], m.slot[1] = slots[1];
    struct gpu_pipe_ops ops = {&m, start_a, NULL, start_b, wait_b};
    CHECK_RC(gpu_pipe_run(TOTAL, CHUNK, 2, &ops), ONI_EWRITEFAILURE);
    CHECK(!m.b_pending[0] && !m.b_pending[1]);
}
