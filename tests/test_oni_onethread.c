/* test_oni_onethread.c - the read path while the process has one thread
 * (src/oni/ctx.h, oni_fetch_add: no locked instructions then) and across the
 * start of a second thread. Its own program, so that it starts with one
 * thread; it skips where the process starts with more (a sanitizer's
 * runtime may start one through the C library). A read path that ignored
 * the flag races with the second thread: TSan reports that every time (the
 * threads label runs it there), a plain build only when the race bites. */
#include <pthread.h>
#include <stdatomic.h>
#include "drivers/fixture.h"
#include "unit.h"
#ifdef ONI_HAVE_SINGLE_THREADED
#include <sys/single_threaded.h>
#endif

static const oni_device_t devs[] = {{1, 10, 1, 6, 0}, {2, 10, 1, 20, 0}, {3, 10, 1, 3, 0}};

static uint32_t rsize(uint32_t idx) { return idx == 1 ? 6 : idx == 2 ? 20 : 3; }

#define NFRAMES 40000
#define NHELD 3000 /* read before the second thread, destroyed by it */

static uint8_t stream[NFRAMES * 40];
static oni_frame_t *held[NHELD];
static atomic_uchar seen[NFRAMES];
static atomic_int bad;
static oni_ctx ctx;

/* Check f, count its time as seen and destroy it. */
static void take(oni_frame_t *f)
{
    uint64_t t = f->time;
    if (t >= NFRAMES || !fx_check(f, t, 1 + (uint32_t)(t % 3), rsize(1 + (uint32_t)(t % 3))))
        atomic_fetch_add(&bad, 1);
    else
        atomic_fetch_add(&seen[t], 1);
    oni_destroy_frame(f);
}

/* Read and take frames until the stream is over (the scripted driver times out). */
static void read_rest(void)
{
    oni_frame_t *f;
    int rc;
    while ((rc = oni_read_frame(ctx, &f)) > 0)
        take(f);
    if (rc != ONI_ETIMEOUT)
        atomic_fetch_add(&bad, 1);
}

static void *second_thread(void *arg)
{
    (void)arg;
    for (int i = 0; i < NHELD; i += 2) /* frames of blocks the first thread counted down plainly */
        take(held[i]);
    read_rest();
    return NULL;
}

TEST(first_thread_then_two)
{
#ifndef ONI_HAVE_SINGLE_THREADED
    SKIP("the C library has no single-thread flag: the read path always uses atomics");
#else
    if (!__libc_single_threaded)
        SKIP("the process started with more than one thread (a sanitizer's runtime): nothing to test");
    size_t len = 0;
    for (uint32_t i = 0; i < NFRAMES; i++)
        len += fx_frame(stream + len, i, 1 + i % 3, rsize(1 + i % 3));
    uint32_t block = 256;
    ctx = fx_open(devs, 3, 1);
    REQUIRE(ctx);
    REQUIRE(fx_set_u32(ctx, SCR_OPT_EMPTY, SCR_EMPTY_TIMEOUT) == 0);
    REQUIRE(oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &block, 4) == 0);
    REQUIRE(oni_set_driver_opt(ctx, SCR_OPT_DATA, stream, len) == 0);

    /* One thread: hold NHELD frames across many refills, destroying the odd ones. */
    for (int i = 0; i < NHELD; i++) {
        REQUIRE(oni_read_frame(ctx, &held[i]) > 0);
        if (i % 2)
            take(held[i]);
    }
    REQUIRE(__libc_single_threaded); /* else the plain path was not the one tested */

    /* Two threads: both read (the read lock's tickets must carry over), the
     * second destroys the held frames (their blocks' counts too). */
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, second_thread, NULL) == 0);
    read_rest();
    pthread_join(t, NULL);
    CHECK(!__libc_single_threaded);
    CHECK_EQ(atomic_load(&bad), 0);
    int missing, twice;
    fx_seen(seen, NFRAMES, &missing, &twice);
    CHECK_EQ(missing, 0);
    CHECK_EQ(twice, 0);
    CHECK_RC(oni_destroy_ctx(ctx), 0);
#endif
}
