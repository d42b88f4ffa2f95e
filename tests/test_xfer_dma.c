/* test_xfer_dma.c - the emulated card's DMA engine (src/emu/dma.h) at the
 * hardware boundary, without a GPU: host-memory transfers out of the real
 * card's GPU stream FIFO (counter continuity, counters), asynchronous jobs and
 * their completion records, a full job queue, write frames into the GPU write
 * stream, GPU destinations refused without consuming anything, and waits
 * for data ended by emu_dma_abort and destroy. */
#include <stdint.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
#include "unit.h"
#include "oni.h"
#include "emu/emu.h"
#include "emu/dma.h"
#include "gpu/gpu.h"
#include "oni/util/clock.h"
#include "xfer_check.h"

#define SPEC(route) "devices=testcore:bytes=1024:route=" #route ",testsink;mode=fast;link=unlimited;ddr=16M"

/* The card with the test core on the GPU stream (route 1) or not, running. */
static struct emu_card *card_open(const char *spec)
{
    struct emu_card *c = NULL;
    char err[200] = "";
    if (emu_card_create(spec, &c, err, sizeof err)) {
        fprintf(stderr, "  emu_card_create: %s\n", err);
        return NULL;
    }
    if (emu_card_write_config(c, ONI_CONFIG_RUNNING, 1)) {
        emu_card_destroy(c);
        return NULL;
    }
    return c;
}

/* dev_idx of the test core: the first frame of the stream tells. */
static uint32_t first_dev(const uint8_t *block)
{
    uint32_t dev;
    memcpy(&dev, block + 8, 4);
    return dev;
}

TEST(dma_host_reads_keep_the_counter)
{
    struct emu_card *c = card_open(SPEC(1));
    REQUIRE(c);
    struct emu_dma *d = NULL;
    REQUIRE(emu_dma_create(c, &d) == 0);
    uint8_t *buf = malloc(1 << 16);
    struct xcheck chk;
    CHECK_RC(emu_dma_read(d, buf, 16, 0, 1000), 0); /* a frame header: whose frames these are */
    xcheck_init(&chk, first_dev(buf));
    xcheck_feed(&chk, buf, 16);
    size_t total = 16;
    int reads = 1;
    for (size_t n = 4; n <= 65536; n = n * 2 + 4) {
        CHECK_RC(emu_dma_read(d, buf, n, 0, 1000), 0);
        xcheck_feed(&chk, buf, n);
        total += n;
        reads++;
    }
    CHECK_EQ(chk.errors, 0);
    CHECK(chk.frames > 10);
    struct emu_dma_stats st;
    emu_dma_stats(d, &st);
    CHECK_EQ(st.reads, reads);
    CHECK_EQ(st.bytes_read, total);
    CHECK_EQ(st.failed, 0);
    /* bad arguments */
    CHECK_RC(emu_dma_read(d, NULL, 4, 0, 10), ONI_EINVALARG);
    CHECK_RC(emu_dma_read(d, buf, 0, 0, 10), ONI_EINVALARG);
    emu_dma_destroy(d);
    emu_card_destroy(c);
    free(buf);
}

TEST(dma_gpu_destination_without_gpu_consumes_nothing)
{
    char why[200];
    if (gpu_available(why, sizeof why))
        SKIP("a GPU is present: test_gpu_xfer covers GPU destinations");
    struct emu_card *c = card_open(SPEC(1));
    REQUIRE(c);
    struct emu_dma *d = NULL;
    REQUIRE(emu_dma_create(c, &d) == 0);
    uint8_t buf[4096];
    CHECK_RC(emu_dma_read(d, buf, 1024, 0, 1000), 0);
    struct xcheck chk;
    xcheck_init(&chk, first_dev(buf));
    xcheck_feed(&chk, buf, 1024);
    CHECK_RC(emu_dma_read(d, buf, 1024, 1, 1000), ONI_ENOGPU);
    CHECK_RC(emu_dma_write(d, buf, 1024, 1, 1000), ONI_ENOGPU);
    CHECK_RC(emu_dma_read(d, buf, 1024, 0, 1000), 0); /* the stream goes on where it was */
    xcheck_feed(&chk, buf, 1024);
    CHECK_EQ(chk.errors, 0);
    emu_dma_destroy(d);
    emu_card_destroy(c);
}

