/* test_oni_frames.c - the data streams: frames across block boundaries for
 * many block sizes, short driver reads and every data_sz % 4; frame lifetime
 * across refills and past oni_destroy_ctx; bad frames; flush on RUNNING;
 * timeouts; write frame validation and wire format. */
#include "drivers/fixture.h"
#include "unit.h"

static const oni_device_t devs[] = {
    {1, 10, 1, 4, 0},      {2, 10, 1, 5, 0},      {3, 10, 1, 6, 0},   {4, 10, 1, 7, 0},
    {0x100, 10, 1, 1, 0},  {0x101, 10, 1, 2, 0},  {0x102, 10, 1, 3, 0},
    {0x200, 10, 1, 64, 0}, {0x201, 10, 1, 33, 0},
    {0x300, 8, 1, 0, 8},   {0x301, 8, 1, 12, 6},
};
#define NDEV (sizeof devs / sizeof devs[0])
#define MAXRFRAME (16 + 64)

static uint32_t rng = 777;
static uint32_t rnd(void)
{
    rng = rng * 1103515245u + 12345u;
    return rng >> 8;
}

/* A stream of n frames from readable devices in a pseudo-random order; frame
 * i has time base + i. Returns its length; idx[i] says which device. */
static size_t make_stream(uint8_t *buf, uint32_t *idx, int n, uint64_t base)
{
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        const oni_device_t *d;
        do
            d = &devs[rnd() % NDEV];
        while (d->read_size == 0);
        idx[i] = d->idx;
        len += fx_frame(buf + len, base + (uint64_t)i, d->idx, d->read_size);
    }
    return len;
}

static uint32_t rsize(uint32_t idx)
{
    for (size_t i = 0; i < NDEV; i++)
        if (devs[i].idx == idx)
            return devs[i].read_size;
    return 0;
}

static oni_ctx open_ctx(void)
{
    oni_ctx ctx = fx_open(devs, NDEV, 1);
    if (ctx && fx_set_u32(ctx, SCR_OPT_EMPTY, SCR_EMPTY_TIMEOUT)) {
        oni_destroy_ctx(ctx);
        ctx = NULL;
    }
    return ctx;
}

#define NFR 400

TEST(frames_across_blocks)
{
    static uint8_t stream[NFR * MAXRFRAME];
    static uint32_t idx[NFR];
    static oni_frame_t *kept[NFR];
    static const uint32_t blocks[] = {80, 84, 88, 92, 100, 128, 252, 256, 260, 1000, 4096, 65536};
    static const uint32_t chunks[] = {0, 1, 3, 5, 13, 80};
    size_t len = make_stream(stream, idx, NFR, 1000);
    oni_ctx ctx = open_ctx();
    REQUIRE(ctx);
    uint32_t v;
    size_t n = 4;
    REQUIRE(oni_get_opt(ctx, ONI_OPT_BLOCKREADSIZE, &v, &n) == 0);
    CHECK_EQ(v, MAXRFRAME);
    for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++) {
        for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
            REQUIRE(oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &blocks[b], 4) == 0);
            REQUIRE(fx_set_u32(ctx, SCR_OPT_CHUNK, chunks[c]) == 0);
            REQUIRE(oni_set_driver_opt(ctx, SCR_OPT_DATA, stream, len) == 0);
            int bad = 0;
            for (int i = 0; i < NFR; i++) {
                oni_frame_t *f = NULL;
                int rc = oni_read_frame(ctx, &f);
                uint32_t sz = rsize(idx[i]);
                if (rc != fx_answer(sz) || !fx_check(f, 1000 + (uint64_t)i, idx[i], sz)) {
                    UNIT_FAIL("block %u chunk %u frame %d: rc %d", blocks[b], chunks[c], i, rc);
                    bad = 1;
                    if (rc > 0)
                        oni_destroy_frame(f);
                    break;
                }
                kept[i] = f;
            }
            if (bad)
                return;
            /* Every frame still right after all later refills. */
            for (int i = 0; i < NFR; i++)
                if (!fx_check(kept[i], 1000 + (uint64_t)i, idx[i], rsize(idx[i])))
                    UNIT_FAIL("block %u chunk %u: frame %d changed", blocks[b], chunks[c], i);
            for (int i = 0; i < NFR; i++)
                oni_destroy_frame(kept[i]);
            oni_frame_t *f;
            CHECK_RC(oni_read_frame(ctx, &f), ONI_ETIMEOUT); /* stream is over */
        }
    }
    oni_destroy_ctx(ctx);
}

