/* stage_builtin.c - the built-in ephys pipeline as stages (onigpu_stage.h):
 * filter, reference, detect, decide, over the kernels of kernels.c. Their
 * state is a struct loop_ephys_state each (the parts they use), so the
 * chain's state can be handed to the GPU kernels as one (stage.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "oni.h"
#include "loop/stage.h"

/* The state from env->init when given, else zeros with the channel count. */
static struct loop_ephys_state *state_from(void *state, const struct onigpu_stage_env *env)
{
    struct loop_ephys_state *st = state;
    if (env->init)
        memcpy(st, env->init, sizeof *st);
    st->lay.nchan = env->nchan;
    return st;
}

/* --- filter: both biquads of the band-pass, state carried across blocks --- */

static int filter_options(struct loop_ephys_state *st, const char *options, double fs, int fresh, char *err,
                          size_t cap)
{
    static const char *const keys[] = {"lo", "hi"};
    double v[2] = {300.0, 6000.0};
    int given[2] = {0, 0};
    int rc = loop_stage_opts("filter", options, keys, 2, v, given, err, cap);
    if (rc || (!fresh && !given[0] && !given[1]))
        return rc; /* the band of the initial state stands */
    if (loop_ephys_set_band(st, v[0], v[1], fs)) {
        snprintf(err, cap, "stage filter: band %g-%g Hz at %g Hz sampling (0 < lo < hi < fs/2)", v[0], v[1], fs);
        return ONI_EINVALARG;
    }
    return 0;
}

static int filter_configure(void *state, const struct onigpu_stage_env *env, char *err, size_t cap)
{
    struct loop_ephys_state *st = state_from(state, env);
    return filter_options(st, env->options, env->fs_hz, env->init == NULL, err, cap);
}

static int filter_process(void *state, struct onigpu_block *b)
{
    loop_ephys_filter(state, b->x, b->nframes);
    return 0;
}

static int filter_reconfigure(void *state, const struct onigpu_stage_env *env, char *err, size_t cap)
{
    return filter_options(state, env->options, env->fs_hz, 0, err, cap);
}

const struct onigpu_stage loop_stage_filter = {
    .version = ONIGPU_STAGE_VERSION,
    .name = "filter",
    .input = ONIGPU_DATA_SAMPLES,
    .output = ONIGPU_DATA_SAMPLES,
    .state_bytes = sizeof(struct loop_ephys_state),
    .configure = filter_configure,
    .process = filter_process,
    .reconfigure = filter_reconfigure,
};

/* --- reference: each probe's common average subtracted from its channels --- */

/* group=N: channels per common-average group (0: all); default the layout's (a probe). */
static int reference_options(struct loop_ephys_state *st, const char *options, char *err, size_t cap)
{
    static const char *const keys[] = {"group"};
    double v[1] = {st->lay.group};
    int given[1] = {0};
    int rc = loop_stage_opts("reference", options, keys, 1, v, given, err, cap);
    if (rc || !given[0])
        return rc;
    uint32_t n = st->lay.nchan;
    if (!(v[0] >= 0 && v[0] <= n && v[0] == floor(v[0])) || (v[0] && (n % (uint32_t)v[0] ||
                                                                      n / (uint32_t)v[0] > LOOP_EPHYS_MAXGROUPS))) {
        snprintf(err, cap, "stage reference: group=%g: 0 (all %u channels) or a divisor of %u leaving at most %d groups",
                 v[0], n, n, LOOP_EPHYS_MAXGROUPS);
        return ONI_EINVALARG;
    }
    st->lay.group = (uint32_t)v[0];
    return 0;
}

static int reference_configure(void *state, const struct onigpu_stage_env *env, char *err, size_t cap)
{
    return reference_options(state_from(state, env), env->options, err, cap);
}

static int reference_process(void *state, struct onigpu_block *b)
{
    const struct loop_ephys_state *st = state;
    loop_ephys_reference(b->x, b->nchan, st->lay.group, b->nframes);
    return 0;
}

