/* bench.c - `onix-emu bench`: a benchmark of the emulated card itself, through
 * its interface (src/emu/emu.h), below the hardware boundary. (`onigpu bench
 * emu` measures the same card from above, through liboni only.)
 *
 * gen: a card in fast mode with an unlimited link, one device set at a time,
 * read by this one thread in 1 MiB blocks for the given time. "read" copies
 * each block out of the card's FIFO into a buffer (emu_card_read, as the emu
 * driver does); "peek" takes the block in place and consumes it
 * (emu_card_fifo_peek/consume, as the card's DMA engine does), so it is the
 * generation alone. In fast mode frames are generated in the reading thread,
 * so one core does all the work: bytes per CPU second of that thread is the
 * rate of one core, robust on a shared machine. Bytes are stream bytes
 * (headers included).
 *
 * link: for each preset and block size, the card first generates the block
 * (peek, untimed), then one emu_card_read of it is timed: copy + the link
 * model's wait, compared with the model's latency + n / bandwidth.
 *
 * echo: realtime mode, a write frame to the stimulator and the read of its
 * echo frame, timed from the write call to the echo's last byte.
 *
 * age: realtime mode, how long after its timestamp each np2 frame was read,
 * with the generator sleeping until frames are due and with wake=spin. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "bench.h"
#include "bench/bench.h"
#include "emu/emu.h"
#include "oniemu.h"

struct opts {
    double seconds; /* per measurement (> 0) */
    const char *only; /* NULL: everything; else a comma list of parts */
};

static const char *const parts[] = {"gen", "link", "echo", "age"};
#define NPARTS (sizeof parts / sizeof parts[0])

#define BLOCK (1u << 20)

struct gen_case {
    const char *name, *devices;
    double nominal_Bps; /* stream bytes/s of the set in real time (0: no real-time rate) */
};

/* Stream bytes per second of np2 at 30 kHz (792-byte frames) etc., with the
 * card's MEMUSAGE (100 Hz x 28 bytes) that is always there. */
static const struct gen_case gen_cases[] = {
    {"testcore", "testcore:bytes=4096:rate=2G", 2e9 * 4112 / 4096 + 2800},
    {"np2", "np2", 30000 * 792.0 + 2800},
    {"np1", "np1", 2500 * (16 + 9992.0) + 2800},
    {"rhd2164", "rhd2164", 30000 * (16 + 144.0) + 2800},
    {"np2x4", "np2,np2,np2,np2", 4 * 30000 * 792.0 + 2800},
};

static const char *const presets[] = {ONIEMU_LINK_PRESETS};

static int open_card(const char *devices, const char *link, struct emu_card **c)
{
    char spec[256], err[160];
    snprintf(spec, sizeof spec, "mode=fast;link=%s;ddr=1G;devices=%s", link, devices);
    int rc = emu_card_create(spec, c, err, sizeof err);
    if (rc) {
        fprintf(stderr, "onix-emu bench: %s: %s\n", spec, err);
        return rc;
    }
    if ((rc = emu_card_write_config(*c, ONI_CONFIG_RUNNING, 1)) != 0)
        emu_card_destroy(*c);
    return rc;
}

/* CPU time of this thread, ns: in fast mode all of the card's work happens
 * in the reading thread, so bytes per CPU second is the rate of one core,
 * whatever else the (shared) machine is running. */
static uint64_t thread_cpu_ns(void)
{
    struct bench_cpu_mark m;
    bench_cpu_mark(&m);
    return m.cpu_ns;
}

static int take_block(struct emu_card *c, int peek, uint8_t *buf)
{
    if (!peek) {
        int rc = emu_card_read(c, EMU_STREAM_DATA, buf, BLOCK, 5000);
        return rc < 0 ? rc : 0;
    }
    struct emu_span sp[2];
    int rc = emu_card_fifo_peek(c, EMU_STREAM_DATA, BLOCK, sp, 5000);
    return rc ? rc : emu_card_fifo_consume(c, EMU_STREAM_DATA, BLOCK);
}