/* Devices whose home slots in the library's read-path map collide, so that
 * some are found only by probing further (the fast path hands those to the
 * slow one), plus one at the top index 0xFFFFFFFF: all are read alike, and
 * a size one off from a device's is still refused. Whether slots collide is
 * computed here with the map's own rule (context.c build_map: 4n slots
 * rounded up to a power of two, home = the top bits of idx * 0x9E3779B1),
 * so that the test says so if a change of the rule makes it test nothing. */
static int homes_collide(const oni_device_t *d, uint32_t n)
{
    uint32_t bits = 4;
    while ((1u << bits) < 4 * n)
        bits++;
    static uint8_t used[1u << 12];
    if ((1u << bits) > sizeof used)
        return 0; /* a table this test was not written for */
    memset(used, 0, sizeof used);
    int collide = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t h = (d[i].idx * 0x9E3779B1u) >> (32 - bits);
        collide |= used[h];
        used[h] = 1;
    }
    return collide;
}

TEST(many_devices_sharing_map_slots)
{
    enum { NBIG = 512, NFRAMES = 3000 };
    static oni_device_t big[NBIG];
    static uint8_t stream[NFRAMES * (16 + 40) + 64];
    static uint32_t which[NFRAMES];
    for (uint32_t i = 0; i < NBIG - 1; i++)
        big[i] = (oni_device_t){i * 2048u, 10, 1, 1 + i % 40, 0};
    big[NBIG - 1] = (oni_device_t){0xFFFFFFFFu, 10, 1, 12, 0};
    CHECK(homes_collide(big, NBIG));
    size_t len = 0;
    for (int i = 0; i < NFRAMES; i++) {
        which[i] = rnd() % NBIG;
        len += fx_frame(stream + len, (uint64_t)i, big[which[i]].idx, big[which[i]].read_size);
    }
    len += fx_frame(stream + len, 0, big[7].idx, big[7].read_size + 1);
    oni_ctx ctx = fx_open(big, NBIG, 1);
    REQUIRE(ctx);
    REQUIRE(fx_set_u32(ctx, SCR_OPT_EMPTY, SCR_EMPTY_TIMEOUT) == 0);
    uint32_t block = 4096;
    REQUIRE(oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &block, 4) == 0);
    REQUIRE(oni_set_driver_opt(ctx, SCR_OPT_DATA, stream, len) == 0);
    for (int i = 0; i < NFRAMES; i++) {
        const oni_device_t *d = &big[which[i]];
        oni_frame_t *f = NULL;
        int rc = oni_read_frame(ctx, &f);
        if (rc != fx_answer(d->read_size) || !fx_check(f, (uint64_t)i, d->idx, d->read_size)) {
            UNIT_FAIL("frame %d of device 0x%x: rc %d", i, d->idx, rc);
            if (rc > 0)
                oni_destroy_frame(f);
            break;
        }
        oni_destroy_frame(f);
    }
    oni_frame_t *f;
    CHECK_RC(oni_read_frame(ctx, &f), ONI_EBADFRAME);
    oni_destroy_ctx(ctx);
}

