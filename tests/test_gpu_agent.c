/* test_gpu_agent.c - the DMA engine's GPU-resident agent (src/emu/dma_agent.h)
 * on a real GPU: the agent's copy for many sizes and relative alignments in
 * both directions (mapped host <-> GPU memory, bytes compared); card -> GPU
 * reads through the agent across its limit with the test core's counter
 * checked in GPU memory; GPU -> card writes; >= 10^5 randomized asynchronous
 * reads whose payload is checked only after their completion record is seen;
 * the kernel leaving when idle and coming back; CUDA calls that wait for the
 * whole device not stuck behind it; stop and destroy with jobs queued.
 * Skips without a CUDA device. */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include "unit.h"
#include "oni.h"
#include "emu/emu.h"
#include "emu/dma.h"
#include "emu/dma_agent.h"
#include "gpu/gpu.h"
#include "oni/util/clock.h"
#include "test_emu_util.h"
#include "xfer_check.h"

#define SPEC "devices=testcore:bytes=4096:rate=2G:route=1,testsink:hash=1;mode=fast;link=unlimited;ddr=256M"
#define LIMIT 65536u
/* a GPU-stream FIFO of 512 KiB, which wraps (struct wrap below) */
#define SPEC_1M "devices=testcore:bytes=4096:rate=2G:route=1,testsink;mode=fast;link=unlimited;ddr=1M"

static char why[200];

#define NEED_GPU()                                                                     \
    do {                                                                               \
        if (!gpu_available(why, sizeof why))                                           \
            SKIP("%s", why);                                                           \
    } while (0)

static struct emu_card *running_card(const char *spec)
{
    struct emu_card *c = card_open(spec);
    if (!c)
        return NULL;
    if (emu_card_write_config(c, ONI_CONFIG_RUNNING, 1)) {
        emu_card_destroy(c);
        return NULL;
    }
    return c;
}

/* xorshift: reproducible randomness */
static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* The test sink's hash h extended by the payloads of the write frames in
 * words[0, n) (each: device index, payload words, payload). */
static uint32_t payload_xsum(uint32_t h, const uint32_t *words, size_t n)
{
    for (size_t at = 0; at + 2 <= n; at += 2 + words[at + 1])
        h = xsum(h, (const uint8_t *)(words + at + 2), 4 * (size_t)words[at + 1]);
    return h;
}

/* The checker, started on the stream's first frame header (read to host memory). */
static int checker_start(struct emu_dma *d, struct xcheck *c)
{
    uint8_t hdr[16];
    int rc = emu_dma_read(d, hdr, sizeof hdr, 0, 2000);
    if (rc)
        return rc;
    uint32_t dev;
    memcpy(&dev, hdr + 8, 4);
    xcheck_init(c, dev);
    xcheck_feed(c, hdr, sizeof hdr);
    return 0;
}

TEST(gpu_agent_copies_every_alignment_both_ways)
{
    NEED_GPU();
    struct emu_agent *a = NULL;
    REQUIRE(emu_agent_start(&a) == 0);
    enum { CAP = 300000 };
    uint8_t *hmap = NULL, *dev = NULL, *ref = malloc(CAP), *back = malloc(CAP);
    void *hdev = NULL;
    REQUIRE(gpu_host_alloc((void **)&hmap, CAP) == 0);
    REQUIRE(gpu_alloc((void **)&dev, CAP) == 0);
    REQUIRE(emu_agent_devptr(hmap, &hdev) == 0);
    uint64_t seed = 42;
    for (size_t i = 0; i < CAP; i++)
        ref[i] = (uint8_t)rnd(&seed);
    static const size_t sizes[] = {1, 3, 4, 15, 16, 17, 64, 100, 4096, 4100, 8191, 65536, 65540, 262144};
    static const size_t offs[] = {0, 1, 4, 8, 12, 15};
    uint64_t end = oni_now_ns() + 10000000000ull, ticket = 0;
    int bad = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
        for (size_t i = 0; i < sizeof offs / sizeof *offs; i++)
            for (size_t j = 0; j < sizeof offs / sizeof *offs; j++) {
                size_t n = sizes[s], so = offs[i], dof = offs[j];
                /* host (mapped) -> GPU, as a card -> GPU read */
                memcpy(hmap, ref, CAP);
                CHECK_RC(gpu_memset(dev, 0xEE, CAP), 0);
                CHECK_RC(emu_agent_post(a, dev + dof, (uint8_t *)hdev + so, n, NULL, 0, 0, end, &ticket), 0);
                CHECK_RC(emu_agent_wait(a, ticket, end), 0);
                CHECK_RC(gpu_copy(back, dev, CAP), 0);
                int ok = !memcmp(back + dof, ref + so, n) && back[dof + n] == 0xEE && (!dof || back[dof - 1] == 0xEE);
                /* GPU -> host (mapped), as a GPU -> card write */
                memset(hmap, 0xEE, CAP);
                CHECK_RC(gpu_copy(dev, ref, CAP), 0);
                CHECK_RC(emu_agent_post(a, (uint8_t *)hdev + dof, dev + so, n, NULL, 0, 1, end, &ticket), 0);
                CHECK_RC(emu_agent_wait(a, ticket, end), 0);
                ok = ok && !memcmp(hmap + dof, ref + so, n) && hmap[dof + n] == 0xEE && (!dof || hmap[dof - 1] == 0xEE);
                if (!ok && bad++ < 5)
                    UNIT_FAIL("size %zu, source offset %zu, destination offset %zu: bytes differ", n, so, dof);
            }
    CHECK_EQ(bad, 0);
    CHECK_RC(emu_agent_stop(a, 2000), 0);
    gpu_free(dev);
    gpu_host_free(hmap);
    free(ref);
    free(back);
}

