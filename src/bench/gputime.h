/* gputime.h - GPU timings for the roofline (`onigpu roofline`, advise) and
 * the MAC kernel run once (tests), outside the loop engine. ONI_ENOGPU
 * without a GPU (and in a build without CUDA). */
#ifndef BENCH_GPUTIME_H
#define BENCH_GPUTIME_H

#include <stddef.h>
#include <stdint.h>

/* The MAC kernel (loop/kernels.h) on n floats, host in, host out. 0,
 * ONI_EINVALARG (NULL, n == 0), ONI_ENOGPU, ONI_EBADALLOC. */
int bench_gpu_mac_once(const float *in, float *out, size_t n, uint32_t iters, uint32_t passes, float seed);

/* Best of reps event-timed runs on device-resident buffers into *best_s
 * (seconds): the MAC kernel on n floats; a device-to-device copy of bytes.
 * ONI_ETIMEOUT when a run has not finished after 60 s (a stuck GPU). */
int bench_gpu_time_mac(size_t n, uint32_t iters, uint32_t passes, int reps, double *best_s);
int bench_gpu_time_copy(size_t bytes, int reps, double *best_s);

#endif
