/* poprate.h - the population-rate stage's state and its rule, shared by
 * its CPU version (poprate.c) and its GPU version (poprate.cu, which the
 * loop compiles with this text before it): the same code on both. */
#ifndef STAGE_POPRATE_H
#define STAGE_POPRATE_H
#include "onigpu_stage.h"

struct poprate {
    uint32_t n;
    uint64_t w, dead;    /* acquisition clock ticks */
    uint64_t last_stim;  /* time of the last stimulus + 1 (0: none) */
    uint64_t last[ONIGPU_STAGE_MAXCHAN]; /* time of channel c's last spike + 1 (0: none) */
};

/* Channels whose last spike is within the window that ends at t. */
ONIGPU_STAGE_FN uint32_t poprate_active(const struct poprate *p, uint32_t nchan, uint64_t t)
{
    uint32_t k = 0;
    for (uint32_t c = 0; c < nchan; c++)
        k += p->last[c] && p->last[c] - 1 + p->w >= t;
    return k;
}

/* One block's decision (one thread). */
ONIGPU_STAGE_FN int poprate_block(void *state, struct onigpu_block *b)
{
    struct poprate *p = (struct poprate *)state;
    const struct onigpu_out *o = b->out;
    for (uint32_t i = 0; i < o->nspikes; i++) {
        const struct onigpu_spike *s = &o->spikes[i];
        if (s->chan >= b->nchan)
            continue;
        p->last[s->chan] = s->time + 1;
        if (b->out->stim || (p->last_stim && s->time < p->last_stim - 1 + p->dead))
            continue;
        if (poprate_active(p, b->nchan, s->time) >= p->n) {
            b->out->stim = 1;
            b->out->t_stim = s->time;
            p->last_stim = s->time + 1;
        }
    }
    return 0;
}

#endif
