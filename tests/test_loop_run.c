/* test_loop_run.c - `onigpu run` (the main job) end to end on the emulated
 * card with the cpu backend, and the closed-loop commands' argument checks:
 * run, bench loop, advise. GPU backends: test_gpu_loop_run.c. */
#include "test_loop_run.h"

TEST(run_cpu_on_emulated_card)
{
    NEED_BIN();
    check_run("cpu", "3");
}

TEST(run_rejects_bad_arguments)
{
    NEED_BIN();
    CHECK_EQ(ONIGPU("run", "--backend", "gpu-magic"), 2);
    CHECK(strstr(out, "unknown backend") != NULL);
    CHECK_EQ(ONIGPU("run", "--seconds", "-1"), 2);
    CHECK_EQ(ONIGPU("run", "--block", "0"), 2);
    CHECK_EQ(ONIGPU("run", "--bogus", "1"), 2);
    CHECK_EQ(ONIGPU("run", "--emu", "devices=heartbeat", "--backend", "cpu", "--seconds", "1"), 1);
    CHECK(strstr(out, "np2,stim") != NULL); /* says what the card lacks */
}

TEST(run_refuses_unavailable_backend)
{
    NEED_BIN();
    char why[160];
    if (loop_backend_available(LOOP_GPU_PERSISTENT, why, sizeof why))
        SKIP("a GPU is present: nothing to refuse");
    CHECK_EQ(ONIGPU("run", "--backend", "gpu-persistent", "--seconds", "1"), 1);
    CHECK(strstr(out, "not available") != NULL);
}

TEST(bench_loop_writes_results)
{
    NEED_BIN();
    char dir[] = "/tmp/onigpu-bl-XXXXXX";
    REQUIRE(mkdtemp(dir));
    CHECK_EQ(ONIGPU("bench", "loop", "--sizes", "4kB/4kB,4kB/40kB", "--ai", "0.75", "--backends", "cpu", "--blocks",
                    "50", "--seconds", "0.2", "--out", dir),
             0);
    CHECK(strstr(out, "cpu") != NULL && strstr(out, "4kB/40kB") != NULL);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls %s/loop-*.csv %s/loop-*.json %s/loop-*-ai0.75.png >/dev/null", dir, dir, dir);
    CHECK(system(cmd) == 0);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    /* Through the emulated card: test core in, test sink out. */
    CHECK_EQ(ONIGPU("bench", "loop", "--source", "emu", "--link", "gen2x4", "--sizes", "4kB/4kB", "--ai", "0.75",
                    "--backends", "cpu", "--blocks", "50", "--seconds", "0.2", "--out", dir),
             0);
    CHECK(strstr(out, "cpu") != NULL);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    CHECK_EQ(ONIGPU("bench", "loop", "--source", "fpga"), 2);
    CHECK_EQ(ONIGPU("bench", "loop", "--sizes", "4kB"), 2);
    CHECK_EQ(ONIGPU("bench", "loop", "--ai", "-1"), 2);
    CHECK_EQ(ONIGPU("bench", "loop", "--backends", "nope"), 1);
}

TEST(advise_recommends)
{
    NEED_BIN();
    CHECK_EQ(ONIGPU("advise", "--data", "4kB", "--compute", "4kB", "--ai", "0.75"), 0);
    CHECK(strstr(out, "decision tree") != NULL);
    CHECK(strstr(out, "recommended backend: ") != NULL);
    CHECK_EQ(ONIGPU("advise", "--data", "4kB", "--compute", "4kB", "--ai", "1", "--serial"), 0);
    CHECK(strstr(out, "recommended backend: cpu") != NULL);
    CHECK_EQ(ONIGPU("advise", "--data", "4kB", "--compute", "1kB"), 2);
    CHECK_EQ(ONIGPU("advise", "--ai", "zero"), 2);
}
