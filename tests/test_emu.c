/* test_emu.c - the emulated ONIX host card through emu.h (and its internal
 * counters in card.h): spec, device table, registers, routing, rates and
 * timestamps in emulated time, test-core continuity, overflow accounting,
 * write frames and the stimulator, ground truth, the link model. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>
#include "emu/neural.h"
#include "test_emu_util.h"
#include "unit.h"

static void start(struct emu_card *c) { CHECK_RC(emu_card_write_config(c, ONI_CONFIG_RUNNING, 1), 0); }

TEST(emu_spec_errors)
{
    static const char *bad[] = {
        "nokey", "mode=slow", "wake=nap", "link=gen9x1", "ddr=1", "ddr=12Q", "seed=x", "color=red",
        "devices=nosuch", "devices=np2:nosucharg=1", "devices=testcore:bytes=12", "devices=heartbeat:hz=0",
        "devices=np2:route=2", "devices=memusage,memusage", "devices=testcore:rate=0", "devices=np2:",
        "devices=np2:units=9999", "devices=testsink:bytes=6",
        "devices=testcore:rate=1", /* under a frame in 1000 s: refused after init allocated (no leak: ASan) */
        "devices=testcore:bytes=8:rate=147573952589676416", /* x1000/8 wrapped past 2^64 to a small rate */
        "seed=18446744073709551616", "seed=0x10",
        "devices=:np2", /* strtok_r skipped the empty name: the card got an np2 */
        "devices=np2,,stim", "devices=,np2", "devices=np2,", "devices=", /* so did strtok_r at ',' */
        "devices=heartbeat:hz=0.6", "devices=np2:units=2.5", /* no whole number: were rounded to 1 and 3 */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct emu_card *c = (struct emu_card *)1;
        char err[200] = "";
        CHECK_RC(emu_card_create(bad[i], &c, err, sizeof err), ONI_EINVALARG);
        CHECK(c == NULL);
        if (!err[0])
            UNIT_FAIL("no message for spec \"%s\"", bad[i]);
    }
    /* a repeated argument is named as such (the message was "np2 has no argument 'units'") */
    char err[200] = "";
    struct emu_card *dup = NULL;
    CHECK_RC(emu_card_create("devices=np2:units=1:units=2", &dup, err, sizeof err), ONI_EINVALARG);
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

/* A read that whole frames can never fill is refused at once, not waited
 * for while every frame is dropped: 1016-byte frames fill a 4096-byte FIFO
 * to 3048 bytes at least and 4064 at most, so 3084 bytes (cap minus the
 * largest frame, plus one word) is the most a read may ask for. */
TEST(emu_read_max_is_what_whole_frames_fill)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;ddr=8K;devices=testcore:bytes=1000:rate=1M");
    REQUIRE(c);
    CHECK_EQ(emu_card_read_max(c, EMU_STREAM_DATA), 4096 - 1016 + 4);
    CHECK_EQ(emu_card_read_max(c, EMU_STREAM_GPU), 4096); /* nothing routed there */
    CHECK_EQ(emu_card_read_max(c, EMU_STREAM_SIGNAL), 0);
    start(c);
    static uint8_t buf[4096];
    CHECK_RC(emu_card_read(c, EMU_STREAM_DATA, buf, 4096, TMO), ONI_EINVALARG);
    CHECK_RC(emu_card_read(c, EMU_STREAM_DATA, buf, 3085, TMO), ONI_EINVALARG);
    CHECK_RC(emu_card_read(c, EMU_STREAM_DATA, buf, 3084, TMO), 3084);
    emu_card_destroy(c);
}

TEST(emu_device_table_and_hubs)
{
    struct emu_card *c = card_open("mode=fast;devices=heartbeat,testcore,stim,np2,bno055,rhd2164,np1");
    REQUIRE(c);
    oni_device_t t[64];
    int n = table_read(c, t, 64);
    REQUIRE(n > 0);
    CHECK_EQ(n, 8 + 4); /* 7 devices + memusage, hubs 0..3 */
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
        CHECK_EQ(v, (t[i].idx >> 8) == 0 ? ONIX_HUB_FMCHOST : (t[i].idx >> 8) == 1 ? ONIX_HUB_HSNP2E
                    : (t[i].idx >> 8) == 2 ? ONIX_HUB_HS64 : ONIX_HUB_HSNP1ET);
        CHECK_EQ(reg_set(c, t[i].idx, ONIX_HUB_FIRMWAREVER, 7), ONI_SIG_CONFIGWNACK);
        CHECK_EQ(reg_set(c, t[i].idx, ONIX_HUB_DELAYNS, 777), ONI_SIG_CONFIGWACK);
        CHECK_EQ(reg_get(c, t[i].idx, ONIX_HUB_DELAYNS, &v), ONI_SIG_CONFIGRACK);
        CHECK_EQ(v, 777);
    }
    CHECK_EQ(hubmgr, 4);
    /* host devices on hub 0, np2 opens hub 1, bno055 joins it, rhd2164 hub 2, np1 hub 3 */
    CHECK_EQ(find_id(t, n, ONIX_HEARTBEAT) >> 8, 0);
    CHECK_EQ(find_id(t, n, ONIX_MEMUSAGE) >> 8, 0);
    CHECK_EQ(find_id(t, n, ONIX_BREAKDIG1R3), UINT32_MAX); /* only where asked for */
    CHECK_EQ(find_id(t, n, ONIX_ONIGPU_NEUROPIX2), 0x100);
    CHECK_EQ(find_id(t, n, ONIX_BNO055), 0x101);
    CHECK_EQ(find_id(t, n, ONIX_RHD2164), 0x200);
    CHECK_EQ(find_id(t, n, ONIX_NEUROPIX1R0), 0x300);
    for (int i = 0; i < n; i++) {
        if (t[i].id == ONIX_ONIGPU_NEUROPIX2)
            CHECK_EQ(t[i].read_size, 8 + 384 * 2);
        if (t[i].id == ONIX_ONIGPU_STIM) {
            CHECK_EQ(t[i].read_size, 16);
            CHECK_EQ(t[i].write_size, 4);
        }
    }
    emu_card_destroy(c);
}

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

/* ROUTE = 1 moves a device's frames from the default stream's FIFO to the GPU stream's. */
TEST(emu_route_to_gpu_stream)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=heartbeat:hz=1000,testcore:bytes=256:rate=2560000");
    REQUIRE(c);
    oni_device_t t[8];
    int n = table_read(c, t, 8);
    uint32_t core = find_id(t, n, ONIX_ONIGPU_TESTCORE);
    start(c);
    struct frame f;
    int seen_core = 0;
    for (int i = 0; i < 100; i++) {
        REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, TMO) == 0);
        seen_core += f.dev == core;
    }
    CHECK(seen_core > 50);
    CHECK_EQ(reg_set(c, core, EMU_REG_ROUTE, 1), ONI_SIG_CONFIGWACK);
    uint32_t v = 0;
    CHECK_EQ(reg_get(c, core, EMU_REG_ROUTE, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 1);
    /* drain what was generated before the switch, then only the heartbeat is left here */
    onigpu_stream_stats_t st;
    emu_card_stats(c, &st);
    uint8_t *junk = malloc(st.fifo_bytes[0] + 1);
    REQUIRE(junk);
    if (st.fifo_bytes[0])
        CHECK_EQ(emu_card_read(c, EMU_STREAM_DATA, junk, (size_t)st.fifo_bytes[0], TMO), (int)st.fifo_bytes[0]);
    free(junk);
    int other = 0;
    for (int i = 0; i < 50; i++) {
        REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, TMO) == 0);
        other += f.dev == core;
    }
    CHECK_EQ(other, 0);
    /* the GPU stream's FIFO holds the test core's frames, read through the DMA engine's interface */
    struct emu_span sp[2];
    size_t frame = 16 + 256;
    REQUIRE(emu_card_fifo_peek(c, EMU_STREAM_GPU, frame * 4, sp, TMO) == 0);
    CHECK_EQ(sp[0].n + sp[1].n, frame * 4);
    uint32_t dev;
    memcpy(&dev, sp[0].p + 8, 4);
    CHECK_EQ(dev, core);
    CHECK_RC(emu_card_fifo_consume(c, EMU_STREAM_GPU, frame * 4), 0);
    CHECK_RC(emu_card_fifo_consume(c, EMU_STREAM_GPU, 1ull << 40), ONI_EINVALARG);
    CHECK_RC(emu_card_fifo_peek(c, EMU_STREAM_SIGNAL, 16, sp, TMO), ONI_EINVALARG);
    REQUIRE(frame_read(c, EMU_STREAM_GPU, &f, TMO) == 0);
    CHECK_EQ(f.dev, core);
    emu_card_destroy(c);
}

struct rate_case {
    uint32_t id;
    double hz;
};

/* Every periodic device emits at its nominal rate (within 1%) over 1 s of
 * emulated time; timestamps are strictly increasing per device, one period
 * apart (+-1 tick), and the merged stream is in time order. */
TEST(emu_rates_and_timestamps_fast)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=np2,np1,rhd2164,bno055,heartbeat:hz=1000,"
                                   "testcore:bytes=4096:rate=100M,loadtest:hz=5000,memusage:hz=250,breakout:hz=50");
    REQUIRE(c);
    static const struct rate_case want[] = {
        {ONIX_ONIGPU_NEUROPIX2, 30000}, {ONIX_NEUROPIX1R0, 2500}, {ONIX_RHD2164, 30000},
        {ONIX_BNO055, 100},             {ONIX_HEARTBEAT, 1000},  {ONIX_ONIGPU_TESTCORE, 100e6 / 4096},
        {ONIX_LOADTEST, 5000},          {ONIX_MEMUSAGE, 250},    {ONIX_BREAKDIG1R3, 100},
    };
    enum { NW = sizeof want / sizeof want[0] };
    oni_device_t t[32];
    int n = table_read(c, t, 32);
    REQUIRE(n > 0);
    uint32_t idx[NW];
    uint64_t count[NW] = {0}, last[NW] = {0};
    int bad_step[NW] = {0};
    for (int i = 0; i < NW; i++)
        idx[i] = find_id(t, n, want[i].id);
    start(c);
    const uint64_t T = 250000000ull; /* 1 s */
    uint64_t prev = 0;
    int disorder = 0;
    static struct frame f;
    for (;;) {
        REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, TMO) == 0);
        if (f.time < prev)
            disorder++;
        prev = f.time;
        if (f.time >= T)
            break;
        for (int i = 0; i < NW; i++) {
            if (f.dev != idx[i])
                continue;
            if (count[i]) {
                double step = (double)(f.time - last[i]), per = 250e6 / want[i].hz;
                if (f.time <= last[i] || fabs(step - per) > 1.0)
                    bad_step[i]++;
            }
            last[i] = f.time;
            count[i]++;
        }
    }
    CHECK_EQ(disorder, 0);
    for (int i = 0; i < NW; i++) {
        double err = fabs((double)count[i] - want[i].hz) / want[i].hz;
        if (err > 0.01)
            UNIT_FAIL("device id %u: %llu frames in 1 s, want %.0f", want[i].id, (unsigned long long)count[i], want[i].hz);
        CHECK_EQ(bad_step[i], 0);
    }
    emu_card_destroy(c);
}

