/* engine.c - the closed-loop engine's threads and the CPU backend (loop.h). */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "oni.h"
#include "gpu/gpu.h"
#include "loop/engine.h"
#include "loop/stage.h"
#include "loop/wait.h"

static const char *const names[LOOP_NBACKENDS] = {
    "cpu", "gpu-staged", "gpu-direct", "gpu-graph", "gpu-flag", "gpu-persistent", "gpu-mapped",
};

const char *loop_backend_name(int backend)
{
    return backend >= 0 && backend < LOOP_NBACKENDS ? names[backend] : "?";
}

int loop_backend_parse(const char *name)
{
    for (int i = 0; name && i < LOOP_NBACKENDS; i++)
        if (!strcmp(name, names[i]))
            return i;
    return -1;
}

int loop_backend_available(int backend, char *why, size_t cap)
{
    if (backend == LOOP_CPU)
        return 1;
    if (backend < 0 || backend >= LOOP_NBACKENDS) {
        if (why && cap)
            snprintf(why, cap, "unknown backend");
        return 0;
    }
    return gpu_available(why, cap);
}

int loop_backend_best(void)
{
    /* The GPU backends by their measured 4 KiB round trip, p50 on the H100
     * (docs/results/loop/loop-20261123-192854.csv, AI 0.75): mapped 7.2 us,
     * persistent 12.2, staged 18.5, graph 22.6, direct 25.8, flag 40.0. */
    static const int order[] = {LOOP_GPU_MAPPED, LOOP_GPU_PERSISTENT, LOOP_GPU_STAGED, LOOP_GPU_GRAPH, LOOP_GPU_DIRECT,
                                LOOP_GPU_FLAG};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (loop_backend_available(order[i], NULL, 0))
            return order[i];
    return LOOP_CPU;
}

/* Every thread that sleeps in a hand-off looks again: a stop or an error
 * ends its wait. */
static void wake_all_threads(struct loop *lp)
{
    for (int i = 0; i < LOOP_NTHREADS; i++)
        loop_wake_all(&lp->wake[i]);
}

void loop_fail(struct loop *lp, int rc)
{
    int zero = 0;
    atomic_compare_exchange_strong(&lp->err, &zero, rc);
    atomic_store(&lp->stop, 1);
    wake_all_threads(lp);
}

void loop_fail_why(struct loop *lp, int rc, const char *fmt, ...)
{
    /* The text is written only by the thread whose error is the first; it
     * is read after loop_run joined every thread. */
    int zero = 0;
    if (atomic_compare_exchange_strong(&lp->err, &zero, rc)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(lp->why, sizeof lp->why, fmt, ap);
        va_end(ap);
    }
    atomic_store(&lp->stop, 1);
    wake_all_threads(lp);
}

/* Spin this long before sleeping: hand-offs between threads stay in the
 * microseconds while the pipeline is busy, and idle threads do not burn a
 * core. */
#define SPIN_DEFAULT_US 50u
#define POLL_NS 20000l

static uint64_t spin_ns(const struct loop *lp)
{
    return (uint64_t)(lp->cfg.spin_us ? lp->cfg.spin_us : SPIN_DEFAULT_US) * 1000u;
}

static uint64_t deadline(uint32_t timeout_ms)
{
    return timeout_ms ? oni_now_ns() + (uint64_t)timeout_ms * 1000000ull : UINT64_MAX;
}

