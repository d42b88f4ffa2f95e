/* threshold.c - a user stage: a fixed threshold detector on selected
 * channels (docs/stages.md). Reads the chain's samples (after filter and
 * reference), lists a spike when a selected channel goes below -thr,
 * then holds that channel for refractory_ms.
 *
 *   onigpu run --stage filter --stage reference \
 *              --stage ./libstage_threshold.so:first=0,count=64,thr=60,refractory_ms=1
 *
 * Options: first, count (the channels first .. first + count - 1; default
 * all), thr (in ADC counts of the filtered signal, default 60),
 * refractory_ms (default 1.5). Build: see examples/stages/CMakeLists.txt.
 * The GPU version is threshold.cu. */
#include <stdio.h>
#include "threshold.h"

extern const char threshold_cu[]; /* threshold.h and threshold.cu (examples/CMakeLists.txt) */

static int configure(void *state, const struct onigpu_stage_env *env, char *err, size_t cap)
{
    static const char *const keys[] = {"first", "count", "thr", "refractory_ms"};
    struct threshold *t = state;
    double first = 0, count = env->nchan, thr = 60, refr = 1.5;
    const char *bad = onigpu_stage_unknown(env->options, keys, 4);
    if (bad) {
        snprintf(err, cap, "unknown option '%s' (first, count, thr, refractory_ms)", bad);
        return -11; /* ONI_EINVALARG */
    }
    if (onigpu_stage_option(env->options, "first", &first) < 0 || onigpu_stage_option(env->options, "count", &count) < 0 ||
        onigpu_stage_option(env->options, "thr", &thr) < 0 ||
        onigpu_stage_option(env->options, "refractory_ms", &refr) < 0) {
        snprintf(err, cap, "an option's value is not a number: '%s'", env->options);
        return -11;
    }
    if (first < 0 || count < 1 || first + count > env->nchan || (uint32_t)first != first || (uint32_t)count != count) {
        snprintf(err, cap, "channels %g .. %g: the frames have channels 0 .. %u", first, first + count - 1,
                 env->nchan - 1);
        return -11;
    }
    if (!(thr > 0) || !(refr >= 0) || refr > 1000) {
        snprintf(err, cap, "thr=%g refractory_ms=%g: thr > 0, 0 <= refractory_ms <= 1000", thr, refr);
        return -11;
    }
    t->first = (uint32_t)first;
    t->count = (uint32_t)count;
    t->thr = (float)thr;
    t->refractory = (uint32_t)(refr * env->fs_hz / 1000.0 + 0.5);
    return 0;
}

static int process(void *state, struct onigpu_block *b)
{
    struct threshold *t = state;
    for (uint32_t f = 0; f < b->nframes; f++) {
        const float *row = b->x + (size_t)f * b->nchan;
        uint64_t idx = t->nsamples + f;
        for (uint32_t c = t->first; c < t->first + t->count; c++) {
            if (row[c] < -t->thr && idx >= t->next[c]) {
                t->next[c] = idx + t->refractory;
                onigpu_add_spike(b->out, onigpu_frame_time(b, f), c, f);
            }
        }
    }
    t->nsamples += b->nframes;
    return 0;
}

ONIGPU_STAGE_EXPORT const struct onigpu_stage onigpu_stage = {
    .version = ONIGPU_STAGE_VERSION,
    .name = "threshold",
    .input = ONIGPU_DATA_SAMPLES,
    .output = ONIGPU_DATA_SPIKES,
    .state_bytes = sizeof(struct threshold),
    .configure = configure,
    .process = process,
    .gpu_source = threshold_cu,
    .gpu_entry = "threshold_gpu",
};
