/* replay_loadtester.c - the closed-loop latency measurement of ONIX's
 * "Optimizing Closed Loop Performance" tutorial (open-ephys/bonsai-onix1-docs,
 * articles/tutorials/tune-readsize.md, commit 094c20b), replayed through
 * <oni.h> and <onix.h> only as Bonsai.ONIX1 (commit 30bc849) runs it: the
 * LoadTester produces frames at the rate and size of two NP2.0e probes
 * (60000 frames/s, 392 16-bit words), every 100th frame's hub clock is
 * written back (a loopback frame of 2 + 100 32-bit words), and the device
 * reports the hub-clock time from the frame's creation to the loopback's
 * arrival as HubClockDelta: a hardware-timed round trip. The tutorial reports
 * about 80 us with ReadSize 2048 on real ONIX hardware.
 *
 * Usage: replay_loadtester [seconds] [readsize] [frames/s]   (defaults 2,
 * 2048, the tutorial's 60000; CTest runs a slower rate, which a sanitizer
 * build on two cores can keep up with)
 * Prints the distribution of round-trip latencies; exit 0 when the protocol
 * behaved as on hardware (every loopback answered with a delta that is
 * positive and below one second), 1 otherwise. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "replay.h"

#define WHO "replay_loadtester"

/* the tutorial's settings (tune-readsize.md, "Hardware Configuration") */
enum { TUTORIAL_FPS = 60000, RECEIVED_WORDS = 392, TRANSMITTED_WORDS = 100, EVERY_NTH = 100, WRITE_SIZE = 16384 };
/* LoadTester registers (ConfigureLoadTester.cs:122-132) */
enum { LT_ENABLE = 0, LT_CLK_DIV = 1, LT_CLK_HZ = 2, LT_DTOH16_WORDS = 3, LT_HTOD32_WORDS = 4 };
enum { LT_OVERHEAD_CYCLES = 9 }; /* ConfigureLoadTester.cs:95 */
static long fps = TUTORIAL_FPS; /* frames/s: the tutorial's, or the command line's */
enum { MEMMON = 10 };

static replay_t rp;
static uint32_t acq_hz;

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int populate(const char *at)
{
    return rp_clroni_properties(&rp, &acq_hz, at);
}

static const oni_device_t *find(oni_dev_id_t id)
{
    for (oni_size_t i = 0; i < rp.ntable; i++)
        if (rp.table[i].id == id)
            return &rp.table[i];
    return NULL;
}

