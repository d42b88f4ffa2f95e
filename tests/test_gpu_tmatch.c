/* test_gpu_tmatch.c - the tmatch stage on the GPU (src/loop/tmatch.cu):
 * its source compiled and linked into the chain (NVRTC, nvJitLink; no GPU
 * needed, CUDA builds), and, with a GPU, the chain filter, reference,
 * tmatch, decide:units= on the GPU backends against the cpu backend on the
 * data of tests/fixtures/tmatch_data.h: the same labelled spikes and
 * decisions block by block (tmatch.h's sums are unfused on both), and the
 * GPU's labels scored per unit. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "oni.h"
#include "unit.h"
#include "loop/loop.h"
#include "loop/source.h"
#include "loop/stage.h"
#include "tmatch_data.h"
#if ONIGPU_HAVE_JIT
#include "loop/gpu_jit.h"
#endif

#define FRAMES 16
#define SECONDS 2.0
#define TOL 12

static struct td d;
static struct loop_ephys_state st0;
static char dir[256], opts[400];

static void cleanup(void)
{
    if (dir[0] && unit_sh("rm -rf '%s'", dir))
        fprintf(stderr, "could not remove %s\n", dir);
    td_free(&d);
}

static void setup(void)
{
    if (dir[0])
        return;
    atexit(cleanup);
    REQUIRE(td_make(&d, (uint64_t)(SECONDS * TD_FS), 11, 20.0, 1) == 0);
    snprintf(dir, sizeof dir, "/tmp/test_gpu_tmatch.%d", (int)getpid());
    REQUIRE(td_write_set(&d, dir) == 0);
    snprintf(opts, sizeof opts, "tmatch:templates=%s", dir);
    struct loop_ephys_params p;
    loop_ephys_defaults(&p);
    p.clock_hz = TD_FS; /* the frames' clock counts samples: decide's lockout in them */
    REQUIRE(loop_ephys_init(&st0, &p, &d.lay) == 0);
}

static const struct loop_stage_spec chain[] = {
    {"filter", NULL, NULL}, {"reference", NULL, NULL}, {opts, NULL, NULL}, {"decide:units=0+3+5", NULL, NULL}};

TEST(jit_links_the_tmatch_chain)
{
#if !ONIGPU_HAVE_JIT
    SKIP("built without NVRTC and nvJitLink");
#else
    setup();
    char why[4096] = "";
    struct loop_config c = {.stages = chain, .nstages = 4, .fs_hz = TD_FS, .clock_hz = TD_FS};
    struct loop_chain *ch = NULL;
    int rc = loop_chain_create(&c, &st0, FRAMES, &ch, why, sizeof why);
    if (rc)
        fprintf(stderr, "  %s\n", why);
    REQUIRE(rc == 0);
    void *img = NULL;
    size_t len = 0;
    rc = loop_gpu_jit(ch, 90, &img, &len, why, sizeof why);
    if (rc)
        fprintf(stderr, "  %s\n", why);
    CHECK_RC(rc, 0);
    CHECK(len > 1000);
    free(img);
    loop_chain_destroy(ch);
#endif
}

static void fill(void *arg, uint64_t seq, void *buf, size_t len)
{
    td_block(arg, buf, (uint32_t)(len / d.lay.stride));
}

struct keep {
    struct onigpu_out *out;
    uint64_t n, cap;
};

static int keep_write(void *ctx, uint64_t seq, const void *out, size_t len, uint32_t t)
{
    struct keep *k = ctx;
    if (k->n < k->cap)
        memcpy(&k->out[k->n++], out, sizeof k->out[0]);
    return 0;
}

static int run_on(int b, struct keep *k, char *why, size_t cap)
{
    struct loop_memsrc src;
    uint64_t blocks = d.nsamp / FRAMES;
    k->cap = blocks, k->n = 0;
    k->out = calloc(blocks, sizeof *k->out);
    d.next = 0;
    if (!k->out || loop_memsrc_init(&src, (size_t)FRAMES * d.lay.stride, 0, 0, fill, &d)) {
        UNIT_FAIL("setting up the run");
        return ONI_EBADALLOC;
    }
    struct loop_config c = {0};
    c.backend = b;
    c.work = LOOP_WORK_EPHYS;
    c.in_bytes = (size_t)FRAMES * d.lay.stride;
    c.depth = 4;
    c.blocks = blocks;
    c.timeout_ms = 10000;
    c.ephys = &st0;
    c.stages = chain;
    c.nstages = 4;
    c.fs_hz = TD_FS;
    c.clock_hz = TD_FS;
    c.why = why;
    c.why_cap = cap;
    loop_memsrc_source(&src, &c.src);
    c.sink = (struct loop_sink){k, keep_write};
    struct loop *lp = NULL;
    int rc = loop_create(&c, &lp);
    if (!rc) {
        rc = loop_run(lp);
        snprintf(why, cap, "%s", loop_error_text(lp));
        loop_destroy(lp);
    }
    loop_memsrc_free(&src);
    return rc;
}

