/* test_stage.c - the stage API (include/onigpu_stage.h) and the chain
 * (src/loop/stage.c) on the cpu backend: the built-in chain, user stages
 * from shared objects (examples/stages), refusals before the run, a
 * failing or slow stage, start/stop and reconfigure. */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "oni.h"
#include "unit.h"
#include "loop/loop.h"
#include "loop/source.h"
#include "loop/synth.h"

#if !defined(EXAMPLES_DIR) || !defined(LIBONI_SO)
#error "EXAMPLES_DIR, LIBONI_SO: the build's examples directory and liboni.so (tests/CMakeLists.txt)"
#endif

#define FRAMES 32
#define BLOCKS 600 /* 0.64 s of data: the detector calibrates on the first 0.2 s */

static void synth_fill(void *arg, uint64_t seq, void *buf, size_t len)
{
    struct loop_synth *sy = arg;
    loop_synth_block(sy, buf, (uint32_t)(len / sy->lay.stride));
}

/* Every block's output, kept. */
struct keep_sink {
    struct onigpu_out *out;
    uint64_t n, cap;
};

static int keep_write(void *ctx, uint64_t seq, const void *out, size_t len, uint32_t timeout_ms)
{
    struct keep_sink *k = ctx;
    if (len != sizeof(struct onigpu_out))
        return ONI_EBUFFERSIZE;
    if (k->n < k->cap)
        memcpy(&k->out[k->n++], out, len);
    return 0;
}

/* One run of the synthetic probe (seed 5) through the chain on the cpu
 * backend; the outputs in *k (the caller frees k->out). Returns loop_run's
 * result (loop_create's when it refused: then *created is 0). */
struct run {
    const struct loop_stage_spec *stages;
    uint32_t nstages;
    uint32_t budget_us;
    uint32_t timeout_ms; /* 0: 5000 */
    uint64_t blocks;
    char why[400];
    int created;
    struct keep_sink k;
    struct loop_ephys_state fin; /* loop_ephys_final */
};

static int run_chain(struct run *r)
{
    static struct loop_synth sy;
    static struct loop_ephys_state st;
    struct loop_ephys_params p;
    loop_ephys_defaults(&p);
    uint64_t blocks = r->blocks ? r->blocks : BLOCKS;
    struct loop_memsrc src;
    r->k.cap = blocks;
    r->k.n = 0;
    r->k.out = calloc(blocks, sizeof *r->k.out);
    if (loop_synth_init(&sy, 1, 40.0, 5) || loop_ephys_init(&st, &p, &sy.lay) || !r->k.out ||
        loop_memsrc_init(&src, (size_t)FRAMES * sy.lay.stride, 0, 0, synth_fill, &sy)) {
        UNIT_FAIL("setting up the run");
        return ONI_EBADALLOC;
    }
    struct loop_config c = {0};
    c.backend = LOOP_CPU;
    c.work = LOOP_WORK_EPHYS;
    c.in_bytes = (size_t)FRAMES * sy.lay.stride;
    c.depth = 4;
    c.blocks = blocks;
    c.timeout_ms = r->timeout_ms ? r->timeout_ms : 5000;
    c.ephys = &st;
    c.stages = r->stages;
    c.nstages = r->nstages;
    c.stage_budget_us = r->budget_us;
    c.why = r->why;
    c.why_cap = sizeof r->why;
    loop_memsrc_source(&src, &c.src);
    c.sink = (struct loop_sink){&r->k, keep_write};
    struct loop *lp = NULL;
    int rc = loop_create(&c, &lp);
    r->created = rc == 0;
    if (!rc) {
        rc = loop_run(lp);
        snprintf(r->why, sizeof r->why, "%s", loop_error_text(lp));
        r->fin = *loop_ephys_final(lp);
        loop_destroy(lp);
    }
    loop_memsrc_free(&src);
    return rc;
}

