/* test_loop_session.c - the closed loop as a library call (src/loop/run.h),
 * in-process on the emulated card with the cpu backend: what a run sums up
 * and how its counts relate, an early stop, and the cards and settings it
 * refuses before anything runs. The CLI around it: test_loop_run.c. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "oni.h"
#include "unit.h"
#include "realtime.h"
#include "oni/util/clock.h"
#include "loop/run.h"
#include "bench/bench_scale.h"
#include "results/results.h"

#if defined(__OPTIMIZE__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define REALTIME_BUILD 1 /* only such a build keeps up with the card */
#else
#define REALTIME_BUILD 0
#endif

static char truth[64];

/* A config of a cpu run of `seconds` into a new, empty truth file. */
static struct loop_run_config config(double seconds)
{
    snprintf(truth, sizeof truth, "/tmp/onigpu-session-XXXXXX");
    int fd = mkstemp(truth);
    if (fd >= 0)
        close(fd);
    return (struct loop_run_config){.backend = LOOP_CPU, .block = 16, .seconds = seconds, .truth = truth};
}

struct seen {
    int started, progress;
    char link[32];
};

static void on_started(void *arg, const struct loop_run_result *r)
{
    struct seen *s = arg;
    s->started++;
    snprintf(s->link, sizeof s->link, "%s", r->link);
}

static void on_progress(void *arg, const struct loop_run_progress *p)
{
    struct seen *s = arg;
    s->progress += p->t > 0;
}

/* One run, checked; 1 when its real-time figures held. */
static int sums_up_a_run(void)
{
    struct loop_run_config c = config(2);
    struct seen seen = {0};
    c.started = on_started;
    c.progress = on_progress;
    c.arg = &seen;
    c.link = "gen3x8";
    struct loop_run_result r;
    int rc = loop_run_session(&c, &r);
    /* a sanitized build falls behind and its reads may time out: what it
     * processed is summed up all the same */
    CHECK(rc == 0 || !REALTIME_BUILD);
    CHECK_EQ(r.ran, 1);
    CHECK_EQ(seen.started, 1);
    CHECK_EQ(seen.progress, 2);
    CHECK(strcmp(seen.link, "gen3x8") == 0 && strcmp(r.link, "gen3x8") == 0);
    CHECK_EQ(r.stopped, 0);
    CHECK(r.frames > 0 && r.frames % 16 == 0);
    CHECK_EQ(r.bytes, r.frames * 1180); /* NP2.0e super-frames in read-frame form */
    CHECK_EQ(r.block_bytes, 16 * 1180);
    CHECK_EQ(r.gpu_stream, 1);
    /* the counts' relations (run.h) */
    CHECK(r.stims <= r.frames / 16);
    CHECK(r.echoes <= r.stims);
    CHECK(r.score.tp + r.score.misses == r.score.events && r.score.tp + r.score.fp == r.score.detections);
    CHECK(r.score.detections <= r.spikes);
    CHECK_EQ(r.nlat, r.lat.n + r.lat_warmup.n);
    CHECK(r.warmup_s == fmin(LOOP_RUN_WARMUP_S, r.seconds / 2));
    size_t warm = 0;
    for (size_t i = 0; i < r.nlat; i++) {
        warm += r.lat_warm[i];
        CHECK(r.lat_us[i] > 0);
    }
    CHECK_EQ(warm, r.lat_warmup.n);
    if (r.lat.n)
        CHECK(r.lat.p50_us <= r.lat.p99_us && r.lat.p99_us <= r.lat.p999_us && r.lat.p999_us <= r.lat.max_us);
    else
        CHECK(isnan(r.lat.p50_us));
    /* the stages: of the same echoes; the time after the last sample is part
     * of the latency; the hand-offs are measured on one clock (never < 0); the
     * clock placement is bounded */
    const struct loop_run_latency *after = &r.stage[LOOP_RUN_AFTER];
    CHECK_EQ(after->n, r.lat.n);
    CHECK_EQ(r.stage[LOOP_RUN_READY].n, r.lat.n); /* cpu: every block's read seen ending */
    CHECK_EQ(r.stage[LOOP_RUN_COMPUTE].n, r.lat.n);
    if (after->n) {
        CHECK(after->p50_us > 0 && after->max_us <= r.lat.max_us + 1e-3); /* equal for a spike in the last frame */
        CHECK(r.clock_err_us >= 0 && r.clock_err_us < 1e6);
        CHECK(r.stage[LOOP_RUN_HANDOFF].p50_us >= 0 && r.stage[LOOP_RUN_COMPUTE].p50_us > 0);
        CHECK(r.stage[LOOP_RUN_WRITE].p50_us > -r.clock_err_us - 1);
    }
    CHECK(r.link_write_us > 0 && r.link_read_us > r.link_write_us); /* a block is larger than a stimulation */
    CHECK_EQ(r.block_picked, 0);
    CHECK_EQ(r.block_why[0], 0);
    /* what a loop that keeps up gets: judged with the CPU pressure (realtime.h) */
    /* one to one on the default signal: the figures of fixtures/test_loop_run.h
     * (precision ~0.8; recall ~0.4 over every SNR, ~1 for SNR 8 and up) */
    double r8 = loop_score_band_recall(&r.score, 2), r12 = loop_score_band_recall(&r.score, 3);
    int ok = r.score.events >= 20 && r.score.recall > 0.3 && r8 >= 0.9 && r12 >= 0.9 && r.score.precision > 0.6 &&
             r.lat.n > 0 && r.lat_warmup.n > 0;
    fprintf(stderr,
            "  %llu events, precision %.3f, recall %.3f (SNR 8-12 %.3f, >=12 %.3f), F1 %.3f, %zu echoes after the "
            "warm-up, %zu in it\n",
            (unsigned long long)r.score.events, r.score.precision, r.score.recall, r8, r12, r.score.f1, r.lat.n,
            r.lat_warmup.n);
    loop_run_result_free(&r);
    unlink(truth);
    return ok;
}

