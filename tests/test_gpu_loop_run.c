/* test_gpu_loop_run.c - `onigpu run` on the emulated card with every GPU
 * backend (np2 routed to the GPU stream, direct backends fed by
 * ONI_DRV_READ_ASYNC): same checks as the cpu run. Skips without a GPU. */
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
