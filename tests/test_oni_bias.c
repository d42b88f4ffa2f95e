/* test_oni_bias.c - the read bias (src/oni/ctx.h): the thread that reads
 * takes no lock and counts its destroys plainly, until another thread needs
 * the read state. White-box: it looks at the pool's bias and counts through
 * ctx.h, to know which path ran. A holder that is not kept out shows as
 * torn or lost frames here, as a race under TSan (the threads label runs it
 * there) and as a leaked block under LSan. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include "ctx.h"
#include "drivers/fixture.h"
#include "unit.h"

static const oni_device_t devs[] = {{1, 10, 1, 6, 0}, {2, 10, 1, 20, 0}, {3, 10, 1, 3, 0}};

static uint32_t rsize(uint32_t idx) { return idx == 1 ? 6 : idx == 2 ? 20 : 3; }

#define NFRAMES 40000
#define NHELD 3000 /* read by the first holder, half of them destroyed by another thread */

static uint8_t stream[NFRAMES * 40];
static size_t stream_len;
static oni_frame_t *held[NHELD];
static atomic_uchar seen[NFRAMES];
static atomic_int bad;
static oni_ctx ctx;

static struct oni_pool *pool_of(oni_ctx c) { return ((struct oni_ctx_impl *)c)->pool; }
static uintptr_t bias_of(oni_ctx c) { return atomic_load(&pool_of(c)->bias); }
/* The thread holding c's bias (oni_self()), or 0. */
static uintptr_t holder_of(oni_ctx c) { return atomic_load(&oni_bias_slot(bias_of(c))->owner); }

/* After this the process has had two threads, so the one-thread path is off for good. */
static void *noop(void *arg) { return arg; }
static void make_threaded(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, noop, NULL) == 0)
        pthread_join(t, NULL);
}

/* A context of the three devices reading stream (made once), 256-byte
 * blocks, so that the frames held span many of them. */
static oni_ctx open_stream(int repeat)
{
    if (!stream_len)
        for (uint32_t i = 0; i < NFRAMES; i++)
            stream_len += fx_frame(stream + stream_len, i, 1 + i % 3, rsize(1 + i % 3));
    uint32_t block = 256;
    oni_ctx c = fx_open(devs, 3, 1);
    if (c && (fx_set_u32(c, SCR_OPT_EMPTY, SCR_EMPTY_TIMEOUT) || fx_set_u32(c, SCR_OPT_REPEAT, repeat) ||
              oni_set_opt(c, ONI_OPT_BLOCKREADSIZE, &block, 4) ||
              oni_set_driver_opt(c, SCR_OPT_DATA, stream, stream_len))) {
        oni_destroy_ctx(c);
        c = NULL;
    }
    return c;
}

/* Whether f is intact: the frame of its time, as fx_frame wrote it. */
static int intact(const oni_frame_t *f)
{
    uint64_t t = f->time;
    return t < NFRAMES && fx_check(f, t, 1 + (uint32_t)(t % 3), rsize(1 + (uint32_t)(t % 3)));
}

/* Check f, count its time as seen and destroy it. */
static void take(oni_frame_t *f)
{
    if (!intact(f))
        atomic_fetch_add(&bad, 1);
    else
        atomic_fetch_add(&seen[f->time], 1);
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

static void *second_reader(void *arg)
{
    (void)arg;
    for (int i = 0; i < NHELD; i += 2) /* frames of blocks the holder counted plainly */
        take(held[i]);
    read_rest();
    return NULL;
}

/* One reader holding frames across many blocks, then two readers taking
 * the bias from each other; every frame exactly once and intact, every
 * block back in the pool. holder: what the first reader should be. */
static void two_readers(uintptr_t holder)
{
    memset(seen, 0, sizeof seen);
    atomic_store(&bad, 0);
    ctx = open_stream(0);
    REQUIRE(ctx);
    struct oni_pool *p = pool_of(ctx);
    for (int i = 0; i < NHELD; i++)
        REQUIRE(oni_read_frame(ctx, &held[i]) > 0);
    CHECK_EQ(holder_of(ctx), holder);
    for (int i = 1; i < NHELD; i += 2) /* mostly of blocks the reader has left: refs counts them */
        take(held[i]);

    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, second_reader, NULL) == 0);
    read_rest(); /* frames of the current block: the holder's odone counts them */
    pthread_join(t, NULL);
    CHECK_EQ(atomic_load(&bad), 0);
    int missing, twice;
    fx_seen(seen, NFRAMES, &missing, &twice);
    CHECK_EQ(missing, 0);
    CHECK_EQ(twice, 0);
    if (holder)
        CHECK(p->holders >= 2); /* the second reader took the bias at least once */
    CHECK_EQ(bias_of(ctx) & 1, 0u); /* no mark left behind */
    /* Every frame destroyed: the pool is held by the context and its current block only. */
    CHECK_EQ(atomic_load(&p->refs), 2u);
    CHECK_RC(oni_destroy_ctx(ctx), 0);
}

/* Whether contexts get the bias here (membarrier(2) answers). */
static int bias_here(void)
{
    oni_ctx c = open_stream(0);
    int off = c ? pool_of(c)->off : 1;
    if (c)
        oni_destroy_ctx(c);
    return !off;
}

/* While the process has one thread the read path skips the bias (its
 * refills still take it); then a second thread starts and reads. A read
 * path that kept to the plain updates after that races with it. */
TEST(one_thread_then_two)
{
    if (!oni_one_thread())
        SKIP("the process started with more than one thread (a sanitizer's runtime): nothing to test");
    two_readers(bias_here() ? oni_self() : 0);
}

