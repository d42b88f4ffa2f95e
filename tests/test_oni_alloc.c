/* test_oni_alloc.c - the steady state of oni_read_frame / oni_destroy_frame
 * (and of pooled write frames) allocates nothing: this program interposes
 * malloc and friends and counts calls while reading. Sanitizer builds bring
 * their own allocator, so there the test skips. */
#include <stdatomic.h>
#include "drivers/fixture.h"
#include "unit.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define NO_HOOK 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define NO_HOOK 1
#endif
#endif

#ifndef NO_HOOK
static atomic_long nalloc;
static atomic_int counting, failing; /* failing: every allocation returns NULL */

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static void count(void)
{
    if (atomic_load_explicit(&counting, memory_order_relaxed))
        atomic_fetch_add(&nalloc, 1);
}

#define FAILING atomic_load_explicit(&failing, memory_order_relaxed)
void *malloc(size_t n) { count(); return FAILING ? NULL : __libc_malloc(n); }
void *calloc(size_t a, size_t b) { count(); return FAILING ? NULL : __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { count(); return FAILING ? NULL : __libc_realloc(p, n); }
void *aligned_alloc(size_t al, size_t n) { count(); return FAILING ? NULL : __libc_memalign(al, n); }
int posix_memalign(void **p, size_t al, size_t n)
{
    count();
    *p = FAILING ? NULL : __libc_memalign(al, n);
    return *p ? 0 : 12; /* ENOMEM */
}

static const oni_device_t devs[] = {{1, 10, 1, 6, 0}, {2, 10, 1, 64, 0}, {3, 10, 1, 13, 0},
                                    {4, 8, 1, 0, 8}};

/* Repeat a few frames forever through the scripted driver. */
static oni_ctx open_stream(uint32_t block)
{
    uint8_t s[512];
    size_t len = 0;
    len += fx_frame(s + len, 1, 1, 6);
    len += fx_frame(s + len, 2, 2, 64);
    len += fx_frame(s + len, 3, 3, 13);
    oni_ctx ctx = fx_open(devs, 4, 1);
    if (!ctx)
        return NULL;
    if (fx_set_u32(ctx, SCR_OPT_REPEAT, 1) || oni_set_driver_opt(ctx, SCR_OPT_DATA, s, len) ||
        oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &block, 4)) {
        oni_destroy_ctx(ctx);
        return NULL;
    }
    return ctx;
}

/* Read n frames, holding the last `window` alive (a ring whose position
 * *at carries over between calls, so the oldest frame always goes first);
 * 0 or -1 on a read error. */
static int churn(oni_ctx ctx, long n, oni_frame_t **ring, int window, long *at)
{
    for (long i = *at; i < *at + n; i++) {
        oni_frame_t *f;
        if (oni_read_frame(ctx, &f) <= 0)
            return -1;
        if (window == 0) {
            oni_destroy_frame(f);
            continue;
        }
        oni_destroy_frame(ring[i % window]);
        ring[i % window] = f;
    }
    *at += n;
    return 0;
}
#endif /* NO_HOOK */

TEST(steady_state_reads_allocate_nothing)
{
#ifdef NO_HOOK
    SKIP("sanitizer build: its allocator cannot be interposed");
#else
    static const uint32_t blocks[] = {80, 4096, 65536};
    static const int windows[] = {0, 1, 100, 3000};
    static oni_frame_t *ring[3000];
    for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++) {
        for (size_t w = 0; w < sizeof windows / sizeof windows[0]; w++) {
            oni_ctx ctx = open_stream(blocks[b]);
            REQUIRE(ctx);
            memset(ring, 0, sizeof ring);
            /* Warm the pool up to the working set of this window. */
            long at = 0;
            REQUIRE(churn(ctx, 20000, ring, windows[w], &at) == 0);
            atomic_store(&nalloc, 0);
            atomic_store(&counting, 1);
            int rc = churn(ctx, 200000, ring, windows[w], &at);
            atomic_store(&counting, 0);
            CHECK_EQ(rc, 0);
            long n = atomic_load(&nalloc);
            if (n != 0)
                UNIT_FAIL("block %u window %d: %ld allocations in 200000 frames", blocks[b], windows[w], n);
            for (int i = 0; i < windows[w]; i++)
                oni_destroy_frame(ring[i]);
            oni_destroy_ctx(ctx);
        }
    }
