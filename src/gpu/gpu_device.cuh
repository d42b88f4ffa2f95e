/* gpu_device.cuh - small device-side helpers shared by the .cu files
 * (the loop's kernels, the DMA agent, bench floor). CUDA only. */
#ifndef GPU_DEVICE_CUH
#define GPU_DEVICE_CUH

#include <stddef.h>
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

/* Copy n bytes of host-mapped memory into GPU memory with the whole thread
 * block: 16-byte loads that bypass the caches (a block at the same address
 * is read again and again), all in flight at once, then the odd tail byte
 * by byte. No barrier: the caller adds one if it needs it. */
__device__ __forceinline__ void gpu_pull(const uint8_t *src, uint8_t *dst, size_t n)
{
    size_t n16 = n / 16;
    for (size_t i = threadIdx.x; i < n16; i += blockDim.x)
        ((uint4 *)dst)[i] = __ldcv((const uint4 *)src + i);
    for (size_t i = n16 * 16 + threadIdx.x; i < n; i += blockDim.x)
        dst[i] = *(const volatile uint8_t *)(src + i);
}

#endif
