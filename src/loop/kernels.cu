// kernels.cu - GPU versions of the closed-loop kernels (kernels.h).
//
// Every multiply and add is spelled __fmul_rn / __fadd_rn: those are never
// fused into an FMA, so each operation rounds exactly as the CPU code in
// kernels.c does, and both find the same spikes and the same MAC sums.
#include <stdint.h>
#include <float.h>
#include "loop/cukern.h"
#include "loop/loop.h"
#include "gpu/gpu_device.cuh"

#define MAC_THREADS 256

__device__ __forceinline__ float mac_one(float v, uint32_t iters, uint32_t passes, float seed)
{
    float acc = 0.0f;
    for (uint32_t k = 0; k < passes; k++) {
        float x = __fadd_rn(v, __fmul_rn((float)k, LOOP_MAC_STEP));
        for (uint32_t j = 0; j < iters; j++)
            x = __fadd_rn(__fmul_rn(x, x), seed);
        acc = __fadd_rn(acc, x);
    }
    return acc;
}

// Grid-stride MAC over n floats.
__device__ void mac_body(const float *in, float *out, size_t n, uint32_t iters, uint32_t passes, float seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = mac_one(in[i], iters, passes, seed);
}

__global__ void mac_kernel(const float *in, float *out, size_t n, uint32_t iters, uint32_t passes, float seed)
{
    mac_body(in, out, n, iters, passes, seed);
}

__device__ __forceinline__ float biquad(const float *b, const float *a, float *z, float x)
{
    float y = __fadd_rn(__fmul_rn(b[0], x), z[0]);
    z[0] = __fadd_rn(__fsub_rn(__fmul_rn(b[1], x), __fmul_rn(a[0], y)), z[1]);
    z[1] = __fsub_rn(__fmul_rn(b[2], x), __fmul_rn(a[1], y));
    return y;
}

// Same bins as loop_ephys_bin (kernels.c).
__device__ __forceinline__ uint32_t ephys_bin(float ax)
{
    uint32_t u = __float_as_uint(ax) >> 20, base = (uint32_t)(127 - 16) << 3;
    if (u < base)
        return 0;
    u -= base;
    return u >= LOOP_EPHYS_BINS ? LOOP_EPHYS_BINS - 1 : u;
}

__device__ float ephys_threshold(const struct loop_ephys_state *st, uint32_t c)
{
    uint64_t half = ((uint64_t)st->calib + 1) / 2, seen = 0;
    for (uint32_t i = 0; i < LOOP_EPHYS_BINS; i++) {
        seen += st->hist[c][i];
        if (seen >= half && seen > 0) {
            uint32_t u = ((i + ((uint32_t)(127 - 16) << 3)) << 20) | (1u << 19);
            float med = __uint_as_float(u);
            return __fmul_rn(med, st->k);
        }
    }
    return FLT_MAX;
}

// One thread block; thread t takes channels t, t + blockDim.x, ... (blockDim.x
// >= 32 * CHUNK for the CAR warps). Same steps and order as loop_ephys_cpu.
/* A frame's timestamp: 4-byte aligned (an NP2.0e read frame is 1180 bytes),
 * and a 64-bit load must be 8-byte aligned on the GPU. */
__device__ static inline uint64_t frame_time(const uint8_t *p)
{
    const uint32_t *w = (const uint32_t *)p;
    return (uint64_t)w[1] << 32 | w[0];
}

