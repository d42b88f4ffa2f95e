/* test_xfer_opts.c - the GPU data stream options of the emu driver
 * (include/onigpu.h) without a GPU: option validation and error paths, host
 * buffer READ/WRITE/READ_ASYNC with data checked, routing, timeouts, and
 * what a GPU pointer gets where there is no usable CUDA. Through oni.h only. */
#include <stdint.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include "unit.h"
#include "xfer_check.h"
#include "oni.h"
#include "oni/util/clock.h"
#include "gpu/gpu.h"

static uint32_t core, sink;

static oni_ctx open_gpu_stream(void)
{
    return xfer_open(XFER_SPEC(1), &core, &sink);
}

static int set_u32(oni_ctx ctx, int opt, uint32_t v)
{
    return oni_set_driver_opt(ctx, opt, &v, sizeof v);
}

TEST(xfer_block_size_options)
{
    oni_ctx ctx = open_gpu_stream();
    REQUIRE(ctx);
    uint32_t v = 0;
    size_t sz = sizeof v;
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_RD_SZ, &v, &sz), 0);
    CHECK_EQ(v, 4096);
    CHECK_EQ(sz, 4);
    CHECK_RC(set_u32(ctx, ONI_DRV_RD_SZ, 65536), 0);
    CHECK_RC(set_u32(ctx, ONI_DRV_WR_SZ, 128), 0);
    sz = 8;
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_RD_SZ, &v, &sz), 0);
    CHECK_EQ(v, 65536);
    CHECK_EQ(sz, 4);
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_WR_SZ, &v, &sz), 0);
    CHECK_EQ(v, 128);
    /* bad values and sizes, and nothing changes */
    CHECK_RC(set_u32(ctx, ONI_DRV_RD_SZ, 0), ONI_EINVALARG);
    CHECK_RC(set_u32(ctx, ONI_DRV_RD_SZ, 6), ONI_EINVALARG);
    CHECK_RC(set_u32(ctx, ONI_DRV_RD_SZ, ONIGPU_MAX_BLOCK + 4), ONI_EINVALARG);
    uint64_t big = 4096;
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_RD_SZ, &big, sizeof big), ONI_EINVALARG);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_RD_SZ, NULL, 4), ONI_EINVALARG);
    sz = 2;
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_RD_SZ, &v, &sz), ONI_EBUFFERSIZE);
    CHECK_EQ(sz, 4); /* what it takes */
    sz = 4;
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_RD_SZ, &v, &sz), 0);
    CHECK_EQ(v, 65536);
    /* chunking: 0 turns it off */
    CHECK_RC(set_u32(ctx, ONI_DRV_CHUNK_SZ, 1 << 20), 0);
    CHECK_RC(set_u32(ctx, ONI_DRV_CHUNK_SZ, 0), 0);
    CHECK_RC(set_u32(ctx, ONI_DRV_CHUNK_SZ, 3), ONI_EINVALARG);
    sz = 4;
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_CHUNK_SZ, &v, &sz), 0);
    CHECK_EQ(v, 0);
    /* set-only options cannot be read */
    sz = sizeof v;
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_PIN, &v, &sz), ONI_EINVALOPT);
    oni_destroy_ctx(ctx);
}

TEST(xfer_pin_unpin_errors)
{
    oni_ctx ctx = open_gpu_stream();
    REQUIRE(ctx);
    uint8_t *a = malloc(8192), *b = malloc(8192);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, a, 8), ONI_ENOTPINNED);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, a, 8), 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, a, 8), ONI_EPINNED);
    onigpu_buf_t bb = {b, 8192};
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, &bb, sizeof bb), 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, b, 8), ONI_EPINNED);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, a, 8), 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, a, 8), ONI_ENOTPINNED);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, &bb, sizeof bb), 0);
    /* malformed arguments */
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, NULL, 8), ONI_EINVALARG);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, a, 3), ONI_EINVALARG);
    onigpu_buf_t zero = {a, 0};
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, &zero, sizeof zero), ONI_EINVALARG);
    /* a pinned host buffer of known length shorter than the block */
    onigpu_buf_t small = {a, 1024};
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, &small, sizeof small), 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ, a, 8), ONI_EBUFFERSIZE);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, a, 8), 0);
    oni_destroy_ctx(ctx);
    free(a);
    free(b);
}

