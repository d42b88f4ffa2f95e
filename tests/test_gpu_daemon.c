/* test_gpu_daemon.c - GPU transfers through the onix-emu daemon on a real
 * GPU: the daemon imports the client's GPU memory (CUDA IPC) and its DMA
 * engine moves the card's GPU streams into and out of it. Data integrity of
 * the direct (imported per transfer) and prepinned (imported once) paths for
 * several sizes and offsets (the test core's counter must run on through GPU
 * memory), writes, asynchronous jobs with completion records in GPU memory
 * checked before their payload, and the errors: a handle that cannot be
 * imported, unknown ids, sizes beyond the allocation, a daemon killed in the
 * middle of a transfer; the imports of unpinned writes unmapped while a
 * read waits on the other channel; and a daemon told to stop during a
 * transfer that waits for data. Skips without a CUDA device. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include "unit.h"
#include "xfer_check.h"
#include "xfer_daemon.h"
#include "gpu/gpu.h"

#define DSPEC "devices=testcore:bytes=4096:rate=2G:route=1,testsink;mode=fast;link=unlimited;ddr=256M"

static char why[200];
static uint32_t core, sink;

#define NEED_GPU()                                                                     \
    do {                                                                               \
        if (!gpu_available(why, sizeof why))                                           \
            SKIP("%s", why);                                                           \
    } while (0)

static int set_u32(oni_ctx ctx, int opt, uint32_t v)
{
    return oni_set_driver_opt(ctx, opt, &v, sizeof v);
}

/* Start the daemon and open a context on it; NULL (and *pid <= 0 or the
 * daemon stopped) on failure. */
static oni_ctx open_daemon(pid_t *pid)
{
    *pid = xd_start(DSPEC);
    if (*pid <= 0)
        return NULL;
    oni_ctx ctx = xd_open(&core, &sink);
    if (!ctx) {
        xd_stop(*pid);
        *pid = -1;
    }
    return ctx;
}

#define OPEN_DAEMON(ctx, pid)                                                          \
    oni_ctx ctx = open_daemon(&pid);                                                   \
    if (pid == 0)                                                                      \
        SKIP("no onix-emu: set ONIGPU_BIN to the build directory");                    \
    REQUIRE(ctx)

/* Wait (at most 2 s) for the GPU word at done to read seq. */
static int wait_record(const uint32_t *done, uint32_t seq)
{
    uint32_t seen = 0;
    uint64_t t0 = oni_now_ns();
    while (seen != seq && oni_now_ns() - t0 < 2000000000u)
        if (gpu_copy(&seen, done, 4))
            return 0;
    return seen == seq;
}

TEST(gpu_daemon_read_integrity)
{
    NEED_GPU();
    pid_t pid;
    OPEN_DAEMON(ctx, pid);
    size_t cap = 8 << 20;
    uint8_t *dev = NULL, *host = malloc(cap);
    REQUIRE(gpu_alloc((void **)&dev, cap) == 0);
    static const uint32_t sizes[] = {4, 4096, 4100, 65540, 1 << 20, (3 << 20) + 12};
    static const size_t offs[] = {0, 4, 4104};
    struct xcheck c;
    xcheck_init(&c, core);
    for (int path = 0; path < 2; path++) { /* direct (imported per transfer), prepinned */
        onigpu_buf_t whole = {dev, cap};
        if (path == 1)
            CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, &whole, sizeof whole), 0);
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
            for (size_t o = 0; o < sizeof offs / sizeof *offs; o++) {
                int rc = set_u32(ctx, ONI_DRV_RD_SZ, sizes[s]);
                if (!rc)
                    rc = oni_set_driver_opt(ctx, ONI_DRV_READ, dev + offs[o], 8);
                if (!rc)
                    rc = gpu_copy(host, dev + offs[o], sizes[s]);
                if (rc)
                    UNIT_FAIL("path %d size %u offset %zu: %s", path, sizes[s], offs[o], oni_error_str(rc));
                else
                    xcheck_feed(&c, host, sizes[s]);
            }
        if (path == 1)
            CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, dev, 8), 0);
    }
    /* host buffers (the rings) and GPU buffers (DMA) take turns on one stream */
    CHECK_RC(set_u32(ctx, ONI_DRV_RD_SZ, 4100), 0);
    for (int i = 0; i < 20; i++) {
        uint8_t *to = i % 2 ? host : dev;
        int rc = oni_set_driver_opt(ctx, ONI_DRV_READ, to, 8);
        if (!rc && to == dev)
            rc = gpu_copy(host, dev, 4100);
        CHECK_RC(rc, 0);
        if (!rc)
            xcheck_feed(&c, host, 4100);
    }
    CHECK_EQ(c.errors, 0);
    CHECK(c.frames > 1000);
    gpu_free(dev);
    free(host);
    oni_destroy_ctx(ctx);
    xd_stop(pid);
}