/* Check the test core's counter across reads that cut frames anywhere. */
struct cont {
    uint32_t dev; /* the test core; other devices' frames are skipped */
    uint8_t hdr[16], word[8]; /* a read may cut a header or a word anywhere */
    size_t hdr_have, word_have, left, pad;
    uint64_t next, words, errors, frames;
    int started;
};

static void cont_feed(struct cont *k, const uint8_t *p, size_t n)
{
    while (n) {
        if (!k->left && !k->pad) {
            size_t m = 16 - k->hdr_have < n ? 16 - k->hdr_have : n;
            memcpy(k->hdr + k->hdr_have, p, m);
            k->hdr_have += m, p += m, n -= m;
            if (k->hdr_have == 16) {
                uint32_t sz, dev;
                memcpy(&dev, k->hdr + 8, 4);
                memcpy(&sz, k->hdr + 12, 4);
                k->hdr_have = 0;
                if (dev != k->dev) {
                    k->left = 0, k->pad = oni_pad4(sz);
                    continue;
                }
                k->left = sz, k->pad = oni_pad4(sz) - sz, k->frames++;
            }
            continue;
        }
        if (k->left) { /* payload: whole 8-byte words */
            if (k->left % 8) {
                k->errors++;
                return;
            }
            size_t m = 8 - k->word_have < n ? 8 - k->word_have : n;
            memcpy(k->word + k->word_have, p, m);
            k->word_have += m, p += m, n -= m;
            if (k->word_have < 8)
                continue;
            uint64_t w;
            memcpy(&w, k->word, 8);
            if (k->started && w != k->next && k->errors++ < 3)
                fprintf(stderr, "  counter %llu, want %llu (word %llu)\n", (unsigned long long)w,
                        (unsigned long long)k->next, (unsigned long long)k->words);
            k->started = 1, k->next = w + 1, k->words++;
            k->word_have = 0, k->left -= 8;
            continue;
        }
        size_t m = k->pad < n ? k->pad : n;
        k->pad -= m, p += m, n -= m;
    }
}

TEST(emu_testcore_continuity_full_speed)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=testcore:bytes=4096:rate=2G");
    REQUIRE(c);
    size_t blk = 1 << 20;
    uint8_t *buf = malloc(blk);
    REQUIRE(buf);
    struct cont k = {0};
    oni_device_t t[4];
    int n = table_read(c, t, 4);
    k.dev = find_id(t, n, ONIX_ONIGPU_TESTCORE);
    start(c);
    /* 64 MiB in reads of 1 MiB minus 8 bytes, so frames straddle reads at every offset */
    for (int i = 0; i < 64; i++) {
        int rc = emu_card_read(c, EMU_STREAM_DATA, buf, blk - 8, TMO);
        REQUIRE(rc == (int)(blk - 8));
        cont_feed(&k, buf, blk - 8);
    }
    CHECK_EQ(k.errors, 0);
    CHECK(k.words > (60ull << 20) / 8);
    onigpu_stream_stats_t st;
    emu_card_stats(c, &st);
    CHECK_EQ(st.dropped_frames[0], 0);
    free(buf);
    emu_card_destroy(c);
}

/* A reader that keeps up costs the FIFO no copies or page calls per read:
 * the ring restarts at its start about once per 32 MiB read, moving at most
 * 1/32 of what was read, and gives no pages back (nothing piled up). */
TEST(emu_fifo_steady_state_cheap)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=testcore:bytes=4096:rate=2G");
    REQUIRE(c);
    size_t blk = 64 << 10, reads = (256u << 20) / blk;
    uint8_t *buf = malloc(blk);
    REQUIRE(buf);
    start(c);
    for (size_t i = 0; i < reads; i++)
        REQUIRE(emu_card_read(c, EMU_STREAM_DATA, buf, blk, TMO) == (int)blk);
    const struct emu_fifo *f = &c->fifo[0];
    fprintf(stderr, "  %zu reads of 64 KiB: %llu ring restarts moving %llu bytes, %llu page give-backs\n", reads,
            (unsigned long long)f->recentres, (unsigned long long)f->moved, (unsigned long long)f->trims);
    CHECK(f->recentres >= 256 / 32 - 1 && f->recentres <= 256 / 32 + 1);
    CHECK(f->moved <= (256u << 20) / 32);
    CHECK_EQ(f->trims, 0);
    free(buf);
    emu_card_destroy(c);
}

/* A reader that stalls: the FIFO fills, whole frames are dropped and
 * counted per device and stream, delivered + dropped = generated, the test
 * core's counter skips exactly the dropped words, and acquisition goes on
 * once reading resumes. */
