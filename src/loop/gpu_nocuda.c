/* gpu_nocuda.c - the GPU backends in a build without CUDA: none is available. */
#include <stdio.h>
#include "oni.h"
#include "loop/engine.h"

const struct loop_be *loop_gpu_backend(int backend)
{
    return NULL;
}

int loop_gpu_mac_once(const float *in, float *out, size_t n, uint32_t iters, uint32_t passes, float seed)
{
    return ONI_ENOGPU;
}

int loop_gpu_ephys_once(struct loop_ephys_state *st, const uint8_t *blk, uint32_t nframes, struct loop_ephys_out *out)
{
    return ONI_ENOGPU;
}

int loop_gpu_time_mac(size_t n, uint32_t iters, uint32_t passes, int reps, double *best_s)
{
    return ONI_ENOGPU;
}

int loop_gpu_time_copy(size_t bytes, int reps, double *best_s)
{
    return ONI_ENOGPU;
}
