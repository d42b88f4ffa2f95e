/* test_loop_wait.c - the loop threads' wait (src/loop/wait.h): a wake before
 * the wait, a wait then a wake, the deadline, a stop while waiting, and many
 * hand-offs back and forth between two threads with every wait going to
 * sleep (a lost wake-up hangs, and CTest's deadline fails it); the engine's
 * stop waking its receive and process threads asleep in their hand-offs. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include "oni.h"
#include "unit.h"
#include "loop/engine.h"
#include "loop/wait.h"
#include "oni/util/clock.h"

struct flags {
    _Atomic int go, stop;
};

static int go_or_stop(const void *p)
{
    const struct flags *f = p;
    return atomic_load(&f->go) || atomic_load(&f->stop);
}

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, ms % 1000 * 1000000l};
    nanosleep(&ts, NULL);
}

/* A waiter thread: spin 0 (it sleeps at once), no deadline. */
struct waiter {
    struct loop_wake *w;
    struct flags *f;
    uint64_t limit;
    int rc;
    _Atomic int done;
};

static void *wait_main(void *p)
{
    struct waiter *a = p;
    a->rc = loop_wake_until(a->w, go_or_stop, a->f, 0, a->limit);
    atomic_store(&a->done, 1);
    return NULL;
}

/* Until the waiter sleeps on w (at most 10 s: it starts sleeping at once). */
static int await_sleeper(struct loop_wake *w)
{
    uint64_t limit = oni_ms_from_now(10000);
    while (atomic_load(&w->sleepers) == 0 && oni_now_ns() < limit)
        nap_ms(1);
    return atomic_load(&w->sleepers) > 0;
}

TEST(wake_before_wait)
{
    struct loop_wake w;
    struct flags f = {0, 0};
    loop_wake_init(&w);
    atomic_store(&f.go, 1);
    loop_wake_all(&w);
    CHECK_EQ(atomic_load(&w.word), 0); /* nobody slept: no system call, the word untouched */
    CHECK_RC(loop_wake_until(&w, go_or_stop, &f, 0, UINT64_MAX), 0);
    CHECK_RC(loop_wake_until(&w, go_or_stop, &f, 50000, oni_ms_from_now(10)), 0);
    CHECK_EQ(atomic_load(&w.sleepers), 0);
}

TEST(wait_then_wake)
{
    struct loop_wake w;
    struct flags f = {0, 0};
    loop_wake_init(&w);
    struct waiter a = {&w, &f, UINT64_MAX, -1, 0};
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, wait_main, &a) == 0);
    CHECK(await_sleeper(&w));
    nap_ms(20);
    CHECK(!atomic_load(&a.done)); /* asleep, not returned on its own */
    atomic_store(&f.go, 1);
    loop_wake_all(&w);
    pthread_join(th, NULL);
    CHECK_RC(a.rc, 0);
    CHECK(atomic_load(&w.word) >= 1); /* the wake found the sleeper */
    CHECK_EQ(atomic_load(&w.sleepers), 0);
}

TEST(deadline)
{
    struct loop_wake w;
    struct flags f = {0, 0};
    loop_wake_init(&w);
    uint64_t t0 = oni_now_ns();
    CHECK_RC(loop_wake_until(&w, go_or_stop, &f, 0, t0 + 30000000ull), ONI_ETIMEOUT);
    CHECK(oni_now_ns() >= t0 + 30000000ull); /* not before it */
    /* a spin budget past the deadline: the deadline still ends it */
    t0 = oni_now_ns();
    CHECK_RC(loop_wake_until(&w, go_or_stop, &f, 1000000000ull, t0 + 5000000ull), ONI_ETIMEOUT);
    CHECK(oni_now_ns() >= t0 + 5000000ull);
    /* a deadline already passed, the condition true: done, not a timeout */
    atomic_store(&f.go, 1);
    CHECK_RC(loop_wake_until(&w, go_or_stop, &f, 0, 0), 0);
    /* a waiter with a deadline that a wake ends first */
    atomic_store(&f.go, 0);
    struct waiter a = {&w, &f, oni_ms_from_now(60000), -1, 0};
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, wait_main, &a) == 0);
    CHECK(await_sleeper(&w));
    atomic_store(&f.go, 1);
    loop_wake_all(&w);
    pthread_join(th, NULL);
    CHECK_RC(a.rc, 0);
}

TEST(stop_while_waiting)
{
    /* Two sleepers on one wake, as the engine's stop wakes every thread:
     * both return, and see the stop. */
    struct loop_wake w;
    struct flags f = {0, 0};
    loop_wake_init(&w);
    struct waiter a = {&w, &f, UINT64_MAX, -1, 0}, b = a;
    pthread_t ta, tb;
    REQUIRE(pthread_create(&ta, NULL, wait_main, &a) == 0);
    REQUIRE(pthread_create(&tb, NULL, wait_main, &b) == 0);
    uint64_t limit = oni_ms_from_now(10000);
    while (atomic_load(&w.sleepers) < 2 && oni_now_ns() < limit)
        nap_ms(1);
    CHECK_EQ(atomic_load(&w.sleepers), 2);
    atomic_store(&f.stop, 1);
    loop_wake_all(&w);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK_RC(a.rc, 0);
    CHECK_RC(b.rc, 0);
    CHECK(!atomic_load(&f.go));
}