/* A chunked read (CHUNK_SZ) through the daemon of a block that comes slower
 * than the timeout ends with ONI_ETIMEOUT: the whole block gets the
 * context's timeout (onigpu.h). Each chunk had a whole one of its own until
 * 2026-11-25: 8 chunks of 80 ms each, none late, and the read succeeded in
 * about 0.65 s against a 300 ms timeout. No clock is read here. */
TEST(gpu_daemon_chunked_read_within_the_timeout)
{
    NEED_GPU();
    XD_START(pid, "devices=testcore:bytes=4096:rate=100k:route=1,testsink;mode=realtime;link=unlimited;ddr=16M");
    oni_ctx ctx = xd_open(&core, &sink);
    REQUIRE(ctx);
    uint8_t *dev = NULL;
    REQUIRE(gpu_alloc((void **)&dev, 65536) == 0);
    uint32_t tmo = 300;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &tmo, sizeof tmo), 0);
    CHECK_RC(set_u32(ctx, ONI_DRV_RD_SZ, 65536), 0);
    CHECK_RC(set_u32(ctx, ONI_DRV_CHUNK_SZ, 8192), 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ, dev, 8), ONI_ETIMEOUT);
    gpu_free(dev);
    oni_destroy_ctx(ctx);
    xd_stop(pid);
}
TEST(gpu_daemon_write_paths)
{
    NEED_GPU();
    pid_t pid;
    OPEN_DAEMON(ctx, pid);
    enum { N = 1 << 20, F = 4096 };
    uint8_t *dev = NULL, *frames = calloc(1, N);
    uint32_t *done = NULL;
    REQUIRE(gpu_alloc((void **)&dev, N) == 0);
    REQUIRE(gpu_alloc((void **)&done, 4) == 0);
    for (int k = 0; k < N / F; k++) {
        uint32_t hdr[2] = {sink, (F - 8) / 4};
        memcpy(frames + (size_t)k * F, hdr, 8);
    }
    CHECK_RC(gpu_copy(dev, frames, N), 0);
    CHECK_RC(set_u32(ctx, ONI_DRV_WR_SZ, N), 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_WRITE, dev, 8), 0); /* direct */
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, dev, 8), 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_WRITE, dev, 8), 0); /* prepinned */
    /* the card checks frames that came out of GPU memory */
    uint32_t bad[2] = {0xDEAD, (F - 8) / 4};
    CHECK_RC(gpu_copy(dev, bad, 8), 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_WRITE, dev, 8), ONI_EBADFRAME);
    CHECK_RC(gpu_copy(dev, frames, 8), 0);
    /* asynchronous, the record in GPU memory that is not pinned (imported per job) */
    CHECK_RC(gpu_memset(done, 0, 4), 0);
    onigpu_xfer_t x = {dev, N, done, 42, 0};
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_WRITE_ASYNC, &x, sizeof x), 0);
    CHECK(wait_record(done, 42));
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, dev, 8), 0);
    gpu_free(done);
    gpu_free(dev);
    free(frames);
    oni_destroy_ctx(ctx);
    xd_stop(pid);
}

/* Records in GPU memory, written by the daemon's copy stream behind the
 * payload: the payload of each job is checked after its record was seen. */
