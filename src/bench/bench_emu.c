/* bench_emu.c - `onigpu bench emu` (bench_emu.h): the emulated card from
 * above the hardware boundary, through liboni and include/oniemu.h only.
 *
 * link: per link preset, the test core (4096-byte frames, 2 GB/s) read
 * through oni_read_frame with BLOCKREADSIZE 1 MiB for the given time; the
 * card runs in fast mode, so its generation happens in the reader's thread
 * and is included.
 * gen: fast mode, link unlimited, one device set at a time, read by this
 * one thread in 1 MiB blocks: all of the card's work happens in the reading
 * thread, so stream bytes per CPU second of that thread are the rate of one
 * core (liboni's frame parsing included), robust on a shared machine.
 * echo: realtime mode, a write frame to the stimulator and the read of its
 * echo frame, timed from the write call to the echo's return.
 * age: realtime mode, how long after its timestamp each rhd2164 frame is read,
 * with the generator sleeping until frames are due and with wake=spin. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench/bench_emu.h"
#include "loop/rig.h"
#include "oniemu.h"
#include "onix.h"

#define BLOCK (1u << 20)

/* The card of every run; %s: the link preset. */
#define SPEC "mode=fast;link=%s;ddr=1G;devices=testcore:bytes=4096:rate=2G"

static const char *const presets[] = {ONIEMU_LINK_PRESETS};
#define NPRESETS (sizeof presets / sizeof presets[0])

const char *const bench_emu_parts[4] = {"link", "gen", "echo", "age"};

/* An initialized context of the emu driver for spec (BLOCKREADSIZE block
 * when nonzero), or NULL with *rc. */
static oni_ctx open_emu(const char *spec, uint32_t block, int *rc)
{
    oni_ctx ctx = oni_create_ctx("emu");
    if (!ctx) {
        *rc = ONI_EINIT;
        return NULL;
    }
    *rc = oni_set_driver_opt(ctx, ONI_DRV_EMU_SPEC, spec, strlen(spec) + 1);
    if (!*rc)
        *rc = oni_init_ctx(ctx, -1);
    if (!*rc && block)
        *rc = oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &block, sizeof block);
    if (*rc) {
        oni_destroy_ctx(ctx);
        return NULL;
    }
    return ctx;
}

static int start(oni_ctx ctx)
{
    uint32_t run = 1;
    return oni_set_opt(ctx, ONI_OPT_RUNNING, &run, sizeof run);
}