/* The reference: the same blocks through loop_ephys_cpu, block by block. */
static void reference(struct onigpu_out *out, uint64_t blocks, struct loop_ephys_state *st)
{
    static struct loop_synth sy;
    REQUIRE(loop_synth_init(&sy, 1, 40.0, 5) == 0);
    struct loop_ephys_params p;
    loop_ephys_defaults(&p);
    REQUIRE(loop_ephys_init(st, &p, &sy.lay) == 0);
    uint8_t *blk = malloc((size_t)FRAMES * sy.lay.stride);
    REQUIRE(blk);
    for (uint64_t b = 0; b < blocks; b++) {
        loop_synth_block(&sy, blk, FRAMES);
        loop_ephys_cpu(st, blk, FRAMES, &out[b]);
    }
    free(blk);
}

static int same_out(const struct onigpu_out *a, const struct onigpu_out *b)
{
    if (a->nspikes != b->nspikes || a->overflow != b->overflow || a->t_block != b->t_block || a->stim != b->stim ||
        a->t_stim != b->t_stim || (a->nspikes && a->t_first != b->t_first))
        return 0;
    for (uint32_t i = 0; i < a->nspikes; i++)
        if (a->spikes[i].time != b->spikes[i].time || a->spikes[i].chan != b->spikes[i].chan ||
            a->spikes[i].frame != b->spikes[i].frame)
            return 0;
    return 1;
}

static uint64_t total_spikes(const struct keep_sink *k)
{
    uint64_t n = 0;
    for (uint64_t i = 0; i < k->n; i++)
        n += k->out[i].nspikes;
    return n;
}

/* The built-in chain (no stages given, and the same named) gives what
 * loop_ephys_cpu gives, block by block, and the same final state. */
TEST(builtin_chain_is_the_pipeline)
{
    static struct loop_ephys_state ref_st;
    struct onigpu_out *ref = calloc(BLOCKS, sizeof *ref);
    REQUIRE(ref);
    reference(ref, BLOCKS, &ref_st);
    const struct loop_stage_spec named[] = {
        {"filter", NULL, NULL}, {"reference", NULL, NULL}, {"detect", NULL, NULL}, {"decide", NULL, NULL}};
    for (int v = 0; v < 2; v++) {
        static struct run r;
        memset(&r, 0, sizeof r);
        r.stages = v ? named : NULL;
        r.nstages = v ? 4 : 0;
        CHECK_RC(run_chain(&r), ONI_ESUCCESS);
        CHECK_EQ(r.k.n, BLOCKS);
        uint64_t bad = 0, stims = 0;
        for (uint64_t b = 0; b < r.k.n; b++) {
            bad += !same_out(&r.k.out[b], &ref[b]);
            stims += r.k.out[b].stim;
        }
        CHECK_EQ(bad, 0);
        CHECK(total_spikes(&r.k) > 10); /* the data has spikes after calibration (40 Hz, 0.44 s) */
        CHECK(stims > 8);
        CHECK(!memcmp(r.fin.thr, ref_st.thr, sizeof ref_st.thr));
        CHECK(!memcmp(r.fin.z, ref_st.z, sizeof ref_st.z));
        CHECK_EQ(r.fin.nsamples, ref_st.nsamples);
        free(r.k.out);
    }
    free(ref);
}

/* Options reach the built-in stages: a higher threshold finds fewer spikes,
 * and the final state says k. */
TEST(builtin_options)
{
    static struct run lo, hi;
    const struct loop_stage_spec a[] = {{"filter:lo=300,hi=6000", NULL, NULL}, {"reference", NULL, NULL},
                                        {"detect:k=4", NULL, NULL}};
    const struct loop_stage_spec b[] = {{"filter", NULL, NULL}, {"reference", NULL, NULL}, {"detect:k=9", NULL, NULL}};
    lo.stages = a, lo.nstages = 3;
    hi.stages = b, hi.nstages = 3;
    CHECK_RC(run_chain(&lo), ONI_ESUCCESS);
    CHECK_RC(run_chain(&hi), ONI_ESUCCESS);
    CHECK(total_spikes(&lo.k) > total_spikes(&hi.k));
    CHECK(fabs(lo.fin.k - 4 / 0.6745) < 1e-5);
    CHECK(fabs(hi.fin.k - 9 / 0.6745) < 1e-5);
    free(lo.k.out);
    free(hi.k.out);
}

static char *example(const char *name, const char *options, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/libstage_%s.so%s%s", EXAMPLES_DIR, name, options ? ":" : "", options ? options : "");
    return buf;
}

