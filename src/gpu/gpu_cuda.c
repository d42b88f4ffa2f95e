/* gpu_cuda.c - gpu.h on the CUDA runtime and driver APIs (device 0). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sched.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include "gpu.h"
#include "onidefs.h"
#include "oni/util/clock.h"

struct gpu_stream {
    cudaStream_t s;
    /* gpu_stream_wait's completion word (NULL: none could be had, the wait
     * polls cudaStreamQuery instead) and the last value queued for it; lock
     * keeps the values queued in the order they are taken, so the word only
     * goes up. */
    uint32_t *flag;
    uint32_t seq;
    pthread_mutex_t lock;
};

static int poll_until(cudaError_t (*query)(void *), void *obj, uint32_t timeout_ms, const char *what);
static cudaError_t query_stream(void *s);

struct gpu_event {
    cudaEvent_t e;
};

static _Thread_local char last_error[160];
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static int probe_ok;
static char probe_why[160];

static int fail_rt(cudaError_t err, const char *what, int code)
{
    snprintf(last_error, sizeof last_error, "%s: %s", what, cudaGetErrorString(err));
    return code;
}

static int fail_drv(CUresult res, const char *what, int code)
{
    const char *msg = NULL;
    cuGetErrorString(res, &msg);
    snprintf(last_error, sizeof last_error, "%s: %s", what, msg ? msg : "unknown CUDA driver error");
    return code;
}

/* Why there is no device, in words a user can act on: CUDA's own text for
 * a missing driver ("CUDA driver version is insufficient") would send them
 * to upgrade a driver that is not there. */
static void say_no_device(cudaError_t err)
{
    int drv = 0, rt = 0;
    if (err == cudaErrorNoDevice) {
        snprintf(probe_why, sizeof probe_why, "no CUDA device: none found");
    } else if (err == cudaErrorInsufficientDriver && (cudaDriverGetVersion(&drv) != cudaSuccess || !drv)) {
        snprintf(probe_why, sizeof probe_why, "no CUDA device: no NVIDIA driver (libcuda.so.1 not found)");
    } else if (err == cudaErrorInsufficientDriver) {
        cudaRuntimeGetVersion(&rt);
        snprintf(probe_why, sizeof probe_why, "no CUDA device: the NVIDIA driver supports CUDA %d.%d, this build needs %d.%d",
                 drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
    } else {
        snprintf(probe_why, sizeof probe_why, "no CUDA device: %s", cudaGetErrorString(err));
    }
}

static void probe(void)
{
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        say_no_device(err);
        return;
    }
    if (n < 1) {
        snprintf(probe_why, sizeof probe_why, "no CUDA device: none found");
        return;
    }
    err = cudaFree(0); /* creates the primary context */
    if (err != cudaSuccess) {
        say_no_device(err);
        return;
    }
    probe_ok = 1;
}

/* The driver API needs the primary context current on the calling thread; the
 * runtime makes it current lazily, so make sure once per thread. */
static int ready(void)
{
    static _Thread_local int current;
    pthread_once(&probe_once, probe);
    if (!probe_ok) {
        snprintf(last_error, sizeof last_error, "%s", probe_why);
        return ONI_ENOGPU;
    }
    if (!current) {
        cudaError_t err = cudaSetDevice(0);
        if (err != cudaSuccess)
            return fail_rt(err, "cudaSetDevice", ONI_ENOGPU);
        err = cudaFree(0);
        if (err != cudaSuccess)
            return fail_rt(err, "cudaFree(0)", ONI_ENOGPU);
        current = 1;
    }
    return 0;
}

int gpu_available(char *why, size_t why_cap)
{
    pthread_once(&probe_once, probe);
    if (!probe_ok && why && why_cap)
        snprintf(why, why_cap, "%s", probe_why);
    return probe_ok;
}

int gpu_name(char *name, size_t cap)
{
    if (!name || !cap)
        return ONI_EINVALARG;
    int rc = ready();
    if (rc)
        return rc;
    struct cudaDeviceProp prop;
    cudaError_t err = cudaGetDeviceProperties(&prop, 0);
    if (err != cudaSuccess)
        return fail_rt(err, "cudaGetDeviceProperties", ONI_ENOGPU);
    snprintf(name, cap, "%s", prop.name);
    return 0;
}