TEST(gpu_agent_reads_keep_the_counter_across_the_limit)
{
    NEED_GPU();
    struct emu_card *c = running_card(SPEC);
    REQUIRE(c);
    struct emu_dma *d = NULL;
    REQUIRE(emu_dma_create(c, &d) == 0);
    CHECK_RC(emu_dma_set_agent(d, LIMIT), 0);
    CHECK_EQ(emu_dma_agent(d), LIMIT);
    size_t cap = 4 << 20;
    uint8_t *dev = NULL, *host = malloc(cap);
    REQUIRE(gpu_alloc((void **)&dev, cap) == 0);
    struct xcheck chk;
    REQUIRE(checker_start(d, &chk) == 0);
    static const uint32_t sizes[] = {4, 60, 64, 4096, 4100, LIMIT - 4, LIMIT, LIMIT + 4, 1 << 20, (3 << 20) + 12};
    static const size_t offs[] = {0, 4, 12, 256, 4104};
    for (int round = 0; round < 3; round++)
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
            for (size_t o = 0; o < sizeof offs / sizeof *offs; o++) {
                int rc = emu_dma_read(d, dev + offs[o], sizes[s], 1, 2000);
                if (!rc)
                    rc = gpu_copy(host, dev + offs[o], sizes[s]);
                if (rc)
                    UNIT_FAIL("size %u offset %zu: %s", sizes[s], offs[o], oni_error_str(rc));
                else
                    xcheck_feed(&chk, host, sizes[s]);
            }
    CHECK_EQ(chk.errors, 0);
    CHECK(chk.frames > 1000);
    struct emu_dma_stats st;
    emu_dma_stats(d, &st);
    /* every block up to the limit went through the agent, the others the copy engine */
    CHECK_EQ(st.agent_reads, 3 * 7 * 5);
    CHECK_EQ(st.agent_failed, 0);
    CHECK_EQ(st.failed, 0);
    CHECK_RC(emu_dma_set_agent(d, 0), 0);
    CHECK_EQ(emu_dma_agent(d), 0);
    gpu_free(dev);
    free(host);
    emu_dma_destroy(d);
    emu_card_destroy(c);
}

/* The FIFO-end tests: a FIFO of 512 KiB (ddr=1M) wraps every few dozen
 * reads (it restarts at its start only past 32 MiB), so a read across its
 * end is two spans, moved by the agent in two pieces. The read position is
 * counted (the FIFO starts at 0 and never restarts early), so a test knows
 * how many reads crossed. */
#define WRAP_CAP ((1u << 20) / 2)
#define WRAP_BYTES (40 * WRAP_CAP) /* bytes each test reads: 40 times round */

struct wrap {
    struct emu_card *c;
    struct emu_dma *d;
    struct xcheck chk;
    size_t pos; /* bytes read so far */
    uint64_t seed;
    int reads, crossed;
};

/* The card running, the agent on, the checker started; 0 or -1. */
static int wrap_open(struct wrap *w, uint64_t seed)
{
    memset(w, 0, sizeof *w);
    w->seed = seed;
    if (!(w->c = running_card(SPEC_1M)))
        return -1;
    if (emu_dma_create(w->c, &w->d) || emu_dma_set_agent(w->d, LIMIT) || checker_start(w->d, &w->chk))
        return -1;
    w->pos = 16; /* checker_start's header */
    return 0;
}

