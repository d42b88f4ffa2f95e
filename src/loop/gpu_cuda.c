/* gpu_cuda.c - the GPU backends of the closed-loop engine (loop.h).
 *
 * Every backend ends a block's GPU work with a write of seq into a
 * host-mapped doorbell word (a stream write, or the persistent kernel's own
 * store); the host waits for that word (loop_wait_word: spin, then poll, with
 * a deadline) instead of synchronizing the stream, so no call ever blocks
 * without a deadline. Completion words the source writes
 * are initialised to NONE so that seq 0 is never seen before it arrives. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include "oni.h"
#include "gpu/gpu.h"
#include "loop/engine.h"
#include "loop/cukern.h"
#include "loop/gpu_chain.h"
#include "loop/gpu_jit.h"
#include "loop/stage.h"
#include "oni/util/clock.h"

#define NONE 0xFFFFFFFFu
#define HALT_MS 2000u /* how long halt waits for the GPU to drain */

struct gpu {
    cudaStream_t s, ctl;
    void *din[LOOP_MAXDEPTH];          /* device input blocks */
    void *dout[LOOP_MAXDEPTH];         /* device output blocks (not persistent) */
    void *out_dev[LOOP_MAXDEPTH];      /* device view of the host-mapped lp->out (persistent) */
    uint32_t *words;                   /* host-mapped: hdone[D] bell[D] stop alive */
    uint32_t *words_dev;
    unsigned long long *gpu_ns;        /* host-mapped: per slot GPU time << 32 | seq (persistent kernels) */
    unsigned long long *gpu_ns_dev;
    uint32_t *ddone;                   /* device: completion words [D] */
    uint32_t *ticket;                  /* device: finished blocks per slot [D] */
    struct loop_ephys_state *dst;      /* device copy of the EPHYS state */
    cudaGraphExec_t gx[LOOP_MAXDEPTH];
    uint32_t queued[LOOP_MAXDEPTH];    /* gpu-flag: the seq of a stream wait still queued ... */
    int waits[LOOP_MAXDEPTH];          /* ... when this is set (any seq may be queued, NONE too) */
    int pinned[LOOP_MAXDEPTH];
    int launched, sm;
    int stuck;                         /* halt could not drain the GPU: fini leaks rather than blocks */
    /* A chain of stages compiled for the GPU (gpu_jit.h), run by its own
     * persistent kernel: */
    CUmodule jmod;
    CUfunction jfn, jonce;             /* its persistent and one-block kernels */
    struct loop_gpu_chain_args jargs;  /* their arguments */
    unsigned jthreads;
    uint32_t *jseqs, *jseqs_dev;       /* host-mapped: per slot, the seq of the block the one-block kernel runs */
    void *jstate[LOOP_MAXSTAGES];      /* device copies of the stages' states */
    float *jx;                         /* device samples [nframes][nchan] */
    uint16_t *joff;                    /* device copy of the layout's offsets */
    uint32_t *jfault, *jfault_dev;     /* host-mapped: (stage + 1) << 16 | -code of a stage's error */
    int jstarted;                      /* the stages were told of the start */
};

/* The mapped words' layout, in either view (w: g->words for the host,
 * g->words_dev for the device). */
#define W_DONE(w, i) (&(w)[(i)])
#define W_BELL(w, i) (&(w)[LOOP_MAXDEPTH + (i)])
#define W_STOP(w) (&(w)[2 * LOOP_MAXDEPTH])
#define W_ALIVE(w) (&(w)[2 * LOOP_MAXDEPTH + 1])
#define NWORDS (2 * LOOP_MAXDEPTH + 2)
#define HDONE(g, i) W_DONE((g)->words, i)
#define BELL(g, i) W_BELL((g)->words, i)
#define STOPW(g) W_STOP((g)->words)
#define ALIVE(g) W_ALIVE((g)->words)

/* A CUDA runtime result as an ONI code: a full GPU is not a missing one. */
static int cu(cudaError_t e)
{
    if (e == cudaSuccess)
        return 0;
    return e == cudaErrorMemoryAllocation ? ONI_EBADALLOC : ONI_ENOGPU;
}

static int cud(CUresult r)
{
    return r == CUDA_SUCCESS ? 0 : ONI_ENOGPU;
}

static CUdeviceptr devptr(const void *p)
{
    return (CUdeviceptr)(uintptr_t)p;
}

