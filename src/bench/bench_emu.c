/* bench_emu.c - `onigpu bench emu` (bench_emu.h): the emulated card from
 * above the hardware boundary, through liboni and include/oniemu.h only.
 *
 * Per link preset, the test core (4096-byte frames, 2 GB/s) read through
 * oni_read_frame with BLOCKREADSIZE 1 MiB for the given time; the card runs
 * in fast mode, so its generation happens in the reader's thread and is
 * included. (The card's own benchmark, through src/emu/emu.h, is `onix-emu
 * bench`.) */
#include <stdio.h>
#include <string.h>
#include "bench/bench_emu.h"
#include "oniemu.h"

#define BLOCK (1u << 20)

/* The card of every run; %s: the link preset. */
#define SPEC "mode=fast;link=%s;ddr=1G;devices=testcore:bytes=4096:rate=2G"

static const char *const presets[] = {ONIEMU_LINK_PRESETS};

static int liboni_one(const struct bench_emu_opts *o, struct bench_report *r, const char *preset)
{
    char spec[160];
    snprintf(spec, sizeof spec, SPEC, preset);
    oni_ctx ctx = oni_create_ctx("emu");
    if (!ctx)
        return ONI_EINIT;
    uint32_t block = BLOCK, run = 1;
    int rc = oni_set_driver_opt(ctx, ONI_DRV_EMU_SPEC, spec, strlen(spec) + 1);
    if (!rc)
        rc = oni_init_ctx(ctx, -1);
    if (!rc)
        rc = oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &block, sizeof block);
    oniemu_link_t l = {0};
    size_t lsz = sizeof l;
    if (!rc)
        rc = oni_get_driver_opt(ctx, ONI_DRV_EMU_LINK, &l, &lsz);
    if (!rc)
        rc = oni_set_opt(ctx, ONI_OPT_RUNNING, &run, sizeof run);
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
        pos += (uint64_t)n; /* the frame's bytes in the stream, padding included */
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
    bench_cell_str(r, "link", preset);
    bench_cell_num(r, "bandwidth_Bps", l.bandwidth_Bps);
    bench_cell_num(r, "latency_s", l.latency_s);
    bench_cell_int(r, "block", BLOCK);
    bench_cell_int(r, "frames", (long long)frames);
    bench_cell_num(r, "seconds", (now - start) / 1e9);
    bench_cell_num(r, "mb_per_s", mbs);
    bench_cell_num(r, "model_mb_per_s", model_mbs);
    bench_cell_num(r, "over_model", model_mbs > 0 ? mbs / model_mbs : 0);
    bench_cell_num(r, "mb_per_s_p50_mib", bench_mb_per_s(BLOCK, st.p50));
    bench_cell_num(r, "p50_over_model", model_mbs > 0 ? bench_mb_per_s(BLOCK, st.p50) / model_mbs : 0);
    bench_cell_stats(r, "mib", &st);
    double p50mbs = bench_mb_per_s(BLOCK, st.p50);
    if (!o->quiet && model_mbs > 0)
        printf("liboni %-9s %8.1f MB/s, median MiB %8.1f MB/s = %.2f x the link model's %.1f MB/s; per MiB p50 %.0f "
               "p99 %.0f p99.9 %.0f max %.0f us\n", preset, mbs, p50mbs, p50mbs / model_mbs, model_mbs, st.p50 / 1e3,
               st.p99 / 1e3, st.p999 / 1e3, st.max / 1e3);
    else if (!o->quiet)
        printf("liboni %-9s %8.1f MB/s, median MiB %8.1f MB/s, no link model; per MiB p50 %.0f p99 %.0f p99.9 %.0f "
               "max %.0f us\n", preset, mbs, p50mbs, st.p50 / 1e3, st.p99 / 1e3, st.p999 / 1e3, st.max / 1e3);
    return bench_report_row(r, NULL);
}

int bench_emu_run(const struct bench_emu_opts *o, struct bench_report *r)
{
    if (!o || !r || !(o->seconds > 0))
        return ONI_EINVALARG;
    char method[512], spec[160];
    snprintf(spec, sizeof spec, SPEC, "<preset>");
    snprintf(method, sizeof method,
             "emu driver, spec %s; oni_read_frame with BLOCKREADSIZE 1 MiB (generation in the reader's thread "
             "included); MB/s = 10^6 stream bytes (16-byte headers included) per wall second; per-MiB samples: "
             "one block read each; link model = latency + 1 MiB / bandwidth per block",
             spec);
    int rc = bench_report_meta(r, "method", method);
    for (size_t i = 0; !rc && !bench_stopped() && i < sizeof presets / sizeof presets[0]; i++)
        rc = liboni_one(o, r, presets[i]);
    return rc;
}