/* The size of the next read: 4 .. LIMIT bytes, a multiple of 4. */
static size_t wrap_size(struct wrap *w) { return 4 + 4 * (rnd(&w->seed) % (LIMIT / 4)); }

/* Read n bytes (their copy in host memory at p) done: check and count them. */
static void wrap_read(struct wrap *w, const uint8_t *p, size_t n)
{
    xcheck_feed(&w->chk, p, n);
    w->crossed += w->pos % WRAP_CAP + n > WRAP_CAP;
    w->pos += n, w->reads++;
}

/* The counter unbroken, enough reads across the end, every one by the agent. */
static void wrap_close(struct wrap *w)
{
    CHECK_EQ(w->chk.errors, 0);
    CHECK(w->crossed >= 30);
    if (w->d) {
        struct emu_dma_stats st;
        emu_dma_stats(w->d, &st);
        CHECK_EQ(st.agent_reads, (uint64_t)w->reads);
        CHECK_EQ(st.agent_failed, 0);
        emu_dma_destroy(w->d);
    }
    emu_card_destroy(w->c);
}

/* The agent lands a read's second span right after the first. */
TEST(gpu_agent_reads_across_the_fifo_end)
{
    NEED_GPU();
    struct wrap w;
    uint8_t *dev = NULL, *host = malloc(LIMIT);
    REQUIRE(wrap_open(&w, 11) == 0);
    REQUIRE(host && gpu_alloc((void **)&dev, LIMIT) == 0);
    while (w.pos < WRAP_BYTES) {
        size_t n = wrap_size(&w);
        int rc = emu_dma_read(w.d, dev, n, 1, 2000);
        if (!rc)
            rc = gpu_copy(host, dev, n);
        if (rc) {
            UNIT_FAIL("read %d (%zu bytes): %s", w.reads, n, oni_error_str(rc));
            break;
        }
        wrap_read(&w, host, n);
    }
    wrap_close(&w);
    gpu_free(dev);
    free(host);
}

/* A read across the FIFO's end is moved in pieces, one agent descriptor
 * each, and its completion record must come with the last. A stream waits
 * on the GPU for the record (in GPU memory) and copies the block out the
 * moment it lands, so a record that came with an earlier piece shows as
 * bytes the agent had not written yet (the block is 0xEE before each read):
 * a host that polls the record and then copies is too late to see that. */
TEST(gpu_agent_record_of_a_split_read_comes_last)
{
    NEED_GPU();
    struct wrap w;
    uint8_t *dev = NULL, *snap = NULL;
    uint32_t *done = NULL;
    struct gpu_stream *s = NULL;
    REQUIRE(wrap_open(&w, 5) == 0);
    REQUIRE(gpu_alloc((void **)&dev, LIMIT) == 0);
    REQUIRE(gpu_alloc((void **)&done, 4) == 0);
    REQUIRE(gpu_host_alloc((void **)&snap, LIMIT) == 0);
    REQUIRE(gpu_stream_create(&s) == 0);
    CHECK_RC(gpu_memset(done, 0, 4), 0);
    while (w.pos < WRAP_BYTES && !w.chk.errors) {
        size_t n = wrap_size(&w);
        uint32_t seq = (uint32_t)w.reads + 1;
        onigpu_xfer_t x = {dev, n, done, seq, 0};
        int rc = gpu_memset(dev, 0xEE, n);
        if (!rc)
            rc = gpu_wait_word_async(s, done, seq);
        if (!rc)
            rc = gpu_copy_async(s, snap, dev, n);
        if (!rc)
            rc = emu_dma_submit(w.d, 0, &x, 1, 1, 2000);
        if (!rc)
            rc = gpu_stream_wait(s, 2000);
        if (!rc)
            rc = emu_dma_flush(w.d, 2000); /* the job is over before the block is refilled */
        if (rc) {
            UNIT_FAIL("read %u (%zu bytes): %s", seq, n, oni_error_str(rc));
            break;
        }
        size_t at = w.pos % WRAP_CAP;
        wrap_read(&w, snap, n);
        if (w.chk.errors)
            UNIT_FAIL("read %u (%zu bytes at FIFO offset %zu): bytes missing when its record came", seq, n, at);
    }
    wrap_close(&w);
    gpu_stream_destroy(s);
    gpu_host_free(snap);
    gpu_free(done);
    gpu_free(dev);
}