/* Thesis listing 4.2 with host memory only (no GPU copy): set the block size,
 * read blocks into a host buffer; the data is the test core's counter. */
TEST(xfer_host_read_counter_continuity)
{
    oni_ctx ctx = open_gpu_stream();
    REQUIRE(ctx);
    static const uint32_t sizes[] = {64, 68, 4096, 4100, 100000, 1 << 20};
    uint8_t *buf = malloc(1 << 20);
    struct xcheck c;
    xcheck_init(&c, core);
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        uint32_t transfer_size = sizes[s];
        int rc = oni_set_driver_opt(ctx, ONI_DRV_RD_SZ, &transfer_size, 4);
        CHECK_RC(rc, 0);
        for (int i = 0; i < 20 && !rc; i++) {
            if (i % 2)
                rc = oni_set_driver_opt(ctx, ONI_DRV_READ, buf, 4);
            else {
                onigpu_buf_t b = {buf, transfer_size};
                rc = oni_set_driver_opt(ctx, ONI_DRV_READ, &b, sizeof b);
            }
            CHECK_RC(rc, 0);
            if (!rc)
                xcheck_feed(&c, buf, transfer_size);
        }
    }
    CHECK_EQ(c.errors, 0);
    CHECK(c.frames > 100);
    /* an explicit length shorter than the block is refused, nothing consumed */
    uint32_t four_k = 4096;
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_RD_SZ, &four_k, 4), 0);
    onigpu_buf_t shortb = {buf, 4092};
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ, &shortb, sizeof shortb), ONI_EBUFFERSIZE);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ, buf, 8), 0);
    xcheck_feed(&c, buf, 4096);
    CHECK_EQ(c.errors, 0);
    oni_destroy_ctx(ctx);
    free(buf);
}

TEST(xfer_host_async_reads_complete_in_order)
{
    oni_ctx ctx = open_gpu_stream();
    REQUIRE(ctx);
    enum { JOBS = 64, BLK = 8192 };
    uint8_t *buf = malloc((size_t)JOBS * BLK);
    volatile uint32_t done[JOBS];
    CHECK_RC(set_u32(ctx, ONI_DRV_RD_SZ, BLK), 0);
    for (int i = 0; i < JOBS; i++) {
        done[i] = 0;
        onigpu_xfer_t x = {buf + (size_t)i * BLK, BLK, &done[i], (uint32_t)i + 1000, 0};
        CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ_ASYNC, &x, sizeof x), 0);
    }
    /* wait for each completion record with a deadline, then check its payload */
    struct xcheck c;
    xcheck_init(&c, core);
    for (int i = 0; i < JOBS; i++) {
        uint64_t t0 = oni_now_ns();
        while (__atomic_load_n(&done[i], __ATOMIC_ACQUIRE) != (uint32_t)i + 1000 &&
               oni_now_ns() - t0 < 2000000000u)
            ;
        CHECK_EQ(done[i], i + 1000);
        xcheck_feed(&c, buf + (size_t)i * BLK, BLK);
    }
    CHECK_EQ(c.errors, 0);
    /* a synchronous read after async ones continues the stream */
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ, buf, 8), 0);
    xcheck_feed(&c, buf, BLK);
    CHECK_EQ(c.errors, 0);
    /* malformed requests */
    onigpu_xfer_t bad = {buf, BLK, NULL, 1, 0};
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ_ASYNC, &bad, sizeof bad), ONI_EINVALARG);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ_ASYNC, &bad, 8), ONI_EINVALARG);
    onigpu_xfer_t tiny = {buf, 16, &done[0], 1, 0};
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ_ASYNC, &tiny, sizeof tiny), ONI_EBUFFERSIZE);
    oni_destroy_ctx(ctx);
    free(buf);
}