TEST(dma_async_jobs_complete_in_order)
{
    struct emu_card *c = card_open(SPEC(1));
    REQUIRE(c);
    struct emu_dma *d = NULL;
    REQUIRE(emu_dma_create(c, &d) == 0);
    enum { JOBS = 200, BLK = 3000 };
    uint8_t *buf = malloc((size_t)JOBS * BLK);
    static volatile uint32_t done[JOBS];
    for (int i = 0; i < JOBS; i++) {
        done[i] = 0;
        onigpu_xfer_t x = {buf + (size_t)i * BLK, BLK, &done[i], (uint32_t)i + 1, 0};
        CHECK_RC(emu_dma_submit(d, 0, &x, 0, 0, 1000), 0);
    }
    CHECK_RC(emu_dma_flush(d, 5000), 0);
    int missing = 0;
    for (int i = 0; i < JOBS; i++)
        missing += done[i] != (uint32_t)i + 1;
    CHECK_EQ(missing, 0);
    struct xcheck chk;
    xcheck_init(&chk, first_dev(buf));
    xcheck_feed(&chk, buf, (size_t)JOBS * BLK);
    CHECK_EQ(chk.errors, 0);
    onigpu_xfer_t bad = {buf, BLK, NULL, 1, 0};
    CHECK_RC(emu_dma_submit(d, 0, &bad, 0, 0, 10), ONI_EINVALARG);
    emu_dma_destroy(d);
    emu_card_destroy(c);
    free(buf);
}

TEST(dma_full_queue_and_failed_jobs_are_reported)
{
    /* no source on the GPU stream: every job waits 1 ms and times out */
    struct emu_card *c = card_open(SPEC(0));
    REQUIRE(c);
    struct emu_dma *d = NULL;
    REQUIRE(emu_dma_create(c, &d) == 0);
    uint8_t buf[64];
    static volatile uint32_t done;
    int busy = 0, queued = 0;
    for (int i = 0; i < 400 && !busy; i++) {
        onigpu_xfer_t x = {buf, sizeof buf, &done, (uint32_t)i + 1, 0};
        int rc = emu_dma_submit(d, 0, &x, 0, 0, 1);
        if (rc == ONI_EBUSY)
            busy = 1;
        else if (rc == 0)
            queued++;
        else
            break; /* an earlier job's timeout, reported once */
    }
    CHECK(busy);
    CHECK(queued >= 200);
    CHECK_RC(emu_dma_flush(d, 5000), ONI_ETIMEOUT); /* the jobs' own error, once */
    CHECK_RC(emu_dma_flush(d, 10), 0);
    CHECK_EQ(done, 0); /* failed jobs write no record */
    struct emu_dma_stats st;
    emu_dma_stats(d, &st);
    CHECK_EQ(st.reads, 0);
    emu_dma_destroy(d);
    emu_card_destroy(c);
}

TEST(dma_writes_frames_to_the_card)
{
    struct emu_card *c = card_open(SPEC(1));
    REQUIRE(c);
    struct emu_dma *d = NULL;
    REQUIRE(emu_dma_create(c, &d) == 0);
    /* the sink is the second device of the table; find its index through a bad write first */
    uint32_t sink = 0xFFFFFFFFu;
    for (uint32_t idx = 0; idx < 4 && sink == 0xFFFFFFFFu; idx++) {
        uint32_t frame[3] = {idx, 1, 0xABCD};
        if (emu_dma_write(d, frame, sizeof frame, 0, 100) == 0)
            sink = idx;
    }
    REQUIRE(sink != 0xFFFFFFFFu);
    uint32_t frames[2][4] = {{sink, 2, 1, 2}, {sink, 2, 3, 4}};
    CHECK_RC(emu_dma_write(d, frames, sizeof frames, 0, 100), 0);
    uint32_t bad[3] = {0xDEAD, 1, 0};
    CHECK_RC(emu_dma_write(d, bad, sizeof bad, 0, 100), ONI_EBADFRAME);
    uint32_t truncated[3] = {sink, 5, 0};
    CHECK_RC(emu_dma_write(d, truncated, sizeof truncated, 0, 100), ONI_EBADFRAME);
    static volatile uint32_t done;
    onigpu_xfer_t x = {frames, sizeof frames, &done, 77, 0};
    CHECK_RC(emu_dma_submit(d, 1, &x, 0, 0, 100), 0);
    CHECK_RC(emu_dma_flush(d, 1000), 0);
    CHECK_EQ(done, 77);
    struct emu_dma_stats st;
    emu_dma_stats(d, &st);
    CHECK_EQ(st.writes, 3); /* the probe, the pair, the async pair */
    CHECK(st.failed >= 2);
    emu_dma_destroy(d);
    emu_card_destroy(c);
}

