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
        int rc = ONIGPU("run", "--backend", loop_backend_name(b), "--probes", "4", "--seconds", "2");
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
            CHECK(events > 0 && recall > 0.5 && precision > 0.5);
            probes++;
        }
        CHECK_EQ(probes, 4);
    }
}