static int by_time_unit(const void *a, const void *b)
{
    const struct onigpu_spike *x = a, *y = b;
    if (x->time != y->time)
        return x->time < y->time ? -1 : 1;
    return x->unit < y->unit ? -1 : x->unit > y->unit;
}

/* Spikes of a and b that differ (as sets of time, channel, unit, frame),
 * and whether their decisions do. */
static uint32_t differ(struct onigpu_out *a, struct onigpu_out *b, int *decision)
{
    qsort(a->spikes, a->nspikes, sizeof a->spikes[0], by_time_unit);
    qsort(b->spikes, b->nspikes, sizeof b->spikes[0], by_time_unit);
    uint32_t i = 0, j = 0, bad = 0;
    while (i < a->nspikes || j < b->nspikes) {
        int c = i == a->nspikes ? 1 : j == b->nspikes ? -1 : by_time_unit(&a->spikes[i], &b->spikes[j]);
        if (c == 0 && a->spikes[i].chan == b->spikes[j].chan && a->spikes[i].frame == b->spikes[j].frame)
            i++, j++;
        else if (c <= 0)
            i++, bad++;
        else
            j++, bad++;
    }
    *decision = a->stim != b->stim || a->t_stim != b->t_stim;
    return bad;
}

static double accuracy(const struct keep *k)
{
    size_t nd = 0;
    for (uint64_t i = 0; i < k->n; i++)
        nd += k->out[i].nspikes;
    struct loop_spike *det = malloc((nd ? nd : 1) * sizeof *det);
    if (!det)
        return -1;
    nd = 0;
    for (uint64_t i = 0; i < k->n; i++)
        for (uint32_t s = 0; s < k->out[i].nspikes; s++)
            det[nd++] = k->out[i].spikes[s];
    struct loop_score sc;
    int rc = loop_score_spikes(d.truth, d.ntruth, det, nd, TOL, LOOP_SCORE_RADIUS_UM, (uint64_t)(0.3 * TD_FS),
                               d.nsamp - 200, &sc);
    free(det);
    return rc ? -1 : sc.units == TD_K ? sc.accuracy : 0;
}

TEST(tmatch_on_gpu_matches_cpu)
{
    setup();
    char why[4096] = "";
    struct keep cpu;
    int rc = run_on(LOOP_CPU, &cpu, why, sizeof why);
    if (rc)
        fprintf(stderr, "  cpu: %s\n", why);
    CHECK_RC(rc, 0);
    double acc = accuracy(&cpu);
    uint64_t spikes = 0, stims = 0;
    for (uint64_t i = 0; i < cpu.n; i++)
        spikes += cpu.out[i].nspikes, stims += cpu.out[i].stim;
    fprintf(stderr, "  cpu: %llu spikes, %llu stimulations, accuracy %.3f\n", (unsigned long long)spikes,
            (unsigned long long)stims, acc);
    CHECK(acc >= 0.95 && stims > 10);
    if (!loop_backend_available(LOOP_GPU_PERSISTENT, why, sizeof why)) { /* the cpu half ran */
        free(cpu.out);
        SKIP("%s", why);
    }
    static const int backends[] = {LOOP_GPU_STAGED, LOOP_GPU_GRAPH, LOOP_GPU_PERSISTENT, LOOP_GPU_MAPPED};
    for (int b = 0; b < 4; b++) {
        struct keep gpu;
        rc = run_on(backends[b], &gpu, why, sizeof why);
        if (rc)
            fprintf(stderr, "  %s: %s\n", loop_backend_name(backends[b]), why);
        CHECK_RC(rc, 0);
        CHECK_EQ(gpu.n, cpu.n);
        uint64_t bad = 0, dec = 0;
        for (uint64_t i = 0; i < gpu.n && i < cpu.n; i++) {
            int x;
            bad += differ(&cpu.out[i], &gpu.out[i], &x);
            dec += (uint64_t)x;
        }
        double gacc = accuracy(&gpu);
        fprintf(stderr, "  %s: %llu of %llu spikes differ from the cpu's, %llu decisions; accuracy %.3f\n",
                loop_backend_name(backends[b]), (unsigned long long)bad, (unsigned long long)spikes,
                (unsigned long long)dec, gacc);
        /* the same arithmetic: identical is expected; within 1% is the
         * tolerance (an order of float sums the compiler changed) */
        CHECK(bad * 100 <= spikes && dec * 100 <= stims + 1);
        CHECK(gacc >= 0.95);
        free(gpu.out);
    }
    free(cpu.out);
}
