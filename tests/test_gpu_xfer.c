/* test_gpu_xfer.c - the GPU data stream on a real GPU: data integrity of every
 * card -> GPU path for many sizes and offsets (the test core's counter must
 * run on without a gap through GPU memory), GPU -> card writes, the pin/unpin
 * lifecycle and its errors, completion records under stress (payload checked
 * after the record is seen), many randomized transfers, a copy that outlives
 * its timeout losing nothing, and reads far into a FIFO of more windows than
 * the DMA engine locks. Skips without a CUDA device. */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include "unit.h"
#include "xfer_check.h"
#include "gpu/gpu.h"
#include "oni.h"
#include "oni/util/clock.h"

#define GPU_SPEC "devices=testcore:bytes=4096:rate=2G:route=1,testsink:hash=1;mode=fast;link=unlimited;ddr=256M"

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

/* Read one block of n bytes into GPU memory at dst by the current path, copy
 * it back and feed the checker. */
static int read_check(oni_ctx ctx, uint8_t *dst, uint32_t n, uint8_t *host, struct xcheck *c, int token)
{
    int rc = set_u32(ctx, ONI_DRV_RD_SZ, n);
    if (!rc) {
        onigpu_buf_t b = {dst, n};
        rc = token ? oni_set_driver_opt(ctx, ONI_DRV_READ, dst, 8)
                   : oni_set_driver_opt(ctx, ONI_DRV_READ, &b, sizeof b);
    }
    if (!rc)
        rc = gpu_copy(host, dst, n);
    if (!rc)
        xcheck_feed(c, host, n);
    return rc;
}

TEST(gpu_xfer_paths_integrity)
{
    NEED_GPU();
    oni_ctx ctx = xfer_open(GPU_SPEC, &core, &sink);
    REQUIRE(ctx);
    size_t cap = 8 << 20;
    uint8_t *dev = NULL, *host = malloc(cap);
    REQUIRE(gpu_alloc((void **)&dev, cap) == 0);
    static const uint32_t sizes[] = {4, 64, 4096, 4100, 65540, 1 << 20, (3 << 20) + 12};
    static const size_t offs[] = {0, 4, 256, 4104};
    struct xcheck c;
    xcheck_init(&c, core);
    for (int path = 0; path < 3; path++) { /* direct, prepinned, chunked */
        onigpu_buf_t whole = {dev, cap};
        if (path == 1)
            CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, &whole, sizeof whole), 0);
        if (path == 2)
            CHECK_RC(set_u32(ctx, ONI_DRV_CHUNK_SZ, 65536), 0);
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
            for (size_t o = 0; o < sizeof offs / sizeof *offs; o++) {
                /* prepinned: offsets lie inside the pinned buffer dev */
                int rc = read_check(ctx, dev + offs[o], sizes[s], host, &c, (int)(s + o) % 2);
                if (rc)
                    UNIT_FAIL("path %d size %u offset %zu: %s", path, sizes[s], offs[o], oni_error_str(rc));
            }
        if (path == 1)
            CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, dev, 8), 0);
        if (path == 2)
            CHECK_RC(set_u32(ctx, ONI_DRV_CHUNK_SZ, 0), 0);
    }
    CHECK_EQ(c.errors, 0);
    CHECK(c.frames > 1000);
    gpu_free(dev);
    free(host);
    oni_destroy_ctx(ctx);
}

/* GPU -> card: every path delivers the frames byte for byte (the sink's
 * hash register), for several block sizes and buffer offsets; a malformed
 * block is refused whole; an asynchronous write's record comes after. */
