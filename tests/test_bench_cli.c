/* test_bench_cli.c - what every `onigpu bench ...` does around its body,
 * through the binary: --out refused before any work (exit 2, the reason
 * named), and SIGINT/SIGTERM ending a run as its end would (the rows
 * measured so far written, exit 0). */
#include <time.h>
#include "test_loop_run.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* `bench frames --out /etc/hostname` ran 17.7 s, then failed with "Invalid
 * stream path, fail on open". */
TEST(bench_out_refused_before_any_work)
{
    NEED_BIN();
    static const char *const benches[] = {"frames", "emu", "loop", "transfer", "floor", "remote"};
    for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++) {
        double t0 = now_s();
        CHECK_EQ(ONIGPU("bench", benches[i], "--out", "/etc/hostname"), 2);
        CHECK(strstr(out, "--out /etc/hostname: must be a directory: /etc/hostname is not a directory\n") != NULL);
        CHECK_EQ(ONIGPU("bench", benches[i], "--out", "/proc/onigpu-no/x"), 2);
        CHECK(strstr(out, "--out /proc/onigpu-no/x: must be a directory that can be made: ") != NULL);
        CHECK_EQ(ONIGPU("bench", benches[i], "--out", "/proc"), 2); /* even root makes no file there */
        CHECK(strstr(out, "--out /proc: must be a directory a file can be made in: ") != NULL);
        if (now_s() - t0 > 5)
            UNIT_FAIL("bench %s took %.1f s to refuse three --out", benches[i], now_s() - t0);
    }
}

/* bench record's --dir (the recordings) is checked as --out is: a --dir
 * whose parent was missing failed each measurement after the run began. */
TEST(bench_record_dir_refused_before_any_work)
{
    NEED_BIN();
    double t0 = now_s();
    CHECK_EQ(ONIGPU("bench", "record", "--dir", "/etc/hostname/x", "--out", "/tmp"), 2);
    CHECK(strstr(out, "--dir /etc/hostname/x: must be a directory: /etc/hostname is not a directory\n") != NULL);
    if (now_s() - t0 > 5)
        UNIT_FAIL("bench record took %.1f s to refuse its --dir", now_s() - t0);
}

/* A bench stopped by a signal writes what it measured: every bench lost all
 * its results on Ctrl-C. */
static void check_stopped(int sig)
{
    char dir[] = "/tmp/onigpu-bsig-XXXXXX";
    REQUIRE(mkdtemp(dir));
    /* 6 block sizes of 3 s: a whole run would take 18 s */
    int rc = onigpu_kill((const char *const[]){"bench", "frames", "--seconds", "3", "--out", dir, NULL}, sig, 4000);
    CHECK_EQ(rc, 0);
    CHECK(strstr(out, "ended early by a signal") != NULL);
    CHECK(strstr(out, "results: ") != NULL);
    /* the header and the rows measured: the first block size at least, not all six */
    CHECK(unit_sh("n=$(cat %s/frames/frames-*.csv | wc -l); test $n -ge 2 && test $n -lt 7", dir) == 0);
    CHECK(unit_sh("test -s %s/frames/frames-*.json", dir) == 0);
    CHECK(unit_sh("rm -rf %s", dir) == 0);
}

TEST(bench_frames_sigint_keeps_results)
{
    NEED_BIN();
    check_stopped(SIGINT);
}

TEST(bench_frames_sigterm_keeps_results)
{
    NEED_BIN();
    check_stopped(SIGTERM);
}

/* bench remote measures the remote card and ucx_perftest on the same
 * transport in one run: both in its output and its result files; the
 * default stream's throughput and the real-time card at both block sizes,
 * in-process and remote, each set from its own option. */
TEST(bench_remote_beside_perftest)
{
    NEED_BIN();
    if (unit_sh("command -v ucx_perftest >/dev/null"))
        SKIP("no ucx_perftest (Debian: ucx-utils; tools/deps.sh installs it)");
    char dir[] = "/tmp/onigpu-bremote-XXXXXX";
    REQUIRE(mkdtemp(dir));
    CHECK_EQ(ONIGPU("bench", "remote", "--tls", "tcp", "--regs", "50", "--reads", "50", "--big", "2", "--seconds",
                    "0.1", "--stream-block", "8K", "--out", dir),
             0);
    CHECK(strstr(out, "tcp      transport: tcp\n") != NULL);
    CHECK(strstr(out, "tcp      remote     gpu_read        4096") != NULL);
    CHECK(strstr(out, "did not run") == NULL); /* every ucx_perftest test gave its figure */
    CHECK(unit_sh("grep -q '^tcp,am_bw,16777216' %s/remote/remote-*-perftest.csv", dir) == 0);
    CHECK(unit_sh("grep -q 'tcp,remote,gpu_read,16777216' %s/remote/remote-*.csv", dir) == 0);
    CHECK(strstr(out, "tcp      remote     stream (BLOCKREADSIZE 8192): ") != NULL);
    CHECK(unit_sh("test $(grep -c ',8192,' %s/remote/remote-*-stream.csv) = 2", dir) == 0);
    CHECK(unit_sh("test $(grep -c 'rhd2164' %s/remote/remote-*-realtime.csv) = 4", dir) == 0);
    CHECK(unit_sh("grep -q '^tcp,remote,.*,8192,' %s/remote/remote-*-realtime.csv", dir) == 0);
    CHECK(unit_sh("rm -rf %s", dir) == 0);
}
