/* test_gpu_loop.c - every GPU backend of the closed-loop engine end to end
 * with the in-memory source (copy engine + completion word, like the card's
 * DMA): MAC results equal to the CPU's, spikes at the nominal rate scored
 * against truth, stop requests, overload, and no kernel left running after
 * destroy. Skips without a CUDA device. */
#include <stdatomic.h>
#include <unistd.h>
#include "test_loop_common.h"

static int have(int b)
{
    char why[160];
    if (loop_backend_available(b, why, sizeof why))
        return 1;
    fprintf(stderr, "  %s: %s\n", loop_backend_name(b), why);
    return 0;
}

#define EACH_GPU(b) for (int b = LOOP_GPU_STAGED; b < LOOP_NBACKENDS; b++)

TEST(gpu_mac_every_backend)
{
    if (!have(LOOP_GPU_DIRECT))
        SKIP("no CUDA device");
    EACH_GPU(b) {
        check_mac(b, 4096, 2, 0, 2000);
        check_mac(b, 4096, 1, 1, 500);
        check_mac(b, 1 << 20, 4, 0, 50);
    }
}

/* A paced source: the GPU work for a block is queued (gpu-flag: behind a
 * wait for the block's completion word) well before the block's data comes,
 * so work that started early computes on the slot's stale data. */
TEST(gpu_mac_paced_every_backend)
{
    if (!have(LOOP_GPU_DIRECT))
        SKIP("no CUDA device");
    EACH_GPU(b) check_mac_at(b, 4096, 4, 0, 40, 500);
}

/* Below one block a second: each block is due 1.25 s after the last, within
 * the engine's deadline (2 s). memsrc's GPU path waited at most a fixed 1 s
 * for its block, so every block after the first timed out. */
TEST(gpu_mac_below_one_block_per_second)
{
    if (!have(LOOP_GPU_DIRECT))
        SKIP("no CUDA device");
    check_mac_at(LOOP_GPU_DIRECT, 4096, 2, 0, 3, 0.8);
    check_mac_at(LOOP_GPU_FLAG, 4096, 2, 0, 3, 0.8);
}

TEST(gpu_ephys_every_backend)
{
    if (!have(LOOP_GPU_DIRECT))
        SKIP("no CUDA device");
    EACH_GPU(b) {
        struct loop_score sc;
        struct loop_stats st;
        check_ephys(b, 16, 1.0, &sc, &st);
        CHECK(sc.events >= 40);
        /* as test_loop's cpu_ephys_at_nominal_rate: 3 detections a spike */
        CHECK(sc.recall >= 0.95);
        CHECK(sc.precision >= 0.28);
        if (LOOP_REALTIME_BUILD)
            CHECK_EQ(st.src_dropped, 0);
    }
}

TEST(gpu_stop_every_backend)
{
    if (!have(LOOP_GPU_DIRECT))
        SKIP("no CUDA device");
    EACH_GPU(b) check_stop(b);
}

TEST(gpu_overload_every_backend)
{
    if (!have(LOOP_GPU_DIRECT))
        SKIP("no CUDA device");
    EACH_GPU(b) check_overload(b, 5000);
}

/* A source that fails after 20 blocks, read or asynchronous. */
struct failing {
    struct loop_source inner;
    int n;
};

static int fail_read(void *ctx, void *buf, size_t len, uint32_t timeout_ms)
{
    struct failing *f = ctx;
    return ++f->n > 20 ? ONI_EREADFAILURE : f->inner.read(f->inner.ctx, buf, len, timeout_ms);
}

static int fail_read_async(void *ctx, void *buf, size_t len, volatile uint32_t *done, uint32_t seq, uint32_t ms)
{
    struct failing *f = ctx;
    return ++f->n > 20 ? ONI_EREADFAILURE : f->inner.read_async(f->inner.ctx, buf, len, done, seq, ms);
}

static int fail_pin(void *ctx, void *buf, size_t len)
{
    struct failing *f = ctx;
    return f->inner.pin(f->inner.ctx, buf, len);
}

static int fail_unpin(void *ctx, void *buf, size_t len)
{
    struct failing *f = ctx;
    return f->inner.unpin(f->inner.ctx, buf, len);
}

/* The source failing mid-run: every GPU backend returns the source's error
 * promptly, stops its GPU work (the flag backend's queued waits, the
 * persistent kernels) and joins its threads; the device is usable after. */
