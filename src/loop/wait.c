/* wait.c - spin, then sleep on a futex until woken (wait.h). */
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "oni.h"
#include "loop/wait.h"
#include "oni/util/clock.h"

/* The futex calls on the 32-bit word (futex(2)), process-private. ns
 * UINT64_MAX: no deadline. Any return (EAGAIN: the word moved, a wake came;
 * EINTR; ETIMEDOUT) has the caller look again. */
static void futex_sleep(_Atomic uint32_t *word, uint32_t seen, uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, seen, ns == UINT64_MAX ? NULL : &ts, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static void pause_cpu(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

void loop_wake_init(struct loop_wake *w)
{
    atomic_init(&w->word, 0);
    atomic_init(&w->sleepers, 0);
}

/* No lost wake-up: the waker's and the sleeper's read-modify-writes of
 * `sleepers` are ordered one way or the other. Waker first: the sleeper's
 * increment reads from it (acquire after release), so the sleeper's last
 * look at its condition sees the waker's store. Sleeper first: the waker
 * reads a sleeper and bumps the word, and the futex either sees the word
 * moved or is woken. (RMWs, not fences: TSan sees them.) */
void loop_wake_all(struct loop_wake *w)
{
    if (atomic_fetch_add_explicit(&w->sleepers, 0, memory_order_acq_rel) == 0)
        return;
    atomic_fetch_add_explicit(&w->word, 1, memory_order_release);
    futex_wake(&w->word);
}

/* One sleep: announced, a last look, then the futex unless a wake came
 * after the word was read. 1 if done was seen true. */
static int sleep_once(struct loop_wake *w, int (*done)(const void *), const void *arg, uint64_t ns)
{
    atomic_fetch_add_explicit(&w->sleepers, 1, memory_order_acq_rel);
    uint32_t seen = atomic_load_explicit(&w->word, memory_order_acquire);
    int ok = done(arg);
    if (!ok)
        futex_sleep(&w->word, seen, ns);
    atomic_fetch_sub_explicit(&w->sleepers, 1, memory_order_relaxed);
    return ok;
}

int loop_wake_until(struct loop_wake *w, int (*done)(const void *), const void *arg, uint64_t spin_ns,
                    uint64_t limit_ns)
{
    uint64_t t0 = oni_now_ns();
    for (unsigned n = 0;; n++) { /* the spin */
        if (done(arg))
            return 0;
        if ((n & 63) == 0) {
            uint64_t t = oni_now_ns();
            if (t >= limit_ns)
                return done(arg) ? 0 : ONI_ETIMEOUT;
            if (t - t0 >= spin_ns)
                break;
            /* Give the core to a runnable thread, if any: with fewer cores
             * than loop threads a pure spin would starve the one working. */
            sched_yield();
        }
        pause_cpu();
    }
    for (;;) { /* the sleeps: one per wake (or spurious return) */
        uint64_t t = oni_now_ns();
        if (t >= limit_ns)
            return done(arg) ? 0 : ONI_ETIMEOUT;
        if (sleep_once(w, done, arg, limit_ns == UINT64_MAX ? UINT64_MAX : limit_ns - t))
            return 0;
        if (done(arg))
            return 0;
    }
}
