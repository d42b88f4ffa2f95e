/* dma_agent.cu - the DMA engine's GPU-resident agent (dma_agent.h). */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda/atomic>
#include <cuda_runtime.h>

extern "C" {
#include "dma_agent.h"
#include "gpu/gpu.h"
#include "onidefs.h"
#include "oni.h"
#include "oni/util/clock.h"
}
#include "gpu/gpu_device.cuh"

#define AGENT_THREADS 512

/* One descriptor, one 64-byte line that the agent reads whole in each poll
 * (see poll()). seq (ticket + 1, low 32 bits) is stored last, with release
 * order; check, a hash of the words before it and seq, stored before seq,
 * lets the agent refuse a poll that saw the line half written (the read of a
 * line is not promised to be one snapshot) and look again. */
struct __align__(64) agent_desc {
    unsigned long long dst, src, done, n;
    unsigned int done_seq, flags, pad[4];
    unsigned int seq, check;  /* words 14 and 15 */
};
static_assert(sizeof(struct agent_desc) == 64 && offsetof(struct agent_desc, seq) == 4 * 14,
              "a descriptor is one 64-byte line, seq after the checked words");

/* The check word of a descriptor: a multiply-xorshift hash of its 32-bit
 * words, so that a mix of old and new fields fails it. */
#define DESC_WORDS_CHECKED 14 /* the words before seq */
__host__ __device__ static unsigned int desc_check(const unsigned int *w, unsigned int seq)
{
    unsigned int h = 0x2545F491u ^ seq;
    for (int i = 0; i < DESC_WORDS_CHECKED; i++) {
        h = (h ^ w[i]) * 0x9E3779B1u;
        h ^= h >> 15;
    }
    return h;
}

enum { DESC_HOST_READER = 1 };

/* The control block, in mapped host memory. */
struct agent_ctl {
    unsigned long long completed;     /* agent: tickets done (all below it) */
    unsigned int stop;                /* host: 1 = leave now */
    unsigned int exited;              /* agent: epoch of the last kernel that left */
    struct agent_desc ring[AGENT_RING]; /* 64-byte aligned (the struct's alignment) */
};

struct emu_agent {
    struct agent_ctl *ctl;            /* host view */
    struct agent_ctl *dctl;           /* device view */
    cudaStream_t s;
    pthread_mutex_t lock;             /* posting and launching */
    unsigned long long posted;        /* tickets handed out, under lock */
    unsigned int epoch;               /* kernels launched, under lock */
    uint64_t launches;
};

/* --- device side ------------------------------------------------------------- */

/* A 16-byte load that is never cached or merged with another: host memory
 * the host changes under us. */
__device__ static uint4 load_volatile16(const void *p)
{
    uint4 v;
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p)
                 : "memory");
    return v;
}

/* Copy n bytes; the side over PCIe (host_side: 0 = src, 1 = dst) is accessed
 * in 16-byte units where it can be, the other side in units its alignment
 * relative to the first allows (16, 4 or 1 bytes). */
__device__ static void copy_block(unsigned char *dst, const unsigned char *src, unsigned long long n, int host_side)
{
    unsigned long long head;
    uintptr_t a = host_side ? (uintptr_t)dst : (uintptr_t)src;
    head = (16 - (a & 15)) & 15;
    if (head > n)
        head = n;
    for (unsigned long long i = threadIdx.x; i < head; i += blockDim.x)
        dst[i] = src[i];
    dst += head, src += head, n -= head;
    unsigned long long body = n / 16;
    int rel = (int)(((uintptr_t)dst ^ (uintptr_t)src) & 15);
    if (rel == 0) {
        const uint4 *s = (const uint4 *)src;
        uint4 *d = (uint4 *)dst;
        unsigned long long i = threadIdx.x;
        for (; i + blockDim.x < body; i += 2 * blockDim.x) { /* two loads in flight per thread */
            uint4 x = s[i], y = s[i + blockDim.x];
            d[i] = x;
            d[i + blockDim.x] = y;
        }
        if (i < body)
            d[i] = s[i];
    } else if ((rel & 3) == 0) {
        for (unsigned long long i = threadIdx.x; i < body; i += blockDim.x) {
            const unsigned int *s = (const unsigned int *)(src + 16 * i);
            unsigned int *d = (unsigned int *)(dst + 16 * i);
            if (host_side) {
                uint4 v = make_uint4(s[0], s[1], s[2], s[3]);
                *(uint4 *)d = v;
            } else {
                uint4 v = *(const uint4 *)s;
                d[0] = v.x, d[1] = v.y, d[2] = v.z, d[3] = v.w;
            }
        }
    } else {
        for (unsigned long long i = threadIdx.x; i < body * 16; i += blockDim.x)
            dst[i] = src[i];
    }
    for (unsigned long long i = body * 16 + threadIdx.x; i < n; i += blockDim.x)
        dst[i] = src[i];
}