TEST(gpu_source_error_every_backend)
{
    if (!have(LOOP_GPU_DIRECT))
        SKIP("no CUDA device");
    EACH_GPU(b) {
        int threads_before = nthreads();
        struct loop_memsrc src;
        REQUIRE(loop_memsrc_init(&src, 4096, 0, 0, loop_fill_floats, NULL) == 0);
        struct failing f = {0};
        loop_memsrc_source(&src, &f.inner);
        struct mac_sink ms = {1, 3, 1, 4096, malloc(4096), malloc(4096), 0, 0, 0};
        struct loop_config c = mac4k_config(b);
        c.src = (struct loop_source){&f, fail_read, f.inner.read_async ? fail_read_async : NULL,
                                     f.inner.pin ? fail_pin : NULL, f.inner.unpin ? fail_unpin : NULL, NULL};
        c.sink = (struct loop_sink){&ms, mac_sink_write};
        struct loop *lp = NULL;
        CHECK_RC(loop_create(&c, &lp), ONI_ESUCCESS);
        REQUIRE(lp);
        uint64_t t0 = oni_now_ns();
        CHECK_RC(loop_run(lp), ONI_EREADFAILURE);
        double s = (double)(oni_now_ns() - t0) / 1e9;
        struct loop_stats st;
        loop_get_stats(lp, &st);
        loop_destroy(lp);
        loop_memsrc_free(&src);
        fprintf(stderr, "  %s: source error after %llu blocks, returned in %.3f s\n", loop_backend_name(b),
                (unsigned long long)st.blocks, s);
        CHECK(s < 2.5); /* at most the engine's deadline of 1 s per wait, and then some */
        CHECK(st.blocks <= 20);
        CHECK_EQ(ms.bad, 0);
        CHECK_EQ(nthreads_settled(threads_before), threads_before);
        free(ms.in);
        free(ms.ref);
        check_mac(b, 4096, 2, 0, 100); /* the device and the backend work after */
    }
}

/* A source whose asynchronous read of one block is accepted but never
 * completes (a card DMA job that timed out writes no completion word): the
 * run ends with ONI_ETIMEOUT, destroy returns (gpu-flag's wait for that
 * block stayed queued in its stream, ahead of every later block, and
 * destroy then waited for the device for good), and the device works on. */
struct losing {
    struct loop_source inner;
    int n, lost;
};

static int lose_read(void *ctx, void *buf, size_t len, uint32_t timeout_ms)
{
    struct losing *l = ctx;
    return l->inner.read(l->inner.ctx, buf, len, timeout_ms);
}

static int lose_read_async(void *ctx, void *buf, size_t len, volatile uint32_t *done, uint32_t seq, uint32_t ms)
{
    struct losing *l = ctx;
    if (++l->n == 6) {
        l->lost = 1;
        return 0; /* accepted, never done */
    }
    return l->inner.read_async(l->inner.ctx, buf, len, done, seq, ms);
}

struct destroyer {
    struct loop *lp;
    atomic_int done;
};

static void *destroy_thread(void *arg)
{
    struct destroyer *d = arg;
    loop_destroy(d->lp);
    atomic_store(&d->done, 1);
    return NULL;
}