TEST(gpu_xfer_write_paths)
{
    NEED_GPU();
    oni_ctx ctx = xfer_open(GPU_SPEC, &core, &sink);
    REQUIRE(ctx);
    enum { N = 1 << 20, F = 4096, OFF = 4096 };
    static const uint32_t sizes[] = {F, 3 * F, 64 * F, N};
    static const size_t offs[] = {0, 8, 1000, OFF};
    uint8_t *dev = NULL, *frames = calloc(1, N);
    oni_reg_val_t got = 0;
    uint32_t want = XSUM_START, seed = 0;
    REQUIRE(gpu_alloc((void **)&dev, N + OFF) == 0);
    for (int pinned = 0; pinned < 2; pinned++) {
        if (pinned)
            CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, dev, 8), 0);
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            for (size_t o = 0; o < sizeof offs / sizeof offs[0]; o++) {
                for (uint32_t chunk = 0; chunk <= 65536; chunk += 65536) { /* whole, then chunked */
                    want = xsum_frames(frames, sizes[i], F, sink, ++seed, want);
                    CHECK_RC(gpu_copy(dev + offs[o], frames, sizes[i]), 0);
                    CHECK_RC(set_u32(ctx, ONI_DRV_WR_SZ, sizes[i]), 0);
                    CHECK_RC(set_u32(ctx, ONI_DRV_CHUNK_SZ, chunk), 0);
                    onigpu_buf_t b = {dev + offs[o], sizes[i]};
                    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_WRITE, &b, sizeof b), 0);
                    CHECK_RC(oni_read_reg(ctx, sink, XSUM_REG, &got), 0);
                    if (got != want) {
                        UNIT_FAIL("%s write of %u bytes at offset %zu, chunk %u: sink hash %08x, want %08x",
                                  pinned ? "prepinned" : "direct", sizes[i], offs[o], chunk, got, want);
                        want = got; /* report each bad transfer once */
                    }
                }
            }
        }
    }
    CHECK_RC(set_u32(ctx, ONI_DRV_CHUNK_SZ, 0), 0);
    CHECK_RC(set_u32(ctx, ONI_DRV_WR_SZ, N), 0);
    /* a malformed frame in GPU memory is refused by the card, nothing of it arrives */
    xsum_frames(frames, N, F, sink, ++seed, 0);
    uint32_t bad[2] = {0xDEAD, (F - 8) / 4};
    memcpy(frames + N / 2, bad, 8);
    CHECK_RC(gpu_copy(dev, frames, N), 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_WRITE, dev, 8), ONI_EBADFRAME);
    CHECK_RC(oni_read_reg(ctx, sink, XSUM_REG, &got), 0);
    CHECK_EQ(got, want);
    /* asynchronous write with the record in GPU memory */
    want = xsum_frames(frames, N, F, sink, ++seed, want);
    CHECK_RC(gpu_copy(dev, frames, N), 0);
    uint32_t *done = NULL, seen = 0;
    REQUIRE(gpu_alloc((void **)&done, 4) == 0);
    CHECK_RC(gpu_memset(done, 0, 4), 0);
    onigpu_xfer_t x = {dev, N, done, 42, 0};
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_WRITE_ASYNC, &x, sizeof x), 0);
    uint64_t t0 = oni_now_ns();
    while (seen != 42 && oni_now_ns() - t0 < 2000000000u)
        gpu_copy(&seen, done, 4);
    CHECK_EQ(seen, 42);
    CHECK_RC(oni_read_reg(ctx, sink, XSUM_REG, &got), 0);
    CHECK_EQ(got, want);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, dev, 8), 0);
    gpu_free(done);
    gpu_free(dev);
    free(frames);
    oni_destroy_ctx(ctx);
}

TEST(gpu_xfer_pin_lifecycle)
{
    NEED_GPU();
    oni_ctx ctx = xfer_open(GPU_SPEC, &core, &sink);
    REQUIRE(ctx);
    uint8_t *a = NULL, *small = NULL, *gone = NULL, *host = malloc(65536);
    REQUIRE(gpu_alloc((void **)&a, 65536) == 0);
    REQUIRE(gpu_alloc((void **)&small, 1024) == 0);
    REQUIRE(gpu_alloc((void **)&gone, 65536) == 0);
    struct xcheck c;
    xcheck_init(&c, core);
    CHECK_RC(set_u32(ctx, ONI_DRV_RD_SZ, 4096), 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, a, 8), ONI_ENOTPINNED);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, a, 8), 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, a, 8), ONI_EPINNED);
    CHECK_RC(read_check(ctx, a, 4096, host, &c, 1), 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, a, 8), 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, a, 8), ONI_ENOTPINNED);
    /* buffers shorter than the block, known from the allocation's range */
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ, small, 8), ONI_EBUFFERSIZE);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ, a + 65536 - 4092, 8), ONI_EBUFFERSIZE);
    onigpu_buf_t too_long = {small, 4096};
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, &too_long, sizeof too_long), ONI_EBUFFERSIZE);
    /* freed while pinned: detected, and the stream loses nothing */
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, gone, 8), 0);
    gpu_free(gone);
    uint8_t *again = NULL;
    REQUIRE(gpu_alloc((void **)&again, 65536) == 0); /* may land at the same address */
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ, gone, 8), ONI_EPINNED);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, gone, 8), 0);
    CHECK_RC(read_check(ctx, a, 4096, host, &c, 1), 0);
    /* freed while pinned, nothing allocated since: the address is no
     * allocation at all now (CUDA knows no buffer id for it) */
    uint8_t *lost = NULL;
    REQUIRE(gpu_alloc((void **)&lost, 8 << 20) == 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, lost, 8), 0);
    gpu_free(lost);
    unsigned long long id = 1;
    CHECK_RC(gpu_buffer_id(lost, &id), 0);
    CHECK_EQ(id, 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ, lost, 8), ONI_EPINNED);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, lost, 8), 0);
    CHECK_RC(read_check(ctx, a, 4096, host, &c, 1), 0);
    CHECK_EQ(c.errors, 0);
    gpu_free(again);
    gpu_free(a);
    gpu_free(small);
    free(host);
    oni_destroy_ctx(ctx);
}