const char *gpu_error(void)
{
    return last_error;
}

int gpu_query(const void *p, struct gpu_ptr_info *info)
{
    if (!info)
        return ONI_EINVALARG;
    memset(info, 0, sizeof *info);
    if (ready())
        return 0; /* no usable CUDA: nothing can be GPU memory */
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                   CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                   CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    unsigned int type = 0;
    int managed = 0, ordinal = -1;
    unsigned long long id = 0;
    CUdeviceptr start = 0;
    size_t size = 0;
    void *data[] = {&type, &managed, &ordinal, &id, &start, &size};
    CUresult res = cuPointerGetAttributes(6, attrs, data, (CUdeviceptr)(uintptr_t)p);
    /* Memory CUDA never saw answers success with type 0 (or INVALID_VALUE on
     * some drivers): both mean plain host memory. */
    if (res != CUDA_SUCCESS || type == 0)
        return 0;
    info->device = ordinal;
    info->buffer_id = id;
    info->base = (void *)(uintptr_t)start;
    info->len = size;
    if (managed)
        info->kind = GPU_KIND_MANAGED;
    else if (type == CU_MEMORYTYPE_DEVICE)
        info->kind = GPU_KIND_DEVICE;
    else
        info->kind = GPU_KIND_HOST_PINNED;
    return 0;
}

int gpu_buffer_id(const void *p, unsigned long long *id)
{
    if (!id)
        return ONI_EINVALARG;
    *id = 0;
    if (ready())
        return 0;
    /* Memory CUDA does not know fails the call: id 0, as gpu_query's host memory. */
    if (cuPointerGetAttribute(id, CU_POINTER_ATTRIBUTE_BUFFER_ID, (CUdeviceptr)(uintptr_t)p) != CUDA_SUCCESS)
        *id = 0;
    return 0;
}

int gpu_pin_device(const void *p, struct gpu_ptr_info *info)
{
    int rc = ready();
    if (!rc)
        rc = gpu_query(p, info);
    if (rc)
        return rc;
    if (info->kind != GPU_KIND_DEVICE) {
        snprintf(last_error, sizeof last_error, "not device memory");
        return ONI_EINVALARG;
    }
    unsigned int one = 1;
    CUresult res = cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, (CUdeviceptr)(uintptr_t)p);
    if (res != CUDA_SUCCESS)
        return fail_drv(res, "cuPointerSetAttribute(SYNC_MEMOPS)", ONI_EINVALARG);
    return 0;
}

int gpu_alloc(void **p, size_t n)
{
    if (!p)
        return ONI_EINVALARG;
    *p = NULL;
    if (!n)
        return ONI_EINVALARG;
    int rc = ready();
    if (rc)
        return rc;
    cudaError_t err = cudaMalloc(p, n);
    if (err != cudaSuccess) {
        *p = NULL;
        return fail_rt(err, "cudaMalloc", ONI_EBADALLOC);
    }
    return 0;
}

void gpu_free(void *p)
{
    if (p && !ready())
        cudaFree(p);
}

int gpu_host_alloc(void **p, size_t n)
{
    if (!p)
        return ONI_EINVALARG;
    *p = NULL;
    if (!n)
        return ONI_EINVALARG;
    int rc = ready();
    if (rc)
        return rc;
    cudaError_t err = cudaHostAlloc(p, n, cudaHostAllocMapped | cudaHostAllocPortable);
    if (err != cudaSuccess) {
        *p = NULL;
        return fail_rt(err, "cudaHostAlloc", ONI_EBADALLOC);
    }
    return 0;
}

void gpu_host_free(void *p)
{
    if (p && !ready())
        cudaFreeHost(p);
}

int gpu_host_register(void *p, size_t n)
{
    if (!p || !n)
        return ONI_EINVALARG;
    int rc = ready();
    if (rc)
        return rc;
    cudaError_t err = cudaHostRegister(p, n, cudaHostRegisterMapped | cudaHostRegisterPortable);
    if (err == cudaErrorHostMemoryAlreadyRegistered)
        return fail_rt(err, "cudaHostRegister", ONI_EPINNED);
    if (err != cudaSuccess)
        return fail_rt(err, "cudaHostRegister", ONI_EINVALARG);
    return 0;
}