TEST(gpu_lost_block_every_backend)
{
    if (!have(LOOP_GPU_DIRECT))
        SKIP("no CUDA device");
    EACH_GPU(b) {
        struct loop_memsrc src;
        REQUIRE(loop_memsrc_init(&src, 4096, 0, 0, loop_fill_floats, NULL) == 0);
        struct losing l = {0};
        loop_memsrc_source(&src, &l.inner);
        struct mac_sink ms = {1, 3, 1, 4096, malloc(4096), malloc(4096), 0, 0, 0};
        struct loop_config c = mac4k_config(b);
        c.src = (struct loop_source){&l, lose_read, l.inner.read_async ? lose_read_async : NULL, NULL, NULL, NULL};
        c.timeout_ms = 200;
        c.blocks = 20;
        c.sink = (struct loop_sink){&ms, mac_sink_write};
        struct loop *lp = NULL;
        CHECK_RC(loop_create(&c, &lp), ONI_ESUCCESS);
        REQUIRE(lp);
        int run = loop_run(lp);
        struct destroyer d = {lp, 0};
        pthread_t th;
        REQUIRE(pthread_create(&th, NULL, destroy_thread, &d) == 0);
        uint64_t t0 = oni_now_ns();
        while (!atomic_load(&d.done) && oni_now_ns() - t0 < 10000000000ull)
            usleep(10000);
        double s = (double)(oni_now_ns() - t0) / 1e9;
        fprintf(stderr, "  %s: run %d, destroy %s after %.2f s\n", loop_backend_name(b), run,
                atomic_load(&d.done) ? "returned" : "STILL BLOCKED", s);
        if (!atomic_load(&d.done))
            UNIT_FAIL("%s: loop_destroy blocked", loop_backend_name(b));
        REQUIRE(atomic_load(&d.done)); /* else the thread holds the device: nothing more can run */
        pthread_join(th, NULL);
        /* direct, graph, flag and persistent read asynchronously: they meet the lost block */
        int async = b == LOOP_GPU_DIRECT || b == LOOP_GPU_GRAPH || b == LOOP_GPU_FLAG || b == LOOP_GPU_PERSISTENT;
        CHECK_EQ(l.lost, async);
        CHECK(l.lost ? run == ONI_ETIMEOUT : run == 0); /* backends that read synchronously lose nothing */
        loop_memsrc_free(&src);
        free(ms.in);
        free(ms.ref);
        check_mac(b, 4096, 2, 0, 100); /* the device and the backend work after */
    }
}

/* A persistent loop created and destroyed without running must not leave its
 * kernel behind: the device synchronizes promptly afterwards. */
static void destroy_without_run(int b)
{
    struct loop_memsrc src;
    REQUIRE(loop_memsrc_init(&src, 4096, 0, 0, loop_fill_floats, NULL) == 0);
    struct loop_config c = {0};
    c.backend = b;
    c.work = LOOP_WORK_MAC;
    c.in_bytes = c.out_bytes = 4096;
    c.depth = 2;
    c.timeout_ms = 1000;
    c.mac.iters = 3;
    c.mac.passes = 1;
    loop_memsrc_source(&src, &c.src);
    c.sink.write = NULL;
    CHECK_RC(loop_create(&c, NULL), ONI_EINVALARG);
    struct mac_sink ms = {0};
    c.sink = (struct loop_sink){&ms, mac_sink_write};
    struct loop *lp = NULL;
    uint64_t t0 = oni_now_ns();
    CHECK_RC(loop_create(&c, &lp), ONI_ESUCCESS);
    loop_destroy(lp);
    /* A second persistent loop runs normally after the first is gone. */
    check_mac(b, 4096, 2, 0, 100);
    CHECK((oni_now_ns() - t0) / 1e9 < 5.0);
    loop_memsrc_free(&src);
}

TEST(gpu_persistent_destroy_without_run)
{
    if (!have(LOOP_GPU_PERSISTENT))
        SKIP("no CUDA device");
    destroy_without_run(LOOP_GPU_PERSISTENT);
    destroy_without_run(LOOP_GPU_MAPPED);
}

TEST(gpu_direct_needs_async_source)
{
    if (!have(LOOP_GPU_DIRECT))
        SKIP("no CUDA device");
    struct loop_memsrc src;
    REQUIRE(loop_memsrc_init(&src, 4096, 0, 0, loop_fill_floats, NULL) == 0);
    struct mac_sink ms = {0};
    struct loop_config c = {0};
    c.work = LOOP_WORK_MAC;
    c.in_bytes = c.out_bytes = 4096;
    c.depth = 2;
    c.timeout_ms = 1000;
    c.mac.passes = 1;
    loop_memsrc_source(&src, &c.src);
    c.src.read_async = NULL; /* a host-only source */
    c.sink = (struct loop_sink){&ms, mac_sink_write};
    struct loop *lp = NULL;
    for (int b = LOOP_GPU_DIRECT; b <= LOOP_GPU_PERSISTENT; b++) {
        c.backend = b;
        CHECK_RC(loop_create(&c, &lp), ONI_EINVALARG);
    }
    /* gpu-mapped pulls host blocks: a host-only source is enough. */
    c.backend = LOOP_GPU_MAPPED;
    c.blocks = 50;
    CHECK_RC(loop_create(&c, &lp), ONI_ESUCCESS);
    CHECK_RC(loop_run(lp), ONI_ESUCCESS);
    CHECK_EQ(ms.blocks, 50);
    loop_destroy(lp);
    loop_memsrc_free(&src);
}
