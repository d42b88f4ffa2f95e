/* framerate.c - frames/s of any ONI 4.x host library on a driver: the
 * program tools/bench-upstream.sh builds twice, against upstream liboni and
 * against onigpu's, so both run the same code. It includes only oni.h.
 *
 *   framerate [-t] DRIVER BLOCKREADSIZE SECONDS [MAXPAYLOAD]
 *   framerate [-t] DRIVER BLOCKREADSIZE Nf [MAXPAYLOAD]  (exactly N frames, no warm-up)
 *
 * -t starts a second thread that only sleeps, so the process is not
 * single-threaded: libraries that skip atomic instructions while a process
 * has one thread (onigpu's read path, glibc's malloc) pay them.
 *
 * Init, disable the devices whose read_size is not a multiple of 4 (upstream
 * pads those frames wrongly, so it would misparse the stream) and, with
 * MAXPAYLOAD, those whose read_size exceeds it (small frames only: the
 * libraries' cost per frame with less of the driver's per byte), set
 * BLOCKREADSIZE and RUNNING, warm up 0.2 s, then count oni_read_frame +
 * oni_destroy_frame pairs for SECONDS (the clock read once per 256 frames).
 * Then, untimed, 100000 more frames are checked: each frame's device is in
 * the table with data_sz = read_size, and with the `test` driver the first
 * 8 payload bytes (the device's frame counter) go up by one per device, so
 * a library that loses, repeats or misparses frames is caught.
 * Prints one line: block=N fps=F cpufps=P mbps=M checked=C bad=B; exit 0
 * when B = 0. fps counts wall-clock time; cpufps the CPU time of the thread
 * (CLOCK_THREAD_CPUTIME_ID), which time taken by other processes on a shared
 * machine does not inflate.
 * The Nf form is for instruction counts (valgrind): the difference of two
 * runs with different N is the cost of N2 - N1 frames, setup excluded. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "oni.h"

#define MAXDEV 256
#define CHECK_FRAMES 100000

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double now(void) { return clock_s(CLOCK_MONOTONIC); }

static oni_device_t table[MAXDEV];
static oni_size_t ndev;

static const oni_device_t *find(oni_dev_idx_t idx)
{
    for (oni_size_t i = 0; i < ndev; i++)
        if (table[i].idx == idx)
            return &table[i];
    return NULL;
}

/* Untimed check of n frames; returns the number of bad ones. */
static unsigned long long check(oni_ctx ctx, int counters, unsigned long long n)
{
    static unsigned long long next[MAXDEV];
    static int seen[MAXDEV];
    unsigned long long bad = 0;
    for (unsigned long long k = 0; k < n; k++) {
        oni_frame_t *f;
        if (oni_read_frame(ctx, &f) < 0)
            return bad + (n - k);
        const oni_device_t *d = find(f->dev_idx);
        if (!d || d->read_size != f->data_sz) {
            bad++;
        } else if (counters && f->data_sz >= 8) {
            size_t i = (size_t)(d - table);
            unsigned long long c;
            memcpy(&c, f->data, 8);
            if (seen[i] && c != next[i])
                bad++;
            seen[i] = 1;
            next[i] = c + 1;
        }
        oni_destroy_frame(f);
    }
    return bad;
}

static void *sleeper(void *arg)
{
    for (;;)
        pause();
    return arg;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "-t") == 0) {
        pthread_t t;
        if (pthread_create(&t, NULL, sleeper, NULL)) {
            fprintf(stderr, "framerate: cannot start the second thread\n");
            return 1;
        }
        argc--;
        argv++;
    }
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: framerate [-t] DRIVER BLOCKREADSIZE SECONDS|Nf [MAXPAYLOAD]\n");
        return 2;
    }
    unsigned long maxpay = (unsigned long)-1;
    if (argc == 5) {
        char *rest;
        maxpay = strtoul(argv[4], &rest, 10);
        if (*rest || !maxpay) {
            fprintf(stderr, "framerate: MAXPAYLOAD must be a positive number of bytes\n");
            return 2;
        }
    }
    const char *drv = argv[1];
    char *rest, *unit;
    unsigned long bl = strtoul(argv[2], &rest, 0);
    double secs = strtod(argv[3], &unit);
    int frames_form = !strcmp(unit, "f");
    if (*rest || !bl || bl > UINT32_MAX || !(secs > 0 && secs < 1e9) || (*unit && !frames_form) ||
        (frames_form && (secs < 1 || secs != (double)(unsigned long long)secs))) {
        fprintf(stderr, "framerate: BLOCKREADSIZE must be a positive number of bytes, SECONDS a positive "
                        "time or Nf a frame count\n");
        return 2;
    }
    oni_size_t block = (oni_size_t)bl;
    unsigned long long count = 0; /* frames to read in the Nf form */
    if (*unit == 'f')
        count = (unsigned long long)secs;
    oni_ctx ctx = oni_create_ctx(drv);
    if (!ctx || oni_init_ctx(ctx, -1)) {
        fprintf(stderr, "framerate: cannot open driver %s\n", drv);
        return 1;
    }
    size_t len = sizeof ndev;
    oni_get_opt(ctx, ONI_OPT_NUMDEVICES, &ndev, &len);
    len = sizeof table;
    if (ndev > MAXDEV || oni_get_opt(ctx, ONI_OPT_DEVICETABLE, table, &len)) {
        fprintf(stderr, "framerate: cannot read the device table\n");
        return 1;
    }
    for (oni_size_t i = 0; i < ndev; i++)
        if (table[i].read_size % 4 || table[i].read_size > maxpay) {
            if (oni_write_reg(ctx, table[i].idx, 0, 0)) { /* register 0: ENABLE */
                fprintf(stderr, "framerate: cannot disable device %u\n", table[i].idx);
                return 1;
            }
            table[i].read_size = 0; /* so the check refuses its frames */
        }
    oni_reg_val_t run = 1;
    if (oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &block, sizeof block) ||
        oni_set_opt(ctx, ONI_OPT_RUNNING, &run, sizeof run)) {
        fprintf(stderr, "framerate: block size %u or RUNNING refused\n", block);
        return 1;
    }
    unsigned long long frames = 0, bytes = 0;
    double t0 = now(), warm_end = t0 + (count ? 0 : 0.2), end = 0, t;
    double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
    for (int measuring = count > 0;;) {
        for (int i = 0; i < 256; i++) {
            oni_frame_t *f;
            if (oni_read_frame(ctx, &f) < 0) {
                fprintf(stderr, "framerate: oni_read_frame failed\n");
                return 1;
            }
            bytes += f->data_sz;
            oni_destroy_frame(f);
        }
        frames += 256;
        t = now();
        if (!measuring && t >= warm_end) {
            measuring = 1;
            frames = bytes = 0;
            t0 = t;
            c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
            end = t + secs;
        } else if (measuring && (count ? frames >= count : t >= end)) {
            break;
        }
    }
    double cpu = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
    unsigned long long bad = check(ctx, strcmp(drv, "test") == 0, CHECK_FRAMES);
    printf("block=%u fps=%.0f cpufps=%.0f mbps=%.2f checked=%d bad=%llu\n", block, frames / (t - t0),
           frames / cpu, bytes / (t - t0) / 1e6, CHECK_FRAMES, bad);
    oni_destroy_ctx(ctx);
    return bad ? 1 : 0;
}
