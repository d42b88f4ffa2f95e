/* floor_cuda.c - `onigpu bench floor` (floor.h) on the CUDA runtime and
 * driver APIs, device 0.
 *
 * One host block (page-locked and mapped, so the pull kernel can read it
 * too), one device block, one page of mapped host words, each word on its
 * own 128-byte line. Every transfer gets a new sequence number (seq); it is
 * stamped into the block's first and last 8 bytes before the timer starts,
 * and it is the value the completion words wait for, so a word left over
 * from an earlier transfer can never be mistaken for this one. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include "bench/bench.h"
#include "bench/floor.h"
#include "bench/floor_kern.h"
#include "gpu/gpu.h"
#include "oni.h"

#define WARMUP 2                 /* untimed transfers at the start of every slice */
#define IDLE_NS 2000000000ull    /* the pull kernel leaves after 2 s without a doorbell */
#define LINE_WORDS 32            /* 128 bytes between two words */

/* The mapped host words. */
enum { W_FLAG, W_DRV_FLAG, W_PARKED, W_GO, W_DONE, W_BELL, W_PULLED, W_STOP, W_ALIVE, NWORDS };

typedef CUresult (*htod_fn)(CUdeviceptr, const void *, size_t, CUstream);

struct fl {
    const struct bench_floor_opts *o;
    cudaStream_t s;       /* copies, stream memory operations, empty launches */
    cudaStream_t ks;      /* the persistent pull kernel */
    uint8_t *hbuf, *hbuf_dev; /* the host block and its device view */
    uint8_t *dbuf;        /* the device block */
    uint8_t *check;       /* page-locked: the device block copied back */
    uint32_t *words, *words_dev;
    uint32_t seq;         /* the last seq handed out */
    uint32_t armed;       /* armed: seq queued behind the go word and not yet released (0: none) */
    int kernel_up;        /* the pull kernel was launched and not yet seen to leave */
    const char *mech;     /* the mechanism running, for messages */
    htod_fn htod;         /* cuMemcpyHtoDAsync */
    /* memcpy-sync's watchdog: cudaStreamSynchronize takes no deadline */
    pthread_t dog;
    int dog_up;
    uint64_t sync_since;  /* atomic: when the running cudaStreamSynchronize began (0: none) */
    int dog_stop;         /* atomic */
};

static volatile uint32_t *word(struct fl *f, int w)
{
    return &f->words[w * LINE_WORDS];
}

static CUdeviceptr word_dev(struct fl *f, int w)
{
    return (CUdeviceptr)(uintptr_t)&f->words_dev[w * LINE_WORDS];
}

/* ---- errors: every one names the mechanism ---------------------------------- */

static int fail_rt(struct fl *f, const char *what, cudaError_t e)
{
    if (f->o->log)
        fprintf(f->o->log, "onigpu bench floor: %s: %s: %s\n", f->mech, what, cudaGetErrorString(e));
    return ONI_ENOGPU;
}

static int fail_drv(struct fl *f, const char *what, CUresult r)
{
    const char *msg = NULL;
    cuGetErrorString(r, &msg);
    if (f->o->log)
        fprintf(f->o->log, "onigpu bench floor: %s: %s: %s\n", f->mech, what,
                msg ? msg : "unknown CUDA driver error");
    return ONI_ENOGPU;
}

static int fail_timeout(struct fl *f, const char *what)
{
    if (f->o->log)
        fprintf(f->o->log, "onigpu bench floor: %s: %s did not happen within %u ms\n", f->mech, what,
                f->o->timeout_ms);
    return ONI_ETIMEOUT;
}

#define RT(f, call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) return fail_rt(f, #call, e_); } while (0)
#define DRV(f, call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) return fail_drv(f, #call, r_); } while (0)

/* ---- waits, each with a deadline ------------------------------------------ */

static uint64_t deadline(struct fl *f, uint64_t t0)
{
    return t0 + (uint64_t)f->o->timeout_ms * 1000000u;
}