TEST(thousand_frames_live_across_refills)
{
    static uint8_t pattern[64 * MAXRFRAME];
    uint32_t idx[64];
    size_t len = make_stream(pattern, idx, 64, 0);
    oni_ctx ctx = open_ctx();
    REQUIRE(ctx);
    REQUIRE(fx_set_u32(ctx, SCR_OPT_REPEAT, 1) == 0);
    REQUIRE(oni_set_driver_opt(ctx, SCR_OPT_DATA, pattern, len) == 0);
    static oni_frame_t *kept[1000];
    long total = 0;
    for (int i = 0; i < 1000; i++, total++) {
        REQUIRE(oni_read_frame(ctx, &kept[i]) > 0);
    }
    /* Many refills while those 1000 stay alive (the block size is the minimum). */
    for (int i = 0; i < 50000; i++, total++) {
        oni_frame_t *f;
        int rc = oni_read_frame(ctx, &f);
        REQUIRE(rc > 0);
        if (!fx_check(f, (uint64_t)(total % 64), idx[total % 64], rsize(idx[total % 64])))
            UNIT_FAIL("frame %ld wrong", total);
        oni_destroy_frame(f);
    }
    for (int i = 0; i < 1000; i++)
        if (!fx_check(kept[i], (uint64_t)(i % 64), idx[i % 64], rsize(idx[i % 64])))
            UNIT_FAIL("kept frame %d changed", i);
    /* Give them back in a scrambled order. */
    for (int i = 0; i < 1000; i++) {
        int j = (int)(rnd() % 1000);
        oni_frame_t *t = kept[i];
        kept[i] = kept[j];
        kept[j] = t;
    }
    for (int i = 0; i < 1000; i++)
        oni_destroy_frame(kept[i]);
    oni_destroy_ctx(ctx);
}

/* Frame descriptors belong to their block, 256 to a segment: a block with
 * more frames than that, all alive, then reused with its segments once
 * they are destroyed. */
TEST(many_live_frames_of_one_block)
{
    static uint8_t pattern[64 * MAXRFRAME];
    uint32_t idx[64];
    size_t len = make_stream(pattern, idx, 64, 0);
    oni_ctx ctx = open_ctx();
    REQUIRE(ctx);
    uint32_t block = 65536; /* ~1500 frames of this stream */
    REQUIRE(oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &block, 4) == 0);
    REQUIRE(fx_set_u32(ctx, SCR_OPT_REPEAT, 1) == 0);
    REQUIRE(oni_set_driver_opt(ctx, SCR_OPT_DATA, pattern, len) == 0);
    static oni_frame_t *kept[3000];
    long total = 0;
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 3000; i++, total++)
            REQUIRE(oni_read_frame(ctx, &kept[i]) > 0);
        for (int i = 0; i < 3000; i++) {
            long t = total - 3000 + i;
            if (!fx_check(kept[i], (uint64_t)(t % 64), idx[t % 64], rsize(idx[t % 64])))
                UNIT_FAIL("round %d: kept frame %d wrong", round, i);
        }
        for (int i = 2999; i >= 0; i--)
            oni_destroy_frame(kept[i]);
    }
    oni_destroy_ctx(ctx);
}

TEST(frames_outlive_context)
{
    static uint8_t stream[20 * MAXRFRAME];
    uint32_t idx[20];
    size_t len = make_stream(stream, idx, 20, 50);
    oni_ctx ctx = open_ctx();
    REQUIRE(ctx);
    REQUIRE(oni_set_driver_opt(ctx, SCR_OPT_DATA, stream, len) == 0);
    oni_frame_t *f[20];
    for (int i = 0; i < 20; i++)
        REQUIRE(oni_read_frame(ctx, &f[i]) > 0);
    for (int i = 0; i < 10; i++)
        oni_destroy_frame(f[i]);
    CHECK_RC(oni_destroy_ctx(ctx), 0);
    for (int i = 10; i < 20; i++) {
        CHECK(fx_check(f[i], 50 + (uint64_t)i, idx[i], rsize(idx[i])));
        oni_destroy_frame(f[i]); /* the last one frees the pool (ASan checks) */
    }
}

/* Read one frame expecting rc (for a frame: the bytes it takes in the
 * stream, header and padding included, whose answer is upstream's
 * fx_answer); check it against (time, idx) if it is one. */
static void expect(oni_ctx ctx, int want, uint64_t time, uint32_t idx)
{
    oni_frame_t *f = NULL;
    int rc = oni_read_frame(ctx, &f);
    if (want > 0) {
        CHECK_EQ(want, (int)(16 + ((rsize(idx) + 3) & ~3u))); /* the caller's count is the stream's */
        want = fx_answer(rsize(idx));
    }
    CHECK_RC(rc, want);
    if (rc > 0) {
        CHECK(fx_check(f, time, idx, rsize(idx)));
        oni_destroy_frame(f);
    }
}

