// threshold.cu - the GPU version of threshold.c (docs/stages.md): the same
// rule, a thread per selected channel; the spikes are listed in the order
// the threads find them. The loop compiles this text after threshold.h
// (NVRTC), so the include is for nvcc alone.
#ifndef __CUDACC_RTC__
#include "threshold.h"
#endif

extern "C" __device__ int threshold_gpu(void *state, struct onigpu_block *b)
{
    struct threshold *t = (struct threshold *)state;
    for (uint32_t c = t->first + threadIdx.x; c < t->first + t->count; c += blockDim.x) {
        for (uint32_t f = 0; f < b->nframes; f++) {
            uint64_t idx = t->nsamples + f;
            if (b->x[(size_t)f * b->nchan + c] < -t->thr && idx >= t->next[c]) {
                t->next[c] = idx + t->refractory;
                onigpu_add_spike_gpu(b->out, onigpu_frame_time(b, f), c, f);
            }
        }
    }
    __syncthreads(); // every thread read nsamples before it moves on
    if (threadIdx.x == 0)
        t->nsamples += b->nframes;
    return 0;
}