/* Spin until word w holds seq: acquire loads, no CUDA call. The clock is read
 * once per 64 loads only, so that it barely adds to the time measured. */
static int spin_word(struct fl *f, int w, uint32_t seq, uint64_t limit, const char *what)
{
    const uint32_t *p = (const uint32_t *)word(f, w);
    for (unsigned i = 1;; i++) {
        if (__atomic_load_n(p, __ATOMIC_ACQUIRE) == seq)
            return 0;
        if (!(i & 63) && oni_now_ns() > limit)
            return fail_timeout(f, what);
    }
}

/* Spin on cudaStreamQuery until the stream's work is done. */
static int spin_query(struct fl *f, cudaStream_t s, uint64_t limit)
{
    for (;;) {
        cudaError_t e = cudaStreamQuery(s);
        if (e == cudaSuccess)
            return 0;
        if (e != cudaErrorNotReady)
            return fail_rt(f, "cudaStreamQuery", e);
        if (oni_now_ns() > limit)
            return fail_timeout(f, "the stream's completion");
    }
}

/* ---- the mechanisms: timed from the first call to "landed" ----------------- */

static int copy_rt(struct fl *f)
{
    RT(f, cudaMemcpyAsync(f->dbuf, f->hbuf, f->o->size, cudaMemcpyHostToDevice, f->s));
    return 0;
}

static int flag_after(struct fl *f, int w, uint32_t seq)
{
    DRV(f, cuStreamWriteValue32((CUstream)f->s, word_dev(f, w), seq, CU_STREAM_WRITE_VALUE_DEFAULT));
    return 0;
}

/* The two ways of learning that the work a start call queued is done: spin
 * on cudaStreamQuery, or queue a write of seq into word w and spin on it. */
static int then_query(struct fl *f, int (*start)(struct fl *), uint64_t *ns)
{
    uint64_t t0 = oni_now_ns();
    int rc = start(f);
    if (!rc)
        rc = spin_query(f, f->s, deadline(f, t0));
    *ns = oni_now_ns() - t0;
    return rc;
}

static int then_flag(struct fl *f, int (*start)(struct fl *), int w, uint32_t seq, uint64_t *ns)
{
    uint64_t t0 = oni_now_ns();
    int rc = start(f);
    if (!rc)
        rc = flag_after(f, w, seq);
    if (!rc)
        rc = spin_word(f, w, seq, deadline(f, t0), "the flag write after the copy");
    *ns = oni_now_ns() - t0;
    return rc;
}

static int copy_drv(struct fl *f)
{
    CUresult r = f->htod((CUdeviceptr)(uintptr_t)f->dbuf, f->hbuf, f->o->size, (CUstream)f->s);
    return r == CUDA_SUCCESS ? 0 : fail_drv(f, "cuMemcpyHtoDAsync", r);
}

static int launch_empty(struct fl *f)
{
    cudaError_t e = (cudaError_t)floor_cu_empty(f->s);
    return e == cudaSuccess ? 0 : fail_rt(f, "empty kernel launch", e);
}

static int t_memcpy_query(struct fl *f, uint32_t seq, uint64_t *ns)
{
    return then_query(f, copy_rt, ns);
}

static int t_launch_query(struct fl *f, uint32_t seq, uint64_t *ns)
{
    return then_query(f, launch_empty, ns);
}

/* What the driver pays per prepinned transfer to check that the pinned
 * buffer is still its allocation: six attributes, or the buffer id alone. */
static int t_ptr_attrs(struct fl *f, uint32_t seq, uint64_t *ns)
{
    (void)seq;
    struct gpu_ptr_info info;
    uint64_t t0 = oni_now_ns();
    int rc = gpu_query(f->dbuf, &info);
    *ns = oni_now_ns() - t0;
    return rc ? rc : info.kind == GPU_KIND_DEVICE ? 0 : ONI_EREADFAILURE;
}

