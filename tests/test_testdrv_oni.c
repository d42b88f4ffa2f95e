/* test_testdrv_oni.c - the `test` driver through the public ONI API (oni.h):
 * device table, clocks and sizes, registers with ACK/NACK/timeout/ERETRIG,
 * verified frames for many block sizes, enable and rate registers while
 * running, write frames. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include "unit.h"
#include "oni.h"
#include "onigpu.h"
#include "onitest.h"
#include "onix.h"

static oni_ctx open_test(uint32_t timeout_ms)
{
    oni_ctx ctx = oni_create_ctx("test");
    if (!ctx)
        return NULL;
    if (oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &timeout_ms, sizeof timeout_ms) || oni_init_ctx(ctx, -1)) {
        oni_destroy_ctx(ctx);
        return NULL;
    }
    return ctx;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int set_u32(oni_ctx ctx, int opt, uint32_t v) { return oni_set_opt(ctx, opt, &v, sizeof v); }

TEST(table_clocks_and_sizes)
{
    oni_ctx ctx = open_test(500);
    REQUIRE(ctx);
    oni_size_t n = 0, v = 0;
    size_t len = sizeof n;
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_NUMDEVICES, &n, &len), 0);
    CHECK_EQ(n, 14);
    oni_device_t t[14];
    len = sizeof t;
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_DEVICETABLE, t, &len), 0);
    CHECK_EQ(len, sizeof t);
    CHECK_EQ(t[0].idx, 0x000);
    CHECK_EQ(t[0].id, ONIX_HEARTBEAT);
    CHECK_EQ(t[6].idx, 0x100);
    CHECK_EQ(t[6].read_size, 142);
    CHECK_EQ(t[10].idx, 0x200);
    CHECK_EQ(t[10].read_size, 776);
    CHECK_EQ(t[12].write_size, 12);
    CHECK_EQ(t[13].idx, 0x2FE);
    len = sizeof v;
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_MAXREADFRAMESIZE, &v, &len), 0);
    CHECK_EQ(v, 16 + 776);
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_MAXWRITEFRAMESIZE, &v, &len), 0);
    CHECK_EQ(v, 8 + 16);
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_ACQCLKHZ, &v, &len), 0);
    CHECK_EQ(v, 250000000);
    CHECK_EQ(strcmp(oni_get_driver_info(ctx)->name, "test"), 0);
    /* RESET in IDLE reads the same table again. */
    CHECK_RC(set_u32(ctx, ONI_OPT_RESET, 1), 0);
    len = sizeof n;
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_NUMDEVICES, &n, &len), 0);
    CHECK_EQ(n, 14);
    oni_destroy_ctx(ctx);
}

TEST(registers_through_oni)
{
    oni_ctx ctx = open_test(200);
    REQUIRE(ctx);
    oni_reg_val_t v = 0;
    CHECK_RC(oni_read_reg(ctx, 0x1FE, ONIX_HUB_HARDWAREID, &v), 0);
    CHECK_EQ(v, ONIX_HUB_HS64);
    CHECK_RC(oni_read_reg(ctx, 0x0FE, ONIX_HUB_CLKRATEHZ, &v), 0);
    CHECK_EQ(v, 250000000);
    CHECK_RC(oni_write_reg(ctx, 0x201, ONITEST_REG_MESSAGE, 0x12345678), 0);
    CHECK_RC(oni_read_reg(ctx, 0x201, ONITEST_REG_MESSAGE, &v), 0);
    CHECK_EQ(v, 0x12345678);
    CHECK_RC(oni_read_reg(ctx, 0x201, ONITEST_REG_READSIZE, &v), 0);
    CHECK_EQ(v, 11);
    CHECK_RC(oni_write_reg(ctx, 0x201, ONITEST_REG_READSIZE, 4), ONI_EWRITEFAILURE);
    CHECK_RC(oni_write_reg(ctx, 0x1FE, ONIX_HUB_HARDWAREID, 4), ONI_EWRITEFAILURE);
    CHECK_RC(oni_read_reg(ctx, 0x201, 0x40, &v), ONI_EREADFAILURE);
    CHECK_RC(oni_write_reg(ctx, 0x201, 0x40, 1), ONI_EWRITEFAILURE);
    CHECK_RC(oni_write_reg(ctx, 0x201, ONITEST_REG_RATE, ONITEST_MAX_RATE + 1), ONI_EWRITEFAILURE);
    CHECK_RC(oni_write_reg(ctx, 0x2FE, ONIX_HUB_DELAYNS, 99), 0);
    CHECK_RC(oni_read_reg(ctx, 0x2FE, ONIX_HUB_DELAYNS, &v), 0);
    CHECK_EQ(v, 99);
    oni_destroy_ctx(ctx);
}

