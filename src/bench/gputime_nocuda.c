/* gputime_nocuda.c - gputime.h in a build without CUDA: no GPU. */
#include "bench/gputime.h"
#include "oni.h"

int bench_gpu_mac_once(const float *in, float *out, size_t n, uint32_t iters, uint32_t passes, float seed)
{
    (void)in, (void)out, (void)n, (void)iters, (void)passes, (void)seed;
    return ONI_ENOGPU;
}

int bench_gpu_time_mac(size_t n, uint32_t iters, uint32_t passes, int reps, double *best_s)
{
    (void)n, (void)iters, (void)passes, (void)reps, (void)best_s;
    return ONI_ENOGPU;
}

int bench_gpu_time_copy(size_t bytes, int reps, double *best_s)
{
    (void)bytes, (void)reps, (void)best_s;
    return ONI_ENOGPU;
}
