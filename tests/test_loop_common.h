/* test_loop_common.h - end-to-end checks of one engine backend, shared by
 * test_loop.c (cpu, in CI) and test_gpu_loop.c (GPU backends, skip without a GPU). */
#ifndef TEST_LOOP_COMMON_H
#define TEST_LOOP_COMMON_H

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include "oni.h"
#include "onii.h"
#include "unit.h"
#include "loop/loop.h"
#include "loop/source.h"
#include "loop/synth.h"

/* Real-time checks (no drops at the nominal rate) need an optimized build
 * without sanitizers: ASan/TSan at -O0 run the pipeline several times slower. */
#if defined(__OPTIMIZE__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define LOOP_REALTIME_BUILD 1
#else
#define LOOP_REALTIME_BUILD 0
#endif

/* MAC sink: checks every result against the CPU kernel on the same input. */
struct mac_sink {
    int check; /* 0: the source drops blocks, so seq does not name the input */
    uint32_t iters, passes;
    size_t in_bytes;
    float *in, *ref;
    uint64_t blocks, bad;
    uint64_t badlen; /* results whose length was not out_bytes (== in_bytes) */
};

static int mac_sink_write(void *ctx, uint64_t seq, const void *out, size_t len, uint32_t timeout_ms)
{
    struct mac_sink *m = ctx;
    m->blocks++;
    /* counted here, checked by the test's thread: a short result must not pass */
    m->badlen += len != m->in_bytes;
    if (!m->check)
        return 0;
    loop_fill_floats(NULL, seq, m->in, m->in_bytes);
    loop_mac_cpu(m->in, m->ref, m->in_bytes / 4, m->iters, m->passes, 0.1f);
    const float *o = out;
    for (size_t i = 0; i < len / 4 && i < m->in_bytes / 4; i++)
        m->bad += !(fabsf(o[i] - m->ref[i]) <= 1e-6f * fabsf(m->ref[i]));
    return 0;
}

/* Run `blocks` MAC blocks through backend b, the source making `rate`
 * blocks/s (0: as fast as read); checks results, records, shutdown. */
static void check_mac_at(int b, size_t in_bytes, uint32_t depth, uint32_t inflight, uint64_t blocks, double rate)
{
    struct loop_memsrc src;
    struct mac_sink ms = {1, 3, 2, in_bytes, malloc(in_bytes), malloc(in_bytes), 0, 0, 0};
    REQUIRE(ms.in && ms.ref);
    /* paced: a FIFO as long as the run, so nothing is dropped */
    REQUIRE(loop_memsrc_init(&src, in_bytes, rate, rate > 0 ? (uint32_t)blocks : 0, loop_fill_floats, NULL) == 0);
    struct loop_config c = {0};
    c.backend = b;
    c.work = LOOP_WORK_MAC;
    c.in_bytes = in_bytes;
    c.out_bytes = in_bytes;
    c.depth = depth;
    c.inflight = inflight;
    c.blocks = blocks;
    c.timeout_ms = 2000;
    c.mac.iters = ms.iters;
    c.mac.passes = ms.passes;
    c.mac.seed = 0.1f;
    c.record_cap = (uint32_t)blocks;
    loop_memsrc_source(&src, &c.src);
    c.sink = (struct loop_sink){&ms, mac_sink_write};
    struct loop *lp = NULL;
    CHECK_RC(loop_create(&c, &lp), ONI_ESUCCESS);
    REQUIRE(lp);
    CHECK_RC(loop_run(lp), ONI_ESUCCESS);
    struct loop_stats st;
    loop_get_stats(lp, &st);
    CHECK_EQ(st.blocks, blocks);
    CHECK_EQ(ms.blocks, blocks);
    CHECK_EQ(ms.bad, 0);
    CHECK_EQ(ms.badlen, 0);
    CHECK_EQ(st.src_dropped, 0);
    /* record_cap = blocks (a bounded run), so every block has its record */
    CHECK_EQ(st.nrecords, blocks);
    const struct loop_record *r = loop_records(lp);
    REQUIRE(r);
    uint64_t zero = 0;
    for (uint64_t i = 0; i < st.nrecords; i++)
        zero += r[i].t_total_ns == 0 || r[i].t_total_ns < r[i].t_out_ns;
    CHECK_EQ(zero, 0);
    loop_destroy(lp);
    loop_memsrc_free(&src);
    free(ms.in);
    free(ms.ref);
}

