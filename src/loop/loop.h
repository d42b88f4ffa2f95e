/* loop.h - the closed-loop engine: receive -> process -> send, concurrently,
 * over a ring of `depth` block slots, on one of several backends
 * (docs/closed-loop.md). Above the hardware boundary: the engine knows its
 * data only through a loop_source and a loop_sink.
 *
 * Threads: a receive thread fills free slots from the source, a process
 * thread runs the work (or, for gpu-flag and gpu-persistent, only queues it:
 * the GPU releases itself), a send thread hands finished slots to the sink
 * and frees them. Every wait for the source, the GPU or the sink has a
 * deadline (cfg.timeout_ms); the hand-offs between the stages have none of
 * their own, since the stage waited for has one. An error in any stage stops
 * the loop and is returned by loop_run. */
#ifndef LOOP_H
#define LOOP_H

#include <stddef.h>
#include <stdint.h>
#include "loop/kernels.h"
#include "onigpu_stage.h"

#ifdef __cplusplus
extern "C" {
#endif

enum loop_backend {
    LOOP_CPU = 0,        /* 3 threads, OpenMP SIMD, host memory */
    LOOP_GPU_STAGED,     /* block in pinned host memory, copy to GPU, kernel, copy back */
    LOOP_GPU_DIRECT,     /* the source writes into GPU memory (read_async), kernel launched per block */
    LOOP_GPU_GRAPH,      /* as direct, the per-block GPU work replayed as a CUDA graph */
    LOOP_GPU_FLAG,       /* GPU work pre-queued behind cuStreamWaitValue32 on the completion word */
    LOOP_GPU_PERSISTENT, /* one kernel that never exits: polls completions, rings a doorbell */
    LOOP_GPU_MAPPED,     /* as persistent, but the kernel pulls each block from the source's host memory */
    LOOP_NBACKENDS
};

enum loop_work { LOOP_WORK_MAC = 0, LOOP_WORK_EPHYS };

/* Where blocks come from. read fills host memory; read_async starts a
 * transfer into buf (GPU memory for the direct backends) and writes seq to
 * *done (GPU memory) after the payload. read_async may be NULL: then only
 * cpu, gpu-staged and gpu-mapped can run. Both return 0 or an ONI error
 * (ONI_ETIMEOUT when nothing came within timeout_ms; for read_async, a source
 * that waits for its block before starting the transfer, as a paced memsrc
 * does, waits at most timeout_ms). */
struct loop_source {
    void *ctx;
    int (*read)(void *ctx, void *buf, size_t len, uint32_t timeout_ms);
    int (*read_async)(void *ctx, void *buf, size_t len, volatile uint32_t *done, uint32_t seq, uint32_t timeout_ms);
    /* Make a GPU buffer reachable by read_async once (may be NULL). */
    int (*pin)(void *ctx, void *buf, size_t len);
    int (*unpin)(void *ctx, void *buf, size_t len);
    /* Blocks the source itself dropped because the loop was late (may be NULL). */
    uint64_t (*dropped)(void *ctx);
};

/* Where results go: one call per block, in order, host memory. */
struct loop_sink {
    void *ctx;
    int (*write)(void *ctx, uint64_t seq, const void *out, size_t len, uint32_t timeout_ms);
};

/* One stage of an EPHYS chain (include/onigpu_stage.h, docs/stages.md):
 * a descriptor the caller holds (stage), or text naming one: "NAME[:OPTIONS]"
 * for a built-in stage (filter, reference, detect, decide, tmatch; no '/'
 * before the first ':'), else "FILE[:OPTIONS]", a shared object exporting
 * `onigpu_stage`. */
struct loop_stage_spec {
    const char *text;                 /* used when stage is NULL */
    const struct onigpu_stage *stage; /* or NULL */
    const char *options;              /* with stage: its options (NULL: none) */
};

#define LOOP_MAXCHAIN 15 /* stages a chain may list (decide may be appended) */
#define LOOP_STAGE_BUDGET_US 100000u /* a stage's processor time for one block, at most, unless set */

struct loop_config {
    int backend;           /* enum loop_backend */
    int work;              /* enum loop_work */
    size_t in_bytes;       /* bytes per input block */
    size_t out_bytes;      /* MAC: bytes of the result sent per block (<= in_bytes); EPHYS: ignored */
    uint32_t depth;        /* block slots (2 = double buffering; max LOOP_MAXDEPTH) */
    uint32_t inflight;     /* most blocks between read start and send end (0 = depth); 1 = latency mode */
    uint64_t blocks;       /* stop after this many blocks (0 = until loop_stop) */
    uint32_t timeout_ms;   /* deadline of every wait */
    struct loop_mac mac;   /* MAC: the kernel's parameters (kernels.h) */
    const struct loop_ephys_state *ephys; /* EPHYS: initial state (copied); frames per block = in_bytes / stride */
    /* EPHYS: the processing chain, in order (0 stages: the built-in one,
     * filter, reference, detect, decide); the stages' frame rate (0: 30000);
     * a stage's processor time for one block at most (0:
     * LOOP_STAGE_BUDGET_US; over it, the loop stops with ONI_ETIMEOUT; a
     * CPU stage that never returns holds the loop's thread: not caught). */
    const struct loop_stage_spec *stages;
    uint32_t nstages;
    double fs_hz;
    double clock_hz;       /* ticks per second of the frames' times (0: 250e6, the ONIX hub clock) */
    uint32_t stage_budget_us;
    /* Where loop_create writes why it refused the config, the chain or a
     * stage (a loader's or a stage's message; may be NULL). */
    char *why;
    size_t why_cap;
    struct loop_source src;
    struct loop_sink sink;
    uint32_t record_cap;   /* per-block timings kept (0 = none) */
    uint32_t spin_us;      /* a waiting thread spins this long before it sleeps until woken (a
                              GPU's doorbell: polls with sleeps) (0 = 50 us; benchmarks spin
                              longer for exact hand-offs) */
    int pin_threads;       /* 1, GPU backends: receive, process and send each get a core of their
                              own (the last three the process may use) when at least four are
                              there: spinning threads are then never migrated or preempted by
                              each other (not the cpu backend: its OpenMP teams need the cores) */
};

#define LOOP_MAXDEPTH 16

/* Per-block timing record (host monotonic ns). For gpu-flag and
 * gpu-persistent the GPU releases itself, so the host does not observe the
 * in/compute split: t_in_ns is the time to start the read, t_compute_ns is 0,
 * and the rest of the round trip is in t_total_ns. */
struct loop_record {
    uint64_t t_start;      /* read started */
    uint32_t t_in_ns;      /* read start -> data usable by the compute */
    uint32_t t_compute_ns; /* compute (GPU: launch to result in host memory) */
    uint32_t t_out_ns;     /* sink write */
    uint32_t t_total_ns;   /* read start -> sink returned */
    uint32_t t_gpu_ns;     /* gpu-persistent, gpu-mapped: GPU clock, completion seen -> results
                              fenced, just before the doorbell (0 = not measured) */
    uint32_t t_wait_ns;    /* gpu-staged, -direct, -graph: part of t_compute_ns spent waiting for the
                              doorbell after the block's last CUDA call returned (the rest is those calls) */
};

struct loop_stats {
    uint64_t blocks;       /* blocks sent */
    uint64_t bytes_in;
    uint64_t src_dropped;  /* from the source */
    uint64_t stalls;       /* reads that had to wait for a free slot (back-pressure, not loss) */
    uint64_t nrecords;     /* records written (<= record_cap) */
    double seconds;        /* loop_run wall time (0 until it returns) */
};

struct loop;

/* Name <-> id. loop_backend_parse returns -1 for an unknown name. */
const char *loop_backend_name(int backend);
int loop_backend_parse(const char *name);
/* 1 if the backend can run here, else 0 with the reason in why (may be NULL). */
int loop_backend_available(int backend, char *why, size_t cap);
/* Preferred available backend: the lowest-latency GPU backend, cpu without a GPU. */
int loop_backend_best(void);

/* Create an engine (allocates every buffer now: nothing is allocated per block).
 * ONI_EINVALARG for a bad config, ONI_ENOGPU for a GPU backend without a GPU. */
int loop_create(const struct loop_config *cfg, struct loop **out);
/* Run until cfg.blocks blocks are sent, loop_stop is called, or an error;
 * joins every thread and leaves no GPU work running. Returns 0 or the first
 * error. Call once per loop: a second call returns ONI_EINVALSTATE. A cpu
 * stage over its budget that does not return ends the run with ONI_ETIMEOUT
 * and its thread is left running it (docs/stages.md, "Budget"). */
int loop_run(struct loop *lp);
/* Ask a running loop to stop (thread-safe, async-signal-safe). */
void loop_stop(struct loop *lp);
/* The first error of a running or finished loop (0: none so far; ONI_EINVALARG
 * for NULL). Thread-safe. */
int loop_error(const struct loop *lp);
/* Load and check the stage that text names ("NAME[:OPTIONS]" or
 * "FILE[:OPTIONS]", loop_stage_spec), then unload it: 0, or ONI_EINVALARG
 * with why saying what is wrong (the loader's message, a missing symbol,
 * another API version). Its options are checked by loop_create. */
int loop_stage_check(const char *text, char *why, size_t cap);
/* The first error's text ("" when none: then oni_error_str of loop_error
 * says it all), owned by lp; "" for NULL. Thread-safe once loop_run returned. */
const char *loop_error_text(const struct loop *lp);
/* 1 when the run ended with GPU work that would not stop (a GPU stage that
 * never returns): the kernel holds the GPU until this process ends, which
 * is the only way to free it (0: none, or NULL). Valid once loop_run returned. */
int loop_gpu_left_running(const struct loop *lp);
/* Change stage i's configuration (its options, as after FILE:) between two
 * blocks: applied at once before loop_run, else by the loop before its next
 * block, waiting up to cfg.timeout_ms for it. 0, or ONI_EINVALARG (no such
 * stage, or the stage refused: why says), ONI_EUNIMPL (the stage takes no
 * change, or the chain runs on the GPU), ONI_ETIMEOUT, ONI_EINVALSTATE
 * (the loop ended). Not from a sink or a stage. */
int loop_stage_reconfigure(struct loop *lp, uint32_t i, const char *options, char *why, size_t cap);
/* Counters and timing records (valid during and after loop_run). loop_get_stats
 * writes zeros for a NULL lp and nothing for a NULL st. */
void loop_get_stats(const struct loop *lp, struct loop_stats *st);
/* The per-block records, loop_stats.nrecords of them, owned by lp (NULL for NULL). */
const struct loop_record *loop_records(const struct loop *lp);
/* Final EPHYS state (filters, thresholds) after loop_run; NULL for MAC. */
const struct loop_ephys_state *loop_ephys_final(struct loop *lp);
/* Free lp and everything it allocated (NULL ok); not while loop_run runs.
 * After a stage that never returned it frees nothing (that thread uses it). */
void loop_destroy(struct loop *lp);

/* One EPHYS block on the GPU (tests); st (host) is updated as the CPU
 * version would. ONI_ENOGPU without a GPU. */
int loop_gpu_ephys_once(struct loop_ephys_state *st, const uint8_t *blk, uint32_t nframes, struct loop_ephys_out *out);

#ifdef __cplusplus
}
#endif
#endif