/* The threshold example lists spikes of its channels only, and finds the
 * synthetic spikes there. */
TEST(threshold_example_on_selected_channels)
{
    char path[512];
    static struct run r;
    const struct loop_stage_spec s[] = {
        {"filter", NULL, NULL}, {"reference", NULL, NULL},
        {example("threshold", "first=100,count=150,thr=70,refractory_ms=1", path, sizeof path), NULL, NULL}};
    r.stages = s, r.nstages = 3;
    CHECK_RC(run_chain(&r), ONI_ESUCCESS);
    uint64_t outside = 0, n = 0;
    for (uint64_t b = 0; b < r.k.n; b++)
        for (uint32_t i = 0; i < r.k.out[b].nspikes; i++, n++)
            outside += r.k.out[b].spikes[i].chan < 100 || r.k.out[b].spikes[i].chan >= 250;
    CHECK_EQ(outside, 0);
    CHECK(n > 5);
    free(r.k.out);
}

/* The population-rate example, called as the loop calls it: n channels
 * within w_ms stimulate once, at the spike that completed the count, then
 * not again for dead_ms. */
TEST(poprate_example_decides)
{
    char path[512];
    void *lib = dlopen(example("poprate", NULL, path, sizeof path), RTLD_NOW | RTLD_LOCAL);
    REQUIRE(lib);
    const struct onigpu_stage *d = dlsym(lib, "onigpu_stage");
    REQUIRE(d && d->process && d->configure);
    CHECK_EQ(d->input, ONIGPU_DATA_SPIKES);
    CHECK_EQ(d->output, ONIGPU_DATA_DECISION);
    void *state = calloc(1, d->state_bytes);
    static struct onigpu_out out;
    struct onigpu_block b = {0};
    b.nchan = 384;
    b.out = &out;
    char err[256];
    struct onigpu_stage_env env = {384, 32, 30000, 250e6, "n=3,w_ms=2,dead_ms=10", NULL};
    CHECK_RC(d->configure(state, &env, err, sizeof err), 0);
    const uint64_t ms = 250000; /* hub clock ticks */
    /* block 1: channels 1 and 2 fire: two of three, no stimulus */
    memset(&out, 0, sizeof out);
    out.t_first = UINT64_MAX;
    onigpu_add_spike(&out, 10 * ms, 1, 0);
    onigpu_add_spike(&out, 10 * ms + 10, 2, 1);
    CHECK_RC(d->process(state, &b), 0);
    CHECK_EQ(out.stim, 0);
    /* block 2: channel 3 within 2 ms: stimulate at its spike */
    memset(&out, 0, sizeof out);
    out.t_first = UINT64_MAX;
    onigpu_add_spike(&out, 11 * ms, 3, 0);
    onigpu_add_spike(&out, 11 * ms + 5, 4, 1);
    CHECK_RC(d->process(state, &b), 0);
    CHECK_EQ(out.stim, 1);
    CHECK_EQ(out.t_stim, 11 * ms);
    /* block 3: three more channels 5 ms later: inside dead_ms, no stimulus */
    memset(&out, 0, sizeof out);
    out.t_first = UINT64_MAX;
    for (uint32_t c = 10; c < 13; c++)
        onigpu_add_spike(&out, 16 * ms + c, c, 0);
    CHECK_RC(d->process(state, &b), 0);
    CHECK_EQ(out.stim, 0);
    /* block 4: channels spread over more than w_ms, after the dead time: none */
    memset(&out, 0, sizeof out);
    out.t_first = UINT64_MAX;
    onigpu_add_spike(&out, 40 * ms, 20, 0);
    onigpu_add_spike(&out, 43 * ms, 21, 1);
    onigpu_add_spike(&out, 46 * ms, 22, 2);
    CHECK_RC(d->process(state, &b), 0);
    CHECK_EQ(out.stim, 0);
    /* bad options are refused with a message */
    struct onigpu_stage_env bad = {384, 32, 30000, 250e6, "n=0", NULL};
    err[0] = 0;
    CHECK(d->configure(state, &bad, err, sizeof err) != 0);
    CHECK(strstr(err, "n <=") != NULL);
    bad.options = "window=3";
    CHECK(d->configure(state, &bad, err, sizeof err) != 0);
    CHECK(strstr(err, "window") != NULL);
    free(state);
    dlclose(lib);
}