TEST(bad_frames_keep_the_stream)
{
    uint8_t s[2048];
    size_t len = 0;
    len += fx_frame(s + len, 1, 3, 6);          /* good */
    len += fx_frame(s + len, 2, 0x999, 8);      /* unknown device */
    len += fx_frame(s + len, 3, 0x200, 64);     /* good */
    len += fx_frame(s + len, 4, 1, 12);         /* known device, wrong size */
    len += fx_frame(s + len, 5, 0x102, 3);      /* good */
    len += fx_frame(s + len, 6, 0x300, 8);      /* write-only device */
    len += fx_frame(s + len, 7, 4, 7);          /* good */
    memset(s + len, 0xFF, 4);                   /* a stray word */
    len += 4;
    len += fx_frame(s + len, 0, 0x101, 2);      /* good */
    memset(s + len, 0xFF, 16);                  /* a garbage header */
    len += 16;
    len += fx_frame(s + len, 0, 0x201, 33);     /* good */
    oni_ctx ctx = open_ctx();
    REQUIRE(ctx);
    uint32_t block = 4096;
    REQUIRE(oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &block, 4) == 0);
    REQUIRE(oni_set_driver_opt(ctx, SCR_OPT_DATA, s, len) == 0);
    expect(ctx, 16 + 8, 1, 3);
    expect(ctx, ONI_EBADFRAME, 0, 0);
    expect(ctx, 16 + 64, 3, 0x200);
    expect(ctx, ONI_EBADFRAME, 0, 0);
    expect(ctx, 16 + 4, 5, 0x102);
    expect(ctx, ONI_EBADFRAME, 0, 0);
    expect(ctx, 16 + 8, 7, 4);
    expect(ctx, ONI_EBADFRAME, 0, 0);
    expect(ctx, 16 + 4, 0, 0x101);
    expect(ctx, ONI_EBADFRAME, 0, 0);
    expect(ctx, 16 + 36, 0, 0x201);
    expect(ctx, ONI_ETIMEOUT, 0, 0);
    /* Pure garbage: an error per block's worth, never a frame, never a hang. */
    memset(s, 0xEE, sizeof s);
    REQUIRE(oni_set_driver_opt(ctx, SCR_OPT_DATA, s, sizeof s) == 0);
    int bad = 0, rc;
    oni_frame_t *f;
    while ((rc = oni_read_frame(ctx, &f)) == ONI_EBADFRAME)
        bad++;
    CHECK_RC(rc, ONI_ETIMEOUT);
    CHECK(bad >= 1 && bad <= (int)(sizeof s / 4096) + 2);
    oni_destroy_ctx(ctx);
}

TEST(running_flushes_buffered_data)
{
    uint8_t s[10 * MAXRFRAME];
    uint32_t idx[10];
    size_t len = make_stream(s, idx, 10, 0);
    oni_ctx ctx = open_ctx();
    REQUIRE(ctx);
    uint32_t v = 4096;
    REQUIRE(oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &v, 4) == 0);
    REQUIRE(oni_set_driver_opt(ctx, SCR_OPT_DATA, s, len) == 0);
    expect(ctx, (int)(16 + ((rsize(idx[0]) + 3) & ~3u)), 0, idx[0]);
    v = 1;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &v, 4), 0);
    expect(ctx, ONI_ETIMEOUT, 0, 0); /* the other 9 were buffered: gone */
    REQUIRE(oni_set_driver_opt(ctx, SCR_OPT_DATA, s, len) == 0);
    expect(ctx, (int)(16 + ((rsize(idx[0]) + 3) & ~3u)), 0, idx[0]);
    v = 0;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &v, 4), 0);
    expect(ctx, ONI_ETIMEOUT, 0, 0);
    oni_destroy_ctx(ctx);
}