TEST(xfer_routing_and_timeout)
{
    /* the test core on the default stream: the GPU stream stays empty and a
     * READ ends with ONI_ETIMEOUT near the context timeout, not a hang */
    oni_ctx ctx = xfer_open(XFER_SPEC(0), &core, &sink);
    REQUIRE(ctx);
    uint32_t ms = 100;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &ms, sizeof ms), 0);
    uint8_t buf[4096];
    uint64_t t0 = oni_now_ns();
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ, buf, 8), ONI_ETIMEOUT);
    uint64_t dt = oni_now_ns() - t0;
    CHECK(dt >= 90000000u && dt < 1000000000u);
    /* while the default stream carries the core's frames */
    oni_frame_t *f = NULL;
    int rc = oni_read_frame(ctx, &f);
    CHECK(rc > 0);
    if (rc > 0) {
        CHECK_EQ(f->dev_idx, core);
        oni_destroy_frame(f);
    }
    oni_destroy_ctx(ctx);
}

/* Host-buffer writes reach the sink byte for byte (its hash register), a
 * malformed block is refused whole. */
TEST(xfer_host_write_frames)
{
    oni_ctx ctx = open_gpu_stream();
    REQUIRE(ctx);
    enum { N = 4096 };
    uint8_t *blk = calloc(1, N);
    oni_reg_val_t got = 0;
    /* 4 frames of 1 KiB to the sink */
    uint32_t want = xsum_frames(blk, N, 1024, sink, 1, XSUM_START);
    CHECK_RC(set_u32(ctx, ONI_DRV_WR_SZ, N), 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_WRITE, blk, 8), 0);
    want = xsum_frames(blk, N, 1024, sink, 2, want);
    onigpu_buf_t b = {blk, N};
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_WRITE, &b, sizeof b), 0);
    CHECK_RC(oni_read_reg(ctx, sink, XSUM_REG, &got), 0);
    CHECK_EQ(got, want);
    /* a frame to a device that does not exist: nothing of the block arrives */
    xsum_frames(blk, N, 1024, sink, 3, 0);
    uint32_t bad[2] = {0xDEAD, (1024 - 8) / 4};
    memcpy(blk + 2048, bad, 8);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_WRITE, blk, 8), ONI_EBADFRAME);
    CHECK_RC(oni_read_reg(ctx, sink, XSUM_REG, &got), 0);
    CHECK_EQ(got, want);
    /* async write with a host completion word */
    want = xsum_frames(blk, N, 1024, sink, 4, want);
    volatile uint32_t done = 0;
    onigpu_xfer_t x = {blk, N, &done, 7, 0};
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_WRITE_ASYNC, &x, sizeof x), 0);
    uint64_t t0 = oni_now_ns();
    while (__atomic_load_n(&done, __ATOMIC_ACQUIRE) != 7 && oni_now_ns() - t0 < 2000000000u)
        ;
    CHECK_EQ(done, 7);
    CHECK_RC(oni_read_reg(ctx, sink, XSUM_REG, &got), 0);
    CHECK_EQ(got, want);
    oni_destroy_ctx(ctx);
    free(blk);
}

TEST(xfer_gpu_pointer_without_usable_cuda)
{
    /* Memory that is not host memory of this process (here: a PROT_NONE
     * reservation, which is how a CUDA device allocation looks to the CPU) is
     * refused cleanly: ONI_ENOGPU where CUDA cannot be used, ONI_EINVALARG
     * where it can (then CUDA says it is no GPU memory either). Nothing is
     * consumed from the stream. */
    oni_ctx ctx = open_gpu_stream();
    REQUIRE(ctx);
    void *res = mmap(NULL, 1 << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(res != MAP_FAILED);
    char why[200];
    int want = gpu_available(why, sizeof why) ? ONI_EINVALARG : ONI_ENOGPU;
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ, res, 8), want);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_WRITE, res, 8), want);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, res, 8), want);
    volatile uint32_t done = 0;
    onigpu_xfer_t x = {res, 4096, &done, 1, 0};
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ_ASYNC, &x, sizeof x), want);
    munmap(res, 1 << 20);
    oni_destroy_ctx(ctx);
}

TEST(xfer_options_need_the_emu_driver)
{
    oni_ctx ctx = oni_create_ctx("test");
    REQUIRE(ctx);
    REQUIRE(oni_init_ctx(ctx, -1) == 0);
    uint32_t v = 4096;
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_RD_SZ, &v, sizeof v), ONI_EINVALOPT);
    oni_destroy_ctx(ctx);
}

struct writer {
    oni_ctx ctx;
    int writes, rc;
};

