// chain_device.cuh - the GPU side of a chain of stages (gpu_chain.h). Not
// compiled with the library: gpu_jit_cuda.c hands this text to NVRTC when
// a loop with a GPU chain is made and links it with the generated dispatch
// (loop_gpu_chain_run) and every stage's gpu_source; gpu_cuda.c launches
// loop_gpu_chain_persistent once, or loop_gpu_chain_once per block. The built-in stages' GPU versions below do
// the float operations of kernels.c in the same order, each rounded
// (__fadd_rn, __fmul_rn: never fused), so they give the CPU's results.
#include "onigpu_stage.h"
#include "loop/kernels.h"
#include "loop/gpu_chain.h"

// The chain, generated for it (gpu_jit_cuda.c): 0, or (stage index + 1)
// << 16 | (-code & 0xFFFF) for the first stage that failed.
extern "C" __device__ int loop_gpu_chain_run(void *const *states, struct onigpu_block *b);

__device__ static inline unsigned int ld_word(const volatile unsigned int *p)
{
    return *p;
}

__device__ static inline unsigned long long globaltimer(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// --- built-in stages ----------------------------------------------------------

extern "C" __device__ int loop_gpu_decode(struct onigpu_block *b)
{
    unsigned int n = b->nframes * b->nchan;
    for (unsigned int i = threadIdx.x; i < n; i += blockDim.x) {
        unsigned int f = i / b->nchan, c = i % b->nchan;
        const unsigned char *p = b->frames + (size_t)f * b->stride + b->off[c];
        unsigned short v = (unsigned short)(p[0] | (p[1] << 8));
        b->x[i] = __fsub_rn((float)v, LOOP_EPHYS_MID);
    }
    return 0;
}

__device__ static inline float biquad(const float *bq, const float *a, float *z, float x)
{
    float y = __fadd_rn(__fmul_rn(bq[0], x), z[0]);
    z[0] = __fadd_rn(__fsub_rn(__fmul_rn(bq[1], x), __fmul_rn(a[0], y)), z[1]);
    z[1] = __fsub_rn(__fmul_rn(bq[2], x), __fmul_rn(a[1], y));
    return y;
}

// filter: one thread per channel, its frames in order (loop_ephys_filter).
extern "C" __device__ int loop_gpu_filter(void *state, struct onigpu_block *b)
{
    struct loop_ephys_state *st = (struct loop_ephys_state *)state;
    for (unsigned int c = threadIdx.x; c < b->nchan; c += blockDim.x) {
        float z[4] = {st->z[c][0], st->z[c][1], st->z[c][2], st->z[c][3]};
        for (unsigned int f = 0; f < b->nframes; f++) {
            float *x = b->x + (size_t)f * b->nchan + c;
            float y = biquad(st->b[0], st->a[0], z, *x);
            *x = biquad(st->b[1], st->a[1], z + 2, y);
        }
        for (int i = 0; i < 4; i++)
            st->z[c][i] = z[i];
    }
    return 0;
}

// reference: one thread per frame and group (a probe's channels), the mean
// as row_mean sums it (32 interleaved partial sums, then their sum in order).
extern "C" __device__ int loop_gpu_reference(void *state, struct onigpu_block *b)
{
    const struct loop_ephys_state *st = (const struct loop_ephys_state *)state;
    unsigned int g = st->lay.group ? st->lay.group : b->nchan, ng = b->nchan / g;
    for (unsigned int i = threadIdx.x; i < b->nframes * ng; i += blockDim.x) {
        float *row = b->x + (size_t)(i / ng) * b->nchan + (size_t)(i % ng) * g;
        float s = 0.0f;
        for (unsigned int p = 0; p < 32; p++) {
            float q = 0.0f;
            for (unsigned int c = p; c < g; c += 32)
                q = __fadd_rn(q, row[c]);
            s = __fadd_rn(s, q);
        }
        float m = __fdiv_rn(s, (float)g);
        for (unsigned int c = 0; c < g; c++)
            row[c] = __fsub_rn(row[c], m);
    }
    return 0;
}

// decide's unit rule (kernels.h loop_ephys_decides_on, which NVRTC does not see).
__device__ static int loop_gpu_decides_on(const struct loop_ephys_state *st, unsigned int unit)
{
    if (!st->nunits)
        return 1;
    for (unsigned int i = 0; i < st->nunits && i < LOOP_DECIDE_MAXUNITS; i++)
        if (st->units[i] == unit)
            return 1;
    return 0;
}

// decide: thread 0 (loop_ephys_decide).
extern "C" __device__ int loop_gpu_decide(void *state, struct onigpu_block *b)
{
    if (threadIdx.x)
        return 0;
    struct loop_ephys_state *st = (struct loop_ephys_state *)state;
    struct onigpu_out *o = b->out;
    unsigned long long from = st->stim_last ? st->stim_last - 1 + st->lockout : 0, t = ~0ull;
    for (unsigned int i = 0; i < o->nspikes && i < ONIGPU_STAGE_MAXSPIKES; i++)
        if (o->spikes[i].time >= from && o->spikes[i].time < t && loop_gpu_decides_on(st, o->spikes[i].unit))
            t = o->spikes[i].time;
    o->stim = t != ~0ull;
    o->t_stim = o->stim ? t : 0;
    if (o->stim)
        st->stim_last = t + 1;
    return 0;
}

// After a stage: a count run past the list (spikes listed from many threads
// with atomicAdd) brought back, the rest in overflow; after a stage that
// writes spikes, the list sorted by frame, then channel, as the CPU lists
// them (a bitonic sort of 256 keys, a thread each: blockDim.x >= 256).
extern "C" __device__ void loop_gpu_settle(struct onigpu_block *b, int sort)
{
    __shared__ unsigned long long key[ONIGPU_STAGE_MAXSPIKES];
    __shared__ struct onigpu_spike tmp[ONIGPU_STAGE_MAXSPIKES];
    struct onigpu_out *o = b->out;
    if (threadIdx.x == 0 && o->nspikes > ONIGPU_STAGE_MAXSPIKES) {
        o->overflow += o->nspikes - ONIGPU_STAGE_MAXSPIKES;
        o->nspikes = ONIGPU_STAGE_MAXSPIKES;
    }
    __syncthreads();
    unsigned int n = o->nspikes, i = threadIdx.x;
    if (!sort || n < 2)
        return;
    if (i < ONIGPU_STAGE_MAXSPIKES) {
        // frame, channel, and the place in the list (ties keep their order)
        key[i] = i < n ? (unsigned long long)o->spikes[i].frame << 40 | (unsigned long long)o->spikes[i].chan << 16 | i
                       : ~0ull;
        if (i < n)
            tmp[i] = o->spikes[i];
    }
    __syncthreads();
    for (unsigned int k = 2; k <= ONIGPU_STAGE_MAXSPIKES; k <<= 1)
        for (unsigned int j = k >> 1; j > 0; j >>= 1) {
            unsigned int l = i ^ j;
            if (i < ONIGPU_STAGE_MAXSPIKES && l > i) {
                unsigned long long a = key[i], c = key[l];
                if (((i & k) == 0) == (a > c)) {
                    key[i] = c;
                    key[l] = a;
                }
            }
            __syncthreads();
        }
    if (i < n)
        o->spikes[i] = tmp[key[i] & 0xFFFF];
    __syncthreads();
}

// --- the chain kernels --------------------------------------------------------

// Block seq of slot through the chain, by every thread: pulled first when
// mapped, out reset, the stages; the result (0 or loop_gpu_chain_run's
// code), the same in every thread.
__device__ static int run_block(const struct loop_gpu_chain_args *p, unsigned int slot, unsigned int seq)
{
    __shared__ struct onigpu_block blk;
    __shared__ int rc;
    if (p->mapped) { // pull the block over the link into GPU memory
        const unsigned int *src = (const unsigned int *)p->in_host[slot];
        unsigned int *dst = (unsigned int *)p->in[slot];
        for (unsigned long long i = threadIdx.x; i < p->in_bytes / 4; i += blockDim.x)
            dst[i] = __ldcv(src + i);
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        struct onigpu_out *o = (struct onigpu_out *)p->out[slot];
        blk.seq = seq;
        blk.nframes = p->nframes;
        blk.nchan = p->nchan;
        blk.stride = p->stride;
        blk.time_off = p->time_off;
        blk.off = p->off;
        blk.frames = p->in[slot];
        blk.x = p->x;
        blk.out = o;
        blk.fs_hz = p->fs_hz;
        o->nspikes = 0;
        o->overflow = 0;
        o->t_first = ~0ull;
        o->stim = 0;
        o->reserved = 0;
        o->t_stim = 0;
        o->t_block = p->nframes ? onigpu_frame_time(&blk, p->nframes - 1) : 0;
    }
    __syncthreads();
    int r = loop_gpu_chain_run(p->states, &blk);
    if (threadIdx.x == 0)
        rc = r;
    __threadfence_system(); // results reach host memory before the doorbell
    __syncthreads();
    return rc;
}

// gpu-staged, -direct, -graph, -flag: one block, seq from p.seqs[slot]; the
// doorbell is the stream's write after it.
extern "C" __global__ void loop_gpu_chain_once(struct loop_gpu_chain_args p, unsigned int slot)
{
    int rc = run_block(&p, slot, p.seqs[slot]);
    if (threadIdx.x == 0 && rc)
        *p.fault = (unsigned int)rc; // (stage + 1) << 16 | -code
    __threadfence_system();
}

// gpu-persistent, -mapped: launched once; polls the completion words.
extern "C" __global__ void loop_gpu_chain_persistent(struct loop_gpu_chain_args p)
{
    __shared__ int quit;
    __shared__ unsigned long long t_seen;
    if (threadIdx.x == 0)
        *p.alive = 1;
    for (unsigned int seq = 0, slot = 0;; seq++, slot = slot + 1 == p.depth ? 0 : slot + 1) {
        if (threadIdx.x == 0) {
            for (;;) { // the completion word, or the stop word
                if (ld_word(&p.done[slot]) == seq) {
                    quit = 0;
                    break;
                }
                if (ld_word(p.stop)) {
                    quit = 1;
                    break;
                }
                __nanosleep(100);
            }
            if (p.mapped)
                __threadfence_system();
            else
                __threadfence();
            t_seen = globaltimer();
        }
        __syncthreads();
        if (quit)
            break;
        int rc = run_block(&p, slot, seq);
        if (threadIdx.x == 0) {
            if (rc)
                *p.fault = (unsigned int)rc; // (stage + 1) << 16 | -code
            unsigned long long ns = globaltimer() - t_seen;
            p.gpu_ns[slot] = (ns > 0xFFFFFFFFull ? 0xFFFFFFFFull : ns) << 32 | seq;
            __threadfence_system();
            p.bell[slot] = seq;
        }
        __syncthreads();
        if (rc)
            break;
    }
    __syncthreads();
    if (threadIdx.x == 0)
        *p.alive = 0;
}