TEST(emu_overflow_counted_exactly)
{
    struct emu_card *c = card_open("mode=realtime;link=unlimited;ddr=64K;devices=testcore:bytes=1024:rate=10M,memusage:hz=1000");
    REQUIRE(c);
    oni_device_t t[8];
    int n = table_read(c, t, 8);
    uint32_t core = find_id(t, n, ONIX_ONIGPU_TESTCORE), mu = find_id(t, n, ONIX_MEMUSAGE);
    start(c);
    /* the stall: ~10000 frames/s due, 32 KiB of FIFO; wait for 600 drops (the
     * machine may be loaded, so by count, with a deadline, not by a sleep) */
    onigpu_stream_stats_t st;
    uint64_t stall_end = oni_now_ns() + 5000000000ull;
    do {
        usleep(10000);
        emu_card_stats(c, &st);
    } while (st.dropped_frames[0] < 600 && oni_now_ns() < stall_end);
    CHECK(st.dropped_frames[0] >= 600);
    CHECK(st.fifo_bytes[0] > st.fifo_capacity[0] - 2048);
    uint64_t delivered_core = 0, delivered_mu = 0, gap_words = 0, next = 0, max_fill = 0;
    int started = 0;
    static struct frame f;
    uint64_t t_resume = 0;
    /* read for a while after the stall: acquisition carries on */
    uint64_t until = oni_now_ns() + 100000000ull;
    while (oni_now_ns() < until) {
        REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, TMO) == 0);
        if (f.dev == core) {
            uint64_t w;
            memcpy(&w, f.data, 8);
            if (started && w != next)
                gap_words += w - next;
            started = 1, next = w + 1024 / 8;
            delivered_core++;
            t_resume = f.time;
        } else if (f.dev == mu) {
            uint16_t w[6]; /* [u64 hub clock][words used, high half first] */
            memcpy(w, f.data, sizeof w);
            uint64_t fill = 4 * ((uint64_t)w[4] << 16 | w[5]);
            if (fill > max_fill)
                max_fill = fill;
            delivered_mu++;
        }
    }
    /* the devices stop, not acquisition: a stop would empty the FIFO, and
     * what a slow reader had not read yet would be neither read nor dropped */
    CHECK_EQ(reg_set(c, core, EMU_REG_ENABLE, 0), ONI_SIG_CONFIGWACK);
    CHECK_EQ(reg_set(c, mu, EMU_REG_ENABLE, 0), ONI_SIG_CONFIGWACK);
    while (frame_read(c, EMU_STREAM_DATA, &f, 100) == 0) { /* drain */
        if (f.dev == core) {
            uint64_t w;
            memcpy(&w, f.data, 8);
            if (w != next)
                gap_words += w - next;
            next = w + 1024 / 8;
            delivered_core++;
        } else if (f.dev == mu) {
            delivered_mu++;
        }
    }
    uint64_t gen_core, drop_core, gen_mu, drop_mu;
    REQUIRE(emu_card_dev_counts(c, core, &gen_core, &drop_core, NULL) == 0);
    REQUIRE(emu_card_dev_counts(c, mu, &gen_mu, &drop_mu, NULL) == 0);
    CHECK(drop_core > 500);
    CHECK_EQ(delivered_core + drop_core, gen_core);
    CHECK_EQ(delivered_mu + drop_mu, gen_mu);
    /* the counter skipped exactly the dropped frames' words, including any
     * dropped after the last delivered frame (up to the core's next value) */
    uint32_t lo = 0, hi = 0;
    CHECK_EQ(reg_get(c, core, EMU_REG_DEVICE + 2, &lo), ONI_SIG_CONFIGRACK);
    CHECK_EQ(reg_get(c, core, EMU_REG_DEVICE + 3, &hi), ONI_SIG_CONFIGRACK);
    uint64_t core_next = (uint64_t)hi << 32 | lo;
    CHECK_EQ(core_next, gen_core * (1024 / 8));
    CHECK_EQ(gap_words + (core_next - next), drop_core * (1024 / 8));
    emu_card_stats(c, &st);
    CHECK_EQ(st.dropped_frames[0], drop_core + drop_mu);
    CHECK_EQ(st.dropped_bytes[0], drop_core * (16 + 1024) + drop_mu * (16 + 12));
    CHECK_EQ(st.fifo_bytes[0], 0);
    CHECK(max_fill > 16384); /* MEMUSAGE saw the FIFO full */
    uint32_t v = 0;
    CHECK_EQ(reg_get(c, core, EMU_REG_DROPPED_LO, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, (uint32_t)drop_core);
    CHECK_EQ(reg_get(c, mu, EMU_REG_DEVICE + 3, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, (uint32_t)(drop_core + drop_mu));
    CHECK(t_resume > 25000000ull); /* frames from well after the stall arrived */
    /* a read larger than the FIFO can ever hold is refused, not waited for */
    static uint8_t big[65536];
    CHECK_RC(emu_card_read(c, EMU_STREAM_DATA, big, sizeof big, 10), ONI_EINVALARG);
    emu_card_destroy(c);
}

/* Each stream has its own FIFO and its own overflow account: a stalled GPU
 * stream drops (counted on its device and stream) while the default stream,
 * read on time, drops nothing; the GPU stream carries on once read again. */
TEST(emu_gpu_stream_overflow_is_its_own)
{
    struct emu_card *c =
        card_open("mode=realtime;link=unlimited;ddr=64K;devices=testcore:bytes=1024:rate=10M:route=1,heartbeat:hz=1000");
    REQUIRE(c);
    oni_device_t t[8];
    int n = table_read(c, t, 8);
    uint32_t core = find_id(t, n, ONIX_ONIGPU_TESTCORE), hb = find_id(t, n, ONIX_HEARTBEAT);
    start(c);
    onigpu_stream_stats_t st;
    static struct frame f;
    uint64_t beats = 0, deadline = oni_now_ns() + 5000000000ull;
    do { /* the GPU stream is not read; the default stream is */
        for (int k = 0; k < 16 && frame_read(c, EMU_STREAM_DATA, &f, 5) == 0; k++)
            beats += f.dev == hb;
        emu_card_stats(c, &st);
    } while (st.dropped_frames[1] < 300 && oni_now_ns() < deadline);
    CHECK(st.dropped_frames[1] >= 300);
    CHECK_EQ(st.dropped_frames[0], 0);
    CHECK(beats > 0);
    /* read the GPU stream: what was kept, then new frames; the counter skips
     * exactly the dropped frames' words */
    uint64_t delivered = 0, gap = 0, next = 0, until = oni_now_ns() + 50000000ull;
    int started = 0;
    while (oni_now_ns() < until) {
        REQUIRE(frame_read(c, EMU_STREAM_GPU, &f, TMO) == 0);
        CHECK_EQ(f.dev, core);
        uint64_t w;
        memcpy(&w, f.data, 8);
        if (started && w != next)
            gap += w - next;
        started = 1, next = w + 1024 / 8;
        delivered++;
    }
    CHECK_RC(emu_card_write_config(c, ONI_CONFIG_RUNNING, 0), 0);
    uint64_t gen, dropped;
    REQUIRE(emu_card_dev_counts(c, core, &gen, &dropped, NULL) == 0);
    emu_card_stats(c, &st);
    CHECK_EQ(st.dropped_frames[1], dropped);
    CHECK_EQ(st.dropped_frames[0], 0);
    CHECK(gap <= dropped * (1024 / 8)); /* frames dropped after the last one read are not in the gap */
    CHECK(gap > 0);
    CHECK(delivered > 32); /* more than the 32 KiB the FIFO kept: acquisition went on */
    emu_card_destroy(c);
}

/* Bytes the DMA engine holds (peeked, a copy may still be reading them) are
 * not written over when a RESET and a new start empty the FIFO while they are
 * held: the card fills the rest of the ring, drops what does not fit, and the
 * holder's consume afterwards drops the old bytes and starts the new data at
 * a frame. */
TEST(emu_flush_keeps_held_bytes)
{
    struct emu_card *c = card_open("mode=realtime;link=unlimited;ddr=64K;devices=testcore:bytes=1024:rate=10M:route=1");
    REQUIRE(c);
    start(c);
    struct emu_span sp[2];
    size_t n = 4 * (16 + 1024);
    REQUIRE(emu_card_fifo_peek(c, EMU_STREAM_GPU, n, sp, TMO) == 0);
    uint8_t *snap = malloc(n);
    REQUIRE(snap);
    memcpy(snap, sp[0].p, sp[0].n);
    memcpy(snap + sp[0].n, sp[1].p, sp[1].n);
    CHECK_RC(emu_card_write_config(c, ONI_CONFIG_RESET, 1), 0);
    oni_device_t t[4];
    uint32_t core = find_id(t, table_read(c, t, 4), ONIX_ONIGPU_TESTCORE), lo = 0, hi = 0;
    CHECK_EQ(reg_get(c, core, EMU_REG_DEVICE + 2, &lo), ONI_SIG_CONFIGRACK); /* the next counter value */
    CHECK_EQ(reg_get(c, core, EMU_REG_DEVICE + 3, &hi), ONI_SIG_CONFIGRACK);
    start(c);
    onigpu_stream_stats_t st;
    uint64_t deadline = oni_now_ns() + 5000000000ull;
    do { /* the new acquisition fills the GPU FIFO (32 KiB) until it drops */
        usleep(2000);
        emu_card_stats(c, &st);
    } while (st.dropped_frames[1] < 50 && oni_now_ns() < deadline);
    CHECK(st.dropped_frames[1] >= 50);
    CHECK_EQ(memcmp(sp[0].p, snap, sp[0].n), 0);
    CHECK_EQ(memcmp(sp[1].p, snap + sp[0].n, sp[1].n), 0);
    CHECK_RC(emu_card_fifo_consume(c, EMU_STREAM_GPU, n), 0);
    static struct frame f;
    REQUIRE(frame_read(c, EMU_STREAM_GPU, &f, TMO) == 0);
    uint64_t w;
    memcpy(&w, f.data, 8);
    CHECK_EQ(w, (uint64_t)hi << 32 | lo); /* the first frame of the new acquisition */
    CHECK_EQ(f.dev, core);
    free(snap);
    emu_card_destroy(c);
}

/* A write in real time first has the card generate every frame due before
 * it; a card that can never catch up (a test core asked for far more than
 * the machine makes) answers ONI_ETIMEOUT within the write's timeout instead
 * of blocking without end, and delivers nothing. */
TEST(emu_write_times_out_when_the_card_is_behind)
{
    struct emu_card *c = card_open("mode=realtime;link=unlimited;ddr=64K;devices=stim,testcore:bytes=1M:rate=100T");
    REQUIRE(c);
    oni_device_t t[4];
    uint32_t stim = find_id(t, table_read(c, t, 4), ONIX_ONIGPU_STIM);
    start(c);
    usleep(100000); /* 10^13 bytes/s due: hopelessly behind */
    uint32_t fr[3] = {stim, 1, 42};
    uint64_t t0 = oni_now_ns();
    CHECK_RC(emu_card_write(c, EMU_STREAM_WRITE, fr, sizeof fr, 100), ONI_ETIMEOUT);
    double ms = (oni_now_ns() - t0) / 1e6;
    CHECK(ms >= 100 && ms < 2000);
    uint32_t v = 1;
    CHECK_EQ(reg_get(c, stim, EMU_REG_WFRAMES, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 0);
    emu_card_destroy(c);
}

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

/* The frames of a write are checked again as they are delivered: a caller
 * that changes its buffer meanwhile (its own race) gets no more delivered,
 * and the card reads nothing past the buffer (a frame turned into 0 words at
 * its very end once made a device read 4 bytes past it: ASan). */
struct flipper {
    uint32_t *w;
    atomic_int stop;
};

static void *flip_words(void *arg)
{
    struct flipper *f = arg;
    while (!atomic_load(&f->stop)) {
        __atomic_store_n(&f->w[1], 2, __ATOMIC_RELAXED); /* the first frame: 1 word, then 2 */
        __atomic_store_n(&f->w[1], 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

TEST(emu_write_frames_changed_meanwhile_stay_in_the_buffer)
{
#ifdef UNDER_TSAN
    SKIP("the test races on purpose with the card's reads of the caller's buffer");
#endif
    struct emu_card *c = card_open("mode=fast;link=gen2x4;devices=stim,breakout");
    REQUIRE(c);
    oni_device_t t[4];
    int n = table_read(c, t, 4);
    uint32_t stim = find_id(t, n, ONIX_ONIGPU_STIM);
    uint32_t *w = malloc(24); /* [stim][1][5] [stim][1][0]: the second frame ends the buffer */
    REQUIRE(w);
    uint32_t init[6] = {stim, 1, 5, stim, 1, 0};
    memcpy(w, init, 24);
    struct flipper f = {w, 0};
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, flip_words, &f) == 0);
    /* 20000 writes take 0.1-0.5 s: on a loaded machine the flipper can be
     * off its CPU with the frame torn for all of them, so write on (up to
     * 10 s) until one passes the check. */
    int ok = 0;
    uint64_t end = oni_now_ns() + 10000000000u;
    for (int i = 0; i < 20000 || (!ok && oni_now_ns() < end); i++)
        ok += emu_card_write(c, EMU_STREAM_WRITE, w, 24, TMO) == 24;
    atomic_store(&f.stop, 1);
    pthread_join(th, NULL);
    CHECK(ok > 0);
    CHECK_EQ(emu_card_write(c, EMU_STREAM_WRITE, w, 24, TMO), 24); /* left whole: delivered */
    free(w);
    emu_card_destroy(c);
}

/* RESET stops acquisition, and like RUNNING = 0 flushes the truth file. */
TEST(emu_reset_flushes_the_truth_file)
{
    char path[] = "/tmp/onigpu-emu-truth-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=np2:units=64");
    REQUIRE(c);
    REQUIRE(emu_card_truth_keep(c, 1 << 20) == 0);
    REQUIRE(emu_card_set_truth_file(c, path) == 0);
    start(c);
    static uint8_t buf[1 << 20];
    for (int i = 0; i < 8; i++)
        REQUIRE(emu_card_read(c, EMU_STREAM_DATA, buf, sizeof buf, TMO) == (int)sizeof buf);
    CHECK_RC(emu_card_write_config(c, ONI_CONFIG_RESET, 1), 0);
    size_t spikes = emu_card_truth_get(c, NULL, 0), lines = 0;
    FILE *fp = fopen(path, "r");
    REQUIRE(fp);
    for (int ch; (ch = fgetc(fp)) != EOF;)
        lines += ch == '\n';
    fclose(fp);
    CHECK(spikes > 0);
    CHECK_EQ(lines, spikes + 1); /* a header line */
    emu_card_destroy(c);
    unlink(path);
}

static int write_frame(struct emu_card *c, enum emu_stream s, uint32_t dev, const uint32_t *w, uint32_t words)
{
    uint8_t buf[256];
    memcpy(buf, &dev, 4);
    memcpy(buf + 4, &words, 4);
    memcpy(buf + 8, w, words * 4);
    return emu_card_write(c, s, buf, 8 + words * 4, TMO);
}

/* Malformed write frames the card rejected so far (its statistics). */
static uint64_t bad_wframes(struct emu_card *c)
{
    onigpu_stream_stats_t st;
    emu_card_stats(c, &st);
    return st.bad_wframes;
}

TEST(emu_write_frames_reach_stimulator)
{
    struct emu_card *c = card_open("mode=realtime;devices=stim,testsink:bytes=8,heartbeat,breakout");
    REQUIRE(c);
    oni_device_t t[8];
    int n = table_read(c, t, 8);
    uint32_t stim = find_id(t, n, ONIX_ONIGPU_STIM), sink = find_id(t, n, ONIX_ONIGPU_TESTSINK);
    uint32_t hb = find_id(t, n, ONIX_HEARTBEAT);
    start(c);
    static struct frame f;
    REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, TMO) == 0); /* the clock runs */
    uint64_t before = f.time;
    uint32_t w[4] = {42, 7, 8, 9};
    CHECK_RC(write_frame(c, EMU_STREAM_WRITE, stim, w, 4), 16 + 8);
    w[0] = 43;
    CHECK_RC(write_frame(c, EMU_STREAM_GPU_WRITE, stim, w, 1), 4 + 8);
    CHECK_RC(write_frame(c, EMU_STREAM_WRITE, sink, w, 4), 16 + 8);
    /* the echoes come through the normal read stream, stamped on arrival */
    uint32_t tags[2];
    uint64_t times[2];
    int got = 0;
    while (got < 2) {
        REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, TMO) == 0);
        if (f.dev != stim)
            continue;
        uint32_t words;
        uint64_t rt;
        memcpy(&tags[got], f.data, 4);
        memcpy(&words, f.data + 4, 4);
        memcpy(&rt, f.data + 8, 8);
        CHECK_EQ(rt, f.time);
        CHECK_EQ(words, got ? 1 : 4);
        times[got++] = f.time;
    }
    CHECK_EQ(tags[0], 42);
    CHECK_EQ(tags[1], 43);
    CHECK(times[0] >= before);
    CHECK(times[1] >= times[0]);
    uint32_t v;
    CHECK_EQ(reg_get(c, stim, EMU_REG_DEVICE + 1, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 43);
    CHECK_EQ(reg_get(c, stim, EMU_REG_WFRAMES, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 2);
    CHECK_EQ(reg_get(c, sink, EMU_REG_DEVICE, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 4);
    uint32_t brk = find_id(t, n, ONIX_BREAKDIG1R3), outs = 0x1A5;
    CHECK_RC(write_frame(c, EMU_STREAM_WRITE, brk, &outs, 1), 12);
    CHECK_EQ(reg_get(c, brk, EMU_REG_DEVICE, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 0xA5);
    /* malformed frames: rejected whole, counted, nothing delivered */
    CHECK_RC(write_frame(c, EMU_STREAM_WRITE, 0x0EE, w, 1), ONI_EBADFRAME);  /* no such device */
    CHECK_RC(write_frame(c, EMU_STREAM_WRITE, hb, w, 2), ONI_EBADFRAME);     /* not writable */
    CHECK_RC(write_frame(c, EMU_STREAM_WRITE, sink, w, 3), ONI_EBADFRAME);   /* 12 bytes, write_size 8 */
    CHECK_RC(write_frame(c, EMU_STREAM_WRITE, stim, w, 0), ONI_EBADFRAME);   /* empty */
    uint8_t trunc[16] = {0};
    memcpy(trunc, &stim, 4);
    uint32_t words = 4;
    memcpy(trunc + 4, &words, 4);
    CHECK_RC(emu_card_write(c, EMU_STREAM_WRITE, trunc, 12, TMO), ONI_EBADFRAME); /* payload cut short */
    CHECK_RC(emu_card_write(c, EMU_STREAM_WRITE, trunc, 5, TMO), ONI_EBADFRAME);  /* header cut short */
    CHECK_RC(emu_card_write(c, EMU_STREAM_DATA, trunc, 12, TMO), ONI_EINVALARG);
    CHECK_EQ(bad_wframes(c), 6);
    CHECK_EQ(reg_get(c, stim, EMU_REG_WFRAMES, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 2);
    /* ECHO off: write frames are stamped, no read frame */
    CHECK_EQ(reg_set(c, stim, EMU_REG_DEVICE, 0), ONI_SIG_CONFIGWACK);
    w[0] = 44;
    CHECK_RC(write_frame(c, EMU_STREAM_WRITE, stim, w, 1), 12);
    CHECK_EQ(reg_get(c, stim, EMU_REG_DEVICE + 1, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 44);
    uint64_t gen;
    CHECK_RC(emu_card_dev_counts(c, stim, &gen, NULL, NULL), 0);
    CHECK_EQ(gen, 2);
    emu_card_destroy(c);
}

static int cmp_u16(const void *a, const void *b) { return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b; }

/* Ground-truth spikes are in the signal: at each truth time the unit's
 * channel lies far below a robust noise threshold; the truth file gets the
 * same spikes. */
TEST(emu_ground_truth_in_signal)
{
    char path[] = "/tmp/onigpu-emu-truth-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    unlink(path);
    struct emu_card *c = card_open("mode=fast;link=unlimited;seed=5;devices=np2:units=12");
    REQUIRE(c);
    CHECK_RC(emu_card_set_truth_file(c, "/nonexistent-dir/x.csv"), ONI_EPATHINVALID);
    CHECK_RC(emu_card_set_truth_file(c, path), 0);
    REQUIRE(emu_card_truth_keep(c, 100000) == 0);
    oni_device_t t[4];
    int n = table_read(c, t, 4);
    uint32_t np2 = find_id(t, n, ONIX_ONIGPU_NEUROPIX2);
    start(c);
    enum { NF = 15000, CH = 384 }; /* 0.5 s */
    uint16_t *s = malloc((size_t)NF * CH * 2);
    uint64_t *times = malloc(NF * sizeof *times);
    REQUIRE(s && times);
    static struct frame f;
    int k = 0;
    while (k < NF) {
        REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, TMO) == 0);
        if (f.dev != np2)
            continue;
        times[k] = f.time;
        memcpy(s + (size_t)k * CH, f.data + 8, CH * 2);
        k++;
    }
    size_t nt = emu_card_truth_get(c, NULL, 0);
    struct emu_truth *tr = malloc((nt + 1) * sizeof *tr);
    REQUIRE(tr);
    nt = emu_card_truth_get(c, tr, nt);
    CHECK(nt > 12 * 0.5 * 3 / 2); /* 12 units at 3-20 Hz for 0.5 s */
    /* robust noise of channel 0..383: median absolute deviation around 2048 */
    uint16_t *dev = malloc(NF * sizeof *dev);
    REQUIRE(dev);
    for (int i = 0; i < NF; i++) {
        int v = s[(size_t)i * CH + 100] - 2048;
        dev[i] = (uint16_t)(v < 0 ? -v : v);
    }
    qsort(dev, NF, sizeof *dev, cmp_u16);
    double sigma = dev[NF / 2] / 0.6745;
    /* np2's noise SD is 8 LSB (np2.c), estimated here from channel 100 */
    if (!(sigma > 6.5 && sigma < 9.5))
        UNIT_FAIL("noise SD %.2f LSB, want about 8", sigma);
    /* each channel reads the noise table at its own offset: channels 100
     * and 300 are the same in a few samples (|x - y| < 1 for two SDs of 8),
     * not in all */
    int same = 0;
    for (int i = 0; i < NF; i++)
        same += s[(size_t)i * CH + 100] == s[(size_t)i * CH + 300];
    CHECK(same < NF / 4);
    size_t checked = 0, below = 0;
    for (size_t i = 0; i < nt; i++) {
        if (tr[i].dev_idx != np2 || tr[i].time > times[NF - 1])
            continue;
        int lo = 0, hi = NF - 1;
        while (lo < hi) { /* frame with this time */
            int mid = (lo + hi) / 2;
            if (times[mid] < tr[i].time)
                lo = mid + 1;
            else
                hi = mid;
        }
        REQUIRE(times[lo] == tr[i].time);
        checked++;
        int v = s[(size_t)lo * CH + tr[i].channel] - 2048;
        below += v < -5 * sigma;
    }
    CHECK(checked > 0);
    if (below < checked * 95 / 100)
        UNIT_FAIL("%zu of %zu truth spikes below -5 sigma (%.1f LSB)", below, checked, sigma);
    CHECK_RC(emu_card_write_config(c, ONI_CONFIG_RUNNING, 0), 0); /* flushes the truth file */
    FILE *fp = fopen(path, "r");
    REQUIRE(fp);
    char line[128];
    size_t lines = 0;
    CHECK(fgets(line, sizeof line, fp) && !strcmp(line, "dev_idx,unit,channel,sample_time\n"));
    while (fgets(line, sizeof line, fp)) {
        unsigned d, u, ch;
        unsigned long long tt;
        if (sscanf(line, "%u,%u,%u,%llu", &d, &u, &ch, &tt) == 4 && lines < nt && tr[lines].time == tt &&
            tr[lines].channel == ch && tr[lines].unit == u)
            lines++;
    }
    fclose(fp);
    CHECK_EQ(lines, emu_card_truth_get(c, NULL, 0));
    CHECK_RC(emu_card_set_truth_file(c, NULL), 0);
    unlink(path);
    free(s), free(times), free(tr), free(dev);
    emu_card_destroy(c);
}

/* The same seed gives the same signal. */
/* The same seed gives the same data; another seed other data (a generator
 * that ignored the seed, or made a constant, passed the first check alone). */
TEST(emu_neural_data_reproducible)
{
    static const int seeds[3] = {9, 9, 10};
    uint8_t d[3][4096];
    for (int r = 0; r < 3; r++) {
        char spec[96];
        snprintf(spec, sizeof spec, "mode=fast;link=unlimited;seed=%d;devices=rhd2164", seeds[r]);
        struct emu_card *c = card_open(spec);
        REQUIRE(c);
        start(c);
        CHECK_RC(emu_card_read(c, EMU_STREAM_DATA, d[r], 4096, TMO), 4096);
        emu_card_destroy(c);
    }
    CHECK(!memcmp(d[0], d[1], sizeof d[0]));
    CHECK(memcmp(d[0], d[2], sizeof d[0]) != 0);
}

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
        start(c);
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

/* A backlog of 100 MiB in one FIFO (its reader waits while the other stream
 * is read) drains intact: the ring wraps, restarts at its start and gives
 * memory back without losing or reordering a word. */
TEST(emu_fifo_backlog_drains_intact)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;ddr=512M;devices=testcore:bytes=4096:rate=1G,"
                                   "testcore:bytes=4096:rate=1G:route=1");
    REQUIRE(c);
    oni_device_t t[8];
    int n = table_read(c, t, 8);
    struct cont k = {.dev = find_id(t, n, ONIX_ONIGPU_TESTCORE)};
    REQUIRE(k.dev == 0);
    start(c);
    size_t blk = 1 << 20;
    uint8_t *buf = malloc(blk);
    REQUIRE(buf);
    for (int i = 0; i < 100; i++) /* the GPU stream is read; the default stream piles up */
        REQUIRE(emu_card_read(c, EMU_STREAM_GPU, buf, blk, TMO) == (int)blk);
    onigpu_stream_stats_t st;
    emu_card_stats(c, &st);
    CHECK(st.fifo_bytes[0] > (90ull << 20));
    uint64_t before = st.fifo_bytes[0];
    for (uint64_t left = before; left >= blk; left -= blk) {
        REQUIRE(emu_card_read(c, EMU_STREAM_DATA, buf, blk, TMO) == (int)blk);
        cont_feed(&k, buf, blk);
    }
    /* and on: the drained ring keeps working from its start */
    for (int i = 0; i < 64; i++) {
        REQUIRE(emu_card_read(c, EMU_STREAM_DATA, buf, blk, TMO) == (int)blk);
        cont_feed(&k, buf, blk);
    }
    CHECK_EQ(k.errors, 0);
    CHECK(k.words > (150ull << 20) / 8);
    CHECK(c->fifo[0].trims >= 1); /* the drained backlog's pages went back */
    CHECK_EQ(c->fifo[1].trims, 0); /* never in the GPU stream's FIFO */
    emu_card_stats(c, &st);
    CHECK_EQ(st.dropped_frames[0] + st.dropped_frames[1], 0);
    free(buf);
    emu_card_destroy(c);
}

/* Arbitrary bytes on the write stream: every buffer is either taken whole
 * (valid frames) or refused with ONI_EBADFRAME and counted; nothing crashes. */
TEST(emu_write_stream_random_bytes)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=stim,testsink:bytes=8,heartbeat");
    REQUIRE(c);
    uint64_t s = 12345, bad = 0, good = 0;
    uint8_t buf[256];
    for (int i = 0; i < 20000; i++) {
        size_t n = 1 + (size_t)(neural_rand(&s) % sizeof buf);
        for (size_t k = 0; k < n; k++)
            buf[k] = (uint8_t)neural_rand(&s);
        if (i & 1) { /* make half of them plausible: one frame, a real device, a fitting length */
            uint32_t dev = (uint32_t)(neural_rand(&s) % 4), words = (uint32_t)(neural_rand(&s) % 8);
            n = 8 + 4 * (size_t)words;
            memcpy(buf, &dev, 4);
            memcpy(buf + 4, &words, 4);
        }
        int rc = emu_card_write(c, EMU_STREAM_WRITE, buf, n, TMO);
        if (rc == ONI_EBADFRAME)
            bad++;
        else if (rc == (int)n)
            good++;
        else
            UNIT_FAIL("write of %zu bytes returned %d", n, rc);
    }
    CHECK_EQ(bad_wframes(c), bad);
    CHECK(good > 100);
    emu_card_destroy(c);
}