TEST(session_sums_up_a_run)
{
    enum rt_verdict v = RT_RETRY;
    for (int attempt = 1; v == RT_RETRY; attempt++) {
        struct rt_clock clk;
        rt_start(&clk);
        int ok = sums_up_a_run();
        double p = rt_pressure(&clk);
        v = REALTIME_BUILD ? rt_judge(ok, attempt, p) : RT_PASS;
        if (v != RT_PASS)
            rt_report("events and latency", attempt, p, v);
    }
}

struct stopper {
    _Atomic int flag;
    unsigned after_ms;
};

static void *stop_later(void *p)
{
    struct stopper *s = p;
    usleep(s->after_ms * 1000u);
    atomic_store(&s->flag, 1);
    return NULL;
}

/* cfg.stop ends a run early as its end would: stopped, scored, summed up. */
TEST(session_stops_when_asked)
{
    struct loop_run_config c = config(60);
    struct stopper st = {0, 1200};
    c.stop = &st.flag;
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, stop_later, &st) == 0);
    struct loop_run_result r;
    uint64_t t0 = oni_now_ns();
    int rc = loop_run_session(&c, &r);
    double took = (double)(oni_now_ns() - t0) / 1e9;
    pthread_join(t, NULL);
    CHECK(rc == 0 || !REALTIME_BUILD);
    CHECK_EQ(r.ran, 1);
    CHECK_EQ(r.stopped, 1);
    CHECK(took < 20);
    CHECK(r.seconds > 0 && r.seconds < 20);
    CHECK(r.frames > 0);
    CHECK(r.warmup_s == fmin(LOOP_RUN_WARMUP_S, r.seconds / 2)); /* of the time it ran, not the 60 s asked */
    loop_run_result_free(&r);
    unlink(truth);
}

/* Block 0: trials of blocks 1, 2, 4, ... pick the smallest that keeps up;
 * the result says which and why, and the truth file is the last run's
 * alone (emptied before each). */