/* Enqueue the block's compute on g->s, reading din[slot], result to dout[slot]. */
static int enqueue_compute(struct loop *lp, struct gpu *g, uint32_t slot)
{
    if (g->jonce) { /* a chain of stages: its one-block kernel, results straight into lp->out */
        void *params[] = {&g->jargs, &slot};
        return cud(cuLaunchKernel(g->jonce, 1, 1, 1, g->jthreads, 1, 1, 0, (CUstream)g->s, params, NULL));
    }
    if (lp->cfg.work == LOOP_WORK_EPHYS)
        return cu(loop_cu_ephys(g->dst, lp->ephys->lay.nchan, g->din[slot], lp->nframes, g->dout[slot], g->s));
    return cu(loop_cu_mac(g->din[slot], g->dout[slot], lp->cfg.in_bytes / 4, lp->cfg.mac.iters, lp->cfg.mac.passes,
                          lp->cfg.mac.seed, g->s));
}

/* Compute, copy the result to lp->out[slot], ring the doorbell. */
static int enqueue_block(struct loop *lp, struct gpu *g, uint32_t slot, uint32_t seq)
{
    if (g->jonce) /* read by the kernel when it runs: queued work of this slot is done (its bell rang) */
        __atomic_store_n(&g->jseqs[slot], seq, __ATOMIC_RELEASE);
    int rc = enqueue_compute(lp, g, slot);
    if (!rc && !g->jonce)
        rc = cu(cudaMemcpyAsync(lp->out[slot], g->dout[slot], lp->out_len, cudaMemcpyDeviceToHost, g->s));
    if (!rc)
        rc = cud(cuStreamWriteValue32((CUstream)g->s, devptr(W_BELL(g->words_dev, slot)), seq, 0));
    return rc;
}

static int wait_bell(struct loop *lp, struct gpu *g, uint32_t slot, uint32_t seq)
{
    return loop_wait_word(lp, BELL(g, slot), seq, lp->cfg.timeout_ms);
}

/* The process hooks' wait for their doorbell, timed (loop_record.t_wait_ns). */
static int timed_bell(struct loop *lp, struct gpu *g, uint32_t slot, uint32_t seq)
{
    uint64_t t0 = oni_now_ns();
    int rc = wait_bell(lp, g, slot, seq);
    struct loop_record *r = loop_record_of(lp, seq);
    if (r)
        r->t_wait_ns = loop_ns32(oni_now_ns() - t0);
    return rc;
}

static int chain_fault(struct loop *lp, struct gpu *g, uint32_t seq);

/* --- the hooks --------------------------------------------------------------- */

static int staged_recv(struct loop *lp, uint32_t slot, uint32_t seq)
{
    return lp->cfg.src.read(lp->cfg.src.ctx, lp->hin[slot], lp->cfg.in_bytes, lp->cfg.timeout_ms);
}

static int staged_process(struct loop *lp, uint32_t slot, uint32_t seq)
{
    struct gpu *g = lp->gpu;
    int rc = cu(cudaMemcpyAsync(g->din[slot], lp->hin[slot], lp->cfg.in_bytes, cudaMemcpyHostToDevice, g->s));
    if (!rc)
        rc = enqueue_block(lp, g, slot, seq);
    if (!rc)
        rc = timed_bell(lp, g, slot, seq);
    return rc ? rc : chain_fault(lp, g, seq);
}

static int direct_recv(struct loop *lp, uint32_t slot, uint32_t seq)
{
    struct gpu *g = lp->gpu;
    int rc = lp->cfg.src.read_async(lp->cfg.src.ctx, g->din[slot], lp->cfg.in_bytes, HDONE(g, slot), seq,
                                    lp->cfg.timeout_ms);
    return rc ? rc : loop_wait_word(lp, HDONE(g, slot), seq, lp->cfg.timeout_ms);
}

static int direct_process(struct loop *lp, uint32_t slot, uint32_t seq)
{
    struct gpu *g = lp->gpu;
    int rc = enqueue_block(lp, g, slot, seq);
    if (!rc)
        rc = timed_bell(lp, g, slot, seq);
    return rc ? rc : chain_fault(lp, g, seq);
}

static int graph_process(struct loop *lp, uint32_t slot, uint32_t seq)
{
    struct gpu *g = lp->gpu;
    if (g->jonce) /* the graph's kernel reads the block's seq here */
        __atomic_store_n(&g->jseqs[slot], seq, __ATOMIC_RELEASE);
    int rc = cu(cudaGraphLaunch(g->gx[slot], g->s));
    /* The graph's doorbell write carries no seq (a graph is fixed), so the
     * doorbell is written outside it. */
    if (!rc)
        rc = cud(cuStreamWriteValue32((CUstream)g->s, devptr(W_BELL(g->words_dev, slot)), seq, 0));
    if (!rc)
        rc = timed_bell(lp, g, slot, seq);
    return rc ? rc : chain_fault(lp, g, seq);
}