int gpu_host_unregister(void *p)
{
    int rc = ready();
    if (rc)
        return rc;
    cudaError_t err = cudaHostUnregister(p);
    if (err == cudaErrorHostMemoryNotRegistered)
        return fail_rt(err, "cudaHostUnregister", ONI_ENOTPINNED);
    if (err != cudaSuccess)
        return fail_rt(err, "cudaHostUnregister", ONI_EINVALARG);
    return 0;
}

_Static_assert(sizeof(cudaIpcMemHandle_t) == GPU_IPC_HANDLE_SIZE, "CUDA IPC handle size");

int gpu_ipc_export(const void *base, uint8_t handle[GPU_IPC_HANDLE_SIZE])
{
    if (!base || !handle)
        return ONI_EINVALARG;
    int rc = ready();
    if (rc)
        return rc;
    cudaIpcMemHandle_t h;
    cudaError_t err = cudaIpcGetMemHandle(&h, (void *)base);
    if (err != cudaSuccess)
        return fail_rt(err, "cudaIpcGetMemHandle", ONI_EINVALARG);
    memcpy(handle, &h, sizeof h);
    return 0;
}

int gpu_ipc_open(const uint8_t handle[GPU_IPC_HANDLE_SIZE], void **p)
{
    if (!handle || !p)
        return ONI_EINVALARG;
    *p = NULL;
    int rc = ready();
    if (rc)
        return rc;
    cudaIpcMemHandle_t h;
    memcpy(&h, handle, sizeof h);
    cudaError_t err = cudaIpcOpenMemHandle(p, h, cudaIpcMemLazyEnablePeerAccess);
    if (err != cudaSuccess) {
        *p = NULL;
        cudaGetLastError(); /* not sticky: clear it */
        return fail_rt(err, "cudaIpcOpenMemHandle", ONI_EINVALARG);
    }
    return 0;
}

int gpu_ipc_close(void *p)
{
    if (!p)
        return ONI_EINVALARG;
    int rc = ready();
    if (rc)
        return rc;
    cudaError_t err = cudaIpcCloseMemHandle(p);
    return err == cudaSuccess ? 0 : fail_rt(err, "cudaIpcCloseMemHandle", ONI_EINVALARG);
}

/* Completion words: 64-byte slots of page-locked, mapped pages that are
 * never freed. cudaFreeHost waits for the whole device (it took 299 ms
 * behind a running kernel on the H100), so a stream's word goes back to
 * this list instead. A free slot holds the next free one at FLAG_LINK,
 * beside the word: the word keeps its last stream's value, which flag_take
 * clears (left, it would end a new stream's first waits early; test_gpu_api
 * gpu_wait_on_a_recycled_word_waits). */
#define FLAG_SLOT 64
#define FLAG_LINK(slot) ((void **)((uint8_t *)(slot) + 8))
static pthread_mutex_t flag_lock = PTHREAD_MUTEX_INITIALIZER;
static void *flag_free;

static uint32_t *flag_take(void)
{
    pthread_mutex_lock(&flag_lock);
    if (!flag_free) {
        uint8_t *page;
        if (cudaHostAlloc((void **)&page, 4096, cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess) {
            cudaGetLastError();
            pthread_mutex_unlock(&flag_lock);
            return NULL;
        }
        for (size_t off = 0; off < 4096; off += FLAG_SLOT) {
            *FLAG_LINK(page + off) = flag_free;
            flag_free = page + off;
        }
    }
    uint32_t *w = flag_free;
    flag_free = *FLAG_LINK(w);
    pthread_mutex_unlock(&flag_lock);
    *w = 0;
    return w;
}

static void flag_give(uint32_t *w)
{
    pthread_mutex_lock(&flag_lock);
    *FLAG_LINK(w) = flag_free;
    flag_free = w;
    pthread_mutex_unlock(&flag_lock);
}

int gpu_stream_create(struct gpu_stream **s)
{
    if (!s)
        return ONI_EINVALARG;
    *s = NULL;
    int rc = ready();
    if (rc)
        return rc;
    struct gpu_stream *st = calloc(1, sizeof *st);
    if (!st)
        return ONI_EBADALLOC;
    cudaError_t err = cudaStreamCreateWithFlags(&st->s, cudaStreamNonBlocking);
    if (err != cudaSuccess) {
        free(st);
        return fail_rt(err, "cudaStreamCreate", ONI_ENOGPU);
    }
    st->flag = flag_take();
    pthread_mutex_init(&st->lock, NULL);
    *s = st;
    return 0;
}

void gpu_stream_destroy(struct gpu_stream *s)
{
    if (!s)
        return;
    if (!ready()) {
        /* Let queued work finish, with a deadline: a stream held by a word
         * that is never written must not hang its owner. CUDA releases the
         * stream once its work is done either way. */
        int rc = poll_until(query_stream, s, GPU_SYNC_TIMEOUT_MS, "cudaStreamQuery");
        cudaStreamDestroy(s->s);
        if (s->flag && rc != ONI_ETIMEOUT)
            flag_give(s->flag); /* else the stream may still write it: never reused */
    }
    pthread_mutex_destroy(&s->lock);
    free(s);
}

int gpu_copy_async(struct gpu_stream *s, void *dst, const void *src, size_t n)
{
    if (!s || (!n ? 0 : (!dst || !src)))
        return ONI_EINVALARG;
    if (!n)
        return 0;
    int rc = ready();
    if (rc)
        return rc;
    cudaError_t err = cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, s->s);
    if (err != cudaSuccess)
        return fail_rt(err, "cudaMemcpyAsync", ONI_EINVALARG);
    return 0;
}

