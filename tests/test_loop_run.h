/* test_loop_run.h - run the built `onigpu` binary (ONIGPU_BIN) and check its
 * closed-loop output; shared by test_loop_run.c and test_gpu_loop_run.c. */
#ifndef TEST_LOOP_RUN_H
#define TEST_LOOP_RUN_H

#include <math.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>
#include "oni.h"
#include "unit.h"
#include "realtime.h"
#include "loop/loop.h"

extern char **environ;

/* The binary is built like this test: only an optimized, unsanitized build
 * keeps up with the card in real time (TSan at -O0 is ~10x slower). */
#if defined(__OPTIMIZE__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define RUN_REALTIME_BUILD 1
#else
#define RUN_REALTIME_BUILD 0
#endif

static char out[1 << 17];
static pid_t onigpu_pid; /* the last run's process id (its temporary files are named by it) */

/* Run $ONIGPU_BIN/onigpu with args (NULL-terminated), output into out,
 * sending it signal sig after after_ms (sig 0: none); returns the exit
 * status, -1 if it could not run or did not exit, -2 if there is no binary. */
static int onigpu_kill(const char *const *args, int sig, unsigned after_ms)
{
    const char *dir = getenv("ONIGPU_BIN");
    char bin[4096];
    if (!dir)
        return -2;
    snprintf(bin, sizeof bin, "%s/onigpu", dir);
    if (access(bin, X_OK))
        return -2;
    const char *argv[32] = {bin};
    int n = 1;
    for (; args[n - 1] && n < 31; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    int fd[2];
    if (pipe(fd))
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 2);
    posix_spawn_file_actions_addclose(&fa, fd[0]);
    pid_t pid;
    int rc = posix_spawn(&pid, bin, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fd[1]);
    if (rc) {
        close(fd[0]);
        return -1;
    }
    onigpu_pid = pid;
    if (sig) { /* the output before the signal fits the pipe */
        usleep(after_ms * 1000u);
        kill(pid, sig);
    }
    size_t len = 0;
    ssize_t r;
    while ((r = read(fd[0], out + len, sizeof out - 1 - len)) > 0)
        len += (size_t)r;
    out[len] = 0;
    close(fd[0]);
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

static int onigpu(const char *const *args)
{
    return onigpu_kill(args, 0, 0);
}

#define ONIGPU(...) onigpu((const char *const[]){__VA_ARGS__, NULL})
#define NEED_BIN()                                                                     \
    do {                                                                               \
        if (!getenv("ONIGPU_BIN"))                                                     \
            SKIP("ONIGPU_BIN not set (run through ctest)");                            \
    } while (0)

/* The number after `key` in out, or NAN (no key, or no number after it). */
static double after(const char *key)
{
    const char *p = strstr(out, key);
    if (!p)
        return NAN;
    char *end;
    double v = strtod(p + strlen(key), &end);
    return end == p + strlen(key) ? NAN : v;
}

/* `onigpu run` on backend b for a few seconds: spikes against ground truth,
 * latency measured and positive, nothing dropped, results written. The
 * events scored and the latency need the CPU in real time: realtime.h. */
__attribute__((unused)) static void check_run(const char *backend, const char *seconds)
{
    char dir[] = "/tmp/onigpu-run-XXXXXX";
    REQUIRE(mkdtemp(dir));
    double recall = NAN, precision = NAN, p50 = NAN, events = NAN, ran = NAN;
    int keeps_up = 0;
    char key[64];
    snprintf(key, sizeof key, "summary (%s, ", backend);
    enum rt_verdict v = RT_RETRY;
    for (int attempt = 1; v == RT_RETRY; attempt++) {
        struct rt_clock clk;
        rt_start(&clk);
        int rc = ONIGPU("run", "--backend", backend, "--seconds", seconds, "--out", dir);
        double p = rt_pressure(&clk);
        CHECK_EQ(rc, 0);
        if (rc)
            fprintf(stderr, "%s\n", out);
        recall = after("recall "), precision = after("precision ");
        p50 = after("after the warm-up): p50 "), events = after("vs ground truth    ");
        double dropped = after("dropped            ");
        ran = after(key); /* loop_run's seconds */
        fprintf(stderr, "  %s: %g events, recall %.3f, precision %.3f, latency p50 %.1f us, dropped %g\n", backend,
                events, recall, precision, p50, dropped);
        CHECK(strstr(out, "results in ") != NULL);
        /* None, in every build: a sanitized loop falls far behind, but the
         * card's 2 GiB FIFO takes minutes to fill. (Drops here under TSan
         * were a reader starved of the card lock: emu_card_sleep.) */
        CHECK(dropped == 0);
        if (dropped != 0)
            fprintf(stderr, "%s\n", out); /* where the drops came from */
        /* The loop also stops when asked: no reader may starve the stop or the
         * statistics (a 4 s run once took 7.5 s on a 16-core machine). */
        int on_time = ran > 0 && ran < atof(seconds) + 2.0;
        /* the summary's verdict on keeping up with the probe is always there */
        keeps_up = strstr(out, "keeping up         yes: ") != NULL;
        CHECK(keeps_up || strstr(out, "keeping up         NO (overrun): ") != NULL);
        v = RUN_REALTIME_BUILD ? rt_judge(events >= 50 && p50 > 0 && p50 < 20000 && on_time && keeps_up, attempt, p)
                               : RT_PASS;
        if (v != RT_PASS)
            rt_report("events and latency", attempt, p, v);
    }
    if (!RUN_REALTIME_BUILD) {
        fprintf(stderr, "  (accuracy and latency not checked: unoptimized or sanitized build)\n");
    } else {
        CHECK(recall >= 0.90);
        CHECK(precision >= 0.90);
        if (v == RT_STARVED) {
            fprintf(stderr, "  events and latency not checked: the machine was too busy on every attempt\n");
        } else {
            CHECK(events >= 50);
            CHECK(p50 > 0 && p50 < 20000);
            CHECK(ran > 0 && ran < atof(seconds) + 2.0);
            CHECK(keeps_up);
        }
    }
    char cmd[256];
    /* the result set records the workload for `advise --workload` */
    snprintf(cmd, sizeof cmd, "grep -q '\"block_bytes\": [0-9]*, \"ai\": [0-9]' %s/run-*.json", dir);
    CHECK(system(cmd) == 0);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

#endif
