/* onigpu_stage.h - processing stages of onigpu's closed loop (docs/stages.md).
 *
 * The loop's processing is a chain of stages. Each block read from the card
 * passes through the chain in order; each stage reads what it declares as its
 * input and writes what it declares as its output:
 *
 *   FRAMES    the block as read: nframes frames of `stride` bytes, channel c's
 *             sample a u16 (12-bit offset binary, 2048 = 0 V) at byte off[c]
 *             of a frame, the frame's u64 acquisition time at time_off;
 *   SAMPLES   float samples x[f * nchan + c]; the first stage that reads
 *             SAMPLES gets the FRAMES decoded (sample - 2048), and every
 *             stage that writes SAMPLES changes them in place for the next;
 *   SPIKES    the block's spike list (struct onigpu_out: spikes, overflow, t_first);
 *   DECISION  whether to stimulate after this block (out->stim) and the
 *             acquisition time the stimulus answers (out->t_stim; the loop's
 *             latency is measured from it).
 *
 * A chain is refused before the run when a stage reads what no stage before
 * it wrote (FRAMES are always there). A chain that does not end in a
 * DECISION gets the built-in `decide` appended (stimulate when the block has
 * a spike). The built-in pipeline is the chain filter, reference, detect,
 * decide, made of these same descriptors (src/loop/stage_builtin.c).
 *
 * State: the loop allocates state_bytes of zeroed memory per stage, once; it
 * persists across blocks and is the stage's alone (the loop never reads it).
 * Calls, all from one thread of the loop, never concurrently: configure
 * (once, before the run), start (the loop starts), process (each block, in
 * order), reconfigure (between two blocks, when asked), stop (the loop
 * stopped). A stage is loaded from a shared object that exports
 * `ONIGPU_STAGE_EXPORT const struct onigpu_stage onigpu_stage = {...};`
 * (`onigpu run --stage FILE[:OPTIONS]`).
 *
 * GPU: a stage may give CUDA source (gpu_source) defining
 *   extern "C" __device__ int ENTRY(void *state, struct onigpu_block *b);
 * run by every thread of the loop's thread block (threadIdx.x, blockDim.x;
 * __syncthreads() is allowed; a nonzero return stops the loop). It is
 * compiled when the loop is created (NVRTC) and linked into the loop's
 * kernels (nvJitLink), which every GPU backend runs (gpu-persistent and
 * gpu-mapped with no host launch per block); a compile or link error refuses
 * the stage with the compiler's log. The state lives on the GPU for the run
 * (copied there before, back after). docs/stages.md has the contract.
 *
 * This header compiles as C11, C++ and CUDA (nvcc and NVRTC). */
#ifndef ONIGPU_STAGE_H
#define ONIGPU_STAGE_H

#if defined(__CUDACC_RTC__)
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef unsigned long size_t;
#else
#include <stddef.h>
#include <stdint.h>
#endif

#if defined(__CUDACC__)
#define ONIGPU_STAGE_FN __host__ __device__ static inline
#else
#define ONIGPU_STAGE_FN static inline
#endif

/* Marks a shared object's onigpu_stage visible (builds with hidden visibility). */
#define ONIGPU_STAGE_EXPORT __attribute__((visibility("default")))

