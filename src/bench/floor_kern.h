/* floor_kern.h - private to src/bench (CUDA builds only): the kernels of
 * `onigpu bench floor` (floor.cu), launched from floor_cuda.c. */
#ifndef BENCH_FLOOR_KERN_H
#define BENCH_FLOOR_KERN_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FLOOR_PULL_THREADS 256

/* The persistent pull kernel's view; every word is host-mapped (device
 * pointers from cudaHostGetDevicePointer). Protocol: the host stores a new
 * seq into *bell; the kernel copies n bytes src -> dst and then stores seq
 * into *done. It leaves when *stop is non-zero or after idle_ns without a
 * new doorbell, and says so in *alive (1 while running, 0 once left). */
struct floor_pull {
    const volatile uint32_t *bell;
    volatile uint32_t *done;
    const volatile uint32_t *stop;
    volatile uint32_t *alive;
    const uint8_t *src;  /* device view of the mapped host block */
    uint8_t *dst;        /* device memory */
    size_t n;            /* bytes per doorbell; 0: no payload */
    unsigned long long idle_ns;
};

/* Launch the pull kernel (one block of FLOOR_PULL_THREADS) on s. Returns a cudaError_t. */
int floor_cu_pull(const struct floor_pull *p, cudaStream_t s);
/* Launch an empty kernel (one thread) on s. Returns a cudaError_t. */
int floor_cu_empty(cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