struct blocked_read {
    struct emu_dma *d;
    int rc;
    uint32_t timeout_ms;
};

static void *read_in_thread(void *arg)
{
    struct blocked_read *b = arg;
    uint8_t buf[256];
    b->rc = emu_dma_read(b->d, buf, sizeof buf, 0, b->timeout_ms);
    return NULL;
}

TEST(dma_directions_do_not_wait_for_each_other)
{
    /* nothing on the GPU stream: reads wait for data until their timeout;
     * meanwhile writes of results must go through at once */
    struct emu_card *c = card_open(SPEC(0));
    REQUIRE(c);
    struct emu_dma *d = NULL;
    REQUIRE(emu_dma_create(c, &d) == 0);
    uint32_t sink = 0xFFFFFFFFu;
    for (uint32_t idx = 0; idx < 4 && sink == 0xFFFFFFFFu; idx++) {
        uint32_t frame[3] = {idx, 1, 0};
        if (emu_dma_write(d, frame, sizeof frame, 0, 100) == 0)
            sink = idx;
    }
    REQUIRE(sink != 0xFFFFFFFFu);
    uint32_t frame[3] = {sink, 1, 42};
    /* a synchronous read blocked in another thread */
    struct blocked_read b = {d, 0, 600};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, read_in_thread, &b) == 0);
    usleep(50000);
    uint64_t t0 = oni_now_ns();
    CHECK_RC(emu_dma_write(d, frame, sizeof frame, 0, 100), 0);
    CHECK(oni_now_ns() - t0 < 100000000u);
    pthread_join(t, NULL);
    CHECK_RC(b.rc, ONI_ETIMEOUT);
    /* an asynchronous read queued and waiting */
    static volatile uint32_t rdone, wdone;
    uint8_t buf[256];
    onigpu_xfer_t rx = {buf, sizeof buf, &rdone, 1, 0};
    CHECK_RC(emu_dma_submit(d, 0, &rx, 0, 0, 600), 0);
    usleep(50000);
    t0 = oni_now_ns();
    CHECK_RC(emu_dma_write(d, frame, sizeof frame, 0, 100), 0);
    onigpu_xfer_t wx = {frame, sizeof frame, &wdone, 2, 0};
    CHECK_RC(emu_dma_submit(d, 1, &wx, 0, 0, 100), 0);
    while (__atomic_load_n(&wdone, __ATOMIC_ACQUIRE) != 2 && oni_now_ns() - t0 < 1000000000u)
        usleep(100);
    CHECK_EQ(wdone, 2);
    CHECK(oni_now_ns() - t0 < 100000000u);
    CHECK_RC(emu_dma_flush(d, 2000), ONI_ETIMEOUT); /* the read job's own timeout, reported once */
    CHECK_EQ(rdone, 0);
    emu_dma_destroy(d);
    emu_card_destroy(c);
}

/* emu_dma_abort ends a read's wait for data that never comes (the card's GPU
 * stream is empty: 5 s of timeout left), ends later waits at once, and still
 * moves data that is there. */
TEST(dma_abort_ends_the_wait_for_data)
{
    struct emu_card *c = card_open(SPEC(0));
    REQUIRE(c);
    struct emu_dma *d = NULL;
    REQUIRE(emu_dma_create(c, &d) == 0);
    struct blocked_read b = {d, 0, 5000};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, read_in_thread, &b) == 0);
    usleep(50000);
    uint64_t t0 = oni_now_ns();
    emu_dma_abort(d);
    pthread_join(t, NULL);
    CHECK_RC(b.rc, ONI_ETIMEOUT);
    CHECK(oni_now_ns() - t0 < 1000000000u); /* about 20 ms; the read had 5 s */
    uint8_t buf[256];
    t0 = oni_now_ns();
    CHECK_RC(emu_dma_read(d, buf, sizeof buf, 0, 5000), ONI_ETIMEOUT);
    CHECK(oni_now_ns() - t0 < 1000000000u);
    emu_dma_destroy(d);
    emu_card_destroy(c);

    c = card_open(SPEC(1));
    REQUIRE(c);
    REQUIRE(emu_dma_create(c, &d) == 0);
    CHECK_RC(emu_dma_read(d, buf, 16, 0, 1000), 0); /* the card has started on the stream */
    emu_dma_abort(d);
    CHECK_RC(emu_dma_read(d, buf, sizeof buf, 0, 1000), 0);
    emu_dma_abort(NULL);
    emu_dma_destroy(d);
    emu_card_destroy(c);
}

