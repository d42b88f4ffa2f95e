/* test_oni_reg.c - the register protocol: ACK/NACK, ERETRIG, skipped
 * packets, and deadlines with drivers that never answer. */
#include "drivers/fixture.h"
#include "unit.h"

static const oni_device_t devs[] = {{0x0102, 10, 1, 8, 0}, {0x01FE, 8, 1, 0, 0}};

static oni_ctx open_ctx(uint32_t timeout_ms)
{
    oni_ctx ctx = fx_open(devs, 2, 1);
    if (ctx && oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &timeout_ms, 4)) {
        oni_destroy_ctx(ctx);
        ctx = NULL;
    }
    return ctx;
}

static uint64_t ms_since(uint64_t t0) { return (oni_now_ns() - t0) / 1000000; }

TEST(write_then_read_back)
{
    oni_ctx ctx = open_ctx(500);
    REQUIRE(ctx);
    CHECK_RC(oni_write_reg(ctx, 0x0102, 2, 0xCAFE), 0);
    struct scr_stats st = fx_stats(ctx);
    CHECK_EQ(st.config[ONI_CONFIG_DEV_IDX], 0x0102);
    CHECK_EQ(st.config[ONI_CONFIG_REG_ADDR], 2);
    CHECK_EQ(st.config[ONI_CONFIG_REG_VALUE], 0xCAFE);
    CHECK_EQ(st.config[ONI_CONFIG_RW], 1);
    CHECK_RC(oni_write_reg(ctx, 0x01FE, 2, 0x1234), 0); /* another device, same address */
    oni_reg_val_t v = 0;
    CHECK_RC(oni_read_reg(ctx, 0x0102, 2, &v), 0);
    CHECK_EQ(v, 0xCAFE);
    CHECK_EQ(fx_stats(ctx).config[ONI_CONFIG_RW], 0);
    CHECK_RC(oni_read_reg(ctx, 0x01FE, 2, &v), 0);
    CHECK_EQ(v, 0x1234);
    CHECK_RC(oni_read_reg(ctx, 0x0102, 2, NULL), ONI_EINVALARG);
    /* Works while running too. */
    uint32_t run = 1;
    REQUIRE(oni_set_opt(ctx, ONI_OPT_RUNNING, &run, 4) == 0);
    CHECK_RC(oni_read_reg(ctx, 0x0102, 2, &v), 0);
    CHECK_EQ(v, 0xCAFE);
    oni_destroy_ctx(ctx);
}

TEST(nack_is_failure)
{
    oni_ctx ctx = open_ctx(500);
    REQUIRE(ctx);
    REQUIRE(fx_set_u32(ctx, SCR_OPT_REGMODE, SCR_REG_NACK) == 0);
    oni_reg_val_t v;
    CHECK_RC(oni_write_reg(ctx, 0x0102, 0, 1), ONI_EWRITEFAILURE);
    CHECK_RC(oni_read_reg(ctx, 0x0102, 0, &v), ONI_EREADFAILURE);
    /* After a NACK the next access goes through (TRIG was cleared). */
    REQUIRE(fx_set_u32(ctx, SCR_OPT_REGMODE, SCR_REG_ACK) == 0);
    CHECK_RC(oni_write_reg(ctx, 0x0102, 0, 1), 0);
    oni_destroy_ctx(ctx);
}

TEST(other_packets_are_skipped)
{
    oni_ctx ctx = open_ctx(500);
    REQUIRE(ctx);
    uint8_t sig[600];
    size_t len = 0;
    oni_device_t d = devs[0];
    len += (size_t)oni_signal_pack(ONI_SIG_NULL, NULL, 0, sig + len, sizeof sig - len);
    len += (size_t)oni_signal_pack(ONI_SIG_DEVICEINST, &d, sizeof d, sig + len, sizeof sig - len);
    len += (size_t)oni_signal_pack(ONI_SIG_CONFIGWACK, NULL, 0, sig + len, sizeof sig - len);
    sig[len++] = 0;
    /* Queued before a read: the WACK belongs to no read and must not end it. */
    REQUIRE(oni_set_driver_opt(ctx, SCR_OPT_SIGNAL, sig, len) == 0);
    CHECK_RC(oni_write_reg(ctx, 0x0102, 4, 77), 0); /* its own WACK: the stale one */
    REQUIRE(oni_set_driver_opt(ctx, SCR_OPT_SIGNAL, sig, len) == 0);
    oni_reg_val_t v = 0;
    CHECK_RC(oni_read_reg(ctx, 0x0102, 4, &v), 0);
    CHECK_EQ(v, 77);
    oni_destroy_ctx(ctx);
}