enum { CMD_WORK = 1, CMD_LEAVE = 2 };

/* Warp 0 waits for descriptor `next` (or a reason to leave) and sets *cmd;
 * with CMD_WORK, *d holds the descriptor. Each poll is one load instruction
 * of the whole 64-byte line (lanes 0-3, 16 bytes each), so one read across
 * PCIe: a thread's loads from host memory are not overlapped, and reading
 * the sequence word and the fields one after the other cost one round trip
 * each (about 1.2 us on the H100 VM; docs/transfers.md). The stop word
 * (another read across PCIe) and the clock are looked at every 64th poll
 * (a halt also clears the pending slots). */
__device__ static void poll(struct agent_ctl *ctl, struct agent_desc *d, int *cmd, unsigned long long next,
                            unsigned long long start, unsigned long long idle_since)
{
    const unsigned int lane = threadIdx.x, all = 0xFFFFFFFFu;
    const uint4 *slot = (const uint4 *)&ctl->ring[next % AGENT_RING];
    const unsigned int want = (unsigned int)(next + 1);
    int old = lane == 0 && gpu_globaltimer() - start > AGENT_LIFE_MS * 1000000ull; /* even when never idle */
    if (__shfl_sync(all, old, 0)) { /* every lane returns alike */
        if (lane == 0)
            *cmd = CMD_LEAVE;
        return;
    }
    for (unsigned int it = 1;; it++) {
        uint4 v = make_uint4(0, 0, 0, 0);
        if (lane < 4)
            v = load_volatile16(slot + lane);
        union {
            unsigned int w[16];
            struct agent_desc f;
        } u;
        for (int j = 0; j < 4; j++) { /* every lane gets the whole line */
            u.w[4 * j] = __shfl_sync(all, v.x, j);
            u.w[4 * j + 1] = __shfl_sync(all, v.y, j);
            u.w[4 * j + 2] = __shfl_sync(all, v.z, j);
            u.w[4 * j + 3] = __shfl_sync(all, v.w, j);
        }
        if (u.f.seq == want && u.f.check == desc_check(u.w, want)) {
            /* In every lane, the ones that loaded the line among them: the
             * payload reads (by every thread, after the barrier) come after. */
            cuda::atomic_thread_fence(cuda::memory_order_acquire, cuda::thread_scope_system);
            if (lane == 0) {
                *d = u.f;
                *cmd = CMD_WORK;
            }
            return;
        }
        if (it & 63)
            continue;
        int leave = 0;
        if (lane == 0) {
            cuda::atomic_ref<unsigned int, cuda::thread_scope_system> stop(ctl->stop);
            unsigned long long t = gpu_globaltimer();
            leave = stop.load(cuda::memory_order_relaxed) || t - idle_since > AGENT_IDLE_MS * 1000000ull ||
                    t - start > AGENT_LIFE_MS * 1000000ull;
        }
        if (__shfl_sync(all, leave, 0)) {
            if (lane == 0)
                *cmd = CMD_LEAVE;
            return;
        }
    }
}