static void check_mac(int b, size_t in_bytes, uint32_t depth, uint32_t inflight, uint64_t blocks)
{
    check_mac_at(b, in_bytes, depth, inflight, blocks, 0);
}

/* EPHYS: synthetic frames through the engine, spikes scored against truth. */
struct synth_src {
    struct loop_synth *sy;
};

static void synth_fill(void *arg, uint64_t seq, void *buf, size_t len)
{
    struct loop_synth *sy = arg;
    loop_synth_block(sy, buf, (uint32_t)(len / sy->lay.stride));
}

struct spike_sink {
    struct loop_spike *det;
    size_t n, cap;
    uint64_t overflow, blocks;
};

static int spike_sink_write(void *ctx, uint64_t seq, const void *out, size_t len, uint32_t timeout_ms)
{
    struct spike_sink *s = ctx;
    const struct loop_ephys_out *o = out;
    if (len != sizeof *o || o->nspikes > LOOP_EPHYS_MAXSPIKES)
        return ONI_EBUFFERSIZE;
    for (uint32_t i = 0; i < o->nspikes && s->n < s->cap; i++)
        s->det[s->n++] = o->spikes[i];
    s->overflow += o->overflow;
    s->blocks++;
    return 0;
}

/* Two seconds of 384-channel data at the real rate (30 kHz in blocks of
 * `frames`), so "no drops at the nominal rate" is tested too. The source
 * buffers 1024 blocks (about half a second, the card buffers far more), so
 * only a loop slower than the data on average drops. */
static void check_ephys(int b, uint32_t frames, double rate_scale, struct loop_score *sc, struct loop_stats *stats)
{
    struct loop_synth *sy = calloc(1, sizeof *sy);
    struct loop_ephys_state *st = calloc(1, sizeof *st);
    struct spike_sink ss = {calloc(200000, sizeof(struct loop_spike)), 0, 200000, 0, 0};
    REQUIRE(sy && st && ss.det);
    REQUIRE(loop_synth_init(sy, 384, 40.0, 9) == 0);
    struct loop_ephys_params p;
    loop_ephys_defaults(&p);
    REQUIRE(loop_ephys_init(st, &p, &sy->lay) == 0);
    struct loop_memsrc src;
    double rate = 30000.0 / frames * rate_scale;
    REQUIRE(loop_memsrc_init(&src, (size_t)frames * sy->lay.stride, rate, 1024, synth_fill, sy) == 0);
    struct loop_config c = {0};
    c.backend = b;
    c.work = LOOP_WORK_EPHYS;
    c.in_bytes = (size_t)frames * sy->lay.stride;
    c.depth = 4;
    c.blocks = (uint64_t)(2.0 * 30000 / frames);
    c.timeout_ms = 2000;
    c.ephys = st;
    loop_memsrc_source(&src, &c.src);
    c.sink = (struct loop_sink){&ss, spike_sink_write};
    struct loop *lp = NULL;
    CHECK_RC(loop_create(&c, &lp), ONI_ESUCCESS);
    REQUIRE(lp);
    CHECK_RC(loop_run(lp), ONI_ESUCCESS);
    loop_get_stats(lp, stats);
    const struct loop_ephys_state *fin = loop_ephys_final(lp);
    uint64_t t_lo = (uint64_t)fin->calib * sy->ticks_per_sample + 250000, t_hi = (sy->n - 64) * sy->ticks_per_sample;
    loop_score_spikes(sy->truth, sy->ntruth, ss.det, ss.n, 250000, 2, t_lo, t_hi, sc);
    fprintf(stderr, "  %s: %llu blocks, %llu events, recall %.3f, precision %.3f, dropped %llu, stalled reads %llu\n",
            loop_backend_name(b), (unsigned long long)stats->blocks, (unsigned long long)sc->events, sc->recall,
            sc->precision, (unsigned long long)stats->src_dropped, (unsigned long long)stats->stalls);
    loop_destroy(lp);
    loop_memsrc_free(&src);
    free(sy);
    free(st);
    free(ss.det);
}

/* Stop requests: a loop without a block limit stops within its deadline,
 * drains what it started and returns success. */
static void *stopper(void *p)
{
    struct timespec ts = {0, 200 * 1000000};
    nanosleep(&ts, NULL);
    loop_stop(p);
    return NULL;
}

/* Threads of this process (/proc/self/task entries). */
static int nthreads(void)
{
    char line[256];
    int n = -1;
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "Threads:", 8))
            n = atoi(line + 8);
    if (f)
        fclose(f);
    return n;
}