TEST(gpu_agent_writes_frames_to_the_card)
{
    NEED_GPU();
    struct emu_card *c = running_card(SPEC);
    REQUIRE(c);
    struct emu_dma *d = NULL;
    REQUIRE(emu_dma_create(c, &d) == 0);
    CHECK_RC(emu_dma_set_agent(d, LIMIT), 0);
    /* the sink's index: the one a one-word frame from host memory is accepted by */
    uint32_t sink = 0xFFFFFFFFu;
    for (uint32_t idx = 0; idx < 4 && sink == 0xFFFFFFFFu; idx++) {
        uint32_t frame[3] = {idx, 1, 0xABCD};
        if (emu_dma_write(d, frame, sizeof frame, 0, 100) == 0)
            sink = idx;
    }
    REQUIRE(sink != 0xFFFFFFFFu);
    enum { N = 2 * LIMIT };
    uint32_t *frames = calloc(1, N), *done = NULL, seen = 0;
    uint8_t *dev = NULL;
    REQUIRE(gpu_alloc((void **)&dev, N) == 0);
    REQUIRE(gpu_alloc((void **)&done, 4) == 0);
    /* frames of 1..64 words (the first of one), back to back: a corrupted header is refused */
    size_t w = 0, nframes = 0;
    uint64_t seed = 7;
    while (w + 2 + 64 + 2 <= N / 4) {
        uint32_t k = nframes ? 1 + (uint32_t)(rnd(&seed) % 64) : 1;
        frames[w] = sink, frames[w + 1] = k;
        w += 2 + k, nframes++;
    }
    frames[w] = sink, frames[w + 1] = (uint32_t)(N / 4 - w - 2);
    for (size_t at = 0; at < N / 4; at += 2 + frames[at + 1]) /* payloads the sink's hash can tell apart */
        for (uint32_t j = 0; j < frames[at + 1]; j++)
            frames[at + 2 + j] = (uint32_t)rnd(&seed);
    CHECK_RC(gpu_copy(dev, frames, N), 0);
    /* Growing sizes: the card's page-locked staging is reallocated on the way
     * (4 KiB, then LIMIT), and what arrives must be these frames. */
    static const uint32_t sizes[] = {12, 4096, LIMIT, N};
    int ok = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        /* a prefix that ends on a frame boundary */
        size_t end = 0, at = 0;
        while (at < N / 4 && (at + 2 + frames[at + 1]) * 4 <= sizes[i])
            at += 2 + frames[at + 1], end = at * 4;
        if (!end)
            continue;
        uint32_t h = 0, want;
        CHECK_EQ(reg_get(c, sink, XSUM_REG, &h), ONI_SIG_CONFIGRACK);
        want = payload_xsum(h, frames, end / 4);
        CHECK_RC(emu_dma_write(d, dev, end, 1, 2000), 0);
        CHECK_EQ(reg_get(c, sink, XSUM_REG, &h), ONI_SIG_CONFIGRACK);
        if (h != want)
            UNIT_FAIL("write of %zu bytes: the sink's hash is %08x, want %08x", end, h, want);
        ok += h == want;
    }
    CHECK_EQ(ok, 4);
    uint32_t bad[2] = {0xDEAD, 1}, before = 0, after = 1;
    CHECK_RC(gpu_copy(dev, bad, 8), 0);
    CHECK_EQ(reg_get(c, sink, XSUM_REG, &before), ONI_SIG_CONFIGRACK);
    CHECK_RC(emu_dma_write(d, dev, 4096, 1, 2000), ONI_EBADFRAME);
    CHECK_EQ(reg_get(c, sink, XSUM_REG, &after), ONI_SIG_CONFIGRACK);
    CHECK_EQ(after, before); /* refused whole */
    CHECK_RC(gpu_copy(dev, frames, 8), 0);
    CHECK_RC(gpu_memset(done, 0, 4), 0);
    size_t end = 0, at = 0;
    while ((at + 2 + frames[at + 1]) * 4 <= 4096)
        at += 2 + frames[at + 1], end = at * 4;
    onigpu_xfer_t x = {dev, end, done, 42, 0};
    CHECK_RC(emu_dma_submit(d, 1, &x, 1, 1, 2000), 0);
    CHECK_RC(emu_dma_flush(d, 5000), 0);
    CHECK_RC(gpu_copy(&seen, done, 4), 0);
    CHECK_EQ(seen, 42);
    CHECK_EQ(reg_get(c, sink, XSUM_REG, &after), ONI_SIG_CONFIGRACK);
    CHECK_EQ(after, payload_xsum(before, frames, end / 4));
    struct emu_dma_stats st;
    emu_dma_stats(d, &st);
    CHECK_EQ(st.agent_writes, 3 + 1 + 1); /* up to LIMIT; the malformed block (refused by the card); the async one */
    CHECK_EQ(st.agent_failed, 0);
    gpu_free(dev);
    gpu_free(done);
    free(frames);
    emu_dma_destroy(d);
    emu_card_destroy(c);
}