/* ConfigureLoadTester.Process (ConfigureLoadTester.cs:79-119) */
static int configure(oni_dev_idx_t lt)
{
    oni_reg_val_t clk = 0, div = 0;
    rp_write(&rp, lt, LT_ENABLE, 1, "ConfigureLoadTester.cs:91");
    if (rp_read(&rp, lt, LT_CLK_HZ, &clk, "ConfigureLoadTester.cs:93") ||
        !rp_check(&rp, fps <= clk / LT_OVERHEAD_CYCLES, "ConfigureLoadTester.cs:97-101",
                  "FramesPerSecond %ld above the maximum %u", fps, (unsigned)(clk / LT_OVERHEAD_CYCLES)))
        return 0;
    rp_write(&rp, lt, LT_CLK_DIV, clk / fps, "ConfigureLoadTester.cs:103");
    if (rp_read(&rp, lt, LT_CLK_DIV, &div, "ConfigureLoadTester.cs:105") ||
        !rp_check(&rp, div == clk / fps, "ConfigureLoadTester.cs:105", "CLK_DIV reads %u after %u", (unsigned)div,
                  (unsigned)(clk / fps)) ||
        !rp_check(&rp, RECEIVED_WORDS <= div - LT_OVERHEAD_CYCLES, "ConfigureLoadTester.cs:107-111",
                  "ReceivedWords %d above %u at %ld Hz", RECEIVED_WORDS, (unsigned)(div - LT_OVERHEAD_CYCLES), fps))
        return 0;
    rp_write(&rp, lt, LT_DTOH16_WORDS, RECEIVED_WORDS, "ConfigureLoadTester.cs:113");
    rp_write(&rp, lt, LT_HTOD32_WORDS, TRANSMITTED_WORDS, "ConfigureLoadTester.cs:114");
    /* the tutorial watches the hardware buffer (MemoryMonitorData, ConfigureMemoryMonitor.cs:77-83, 10 Hz) */
    if (rp_device(&rp, MEMMON) && rp_device(&rp, MEMMON)->id == ONIX_MEMUSAGE) {
        oni_reg_val_t mclk = 0;
        rp_write(&rp, MEMMON, 0, 1, "ConfigureMemoryMonitor.cs:80");
        if (!rp_read(&rp, MEMMON, 2, &mclk, "ConfigureMemoryMonitor.cs:81"))
            rp_write(&rp, MEMMON, 1, mclk / 10, "ConfigureMemoryMonitor.cs:81");
    }
    return rp.failures == 0;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 2;
    long readsize = argc > 2 ? atol(argv[2]) : 2048;
    fps = argc > 3 ? atol(argv[3]) : TUTORIAL_FPS;
    if (argc > 4 || seconds <= 0 || seconds > 600 || readsize < 8 || readsize > (1L << 24) || fps < 100 ||
        fps > 1000000) {
        fprintf(stderr, "usage: %s [seconds] [readsize] [frames/s]   (0 < seconds <= 600, default 2; readsize 8.. "
                        "bytes, default 2048; frames/s 100..10^6, default %d)\n", WHO, TUTORIAL_FPS);
        return 2;
    }
    if (rp_open(&rp, WHO, "riffa", 0, "ContextTask.cs:51-52,94"))
        return rp_close(&rp);
    if (!populate("clroni Context.cs:117-130"))
        return rp_close(&rp);
    const oni_device_t *d = find(ONIX_LOADTEST);
    if (!rp_check(&rp, d != NULL, "tune-readsize.md", "no LoadTester (id %d) in the device table", ONIX_LOADTEST))
        return rp_close(&rp);
    oni_dev_idx_t lt = d->idx;
    oni_reg_val_t total_mem = 0;
    if (!rp_expect_device(&rp, lt, ONIX_LOADTEST, 2, "ConfigureLoadTester.cs:90,124-125") || !configure(lt))
        return rp_close(&rp);
    if (rp_device(&rp, MEMMON) && rp_device(&rp, MEMMON)->id == ONIX_MEMUSAGE)
        rp_read(&rp, MEMMON, 3, &total_mem, "MemoryMonitorData.cs:35");
    /* the device stage latches with a reset (ContextTask.cs:275-295) */
    if (rp_set(&rp, ONI_OPT_RESET, 1, "ContextTask.cs:294") || !populate("clroni Context.cs:140-144"))
        return rp_close(&rp);
    d = rp_device(&rp, lt);
    if (!rp_check(&rp, d && d->read_size == 16 + 2 * RECEIVED_WORDS, "LoadTesterDataFrame.cs:41-59",
                  "LoadTester read frames of %u bytes, want 16 + 2 x %d", d ? (unsigned)d->read_size : 0u,
                  RECEIVED_WORDS) ||
        !rp_check(&rp, d->write_size == 0 || d->write_size >= 4 * (2 + TRANSMITTED_WORDS), "LoadTesterLoopback.cs:51",
                  "LoadTester write frames of %u bytes, the loopback frame has %d", (unsigned)d->write_size,
                  4 * (2 + TRANSMITTED_WORDS)))
        return rp_close(&rp);
    rp_set(&rp, ONI_OPT_BLOCKREADSIZE, (uint32_t)readsize, "ContextTask.cs:339");
    rp_set(&rp, ONI_OPT_BLOCKWRITESIZE, WRITE_SIZE, "ContextTask.cs:340");
    if (rp_set(&rp, ONI_OPT_RESETACQCOUNTER, 2, "ContextTask.cs:348"))
        return rp_close(&rp);

    size_t cap = (size_t)(seconds * fps / EVERY_NTH) + 1024, n = 0;
    uint64_t *lat = malloc(cap * sizeof *lat);
    uint32_t loop[2 + TRANSMITTED_WORDS];
    memset(loop, 0, sizeof loop);
    uint64_t last_delta = 0, frames = 0, bad = 0, sent = 0;
    uint32_t mem_max = 0;
    double t0 = rp_now();
    while (lat && rp_now() - t0 < seconds) {
        oni_frame_t *f = NULL;
        int rc = oni_read_frame(rp.ctx, &f);
        if (!rp_check(&rp, rc > 0, "ContextTask.cs:404", "oni_read_frame: %d (%s)", rc, oni_error_str(rc)))
            break;
        if (f->dev_idx == lt) {
            uint64_t hub = rp_u64(f, 0), delta = rp_u64(f, 8);
            /* each loopback shows as a new HubClockDelta in the frames after it */
            if (delta != last_delta && n < cap) {
                if (delta == 0 || delta > acq_hz)
                    bad++;
                lat[n++] = delta;
                last_delta = delta;
            }
            /* EveryNth -> LoadTesterLoopback (LoadTesterLoopback.cs:49-58) */
            if (++frames % EVERY_NTH == 0) {
                loop[0] = (uint32_t)hub;
                loop[1] = (uint32_t)(hub >> 32);
                oni_frame_t *w = NULL;
                rc = oni_create_frame(rp.ctx, &w, lt, loop, sizeof loop);
                if (rp_check(&rp, rc >= 0 && w, "clroni Context.cs:486", "oni_create_frame: %d (%s)", rc,
                             oni_error_str(rc))) {
                    rc = oni_write_frame(rp.ctx, w);
                    rp_check(&rp, rc >= 0, "clroni Context.cs:490", "oni_write_frame: %d (%s)", rc, oni_error_str(rc));
                    oni_destroy_frame(w);
                    sent++;
                }
            }
        } else if (f->dev_idx == MEMMON && total_mem && f->data_sz >= 12 && rp_u32(f, 8) > mem_max) {
            mem_max = rp_u32(f, 8); /* MemoryMonitorDataFrame.cs:17-22 */
        }
        oni_destroy_frame(f);
        if (rp.failures > 10)
            break;
    }
    rp_set(&rp, ONI_OPT_RUNNING, 0, "ContextTask.cs:473");
    rp_note(&rp, "%llu LoadTester frames in %.1f s (%.0f/s), %llu loopbacks sent, %zu answered",
            (unsigned long long)frames, seconds, frames / seconds, (unsigned long long)sent, n);
    rp_check(&rp, frames / seconds > 0.9 * fps, "tune-readsize.md", "LoadTester delivered %.0f frames/s, want %ld",
             frames / seconds, fps);
    rp_check(&rp, bad == 0, "LoadTesterDataFrame.cs:48", "%llu deltas are 0 or over one second", (unsigned long long)bad);
    if (rp_check(&rp, n >= sent / 2 && n > 0, "tune-readsize.md", "%zu of %llu loopbacks answered", n,
                 (unsigned long long)sent)) {
        qsort(lat, n, sizeof *lat, cmp_u64);
        double sum = 0, us = 1e6 / acq_hz;
        for (size_t i = 0; i < n; i++)
            sum += (double)lat[i];
        printf("%s: round trip (HubClockDelta), readsize %ld, %ld frames/s x %d words, every %dth looped back: "
               "n %zu, mean %.1f us, p1 %.1f us, p50 %.1f us, p99 %.1f us, p99.9 %.1f us, max %.1f us\n",
               WHO, readsize, fps, RECEIVED_WORDS, EVERY_NTH, n, sum / n * us, lat[n / 100] * us, lat[n / 2] * us,
               lat[n - 1 - n / 100] * us, lat[n - 1 - n / 1000] * us, lat[n - 1] * us);
        if (total_mem)
            printf("%s: hardware buffer use at most %.3f %% (MemoryMonitor)\n", WHO, 100.0 * mem_max / total_mem);
    }
    free(lat);
    return rp_close(&rp);
}
