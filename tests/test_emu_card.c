/* test_emu_card.c - the emulated ONIX card as emu.h opens it: the spec, the
 * device table and hubs, configuration and device registers, the signal
 * queue, and the link model. */
#include <math.h>
#include <stdlib.h>
#include "test_emu_util.h"
#include "unit.h"

/* --- the spec ---------------------------------------------------------------- */

TEST(emu_spec_errors)
{
    static const char *bad[] = {
        "nokey", "mode=slow", "wake=nap", "link=gen9x1", "ddr=1", "ddr=12Q", "seed=x", "color=red",
        "batch=10000001", "batch=x", "batch=-1",
        "devices=nosuch", "devices=rhd2164:nosucharg=1", "devices=testcore:bytes=12", "devices=heartbeat:hz=0",
        "devices=rhd2164:route=2", "devices=memusage,memusage", "devices=testcore:rate=0", "devices=rhd2164:",
        "devices=rhd2164:units=9999", "devices=testsink:bytes=6",
        "devices=testcore:rate=1", /* under a frame in 1000 s: refused after init allocated (no leak: ASan) */
        "devices=testcore:bytes=8:rate=147573952589676416", /* x1000/8 wrapped past 2^64 to a small rate */
        "seed=18446744073709551616", "seed=0x10",
        "devices=:rhd2164", /* strtok_r skipped the empty name: the card got an rhd2164 */
        "devices=rhd2164,,stim", "devices=,rhd2164", "devices=rhd2164,", "devices=", /* so did strtok_r at ',' */
        "devices=heartbeat:hz=0.6", "devices=rhd2164:units=2.5", /* no whole number: were rounded to 1 and 3 */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct emu_card *c = (struct emu_card *)1;
        char err[200] = "";
        CHECK_RC(emu_card_create(bad[i], &c, err, sizeof err), ONI_EINVALARG);
        CHECK(c == NULL);
        if (!err[0])
            UNIT_FAIL("no message for spec \"%s\"", bad[i]);
    }
    /* a repeated argument is named as such (the message was "rhd2164 has no argument 'units'") */
    char err[200] = "";
    struct emu_card *dup = NULL;
    CHECK_RC(emu_card_create("devices=rhd2164:units=1:units=2", &dup, err, sizeof err), ONI_EINVALARG);
    if (!strstr(err, "given twice"))
        UNIT_FAIL("repeated argument: \"%s\"", err);
    CHECK_RC(emu_card_create(NULL, NULL, NULL, 0), ONI_EINVALARG);
    struct emu_card *frac = card_open("devices=heartbeat:hz=1.1k;ddr=0.5G"); /* whole after the suffix */
    CHECK(frac != NULL);
    emu_card_destroy(frac);
    struct emu_card *c = NULL;
    CHECK_RC(emu_card_create(NULL, &c, NULL, 0), 0); /* defaults */
    REQUIRE(c);
    oniemu_link_t l;
    emu_card_link(c, &l);
    CHECK(!strcmp(l.name, "gen2x4"));
    CHECK(l.bandwidth_Bps > 1.3e9 && l.bandwidth_Bps < 2.0e9);
    onigpu_stream_stats_t st;
    emu_card_stats(c, &st);
    CHECK_EQ(st.fifo_capacity[0] + st.fifo_capacity[1], 4ull << 30); /* 4 GiB DDR, split */
    emu_card_destroy(c);
    emu_card_destroy(NULL);
    /* whole numbers keep all 64 bits (they went through a double) */
    struct emu_card *a = card_open("seed=9007199254740993"), *b = card_open("seed=9007199254740992"),
                    *top = card_open("seed=18446744073709551615;ddr=1.5G");
    REQUIRE(a && b && top);
    CHECK(a->seed == 9007199254740993ull && b->seed == 9007199254740992ull);
    CHECK(top->seed == UINT64_MAX);
    emu_card_stats(top, &st);
    CHECK_EQ(st.fifo_capacity[0], 3ull << 28); /* a fraction still works: 1.5 GiB, halved */
    emu_card_destroy(a);
    emu_card_destroy(b);
    emu_card_destroy(top);
}

/* Spec edges: the largest card memory (ddr=64G) is accepted; a spec of 512
 * bytes (the card keeps 511) is refused, not cut short; a number whose
 * suffix takes it past 2^64 is refused, not wrapped. Guards the ddr bound
 * (> 64G, not >=), the spec length check (>= sizeof spec, not >) and
 * emu_parse_u64's iv > UINT64_MAX / m. */
TEST(emu_spec_edges)
{
    struct emu_card *c = card_open("mode=fast;ddr=64G;devices=heartbeat");
    REQUIRE(c);
    onigpu_stream_stats_t st;
    emu_card_stats(c, &st);
    CHECK_EQ(st.fifo_capacity[0], 32ull << 30);
    emu_card_destroy(c);
    char spec[513];
    memset(spec, ';', sizeof spec);
    memcpy(spec, "mode=fast", 9);
    spec[511] = 0; /* 511 bytes: the longest spec */
    c = card_open(spec);
    CHECK(c != NULL);
    emu_card_destroy(c);
    spec[511] = ';';
    spec[512] = 0;
    c = (struct emu_card *)1;
    CHECK_RC(emu_card_create(spec, &c, NULL, 0), ONI_EINVALARG);
    CHECK(c == NULL);
    uint64_t v = 0;
    CHECK_RC(emu_parse_u64("18446744073709551k", 1, &v), 0);
    CHECK_EQ(v, 18446744073709551000ull);
    CHECK_RC(emu_parse_u64("18446744073709552k", 1, &v), ONI_EINVALARG);
    CHECK_RC(emu_parse_u64("17179869184G", 0, &v), ONI_EINVALARG); /* 2^34 * 2^30 */
}

/* Spec arguments every device takes: enable=0 keeps it silent until enabled,
 * hub=N places it (hubs up to N are created; the table lists the manager of
 * each hub that has a device). */