static int gen_one(const struct opts *o, struct bench_report *r, const struct gen_case *g, int peek,
                   uint8_t *buf)
{
    struct emu_card *c;
    int rc = open_card(g->devices, "unlimited", &c);
    if (rc)
        return rc;
    uint64_t t0 = oni_now_ns(), warm = t0 + 100000000ull; /* FIFO pages committed, caches warm */
    while (!rc && oni_now_ns() < warm)
        rc = take_block(c, peek, buf);
    struct bench_rec rec;
    if (!rc)
        rc = bench_rec_init(&rec, 1u << 20);
    if (rc) {
        emu_card_destroy(c);
        return rc;
    }
    uint64_t bytes = 0, start = oni_now_ns(), end = start + (uint64_t)(o->seconds * 1e9), now = start;
    uint64_t cpu0 = thread_cpu_ns();
    while (!rc && now < end) {
        rc = take_block(c, peek, buf);
        bytes += BLOCK;
        uint64_t t = oni_now_ns();
        bench_rec_add(&rec, t - now);
        now = t;
    }
    double cpu_ns = (double)(thread_cpu_ns() - cpu0);
    emu_card_destroy(c);
    struct bench_stats st;
    if (!rc)
        rc = bench_rec_stats(&rec, &st);
    bench_rec_free(&rec);
    if (rc)
        return rc;
    /* The machine may be shared: per CPU second and the median block are the robust figures. */
    double ns = (double)(now - start), mbs = bench_mb_per_s((double)bytes, ns);
    double mbs_p50 = bench_mb_per_s(BLOCK, st.p50), mbs_cpu = bench_mb_per_s((double)bytes, cpu_ns);
    double xrt = g->nominal_Bps > 0 ? bytes / (cpu_ns / 1e9) / g->nominal_Bps : 0;
    bench_cell_str(r, "devices", g->name);
    bench_cell_str(r, "spec_devices", g->devices);
    bench_cell_str(r, "path", peek ? "peek" : "read");
    bench_cell_num(r, "seconds", ns / 1e9);
    bench_cell_int(r, "bytes", (long long)bytes);
    bench_cell_num(r, "mb_per_s", mbs);
    bench_cell_num(r, "mb_per_s_p50_block", mbs_p50);
    bench_cell_num(r, "cpu_seconds", cpu_ns / 1e9);
    bench_cell_num(r, "mb_per_cpu_s", mbs_cpu);
    bench_cell_num(r, "nominal_mb_per_s", g->nominal_Bps / 1e6);
    bench_cell_num(r, "x_realtime_per_core", xrt);
    bench_cell_stats(r, "block", &st);
    printf("generate %-9s %-4s %9.1f MB/s wall, %9.1f MB/s per CPU s (one core), median block %9.1f MB/s; "
           "%.1fx real time per core\n", g->name, peek ? "peek" : "read", mbs, mbs_cpu, mbs_p50, xrt);
    return bench_report_row(r, NULL);
}