/* The example chain in the loop: stimuli come only from poprate's decisions,
 * at most one per block, never more than the blocks with spikes. */
TEST(poprate_example_in_the_loop)
{
    char path[512];
    static struct run r;
    const struct loop_stage_spec s[] = {{"filter", NULL, NULL}, {"reference", NULL, NULL}, {"detect", NULL, NULL},
                                        {example("poprate", "n=2,w_ms=20,dead_ms=5", path, sizeof path), NULL, NULL}};
    r.stages = s, r.nstages = 4;
    CHECK_RC(run_chain(&r), ONI_ESUCCESS);
    uint64_t stims = 0, with_spikes = 0, bad = 0;
    for (uint64_t b = 0; b < r.k.n; b++) {
        const struct onigpu_out *o = &r.k.out[b];
        stims += o->stim;
        with_spikes += o->nspikes > 0;
        bad += o->stim && (!o->nspikes || o->t_stim < o->t_first || o->t_stim > o->t_block);
    }
    CHECK(stims > 0);
    CHECK(stims < with_spikes); /* two channels within 20 ms, 5 ms apart: fewer than decide's */
    CHECK_EQ(bad, 0);
    free(r.k.out);
}

/* A stage that reads samples first gets the frames decoded. */
static int check_decoded(void *state, struct onigpu_block *b)
{
    for (uint32_t f = 0; f < b->nframes; f++)
        for (uint32_t c = 0; c < b->nchan; c++) {
            uint16_t v;
            memcpy(&v, b->frames + (size_t)f * b->stride + b->off[c], 2);
            if (b->x[(size_t)f * b->nchan + c] != (float)v - 2048.0f)
                return ONI_EREADFAILURE;
        }
    return 0;
}

#define STAGE(nm, in, outp, fn) \
    {.version = ONIGPU_STAGE_VERSION, .name = nm, .input = in, .output = outp, .process = fn}
static const struct onigpu_stage decoded = STAGE("decoded", ONIGPU_DATA_SAMPLES, ONIGPU_DATA_SPIKES, check_decoded);

TEST(samples_are_decoded_frames)
{
    static struct run r;
    const struct loop_stage_spec s[] = {{NULL, &decoded, NULL}};
    r.stages = s, r.nstages = 1;
    r.blocks = 20;
    CHECK_RC(run_chain(&r), ONI_ESUCCESS);
    CHECK_EQ(r.k.n, 20);
    free(r.k.out);
}

/* Refused by loop_create, before anything runs, with a message naming what. */
static void refused(const struct loop_stage_spec *s, uint32_t n, const char *want)
{
    static struct run r;
    memset(&r, 0, sizeof r);
    r.stages = s, r.nstages = n;
    r.blocks = 4;
    int rc = run_chain(&r);
    CHECK(rc != 0);
    CHECK_EQ(r.created, 0);
    if (!strstr(r.why, want))
        UNIT_FAIL("refusal '%s' does not say '%s'", r.why, want);
    free(r.k.out);
}

static const struct onigpu_stage v99 = {.version = 99, .name = "future", .input = ONIGPU_DATA_SAMPLES,
                                        .output = ONIGPU_DATA_SAMPLES, .process = check_decoded};
static const struct onigpu_stage nocpu = STAGE("gpuonly", ONIGPU_DATA_SAMPLES, ONIGPU_DATA_SPIKES, NULL);
static const struct onigpu_stage outframes = STAGE("weird", ONIGPU_DATA_SAMPLES, ONIGPU_DATA_FRAMES, check_decoded);