static int t_ptr_id(struct fl *f, uint32_t seq, uint64_t *ns)
{
    (void)seq;
    unsigned long long id = 0;
    uint64_t t0 = oni_now_ns();
    int rc = gpu_buffer_id(f->dbuf, &id);
    *ns = oni_now_ns() - t0;
    return rc ? rc : id ? 0 : ONI_EREADFAILURE;
}

static int t_memcpy_flag(struct fl *f, uint32_t seq, uint64_t *ns)
{
    return then_flag(f, copy_rt, W_FLAG, seq, ns);
}

static int t_drv_memcpy_flag(struct fl *f, uint32_t seq, uint64_t *ns)
{
    return then_flag(f, copy_drv, W_DRV_FLAG, seq, ns);
}

static int t_memcpy_sync(struct fl *f, uint32_t seq, uint64_t *ns)
{
    uint64_t t0 = oni_now_ns();
    int rc = copy_rt(f);
    if (!rc) {
        __atomic_store_n(&f->sync_since, t0, __ATOMIC_RELAXED);
        cudaError_t e = cudaStreamSynchronize(f->s);
        __atomic_store_n(&f->sync_since, 0, __ATOMIC_RELAXED);
        rc = e == cudaSuccess ? 0 : fail_rt(f, "cudaStreamSynchronize", e);
    }
    *ns = oni_now_ns() - t0;
    if (!rc && t0 + *ns > deadline(f, t0))
        rc = fail_timeout(f, "cudaStreamSynchronize's return");
    return rc;
}

/* armed, untimed: queue "parked = seq; wait go >= seq; copy; done = seq" and
 * wait until the stream has reached the wait (parked == seq), so that the
 * timed part starts with the GPU already waiting for the go word. One
 * transfer is armed at a time, right after the previous one landed. */
static int p_armed(struct fl *f, uint32_t seq)
{
    uint64_t t0 = oni_now_ns();
    CUstream s = (CUstream)f->s;
    DRV(f, cuStreamWriteValue32(s, word_dev(f, W_PARKED), seq, CU_STREAM_WRITE_VALUE_DEFAULT));
    DRV(f, cuStreamWaitValue32(s, word_dev(f, W_GO), seq, CU_STREAM_WAIT_VALUE_GEQ));
    f->armed = seq;
    int rc = copy_rt(f);
    if (!rc)
        rc = flag_after(f, W_DONE, seq);
    if (!rc)
        rc = spin_word(f, W_PARKED, seq, deadline(f, t0), "arming (the stream reaching its wait)");
    return rc;
}

static int t_armed(struct fl *f, uint32_t seq, uint64_t *ns)
{
    uint64_t t0 = oni_now_ns();
    __atomic_store_n((uint32_t *)word(f, W_GO), seq, __ATOMIC_RELEASE);
    f->armed = 0;
    int rc = spin_word(f, W_DONE, seq, deadline(f, t0), "the done write after the released copy");
    *ns = oni_now_ns() - t0;
    return rc;
}

/* kernel-pull and doorbell-rtt: ring, wait for the kernel's done. */
static int t_bell(struct fl *f, uint32_t seq, uint64_t *ns)
{
    uint64_t t0 = oni_now_ns();
    __atomic_store_n((uint32_t *)word(f, W_BELL), seq, __ATOMIC_RELEASE);
    int rc = spin_word(f, W_PULLED, seq, deadline(f, t0), "the pull kernel's done write");
    *ns = oni_now_ns() - t0;
    return rc;
}

/* ---- the pull kernel, launched per slice ------------------------------------ */

