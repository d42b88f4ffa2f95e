/* test_gpu_loop_run.c - `onigpu run` on the emulated card with every GPU
 * backend (the NP2.0e's raw device routed to the GPU stream, direct
 * backends fed by ONI_DRV_READ_ASYNC): same checks as the cpu run; on a
 * card without the GPU stream, the host GPU backends through the default
 * stream and the others refused. Skips without a GPU. */
#include "test_loop_run.h"

TEST(run_every_gpu_backend)
{
    NEED_BIN();
    char why[160];
    if (!loop_backend_available(LOOP_GPU_STAGED, why, sizeof why))
        SKIP("%s", why);
    for (int b = LOOP_GPU_STAGED; b < LOOP_NBACKENDS; b++)
        check_run(loop_backend_name(b), "3");
}

TEST(run_without_gpu_stream)
{
    NEED_BIN();
    char why[160];
    if (!loop_backend_available(LOOP_GPU_STAGED, why, sizeof why))
        SKIP("%s", why);
    check_run_on("gpu-staged", "3", RUN_NO_GPU_STREAM);
    check_run_on("gpu-mapped", "3", RUN_NO_GPU_STREAM);
    static const int need[] = {LOOP_GPU_DIRECT, LOOP_GPU_GRAPH, LOOP_GPU_FLAG, LOOP_GPU_PERSISTENT};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        CHECK_EQ(ONIGPU("run", "--backend", loop_backend_name(need[i]), "--seconds", "1", "--emu", RUN_NO_GPU_STREAM), 1);
        CHECK(strstr(out, "needs the card's GPU data stream") != NULL);
    }
}

/* Four probes (1536 channels: more than a thread block's 1024 threads, and
 * the fused kernel's chunk past 48 KiB of shared memory) on every GPU
 * backend: each probe's detections match its own truth. */
TEST(run_four_probes_on_every_gpu_backend)
{
    NEED_BIN();
    char why[160];
    if (!loop_backend_available(LOOP_GPU_STAGED, why, sizeof why))
        SKIP("%s", why);
    for (int b = LOOP_GPU_STAGED; b < LOOP_NBACKENDS; b++) {
        int rc = ONIGPU("run", "--backend", loop_backend_name(b), "--probes", "4", "--block", "16", "--seconds", "2");
        if (rc)
            fprintf(stderr, "  %s exited %d:\n%s\n", loop_backend_name(b), rc, out);
        CHECK_EQ(rc, 0);
        int probes = 0;
        for (const char *p = strstr(out, "  probe "); p; p = strstr(p + 1, "  probe ")) {
            unsigned k;
            char port, probe;
            unsigned long long spikes, events;
            double precision, recall, f1;
            if (sscanf(p, "  probe %u (port %c, probe %c) %llu spikes; %llu events, precision %lf, recall %lf, F1 %lf", &k,
                       &port, &probe, &spikes, &events, &precision, &recall, &f1) != 8)
                continue;
            fprintf(stderr, "  %s probe %u: %llu events, precision %.3f, recall %.3f\n", loop_backend_name(b), k,
                    events, precision, recall);
            /* the default signal's figures (fixtures/test_loop_run.h): a probe read into
             * another's channels would match nothing */
            CHECK(events > 0 && recall >= 0.3 && precision >= 0.5);
            probes++;
        }
        CHECK_EQ(probes, 4);
    }
}

/* A GPU stage that never returns (tests/fixtures/stage_spin.c spins at block
 * 3): the run ends with an error naming the kernel within a bounded time,
 * and the process's end frees the GPU: the next run on it works. */
TEST(run_with_a_gpu_stage_that_never_returns)
{
    NEED_BIN();
    char why[160];
    if (!loop_backend_available(LOOP_GPU_PERSISTENT, why, sizeof why))
        SKIP("%s", why);
    static const int backends[] = {LOOP_GPU_PERSISTENT, LOOP_GPU_STAGED};
    for (int i = 0; i < 2; i++) {
        const char *name = loop_backend_name(backends[i]);
        long long t0 = proc_now_ms();
        int rc = ONIGPU("run", "--backend", name, "--block", "16", "--seconds", "3", "--stage", "filter", "--stage",
                        SPIN_STAGE);
        long long ms = proc_now_ms() - t0;
        fprintf(stderr, "  %s: exit %d after %lld ms\n", name, rc, ms);
        CHECK_EQ(rc, 1);
        CHECK(ms < 60000);
        if (!strstr(out, "did not stop") || !strstr(out, "ending without the CUDA runtime's teardown"))
            UNIT_FAIL("%s: no word of the kernel left running in:\n%s", name, out);
        check_run(name, "2"); /* the GPU is free again */
    }
}