static int link_one(const struct bench_emu_opts *o, struct results *r, const char *preset)
{
    char spec[160];
    snprintf(spec, sizeof spec, SPEC, preset);
    int rc;
    oni_ctx ctx = open_emu(spec, BLOCK, &rc);
    if (!ctx)
        return rc;
    oniemu_link_t l = {0};
    size_t lsz = sizeof l;
    rc = oni_get_driver_opt(ctx, ONI_DRV_EMU_LINK, &l, &lsz);
    if (!rc)
        rc = start(ctx);
    /* Time per block: robust to a preempted moment on a shared machine. A
     * sample ends with the frame that made liboni read the next block (the
     * first to reach past a block's end in the stream), so that each holds
     * exactly one block read: ending it at the frame that reaches the end,
     * as until 2026-11-25, left one block read out of a sample whenever a
     * frame ended exactly there (1 in 257 blocks of 4112-byte frames) and
     * put two in the next (a 1.6 us "MiB" at gen2x4). */
    struct bench_rec rec = {0};
    if (!rc)
        rc = bench_rec_init(&rec, 1u << 20);
    uint64_t bytes = 0, pos = 0, frames = 0, start = oni_now_ns(), now = start, mark = start, next_mark = BLOCK;
    uint64_t end = start + (uint64_t)(o->seconds * 1e9);
    while (!rc && now < end && !bench_stopped()) {
        oni_frame_t *f;
        int n = oni_read_frame(ctx, &f);
        if (n < 0) {
            rc = n;
            break;
        }
        bytes += f->data_sz + 16;
        pos += 16 + ((f->data_sz + 3u) & ~3u); /* the frame's bytes in the stream, padding included */
        frames++;
        oni_destroy_frame(f);
        if (pos > next_mark) {
            now = oni_now_ns();
            bench_rec_add(&rec, now - mark);
            mark = now;
            next_mark += BLOCK;
        }
    }
    now = oni_now_ns();
    oni_destroy_ctx(ctx);
    struct bench_stats st;
    if (!rc)
        rc = bench_rec_stats(&rec, &st);
    bench_rec_free(&rec);
    if (rc)
        return rc;
    double mbs = bench_mb_per_s((double)bytes, (double)(now - start));
    /* the link model's rate for 1 MiB blocks: latency + n / bandwidth each */
    double model_ns = l.latency_s * 1e9 + (l.bandwidth_Bps > 0 ? BLOCK / l.bandwidth_Bps * 1e9 : 0);
    double model_mbs = model_ns > 0 ? bench_mb_per_s(BLOCK, model_ns) : 0;
    results_cell_str(r, "link", preset);
    results_cell_num(r, "bandwidth_Bps", l.bandwidth_Bps);
    results_cell_num(r, "latency_s", l.latency_s);
    results_cell_int(r, "block", BLOCK);
    results_cell_int(r, "frames", (long long)frames);
    results_cell_num(r, "seconds", (now - start) / 1e9);
    results_cell_num(r, "mb_per_s", mbs);
    results_cell_num(r, "model_mb_per_s", model_mbs);
    results_cell_num(r, "over_model", model_mbs > 0 ? mbs / model_mbs : 0);
    results_cell_num(r, "mb_per_s_p50_mib", bench_mb_per_s(BLOCK, st.p50));
    results_cell_num(r, "p50_over_model", model_mbs > 0 ? bench_mb_per_s(BLOCK, st.p50) / model_mbs : 0);
    bench_cell_stats(r, "mib", &st);
    double p50mbs = bench_mb_per_s(BLOCK, st.p50);
    if (!o->quiet && model_mbs > 0)
        printf("liboni %-9s %8.1f MB/s, median MiB %8.1f MB/s = %.2f x the link model's %.1f MB/s; per MiB p50 %.0f "
               "p99 %.0f p99.9 %.0f max %.0f us\n", preset, mbs, p50mbs, p50mbs / model_mbs, model_mbs, st.p50 / 1e3,
               st.p99 / 1e3, st.p999 / 1e3, st.max / 1e3);
    else if (!o->quiet)
        printf("liboni %-9s %8.1f MB/s, median MiB %8.1f MB/s, no link model; per MiB p50 %.0f p99 %.0f p99.9 %.0f "
               "max %.0f us\n", preset, mbs, p50mbs, st.p50 / 1e3, st.p99 / 1e3, st.p999 / 1e3, st.max / 1e3);
    return results_row(r, NULL);
}

struct gen_case {
    const char *name, *devices;
    double nominal_Bps; /* stream bytes/s of the set in real time */
    int rig;            /* a headstage on port A, brought up as the loop does (loop_rig_open) */
};

/* Stream bytes per second of rhd2164 at 30 kHz (160-byte frames) etc., with the
 * card's MEMUSAGE (100 Hz x 28 bytes) that is always there. */
static const struct gen_case gen_cases[] = {
    {"testcore", "testcore:bytes=4096:rate=2G", 2e9 * 4112 / 4096 + 2800, 0},
    {"rhd2164", "rhd2164", 30000 * (16 + 144.0) + 2800, 0},
    {"rhd2164x4", "rhd2164,rhd2164,rhd2164,rhd2164", 4 * 30000 * (16 + 144.0) + 2800, 0},
    /* one NP2.0 probe (384 channels, the signal of neural.h) on the breakout
     * board, probe B absent: 1164-byte super-frames at 30 kHz (the board's
     * heartbeat and DigitalIO frames are in the bytes, < 0.1%) */
    {"np2e", "breakout,np2e:sn_b=0", 30000 * (16 + 1164.0) + 2800, 1},
};