__device__ void ephys_body(struct loop_ephys_state *st, const uint8_t *blk, uint32_t nframes,
                           struct loop_ephys_out *out)
{
    extern __shared__ float sh[]; // [CHUNK][nchan] then [CHUNK][MAXGROUPS] means
    __shared__ uint32_t nsp, ovf;
    __shared__ unsigned long long tfirst;
    const uint32_t nchan = st->lay.nchan, stride = st->lay.stride, toff = st->lay.time_off;
    const uint32_t grp = st->lay.group ? st->lay.group : nchan, ngrp = nchan / grp;
    const uint32_t tid = threadIdx.x;
    float *means = sh + LOOP_EPHYS_CHUNK * nchan;
    if (tid == 0) {
        nsp = 0;
        ovf = 0;
        tfirst = ~0ull;
    }
    uint64_t n0 = st->nsamples;
    __shared__ uint32_t from; // the first spike of this chunk
    if (tid == 0)
        from = 0;
    __syncthreads();
    for (uint32_t f0 = 0; f0 < nframes; f0 += LOOP_EPHYS_CHUNK) {
        uint32_t nf = nframes - f0 < LOOP_EPHYS_CHUNK ? nframes - f0 : LOOP_EPHYS_CHUNK;
        for (uint32_t c = tid; c < nchan; c += blockDim.x) {
            float z[4] = {st->z[c][0], st->z[c][1], st->z[c][2], st->z[c][3]};
            const uint32_t off = st->lay.off[c];
            for (uint32_t f = 0; f < nf; f++) {
                const uint8_t *p = blk + (size_t)(f0 + f) * stride + off;
                uint16_t v = (uint16_t)(p[0] | (p[1] << 8));
                float y = biquad(st->b[0], st->a[0], z, __fsub_rn((float)v, LOOP_EPHYS_MID));
                sh[f * nchan + c] = biquad(st->b[1], st->a[1], z + 2, y);
            }
            for (int i = 0; i < 4; i++)
                st->z[c][i] = z[i];
        }
        __syncthreads();
        // CAR: warp w averages sample w, group by group (a probe each): 32
        // interleaved partials, summed in order.
        uint32_t w = tid / 32, lane = tid % 32;
        if (w < nf) {
            __shared__ float part[LOOP_EPHYS_CHUNK][32];
            for (uint32_t g = 0; g < ngrp; g++) {
                float s = 0.0f;
                for (uint32_t ch = g * grp + lane; ch < (g + 1) * grp; ch += 32)
                    s = __fadd_rn(s, sh[w * nchan + ch]);
                part[w][lane] = s;
                __syncwarp();
                if (lane == 0) {
                    float t = 0.0f;
                    for (int i = 0; i < 32; i++)
                        t = __fadd_rn(t, part[w][i]);
                    means[w * LOOP_EPHYS_MAXGROUPS + g] = __fdiv_rn(t, (float)grp);
                }
                __syncwarp();
            }
        }
        __syncthreads();
        for (uint32_t c = tid; c < nchan; c += blockDim.x) {
            for (uint32_t f = 0; f < nf; f++) {
                uint64_t idx = n0 + f0 + f;
                float x = __fsub_rn(sh[f * nchan + c], means[f * LOOP_EPHYS_MAXGROUPS + c / grp]);
                sh[f * nchan + c] = x; // referenced, for the exclusive rule below
                if (idx < st->calib) {
                    st->hist[c][ephys_bin(fabsf(x))]++;
                    continue;
                }
                if (st->thr[c] == 0.0f)
                    st->thr[c] = ephys_threshold(st, c);
                if (x < -st->thr[c] && idx >= st->last[c]) { // negative crossings only (kernels.c)
                    st->last[c] = idx + st->refractory;
                    uint64_t t = frame_time(blk + (size_t)(f0 + f) * stride + toff);
                    atomicMin(&tfirst, (unsigned long long)t);
                    uint32_t k = atomicAdd(&nsp, 1);
                    if (k < LOOP_EPHYS_MAXSPIKES) {
                        out->spikes[k].time = t;
                        out->spikes[k].chan = c;
                        out->spikes[k].frame = f0 + f;
                        out->spikes[k].unit = ONIGPU_UNIT_NONE;
                        out->spikes[k].reserved = 0;
                    } else {
                        atomicAdd(&ovf, 1);
                    }
                }
            }
        }
        __syncthreads();
        // the chunk's spikes in the CPU's order, then detect's locally
        // exclusive rule (kernels.h: the same code as the CPU's)
        if (tid == 0) {
            uint32_t n = nsp < LOOP_EPHYS_MAXSPIKES ? nsp : LOOP_EPHYS_MAXSPIKES;
            out->nspikes = n;
            out->overflow = ovf;
            out->t_first = tfirst;
            loop_spike_sort(out, from, n);
            loop_ephys_exclusive(st, sh, f0, n0, out, from);
            nsp = from = out->nspikes;
            tfirst = out->t_first;
        }
        __syncthreads();
    }
    if (tid == 0) {
        st->nsamples = n0 + nframes;
        out->nspikes = nsp < LOOP_EPHYS_MAXSPIKES ? nsp : LOOP_EPHYS_MAXSPIKES;
        out->overflow = ovf;
        out->t_first = tfirst;
        out->t_block = nframes ? frame_time(blk + (size_t)(nframes - 1) * stride + toff) : 0;
        // the built-in decide stage (loop_ephys_decide): the earliest listed
        // spike past the lockout
        uint32_t n = nsp < LOOP_EPHYS_MAXSPIKES ? nsp : LOOP_EPHYS_MAXSPIKES;
        uint64_t from = st->stim_last ? st->stim_last - 1 + st->lockout : 0, t = ~0ull;
        for (uint32_t i = 0; i < n; i++)
            if (out->spikes[i].time >= from && out->spikes[i].time < t &&
                loop_ephys_decides_on(st, out->spikes[i].unit))
                t = out->spikes[i].time;
        out->stim = t != ~0ull;
        out->reserved = 0;
        out->t_stim = out->stim ? t : 0;
        if (out->stim)
            st->stim_last = t + 1;
    }
}

