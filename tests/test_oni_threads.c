/* test_oni_threads.c - the core under concurrency: several readers of one
 * context, frames destroyed on other threads (also after oni_destroy_ctx),
 * register access and writes while reading. Run under TSan by `make test`. */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>
#include "drivers/fixture.h"
#include "unit.h"

static const oni_device_t devs[] = {{1, 10, 1, 6, 0}, {2, 10, 1, 20, 0}, {3, 10, 1, 3, 0},
                                    {4, 8, 1, 0, 8}};

static uint32_t rsize(uint32_t idx) { return idx == 1 ? 6 : idx == 2 ? 20 : 3; }

#define NFRAMES 60000
#define NREADERS 4

static uint8_t stream[NFRAMES * 40];
static size_t stream_len;

/* NFRAMES frames, frame i with time i from device 1 + i % 3. */
static void make_stream(void)
{
    stream_len = 0;
    for (uint32_t i = 0; i < NFRAMES; i++)
        stream_len += fx_frame(stream + stream_len, i, 1 + i % 3, rsize(1 + i % 3));
}

static oni_ctx open_ctx(uint32_t block)
{
    oni_ctx ctx = fx_open(devs, 4, 1);
    if (!ctx)
        return NULL;
    if (fx_set_u32(ctx, SCR_OPT_EMPTY, SCR_EMPTY_TIMEOUT) || oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &block, 4) ||
        oni_set_driver_opt(ctx, SCR_OPT_DATA, stream, stream_len)) {
        oni_destroy_ctx(ctx);
        return NULL;
    }
    return ctx;
}

/* A small queue handing frames from readers to destroyers. */
struct queue {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    oni_frame_t *f[256];
    int head, n, closed;
};

static void q_put(struct queue *q, oni_frame_t *f)
{
    pthread_mutex_lock(&q->lock);
    while (q->n == 256)
        pthread_cond_wait(&q->cond, &q->lock);
    q->f[(q->head + q->n++) % 256] = f;
    pthread_cond_broadcast(&q->cond);
    pthread_mutex_unlock(&q->lock);
}

static oni_frame_t *q_get(struct queue *q)
{
    pthread_mutex_lock(&q->lock);
    while (q->n == 0 && !q->closed)
        pthread_cond_wait(&q->cond, &q->lock);
    oni_frame_t *f = NULL;
    if (q->n) {
        f = q->f[q->head];
        q->head = (q->head + 1) % 256;
        q->n--;
        pthread_cond_broadcast(&q->cond);
    }
    pthread_mutex_unlock(&q->lock);
    return f;
}

static struct queue q = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, 0, 0, 0};
static atomic_uchar seen[NFRAMES];
static atomic_int errors, bad_content;
static oni_ctx shared;

static void *reader(void *arg)
{
    for (;;) {
        oni_frame_t *f;
        int rc = oni_read_frame(shared, &f);
        if (rc == ONI_ETIMEOUT)
            return NULL; /* stream over */
        if (rc <= 0) {
            atomic_fetch_add(&errors, 1);
            return NULL;
        }
        q_put(&q, f);
    }
}

static void *destroyer(void *arg)
{
    oni_frame_t *f;
    while ((f = q_get(&q))) {
        uint64_t t = f->time;
        if (t >= NFRAMES || !fx_check(f, t, 1 + (uint32_t)(t % 3), rsize(1 + (uint32_t)(t % 3))))
            atomic_fetch_add(&bad_content, 1);
        else
            atomic_fetch_add(&seen[t], 1);
        oni_destroy_frame(f);
    }
    return NULL;
}