static int gen_one(const struct bench_emu_opts *o, struct results *r, const struct gen_case *g)
{
    char spec[160];
    snprintf(spec, sizeof spec, "mode=fast;link=unlimited;ddr=1G;devices=%s", g->devices);
    int rc;
    oni_ctx ctx = open_emu(spec, BLOCK, &rc);
    if (!ctx)
        return rc;
    if (g->rig) {
        struct loop_rig rig;
        char why[256];
        if ((rc = loop_rig_open(ctx, 1, &rig, why, sizeof why))) {
            fprintf(stderr, "bench emu: %s: %s\n", g->name, why);
            oni_destroy_ctx(ctx);
            return rc;
        }
    }
    rc = start(ctx);
    uint64_t bytes = 0, warm = oni_now_ns() + 100000000ull; /* FIFO pages committed, caches warm */
    for (uint64_t now = 0; !rc && (now = oni_now_ns()) < warm && !bench_stopped();) {
        oni_frame_t *f;
        int n = oni_read_frame(ctx, &f);
        if (n < 0)
            rc = n;
        else
            oni_destroy_frame(f);
    }
    struct bench_cpu_mark c0, c1;
    bench_cpu_mark(&c0);
    uint64_t start_ns = oni_now_ns(), end = start_ns + (uint64_t)(o->seconds * 1e9), now = start_ns;
    for (unsigned k = 0; !rc && now < end && !bench_stopped(); k++) {
        oni_frame_t *f;
        int n = oni_read_frame(ctx, &f);
        if (n < 0) {
            rc = n;
            break;
        }
        bytes += 16 + ((f->data_sz + 3u) & ~3u); /* the frame's bytes in the stream */
        oni_destroy_frame(f);
        if (k % 64 == 0)
            now = oni_now_ns();
    }
    now = oni_now_ns();
    bench_cpu_mark(&c1);
    oni_destroy_ctx(ctx);
    if (rc)
        return rc;
    double ns = (double)(now - start_ns), cpu_ns = (double)(c1.cpu_ns - c0.cpu_ns);
    double mbs = bench_mb_per_s((double)bytes, ns), mbs_cpu = bench_mb_per_s((double)bytes, cpu_ns);
    double xrt = cpu_ns > 0 && g->nominal_Bps > 0 ? bytes / (cpu_ns / 1e9) / g->nominal_Bps : 0;
    results_cell_str(r, "devices", g->name);
    results_cell_str(r, "spec_devices", g->devices);
    results_cell_num(r, "seconds", ns / 1e9);
    results_cell_int(r, "bytes", (long long)bytes);
    results_cell_num(r, "mb_per_s", mbs);
    results_cell_num(r, "cpu_seconds", cpu_ns / 1e9);
    results_cell_num(r, "mb_per_cpu_s", mbs_cpu);
    results_cell_num(r, "nominal_mb_per_s", g->nominal_Bps / 1e6);
    results_cell_num(r, "x_realtime_per_core", xrt);
    if (!o->quiet)
        printf("generate %-9s %9.1f MB/s wall, %9.1f MB/s per CPU s (one core); %.1fx real time per core\n",
               g->name, mbs, mbs_cpu, xrt);
    return results_row(r, "gen");
}

/* The index and write size of the first device with this id, or ONI_EDEVID. */
static int find_dev(oni_ctx ctx, oni_dev_id_t id, uint32_t *idx, uint32_t *wsize)
{
    oni_size_t n = 0;
    size_t sz = sizeof n;
    int rc = oni_get_opt(ctx, ONI_OPT_NUMDEVICES, &n, &sz);
    oni_device_t *t = rc || !n ? NULL : calloc(n, sizeof *t);
    sz = n * sizeof *t;
    if (!rc && (!t || (rc = oni_get_opt(ctx, ONI_OPT_DEVICETABLE, t, &sz)) != 0)) {
        free(t);
        return rc ? rc : ONI_EBADALLOC;
    }
    rc = ONI_EDEVID;
    for (oni_size_t i = 0; i < n && rc; i++)
        if (t[i].id == id) {
            *idx = t[i].idx;
            *wsize = t[i].write_size;
            rc = 0;
        }
    free(t);
    return rc;
}