/* xorshift: reproducible randomness */
static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Completion order under stress: jobs of random sizes in flight on a ring of
 * slots, records in GPU and host memory taking turns; each job is retired
 * only after its record was seen, then its payload is copied back and the
 * test core's counter checked, so a record that overtook its payload fails.
 * ONIGPU_XFER_ASYNC sets the number of jobs (default 10^6). */
TEST(gpu_xfer_completion_records_under_stress)
{
    NEED_GPU();
    const char *env = getenv("ONIGPU_XFER_ASYNC");
    int jobs = env ? atoi(env) : 1000000;
    oni_ctx ctx = xfer_open(GPU_SPEC, &core, &sink);
    REQUIRE(ctx);
    enum { RING = 8, BLK = 16384 };
    uint8_t *dev = NULL, *host = malloc(BLK);
    uint32_t *done_dev = NULL, *done_host = NULL, len[RING];
    REQUIRE(gpu_alloc((void **)&dev, (size_t)RING * BLK) == 0);
    REQUIRE(gpu_alloc((void **)&done_dev, RING * 4) == 0);
    REQUIRE(gpu_host_alloc((void **)&done_host, RING * 4) == 0);
    CHECK_RC(gpu_memset(done_dev, 0, RING * 4), 0);
    memset(done_host, 0, RING * 4);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, dev, 8), 0);
    struct xcheck c;
    xcheck_init(&c, core);
    uint64_t seed = 0x2545F4914F6CDD1Du, t_start = oni_now_ns();
    int next = 0, failed = 0;
    for (int j = 0; j < jobs + RING && !failed; j++) {
        if (j >= RING) { /* retire job j - RING: wait for its record, then check its payload */
            int k = j - RING, slot = k % RING;
            uint32_t seq = (uint32_t)k + 1, seen = 0;
            uint64_t t0 = oni_now_ns();
            while (seen != seq && oni_now_ns() - t0 < 2000000000u) {
                if (k % 2)
                    seen = __atomic_load_n(&done_host[slot], __ATOMIC_ACQUIRE);
                else
                    gpu_copy(&seen, &done_dev[slot], 4);
            }
            if (seen != seq) {
                UNIT_FAIL("job %d: record %u never came (saw %u)", k, seq, seen);
                failed = 1;
                break;
            }
            CHECK_RC(gpu_copy(host, dev + (size_t)slot * BLK, len[slot]), 0);
            xcheck_feed(&c, host, len[slot]);
            if (c.errors) {
                UNIT_FAIL("job %d (%u bytes): payload wrong after its record", k, len[slot]);
                failed = 1;
                break;
            }
        }
        if (next < jobs) {
            int slot = next % RING;
            len[slot] = (uint32_t)(4 + 4 * (rnd(&seed) % (BLK / 4)));
            volatile uint32_t *done = next % 2 ? &done_host[slot] : &done_dev[slot];
            /* every slot lies inside the pinned buffer dev and uses its pin */
            onigpu_xfer_t x = {dev + (size_t)slot * BLK, len[slot], done, (uint32_t)next + 1, 0};
            int rc = set_u32(ctx, ONI_DRV_RD_SZ, len[slot]); /* a job moves RD_SZ bytes, taken at submission */
            if (!rc)
                rc = oni_set_driver_opt(ctx, ONI_DRV_READ_ASYNC, &x, sizeof x);
            if (rc) {
                UNIT_FAIL("submit %d: %s", next, oni_error_str(rc));
                failed = 1;
            }
            next++;
        }
    }
    fprintf(stderr, "  %d asynchronous jobs of 4 B-16 KiB retired and checked in %.1f s\n", next,
            (oni_now_ns() - t_start) / 1e9);
    CHECK_EQ(c.errors, 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, dev, 8), 0);
    gpu_free(dev);
    gpu_free(done_dev);
    gpu_host_free(done_host);
    free(host);
    oni_destroy_ctx(ctx);
}