TEST(read_timeouts)
{
    oni_ctx ctx = open_ctx();
    REQUIRE(ctx);
    uint32_t ms = 100;
    REQUIRE(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &ms, 4) == 0);
    oni_frame_t *f;
    /* A driver with nothing that returns 0 bytes: the core's deadline. */
    REQUIRE(fx_set_u32(ctx, SCR_OPT_EMPTY, SCR_EMPTY_ZERO) == 0);
    uint64_t t0 = oni_now_ns();
    CHECK_RC(oni_read_frame(ctx, &f), ONI_ETIMEOUT);
    uint64_t el = (oni_now_ns() - t0) / 1000000;
    CHECK(el >= 95 && el < 1000);
    /* A driver that waits on its own, told the timeout by the core. */
    REQUIRE(fx_set_u32(ctx, SCR_OPT_EMPTY, SCR_EMPTY_WAIT) == 0);
    t0 = oni_now_ns();
    CHECK_RC(oni_read_frame(ctx, &f), ONI_ETIMEOUT);
    el = (oni_now_ns() - t0) / 1000000;
    CHECK(el >= 95 && el < 1000);
    /* A frame that arrives half: timeout, then the rest arrives and it comes out whole. */
    uint8_t s[MAXRFRAME];
    size_t len = fx_frame(s, 9, 0x200, 64);
    REQUIRE(fx_set_u32(ctx, SCR_OPT_EMPTY, SCR_EMPTY_TIMEOUT) == 0);
    REQUIRE(oni_set_driver_opt(ctx, SCR_OPT_DATA, s, 30) == 0);
    CHECK_RC(oni_read_frame(ctx, &f), ONI_ETIMEOUT);
    REQUIRE(oni_set_driver_opt(ctx, SCR_OPT_DATA, s + 30, len - 30) == 0);
    expect(ctx, 80, 9, 0x200);
    oni_destroy_ctx(ctx);
}

TEST(no_readable_devices)
{
    oni_device_t w[1] = {{7, 8, 1, 0, 4}};
    oni_ctx ctx = fx_open(w, 1, 1);
    REQUIRE(ctx);
    oni_frame_t *f;
    CHECK_RC(oni_read_frame(ctx, &f), ONI_ENOREADDEV);
    CHECK_RC(oni_read_frame(ctx, NULL), ONI_EINVALARG);
    oni_destroy_ctx(ctx);
}

static size_t written(oni_ctx ctx, uint8_t *buf, size_t cap)
{
    size_t n = cap;
    return oni_get_driver_opt(ctx, SCR_OPT_WRITTEN, buf, &n) == 0 ? n : 0;
}