TEST(emu_spec_enable_and_hub_arguments)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=heartbeat:hz=1000:enable=0,rhd2164:hub=3");
    REQUIRE(c);
    uint32_t v0 = 0;
    oni_device_t t[16];
    int n = table_read(c, t, 16);
    CHECK_EQ(n, 3 + 2); /* heartbeat, rhd2164, memusage; managers of hubs 0 and 3 */
    CHECK_EQ(find_id(t, n, ONIX_ONIGPU_HUBMGR), 0x0FE);
    CHECK_EQ(reg_get(c, 0x1FE, ONIX_HUB_HARDWAREID, &v0), ONI_SIG_CONFIGRNACK); /* hub 1 is empty */
    CHECK_EQ(find_id(t, n, ONIX_RHD2164), 0x300);
    uint32_t hb = find_id(t, n, ONIX_HEARTBEAT), v = 1;
    CHECK_EQ(reg_get(c, hb, EMU_REG_ENABLE, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 0);
    CHECK_EQ(reg_get(c, 0x3FE, ONIX_HUB_HARDWAREID, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, ONIX_HUB_HS64);
    card_start(c);
    static struct frame f;
    int seen = 0;
    for (int i = 0; i < 3000; i++) {
        REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, TMO) == 0);
        seen += f.dev == hb;
    }
    CHECK_EQ(seen, 0);
    uint64_t before = f.time;
    CHECK_EQ(reg_set(c, hb, EMU_REG_ENABLE, 1), ONI_SIG_CONFIGWACK);
    for (int i = 0; i < 3000 && !seen; i++) {
        REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, TMO) == 0);
        if (f.dev == hb) {
            seen = 1;
            CHECK(f.time >= before); /* its schedule resumed now, not at 0 */
        }
    }
    CHECK(seen);
    emu_card_destroy(c);
}

/* --- the device table and hubs ----------------------------------------------- */

TEST(emu_device_table_and_hubs)
{
    struct emu_card *c = card_open("mode=fast;devices=heartbeat,testcore,stim,rhd2164,bno055,rhd2164");
    REQUIRE(c);
    oni_device_t t[64];
    int n = table_read(c, t, 64);
    REQUIRE(n > 0);
    CHECK_EQ(n, 7 + 3); /* 6 devices + memusage, hubs 0..2 */
    int hubmgr = 0;
    for (int i = 0; i < n; i++) {
        if ((t[i].idx & 0xFF) != ONIX_HUB_DEV_IDX)
            continue;
        hubmgr++;
        CHECK_EQ(t[i].id, ONIX_ONIGPU_HUBMGR);
        uint32_t v = 0;
        CHECK_EQ(reg_get(c, t[i].idx, ONIX_HUB_CLKRATEHZ, &v), ONI_SIG_CONFIGRACK);
        CHECK(v > 0);
        CHECK_EQ(reg_get(c, t[i].idx, ONIX_HUB_HARDWAREID, &v), ONI_SIG_CONFIGRACK);
        CHECK_EQ(v, (t[i].idx >> 8) == 0 ? ONIX_HUB_FMCHOST : ONIX_HUB_HS64);
        CHECK_EQ(reg_set(c, t[i].idx, ONIX_HUB_FIRMWAREVER, 7), ONI_SIG_CONFIGWNACK);
        CHECK_EQ(reg_set(c, t[i].idx, ONIX_HUB_DELAYNS, 777), ONI_SIG_CONFIGWACK);
        CHECK_EQ(reg_get(c, t[i].idx, ONIX_HUB_DELAYNS, &v), ONI_SIG_CONFIGRACK);
        CHECK_EQ(v, 777);
    }
    CHECK_EQ(hubmgr, 3);
    /* host devices on hub 0, an rhd2164 opens hub 1, bno055 joins it, the second rhd2164 hub 2 */
    CHECK_EQ(find_id(t, n, ONIX_HEARTBEAT) >> 8, 0);
    CHECK_EQ(find_id(t, n, ONIX_MEMUSAGE) >> 8, 0);
    CHECK_EQ(find_id(t, n, ONIX_BREAKDIG1R3), UINT32_MAX); /* only where asked for */
    CHECK_EQ(find_id(t, n, ONIX_RHD2164), 0x100);
    CHECK_EQ(find_id(t, n, ONIX_BNO055), 0x101);
    int rhds = 0;
    for (int i = 0; i < n; i++) {
        if (t[i].id == ONIX_RHD2164) {
            CHECK_EQ(t[i].idx, rhds ? 0x200u : 0x100u);
            CHECK_EQ(t[i].read_size, 8 + 64 * 2 + 3 * 2);
            rhds++;
        }
        if (t[i].id == ONIX_ONIGPU_STIM) {
            CHECK_EQ(t[i].read_size, 16);
            CHECK_EQ(t[i].write_size, 4);
        }
    }
    emu_card_destroy(c);
}

/* A bno055 with no headstage to join gets a hub of its own (hub 1, with its
 * hub manager), not the host hub. Guards place()'s nhub > 1. */
TEST(emu_lone_bno055_gets_its_own_hub)
{
    struct emu_card *c = card_open("mode=fast;devices=heartbeat,bno055");
    REQUIRE(c);
    oni_device_t t[8];
    int n = table_read(c, t, 8);
    uint32_t bno = find_id(t, n, ONIX_BNO055), hb = find_id(t, n, ONIX_HEARTBEAT);
    CHECK_EQ(hb >> 8, 0);
    CHECK_EQ(bno >> 8, 1);
    CHECK_EQ(c->nhub, 2);
    emu_card_destroy(c);
}

/* The hub manager of a hub the card does not have (hub 1 of a card with
 * the host hub only) answers nothing: reads and writes are NACKed. Guards
 * hub_access's hub >= nhub. */