/* gpu-flag: the work for seq waits in the stream for the completion word the
 * source writes; queued before the transfer starts. At most depth blocks are
 * queued, because a slot is reused only after its doorbell rang. */
static int flag_recv(struct loop *lp, uint32_t slot, uint32_t seq)
{
    struct gpu *g = lp->gpu;
    int rc = cud(cuStreamWaitValue32((CUstream)g->s, devptr(&g->ddone[slot]), seq, CU_STREAM_WAIT_VALUE_EQ));
    if (!rc) {
        g->queued[slot] = seq;
        g->waits[slot] = 1;
        rc = enqueue_block(lp, g, slot, seq);
    }
    if (!rc)
        rc = lp->cfg.src.read_async(lp->cfg.src.ctx, g->din[slot], lp->cfg.in_bytes, &g->ddone[slot], seq,
                                    lp->cfg.timeout_ms);
    return rc;
}

/* The doorbell of seq. A gpu-flag wait stays marked queued unless the bell
 * rang: a block whose data never came (a DMA job that timed out writes no
 * completion word) leaves its wait in the stream, ahead of every later
 * block, and halt must release it. */
static int bell_finish(struct loop *lp, uint32_t slot, uint32_t seq)
{
    struct gpu *g = lp->gpu;
    int rc = wait_bell(lp, g, slot, seq);
    if (!rc)
        g->waits[slot] = 0;
    return rc ? rc : chain_fault(lp, g, seq);
}

static int persistent_recv(struct loop *lp, uint32_t slot, uint32_t seq)
{
    struct gpu *g = lp->gpu;
    return lp->cfg.src.read_async(lp->cfg.src.ctx, g->din[slot], lp->cfg.in_bytes, &g->ddone[slot], seq,
                                    lp->cfg.timeout_ms);
}

/* gpu-mapped: the source fills the host block (the card's DMA into host
 * memory); publishing seq in the mapped completion word hands it to the
 * kernel, which pulls the block over the link itself. No CUDA call per block. */
static int mapped_recv(struct loop *lp, uint32_t slot, uint32_t seq)
{
    struct gpu *g = lp->gpu;
    int rc = lp->cfg.src.read(lp->cfg.src.ctx, lp->hin[slot], lp->cfg.in_bytes, lp->cfg.timeout_ms);
    if (!rc)
        __atomic_store_n(HDONE(g, slot), seq, __ATOMIC_RELEASE);
    return rc;
}

/* The persistent kernels' doorbell, and the GPU time they tagged with seq. */
/* A stage's error on the GPU, reported with the block whose doorbell it rang. */
static int chain_fault(struct loop *lp, struct gpu *g, uint32_t seq)
{
    uint32_t f = g->jfault ? __atomic_load_n(g->jfault, __ATOMIC_ACQUIRE) : 0;
    if (!f)
        return 0;
    int code = -(int)(f & 0xFFFF);
    const struct onigpu_stage *d = loop_chain_stage(lp->chain, (f >> 16) - 1, NULL, NULL);
    loop_fail_why(lp, code, "stage %u (%s) failed on block %u on the GPU: %s", f >> 16, d ? d->name : "?", seq,
                  oni_error_str(code));
    return code;
}

static int persist_finish(struct loop *lp, uint32_t slot, uint32_t seq)
{
    struct gpu *g = lp->gpu;
    int rc = bell_finish(lp, slot, seq);
    struct loop_record *r = loop_record_of(lp, seq);
    if (!rc && r) {
        unsigned long long v = __atomic_load_n(&g->gpu_ns[slot], __ATOMIC_ACQUIRE);
        r->t_gpu_ns = (uint32_t)v == seq ? (uint32_t)(v >> 32) : 0;
    }
    return rc;
}

