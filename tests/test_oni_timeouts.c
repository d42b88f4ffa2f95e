/* test_oni_timeouts.c - how long a blocking read waits (docs/timeouts.md):
 * only a wait with no byte at all fails (every byte moves the deadline);
 * at the default ONI_OPT_TIMEOUTMS (0) a live device is waited for however
 * slow its table, as upstream's liboni waits, and a stopped or dead one is
 * reported after ONI_DEFAULT_TIMEOUTMS. On the scripted fixture driver,
 * paced (SCR_OPT_PACE) to play a slow device. */
#include "drivers/fixture.h"
#include "unit.h"

/* A heartbeat-like device: 8 bytes, frames of 24 bytes in the stream. */
static const oni_device_t hb[1] = {{0x000, 12, 1, 8, 0}};
/* A device of 256-byte frames. */
static const oni_device_t big[1] = {{0x000, 10, 1, 256, 0}};

static double ms_since(uint64_t t0)
{
    return (double)(oni_now_ns() - t0) / 1e6;
}

/* An initialized context on the one-device table t, its data stream
 * endless frames of it. */
static oni_ctx open_one(const oni_device_t *t)
{
    oni_ctx ctx = fx_open(t, 1, 1);
    if (!ctx)
        return NULL;
    uint8_t f[512];
    size_t len = fx_frame(f, 1, 0x000, t->read_size);
    if (oni_set_driver_opt(ctx, SCR_OPT_DATA, f, len) || fx_set_u32(ctx, SCR_OPT_REPEAT, 1)) {
        oni_destroy_ctx(ctx);
        return NULL;
    }
    return ctx;
}

static int set_opt(oni_ctx ctx, int opt, uint32_t v)
{
    return oni_set_opt(ctx, opt, &v, sizeof v);
}

/* Bytes that keep coming, 8 every 20 ms, make a 272-byte frame in about
 * 0.7 s: with ONI_OPT_TIMEOUTMS = 100 the read waits them out, since every
 * byte moves the deadline. Guards the reset of the deadline in refill
 * (without it: ONI_ETIMEOUT after 100 ms). */
TEST(progress_moves_the_deadline)
{
    oni_ctx ctx = open_one(big);
    REQUIRE(ctx);
    CHECK_RC(set_opt(ctx, ONI_OPT_TIMEOUTMS, 100), 0);
    CHECK_RC(set_opt(ctx, ONI_OPT_RUNNING, 1), 0);
    CHECK_RC(fx_set_u32(ctx, SCR_OPT_CHUNK, 8), 0);
    CHECK_RC(fx_set_u32(ctx, SCR_OPT_PACE, 20), 0);
    uint64_t t0 = oni_now_ns();
    oni_frame_t *f = NULL;
    CHECK_RC(oni_read_frame(ctx, &f), fx_answer(256));
    double ms = ms_since(t0);
    fprintf(stderr, "  a 272-byte frame at 8 bytes / 20 ms: %.0f ms (timeout 100 ms)\n", ms);
    CHECK(ms > 400);
    if (f)
        oni_destroy_frame(f);
    oni_destroy_ctx(ctx);
}

/* With ONI_OPT_TIMEOUTMS set, no byte for that long is the end, running or
 * not: ONI_ETIMEOUT after 100 ms. */
TEST(set_timeout_without_bytes_fails)
{
    oni_ctx ctx = fx_open(hb, 1, 1);
    REQUIRE(ctx);
    CHECK_RC(set_opt(ctx, ONI_OPT_TIMEOUTMS, 100), 0);
    CHECK_RC(set_opt(ctx, ONI_OPT_RUNNING, 1), 0);
    uint64_t t0 = oni_now_ns();
    oni_frame_t *f = NULL;
    CHECK_RC(oni_read_frame(ctx, &f), ONI_ETIMEOUT);
    double ms = ms_since(t0);
    CHECK(ms >= 95 && ms < 1000);
    oni_destroy_ctx(ctx);
}

/* The default waits for a live device however slow its table: a heartbeat
 * whose frames are 2.6 s apart (longer than ONI_DEFAULT_TIMEOUTMS) is read
 * frame after frame, as upstream reads it. Guards oni_wait_live's RUNNING
 * probe (without it: ONI_ETIMEOUT after 2 s). */
TEST(default_waits_for_a_live_slow_device)
{
    oni_ctx ctx = open_one(hb);
    REQUIRE(ctx);
    uint32_t v = 1;
    size_t n = sizeof v;
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_TIMEOUTMS, &v, &n), 0);
    CHECK_EQ(v, 0);
    CHECK_RC(set_opt(ctx, ONI_OPT_RUNNING, 1), 0);
    CHECK_RC(fx_set_u32(ctx, SCR_OPT_CHUNK, 24), 0);
    uint64_t t0 = oni_now_ns();
    CHECK_RC(fx_set_u32(ctx, SCR_OPT_PACE, ONI_DEFAULT_TIMEOUTMS + 600), 0);
    oni_frame_t *f = NULL;
    CHECK_RC(oni_read_frame(ctx, &f), fx_answer(8));
    double ms = ms_since(t0);
    fprintf(stderr, "  the next heartbeat after %.0f ms (default wait, probe every %u ms)\n", ms,
            ONI_DEFAULT_TIMEOUTMS);
    CHECK(ms > ONI_DEFAULT_TIMEOUTMS);
    if (f)
        oni_destroy_frame(f);
    oni_destroy_ctx(ctx);
}