int gpu_write_word_async(struct gpu_stream *s, volatile uint32_t *word, uint32_t value)
{
    if (!s || !word)
        return ONI_EINVALARG;
    int rc = ready();
    if (rc)
        return rc;
    CUresult res = cuStreamWriteValue32((CUstream)s->s, (CUdeviceptr)(uintptr_t)word, value,
                                        CU_STREAM_WRITE_VALUE_DEFAULT);
    if (res != CUDA_SUCCESS)
        return fail_drv(res, "cuStreamWriteValue32", ONI_EINVALARG);
    return 0;
}

int gpu_wait_word_async(struct gpu_stream *s, const volatile uint32_t *word, uint32_t value)
{
    if (!s || !word)
        return ONI_EINVALARG;
    int rc = ready();
    if (rc)
        return rc;
    CUresult res = cuStreamWaitValue32((CUstream)s->s, (CUdeviceptr)(uintptr_t)word, value,
                                       CU_STREAM_WAIT_VALUE_GEQ);
    if (res != CUDA_SUCCESS)
        return fail_drv(res, "cuStreamWaitValue32", ONI_EINVALARG);
    return 0;
}

/* Poll a query function until it stops answering "not ready" or the deadline
 * passes. Spinning keeps the latency of small transfers low; after a while it
 * yields so that a long wait does not starve the card's threads. */
static int poll_until(cudaError_t (*query)(void *), void *obj, uint32_t timeout_ms, const char *what)
{
    uint64_t deadline = oni_ms_from_now(timeout_ms);
    for (unsigned spins = 0;; spins++) {
        cudaError_t err = query(obj);
        if (err == cudaSuccess)
            return 0;
        if (err != cudaErrorNotReady)
            return fail_rt(err, what, ONI_EREADFAILURE);
        if (oni_now_ns() >= deadline) {
            snprintf(last_error, sizeof last_error, "%s: timed out", what);
            return ONI_ETIMEOUT;
        }
        if (spins > 20000)
            sched_yield();
    }
}

static cudaError_t query_stream(void *s) { return cudaStreamQuery(((struct gpu_stream *)s)->s); }
static cudaError_t query_event(void *e) { return cudaEventQuery(((struct gpu_event *)e)->e); }

/* Spin until the stream has written seq (or later) to its flag: one load
 * from host memory per look, where each cudaStreamQuery is a driver call.
 * On the H100 the copy is seen done about 0.7 us sooner at 4 KiB
 * (docs/transfers.md, "The floor"). The stream is still queried now and
 * then, for errors (a failed stream never writes the flag) and the deadline. */