TEST(write_frames)
{
    oni_ctx ctx = open_ctx();
    REQUIRE(ctx);
    uint8_t data[16000], out[20000];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 5 + 3);
    oni_frame_t *f = NULL;
    CHECK_RC(oni_create_frame(ctx, &f, 0x999, data, 8), ONI_EDEVIDX);
    CHECK_RC(oni_create_frame(ctx, &f, 1, data, 8), ONI_ENOTWRITEDEV);
    /* 0 bytes are a multiple of any write size, as upstream takes it: a
     * frame of the header alone (api/liboni/oni.c:730). */
    CHECK_RC(oni_create_frame(ctx, &f, 0x300, data, 0), fx_answer(0));
    oni_destroy_frame(f);
    CHECK_RC(oni_create_frame(ctx, &f, 0x300, data, 12), ONI_EWRITESIZE);
    CHECK_RC(oni_create_frame(ctx, &f, 0x301, data, 8), ONI_EWRITESIZE);
    CHECK_RC(oni_create_frame(ctx, NULL, 0x300, data, 8), ONI_EINVALARG);
    CHECK_RC(oni_create_frame(ctx, &f, 0x300, NULL, 8), ONI_EINVALARG);
    CHECK_RC(oni_write_frame(ctx, NULL), ONI_EINVALARG);

    /* 0x301 takes 6-byte units: 12 bytes -> 3 words; 6 bytes -> 2 words with 2 pad bytes. */
    /* Answers as upstream's: create 24 + data_sz + data_sz % 4, write the
     * header and data_sz bytes (api/liboni/oni.c:739-744, 789-793), though
     * the stream gets the padded frame. */
    CHECK_RC(oni_create_frame(ctx, &f, 0x301, data, 6), 24 + 6 + 2);
    CHECK_EQ(f->dev_idx, 0x301);
    CHECK_EQ(f->data_sz, 6);
    CHECK(memcmp(f->data, data, 6) == 0);
    CHECK_RC(oni_write_frame(ctx, f), 14);
    oni_destroy_frame(f);
    REQUIRE(oni_create_frame(ctx, &f, 0x301, data, 12) > 0);
    CHECK_RC(oni_write_frame(ctx, f), 20);
    oni_destroy_frame(f);
    size_t n = written(ctx, out, sizeof out);
    REQUIRE(n == 36);
    uint32_t h[2];
    memcpy(h, out, 8);
    CHECK_EQ(h[0], 0x301);
    CHECK_EQ(h[1], 2);
    CHECK(memcmp(out + 8, data, 6) == 0);
    CHECK(out[14] == 0 && out[15] == 0);
    memcpy(h, out + 16, 8);
    CHECK_EQ(h[0], 0x301);
    CHECK_EQ(h[1], 3);
    CHECK(memcmp(out + 24, data, 12) == 0);

    /* A frame bigger than BLOCKWRITESIZE, through a driver taking 7 bytes a call. */
    REQUIRE(fx_set_u32(ctx, SCR_OPT_WRITECHUNK, 7) == 0);
    REQUIRE(oni_create_frame(ctx, &f, 0x300, data, 8 * 1000) > 0);
    CHECK_RC(oni_write_frame(ctx, f), 8008);
    oni_destroy_frame(f);
    n = written(ctx, out, sizeof out);
    REQUIRE(n == 36 + 8008);
    memcpy(h, out + 36, 8);
    CHECK_EQ(h[0], 0x300);
    CHECK_EQ(h[1], 2000);
    CHECK(memcmp(out + 44, data, 8000) == 0);

    /* Pooled write frames are reused, and may outlive the context. Frames
     * up to BLOCKWRITESIZE are pooled; the default is one largest frame. */
    uint32_t wblock = 4096;
    REQUIRE(oni_set_opt(ctx, ONI_OPT_BLOCKWRITESIZE, &wblock, 4) == 0);
    oni_frame_t *a, *b;
    REQUIRE(oni_create_frame(ctx, &a, 0x300, data, 8) > 0);
    oni_destroy_frame(a);
    REQUIRE(oni_create_frame(ctx, &b, 0x300, data + 8, 16) > 0);
    CHECK(a == b);
    CHECK(memcmp(b->data, data + 8, 16) == 0);
    /* A read frame is not a write frame. */
    uint8_t s[MAXRFRAME];
    size_t len = fx_frame(s, 1, 1, 4);
    REQUIRE(oni_set_driver_opt(ctx, SCR_OPT_DATA, s, len) == 0);
    REQUIRE(oni_read_frame(ctx, &f) > 0);
    CHECK_RC(oni_write_frame(ctx, f), ONI_EINVALARG);
    oni_destroy_frame(f);
    oni_destroy_ctx(ctx);
    CHECK(memcmp(b->data, data + 8, 16) == 0);
    oni_destroy_frame(b);
}

/* A write that times out after the driver took part of its frame: the rest
 * goes out first with the next write, so the stream holds whole frames in
 * order; a write that finds even that rest stuck sends nothing of its own. */
TEST(write_cut_short_keeps_whole_frames)
{
    oni_ctx ctx = open_ctx();
    REQUIRE(ctx);
    uint32_t ms = 50;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &ms, sizeof ms), 0);
    uint8_t a[8] = {1, 1, 1, 1, 1, 1, 1, 1}, b[8] = {2, 2, 2, 2, 2, 2, 2, 2}, c[8] = {3, 3, 3, 3, 3, 3, 3, 3};
    oni_frame_t *fa, *fb, *fc;
    REQUIRE(oni_create_frame(ctx, &fa, 0x300, a, 8) > 0);
    REQUIRE(oni_create_frame(ctx, &fb, 0x300, b, 8) > 0);
    REQUIRE(oni_create_frame(ctx, &fc, 0x300, c, 8) > 0);
    CHECK_RC(fx_set_u32(ctx, SCR_OPT_WRITEROOM, 11), 0); /* room for 11 of frame a's 16 bytes */
    CHECK_RC(oni_write_frame(ctx, fa), ONI_ETIMEOUT);
    CHECK_RC(oni_write_frame(ctx, fb), ONI_ETIMEOUT); /* a's rest is still stuck: b waits */
    CHECK_RC(fx_set_u32(ctx, SCR_OPT_WRITEROOM, UINT32_MAX), 0);
    CHECK_RC(oni_write_frame(ctx, fc), 16);
    uint8_t out[64], want[32];
    memcpy(want, (uint32_t[2]){0x300, 2}, 8);
    memcpy(want + 8, a, 8);
    memcpy(want + 16, (uint32_t[2]){0x300, 2}, 8);
    memcpy(want + 24, c, 8);
    CHECK_EQ(written(ctx, out, sizeof out), 32); /* a whole, then c; b was never sent */
    CHECK(memcmp(out, want, 32) == 0);
    oni_destroy_frame(fa);
    oni_destroy_frame(fb);
    oni_destroy_frame(fc);
    oni_destroy_ctx(ctx);
}