/* Spec arguments every device takes: enable=0 keeps it silent until enabled,
 * hub=N places it (hubs up to N are created, each with its manager). */
TEST(emu_spec_enable_and_hub_arguments)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=heartbeat:hz=1000:enable=0,np2:hub=3");
    REQUIRE(c);
    oni_device_t t[16];
    int n = table_read(c, t, 16);
    CHECK_EQ(n, 3 + 4);
    CHECK_EQ(find_id(t, n, ONIX_ONIGPU_NEUROPIX2), 0x300);
    uint32_t hb = find_id(t, n, ONIX_HEARTBEAT), v = 1;
    CHECK_EQ(reg_get(c, hb, EMU_REG_ENABLE, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 0);
    CHECK_EQ(reg_get(c, 0x3FE, ONIX_HUB_HARDWAREID, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, ONIX_HUB_HSNP2E);
    start(c);
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

/* Neuropixels 1.0 superframes: each truth spike is at frame time + i * 8333
 * ticks for one of the 12 AP samples, and that AP sample is far below the
 * noise (AP noise SD 3 LSB around 512, troughs of 8-16 SD). */
TEST(emu_np1_truth_in_ap_band)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;seed=3;devices=np1:units=10");
    REQUIRE(c);
    REQUIRE(emu_card_truth_keep(c, 100000) == 0);
    oni_device_t t[4];
    int n = table_read(c, t, 4);
    uint32_t np1 = find_id(t, n, ONIX_NEUROPIX1R0);
    start(c);
    enum { NF = 1250, CH = 384, AP = 12 }; /* 0.5 s */
    uint16_t *ap = malloc((size_t)NF * AP * CH * 2);
    uint64_t *times = malloc(NF * sizeof *times);
    REQUIRE(ap && times);
    static struct frame f;
    for (int k = 0; k < NF;) {
        REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, TMO) == 0);
        if (f.dev != np1)
            continue;
        REQUIRE(f.sz == 8 + CH * 2 * 13);
        times[k] = f.time;
        memcpy(ap + (size_t)k * AP * CH, f.data + 8 + CH * 2, AP * CH * 2);
        k++;
    }
    size_t nt = emu_card_truth_get(c, NULL, 0);
    struct emu_truth *tr = malloc((nt + 1) * sizeof *tr);
    REQUIRE(tr);
    nt = emu_card_truth_get(c, tr, nt);
    size_t checked = 0, below = 0, misplaced = 0;
    for (size_t i = 0; i < nt; i++) {
        if (tr[i].time > times[NF - 1] + 11 * 8333ull)
            continue;
        int k = 0;
        while (k + 1 < NF && times[k + 1] <= tr[i].time)
            k++;
        uint64_t off = tr[i].time - times[k];
        if (off % 8333 || off / 8333 >= AP) {
            misplaced++;
            continue;
        }
        int v = ap[((size_t)k * AP + off / 8333) * CH + tr[i].channel] - 512;
        checked++;
        below += v < -5 * 3;
    }
    CHECK_EQ(misplaced, 0);
    CHECK(checked > 10 * 0.5 * 3 / 2);
    if (below < checked * 95 / 100)
        UNIT_FAIL("%zu of %zu np1 truth spikes below -5 sigma", below, checked);
    free(ap), free(times), free(tr);
    emu_card_destroy(c);
}

