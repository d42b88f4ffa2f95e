/* bench_loop.h - `onigpu bench loop`: thesis table 5.2 (read -> compute ->
 * send back) on every backend of the closed-loop engine, per block round
 * trip statistics and a stage breakdown (in / compute / out), CSV + JSON + PNG. */
#ifndef BENCH_LOOP_H
#define BENCH_LOOP_H

#include <stdint.h>
#include <stdio.h>

#define BENCH_LOOP_MAX 16

struct results;

struct bench_loop_opts {
    uint64_t data[BENCH_LOOP_MAX], compute[BENCH_LOOP_MAX]; /* scenario sizes, bytes */
    int nscen;
    double ai[BENCH_LOOP_MAX];                               /* FLOP/byte; iters = 4 * ai (bench_loop_iters) */
    int nai;
    unsigned backends;                                       /* bit per enum loop_backend */
    uint64_t blocks;                                         /* per configuration (upper bound) */
    double seconds;                                          /* per configuration (time budget) */
    const char *source;                                      /* "mem" (default) or "emu" */
    const char *link;                                        /* emu link preset (NULL = the card's default) */
    const char *out_dir;                                     /* where the command opens the result set */
    FILE *log;                                               /* progress lines (may be NULL) */
};

/* Defaults: the four scenarios of table 5.2, AI 0.75 and 10, every available
 * backend, 2000 blocks or 2 s per configuration, the in-memory source,
 * docs/results. Source "emu": blocks are read from the emulated card's test
 * core on the GPU data stream (ONI_DRV_READ / READ_ASYNC) and results written
 * back to its test sink (ONI_DRV_WRITE), through the card's link model. */
void bench_loop_defaults(struct bench_loop_opts *o);
/* Whether a scenario runs as given: data a multiple of 4 in 4 B .. 1 GiB,
 * compute a multiple of data, at most UINT32_MAX passes (compute / data). */
int bench_loop_sizes_ok(uint64_t data, uint64_t compute);
/* The MAC kernel's iterations per element for arithmetic intensity ai
 * (4 x ai), or 0 when ai is not a multiple of 0.25 in 0.25 .. 10^4. */
uint32_t bench_loop_iters(double ai);
/* One configuration in latency mode: round trip p50 (ns) of `blocks` blocks
 * of data bytes (rounded down to a multiple of 4), compute / data passes
 * (rounded down), 4 x ai iterations (ai as bench_loop_iters accepts, else
 * ONI_EINVALARG), on backend. 0 or an ONI error. */
int bench_loop_measure(int backend, uint64_t data, uint64_t compute, double ai, uint64_t blocks, double *p50_ns);
/* The body of `onigpu bench loop` (the shape of bench.h): run every
 * configuration (scenarios and AIs as bench_loop_sizes_ok and
 * bench_loop_iters accept, else ONI_EINVALARG) and add them to rep, the open
 * set "loop": a configuration that fails has its error in its row, and
 * *failed counts them; *measured counts the others. When none was measured
 * nothing is added (the command writes no result set). 0 or an ONI error. */
int bench_loop_run(const struct bench_loop_opts *o, struct results *rep, int *failed, int *measured);

#endif