TEST(bad_stages_are_refused_before_the_run)
{
    char path[512];
    struct loop_stage_spec s[3] = {{"nosuch", NULL, NULL}};
    refused(s, 1, "no built-in stage");
    s[0].text = "/nonexistent/stage.so";
    refused(s, 1, "cannot load");
    s[0].text = LIBONI_SO; /* a shared object, but no stage */
    refused(s, 1, "exports no 'onigpu_stage'");
    s[0] = (struct loop_stage_spec){NULL, &v99, NULL};
    refused(s, 1, "version 99");
    s[0] = (struct loop_stage_spec){NULL, &nocpu, NULL};
    refused(s, 1, "no CPU implementation");
    s[0] = (struct loop_stage_spec){NULL, &outframes, NULL};
    refused(s, 1, "output other than frames");
    /* poprate first: it reads spikes nobody wrote */
    s[0] = (struct loop_stage_spec){example("poprate", NULL, path, sizeof path), NULL, NULL};
    refused(s, 1, "reads spikes, which no stage before it writes");
    /* options: the built-in's and the example's own refusals */
    s[0] = (struct loop_stage_spec){"filter:lo=7000", NULL, NULL};
    s[1] = (struct loop_stage_spec){"detect", NULL, NULL};
    refused(s, 2, "band 7000-6000 Hz");
    s[0] = (struct loop_stage_spec){"detect:q=1", NULL, NULL};
    refused(s, 1, "option 'q=1'");
    s[0] = (struct loop_stage_spec){"filter", NULL, NULL};
    s[1] = (struct loop_stage_spec){"reference:group=100", NULL, NULL};
    s[2] = (struct loop_stage_spec){"detect", NULL, NULL};
    refused(s, 3, "group=100: 0 (all");
    s[0] = (struct loop_stage_spec){"filter", NULL, NULL};
    s[1] = (struct loop_stage_spec){example("threshold", "first=380,count=10", path, sizeof path), NULL, NULL};
    refused(s, 2, "channels 380 .. 389");
    s[0] = (struct loop_stage_spec){"decide", NULL, NULL};
    refused(s, 1, "decide");
    char why[256];
    CHECK_RC(loop_stage_check("/nonexistent.so:k=1", why, sizeof why), ONI_EINVALARG);
    CHECK(strstr(why, "/nonexistent.so") != NULL);
    CHECK_RC(loop_stage_check(example("threshold", "whatever", path, sizeof path), why, sizeof why), 0);
}

/* A stage's error stops the loop with it; the text names the stage. */
static int fail_at_7(void *state, struct onigpu_block *b)
{
    return b->seq == 7 ? ONI_EREADFAILURE : 0;
}

/* 30 ms of processor time on block 3 (the budget counts the stage's own
 * work, not time spent waiting for a core). */
static int slow_at_3(void *state, struct onigpu_block *b)
{
    if (b->seq == 3) {
        struct timespec t0, t;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
        do
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
        while ((t.tv_sec - t0.tv_sec) * 1000000000ll + (t.tv_nsec - t0.tv_nsec) < 30000000ll);
    }
    return 0;
}

static const struct onigpu_stage failing = STAGE("failing", ONIGPU_DATA_SAMPLES, ONIGPU_DATA_SAMPLES, fail_at_7);
static const struct onigpu_stage slow = STAGE("slow", ONIGPU_DATA_SAMPLES, ONIGPU_DATA_SAMPLES, slow_at_3);

TEST(failing_or_slow_stage_stops_the_loop)
{
    static struct run r;
    struct loop_stage_spec s[] = {{"filter", NULL, NULL}, {NULL, &failing, NULL}, {"detect", NULL, NULL}};
    r.stages = s, r.nstages = 3;
    r.blocks = 50;
    CHECK_RC(run_chain(&r), ONI_EREADFAILURE);
    CHECK(strstr(r.why, "stage 2 (failing) failed on block 7") != NULL);
    CHECK(r.k.n <= 7); /* nothing after the failing block reached the sink */
    free(r.k.out);
    memset(&r, 0, sizeof r);
    s[1].stage = &slow;
    r.stages = s, r.nstages = 3;
    r.blocks = 50;
    r.budget_us = 10000; /* 10 ms: the slow block takes 30 */
    CHECK_RC(run_chain(&r), ONI_ETIMEOUT);
    CHECK(strstr(r.why, "stage 2 (slow)") && strstr(r.why, "over its budget of 10.000 ms"));
    if (!strstr(r.why, "on block 3"))
        UNIT_FAIL("'%s' names another block than 3", r.why);
    free(r.k.out);
}