#ifdef __cplusplus
extern "C" {
#endif

#define ONIGPU_STAGE_VERSION 3    /* of this header's structures; a stage of another version is refused */
#define ONIGPU_STAGE_MAXCHAN 6144 /* channels of a frame at most (16 probes of 384) */
#define ONIGPU_STAGE_MAXSPIKES 256 /* spikes listed per block; more are counted in overflow */
#define ONIGPU_UNIT_NONE 0xFFFFFFFFu /* a spike's unit when no stage labelled it */

/* What a stage reads and writes (the chain's data, above). */
enum onigpu_stage_data {
    ONIGPU_DATA_FRAMES = 1,
    ONIGPU_DATA_SAMPLES = 2,
    ONIGPU_DATA_SPIKES = 3,
    ONIGPU_DATA_DECISION = 4,
};

struct onigpu_spike {
    uint64_t time;     /* acquisition clock of the sample */
    uint32_t chan;
    uint32_t frame;    /* frame index within the block (0 for a sample of an earlier block) */
    uint32_t unit;     /* the unit a sorting stage labelled it with (tmatch: the template's
                          index), ONIGPU_UNIT_NONE when unlabelled */
    uint32_t reserved; /* 0 */
};

/* What the loop sends on after a block: spikes and the decision. */
struct onigpu_out {
    uint32_t nspikes;  /* spikes listed (<= ONIGPU_STAGE_MAXSPIKES) */
    uint32_t overflow; /* spikes found but not listed */
    uint64_t t_first;  /* time of the block's earliest spike (valid if nspikes) */
    uint64_t t_block;  /* time of the block's last frame */
    uint32_t stim;     /* DECISION: 1 = stimulate after this block */
    uint32_t reserved;
    uint64_t t_stim;   /* DECISION: the time the stimulus answers (valid if stim) */
    struct onigpu_spike spikes[ONIGPU_STAGE_MAXSPIKES];
};

/* One block as a stage sees it. On the GPU every pointer is device memory. */
struct onigpu_block {
    uint64_t seq;            /* block number, from 0 */
    uint32_t nframes, nchan; /* frames in the block, channels of a frame */
    uint32_t stride;         /* bytes per frame */
    uint32_t time_off;       /* byte offset of a frame's u64 acquisition time (4-byte aligned) */
    const uint16_t *off;     /* off[c]: byte offset of channel c's u16 sample in a frame */
    const uint8_t *frames;   /* FRAMES: nframes * stride bytes */
    float *x;                /* SAMPLES: [nframes][nchan] */
    struct onigpu_out *out;  /* SPIKES, DECISION: reset before the first stage (no spikes, t_first
                                UINT64_MAX, no decision), t_block set */
    double fs_hz;            /* frame rate */
};

/* What a stage is configured for. */
struct onigpu_stage_env {
    uint32_t nchan;      /* channels of a frame */
    uint32_t nframes;    /* frames per block */
    double fs_hz;        /* frame rate */
    double clock_hz;     /* ticks per second of the frames' times (the ONIX hub clock: 250e6) */
    const char *options; /* the text after FILE: in --stage FILE:OPTIONS ("" when none) */
    const void *init;    /* NULL, or a state to start from (the built-in stages: the loop's EPHYS state) */
};

struct onigpu_stage {
    uint32_t version;     /* ONIGPU_STAGE_VERSION */
    const char *name;     /* short name, for messages */
    int input, output;    /* enum onigpu_stage_data */
    size_t state_bytes;   /* the stage's state (0: none); the loop allocates it zeroed */
    /* Set up the zeroed state for env (parse options, check the shape).
     * 0, or an ONI error (ONI_EINVALARG for bad options) with a message in
     * err: the stage is refused before the run. May be NULL. */
    int (*configure)(void *state, const struct onigpu_stage_env *env, char *err, size_t cap);
    /* The loop starts / stopped. May be NULL. */
    void (*start)(void *state);
    void (*stop)(void *state);
    /* One block (CPU). 0, or an ONI error: the loop stops with it (the
     * stage's name in the loop's message). NULL: GPU only. */
    int (*process)(void *state, struct onigpu_block *b);
    /* A changed configuration between two blocks: env as configure had it,
     * with the new options and no init. 0, or an error with a message in
     * err: refused, the state unchanged. NULL: the stage takes no change
     * while running. */
    int (*reconfigure)(void *state, const struct onigpu_stage_env *env, char *err, size_t cap);
    /* The GPU implementation: CUDA source, and the name of its entry
     * function (see above). NULL: CPU only. */
    const char *gpu_source;
    const char *gpu_entry;
    /* Or, instead of gpu_source, a device library built beforehand (nvcc
     * -dlto -rdc=true: LTO IR, a fatbin, a cubin or an object with device
     * code for the GPU it runs on) that defines gpu_entry; NULL: none. */
    const void *gpu_image;
    size_t gpu_image_bytes;
};

/* A frame's acquisition time (a memcpy-free 4-byte-aligned read, the same on
 * host and GPU). */
ONIGPU_STAGE_FN uint64_t onigpu_frame_time(const struct onigpu_block *b, uint32_t f)
{
    const uint32_t *w = (const uint32_t *)(const void *)(b->frames + (size_t)f * b->stride + b->time_off);
    return (uint64_t)w[1] << 32 | w[0];
}

/* List a spike of unit `unit` (ONIGPU_UNIT_NONE: unlabelled) in o (counted
 * in overflow when the list is full; t_first kept the earliest either way).
 * Not thread-safe: on the GPU, one thread lists. */
ONIGPU_STAGE_FN void onigpu_add_spike_unit(struct onigpu_out *o, uint64_t time, uint32_t chan, uint32_t frame,
                                           uint32_t unit)
{
    if (time < o->t_first)
        o->t_first = time;
    if (o->nspikes < ONIGPU_STAGE_MAXSPIKES) {
        struct onigpu_spike *s = &o->spikes[o->nspikes++];
        s->time = time;
        s->chan = chan;
        s->frame = frame;
        s->unit = unit;
        s->reserved = 0;
    } else {
        o->overflow++;
    }
}

/* An unlabelled spike (onigpu_add_spike_unit with ONIGPU_UNIT_NONE). */
ONIGPU_STAGE_FN void onigpu_add_spike(struct onigpu_out *o, uint64_t time, uint32_t chan, uint32_t frame)
{
    onigpu_add_spike_unit(o, time, chan, frame, ONIGPU_UNIT_NONE);
}

#if defined(__CUDACC__)
/* List a spike from any thread of the block (GPU): the list's count may run
 * past ONIGPU_STAGE_MAXSPIKES while the stage runs; after it, the loop
 * counts what is past the list in overflow. Listed in arrival order. */
__device__ static inline void onigpu_add_spike_unit_gpu(struct onigpu_out *o, uint64_t time, uint32_t chan,
                                                         uint32_t frame, uint32_t unit)
{
    atomicMin((unsigned long long *)&o->t_first, (unsigned long long)time);
    uint32_t k = atomicAdd(&o->nspikes, 1u);
    if (k < ONIGPU_STAGE_MAXSPIKES) {
        o->spikes[k].time = time;
        o->spikes[k].chan = chan;
        o->spikes[k].frame = frame;
        o->spikes[k].unit = unit;
        o->spikes[k].reserved = 0;
    }
}

__device__ static inline void onigpu_add_spike_gpu(struct onigpu_out *o, uint64_t time, uint32_t chan, uint32_t frame)
{
    onigpu_add_spike_unit_gpu(o, time, chan, frame, ONIGPU_UNIT_NONE);
}
#endif

#if !defined(__CUDACC__)
#include <stdlib.h>
#include <string.h>
/* Options for a stage's configure, "key=NUMBER,key=NUMBER" (host only).
 * onigpu_stage_option: 1 and *v set when key is there with a number, 0 when
 * it is not there, -1 when its value is not a number. onigpu_stage_unknown:
 * the first key of options that is none of keys[0..n), or NULL. */
ONIGPU_STAGE_FN const char *onigpu_stage_next_(const char *p, size_t *klen, const char **val)
{
    const char *end = strchr(p, ',');
    const char *eq = strchr(p, '=');
    if (!end)
        end = p + strlen(p);
    *klen = eq && eq < end ? (size_t)(eq - p) : (size_t)(end - p);
    *val = eq && eq < end ? eq + 1 : end;
    return *end ? end + 1 : end;
}

ONIGPU_STAGE_FN int onigpu_stage_option(const char *options, const char *key, double *v)
{
    for (const char *p = options ? options : ""; *p;) {
        size_t klen;
        const char *val, *next = onigpu_stage_next_(p, &klen, &val);
        if (klen == strlen(key) && !strncmp(p, key, klen)) {
            char *q;
            double d = strtod(val, &q);
            if (q == val || (*q && *q != ','))
                return -1;
            *v = d;
            return 1;
        }
        p = next;
    }
    return 0;
}

ONIGPU_STAGE_FN const char *onigpu_stage_unknown(const char *options, const char *const *keys, size_t n)
{
    for (const char *p = options ? options : ""; *p;) {
        size_t klen, i;
        const char *val, *next = onigpu_stage_next_(p, &klen, &val);
        for (i = 0; i < n; i++)
            if (klen == strlen(keys[i]) && !strncmp(p, keys[i], klen))
                break;
        if (i == n)
            return p;
        p = next;
    }
    return NULL;
}
#endif

#ifdef __cplusplus
}
#endif
#endif
