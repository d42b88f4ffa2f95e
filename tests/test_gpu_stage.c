/* test_gpu_stage.c - stages on the GPU (docs/stages.md): the chain's GPU
 * code compiled and linked (NVRTC, nvJitLink: no GPU needed, CUDA builds),
 * a compiler's or linker's error refusing the stage with its log; with a
 * GPU, the example chain on every GPU backend against the cpu backend, the
 * built-in chain too, and a stage's error on the GPU stopping the loop. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include "oni.h"
#include "unit.h"
#include "loop/loop.h"
#include "loop/source.h"
#include "loop/stage.h"
#include "loop/synth.h"
#if ONIGPU_HAVE_JIT
#include <nvrtc.h>
#include "loop/gpu_jit.h"
#endif

#ifndef EXAMPLES_DIR
#error "EXAMPLES_DIR: the build's examples directory (tests/CMakeLists.txt)"
#endif

#define FRAMES 32
#define BLOCKS 600

static struct loop_synth sy;
static struct loop_ephys_state st0;

static void setup_state(void)
{
    struct loop_ephys_params p;
    loop_ephys_defaults(&p);
    REQUIRE(loop_synth_init(&sy, 1, 40.0, 5) == 0);
    REQUIRE(loop_ephys_init(&st0, &p, &sy.lay) == 0);
}

static const char *example(const char *name, const char *options, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/libstage_%s.so%s%s", EXAMPLES_DIR, name, options ? ":" : "", options ? options : "");
    return buf;
}

#if ONIGPU_HAVE_JIT
/* The chain of specs compiled for sm_90: loop_gpu_jit's result, why filled. */
static int jit(const struct loop_stage_spec *s, uint32_t n, char *why, size_t cap, size_t *len)
{
    setup_state();
    struct loop_config c = {0};
    c.stages = s;
    c.nstages = n;
    struct loop_chain *ch = NULL;
    int rc = loop_chain_create(&c, &st0, FRAMES, &ch, why, cap);
    if (rc)
        return rc;
    void *img = NULL;
    rc = loop_gpu_jit(ch, 90, &img, len, why, cap);
    free(img);
    loop_chain_destroy(ch);
    return rc;
}
#endif

static int cpu_ok(void *state, struct onigpu_block *b)
{
    return 0;
}

TEST(jit_links_the_example_chain)
{
#if !ONIGPU_HAVE_JIT
    SKIP("built without NVRTC and nvJitLink");
#else
    char a[512], b[512], why[4096] = "";
    const struct loop_stage_spec s[] = {{"filter", NULL, NULL}, {"reference", NULL, NULL},
                                        {example("threshold", "first=0,count=384,thr=60", a, sizeof a), NULL, NULL},
                                        {example("poprate", "n=2,w_ms=5", b, sizeof b), NULL, NULL}};
    size_t len = 0;
    int rc = jit(s, 4, why, sizeof why, &len);
    if (rc)
        fprintf(stderr, "  %s\n", why);
    CHECK_RC(rc, 0);
    CHECK(len > 1000); /* a cubin */
    /* decide appended: filter, reference, threshold, decide */
    CHECK_RC(jit(s, 3, why, sizeof why, &len), 0);
#endif
}

TEST(jit_refuses_with_the_compilers_log)
{
#if !ONIGPU_HAVE_JIT
    SKIP("built without NVRTC and nvJitLink");
#else
    char why[4096];
    size_t len;
    struct onigpu_stage bad = {.version = ONIGPU_STAGE_VERSION, .name = "bad", .input = ONIGPU_DATA_SAMPLES,
                               .output = ONIGPU_DATA_SPIKES, .process = cpu_ok,
                               .gpu_source = "extern \"C\" __device__ int bad_gpu(void *s, struct onigpu_block *b)\n"
                                             "{ return no_such_thing; }\n",
                               .gpu_entry = "bad_gpu"};
    struct loop_stage_spec s[] = {{NULL, &bad, NULL}};
    CHECK_RC(jit(s, 1, why, sizeof why, &len), ONI_EINVALARG);
    fprintf(stderr, "  %s\n", why);
    CHECK(strstr(why, "stage 1 (bad) does not compile") && strstr(why, "no_such_thing"));
    /* compiles, but the entry is not defined: the linker says so */
    bad.gpu_source = "extern \"C\" __device__ int other(void *s, struct onigpu_block *b) { return 0; }\n";
    CHECK_RC(jit(s, 1, why, sizeof why, &len), ONI_EINVALARG);
    fprintf(stderr, "  %s\n", why);
    CHECK(strstr(why, "bad_gpu") != NULL);
    /* no GPU version at all; the built-in detect has none of its own */
    bad.gpu_source = NULL;
    CHECK_RC(jit(s, 1, why, sizeof why, &len), ONI_EINVALARG);
    CHECK(strstr(why, "stage 1 (bad) has no GPU implementation") != NULL);
    struct loop_stage_spec d[] = {{"detect", NULL, NULL}};
    CHECK_RC(jit(d, 1, why, sizeof why, &len), ONI_EINVALARG);
    CHECK(strstr(why, "detect runs on the GPU in the built-in chain only") != NULL);
#endif
}