TEST(block_size_change_keeps_live_frames)
{
    static uint8_t s[60 * MAXRFRAME];
    uint32_t idx[60];
    size_t len = make_stream(s, idx, 60, 300);
    oni_ctx ctx = open_ctx();
    REQUIRE(ctx);
    REQUIRE(oni_set_driver_opt(ctx, SCR_OPT_DATA, s, len) == 0);
    oni_frame_t *f[60];
    static const uint32_t sizes[] = {4096, 80, 1000, 84};
    /* Change BLOCKREADSIZE every 15 frames: buffered bytes are dropped, the
     * frames already out stay whole. The first 4096-byte block takes the
     * whole stream from the driver, so after the first change nothing is
     * left: exactly the first 15 frames come out (60 if the bytes were kept). */
    REQUIRE(len <= 4096);
    int got = 0;
    for (int k = 0; k < 4; k++) {
        REQUIRE(oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &sizes[k], 4) == 0);
        for (int i = 0; i < 15; i++) {
            int rc = oni_read_frame(ctx, &f[got]);
            if (rc == ONI_ETIMEOUT)
                break;
            REQUIRE(rc > 0);
            got++;
        }
    }
    CHECK_EQ(got, 15);
    oni_frame_t *extra = NULL;
    CHECK_RC(oni_read_frame(ctx, &extra), ONI_ETIMEOUT); /* the dropped bytes stay dropped */
    /* the frames out before the changes are still whole and in order */
    for (int i = 0; i < got; i++) {
        CHECK_EQ(f[i]->time, 300 + (uint64_t)i);
        uint32_t t = (uint32_t)(f[i]->time - 300);
        CHECK(t < 60 && fx_check(f[i], 300 + t, idx[t], rsize(idx[t])));
        oni_destroy_frame(f[i]);
    }
    oni_destroy_ctx(ctx);
}

/* Garbage one word longer than BLOCKREADSIZE before a good frame: a call
 * drops at most a block's worth of bytes and says so (ONI_EBADFRAME), so
 * that a stream of garbage cannot keep one call busy for ever: two errors
 * here, then the frame. Guards the skip's bound (skipped < block_read; with
 * <= one call dropped the extra word too and reported one error). */
TEST(garbage_longer_than_a_block_is_reported_per_block)
{
    enum { BLOCK = 256 };
    uint8_t s[BLOCK + 4 + MAXRFRAME];
    memset(s, 0xEE, BLOCK + 4);
    size_t len = BLOCK + 4 + fx_frame(s + BLOCK + 4, 42, 3, 6);
    oni_ctx ctx = open_ctx();
    REQUIRE(ctx);
    uint32_t block = BLOCK;
    REQUIRE(oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &block, 4) == 0);
    REQUIRE(oni_set_driver_opt(ctx, SCR_OPT_DATA, s, len) == 0);
    expect(ctx, ONI_EBADFRAME, 0, 0); /* the first BLOCK bytes */
    expect(ctx, ONI_EBADFRAME, 0, 0); /* the word after them */
    expect(ctx, 16 + 8, 42, 3);
    expect(ctx, ONI_ETIMEOUT, 0, 0);
    oni_destroy_ctx(ctx);
}

/* A header of a device that is in the table but reads nothing (write-only,
 * read_size 0) with data_sz 0 is not a frame: such devices stay out of the
 * read path's map (context.c build_map skips them; if it did not, this
 * 16-byte header came out as an empty frame of device 0x300). */
