/* realtime.h - checks against the wall clock (a rate, no drops at the nominal
 * rate, a latency) on a shared machine.
 *
 * Such a check needs the CPU when it wants it. Whether it had it is measured,
 * not assumed: the machine's CPU pressure over the attempt (Linux PSI,
 * /proc/pressure/cpu "some": the share of wall time in which a runnable task
 * waited for a CPU). A real-time check that fails while the pressure was low
 * fails at once (the machine gave it the CPU); one that fails under pressure
 * is tried again, up to RT_ATTEMPTS times; if every attempt was starved, the
 * real-time check is skipped with the measured pressures (never passed).
 * Without PSI the pressure is unknown: retries, then a failure.
 * tests/realtime.labels lists the programs with such checks; CTest runs
 * them alone (RUN_SERIAL), so the suite does not starve them itself. */
#ifndef TEST_REALTIME_H
#define TEST_REALTIME_H

#include <stdint.h>
#include <stdio.h>
#include <time.h>

#define RT_ATTEMPTS 3
#define RT_BUSY 0.20 /* pressure from which a failed attempt counts as starved */

struct rt_clock {
    double some_us; /* PSI "some" total at the start, us; < 0: no PSI */
    uint64_t t_ns;
};

/* PSI "some" total of the CPU in us, or -1 when the machine does not report it. */
static double rt_some_us(void)
{
    FILE *f = fopen("/proc/pressure/cpu", "r");
    double total = -1;
    if (f) {
        if (fscanf(f, "some avg10=%*f avg60=%*f avg300=%*f total=%lf", &total) != 1)
            total = -1;
        fclose(f);
    }
    return total;
}

static uint64_t rt_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Start measuring the CPU pressure of one attempt. */
static void rt_start(struct rt_clock *c)
{
    c->some_us = rt_some_us();
    c->t_ns = rt_now_ns();
}

/* CPU pressure since rt_start: share of wall time in [0, 1], or -1 if unknown. */
static double rt_pressure(const struct rt_clock *c)
{
    double now = rt_some_us(), wall_us = (double)(rt_now_ns() - c->t_ns) / 1e3;
    if (c->some_us < 0 || now < 0 || wall_us <= 0)
        return -1;
    double p = (now - c->some_us) / wall_us;
    return p < 0 ? 0 : p > 1 ? 1 : p;
}

enum rt_verdict {
    RT_PASS,    /* the real-time checks held */
    RT_RETRY,   /* failed, possibly for want of CPU: try again */
    RT_FAIL,    /* failed with the CPU available (or out of attempts, pressure unknown) */
    RT_STARVED, /* failed on every attempt, each under CPU pressure: not checkable here */
};

/* What to do after attempt number `attempt` (1-based) whose real-time checks
 * held (ok) or not, with the pressure measured over it. */
static enum rt_verdict rt_judge(int ok, int attempt, double pressure)
{
    if (ok)
        return RT_PASS;
    if (pressure >= 0 && pressure < RT_BUSY)
        return RT_FAIL;
    if (attempt < RT_ATTEMPTS)
        return RT_RETRY;
    return pressure >= RT_BUSY ? RT_STARVED : RT_FAIL;
}

/* Print the verdict on a failed attempt (stderr, in the test's log). */
static void rt_report(const char *what, int attempt, double pressure, enum rt_verdict v)
{
    static const char *const says[] = {"ok", "trying again", "failed", "starved on every attempt: not checked"};
    if (pressure >= 0)
        fprintf(stderr, "  %s: attempt %d failed its real-time checks, CPU pressure %.0f%%: %s\n", what, attempt,
                pressure * 100, says[v]);
    else
        fprintf(stderr, "  %s: attempt %d failed its real-time checks, CPU pressure unknown: %s\n", what, attempt,
                says[v]);
}

#endif