const struct onigpu_stage loop_stage_reference = {
    .version = ONIGPU_STAGE_VERSION,
    .name = "reference",
    .input = ONIGPU_DATA_SAMPLES,
    .output = ONIGPU_DATA_SAMPLES,
    .state_bytes = sizeof(struct loop_ephys_state),
    .configure = reference_configure,
    .process = reference_process,
};

/* --- detect: noise calibration, then negative threshold crossings ----------- */

static int detect_options(struct loop_ephys_state *st, const char *options, double fs, int fresh, char *err,
                          size_t cap)
{
    static const char *const keys[] = {"k", "refractory_ms", "calib_s", "radius", "sweep_ms"};
    struct loop_ephys_params p;
    loop_ephys_defaults(&p);
    double v[5] = {p.k, p.refractory_s * 1e3, p.calib_s, p.radius, p.sweep_s * 1e3};
    int given[5] = {0, 0, 0, 0, 0};
    int rc = loop_stage_opts("detect", options, keys, 5, v, given, err, cap);
    if (rc)
        return rc;
    if (!fresh) { /* what was not given stays as the state has it */
        if (!given[0])
            v[0] = (double)st->k * 0.6745;
        if (!given[1])
            v[1] = st->refractory / fs * 1e3;
        if (!given[2])
            v[2] = st->calib / fs;
        if (!given[3])
            v[3] = st->radius;
        if (!given[4])
            v[4] = st->sweep / fs * 1e3;
    }
    if (!fresh && st->nsamples > 0 && given[2]) {
        snprintf(err, cap, "stage detect: calib_s cannot change once calibration started");
        return ONI_EINVALARG;
    }
    uint32_t radius = st->radius, sweep = st->sweep; /* put back if the rest is refused */
    int bad = !(v[3] >= 0 && v[3] < LOOP_EPHYS_MAXCHAN && v[3] == floor(v[3])) ||
              loop_ephys_set_exclusive(st, (uint32_t)v[3], v[4] / 1e3, fs);
    if (!bad && loop_ephys_set_detect(st, v[0], v[1] / 1e3, v[2], fs)) {
        st->radius = radius;
        st->sweep = sweep;
        bad = 1;
    }
    if (bad) {
        snprintf(err, cap, "stage detect: k=%g refractory_ms=%g calib_s=%g radius=%g sweep_ms=%g (k > 0; windows "
                 "of 0 .. 2^32-1 samples; radius a whole number of channels below %d)", v[0], v[1], v[2], v[3], v[4],
                 LOOP_EPHYS_MAXCHAN);
        return ONI_EINVALARG;
    }
    return 0;
}

static int detect_configure(void *state, const struct onigpu_stage_env *env, char *err, size_t cap)
{
    struct loop_ephys_state *st = state_from(state, env);
    /* an initial state keeps its parameters unless options change them */
    return detect_options(st, env->options, env->fs_hz, env->init == NULL, err, cap);
}

static int detect_reconfigure(void *state, const struct onigpu_stage_env *env, char *err, size_t cap)
{
    return detect_options(state, env->options, env->fs_hz, 0, err, cap);
}

static int detect_process(void *state, struct onigpu_block *b)
{
    loop_ephys_detect(state, b->x, b->nframes, b->frames, 0, b->out);
    return 0;
}

const struct onigpu_stage loop_stage_detect = {
    .version = ONIGPU_STAGE_VERSION,
    .name = "detect",
    .input = ONIGPU_DATA_SAMPLES,
    .output = ONIGPU_DATA_SPIKES,
    .state_bytes = sizeof(struct loop_ephys_state),
    .configure = detect_configure,
    .process = detect_process,
    .reconfigure = detect_reconfigure,
};

/* --- decide: one stimulation per spike, with a lockout ------------------------ */

/* The units of "units=3+7" in options into units[] (*n of them; *given 1
 * when the key is there), the other options copied into rest[cap]. 0, or
 * ONI_EINVALARG with err. */
