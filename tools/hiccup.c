/* hiccup.c - how often, how long and in what rhythm a spinning thread loses
 * time on this machine, with no GPU and no onigpu code involved: the
 * platform's own share of a latency tail (docs/transfers.md).
 *
 *   cc -O2 tools/hiccup.c -o hiccup && ./hiccup SECONDS [THRESHOLD_US] [PERIOD_MS]
 *
 * The thread reads the monotonic clock and its own CPU clock in a tight loop
 * for SECONDS. Every step of the monotonic clock above THRESHOLD_US (default
 * 20) is a hiccup; the CPU clock tells how much of it the thread was, by the
 * kernel's count, running (an interrupt, or a hypervisor that does not
 * account steal time) rather than kept off its CPU. Prints each hiccup (the
 * first MAX_LIST), a summary by length, and of the gaps under 50 ms between
 * two hiccups, how many lie within 0.15 ms of a multiple of PERIOD_MS
 * (default 4, a 250 Hz tick) against how many would by chance. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAX_HICCUPS 100000
#define MAX_LIST 200

static double clock_us(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static double at[MAX_HICCUPS], len[MAX_HICCUPS], oncpu[MAX_HICCUPS];

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: hiccup SECONDS [THRESHOLD_US] [PERIOD_MS]\n");
        return 2;
    }
    double secs = atof(argv[1]), thr = argc > 2 ? atof(argv[2]) : 20, period = argc > 3 ? atof(argv[3]) : 4;
    if (secs <= 0 || thr <= 0 || period <= 0) {
        fprintf(stderr, "hiccup: SECONDS, THRESHOLD_US and PERIOD_MS must be positive\n");
        return 2;
    }
    size_t n = 0;
    double t0 = clock_us(CLOCK_MONOTONIC), prev = t0, cprev = clock_us(CLOCK_THREAD_CPUTIME_ID);
    while (prev - t0 < secs * 1e6) {
        double t = clock_us(CLOCK_MONOTONIC), c = clock_us(CLOCK_THREAD_CPUTIME_ID);
        if (t - prev > thr && n < MAX_HICCUPS) {
            at[n] = prev - t0;
            len[n] = t - prev;
            oncpu[n] = c - cprev < t - prev ? c - cprev : t - prev;
            n++;
        }
        prev = t, cprev = c;
    }
    printf("%.1f s spun, %zu hiccups above %.0f us\n", secs, n, thr);
    printf("   start_ms    len_us  on_cpu_us\n");
    for (size_t i = 0; i < n && i < MAX_LIST; i++)
        printf("%11.3f %9.1f %10.1f\n", at[i] / 1e3, len[i], oncpu[i]);
    static const double upto[] = {50, 100, 200, 500, 1000, 1e9};
    double lo = thr;
    for (size_t e = 0; e < sizeof upto / sizeof upto[0]; e++) {
        size_t k = 0, on = 0;
        for (size_t i = 0; i < n; i++)
            if (len[i] > lo && len[i] <= upto[e]) {
                k++;
                on += oncpu[i] >= 0.9 * len[i];
            }
        if (k)
            printf("%6.0f .. %-6.0f us: %zu (%zu of them on the CPU throughout)\n", lo, upto[e], k, on);
        if (upto[e] > lo)
            lo = upto[e];
    }
    size_t gaps = 0, near = 0;
    for (size_t i = 1; i < n; i++) {
        double g = (at[i] - at[i - 1]) / 1e3;
        if (g >= 50)
            continue;
        double m = g / period, d = m - (double)(long)(m + 0.5);
        gaps++;
        near += (d < 0 ? -d : d) * period < 0.15;
    }
    printf("gaps under 50 ms between hiccups: %zu, within 0.15 ms of a multiple of %.2f ms: %zu (by chance: %.1f)\n",
           gaps, period, near, gaps * 0.3 / period);
    return 0;
}
