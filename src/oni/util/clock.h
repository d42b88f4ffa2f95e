/* clock.h - the monotonic clock every timing in onigpu uses, and deadlines
 * on it. Shared by every layer (the core, drivers, GPU helpers, the loop,
 * benchmarks, tools): one clock, so that times taken in one compare with
 * times taken in another. */
#ifndef ONI_UTIL_CLOCK_H
#define ONI_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Monotonic clock in nanoseconds. */
uint64_t oni_now_ns(void);

/* The oni_now_ns time ms milliseconds from now: a deadline. */
uint64_t oni_ms_from_now(uint32_t ms);

/* Whole milliseconds from now to deadline_ns (an oni_now_ns time), rounded up
 * (at least 1 while any time is left) and at most UINT32_MAX; 0 once it has passed. */
uint32_t oni_ms_left(uint64_t deadline_ns);

/* The oni_now_ns time ns as an absolute CLOCK_MONOTONIC timespec, for
 * pthread_cond_timedwait on a condition variable set to that clock. */
void oni_timespec_at(uint64_t ns, struct timespec *ts);

#endif