TEST(empty_frame_of_a_write_only_device_is_bad)
{
    uint8_t s[2 * MAXRFRAME];
    size_t len = fx_frame(s, 1, 0x300, 0);
    len += fx_frame(s + len, 2, 0x102, 3);
    oni_ctx ctx = open_ctx();
    REQUIRE(ctx);
    uint32_t block = 4096;
    REQUIRE(oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &block, 4) == 0);
    REQUIRE(oni_set_driver_opt(ctx, SCR_OPT_DATA, s, len) == 0);
    expect(ctx, ONI_EBADFRAME, 0, 0);
    expect(ctx, 16 + 4, 2, 0x102);
    oni_destroy_ctx(ctx);
}

/* The padding of a write frame is zero on the wire also when the pooled
 * frame it reuses held other bytes there before (the frame of 12 bytes
 * leaves 0xFF where the 6-byte frame's 2 pad bytes go). Guards the memset
 * in oni_create_frame: a fresh frame's padding is often zero by luck. */
TEST(write_padding_is_zero_in_a_reused_frame)
{
    oni_ctx ctx = open_ctx();
    REQUIRE(ctx);
    uint8_t ff[12], six[6] = {1, 2, 3, 4, 5, 6}, out[64];
    memset(ff, 0xFF, sizeof ff);
    /* both frames fit a pooled frame: the default BLOCKWRITESIZE is one
     * largest write frame, and larger frames come from malloc */
    uint32_t wblock = 64;
    REQUIRE(oni_set_opt(ctx, ONI_OPT_BLOCKWRITESIZE, &wblock, 4) == 0);
    oni_frame_t *a, *b;
    REQUIRE(oni_create_frame(ctx, &a, 0x301, ff, 12) > 0);
    oni_destroy_frame(a);
    REQUIRE(oni_create_frame(ctx, &b, 0x301, six, 6) > 0);
    CHECK(a == b); /* the pool gave the same frame back: the test needs it */
    CHECK_RC(oni_write_frame(ctx, b), 14); /* 8 + data_sz, as upstream answers */
    oni_destroy_frame(b);
    REQUIRE(written(ctx, out, sizeof out) == 16);
    CHECK(memcmp(out + 8, six, 6) == 0);
    CHECK(out[14] == 0 && out[15] == 0);
    oni_destroy_ctx(ctx);
}

/* A write that times out before the driver took any byte of its frame sent
 * nothing, and keeps nothing: the next write sends only its own frame. (Had
 * it kept the whole frame as a rest, the next write would send that frame
 * after its caller was told ONI_ETIMEOUT, and a caller that retries would
 * see it twice.) Guards the "rc && done" in oni_write_frame. */
TEST(write_that_sent_nothing_keeps_nothing)
{
    oni_ctx ctx = open_ctx();
    REQUIRE(ctx);
    uint32_t ms = 50;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &ms, sizeof ms), 0);
    uint8_t a[8] = {1, 1, 1, 1, 1, 1, 1, 1}, c[8] = {3, 3, 3, 3, 3, 3, 3, 3}, out[64], want[16];
    oni_frame_t *fa, *fc;
    REQUIRE(oni_create_frame(ctx, &fa, 0x300, a, 8) > 0);
    REQUIRE(oni_create_frame(ctx, &fc, 0x300, c, 8) > 0);
    CHECK_RC(fx_set_u32(ctx, SCR_OPT_WRITEROOM, 0), 0); /* the stream takes nothing */
    CHECK_RC(oni_write_frame(ctx, fa), ONI_ETIMEOUT);
    CHECK_RC(fx_set_u32(ctx, SCR_OPT_WRITEROOM, UINT32_MAX), 0);
    CHECK_RC(oni_write_frame(ctx, fc), 16);
    memcpy(want, (uint32_t[2]){0x300, 2}, 8);
    memcpy(want + 8, c, 8);
    CHECK_EQ(written(ctx, out, sizeof out), 16); /* c alone */
    CHECK(memcmp(out, want, 16) == 0);
    oni_destroy_frame(fa);
    oni_destroy_frame(fc);
    oni_destroy_ctx(ctx);
}