TEST(concurrent_readers_and_destroyers)
{
    make_stream();
    static const uint32_t blocks[] = {36, 4096};
    for (int b = 0; b < 2; b++) {
        shared = open_ctx(blocks[b]);
        REQUIRE(shared);
        memset(seen, 0, sizeof seen);
        atomic_store(&errors, 0);
        atomic_store(&bad_content, 0);
        q.closed = 0;
        pthread_t r[NREADERS], d[2];
        for (int i = 0; i < 2; i++)
            pthread_create(&d[i], NULL, destroyer, NULL);
        for (int i = 0; i < NREADERS; i++)
            pthread_create(&r[i], NULL, reader, NULL);
        for (int i = 0; i < NREADERS; i++)
            pthread_join(r[i], NULL);
        pthread_mutex_lock(&q.lock);
        q.closed = 1;
        pthread_cond_broadcast(&q.cond);
        pthread_mutex_unlock(&q.lock);
        for (int i = 0; i < 2; i++)
            pthread_join(d[i], NULL);
        CHECK_EQ(atomic_load(&errors), 0);
        CHECK_EQ(atomic_load(&bad_content), 0);
        /* Every frame delivered exactly once. */
        int missing, twice;
        fx_seen(seen, NFRAMES, &missing, &twice);
        CHECK_EQ(missing, 0);
        CHECK_EQ(twice, 0);
        CHECK_RC(oni_destroy_ctx(shared), 0);
    }
}

#define NHELD 2000
static oni_frame_t *held[NHELD];

static void *destroy_half(void *arg)
{
    int start = *(int *)arg;
    for (int i = start; i < NHELD; i += 2) {
        if (!fx_check(held[i], (uint64_t)i, 1 + (uint32_t)(i % 3), rsize(1 + (uint32_t)(i % 3))))
            atomic_fetch_add(&bad_content, 1);
        oni_destroy_frame(held[i]);
    }
    return NULL;
}

TEST(frames_destroyed_on_other_threads_after_context)
{
    make_stream();
    oni_ctx ctx = open_ctx(256);
    REQUIRE(ctx);
    for (int i = 0; i < NHELD; i++)
        REQUIRE(oni_read_frame(ctx, &held[i]) > 0);
    atomic_store(&bad_content, 0);
    pthread_t t[2];
    int starts[2] = {0, 1};
    /* The context goes while two threads are giving its frames back. */
    pthread_create(&t[0], NULL, destroy_half, &starts[0]);
    CHECK_RC(oni_destroy_ctx(ctx), 0);
    pthread_create(&t[1], NULL, destroy_half, &starts[1]);
    pthread_join(t[0], NULL);
    pthread_join(t[1], NULL);
    CHECK_EQ(atomic_load(&bad_content), 0);
}

static atomic_int stop;

static void *reg_worker(void *arg)
{
    oni_ctx ctx = arg;
    for (uint32_t i = 0; i < 2000; i++) {
        oni_reg_val_t v = 0;
        if (oni_write_reg(ctx, 1, 3, i) || oni_read_reg(ctx, 1, 3, &v) || v != i)
            atomic_fetch_add(&errors, 1);
    }
    return NULL;
}

static void *write_worker(void *arg)
{
    oni_ctx ctx = arg;
    uint8_t data[16] = {9};
    for (int i = 0; i < 2000; i++) {
        oni_frame_t *f;
        if (oni_create_frame(ctx, &f, 4, data, 8) < 0 || oni_write_frame(ctx, f) != 16)
            atomic_fetch_add(&errors, 1);
        else
            oni_destroy_frame(f);
    }
    return NULL;
}

static void *repeat_reader(void *arg)
{
    oni_ctx ctx = arg;
    while (!atomic_load(&stop)) {
        oni_frame_t *f;
        if (oni_read_frame(ctx, &f) <= 0) {
            atomic_fetch_add(&errors, 1);
            return NULL;
        }
        oni_destroy_frame(f);
    }
    return NULL;
}

TEST(registers_and_writes_while_reading)
{
    make_stream();
    oni_ctx ctx = open_ctx(4096);
    REQUIRE(ctx);
    REQUIRE(fx_set_u32(ctx, SCR_OPT_REPEAT, 1) == 0);
    atomic_store(&errors, 0);
    atomic_store(&stop, 0);
    pthread_t r, g, w1, w2;
    pthread_create(&r, NULL, repeat_reader, ctx);
    pthread_create(&g, NULL, reg_worker, ctx);
    pthread_create(&w1, NULL, write_worker, ctx);
    pthread_create(&w2, NULL, write_worker, ctx);
    pthread_join(g, NULL);
    pthread_join(w1, NULL);
    pthread_join(w2, NULL);
    atomic_store(&stop, 1);
    pthread_join(r, NULL);
    CHECK_EQ(atomic_load(&errors), 0);
    oni_destroy_ctx(ctx);
}

