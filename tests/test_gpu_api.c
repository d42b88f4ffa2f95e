/* test_gpu_api.c - the GPU helper API (src/gpu/gpu.h) on a real device: what
 * pointers are, pinning, copies, completion words, deadlines, and the chunked
 * pipeline with real asynchronous copies. Skips without a CUDA device. */
#include <pthread.h>
#include <stdint.h>
#include "unit.h"
#include "oni.h"
#include "gpu/gpu.h"
#include "gpu/pipe.h"
#include "oni/util/clock.h"

static char why[200];

#define NEED_GPU()                                                                     \
    do {                                                                               \
        if (!gpu_available(why, sizeof why))                                           \
            SKIP("%s", why);                                                           \
    } while (0)

TEST(gpu_query_tells_memory_kinds)
{
    NEED_GPU();
    void *dev = NULL, *pinned = NULL;
    REQUIRE(gpu_alloc(&dev, 1 << 20) == 0);
    REQUIRE(gpu_host_alloc(&pinned, 8192) == 0);
    char *plain = malloc(8192);
    struct gpu_ptr_info i;
    CHECK_RC(gpu_query((char *)dev + 100, &i), 0);
    CHECK_EQ(i.kind, GPU_KIND_DEVICE);
    CHECK(i.base == dev);
    CHECK_EQ(i.len, 1 << 20);
    CHECK(i.buffer_id != 0);
    CHECK_RC(gpu_query(pinned, &i), 0);
    CHECK_EQ(i.kind, GPU_KIND_HOST_PINNED);
    CHECK_RC(gpu_query(plain, &i), 0);
    CHECK_EQ(i.kind, GPU_KIND_HOST);
    /* registering plain memory makes it pinned; twice is refused; unregister twice too */
    CHECK_RC(gpu_host_register(plain, 8192), 0);
    CHECK_RC(gpu_query(plain + 10, &i), 0);
    CHECK_EQ(i.kind, GPU_KIND_HOST_PINNED);
    CHECK_RC(gpu_host_register(plain, 8192), ONI_EPINNED);
    CHECK_RC(gpu_host_unregister(plain), 0);
    CHECK_RC(gpu_host_unregister(plain), ONI_ENOTPINNED);
    /* a freed and reallocated buffer gets a new id */
    uint64_t id = 0;
    CHECK_RC(gpu_pin_device(dev, &i), 0);
    id = i.buffer_id;
    gpu_free(dev);
    CHECK_RC(gpu_alloc(&dev, 1 << 20), 0);
    CHECK_RC(gpu_query(dev, &i), 0);
    CHECK(i.buffer_id != id);
    CHECK_RC(gpu_pin_device(plain, &i), ONI_EINVALARG);
    gpu_free(dev);
    gpu_host_free(pinned);
    free(plain);
}

TEST(gpu_copies_and_completion_word)
{
    NEED_GPU();
    size_t n = 3 << 20;
    uint8_t *dev = NULL, *back = malloc(n), *src = malloc(n);
    uint32_t *word_dev = NULL, *word_host = NULL;
    REQUIRE(gpu_alloc((void **)&dev, n) == 0);
    REQUIRE(gpu_alloc((void **)&word_dev, 4) == 0);
    REQUIRE(gpu_host_alloc((void **)&word_host, 4) == 0);
    for (size_t i = 0; i < n; i++)
        src[i] = (uint8_t)(i * 13 + 1);
    struct gpu_stream *s = NULL;
    REQUIRE(gpu_stream_create(&s) == 0);
    *word_host = 0;
    CHECK_RC(gpu_memset(word_dev, 0, 4), 0);
    CHECK_RC(gpu_copy_async(s, dev, src, n), 0);
    CHECK_RC(gpu_write_word_async(s, word_host, 77), 0);
    CHECK_RC(gpu_write_word_async(s, word_dev, 78), 0);
    CHECK_RC(gpu_stream_wait(s, 2000), 0);
    CHECK_EQ(*(volatile uint32_t *)word_host, 77);
    uint32_t w = 0;
    CHECK_RC(gpu_copy(&w, word_dev, 4), 0);
    CHECK_EQ(w, 78);
    CHECK_RC(gpu_copy(back, dev, n), 0);
    CHECK(memcmp(back, src, n) == 0);
    /* events */
    struct gpu_event *e = NULL;
    REQUIRE(gpu_event_create(&e) == 0);
    CHECK_RC(gpu_copy_async(s, back, dev, n), 0);
    CHECK_RC(gpu_event_record(e, s), 0);
    CHECK_RC(gpu_event_wait(e, 2000), 0);
    CHECK(memcmp(back, src, n) == 0);
    gpu_event_destroy(e);
    gpu_stream_destroy(s);
    gpu_free(dev);
    gpu_free(word_dev);
    gpu_host_free(word_host);
    free(back);
    free(src);
}