static int link_one(const struct opts *o, struct bench_report *r, const char *preset, size_t n,
                    uint8_t *buf)
{
    struct emu_card *c;
    int rc = open_card("testcore:bytes=4096:rate=2G", preset, &c);
    if (rc)
        return rc;
    oniemu_link_t l;
    emu_card_link(c, &l);
    struct bench_rec rec;
    if ((rc = bench_rec_init(&rec, 1u << 20)) != 0) {
        emu_card_destroy(c);
        return rc;
    }
    uint64_t spent = 0, end = oni_now_ns() + (uint64_t)(o->seconds * 1e9);
    size_t count = 0;
    while (!rc && oni_now_ns() < end && rec.n < rec.cap) {
        struct emu_span sp[2];
        if ((rc = emu_card_fifo_peek(c, EMU_STREAM_DATA, n, sp, 5000)) != 0) /* generate it, untimed */
            break;
        emu_card_fifo_consume(c, EMU_STREAM_DATA, 0); /* let go: emu_card_read takes it */
        uint64_t t0 = oni_now_ns();
        int got = emu_card_read(c, EMU_STREAM_DATA, buf, n, 5000);
        uint64_t dt = oni_now_ns() - t0;
        if (got != (int)n) {
            rc = got < 0 ? got : ONI_EREADFAILURE;
            break;
        }
        bench_rec_add(&rec, dt);
        spent += dt;
        count++;
    }
    emu_card_destroy(c);
    struct bench_stats st;
    if (!rc)
        rc = bench_rec_stats(&rec, &st);
    bench_rec_free(&rec);
    if (rc)
        return rc;
    double model_ns = l.latency_s * 1e9 + (l.bandwidth_Bps > 0 ? n / l.bandwidth_Bps * 1e9 : 0);
    double mbs = bench_mb_per_s((double)n * count, (double)spent);
    double model_mbs = model_ns > 0 ? bench_mb_per_s((double)n, model_ns) : 0;
    bench_cell_str(r, "link", preset);
    bench_cell_num(r, "bandwidth_Bps", l.bandwidth_Bps);
    bench_cell_num(r, "latency_s", l.latency_s);
    bench_cell_int(r, "block", (long long)n);
    bench_cell_num(r, "mb_per_s", mbs);
    bench_cell_num(r, "model_ns", model_ns);
    bench_cell_num(r, "model_mb_per_s", model_mbs);
    bench_cell_num(r, "p50_over_model", model_ns > 0 ? st.p50 / model_ns : 0);
    bench_cell_stats(r, "xfer", &st);
    printf("link %-9s %8zu B  %9.1f MB/s  model %9.1f MB/s  p50 %8.0f p99 %8.0f p99.9 %8.0f max %8.0f ns\n",
           preset, n, mbs, model_mbs, st.p50, st.p99, st.p999, st.max);
    return bench_report_row(r, "link");
}

/* One closed loop through the card in realtime mode: write a frame to the
 * stimulator, read the data stream until its echo arrives, as a host would
 * (frame header, then payload). Counts the link twice (out and back). */
static int echo_one(const struct opts *o, struct bench_report *r, const char *preset)
{
    struct emu_card *c;
    char spec[128], err[160];
    snprintf(spec, sizeof spec, "mode=realtime;link=%s;devices=stim", preset);
    int rc = emu_card_create(spec, &c, err, sizeof err);
    if (rc) {
        fprintf(stderr, "onix-emu bench: %s: %s\n", spec, err);
        return rc;
    }
    struct bench_rec rec;
    if ((rc = bench_rec_init(&rec, 1u << 20)) != 0) {
        emu_card_destroy(c);
        return rc;
    }
    /* the stimulator is device 0 of hub 0 (docs/devices.md placement) */
    uint32_t w[3] = {0, 1, 0};
    rc = emu_card_write_config(c, ONI_CONFIG_RUNNING, 1);
    uint64_t end = oni_now_ns() + (uint64_t)(o->seconds * 1e9);
    while (!rc && oni_now_ns() < end && rec.n < rec.cap) {
        w[2]++;
        uint64_t t0 = oni_now_ns();
        int got = emu_card_write(c, EMU_STREAM_WRITE, w, sizeof w, 1000);
        if (got != (int)sizeof w) {
            rc = got < 0 ? got : ONI_EWRITEFAILURE;
            break;
        }
        for (;;) { /* frames until the echo of this tag (MEMUSAGE frames pass by) */
            uint8_t h[16], p[64];
            uint32_t dev, sz, tag = 0;
            if ((got = emu_card_read(c, EMU_STREAM_DATA, h, 16, 1000)) != 16)
                break;
            memcpy(&dev, h + 8, 4);
            memcpy(&sz, h + 12, 4);
            if (sz > sizeof p) {
                got = ONI_EBADFRAME;
                break;
            }
            if ((got = emu_card_read(c, EMU_STREAM_DATA, p, (sz + 3) & ~3u, 1000)) < 0)
                break;
            memcpy(&tag, p, 4);
            if (dev == 0 && tag == w[2])
                break;
        }
        if (got < 0) {
            rc = got;
            break;
        }
        bench_rec_add(&rec, oni_now_ns() - t0);
    }
    emu_card_destroy(c);
    struct bench_stats st;
    if (!rc)
        rc = bench_rec_stats(&rec, &st);
    bench_rec_free(&rec);
    if (rc)
        return rc;
    bench_cell_str(r, "link", preset);
    bench_cell_stats(r, "loop", &st);
    printf("echo %-9s write -> echo read: p50 %7.0f p99 %7.0f p99.9 %7.0f max %9.0f ns (n %zu)\n", preset,
           st.p50, st.p99, st.p999, st.max, st.n);
    return bench_report_row(r, "echo");
}