TEST(bias_moves_between_two_readers)
{
    make_threaded();
    if (!bias_here())
        SKIP("no membarrier(2) here (or ONIGPU_READ_BIAS=0): every read takes the lock");
    two_readers(oni_self());
}

TEST(bias_off_by_environment)
{
    make_threaded();
    REQUIRE(setenv("ONIGPU_READ_BIAS", "0", 1) == 0);
    two_readers(0);
    unsetenv("ONIGPU_READ_BIAS");
}

/* A reader of a stream that repeats, until told to stop: every frame it
 * gets must be intact. A flush may leave the driver mid-frame, so the bytes
 * up to the next frame are skipped (ONI_EBADFRAME) and counted apart. */
static atomic_int stop;
static atomic_long nread, nskips;
static _Atomic uintptr_t reader_id;
static void *repeat_reader(void *arg)
{
    (void)arg;
    oni_frame_t *f;
    atomic_store(&reader_id, oni_self());
    while (!atomic_load(&stop)) {
        int rc = oni_read_frame(ctx, &f);
        if (rc == ONI_EBADFRAME) {
            atomic_fetch_add(&nskips, 1);
            continue;
        }
        if (rc <= 0) {
            atomic_fetch_add(&bad, 1);
            break;
        }
        if (!intact(f))
            atomic_fetch_add(&bad, 1);
        oni_destroy_frame(f);
        atomic_fetch_add(&nread, 1);
    }
    return NULL;
}

/* Wait until the reader has taken n more frames (or stopped). */
static void reader_moves_on(long n)
{
    long until = atomic_load(&nread) + n;
    while (atomic_load(&nread) < until && !atomic_load(&bad))
        sched_yield();
}

/* ONI_OPT_RUNNING flushes the read state from another thread nflush times
 * while a reader parses a stream that repeats: the holder must be out each
 * time, and get the bias back. Returns the reader's thread (oni_self()). */
static uintptr_t flush_beside_a_reader(int nflush)
{
    atomic_store(&bad, 0);
    atomic_store(&stop, 0);
    ctx = open_stream(1);
    if (!ctx)
        return 0;
    pthread_t t;
    if (pthread_create(&t, NULL, repeat_reader, NULL) != 0)
        return 0;
    uint32_t one = 1;
    for (int i = 0; i < nflush; i++) {
        reader_moves_on(100);
        CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &one, 4), 0);
        CHECK_EQ(bias_of(ctx) & 1, 0u); /* the mark is gone with the lock */
    }
    reader_moves_on(100);
    atomic_store(&stop, 1);
    pthread_join(t, NULL);
    CHECK_EQ(atomic_load(&bad), 0);
    printf("  %ld frames read, %ld skips after flushes\n", atomic_load(&nread), atomic_load(&nskips));
    return atomic_load(&reader_id);
}

TEST(running_flushes_beside_the_holder)
{
    uintptr_t reader = flush_beside_a_reader(300);
    REQUIRE(ctx);
    if (bias_here())
        CHECK_EQ(holder_of(ctx), reader); /* still the reader's: flushes never take it */
    CHECK_RC(oni_destroy_ctx(ctx), 0);
}

/* The holder destroys the frames of the current block while another
 * thread destroys the context, which folds the block's counts: a count
 * lost either way leaks the block (LSan) or frees it early (ASan). */
static atomic_int nheld_read, holder_was_reader;
static void *read_then_destroy(void *arg)
{
    (void)arg;
    int n = 0;
    while (n < 12 && oni_read_frame(ctx, &held[n]) > 0)
        n++; /* within the first 256-byte block and the next */
    atomic_store(&holder_was_reader, holder_of(ctx) == oni_self());
    atomic_store(&nheld_read, n); /* main destroys the context from here on */
    for (int i = 0; i < n; i++)
        oni_destroy_frame(held[i]);
    return NULL;
}

TEST(context_destroyed_beside_the_holders_destroys)
{
    make_threaded();
    int holder_rounds = 0;
    for (int round = 0; round < 200; round++) {
        ctx = open_stream(0);
        REQUIRE(ctx);
        atomic_store(&nheld_read, 0);
        pthread_t t;
        REQUIRE(pthread_create(&t, NULL, read_then_destroy, NULL) == 0);
        while (!atomic_load(&nheld_read))
            sched_yield();
        holder_rounds += atomic_load(&holder_was_reader);
        CHECK_RC(oni_destroy_ctx(ctx), 0);
        pthread_join(t, NULL);
        CHECK_EQ(atomic_load(&nheld_read), 12);
    }
    if (bias_here())
        CHECK_EQ(holder_rounds, 200);
}

/* A program that sandboxes itself after its first context: membarrier(2)
 * refused from then on. Keeping the holder out must still work (a pause
 * stands in for the barrier), and new contexts get no bias. Last in this
 * program: the filter stays for the rest of the process. */
TEST(membarrier_refused_after_the_first_context)
{
    make_threaded();
    if (!bias_here())
        SKIP("no membarrier(2) here: nothing to take away");
    ctx = open_stream(1);
    REQUIRE(ctx);
    oni_destroy_ctx(ctx);
    struct sock_filter refuse[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_membarrier, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof refuse / sizeof refuse[0], refuse};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
        SKIP("cannot install a seccomp filter here");
    uintptr_t reader = flush_beside_a_reader(100); /* the context's bias predates the filter */
    REQUIRE(ctx);
    CHECK_EQ(holder_of(ctx), reader);
    CHECK_RC(oni_destroy_ctx(ctx), 0);
    CHECK(!bias_here()); /* the first failed barrier turned it off for new contexts */
}