/* Destroy does not wait out the timeouts of queued jobs whose data never
 * comes (8 jobs of 5 s each here), and writes none of their records. */
TEST(dma_destroy_ends_queued_waits)
{
    struct emu_card *c = card_open(SPEC(0));
    REQUIRE(c);
    struct emu_dma *d = NULL;
    REQUIRE(emu_dma_create(c, &d) == 0);
    enum { JOBS = 8 };
    static uint8_t buf[JOBS][256];
    static volatile uint32_t done[JOBS];
    for (int i = 0; i < JOBS; i++) {
        onigpu_xfer_t x = {buf[i], sizeof buf[i], &done[i], (uint32_t)i + 1, 0};
        CHECK_RC(emu_dma_submit(d, 0, &x, 0, 0, 5000), 0);
    }
    usleep(50000); /* the first job is waiting */
    uint64_t t0 = oni_now_ns();
    emu_dma_destroy(d);
    CHECK(oni_now_ns() - t0 < 2000000000u);
    int written = 0;
    for (int i = 0; i < JOBS; i++)
        written += done[i] != 0;
    CHECK_EQ(written, 0);
    emu_card_destroy(c);
}

/* --- mutation testing of the devices and DMA engine 2026-11-25 (docs/results/mutation/mutation-devices-20261125.md) --- */

/* Host reads out of a 1 MiB GPU-stream FIFO: below the ring's restart size,
 * so reads keep wrapping round its end (fast mode generates 256 KiB ahead:
 * nothing dropped); the second span lands after the first in the buffer and
 * the counter runs on. */
TEST(dma_host_reads_across_the_ring_end)
{
    struct emu_card *c = card_open("devices=testcore:bytes=1024:route=1;mode=fast;link=unlimited;ddr=1M");
    REQUIRE(c);
    struct emu_dma *d = NULL;
    REQUIRE(emu_dma_create(c, &d) == 0);
    enum { BLK = 3000, READS = 1000 }; /* 3 MB: about three laps */
    uint8_t *buf = malloc(BLK);
    REQUIRE(buf);
    struct xcheck chk;
    for (int i = 0; i < READS; i++) {
        REQUIRE(emu_dma_read(d, buf, BLK, 0, 1000) == 0);
        if (!i)
            xcheck_init(&chk, first_dev(buf));
        xcheck_feed(&chk, buf, BLK);
    }
    CHECK_EQ(chk.errors, 0);
    CHECK(chk.frames > 2800);
    emu_dma_destroy(d);
    emu_card_destroy(c);
    free(buf);
}

/* More jobs than the queue's 256 slots, queued while the first waits for
 * data (the card stopped): every accepted job runs, in order, and writes its
 * record; a submit to the full queue is refused (ONI_EBUSY), never written
 * over a queued job. */
TEST(dma_full_queue_keeps_every_job_in_order)
{
    struct emu_card *c = card_open(SPEC(1));
    REQUIRE(c);
    REQUIRE(emu_card_write_config(c, ONI_CONFIG_RUNNING, 0) == 0);
    struct emu_dma *d = NULL;
    REQUIRE(emu_dma_create(c, &d) == 0);
    enum { JOBS = 300, BLK = 1040 };
    uint8_t *buf = malloc((size_t)JOBS * BLK);
    REQUIRE(buf);
    static volatile uint32_t done[JOBS];
    int queued = 0, busy = 0;
    for (int i = 0; i < JOBS && !busy; i++) {
        onigpu_xfer_t x = {buf + (size_t)i * BLK, BLK, &done[i], (uint32_t)i + 1, 0};
        int rc = emu_dma_submit(d, 0, &x, 0, 0, 10000);
        busy = rc == ONI_EBUSY;
        queued += rc == 0;
        REQUIRE(rc == 0 || busy);
    }
    CHECK(busy);
    CHECK(queued >= 256 && queued <= 257); /* 256 queued, and the one running if the engine took it */
    REQUIRE(emu_card_write_config(c, ONI_CONFIG_RUNNING, 1) == 0);
    CHECK_RC(emu_dma_flush(d, 10000), 0);
    int missing = 0;
    for (int i = 0; i < queued; i++)
        missing += done[i] != (uint32_t)i + 1;
    CHECK_EQ(missing, 0);
    struct xcheck chk;
    xcheck_init(&chk, first_dev(buf));
    xcheck_feed(&chk, buf, (size_t)queued * BLK);
    CHECK_EQ(chk.errors, 0);
    emu_dma_destroy(d);
    emu_card_destroy(c);
    free(buf);
}