TEST(silent_driver_times_out_then_retrig)
{
    oni_ctx ctx = open_ctx(100);
    REQUIRE(ctx);
    REQUIRE(fx_set_u32(ctx, SCR_OPT_REGMODE, SCR_REG_SILENT) == 0);
    oni_reg_val_t v;
    uint64_t t0 = oni_now_ns();
    CHECK_RC(oni_read_reg(ctx, 0x0102, 1, &v), ONI_ETIMEOUT);
    uint64_t el = ms_since(t0);
    CHECK(el >= 95 && el < 1000);
    /* The access is still pending in the hardware. */
    CHECK_RC(oni_write_reg(ctx, 0x0102, 1, 5), ONI_ERETRIG);
    CHECK_RC(oni_read_reg(ctx, 0x0102, 1, &v), ONI_ERETRIG);
    oni_destroy_ctx(ctx);
}

TEST(nullsig_flood_times_out)
{
    oni_ctx ctx = open_ctx(100);
    REQUIRE(ctx);
    REQUIRE(fx_set_u32(ctx, SCR_OPT_REGMODE, SCR_REG_NULLSPAM) == 0);
    uint64_t t0 = oni_now_ns();
    CHECK_RC(oni_write_reg(ctx, 0x0102, 1, 5), ONI_ETIMEOUT);
    uint64_t el = ms_since(t0);
    CHECK(el >= 95 && el < 1000);
    oni_destroy_ctx(ctx);
}

TEST(waiting_driver_times_out)
{
    oni_ctx ctx = open_ctx(100);
    REQUIRE(ctx);
    REQUIRE(fx_set_u32(ctx, SCR_OPT_REGMODE, SCR_REG_SILENT) == 0);
    REQUIRE(fx_set_u32(ctx, SCR_OPT_EMPTY, SCR_EMPTY_WAIT) == 0);
    CHECK_EQ(fx_stats(ctx).timeout_ms, 100);
    uint64_t t0 = oni_now_ns();
    CHECK_RC(oni_write_reg(ctx, 0x0102, 1, 5), ONI_ETIMEOUT);
    uint64_t el = ms_since(t0);
    CHECK(el >= 95 && el < 1000);
    oni_destroy_ctx(ctx);
}

TEST(garbage_signal_is_an_error_not_a_hang)
{
    oni_ctx ctx = open_ctx(200);
    REQUIRE(ctx);
    REQUIRE(fx_set_u32(ctx, SCR_OPT_REGMODE, SCR_REG_SILENT) == 0);
    uint8_t junk[400];
    memset(junk, 0x42, sizeof junk);
    junk[399] = 0;
    REQUIRE(oni_set_driver_opt(ctx, SCR_OPT_SIGNAL, junk, sizeof junk) == 0);
    CHECK_RC(oni_write_reg(ctx, 0x0102, 1, 5), ONI_ECOBSPACK);
    oni_destroy_ctx(ctx);
}

/* The WACK owed to a failed write arrives late: the next write, which the
 * hardware NACKs, must not take it as its own, and the one after is served. */
static void late_wack_is_not_taken(oni_ctx ctx)
{
    uint8_t pkt[16];
    int n = oni_signal_pack(ONI_SIG_CONFIGWACK, NULL, 0, pkt, sizeof pkt);
    REQUIRE(n > 0);
    CHECK_RC(oni_set_driver_opt(ctx, SCR_OPT_SIGNAL, pkt, (size_t)n), 0);
    CHECK_RC(fx_set_u32(ctx, SCR_OPT_REGMODE, SCR_REG_NACK), 0);
    CHECK_RC(oni_write_reg(ctx, 0x0102, 4, 9), ONI_EWRITEFAILURE);
    CHECK_RC(fx_set_u32(ctx, SCR_OPT_REGMODE, SCR_REG_ACK), 0);
    CHECK_RC(oni_write_reg(ctx, 0x0102, 5, 1), 0);
}