__global__ void ephys_kernel(struct loop_ephys_state *st, const uint8_t *blk, uint32_t nframes,
                             struct loop_ephys_out *out)
{
    ephys_body(st, blk, nframes, out);
}

// A thread per channel up to 1024 (a block's most), at least the CAR's warps.
static unsigned ephys_threads(uint32_t nchan)
{
    unsigned t = nchan < 32 * LOOP_EPHYS_CHUNK ? 32 * LOOP_EPHYS_CHUNK : nchan > 1024 ? 1024 : nchan;
    return (t + 31) / 32 * 32;
}

static size_t ephys_shmem(uint32_t nchan)
{
    return (LOOP_EPHYS_CHUNK * (size_t)nchan + LOOP_EPHYS_CHUNK * LOOP_EPHYS_MAXGROUPS) * sizeof(float);
}

// Past 48 KiB of shared memory (about 1500 channels' chunk) a kernel
// must ask for it before its launch (CUDA programming guide, "Shared Memory").
template <typename K> static int ephys_shmem_allow(K kernel, uint32_t nchan)
{
    size_t need = ephys_shmem(nchan);
    if (need <= 48 * 1024)
        return 0;
    return (int)cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)need);
}

// Blocks the MAC kernel uses for n floats, at most max_blocks.
static int mac_grid(size_t n, int max_blocks)
{
    size_t g = (n + MAC_THREADS - 1) / MAC_THREADS;
    if (g < 1)
        g = 1;
    return (int)(g > (size_t)max_blocks ? (size_t)max_blocks : g);
}

extern "C" int loop_cu_mac(const float *in, float *out, size_t n, uint32_t iters, uint32_t passes, float seed,
                           cudaStream_t s)
{
    int grid = mac_grid(n, 65535);
    mac_kernel<<<grid, MAC_THREADS, 0, s>>>(in, out, n, iters, passes, seed);
    return (int)cudaGetLastError();
}

extern "C" int loop_cu_ephys(struct loop_ephys_state *st, uint32_t nchan, const uint8_t *blk, uint32_t nframes,
                             struct loop_ephys_out *out, cudaStream_t s)
{
    int rc = ephys_shmem_allow(ephys_kernel, nchan);
    if (rc)
        return rc;
    ephys_kernel<<<1, ephys_threads(nchan), ephys_shmem(nchan), s>>>(st, blk, nframes, out);
    return (int)cudaGetLastError();
}

// --- persistent kernel ------------------------------------------------------

// MAC on an input block in host-mapped memory: every element is read once,
// straight over the link, never from a cache line of an earlier block.
__device__ void mac_body_mapped(const float *in, float *out, size_t n, uint32_t iters, uint32_t passes, float seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = mac_one(__ldcv(in + i), iters, passes, seed);
}