TEST(gpu_xfer_randomized)
{
    NEED_GPU();
    const char *env = getenv("ONIGPU_XFER_RANDOM");
    long total = env ? atol(env) : 1000000;
    oni_ctx ctx = xfer_open(GPU_SPEC, &core, &sink);
    REQUIRE(ctx);
    enum { MAXB = 8192 };
    uint8_t *dev = NULL, *pinned = NULL, *host = malloc(MAXB + 64);
    REQUIRE(gpu_alloc((void **)&dev, MAXB + 64) == 0);
    REQUIRE(gpu_alloc((void **)&pinned, MAXB + 64) == 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, pinned, 8), 0);
    struct xcheck c;
    xcheck_init(&c, core);
    uint64_t seed = 0x9E3779B97F4A7C15u;
    uint64_t t_start = oni_now_ns();
    long i;
    for (i = 0; i < total; i++) {
        uint64_t r = rnd(&seed);
        uint32_t n = (uint32_t)(4 + 4 * (r % (MAXB / 4)));
        size_t off = 4 * ((r >> 20) % 16);
        int path = (int)((r >> 32) % 4), rc;
        if (path == 3) { /* host buffer */
            rc = set_u32(ctx, ONI_DRV_RD_SZ, n);
            if (!rc)
                rc = oni_set_driver_opt(ctx, ONI_DRV_READ, host, 8);
            if (!rc)
                xcheck_feed(&c, host, n);
        } else {
            if (path == 2)
                rc = set_u32(ctx, ONI_DRV_CHUNK_SZ, 4 * (1 + (uint32_t)((r >> 40) % 1024)));
            rc = read_check(ctx, (path == 1 ? pinned : dev + off), n, host, &c, 1);
            if (path == 2)
                set_u32(ctx, ONI_DRV_CHUNK_SZ, 0);
        }
        if (rc || c.errors) {
            UNIT_FAIL("transfer %ld (path %d, %u bytes): %s", i, path, n, oni_error_str(rc));
            break;
        }
    }
    fprintf(stderr, "  %ld randomized transfers in %.1f s\n", i, (oni_now_ns() - t_start) / 1e9);
    CHECK_EQ(c.errors, 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, pinned, 8), 0);
    gpu_free(dev);
    gpu_free(pinned);
    free(host);
    oni_destroy_ctx(ctx);
}

/* Wait (at most ms) until the card's GPU-stream FIFO holds n bytes. */
static int fifo_holds(oni_ctx ctx, uint64_t n, uint64_t ms)
{
    onigpu_stream_stats_t st = {0};
    uint64_t t0 = oni_now_ns();
    do {
        size_t sz = sizeof st;
        if (oni_get_driver_opt(ctx, ONI_DRV_STREAM_STATS, &st, &sz))
            return 0;
    } while (st.fifo_bytes[1] < n && oni_now_ns() - t0 < ms * 1000000u);
    return st.fifo_bytes[1] >= n;
}

/* A copy into GPU memory that outlives its timeout: the read says
 * ONI_ETIMEOUT, and the data it was moving stays in the card, so the next
 * read (which first waits for that copy) delivers it again: the counter runs
 * on without a gap. The card fills its FIFO in real time first, so that the
 * read finds its 64 MiB there and can only time out in the copy. Whether
 * the copy outlives 1 ms depends on how much of it is still queued when the
 * wait starts (ring memory that cannot be locked is copied in 64 MiB windows
 * through a bounce buffer, and only the last piece is left then): each try
 * moves the read's end by 4 MiB, until one times out. */