TEST(session_picks_its_block)
{
    struct loop_run_config c = config(1);
    c.block = 0;
    struct loop_run_result r;
    int rc = loop_run_session(&c, &r);
    CHECK(rc == 0 || !REALTIME_BUILD);
    CHECK_EQ(r.ran, 1);
    CHECK_EQ(r.block_picked, 1);
    CHECK(r.block >= 1 && r.block <= LOOP_RUN_PICK_MAX && (r.block & (r.block - 1)) == 0);
    /* "the smallest that kept up ..." or, in a slow build, "none kept up ...: the largest tried" */
    CHECK(strstr(r.block_why, "kept up in 1.0 s trials") != NULL && strstr(r.block_why, "(1: ") != NULL);
    char want[32];
    snprintf(want, sizeof want, "; %u: ", r.block);
    CHECK(r.block == 1 || strstr(r.block_why, want) != NULL); /* the picked one was tried */
    if (REALTIME_BUILD && strstr(r.block_why, "the smallest"))
        CHECK(r.block < LOOP_RUN_PICK_MAX || strstr(r.block_why, "none") == NULL);
    CHECK(r.frames > 0 && r.frames % r.block == 0);
    fprintf(stderr, "  picked block %u: %s\n", r.block, r.block_why);
    loop_run_result_free(&r);
    /* one header: the file was emptied before the last run */
    char cmd[128];
    snprintf(cmd, sizeof cmd, "test $(grep -c dev_idx %s) = 1", truth);
    CHECK(system(cmd) == 0);
    unlink(truth);
}

/* A stop during the trials ends the run with that trial as its result. */
TEST(session_stops_during_the_block_trials)
{
    struct loop_run_config c = config(30);
    c.block = 0;
    struct stopper st = {0, 300};
    c.stop = &st.flag;
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, stop_later, &st) == 0);
    struct loop_run_result r;
    uint64_t t0 = oni_now_ns();
    loop_run_session(&c, &r);
    double took = (double)(oni_now_ns() - t0) / 1e9;
    pthread_join(t, NULL);
    CHECK_EQ(r.stopped, 1);
    CHECK_EQ(r.block_picked, 1);
    CHECK(strstr(r.block_why, "stopped during the trials, at the trial of block 1") != NULL);
    CHECK(took < 20);
    loop_run_result_free(&r);
    unlink(truth);
}

/* What cannot do the job is refused with the reason, before acquisition. */
/* A run's truth file is new: in a directory by date, never over another's
 * (the same second again is refused), or a temporary one of its own. */
TEST(truth_file_is_new)
{
    char dir[] = "/tmp/onigpu-truth-XXXXXX", path[4096], again[4096], why[4200];
    REQUIRE(mkdtemp(dir));
    time_t t0 = time(NULL);
    CHECK_RC(loop_run_truth_new(dir, path, sizeof path, why, sizeof why), 0);
    CHECK(strncmp(path, dir, strlen(dir)) == 0 && strstr(path, "/truth-") && access(path, F_OK) == 0);
    int rc = loop_run_truth_new(dir, again, sizeof again, why, sizeof why);
    if (time(NULL) == t0) { /* the same name: refused, the first file kept */
        CHECK_RC(rc, ONI_EPATHINVALID);
        CHECK(strstr(why, "not replaced") != NULL);
    } else {
        CHECK_RC(rc, 0);
        remove(again);
    }
    remove(path);
    CHECK_RC(loop_run_truth_new(NULL, path, sizeof path, why, sizeof why), 0);
    CHECK(strncmp(path, "/tmp/onigpu-truth-", 18) == 0 && access(path, F_OK) == 0);
    remove(path);
    char file[4200];
    snprintf(file, sizeof file, "%s/f", dir); /* a file where a directory should be */
    FILE *f = fopen(file, "w");
    REQUIRE(f);
    fclose(f);
    CHECK_RC(loop_run_truth_new(file, path, sizeof path, why, sizeof why), ONI_EPATHINVALID);
    CHECK(strstr(why, "Not a directory") != NULL);
    remove(file);
    rmdir(dir);
}

