/* bench_latency.h - `onigpu bench latency`: the closed loop on the emulated
 * card (loop/run.h), swept over block sizes per backend and per spin budget,
 * spike -> stimulus latency and where the time after the block's last sample
 * goes (docs/latency.md). */
#ifndef BENCH_LATENCY_H
#define BENCH_LATENCY_H

#include <stdint.h>
#include <stdio.h>
#include "bench/bench.h"

#define BENCH_LATENCY_MAX 16

struct bench_latency_opts {
    unsigned backends;                  /* bit per enum loop_backend */
    uint32_t blocks[BENCH_LATENCY_MAX]; /* frames per block, each 1..LOOP_RUN_MAX_BLOCK */
    int nblocks;
    uint32_t spins[BENCH_LATENCY_MAX];  /* loop_run_config.spin_us values */
    int nspins;
    int reads[2];                       /* loop_run_config.dma_reads values (0 blocking, 1 DMA) */
    int nreads;
    const char *specs[4];               /* the cards (NULL: LOOP_RUN_DEFAULT_SPEC) */
    int nspecs;
    /* A variant is a (spec, spin, reads) triple; the first (specs[0],
     * spins[0], reads[0]) is the reference of the ratios. */
    double seconds;                     /* per run (>= LOOP_RUN_MIN_SECONDS) */
    int repeat;                         /* runs per configuration, interleaved (>= 1) */
    const char *out_dir;
    FILE *log;                          /* one line per run (may be NULL) */
};

/* Defaults: cpu and every available GPU backend, blocks 1,2,4,8,16,32, spins
 * 50 (LOOP_RUN_SPIN_US, the engine's own) and 1000, reads dma (as the
 * loop read before) and blocking, 2 s, once. */
void bench_latency_defaults(struct bench_latency_opts *o);

/* Run every backend x block x variant (x repeat, the configurations of one
 * round interleaved, so that a change of the machine's load touches all of
 * them) into rep: table "results" (one row per run), table "ratios" (each
 * variant against the first, same backend, block and round) and the plots
 * "-blocks" (p50/p99/p99.9 against block, with the block-arithmetic line)
 * and "-stages" (each stage's p50 against block). *failed counts runs that
 * returned an error (their row says it), *measured those that gave
 * latencies. 0, or an error of the result set. */
int bench_latency_run(const struct bench_latency_opts *o, struct results *rep, int *failed, int *measured);

#endif