static void *write_frames(void *arg)
{
    struct writer *w = arg;
    uint32_t frames[2][4] = {{sink, 2, 1, 2}, {sink, 2, 3, 4}};
    for (int i = 0; i < 2000 && !w->rc; i++) {
        onigpu_buf_t b = {frames, sizeof frames};
        w->rc = oni_set_driver_opt(w->ctx, ONI_DRV_WRITE, &b, sizeof b);
        w->writes += !w->rc;
    }
    return NULL;
}

TEST(xfer_read_and_write_threads_on_one_context)
{
    /* a receive thread and a send thread, as in the closed loop: both make
     * progress, the read stream stays whole, no data race (TSan label) */
    oni_ctx ctx = open_gpu_stream();
    REQUIRE(ctx);
    uint32_t wsz = 32;
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_WR_SZ, &wsz, 4), 0);
    struct writer w = {ctx, 0, 0};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, write_frames, &w) == 0);
    uint8_t *buf = malloc(8192);
    struct xcheck c;
    xcheck_init(&c, core);
    for (int i = 0; i < 2000; i++) {
        uint32_t n = 4 * (1 + (uint32_t)(i * 37 % 2048));
        int rc = oni_set_driver_opt(ctx, ONI_DRV_RD_SZ, &n, 4);
        if (!rc)
            rc = oni_set_driver_opt(ctx, ONI_DRV_READ, buf, 8);
        if (rc) {
            UNIT_FAIL("read %d: %s", i, oni_error_str(rc));
            break;
        }
        xcheck_feed(&c, buf, n);
    }
    pthread_join(t, NULL);
    CHECK_RC(w.rc, 0);
    CHECK_EQ(w.writes, 2000);
    CHECK_EQ(c.errors, 0);
    free(buf);
    oni_destroy_ctx(ctx);
}

/* A GPU-stream read that waits for data which never comes holds up neither
 * a write of results, nor register access, nor another option of the
 * stream: the closed loop's receive and send threads run side by side. */
TEST(xfer_waiting_read_holds_up_nothing_else)
{
    oni_ctx ctx = xfer_open(XFER_SPEC(0), &core, &sink); /* the GPU stream stays empty */
    REQUIRE(ctx);
    xfer_check_waiting_read(ctx, sink, 0);
    oni_destroy_ctx(ctx);
}

static void *read_nothing_often(void *arg)
{
    for (int i = 0; i < 30; i++)
        xfer_read_nothing(arg);
    return NULL;
}

/* Reads that overlap one another without a break (two threads, each read
 * waiting out a 100 ms timeout) do not keep a reset out: it waits for the
 * reads in progress only. */
TEST(xfer_reset_not_starved_by_waiting_reads)
{
    oni_ctx ctx = xfer_open(XFER_SPEC(0), &core, &sink);
    REQUIRE(ctx);
    uint32_t ms = 100, off = 0, one = 1;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &ms, sizeof ms), 0);
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &off, sizeof off), 0);
    struct xfer_blocked_read r[2] = {{ctx, 0}, {ctx, 0}};
    pthread_t t[2];
    REQUIRE(pthread_create(&t[0], NULL, read_nothing_often, &r[0]) == 0);
    struct timespec ts = {0, 50000000}; /* the second reader starts halfway through the first's read */
    nanosleep(&ts, NULL);
    REQUIRE(pthread_create(&t[1], NULL, read_nothing_often, &r[1]) == 0);
    nanosleep(&ts, NULL);
    uint64_t t0 = oni_now_ns();
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RESET, &one, sizeof one), 0);
    uint64_t dt = oni_now_ns() - t0;
    CHECK(dt < 1000000000u); /* about one read's timeout, not the readers' 3 s */
    pthread_join(t[0], NULL);
    pthread_join(t[1], NULL);
    oni_destroy_ctx(ctx);
}

TEST(xfer_pinned_buffer_covers_its_inside)
{
    /* a transfer into part of a pinned buffer uses that pin and its length;
     * pinning inside a pinned buffer is refused */
    oni_ctx ctx = open_gpu_stream();
    REQUIRE(ctx);
    uint8_t *buf = malloc(8192);
    onigpu_buf_t whole = {buf, 8192};
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, &whole, sizeof whole), 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, buf + 100, 8), ONI_EPINNED);
    CHECK_RC(set_u32(ctx, ONI_DRV_RD_SZ, 4096), 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ, buf + 4096, 8), 0);       /* exactly fits */
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ, buf + 4100, 8), ONI_EBUFFERSIZE); /* 4092 left */
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, buf + 100, 8), ONI_ENOTPINNED);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, buf, 8), 0);
    oni_destroy_ctx(ctx);
    free(buf);
}