/* Failed jobs: the first one's error is reported, once, by whichever call
 * comes next in that direction (a flush or a synchronous transfer). The
 * first job waits for data (5 s) until emu_dma_abort ends it, so the second,
 * which fails at once, is queued behind it. */
TEST(dma_first_job_error_reported_once)
{
    struct emu_card *c = card_open(SPEC(0)); /* nothing on the GPU stream */
    REQUIRE(c);
    struct emu_dma *d = NULL;
    REQUIRE(emu_dma_create(c, &d) == 0);
    size_t too_big = emu_card_read_max(c, EMU_STREAM_GPU) + 4; /* could never be whole: ONI_EINVALARG */
    uint8_t *buf = malloc(too_big);
    REQUIRE(buf);
    static volatile uint32_t done[2];
    onigpu_xfer_t waits = {buf, 64, &done[0], 1, 0}, big = {buf, too_big, &done[1], 2, 0};
    CHECK_RC(emu_dma_submit(d, 0, &waits, 0, 0, 5000), 0);
    CHECK_RC(emu_dma_submit(d, 0, &big, 0, 0, 10), 0);
    emu_dma_abort(d); /* the first job times out now */
    CHECK_RC(emu_dma_flush(d, 5000), ONI_ETIMEOUT);
    CHECK_RC(emu_dma_flush(d, 10), 0);
    CHECK_RC(emu_dma_submit(d, 0, &big, 0, 0, 10), 0);
    CHECK_RC(emu_dma_read(d, buf, 64, 0, 10), ONI_EINVALARG); /* the job's error, not the read's timeout */
    CHECK_RC(emu_dma_read(d, buf, 64, 0, 10), ONI_ETIMEOUT);
    emu_dma_destroy(d);
    emu_card_destroy(c);
    free(buf);
}

/* emu_dma_wait_data: a wait for exactly emu_card_read_max bytes waits (here
 * until its timeout: nothing on the GPU stream); one for more returns at
 * once (the pieces wait in turn); a wait that found its data leaves it all
 * for the read. */
TEST(dma_wait_data_bounds_and_leaves_the_data)
{
    struct emu_card *c = card_open(SPEC(0));
    REQUIRE(c);
    struct emu_dma *d = NULL;
    REQUIRE(emu_dma_create(c, &d) == 0);
    size_t max = emu_card_read_max(c, EMU_STREAM_GPU);
    CHECK_RC(emu_dma_wait_data(d, max, 20), ONI_ETIMEOUT);
    CHECK_RC(emu_dma_wait_data(d, max + 1, 20), 0);
    emu_dma_destroy(d);
    emu_card_destroy(c);

    REQUIRE((c = card_open(SPEC(1))));
    REQUIRE(emu_dma_create(c, &d) == 0);
    CHECK_RC(emu_dma_wait_data(d, 64, 1000), 0);
    uint8_t buf[4096];
    CHECK_RC(emu_dma_read(d, buf, sizeof buf, 0, 1000), 0);
    struct xcheck chk;
    xcheck_init(&chk, first_dev(buf));
    xcheck_feed(&chk, buf, sizeof buf);
    CHECK_EQ(chk.errors, 0);
    CHECK(chk.frames >= 3);
    emu_dma_destroy(d);
    emu_card_destroy(c);
}

/* The engine is not idle while a job runs (waits for data), only once the
 * queue is empty and no job runs. */
TEST(dma_not_idle_while_a_job_runs)
{
    struct emu_card *c = card_open(SPEC(0));
    REQUIRE(c);
    struct emu_dma *d = NULL;
    REQUIRE(emu_dma_create(c, &d) == 0);
    CHECK(emu_dma_idle(d));
    uint8_t buf[64];
    static volatile uint32_t done;
    onigpu_xfer_t x = {buf, sizeof buf, &done, 1, 0};
    CHECK_RC(emu_dma_submit(d, 0, &x, 0, 0, 10000), 0);
    int idle = 0;
    for (int i = 0; i < 200 && !idle; i++) { /* the job waits 10 s: it runs all this time */
        idle = emu_dma_idle(d);
        usleep(1000);
    }
    CHECK(!idle);
    emu_dma_abort(d);
    CHECK_RC(emu_dma_flush(d, 5000), ONI_ETIMEOUT);
    CHECK(emu_dma_idle(d));
    emu_dma_destroy(d);
    emu_card_destroy(c);
}