TEST(gpu_daemon_async_records)
{
    NEED_GPU();
    pid_t pid;
    OPEN_DAEMON(ctx, pid);
    enum { RING = 8, BLK = 16384, JOBS = 2000 };
    uint8_t *dev = NULL, *host = malloc(BLK);
    uint32_t *done_pinned = NULL, *done_loose = NULL, *done_host = NULL;
    REQUIRE(gpu_alloc((void **)&dev, (size_t)RING * BLK) == 0);
    REQUIRE(gpu_alloc((void **)&done_pinned, RING * 4) == 0);
    REQUIRE(gpu_alloc((void **)&done_loose, RING * 4) == 0);
    REQUIRE(gpu_host_alloc((void **)&done_host, 4) == 0);
    CHECK_RC(gpu_memset(done_pinned, 0, RING * 4), 0);
    CHECK_RC(gpu_memset(done_loose, 0, RING * 4), 0);
    CHECK_RC(set_u32(ctx, ONI_DRV_RD_SZ, BLK), 0);
    /* CUDA IPC shares device memory only: no record in host memory */
    onigpu_xfer_t hx = {dev, BLK, done_host, 1, 0};
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ_ASYNC, &hx, sizeof hx), ONI_EUNIMPL);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, dev, 8), 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, done_pinned, 8), 0);
    struct xcheck c;
    xcheck_init(&c, core);
    int next = 0, failed = 0;
    for (int j = 0; j < JOBS + RING && !failed; j++) {
        if (j >= RING) {
            int k = j - RING, slot = k % RING;
            const uint32_t *done = k % 2 ? &done_loose[slot] : &done_pinned[slot];
            if (!wait_record(done, (uint32_t)k + 1)) {
                UNIT_FAIL("job %d: record never came", k);
                failed = 1;
                break;
            }
            CHECK_RC(gpu_copy(host, dev + (size_t)slot * BLK, BLK), 0);
            xcheck_feed(&c, host, BLK);
        }
        if (next < JOBS) {
            int slot = next % RING;
            /* odd jobs: the record in GPU memory that is not pinned (imported per job) */
            volatile uint32_t *done = next % 2 ? &done_loose[slot] : &done_pinned[slot];
            onigpu_xfer_t x = {dev + (size_t)slot * BLK, BLK, done, (uint32_t)next + 1, 0};
            int rc = oni_set_driver_opt(ctx, ONI_DRV_READ_ASYNC, &x, sizeof x);
            if (rc) {
                UNIT_FAIL("submit %d: %s", next, oni_error_str(rc));
                failed = 1;
            }
            next++;
        }
    }
    CHECK_EQ(c.errors, 0);
    CHECK(c.frames > JOBS);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, dev, 8), 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, done_pinned, 8), 0);
    /* an unpinned buffer: imported for the job, released after it */
    uint32_t *d1 = &done_loose[0];
    CHECK_RC(gpu_memset(d1, 0, 4), 0);
    onigpu_xfer_t ux = {dev, BLK, d1, 7, 0};
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ_ASYNC, &ux, sizeof ux), 0);
    CHECK(wait_record(d1, 7));
    CHECK_RC(gpu_copy(host, dev, BLK), 0);
    xcheck_feed(&c, host, BLK);
    CHECK_EQ(c.errors, 0);
    gpu_free(dev);
    gpu_free(done_pinned);
    gpu_free(done_loose);
    gpu_host_free(done_host);
    free(host);
    oni_destroy_ctx(ctx);
    xd_stop(pid);
}

/* A write from device memory that is not pinned imports it for the
 * transfer; that goes over the GPU write channel too, so it does not wait
 * behind a read that waits for the card's data. */
TEST(gpu_daemon_waiting_read_holds_up_no_unpinned_write)
{
    NEED_GPU();
    xd_check_waiting_read(1);
}

/* A driver option set on a thread of its own: one that waits (a read, a PIN). */
struct opt_call {
    oni_ctx ctx;
    int opt;
    const void *value;
    size_t len;
    int rc;
};

static void *set_opt_thread(void *arg)
{
    struct opt_call *o = arg;
    o->rc = oni_set_driver_opt(o->ctx, o->opt, o->value, o->len);
    return NULL;
}

/* A PIN of device memory imports it on the GPU channel, behind a read that
 * waits for data there; meanwhile a write of results from host memory goes
 * on (the PIN once held the GPU stream's lock through its import). */