/* The pipeline with real asynchronous host->GPU copies out of two pinned slots. */
struct real_pipe {
    const uint8_t *src;
    uint8_t *dev, *slot[2];
    struct gpu_stream *s;
    struct gpu_event *e[2];
};

static int rp_a(void *c, int k, size_t off, size_t n)
{
    struct real_pipe *p = c;
    memcpy(p->slot[k], p->src + off, n);
    return 0;
}

static int rp_b(void *c, int k, size_t off, size_t n)
{
    struct real_pipe *p = c;
    int rc = gpu_copy_async(p->s, p->dev + off, p->slot[k], n);
    return rc ? rc : gpu_event_record(p->e[k], p->s);
}

static int rp_wait(void *c, int k)
{
    struct real_pipe *p = c;
    return gpu_event_wait(p->e[k], 2000);
}

TEST(gpu_pipe_with_real_copies)
{
    NEED_GPU();
    size_t n = 10 << 20, chunk = 1 << 20;
    struct real_pipe p = {0};
    uint8_t *src = malloc(n), *back = malloc(n);
    for (size_t i = 0; i < n; i++)
        src[i] = (uint8_t)(i ^ (i >> 11));
    p.src = src;
    REQUIRE(gpu_alloc((void **)&p.dev, n) == 0);
    REQUIRE(gpu_host_alloc((void **)&p.slot[0], chunk) == 0);
    REQUIRE(gpu_host_alloc((void **)&p.slot[1], chunk) == 0);
    REQUIRE(gpu_stream_create(&p.s) == 0);
    REQUIRE(gpu_event_create(&p.e[0]) == 0 && gpu_event_create(&p.e[1]) == 0);
    struct gpu_pipe_ops ops = {&p, rp_a, NULL, rp_b, rp_wait};
    for (size_t total = 4; total <= n; total = total * 3 + 4) {
        CHECK_RC(gpu_memset(p.dev, 0, n), 0);
        CHECK_RC(gpu_pipe_run(total, chunk, 2, &ops), 0);
        CHECK_RC(gpu_copy(back, p.dev, total), 0);
        if (memcmp(back, src, total))
            UNIT_FAIL("pipeline corrupted a block of %zu bytes", total);
    }
    gpu_event_destroy(p.e[0]);
    gpu_event_destroy(p.e[1]);
    gpu_stream_destroy(p.s);
    gpu_host_free(p.slot[0]);
    gpu_host_free(p.slot[1]);
    gpu_free(p.dev);
    free(src);
    free(back);
}

