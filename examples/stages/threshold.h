/* threshold.h - the threshold stage's state, shared by its CPU version
 * (threshold.c) and its GPU version (threshold.cu, which the loop compiles
 * with this text before it). */
#ifndef STAGE_THRESHOLD_H
#define STAGE_THRESHOLD_H
#include "onigpu_stage.h"

struct threshold {
    uint32_t first, count;
    float thr;
    uint32_t refractory; /* samples */
    uint64_t nsamples;   /* samples seen so far */
    uint64_t next[ONIGPU_STAGE_MAXCHAN]; /* sample index from which channel c may fire again */
};

#endif
