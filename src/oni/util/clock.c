/* clock.c - the monotonic clock every timing in onigpu uses (clock.h). */
#include <time.h>
#include "oni/util/clock.h"

uint64_t oni_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t oni_ms_from_now(uint32_t ms) { return oni_now_ns() + (uint64_t)ms * 1000000u; }

void oni_timespec_at(uint64_t ns, struct timespec *ts)
{
    ts->tv_sec = (time_t)(ns / 1000000000ull);
    ts->tv_nsec = (long)(ns % 1000000000ull);
}

uint32_t oni_ms_left(uint64_t deadline_ns)
{
    uint64_t now = oni_now_ns();
    if (now >= deadline_ns)
        return 0;
    uint64_t ms = (deadline_ns - now + 999999) / 1000000;
    return ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms;
}