TEST(gpu_wait_has_a_deadline)
{
    NEED_GPU();
    /* a stream held back by a wait on a word that the host writes late: the
     * host's wait ends with ONI_ETIMEOUT near its deadline, then the write
     * releases the stream and the work behind the wait completes */
    uint32_t *flag = NULL, *out = NULL;
    REQUIRE(gpu_host_alloc((void **)&flag, 4) == 0);
    REQUIRE(gpu_host_alloc((void **)&out, 4) == 0);
    *flag = 0, *out = 0;
    struct gpu_stream *s = NULL;
    REQUIRE(gpu_stream_create(&s) == 0);
    CHECK_RC(gpu_wait_word_async(s, flag, 5), 0);
    CHECK_RC(gpu_write_word_async(s, out, 9), 0);
    uint64_t t0 = oni_now_ns();
    CHECK_RC(gpu_stream_wait(s, 50), ONI_ETIMEOUT);
    uint64_t dt = oni_now_ns() - t0;
    CHECK(dt >= 50000000u && dt < 1000000000u);
    CHECK_EQ(*(volatile uint32_t *)out, 0);
    __atomic_store_n(flag, 5u, __ATOMIC_RELEASE);
    CHECK_RC(gpu_stream_wait(s, 2000), 0);
    CHECK_EQ(*(volatile uint32_t *)out, 9);
    gpu_stream_destroy(s);
    gpu_host_free(flag);
    gpu_host_free(out);
}

/* A stream's completion word goes back to a list when the stream is
 * destroyed, holding the last value it waited for; the next stream takes the
 * same word, and its waits must still wait for its own work. */
TEST(gpu_wait_on_a_recycled_word_waits)
{
    NEED_GPU();
    uint32_t *gate = NULL;
    REQUIRE(gpu_host_alloc((void **)&gate, 4) == 0);
    *gate = 0;
    struct gpu_stream *s = NULL;
    REQUIRE(gpu_stream_create(&s) == 0);
    for (int i = 0; i < 1000; i++) /* the word climbs to 1000 */
        CHECK_RC(gpu_stream_wait(s, 2000), 0);
    gpu_stream_destroy(s);
    REQUIRE(gpu_stream_create(&s) == 0); /* the word just given back (the list is LIFO) */
    CHECK_RC(gpu_wait_word_async(s, gate, 1), 0);
    CHECK_RC(gpu_stream_wait(s, 20), ONI_ETIMEOUT);
    __atomic_store_n(gate, 1u, __ATOMIC_RELEASE);
    CHECK_RC(gpu_stream_wait(s, 2000), 0);
    gpu_stream_destroy(s);
    gpu_host_free(gate);
}

/* Several threads copy and wait on one stream at once: each wait ends when
 * its own copy has landed, never with a false timeout (the values the
 * stream writes for the waiters must go up in the order they are queued). */
#define WAITERS 4
#define WAIT_ROUNDS 3000
struct waiter {
    struct gpu_stream *s;
    uint8_t *dev, *host;
    int fails;
};

static void *wait_loop(void *arg)
{
    struct waiter *w = arg;
    for (int i = 0; i < WAIT_ROUNDS; i++) {
        w->host[0] = (uint8_t)i;
        if (gpu_copy_async(w->s, w->dev, w->host, 4096) || gpu_stream_wait(w->s, 2000))
            w->fails++;
    }
    return NULL;
}

TEST(gpu_wait_by_several_threads)
{
    NEED_GPU();
    struct gpu_stream *s = NULL;
    REQUIRE(gpu_stream_create(&s) == 0);
    struct waiter w[WAITERS];
    pthread_t t[WAITERS];
    for (int i = 0; i < WAITERS; i++) {
        w[i] = (struct waiter){s, NULL, NULL, 0};
        REQUIRE(gpu_alloc((void **)&w[i].dev, 4096) == 0);
        REQUIRE(gpu_host_alloc((void **)&w[i].host, 4096) == 0);
    }
    for (int i = 0; i < WAITERS; i++)
        REQUIRE(pthread_create(&t[i], NULL, wait_loop, &w[i]) == 0);
    for (int i = 0; i < WAITERS; i++) {
        pthread_join(t[i], NULL);
        CHECK_EQ(w[i].fails, 0);
        uint8_t last = 0;
        CHECK_RC(gpu_copy(&last, w[i].dev, 1), 0);
        CHECK_EQ(last, (uint8_t)(WAIT_ROUNDS - 1));
        gpu_free(w[i].dev);
        gpu_host_free(w[i].host);
    }
    gpu_stream_destroy(s);
}

