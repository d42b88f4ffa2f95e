/* gputime_cuda.c - GPU timings for the roofline and the MAC kernel run once
 * (gputime.h), with CUDA. Copies go through gpu_copy, on the legacy stream
 * after the kernel and with its deadline: a stuck GPU is an error here, not
 * a hang. */
#include <stdint.h>
#include <time.h>
#include <cuda_runtime.h>
#include "bench/gputime.h"
#include "gpu/gpu.h"
#include "loop/cukern.h"
#include "oni.h"
#include "oni/util/clock.h"

static int cu(cudaError_t e)
{
    if (e == cudaSuccess)
        return 0;
    return e == cudaErrorMemoryAllocation ? ONI_EBADALLOC : ONI_ENOGPU;
}

int bench_gpu_mac_once(const float *in, float *out, size_t n, uint32_t iters, uint32_t passes, float seed)
{
    if (!gpu_available(NULL, 0))
        return ONI_ENOGPU;
    if (!in || !out || !n || n > SIZE_MAX / 8)
        return ONI_EINVALARG;
    float *d = NULL;
    int rc = cu(cudaMalloc((void **)&d, 2 * n * 4));
    if (!rc)
        rc = gpu_copy(d, in, n * 4);
    if (!rc)
        rc = cu(loop_cu_mac(d, d + n, n, iters, passes, seed, 0));
    if (!rc)
        rc = gpu_copy(out, d + n, n * 4);
    cudaFree(d);
    return rc;
}

/* How long time_best waits for one run: a roofline kernel takes
 * milliseconds; only a stuck GPU takes this long. */
#define TIME_WAIT_MS 60000u

/* cudaEventSynchronize with a deadline: 0, ONI_ETIMEOUT, or the CUDA error's code. */
static int event_wait(cudaEvent_t e, uint32_t ms)
{
    uint64_t deadline = oni_ms_from_now(ms);
    for (;;) {
        cudaError_t st = cudaEventQuery(e);
        if (st != cudaErrorNotReady)
            return cu(st);
        if (!oni_ms_left(deadline))
            return ONI_ETIMEOUT;
        struct timespec ts = {0, 20000}; /* the time is the events', not this wait's */
        nanosleep(&ts, NULL);
    }
}

/* Best of reps event-timed runs of fn on the GPU. */
static int time_best(int reps, double *best_s, int (*fn)(void *), void *arg)
{
    cudaEvent_t a, b;
    if (cudaEventCreate(&a) != cudaSuccess)
        return ONI_ENOGPU;
    if (cudaEventCreate(&b) != cudaSuccess) {
        cudaEventDestroy(a);
        return ONI_ENOGPU;
    }
    int rc = fn(arg); /* warm-up */
    if (!rc)
        rc = cu(cudaEventRecord(b, 0));
    if (!rc)
        rc = event_wait(b, TIME_WAIT_MS);
    *best_s = 1e30;
    for (int i = 0; i < reps && !rc; i++) {
        float ms = 0;
        cudaEventRecord(a, 0);
        rc = fn(arg);
        cudaEventRecord(b, 0);
        if (!rc)
            rc = event_wait(b, TIME_WAIT_MS);
        if (!rc)
            rc = cu(cudaEventElapsedTime(&ms, a, b));
        if (!rc && ms / 1e3 < *best_s)
            *best_s = ms / 1e3;
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return rc;
}

struct mac_job {
    float *d;
    size_t n;
    uint32_t iters, passes;
};

static int mac_job(void *p)
{
    struct mac_job *j = p;
    return cu(loop_cu_mac(j->d, j->d + j->n, j->n, j->iters, j->passes, 0.1f, 0));
}

int bench_gpu_time_mac(size_t n, uint32_t iters, uint32_t passes, int reps, double *best_s)
{
    if (!gpu_available(NULL, 0))
        return ONI_ENOGPU;
    if (!n || n > SIZE_MAX / 8 || !best_s)
        return ONI_EINVALARG;
    struct mac_job j = {NULL, n, iters, passes};
    int rc = cu(cudaMalloc((void **)&j.d, 2 * n * 4));
    if (!rc)
        rc = cu(cudaMemset(j.d, 0x3c, n * 4)); /* 0.0115f-ish: a finite, non-zero pattern */
    if (!rc)
        rc = time_best(reps, best_s, mac_job, &j);
    cudaFree(j.d);
    return rc;
}

struct copy_job {
    void *a, *b;
    size_t n;
};

static int copy_job(void *p)
{
    struct copy_job *j = p;
    return cu(cudaMemcpyAsync(j->b, j->a, j->n, cudaMemcpyDeviceToDevice, 0));
}

int bench_gpu_time_copy(size_t bytes, int reps, double *best_s)
{
    if (!gpu_available(NULL, 0))
        return ONI_ENOGPU;
    if (!bytes || !best_s)
        return ONI_EINVALARG;
    struct copy_job j = {NULL, NULL, bytes};
    int rc = cu(cudaMalloc(&j.a, bytes));
    if (!rc)
        rc = cu(cudaMalloc(&j.b, bytes));
    if (!rc)
        rc = cu(cudaMemset(j.a, 1, bytes));
    if (!rc)
        rc = time_best(reps, best_s, copy_job, &j);
    cudaFree(j.a);
    cudaFree(j.b);
    return rc;
}
