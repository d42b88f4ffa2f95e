/* test_testdrv.c - the `test` driver through its backend table (onidrv_test)
 * and through libonidriver_test.so: device table over the signal stream,
 * registers (ACK/NACK, read-only, unknown), TRIG and timeouts, frame contents,
 * order and weights, write-frame validation. */
#include <dlfcn.h>
#include <stdint.h>
#include <time.h>
#include "unit.h"
#include "oni/driver.h"
#include "oni/util/wire.h"
#include "oni/util/cobs.h"
#include "onitest.h"
#include "onix.h"

#define D onidrv_test

static oni_driver_ctx open_drv(void)
{
    oni_driver_ctx c = D.create_ctx();
    if (c && D.init(c, -1)) {
        D.destroy_ctx(c);
        return NULL;
    }
    return c;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void set_timeout(oni_driver_ctx c, uint32_t ms)
{
    CHECK_RC(D.set_opt_callback(c, ONI_OPT_TIMEOUTMS, &ms, sizeof ms), 0);
}

/* Read one signal packet byte by byte (as upstream hosts do) and decode it. */
static int read_packet(oni_driver_ctx c, uint32_t *type, uint8_t *payload, size_t cap)
{
    uint8_t enc[ONI_COBSMAXPACKET + 1], dec[ONI_COBSMAXPACKET];
    size_t n = 0;
    for (;;) {
        int rc = D.read_stream(c, ONI_READ_STREAM_SIGNAL, enc + n, 1);
        if (rc < 0)
            return rc;
        if (rc != 1)
            return -1000;
        if (enc[n] == 0)
            break;
        if (++n > ONI_COBSMAXPACKET)
            return -1001;
    }
    int len = oni_cobs_decode(enc, n, dec, sizeof dec);
    if (len < 4)
        return -1002;
    memcpy(type, dec, 4);
    if ((size_t)(len - 4) > cap)
        return -1003;
    memcpy(payload, dec + 4, (size_t)len - 4);
    return len - 4;
}

/* The register protocol by hand; returns the answer's signal type or an error. */
static int reg(oni_driver_ctx c, uint32_t dev, uint32_t addr, uint32_t rw, uint32_t *val)
{
    uint32_t trig = 9;
    CHECK_RC(D.read_config(c, ONI_CONFIG_TRIG, &trig), 0);
    CHECK_EQ(trig, 0);
    CHECK_RC(D.write_config(c, ONI_CONFIG_DEV_IDX, dev), 0);
    CHECK_RC(D.write_config(c, ONI_CONFIG_REG_ADDR, addr), 0);
    if (rw)
        CHECK_RC(D.write_config(c, ONI_CONFIG_REG_VALUE, *val), 0);
    CHECK_RC(D.write_config(c, ONI_CONFIG_RW, rw), 0);
    CHECK_RC(D.write_config(c, ONI_CONFIG_TRIG, 1), 0);
    uint32_t type;
    uint8_t pl[ONI_SIGMAXPAYLOAD];
    int rc = read_packet(c, &type, pl, sizeof pl);
    if (rc < 0)
        return rc;
    if (type == ONI_SIG_CONFIGRACK)
        CHECK_RC(D.read_config(c, ONI_CONFIG_REG_VALUE, val), 0);
    return (int)type;
}

TEST(create_init_and_states)
{
    oni_driver_ctx c = D.create_ctx();
    REQUIRE(c);
    uint8_t b[16];
    uint32_t v;
    CHECK_RC(D.read_stream(c, ONI_READ_STREAM_DATA, b, sizeof b), ONI_EINVALSTATE);
    CHECK_RC(D.read_config(c, ONI_CONFIG_RUNNING, &v), ONI_EINVALSTATE);
    CHECK_RC(D.write_config(c, ONI_CONFIG_RUNNING, 1), ONI_EINVALSTATE);
    CHECK_RC(D.write_stream(c, ONI_WRITE_STREAM_DATA, (const char *)b, 8), ONI_EINVALSTATE);
    CHECK_RC(D.init(c, 3), ONI_EPATHINVALID);
    CHECK_RC(D.init(c, 0), 0);
    CHECK_RC(D.init(c, 0), ONI_EINVALSTATE);
    CHECK_RC(D.read_config(c, ONI_CONFIG_SYSCLKHZ, &v), 0);
    CHECK_EQ(v, 250000000);
    CHECK_RC(D.read_config(c, ONI_CONFIG_ACQCLKHZ, &v), 0);
    CHECK_EQ(v, 250000000);
    CHECK_RC(D.write_config(c, ONI_CONFIG_SYSCLKHZ, 1), ONI_EREADONLY);
    CHECK_RC(D.write_config(c, ONI_CONFIG_CUSTOMBEGIN + 1, 1), ONI_EINVALOPT);
    CHECK_RC(D.write_config(c, ONI_CONFIG_CUSTOMBEGIN, 77), 0);
    CHECK_RC(D.read_config(c, ONI_CONFIG_CUSTOMBEGIN, &v), 0);
    CHECK_EQ(v, 77);
    CHECK_RC(D.read_config(c, ONI_CONFIG_RUNNING, NULL), ONI_EINVALARG);
    CHECK_RC(D.read_stream(c, (oni_read_stream_t)7, b, 4), ONI_EINVALARG);
    CHECK_RC(D.read_stream(c, ONI_READ_STREAM_DATA, b, 0), 0);
    CHECK_EQ(strcmp(D.info()->name, "test"), 0);
    CHECK_RC(D.destroy_ctx(c), 0);
}

TEST(reset_emits_device_table)
{
    oni_driver_ctx c = open_drv();
    REQUIRE(c);
    set_timeout(c, 50);
    uint32_t type, n = 0;
    uint8_t pl[ONI_SIGMAXPAYLOAD];
    /* Nothing pending before RESET: the read waits for the timeout. */
    CHECK_RC(read_packet(c, &type, pl, sizeof pl), ONI_ETIMEOUT);
    CHECK_RC(D.write_config(c, ONI_CONFIG_RESET, 1), 0);
    CHECK_EQ(read_packet(c, &type, pl, sizeof pl), 4);
    CHECK_EQ(type, ONI_SIG_DEVICETABLEACK);
    memcpy(&n, pl, 4);
    REQUIRE(n >= 10 && n < 64);
    int mods[4] = {0}, writable = 0, hubs[256] = {0}, mgrs = 0;
    uint32_t prev = 0;
    for (uint32_t i = 0; i < n; i++) {
        oni_device_t e;
        REQUIRE(read_packet(c, &type, pl, sizeof pl) == (int)sizeof e);
        CHECK_EQ(type, ONI_SIG_DEVICEINST);
        memcpy(&e, pl, sizeof e);
        if (i)
            CHECK(e.idx > prev);
        prev = e.idx;
        hubs[(e.idx >> 8) & 0xFF] = 1;
        if ((e.idx & 0xFF) == ONIX_HUB_DEV_IDX) {
            mgrs++;
            CHECK_EQ(e.id, ONIX_ONIGPU_HUBMGR);
            CHECK_EQ(e.read_size, 0);
        }
        if (e.read_size) {
            CHECK(e.read_size >= 8);
            mods[e.read_size % 4]++;
        }
        if (e.write_size) {
            writable++;
            CHECK_EQ(e.write_size % 4, 0);
        }
    }
    for (int m = 0; m < 4; m++)
        CHECK(mods[m] > 0);
    CHECK(writable >= 2);
    CHECK(hubs[0] && hubs[1] && hubs[2]);
    CHECK_EQ(mgrs, 3);
    CHECK_RC(read_packet(c, &type, pl, sizeof pl), ONI_ETIMEOUT);
    D.destroy_ctx(c);
}

TEST(registers_ack_nack)
{
    oni_driver_ctx c = open_drv();
    REQUIRE(c);
    set_timeout(c, 50);
    uint32_t v = 0;
    CHECK_EQ(reg(c, 0x100, ONITEST_REG_ENABLE, 0, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 1);
    v = 0xDEADBEEF;
    CHECK_EQ(reg(c, 0x100, ONITEST_REG_MESSAGE, 1, &v), ONI_SIG_CONFIGWACK);
    v = 0;
    CHECK_EQ(reg(c, 0x100, ONITEST_REG_MESSAGE, 0, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 0xDEADBEEF);
    CHECK_EQ(reg(c, 0x100, ONITEST_REG_RATE, 0, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 2);
    v = 0;
    CHECK_EQ(reg(c, 0x100, ONITEST_REG_RATE, 1, &v), ONI_SIG_CONFIGWNACK);
    v = ONITEST_MAX_RATE + 1;
    CHECK_EQ(reg(c, 0x100, ONITEST_REG_RATE, 1, &v), ONI_SIG_CONFIGWNACK);
    v = 7;
    CHECK_EQ(reg(c, 0x100, ONITEST_REG_RATE, 1, &v), ONI_SIG_CONFIGWACK);
    CHECK_EQ(reg(c, 0x100, ONITEST_REG_READSIZE, 0, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 142);
    /* Read-only and unknown registers, unknown devices. */
    CHECK_EQ(reg(c, 0x100, ONITEST_REG_READSIZE, 1, &v), ONI_SIG_CONFIGWNACK);
    CHECK_EQ(reg(c, 0x100, ONITEST_REG_FRAMES_LO, 1, &v), ONI_SIG_CONFIGWNACK);
    CHECK_EQ(reg(c, 0x100, 99, 0, &v), ONI_SIG_CONFIGRNACK);
    CHECK_EQ(reg(c, 0x100, 99, 1, &v), ONI_SIG_CONFIGWNACK);
    CHECK_EQ(reg(c, 0x105, 0, 0, &v), ONI_SIG_CONFIGRNACK);
    CHECK_EQ(reg(c, 0x105, 0, 1, &v), ONI_SIG_CONFIGWNACK);
    /* Hub managers. */
    CHECK_EQ(reg(c, 0x1FE, ONIX_HUB_HARDWAREID, 0, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, ONIX_HUB_HS64);
    CHECK_EQ(reg(c, 0x0FE, ONIX_HUB_CLKRATEHZ, 0, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 250000000);
    CHECK_EQ(reg(c, 0x2FE, ONIX_HUB_FIRMWAREVER, 0, &v), ONI_SIG_CONFIGRACK);
    CHECK(v != 0);
    CHECK_EQ(reg(c, 0x2FE, ONIX_HUB_HARDWAREREV, 0, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(reg(c, 0x2FE, ONIX_HUB_FIRMWAREVER, 1, &v), ONI_SIG_CONFIGWNACK);
    CHECK_EQ(reg(c, 0x2FE, ONIX_HUB_CLKRATEHZ, 1, &v), ONI_SIG_CONFIGWNACK);
    CHECK_EQ(reg(c, 0x2FE, 3, 0, &v), ONI_SIG_CONFIGRNACK);
    CHECK_EQ(reg(c, 0x2FE, 6, 0, &v), ONI_SIG_CONFIGRNACK);
    v = 4321;
    CHECK_EQ(reg(c, 0x2FE, ONIX_HUB_DELAYNS, 1, &v), ONI_SIG_CONFIGWACK);
    v = 0;
    CHECK_EQ(reg(c, 0x2FE, ONIX_HUB_DELAYNS, 0, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 4321);
    /* RESET restores the reset values. */
    CHECK_RC(D.write_config(c, ONI_CONFIG_RESET, 1), 0);
    uint32_t type;
    uint8_t pl[ONI_SIGMAXPAYLOAD];
    while (read_packet(c, &type, pl, sizeof pl) >= 0)
        ;
    CHECK_EQ(reg(c, 0x100, ONITEST_REG_MESSAGE, 0, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 0);
    CHECK_EQ(reg(c, 0x100, ONITEST_REG_RATE, 0, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 2);
    D.destroy_ctx(c);
}

TEST(held_trigger_retrig_and_timeout)
{
    oni_driver_ctx c = open_drv();
    REQUIRE(c);
    set_timeout(c, 60);
    uint32_t hold = 1, v;
    size_t len = 0;
    CHECK_RC(D.set_opt(c, ONITEST_OPT_HOLD_ACK, &hold, 2), ONI_EINVALARG);
    CHECK_RC(D.set_opt(c, ONITEST_OPT_HOLD_ACK, &hold, sizeof hold), 0);
    CHECK_RC(D.write_config(c, ONI_CONFIG_DEV_IDX, 0x000), 0);
    CHECK_RC(D.write_config(c, ONI_CONFIG_REG_ADDR, ONITEST_REG_RATE), 0);
    CHECK_RC(D.write_config(c, ONI_CONFIG_RW, 0), 0);
    CHECK_RC(D.write_config(c, ONI_CONFIG_TRIG, 1), 0);
    CHECK_RC(D.read_config(c, ONI_CONFIG_TRIG, &v), 0);
    CHECK_EQ(v, 1);
    CHECK_RC(D.write_config(c, ONI_CONFIG_TRIG, 1), ONI_ERETRIG);
    uint32_t type;
    uint8_t pl[8];
    double t0 = now_s();
    CHECK_RC(read_packet(c, &type, pl, sizeof pl), ONI_ETIMEOUT);
    double waited = now_s() - t0;
    CHECK(waited >= 0.055 && waited < 2.0);
    /* Changing the address now does not change the held access. */
    CHECK_RC(D.write_config(c, ONI_CONFIG_REG_ADDR, 99), 0);
    hold = 0;
    CHECK_RC(D.set_opt(c, ONITEST_OPT_HOLD_ACK, &hold, sizeof hold), 0);
    CHECK_EQ(read_packet(c, &type, pl, sizeof pl), 0);
    CHECK_EQ(type, ONI_SIG_CONFIGRACK);
    CHECK_RC(D.read_config(c, ONI_CONFIG_REG_VALUE, &v), 0);
    CHECK_EQ(v, 1);
    CHECK_RC(D.read_config(c, ONI_CONFIG_TRIG, &v), 0);
    CHECK_EQ(v, 0);
    len = sizeof v;
    CHECK_RC(D.get_opt(c, ONITEST_OPT_HOLD_ACK, &v, &len), 0);
    CHECK_EQ(v, 0);
    CHECK_RC(D.get_opt(c, ONI_OPT_TIMEOUTMS, &v, &len), ONI_EINVALOPT);
    uint32_t zero = 0;
    CHECK_RC(D.set_opt_callback(c, ONI_OPT_TIMEOUTMS, &zero, sizeof zero), ONI_EINVALARG);
    D.destroy_ctx(c);
}

/* A data read waits a slice (ONI_READ_SLICE_MS) of the timeout, then answers
 * 0 bytes: the host waits out its timeout across such answers. */
TEST(data_waits_for_running_a_slice_at_a_time)
{
    oni_driver_ctx c = open_drv();
    REQUIRE(c);
    set_timeout(c, 40);
    uint8_t b[64];
    double t0 = now_s();
    CHECK_RC(D.read_stream(c, ONI_READ_STREAM_DATA, b, sizeof b), 0);
    double s = now_s() - t0;
    CHECK(s >= ONI_READ_SLICE_MS * 0.9e-3 && s < 0.035);
    set_timeout(c, 3);
    t0 = now_s();
    CHECK_RC(D.read_stream(c, ONI_READ_STREAM_DATA, b, sizeof b), 0);
    CHECK(now_s() - t0 < ONI_READ_SLICE_MS * 0.9e-3); /* a shorter timeout is the slice */
    CHECK_RC(D.write_config(c, ONI_CONFIG_RUNNING, 1), 0);
    CHECK_EQ(D.read_stream(c, ONI_READ_STREAM_DATA, b, sizeof b), (int)sizeof b);
    D.destroy_ctx(c);
}

/* Parse a stream buffer, checking every frame; returns frames parsed. */
struct seen {
    uint64_t expect[0x300];
    uint64_t count[0x300];
    uint64_t time;
    int bad, out_of_order, pad_nonzero;
};

static size_t parse(const uint8_t *p, size_t n, struct seen *s)
{
    size_t off = 0, frames = 0;
    while (n - off >= ONI_RFRAMEHEADERSZ) {
        uint64_t t;
        uint32_t idx, sz;
        memcpy(&t, p + off, 8);
        memcpy(&idx, p + off + 8, 4);
        memcpy(&sz, p + off + 12, 4);
        size_t fsz = ONI_RFRAMEHEADERSZ + oni_pad4(sz);
        if (n - off < fsz || idx >= 0x300)
            break;
        if (t != s->time)
            s->out_of_order++;
        s->time = t + 1;
        oni_frame_t f = {t, idx, sz, (char *)(p + off + 16)};
        int rc = onitest_check_frame(&f, &s->expect[idx]);
        if (rc < 0)
            s->bad++;
        if (rc == 1)
            s->out_of_order++;
        for (size_t i = sz; i < oni_pad4(sz); i++)
            if (p[off + 16 + i])
                s->pad_nonzero++;
        s->count[idx]++;
        off += fsz;
        frames++;
    }
    return frames;
}

TEST(frames_verify_across_odd_read_sizes)
{
    oni_driver_ctx c = open_drv();
    REQUIRE(c);
    CHECK_RC(D.write_config(c, ONI_CONFIG_RUNNING, 1), 0);
    static uint8_t buf[1 << 20];
    static struct seen s;
    memset(&s, 0, sizeof s);
    size_t got = 0;
    const size_t sizes[] = {1, 3, 7, 16, 17, 100, 791, 792, 793, 4096, 5};
    for (int round = 0; got < sizeof buf - 8192; round++) {
        size_t n = sizes[round % 11];
        REQUIRE(D.read_stream(c, ONI_READ_STREAM_DATA, buf + got, n) == (int)n);
        got += n;
    }
    size_t frames = parse(buf, got, &s);
    CHECK(frames > 1000);
    CHECK_EQ(s.bad, 0);
    CHECK_EQ(s.out_of_order, 0);
    CHECK_EQ(s.pad_nonzero, 0);
    /* Weighted round robin: TESTCORE (rate 4) emits 4x HEARTBEAT (rate 1), RHD2164 (2) 2x. */
    CHECK(s.count[0x000] > 0);
    CHECK(s.count[0x001] >= 4 * s.count[0x000] - 4 && s.count[0x001] <= 4 * s.count[0x000] + 4);
    CHECK(s.count[0x100] >= 2 * s.count[0x000] - 2 && s.count[0x100] <= 2 * s.count[0x000] + 2);
    CHECK_EQ(s.count[0x003], 0); /* write-only devices emit nothing */
    CHECK_EQ(s.count[0x0FE], 0);
    onitest_stats_t st;
    size_t len = sizeof st;
    CHECK_RC(D.get_opt(c, ONITEST_OPT_STATS, &st, &len), 0);
    CHECK_EQ(st.bytes, got);
    CHECK(st.frames >= frames && st.frames <= frames + 1);
    len = 4;
    CHECK_RC(D.get_opt(c, ONITEST_OPT_STATS, &st, &len), ONI_EBUFFERSIZE);
    CHECK_EQ(len, sizeof st); /* what it takes */
    CHECK_RC(D.set_opt(c, ONITEST_OPT_STATS, &st, sizeof st), ONI_EREADONLY); /* as the emu driver's */
    D.destroy_ctx(c);
}

TEST(first_round_order_and_disable)
{
    oni_driver_ctx c = open_drv();
    REQUIRE(c);
    uint32_t v = 0;
    set_timeout(c, 50);
    CHECK_EQ(reg(c, 0x200, ONITEST_REG_ENABLE, 1, &v), ONI_SIG_CONFIGWACK);
    CHECK_RC(D.write_config(c, ONI_CONFIG_RUNNING, 1), 0);
    static uint8_t buf[65536];
    REQUIRE(D.read_stream(c, ONI_READ_STREAM_DATA, buf, sizeof buf) == (int)sizeof buf);
    /* Round 0 has every enabled readable device in table order. */
    const uint32_t order[] = {0x000, 0x001, 0x002, 0x100, 0x101, 0x201, 0x202, 0x001, 0x100, 0x001, 0x001};
    size_t off = 0;
    for (unsigned i = 0; i < sizeof order / sizeof order[0]; i++) {
        uint32_t idx, sz;
        memcpy(&idx, buf + off + 8, 4);
        memcpy(&sz, buf + off + 12, 4);
        CHECK_EQ(idx, order[i]);
        off += ONI_RFRAMEHEADERSZ + oni_pad4(sz);
    }
    static struct seen s;
    memset(&s, 0, sizeof s);
    parse(buf, sizeof buf, &s);
    CHECK_EQ(s.count[0x200], 0);
    CHECK_EQ(s.bad, 0);
    CHECK_EQ(reg(c, 0x001, ONITEST_REG_FRAMES_LO, 0, &v), ONI_SIG_CONFIGRACK);
    CHECK(v >= s.count[0x001] && v <= s.count[0x001] + 1);
    D.destroy_ctx(c);
}

TEST(running_toggle_and_acq_counter)
{
    oni_driver_ctx c = open_drv();
    REQUIRE(c);
    uint8_t b[4096];
    CHECK_RC(D.write_config(c, ONI_CONFIG_RUNNING, 1), 0);
    REQUIRE(D.read_stream(c, ONI_READ_STREAM_DATA, b, 20) == 20); /* half a frame */
    CHECK_RC(D.write_config(c, ONI_CONFIG_RUNNING, 0), 0);
    uint32_t v = 1;
    CHECK_RC(D.read_config(c, ONI_CONFIG_RUNNING, &v), 0);
    CHECK_EQ(v, 0);
    CHECK_RC(D.write_config(c, ONI_CONFIG_RESETACQCOUNTER, 2), 0);
    CHECK_RC(D.read_config(c, ONI_CONFIG_RUNNING, &v), 0);
    CHECK_EQ(v, 1);
    REQUIRE(D.read_stream(c, ONI_READ_STREAM_DATA, b, sizeof b) == (int)sizeof b);
    uint64_t t;
    uint32_t idx;
    memcpy(&t, b, 8);
    memcpy(&idx, b + 8, 4);
    CHECK_EQ(t, 0);     /* the counter was reset */
    CHECK_EQ(idx, 0x001); /* the next device in the schedule, on a frame boundary */
    D.destroy_ctx(c);
}

static int wframe(oni_driver_ctx c, uint32_t dev, uint32_t words, size_t total)
{
    uint8_t b[256] = {0};
    memcpy(b, &dev, 4);
    memcpy(b + 4, &words, 4);
    return D.write_stream(c, ONI_WRITE_STREAM_DATA, (const char *)b, total);
}

TEST(write_frame_validation)
{
    oni_driver_ctx c = open_drv();
    REQUIRE(c);
    set_timeout(c, 50);
    CHECK_EQ(wframe(c, 0x102, 2, 16), 16);      /* ESTIM, write_size 8 */
    CHECK_EQ(wframe(c, 0x102, 4, 24), 24);      /* two samples */
    CHECK_EQ(wframe(c, 0x202, 3, 20), 20);      /* STIM, write_size 12 */
    CHECK_RC(wframe(c, 0x102, 1, 12), ONI_EBADFRAME);  /* not a multiple */
    CHECK_RC(wframe(c, 0x102, 0, 8), ONI_EBADFRAME);   /* empty */
    CHECK_RC(wframe(c, 0x000, 2, 16), ONI_EBADFRAME);  /* not writable */
    CHECK_RC(wframe(c, 0x055, 2, 16), ONI_EBADFRAME);  /* unknown */
    CHECK_RC(wframe(c, 0x102, 4, 16), ONI_EBADFRAME);  /* truncated */
    CHECK_RC(wframe(c, 0x102, 2, 6), ONI_EBADFRAME);   /* short header */
    CHECK_RC(wframe(c, 0x102, 0x40000001u, 16), ONI_EBADFRAME); /* absurd length */
    CHECK_RC(D.write_stream(c, ONI_WRITE_STREAM_DATA, NULL, 8), ONI_EINVALARG);
    /* Two frames in one write. */
    uint8_t two[40] = {0};
    uint32_t h[2] = {0x004, 4};
    memcpy(two, h, 8);
    h[0] = 0x003, h[1] = 1;
    memcpy(two + 24, h, 8);
    CHECK_EQ(D.write_stream(c, ONI_WRITE_STREAM_DATA, (const char *)two, 36), 36);
    onitest_stats_t st;
    size_t len = sizeof st;
    CHECK_RC(D.get_opt(c, ONITEST_OPT_STATS, &st, &len), 0);
    CHECK_EQ(st.wframes_accepted, 5);
    CHECK_EQ(st.wframes_rejected, 7);
    uint32_t v = 0;
    CHECK_EQ(reg(c, 0x102, ONITEST_REG_WFRAMES, 0, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 2);
    CHECK_EQ(reg(c, 0x004, ONITEST_REG_WFRAMES, 0, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 1);
    D.destroy_ctx(c);
}

/* RATE takes effect at once (no ENABLE write needed), up to ONITEST_MAX_RATE. */
TEST(rate_alone_changes_the_schedule)
{
    oni_driver_ctx c = open_drv();
    REQUIRE(c);
    set_timeout(c, 50);
    uint32_t v = ONITEST_MAX_RATE;
    CHECK_EQ(reg(c, 0x000, ONITEST_REG_RATE, 1, &v), ONI_SIG_CONFIGWACK);
    v = 0;
    CHECK_EQ(reg(c, 0x000, ONITEST_REG_RATE, 0, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, ONITEST_MAX_RATE);
    v = 8;
    CHECK_EQ(reg(c, 0x000, ONITEST_REG_RATE, 1, &v), ONI_SIG_CONFIGWACK);
    CHECK_RC(D.write_config(c, ONI_CONFIG_RUNNING, 1), 0);
    static uint8_t buf[1 << 18];
    REQUIRE(D.read_stream(c, ONI_READ_STREAM_DATA, buf, sizeof buf) == (int)sizeof buf);
    static struct seen s;
    memset(&s, 0, sizeof s);
    parse(buf, sizeof buf, &s);
    /* HEARTBEAT at 8 against TESTCORE at 4: twice as many, give or take a round */
    CHECK(s.count[0x001] > 100);
    CHECK(s.count[0x000] + 8 >= 2 * s.count[0x001] && s.count[0x000] <= 2 * s.count[0x001] + 8);
    D.destroy_ctx(c);
}

/* FRAMES_HI is the high word; RESET zeroes FRAMES_LO/HI and WFRAMES, and
 * frames start again at counter 0. */
TEST(reset_zeroes_the_frame_counters)
{
    oni_driver_ctx c = open_drv();
    REQUIRE(c);
    set_timeout(c, 50);
    CHECK_EQ(wframe(c, 0x102, 2, 16), 16);
    CHECK_RC(D.write_config(c, ONI_CONFIG_RUNNING, 1), 0);
    static uint8_t buf[8192];
    REQUIRE(D.read_stream(c, ONI_READ_STREAM_DATA, buf, sizeof buf) == (int)sizeof buf);
    CHECK_RC(D.write_config(c, ONI_CONFIG_RUNNING, 0), 0);
    uint32_t v = 0;
    CHECK_EQ(reg(c, 0x000, ONITEST_REG_FRAMES_LO, 0, &v), ONI_SIG_CONFIGRACK);
    CHECK(v > 0);
    v = 9;
    CHECK_EQ(reg(c, 0x000, ONITEST_REG_FRAMES_HI, 0, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 0); /* far from 2^32 frames */
    v = 0;
    CHECK_EQ(reg(c, 0x102, ONITEST_REG_WFRAMES, 0, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 1);
    CHECK_RC(D.write_config(c, ONI_CONFIG_RESET, 1), 0);
    uint32_t type;
    uint8_t pl[ONI_SIGMAXPAYLOAD];
    while (read_packet(c, &type, pl, sizeof pl) >= 0) /* the device table, until the timeout */
        ;
    v = 9;
    CHECK_EQ(reg(c, 0x000, ONITEST_REG_FRAMES_LO, 0, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 0);
    v = 9;
    CHECK_EQ(reg(c, 0x000, ONITEST_REG_FRAMES_HI, 0, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 0);
    v = 9;
    CHECK_EQ(reg(c, 0x102, ONITEST_REG_WFRAMES, 0, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 0);
    CHECK_RC(D.write_config(c, ONI_CONFIG_RUNNING, 1), 0);
    REQUIRE(D.read_stream(c, ONI_READ_STREAM_DATA, buf, sizeof buf) == (int)sizeof buf);
    static struct seen s;
    memset(&s, 0, sizeof s); /* every device's expected counter 0 */
    CHECK(parse(buf, sizeof buf, &s) > 5);
    CHECK_EQ(s.bad, 0);
    CHECK_EQ(s.out_of_order, 0);
    D.destroy_ctx(c);
}

/* READSIZE and WRITESIZE of a device that has both; driver option sizes are
 * exact on set and reported back on get (docs/devices-test.md). */
TEST(size_registers_and_option_lengths)
{
    oni_driver_ctx c = open_drv();
    REQUIRE(c);
    set_timeout(c, 50);
    uint32_t v = 0;
    CHECK_EQ(reg(c, 0x202, ONITEST_REG_READSIZE, 0, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 16);
    CHECK_EQ(reg(c, 0x202, ONITEST_REG_WRITESIZE, 0, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 12);
    uint32_t hold[2] = {0, 0};
    CHECK_RC(D.set_opt(c, ONITEST_OPT_HOLD_ACK, hold, sizeof hold), ONI_EINVALARG);
    size_t len = sizeof hold;
    CHECK_RC(D.get_opt(c, ONITEST_OPT_HOLD_ACK, hold, &len), 0);
    CHECK_EQ(len, sizeof(uint32_t));
    onitest_stats_t st[2];
    len = sizeof st;
    CHECK_RC(D.get_opt(c, ONITEST_OPT_STATS, st, &len), 0);
    CHECK_EQ(len, sizeof st[0]);
    D.destroy_ctx(c);
}

/* Only setting HOLD_ACK back to 0 completes a held access; setting it to 1
 * again leaves the access pending. */
TEST(held_access_stays_held_when_hold_is_set_again)
{
    oni_driver_ctx c = open_drv();
    REQUIRE(c);
    set_timeout(c, 30);
    uint32_t hold = 1, v = 9;
    CHECK_RC(D.set_opt(c, ONITEST_OPT_HOLD_ACK, &hold, sizeof hold), 0);
    CHECK_RC(D.write_config(c, ONI_CONFIG_DEV_IDX, 0x000), 0);
    CHECK_RC(D.write_config(c, ONI_CONFIG_REG_ADDR, ONITEST_REG_RATE), 0);
    CHECK_RC(D.write_config(c, ONI_CONFIG_RW, 0), 0);
    CHECK_RC(D.write_config(c, ONI_CONFIG_TRIG, 1), 0);
    CHECK_RC(D.set_opt(c, ONITEST_OPT_HOLD_ACK, &hold, sizeof hold), 0);
    CHECK_RC(D.read_config(c, ONI_CONFIG_TRIG, &v), 0);
    CHECK_EQ(v, 1);
    uint32_t type;
    uint8_t pl[8];
    CHECK_RC(read_packet(c, &type, pl, sizeof pl), ONI_ETIMEOUT); /* no answer queued */
    hold = 0;
    CHECK_RC(D.set_opt(c, ONITEST_OPT_HOLD_ACK, &hold, sizeof hold), 0);
    CHECK_EQ(read_packet(c, &type, pl, sizeof pl), 0);
    CHECK_EQ(type, ONI_SIG_CONFIGRACK);
    D.destroy_ctx(c);
}

/* After a gap the checker expects the frame after the one it saw, not the
 * one it expected before the gap. */
TEST(checker_resyncs_after_a_gap)
{
    oni_driver_ctx c = open_drv();
    REQUIRE(c);
    CHECK_RC(D.write_config(c, ONI_CONFIG_RUNNING, 1), 0);
    static uint8_t buf[8192];
    REQUIRE(D.read_stream(c, ONI_READ_STREAM_DATA, buf, sizeof buf) == (int)sizeof buf);
    size_t at[2];
    int n = 0;
    for (size_t off = 0; n < 2 && off + 16 + 64 <= sizeof buf;) {
        uint32_t idx, sz;
        memcpy(&idx, buf + off + 8, 4);
        memcpy(&sz, buf + off + 12, 4);
        if (idx == 0x001) /* TESTCORE: two consecutive frames of one device */
            at[n++] = off + 16;
        off += 16 + oni_pad4(sz);
    }
    REQUIRE(n == 2);
    oni_frame_t f0 = {0, 0x001, 64, (char *)buf + at[0]};
    oni_frame_t f1 = {0, 0x001, 64, (char *)buf + at[1]};
    uint64_t exp = 5; /* as if frames 0 to 4 were expected, say */
    CHECK_EQ(onitest_check_frame(&f0, &exp), 1); /* frame 0: out of order */
    CHECK_EQ(exp, 1);
    CHECK_EQ(onitest_check_frame(&f1, &exp), 0); /* frame 1 follows it */
    D.destroy_ctx(c);
}

TEST(checker_catches_corruption)
{
    oni_driver_ctx c = open_drv();
    REQUIRE(c);
    CHECK_RC(D.write_config(c, ONI_CONFIG_RUNNING, 1), 0);
    static uint8_t buf[8192];
    REQUIRE(D.read_stream(c, ONI_READ_STREAM_DATA, buf, sizeof buf) == (int)sizeof buf);
    /* Find a frame of each size class and check it, then corrupt it. */
    size_t off = 0;
    int checked = 0;
    while (off + 16 + 776 <= sizeof buf) {
        uint32_t idx, sz;
        memcpy(&idx, buf + off + 8, 4);
        memcpy(&sz, buf + off + 12, 4);
        uint8_t *pl = buf + off + 16;
        uint64_t exp;
        memcpy(&exp, pl, 8);
        oni_frame_t f = {0, idx, sz, (char *)pl};
        CHECK_RC(onitest_check_frame(&f, &exp), 0);
        exp += 5;
        CHECK_EQ(onitest_check_frame(&f, &exp), 1);
        if (sz > 8) { /* an 8-byte payload is only its counter: order checks catch that */
            pl[sz - 1] ^= 0x10; /* last byte: exercises partial words too */
            CHECK_RC(onitest_check_frame(&f, &exp), ONI_EBADFRAME);
            pl[sz - 1] ^= 0x10;
        }
        oni_frame_t g = {0, idx, sz + 1, (char *)pl};
        CHECK_RC(onitest_check_frame(&g, &exp), ONI_EBADFRAME);
        oni_frame_t h = {0, 0x0FE, sz, (char *)pl};
        CHECK_RC(onitest_check_frame(&h, &exp), ONI_EBADFRAME);
        CHECK_RC(onitest_check_frame(NULL, &exp), ONI_EINVALARG);
        CHECK_RC(onitest_check_frame(&f, NULL), ONI_EINVALARG);
        off += 16 + oni_pad4(sz);
        checked++;
    }
    CHECK(checked >= 8);
    D.destroy_ctx(c);
}

TEST(shared_library_exports_the_driver_abi)
{
    const char *dir = getenv(ONI_DRIVER_PATH_ENV);
    if (!dir)
        SKIP("%s not set (run through ctest)", ONI_DRIVER_PATH_ENV);
    char path[4096];
    snprintf(path, sizeof path, "%s/libonidriver_test.so", dir);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    REQUIRE(h);
    const char *syms[] = {"oni_driver_create_ctx", "oni_driver_destroy_ctx", "oni_driver_init",
                          "oni_driver_read_stream", "oni_driver_write_stream", "oni_driver_read_config",
                          "oni_driver_write_config", "oni_driver_set_opt_callback", "oni_driver_set_opt",
                          "oni_driver_get_opt", "oni_driver_info"};
    for (unsigned i = 0; i < sizeof syms / sizeof syms[0]; i++)
        CHECK(dlsym(h, syms[i]) != NULL);
    const oni_driver_info_t *(*info)(void) = (const oni_driver_info_t *(*)(void))dlsym(h, "oni_driver_info");
    oni_driver_ctx (*create)(void) = (oni_driver_ctx(*)(void))dlsym(h, "oni_driver_create_ctx");
    int (*init)(oni_driver_ctx, int) = (int (*)(oni_driver_ctx, int))dlsym(h, "oni_driver_init");
    int (*wcfg)(oni_driver_ctx, oni_config_t, oni_reg_val_t) =
        (int (*)(oni_driver_ctx, oni_config_t, oni_reg_val_t))dlsym(h, "oni_driver_write_config");
    int (*rs)(oni_driver_ctx, oni_read_stream_t, void *, size_t) =
        (int (*)(oni_driver_ctx, oni_read_stream_t, void *, size_t))dlsym(h, "oni_driver_read_stream");
    int (*destroy)(oni_driver_ctx) = (int (*)(oni_driver_ctx))dlsym(h, "oni_driver_destroy_ctx");
    REQUIRE(info && create && init && wcfg && rs && destroy);
    CHECK_EQ(strcmp(info()->name, "test"), 0);
    oni_driver_ctx c = create();
    REQUIRE(c);
    CHECK_RC(init(c, -1), 0);
    CHECK_RC(wcfg(c, ONI_CONFIG_RUNNING, 1), 0);
    static uint8_t b[4096];
    CHECK_EQ(rs(c, ONI_READ_STREAM_DATA, b, sizeof b), (int)sizeof b);
    static struct seen s;
    memset(&s, 0, sizeof s);
    CHECK(parse(b, sizeof b, &s) > 5);
    CHECK_EQ(s.bad, 0);
    /* The forwarders pass every argument: a host index the driver refuses,
     * a timeout of 0 it refuses, an option read with its size. */
    int (*cb)(oni_driver_ctx, int, const void *, size_t) =
        (int (*)(oni_driver_ctx, int, const void *, size_t))dlsym(h, "oni_driver_set_opt_callback");
    int (*gopt)(oni_driver_ctx, int, void *, size_t *) =
        (int (*)(oni_driver_ctx, int, void *, size_t *))dlsym(h, "oni_driver_get_opt");
    REQUIRE(cb && gopt);
    uint32_t ms = 0;
    CHECK_RC(cb(c, ONI_OPT_TIMEOUTMS, &ms, sizeof ms), ONI_EINVALARG);
    ms = 20;
    CHECK_RC(cb(c, ONI_OPT_TIMEOUTMS, &ms, sizeof ms), 0);
    onitest_stats_t st;
    size_t len = sizeof st;
    CHECK_RC(gopt(c, ONITEST_OPT_STATS, &st, &len), 0);
    CHECK_EQ(len, sizeof st);
    CHECK_EQ(st.bytes, sizeof b);
    CHECK_RC(destroy(c), 0);
    c = create();
    REQUIRE(c);
    CHECK_RC(init(c, 7), ONI_EPATHINVALID);
    CHECK_RC(destroy(c), 0);
    dlclose(h);
}