/* A reader that keeps calling oni_read_frame on an empty stream holds the
 * read lock for a whole timeout per call and asks for it again at once. Those
 * who need the read lock meanwhile (starting acquisition, a block size) get
 * it in turn: the wait is about one timeout, never starvation (onigpu run
 * once hung at start-up this way: its echo thread starved the start). */
static void *timeout_reader(void *p)
{
    oni_ctx ctx = p;
    while (!atomic_load(&stop)) {
        oni_frame_t *f;
        int rc = oni_read_frame(ctx, &f);
        if (rc > 0)
            oni_destroy_frame(f);
        else if (rc != ONI_ETIMEOUT)
            atomic_fetch_add(&errors, 1);
    }
    return NULL;
}

TEST(read_lock_taken_in_turn)
{
    oni_ctx ctx = fx_open(devs, 4, 1);
    REQUIRE(ctx);
    uint32_t timeout = 100;
    REQUIRE(fx_set_u32(ctx, SCR_OPT_EMPTY, SCR_EMPTY_WAIT) == 0);
    REQUIRE(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &timeout, sizeof timeout) == 0);
    atomic_store(&errors, 0);
    atomic_store(&stop, 0);
    pthread_t r;
    REQUIRE(pthread_create(&r, NULL, timeout_reader, ctx) == 0);
    double worst_ms = 0;
    for (int i = 0; i < 20; i++) {
        usleep(1000 * (i % 7)); /* land at different points of the reader's wait */
        uint64_t t0 = oni_now_ns();
        uint32_t run = i % 2 == 0; /* both ways take the read lock (docs/threads.md) */
        CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &run, sizeof run), 0);
        double ms = (double)(oni_now_ns() - t0) / 1e6;
        if (ms > worst_ms)
            worst_ms = ms;
    }
    atomic_store(&stop, 1);
    pthread_join(r, NULL);
    fprintf(stderr, "  longest wait for the read lock: %.1f ms (reader timeout %u ms)\n", worst_ms, timeout);
    /* one timeout of the holder, with slack for a loaded or TSan machine */
    CHECK(worst_ms < 10.0 * timeout);
    CHECK_EQ(atomic_load(&errors), 0);
    oni_destroy_ctx(ctx);
}

/* A host written for upstream liboni keeps a reader thread in oni_read_frame
 * while its command loop pauses and resumes acquisition (upstream's own
 * example host does). With the hardware stopped the driver has nothing to
 * give (it answers 0 bytes), so the reader waits inside a refill, holding
 * the read state; starting acquisition needs that state to flush. The start
 * must not wait for the reader's deadline, the very data it waits for only
 * comes after the start: the reader gives way, and then gets the new run's
 * first frame instead of ONI_ETIMEOUT. */
static atomic_int waiter_rc;

static void *waiting_reader(void *p)
{
    oni_ctx ctx = p;
    oni_frame_t *f = NULL;
    int rc = oni_read_frame(ctx, &f);
    if (rc > 0) {
        if (!fx_check(f, 7, 2, 20))
            rc = -1000;
        oni_destroy_frame(f);
    }
    atomic_store(&waiter_rc, rc);
    return NULL;
}