__global__ void persistent_kernel(struct loop_persist p)
{
    __shared__ int quit;
    __shared__ uint32_t last;
    __shared__ unsigned long long t_seen;
    if (blockIdx.x == 0 && threadIdx.x == 0)
        *p.alive = 1;
    /* The slot counts on by itself: seq wraps at 2^32, where seq % depth
     * would part from the host's 64-bit count for a depth not a power of 2. */
    for (uint32_t seq = 0, slot = 0;; seq++, slot = slot + 1 == p.depth ? 0 : slot + 1) {
        if (threadIdx.x == 0) {
            // Poll the completion queue; the stop word ends the kernel.
            for (;;) {
                if (gpu_ld_volatile(&p.done[slot]) == seq) {
                    quit = 0;
                    break;
                }
                if (gpu_ld_volatile(p.stop)) {
                    quit = 1;
                    break;
                }
                __nanosleep(100);
            }
            // The payload was written before the completion word (by the copy
            // engine in GPU memory, or by the host in mapped memory).
            if (p.mapped)
                __threadfence_system();
            else
                __threadfence();
            t_seen = gpu_globaltimer();
        }
        __syncthreads();
        if (quit)
            break;
        if (p.work == LOOP_WORK_MAC) {
            if (p.mapped)
                mac_body_mapped((const float *)p.in_host[slot], (float *)p.out[slot], p.n, p.iters, p.passes, p.seed);
            else
                mac_body((const float *)p.in[slot], (float *)p.out[slot], p.n, p.iters, p.passes, p.seed);
        } else {
            if (p.mapped) {
                gpu_pull(p.in_host[slot], (uint8_t *)p.in[slot], p.in_bytes);
                __syncthreads();
            }
            ephys_body(p.st, p.in[slot], p.nframes, (struct loop_ephys_out *)p.out[slot]);
        }
        __threadfence_system(); // results reach host memory before the doorbell
        __syncthreads();
        if (threadIdx.x == 0) {
            // The last block to finish rings the doorbell (one block: no ticket).
            last = gridDim.x == 1 || atomicAdd(&p.ticket[slot], 1) == gridDim.x - 1;
            if (last) {
                if (gridDim.x > 1) {
                    p.ticket[slot] = 0;
                    __threadfence_system();
                }
                // GPU time of this block (completion seen -> results fenced),
                // tagged with seq: the host takes it only when the tag matches.
                unsigned long long ns = gpu_globaltimer() - t_seen;
                p.gpu_ns[slot] = (ns > 0xFFFFFFFFull ? 0xFFFFFFFFull : ns) << 32 | seq;
                __threadfence_system(); // the time before the doorbell
                p.bell[slot] = seq;
            }
        }
        __syncthreads();
    }
    __syncthreads();
    if (blockIdx.x == 0 && threadIdx.x == 0)
        *p.alive = 0;
}

// Threads per block of the persistent MAC: one element per thread for small
// blocks (a 4 KiB block is one thread block: no ticket, one load round).
static unsigned persist_mac_threads(size_t n)
{
    if (n >= 1024)
        return 1024;
    return n < 32 ? 32 : (unsigned)((n + 31) / 32 * 32);
}

extern "C" int loop_cu_persist_grid(size_t n, int max_blocks)
{
    size_t t = persist_mac_threads(n), g = (n + t - 1) / t;
    if (g < 1)
        g = 1;
    return (int)(g > (size_t)max_blocks ? (size_t)max_blocks : g);
}

extern "C" int loop_cu_persistent(const struct loop_persist *p, int grid, cudaStream_t s)
{
    if (p->work == LOOP_WORK_MAC) {
        persistent_kernel<<<grid, persist_mac_threads(p->n), 0, s>>>(*p);
    } else {
        int rc = ephys_shmem_allow(persistent_kernel, p->nchan);
        if (rc)
            return rc;
        persistent_kernel<<<1, ephys_threads(p->nchan), ephys_shmem(p->nchan), s>>>(*p);
    }
    return (int)cudaGetLastError();
}