TEST(gpu_daemon_pin_behind_a_waiting_read_holds_up_no_write)
{
    NEED_GPU();
    XD_START(pid, XFER_SPEC(0)); /* the GPU stream stays empty */
    uint32_t c0 = 0, s0 = 0;
    oni_ctx ctx = xd_open(&c0, &s0);
    CHECK(ctx != NULL);
    uint32_t ms = 2000, wsz = 4096;
    uint8_t *blk = calloc(1, wsz), *dev = NULL;
    if (ctx && blk && !gpu_alloc((void **)&dev, 4096)) {
        CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &ms, sizeof ms), 0);
        CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_WR_SZ, &wsz, sizeof wsz), 0);
        xsum_frames(blk, wsz, 1024, s0, 1, XSUM_START);
        struct xfer_blocked_read r = {ctx, 0};
        onigpu_buf_t whole = {dev, 4096};
        struct opt_call p = {ctx, ONI_DRV_PIN, &whole, sizeof whole, 0};
        pthread_t tr, tp;
        int reading = pthread_create(&tr, NULL, xfer_read_nothing, &r) == 0;
        struct timespec ts = {0, 100000000}; /* the read waits by now */
        nanosleep(&ts, NULL);
        int pinning = pthread_create(&tp, NULL, set_opt_thread, &p) == 0;
        nanosleep(&ts, NULL); /* and the PIN's import behind it */
        uint64_t t0 = oni_now_ns();
        CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_WRITE, blk, 8), 0);
        uint64_t took = oni_now_ns() - t0;
        CHECK(took < 500000000u);
        CHECK(reading && pinning);
        if (reading)
            pthread_join(tr, NULL);
        if (pinning)
            pthread_join(tp, NULL);
        CHECK_RC(r.rc, ONI_ETIMEOUT);
        CHECK_RC(p.rc, 0);
        CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, dev, 8), 0);
    } else {
        UNIT_FAIL("no context or buffers");
    }
    if (dev)
        gpu_free(dev);
    free(blk);
    if (ctx)
        oni_destroy_ctx(ctx);
    xd_stop(pid);
}

/* While a GPU_DMA into device memory waits for the card's data on the GPU
 * channel, the imports that unpinned writes make on the GPU write channel
 * are still unmapped after each write: more than the session's 1024 imports
 * all succeed. (The daemon once kept every mapping while any DMA ran.) */
TEST(gpu_daemon_waiting_gpu_read_keeps_no_released_import)
{
    NEED_GPU();
    XD_START(pid, XFER_SPEC(0)); /* the GPU stream stays empty */
    uint32_t c0 = 0, s0 = 0;
    oni_ctx ctx = xd_open(&c0, &s0);
    CHECK(ctx != NULL);
    uint32_t ms = 2000, wsz = 4096, rsz = 0;
    size_t len = sizeof rsz;
    uint8_t *blk = calloc(1, wsz), *wdev = NULL, *rdev = NULL;
    if (ctx && blk && !oni_get_driver_opt(ctx, ONI_DRV_RD_SZ, &rsz, &len) &&
        !gpu_alloc((void **)&wdev, wsz) && !gpu_alloc((void **)&rdev, rsz)) {
        CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &ms, sizeof ms), 0);
        CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_WR_SZ, &wsz, sizeof wsz), 0);
        xsum_frames(blk, wsz, 1024, s0, 1, XSUM_START);
        CHECK_RC(gpu_copy(wdev, blk, wsz), 0);
        struct opt_call r = {ctx, ONI_DRV_READ, rdev, 8, 0}; /* a GPU_DMA in the daemon, waiting */
        pthread_t t;
        int started = pthread_create(&t, NULL, set_opt_thread, &r) == 0;
        CHECK(started);
        struct timespec ts = {0, 100000000}; /* the read's DMA is waiting by now */
        nanosleep(&ts, NULL);
        int n = 0, rc = 0;
        uint64_t t1 = oni_now_ns();
        while (n < 1100 && !(rc = oni_set_driver_opt(ctx, ONI_DRV_WRITE, wdev, 8)))
            n++;
        uint64_t took = oni_now_ns() - t1;
        CHECK_RC(rc, 0);
        CHECK_EQ(n, 1100);
        CHECK(took < 1500000000u); /* all of them while the read still waited */
        if (started) {
            pthread_join(t, NULL);
            CHECK_RC(r.rc, ONI_ETIMEOUT);
        }
    } else {
        UNIT_FAIL("no context, buffers or read size");
    }
    if (wdev)
        gpu_free(wdev);
    if (rdev)
        gpu_free(rdev);
    free(blk);
    if (ctx)
        oni_destroy_ctx(ctx);
    xd_stop(pid);
}

