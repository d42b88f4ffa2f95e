/* advise.h - `onigpu advise`: the thesis' figure 6.1 decision tree, fed with
 * this machine's measured numbers. */
#ifndef BENCH_ADVISE_H
#define BENCH_ADVISE_H

#include <stdint.h>
#include <stdio.h>

struct advise_opts {
    uint64_t data, compute; /* bytes per block: transferred, computed on */
    double ai;              /* FLOP per byte */
    int serial;             /* the algorithm does not parallelize */
    int measure;            /* also run the loop on each candidate backend */
    const char *link;       /* emulated card link preset (NULL = default) */
    FILE *out;
};

/* Print the decision path, predicted (and measured) round trips and the
 * recommended backend. 0 or an ONI error (ONI_EINVALARG for an AI that is not
 * a multiple of 0.25 in 0.25 .. 10^4: bench_loop_iters). */
int advise_run(const struct advise_opts *o);

#endif