TEST(gpu_xfer_timed_out_copy_loses_nothing)
{
    NEED_GPU();
    oni_ctx ctx = xfer_open("devices=testcore:bytes=4096:rate=1G:route=1,testsink;mode=realtime;link=unlimited;ddr=2G",
                            &core, &sink);
    REQUIRE(ctx);
    const uint32_t big = 64u << 20, step = 4u << 20;
    uint8_t *dev = NULL, *host = malloc(big);
    CHECK(host != NULL);
    struct xcheck c;
    xcheck_init(&c, core);
    int tries = 0, timed_out = 0;
    if (host && gpu_alloc((void **)&dev, big) == 0) {
        uint32_t slow = 5000, fast = 1;
        for (; tries < 16 && !timed_out; tries++) {
            CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &slow, sizeof slow), 0);
            CHECK_RC(read_check(ctx, dev, step, host, &c, 1), 0); /* moves the next read's end */
            REQUIRE(fifo_holds(ctx, big, 3000));
            CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &fast, sizeof fast), 0);
            CHECK_RC(set_u32(ctx, ONI_DRV_RD_SZ, big), 0);
            int rc = oni_set_driver_opt(ctx, ONI_DRV_READ, dev, 8);
            if (rc == ONI_ETIMEOUT) {
                timed_out = 1;
            } else {
                CHECK_RC(rc, 0);
                CHECK_RC(gpu_copy(host, dev, big), 0); /* done in time: its data counts */
                xcheck_feed(&c, host, big);
            }
        }
        CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &slow, sizeof slow), 0);
        CHECK_RC(read_check(ctx, dev, big, host, &c, 1), 0); /* after a timeout: the same data again */
        gpu_free(dev);
    } else {
        UNIT_FAIL("no memory for 64 MiB");
    }
    CHECK_EQ(c.errors, 0);
    free(host);
    oni_destroy_ctx(ctx);
    if (!timed_out)
        SKIP("no copy outlived its 1 ms wait in %d tries: nothing to check here", tries);
    fprintf(stderr, "  the read timed out in its copy at try %d; %llu frames in order\n", tries,
            (unsigned long long)c.frames);
}

/* The same with an asynchronous read whose record is in GPU memory: the
 * record is queued behind the copy, so once the copy is under way the job
 * cannot be called back. A job whose copy outlives its wait therefore counts
 * as done, writes its record when the copy lands, and its data is not
 * delivered again; a job that reports a failure writes no record. Either
 * way the counter runs on without a gap or a repeat. */
TEST(gpu_xfer_async_copy_outliving_its_wait_is_done_once)
{
    NEED_GPU();
    oni_ctx ctx = xfer_open("devices=testcore:bytes=4096:rate=1G:route=1,testsink;mode=realtime;link=unlimited;ddr=2G",
                            &core, &sink);
    REQUIRE(ctx);
    const uint32_t big = 64u << 20, step = 4u << 20;
    uint8_t *dev = NULL, *dev2 = NULL, *host = malloc(big);
    uint32_t *word = NULL;
    struct xcheck c;
    xcheck_init(&c, core);
    int failed = 0;
    if (host && !gpu_alloc((void **)&dev, big) && !gpu_alloc((void **)&dev2, big) && !gpu_alloc((void **)&word, 64)) {
        uint32_t slow = 5000, fast = 1;
        for (uint32_t t = 1; t <= 12 && !failed; t++) {
            CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &slow, sizeof slow), 0);
            CHECK_RC(read_check(ctx, dev2, step, host, &c, 1), 0); /* moves the job's end */
            REQUIRE(fifo_holds(ctx, 2ull * big, 3000));
            CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &fast, sizeof fast), 0);
            CHECK_RC(set_u32(ctx, ONI_DRV_RD_SZ, big), 0);
            onigpu_xfer_t x = {dev, big, word, t, 0};
            CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ_ASYNC, &x, sizeof x), 0);
            CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &slow, sizeof slow), 0);
            int rc = oni_set_driver_opt(ctx, ONI_DRV_READ, dev2, 8); /* after the job: its error, or this read */
            uint32_t w = 0;
            if (rc == 0) {
                uint64_t t0 = oni_now_ns();
                while (w != t && oni_now_ns() - t0 < 2000000000u)
                    CHECK_RC(gpu_copy(&w, word, 4), 0);
                CHECK_EQ(w, t);
                CHECK_RC(gpu_copy(host, dev, big), 0); /* the job's block, then the read's */
                xcheck_feed(&c, host, big);
                CHECK_RC(gpu_copy(host, dev2, big), 0);
                xcheck_feed(&c, host, big);
            } else {
                CHECK_RC(rc, ONI_ETIMEOUT); /* failed: no record, and its data stays in the card */
                usleep(200000);
                CHECK_RC(gpu_copy(&w, word, 4), 0);
                CHECK(w != t);
                failed = 1;
            }
        }
        CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &slow, sizeof slow), 0);
        CHECK_RC(read_check(ctx, dev2, step, host, &c, 1), 0); /* the stream runs on */
    } else {
        UNIT_FAIL("no GPU memory for the test");
    }
    CHECK_EQ(c.errors, 0);
    fprintf(stderr, "  %llu frames in order\n", (unsigned long long)c.frames);
    gpu_free(dev);
    gpu_free(dev2);
    gpu_free(word);
    free(host);
    oni_destroy_ctx(ctx);
}