/* >= 10^5 asynchronous reads of random sizes (both sides of the limit) into
 * slots of a ring; the record (GPU or host memory) is awaited first and only
 * then the payload copied back and checked: the record never comes early. */
TEST(gpu_agent_completion_record_after_payload_randomized)
{
    NEED_GPU();
    const char *env = getenv("ONIGPU_AGENT_RANDOM");
    long total = env ? atol(env) : 100000;
    struct emu_card *c = running_card(SPEC);
    REQUIRE(c);
    struct emu_dma *d = NULL;
    REQUIRE(emu_dma_create(c, &d) == 0);
    CHECK_RC(emu_dma_set_agent(d, LIMIT), 0);
    enum { RING = 8, SLOT = 2 * LIMIT + 64 };
    uint8_t *dev = NULL, *host = malloc(SLOT);
    uint32_t *done_dev = NULL, *done_host = NULL;
    REQUIRE(gpu_alloc((void **)&dev, (size_t)RING * SLOT) == 0);
    REQUIRE(gpu_alloc((void **)&done_dev, RING * 4) == 0);
    REQUIRE(gpu_host_alloc((void **)&done_host, RING * 4) == 0);
    CHECK_RC(gpu_memset(done_dev, 0, RING * 4), 0);
    memset(done_host, 0, RING * 4);
    struct xcheck chk;
    REQUIRE(checker_start(d, &chk) == 0);
    struct job {
        size_t off, n;
        int host_rec;
    } jobs[RING];
    uint64_t seed = 0x9E3779B97F4A7C15u, t_start = oni_now_ns();
    long next = 0, k;
    int failed = 0;
    for (k = 0; k < total && !failed; k++) {
        while (next < total && next < k + RING) { /* keep RING jobs queued */
            uint64_t r = rnd(&seed);
            int slot = (int)(next % RING);
            size_t n = (r % 8) ? 4 + 4 * (r % (LIMIT / 4)) : LIMIT + 4 + 4 * ((r >> 8) % (LIMIT / 4));
            jobs[slot] = (struct job){(size_t)slot * SLOT + 4 * ((r >> 40) % 16), n, (int)((r >> 50) & 1)};
            volatile uint32_t *done = jobs[slot].host_rec ? &done_host[slot] : &done_dev[slot];
            onigpu_xfer_t x = {dev + jobs[slot].off, n, done, (uint32_t)next + 1, 0};
            int rc = emu_dma_submit(d, 0, &x, 1, !jobs[slot].host_rec, 2000);
            if (rc) {
                UNIT_FAIL("submit %ld: %s", next, oni_error_str(rc));
                failed = 1;
                break;
            }
            next++;
        }
        if (failed)
            break;
        int slot = (int)(k % RING);
        uint32_t seq = (uint32_t)k + 1, seen = 0;
        uint64_t t0 = oni_now_ns();
        while (seen != seq && oni_now_ns() - t0 < 2000000000u) {
            if (jobs[slot].host_rec)
                seen = __atomic_load_n(&done_host[slot], __ATOMIC_ACQUIRE);
            else
                gpu_copy(&seen, &done_dev[slot], 4);
        }
        if (seen != seq) {
            UNIT_FAIL("job %ld: record %u never came (saw %u)", k, seq, seen);
            failed = 1;
            break;
        }
        CHECK_RC(gpu_copy(host, dev + jobs[slot].off, jobs[slot].n), 0);
        xcheck_feed(&chk, host, jobs[slot].n);
        if (chk.errors) {
            UNIT_FAIL("job %ld (%zu bytes, record in %s memory): payload wrong after its record", k, jobs[slot].n,
                      jobs[slot].host_rec ? "host" : "GPU");
            failed = 1;
        }
    }
    CHECK_RC(emu_dma_flush(d, 5000), 0);
    fprintf(stderr, "  %ld asynchronous transfers checked after their records in %.1f s\n", k,
            (oni_now_ns() - t_start) / 1e9);
    CHECK_EQ(k, total);
    CHECK_EQ(chk.errors, 0);
    struct emu_dma_stats st;
    emu_dma_stats(d, &st);
    CHECK(st.agent_reads > (uint64_t)total / 2);
    CHECK_EQ(st.agent_failed, 0);
    gpu_free(dev);
    gpu_free(done_dev);
    gpu_host_free(done_host);
    free(host);
    emu_dma_destroy(d);
    emu_card_destroy(c);
}

