/* test_emu_clock.c - the emulated card's time: every device at its rate,
 * timestamps in acquisition ticks, exact schedules after a rate change or a
 * restart, the clock divider, ties between devices. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include "test_emu_util.h"
#include "unit.h"

/* --- rates and timestamps ---------------------------------------------------- */

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
                                   "testcore:bytes=4096:rate=100M,loadtest:hz=5000,memusage:hz=250,analogio");
    REQUIRE(c);
    static const struct rate_case want[] = {
        {ONIX_ONIGPU_NEUROPIX2, 30000}, {ONIX_NEUROPIX1R0, 2500}, {ONIX_RHD2164, 30000},
        {ONIX_BNO055, 100},             {ONIX_HEARTBEAT, 1000},  {ONIX_ONIGPU_TESTCORE, 100e6 / 4096},
        {ONIX_LOADTEST, 5000},          {ONIX_MEMUSAGE, 250},    {ONIX_FMCANALOG1R3, 100000},
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
    card_start(c);
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

/* The fastest rate a device may have, one frame per acquisition tick (a
 * test core of 8-byte frames at 2 GB/s), is accepted and its frames are
 * stamped at consecutive ticks; one byte/s more is refused. Guards
 * emu_dev_set_rate's bound (rate > one per tick, not >=). */
TEST(emu_one_frame_per_tick_is_the_fastest_rate)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=testcore:bytes=8:rate=2G,memusage:enable=0");
    REQUIRE(c);
    card_start(c);
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
    card_start(c);
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
    card_start(c);
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

/* --- rate changes and restarts ----------------------------------------------- */

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
    card_start(c);
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
    card_start(c);
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
        card_start(c);
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

/* Fast mode: a stop and a new start move the clock on past the last frame,
 * so a reader that read every frame of one run sees the next run's first
 * frame later, never at the same tick. Guards the start at gen_now + 1. */
TEST(emu_fast_restart_moves_past_the_last_frame)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=heartbeat:hz=1000,memusage:enable=0");
    REQUIRE(c);
    card_start(c);
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
    card_start(c);
    REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, TMO) == 0);
    CHECK(f.time > last);
    emu_card_destroy(c);
}