TEST(held_access_times_out_then_retrig)
{
    oni_ctx ctx = open_test(80);
    REQUIRE(ctx);
    uint32_t hold = 1;
    CHECK_RC(oni_set_driver_opt(ctx, ONITEST_OPT_HOLD_ACK, &hold, sizeof hold), 0);
    oni_reg_val_t v = 0;
    double t0 = now_s();
    CHECK_RC(oni_read_reg(ctx, 0x000, ONITEST_REG_RATE, &v), ONI_ETIMEOUT);
    double waited = now_s() - t0;
    CHECK(waited >= 0.07 && waited < 2.0);
    CHECK_RC(oni_read_reg(ctx, 0x000, ONITEST_REG_RATE, &v), ONI_ERETRIG);
    hold = 0;
    CHECK_RC(oni_set_driver_opt(ctx, ONITEST_OPT_HOLD_ACK, &hold, sizeof hold), 0);
    /* The late answer of the held access must not be taken for the next one's. */
    CHECK_RC(oni_write_reg(ctx, 0x000, ONITEST_REG_MESSAGE, 5), 0);
    CHECK_RC(oni_read_reg(ctx, 0x000, ONITEST_REG_MESSAGE, &v), 0);
    CHECK_EQ(v, 5);
    oni_destroy_ctx(ctx);
}

/* Read frames until `want`, verifying each; returns frames read. */
static long read_verified(oni_ctx ctx, long want, uint64_t *expect, long *count, int *bad, int *order)
{
    long got = 0;
    uint64_t time = 0;
    int first = 1;
    while (got < want) {
        oni_frame_t *f;
        int rc = oni_read_frame(ctx, &f);
        if (rc <= 0) {
            UNIT_FAIL("oni_read_frame: %d (%s)", rc, oni_error_str(rc));
            break;
        }
        if (!first && f->time != time)
            (*order)++;
        first = 0;
        time = f->time + 1;
        if (f->dev_idx < 0x300) {
            int r = onitest_check_frame(f, &expect[f->dev_idx]);
            if (r < 0)
                (*bad)++;
            else if (r == 1)
                (*order)++;
            count[f->dev_idx]++;
        } else {
            (*bad)++;
        }
        oni_destroy_frame(f);
        got++;
    }
    return got;
}

TEST(frames_verify_for_many_block_sizes)
{
    const uint32_t blocks[] = {792, 796, 800, 1000, 1604, 4096, 65536};
    for (unsigned b = 0; b < sizeof blocks / sizeof blocks[0]; b++) {
        oni_ctx ctx = open_test(500);
        REQUIRE(ctx);
        CHECK_RC(set_u32(ctx, ONI_OPT_BLOCKREADSIZE, blocks[b]), 0);
        CHECK_RC(set_u32(ctx, ONI_OPT_RUNNING, 1), 0);
        static uint64_t expect[0x300];
        static long count[0x300];
        memset(expect, 0, sizeof expect);
        memset(count, 0, sizeof count);
        int bad = 0, order = 0;
        CHECK_EQ(read_verified(ctx, 20000, expect, count, &bad, &order), 20000);
        if (bad || order)
            UNIT_FAIL("block %u: %d bad, %d out of order", blocks[b], bad, order);
        CHECK(count[0x201] > 0 && count[0x200] > 0 && count[0x002] > 0 && count[0x100] > 0);
        CHECK(count[0x001] >= 4 * count[0x000] - 4);
        oni_destroy_ctx(ctx);
    }
}

