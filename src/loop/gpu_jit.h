/* gpu_jit.h - private to src/loop (CUDA builds): a chain of stages compiled
 * and linked for the GPU when the loop is made (gpu_jit_cuda.c). */
#ifndef LOOP_GPU_JIT_H
#define LOOP_GPU_JIT_H

#include <stddef.h>

struct loop_chain;

/* The chain's GPU image for sm_<arch> (90: the H100): its device code, a
 * dispatch of its stages and each stage's gpu_source, compiled (NVRTC) and
 * linked (nvJitLink) into a cubin, *image (malloc'd, the caller frees it)
 * of *len bytes, whose kernel loop_gpu_chain_persistent
 * (chain_device.cuh) takes a struct loop_gpu_chain_args. Needs no GPU. 0,
 * or ONI_EINVALARG with why holding the compiler's or linker's log (a stage
 * without a GPU version is named), ONI_EUNIMPL in a build without NVRTC. */
int loop_gpu_jit(const struct loop_chain *ch, int arch, void **image, size_t *len, char *why, size_t cap);

#endif