/* The import messages, raw: a handle that cannot be opened, sizes beyond the
 * allocation, one allocation imported twice, a client that gave up, unknown
 * and released ids. */
TEST(gpu_daemon_import_errors)
{
    NEED_GPU();
    XD_START(pid, DSPEC);
    int ctrl = -1, gpu = -1;
    CHECK_RC(xd_session(&ctrl, &gpu, NULL), 0);
    struct emup_config run = {ONI_CONFIG_RUNNING, 1}; /* the card makes data as it is read */
    CHECK_RC(xd_call(ctrl, EMUP_CONFIG_WRITE, &run, sizeof run, NULL), 0);
    uint8_t *dev = NULL;
    REQUIRE(gpu_alloc((void **)&dev, 1 << 20) == 0);
    struct emup_gpu_import imp = {.size = 1 << 20}, junk = {.size = 1 << 20};
    memset(junk.handle, 0x5A, sizeof junk.handle);
    CHECK_RC(xd_call(gpu, EMUP_GPU_IMPORT, &junk, sizeof junk, NULL), ONI_EINVALARG);
    CHECK_RC(gpu_ipc_export(dev, imp.handle), 0);
    imp.size = 2 << 20;
    CHECK_RC(xd_call(gpu, EMUP_GPU_IMPORT, &imp, sizeof imp, NULL), ONI_EBUFFERSIZE); /* more than it holds */
    imp.size = 1 << 20;
    uint32_t id = 0, id2 = 0;
    CHECK_RC(xd_call(gpu, EMUP_GPU_IMPORT, &imp, sizeof imp, &id), 0);
    CHECK(id != 0);
    CHECK_RC(xd_call(gpu, EMUP_GPU_IMPORT, &imp, sizeof imp, &id2), 0); /* twice: one mapping, two ids */
    CHECK(id2 != 0 && id2 != id);
    struct emup_gpu_dma d = {.id = id, .offset = (1 << 20) - 4096, .len = 8192, .timeout_ms = 500};
    CHECK_RC(xd_call(gpu, EMUP_GPU_DMA, &d, sizeof d, NULL), ONI_EBUFFERSIZE);
    d.len = 4096;
    CHECK_RC(xd_call(gpu, EMUP_GPU_DMA, &d, sizeof d, NULL), 0);
    d.deadline_ns = oni_now_ns() - 1; /* the client gave up already: nothing moves */
    CHECK_RC(xd_call(gpu, EMUP_GPU_DMA, &d, sizeof d, NULL), ONI_ETIMEOUT);
    struct emup_gpu_release rel = {id, 0};
    CHECK_RC(xd_call(gpu, EMUP_GPU_RELEASE, &rel, sizeof rel, NULL), 0);
    CHECK_RC(xd_call(gpu, EMUP_GPU_RELEASE, &rel, sizeof rel, NULL), ONI_ENOTPINNED);
    d.deadline_ns = 0;
    CHECK_RC(xd_call(gpu, EMUP_GPU_DMA, &d, sizeof d, NULL), ONI_ENOTPINNED);
    d.id = id2; /* the shared mapping outlives the first release */
    CHECK_RC(xd_call(gpu, EMUP_GPU_DMA, &d, sizeof d, NULL), 0);
    rel.id = id2;
    CHECK_RC(xd_call(gpu, EMUP_GPU_RELEASE, &rel, sizeof rel, NULL), 0);
    close(gpu);
    close(ctrl);
    gpu_free(dev);
    xd_stop(pid);
}

static void *kill_later(void *arg)
{
    usleep(300000);
    kill(*(pid_t *)arg, SIGKILL);
    return NULL;
}

/* A read into pinned GPU memory waits in the daemon for data that never
 * comes; the daemon is killed: ONI_EDISCONNECTED well within the timeout. */