/* Realtime mode: how long after its timestamp a frame can be read (the
 * generator's wake-up delay plus the read), for np2 frames read one by one
 * with an unlimited link. The clock is reset (RESETACQCOUNTER = 2) at a known
 * instant, so a frame's due time in ns is t0 + time * 4. */
static int age_one(const struct opts *o, struct bench_report *r, const char *wake)
{
    struct emu_card *c;
    char spec[128], err[160];
    snprintf(spec, sizeof spec, "mode=realtime;wake=%s;link=unlimited;devices=np2", wake);
    int rc = emu_card_create(spec, &c, err, sizeof err);
    if (rc) {
        fprintf(stderr, "onix-emu bench: np2 realtime: %s\n", err);
        return rc;
    }
    struct bench_rec rec;
    if ((rc = bench_rec_init(&rec, 1u << 20)) != 0) {
        emu_card_destroy(c);
        return rc;
    }
    uint64_t t0 = oni_now_ns();
    rc = emu_card_write_config(c, ONI_CONFIG_RESETACQCOUNTER, 2);
    uint64_t t1 = oni_now_ns(), end = t1 + (uint64_t)(o->seconds * 1e9);
    static uint8_t frame[16 + 776];
    while (!rc && oni_now_ns() < end && rec.n < rec.cap) {
        uint64_t time = 0;
        uint32_t sz = 0;
        int got = emu_card_read(c, EMU_STREAM_DATA, frame, 16, 1000);
        if (got == 16) {
            memcpy(&time, frame, 8);
            memcpy(&sz, frame + 12, 4);
            got = sz <= 776 ? emu_card_read(c, EMU_STREAM_DATA, frame + 16, (sz + 3) & ~3u, 1000) : ONI_EBADFRAME;
        }
        if (got < 0) {
            rc = got;
            break;
        }
        uint64_t due = t0 + time * (1000000000ull / 250000000ull);
        uint64_t now = oni_now_ns();
        if (sz == 776)
            bench_rec_add(&rec, now > due ? now - due : 0);
    }
    emu_card_destroy(c);
    struct bench_stats st;
    if (!rc)
        rc = bench_rec_stats(&rec, &st);
    bench_rec_free(&rec);
    if (rc)
        return rc;
    bench_cell_str(r, "devices", "np2");
    bench_cell_str(r, "wake", wake);
    bench_cell_num(r, "clock_reset_uncertainty_ns", (double)(t1 - t0));
    bench_cell_stats(r, "age", &st);
    printf("age  np2 realtime wake=%-5s: read after its timestamp by p50 %7.0f p99 %7.0f p99.9 %7.0f max %9.0f ns "
           "(clock reset known to %llu ns)\n", wake, st.p50, st.p99, st.p999, st.max, (unsigned long long)(t1 - t0));
    return bench_report_row(r, "age");
}

/* Is part `name` asked for (o->only: a comma list, NULL = all)? */
static int wanted(const struct opts *o, const char *name)
{
    if (!o->only)
        return 1;
    size_t n = strlen(name);
    for (const char *p = o->only; (p = strstr(p, name)) != NULL; p += n)
        if ((p == o->only || p[-1] == ',') && (p[n] == 0 || p[n] == ','))
            return 1;
    return 0;
}

/* Every comma-separated name in list is a part of the benchmark. */
static int parts_ok(const char *list)
{
    for (const char *p = list;;) {
        size_t n = strcspn(p, ",");
        int ok = 0;
        for (size_t i = 0; i < NPARTS; i++)
            ok |= n == strlen(parts[i]) && !strncmp(p, parts[i], n);
        if (!ok)
            return 0;
        if (!p[n])
            return 1;
        p += n + 1;
    }
}