#endif
}

TEST(hook_sees_allocations)
{
#ifdef NO_HOOK
    SKIP("sanitizer build: its allocator cannot be interposed");
#else
    /* The counter must be able to fail: a context allocates when it is made. */
    atomic_store(&nalloc, 0);
    atomic_store(&counting, 1);
    oni_ctx ctx = open_stream(4096);
    atomic_store(&counting, 0);
    REQUIRE(ctx);
    CHECK(atomic_load(&nalloc) > 0);
    oni_destroy_ctx(ctx);
#endif
}

TEST(steady_state_writes_allocate_nothing)
{
#ifdef NO_HOOK
    SKIP("sanitizer build: its allocator cannot be interposed");
#else
    oni_ctx ctx = open_stream(4096);
    REQUIRE(ctx);
    /* Frames up to 64 bytes: room for them in the write blocks, as upstream
     * hosts make it (oni-repl sets BLOCKWRITESIZE); the default is one
     * largest write frame. */
    uint32_t wblock = 4096;
    REQUIRE(oni_set_opt(ctx, ONI_OPT_BLOCKWRITESIZE, &wblock, sizeof wblock) == 0);
    uint8_t data[64] = {1, 2, 3};
    oni_frame_t *f;
    for (int i = 0; i < 10; i++) {
        REQUIRE(oni_create_frame(ctx, &f, 4, data, 16) > 0);
        if (i == 0) /* the first write makes the room for a frame's unsent rest */
            REQUIRE(oni_write_frame(ctx, f) > 0);
        oni_destroy_frame(f);
    }
    atomic_store(&nalloc, 0);
    atomic_store(&counting, 1);
    int ok = 1;
    for (int i = 0; i < 10000 && ok; i++) {
        ok = oni_create_frame(ctx, &f, 4, data, 8 * (1 + i % 8)) > 0;
        if (ok) {
            ok = oni_write_frame(ctx, f) > 0 || i > 0; /* the fixture's sink fills; that is fine */
            oni_destroy_frame(f);
        }
    }
    atomic_store(&counting, 0);
    CHECK(ok);
    CHECK_EQ(atomic_load(&nalloc), 0);
    oni_destroy_ctx(ctx);
#endif
}

/* Out of memory, oni_write_frame sends nothing and says ONI_EBADALLOC; the
 * stream stays in whole frames. Before 2026-11-25 the room for a frame's
 * unsent rest was made after the driver had taken part of it: out of
 * memory, that part stayed in the stream and the rest was lost. */
TEST(write_out_of_memory_sends_nothing)
{
#ifdef NO_HOOK
    SKIP("sanitizer build: its allocator cannot be interposed");
#else
    oni_ctx ctx = open_stream(4096);
    REQUIRE(ctx);
    uint32_t ms = 20, room = 10;
    REQUIRE(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &ms, sizeof ms) == 0);
    uint8_t data[64] = {1, 2, 3};
    oni_frame_t *f;
    REQUIRE(oni_create_frame(ctx, &f, 4, data, 64) > 0);
    CHECK_RC(oni_set_driver_opt(ctx, SCR_OPT_WRITEROOM, &room, sizeof room), 0); /* takes 10 bytes, then is full */
    atomic_store(&failing, 1);
    int rc = oni_write_frame(ctx, f);
    atomic_store(&failing, 0);
    CHECK_RC(rc, ONI_EBADALLOC);
    room = UINT32_MAX;
    CHECK_RC(oni_set_driver_opt(ctx, SCR_OPT_WRITEROOM, &room, sizeof room), 0);
    int len = oni_write_frame(ctx, f); /* the caller tries again */
    CHECK(len > 64);
    uint8_t got[512];
    size_t n = sizeof got;
    CHECK_RC(oni_get_driver_opt(ctx, SCR_OPT_WRITTEN, got, &n), 0);
    CHECK_EQ(n, len); /* one whole frame, not 10 bytes of one and then another */
    oni_destroy_frame(f);
    oni_destroy_ctx(ctx);
#endif
}