TEST(gpu_daemon_killed_mid_transfer)
{
    NEED_GPU();
    pid_t pid;
    OPEN_DAEMON(ctx, pid);
    uint8_t *dev = NULL;
    REQUIRE(gpu_alloc((void **)&dev, 65536) == 0);
    CHECK_RC(oni_write_reg(ctx, core, 0, 0), 0); /* the test core stops: no more data */
    CHECK_RC(set_u32(ctx, ONI_DRV_RD_SZ, 65536), 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, dev, 8), 0); /* with the default timeout: the daemon may still be starting CUDA */
    uint32_t t = 200;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &t, sizeof t), 0);
    int drained = 0; /* what the core made before it stopped */
    while (drained < 100000 && oni_set_driver_opt(ctx, ONI_DRV_READ, dev, 8) == 0)
        drained++;
    t = 5000;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &t, sizeof t), 0);
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, kill_later, &pid) == 0);
    uint64_t t0 = oni_now_ns();
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ, dev, 8), ONI_EDISCONNECTED);
    double ms = (double)(oni_now_ns() - t0) / 1e6;
    CHECK(ms < 3000);
    pthread_join(th, NULL);
    waitpid(pid, NULL, 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ, dev, 8), ONI_EDISCONNECTED);
    oni_destroy_ctx(ctx);
    gpu_free(dev);
}

/* The daemon is stopped (SIGTERM) while a synchronous GPU_DMA waits for data
 * that never comes (the card is not running), 20 s of its timeout left: the
 * daemon ends the wait and exits at once, rather than wait out the transfer
 * (or its own 10 s limit for connections to finish). */
TEST(gpu_daemon_stop_ends_a_waiting_dma)
{
    NEED_GPU();
    XD_START(pid, DSPEC);
    int ctrl = -1, gpu = -1;
    CHECK_RC(xd_session(&ctrl, &gpu, NULL), 0);
    uint8_t *dev = NULL;
    REQUIRE(gpu_alloc((void **)&dev, 4096) == 0);
    struct emup_gpu_import imp = {.size = 4096};
    CHECK_RC(gpu_ipc_export(dev, imp.handle), 0);
    uint32_t id = 0;
    CHECK_RC(xd_call(gpu, EMUP_GPU_IMPORT, &imp, sizeof imp, &id), 0);
    struct emup_gpu_dma d = {.id = id, .len = 4096, .timeout_ms = 20000};
    CHECK_RC(emup_send(gpu, EMUP_GPU_DMA, 1, &d, sizeof d, -1), 0);
    usleep(300000); /* the daemon waits in the card */
    uint64_t t0 = oni_now_ns();
    int status = daemon_stop(pid, SIGTERM, xd_sock);
    double ms = (double)(oni_now_ns() - t0) / 1e6;
    CHECK(ms < 3000);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    printf("  the daemon stopped in %.0f ms\n", ms);
    close(ctrl);
    close(gpu);
    gpu_free(dev);
}

/* A host read of the GPU stream that timed out in the client is answered
 * late; a GPU_DMA read after it waits for that answer first, whose block
 * comes before the one the DMA takes (before 2026-11-24 the stream came out
 * of order). */
TEST(gpu_daemon_late_read_then_dma_keeps_order)
{
    NEED_GPU();
    pid_t pid;
    OPEN_DAEMON(ctx, pid);
    enum { B = 4096 };
    uint8_t *dev = NULL, *host = malloc(B);
    REQUIRE(gpu_alloc((void **)&dev, B) == 0);
    struct xcheck c;
    xcheck_init(&c, core);
    CHECK_RC(set_u32(ctx, ONI_DRV_RD_SZ, B), 0);
    onigpu_buf_t whole = {dev, B};
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, &whole, sizeof whole), 0);
    for (int i = 0; i < 3; i++) {
        CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ, host, 8), 0);
        xcheck_feed(&c, host, B);
    }
    uint32_t t = 100;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &t, sizeof t), 0);
    kill(pid, SIGSTOP);
    int st;
    REQUIRE(waitpid(pid, &st, WUNTRACED) == pid);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ, host, 8), ONI_ETIMEOUT);
    kill(pid, SIGCONT);
    usleep(100000);
    int errs0 = (int)c.errors;
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ, dev, 8), 0); /* GPU_DMA */
    CHECK_RC(gpu_copy(host, dev, B), 0);
    xcheck_feed(&c, host, B);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ, host, 8), 0); /* ring */
    xcheck_feed(&c, host, B);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ, host, 8), 0);
    xcheck_feed(&c, host, B);
    fprintf(stderr, "  counter errors before %d, after the late read then DMA %d\n", errs0, (int)c.errors);
    CHECK_EQ(c.errors, 0);
    gpu_free(dev);
    free(host);
    oni_destroy_ctx(ctx);
    xd_stop(pid);
}

