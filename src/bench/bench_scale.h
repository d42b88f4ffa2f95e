/* bench_scale.h - `onigpu bench scale`: where the GPU pays. The closed loop
 * on the emulated card (loop/run.h) swept over probes x algorithm x backend:
 * keeping up, spike -> stimulus latency, detection F1, and each backend
 * against the cpu backend in the same round (docs/benchmarks.md). */
#ifndef BENCH_SCALE_H
#define BENCH_SCALE_H

#include <stdint.h>
#include <stdio.h>
#include "bench/bench.h"

#define BENCH_SCALE_MAX 8

/* An algorithm: a name, and whether its chain needs the card's truth
 * templates (bench_scale.c builds each chain for the probes of a run). */
struct bench_scale_algo {
    const char *name;
    int templates;
};

/* "threshold", ...: the algorithms bench scale knows, by number; NULL past the last. */
const struct bench_scale_algo *bench_scale_algo(int i);
/* Its number, or -1 for another name. */
int bench_scale_algo_parse(const char *name);

struct bench_scale_opts {
    unsigned backends;                 /* bit per enum loop_backend */
    uint32_t probes[BENCH_SCALE_MAX];  /* each 1..LOOP_RUN_MAX_PROBES */
    int nprobes;
    unsigned algos;                    /* bit per bench_scale_algo number */
    uint32_t block;                    /* frames per block (1..LOOP_RUN_MAX_BLOCK) */
    double seconds;                    /* per run (>= LOOP_RUN_MIN_SECONDS) */
    int repeat;                        /* rounds, the configurations of one round interleaved (>= 1) */
    const char *out_dir;
    FILE *log;                         /* a line per run (may be NULL) */
};

/* Defaults: cpu and every available GPU backend, probes 1, 2, 4, every
 * algorithm, block 16, 3 s, once. */
void bench_scale_defaults(struct bench_scale_opts *o);

/* Every probes x algorithm x backend (x repeat) into rep: table "results"
 * (a row per run), table "ratios" (each backend against cpu, same probes,
 * algorithm and round), plots "-keeping" (the share of the probes' rate
 * processed against probes) and "-latency" (p99.9 against probes).
 * *failed counts runs that returned an error (their row says it),
 * *measured those that processed frames. A combination loop_run_check
 * refuses (over four probes take several cards: no GPU-resident backend)
 * is not run: logged, no row, no failure. 0, ONI_EINVALARG for options
 * outside the ranges above, or an error of the result set. */
int bench_scale_run(const struct bench_scale_opts *o, struct results *rep, int *failed, int *measured);

#endif
