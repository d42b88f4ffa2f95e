/* wait.h - private to src/loop: how one loop thread waits for another.
 *
 * A waiter spins (yielding) for a short budget, then sleeps in the kernel
 * (a futex on the wake's word) until a thread that changed what it waits
 * for calls loop_wake_all. The producer pays a system call only while
 * someone sleeps (the `sleepers` count); a wake that comes between the
 * waiter's last look and its sleep is not lost (the futex compares the
 * word, which each wake with a sleeper bumps). */
#ifndef LOOP_WAIT_H
#define LOOP_WAIT_H

#include <stdatomic.h>
#include <stdint.h>

struct loop_wake {
    _Atomic uint32_t word;     /* bumped by every wake that found a sleeper */
    _Atomic uint32_t sleepers; /* threads past their last look, not yet back */
};

/* A wake with nobody waiting on it. */
void loop_wake_init(struct loop_wake *w);

/* Wake every thread sleeping in loop_wake_until on w. Call it after the
 * store that makes their condition true (any memory order: a fence here
 * orders it before the look at `sleepers`). No system call when none sleeps. */
void loop_wake_all(struct loop_wake *w);

/* Wait until done(arg) is true: spin (yielding the core now and then) for
 * spin_ns, then sleep until woken through w, looking again at each wake.
 * done must become true only together with a loop_wake_all(w) (or be
 * checked by a deadline). 0 when done, ONI_ETIMEOUT once oni_now_ns()
 * passes limit_ns (UINT64_MAX: no deadline) with done still false. */
int loop_wake_until(struct loop_wake *w, int (*done)(const void *arg), const void *arg, uint64_t spin_ns,
                    uint64_t limit_ns);

#endif