/* nthreads() once it is back to want, or after 1 s: a joined thread can stay
 * listed for a moment while the kernel reaps it (seen on the H100 machine,
 * 4 != 3 right after destroy), a leaked one stays. */
static int nthreads_settled(int want)
{
    int n = nthreads();
    for (int i = 0; i < 100 && n > want; i++) {
        usleep(10000);
        n = nthreads();
    }
    return n;
}

/* A 4 KiB MAC loop on backend b (AI 0.75, depth 3, 1 s deadlines); source and sink still to set. */
static struct loop_config mac4k_config(int b)
{
    struct loop_config c = {0};
    c.backend = b;
    c.work = LOOP_WORK_MAC;
    c.in_bytes = c.out_bytes = 4096;
    c.depth = 3;
    c.timeout_ms = 1000;
    c.mac.iters = 3;
    c.mac.passes = 1;
    c.mac.seed = 0.1f;
    return c;
}

static void check_stop(int b)
{
    int threads_before = nthreads();
    struct loop_memsrc src;
    REQUIRE(loop_memsrc_init(&src, 4096, 0, 0, loop_fill_floats, NULL) == 0);
    struct mac_sink ms = {1, 3, 1, 4096, malloc(4096), malloc(4096), 0, 0, 0};
    struct loop_config c = mac4k_config(b);
    loop_memsrc_source(&src, &c.src);
    c.sink = (struct loop_sink){&ms, mac_sink_write};
    struct loop *lp = NULL;
    CHECK_RC(loop_create(&c, &lp), ONI_ESUCCESS);
    REQUIRE(lp);
    pthread_t th;
    pthread_create(&th, NULL, stopper, lp);
    uint64_t t0 = oni_now_ns();
    CHECK_RC(loop_run(lp), ONI_ESUCCESS);
    double s = (double)(oni_now_ns() - t0) / 1e9;
    pthread_join(th, NULL);
    struct loop_stats st;
    loop_get_stats(lp, &st);
    CHECK(s < 1.5);
    CHECK(st.blocks > 10);
    CHECK_EQ(ms.bad, 0);
    CHECK_EQ(ms.blocks, st.blocks);
    loop_destroy(lp);
    loop_memsrc_free(&src);
    /* Every engine thread joined. (The CUDA runtime's own threads exist
     * before: the device was probed, and test_gpu_loop ran every backend.) */
    CHECK_EQ(nthreads_settled(threads_before), threads_before);
    free(ms.in);
    free(ms.ref);
}

/* Overload: blocks due every 100 us, each costing far more (passes scales
 * the cost: the GPU needs more to fall behind). The loop must
 * finish its block count, and report stalls and the source's drops. */
static void check_overload(int b, uint32_t passes)
{
    struct loop_memsrc src;
    REQUIRE(loop_memsrc_init(&src, 16384, 10000.0, 4, loop_fill_floats, NULL) == 0);
    struct mac_sink ms = {0, 400, passes, 16384, malloc(16384), malloc(16384), 0, 0, 0};
    struct loop_config c = {0};
    c.backend = b;
    c.work = LOOP_WORK_MAC;
    c.in_bytes = c.out_bytes = 16384;
    c.depth = 2;
    c.blocks = 60;
    c.timeout_ms = 2000;
    c.mac.iters = ms.iters;
    c.mac.passes = ms.passes;
    c.mac.seed = 0.1f;
    loop_memsrc_source(&src, &c.src);
    c.sink = (struct loop_sink){&ms, mac_sink_write};
    struct loop *lp = NULL;
    CHECK_RC(loop_create(&c, &lp), ONI_ESUCCESS);
    REQUIRE(lp);
    CHECK_RC(loop_run(lp), ONI_ESUCCESS);
    struct loop_stats st;
    loop_get_stats(lp, &st);
    fprintf(stderr, "  %s overloaded: %llu blocks in %.2f s, %llu dropped by the source, %llu stalled reads\n",
            loop_backend_name(b), (unsigned long long)st.blocks, st.seconds, (unsigned long long)st.src_dropped,
            (unsigned long long)st.stalls);
    CHECK_EQ(st.blocks, 60);
    CHECK(st.src_dropped > 0);
    CHECK(st.stalls > 0);
    CHECK_EQ(ms.blocks, 60);
    loop_destroy(lp);
    loop_memsrc_free(&src);
    free(ms.in);
    free(ms.ref);
}

#endif
