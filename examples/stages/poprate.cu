// poprate.cu - the GPU version of poprate.c (docs/stages.md): the same
// rule (poprate.h), run by one thread. The loop compiles this text after
// poprate.h (NVRTC), so the include is for nvcc alone.
#ifndef __CUDACC_RTC__
#include "poprate.h"
#endif

extern "C" __device__ int poprate_gpu(void *state, struct onigpu_block *b)
{
    return threadIdx.x == 0 ? poprate_block(state, b) : 0;
}