/* A rate written during acquisition takes effect at once: the next frame
 * comes within one new period, not when the old period ends (4 s for the
 * test core here, 1 s for the heartbeat; up to 1000 s in general). */
TEST(emu_rate_change_takes_effect_at_once)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=heartbeat:hz=1,"
                                   "testcore:bytes=4096:rate=1k,loadtest:hz=1000");
    REQUIRE(c);
    oni_device_t t[8];
    int n = table_read(c, t, 8);
    uint32_t hb = find_id(t, n, ONIX_HEARTBEAT), core = find_id(t, n, ONIX_ONIGPU_TESTCORE);
    start(c);
    static struct frame f;
    REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, TMO) == 0); /* generation is under way */
    CHECK_EQ(reg_set(c, hb, EMU_REG_RATE_HZ, 1000), ONI_SIG_CONFIGWACK);
    CHECK_EQ(reg_set(c, core, EMU_REG_DEVICE, 4096), ONI_SIG_CONFIGWACK); /* 1000 frames/s */
    emu_card_lock(c);
    uint64_t now = emu_card_now(c);
    pthread_mutex_unlock(&c->lock);
    uint64_t first_hb = 0, first_core = 0, prev = f.time;
    int disorder = 0;
    for (int i = 0; i < 100000 && (!first_hb || !first_core); i++) {
        REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, TMO) == 0);
        disorder += f.time < prev;
        prev = f.time;
        if (f.time <= now)
            continue; /* generated before the writes */
        if (f.dev == hb && !first_hb)
            first_hb = f.time;
        if (f.dev == core && !first_core)
            first_core = f.time;
    }
    CHECK_EQ(disorder, 0);
    CHECK(first_hb && first_core);
    if (first_hb - now > 250000 || first_core - now > 250000)
        UNIT_FAIL("first frames at the new rate %llu and %llu ticks after the write, want <= 250000",
                  (unsigned long long)(first_hb - now), (unsigned long long)(first_core - now));
    emu_card_destroy(c);
}

/* Acquisition stopped: a write frame still reaches the stimulator, but no
 * echo goes into the read stream (it was flushed unread at the next start). */
TEST(emu_no_echo_while_stopped)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=stim,memusage:enable=0");
    REQUIRE(c);
    oni_device_t t[4];
    int n = table_read(c, t, 4);
    uint32_t stim = find_id(t, n, ONIX_ONIGPU_STIM), v = 0, w = 41;
    CHECK_RC(write_frame(c, EMU_STREAM_WRITE, stim, &w, 1), 12);
    CHECK_EQ(reg_get(c, stim, EMU_REG_DEVICE + 1, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 41);
    onigpu_stream_stats_t st;
    emu_card_stats(c, &st);
    CHECK_EQ(st.fifo_bytes[0], 0);
    uint64_t gen = 1;
    CHECK_RC(emu_card_dev_counts(c, stim, &gen, NULL, NULL), 0);
    CHECK_EQ(gen, 0);
    start(c);
    w = 42;
    CHECK_RC(write_frame(c, EMU_STREAM_WRITE, stim, &w, 1), 12);
    static struct frame f;
    REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, TMO) == 0);
    CHECK_EQ(f.dev, stim);
    memcpy(&v, f.data, 4);
    CHECK_EQ(v, 42);
    emu_card_destroy(c);
}

/* --- mutation testing 2026-11-25 (docs/results/mutation-emu-20261125.md) --- */

/* A frame that fills the FIFO to the last byte goes in: in a 4 KiB FIFO,
 * four 1 KiB frames (16 + 1008 bytes) fit and only the rest of the burst is
 * dropped. Guards emu_fifo_reserve's room check (cap - fill < n, not <=). */
TEST(emu_frame_that_fills_the_fifo_exactly_is_kept)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;ddr=8K;devices=testcore:bytes=1008:rate=1G,memusage:enable=0");
    REQUIRE(c);
    oni_device_t t[4];
    uint32_t core = find_id(t, table_read(c, t, 4), ONIX_ONIGPU_TESTCORE);
    start(c);
    uint8_t h[16];
    REQUIRE(emu_card_read(c, EMU_STREAM_DATA, h, sizeof h, TMO) == 16); /* generates one chunk */
    onigpu_stream_stats_t st;
    emu_card_stats(c, &st);
    CHECK_EQ(st.fifo_capacity[0], 4096);
    CHECK_EQ(st.fifo_bytes[0], 4096 - 16);
    uint64_t gen = 0, dropped = 0;
    REQUIRE(emu_card_dev_counts(c, core, &gen, &dropped, NULL) == 0);
    CHECK_EQ(gen - dropped, 4);
    CHECK_EQ(st.dropped_frames[0], dropped);
    emu_card_destroy(c);
}

/* A ring only a little larger than the size at which it restarts at its
 * start (32 MiB + 128 KiB) wraps with bytes in flight across its end: the
 * ring must not restart then (it would move bytes from past its end). Guards
 * emu_fifo_consume's rd + fill <= cap condition. */
TEST(emu_ring_wrapping_near_the_restart_size_stays_intact)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;ddr=65792K;devices=testcore:bytes=4096:rate=2G");
    REQUIRE(c);
    REQUIRE(c->fifo[0].cap == (32u << 20) + (128u << 10));
    oni_device_t t[4];
    struct cont k = {0};
    k.dev = find_id(t, table_read(c, t, 4), ONIX_ONIGPU_TESTCORE);
    start(c);
    size_t blk = 64 << 10; /* a read leaves 128-320 KiB in flight (fast mode generates 256 KiB at a time) */
    uint8_t *buf = malloc(blk);
    REQUIRE(buf);
    for (int i = 0; i < 160 * 16; i++) { /* 160 MiB: the ring goes round several times */
        REQUIRE(emu_card_read(c, EMU_STREAM_DATA, buf, blk - 8, TMO) == (int)(blk - 8));
        cont_feed(&k, buf, blk - 8);
    }
    CHECK_EQ(k.errors, 0);
    CHECK(k.words > (150ull << 20) / 8);
    free(buf);
    emu_card_destroy(c);
}

/* Held bytes that a flush kept are dropped by their holder however much it
 * consumes: a DMA transfer that failed lets go with n = 0, and the next read
 * starts at the first frame of the new acquisition, not in the old bytes.
 * Guards emu_fifo_flush's epoch++ (let_go tells a flush by the epoch). */
