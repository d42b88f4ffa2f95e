/* gpu_chain.h - private to src/loop: a chain of stages on the GPU
 * (docs/stages.md). The chain's device code (chain_device.cuh: the
 * persistent chain kernel and the built-in stages' GPU versions), a
 * dispatch generated for the chain and every stage's gpu_source are
 * compiled when the loop is made (NVRTC, to LTO IR) and linked into one
 * image (nvJitLink), loaded as a module; the persistent kernel runs every
 * block through the stages' device functions: no host launch per block.
 * This header is also compiled by NVRTC (plain types only). */
#ifndef LOOP_GPU_CHAIN_H
#define LOOP_GPU_CHAIN_H

#define LOOP_GPU_CHAIN_DEPTH 16 /* LOOP_MAXDEPTH */
#define LOOP_GPU_CHAIN_STAGES 16 /* LOOP_MAXSTAGES */

/* The persistent chain kernel's arguments (one struct, by value). Words as
 * in the fused persistent kernel (cukern.h); fault is written when a stage
 * returns an error: (stage index + 1) << 16 | (-code & 0xFFFF), then the
 * block's doorbell rings and the kernel leaves. */
struct loop_gpu_chain_args {
    const volatile unsigned int *done;
    volatile unsigned int *bell, *stop, *alive, *fault;
    volatile unsigned long long *gpu_ns;
    const unsigned char *in[LOOP_GPU_CHAIN_DEPTH];      /* device input blocks */
    const unsigned char *in_host[LOOP_GPU_CHAIN_DEPTH]; /* mapped: device view of the host blocks */
    void *out[LOOP_GPU_CHAIN_DEPTH];                    /* device view of the mapped results */
    void *states[LOOP_GPU_CHAIN_STAGES];                /* device copies of the stages' states */
    const unsigned short *off;                          /* device copy of the layout's offsets */
    const volatile unsigned int *seqs;                  /* per slot, mapped: the block's seq (the one-block kernel) */
    float *x;                                           /* [nframes][nchan] */
    unsigned long long in_bytes;
    double fs_hz;
    unsigned int depth, mapped, nframes, nchan, stride, time_off;
};

#endif