static int decide_units(const char *options, uint32_t *units, uint32_t *n, int *given, char *rest, size_t rcap,
                        char *err, size_t cap)
{
    size_t k = 0;
    *n = 0, *given = 0, rest[0] = '\0';
    for (const char *p = options ? options : ""; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len < 6 || strncmp(p, "units=", 6)) {
            if (k + len + 2 > rcap) {
                snprintf(err, cap, "stage decide: options too long");
                return ONI_EINVALARG;
            }
            k += (size_t)snprintf(rest + k, rcap - k, "%s%.*s", k ? "," : "", (int)len, p);
        } else {
            *given = 1, *n = 0;
            const char *q = p + 6, *stop = p + len;
            int bad = q == stop;
            while (!bad && q <= stop) { /* tokens of digits between '+' */
                const char *e = q;
                uint64_t u = 0;
                while (e < stop && *e >= '0' && *e <= '9' && u < UINT32_MAX)
                    u = u * 10 + (uint64_t)(*e++ - '0');
                bad = e == q || u >= UINT32_MAX || (e < stop && *e != '+') || *n == LOOP_DECIDE_MAXUNITS;
                if (!bad)
                    units[(*n)++] = (uint32_t)u;
                q = e + 1;
                bad = bad || (e < stop && q == stop); /* a trailing '+' */
            }
            if (bad) {
                snprintf(err, cap, "stage decide: units='%.*s' (unit numbers joined by '+', e.g. units=3+7; %d at "
                         "most)", (int)(len - 6), p + 6, LOOP_DECIDE_MAXUNITS);
                return ONI_EINVALARG;
            }
        }
        p += len + (end ? 1 : 0);
    }
    return 0;
}

static int decide_options(struct loop_ephys_state *st, const struct onigpu_stage_env *env, int fresh, char *err,
                          size_t cap)
{
    static const char *const keys[] = {"lockout_ms"};
    struct loop_ephys_params p;
    loop_ephys_defaults(&p);
    double v = fresh ? p.lockout_s * 1e3 : (double)st->lockout / env->clock_hz * 1e3;
    int given = 0, ugiven;
    uint32_t units[LOOP_DECIDE_MAXUNITS], nunits;
    char rest[256];
    int rc = decide_units(env->options, units, &nunits, &ugiven, rest, sizeof rest, err, cap);
    if (!rc)
        rc = loop_stage_opts("decide", rest, keys, 1, &v, &given, err, cap);
    if (rc)
        return rc;
    if ((fresh || given) && loop_ephys_set_lockout(st, v / 1e3, env->clock_hz)) {
        snprintf(err, cap, "stage decide: lockout_ms=%g (0 .. 3600000)", v);
        return ONI_EINVALARG;
    }
    if (ugiven) { /* else the units stay as the state has them (none in a fresh one) */
        memcpy(st->units, units, nunits * sizeof units[0]);
        st->nunits = nunits;
    }
    return 0;
}

static int decide_configure(void *state, const struct onigpu_stage_env *env, char *err, size_t cap)
{
    struct loop_ephys_state *st = state_from(state, env);
    return decide_options(st, env, env->init == NULL, err, cap);
}

static int decide_reconfigure(void *state, const struct onigpu_stage_env *env, char *err, size_t cap)
{
    return decide_options(state, env, 0, err, cap);
}

static int decide_process(void *state, struct onigpu_block *b)
{
    loop_ephys_decide(state, b->out);
    return 0;
}

const struct onigpu_stage loop_stage_decide = {
    .version = ONIGPU_STAGE_VERSION,
    .name = "decide",
    .input = ONIGPU_DATA_SPIKES,
    .output = ONIGPU_DATA_DECISION,
    .state_bytes = sizeof(struct loop_ephys_state),
    .configure = decide_configure,
    .process = decide_process,
    .reconfigure = decide_reconfigure,
};

const struct onigpu_stage *loop_stage_builtin(const char *name, size_t len)
{
    static const struct onigpu_stage *const all[] = {&loop_stage_filter, &loop_stage_reference, &loop_stage_detect,
                                                     &loop_stage_decide, &loop_stage_tmatch};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strlen(all[i]->name) == len && !strncmp(all[i]->name, name, len))
            return all[i];
    return NULL;
}