TEST(enable_and_rate_while_running)
{
    oni_ctx ctx = open_test(100);
    REQUIRE(ctx);
    CHECK_RC(set_u32(ctx, ONI_OPT_BLOCKREADSIZE, 4096), 0);
    CHECK_RC(set_u32(ctx, ONI_OPT_RUNNING, 1), 0);
    static uint64_t expect[0x300];
    static long count[0x300];
    int bad = 0, order = 0;
    read_verified(ctx, 1000, expect, count, &bad, &order);
    /* Only the heartbeat, at rate 1: everything else disabled. */
    const uint32_t others[] = {0x001, 0x002, 0x100, 0x101, 0x200, 0x201, 0x202};
    for (unsigned i = 0; i < sizeof others / sizeof others[0]; i++)
        CHECK_RC(oni_write_reg(ctx, others[i], ONITEST_REG_ENABLE, 0), 0);
    /* Frames already generated into the library's block drain first. */
    memset(count, 0, sizeof count);
    read_verified(ctx, 2000, expect, count, &bad, &order);
    memset(count, 0, sizeof count);
    read_verified(ctx, 2000, expect, count, &bad, &order);
    CHECK_EQ(count[0x000], 2000);
    CHECK_EQ(bad, 0);
    CHECK_EQ(order, 0);
    /* TS4231 back at RATE 3: three of its frames per heartbeat. */
    CHECK_RC(oni_write_reg(ctx, 0x201, ONITEST_REG_RATE, 3), 0);
    CHECK_RC(oni_write_reg(ctx, 0x201, ONITEST_REG_ENABLE, 1), 0);
    read_verified(ctx, 2000, expect, count, &bad, &order);
    memset(count, 0, sizeof count);
    read_verified(ctx, 4000, expect, count, &bad, &order);
    CHECK(count[0x201] >= 3 * count[0x000] - 3 && count[0x201] <= 3 * count[0x000] + 3);
    CHECK_EQ(count[0x201] + count[0x000], 4000);
    CHECK_EQ(bad, 0);
    CHECK_EQ(order, 0);
    /* All off: reads time out instead of hanging. */
    CHECK_RC(oni_write_reg(ctx, 0x000, ONITEST_REG_ENABLE, 0), 0);
    CHECK_RC(oni_write_reg(ctx, 0x201, ONITEST_REG_ENABLE, 0), 0);
    oni_frame_t *f = NULL;
    int rc = 0;
    for (int i = 0; i < 1000 && rc >= 0; i++) {
        rc = oni_read_frame(ctx, &f);
        if (rc > 0)
            oni_destroy_frame(f);
    }
    CHECK_RC(rc, ONI_ETIMEOUT);
    oni_destroy_ctx(ctx);
}

TEST(not_running_read_times_out)
{
    oni_ctx ctx = open_test(60);
    REQUIRE(ctx);
    oni_frame_t *f = NULL;
    double t0 = now_s();
    CHECK_RC(oni_read_frame(ctx, &f), ONI_ETIMEOUT);
    CHECK(now_s() - t0 >= 0.05);
    oni_destroy_ctx(ctx);
}

struct waiting_reader {
    oni_ctx ctx;
    int rc;
};

static void *read_one(void *p)
{
    struct waiting_reader *w = p;
    oni_frame_t *f = NULL;
    w->rc = oni_read_frame(w->ctx, &f);
    if (w->rc > 0)
        oni_destroy_frame(f);
    return NULL;
}

/* Hosts written for upstream keep a thread in oni_read_frame while another
 * starts acquisition. The driver waits inside its read (for a slice at a
 * time, oni/driver.h), so the start waited for the reader's whole timeout (3 s
 * here) and the reader got ONI_ETIMEOUT instead of the new run's frame. */
TEST(start_while_a_reader_waits_in_the_driver)
{
    oni_ctx ctx = open_test(3000);
    REQUIRE(ctx);
    struct waiting_reader w = {ctx, 0};
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, read_one, &w) == 0);
    struct timespec pause = {0, 50 * 1000000L};
    nanosleep(&pause, NULL); /* the reader is in the driver's read by now */
    double t0 = now_s();
    CHECK_RC(set_u32(ctx, ONI_OPT_RUNNING, 1), 0);
    double took = now_s() - t0;
    pthread_join(th, NULL);
    CHECK(took < 1.0);
    CHECK(w.rc > 0);
    oni_destroy_ctx(ctx);
}

TEST(write_frames_through_oni)
{
    oni_ctx ctx = open_test(200);
    REQUIRE(ctx);
    uint8_t data[24] = {1, 2, 3};
    oni_frame_t *f = NULL;
    CHECK(oni_create_frame(ctx, &f, 0x102, data, 16) > 0);
    REQUIRE(f);
    CHECK_EQ(oni_write_frame(ctx, f), 24);
    oni_destroy_frame(f);
    CHECK(oni_create_frame(ctx, &f, 0x202, data, 24) > 0);
    REQUIRE(f);
    CHECK_EQ(oni_write_frame(ctx, f), 32);
    oni_destroy_frame(f);
    CHECK_RC(oni_create_frame(ctx, &f, 0x102, data, 12), ONI_EWRITESIZE);
    CHECK_RC(oni_create_frame(ctx, &f, 0x000, data, 8), ONI_ENOTWRITEDEV);
    oni_reg_val_t v = 0;
    CHECK_RC(oni_read_reg(ctx, 0x102, ONITEST_REG_WFRAMES, &v), 0);
    CHECK_EQ(v, 1);
    onitest_stats_t st;
    size_t len = sizeof st;
    CHECK_RC(oni_get_driver_opt(ctx, ONITEST_OPT_STATS, &st, &len), 0);
    CHECK_EQ(st.wframes_accepted, 2);
    CHECK_EQ(st.wframes_rejected, 0);
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_STREAM_STATS, &st, &len), ONI_EINVALOPT);
    oni_destroy_ctx(ctx);
}