/* A chunked read waits until the card holds the whole block: one that times
 * out leaves every byte in the card (before 2026-11-24 the chunks moved
 * before the timeout were lost). */
TEST(gpu_xfer_chunked_read_timeout_keeps_the_block)
{
    NEED_GPU();
    oni_ctx ctx = xfer_open("devices=testcore:bytes=4096:rate=100M:route=1;mode=realtime;link=unlimited;ddr=256M",
                            &core, NULL);
    REQUIRE(ctx);
    uint8_t *dev = NULL;
    REQUIRE(gpu_alloc((void **)&dev, 64u << 20) == 0);
    REQUIRE(fifo_holds(ctx, 8u << 20, 3000));
    uint32_t off = 0, t = 200;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &off, sizeof off), 0);
    onigpu_stream_stats_t st = {0};
    size_t sz = sizeof st;
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_STREAM_STATS, &st, &sz), 0);
    uint64_t before = st.fifo_bytes[1];
    CHECK_RC(set_u32(ctx, ONI_DRV_CHUNK_SZ, 1u << 20), 0);
    CHECK_RC(set_u32(ctx, ONI_DRV_RD_SZ, (uint32_t)(before & ~3ull) + (4u << 20)), 0); /* more than there is */
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &t, sizeof t), 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ, dev, 8), ONI_ETIMEOUT);
    sz = sizeof st;
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_STREAM_STATS, &st, &sz), 0);
    CHECK_EQ(st.fifo_bytes[1], before);
    gpu_free(dev);
    oni_destroy_ctx(ctx);
}

/* The DMA engine page-locks the card's ring in 64 windows of 64 MiB at
 * most; a backlog that reaches past 4 GiB into the GPU stream's FIFO (ddr=16G
 * gives it 8 GiB) is read through the bounce buffer from there on, not
 * refused (it was ONI_EBADALLOC). The stream holds only the test core's
 * 4112-byte frames, so each block's first whole frame is checked against
 * the counter expected at its offset. */
TEST(gpu_xfer_reads_past_the_locked_windows)
{
    NEED_GPU();
    oni_ctx ctx = xfer_open("devices=testcore:bytes=4096:rate=2G:route=1,testsink;mode=realtime;link=unlimited;ddr=16G",
                            &core, &sink);
    REQUIRE(ctx);
    const uint64_t frame = 16 + 4096, want = (4ull << 30) + (512ull << 20);
    const uint32_t block = 16u << 20;
    uint8_t *dev = NULL, hdr[32];
    REQUIRE(gpu_alloc((void **)&dev, block) == 0);
    if (!fifo_holds(ctx, want, 20000)) {
        gpu_free(dev);
        oni_destroy_ctx(ctx);
        SKIP("the card did not build a %llu-byte backlog in 20 s", (unsigned long long)want);
    }
    CHECK_RC(set_u32(ctx, ONI_DRV_RD_SZ, block), 0);
    uint64_t off = 0, c0 = 0, bad = 0;
    int rc = 0;
    for (; off < want && !rc; off += block) {
        if ((rc = oni_set_driver_opt(ctx, ONI_DRV_READ, dev, 8)))
            break;
        uint64_t first = (off + frame - 1) / frame * frame; /* the block's first whole frame */
        if ((rc = gpu_copy(hdr, dev + (first - off), sizeof hdr)))
            break;
        uint32_t dev_idx, sz;
        uint64_t w;
        memcpy(&dev_idx, hdr + 8, 4);
        memcpy(&sz, hdr + 12, 4);
        memcpy(&w, hdr + 16, 8);
        if (!off)
            c0 = w;
        bad += dev_idx != core || sz != 4096 || w != c0 + first / frame * (4096 / 8);
    }
    CHECK_RC(rc, 0);
    CHECK_EQ(bad, 0);
    CHECK(off >= want);
    fprintf(stderr, "  read %llu MiB in 16 MiB blocks, %llu bad\n", (unsigned long long)(off >> 20),
            (unsigned long long)bad);
    gpu_free(dev);
    oni_destroy_ctx(ctx);
}