static int kernel_start(struct fl *f, size_t n)
{
    *word(f, W_STOP) = 0;
    *word(f, W_ALIVE) = 0;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    struct floor_pull p = {
        .bell = (const volatile uint32_t *)(uintptr_t)word_dev(f, W_BELL),
        .done = (volatile uint32_t *)(uintptr_t)word_dev(f, W_PULLED),
        .stop = (const volatile uint32_t *)(uintptr_t)word_dev(f, W_STOP),
        .alive = (volatile uint32_t *)(uintptr_t)word_dev(f, W_ALIVE),
        .src = f->hbuf_dev, .dst = f->dbuf, .n = n, .idle_ns = IDLE_NS};
    cudaError_t e = (cudaError_t)floor_cu_pull(&p, f->ks);
    if (e != cudaSuccess)
        return fail_rt(f, "pull kernel launch", e);
    f->kernel_up = 1;
    /* The kernel says it runs; one that never starts is an error now. */
    uint64_t limit = deadline(f, oni_now_ns());
    while (*word(f, W_ALIVE) != 1) {
        e = cudaStreamQuery(f->ks);
        if (e != cudaErrorNotReady)
            return e == cudaSuccess ? fail_timeout(f, "the pull kernel's start (it left at once)")
                                    : fail_rt(f, "pull kernel", e);
        if (oni_now_ns() > limit)
            return fail_timeout(f, "the pull kernel's start");
    }
    return 0;
}

static int kernel_stop(struct fl *f)
{
    if (!f->kernel_up)
        return 0;
    __atomic_store_n((uint32_t *)word(f, W_STOP), 1, __ATOMIC_RELEASE);
    int rc = spin_query(f, f->ks, deadline(f, oni_now_ns()));
    if (!rc)
        f->kernel_up = 0;
    return rc;
}

static int b_pull(struct fl *f)
{
    return kernel_start(f, f->o->size);
}

static int b_rtt(struct fl *f)
{
    return kernel_start(f, 0);
}

/* ---- memcpy-sync's watchdog ---------------------------------------------------- */

/* cudaStreamSynchronize cannot be given a deadline: when one has not returned
 * within the timeout, say so (once) instead of hanging silently. The command
 * must then be ended from outside (tools/gpu-run.sh runs it under timeout). */