/* A reader streams while another thread accesses registers and writes frames,
 * as a closed loop does: every frame stays right, every access answers. */
struct conc {
    oni_ctx ctx;
    int errors;
};

static void *conc_regs(void *arg)
{
    struct conc *c = arg;
    uint8_t data[8] = {0};
    for (uint32_t i = 0; i < 300; i++) {
        oni_reg_val_t v = 0;
        oni_frame_t *f = NULL;
        if (oni_write_reg(c->ctx, 0x101, ONITEST_REG_MESSAGE, i) ||
            oni_read_reg(c->ctx, 0x101, ONITEST_REG_MESSAGE, &v) || v != i)
            c->errors++;
        if (oni_create_frame(c->ctx, &f, 0x102, data, sizeof data) < 0 || oni_write_frame(c->ctx, f) != 16)
            c->errors++;
        oni_destroy_frame(f);
    }
    return NULL;
}

TEST(concurrent_reader_and_register_writer)
{
    oni_ctx ctx = open_test(1000);
    REQUIRE(ctx);
    CHECK_RC(set_u32(ctx, ONI_OPT_BLOCKREADSIZE, 8192), 0);
    CHECK_RC(set_u32(ctx, ONI_OPT_RUNNING, 1), 0);
    struct conc c = {ctx, 0};
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, conc_regs, &c) == 0);
    static uint64_t expect[0x300];
    static long count[0x300];
    int bad = 0, order = 0;
    read_verified(ctx, 200000, expect, count, &bad, &order);
    pthread_join(th, NULL);
    CHECK_EQ(c.errors, 0);
    CHECK_EQ(bad, 0);
    CHECK_EQ(order, 0);
    oni_reg_val_t v = 0;
    CHECK_RC(oni_read_reg(ctx, 0x102, ONITEST_REG_WFRAMES, &v), 0);
    CHECK_EQ(v, 300);
    oni_destroy_ctx(ctx);
}

/* Acquisition started again (RUNNING = 1 while running) under a reader:
 * the host's flush and the driver's drop of its frame in progress happen
 * together, so no frame comes out torn (EBADFRAME) or with wrong contents.
 * Before, a refill between the two kept a frame's start without its rest. */
struct restarts {
    oni_ctx ctx;
    atomic_int stop;
    atomic_long frames; /* read so far: the restarts begin once the reader is going */
    long restarts;      /* RUNNING = 1 calls that returned 0 */
    int first_err;      /* rc of the first refused restart, 0 if none */
};

static void *restart_loop(void *arg)
{
    struct restarts *r = arg;
    double until = now_s() + 10;
    while (atomic_load(&r->frames) < 1000 && !atomic_load(&r->stop) && now_s() < until)
        sched_yield();
    for (int i = 0; i < 100000 && !atomic_load(&r->stop); i++) {
        int rc = set_u32(r->ctx, ONI_OPT_RUNNING, 1);
        if (rc) {
            r->first_err = rc;
            break;
        }
        r->restarts++;
    }
    atomic_store(&r->stop, 1);
    return NULL;
}

TEST(restart_while_reading_keeps_frames_whole)
{
    oni_ctx ctx = open_test(1000);
    REQUIRE(ctx);
    CHECK_RC(set_u32(ctx, ONI_OPT_RUNNING, 1), 0);
    struct restarts r = {ctx, 0, 0, 0, 0};
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, restart_loop, &r) == 0);
    long good = 0, torn = 0, wrong = 0;
    int read_err = 0; /* a read error other than EBADFRAME ends the run: a failure */
    while (!atomic_load(&r.stop)) {
        oni_frame_t *f = NULL;
        int rc = oni_read_frame(ctx, &f);
        if (rc == ONI_EBADFRAME) {
            torn++;
            continue;
        }
        if (rc < 0) {
            read_err = rc;
            break;
        }
        uint64_t next = 0; /* order is not checked: each restart drops frames */
        if (onitest_check_frame(f, &next) < 0)
            wrong++;
        else
            good++;
        atomic_fetch_add(&r.frames, 1);
        oni_destroy_frame(f);
    }
    atomic_store(&r.stop, 1);
    pthread_join(th, NULL);
    fprintf(stderr, "  %ld frames whole, %ld torn, %ld wrong, %ld restarts\n", good, torn, wrong, r.restarts);
    CHECK_RC(r.first_err, 0);
    CHECK_RC(read_err, 0);
    CHECK(good >= 1000);
    CHECK(r.restarts >= 1000); /* the reader really ran under many restarts */
    CHECK_EQ(torn, 0);
    CHECK_EQ(wrong, 0);
    oni_destroy_ctx(ctx);
}