TEST(emu_let_go_after_a_flush_drops_the_held_bytes)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;ddr=1M;devices=testcore:bytes=1024:rate=1G:route=1");
    REQUIRE(c);
    oni_device_t t[4];
    uint32_t core = find_id(t, table_read(c, t, 4), ONIX_ONIGPU_TESTCORE), lo = 0, hi = 0;
    start(c);
    struct emu_span sp[2];
    REQUIRE(emu_card_fifo_peek(c, EMU_STREAM_GPU, 4 * (16 + 1024), sp, TMO) == 0);
    uint64_t flushes = emu_card_flushes(c);
    REQUIRE(table_read(c, t, 4) > 0); /* RESET: a flush */
    CHECK_EQ(reg_get(c, core, EMU_REG_DEVICE + 2, &lo), ONI_SIG_CONFIGRACK); /* the next counter value */
    CHECK_EQ(reg_get(c, core, EMU_REG_DEVICE + 3, &hi), ONI_SIG_CONFIGRACK);
    start(c); /* and another */
    CHECK_EQ(emu_card_flushes(c), flushes + 2);
    CHECK_RC(emu_card_fifo_consume(c, EMU_STREAM_GPU, 0), 0); /* a failed transfer lets go */
    static struct frame f;
    REQUIRE(frame_read(c, EMU_STREAM_GPU, &f, TMO) == 0);
    uint64_t w;
    memcpy(&w, f.data, 8);
    CHECK_EQ(f.dev, core);
    CHECK_EQ(w, (uint64_t)hi << 32 | lo);
    emu_card_destroy(c);
}

/* The fastest rate a device may have, one frame per acquisition tick (a
 * test core of 8-byte frames at 2 GB/s), is accepted and its frames are
 * stamped at consecutive ticks; one byte/s more is refused. Guards
 * emu_dev_set_rate's bound (rate > one per tick, not >=). */
TEST(emu_one_frame_per_tick_is_the_fastest_rate)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=testcore:bytes=8:rate=2G,memusage:enable=0");
    REQUIRE(c);
    start(c);
    static struct frame f;
    uint64_t prev = 0;
    for (int i = 0; i < 100; i++) {
        REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, TMO) == 0);
        if (i)
            CHECK_EQ(f.time, prev + 1);
        prev = f.time;
    }
    emu_card_destroy(c);
    CHECK(!card_open("mode=fast;devices=testcore:bytes=8:rate=2000000008"));
}

/* A rate change during acquisition starts the new schedule afresh: the k-th
 * frame after the change is at floor(k * 250e6 / hz) ticks after the first,
 * whatever fraction of a tick the old schedule had carried (hz=7 carries
 * five sevenths of a tick per frame; the first chunk leaves one seventh).
 * Guards emu_dev_set_rate's rem = 0 and the carry in advance(). */
TEST(emu_rate_change_starts_an_exact_schedule)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=heartbeat:hz=7,memusage:enable=0");
    REQUIRE(c);
    oni_device_t t[4];
    uint32_t hb = find_id(t, table_read(c, t, 4), ONIX_HEARTBEAT);
    start(c);
    static struct frame f;
    REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, TMO) == 0); /* generates a chunk: ~10000 frames at 7 Hz */
    CHECK_EQ(reg_set(c, hb, EMU_REG_RATE_HZ, 3), ONI_SIG_CONFIGWACK);
    /* the frame already due at the old rate comes first; from there, 3 Hz */
    uint64_t prev = f.time, first = 0;
    int k = -1;
    for (int i = 0; i < 30000 && k < 200; i++) {
        REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, TMO) == 0);
        if (k < 0 && f.time - prev > 250000000u / 5) /* the second frame at the new rate */
            k = 1, first = prev;
        if (k >= 0) {
            uint64_t want = first + (uint64_t)k * 250000000u / 3;
            if (f.time != want) {
                UNIT_FAIL("frame %d after the change at %llu, want %llu", k, (unsigned long long)f.time,
                          (unsigned long long)want);
                break;
            }
            k++;
        }
        prev = f.time;
    }
    CHECK_EQ(k, 200);
    emu_card_destroy(c);
}

/* CLK_DIV = 254 on the 250 MHz host hub: a frame every 254 ticks exactly,
 * stamped 254k after the first, as the card's clock divider makes them. The
 * rate kept in mHz (250e9 / 254 = 984251968.5) must not be rounded up: a
 * period a hair under 254 ticks put every frame one tick early (253, 507,
 * ...) until 2026-11-25. Guards emu_dev_set_clk_div's num / div. */
TEST(emu_clock_divider_stamps_exact_multiples)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=heartbeat,memusage:enable=0");
    REQUIRE(c);
    oni_device_t t[4];
    uint32_t hb = find_id(t, table_read(c, t, 4), ONIX_HEARTBEAT);
    CHECK_EQ(reg_set(c, hb, ONIX_HEARTBEAT_CLK_DIV, 254), ONI_SIG_CONFIGWACK);
    uint32_t v = 0;
    CHECK_EQ(reg_get(c, hb, EMU_REG_RATE_HZ, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 984252);
    start(c);
    static struct frame f;
    uint64_t first = 0;
    for (int k = 0; k < 1000; k++) {
        REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, TMO) == 0);
        if (!k)
            first = f.time;
        else if (f.time != first + 254u * (uint64_t)k) {
            UNIT_FAIL("frame %d at %llu ticks after the first, want %d", k, (unsigned long long)(f.time - first), 254 * k);
            break;
        }
    }
    emu_card_destroy(c);
}

/* A heartbeat's largest rate (1 MHz) is accepted from the spec and through
 * RATE_HZ; one more is refused. Guards emu_dev_set_hz's hz > max_hz. */
TEST(emu_largest_heartbeat_rate_is_accepted)
{
    struct emu_card *c = card_open("mode=fast;devices=heartbeat:hz=1M");
    REQUIRE(c);
    oni_device_t t[4];
    uint32_t hb = find_id(t, table_read(c, t, 4), ONIX_HEARTBEAT), v = 0;
    CHECK_EQ(reg_get(c, hb, EMU_REG_RATE_HZ, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 1000000);
    CHECK_EQ(reg_set(c, hb, EMU_REG_RATE_HZ, 10), ONI_SIG_CONFIGWACK);
    CHECK_EQ(reg_set(c, hb, EMU_REG_RATE_HZ, 1000000), ONI_SIG_CONFIGWACK);
    CHECK_EQ(reg_set(c, hb, EMU_REG_RATE_HZ, 1000001), ONI_SIG_CONFIGWNACK);
    emu_card_destroy(c);
}

/* Padding after a payload that is not a whole number of words is zero,
 * also where the ring reuses memory that held other frames' bytes (a load
 * tester of 10-byte payloads, 28-byte frames, in a 4 KiB FIFO, so the
 * padding lands on old headers and payload). Guards put_frame's memset. */
TEST(emu_frame_padding_is_zero_in_reused_memory)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;ddr=8K;devices=loadtest:bytes=10:hz=1M,memusage:enable=0");
    REQUIRE(c);
    start(c);
    static struct frame f;
    int nonzero = 0;
    for (int i = 0; i < 2000; i++) {
        REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, TMO) == 0);
        REQUIRE(f.sz == 10);
        nonzero += f.data[10] || f.data[11];
    }
    CHECK_EQ(nonzero, 0);
    emu_card_destroy(c);
}

/* Frames due at the same tick come in device-table order, also when the
 * later device of the table had a run of frames just before the tie (two
 * heartbeats at 1 and 2 kHz tie every millisecond; the 2 kHz one is second
 * in the table and due in between). Guards emu_gen_until's choice of the
 * earliest device (< best, ties to the first) and the end of a run at the
 * next device's due time (< second). */
TEST(emu_ties_come_in_table_order)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=heartbeat:hz=1000,heartbeat:hz=2000,memusage:enable=0");
    REQUIRE(c);
    oni_device_t t[8];
    REQUIRE(table_read(c, t, 8) >= 2 && t[0].id == ONIX_HEARTBEAT && t[1].id == ONIX_HEARTBEAT);
    start(c);
    static struct frame f;
    uint64_t prev_time = 0;
    uint32_t prev_dev = 0;
    int ties = 0, bad = 0;
    for (int i = 0; i < 3000; i++) {
        REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, TMO) == 0);
        if (i && f.time == prev_time) {
            ties++;
            bad += f.dev != t[1].idx || prev_dev != t[0].idx;
        }
        prev_time = f.time, prev_dev = f.dev;
    }
    CHECK(ties >= 900);
    CHECK_EQ(bad, 0);
    emu_card_destroy(c);
}

/* A start after a stop begins every schedule afresh: the k-th frame is at
 * floor(k * 250e6 / hz) ticks after the first, whatever fraction of a tick
 * the old run had carried (hz=7: five sevenths a frame). Guards
 * emu_gen_restart's rem = 0. */
TEST(emu_restart_starts_an_exact_schedule)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=heartbeat:hz=7,memusage:enable=0");
    REQUIRE(c);
    static struct frame f;
    for (int run = 0; run < 3; run++) {
        start(c);
        uint64_t first = 0;
        for (int k = 0; k < 50 + run; k++) {
            REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, TMO) == 0);
            if (!k)
                first = f.time;
            else if (f.time - first != (uint64_t)k * 250000000u / 7) {
                UNIT_FAIL("run %d, frame %d at %llu ticks after the first, want %llu", run, k,
                          (unsigned long long)(f.time - first), (unsigned long long)k * 250000000u / 7);
                break;
            }
        }
        CHECK_RC(emu_card_write_config(c, ONI_CONFIG_RUNNING, 0), 0);
    }
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

/* Fast mode: a stop and a new start move the clock on past the last frame,
 * so a reader that read every frame of one run sees the next run's first
 * frame later, never at the same tick. Guards the start at gen_now + 1. */
TEST(emu_fast_restart_moves_past_the_last_frame)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=heartbeat:hz=1000,memusage:enable=0");
    REQUIRE(c);
    start(c);
    static struct frame f;
    onigpu_stream_stats_t st;
    int frames = 0;
    do { /* every frame generated so far */
        REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, TMO) == 0);
        emu_card_stats(c, &st);
        REQUIRE(++frames < 100000);
    } while (st.fifo_bytes[0]);
    uint64_t last = f.time;
    CHECK_RC(emu_card_write_config(c, ONI_CONFIG_RUNNING, 0), 0);
    start(c);
    REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, TMO) == 0);
    CHECK(f.time > last);
    emu_card_destroy(c);
}

/* RESET empties both data FIFOs, the GPU stream's too (a stop alone keeps
 * the GPU stream's frames readable). Guards the RESET's flush of fifo[1]. */
TEST(emu_reset_empties_the_gpu_stream)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;ddr=1M;devices=testcore:bytes=1024:rate=1G:route=1");
    REQUIRE(c);
    start(c);
    uint8_t h[16];
    REQUIRE(emu_card_read(c, EMU_STREAM_GPU, h, sizeof h, TMO) == 16);
    onigpu_stream_stats_t st;
    CHECK_RC(emu_card_write_config(c, ONI_CONFIG_RUNNING, 0), 0);
    emu_card_stats(c, &st);
    CHECK(st.fifo_bytes[1] > 0); /* a stop keeps them */
    CHECK_RC(emu_card_write_config(c, ONI_CONFIG_RESET, 1), 0);
    emu_card_stats(c, &st);
    CHECK_EQ(st.fifo_bytes[1], 0);
    CHECK_EQ(st.fifo_bytes[0], 0);
    emu_card_destroy(c);
}