/* Wait until stream s is idle, up to HALT_MS. */
static int drain(cudaStream_t s)
{
    uint64_t limit = oni_now_ns() + HALT_MS * 1000000ull;
    for (;;) {
        cudaError_t e = cudaStreamQuery(s);
        if (e == cudaSuccess)
            return 0;
        if (e != cudaErrorNotReady)
            return ONI_ENOGPU;
        if (oni_now_ns() > limit)
            return ONI_ETIMEOUT;
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
}

static void halt(struct loop *lp)
{
    struct gpu *g = lp->gpu;
    if (!g)
        return;
    /* gpu-flag: release every queued wait whose data never came (its block
     * is computed on stale data and discarded). */
    int rc = 0;
    for (uint32_t i = 0; i < lp->cfg.depth; i++)
        if (g->waits[i]) {
            int r = cud(cuStreamWriteValue32((CUstream)g->ctl, devptr(&g->ddone[i]), g->queued[i], 0));
            if (!rc)
                rc = r;
            g->waits[i] = 0;
        }
    int rc_c = drain(g->ctl);
    if (!rc)
        rc = rc_c;
    /* gpu-persistent: ask the kernel to leave. */
    *STOPW(g) = 1;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    int rc_s = drain(g->s);
    g->stuck = rc_c || rc_s;
    lp->gpu_left_running = g->stuck;
    if (!rc)
        rc = rc_s;
    g->launched = 0;
    if (!g->stuck && lp->cfg.work == LOOP_WORK_EPHYS && g->dst && !g->jfn) {
        int r = cu(cudaMemcpy(lp->ephys, g->dst, sizeof *lp->ephys, cudaMemcpyDeviceToHost));
        if (!rc)
            rc = r; /* the caller would read a stale detector state */
    }
    if (!g->stuck && g->jfn) { /* the stages' states back, for loop_ephys_final and the stages */
        for (uint32_t i = 0; i < loop_chain_count(lp->chain); i++) {
            void *st = NULL;
            const struct onigpu_stage *d = loop_chain_stage(lp->chain, i, &st, NULL);
            int r = g->jstate[i] ? cu(cudaMemcpy(st, g->jstate[i], d->state_bytes, cudaMemcpyDeviceToHost)) : 0;
            if (!rc)
                rc = r;
        }
        loop_chain_state(lp->chain, lp->ephys);
    }
    if (g->jstarted) {
        loop_chain_stop(lp->chain);
        g->jstarted = 0;
    }
    if (g->stuck) {
        /* Said even after an earlier error (a timed-out wait, most often):
         * halt runs after every loop thread ended, so lp->why is ours. */
        size_t k = strlen(lp->why);
        snprintf(lp->why + k, sizeof lp->why - k, "%sthe GPU's work did not stop within %u ms of the stop request "
                 "(a stage that does not return?): it is left running, its memory is not freed",
                 k ? "; " : "", HALT_MS);
    }
    if (rc)
        loop_fail(lp, rc); /* a kernel that does not stop is an error the caller sees */
}

static void fini(struct loop *lp)
{
    struct gpu *g = lp->gpu;
    if (!g)
        return;
    if (g->launched)
        halt(lp);
    /* A GPU that did not drain would hold every free below (cudaFree waits
     * for the whole device) for good: leak instead, the error was reported. */
    int keep = g->stuck;
    for (uint32_t i = 0; i < lp->cfg.depth; i++) {
        if (g->gx[i] && !keep)
            cudaGraphExecDestroy(g->gx[i]);
        /* A block whose unpin the source refuses (a DMA job may still write
         * it: ONI_ETIMEOUT) stays allocated: better leaked than written after
         * it was given back. */
        int in_use = keep;
        if (g->pinned[i] && lp->cfg.src.unpin && lp->cfg.src.unpin(lp->cfg.src.ctx, g->din[i], lp->cfg.in_bytes))
            in_use = 1;
        if (lp->hin_pinned[i] && lp->cfg.src.unpin && lp->cfg.src.unpin(lp->cfg.src.ctx, lp->hin[i], lp->cfg.in_bytes))
            lp->hin[i] = NULL; /* leaked: see above */
        lp->hin_pinned[i] = 0;
        if (keep) {
            lp->out[i] = lp->hin[i] = NULL;
            continue;
        }
        if (!in_use)
            cudaFree(g->din[i]);
        cudaFree(g->dout[i]);
        cudaFreeHost(lp->out[i]);
        cudaFreeHost(lp->hin[i]);
        lp->out[i] = lp->hin[i] = NULL;
    }
    if (g->jstarted) {
        loop_chain_stop(lp->chain);
        g->jstarted = 0;
    }
    if (!keep) {
        for (uint32_t i = 0; i < LOOP_MAXSTAGES; i++)
            cudaFree(g->jstate[i]);
        cudaFree(g->jx);
        cudaFree(g->joff);
        cudaFreeHost(g->jfault);
        cudaFreeHost(g->jseqs);
        if (g->jmod)
            cuModuleUnload(g->jmod);
        cudaFree(g->ddone);
        cudaFree(g->ticket);
        cudaFree(g->dst);
        cudaFreeHost(g->words);
        cudaFreeHost(g->gpu_ns);
        if (g->s)
            cudaStreamDestroy(g->s);
        if (g->ctl)
            cudaStreamDestroy(g->ctl);
    }
    free(g);
    lp->gpu = NULL;
}

static int capture_graphs(struct loop *lp, struct gpu *g)
{
    for (uint32_t i = 0; i < lp->cfg.depth; i++) {
        cudaGraph_t graph;
        int rc = cu(cudaStreamBeginCapture(g->s, cudaStreamCaptureModeThreadLocal));
        if (rc)
            return rc;
        rc = enqueue_compute(lp, g, i);
        if (!rc && !g->jonce)
            rc = cu(cudaMemcpyAsync(lp->out[i], g->dout[i], lp->out_len, cudaMemcpyDeviceToHost, g->s));
        cudaError_t e = cudaStreamEndCapture(g->s, &graph);
        if (!rc)
            rc = cu(e);
        if (!rc)
            rc = cu(cudaGraphInstantiate(&g->gx[i], graph, 0));
        if (e == cudaSuccess)
            cudaGraphDestroy(graph);
        if (rc)
            return rc;
    }
    return 0;
}

static int launch_persistent(struct loop *lp, struct gpu *g)
{
    struct loop_persist p;
    memset(&p, 0, sizeof p);
    p.work = lp->cfg.work;
    p.mapped = lp->cfg.backend == LOOP_GPU_MAPPED;
    p.depth = lp->cfg.depth;
    p.done = p.mapped ? W_DONE(g->words_dev, 0) : g->ddone;
    p.gpu_ns = g->gpu_ns_dev;
    p.in_bytes = lp->cfg.in_bytes;
    p.bell = W_BELL(g->words_dev, 0);
    p.stop = W_STOP(g->words_dev);
    p.alive = W_ALIVE(g->words_dev);
    p.ticket = g->ticket;
    for (uint32_t i = 0; i < lp->cfg.depth; i++) {
        p.in[i] = g->din[i];
        int rc = cu(cudaHostGetDevicePointer(&g->out_dev[i], lp->out[i], 0));
        if (!rc && p.mapped)
            rc = cu(cudaHostGetDevicePointer((void **)&p.in_host[i], lp->hin[i], 0));
        if (rc)
            return rc;
        p.out[i] = g->out_dev[i];
    }
    p.n = lp->cfg.in_bytes / 4;
    p.iters = lp->cfg.mac.iters;
    p.passes = lp->cfg.mac.passes;
    p.seed = lp->cfg.mac.seed;
    p.st = g->dst;
    p.nframes = lp->nframes;
    int grid = 1;
    if (lp->cfg.work == LOOP_WORK_MAC)
        grid = loop_cu_persist_grid(p.n, g->sm);
    else
        p.nchan = lp->ephys->lay.nchan;
    int rc = cu(loop_cu_persistent(&p, grid, g->s));
    if (rc)
        return rc;
    g->launched = 1;
    /* The kernel announces itself; a launch that never runs is an error now,
     * not a silent hang later. */
    uint64_t limit = oni_now_ns() + HALT_MS * 1000000ull;
    while (*(volatile uint32_t *)ALIVE(g) != 1) {
        if (oni_now_ns() > limit)
            return ONI_ETIMEOUT;
        if (cudaStreamQuery(g->s) != cudaErrorNotReady)
            return ONI_ENOGPU;
    }
    return 0;
}

static int chain_args(struct loop *lp, struct gpu *g);

/* The chain compiled for this GPU, loaded, its stages' states, samples,
 * layout offsets and fault word in GPU memory; the stages told of the start. */
static int chain_prepare(struct loop *lp, struct gpu *g)
{
    int dev = 0, maj = 0, min = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&maj, cudaDevAttrComputeCapabilityMajor, dev);
    cudaDeviceGetAttribute(&min, cudaDevAttrComputeCapabilityMinor, dev);
    void *img = NULL;
    size_t len = 0;
    int rc = loop_gpu_jit(lp->chain, maj * 10 + min, &img, &len, lp->why, sizeof lp->why);
    if (rc)
        return rc;
    rc = cud(cuModuleLoadData(&g->jmod, img));
    free(img);
    if (!rc)
        rc = cud(cuModuleGetFunction(&g->jfn, g->jmod, "loop_gpu_chain_persistent"));
    if (!rc)
        rc = cud(cuModuleGetFunction(&g->jonce, g->jmod, "loop_gpu_chain_once"));
    if (rc) {
        snprintf(lp->why, sizeof lp->why, "the chain's linked GPU code does not load on this GPU");
        return rc;
    }
    const struct loop_ephys_layout *lay = loop_chain_layout(lp->chain);
    for (uint32_t i = 0; i < loop_chain_count(lp->chain) && !rc; i++) {
        void *st = NULL;
        const struct onigpu_stage *d = loop_chain_stage(lp->chain, i, &st, NULL);
        /* on the loop's stream, as init's copies (another kernel that never
         * ends must not hold them up); drained below */
        if (d->state_bytes && !(rc = cu(cudaMalloc(&g->jstate[i], d->state_bytes))))
            rc = cu(cudaMemcpyAsync(g->jstate[i], st, d->state_bytes, cudaMemcpyHostToDevice, g->s));
    }
    size_t nx = (size_t)lp->nframes * lay->nchan;
    if (!rc)
        rc = cu(cudaMalloc((void **)&g->jx, (nx ? nx : 1) * sizeof(float)));
    if (!rc)
        rc = cu(cudaMalloc((void **)&g->joff, lay->nchan * sizeof(uint16_t)));
    if (!rc)
        rc = cu(cudaMemcpyAsync(g->joff, lay->off, lay->nchan * sizeof(uint16_t), cudaMemcpyHostToDevice, g->s));
    if (!rc)
        rc = drain(g->s);
    if (!rc)
        rc = cu(cudaHostAlloc((void **)&g->jfault, 4, cudaHostAllocMapped));
    if (!rc)
        rc = cu(cudaHostGetDevicePointer((void **)&g->jfault_dev, g->jfault, 0));
    if (!rc)
        rc = cu(cudaHostAlloc((void **)&g->jseqs, LOOP_MAXDEPTH * 4, cudaHostAllocMapped));
    if (!rc)
        rc = cu(cudaHostGetDevicePointer((void **)&g->jseqs_dev, g->jseqs, 0));
    if (!rc)
        rc = chain_args(lp, g);
    if (!rc) {
        *g->jfault = 0;
        memset(g->jseqs, 0xFF, LOOP_MAXDEPTH * 4);
        loop_chain_start(lp->chain);
        g->jstarted = 1;
    }
    return rc;
}