static void pause_cpu(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* A wait for a word another thread's loop_wake_all cannot follow (a GPU's
 * or a DMA engine's store): spin, then poll with 20 us sleeps. Gives up
 * with ONI_EINVALSTATE when the loop failed, ONI_ETIMEOUT after timeout_ms. */
static int poll_word(struct loop *lp, const volatile uint32_t *word, uint32_t want, uint32_t timeout_ms)
{
    uint64_t t0 = oni_now_ns(), limit = deadline(timeout_ms), spin = spin_ns(lp);
    for (unsigned n = 0;; n++) {
        if (__atomic_load_n((const uint32_t *)word, __ATOMIC_ACQUIRE) == want)
            return 0;
        if (atomic_load_explicit(&lp->err, memory_order_relaxed))
            return __atomic_load_n((const uint32_t *)word, __ATOMIC_ACQUIRE) == want ? 0 : ONI_EINVALSTATE;
        if ((n & 63) == 0) {
            uint64_t t = oni_now_ns();
            if (t > limit)
                return ONI_ETIMEOUT;
            if (t - t0 > spin) {
                struct timespec ts = {0, POLL_NS};
                nanosleep(&ts, NULL);
                continue;
            }
            sched_yield(); /* see loop_wake_until */
        }
        pause_cpu();
    }
}

/* What a hand-off waits for: pred(arg), or quit(lp, qarg). */
struct handoff {
    int (*pred)(const void *);
    const void *arg;
    int (*quit)(struct loop *, uint64_t);
    struct loop *lp;
    uint64_t qarg;
};

static int pred_or_quit(const void *p)
{
    const struct handoff *h = p;
    return h->pred(h->arg) || h->quit(h->lp, h->qarg);
}

/* Thread `self` waits until pred(arg) holds: a spin, then sleeps on its
 * wake, which the thread that changes what it waits for wakes. Gives up
 * with ONI_EINVALSTATE when quit(lp, qarg) says so (an error elsewhere, or
 * nothing more will come: every change of those wakes all threads). */
static int wait_for(struct loop *lp, int self, int (*pred)(const void *), const void *arg,
                    int (*quit)(struct loop *, uint64_t), uint64_t qarg)
{
    struct handoff h = {pred, arg, quit, lp, qarg};
    int rc = loop_wake_until(&lp->wake[self], pred_or_quit, &h, spin_ns(lp), UINT64_MAX);
    return rc ? rc : pred(arg) ? 0 : ONI_EINVALSTATE;
}

static int failed(struct loop *lp, uint64_t unused)
{
    return atomic_load_explicit(&lp->err, memory_order_relaxed) != 0;
}

/* Receive quits on a stop request too. */
static int stopping(struct loop *lp, uint64_t unused)
{
    return failed(lp, 0) || atomic_load_explicit(&lp->stop, memory_order_relaxed);
}

/* Process and send drain every block receive started, then quit. */
static int drained(struct loop *lp, uint64_t seq)
{
    return failed(lp, 0) || (atomic_load_explicit(&lp->recv_done, memory_order_acquire) &&
                             seq >= atomic_load_explicit(&lp->started, memory_order_acquire));
}

int loop_wait_word(struct loop *lp, const volatile uint32_t *word, uint32_t want, uint32_t timeout_ms)
{
    return poll_word(lp, word, want, timeout_ms ? timeout_ms : 1);
}

struct state_arg {
    _Atomic int *st;
    int want;
};

static int state_is(const void *p)
{
    const struct state_arg *a = p;
    return atomic_load_explicit(a->st, memory_order_acquire) == a->want;
}

/* Receive may start block seq when its slot is free and fewer than
 * `inflight` blocks are between read start and send end. */
struct room_arg {
    struct loop *lp;
    uint32_t slot;
    uint64_t seq;
};

static int room(const void *p)
{
    const struct room_arg *a = p;
    uint32_t inflight = a->lp->cfg.inflight ? a->lp->cfg.inflight : a->lp->cfg.depth;
    return atomic_load_explicit(&a->lp->state[a->slot], memory_order_acquire) == SLOT_FREE &&
           a->seq - atomic_load_explicit(&a->lp->sent, memory_order_acquire) < inflight;
}

static int more(struct loop *lp, uint64_t seq)
{
    return !stopping(lp, 0) && (!lp->cfg.blocks || seq < lp->cfg.blocks);
}

struct loop_record *loop_record_of(struct loop *lp, uint64_t seq)
{
    return lp->rec && seq < lp->cfg.record_cap ? &lp->rec[seq] : NULL;
}

static void *recv_main(void *p)
{
    struct loop *lp = p;
    for (uint64_t seq = 0; more(lp, seq); seq++) {
        uint32_t slot = (uint32_t)(seq % lp->cfg.depth);
        struct room_arg ra = {lp, slot, seq};
        if (!room(&ra)) {
            /* Back-pressure: counted, then waited out (loss is counted by the source). */
            if (atomic_load_explicit(&lp->state[slot], memory_order_acquire) != SLOT_FREE)
                atomic_fetch_add(&lp->stalls, 1);
            if (wait_for(lp, LOOP_T_RECV, room, &ra, stopping, 0))
                break;
        }
        uint64_t t0 = oni_now_ns();
        int rc = lp->be->recv(lp, slot, (uint32_t)seq);
        if (rc) {
            if (!atomic_load(&lp->stop)) /* a read cut short by a stop request is no error */
                loop_fail(lp, rc);
            break;
        }
        struct loop_record *r = loop_record_of(lp, seq);
        if (r) {
            r->t_start = t0;
            r->t_in_ns = loop_ns32(oni_now_ns() - t0);
        }
        atomic_fetch_add(&lp->bytes_in, lp->cfg.in_bytes);
        atomic_store(&lp->started, seq + 1);
        atomic_store_explicit(&lp->state[slot], SLOT_FILLED, memory_order_release);
        loop_wake_all(&lp->wake[LOOP_T_PROCESS]);
    }
    atomic_store_explicit(&lp->recv_done, 1, memory_order_release);
    wake_all_threads(lp); /* process and send drain, then end */
    return NULL;
}

/* A reconfigure request, if one waits: applied here, between two blocks. */
static void take_reconfigure(struct loop *lp, int closing)
{
    pthread_mutex_lock(&lp->rmu);
    if (lp->rpending) {
        if (closing) {
            lp->rrc = ONI_EINVALSTATE;
            snprintf(lp->rwhy, sizeof lp->rwhy, "the loop ended before the change was made");
        } else {
            lp->rrc = loop_chain_reconfigure(lp->chain, lp->ridx, lp->ropts, lp->rwhy, sizeof lp->rwhy);
        }
        lp->rpending = 0;
        lp->rdone = 1;
        pthread_cond_broadcast(&lp->rcv);
    }
    if (closing)
        lp->rclosed = 1;
    pthread_mutex_unlock(&lp->rmu);
}

static void *process_main(void *p)
{
    struct loop *lp = p;
    if (lp->chain && lp->cfg.backend == LOOP_CPU)
        loop_chain_start(lp->chain);
    for (uint64_t seq = 0; !drained(lp, seq); seq++) {
        uint32_t slot = (uint32_t)(seq % lp->cfg.depth);
        struct state_arg sa = {&lp->state[slot], SLOT_FILLED};
        if (wait_for(lp, LOOP_T_PROCESS, state_is, &sa, drained, seq))
            break;
        if (lp->chain && lp->cfg.backend == LOOP_CPU)
            take_reconfigure(lp, 0);
        if (lp->be->process) {
            uint64_t t0 = oni_now_ns();
            int rc = lp->be->process(lp, slot, (uint32_t)seq);
            if (rc) {
                loop_fail_why(lp, rc, "%s", lp->proc_why);
                break;
            }
            struct loop_record *r = loop_record_of(lp, seq);
            if (r)
                r->t_compute_ns = loop_ns32(oni_now_ns() - t0);
        }
        atomic_store_explicit(&lp->state[slot], SLOT_DONE, memory_order_release);
        loop_wake_all(&lp->wake[LOOP_T_SEND]);
    }
    if (lp->chain && lp->cfg.backend == LOOP_CPU)
        loop_chain_stop(lp->chain);
    take_reconfigure(lp, 1);
    atomic_store_explicit(&lp->proc_ended, 1, memory_order_release);
    loop_wake_all(&lp->watch);
    return NULL;
}

static void *send_main(void *p)
{
    struct loop *lp = p;
    for (uint64_t seq = 0; !drained(lp, seq); seq++) {
        uint32_t slot = (uint32_t)(seq % lp->cfg.depth);
        struct state_arg sa = {&lp->state[slot], SLOT_DONE};
        if (wait_for(lp, LOOP_T_SEND, state_is, &sa, drained, seq))
            break;
        int rc = lp->be->finish ? lp->be->finish(lp, slot, (uint32_t)seq) : 0;
        uint64_t t0 = oni_now_ns();
        if (!rc)
            rc = lp->cfg.sink.write(lp->cfg.sink.ctx, seq, lp->out[slot], lp->out_len, lp->cfg.timeout_ms);
        if (rc) {
            loop_fail(lp, rc);
            break;
        }
        uint64_t t1 = oni_now_ns();
        struct loop_record *r = loop_record_of(lp, seq);
        if (r) {
            r->t_out_ns = loop_ns32(t1 - t0);
            r->t_total_ns = loop_ns32(t1 - r->t_start);
        }
        atomic_store_explicit(&lp->state[slot], SLOT_FREE, memory_order_release);
        atomic_store_explicit(&lp->sent, seq + 1, memory_order_release);
        loop_wake_all(&lp->wake[LOOP_T_RECV]);
    }
    return NULL;
}

/* --- CPU backend ------------------------------------------------------------ */

static int cpu_recv(struct loop *lp, uint32_t slot, uint32_t seq)
{
    return lp->cfg.src.read(lp->cfg.src.ctx, lp->hin[slot], lp->cfg.in_bytes, lp->cfg.timeout_ms);
}

static int cpu_process(struct loop *lp, uint32_t slot, uint32_t seq)
{
    if (lp->cfg.work == LOOP_WORK_EPHYS)
        return loop_chain_process(lp->chain, lp->hin[slot], seq, lp->out[slot], lp->proc_why, sizeof lp->proc_why);
    /* MAC: the whole block is computed; the first out_bytes are sent. */
    size_t n = lp->cfg.in_bytes / 4;
    loop_mac_cpu(lp->hin[slot], lp->out[slot], n, lp->cfg.mac.iters, lp->cfg.mac.passes, lp->cfg.mac.seed);
    return 0;
}

static int cpu_init(struct loop *lp)
{
    /* MAC computes the whole input block, so the output buffer holds in_bytes. */
    size_t out = lp->cfg.work == LOOP_WORK_MAC ? lp->cfg.in_bytes : lp->out_len;
    for (uint32_t i = 0; i < lp->cfg.depth; i++) {
        lp->hin[i] = aligned_alloc(64, (lp->cfg.in_bytes + 63) & ~(size_t)63);
        lp->out[i] = aligned_alloc(64, (out + 63) & ~(size_t)63);
        if (!lp->hin[i] || !lp->out[i])
            return ONI_EBADALLOC;
        memset(lp->hin[i], 0, lp->cfg.in_bytes);
        /* Pin the input blocks once where the source supports it (the card's
         * DMA then writes them without per-transfer setup); a source that
         * cannot pin host memory still reads into it. */
        if (lp->cfg.src.pin)
            lp->hin_pinned[i] = lp->cfg.src.pin(lp->cfg.src.ctx, lp->hin[i], lp->cfg.in_bytes) == 0;
    }
    return 0;
}

static void cpu_fini(struct loop *lp)
{
    for (uint32_t i = 0; i < lp->cfg.depth; i++) {
        /* A block whose unpin the source refuses (a DMA job may still write
         * it) is leaked, not freed. */
        if (lp->hin_pinned[i] && lp->cfg.src.unpin && lp->cfg.src.unpin(lp->cfg.src.ctx, lp->hin[i], lp->cfg.in_bytes))
            lp->hin[i] = NULL;
        lp->hin_pinned[i] = 0;
        free(lp->hin[i]);
        free(lp->out[i]);
        lp->hin[i] = lp->out[i] = NULL;
    }
}

const struct loop_be loop_be_cpu = {
    .init = cpu_init, .recv = cpu_recv, .process = cpu_process, .fini = cpu_fini,
};

/* --- engine ----------------------------------------------------------------- */

static int check_config(const struct loop_config *c)
{
    if (c->backend < 0 || c->backend >= LOOP_NBACKENDS || c->depth < 1 || c->depth > LOOP_MAXDEPTH ||
        c->inflight > c->depth || !c->src.read || !c->sink.write || c->timeout_ms == 0 || c->in_bytes == 0)
        return ONI_EINVALARG;
    if (c->work == LOOP_WORK_MAC) {
        if (c->in_bytes % 4 || c->out_bytes > c->in_bytes || c->out_bytes % 4 || c->mac.passes == 0 ||
            c->in_bytes > UINT32_MAX)
            return ONI_EINVALARG;
    } else if (c->work == LOOP_WORK_EPHYS) {
        /* the state may come from elsewhere than loop_ephys_init: its layout again */
        if (!c->ephys || !loop_ephys_layout_ok(&c->ephys->lay) || c->in_bytes % c->ephys->lay.stride ||
            c->in_bytes / c->ephys->lay.stride > UINT32_MAX) /* frames per block are counted in 32 bits */
            return ONI_EINVALARG;
    } else {
        return ONI_EINVALARG;
    }
    return 0;
}

static void say(const struct loop_config *cfg, const char *fmt, const char *arg)
{
    if (cfg->why && cfg->why_cap)
        snprintf(cfg->why, cfg->why_cap, fmt, arg);
}

/* EPHYS: the state copied, the chain built; a GPU backend runs the built-in
 * chain only (one kernel), with the state its stages were configured to. */
static int create_ephys(struct loop *lp, const struct loop_config *cfg)
{
    char why[320] = "";
    lp->out_len = sizeof(struct loop_ephys_out);
    lp->nframes = (uint32_t)(cfg->in_bytes / cfg->ephys->lay.stride);
    lp->ephys = malloc(sizeof *lp->ephys);
    if (!lp->ephys)
        return ONI_EBADALLOC;
    *lp->ephys = *cfg->ephys;
    lp->cfg.ephys = NULL; /* the caller's copy may go away */
    lp->cfg.stages = NULL; /* so may its list */
    lp->cfg.nstages = 0;
    int rc = loop_chain_create(cfg, lp->ephys, lp->nframes, &lp->chain, why, sizeof why);
    if (rc) {
        say(cfg, "%s", why);
        return rc;
    }
    /* the GPU backends hand the stages' configured state to the fused
     * kernel (the built-in chain) or compile the chain (gpu_cuda.c) */
    loop_chain_state(lp->chain, lp->ephys);
    return 0;
}

int loop_create(const struct loop_config *cfg, struct loop **out)
{
    if (!cfg || !out)
        return ONI_EINVALARG;
    *out = NULL;
    if (cfg->why && cfg->why_cap)
        cfg->why[0] = 0;
    int rc = check_config(cfg);
    if (rc) {
        say(cfg, "%s", "bad loop configuration");
        return rc;
    }
    const struct loop_be *be = cfg->backend == LOOP_CPU ? &loop_be_cpu : loop_gpu_backend(cfg->backend);
    if (!be) {
        say(cfg, "backend %s: no GPU in this build or on this machine", loop_backend_name(cfg->backend));
        return ONI_ENOGPU;
    }
    struct loop *lp = calloc(1, sizeof *lp);
    if (!lp)
        return ONI_EBADALLOC;
    lp->cfg = *cfg;
    lp->cfg.why = NULL; /* loop_create's alone */
    lp->be = be;
    for (int i = 0; i < LOOP_NTHREADS; i++)
        loop_wake_init(&lp->wake[i]);
    loop_wake_init(&lp->watch);
    pthread_mutex_init(&lp->rmu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* oni_timespec_at's clock */
    pthread_cond_init(&lp->rcv, &ca);
    pthread_condattr_destroy(&ca);
    if (cfg->work == LOOP_WORK_EPHYS)
        rc = create_ephys(lp, cfg);
    else
        lp->out_len = cfg->out_bytes;
    if (!rc && cfg->record_cap && !(lp->rec = calloc(cfg->record_cap, sizeof *lp->rec)))
        rc = ONI_EBADALLOC;
    if (!rc && (rc = be->init(lp)) != 0) {
        if (lp->why[0])
            say(cfg, "%s", lp->why); /* the backend's reason (a GPU chain's compiler log) */
        else
            say(cfg, "backend %s could not be set up", loop_backend_name(cfg->backend));
    }
    if (rc) {
        loop_destroy(lp);
        return rc;
    }
    *out = lp;
    return 0;
}

/* Pin th[0..n) to the last n cores of this process's set, if it has more
 * than n (one is left to everything else). Best effort: a refusal is no error. */
static void pin_threads(pthread_t *th, int n)
{
    cpu_set_t set;
    if (pthread_getaffinity_np(pthread_self(), sizeof set, &set) || CPU_COUNT(&set) <= n)
        return;
    for (int c = CPU_SETSIZE - 1, i = 0; c >= 0 && i < n; c--) {
        if (!CPU_ISSET(c, &set))
            continue;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(c, &one);
        pthread_setaffinity_np(th[i++], sizeof one, &one);
    }
}

static int proc_ended(const void *p)
{
    return atomic_load_explicit(&((const struct loop *)p)->proc_ended, memory_order_acquire);
}

static pthread_mutex_t abandoned_mu = PTHREAD_MUTEX_INITIALIZER;
static struct loop *abandoned_loops; /* kept, never freed: their threads may come back */

/* The cpu backend's watchdog, until the process thread returns: a stage
 * over its budget that does not return (a loop without end, a wait on what
 * never comes) fails the loop, and its thread is left to it (detached; lp
 * is then never freed but kept on abandoned_loops, as that thread still
 * uses it). 1 when it was left. The wall limit is the budget plus the
 * loop's timeout: a stage may wait, but not longer than a device may. */

static int watch_process(struct loop *lp, pthread_t th)
{
    uint64_t limit = (uint64_t)lp->cfg.timeout_ms * 1000000u;
    char why[320];
    while (loop_wake_until(&lp->watch, proc_ended, lp, 0, oni_now_ns() + 10000000u) == ONI_ETIMEOUT) {
        int rc = loop_chain_overrun(lp->chain, limit, why, sizeof why);
        if (rc) {
            loop_fail_why(lp, rc, "%s", why);
            pthread_detach(th);
            pthread_mutex_lock(&abandoned_mu);
            lp->next_abandoned = abandoned_loops;
            abandoned_loops = lp;
            pthread_mutex_unlock(&abandoned_mu);
            return 1;
        }
    }
    return 0;
}

int loop_run(struct loop *lp)
{
    if (!lp)
        return ONI_EINVALARG;
    /* under rmu: a reconfigure made "before the run" is then wholly before it */
    pthread_mutex_lock(&lp->rmu);
    int again = atomic_exchange(&lp->ran, 1);
    pthread_mutex_unlock(&lp->rmu);
    if (again)
        return ONI_EINVALSTATE; /* slots, counters and the GPU state are spent */
    pthread_t th[3];
    void *(*mains[3])(void *) = {recv_main, process_main, send_main};
    int n = 0, rc = 0;
    uint64_t t0 = oni_now_ns();
    for (; n < 3; n++) {
        if (pthread_create(&th[n], NULL, mains[n], lp)) {
            loop_fail(lp, ONI_EBADALLOC);
            break;
        }
    }
    if (n < 3) {
        atomic_store(&lp->recv_done, 1); /* nothing more will start */
        wake_all_threads(lp);
    } else if (lp->cfg.pin_threads && lp->cfg.backend != LOOP_CPU)
        /* Not the cpu backend: its OpenMP teams need every core (a pinned
         * process thread gave them one; pinned spinning neighbours slowed
         * them 4-9x at 400 kB and 10 MB on the H100). */
        pin_threads(th, 3);
    /* Receive ends first (count reached, stop or error); the others drain
     * what it started, then end. */
    if (n == 3 && lp->chain && lp->cfg.backend == LOOP_CPU)
        lp->abandoned = watch_process(lp, th[LOOP_T_PROCESS]);
    for (int i = 0; i < n; i++)
        if (!(lp->abandoned && i == LOOP_T_PROCESS))
            pthread_join(th[i], NULL);
    if (lp->be->halt)
        lp->be->halt(lp);
    atomic_store(&lp->run_ns, oni_now_ns() - t0);
    rc = atomic_load(&lp->err);
    return rc;
}

void loop_stop(struct loop *lp)
{
    if (lp) {
        atomic_store(&lp->stop, 1);
        wake_all_threads(lp);
    }
}

int loop_error(const struct loop *lp)
{
    return lp ? atomic_load(&((struct loop *)lp)->err) : ONI_EINVALARG;
}

void loop_get_stats(const struct loop *lp, struct loop_stats *st)
{
    if (!st)
        return;
    memset(st, 0, sizeof *st);
    if (!lp)
        return;
    struct loop *m = (struct loop *)lp;
    st->blocks = atomic_load(&m->sent);
    st->bytes_in = atomic_load(&m->bytes_in);
    st->stalls = atomic_load(&m->stalls);
    st->src_dropped = lp->cfg.src.dropped ? lp->cfg.src.dropped(lp->cfg.src.ctx) : 0;
    st->nrecords = st->blocks < lp->cfg.record_cap ? st->blocks : lp->cfg.record_cap;
    st->seconds = (double)atomic_load(&m->run_ns) / 1e9;
}

const struct loop_record *loop_records(const struct loop *lp)
{
    return lp ? lp->rec : NULL;
}

const struct loop_ephys_state *loop_ephys_final(struct loop *lp)
{
    if (lp && lp->chain && lp->cfg.backend == LOOP_CPU && !lp->abandoned)
        loop_chain_state(lp->chain, lp->ephys);
    return lp ? lp->ephys : NULL;
}

const char *loop_error_text(const struct loop *lp)
{
    return lp ? lp->why : "";
}

int loop_gpu_left_running(const struct loop *lp)
{
    return lp && lp->gpu_left_running;
}

int loop_stage_reconfigure(struct loop *lp, uint32_t i, const char *options, char *why, size_t cap)
{
    char none[8];
    if (!why || !cap)
        why = none, cap = sizeof none;
    why[0] = 0;
    if (!lp || !lp->chain) {
        snprintf(why, cap, "no chain of stages (a MAC loop)");
        return ONI_EINVALARG;
    }
    if (lp->cfg.backend != LOOP_CPU) {
        snprintf(why, cap, "backend %s: the chain runs on the GPU, whose state is not changed while running",
                 loop_backend_name(lp->cfg.backend));
        return ONI_EUNIMPL;
    }
    pthread_mutex_lock(&lp->rmu);
    int rc;
    if (!atomic_load(&lp->ran)) {
        rc = loop_chain_reconfigure(lp->chain, i, options, why, cap);
    } else if (lp->rclosed || lp->rpending) {
        snprintf(why, cap, lp->rclosed ? "the loop ended" : "another change is under way");
        rc = lp->rclosed ? ONI_EINVALSTATE : ONI_EBUSY;
    } else {
        lp->ridx = i;
        lp->ropts = options;
        lp->rdone = 0;
        lp->rwhy[0] = 0;
        lp->rpending = 1;
        struct timespec until;
        oni_timespec_at(oni_ms_from_now(lp->cfg.timeout_ms), &until);
        rc = 0;
        while (!lp->rdone && rc != ETIMEDOUT)
            rc = pthread_cond_timedwait(&lp->rcv, &lp->rmu, &until);
        if (lp->rdone) {
            rc = lp->rrc;
            snprintf(why, cap, "%s", lp->rwhy);
        } else { /* withdrawn: the loop never took it */
            lp->rpending = 0;
            snprintf(why, cap, "the loop took no block within %u ms to make the change between", lp->cfg.timeout_ms);
            rc = ONI_ETIMEOUT;
        }
    }
    pthread_mutex_unlock(&lp->rmu);
    return rc;
}

void loop_destroy(struct loop *lp)
{
    if (!lp || lp->abandoned) /* a stage that never returned still uses it all */
        return;
    if (lp->be && lp->be->fini)
        lp->be->fini(lp);
    loop_chain_destroy(lp->chain);
    pthread_mutex_destroy(&lp->rmu);
    pthread_cond_destroy(&lp->rcv);
    free(lp->ephys);
    free(lp->rec);
    free(lp);
}
