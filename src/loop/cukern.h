/* cukern.h - private to src/loop (CUDA builds only): the device kernels of
 * kernels.cu, launched from C through these wrappers. */
#ifndef LOOP_CUKERN_H
#define LOOP_CUKERN_H

#include <stdint.h>
#include <cuda_runtime_api.h>
#include "loop/kernels.h"
#include "loop/loop.h" /* LOOP_MAXDEPTH */

#ifdef __cplusplus
extern "C" {
#endif

/* Enqueue the MAC kernel on s (device pointers). Returns a cudaError_t. */
int loop_cu_mac(const float *in, float *out, size_t n, uint32_t iters, uint32_t passes, float seed, cudaStream_t s);
/* Enqueue the EPHYS kernel (one block of threads) on s; st, blk, out in device
 * (or host-mapped) memory. */
int loop_cu_ephys(struct loop_ephys_state *st, uint32_t nchan, const uint8_t *blk, uint32_t nframes, struct loop_ephys_out *out,
                  cudaStream_t s);

/* The persistent kernel's view of the loop. done[] is written by the source
 * (GPU memory) or, when mapped, by the host (host-mapped, with the input
 * blocks in_host[]); out[], bell[], gpu_ns[] and stop are host-mapped. */
struct loop_persist {
    int work;                 /* enum loop_work */
    int mapped;               /* inputs in host-mapped memory (gpu-mapped) */
    uint32_t depth;
    const volatile uint32_t *done; /* completion words, one per slot */
    volatile uint32_t *bell;  /* doorbell per slot: seq when out[slot] is complete */
    volatile uint32_t *stop;  /* non-zero: exit */
    volatile uint32_t *alive; /* set to 1 at start, 0 at exit (host-mapped) */
    uint32_t *ticket;         /* device: blocks finished per slot (MAC) */
    const uint8_t *in[LOOP_MAXDEPTH];    /* device input blocks (mapped EPHYS: the pull's destination) */
    const uint8_t *in_host[LOOP_MAXDEPTH]; /* mapped: device view of the host input blocks */
    size_t in_bytes;
    volatile unsigned long long *gpu_ns; /* per slot: GPU ns << 32 | seq, written before the doorbell */
    void *out[LOOP_MAXDEPTH];
    size_t n;                 /* MAC: floats per block */
    uint32_t iters, passes;
    float seed;
    struct loop_ephys_state *st; /* EPHYS */
    uint32_t nchan, nframes;
};

/* Launch the persistent kernel on s with `grid` blocks (EPHYS uses 1). */
int loop_cu_persistent(const struct loop_persist *p, int grid, cudaStream_t s);
/* Blocks the persistent MAC uses for n floats (pass the SM count: one block per SM at most). */
int loop_cu_persist_grid(size_t n, int max_blocks);

#ifdef __cplusplus
}
#endif
#endif