/* One closed loop through the card in realtime mode, as a host sees it: a
 * write frame to the stimulator, frames read until its echo arrives
 * ([u32 tag][u32 words][u64 receipt]). The link counts twice (out, back). */
static int echo_one(const struct bench_emu_opts *o, struct results *r, const char *preset)
{
    char spec[128];
    snprintf(spec, sizeof spec, "mode=realtime;link=%s;devices=stim", preset);
    int rc;
    oni_ctx ctx = open_emu(spec, 0, &rc);
    if (!ctx)
        return rc;
    uint32_t stim = 0, wsize = 0, tag = 0;
    rc = find_dev(ctx, ONIX_ONIGPU_STIM, &stim, &wsize);
    uint8_t *w = !rc ? calloc(1, wsize >= 4 ? wsize : 4) : NULL;
    struct bench_rec rec = {0};
    if (!rc && (!w || wsize < 4))
        rc = w ? ONI_EDEVID : ONI_EBADALLOC;
    if (!rc)
        rc = bench_rec_init(&rec, 1u << 20);
    if (!rc)
        rc = start(ctx);
    uint64_t end = oni_now_ns() + (uint64_t)(o->seconds * 1e9);
    while (!rc && oni_now_ns() < end && rec.n < rec.cap && !bench_stopped()) {
        tag++;
        memcpy(w, &tag, 4);
        oni_frame_t *f = NULL;
        uint64_t t0 = oni_now_ns();
        if ((rc = oni_create_frame(ctx, &f, stim, w, wsize)) < 0)
            break;
        rc = 0;
        int n = oni_write_frame(ctx, f);
        oni_destroy_frame(f);
        if (n < 0) {
            rc = n;
            break;
        }
        for (;;) { /* frames until the echo of this tag (MEMUSAGE frames pass by) */
            if ((n = oni_read_frame(ctx, &f)) < 0) {
                rc = n;
                break;
            }
            uint32_t got = 0;
            int mine = f->dev_idx == stim && f->data_sz >= 4 && (memcpy(&got, f->data, 4), got == tag);
            oni_destroy_frame(f);
            if (mine)
                break;
        }
        if (!rc)
            bench_rec_add(&rec, oni_now_ns() - t0);
    }
    oni_destroy_ctx(ctx);
    free(w);
    struct bench_stats st;
    if (!rc)
        rc = bench_rec_stats(&rec, &st);
    bench_rec_free(&rec);
    if (rc)
        return rc;
    results_cell_str(r, "link", preset);
    bench_cell_stats(r, "loop", &st);
    if (!o->quiet)
        printf("echo %-9s write -> echo read: p50 %7.0f p99 %7.0f p99.9 %7.0f max %9.0f ns (n %zu)\n", preset,
               st.p50, st.p99, st.p999, st.max, st.n);
    return results_row(r, "echo");
}

/* Realtime mode: how long after its timestamp an rhd2164 frame is read (the
 * generator's wake-up delay plus the read), frames read one by one with an
 * unlimited link. Acquisition starts with the clock reset at a known
 * instant (between t0 and t1), so a frame's due time is t0 + its time. */