TEST(emu_missing_hub_manager_nacks)
{
    struct emu_card *c = card_open("mode=fast;devices=heartbeat");
    REQUIRE(c);
    REQUIRE(c->nhub == 1);
    uint32_t v = 0, mgr1 = (1u << 8) | ONIX_HUB_DEV_IDX;
    CHECK_EQ(reg_get(c, ONIX_HUB_DEV_IDX, ONIX_HUB_HARDWAREID, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(reg_get(c, mgr1, ONIX_HUB_HARDWAREID, &v), ONI_SIG_CONFIGRNACK);
    CHECK_EQ(reg_set(c, mgr1, ONIX_HUB_DELAYNS, 5), ONI_SIG_CONFIGWNACK);
    emu_card_destroy(c);
}

/* --- registers and the signal queue ------------------------------------------ */

TEST(emu_config_registers)
{
    struct emu_card *c = card_open("mode=fast;devices=heartbeat");
    REQUIRE(c);
    uint32_t v = 1;
    CHECK_RC(emu_card_read_config(c, ONI_CONFIG_ACQCLKHZ, &v), 0);
    CHECK_EQ(v, 250000000);
    CHECK_RC(emu_card_read_config(c, ONI_CONFIG_SYSCLKHZ, &v), 0);
    CHECK(v > 0);
    CHECK_RC(emu_card_write_config(c, ONI_CONFIG_ACQCLKHZ, 5), ONI_EREADONLY);
    CHECK_RC(emu_card_write_config(c, ONI_CONFIG_SYSCLKHZ, 5), ONI_EREADONLY);
    CHECK_RC(emu_card_write_config(c, ONI_CONFIG_RESETACQCOUNTER, 3), ONI_EINVALARG);
    CHECK_RC(emu_card_write_config(c, ONI_CONFIG_HWADDRESS, 0x55), 0);
    CHECK_RC(emu_card_read_config(c, ONI_CONFIG_HWADDRESS, &v), 0);
    CHECK_EQ(v, 0x55);
    CHECK_RC(emu_card_read_config(c, ONI_CONFIG_CUSTOMBEGIN + 3, &v), ONI_EINVALOPT);
    CHECK_RC(emu_card_read_config(c, ONI_CONFIG_TRIG, NULL), ONI_EINVALARG);
    CHECK_RC(emu_card_read_config(NULL, ONI_CONFIG_TRIG, &v), ONI_EINVALARG);
    CHECK_RC(emu_card_write_config(NULL, ONI_CONFIG_TRIG, 1), ONI_EINVALARG);
    /* RESETACQCOUNTER = 2 resets the clock and starts: the first frame is at 0 */
    CHECK_RC(emu_card_write_config(c, ONI_CONFIG_RESETACQCOUNTER, 2), 0);
    CHECK_RC(emu_card_read_config(c, ONI_CONFIG_RUNNING, &v), 0);
    CHECK_EQ(v, 1);
    struct frame f;
    CHECK_RC(frame_read(c, EMU_STREAM_DATA, &f, TMO), 0);
    CHECK_EQ(f.time, 0);
    /* fast mode: the read made frames ahead (a chunk), which wait in the FIFO */
    onigpu_stream_stats_t st;
    emu_card_stats(c, &st);
    REQUIRE(st.fifo_bytes[0] > 0);
    CHECK_RC(emu_card_write_config(c, ONI_CONFIG_RUNNING, 0), 0);
    /* stopped: the default stream's FIFO is emptied with the host's buffers
     * (it kept the rest of a frame the host had dropped the start of), then
     * nothing comes, and the wait ends */
    emu_card_stats(c, &st);
    CHECK_EQ(st.fifo_bytes[0], 0);
    uint64_t t0 = oni_now_ns();
    uint8_t b[16];
    CHECK_RC(emu_card_read(c, EMU_STREAM_DATA, b, 16, 50), ONI_ETIMEOUT);
    CHECK(oni_now_ns() - t0 < 1000000000ull);
    CHECK_RC(emu_card_read(c, EMU_STREAM_WRITE, b, 16, 50), ONI_EINVALARG);
    CHECK_RC(emu_card_read(c, EMU_STREAM_DATA, NULL, 16, 50), ONI_EINVALARG);
    emu_card_destroy(c);
}

TEST(emu_device_registers)
{
    struct emu_card *c = card_open("mode=fast;devices=heartbeat:hz=10,testcore:bytes=64:rate=1M,testsink,stim");
    REQUIRE(c);
    oni_device_t t[16];
    int n = table_read(c, t, 16);
    REQUIRE(n > 0);
    uint32_t hb = find_id(t, n, ONIX_HEARTBEAT), sink = find_id(t, n, ONIX_ONIGPU_TESTSINK);
    uint32_t core = find_id(t, n, ONIX_ONIGPU_TESTCORE), mu = find_id(t, n, ONIX_MEMUSAGE);
    uint32_t v = 0;
    CHECK_EQ(reg_get(c, hb, EMU_REG_ENABLE, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 1);
    CHECK_EQ(reg_get(c, hb, EMU_REG_RATE_HZ, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 10);
    CHECK_EQ(reg_set(c, hb, EMU_REG_RATE_HZ, 250), ONI_SIG_CONFIGWACK);
    CHECK_EQ(reg_get(c, hb, EMU_REG_RATE_HZ, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 250);
    CHECK_EQ(reg_set(c, hb, EMU_REG_RATE_HZ, 0), ONI_SIG_CONFIGWNACK);
    /* the ONIX heartbeat's own registers: CLK_DIV (1), CLK_HZ (2) */
    CHECK_EQ(reg_get(c, hb, ONIX_HEARTBEAT_CLK_HZ, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 250000000);
    CHECK_EQ(reg_get(c, hb, ONIX_HEARTBEAT_CLK_DIV, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 250000000 / 250);
    CHECK_EQ(reg_set(c, hb, ONIX_HEARTBEAT_CLK_DIV, 2500000), ONI_SIG_CONFIGWACK);
    CHECK_EQ(reg_get(c, hb, EMU_REG_RATE_HZ, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 100);
    CHECK_EQ(reg_set(c, hb, ONIX_HEARTBEAT_CLK_DIV, 0), ONI_SIG_CONFIGWNACK);
    CHECK_EQ(reg_set(c, hb, ONIX_HEARTBEAT_CLK_DIV, 249), ONI_SIG_CONFIGWNACK); /* above 10^6 Hz */
    CHECK_EQ(reg_set(c, hb, ONIX_HEARTBEAT_CLK_DIV, 250000001), ONI_SIG_CONFIGWNACK); /* below 1 Hz */
    CHECK_EQ(reg_set(c, hb, ONIX_HEARTBEAT_CLK_HZ, 1), ONI_SIG_CONFIGWNACK);
    CHECK_EQ(reg_get(c, hb, ONIX_HEARTBEAT_CLK_DIV, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 2500000);
    CHECK_EQ(reg_get(c, hb, 9, &v), ONI_SIG_CONFIGRNACK); /* where RATE_HZ was until 2026-11-25 */
    CHECK_EQ(reg_get(c, hb, EMU_REG_READSIZE, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 8);
    /* read-only registers, bad values, unknown addresses and devices: NACK */
    CHECK_EQ(reg_set(c, hb, EMU_REG_READSIZE, 4), ONI_SIG_CONFIGWNACK);
    CHECK_EQ(reg_set(c, hb, EMU_REG_FRAMES_LO, 0), ONI_SIG_CONFIGWNACK);
    CHECK_EQ(reg_set(c, hb, EMU_REG_ENABLE, 2), ONI_SIG_CONFIGWNACK);
    CHECK_EQ(reg_set(c, hb, EMU_REG_ROUTE, 2), ONI_SIG_CONFIGWNACK);
    CHECK_EQ(reg_get(c, hb, 0x7777, &v), ONI_SIG_CONFIGRNACK);
    CHECK_EQ(reg_set(c, hb, 0x7777, 1), ONI_SIG_CONFIGWNACK);
    CHECK_EQ(reg_get(c, 0x0F0, 0, &v), ONI_SIG_CONFIGRNACK);
    CHECK_EQ(reg_set(c, 0x0F0, 0, 1), ONI_SIG_CONFIGWNACK);
    CHECK_EQ(reg_get(c, 0x9FE, 0, &v), ONI_SIG_CONFIGRNACK); /* manager of a hub that is not there */
    CHECK_EQ(reg_get(c, mu, EMU_REG_DEVICE + 2, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, (2ull << 30) >> 10);
    CHECK_EQ(reg_set(c, mu, EMU_REG_DEVICE, 1), ONI_SIG_CONFIGWNACK);
    /* a write-only device has no ROUTE register */
    CHECK_EQ(reg_get(c, sink, EMU_REG_ROUTE, &v), ONI_SIG_CONFIGRNACK);
    CHECK_EQ(reg_set(c, sink, EMU_REG_ROUTE, 1), ONI_SIG_CONFIGWNACK);
    CHECK_EQ(reg_set(c, sink, EMU_REG_ENABLE, 0), ONI_SIG_CONFIGWACK);
    /* the test core's rate register (kB/s) */
    CHECK_EQ(reg_set(c, core, EMU_REG_DEVICE, 2000), ONI_SIG_CONFIGWACK);
    CHECK_EQ(reg_get(c, core, EMU_REG_RATE_HZ, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 2000000 / 64);
    CHECK_EQ(reg_set(c, core, EMU_REG_DEVICE + 1, 8), ONI_SIG_CONFIGWNACK);
    /* TRIG reads 0 after every access: the card answers at once */
    CHECK_RC(emu_card_read_config(c, ONI_CONFIG_TRIG, &v), 0);
    CHECK_EQ(v, 0);
    emu_card_destroy(c);
}

/* The signal queue (64 KiB) takes a packet that fills it to the last byte;
 * only the next one is dropped and counted. Guards sig_push's room check
 * (EMU_SIGQ_CAP - fill < len, not <=). */
TEST(emu_signal_packet_that_fills_the_queue_is_kept)
{
    struct emu_card *c = card_open("mode=fast;devices=heartbeat");
    REQUIRE(c);
    CHECK_RC(emu_card_write_config(c, ONI_CONFIG_DEV_IDX, 0xABCDEF), 0); /* no such device: NACKs */
    CHECK_RC(emu_card_write_config(c, ONI_CONFIG_RW, 1), 0);
    CHECK_RC(emu_card_write_config(c, ONI_CONFIG_TRIG, 1), 0);
    size_t nack = c->sig_fill;
    CHECK_RC(emu_card_write_config(c, ONI_CONFIG_RESET, 1), 0);
    size_t table = c->sig_fill - nack;
    REQUIRE(nack > 0 && table > 0);
    /* tables then NACKs, to exactly EMU_SIGQ_CAP bytes */
    int tables = 0;
    while ((EMU_SIGQ_CAP - c->sig_fill - tables * table) % nack)
        REQUIRE(++tables < 100);
    for (int i = 0; i < tables; i++)
        CHECK_RC(emu_card_write_config(c, ONI_CONFIG_RESET, 1), 0);
    while (c->sig_fill < EMU_SIGQ_CAP && !c->sig_dropped)
        CHECK_RC(emu_card_write_config(c, ONI_CONFIG_TRIG, 1), 0);
    CHECK_EQ(c->sig_fill, EMU_SIGQ_CAP);
    CHECK_EQ(c->sig_dropped, 0);
    CHECK_RC(emu_card_write_config(c, ONI_CONFIG_TRIG, 1), 0);
    CHECK_EQ(c->sig_dropped, 1);
    emu_card_destroy(c);
}

/* --- the link model ---------------------------------------------------------- */

/* oniemu.h's list of presets is the card's: each name opens, in order of
 * bandwidth, unlimited last; a name not listed is refused. */
TEST(emu_link_presets_named_in_oniemu_h)
{
    static const char *const names[] = {ONIEMU_LINK_PRESETS};
    double prev = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        oniemu_link_t l;
        REQUIRE(emu_link_preset(names[i], &l) == 0);
        CHECK(!strcmp(l.name, names[i]));
        int last = i + 1 == sizeof names / sizeof names[0];
        CHECK(last ? l.bandwidth_Bps == 0 : l.bandwidth_Bps > prev);
        prev = l.bandwidth_Bps;
    }
    oniemu_link_t l;
    CHECK_RC(emu_link_preset("gen6x16", &l), ONI_EINVALARG);
}

/* A transfer of n bytes takes at least the link's latency + n / bandwidth. */
TEST(emu_link_model)
{
    static const char *links[] = {"gen2x4", "gen3x8", "gen4x8", "gen4x16", "gen5x16"};
    double prev_bw = 0;
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
        char spec[128];
        snprintf(spec, sizeof spec, "mode=fast;link=%s;devices=testcore:bytes=4096:rate=2G,testsink", links[i]);
        struct emu_card *c = card_open(spec);
        REQUIRE(c);
        oniemu_link_t l;
        emu_card_link(c, &l);
        CHECK(!strcmp(l.name, links[i]));
        CHECK(l.bandwidth_Bps > prev_bw);
        prev_bw = l.bandwidth_Bps;
        card_start(c);
        size_t n = 4 << 20;
        uint8_t *buf = malloc(n);
        REQUIRE(buf);
        uint64_t model = emu_link_ns(&l, n);
        CHECK(model >= (uint64_t)(l.latency_s * 1e9 + n / l.bandwidth_Bps * 1e9) - 1);
        uint64_t t0 = oni_now_ns();
        CHECK_RC(emu_card_read(c, EMU_STREAM_DATA, buf, n, TMO), (int)n);
        CHECK(oni_now_ns() - t0 >= model);
        t0 = oni_now_ns();
        CHECK_RC(emu_card_read(c, EMU_STREAM_DATA, buf, 4096, TMO), 4096);
        CHECK(oni_now_ns() - t0 >= emu_link_ns(&l, 4096));
        /* the write side crosses the link too: 64 KiB of write frames to the sink */
        uint32_t *wf = (uint32_t *)(void *)buf, words = (65536 - 8) / 4;
        wf[0] = 1; /* the sink: device 1 of hub 0 */
        wf[1] = words;
        t0 = oni_now_ns();
        CHECK_RC(emu_card_write(c, EMU_STREAM_WRITE, buf, 65536, TMO), 65536);
        CHECK(oni_now_ns() - t0 >= emu_link_ns(&l, 65536));
        t0 = oni_now_ns();
        emu_card_link_delay(c, n, 0);
        CHECK(oni_now_ns() - t0 >= model);
        /* a transfer whose copy already took the model's time waits no more:
         * sized so that the model is 2 s, far above any preemption */
        size_t big = (size_t)(2.0 * l.bandwidth_Bps);
        uint64_t model_big = emu_link_ns(&l, big);
        t0 = oni_now_ns();
        emu_card_link_delay(c, big, model_big);
        CHECK(oni_now_ns() - t0 < model_big / 2);
        free(buf);
        emu_card_destroy(c);
    }
    oniemu_link_t u;
    CHECK_RC(emu_link_preset("unlimited", &u), 0);
    CHECK_EQ(emu_link_ns(&u, 1 << 30), 0);
}

/* The link presets are the figures docs/emulator.md gives (bandwidth within
 * 0.5%, latency exact), and emu_link_ns is latency + n / bandwidth rounded
 * to the nearest ns: 3 us + 1328 B at 1.6 GB/s is 3830 ns, not 3829 (the
 * double comes out a hair under). A DMA copy that took all but 1 us of a
 * transfer's model time waits that 1 us, not the whole time again. Guards
 * the presets' 128b/130b factor, emu_link_ns's + 0.5 and
 * emu_card_link_delay's need - spent. */
TEST(emu_link_presets_and_model_exact)
{
    static const struct {
        const char *name;
        double gbps, latency_us;
    } want[] = {{"gen2x4", 1.6, 3}, {"gen3x8", 7.88, 1}, {"gen4x8", 15.75, 1}, {"gen4x16", 31.5, 1}, {"gen5x16", 63.0, 1}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        oniemu_link_t l;
        CHECK_RC(emu_link_preset(want[i].name, &l), 0);
        if (fabs(l.bandwidth_Bps / (want[i].gbps * 1e9) - 1) > 0.005 || l.latency_s != want[i].latency_us * 1e-6)
            UNIT_FAIL("%s: %.4g B/s, %.3g s", want[i].name, l.bandwidth_Bps, l.latency_s);
    }
    oniemu_link_t l;
    CHECK_RC(emu_link_preset("gen2x4", &l), 0);
    CHECK_EQ(emu_link_ns(&l, 4096), 5560);
    CHECK_EQ(emu_link_ns(&l, 65536), 43960);
    CHECK_EQ(emu_link_ns(&l, 1 << 20), 658360);
    CHECK_EQ(emu_link_ns(&l, 1328), 3830);
    CHECK_RC(emu_link_preset("gen9x9", &l), ONI_EINVALARG);
    struct emu_card *c = card_open("mode=fast;link=gen2x4;devices=heartbeat");
    REQUIRE(c);
    size_t n = 1u << 30;
    uint64_t model = emu_link_ns(&l, n), best = UINT64_MAX; /* 671 ms */
    for (int i = 0; i < 3 && best >= model / 2; i++) { /* a loaded machine may stall one try */
        uint64_t t0 = oni_now_ns();
        emu_card_link_delay(c, n, model - 1000);
        uint64_t took = oni_now_ns() - t0;
        best = took < best ? took : best;
    }
    CHECK(best < model / 2);
    emu_card_destroy(c);
}

/* --- the breakout board, its ports and passthrough ------------------------ */

#include "emu/headstage.h"

/* A minimal serdes headstage for these tests (the real ones: the headstage
 * files): an EEPROM at 0x51 (16-bit register addresses, "HSOE..." from
 * byte 0), the serializer at 0x58 (its registers kept), two streams that
 * send frames [u64 hub clock][u16 stream][u16 count] while GPIO32 (0x0E)
 * is 0x19, and a count of power-ons. */
struct tiny {
    uint8_t eeprom[64], ser[256];
    uint16_t count;
    int powered_on;
};

static int tiny_init(void **priv, struct emu_card *c, uint32_t dev_idx, struct emu_args *a, char *err, size_t cap)
{
    (void)c, (void)dev_idx, (void)err, (void)cap;
    struct tiny *t = calloc(1, sizeof *t);
    if (!t)
        return ONI_EBADALLOC;
    memcpy(t->eeprom, "HSOE", 4);
    t->eeprom[4] = 1;
    *priv = t;
    const char *x = emu_arg(a, "x"); /* an argument of its own */
    (void)x;
    return 0;
}

static void tiny_fini(void *priv) { free(priv); }

static int tiny_read(void *priv, uint32_t addr, uint32_t reg, unsigned n, int reg16, uint32_t *v)
{
    struct tiny *t = priv;
    uint8_t *m = addr == 0x51 && reg16 ? t->eeprom : addr == 0x58 && !reg16 ? t->ser : NULL;
    size_t size = m == t->eeprom ? sizeof t->eeprom : sizeof t->ser;
    if (!m || reg + n > size)
        return 0;
    *v = 0;
    for (unsigned i = 0; i < n; i++)
        *v |= (uint32_t)m[reg + i] << (8 * i);
    return 1;
}

static int tiny_write(void *priv, uint32_t addr, uint32_t reg, unsigned n, int reg16, uint32_t v)
{
    struct tiny *t = priv;
    if (addr != 0x58 || reg16 || reg + n > sizeof t->ser)
        return 0;
    for (unsigned i = 0; i < n; i++)
        t->ser[reg + i] = (uint8_t)(v >> (8 * i));
    return 1;
}

static int tiny_streaming(void *priv, int s)
{
    (void)s;
    return ((struct tiny *)priv)->ser[0x0E] == 0x19;
}

static void tiny_fill(void *priv, int s, uint8_t *out, uint64_t hub_clock, uint64_t t)
{
    (void)t;
    struct tiny *p = priv;
    uint16_t w[2] = {(uint16_t)s, p->count++};
    memcpy(out, &hub_clock, 8);
    memcpy(out + 8, w, 4);
}

static void tiny_power(void *priv, int on) { ((struct tiny *)priv)->powered_on += on; }

static const struct emu_hs_ops tiny_hs = {
    .name = "tinyhs", .hs_id = ONIX_HUB_HSNP2E, .lock_min_dv = 30, .lock_max_dv = 55,
    .nstreams = 2, .read_size = 12, .rate_mhz = 1000 * 1000ull, .init = tiny_init, .fini = tiny_fini,
    .i2c_read = tiny_read, .i2c_write = tiny_write, .streaming = tiny_streaming, .fill = tiny_fill,
    .power = tiny_power,
};

static const struct emu_devtype *const hub_hs_devices[] = {&emu_dev_heartbeat, &emu_dev_bno055, NULL};
static const struct emu_hs_ops hub_hs = {
    .name = "tinyhub", .hs_id = ONIX_HUB_HS64, .hub_rev = 2, .hub_fw = 0x0105, .hub_clk_hz = 42000000,
    .lock_min_dv = 50, .lock_max_dv = 70, .hub_devices = hub_hs_devices,
};

/* Raw I2C register address as Bonsai's I2CRegisterContext.cs:26-40 makes it. */
static uint32_t i2c(uint32_t addr, uint32_t reg, unsigned n, int reg16)
{
    return (reg << 7) | (addr & 0x7F) | (n - 1) << 28 | (reg16 ? 0x80000000u : 0);
}

static const oni_device_t *entry(const oni_device_t *t, int n, uint32_t idx)
{
    for (int i = 0; i < n; i++)
        if (t[i].idx == idx)
            return &t[i];
    return NULL;
}

/* `breakout`: the host hub's devices at the indices, ids and versions that
 * onix-source (OnixSource.cpp:337-345) and Bonsai (Configure*.cs: default
 * DeviceAddress, ID, MinimumVersion) address; host firmware major 2; no raw
 * device and no port hub without passthrough and power. */
TEST(emu_breakout_table)
{
    struct emu_card *c = card_open("mode=fast;devices=breakout:loadtest=1");
    REQUIRE(c);
    oni_device_t t[32];
    int n = table_read(c, t, 32);
    static const struct {
        uint32_t idx, id, min_version;
    } want[] = {
        {0, ONIX_PERSTHEARTBEAT, 1}, {1, ONIX_FMCLINKCTRL, 2},   {2, ONIX_FMCLINKCTRL, 2},
        {5, ONIX_FMCCLKOUT1R3, 1},   {6, ONIX_FMCANALOG1R3, 2},  {7, ONIX_BREAKDIG1R3, 2},
        {10, ONIX_MEMUSAGE, 2},      {11, ONIX_LOADTEST, 2},     {12, ONIX_HARPSYNCINPUT, 2},
        {0xFE, ONIX_ONIGPU_HUBMGR, 1},
    };
    CHECK_EQ(n, (int)(sizeof want / sizeof want[0]));
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const oni_device_t *e = entry(t, n, want[i].idx);
        REQUIRE(e);
        CHECK_EQ(e->id, want[i].id);
        CHECK(e->version >= want[i].min_version);
    }
    uint32_t v = 0;
    CHECK_EQ(reg_get(c, 0xFE, ONIX_HUB_HARDWAREID, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, ONIX_HUB_FMCHOST);
    CHECK_EQ(reg_get(c, 0xFE, ONIX_HUB_FIRMWAREVER, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ((v & 0xFF00) >> 8, 2);
    CHECK_EQ(reg_get(c, 0x1FE, ONIX_HUB_HARDWAREID, &v), ONI_SIG_CONFIGRNACK); /* no headstage */
    /* persistent heartbeat: always on, CLK_DIV within CLK_HZ / 10 MHz .. CLK_HZ / MIN_HB_HZ */
    uint32_t hz = 0, min = 0;
    CHECK_EQ(reg_get(c, 0, 2, &hz), ONI_SIG_CONFIGRACK);
    CHECK_EQ(reg_get(c, 0, 3, &min), ONI_SIG_CONFIGRACK);
    CHECK_EQ(reg_get(c, 0, 0, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 1);
    CHECK_EQ(reg_set(c, 0, 0, 0), ONI_SIG_CONFIGWNACK);
    CHECK_EQ(reg_set(c, 0, 1, hz / 100), ONI_SIG_CONFIGWACK); /* Bonsai's default, 100 Hz */
    CHECK_EQ(reg_set(c, 0, 1, hz / min + 1), ONI_SIG_CONFIGWNACK);
    /* memory monitor: TOTAL_MEM at 3 (ConfigureMemoryMonitor.cs:97) */
    CHECK_EQ(reg_get(c, 10, 3, &v), ONI_SIG_CONFIGRACK);
    CHECK(v > 0);
    /* output clock: register 0 is NULL, BASE_FREQ_HZ at 6 */
    CHECK_EQ(reg_get(c, 5, 6, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 250000000);
    CHECK_EQ(reg_set(c, 5, 2, 0), ONI_SIG_CONFIGWNACK); /* HIGH_CYCLES >= 1 */
    emu_card_destroy(c);
    struct emu_card *bad = NULL;
    char err[200];
    CHECK_RC(emu_card_create("devices=breakout,breakout", &bad, err, sizeof err), ONI_EINVALARG);
    CHECK_RC(emu_card_create("devices=breakout,memusage", &bad, err, sizeof err), ONI_EINVALARG);
    CHECK_RC(emu_card_create("devices=breakout,rhd2164:hub=1", &bad, err, sizeof err), ONI_EINVALARG);
    CHECK(strstr(err, "ports") != NULL);
    /* the breakout board's indices are fixed, whatever comes first in the list */
    REQUIRE((c = card_open("mode=fast;devices=stim,breakout")));
    n = table_read(c, t, 32);
    CHECK_EQ(entry(t, n, 0)->id, ONIX_PERSTHEARTBEAT);
    CHECK_EQ(find_id(t, n, ONIX_ONIGPU_STIM), 13);
    emu_card_destroy(c);
}

/* A serdes headstage on port B through passthrough, in the order the
 * plugin and Bonsai go: PASSTHROUGH bit 2 (OnixSource.cpp:196-208), RESET,
 * the raw device at index 9 (ContextTask.cs:582-592: hub + 7), port voltage
 * until LINKSTATE locks (ConfigureHeadstageNeuropixelsV2ePortController.cs),
 * deserializer aliases, EEPROM and serializer by raw I2C, then frames. */
TEST(emu_passthrough_serdes_headstage)
{
    REQUIRE(emu_hs_register(&tiny_hs) == 0);
    REQUIRE(emu_hs_register(&tiny_hs) == 0); /* again: the same */
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=breakout,tinyhs:port=b:x=1");
    REQUIRE(c);
    oni_device_t t[32];
    int n = table_read(c, t, 32);
    CHECK(!entry(t, n, 8) && !entry(t, n, 9));
    uint32_t v = 0;
    CHECK_RC(emu_card_write_config(c, EMU_CONFIG_PASSTHROUGH, 2), ONI_EINVALARG); /* bit 1 is no port */
    CHECK_RC(emu_card_write_config(c, EMU_CONFIG_PASSTHROUGH, 4), 0);
    CHECK_RC(emu_card_read_config(c, EMU_CONFIG_PASSTHROUGH, &v), 0);
    CHECK_EQ(v, 4);
    CHECK_EQ(reg_get(c, 9, 0x8000, &v), ONI_SIG_CONFIGRNACK); /* in effect only from the next reset */
    n = table_read(c, t, 32);
    const oni_device_t *raw = entry(t, n, 9);
    REQUIRE(raw);
    CHECK(!entry(t, n, 8));
    CHECK_EQ(raw->id, ONIX_DS90UB9RAW);
    CHECK_EQ(raw->version, 3);
    CHECK_EQ(raw->read_size, 12);
    /* no power yet: the link is down, the headstage does not answer */
    CHECK_EQ(reg_get(c, 2, 5, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 0);
    CHECK_EQ(reg_get(c, 9, i2c(0x58, 0x0E, 1, 0), &v), ONI_SIG_CONFIGRNACK);
    CHECK_EQ(reg_set(c, 2, 3, 101), ONI_SIG_CONFIGWNACK); /* over 10.0 V */
    CHECK_EQ(reg_set(c, 2, 3, 29), ONI_SIG_CONFIGWACK);  /* under its range */
    CHECK_EQ(reg_get(c, 2, 5, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 0);
    CHECK_EQ(reg_set(c, 2, 3, 33), ONI_SIG_CONFIGWACK);
    CHECK_EQ(reg_get(c, 2, 5, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 3); /* lock and parity */
    CHECK_EQ(reg_get(c, 9, 0x8012, &v), ONI_SIG_CONFIGRACK); /* raw LINKSTATUS */
    CHECK_EQ(v & 1, 1);
    CHECK_EQ(reg_get(c, 1, 5, &v), ONI_SIG_CONFIGRACK); /* port A: nothing plugged in */
    CHECK_EQ(v, 0);
    /* the EEPROM is reachable once an alias maps it (HeadStageEEPROM.cpp:34-37) */
    CHECK_EQ(reg_get(c, 9, i2c(0x51, 0, 1, 1), &v), ONI_SIG_CONFIGRNACK);
    CHECK_EQ(reg_set(c, 9, i2c(0x30, 0x64, 1, 0), 0x51 << 1), ONI_SIG_CONFIGWACK); /* SlaveID7 */
    CHECK_EQ(reg_set(c, 9, i2c(0x30, 0x6C, 1, 0), 0x51 << 1), ONI_SIG_CONFIGWACK); /* SlaveAlias7 */
    CHECK_EQ(reg_get(c, 9, i2c(0x30, 0x64, 1, 0), &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 0x51 << 1);
    CHECK_EQ(reg_get(c, 9, i2c(0x51, 0, 4, 1), &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 0x454F5348); /* "HSOE", first byte lowest */
    CHECK_EQ(reg_get(c, 9, i2c(0x51, 4, 1, 1), &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 1);
    CHECK_EQ(reg_get(c, 9, i2c(0x51, 0, 1, 0), &v), ONI_SIG_CONFIGRNACK); /* the chip's NACK comes back */
    CHECK_EQ(reg_get(c, 9, 0x40000000u | i2c(0x51, 0, 1, 1), &v), ONI_SIG_CONFIGRNACK); /* malformed */
    /* an alias elsewhere reaches the chip at its own address */
    CHECK_EQ(reg_set(c, 9, i2c(0x30, 0x5E, 1, 0), 0x51 << 1), ONI_SIG_CONFIGWACK); /* SlaveID1 */
    CHECK_EQ(reg_set(c, 9, i2c(0x30, 0x66, 1, 0), 0x52 << 1), ONI_SIG_CONFIGWACK); /* SlaveAlias1 */
    CHECK_EQ(reg_get(c, 9, i2c(0x52, 0, 1, 1), &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 'H');
    /* raw device registers of its own */
    CHECK_EQ(reg_set(c, 9, 0x8001, 0x00100009), ONI_SIG_CONFIGWACK); /* READSZ */
    CHECK_EQ(reg_get(c, 9, 0x8001, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 0x00100009);
    CHECK_EQ(reg_set(c, 9, 0x8012, 0), ONI_SIG_CONFIGWNACK);
    CHECK_EQ(reg_set(c, 9, 0x8000, 0), ONI_SIG_CONFIGWACK); /* ENABLE */
    CHECK_EQ(reg_set(c, 9, 0x8000, 1), ONI_SIG_CONFIGWACK);
    /* the serializer (0x58, its default alias) starts the streams */
    CHECK_EQ(reg_set(c, 9, i2c(0x58, 0x0E, 1, 0), 0x19), ONI_SIG_CONFIGWACK);
    CHECK_EQ(reg_get(c, 9, i2c(0x58, 0x0E, 1, 0), &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 0x19);
    CHECK_EQ(reg_get(c, 9, EMU_REG_RATE_HZ, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 2000); /* two streams of 1 kHz */
    card_start(c);
    static struct frame f;
    uint32_t lo0 = 0, lo1 = 0;
    CHECK_EQ(reg_get(c, 9, i2c(0x58, 0x0E, 1, 0), &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(reg_get(c, 9, 0x8013, &lo0), ONI_SIG_CONFIGRACK); /* LASTI2CL */
    for (int k = 0; k < 6; k++) {
        do
            REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, TMO) == 0);
        while (f.dev != 9);
        uint64_t clock;
        uint16_t w[2];
        memcpy(&clock, f.data, 8);
        memcpy(w, f.data + 8, 4);
        CHECK_EQ(f.sz, 12);
        CHECK_EQ(clock, f.time);
        CHECK_EQ(w[0], k % 2); /* streams alternate from stream 0 */
        CHECK_EQ(w[1], k);
    }
    CHECK_EQ(reg_get(c, 9, i2c(0x58, 0x0E, 1, 0), &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(reg_get(c, 9, 0x8013, &lo1), ONI_SIG_CONFIGRACK);
    CHECK(lo1 > lo0); /* the clock of the last transaction moved on */
    /* the voltage goes: lock lost, a port status frame, LINKFLAGS bit 0 */
    CHECK_EQ(reg_set(c, 2, 3, 0), ONI_SIG_CONFIGWACK);
    do
        REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, TMO) == 0);
    while (f.dev != 2);
    CHECK_EQ(f.sz, 10);
    CHECK_EQ(f.data[8] | f.data[9], 0);
    CHECK_EQ(reg_get(c, 2, 7, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 1);
    CHECK_EQ(reg_set(c, 2, 7, 3), ONI_SIG_CONFIGWACK); /* as the plugin resets them */
    CHECK_EQ(reg_get(c, 2, 7, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 0);
    CHECK_EQ(reg_get(c, 9, EMU_REG_RATE_HZ, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 0); /* unpowered: no frames */
    CHECK_EQ(reg_get(c, 9, i2c(0x58, 0x0E, 1, 0), &v), ONI_SIG_CONFIGRNACK);
    /* passthrough off: the raw device leaves the table */
    CHECK_RC(emu_card_write_config(c, EMU_CONFIG_PASSTHROUGH, 0), 0);
    n = table_read(c, t, 32);
    CHECK(!entry(t, n, 9));
    CHECK_EQ(reg_get(c, 9, 0x8001, &v), ONI_SIG_CONFIGRNACK);
    uint32_t w = 1;
    CHECK_RC(card_write_frame(c, EMU_STREAM_WRITE, 9, &w, 1), ONI_EBADFRAME);
    emu_card_destroy(c);
    struct emu_card *bad = NULL;
    char err[200];
    CHECK_RC(emu_card_create("devices=tinyhs", &bad, err, sizeof err), ONI_EINVALARG); /* no breakout */
    CHECK(strstr(err, "breakout") != NULL);
    CHECK_RC(emu_card_create("devices=breakout,tinyhs:port=c", &bad, err, sizeof err), ONI_EINVALARG);
    CHECK_RC(emu_card_create("devices=breakout,tinyhs,tinyhs:port=a", &bad, err, sizeof err), ONI_EINVALARG);
    CHECK_RC(emu_card_create("devices=breakout,tinyhs:y=1", &bad, err, sizeof err), ONI_EINVALARG);
    CHECK(strstr(err, "'y'") != NULL);
    REQUIRE((c = card_open("devices=breakout,tinyhs,tinyhs"))); /* ports a and b */
    emu_card_destroy(c);
}

/* A hub headstage: its hub (1 for port A) and devices are in the table
 * from the first RESET after its link locks, in standard mode only. */
TEST(emu_hub_headstage_behind_its_port)
{
    REQUIRE(emu_hs_register(&hub_hs) == 0);
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=breakout,tinyhub");
    REQUIRE(c);
    oni_device_t t[32];
    int n = table_read(c, t, 32);
    CHECK(!entry(t, n, 0x100) && !entry(t, n, 0x1FE));
    uint32_t v = 0;
    CHECK_EQ(reg_set(c, 1, 3, 55), ONI_SIG_CONFIGWACK);
    CHECK_EQ(reg_get(c, 0x100, ONIX_HEARTBEAT_CLK_HZ, &v), ONI_SIG_CONFIGRNACK); /* not until a reset */
    n = table_read(c, t, 32);
    REQUIRE(entry(t, n, 0x100) && entry(t, n, 0x101) && entry(t, n, 0x1FE));
    CHECK_EQ(entry(t, n, 0x100)->id, ONIX_HEARTBEAT);
    CHECK_EQ(entry(t, n, 0x101)->id, ONIX_BNO055);
    CHECK_EQ(reg_get(c, 0x1FE, ONIX_HUB_HARDWAREID, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, ONIX_HUB_HS64);
    CHECK_EQ(reg_get(c, 0x1FE, ONIX_HUB_FIRMWAREVER, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 0x0105);
    CHECK_EQ(reg_get(c, 0x100, ONIX_HEARTBEAT_CLK_HZ, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 42000000);
    CHECK_RC(emu_card_write_config(c, EMU_CONFIG_PASSTHROUGH, 1), 0);
    n = table_read(c, t, 32);
    CHECK(!entry(t, n, 0x100) && entry(t, n, 8));
    emu_card_destroy(c);
}

/* gpustream=0: a card of today's firmware, one read stream: route=1 is
 * refused by name, ROUTE=1 NACKed, and the card says so. */
TEST(emu_card_without_gpu_stream)
{
    struct emu_card *bad = NULL;
    char err[200];
    CHECK_RC(emu_card_create("gpustream=0;devices=testcore:route=1", &bad, err, sizeof err), ONI_EINVALARG);
    CHECK(strstr(err, "gpustream=0") != NULL);
    CHECK_RC(emu_card_create("gpustream=2", &bad, err, sizeof err), ONI_EINVALARG);
    struct emu_card *c = card_open("mode=fast;gpustream=0;devices=testcore");
    REQUIRE(c);
    CHECK_EQ(emu_card_features(c), EMU_FEAT_FAST);
    oni_device_t t[8];
    int n = table_read(c, t, 8);
    uint32_t core = find_id(t, n, ONIX_ONIGPU_TESTCORE);
    CHECK_EQ(reg_set(c, core, EMU_REG_ROUTE, 1), ONI_SIG_CONFIGWNACK);
    CHECK_EQ(reg_set(c, core, EMU_REG_ROUTE, 0), ONI_SIG_CONFIGWACK);
    emu_card_destroy(c);
    REQUIRE((c = card_open("devices=testcore:route=1")));
    CHECK_EQ(emu_card_features(c), EMU_FEAT_GPUSTREAM);
    emu_card_destroy(c);
}

/* batch=: a generator that would sleep 10 s past due frames still serves a
 * waiting reader when its bytes are due (the reader wakes it: else the first
 * read would time out after 2 s), every frame stamped with its own due time,
 * in order: a 1 kHz core, frame k at k * 250000 ticks after the first. */
TEST(emu_batched_generator_serves_a_reader)
{
    /* 64 B frames at 64000 B/s: 1000 frames/s */
    struct emu_card *c = card_open("mode=realtime;link=unlimited;batch=10000000;devices=testcore:bytes=64:rate=64000");
    REQUIRE(c);
    oni_device_t t[4];
    uint32_t core = find_id(t, table_read(c, t, 4), ONIX_ONIGPU_TESTCORE);
    card_start(c);
    static struct frame f;
    uint64_t first = 0;
    for (int k = 0; k < 20;) {
        REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, 2000) == 0);
        if (f.dev != core)
            continue;
        if (k == 0)
            first = f.time;
        CHECK_EQ(f.time - first, (uint64_t)k * 250000);
        k++;
    }
    emu_card_destroy(c);
}
