/* engine.h - private to src/loop: the engine object and the backend hooks. */
#ifndef LOOP_ENGINE_H
#define LOOP_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include "loop/loop.h"
#include "loop/wait.h"
#include "oni/util/clock.h"

/* Slot states, in the order a block moves through them. */
enum { SLOT_FREE = 0, SLOT_FILLED, SLOT_DONE };

/* The engine's threads, each with the wake it sleeps on in a hand-off. */
enum { LOOP_T_RECV = 0, LOOP_T_PROCESS, LOOP_T_SEND, LOOP_NTHREADS };

struct loop;

/* One backend. recv makes block seq usable in slot (or, for backends whose GPU
 * releases itself, only starts the transfer); process computes it into
 * lp->out[slot]; finish waits for a GPU that computes on its own. Hooks may be
 * NULL. All return 0 or an ONI error. */
struct loop_be {
    int (*init)(struct loop *lp);
    int (*recv)(struct loop *lp, uint32_t slot, uint32_t seq);
    int (*process)(struct loop *lp, uint32_t slot, uint32_t seq);
    int (*finish)(struct loop *lp, uint32_t slot, uint32_t seq);
    void (*halt)(struct loop *lp); /* release anything the GPU may be waiting on; called once at the end */
    void (*fini)(struct loop *lp);
};

struct loop {
    struct loop_config cfg;
    const struct loop_be *be;
    size_t out_len;                      /* bytes handed to the sink per block */
    uint32_t nframes;                    /* EPHYS frames per block */
    void *hin[LOOP_MAXDEPTH];            /* host input blocks (cpu, gpu-staged) */
    int hin_pinned[LOOP_MAXDEPTH];       /* cpu: pinned through the source */
    void *out[LOOP_MAXDEPTH];            /* host output blocks (pinned for GPU backends) */
    struct loop_ephys_state *ephys;      /* CPU copy of the EPHYS state (GPU backends: their initial
                                            and final state; cpu: the chain's, at the end) */
    struct loop_chain *chain;            /* EPHYS: the stages (stage.h) */
    char why[320];                       /* the first error's text (loop_fail_why) */
    char proc_why[320];                  /* the process hook's text of its error (process thread) */
    /* loop_stage_reconfigure while running: one request at a time, taken by
     * the process thread between blocks */
    pthread_mutex_t rmu;
    pthread_cond_t rcv;
    int rpending, rdone, rrc, rclosed;
    uint32_t ridx;
    const char *ropts;
    char rwhy[256];
    void *gpu;                           /* backend private state */
    _Atomic int state[LOOP_MAXDEPTH];
    struct loop_wake wake[LOOP_NTHREADS]; /* woken after each change of state, sent, recv_done, stop, err */
    _Atomic int stop;
    _Atomic int err;
    _Atomic int recv_done;
    _Atomic int ran;
    _Atomic int proc_ended;              /* the process thread returned (the watchdog's wake: watch) */
    struct loop_wake watch;
    int abandoned;                       /* a stage never returned: its thread still holds lp */
    int gpu_left_running;                /* halt could not stop the GPU's work (gpu_cuda.c) */
    struct loop *next_abandoned;         /* the list that keeps such loops (engine.c) */
    _Atomic uint64_t sent, started, stalls, bytes_in;
    struct loop_record *rec;
    _Atomic uint64_t run_ns;             /* loop_run wall time, written when it ends */
};

/* Backends: the CPU one (engine.c) and the GPU ones (gpu_cuda.c, or
 * gpu_nocuda.c without CUDA, which answers ONI_ENOGPU). */
extern const struct loop_be loop_be_cpu;
const struct loop_be *loop_gpu_backend(int backend);

/* A duration for a 32-bit record field: capped at UINT32_MAX ns (4.3 s), never wrapped. */
static inline uint32_t loop_ns32(uint64_t ns)
{
    return ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
}
/* The timing record of block seq, or NULL (not kept). */
struct loop_record *loop_record_of(struct loop *lp, uint64_t seq);
/* Record the first error and stop every thread. */
void loop_fail(struct loop *lp, int rc);
/* The same with its text (printf format; kept only if the error is the first). */
void loop_fail_why(struct loop *lp, int rc, const char *fmt, ...);
/* Wait until *word == want (32-bit, written by a device or a DMA engine,
 * which cannot wake a sleeping thread), spinning first, then polling with
 * 20 us sleeps; ONI_ETIMEOUT after timeout_ms (0 counts as
 * 1 ms: this wait always has a deadline), ONI_EINVALSTATE if the loop failed
 * (an error recorded elsewhere; a plain stop does not end it). */
int loop_wait_word(struct loop *lp, const volatile uint32_t *word, uint32_t want, uint32_t timeout_ms);

#endif