/* The chain kernels' arguments (g->jargs) and block size: one thread
 * block, a thread per channel, at least 256 (the spike sort's). */
static int chain_args(struct loop *lp, struct gpu *g)
{
    const struct loop_ephys_layout *lay = loop_chain_layout(lp->chain);
    struct loop_gpu_chain_args *a = &g->jargs;
    memset(a, 0, sizeof *a);
    a->mapped = lp->cfg.backend == LOOP_GPU_MAPPED;
    a->done = a->mapped ? W_DONE(g->words_dev, 0) : g->ddone;
    a->bell = W_BELL(g->words_dev, 0);
    a->stop = W_STOP(g->words_dev);
    a->alive = W_ALIVE(g->words_dev);
    a->fault = g->jfault_dev;
    a->seqs = g->jseqs_dev;
    a->gpu_ns = g->gpu_ns_dev;
    for (uint32_t i = 0; i < lp->cfg.depth; i++) {
        a->in[i] = g->din[i];
        int rc = cu(cudaHostGetDevicePointer(&g->out_dev[i], lp->out[i], 0));
        if (!rc && a->mapped)
            rc = cu(cudaHostGetDevicePointer((void **)&a->in_host[i], lp->hin[i], 0));
        if (rc)
            return rc;
        a->out[i] = g->out_dev[i];
    }
    for (uint32_t i = 0; i < LOOP_MAXSTAGES && i < LOOP_GPU_CHAIN_STAGES; i++)
        a->states[i] = g->jstate[i];
    a->off = g->joff;
    a->x = g->jx;
    a->in_bytes = lp->cfg.in_bytes;
    a->fs_hz = loop_chain_fs_hz(lp->chain);
    a->depth = lp->cfg.depth;
    a->nframes = lp->nframes;
    a->nchan = lay->nchan;
    a->stride = lay->stride;
    a->time_off = lay->time_off;
    g->jthreads = lay->nchan < 256 ? 256 : (lay->nchan + 31) / 32 * 32;
    if (g->jthreads > 1024)
        g->jthreads = 1024;
    return 0;
}