/* A write only reads its buffer: read-only host memory is fine for it (a
 * read into it is refused). */
TEST(xfer_write_from_read_only_memory)
{
    oni_ctx ctx = open_gpu_stream();
    REQUIRE(ctx);
    enum { N = 4096 };
    uint8_t *blk = mmap(NULL, N, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(blk != MAP_FAILED);
    xsum_frames(blk, N, 1024, sink, 1, XSUM_START);
    CHECK(mprotect(blk, N, PROT_READ) == 0);
    CHECK_RC(set_u32(ctx, ONI_DRV_WR_SZ, N), 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_WRITE, blk, 8), 0);
    onigpu_buf_t b = {blk, N};
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_WRITE, &b, sizeof b), 0);
    CHECK_RC(set_u32(ctx, ONI_DRV_RD_SZ, N), 0);
    CHECK(oni_set_driver_opt(ctx, ONI_DRV_READ, blk, 8) < 0);
    oni_destroy_ctx(ctx);
    munmap(blk, N);
}

/* A pin that would hold a pinned buffer, or start inside one, is refused. */
TEST(xfer_pins_do_not_overlap)
{
    oni_ctx ctx = open_gpu_stream();
    REQUIRE(ctx);
    uint8_t *buf = malloc(16384);
    REQUIRE(buf);
    onigpu_buf_t inner = {buf + 4096, 4096}, outer = {buf, 16384}, tail = {buf + 8000, 100};
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, &inner, sizeof inner), 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, &outer, sizeof outer), ONI_EPINNED);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, &tail, sizeof tail), ONI_EPINNED);
    onigpu_buf_t before = {buf, 4096}; /* ends where inner starts */
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, &before, sizeof before), 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, buf, 8), 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, buf + 4096, 8), 0);
    oni_destroy_ctx(ctx);
    free(buf);
}

/* ONIGPU_MAX_PINS buffers may be pinned at once; one more is ONI_EBUSY (the
 * table is full, not memory), and a slot freed by an unpin takes the next. */
TEST(xfer_pin_table_full_is_busy)
{
    oni_ctx ctx = open_gpu_stream();
    REQUIRE(ctx);
    uint8_t *buf = malloc((ONIGPU_MAX_PINS + 1) * 64);
    REQUIRE(buf);
    for (int i = 0; i < ONIGPU_MAX_PINS; i++) {
        onigpu_buf_t b = {buf + i * 64, 64};
        CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, &b, sizeof b), 0);
    }
    onigpu_buf_t extra = {buf + ONIGPU_MAX_PINS * 64, 64};
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, &extra, sizeof extra), ONI_EBUSY);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, buf, 8), 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, &extra, sizeof extra), 0);
    oni_destroy_ctx(ctx);
    free(buf);
}

/* A completion record must be an aligned word. */
TEST(xfer_unaligned_completion_word)
{
    oni_ctx ctx = open_gpu_stream();
    REQUIRE(ctx);
    static uint8_t buf[4096];
    static uint32_t words[4];
    onigpu_xfer_t x = {buf, sizeof buf, (volatile uint32_t *)((uint8_t *)words + 1), 5, 0};
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ_ASYNC, &x, sizeof x), ONI_EINVALARG);
    oni_destroy_ctx(ctx);
}

/* A host buffer pinned by its address alone (no length) is checked as an
 * unpinned one would be: a block longer than its memory is refused, not
 * written past the end. */
TEST(xfer_pinned_address_alone_is_checked)
{
    oni_ctx ctx = open_gpu_stream();
    REQUIRE(ctx);
    long pg = sysconf(_SC_PAGESIZE);
    uint8_t *m = mmap(NULL, 2 * (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(m != MAP_FAILED);
    CHECK(mprotect(m + pg, (size_t)pg, PROT_NONE) == 0);
    CHECK_RC(set_u32(ctx, ONI_DRV_RD_SZ, (uint32_t)(2 * pg)), 0);
    CHECK(oni_set_driver_opt(ctx, ONI_DRV_READ, m, 8) < 0); /* unpinned: refused */
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, m, 8), 0);
    CHECK(oni_set_driver_opt(ctx, ONI_DRV_READ, m, 8) < 0); /* pinned: refused too */
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, m, 8), 0);
    oni_destroy_ctx(ctx);
    munmap(m, 2 * (size_t)pg);
}