/* A prebuilt device library (LTO IR, as nvcc -dlto makes it; here from
 * NVRTC) in place of source: linked as it is. Garbage is refused by the
 * linker with its message. */
TEST(jit_links_a_prebuilt_device_library)
{
#if !ONIGPU_HAVE_JIT
    SKIP("built without NVRTC and nvJitLink");
#else
    static const char src[] = "struct onigpu_block;\n"
                              "extern \"C\" __device__ int pre_gpu(void *s, struct onigpu_block *b) { return 0; }\n";
    nvrtcProgram prog;
    const char *opts[] = {"-arch=compute_90", "-dlto", "-rdc=true"};
    REQUIRE(nvrtcCreateProgram(&prog, src, "pre.cu", 0, NULL, NULL) == NVRTC_SUCCESS);
    REQUIRE(nvrtcCompileProgram(prog, 3, opts) == NVRTC_SUCCESS);
    size_t n = 0;
    REQUIRE(nvrtcGetLTOIRSize(prog, &n) == NVRTC_SUCCESS && n > 0);
    char *ir = malloc(n);
    REQUIRE(ir && nvrtcGetLTOIR(prog, ir) == NVRTC_SUCCESS);
    nvrtcDestroyProgram(&prog);
    struct onigpu_stage pre = {.version = ONIGPU_STAGE_VERSION, .name = "pre", .input = ONIGPU_DATA_SAMPLES,
                               .output = ONIGPU_DATA_SPIKES, .process = cpu_ok, .gpu_entry = "pre_gpu",
                               .gpu_image = ir, .gpu_image_bytes = n};
    struct loop_stage_spec s[] = {{"filter", NULL, NULL}, {NULL, &pre, NULL}};
    char why[4096];
    size_t len = 0;
    int rc = jit(s, 2, why, sizeof why, &len);
    if (rc)
        fprintf(stderr, "  %s\n", why);
    CHECK_RC(rc, 0);
    static const char junk[64] = "not a device library";
    pre.gpu_image = junk;
    pre.gpu_image_bytes = sizeof junk;
    CHECK_RC(jit(s, 2, why, sizeof why, &len), ONI_EINVALARG);
    fprintf(stderr, "  %s\n", why);
    CHECK(strstr(why, "stage 2 (pre)") != NULL);
    free(ir);
#endif
}

static void synth_fill(void *arg, uint64_t seq, void *buf, size_t len)
{
    loop_synth_block(arg, buf, (uint32_t)(len / sy.lay.stride));
}

struct keep {
    struct onigpu_out *out;
    uint64_t n;
};

static int keep_write(void *ctx, uint64_t seq, const void *out, size_t len, uint32_t t)
{
    struct keep *k = ctx;
    if (k->n < BLOCKS)
        memcpy(&k->out[k->n++], out, sizeof k->out[0]);
    return 0;
}

/* BLOCKS blocks of the synthetic probe (seed 5) through the chain on backend
 * b; loop_run's result (loop_create's when it refused). */