__global__ void agent_kernel(struct agent_ctl *ctl, unsigned int epoch)
{
    __shared__ struct agent_desc d;
    __shared__ int cmd;
    __shared__ unsigned long long next;
    if (threadIdx.x == 0)
        next = *(volatile unsigned long long *)&ctl->completed;
    unsigned long long start = gpu_globaltimer(), idle_since = start;
    __syncthreads();
    for (;;) {
        if (threadIdx.x < 32)
            poll(ctl, &d, &cmd, next, start, idle_since);
        __syncthreads();
        if (cmd != CMD_WORK)
            break;
        copy_block((unsigned char *)d.dst, (const unsigned char *)d.src, d.n, (d.flags & DESC_HOST_READER) != 0);
        /* Each thread orders its own payload stores before the barrier; for a
         * host reader they must be visible system-wide. */
        if (d.flags & DESC_HOST_READER)
            __threadfence_system();
        else
            __threadfence();
        __syncthreads();
        if (threadIdx.x == 0) {
            if (d.done) {
                *(volatile unsigned int *)d.done = d.done_seq;
                if (!(d.flags & DESC_HOST_READER))
                    __threadfence();
            }
            __threadfence_system(); /* the payload (and record) before the ticket the host reads */
            cuda::atomic_ref<unsigned long long, cuda::thread_scope_system> done(ctl->completed);
            done.store(next + 1, cuda::memory_order_release);
            next++;
            idle_since = gpu_globaltimer();
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        cuda::atomic_ref<unsigned int, cuda::thread_scope_system> ex(ctl->exited);
        ex.store(epoch, cuda::memory_order_release);
    }
}

/* --- host side --------------------------------------------------------------- */

static void say(const char *what, cudaError_t err)
{
    fprintf(stderr, "emu: DMA agent: %s: %s\n", what, cudaGetErrorString(err));
}

/* Launch the next kernel; the caller holds a->lock. */
static int launch(struct emu_agent *a)
{
    a->epoch++;
    agent_kernel<<<1, AGENT_THREADS, 0, a->s>>>(a->dctl, a->epoch);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
        a->epoch--;
        say("kernel launch", err);
        return ONI_EINIT;
    }
    a->launches++;
    return 0;
}

/* The kernel of the latest epoch has left: launch one if tickets are open
 * (the caller holds a->lock). Kernels run one after the other in a->s. */
static int revive(struct emu_agent *a)
{
    cuda::atomic_ref<unsigned int, cuda::thread_scope_system> ex(a->ctl->exited);
    cuda::atomic_ref<unsigned long long, cuda::thread_scope_system> done(a->ctl->completed);
    cuda::atomic_ref<unsigned int, cuda::thread_scope_system> stop(a->ctl->stop);
    if (stop.load(cuda::memory_order_acquire))
        return ONI_EINIT; /* halted or stopping: nothing runs any more */
    if (ex.load(cuda::memory_order_acquire) != a->epoch || done.load(cuda::memory_order_acquire) >= a->posted)
        return 0;
    return launch(a);
}

/* Wait until the kernel of the latest epoch has left, at most until deadline_ns. */
static int left(struct emu_agent *a, uint64_t deadline_ns)
{
    cuda::atomic_ref<unsigned int, cuda::thread_scope_system> ex(a->ctl->exited);
    while (ex.load(cuda::memory_order_acquire) != __atomic_load_n(&a->epoch, __ATOMIC_RELAXED))
        if (oni_now_ns() >= deadline_ns)
            return ONI_ETIMEOUT;
    return 0;
}