/* Ping-pong: each side waits for the counter to reach its turn, then
 * advances it and wakes the other. */
struct pingpong {
    struct loop_wake wake[2];
    _Atomic uint64_t count;
    uint64_t rounds, spin_ns;
    _Atomic int errors;
};

struct turn {
    struct pingpong *pp;
    int side;
    uint64_t want;
};

static int my_turn(const void *p)
{
    const struct turn *t = p;
    return atomic_load_explicit(&t->pp->count, memory_order_acquire) >= t->want;
}

static void *player(void *p)
{
    struct turn *t = p;
    struct pingpong *pp = t->pp;
    for (uint64_t r = 0; r < pp->rounds; r++) {
        t->want = 2 * r + (uint64_t)t->side;
        if (loop_wake_until(&pp->wake[t->side], my_turn, t, pp->spin_ns, UINT64_MAX) ||
            atomic_load(&pp->count) != t->want) {
            atomic_fetch_add(&pp->errors, 1);
            break;
        }
        atomic_store_explicit(&pp->count, t->want + 1, memory_order_release);
        loop_wake_all(&pp->wake[!t->side]);
    }
    return NULL;
}

static void play(uint64_t rounds, uint64_t spin_ns)
{
    struct pingpong pp = {.rounds = rounds, .spin_ns = spin_ns};
    loop_wake_init(&pp.wake[0]);
    loop_wake_init(&pp.wake[1]);
    struct turn t0 = {&pp, 0, 0}, t1 = {&pp, 1, 0};
    pthread_t a, b;
    REQUIRE(pthread_create(&a, NULL, player, &t0) == 0);
    REQUIRE(pthread_create(&b, NULL, player, &t1) == 0);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    CHECK_EQ(atomic_load(&pp.errors), 0);
    CHECK_EQ(atomic_load(&pp.count), 2 * rounds);
}

TEST(many_rounds_two_threads)
{
    play(20000, 0);     /* every wait sleeps: the wake-up race each time */
    play(20000, 2000);  /* mostly spins, some sleep */
}

/* A sink that blocks its first write until released (at most 30 s). */
struct held_sink {
    _Atomic int release, writes;
};

static int held_write(void *ctx, uint64_t seq, const void *out, size_t len, uint32_t t)
{
    struct held_sink *h = ctx;
    uint64_t limit = oni_ms_from_now(30000);
    while (!atomic_load(&h->release) && oni_now_ns() < limit)
        nap_ms(1);
    atomic_fetch_add(&h->writes, 1);
    return 0;
}

static int zero_read(void *ctx, void *buf, size_t len, uint32_t t)
{
    memset(buf, 0, len);
    return 0;
}

static void *run_main(void *lp)
{
    return (void *)(intptr_t)loop_run(lp);
}

/* The sink holds block 0: both slots fill, the receive thread sleeps
 * waiting for room and the process thread for block 2. Only the stop can
 * wake the receive thread (nothing frees a slot): it must end while the
 * sink still holds its block. */
TEST(engine_stop_wakes_sleeping_threads)
{
    struct held_sink h;
    atomic_init(&h.release, 0);
    atomic_init(&h.writes, 0);
    struct loop_config c = {0};
    c.backend = LOOP_CPU;
    c.work = LOOP_WORK_MAC;
    c.in_bytes = c.out_bytes = 256;
    c.depth = 2;
    c.timeout_ms = 1000;
    c.mac.passes = 1;
    c.spin_us = 1; /* asleep almost at once */
    c.src.read = zero_read;
    c.sink = (struct loop_sink){&h, held_write};
    struct loop *lp = NULL;
    CHECK_RC(loop_create(&c, &lp), ONI_ESUCCESS);
    REQUIRE(lp);
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, run_main, lp) == 0);
    CHECK(await_sleeper(&lp->wake[LOOP_T_RECV]));
    CHECK(await_sleeper(&lp->wake[LOOP_T_PROCESS]));
    CHECK_EQ(atomic_load(&lp->started), 2);
    loop_stop(lp);
    uint64_t limit = oni_ms_from_now(10000);
    while (!atomic_load(&lp->recv_done) && oni_now_ns() < limit)
        nap_ms(1);
    CHECK(atomic_load(&lp->recv_done));
    CHECK_EQ(atomic_load(&h.writes), 0); /* still held: the stop woke it, not a freed slot */
    atomic_store(&h.release, 1);
    void *rc;
    pthread_join(th, &rc);
    CHECK_RC((int)(intptr_t)rc, ONI_ESUCCESS);
    CHECK_EQ(atomic_load(&h.writes), 2); /* what was started is drained */
    loop_destroy(lp);
}