/* The chain's persistent kernel (gpu-persistent, gpu-mapped). */
static int launch_chain(struct loop *lp, struct gpu *g)
{
    void *params[] = {&g->jargs};
    int rc = cud(cuLaunchKernel(g->jfn, 1, 1, 1, g->jthreads, 1, 1, 0, (CUstream)g->s, params, NULL));
    if (rc)
        return rc;
    g->launched = 1;
    uint64_t limit = oni_now_ns() + HALT_MS * 1000000ull;
    while (*(volatile uint32_t *)ALIVE(g) != 1) {
        if (oni_now_ns() > limit)
            return ONI_ETIMEOUT;
        if (cudaStreamQuery(g->s) != cudaErrorNotReady)
            return ONI_ENOGPU;
    }
    return 0;
}

static int init(struct loop *lp)
{
    if (!gpu_available(NULL, 0))
        return ONI_ENOGPU;
    int b = lp->cfg.backend;
    int host_in = b == LOOP_GPU_STAGED || b == LOOP_GPU_MAPPED; /* the source fills host blocks */
    int persist = b == LOOP_GPU_PERSISTENT || b == LOOP_GPU_MAPPED;
    if (!host_in && !lp->cfg.src.read_async)
        return ONI_EINVALARG; /* direct backends need a source that writes GPU memory */
    /* a chain of other than the built-in stages: its own kernels (gpu_jit.h) */
    int chain = lp->chain && !loop_chain_is_builtin(lp->chain);
    struct gpu *g = calloc(1, sizeof *g);
    if (!g)
        return ONI_EBADALLOC;
    lp->gpu = g;
    int dev = 0, rc;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&g->sm, cudaDevAttrMultiProcessorCount, dev);
    rc = cu(cudaStreamCreateWithFlags(&g->s, cudaStreamNonBlocking));
    if (!rc)
        rc = cu(cudaStreamCreateWithFlags(&g->ctl, cudaStreamNonBlocking));
    if (!rc)
        rc = cu(cudaHostAlloc((void **)&g->words, NWORDS * 4, cudaHostAllocMapped));
    if (!rc)
        rc = cu(cudaHostGetDevicePointer((void **)&g->words_dev, g->words, 0));
    if (!rc)
        rc = cu(cudaHostAlloc((void **)&g->gpu_ns, LOOP_MAXDEPTH * 8, cudaHostAllocMapped));
    if (!rc)
        rc = cu(cudaHostGetDevicePointer((void **)&g->gpu_ns_dev, g->gpu_ns, 0));
    if (!rc)
        rc = cu(cudaMalloc((void **)&g->ddone, LOOP_MAXDEPTH * 4));
    if (!rc)
        rc = cu(cudaMalloc((void **)&g->ticket, LOOP_MAXDEPTH * 4));
    if (rc)
        return rc;
    for (int i = 0; i < NWORDS; i++)
        g->words[i] = NONE;
    memset(g->gpu_ns, 0xFF, LOOP_MAXDEPTH * 8);
    *STOPW(g) = 0;
    *ALIVE(g) = 0;
    /* On the loop's stream, not the device: another kernel that never ends
     * (a second persistent loop, the card's DMA agent) must not hold this up. */
    rc = cu(cudaMemsetAsync(g->ddone, 0xFF, LOOP_MAXDEPTH * 4, g->s));
    if (!rc)
        rc = cu(cudaMemsetAsync(g->ticket, 0, LOOP_MAXDEPTH * 4, g->s));
    size_t out_cap = lp->cfg.work == LOOP_WORK_MAC ? lp->cfg.in_bytes : lp->out_len;
    for (uint32_t i = 0; i < lp->cfg.depth && !rc; i++) {
        g->waits[i] = 0;
        rc = cu(cudaMalloc(&g->din[i], lp->cfg.in_bytes));
        if (!rc)
            rc = cu(cudaMemsetAsync(g->din[i], 0, lp->cfg.in_bytes, g->s));
        if (!rc && !persist)
            rc = cu(cudaMalloc(&g->dout[i], out_cap));
        if (!rc)
            rc = cu(cudaHostAlloc(&lp->out[i], out_cap, cudaHostAllocMapped));
        if (!rc && host_in) {
            /* gpu-mapped: the kernel reads it over the link, so it is mapped. */
            rc = cu(cudaHostAlloc(&lp->hin[i], lp->cfg.in_bytes,
                                  b == LOOP_GPU_MAPPED ? cudaHostAllocMapped : cudaHostAllocDefault));
            if (!rc && lp->cfg.src.pin) /* the card's DMA writes it without per-transfer setup */
                lp->hin_pinned[i] = lp->cfg.src.pin(lp->cfg.src.ctx, lp->hin[i], lp->cfg.in_bytes) == 0;
        }
        if (!rc && !host_in && lp->cfg.src.pin) {
            rc = lp->cfg.src.pin(lp->cfg.src.ctx, g->din[i], lp->cfg.in_bytes);
            g->pinned[i] = rc == 0;
        }
    }
    if (!rc && lp->cfg.work == LOOP_WORK_EPHYS) {
        rc = cu(cudaMalloc((void **)&g->dst, sizeof *g->dst));
        if (!rc)
            rc = cu(cudaMemcpyAsync(g->dst, lp->ephys, sizeof *g->dst, cudaMemcpyHostToDevice, g->s));
    }
    /* Load the kernels' module now (CUDA loads it lazily at the first launch,
     * which would otherwise stall the first block by milliseconds). */
    if (!rc && lp->cfg.work == LOOP_WORK_EPHYS && g->dout[0])
        rc = cu(loop_cu_ephys(g->dst, lp->ephys->lay.nchan, g->din[0], 0, g->dout[0], g->s));
    if (!rc && lp->cfg.work == LOOP_WORK_MAC && g->dout[0])
        rc = cu(loop_cu_mac(g->din[0], g->dout[0], 0, 0, 1, 0.0f, g->s));
    if (!rc)
        rc = drain(g->s);
    if (!rc && chain)
        rc = chain_prepare(lp, g);
    if (!rc && b == LOOP_GPU_GRAPH)
        rc = capture_graphs(lp, g);
    if (!rc && persist)
        rc = chain ? launch_chain(lp, g) : launch_persistent(lp, g);
    return rc;
}

