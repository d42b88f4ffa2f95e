/* bench_loop.h - `onigpu bench loop`: thesis table 5.2 (read -> compute ->
 * send back) on every backend of the closed-loop engine, per block round
 * trip statistics and a stage breakdown (in / compute / out), CSV + JSON + PNG. */
#ifndef BENCH_LOOP_H
#define BENCH_LOOP_H

#include <stdint.h>
#include <stdio.h>

#define BENCH_LOOP_MAX 16

struct bench_loop_opts {
    uint64_t data[BENCH_LOOP_MAX], compute[BENCH_LOOP_MAX]; /* scenario sizes, bytes */
    int nscen;
    double ai[BENCH_LOOP_MAX];                               /* FLOP/byte; iters = round(4 * ai) */
    int nai;
    unsigned backends;                                       /* bit per enum loop_backend */
    uint64_t blocks;                                         /* per configuration (upper bound) */
    double seconds;                                          /* per configuration (time budget) */
    const char *source;                                      /* "mem" (default) or "emu" */
    const char *link;                                        /* emu link preset (NULL = the card's default) */
    const char *out_dir;
    int argc;
    char **argv;
    FILE *log;                                               /* progress lines (may be NULL) */
};

/* Defaults: the four scenarios of table 5.2, AI 0.75 and 10, every available
 * backend, 2000 blocks or 2 s per configuration, the in-memory source,
 * docs/results. Source "emu": blocks are read from the emulated card's test
 * core on the GPU data stream (ONI_DRV_READ / READ_ASYNC) and results written
 * back to its test sink (ONI_DRV_WRITE), through the card's link model. */
void bench_loop_defaults(struct bench_loop_opts *o);
/* One configuration in latency mode: round trip p50 (ns) of `blocks` blocks
 * of data bytes, compute bytes, at ai, on backend. 0 or an ONI error. */
int bench_loop_measure(int backend, uint64_t data, uint64_t compute, double ai, uint64_t blocks, double *p50_ns);
/* The same through the emulated card with link preset `link` (NULL = default). */
int bench_loop_measure_card(int backend, const char *link, uint64_t data, uint64_t compute, double ai,
                            uint64_t blocks, double *p50_ns);
/* Run every configuration and write the result set. 0 or an ONI error. */
int bench_loop_run(const struct bench_loop_opts *o);

#endif