/* Stages that do not return from block 3 until the test lets them: one
 * spins (processor time), one waits (none). */
static _Atomic int let_go;

static int spin_at_3(void *state, struct onigpu_block *b)
{
    while (b->seq == 3 && !atomic_load(&let_go))
        ;
    return 0;
}

static int wait_at_3(void *state, struct onigpu_block *b)
{
    while (b->seq == 3 && !atomic_load(&let_go))
        usleep(1000);
    return 0;
}

static const struct onigpu_stage spin = STAGE("spin", ONIGPU_DATA_SAMPLES, ONIGPU_DATA_SAMPLES, spin_at_3);
static const struct onigpu_stage waits = STAGE("waits", ONIGPU_DATA_SAMPLES, ONIGPU_DATA_SAMPLES, wait_at_3);

/* The watchdog ends the run with the stage's name; the abandoned thread
 * finishes once let go (the loop was not freed under it: ASan would say). */
static void run_stuck(const struct onigpu_stage *stuck, uint32_t timeout_ms, const char *says)
{
    static struct run r;
    memset(&r, 0, sizeof r);
    struct loop_stage_spec s[] = {{"filter", NULL, NULL}, {NULL, stuck, NULL}, {"detect", NULL, NULL}};
    r.stages = s, r.nstages = 3;
    r.blocks = 50;
    r.budget_us = 20000;
    r.timeout_ms = timeout_ms;
    atomic_store(&let_go, 0);
    CHECK_RC(run_chain(&r), ONI_ETIMEOUT);
    if (!strstr(r.why, says) || !strstr(r.why, "has not returned from block 3"))
        UNIT_FAIL("'%s' does not say '%s' has not returned from block 3", r.why, says);
    CHECK(r.k.n <= 3); /* nothing from block 3 on reached the sink */
    atomic_store(&let_go, 1);
    usleep(50000);
    free(r.k.out);
}

TEST(stage_that_never_returns_stops_the_loop)
{
    run_stuck(&spin, 5000, "stage 2 (spin)");    /* caught by its processor time */
    run_stuck(&waits, 200, "stage 2 (waits)");   /* by the budget plus the timeout */
}

/* start and stop once each, from the loop; reconfigure between blocks. */
struct life {
    int starts, stops, configs;
    double gain;
    _Atomic uint64_t blocks;
};

static int life_configure(void *state, const struct onigpu_stage_env *env, char *err, size_t cap)
{
    struct life *l = state;
    double g = 1;
    if (onigpu_stage_option(env->options, "gain", &g) < 0 || !(g > 0)) {
        snprintf(err, cap, "gain must be a positive number");
        return ONI_EINVALARG;
    }
    l->gain = g;
    l->configs++;
    return 0;
}

static struct life *_Atomic seen; /* the loop's state of the stage, seen by the test */

static void life_start(void *state)
{
    seen = state;
    ((struct life *)state)->starts++;
}

static void life_stop(void *state)
{
    ((struct life *)state)->stops++;
}

static int life_process(void *state, struct onigpu_block *b)
{
    struct life *l = state;
    for (size_t i = 0; i < (size_t)b->nframes * b->nchan; i++)
        b->x[i] *= (float)l->gain;
    atomic_fetch_add(&l->blocks, 1);
    return 0;
}

static const struct onigpu_stage life = {
    .version = ONIGPU_STAGE_VERSION, .name = "life", .input = ONIGPU_DATA_SAMPLES, .output = ONIGPU_DATA_SAMPLES,
    .state_bytes = sizeof(struct life), .configure = life_configure, .start = life_start, .stop = life_stop,
    .process = life_process, .reconfigure = life_configure};

static int paced_read(void *ctx, void *buf, size_t len, uint32_t t)
{
    struct timespec ts = {0, 2 * 1000000}; /* a block every 2 ms */
    nanosleep(&ts, NULL);
    memset(buf, 0, len);
    return 0;
}

static int null_write(void *ctx, uint64_t seq, const void *out, size_t len, uint32_t t)
{
    return 0;
}

static void *run_thread(void *lp)
{
    loop_run(lp);
    return NULL;
}