/* A card that hands over whole blocks only (as ONIX's DMA does through
 * riffa), a large block, a heartbeat-only table at 100 Hz: the block comes
 * when its 342 frames are in, after 3.4 s with no byte before, longer than
 * ONI_DEFAULT_TIMEOUTMS. At the default the read just waits, as upstream's
 * does (oni-repl's 64 KiB block there: 27 s). */
TEST(large_block_on_a_100_hz_heartbeat_waits)
{
    oni_ctx ctx = open_one(hb);
    REQUIRE(ctx);
    CHECK_RC(set_opt(ctx, ONI_OPT_BLOCKREADSIZE, 24 * 342), 0);
    CHECK_RC(set_opt(ctx, ONI_OPT_RUNNING, 1), 0);
    CHECK_RC(fx_set_u32(ctx, SCR_OPT_CHUNK, 24 * 342), 0);
    uint64_t t0 = oni_now_ns();
    CHECK_RC(fx_set_u32(ctx, SCR_OPT_PACE, 3420), 0);
    oni_frame_t *f = NULL;
    CHECK_RC(oni_read_frame(ctx, &f), fx_answer(8));
    double ms = ms_since(t0);
    fprintf(stderr, "  an 8208-byte block at 100 Hz: %.0f ms\n", ms);
    CHECK(ms > ONI_DEFAULT_TIMEOUTMS);
    if (f)
        oni_destroy_frame(f);
    oni_destroy_ctx(ctx);
}

/* A stopped device (the hardware's RUNNING reads 0) sends nothing, ever:
 * at the default it is reported, ONI_ETIMEOUT, one ONI_DEFAULT_TIMEOUTMS
 * after the last byte. */
TEST(default_reports_a_stopped_device)
{
    oni_ctx ctx = fx_open(hb, 1, 1);
    REQUIRE(ctx);
    CHECK_RC(set_opt(ctx, ONI_OPT_RUNNING, 1), 0);
    CHECK_RC(set_opt(ctx, ONI_OPT_RUNNING, 0), 0);
    uint64_t t0 = oni_now_ns();
    oni_frame_t *f = NULL;
    CHECK_RC(oni_read_frame(ctx, &f), ONI_ETIMEOUT);
    double ms = ms_since(t0);
    fprintf(stderr, "  a stopped device reported after %.0f ms\n", ms);
    CHECK(ms >= ONI_DEFAULT_TIMEOUTMS - 5 && ms < ONI_DEFAULT_TIMEOUTMS + 1000);
    oni_destroy_ctx(ctx);
}

/* A dead device: the driver answers no bytes and its registers fail (here
 * ONI_EDISCONNECTED): that error comes back one ONI_DEFAULT_TIMEOUTMS after
 * the last byte. */
TEST(default_reports_a_dead_device)
{
    oni_ctx ctx = fx_open(hb, 1, 1);
    REQUIRE(ctx);
    CHECK_RC(set_opt(ctx, ONI_OPT_RUNNING, 1), 0);
    CHECK_RC(fx_set_u32(ctx, SCR_OPT_CONFIGRC, (uint32_t)ONI_EDISCONNECTED), 0);
    uint64_t t0 = oni_now_ns();
    oni_frame_t *f = NULL;
    CHECK_RC(oni_read_frame(ctx, &f), ONI_EDISCONNECTED);
    double ms = ms_since(t0);
    fprintf(stderr, "  a dead device reported after %.0f ms\n", ms);
    CHECK(ms >= ONI_DEFAULT_TIMEOUTMS - 5 && ms < ONI_DEFAULT_TIMEOUTMS + 1000);
    oni_destroy_ctx(ctx);
}

/* The driver is told what one of its calls may wait: the timeout set, or
 * ONI_DEFAULT_TIMEOUTMS at the default 0. */
TEST(driver_told_the_wait_of_one_call)
{
    oni_ctx ctx = fx_open(hb, 1, 1);
    REQUIRE(ctx);
    CHECK_EQ(fx_stats(ctx).timeout_ms, ONI_DEFAULT_TIMEOUTMS);
    CHECK_RC(set_opt(ctx, ONI_OPT_TIMEOUTMS, 250), 0);
    CHECK_EQ(fx_stats(ctx).timeout_ms, 250);
    CHECK_RC(set_opt(ctx, ONI_OPT_TIMEOUTMS, 0), 0);
    CHECK_EQ(fx_stats(ctx).timeout_ms, ONI_DEFAULT_TIMEOUTMS);
    oni_destroy_ctx(ctx);
}