/* A device whose frame is exactly the FIFO's size counts in the read limit
 * (one such frame fills the FIFO, and one word left behind by a read stops
 * the next from going in: 4 bytes is all a read may wait for); one larger
 * than the FIFO, always dropped, does not. Guards read_max's f <= cap. */
TEST(emu_read_max_with_a_frame_as_large_as_the_fifo)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;ddr=8K;devices=testcore:bytes=4080:rate=1M,"
                                   "testcore:bytes=4088:rate=1M:route=1");
    REQUIRE(c);
    CHECK_EQ(emu_card_read_max(c, EMU_STREAM_DATA), 4);
    CHECK_EQ(emu_card_read_max(c, EMU_STREAM_GPU), 4096);
    emu_card_destroy(c);
}

/* emu_card_read_some refuses a range whose most is below its least (n). */
TEST(emu_read_some_refuses_most_below_n)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=testcore:bytes=1024:rate=1G");
    REQUIRE(c);
    start(c);
    uint8_t buf[64];
    CHECK_RC(emu_card_read_some(c, EMU_STREAM_DATA, buf, 16, 8, TMO), ONI_EINVALARG);
    CHECK_RC(emu_card_read_some(c, EMU_STREAM_DATA, buf, 16, 16, TMO), 16);
    emu_card_destroy(c);
}

/* The GPU stream's FIFO keeps its pages after a backlog drained (the DMA
 * engine may have them page-locked), and the default stream's gives its
 * pages back once per drained backlog, not again at every later restart of
 * the ring. Guards emu_fifo_consume's keep_pages check and its
 * hiwater = KEEP_LOW after a trim. */
TEST(emu_backlog_pages_given_back_once_and_never_by_the_gpu_stream)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;ddr=512M;devices=testcore:bytes=4096:rate=1G,"
                                   "testcore:bytes=4096:rate=1G:route=1");
    REQUIRE(c);
    start(c);
    size_t blk = 1 << 20;
    uint8_t *buf = malloc(blk);
    REQUIRE(buf);
    for (int s = 0; s < 2; s++) { /* a backlog in one stream while the other is read, then drained */
        enum emu_stream pile = s ? EMU_STREAM_DATA : EMU_STREAM_GPU, other = s ? EMU_STREAM_GPU : EMU_STREAM_DATA;
        for (int i = 0; i < 100; i++)
            REQUIRE(emu_card_read(c, other, buf, blk, TMO) == (int)blk);
        onigpu_stream_stats_t st;
        emu_card_stats(c, &st);
        REQUIRE(st.fifo_bytes[s ? 0 : 1] > (90ull << 20));
        for (uint64_t left = st.fifo_bytes[s ? 0 : 1]; left >= blk; left -= blk)
            REQUIRE(emu_card_read(c, pile, buf, blk, TMO) == (int)blk);
    }
    CHECK_EQ(c->fifo[1].trims, 0);
    CHECK(c->fifo[1].hiwater > (64u << 20));
    uint64_t trims = c->fifo[0].trims;
    CHECK_EQ(trims, 1);
    for (int i = 0; i < 128; i++) /* four more restarts of the ring, nothing piled up */
        REQUIRE(emu_card_read(c, EMU_STREAM_DATA, buf, blk, TMO) == (int)blk);
    CHECK_EQ(c->fifo[0].trims, trims);
    free(buf);
    emu_card_destroy(c);
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

/* --- mutation testing of the devices 2026-11-25 (docs/results/mutation-devices-20261125.md) --- */

/* The next frame of device dev on the default stream (others skipped). */
static int dev_frame(struct emu_card *c, uint32_t dev, struct frame *f)
{
    for (int i = 0; i < 100000; i++) {
        int rc = frame_read(c, EMU_STREAM_DATA, f, TMO);
        if (rc || f->dev == dev)
            return rc;
    }
    return ONI_ETIMEOUT;
}

static uint16_t median_u16(const uint8_t *p, int n)
{
    uint16_t v[384];
    memcpy(v, p, (size_t)n * 2);
    qsort(v, (size_t)n, 2, cmp_u16);
    return v[n / 2];
}

/* The units in the ground truth (neural.h): each fires again at least the
 * 2 ms refractory period after its previous spike, and 64 units at 3-20 Hz
 * give 96 .. 1280 spikes in 1 s of np2 (30000 frames). */
TEST(emu_units_fire_at_their_rates_after_a_refractory_period)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;seed=11;devices=np2:units=64");
    REQUIRE(c);
    REQUIRE(emu_card_truth_keep(c, 100000) == 0);
    oni_device_t t[4];
    int n = table_read(c, t, 4);
    uint32_t np2 = find_id(t, n, ONIX_ONIGPU_NEUROPIX2);
    start(c);
    static struct frame f;
    for (int k = 0; k < 30000; k++)
        REQUIRE(dev_frame(c, np2, &f) == 0);
    size_t nt = emu_card_truth_get(c, NULL, 0);
    struct emu_truth *tr = malloc((nt + 1) * sizeof *tr);
    REQUIRE(tr);
    nt = emu_card_truth_get(c, tr, nt);
    uint64_t last[NEURAL_MAX_UNITS] = {0}, min_gap = UINT64_MAX;
    int seen[NEURAL_MAX_UNITS] = {0};
    for (size_t i = 0; i < nt; i++) {
        uint32_t u = tr[i].unit;
        REQUIRE(u < NEURAL_MAX_UNITS);
        if (seen[u] && tr[i].time - last[u] < min_gap)
            min_gap = tr[i].time - last[u];
        seen[u] = 1;
        last[u] = tr[i].time;
    }
    /* 2 ms of the acquisition clock, less a sample's rounding */
    if (min_gap < EMU_ACQ_HZ * 19 / 10000)
        UNIT_FAIL("a unit fired again after %.3f ms", min_gap * 1e3 / EMU_ACQ_HZ);
    if (nt < 64 * 3 / 2 || nt > 64 * 20)
        UNIT_FAIL("%zu spikes of 64 units in 1 s, want 96 .. 1280", nt);
    free(tr);
    emu_card_destroy(c);
}

/* np2, rhd2164 and np1 frames as docs/devices.md lays them out: sizes, a
 * sample (frame) counter counting 0, 1, 2, ... in the first 8 bytes, the
 * channels around their offset-binary zero, rhd2164's aux ramps after its 64
 * channels, np1's 12 AP blocks after the LFP block, and the read-only
 * CHANNELS/UNITS/AP_HZ/LFP_HZ registers. */