static void *wait_in_read(void *arg)
{
    xfer_read_nothing(arg);
    return NULL;
}

/* Reading ONI_DRV_DMA_AGENT does not wait behind a read that waits for data. */
TEST(xfer_agent_option_not_held_up_by_a_waiting_read)
{
    oni_ctx ctx = xfer_open(XFER_SPEC(0), &core, &sink); /* nothing on the GPU stream */
    REQUIRE(ctx);
    uint32_t ms = 1500;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &ms, sizeof ms), 0);
    struct xfer_blocked_read r = {ctx, 0};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, wait_in_read, &r) == 0);
    usleep(100000);
    uint64_t t0 = oni_now_ns();
    uint32_t v = 1;
    size_t sz = sizeof v;
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_DMA_AGENT, &v, &sz), 0);
    CHECK_EQ(v, 0);
    CHECK(oni_now_ns() - t0 < 500000000u); /* not the read's 1.5 s */
    pthread_join(t, NULL);
    oni_destroy_ctx(ctx);
}

/* A length that runs past the end of the address space is refused, not
 * taken as a huge buffer (a read then wrote past the real one). */
TEST(xfer_buffer_length_past_the_address_space)
{
    oni_ctx ctx = open_gpu_stream();
    REQUIRE(ctx);
    static uint8_t buf[4096];
    onigpu_buf_t b = {buf, (size_t)(0 - (uintptr_t)buf) + 16};
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, &b, sizeof b), ONI_EINVALARG);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ, &b, sizeof b), ONI_EINVALARG);
    oni_destroy_ctx(ctx);
}

/* UNPIN waits until the DMA engine has no job queued or running (one may
 * write the buffer), up to ONI_OPT_TIMEOUTMS; past it ONI_ETIMEOUT, and the
 * buffer stays pinned. A bad argument or a buffer never pinned is answered
 * at once, whatever is queued. */
TEST(xfer_unpin_waits_for_queued_jobs)
{
    oni_ctx ctx = xfer_open(XFER_SPEC(0), &core, &sink); /* nothing comes on the GPU stream */
    REQUIRE(ctx);
    static uint8_t buf[4096], buf2[4096], other[64];
    static volatile uint32_t done;
    onigpu_buf_t pb = {buf, sizeof buf}, pb2 = {buf2, sizeof buf2};
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, &pb, sizeof pb), 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, &pb2, sizeof pb2), 0);
    uint32_t ms = 300;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &ms, sizeof ms), 0);
    onigpu_xfer_t x = {buf, sizeof buf, &done, 1, 0};
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ_ASYNC, &x, sizeof x), 0); /* waits 300 ms for data */
    ms = 3000;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &ms, sizeof ms), 0);
    uint64_t t0 = oni_now_ns();
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, other, 8), ONI_ENOTPINNED);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, other, 3), ONI_EINVALARG);
    CHECK((oni_now_ns() - t0) / 1000000 < 100); /* at once */
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, &pb, sizeof pb), 0); /* once the job has ended */
    double waited = (oni_now_ns() - t0) / 1e6;
    CHECK(waited >= 150 && waited < 2500);
    CHECK_EQ(done, 0); /* it found no data: no record */
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, &pb, sizeof pb), ONI_ENOTPINNED);
    /* a job that outlasts the UNPIN's own timeout: the buffer stays pinned */
    x.seq = 2;
    (void)oni_set_driver_opt(ctx, ONI_DRV_READ_ASYNC, &x, sizeof x); /* may report the first job's ONI_ETIMEOUT */
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ_ASYNC, &x, sizeof x), 0); /* waits 3 s */
    ms = 100;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &ms, sizeof ms), 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, &pb2, sizeof pb2), ONI_ETIMEOUT);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, &pb2, sizeof pb2), ONI_EPINNED); /* still pinned */
    oni_destroy_ctx(ctx); /* ends the waiting jobs */
}