static int run_on(int b, const struct loop_stage_spec *s, uint32_t n, struct keep *k, char *why, size_t cap)
{
    setup_state();
    struct loop_memsrc src;
    if (loop_memsrc_init(&src, (size_t)FRAMES * sy.lay.stride, 0, 0, synth_fill, &sy)) {
        UNIT_FAIL("no memory source");
        return ONI_EBADALLOC;
    }
    struct loop_config c = {0};
    c.backend = b;
    c.work = LOOP_WORK_EPHYS;
    c.in_bytes = (size_t)FRAMES * sy.lay.stride;
    c.depth = 4;
    c.blocks = BLOCKS;
    c.timeout_ms = 5000;
    c.ephys = &st0;
    c.stages = s;
    c.nstages = n;
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

static int by_time_chan(const void *a, const void *b)
{
    const struct onigpu_spike *x = a, *y = b;
    if (x->time != y->time)
        return x->time < y->time ? -1 : 1;
    return x->chan < y->chan ? -1 : x->chan > y->chan;
}

/* The same spikes (as sets: the GPU lists them in arrival order) and the
 * same decisions. */
static int same_block(struct onigpu_out *a, struct onigpu_out *b)
{
    if (a->nspikes != b->nspikes || a->overflow != b->overflow || a->stim != b->stim || a->t_stim != b->t_stim ||
        a->t_block != b->t_block)
        return 0;
    qsort(a->spikes, a->nspikes, sizeof a->spikes[0], by_time_chan);
    qsort(b->spikes, b->nspikes, sizeof b->spikes[0], by_time_chan);
    for (uint32_t i = 0; i < a->nspikes; i++)
        if (a->spikes[i].time != b->spikes[i].time || a->spikes[i].chan != b->spikes[i].chan ||
            a->spikes[i].frame != b->spikes[i].frame)
            return 0;
    return 1;
}

TEST(gpu_chain_matches_cpu)
{
    char why[4096];
    char a[512], b[512];
    const struct loop_stage_spec s[] = {{"filter", NULL, NULL}, {"reference", NULL, NULL},
                                        {example("threshold", "first=0,count=384,thr=60", a, sizeof a), NULL, NULL},
                                        {example("poprate", "n=2,w_ms=5", b, sizeof b), NULL, NULL}};
    struct keep cpu = {calloc(BLOCKS, sizeof(struct onigpu_out)), 0};
    REQUIRE(cpu.out);
    CHECK_RC(run_on(LOOP_CPU, s, 4, &cpu, why, sizeof why), 0);
    uint64_t stims = 0;
    for (uint64_t i = 0; i < cpu.n; i++)
        stims += cpu.out[i].stim;
    CHECK(stims > 3);
    if (!loop_backend_available(LOOP_GPU_PERSISTENT, why, sizeof why)) { /* the cpu half ran: the chain is sound */
        free(cpu.out);
        SKIP("%s", why);
    }
    static const int backends[] = {LOOP_GPU_STAGED, LOOP_GPU_DIRECT, LOOP_GPU_GRAPH,
                                   LOOP_GPU_FLAG,   LOOP_GPU_PERSISTENT, LOOP_GPU_MAPPED};
    for (int k = 0; k < 6; k++) {
        struct keep gpu = {calloc(BLOCKS, sizeof(struct onigpu_out)), 0};
        REQUIRE(gpu.out);
        int rc = run_on(backends[k], s, 4, &gpu, why, sizeof why);
        if (rc)
            fprintf(stderr, "  %s: %s\n", loop_backend_name(backends[k]), why);
        CHECK_RC(rc, 0);
        CHECK_EQ(gpu.n, cpu.n);
        uint64_t bad = 0;
        for (uint64_t i = 0; i < gpu.n && i < cpu.n; i++)
            bad += !same_block(&gpu.out[i], &cpu.out[i]);
        CHECK_EQ(bad, 0);
        free(gpu.out);
    }
    free(cpu.out);
}

/* The built-in chain, as the GPU backends run it (one fused kernel), gives
 * the cpu backend's spikes and decisions block by block. */
TEST(builtin_chain_on_gpu_matches_cpu)
{
    char why[4096];
    struct keep cpu = {calloc(BLOCKS, sizeof(struct onigpu_out)), 0};
    REQUIRE(cpu.out);
    CHECK_RC(run_on(LOOP_CPU, NULL, 0, &cpu, why, sizeof why), 0);
    if (!loop_backend_available(LOOP_GPU_PERSISTENT, why, sizeof why)) {
        free(cpu.out);
        SKIP("%s", why);
    }
    static const int backends[] = {LOOP_GPU_STAGED, LOOP_GPU_PERSISTENT, LOOP_GPU_MAPPED};
    for (int k = 0; k < 3; k++) {
        struct keep gpu = {calloc(BLOCKS, sizeof(struct onigpu_out)), 0};
        REQUIRE(gpu.out);
        CHECK_RC(run_on(backends[k], NULL, 0, &gpu, why, sizeof why), 0);
        CHECK_EQ(gpu.n, cpu.n);
        uint64_t bad = 0;
        for (uint64_t i = 0; i < gpu.n && i < cpu.n; i++)
            bad += !same_block(&gpu.out[i], &cpu.out[i]);
        if (bad)
            fprintf(stderr, "  %s: %llu blocks differ\n", loop_backend_name(backends[k]), (unsigned long long)bad);
        CHECK_EQ(bad, 0);
        free(gpu.out);
    }
    free(cpu.out);
}

TEST(gpu_stage_error_stops_the_loop)
{
    char why[4096];
    struct onigpu_stage fails = {.version = ONIGPU_STAGE_VERSION, .name = "fails", .input = ONIGPU_DATA_SAMPLES,
                                 .output = ONIGPU_DATA_SPIKES, .process = cpu_ok,
                                 .gpu_source = "extern \"C\" __device__ int fails_gpu(void *s, struct onigpu_block *b)\n"
                                               "{ return b->seq == 9 ? -5 : 0; }\n",
                                 .gpu_entry = "fails_gpu"};
    const struct loop_stage_spec s[] = {{"filter", NULL, NULL}, {NULL, &fails, NULL}}; /* decide appended */
    struct keep k = {calloc(BLOCKS, sizeof(struct onigpu_out)), 0};
    REQUIRE(k.out);
    CHECK_RC(run_on(LOOP_CPU, s, 2, &k, why, sizeof why), 0); /* the chain is sound; its CPU version never fails */
    if (!loop_backend_available(LOOP_GPU_PERSISTENT, why, sizeof why)) {
        free(k.out);
        SKIP("%s", why);
    }
    static const int backends[] = {LOOP_GPU_PERSISTENT, LOOP_GPU_STAGED, LOOP_GPU_GRAPH};
    for (int i = 0; i < 3; i++) {
        k.n = 0;
        CHECK_RC(run_on(backends[i], s, 2, &k, why, sizeof why), ONI_EREADFAILURE);
        if (!strstr(why, "stage 2 (fails) failed on block 9 on the GPU"))
            UNIT_FAIL("%s: '%s'", loop_backend_name(backends[i]), why);
        CHECK(k.n <= 10);
    }
    free(k.out);
}