extern "C" void emu_agent_halt(struct emu_agent *a)
{
    if (!a)
        return;
    pthread_mutex_lock(&a->lock);
    cuda::atomic_ref<unsigned int, cuda::thread_scope_system> stop(a->ctl->stop);
    stop.store(1, cuda::memory_order_seq_cst);
    /* Clear what is still pending: the agent takes no descriptor it has not
     * seen yet (one it is copying now finishes). */
    cuda::atomic_ref<unsigned long long, cuda::thread_scope_system> completed(a->ctl->completed);
    for (unsigned long long t = completed.load(cuda::memory_order_acquire); t < a->posted; t++) {
        cuda::atomic_ref<unsigned int, cuda::thread_scope_system> seq(a->ctl->ring[t % AGENT_RING].seq);
        seq.store(0, cuda::memory_order_seq_cst);
    }
    pthread_mutex_unlock(&a->lock);
    left(a, oni_now_ns() + 100000000u); /* the copy in progress, if any, lands before we return */
}

extern "C" int emu_agent_devptr(const void *p, void **dev)
{
    if (!p || !dev)
        return ONI_EINVALARG;
    if (!gpu_available(NULL, 0))
        return ONI_ENOGPU;
    cudaError_t err = cudaHostGetDevicePointer(dev, (void *)p, 0);
    if (err != cudaSuccess) {
        cudaGetLastError();
        return ONI_EINVALARG;
    }
    return 0;
}

extern "C" int emu_agent_start(struct emu_agent **out)
{
    if (!out)
        return ONI_EINVALARG;
    if (!gpu_available(NULL, 0))
        return ONI_ENOGPU;
    struct emu_agent *a = (struct emu_agent *)calloc(1, sizeof *a);
    if (!a)
        return ONI_EBADALLOC;
    cudaError_t err = cudaSetDevice(0);
    if (err == cudaSuccess)
        err = cudaHostAlloc((void **)&a->ctl, sizeof *a->ctl, cudaHostAllocMapped | cudaHostAllocPortable);
    if (err != cudaSuccess) {
        say("ring", err);
        free(a);
        return ONI_EBADALLOC;
    }
    memset(a->ctl, 0, sizeof *a->ctl);
    err = cudaHostGetDevicePointer((void **)&a->dctl, a->ctl, 0);
    if (err == cudaSuccess)
        err = cudaStreamCreateWithFlags(&a->s, cudaStreamNonBlocking);
    if (err != cudaSuccess) {
        say("setup", err);
        cudaFreeHost(a->ctl);
        free(a);
        return ONI_EINIT;
    }
    pthread_mutex_init(&a->lock, NULL);
    pthread_mutex_lock(&a->lock);
    int rc = launch(a);
    pthread_mutex_unlock(&a->lock);
    if (rc) {
        cudaStreamDestroy(a->s);
        cudaFreeHost(a->ctl);
        pthread_mutex_destroy(&a->lock);
        free(a);
        return rc;
    }
    *out = a;
    return 0;
}

extern "C" int emu_agent_stop(struct emu_agent *a, uint32_t timeout_ms)
{
    if (!a)
        return 0;
    cuda::atomic_ref<unsigned int, cuda::thread_scope_system> stop(a->ctl->stop);
    stop.store(1, cuda::memory_order_release);
    uint64_t deadline = oni_ms_from_now(timeout_ms);
    cudaError_t err;
    while ((err = cudaStreamQuery(a->s)) == cudaErrorNotReady && oni_now_ns() < deadline)
        ;
    if (err == cudaErrorNotReady) {
        fprintf(stderr, "emu: DMA agent: the kernel did not stop within %u ms; its memory is left allocated\n",
                timeout_ms);
        return ONI_ETIMEOUT;
    }
    if (err != cudaSuccess)
        say("kernel", err);
    cudaStreamDestroy(a->s);
    cudaFreeHost(a->ctl);
    pthread_mutex_destroy(&a->lock);
    free(a);
    return 0;
}

