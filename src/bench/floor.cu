// floor.cu - the kernels of `onigpu bench floor` (floor_kern.h).
#include "bench/floor_kern.h"
#include "gpu/gpu_device.cuh"

// Thread 0 waits for a doorbell different from *last; returns 1 to quit (stop
// word set, or idle too long). The stop word and the clock are looked at
// once per 64 polls only: each poll is a read across the link, and a second
// read per poll would add its latency to every doorbell.
__device__ int wait_bell(const struct floor_pull &p, uint32_t *last)
{
    unsigned long long since = gpu_globaltimer();
    for (unsigned i = 1;; i++) {
        uint32_t v = gpu_ld_volatile(p.bell);
        if (v != *last) {
            *last = v;
            return 0;
        }
        if (!(i & 63) && (gpu_ld_volatile(p.stop) || gpu_globaltimer() - since > p.idle_ns))
            return 1;
    }
}

__global__ void floor_pull_kernel(struct floor_pull p)
{
    __shared__ uint32_t seq;
    __shared__ int quit;
    uint32_t last = 0;
    if (threadIdx.x == 0) {
        last = gpu_ld_volatile(p.bell); // the doorbell before this launch is old news
        *p.alive = 1;
        __threadfence_system();
    }
    for (;;) {
        if (threadIdx.x == 0) {
            quit = wait_bell(p, &last);
            seq = last;
            __threadfence_system(); // the host wrote the block before the doorbell
        }
        __syncthreads();
        if (quit)
            break;
        gpu_pull(p.src, p.dst, p.n);
        __syncthreads();
        if (threadIdx.x == 0) {
            __threadfence_system(); // the block is in GPU memory before done says so
            *p.done = seq;
        }
    }
    if (threadIdx.x == 0) {
        __threadfence_system();
        *p.alive = 0;
    }
}

__global__ void floor_empty_kernel(void)
{
}

extern "C" int floor_cu_pull(const struct floor_pull *p, cudaStream_t s)
{
    floor_pull_kernel<<<1, FLOOR_PULL_THREADS, 0, s>>>(*p);
    return (int)cudaGetLastError();
}

extern "C" int floor_cu_empty(cudaStream_t s)
{
    floor_empty_kernel<<<1, 1, 0, s>>>();
    return (int)cudaGetLastError();
}