TEST(start_while_a_reader_waits_for_data_is_not_held_up)
{
    oni_ctx ctx = fx_open(devs, 4, 1);
    REQUIRE(ctx);
    uint32_t timeout = 3000;
    REQUIRE(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &timeout, sizeof timeout) == 0);
    REQUIRE(fx_set_u32(ctx, SCR_OPT_EMPTY, SCR_EMPTY_ZERO) == 0);
    atomic_store(&waiter_rc, 0);
    pthread_t r;
    REQUIRE(pthread_create(&r, NULL, waiting_reader, ctx) == 0);
    usleep(100 * 1000); /* the reader waits in its refill by now */
    uint64_t t0 = oni_now_ns();
    uint32_t run = 1;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &run, sizeof run), 0);
    double ms = (double)(oni_now_ns() - t0) / 1e6;
    uint8_t frame[64];
    size_t len = fx_frame(frame, 7, 2, 20);
    CHECK_RC(oni_set_driver_opt(ctx, SCR_OPT_DATA, frame, len), 0);
    pthread_join(r, NULL);
    fprintf(stderr, "  start took %.1f ms while a reader waited (reader timeout %u ms)\n", ms, timeout);
    CHECK(ms < timeout / 2.0);
    CHECK_EQ(atomic_load(&waiter_rc), fx_answer(20)); /* not ONI_ETIMEOUT: the new run's frame */
    (void)len;
    oni_destroy_ctx(ctx);
}

/* Frames read by a thread that waits for acquisition to start; after the
 * first it waits until the call that started it has returned. */
#define NSTART 8
static atomic_int start_done, start_frames;

static void *start_reader(void *p)
{
    oni_ctx ctx = p;
    for (int got = 0; got < NSTART;) {
        oni_frame_t *f;
        int rc = oni_read_frame(ctx, &f);
        if (rc == ONI_ETIMEOUT && !atomic_load(&start_done))
            continue;
        if (rc <= 0)
            return NULL;
        if (fx_check(f, (uint64_t)got, 1 + (uint32_t)(got % 3), rsize(1 + (uint32_t)(got % 3))))
            atomic_fetch_add(&start_frames, 1);
        oni_destroy_frame(f);
        while (++got == 1 && !atomic_load(&start_done))
            usleep(1000);
    }
    return NULL;
}

/* RESETACQCOUNTER = 2 starts the hardware at once. A reader already waiting
 * may take the first frames of the new run; the flush that setting RUNNING
 * implies must not drop the rest of them (it dropped the rest of that
 * refill when the counter reset was written before the read lock was taken). */
TEST(reset_counter_and_run_keeps_the_first_frames)
{
    make_stream();
    oni_ctx ctx = fx_open(devs, 4, 1);
    REQUIRE(ctx);
    uint32_t block = 4096, timeout = 300, two = 2;
    REQUIRE(oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &block, 4) == 0);
    REQUIRE(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &timeout, 4) == 0);
    REQUIRE(fx_set_u32(ctx, SCR_OPT_RUNGATE, 1) == 0);
    size_t len = 0;
    for (uint32_t i = 0; i < NSTART; i++)
        len += fx_frame(stream + len, i, 1 + i % 3, rsize(1 + i % 3));
    REQUIRE(oni_set_driver_opt(ctx, SCR_OPT_DATA, stream, len) == 0);
    atomic_store(&start_done, 0);
    atomic_store(&start_frames, 0);
    pthread_t r;
    REQUIRE(pthread_create(&r, NULL, start_reader, ctx) == 0);
    usleep(50000); /* the reader waits in a refill */
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RESETACQCOUNTER, &two, 4), 0);
    atomic_store(&start_done, 1);
    pthread_join(r, NULL);
    CHECK_EQ(atomic_load(&start_frames), NSTART);
    oni_destroy_ctx(ctx);
}

/* A RESET on a thread of its own, whose device table the scripted driver
 * sends late (SCR_OPT_TABLEDELAY), so that writes happen while the hardware
 * is reset. */
static void *late_reset(void *p)
{
    oni_ctx ctx = p;
    uint32_t one = 1;
    int rc = oni_set_opt(ctx, ONI_OPT_RESET, &one, sizeof one);
    if (rc != 0) {
        fprintf(stderr, "  RESET: %s\n", oni_error_str(rc));
        atomic_fetch_add(&errors, 1);
    }
    return NULL;
}