/* A host-buffer write of the GPU write stream after asynchronous GPU -> card
 * jobs reaches the card after them, through the daemon as in-process (before
 * 2026-11-24 the daemon gave it to the card at once). */
TEST(gpu_daemon_host_write_after_async_jobs_keeps_order)
{
    NEED_GPU();
    static const char *RSPEC = "devices=testcore,stim;mode=fast";
    enum { N = 4 << 20, F = 4096, J = 8 };
    uint8_t *frames = malloc(N);
    REQUIRE(frames);
    for (int mode = 0; mode < 2; mode++) {
        pid_t pid = 0;
        char spec[200];
        if (mode) {
            pid = xd_start(RSPEC); /* as XD_START: no built daemon skips, one that does not start fails */
            if (pid == 0)
                SKIP("no onix-emu: set ONIGPU_BIN to the build directory");
            REQUIRE(pid > 0);
            snprintf(spec, sizeof spec, "daemon=%s;%s", xd_sock, RSPEC);
        } else
            snprintf(spec, sizeof spec, "%s", RSPEC);
        oni_ctx ctx = xfer_open(spec, &core, NULL);
        REQUIRE(ctx);
        oni_device_t table[16];
        size_t sz = sizeof table;
        CHECK_RC(oni_get_opt(ctx, ONI_OPT_DEVICETABLE, table, &sz), 0);
        uint32_t stim = 0;
        for (size_t i = 0; i < sz / sizeof *table; i++)
            if (table[i].id == ONIX_ONIGPU_STIM)
                stim = table[i].idx;
        uint8_t *dev = NULL;
        REQUIRE(gpu_alloc((void **)&dev, (size_t)J * N + 64) == 0);
        uint32_t *done = (uint32_t *)(dev + (size_t)J * N);
        CHECK_RC(gpu_memset(done, 0, 64), 0);
        for (int j = 0; j <= J; j++) {
            for (int k = 0; k < N / F; k++) {
                uint32_t hdr[3] = {stim, (F - 8) / 4, j < J ? (uint32_t)j + 1 : 99u};
                memcpy(frames + (size_t)k * F, hdr, sizeof hdr);
            }
            if (j < J)
                CHECK_RC(gpu_copy(dev + (size_t)j * N, frames, N), 0);
        }
        onigpu_buf_t whole = {dev, (size_t)J * N + 64};
        CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, &whole, sizeof whole), 0);
        CHECK_RC(set_u32(ctx, ONI_DRV_WR_SZ, N), 0);
        for (int j = 0; j < J; j++) {
            onigpu_xfer_t x = {dev + (size_t)j * N, N, done + j, (uint32_t)j + 1, 0};
            CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_WRITE_ASYNC, &x, sizeof x), 0);
        }
        CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_WRITE, frames, 8), 0); /* tag 99, host buffer */
        for (int j = 0; j < J; j++)
            CHECK(wait_record(done + j, (uint32_t)j + 1));
        oni_reg_val_t tag = 0;
        CHECK_RC(oni_read_reg(ctx, stim, ONIEMU_REG_DEVICE + 1, &tag), 0); /* LAST_TAG */
        fprintf(stderr, "  %s: last tag the stim received %u (the host write's is 99)\n",
                mode ? "daemon" : "in-process", tag);
        CHECK_EQ(tag, 99);
        CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, dev, 8), 0);
        gpu_free(dev);
        oni_destroy_ctx(ctx);
        if (pid > 0)
            xd_stop(pid);
    }
    free(frames);
}
