// tmatch.cu - the GPU version of the tmatch stage (stage_tmatch.c): the same
// per-block rule, tmatch.h's arithmetic, with the loop's thread block. A
// thread per channel takes the samples in; every thread scores its share of
// the (template, position) pairs, the best is found with one atomicMax on a
// shared key (tmatch.h tm_key: the CPU's order), subtracted by all threads
// and listed by thread 0; again until no match is left. The loop compiles
// this text after tmatch.h (NVRTC), so the include is for nvcc alone.
#ifndef __CUDACC_RTC__
#include "loop/tmatch.h"
#endif

extern "C" __device__ int loop_tmatch_gpu(void *state, struct onigpu_block *b)
{
    struct tm_state *st = (struct tm_state *)state;
    __shared__ unsigned long long best;
    __shared__ float best_c;
    const uint32_t tid = threadIdx.x, nt = blockDim.x;
    const uint64_t base = st->n;
    for (uint32_t f = tid; f < b->nframes; f += nt)
        st->t_ring[(base + f) & TM_MASK] = onigpu_frame_time(b, f);
    for (uint32_t c = tid; c < st->nchan; c += nt)
        for (uint32_t f = 0; f < b->nframes; f++) {
            float x = b->x[(size_t)f * b->nchan + c];
            st->r[c][(base + f) & TM_MASK] = x;
            if (base + f < st->calib)
                tm_calib_take(st, c, base + f, x);
        }
    __syncthreads();
    const uint64_t n = base + b->nframes;
    if (!st->ready && n >= st->calib) { // the same for every thread
        for (uint32_t c = tid; c < st->nchan; c += nt)
            tm_calibrated(st, c);
        __syncthreads();
        for (uint32_t k = tid; k < st->ntpl; k += nt)
            tm_norm(st, k);
        __syncthreads();
        if (tid == 0) {
            st->ready = 1;
            st->s_next = st->calib;
        }
    }
    __syncthreads();
    const uint64_t s_next = st->s_next;
    const int run = st->ready && n >= (uint64_t)st->len + st->lag && n - st->len - st->lag >= s_next;
    const uint64_t smax = run ? n - st->len - st->lag : 0;
    const uint32_t npair = run ? (uint32_t)(smax - s_next + 1) * st->ntpl : 0;
    for (uint32_t iter = 0; run && iter < TM_MAXITER; iter++) {
        if (tid == 0)
            best = 0;
        __syncthreads();
        unsigned long long mine = 0;
        float my_c = 0;
        for (uint32_t p = tid; p < npair; p += nt) {
            float c, z = tm_match(st, p % st->ntpl, s_next + p / st->ntpl, &c);
            if (z > 0) {
                unsigned long long key = tm_key(z, p);
                if (key > mine)
                    mine = key, my_c = c;
            }
        }
        if (mine)
            atomicMax(&best, mine);
        __syncthreads();
        const unsigned long long won = best;
        if (!won)
            break; // every thread sees the same
        if (mine == won)
            best_c = my_c; // one thread: a pair's key is its own
        __syncthreads();
        const uint32_t p = 0xFFFFFFFFu - (uint32_t)won, k = p % st->ntpl;
        const uint64_t s = s_next + p / st->ntpl;
        tm_subtract(st, k, s, best_c / st->t[k].norm2, tid, nt);
        if (tid == 0) {
            uint64_t time;
            uint32_t frame;
            tm_spike(st, k, s, base, &time, &frame);
            onigpu_add_spike_unit(b->out, time, st->t[k].peak, frame, k);
        }
        __syncthreads();
    }
    if (tid == 0) {
        if (run)
            st->s_next = smax + 1;
        st->n = n;
    }
    return 0;
}