TEST(emu_neural_frame_layouts)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=np2,rhd2164,np1,memusage:enable=0");
    REQUIRE(c);
    oni_device_t t[16];
    int n = table_read(c, t, 16);
    uint32_t np2 = find_id(t, n, ONIX_ONIGPU_NEUROPIX2), rhd = find_id(t, n, ONIX_RHD2164);
    uint32_t np1 = find_id(t, n, ONIX_NEUROPIX1R0), v = 0;
    CHECK_EQ(reg_get(c, rhd, EMU_REG_DEVICE, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 64);
    CHECK_EQ(reg_get(c, rhd, EMU_REG_DEVICE + 1, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 8); /* rhd2164's default units */
    CHECK_EQ(reg_get(c, np1, EMU_REG_DEVICE + 2, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 30000);
    CHECK_EQ(reg_get(c, np1, EMU_REG_DEVICE + 3, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 2500);
    start(c);
    static struct frame f;
    uint64_t count, first = 0; /* each device's frames are read in turn: count from the first one seen */
    for (uint64_t k = 0; k < 3; k++) {
        REQUIRE(dev_frame(c, np2, &f) == 0);
        CHECK_EQ(f.sz, 776);
        memcpy(&count, f.data, 8);
        first = k ? first : count;
        CHECK_EQ(count, first + k);
    }
    for (uint64_t k = 0; k < 3; k++) {
        REQUIRE(dev_frame(c, np1, &f) == 0);
        CHECK_EQ(f.sz, 9992);
        memcpy(&count, f.data, 8);
        first = k ? first : count;
        CHECK_EQ(count, first + k);
        uint16_t lfp = median_u16(f.data + 8, 384), ap11 = median_u16(f.data + 8 + 12 * 768, 384);
        CHECK(lfp > 462 && lfp < 562);
        CHECK(ap11 > 502 && ap11 < 522); /* AP noise SD 3 LSB: the last AP block is written */
    }
    for (uint64_t k = 0; k <= 100; k++) {
        REQUIRE(dev_frame(c, rhd, &f) == 0);
        CHECK_EQ(f.sz, 142);
        memcpy(&count, f.data, 8);
        first = k ? first : count;
        CHECK_EQ(count, first + k);
        uint16_t mid = median_u16(f.data + 8, 64), aux[3];
        CHECK(mid > 32768 - 100 && mid < 32768 + 100);
        memcpy(aux, f.data + 8 + 128, 6);
        CHECK_EQ(aux[0], 32768 + count / 16); /* slow ramps */
        CHECK_EQ(aux[1], 32768 - count / 32);
        CHECK_EQ(aux[2], 32768);
    }
    emu_card_destroy(c);
}

/* BNO055 fusion frames: the head turns at 36 deg/s, so frame k (100 Hz)
 * has heading 0.36 k deg in 1/16 deg and the quaternion of that turn about
 * the vertical (w = cos(h/2), z = sin(h/2), 1 = 2^14); gravity 9.81 m/s^2
 * on z, 25 C and every calibration status bit set. */
TEST(emu_bno055_frame_fields)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=bno055,memusage:enable=0");
    REQUIRE(c);
    oni_device_t t[8];
    int n = table_read(c, t, 8);
    uint32_t bno = find_id(t, n, ONIX_BNO055);
    start(c);
    static struct frame f;
    for (int k = 0; k <= 100; k++) {
        REQUIRE(dev_frame(c, bno, &f) == 0);
        CHECK_EQ(f.sz, 28);
        int16_t v[13];
        memcpy(v, f.data, sizeof v);
        double h = 0.36 * k, half = h * M_PI / 360;
        CHECK(abs(v[0] - (int)lrint(h * 16)) <= 1);
        CHECK(abs(v[3] - (int)lrint(cos(half) * 16384)) <= 1);
        CHECK(abs(v[6] - (int)lrint(sin(half) * 16384)) <= 1);
        CHECK_EQ(v[12], 981);
        CHECK_EQ((int8_t)f.data[26], 25);
        CHECK_EQ(f.data[27], 0xFF);
    }
    emu_card_destroy(c);
}

/* heartbeat: 100 Hz by default; its payload is its hub's clock, which on a
 * headstage hub (HSNP2E, 50 MHz) is a fifth of the 250 MHz frame time. */
TEST(emu_heartbeat_default_rate_and_hub_clock)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=np2,heartbeat:hub=1,memusage:enable=0");
    REQUIRE(c);
    oni_device_t t[8];
    int n = table_read(c, t, 8);
    uint32_t hb = find_id(t, n, ONIX_HEARTBEAT), v = 0;
    CHECK_EQ(hb >> 8, 1);
    CHECK_EQ(reg_get(c, hb, EMU_REG_RATE_HZ, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 100);
    CHECK_EQ(reg_get(c, hb, ONIX_HEARTBEAT_CLK_HZ, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 50000000);
    start(c);
    static struct frame f;
    for (int k = 0; k < 3; k++) {
        REQUIRE(dev_frame(c, hb, &f) == 0);
        uint64_t clock;
        memcpy(&clock, f.data, 8);
        CHECK_EQ(clock, f.time / 5);
    }
    CHECK(f.time > 0);
    emu_card_destroy(c);
}

/* breakout: a frame per edge of the square wave on digital input 0
 * (inputs 1, 0, 1, ...), buttons 0, link state 3; PULSE_HZ reads hz; hz is
 * 1..10^4. */
TEST(emu_breakout_frames_and_range)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=breakout:hz=7,memusage:enable=0");
    REQUIRE(c);
    oni_device_t t[8];
    int n = table_read(c, t, 8);
    uint32_t brk = find_id(t, n, ONIX_BREAKDIG1R3), v = 0;
    CHECK_EQ(reg_get(c, brk, EMU_REG_DEVICE + 1, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 7);
    start(c);
    static struct frame f;
    for (int k = 0; k < 4; k++) {
        REQUIRE(dev_frame(c, brk, &f) == 0);
        uint16_t w[4];
        memcpy(w, f.data, 8);
        CHECK_EQ(w[0], k % 2 ? 0 : 1);
        CHECK_EQ(w[1], 0);
        CHECK_EQ(w[2], 3);
        CHECK_EQ(w[3], 0);
    }
    emu_card_destroy(c);
    struct emu_card *bad = NULL;
    char err[200];
    CHECK_RC(emu_card_create("devices=breakout:hz=10001", &bad, err, sizeof err), ONI_EINVALARG);
    REQUIRE((c = card_open("devices=breakout:hz=10000")));
    emu_card_destroy(c);
}

/* stim: ECHO takes only 0 and 1; LAST_TAG and LAST_TIME are read-only;
 * LAST_TIME's two halves are the echo's receipt time. */
TEST(emu_stim_registers)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=stim,heartbeat:hz=1000,memusage:enable=0");
    REQUIRE(c);
    oni_device_t t[8];
    int n = table_read(c, t, 8);
    uint32_t stim = find_id(t, n, ONIX_ONIGPU_STIM), hb = find_id(t, n, ONIX_HEARTBEAT), v = 0;
    CHECK_EQ(reg_set(c, stim, EMU_REG_DEVICE, 2), ONI_SIG_CONFIGWNACK);
    CHECK_EQ(reg_set(c, stim, EMU_REG_DEVICE + 1, 1), ONI_SIG_CONFIGWNACK); /* values ECHO would take */
    CHECK_EQ(reg_set(c, stim, EMU_REG_DEVICE + 2, 0), ONI_SIG_CONFIGWNACK);
    CHECK_EQ(reg_get(c, stim, EMU_REG_DEVICE, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 1);
    start(c);
    static struct frame f;
    for (int k = 0; k < 10; k++) /* 10 ms of acquisition: past 2^16 ticks */
        REQUIRE(dev_frame(c, hb, &f) == 0);
    uint32_t w = 77, lo = 0, hi = 1;
    CHECK_RC(write_frame(c, EMU_STREAM_WRITE, stim, &w, 1), 12);
    REQUIRE(dev_frame(c, stim, &f) == 0);
    uint64_t rt;
    memcpy(&rt, f.data + 8, 8);
    CHECK(rt > 65536);
    CHECK_EQ(reg_get(c, stim, EMU_REG_DEVICE + 2, &lo), ONI_SIG_CONFIGRACK);
    CHECK_EQ(reg_get(c, stim, EMU_REG_DEVICE + 3, &hi), ONI_SIG_CONFIGRACK);
    CHECK_EQ(((uint64_t)hi << 32) | lo, rt);
    emu_card_destroy(c);
}

/* testcore: RATE_KBPS saturates at 2^32 - 1 for rates above that many kB/s
 * (1 MiB frames, 5 TB/s: 4.8 M frames/s, under one per tick). */
TEST(emu_testcore_rate_register_saturates)
{
    struct emu_card *c = card_open("mode=fast;devices=testcore:bytes=1048576:rate=5000000000000,memusage:enable=0");
    REQUIRE(c);
    oni_device_t t[8];
    int n = table_read(c, t, 8);
    uint32_t core = find_id(t, n, ONIX_ONIGPU_TESTCORE), v = 0;
    CHECK_EQ(reg_get(c, core, EMU_REG_DEVICE, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, UINT32_MAX);
    emu_card_destroy(c);
}

/* testsink: HASH is FNV-1a (32-bit, basis 2166136261) of the payload bytes
 * in order, NACKed without hash=1; the words-received count is 64-bit (low
 * and high registers). */
TEST(emu_testsink_hash_and_word_count)
{
    struct emu_card *c = card_open("mode=fast;devices=testsink:hash=1,testsink,memusage:enable=0");
    REQUIRE(c);
    oni_device_t t[8];
    int n = table_read(c, t, 8);
    uint32_t hashed = UINT32_MAX, plain = UINT32_MAX, v = 0;
    for (int i = 0; i < n; i++)
        if (t[i].id == ONIX_ONIGPU_TESTSINK)
            *(hashed == UINT32_MAX ? &hashed : &plain) = t[i].idx;
    REQUIRE(plain != UINT32_MAX);
    uint32_t w[60] = {0x04030201u, 0x08070605u};
    CHECK_RC(write_frame(c, EMU_STREAM_WRITE, hashed, w, 2), 16);
    CHECK_EQ(reg_get(c, hashed, EMU_REG_DEVICE + 2, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 671377293u); /* FNV-1a of the bytes 1..8 */
    CHECK_EQ(reg_get(c, plain, EMU_REG_DEVICE + 2, &v), ONI_SIG_CONFIGRNACK);
    uint64_t words = 0;
    while (words < 70000) {
        CHECK_RC(write_frame(c, EMU_STREAM_WRITE, plain, w, 60), 8 + 240);
        words += 60;
    }
    CHECK_EQ(reg_get(c, plain, EMU_REG_DEVICE, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, words);
    CHECK_EQ(reg_get(c, plain, EMU_REG_DEVICE + 1, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 0);
    emu_card_destroy(c);
}

/* loadtest: FRAME_WORDS starts at (bytes - 8) / 2 and reads back what was
 * written at once, but the frames keep their size, every word 42, until the
 * next RESET; its largest value is accepted; hz goes up to 2.5x10^7. */
TEST(emu_loadtest_frame_words_and_payload)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=loadtest:bytes=64:hz=25000000,memusage:enable=0");
    REQUIRE(c);
    oni_device_t t[8];
    int n = table_read(c, t, 8);
    uint32_t lt = find_id(t, n, ONIX_LOADTEST), v = 0;
    CHECK_EQ(reg_get(c, lt, ONIX_LOADTEST_FRAME_WORDS, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 28);
    CHECK_EQ(reg_get(c, lt, EMU_REG_RATE_HZ, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 25000000);
    CHECK_EQ(reg_set(c, lt, ONIX_LOADTEST_FRAME_WORDS, 524284), ONI_SIG_CONFIGWACK);
    CHECK_EQ(reg_set(c, lt, ONIX_LOADTEST_FRAME_WORDS, 524285), ONI_SIG_CONFIGWNACK);
    CHECK_EQ(reg_set(c, lt, ONIX_LOADTEST_FRAME_WORDS, 4), ONI_SIG_CONFIGWACK);
    CHECK_EQ(reg_get(c, lt, ONIX_LOADTEST_FRAME_WORDS, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 4);
    start(c);
    static struct frame f;
    for (int k = 0; k < 3; k++) {
        REQUIRE(dev_frame(c, lt, &f) == 0);
        CHECK_EQ(f.sz, 64);
        for (int i = 0; i < 28; i++) {
            uint16_t w;
            memcpy(&w, f.data + 8 + 2 * i, 2);
            CHECK_EQ(w, 42);
        }
    }
    emu_card_destroy(c);
}

/* memusage: MEM_WORDS saturates at 2^32 - 1 (ddr=64G: 16 Gi words); hz is
 * 1..10^5; FILL_GPU_KIB and DROPPED_GPU are the GPU stream's. */
TEST(emu_memusage_registers_per_stream)
{
    struct emu_card *c = card_open("mode=fast;ddr=64G;devices=memusage");
    REQUIRE(c);
    oni_device_t t[4];
    int n = table_read(c, t, 4);
    uint32_t mu = find_id(t, n, ONIX_MEMUSAGE), v = 0;
    CHECK_EQ(reg_get(c, mu, ONIX_MEMUSAGE_MEM_WORDS, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, UINT32_MAX);
    CHECK_EQ(reg_set(c, mu, EMU_REG_RATE_HZ, 100000), ONI_SIG_CONFIGWACK);
    CHECK_EQ(reg_set(c, mu, EMU_REG_RATE_HZ, 100001), ONI_SIG_CONFIGWNACK);
    emu_card_destroy(c);
    struct emu_card *bad = NULL;
    char err[200];
    CHECK_RC(emu_card_create("devices=memusage:hz=100001", &bad, err, sizeof err), ONI_EINVALARG);
}

/* memusage's device block: FILL_DATA_KIB/FILL_GPU_KIB and
 * DROPPED_DATA/DROPPED_GPU are each stream's own (the GPU stream here fills
 * its FIFO and drops; the default stream is read). */
TEST(emu_memusage_fill_and_drops_per_stream)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;ddr=64K;devices=testcore:bytes=1024:rate=100M:route=1,"
                                   "heartbeat:hz=1000,memusage:enable=0");
    REQUIRE(c);
    oni_device_t t[8];
    int n = table_read(c, t, 8);
    uint32_t mu = find_id(t, n, ONIX_MEMUSAGE), hb = find_id(t, n, ONIX_HEARTBEAT), v = 0;
    start(c);
    static struct frame f;
    for (int k = 0; k < 50; k++) /* 50 ms: the test core makes ~4900 frames of 1 KiB for the GPU stream */
        REQUIRE(dev_frame(c, hb, &f) == 0);
    onigpu_stream_stats_t st;
    emu_card_stats(c, &st);
    REQUIRE(st.dropped_frames[1] > 0);
    CHECK(st.fifo_bytes[1] >= 16384); /* most of its 32 KiB FIFO (ddr is both FIFOs') */
    CHECK_EQ(reg_get(c, mu, EMU_REG_DEVICE, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, st.fifo_bytes[0] >> 10);
    CHECK_EQ(reg_get(c, mu, EMU_REG_DEVICE + 1, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, st.fifo_bytes[1] >> 10);
    CHECK_EQ(reg_get(c, mu, EMU_REG_DEVICE + 3, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, st.dropped_frames[0]);
    CHECK_EQ(reg_get(c, mu, EMU_REG_DEVICE + 4, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, (uint32_t)st.dropped_frames[1]);
    emu_card_destroy(c);
}