/* An access that timed out after its trigger is answered later (TRIG back
 * at 0, its ACK in the stream): the next access takes that answer out of
 * the way and gets its own, so a refused write fails and a good one
 * succeeds (they were each given the answer before theirs). */
TEST(late_answer_is_not_taken_by_the_next_access)
{
    oni_ctx ctx = open_ctx(50);
    REQUIRE(ctx);
    CHECK_RC(fx_set_u32(ctx, SCR_OPT_REGMODE, SCR_REG_EXTERNAL), 0); /* TRIG clears, nothing answers */
    CHECK_RC(oni_write_reg(ctx, 0x0102, 3, 7), ONI_ETIMEOUT);
    late_wack_is_not_taken(ctx);
    /* an answer that never comes is given up after one more timeout */
    CHECK_RC(fx_set_u32(ctx, SCR_OPT_REGMODE, SCR_REG_EXTERNAL), 0);
    CHECK_RC(oni_write_reg(ctx, 0x0102, 3, 7), ONI_ETIMEOUT);
    CHECK_RC(fx_set_u32(ctx, SCR_OPT_REGMODE, SCR_REG_ACK), 0);
    CHECK_RC(oni_write_reg(ctx, 0x0102, 5, 2), ONI_ETIMEOUT); /* still waiting for it */
    CHECK_RC(oni_write_reg(ctx, 0x0102, 5, 3), 0);
    oni_destroy_ctx(ctx);
}

/* An access that fails after its trigger for another reason than a timeout
 * (here a malformed packet) still has its answer coming: the next access
 * must not take that WACK as its own (the hardware NACKs it). */
TEST(answer_after_a_bad_packet_is_not_taken_by_the_next_access)
{
    oni_ctx ctx = open_ctx(100);
    REQUIRE(ctx);
    CHECK_RC(fx_set_u32(ctx, SCR_OPT_REGMODE, SCR_REG_EXTERNAL), 0); /* TRIG clears, nothing answers */
    uint8_t junk[] = {0x05, 0x42, 0x00}; /* code 5, but one byte follows */
    REQUIRE(oni_set_driver_opt(ctx, SCR_OPT_SIGNAL, junk, sizeof junk) == 0);
    CHECK_RC(oni_write_reg(ctx, 0x0102, 3, 7), ONI_ECOBSPACK);
    late_wack_is_not_taken(ctx);
    oni_destroy_ctx(ctx);
}

/* A context whose write access timed out with only the first 2 of the 6
 * bytes of its WACK read (pkt gets the packet): the driver answers nothing
 * by itself and says ONI_ETIMEOUT when drained. NULL if that set-up failed. */
static oni_ctx cut_answer(uint8_t pkt[6])
{
    oni_ctx ctx = open_ctx(50);
    if (!ctx)
        return NULL;
    if (fx_set_u32(ctx, SCR_OPT_REGMODE, SCR_REG_EXTERNAL) || fx_set_u32(ctx, SCR_OPT_EMPTY, SCR_EMPTY_TIMEOUT) ||
        oni_signal_pack(ONI_SIG_CONFIGWACK, NULL, 0, pkt, 6) != 6 ||
        oni_set_driver_opt(ctx, SCR_OPT_SIGNAL, pkt, 2) || oni_write_reg(ctx, 0x0102, 3, 7) != ONI_ETIMEOUT) {
        oni_destroy_ctx(ctx);
        return NULL;
    }
    return ctx;
}

/* An answer whose bytes arrive on both sides of a timeout: the part read
 * before it is kept, so the next access decodes the whole packet (it took
 * the tail for a malformed packet of its own). */
TEST(answer_split_across_a_timeout_stays_in_step)
{
    uint8_t pkt[6];
    oni_ctx ctx = cut_answer(pkt);
    REQUIRE(ctx);
    REQUIRE(oni_set_driver_opt(ctx, SCR_OPT_SIGNAL, pkt + 2, 4) == 0); /* the rest */
    CHECK_RC(fx_set_u32(ctx, SCR_OPT_REGMODE, SCR_REG_ACK), 0);
    CHECK_RC(oni_write_reg(ctx, 0x0102, 4, 9), 0);
    oni_destroy_ctx(ctx);
}

/* A packet cut by a timeout, then a RESET: the driver empties its signal
 * stream, and the kept bytes must not be glued to the DEVICETABLEACK (the
 * reset, and the next access, failed). With a driver that does not empty
 * it, the packet's tail reads as a malformed packet before the ACK and is
 * skipped. */