/* Several probes in one loop, on both streams, on one card or two: each
 * probe's detections are scored against its own truth (a probe read into
 * another's channels, or another card's probe scored at the wrong clock,
 * would match nothing), the pooled score is the sum of the probes', and a
 * probe count the card cannot give is refused before anything runs. With
 * two cards, card 1's spikes answered on card 0's stimulator are echoed
 * but give no latency (card 1's clock is not card 0's). */
TEST(session_runs_several_probes_side_by_side)
{
    static const struct {
        uint32_t probes, cards;
        const char *spec;
    } runs[] = {
        {2, 0, NULL},
        {4, 0, NULL},
        {3, 0, "devices=breakout:loopback=1,np2e,np2e;mode=realtime;gpustream=0"},
        {2, 2, NULL},
        {2, 2, "devices=breakout:loopback=1,np2e;mode=realtime;gpustream=0"},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        struct loop_run_config c = config(2);
        c.probes = runs[i].probes;
        c.cards = runs[i].cards;
        c.spec = runs[i].spec;
        struct loop_run_result r;
        int rc = loop_run_session(&c, &r);
        if (rc)
            fprintf(stderr, "  %u probes: %s\n", runs[i].probes, r.why);
        CHECK(rc == 0 || !REALTIME_BUILD);
        CHECK_EQ(r.ran, 1);
        CHECK_EQ(r.probes, runs[i].probes);
        CHECK_EQ(r.cards, runs[i].cards ? runs[i].cards : 1);
        char card1[4200];
        REQUIRE(loop_run_card_truth(truth, 1, card1, sizeof card1) == 0);
        if (runs[i].cards == 2) {
            struct stat sb;
            CHECK(stat(card1, &sb) == 0 && sb.st_size > 0); /* card 1's truth, apart */
            if (REALTIME_BUILD) /* both cards' spikes stimulate; a sanitized build may score none */
                CHECK(r.echoes_unclocked > 0 && r.nlat > 0); /* warm-up echoes too: a loop behind has only those */
            CHECK_EQ(r.echoes, r.nlat + r.echoes_unkept + r.echoes_unclocked);
            remove(card1);
        } else {
            CHECK_EQ(access(card1, F_OK), -1);
            CHECK_EQ(r.echoes_unclocked, 0);
        }
        CHECK_EQ(r.bytes, r.frames * 1180 * runs[i].probes);
        CHECK_EQ(r.gpu_stream, runs[i].spec == NULL);
        uint64_t spikes = 0, events = 0, tp = 0, fp = 0;
        for (uint32_t p = 0; p < r.probes; p++) {
            const struct loop_score *ps = &r.probe[p].score;
            spikes += r.probe[p].spikes;
            events += ps->events;
            tp += ps->tp;
            fp += ps->fp;
            fprintf(stderr, "  %u probes: probe %u %llu events, recall %.3f, precision %.3f\n", r.probes, p,
                    (unsigned long long)ps->events, ps->recall, ps->precision);
            /* the emulated units above 8 noise SDs are all found (docs/closed-loop.md "Scoring"): a
             * probe read into another's channels would find none of them */
            double loud = ps->band_events[2] + ps->band_events[3], found = ps->band_tp[2] + ps->band_tp[3];
            if (REALTIME_BUILD) /* a sanitized build falls far behind four probes: few frames scored */
                CHECK(loud > 20 && found / loud > 0.9 && ps->precision > 0.5);
        }
        CHECK_EQ(spikes, r.spikes); /* every kept detection is on one probe */
        CHECK_EQ(events, r.score.events);
        CHECK_EQ(tp, r.score.tp);
        CHECK_EQ(fp, r.score.fp);
        loop_run_result_free(&r);
        unlink(truth);
    }
    struct loop_run_config c = config(1);
    struct loop_run_result r;
    c.probes = 3; /* one headstage: no port B */
    c.spec = "devices=breakout:loopback=1,np2e;mode=realtime";
    CHECK_EQ(loop_run_session(&c, &r), ONI_EINVALARG);
    CHECK_EQ(r.ran, 0);
    CHECK(strstr(r.why, "port A and B") != NULL && strstr(r.why, "port B") != NULL);
    c.spec = NULL;
    c.probes = LOOP_RUN_MAX_PROBES + 1;
    CHECK_EQ(loop_run_session(&c, &r), ONI_EINVALARG);
    CHECK(strstr(r.why, "17 probes") != NULL);
    static const struct {
        uint32_t probes, cards;
        const char *why;
    } bad[] = {
        {5, 1, "5 probes on 1 cards"},   /* four at most a card */
        {2, 3, "2 probes on 3 cards"},   /* a card without a probe */
        {16, 5, "16 probes on 5 cards"}, /* four cards at most */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        c.probes = bad[i].probes;
        c.cards = bad[i].cards;
        CHECK_EQ(loop_run_session(&c, &r), ONI_EINVALARG);
        CHECK_EQ(r.ran, 0);
        CHECK(strstr(r.why, bad[i].why) != NULL);
    }
    c.probes = 2;
    c.cards = 2;
    c.backend = LOOP_GPU_PERSISTENT; /* refused for the cards, whether or not a GPU is here */
    CHECK_EQ(loop_run_session(&c, &r), ONI_EINVALARG);
    CHECK(strstr(r.why, "one card's DMA") != NULL);
    c.backend = LOOP_CPU;
    struct loop_run_tap tap = {0};
    c.tap = &tap;
    CHECK_EQ(loop_run_session(&c, &r), ONI_EINVALARG);
    CHECK(strstr(r.why, "one card's probes") != NULL);
    char card1[4200];
    CHECK_RC(loop_run_card_truth(truth, 0, card1, sizeof card1), ONI_EINVALARG);
    CHECK_RC(loop_run_card_truth(truth, 1, card1, 8), ONI_EINVALARG);
    CHECK_RC(loop_run_card_templates("/tmp/t", 0, card1, sizeof card1), 0);
    CHECK(!strcmp(card1, "/tmp/t"));
    CHECK_RC(loop_run_card_templates("/tmp/t", 2, card1, sizeof card1), 0);
    CHECK(!strcmp(card1, "/tmp/t/card2"));
    CHECK_RC(loop_run_card_templates("/tmp/t", 2, card1, 8), ONI_EINVALARG);
    /* probes spread evenly, the first cards taking one more */
    struct loop_run_config six = {.probes = 6}, two = {.probes = 2, .cards = 2};
    uint32_t j = 9;
    CHECK_EQ(loop_run_probe_card(&six, 2, &j), 0);
    CHECK_EQ(j, 2);
    CHECK_EQ(loop_run_probe_card(&six, 3, &j), 1);
    CHECK_EQ(j, 0);
    CHECK_EQ(loop_run_probe_card(&two, 1, NULL), 1);
    struct loop_run_config five = {.probes = 5, .cards = 3}; /* 2, 2, 1 */
    CHECK_EQ(loop_run_probe_card(&five, 4, &j), 2);
    CHECK_EQ(j, 0);
    REQUIRE(loop_run_card_truth(truth, 1, card1, sizeof card1) == 0);
    CHECK_EQ(access(card1, F_OK), -1); /* nothing made for a run refused */
    unlink(truth);
}