static int write8(oni_ctx ctx, uint8_t fill)
{
    uint8_t d[8];
    memset(d, fill, sizeof d);
    oni_frame_t *f;
    int rc = oni_create_frame(ctx, &f, 4, d, sizeof d);
    if (rc < 0)
        return rc;
    rc = oni_write_frame(ctx, f);
    oni_destroy_frame(f);
    return rc;
}

/* The write stream since the hardware's last reset holds exactly the frames
 * (device 4, 8 bytes each) filled with fill[0..n). */
static void check_since_reset(oni_ctx ctx, const uint8_t *fill, int n)
{
    static uint8_t out[4096];
    size_t len = sizeof out;
    REQUIRE(oni_get_driver_opt(ctx, SCR_OPT_WRITTEN, out, &len) == 0);
    size_t at = fx_stats(ctx).reset_written;
    REQUIRE(at <= len);
    CHECK_EQ(len - at, 16 * (size_t)n);
    for (int i = 0; i < n && at + 16 * (size_t)(i + 1) <= len; i++) {
        uint8_t want[16];
        memcpy(want, (uint32_t[2]){4, 2}, 8);
        memset(want + 8, fill[i], 8);
        CHECK(memcmp(out + at + 16 * (size_t)i, want, 16) == 0);
    }
}

/* A frame cut short before a RESET goes with the hardware's reset, also
 * when the next write comes while the reset is under way (the rest was sent
 * to the fresh hardware ahead of that write, tearing its stream). */
TEST(write_beside_a_reset_drops_the_old_rest)
{
    oni_ctx ctx = fx_open(devs, 4, 1);
    REQUIRE(ctx);
    atomic_store(&errors, 0);
    uint32_t timeout = 100;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &timeout, 4), 0);
    CHECK_RC(fx_set_u32(ctx, SCR_OPT_WRITEROOM, 11), 0);
    CHECK_RC(write8(ctx, 0xA), ONI_ETIMEOUT); /* 11 of 16 bytes out, the rest kept */
    CHECK_RC(fx_set_u32(ctx, SCR_OPT_WRITEROOM, UINT32_MAX), 0);
    CHECK_RC(fx_set_u32(ctx, SCR_OPT_TABLEDELAY, 300), 0);
    timeout = 2000;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &timeout, 4), 0);
    pthread_t r;
    REQUIRE(pthread_create(&r, NULL, late_reset, ctx) == 0);
    usleep(50000); /* the hardware is reset; its table has not come yet */
    CHECK_RC(write8(ctx, 0xB), 16);
    pthread_join(r, NULL);
    CHECK_EQ(atomic_load(&errors), 0);
    check_since_reset(ctx, (const uint8_t[]){0xB}, 1);
    oni_destroy_ctx(ctx);
}

/* A frame cut short after the hardware was reset belongs to the new stream:
 * the end of the RESET must not drop its rest (it did, and the next frame
 * followed its first part). */
TEST(write_beside_a_reset_keeps_a_new_rest)
{
    oni_ctx ctx = fx_open(devs, 4, 1);
    REQUIRE(ctx);
    atomic_store(&errors, 0);
    uint32_t timeout = 1000;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &timeout, 4), 0);
    CHECK_RC(fx_set_u32(ctx, SCR_OPT_TABLEDELAY, 200), 0);
    CHECK_RC(fx_set_u32(ctx, SCR_OPT_WRITEROOM, 11), 0);
    pthread_t r;
    REQUIRE(pthread_create(&r, NULL, late_reset, ctx) == 0);
    usleep(50000); /* the hardware is reset */
    CHECK_RC(write8(ctx, 0xC), ONI_ETIMEOUT); /* 11 bytes out; the reset ends meanwhile */
    pthread_join(r, NULL);
    CHECK_EQ(atomic_load(&errors), 0);
    CHECK_RC(fx_set_u32(ctx, SCR_OPT_WRITEROOM, UINT32_MAX), 0);
    CHECK_RC(write8(ctx, 0xD), 16);
    check_since_reset(ctx, (const uint8_t[]){0xC, 0xD}, 2);
    oni_destroy_ctx(ctx);
}