static int wait_flag(struct gpu_stream *s, uint32_t seq, uint32_t timeout_ms)
{
    uint64_t now = oni_now_ns(), deadline = now + (uint64_t)timeout_ms * 1000000u;
    uint64_t yield_after = now + 1000000u; /* spin alone for the first millisecond */
    for (unsigned spins = 1;; spins++) {
        if ((int32_t)(__atomic_load_n(s->flag, __ATOMIC_ACQUIRE) - seq) >= 0)
            return 0;
        if (spins % 4096)
            continue;
        cudaError_t err = cudaStreamQuery(s->s);
        if (err == cudaSuccess)
            return 0;
        if (err != cudaErrorNotReady)
            return fail_rt(err, "cudaStreamQuery", ONI_EREADFAILURE);
        if ((now = oni_now_ns()) >= deadline) {
            snprintf(last_error, sizeof last_error, "stream wait: timed out");
            return ONI_ETIMEOUT;
        }
        if (now >= yield_after)
            sched_yield();
    }
}

int gpu_stream_wait(struct gpu_stream *s, uint32_t timeout_ms)
{
    if (!s)
        return ONI_EINVALARG;
    int rc = ready();
    if (rc)
        return rc;
    if (s->flag && timeout_ms) {
        /* Waiters of one stream may overlap: each waits for its own value,
         * queued in the order taken. */
        pthread_mutex_lock(&s->lock);
        uint32_t seq = ++s->seq;
        CUresult res = cuStreamWriteValue32((CUstream)s->s, (CUdeviceptr)(uintptr_t)s->flag, seq,
                                            CU_STREAM_WRITE_VALUE_DEFAULT);
        pthread_mutex_unlock(&s->lock);
        if (res == CUDA_SUCCESS)
            return wait_flag(s, seq, timeout_ms);
    }
    return poll_until(query_stream, s, timeout_ms, "cudaStreamQuery");
}

int gpu_event_create(struct gpu_event **e)
{
    if (!e)
        return ONI_EINVALARG;
    *e = NULL;
    int rc = ready();
    if (rc)
        return rc;
    struct gpu_event *ev = calloc(1, sizeof *ev);
    if (!ev)
        return ONI_EBADALLOC;
    cudaError_t err = cudaEventCreateWithFlags(&ev->e, cudaEventDisableTiming);
    if (err != cudaSuccess) {
        free(ev);
        return fail_rt(err, "cudaEventCreate", ONI_ENOGPU);
    }
    *e = ev;
    return 0;
}

void gpu_event_destroy(struct gpu_event *e)
{
    if (!e)
        return;
    if (!ready())
        cudaEventDestroy(e->e);
    free(e);
}

int gpu_event_record(struct gpu_event *e, struct gpu_stream *s)
{
    if (!e || !s)
        return ONI_EINVALARG;
    int rc = ready();
    if (rc)
        return rc;
    cudaError_t err = cudaEventRecord(e->e, s->s);
    return err == cudaSuccess ? 0 : fail_rt(err, "cudaEventRecord", ONI_EINVALARG);
}

int gpu_event_wait(struct gpu_event *e, uint32_t timeout_ms)
{
    if (!e)
        return ONI_EINVALARG;
    int rc = ready();
    if (rc)
        return rc;
    return poll_until(query_event, e, timeout_ms, "cudaEventQuery");
}

int gpu_copy(void *dst, const void *src, size_t n)
{
    if (!n)
        return 0;
    if (!dst || !src)
        return ONI_EINVALARG;
    int rc = ready();
    if (rc)
        return rc;
    cudaError_t err = cudaMemcpy(dst, src, n, cudaMemcpyDefault);
    if (err != cudaSuccess)
        return fail_rt(err, "cudaMemcpy", ONI_EINVALARG);
    /* From pageable memory cudaMemcpy may return once the source is staged,
     * before the bytes land: work on another stream (the card's DMA engine,
     * the DMA agent) could read the old ones. Wait for the default stream. */
    struct gpu_stream legacy = {0};
    return poll_until(query_stream, &legacy, GPU_SYNC_TIMEOUT_MS, "cudaMemcpy");
}

int gpu_memset(void *p, int value, size_t n)
{
    if (!n)
        return 0;
    if (!p)
        return ONI_EINVALARG;
    int rc = ready();
    if (rc)
        return rc;
    struct gpu_stream legacy = {0}; /* the default stream, waited for with a deadline */
    cudaError_t err = cudaMemsetAsync(p, value, n, legacy.s);
    if (err != cudaSuccess)
        return fail_rt(err, "cudaMemset", ONI_EINVALARG);
    return poll_until(query_stream, &legacy, GPU_SYNC_TIMEOUT_MS, "cudaMemset");
}