/* bench scale asks loop_run_check first: a GPU-resident backend with five
 * probes (two cards) is not run, whether or not a GPU is here: a line says
 * why, no row, no failure, nothing measured. */
TEST(bench_scale_leaves_out_what_the_run_refuses)
{
    char dir[] = "/tmp/onigpu-scale-XXXXXX", logtext[512] = "";
    REQUIRE(mkdtemp(dir));
    struct bench_scale_opts o;
    bench_scale_defaults(&o);
    o.backends = 1u << LOOP_GPU_PERSISTENT;
    o.algos = 1; /* threshold */
    o.probes[0] = 5;
    o.nprobes = 1;
    o.seconds = 1;
    o.log = fmemopen(logtext, sizeof logtext, "w");
    REQUIRE(o.log);
    int err = 0, failed = 0, measured = 0;
    struct results *rep = results_open(dir, "scale", 0, NULL, NULL, &err);
    REQUIRE(rep);
    CHECK_RC(bench_scale_run(&o, rep, &failed, &measured), 0);
    fclose(o.log);
    CHECK_EQ(failed, 0);
    CHECK_EQ(measured, 0);
    CHECK(strstr(logtext, "gpu-persistent threshold 5 probes: not run:") != NULL);
    CHECK(strstr(logtext, "one card's DMA") != NULL);
    results_close(rep);
    CHECK(unit_sh("rm -rf %s", dir) == 0);
}