extern "C" int emu_agent_post(struct emu_agent *a, void *dst, const void *src, size_t n, uint32_t *done,
                              uint32_t done_seq, int host_reader, uint64_t deadline_ns, uint64_t *ticket)
{
    if (!a || !dst || !src || !n || !ticket)
        return ONI_EINVALARG;
    cuda::atomic_ref<unsigned long long, cuda::thread_scope_system> completed(a->ctl->completed);
    pthread_mutex_lock(&a->lock);
    int rc = 0;
    /* Ring full: wait for the agent (reviving it if it left), up to the deadline. */
    while (a->posted - completed.load(cuda::memory_order_acquire) >= AGENT_RING) {
        if ((rc = revive(a)))
            break;
        if (oni_now_ns() >= deadline_ns) {
            rc = ONI_ETIMEOUT;
            break;
        }
    }
    cuda::atomic_ref<unsigned int, cuda::thread_scope_system> stop(a->ctl->stop);
    if (!rc && stop.load(cuda::memory_order_acquire))
        rc = ONI_EINIT; /* halted: a descriptor posted now could still be taken by the leaving kernel */
    if (!rc) {
        unsigned long long t = a->posted++;
        struct agent_desc *slot = &a->ctl->ring[t % AGENT_RING], v;
        memset(&v, 0, sizeof v);
        v.dst = (uintptr_t)dst;
        v.src = (uintptr_t)src;
        v.done = (uintptr_t)done;
        v.n = n;
        v.done_seq = done_seq;
        v.flags = host_reader ? DESC_HOST_READER : 0;
        unsigned int w[DESC_WORDS_CHECKED];
        memcpy(w, &v, sizeof w); /* the words the agent checks, without type punning */
        v.check = desc_check(w, (unsigned int)(t + 1));
        memcpy(slot, &v, offsetof(struct agent_desc, seq)); /* everything before seq */
        slot->check = v.check;
        cuda::atomic_ref<unsigned int, cuda::thread_scope_system> seq(slot->seq);
        seq.store((unsigned int)(t + 1), cuda::memory_order_seq_cst);
        *ticket = t + 1;
        rc = revive(a); /* seq_cst above: the agent either sees this slot or has left and says so */
        if (rc)
            *ticket = 0; /* posted, but no kernel to run it: the caller must not wait on it */
    }
    pthread_mutex_unlock(&a->lock);
    return rc;
}

extern "C" int emu_agent_wait(struct emu_agent *a, uint64_t ticket, uint64_t deadline_ns)
{
    if (!a)
        return ONI_EINVALARG;
    cuda::atomic_ref<unsigned long long, cuda::thread_scope_system> completed(a->ctl->completed);
    cuda::atomic_ref<unsigned int, cuda::thread_scope_system> ex(a->ctl->exited);
    for (uint32_t k = 0;; k++) {
        if (completed.load(cuda::memory_order_acquire) >= ticket)
            return 0;
        /* Now and then: has the kernel left with this ticket open (its
         * lifetime ended between two descriptors)? Then launch the next. */
        if ((k & 255) == 255) {
            cuda::atomic_ref<unsigned int, cuda::thread_scope_system> stop(a->ctl->stop);
            if (stop.load(cuda::memory_order_relaxed)) {
                left(a, deadline_ns); /* a copy in progress lands before the caller hears of it */
                return ONI_EINIT;    /* halted: what is left in the ring never runs */
            }
            if (ex.load(cuda::memory_order_acquire) == __atomic_load_n(&a->epoch, __ATOMIC_RELAXED)) {
                pthread_mutex_lock(&a->lock);
                int rc = revive(a);
                pthread_mutex_unlock(&a->lock);
                if (rc)
                    return rc;
            }
            if (oni_now_ns() >= deadline_ns)
                return completed.load(cuda::memory_order_acquire) >= ticket ? 0 : ONI_ETIMEOUT;
        }
    }
}

extern "C" int emu_agent_done(struct emu_agent *a, uint64_t ticket)
{
    if (!a)
        return 0;
    cuda::atomic_ref<unsigned long long, cuda::thread_scope_system> completed(a->ctl->completed);
    return completed.load(cuda::memory_order_acquire) >= ticket;
}

extern "C" uint64_t emu_agent_launches(struct emu_agent *a)
{
    pthread_mutex_lock(&a->lock);
    uint64_t n = a->launches;
    pthread_mutex_unlock(&a->lock);
    return n;
}