static void *watchdog(void *arg)
{
    struct fl *f = arg;
    uint64_t told = 0;
    while (!__atomic_load_n(&f->dog_stop, __ATOMIC_RELAXED)) {
        uint64_t since = __atomic_load_n(&f->sync_since, __ATOMIC_RELAXED);
        if (since && since != told && oni_now_ns() > deadline(f, since)) {
            if (f->o->log)
                fprintf(f->o->log, "onigpu bench floor: memcpy-sync: cudaStreamSynchronize has not returned "
                                   "within %u ms and cannot be interrupted\n", f->o->timeout_ms);
            told = since;
        }
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static int b_sync(struct fl *f)
{
    __atomic_store_n(&f->dog_stop, 0, __ATOMIC_RELAXED);
    if (pthread_create(&f->dog, NULL, watchdog, f))
        return ONI_EBADALLOC;
    f->dog_up = 1;
    return 0;
}

static int e_sync(struct fl *f)
{
    if (f->dog_up) {
        __atomic_store_n(&f->dog_stop, 1, __ATOMIC_RELAXED);
        pthread_join(f->dog, NULL);
        f->dog_up = 0;
    }
    return 0;
}

/* ---- the table ---------------------------------------------------------------- */

struct mech {
    int (*begin)(struct fl *f);                 /* slice start, untimed (NULL: nothing) */
    int (*prep)(struct fl *f, uint32_t seq);    /* before each timer, untimed (NULL: nothing) */
    int (*timed)(struct fl *f, uint32_t seq, uint64_t *ns);
    int (*end)(struct fl *f);                   /* slice end, also after an error */
    int payload;                                /* moves the block (checked after each slice) */
};

static const struct mech mechs[FLOOR_NMECH] = {
    [FLOOR_MEMCPY_QUERY] = {NULL, NULL, t_memcpy_query, NULL, 1},
    [FLOOR_MEMCPY_FLAG] = {NULL, NULL, t_memcpy_flag, NULL, 1},
    [FLOOR_MEMCPY_SYNC] = {b_sync, NULL, t_memcpy_sync, e_sync, 1},
    [FLOOR_DRV_MEMCPY_FLAG] = {NULL, NULL, t_drv_memcpy_flag, NULL, 1},
    [FLOOR_ARMED] = {NULL, p_armed, t_armed, NULL, 1},
    [FLOOR_KERNEL_PULL] = {b_pull, NULL, t_bell, kernel_stop, 1},
    [FLOOR_DOORBELL_RTT] = {b_rtt, NULL, t_bell, kernel_stop, 0},
    [FLOOR_LAUNCH_QUERY] = {NULL, NULL, t_launch_query, NULL, 0},
    [FLOOR_PTR_ATTRS] = {NULL, NULL, t_ptr_attrs, NULL, 0},
    [FLOOR_PTR_ID] = {NULL, NULL, t_ptr_id, NULL, 0},
};

/* ---- slices, rounds ------------------------------------------------------------ */

/* seq into the block's first and last 8 bytes (they overlap when size < 16). */
static void stamp(struct fl *f, uint32_t seq)
{
    uint64_t v = (uint64_t)seq * 0x9E3779B97F4A7C15ull;
    memcpy(f->hbuf, &v, 8);
    memcpy(f->hbuf + f->o->size - 8, &v, 8);
}

/* Copy the device block back and compare it with the host block. */
static int verify(struct fl *f)
{
    RT(f, cudaMemcpyAsync(f->check, f->dbuf, f->o->size, cudaMemcpyDeviceToHost, f->s));
    int rc = spin_query(f, f->s, deadline(f, oni_now_ns()));
    if (!rc && memcmp(f->check, f->hbuf, f->o->size)) {
        if (f->o->log)
            fprintf(f->o->log, "onigpu bench floor: %s: the device block differs from the host block "
                               "after transfer %u\n", f->mech, f->seq);
        rc = ONI_EREADFAILURE;
    }
    return rc;
}

static uint32_t next_seq(struct fl *f)
{
    if (!++f->seq) /* 0 is what the words hold at the start */
        f->seq = 1;
    return f->seq;
}

/* WARMUP untimed transfers, then count timed ones into rec. */
static int run_slice(struct fl *f, int m, uint64_t count, struct bench_rec *rec)
{
    const struct mech *me = &mechs[m];
    f->mech = floor_mech_name(m);
    int rc = me->begin ? me->begin(f) : 0;
    for (uint64_t i = 0; !rc && i < count + WARMUP && !bench_stopped(); i++) {
        uint32_t seq = next_seq(f);
        stamp(f, seq);
        uint64_t ns = 0;
        rc = me->prep ? me->prep(f, seq) : 0;
        if (!rc)
            rc = me->timed(f, seq, &ns);
        if (!rc && i >= WARMUP)
            bench_rec_add(rec, ns);
    }
    int rc_end = me->end ? me->end(f) : 0;
    if (!rc)
        rc = rc_end;
    if (!rc && me->payload)
        rc = verify(f);
    return rc;
}

static uint64_t rounds_of(const struct bench_floor_opts *o)
{
    return o->rounds < o->reps ? o->rounds : o->reps;
}

/* Round r runs every selected mechanism once, starting at the r-th one. */
static int run_rounds(struct fl *f, const int *list, int nm, struct bench_rec *rec)
{
    const struct bench_floor_opts *o = f->o;
    uint64_t rounds = rounds_of(o);
    for (uint64_t r = 0; r < rounds; r++) {
        uint64_t count = o->reps / rounds + (r < o->reps % rounds);
        for (int i = 0; i < nm; i++) {
            int m = list[(i + r) % (uint64_t)nm];
            int rc = run_slice(f, m, count, &rec[m]);
            if (rc)
                return rc;
        }
        if (o->log)
            fprintf(o->log, "round %llu/%llu done\n", (unsigned long long)r + 1, (unsigned long long)rounds),
                fflush(o->log);
    }
    return 0;
}

/* ---- set-up and tear-down --------------------------------------------------------- */

static int resolve_htod(struct fl *f)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    cudaError_t e = cudaGetDriverEntryPointByVersion("cuMemcpyHtoDAsync", &fn, CUDART_VERSION, cudaEnableDefault, &q);
    if (e != cudaSuccess)
        return fail_rt(f, "cudaGetDriverEntryPointByVersion(cuMemcpyHtoDAsync)", e);
    if (q != cudaDriverEntryPointSuccess || !fn) {
        if (f->o->log)
            fprintf(f->o->log, "onigpu bench floor: the driver has no cuMemcpyHtoDAsync\n");
        return ONI_ENOGPU;
    }
    f->htod = (htod_fn)fn;
    return 0;
}

static int setup(struct fl *f)
{
    size_t n = f->o->size;
    f->mech = "set-up";
    RT(f, cudaSetDevice(0));
    RT(f, cudaFree(0));
    RT(f, cudaStreamCreateWithFlags(&f->s, cudaStreamNonBlocking));
    RT(f, cudaStreamCreateWithFlags(&f->ks, cudaStreamNonBlocking));
    RT(f, cudaHostAlloc((void **)&f->hbuf, n, cudaHostAllocMapped));
    RT(f, cudaHostGetDevicePointer((void **)&f->hbuf_dev, f->hbuf, 0));
    RT(f, cudaHostAlloc((void **)&f->check, n, cudaHostAllocDefault));
    RT(f, cudaMalloc((void **)&f->dbuf, n));
    RT(f, cudaMemset(f->dbuf, 0, n));
    RT(f, cudaHostAlloc((void **)&f->words, NWORDS * LINE_WORDS * 4, cudaHostAllocMapped));
    RT(f, cudaHostGetDevicePointer((void **)&f->words_dev, f->words, 0));
    memset(f->words, 0, NWORDS * LINE_WORDS * 4);
    for (size_t i = 0; i < n; i++) /* a pattern, so that a partial copy shows */
        f->hbuf[i] = (uint8_t)(i * 7 + 1);
    RT(f, cudaDeviceSynchronize());
    return resolve_htod(f);
}

/* Release what may still wait or run, then free everything. A stream that
 * does not drain within the deadline is left alone (leaked, not hung on). */
static void teardown(struct fl *f)
{
    f->mech = "tear-down";
    if (f->armed)
        __atomic_store_n((uint32_t *)word(f, W_GO), f->armed, __ATOMIC_RELEASE);
    if (f->words)
        __atomic_store_n((uint32_t *)word(f, W_STOP), 1, __ATOMIC_RELEASE);
    e_sync(f);
    int stuck = 0;
    if (f->s)
        stuck |= spin_query(f, f->s, deadline(f, oni_now_ns())) != 0;
    if (f->ks)
        stuck |= spin_query(f, f->ks, deadline(f, oni_now_ns())) != 0;
    if (stuck)
        return;
    if (f->s)
        cudaStreamDestroy(f->s);
    if (f->ks)
        cudaStreamDestroy(f->ks);
    cudaFreeHost(f->hbuf);
    cudaFreeHost(f->check);
    cudaFreeHost(f->words);
    cudaFree(f->dbuf);
}

/* ---- results ------------------------------------------------------------------------- */

static const char *schedule_name(unsigned flags)
{
    switch (flags & cudaDeviceScheduleMask) {
    case cudaDeviceScheduleSpin: return "spin";
    case cudaDeviceScheduleYield: return "yield";
    case cudaDeviceScheduleBlockingSync: return "blocking-sync";
    default: return "auto";
    }
}

static void add_meta(struct results *r, const struct bench_floor_opts *o, const char *sched)
{
    int drv = 0, rt = 0;
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    results_meta_num(r, "size_bytes", o->size);
    results_meta_num(r, "reps_per_mech", (double)o->reps);
    results_meta_num(r, "rounds", (double)rounds_of(o));
    results_meta_num(r, "warmup_per_slice", WARMUP);
    results_meta_num(r, "timeout_ms", o->timeout_ms);
    results_meta(r, "device_schedule", sched);
    results_meta_num(r, "cuda_driver", drv);
    results_meta_num(r, "cuda_runtime", rt);
    results_meta(r, "armed", "one transfer armed at a time, after the previous landed; timer starts "
                                  "once the stream has reached its wait");
}

/* One row per mechanism into r; ratio: p50 over the first mechanism's p50.
 * The line saying what the table shows goes to stdout, before the table
 * the command prints. */
static int write_results(const struct bench_floor_opts *o, struct results *r, const int *list, int nm,
                         struct bench_rec *rec, const char *sched)
{
    int rc = 0;
    add_meta(r, o, sched);
    results_meta(r, "ratio_base", floor_mech_name(list[0]));
    double base = 0;
    for (int i = 0; i < nm && !rc; i++) {
        int m = list[i];
        struct bench_stats st;
        rc = bench_rec_stats(&rec[m], &st);
        if (rc)
            break;
        if (!i)
            base = st.p50;
        results_cell_str(r, "mech", floor_mech_name(m));
        results_cell_int(r, "n", (long long)st.n);
        results_cell_num(r, "mean_us", st.mean / 1e3);
        results_cell_num(r, "min_us", st.min / 1e3);
        results_cell_num(r, "p50_us", st.p50 / 1e3);
        results_cell_num(r, "p99_us", st.p99 / 1e3);
        results_cell_num(r, "p999_us", st.p999 / 1e3);
        results_cell_num(r, "max_us", st.max / 1e3);
        results_cell_num(r, "max_p50", st.p50 > 0 ? st.max / st.p50 : 0);
        results_cell_num(r, "p50_ratio", base > 0 ? st.p50 / base : 0);
        results_cell_str(r, "checked", mechs[m].payload ? "yes" : "no payload");
        rc = results_row(r, NULL);
    }
    printf("%u B host -> GPU, %llu per mechanism in %llu rounds; device schedule %s; "
           "p50_ratio: p50 / %s's p50\n",
           o->size, (unsigned long long)o->reps, (unsigned long long)rounds_of(o), sched, floor_mech_name(list[0]));
    return rc;
}

/* ---- the entry point ----------------------------------------------------------------- */

int bench_floor_run(const struct bench_floor_opts *o, struct results *r, int *measured)
{
    int rc = bench_floor_check(o);
    if (rc)
        return rc;
    *measured = 0;
    char why[200];
    if (!gpu_available(why, sizeof why)) {
        if (o->log)
            fprintf(o->log, "onigpu bench floor: every mechanism needs a GPU: %s\n", why);
        return ONI_ENOGPU;
    }
    if (!r)
        return ONI_EINVALARG;
    int list[FLOOR_NMECH], nm = 0;
    struct bench_rec rec[FLOOR_NMECH];
    memset(rec, 0, sizeof rec);
    for (int m = 0; m < FLOOR_NMECH && !rc; m++)
        if (o->mechs & (1u << m)) {
            list[nm++] = m;
            rc = bench_rec_init(&rec[m], (size_t)o->reps);
        }
    struct fl f = {.o = o};
    if (!rc)
        rc = setup(&f);
    unsigned flags = 0;
    if (!rc && cudaGetDeviceFlags(&flags) != cudaSuccess)
        flags = cudaDeviceScheduleAuto;
    if (!rc)
        rc = run_rounds(&f, list, nm, rec);
    teardown(&f);
    if (!rc) {
        *measured = 1;
        rc = write_results(o, r, list, nm, rec, schedule_name(flags));
    }
    for (int m = 0; m < FLOOR_NMECH; m++)
        bench_rec_free(&rec[m]);
    return rc;
}
