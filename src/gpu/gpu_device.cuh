/* gpu_device.cuh - small device-side helpers shared by the .cu files
 * (the loop's kernels, the DMA agent, bench floor). CUDA only. */
#ifndef GPU_DEVICE_CUH
#define GPU_DEVICE_CUH

#include <stdint.h>

/* A 32-bit load that is never cached in a register or merged: a word the
 * host (or another kernel) changes under us. */
__device__ __forceinline__ uint32_t gpu_ld_volatile(const volatile uint32_t *p)
{
    return *p;
}

/* The GPU's global nanosecond timer (the same clock on every SM). */
__device__ __forceinline__ unsigned long long gpu_globaltimer(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

#endif