/* Destroying a stream does not wait for the rest of the device: here
 * another stream is held back by a wait on a host word, and the destroy of
 * an idle stream must return at once (a cudaFreeHost in it would wait for
 * the held stream). A watchdog releases the held stream after 2 s, so a
 * regression fails the test instead of hanging it. */
static void *release_later(void *word)
{
    struct timespec ts = {2, 0};
    nanosleep(&ts, NULL);
    __atomic_store_n((uint32_t *)word, 1u, __ATOMIC_RELEASE);
    return NULL;
}

TEST(gpu_stream_destroy_does_not_wait_for_the_device)
{
    NEED_GPU();
    uint32_t *word = NULL;
    REQUIRE(gpu_host_alloc((void **)&word, 4) == 0);
    *word = 0;
    struct gpu_stream *held = NULL;
    REQUIRE(gpu_stream_create(&held) == 0);
    CHECK_RC(gpu_wait_word_async(held, word, 1), 0);
    pthread_t dog;
    REQUIRE(pthread_create(&dog, NULL, release_later, word) == 0);
    uint64_t worst = 0;
    for (int i = 0; i < 20; i++) {
        struct gpu_stream *s = NULL;
        REQUIRE(gpu_stream_create(&s) == 0);
        CHECK_RC(gpu_stream_wait(s, 1000), 0); /* nothing queued: its own word is written at once */
        uint64_t t0 = oni_now_ns();
        gpu_stream_destroy(s);
        uint64_t dt = oni_now_ns() - t0;
        worst = dt > worst ? dt : worst;
    }
    CHECK(worst < 500000000u); /* far below the watchdog's 2 s */
    pthread_join(dog, NULL);
    CHECK_RC(gpu_stream_wait(held, 2000), 0);
    gpu_stream_destroy(held);
    gpu_host_free(word);
}

TEST(gpu_absent_paths_fail_cleanly)
{
    if (gpu_available(why, sizeof why)) {
        /* with a device, a pointer that is no memory at all is plain host to CUDA */
        struct gpu_ptr_info i;
        CHECK_RC(gpu_query((void *)(uintptr_t)0x10, &i), 0);
        CHECK_EQ(i.kind, GPU_KIND_HOST);
        return;
    }
    void *p = (void *)1;
    CHECK_RC(gpu_alloc(&p, 64), ONI_ENOGPU);
    CHECK(p == NULL);
    struct gpu_stream *s = (void *)1;
    CHECK_RC(gpu_stream_create(&s), ONI_ENOGPU);
    CHECK(s == NULL);
    CHECK(strstr(why, "no CUDA device") != NULL);
    if (ONIGPU_HAVE_CUDA)
        return;
    /* Built without CUDA (gpu_nocuda.c): every call that needs a GPU answers
     * ONI_ENOGPU, every pointer is plain host memory that CUDA does not know. */
    char name[32] = "x";
    CHECK_RC(gpu_name(name, sizeof name), ONI_ENOGPU);
    CHECK_EQ(name[0], 0);
    int x = 0;
    struct gpu_ptr_info i;
    memset(&i, 0x55, sizeof i);
    CHECK_RC(gpu_query(&x, &i), 0);
    CHECK(i.kind == GPU_KIND_HOST && i.base == NULL && i.len == 0 && i.buffer_id == 0);
    CHECK_RC(gpu_query(&x, NULL), ONI_EINVALARG);
    unsigned long long id = 7;
    CHECK_RC(gpu_buffer_id(&x, &id), 0);
    CHECK_EQ(id, 0);
    CHECK_RC(gpu_buffer_id(&x, NULL), ONI_EINVALARG);
    CHECK_RC(gpu_pin_device(&x, &i), ONI_ENOGPU);
    CHECK_RC(gpu_host_register(&x, sizeof x), ONI_ENOGPU);
    CHECK_RC(gpu_copy(&x, &x, sizeof x), ONI_ENOGPU);
}
