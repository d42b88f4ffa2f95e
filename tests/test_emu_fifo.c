/* test_emu_fifo.c - the emulated card's FIFOs (card.h): what a read may ask
 * for, routing to the GPU stream, overflow accounting per stream, flushes
 * under held bytes, the ring's wrap and restart, backlogs and their pages. */
#include <stdlib.h>
#include <unistd.h>
#include "test_emu_util.h"
#include "unit.h"

/* --- reads and routing ------------------------------------------------------- */

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
    card_start(c);
    static uint8_t buf[4096];
    CHECK_RC(emu_card_read(c, EMU_STREAM_DATA, buf, 4096, TMO), ONI_EINVALARG);
    CHECK_RC(emu_card_read(c, EMU_STREAM_DATA, buf, 3085, TMO), ONI_EINVALARG);
    CHECK_RC(emu_card_read(c, EMU_STREAM_DATA, buf, 3084, TMO), 3084);
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
    card_start(c);
    uint8_t buf[64];
    CHECK_RC(emu_card_read_some(c, EMU_STREAM_DATA, buf, 16, 8, TMO), ONI_EINVALARG);
    CHECK_RC(emu_card_read_some(c, EMU_STREAM_DATA, buf, 16, 16, TMO), 16);
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
    card_start(c);
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

/* Padding after a payload that is not a whole number of words is zero,
 * also where the ring reuses memory that held other frames' bytes (a load
 * tester of 18-byte payloads, 36-byte frames, in a 4 KiB FIFO, so the
 * padding lands on old headers and payload). Guards put_frame's memset. */
TEST(emu_frame_padding_is_zero_in_reused_memory)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;ddr=8K;devices=loadtest:bytes=18:hz=1M,memusage:enable=0");
    REQUIRE(c);
    card_start(c);
    static struct frame f;
    int nonzero = 0;
    for (int i = 0; i < 2000; i++) {
        REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, TMO) == 0);
        REQUIRE(f.sz == 18);
        nonzero += f.data[18] || f.data[19];
    }
    CHECK_EQ(nonzero, 0);
    emu_card_destroy(c);
}

/* --- overflow ---------------------------------------------------------------- */

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
    card_start(c);
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
    card_start(c);
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

/* A frame that fills the FIFO to the last byte goes in: in a 4 KiB FIFO,
 * four 1 KiB frames (16 + 1008 bytes) fit and only the rest of the burst is
 * dropped. Guards emu_fifo_reserve's room check (cap - fill < n, not <=). */
TEST(emu_frame_that_fills_the_fifo_exactly_is_kept)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;ddr=8K;devices=testcore:bytes=1008:rate=1G,memusage:enable=0");
    REQUIRE(c);
    oni_device_t t[4];
    uint32_t core = find_id(t, table_read(c, t, 4), ONIX_ONIGPU_TESTCORE);
    card_start(c);
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

/* --- flushes and held bytes -------------------------------------------------- */

/* Bytes the DMA engine holds (peeked, a copy may still be reading them) are
 * not written over when a RESET and a new start empty the FIFO while they are
 * held: the card fills the rest of the ring, drops what does not fit, and the
 * holder's consume afterwards drops the old bytes and starts the new data at
 * a frame. */
TEST(emu_flush_keeps_held_bytes)
{
    struct emu_card *c = card_open("mode=realtime;link=unlimited;ddr=64K;devices=testcore:bytes=1024:rate=10M:route=1");
    REQUIRE(c);
    card_start(c);
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
    card_start(c);
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
    card_start(c);
    struct emu_span sp[2];
    REQUIRE(emu_card_fifo_peek(c, EMU_STREAM_GPU, 4 * (16 + 1024), sp, TMO) == 0);
    uint64_t flushes = emu_card_flushes(c);
    REQUIRE(table_read(c, t, 4) > 0); /* RESET: a flush */
    CHECK_EQ(reg_get(c, core, EMU_REG_DEVICE + 2, &lo), ONI_SIG_CONFIGRACK); /* the next counter value */
    CHECK_EQ(reg_get(c, core, EMU_REG_DEVICE + 3, &hi), ONI_SIG_CONFIGRACK);
    card_start(c); /* and another */
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

/* RESET empties both data FIFOs, the GPU stream's too (a stop alone keeps
 * the GPU stream's frames readable). Guards the RESET's flush of fifo[1]. */
TEST(emu_reset_empties_the_gpu_stream)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;ddr=1M;devices=testcore:bytes=1024:rate=1G:route=1");
    REQUIRE(c);
    card_start(c);
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

/* --- the ring: continuity, restarts, backlogs -------------------------------- */

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
    card_start(c);
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
    card_start(c);
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
    card_start(c);
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
    card_start(c);
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
    card_start(c);
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