TEST(session_refuses_what_cannot_close_the_loop)
{
    struct loop_run_config c = config(1);
    struct loop_run_result r;
    c.spec = "devices=breakout:loopback=1,np2e;ddr=8K"; /* the FIFO holds less than a block: 0 frames, exit 0 before */
    CHECK_EQ(loop_run_session(&c, &r), ONI_EINVALARG);
    CHECK_EQ(r.ran, 0);
    CHECK(strstr(r.why, "does not fit the card's GPU-stream FIFO") != NULL);
    c.spec = "devices=breakout:loopback=1,np2e;ddr=8K;gpustream=0"; /* the same on the default stream */
    CHECK_EQ(loop_run_session(&c, &r), ONI_EINVALARG);
    CHECK(strstr(r.why, "does not fit the card's default-stream FIFO") != NULL);
    c.spec = "devices=testcore";
    CHECK_EQ(loop_run_session(&c, &r), ONI_EINVALARG);
    CHECK(strstr(r.why, "devices=breakout:loopback=1,np2e") != NULL);
    c.spec = "devices=breakout:loopback=1,np2e,testcore:rate=1M:route=1";
    CHECK_EQ(loop_run_session(&c, &r), ONI_EINVALARG);
    CHECK(strstr(r.why, "routed to the GPU stream too") != NULL);
    if (loop_backend_available(LOOP_GPU_DIRECT, NULL, 0)) { /* refused for the stream, not for the GPU */
        c.spec = "devices=breakout:loopback=1,np2e;gpustream=0";
        c.backend = LOOP_GPU_DIRECT;
        CHECK_EQ(loop_run_session(&c, &r), ONI_EINVALARG);
        CHECK(strstr(r.why, "needs the card's GPU data stream") != NULL);
        CHECK_EQ(r.gpu_stream, 0);
        c.backend = LOOP_CPU;
    }
    c.spec = "devices=breakout:loopback=1,np2e;mode=fast";
    CHECK_EQ(loop_run_session(&c, &r), ONI_EINVALSTATE);
    CHECK(strstr(r.why, "mode=realtime") != NULL);
    c.spec = NULL;
    c.block = LOOP_RUN_MAX_BLOCK + 1;
    CHECK_EQ(loop_run_session(&c, &r), ONI_EINVALARG);
    CHECK(strstr(r.why, "block of 1501 frames") != NULL);
    c.block = 16;
    c.seconds = 0.4;
    CHECK_EQ(loop_run_session(&c, &r), ONI_EINVALARG);
    CHECK(strstr(r.why, "0.4 s") != NULL);
    c.seconds = 1;
    c.truth = NULL;
    CHECK_EQ(loop_run_session(&c, &r), ONI_EINVALARG);
    CHECK_EQ(loop_run_session(NULL, &r), ONI_EINVALARG);
    CHECK_EQ(loop_run_session(&c, NULL), ONI_EINVALARG);
    unlink(truth);
}