static const struct loop_be be_staged = {
    .init = init, .recv = staged_recv, .process = staged_process, .halt = halt, .fini = fini,
};
static const struct loop_be be_direct = {
    .init = init, .recv = direct_recv, .process = direct_process, .halt = halt, .fini = fini,
};
static const struct loop_be be_graph = {
    .init = init, .recv = direct_recv, .process = graph_process, .halt = halt, .fini = fini,
};
static const struct loop_be be_flag = {
    .init = init, .recv = flag_recv, .finish = bell_finish, .halt = halt, .fini = fini,
};
static const struct loop_be be_persistent = {
    .init = init, .recv = persistent_recv, .finish = persist_finish, .halt = halt, .fini = fini,
};
static const struct loop_be be_mapped = {
    .init = init, .recv = mapped_recv, .finish = persist_finish, .halt = halt, .fini = fini,
};

const struct loop_be *loop_gpu_backend(int backend)
{
    switch (backend) {
    case LOOP_GPU_STAGED: return &be_staged;
    case LOOP_GPU_DIRECT: return &be_direct;
    case LOOP_GPU_GRAPH: return &be_graph;
    case LOOP_GPU_FLAG: return &be_flag;
    case LOOP_GPU_PERSISTENT: return &be_persistent;
    case LOOP_GPU_MAPPED: return &be_mapped;
    default: return NULL;
    }
}