static int run_parts(const struct opts *o, struct bench_report *r)
{
    uint8_t *buf = calloc(1, BLOCK);
    if (!buf)
        return ONI_EBADALLOC;
    int rc = 0;
    for (size_t i = 0; !rc && wanted(o, "gen") && i < sizeof gen_cases / sizeof gen_cases[0]; i++)
        for (int peek = 0; !rc && peek < 2; peek++)
            rc = gen_one(o, r, &gen_cases[i], peek, buf);
    static const size_t blocks[] = {4096, 65536, BLOCK};
    for (size_t i = 0; !rc && wanted(o, "link") && i < sizeof presets / sizeof presets[0]; i++)
        for (size_t b = 0; !rc && b < sizeof blocks / sizeof blocks[0]; b++)
            rc = link_one(o, r, presets[i], blocks[b], buf);
    for (size_t i = 0; !rc && wanted(o, "echo") && i < sizeof presets / sizeof presets[0];
         i += sizeof presets / sizeof presets[0] - 1)
        rc = echo_one(o, r, presets[i]); /* gen2x4 and unlimited */
    if (!rc && wanted(o, "age"))
        rc = age_one(o, r, "sleep");
    if (!rc && wanted(o, "age"))
        rc = age_one(o, r, "spin");
    free(buf);
    return rc;
}

static int usage(FILE *f, int code)
{
    fprintf(f, "usage: onix-emu bench [--seconds T] [--only gen,link,echo,age] [--out DIR]\n"
               "Benchmark the emulated card through its own interface: generation MB/s with one core (fast\n"
               "mode), the link model per PCIe preset, the stimulator echo and frame age in realtime mode.\n"
               "Results: DIR/emu-<date>.csv (gen), -link.csv, -echo.csv, -age.csv and .json (default\n"
               "DIR docs/results). T: seconds per measurement (default 1).\n");
    return code;
}

int emu_bench_main(int argc, char **argv)
{
    struct opts o = {1.0, NULL};
    const char *out = "docs/results";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
            char *end;
            errno = 0;
            o.seconds = strtod(argv[++i], &end);
            if (errno || end == argv[i] || *end || !(o.seconds > 0) || o.seconds > 3600) {
                fprintf(stderr, "onix-emu bench: bad --seconds '%s'\n", argv[i]);
                return usage(stderr, 2);
            }
        } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            o.only = argv[++i];
            if (!parts_ok(o.only)) {
                fprintf(stderr, "onix-emu bench: --only '%s': parts are gen, link, echo, age\n", o.only);
                return usage(stderr, 2);
            }
        } else if (!strcmp(argv[i], "--out") && i + 1 < argc) {
            out = argv[++i];
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            return usage(stdout, 0);
        } else {
            fprintf(stderr, "onix-emu bench: unexpected argument '%s'\n", argv[i]);
            return usage(stderr, 2);
        }
    }
    char *full[64 + 1] = {"onix-emu"};
    int nfull = 1;
    for (int i = 0; i < argc && nfull < 65; i++)
        full[nfull++] = argv[i];
    int rc;
    struct bench_report *r = bench_report_open(out, "emu", nfull, full, NULL, &rc);
    if (!r) {
        fprintf(stderr, "onix-emu bench: %s: %s\n", out, oni_error_str(rc));
        return 1;
    }
    bench_report_meta_num(r, "seconds_per_measurement", o.seconds);
    bench_report_meta(r, "method",
                      "the card through src/emu/emu.h. gen: fast mode, link unlimited, one thread reads 1 MiB blocks "
                      "(read = emu_card_read copy, peek = in place, generation only); MB/s = 10^6 stream bytes "
                      "(headers included) per s; per CPU s of the reading thread = one core. link: block generated "
                      "first (untimed), then one emu_card_read timed (copy + link model wait). echo: realtime, write "
                      "frame to the stimulator -> its echo frame read back (header, then payload), per round trip. "
                      "age: realtime np2, frame read time minus its timestamp (clock reset at a known instant)");
    if (o.only)
        bench_report_meta(r, "only", o.only);
    rc = run_parts(&o, r);
    const char *json = bench_report_path(r, ".json");
    char where[1024];
    snprintf(where, sizeof where, "%s", json ? json : out);
    int crc = bench_report_close(r);
    if (rc || crc) {
        fprintf(stderr, "onix-emu bench: %s\n", oni_error_str(rc ? rc : crc));
        return 1;
    }
    printf("results: %s (and .csv, -link.csv, -echo.csv, -age.csv)\n", where);
    return 0;
}
