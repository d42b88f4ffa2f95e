/* poprate.c - a user stage: a population-rate trigger (docs/stages.md).
 * Reads the chain's spikes and decides to stimulate when at least n
 * different channels fired within the last w_ms; after a stimulus it waits
 * dead_ms before the next. The stimulus answers the spike that completed
 * the count (out->t_stim), so the loop's latency is measured from it.
 *
 *   onigpu run --stage filter --stage reference --stage detect \
 *              --stage ./libstage_poprate.so:n=3,w_ms=5,dead_ms=20
 *
 * Options: n (channels, default 3), w_ms (window, default 5), dead_ms
 * (default 20). Spikes are taken in the order the chain lists them (by
 * frame, then channel, on the cpu backend). */
#include <stdio.h>
#include "poprate.h"

extern const char poprate_cu[]; /* poprate.h and poprate.cu (examples/CMakeLists.txt) */

static int configure(void *state, const struct onigpu_stage_env *env, char *err, size_t cap)
{
    static const char *const keys[] = {"n", "w_ms", "dead_ms"};
    struct poprate *p = state;
    double n = 3, w = 5, dead = 20;
    const char *bad = onigpu_stage_unknown(env->options, keys, 3);
    if (bad) {
        snprintf(err, cap, "unknown option '%s' (n, w_ms, dead_ms)", bad);
        return -11; /* ONI_EINVALARG */
    }
    if (onigpu_stage_option(env->options, "n", &n) < 0 || onigpu_stage_option(env->options, "w_ms", &w) < 0 ||
        onigpu_stage_option(env->options, "dead_ms", &dead) < 0 || n < 1 || n > env->nchan || (uint32_t)n != n ||
        !(w > 0) || w > 10000 || !(dead >= 0) || dead > 10000) {
        snprintf(err, cap, "'%s': 1 <= n <= %u channels, 0 < w_ms <= 10000, 0 <= dead_ms <= 10000", env->options,
                 env->nchan);
        return -11;
    }
    p->n = (uint32_t)n;
    p->w = (uint64_t)(w * 1e-3 * env->clock_hz);
    p->dead = (uint64_t)(dead * 1e-3 * env->clock_hz);
    return 0;
}

static int process(void *state, struct onigpu_block *b)
{
    return poprate_block(state, b);
}

ONIGPU_STAGE_EXPORT const struct onigpu_stage onigpu_stage = {
    .version = ONIGPU_STAGE_VERSION,
    .name = "poprate",
    .input = ONIGPU_DATA_SPIKES,
    .output = ONIGPU_DATA_DECISION,
    .state_bytes = sizeof(struct poprate),
    .configure = configure,
    .process = process,
    .gpu_source = poprate_cu,
    .gpu_entry = "poprate_gpu",
};