/* --- one-shot run (tests) ------------------------------------------------------ */
/* Its copies go through gpu_copy, on the legacy stream after the kernel
 * and with its deadline: a stuck GPU is an error here, not a hang. */

int loop_gpu_ephys_once(struct loop_ephys_state *st, const uint8_t *blk, uint32_t nframes, struct loop_ephys_out *out)
{
    if (!gpu_available(NULL, 0))
        return ONI_ENOGPU;
    struct loop_ephys_state *dst = NULL;
    uint8_t *dblk = NULL;
    struct loop_ephys_out *dout = NULL;
    size_t len = (size_t)nframes * st->lay.stride;
    int rc = cu(cudaMalloc((void **)&dst, sizeof *dst));
    if (!rc)
        rc = cu(cudaMalloc((void **)&dblk, len ? len : 1));
    if (!rc)
        rc = cu(cudaMalloc((void **)&dout, sizeof *dout));
    if (!rc)
        rc = gpu_copy(dst, st, sizeof *st);
    if (!rc && len)
        rc = gpu_copy(dblk, blk, len);
    if (!rc)
        rc = cu(loop_cu_ephys(dst, st->lay.nchan, dblk, nframes, dout, 0));
    if (!rc)
        rc = gpu_copy(out, dout, sizeof *out);
    if (!rc)
        rc = gpu_copy(st, dst, sizeof *st);
    cudaFree(dst);
    cudaFree(dblk);
    cudaFree(dout);
    return rc;
}