TEST(start_stop_and_reconfigure)
{
    static struct loop_synth sy;
    static struct loop_ephys_state st;
    REQUIRE(loop_synth_init(&sy, 1, 40.0, 5) == 0);
    struct loop_ephys_params p;
    loop_ephys_defaults(&p);
    REQUIRE(loop_ephys_init(&st, &p, &sy.lay) == 0);
    const struct loop_stage_spec s[] = {{NULL, &life, "gain=2"}, {"reference", NULL, NULL}, {"detect", NULL, NULL}};
    struct loop_config c = {0};
    c.backend = LOOP_CPU;
    c.work = LOOP_WORK_EPHYS;
    c.in_bytes = (size_t)FRAMES * sy.lay.stride;
    c.depth = 2;
    c.timeout_ms = 2000;
    c.ephys = &st;
    c.stages = s;
    c.nstages = 3;
    c.src.read = paced_read;
    c.sink.write = null_write;
    struct loop *lp = NULL;
    CHECK_RC(loop_create(&c, &lp), ONI_ESUCCESS);
    REQUIRE(lp);
    char why[256];
    /* before the run: at once */
    CHECK_RC(loop_stage_reconfigure(lp, 0, "gain=3", why, sizeof why), 0);
    CHECK_RC(loop_stage_reconfigure(lp, 0, "gain=-1", why, sizeof why), ONI_EINVALARG);
    CHECK(strstr(why, "gain must be") != NULL);
    CHECK_RC(loop_stage_reconfigure(lp, 5, "", why, sizeof why), ONI_EINVALARG);
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, run_thread, lp) == 0);
    /* while running (a block seen, so detect has counted samples): taken
     * between two blocks */
    for (int i = 0; i < 2000 && !(seen && atomic_load(&seen->blocks)); i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    REQUIRE(seen && atomic_load(&seen->blocks));
    CHECK_RC(loop_stage_reconfigure(lp, 0, "gain=4", why, sizeof why), 0);
    CHECK_RC(loop_stage_reconfigure(lp, 2, "k=7", why, sizeof why), 0);
    CHECK_RC(loop_stage_reconfigure(lp, 2, "calib_s=1", why, sizeof why), ONI_EINVALARG);
    CHECK(strstr(why, "calibration started") != NULL);
    CHECK_RC(loop_stage_reconfigure(lp, 1, "", why, sizeof why), ONI_EUNIMPL); /* reference takes none */
    CHECK_RC(loop_stage_reconfigure(lp, 3, "lockout_ms=3", why, sizeof why), 0); /* the appended decide */
    loop_stop(lp);
    pthread_join(th, NULL);
    CHECK_RC(loop_stage_reconfigure(lp, 0, "gain=5", why, sizeof why), ONI_EINVALSTATE);
    REQUIRE(seen);
    CHECK_EQ(seen->starts, 1);
    CHECK_EQ(seen->stops, 1);
    CHECK_EQ(seen->configs, 3);
    CHECK(seen->gain == 4);
    CHECK(fabs(loop_ephys_final(lp)->k - 7 / 0.6745) < 1e-5);
    CHECK_EQ(loop_ephys_final(lp)->lockout, 3 * 250000); /* 3 ms of the 250 MHz clock */
    loop_destroy(lp);
}

/* The option helpers of the header. */
TEST(option_helpers)
{
    double v = 0;
    static const char *const keys[] = {"a", "bb"};
    CHECK_EQ(onigpu_stage_option("a=1,bb=2.5", "bb", &v), 1);
    CHECK(v == 2.5);
    CHECK_EQ(onigpu_stage_option("a=1,bb=2.5", "b", &v), 0);
    CHECK_EQ(onigpu_stage_option("a=x", "a", &v), -1);
    CHECK_EQ(onigpu_stage_option("a=1x,bb=2", "a", &v), -1);
    CHECK_EQ(onigpu_stage_option(NULL, "a", &v), 0);
    CHECK(onigpu_stage_unknown("a=1,bb=2", keys, 2) == NULL);
    const char *u = onigpu_stage_unknown("a=1,c=2", keys, 2);
    CHECK(u && !strcmp(u, "c=2"));
}