static int age_one(const struct bench_emu_opts *o, struct results *r, const char *wake)
{
    char spec[128];
    snprintf(spec, sizeof spec, "mode=realtime;wake=%s;link=unlimited;devices=rhd2164", wake);
    int rc;
    oni_ctx ctx = open_emu(spec, 0, &rc);
    if (!ctx)
        return rc;
    uint32_t hz = 0, dev = 0, wsize = 0, reset = 2; /* reset and run: no frame from before */
    rc = oni_get_opt(ctx, ONI_OPT_ACQCLKHZ, &hz, &(size_t){sizeof hz});
    if (!rc)
        rc = find_dev(ctx, ONIX_RHD2164, &dev, &wsize);
    struct bench_rec rec = {0};
    if (!rc)
        rc = bench_rec_init(&rec, 1u << 20);
    uint64_t t0 = oni_now_ns();
    if (!rc)
        rc = oni_set_opt(ctx, ONI_OPT_RESETACQCOUNTER, &reset, sizeof reset);
    uint64_t t1 = oni_now_ns(), end = t1 + (uint64_t)(o->seconds * 1e9);
    double ns_per_tick = hz ? 1e9 / hz : 4;
    while (!rc && oni_now_ns() < end && rec.n < rec.cap && !bench_stopped()) {
        oni_frame_t *f;
        int n = oni_read_frame(ctx, &f);
        if (n < 0) {
            rc = n;
            break;
        }
        uint64_t now = oni_now_ns(), due = t0 + (uint64_t)((double)f->time * ns_per_tick);
        if (f->dev_idx == dev)
            bench_rec_add(&rec, now > due ? now - due : 0);
        oni_destroy_frame(f);
    }
    oni_destroy_ctx(ctx);
    struct bench_stats st;
    if (!rc)
        rc = bench_rec_stats(&rec, &st);
    bench_rec_free(&rec);
    if (rc)
        return rc;
    results_cell_str(r, "devices", "rhd2164");
    results_cell_str(r, "wake", wake);
    results_cell_num(r, "clock_reset_uncertainty_ns", (double)(t1 - t0));
    bench_cell_stats(r, "age", &st);
    if (!o->quiet)
        printf("age  rhd2164 realtime wake=%-5s: read after its timestamp by p50 %7.0f p99 %7.0f p99.9 %7.0f max %9.0f "
               "ns (clock reset known to %llu ns)\n", wake, st.p50, st.p99, st.p999, st.max,
               (unsigned long long)(t1 - t0));
    return results_row(r, "age");
}

int bench_emu_run(const struct bench_emu_opts *o, struct results *r)
{
    if (!o || !r || !(o->seconds > 0) || o->parts > BENCH_EMU_ALL)
        return ONI_EINVALARG;
    unsigned parts = o->parts ? o->parts : BENCH_EMU_ALL;
    char method[512], spec[160];
    snprintf(spec, sizeof spec, SPEC, "<preset>");
    snprintf(method, sizeof method,
             "emu driver, spec %s; oni_read_frame with BLOCKREADSIZE 1 MiB (generation in the reader's thread "
             "included); MB/s = 10^6 stream bytes (16-byte headers included) per wall second; per-MiB samples: "
             "one block read each; link model = latency + 1 MiB / bandwidth per block",
             spec);
    int rc = results_meta(r, "method", method);
    if (!rc)
        rc = results_meta(r, "method_gen", "fast mode, link unlimited, ddr 1G, one device set at a time; "
                               "oni_read_frame with BLOCKREADSIZE 1 MiB in one thread after 0.1 s of warm-up; MB/s = "
                               "10^6 stream bytes per s; per CPU s of the reading thread = one core");
    if (!rc)
        rc = results_meta(r, "method_echo", "realtime, devices=stim; oni_write_frame of a tagged frame -> "
                               "oni_read_frame until its echo, per round trip; links gen2x4 and unlimited");
    if (!rc)
        rc = results_meta(r, "method_age", "realtime rhd2164, link unlimited; the read time of each rhd2164 frame minus "
                               "its timestamp, the clock reset (RESETACQCOUNTER) at a known instant");
    for (size_t i = 0; !rc && (parts & BENCH_EMU_LINK) && !bench_stopped() && i < NPRESETS; i++)
        rc = link_one(o, r, presets[i]);
    for (size_t i = 0; !rc && (parts & BENCH_EMU_GEN) && !bench_stopped() && i < sizeof gen_cases / sizeof gen_cases[0];
         i++)
        rc = gen_one(o, r, &gen_cases[i]);
    for (size_t i = 0; !rc && (parts & BENCH_EMU_ECHO) && !bench_stopped() && i < NPRESETS; i += NPRESETS - 1)
        rc = echo_one(o, r, presets[i]); /* the first preset and unlimited, the last */
    if (!rc && (parts & BENCH_EMU_AGE) && !bench_stopped())
        rc = age_one(o, r, "sleep");
    if (!rc && (parts & BENCH_EMU_AGE) && !bench_stopped())
        rc = age_one(o, r, "spin");
    return rc;
}