/* The kernel leaves when idle and the next transfer brings it back; a CUDA
 * call that waits for the whole device (cudaFree) is delayed at most by its
 * lifetime, not stuck. */
TEST(gpu_agent_leaves_when_idle_and_comes_back)
{
    NEED_GPU();
    struct emu_card *c = running_card(SPEC);
    REQUIRE(c);
    struct emu_dma *d = NULL;
    REQUIRE(emu_dma_create(c, &d) == 0);
    CHECK_RC(emu_dma_set_agent(d, LIMIT), 0);
    uint8_t *dev = NULL;
    REQUIRE(gpu_alloc((void **)&dev, LIMIT) == 0);
    struct xcheck chk;
    REQUIRE(checker_start(d, &chk) == 0);
    uint8_t *host = malloc(4096);
    for (int i = 0; i < 4; i++) {
        CHECK_RC(emu_dma_read(d, dev, 4096, 1, 2000), 0);
        CHECK_RC(gpu_copy(host, dev, 4096), 0);
        xcheck_feed(&chk, host, 4096);
        usleep(3 * AGENT_IDLE_MS * 1000); /* the kernel leaves meanwhile */
    }
    CHECK_EQ(chk.errors, 0);
    struct emu_dma_stats st;
    emu_dma_stats(d, &st);
    CHECK(st.agent_launches >= 4);
    CHECK_EQ(st.agent_reads, 4);
    /* a busy agent: cudaFree from another allocation must still return */
    for (int i = 0; i < 50; i++)
        CHECK_RC(emu_dma_read(d, dev, 4096, 1, 2000), 0);
    void *tmp = NULL;
    REQUIRE(gpu_alloc(&tmp, 1 << 20) == 0);
    uint64_t t0 = oni_now_ns();
    gpu_free(tmp);
    double ms = (oni_now_ns() - t0) / 1e6;
    CHECK(ms < 5.0 * AGENT_LIFE_MS);
    fprintf(stderr, "  cudaFree beside the agent: %.2f ms\n", ms);
    gpu_free(dev);
    free(host);
    emu_dma_destroy(d);
    emu_card_destroy(c);
}

/* Turning the agent off and destroying the engine with jobs queued: every
 * job completes or fails with its own error, nothing hangs. */
TEST(gpu_agent_stop_and_destroy_with_jobs_queued)
{
    NEED_GPU();
    struct emu_card *c = running_card(SPEC);
    REQUIRE(c);
    enum { JOBS = 200, BLK = 8192 };
    uint8_t *dev = NULL;
    uint32_t *done = NULL, seen[JOBS];
    REQUIRE(gpu_alloc((void **)&dev, (size_t)JOBS * BLK) == 0);
    REQUIRE(gpu_alloc((void **)&done, JOBS * 4) == 0);
    for (int round = 0; round < 2; round++) {
        struct emu_dma *d = NULL;
        REQUIRE(emu_dma_create(c, &d) == 0);
        CHECK_RC(emu_dma_set_agent(d, LIMIT), 0);
        CHECK_RC(gpu_memset(done, 0, JOBS * 4), 0);
        for (int i = 0; i < JOBS; i++) {
            onigpu_xfer_t x = {dev + (size_t)i * BLK, BLK, &done[i], (uint32_t)i + 1, 0};
            CHECK_RC(emu_dma_submit(d, 0, &x, 1, 1, 2000), 0);
        }
        uint64_t t0 = oni_now_ns();
        if (round == 0)
            CHECK_RC(emu_dma_set_agent(d, 0), 0); /* the rest moves by the copy engine */
        emu_dma_destroy(d);                        /* waits for the queued jobs, stops the agent */
        double s = (oni_now_ns() - t0) / 1e9;
        CHECK(s < 30);
        CHECK_RC(gpu_copy(seen, done, sizeof seen), 0);
        int missing = 0;
        for (int i = 0; i < JOBS; i++)
            missing += seen[i] != (uint32_t)i + 1;
        CHECK_EQ(missing, 0);
    }
    gpu_free(dev);
    gpu_free(done);
    emu_card_destroy(c);
}