TEST(reset_after_a_cut_packet)
{
    uint8_t pkt[6];
    oni_ctx ctx = cut_answer(pkt);
    REQUIRE(ctx);
    uint32_t v = 1;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RESET, &v, 4), 0);
    CHECK_RC(fx_set_u32(ctx, SCR_OPT_REGMODE, SCR_REG_ACK), 0);
    CHECK_RC(oni_write_reg(ctx, 0x0102, 4, 9), 0);
    oni_destroy_ctx(ctx);
}

/* The answer owed to an access that timed out comes after a NULLSIG: only
 * an ACK or NACK pays the debt, so the next write, which the hardware
 * NACKs, still skips the late WACK and fails. Guards the count-down in
 * oni_reg_access (reg_owed -= is_reg_answer(type)): counting any packet, or
 * clearing the count at the first one, made the NULLSIG pay and the write
 * take the stale WACK as its own. */
TEST(nullsig_before_a_late_answer_does_not_pay_for_it)
{
    oni_ctx ctx = open_ctx(50);
    REQUIRE(ctx);
    CHECK_RC(fx_set_u32(ctx, SCR_OPT_REGMODE, SCR_REG_EXTERNAL), 0); /* TRIG clears, nothing answers */
    CHECK_RC(oni_write_reg(ctx, 0x0102, 3, 7), ONI_ETIMEOUT);
    uint8_t sig[32];
    int n = oni_signal_pack(ONI_SIG_NULL, NULL, 0, sig, sizeof sig);
    REQUIRE(n > 0);
    int m = oni_signal_pack(ONI_SIG_CONFIGWACK, NULL, 0, sig + n, sizeof sig - (size_t)n);
    REQUIRE(m > 0);
    CHECK_RC(oni_set_driver_opt(ctx, SCR_OPT_SIGNAL, sig, (size_t)(n + m)), 0);
    CHECK_RC(fx_set_u32(ctx, SCR_OPT_REGMODE, SCR_REG_NACK), 0);
    CHECK_RC(oni_write_reg(ctx, 0x0102, 4, 9), ONI_EWRITEFAILURE);
    CHECK_RC(fx_set_u32(ctx, SCR_OPT_REGMODE, SCR_REG_ACK), 0);
    CHECK_RC(oni_write_reg(ctx, 0x0102, 5, 1), 0);
    oni_destroy_ctx(ctx);
}

/* The test driver, whose signal stream holds only 0 bytes once zeros_since
 * is set (its oni_now_ns()); 2 s after that it answers ONI_ETIMEOUT, so that
 * a core that never looks at the clock still comes back. */
static uint64_t zeros_since;

static int zero_signal(oni_driver_ctx c, oni_read_stream_t s, void *data, size_t size)
{
    if (s != ONI_READ_STREAM_SIGNAL || !zeros_since)
        return onidrv_test.read_stream(c, s, data, size);
    if (oni_now_ns() - zeros_since > 2000000000ull)
        return ONI_ETIMEOUT;
    memset(data, 0, size);
    return (int)size;
}

/* A driver that sends nothing but packet delimiters (stray zeros, no
 * packet) cannot hold a register access past ONI_OPT_TIMEOUTMS (100 ms
 * here; docs/threads.md: a driver that keeps sending cannot hold a call past
 * its deadline). Guards the deadline check on stray delimiters in
 * read_packet (without it the access returned only when the driver gave up,
 * after 2 s). */
TEST(endless_delimiters_time_out)
{
    struct oni_driver drv = onidrv_test;
    drv.read_stream = zero_signal;
    oni_ctx ctx = oni_create_ctx_driver(&drv);
    REQUIRE(ctx);
    uint32_t ms = 100;
    REQUIRE(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &ms, 4) == 0);
    REQUIRE(oni_init_ctx(ctx, -1) == 0);
    zeros_since = oni_now_ns();
    oni_reg_val_t v;
    uint64_t t0 = oni_now_ns();
    CHECK_RC(oni_read_reg(ctx, 0, 0, &v), ONI_ETIMEOUT);
    uint64_t el = ms_since(t0);
    CHECK(el >= 95 && el < 1000);
    zeros_since = 0;
    oni_destroy_ctx(ctx);
}
