/* stage_tmatch.c - the built-in `tmatch` stage: online template matching
 * (samples -> labelled spikes) over templates read from a Kilosort/phy file
 * set (tmatch_files.h). The arithmetic is tmatch.h's, which the GPU version
 * (tmatch.cu, compiled with NVRTC when a GPU backend runs the chain) shares;
 * docs/stages.md "Template matching" argues the rule. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "oni.h"
#include "loop/stage.h"
#include "loop/tmatch.h"
#include "loop/tmatch_files.h"

#if ONIGPU_HAVE_JIT
extern const char loop_src_tmatch_cu[]; /* tmatch.h then tmatch.cu (CMake, tools/embed.cmake) */
#define TM_GPU_SOURCE loop_src_tmatch_cu
#else
#define TM_GPU_SOURCE NULL
#endif

/* What the options ask for (docs/stages.md has the table). */
struct tm_opts {
    char dir[1024];
    double th, amin, amax, gate, before, after, lag, foot, lo, hi, car, calib_s, chan0;
};

/* "templates=DIR" out of options into o->dir, the rest into rest[rcap]. */
static int split_dir(const char *options, struct tm_opts *o, char *rest, size_t rcap, char *err, size_t cap)
{
    size_t k = 0;
    rest[0] = '\0', o->dir[0] = '\0';
    for (const char *p = options ? options : ""; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len >= 10 && !strncmp(p, "templates=", 10)) {
            if (len - 10 >= sizeof o->dir || len == 10) {
                snprintf(err, cap, "stage tmatch: templates= needs a directory (under %zu characters, no ',')",
                         sizeof o->dir);
                return ONI_EINVALARG;
            }
            snprintf(o->dir, sizeof o->dir, "%.*s", (int)(len - 10), p + 10);
        } else {
            if (k + len + 2 > rcap) {
                snprintf(err, cap, "stage tmatch: options too long");
                return ONI_EINVALARG;
            }
            k += (size_t)snprintf(rest + k, rcap - k, "%s%.*s", k ? "," : "", (int)len, p);
        }
        p += len + (end ? 1 : 0);
    }
    if (!o->dir[0]) {
        snprintf(err, cap, "stage tmatch: templates=DIR is needed (a directory with templates.npy and "
                           "channel_map.npy, docs/stages.md)");
        return ONI_EINVALARG;
    }
    return 0;
}

static int parse(const struct onigpu_stage_env *env, struct tm_opts *o, char *err, size_t cap)
{
    static const char *const keys[] = {"th",   "amin", "amax", "gate", "before", "after",
                                       "lag",  "foot", "lo",   "hi",   "car",    "calib_s", "chan0"};
    double v[13] = {6.0, 0.5, 2.0, 3.0, 10, 15, 2, 16, 300.0, 6000.0, 1, 0.2, 0};
    int given[13] = {0};
    char rest[512];
    int rc = split_dir(env->options, o, rest, sizeof rest, err, cap);
    if (!rc)
        rc = loop_stage_opts("tmatch", rest, keys, 13, v, given, err, cap);
    if (rc)
        return rc;
    o->th = v[0], o->amin = v[1], o->amax = v[2], o->gate = v[3], o->before = v[4], o->after = v[5];
    o->lag = v[6], o->foot = v[7], o->lo = v[8], o->hi = v[9], o->car = v[10], o->calib_s = v[11];
    o->chan0 = v[12];
    int whole = o->before == floor(o->before) && o->after == floor(o->after) && o->lag == floor(o->lag) &&
                o->foot == floor(o->foot) && o->chan0 == floor(o->chan0);
    if (!whole || !(o->th > 0) || !(o->amin >= 0 && o->amin < o->amax) || !(o->gate >= 0) || o->before < 0 ||
        o->after < 0 || o->before + o->after + 1 > TM_MAXL || o->lag < 1 || o->lag > TM_MAXLAG || o->foot < 1 ||
        o->foot > TM_MAXF || (o->car != 0 && o->car != 1) || !(o->calib_s > 0 && o->calib_s <= 60) ||
        o->chan0 < 0 || o->chan0 >= ONIGPU_STAGE_MAXCHAN) {
        snprintf(err, cap, "stage tmatch: th=%g amin=%g amax=%g gate=%g before=%g after=%g lag=%g foot=%g car=%g "
                 "calib_s=%g chan0=%g (th > 0; 0 <= amin < amax; gate >= 0; whole numbers: before + after + 1 <= %d "
                 "samples, lag 1 .. %d, foot 1 .. %d channels, chan0 below %d; car 0 or 1; 0 < calib_s <= 60)",
                 o->th, o->amin, o->amax, o->gate, o->before, o->after, o->lag, o->foot, o->car, o->calib_s, o->chan0,
                 TM_MAXL, TM_MAXLAG, TM_MAXF, ONIGPU_STAGE_MAXCHAN);
        return ONI_EINVALARG;
    }
    return 0;
}

/* The set's templates as the chain's data sees them: each through the band
 * of the filter stage (unless params.py says they are filtered already, or
 * lo=0) and, with car=1, less each sample's mean over the channels, as the
 * reference stage does. In place. */
static int filter_templates(struct tm_files *f, const struct tm_opts *o, double fs, char *err, size_t cap)
{
    if (f->hp_filtered == 1 || o->lo == 0)
        return 0;
    struct loop_ephys_state *st = calloc(1, sizeof *st);
    if (!st)
        return ONI_EBADALLOC;
    if (loop_ephys_set_band(st, o->lo, o->hi, fs)) {
        snprintf(err, cap, "stage tmatch: band lo=%g hi=%g Hz at %g Hz sampling (0 < lo < hi < fs/2; lo=0: the "
                 "templates as they are)", o->lo, o->hi, fs);
        free(st);
        return ONI_EINVALARG;
    }
    st->lay.nchan = f->nch;
    for (uint32_t k = 0; k < f->ntpl; k++) {
        float *t = f->templates + (size_t)k * f->nsamp * f->nch;
        memset(st->z, 0, sizeof st->z);
        loop_ephys_filter(st, t, f->nsamp);
        if (o->car)
            loop_ephys_reference(t, f->nch, 0, f->nsamp); /* one probe's set: one group */
    }
    free(st);
    return 0;
}

/* Template k of the set into st->t[into]: its trough (deepest sample of any
 * channel), the window before .. after it, the footprint (the `foot`
 * channels of largest peak-to-peak in the window, those of at least a tenth
 * of the largest). */
static void take_template(struct tm_state *st, const struct tm_files *f, uint32_t k, uint32_t into,
                          const struct tm_opts *o)
{
    const float *t = f->templates + (size_t)k * f->nsamp * f->nch;
    uint32_t ts = 0, tc = 0;
    for (uint32_t s = 0; s < f->nsamp; s++)
        for (uint32_t c = 0; c < f->nch; c++)
            if (t[(size_t)s * f->nch + c] < t[(size_t)ts * f->nch + tc])
                ts = s, tc = c;
    int64_t t0 = (int64_t)ts - (int64_t)o->before;
    float ptp[LOOP_EPHYS_MAXCHAN];
    float top = 0;
    for (uint32_t c = 0; c < f->nch; c++) { /* nch <= ONIGPU_STAGE_MAXCHAN (configure) */
        float lo = 0, hi = 0;
        for (uint32_t i = 0; i < st->len; i++) {
            int64_t s = t0 + i;
            float v = s >= 0 && s < f->nsamp ? t[(size_t)s * f->nch + c] : 0.0f;
            lo = v < lo ? v : lo, hi = v > hi ? v : hi;
        }
        ptp[c] = hi - lo;
        top = ptp[c] > top ? ptp[c] : top;
    }
    struct tm_template *m = &st->t[into];
    m->nfoot = 0;
    m->trough = (uint32_t)o->before;
    m->peak = f->chan_map[tc];
    m->peak_j = 0;
    /* the peak channel first, then by peak-to-peak */
    ptp[tc] = INFINITY;
    while (m->nfoot < (uint32_t)o->foot) {
        uint32_t best = UINT32_MAX;
        for (uint32_t c = 0; c < f->nch; c++)
            if (ptp[c] >= 0.1f * top && ptp[c] > 0 && (best == UINT32_MAX || ptp[c] > ptp[best]))
                best = c;
        if (best == UINT32_MAX)
            break;
        uint32_t j = m->nfoot++;
        m->chan[j] = f->chan_map[best];
        for (uint32_t i = 0; i < st->len; i++) {
            int64_t s = t0 + i;
            m->w[j][i] = s >= 0 && s < f->nsamp ? t[(size_t)s * f->nch + best] : 0.0f;
        }
        ptp[best] = -1;
    }
}

/* One file set, its channel_map from *base in the loop's frames (*base then
 * past its channels), its templates after those st has. 0, or an error with
 * err naming the set's directory and what. */
static int add_set(struct tm_state *st, const struct onigpu_stage_env *env, const struct tm_opts *o,
                   const char *dir, uint32_t *base, char *err, size_t cap)
{
    struct tm_files f;
    char why[512];
    int rc = dir[0] ? tm_files_load(dir, &f, why, sizeof why) : ONI_EINVALARG;
    if (!dir[0]) {
        snprintf(err, cap, "stage tmatch: templates=%s names an empty directory", o->dir);
        return rc;
    }
    if (rc) {
        snprintf(err, cap, "stage tmatch: %s", why[0] ? why : oni_error_str(rc));
        tm_files_free(&f);
        return rc;
    }
    if ((uint64_t)st->ntpl + f.ntpl > TM_MAXT)
        snprintf(why, sizeof why, "%u templates%s (%d at most)", st->ntpl + f.ntpl, st->ntpl ? " in all" : "",
                 TM_MAXT), rc = ONI_EINVALARG;
    if (f.nch > ONIGPU_STAGE_MAXCHAN)
        snprintf(why, sizeof why, "templates of %u channels (%d at most)", f.nch, ONIGPU_STAGE_MAXCHAN),
            rc = ONI_EINVALARG;
    for (uint32_t i = 0; !rc && i < f.nch; i++) {
        if ((uint64_t)f.chan_map[i] + *base >= env->nchan)
            snprintf(why, sizeof why, "channel_map.npy[%u] = %u + %u (chan0 and the sets before it), and the loop's "
                     "frames have %u channels", i, f.chan_map[i], *base, env->nchan), rc = ONI_EINVALARG;
        else
            f.chan_map[i] += *base; /* the probe's first channel in the loop's frames */
    }
    if (!rc && f.fs_hz > 0 && fabs(f.fs_hz - env->fs_hz) > 0.01 * env->fs_hz)
        snprintf(why, sizeof why, "params.py's sample_rate %g Hz, the loop's frames come at %g Hz", f.fs_hz,
                 env->fs_hz), rc = ONI_EINVALARG;
    if (rc) {
        snprintf(err, cap, "stage tmatch: %s: %s", dir, why);
        tm_files_free(&f);
        return rc;
    }
    if ((rc = filter_templates(&f, o, env->fs_hz, err, cap))) {
        tm_files_free(&f);
        return rc;
    }
    for (uint32_t k = 0; k < f.ntpl; k++)
        take_template(st, &f, k, st->ntpl + k, o);
    st->ntpl += f.ntpl;
    *base += f.nch;
    tm_files_free(&f);
    return 0;
}

static int tmatch_configure(void *state, const struct onigpu_stage_env *env, char *err, size_t cap)
{
    struct tm_state *st = state;
    struct tm_opts o;
    int rc = parse(env, &o, err, cap);
    if (rc)
        return rc;
    st->nchan = env->nchan;
    st->len = (uint32_t)(o.before + o.after + 1);
    st->lag = (uint32_t)o.lag;
    st->th = (float)o.th, st->amin = (float)o.amin, st->amax = (float)o.amax, st->gate = (float)o.gate;
    double calib = ceil(o.calib_s * env->fs_hz);
    st->calib = calib >= 2 ? (uint32_t)calib : 2;
    if (env->nchan > ONIGPU_STAGE_MAXCHAN || (uint64_t)env->nframes + st->len + 2 * st->lag > TM_HIST) {
        snprintf(err, cap, "stage tmatch: blocks of %u frames of %u channels (at most %u frames with before=%g "
                 "after=%g lag=%u, %d channels)", env->nframes, env->nchan, TM_HIST - st->len - 2 * st->lag,
                 o.before, o.after, st->lag, ONIGPU_STAGE_MAXCHAN);
        return ONI_EINVALARG;
    }
    /* the sets of "templates=A+B": their channels one after the other from
     * chan0, their templates numbered on from one set to the next */
    uint32_t base = (uint32_t)o.chan0;
    for (const char *p = o.dir; *p && !rc;) {
        const char *plus = strchr(p, '+');
        size_t n = plus ? (size_t)(plus - p) : strlen(p);
        char path[1024];
        snprintf(path, sizeof path, "%.*s", (int)n, p);
        rc = add_set(st, env, &o, path, &base, err, cap);
        p += n + (plus ? 1 : 0);
        if (!rc && plus && !*p) {
            snprintf(err, cap, "stage tmatch: templates=%s ends in '+' (sets joined by '+': templates=A+B)", o.dir);
            rc = ONI_EINVALARG;
        }
    }
    return rc;
}

/* The block's matches on the CPU (tmatch.cu does the same with a block of
 * threads): the best match, subtracted, until none is left (or TM_MAXITER:
 * the positions are then left with what remains). */
static void pursue(struct tm_state *st, uint64_t smax, uint64_t base, struct onigpu_out *out)
{
    uint64_t npos = smax - st->s_next + 1;
    for (uint32_t iter = 0; iter < TM_MAXITER; iter++) {
        uint64_t best = 0;
        float best_c = 0;
        for (uint64_t p = 0; p < npos * st->ntpl; p++) {
            uint32_t k = (uint32_t)(p % st->ntpl);
            float c, z = tm_match(st, k, st->s_next + p / st->ntpl, &c);
            if (z > 0) {
                uint64_t key = tm_key(z, (uint32_t)p);
                if (key > best)
                    best = key, best_c = c;
            }
        }
        if (!best)
            break;
        uint32_t p = 0xFFFFFFFFu - (uint32_t)best, k = p % st->ntpl;
        uint64_t s = st->s_next + p / st->ntpl, time;
        uint32_t frame;
        tm_subtract(st, k, s, best_c / st->t[k].norm2, 0, 1);
        tm_spike(st, k, s, base, &time, &frame);
        onigpu_add_spike_unit(out, time, st->t[k].peak, frame, k);
    }
}

static int tmatch_process(void *state, struct onigpu_block *b)
{
    struct tm_state *st = state;
    uint64_t base = st->n;
    for (uint32_t f = 0; f < b->nframes; f++)
        st->t_ring[(base + f) & TM_MASK] = onigpu_frame_time(b, f);
    for (uint32_t c = 0; c < st->nchan; c++)
        for (uint32_t f = 0; f < b->nframes; f++) {
            float x = b->x[(size_t)f * b->nchan + c];
            st->r[c][(base + f) & TM_MASK] = x;
            if (base + f < st->calib)
                tm_calib_take(st, c, base + f, x);
        }
    st->n = base + b->nframes;
    if (!st->ready && st->n >= st->calib) {
        for (uint32_t c = 0; c < st->nchan; c++)
            tm_calibrated(st, c);
        for (uint32_t k = 0; k < st->ntpl; k++)
            tm_norm(st, k);
        st->ready = 1;
        st->s_next = st->calib;
    }
    if (!st->ready || st->n < (uint64_t)st->len + st->lag || st->n - st->len - st->lag < st->s_next)
        return 0;
    uint64_t smax = st->n - st->len - st->lag;
    uint32_t from = b->out->nspikes;
    pursue(st, smax, base, b->out);
    st->s_next = smax + 1;
    /* by frame, then channel, as the GPU's chain lists a stage's spikes */
    loop_spike_sort(b->out, from, b->out->nspikes);
    return 0;
}

const struct onigpu_stage loop_stage_tmatch = {
    .version = ONIGPU_STAGE_VERSION,
    .name = "tmatch",
    .input = ONIGPU_DATA_SAMPLES,
    .output = ONIGPU_DATA_SPIKES,
    .state_bytes = sizeof(struct tm_state),
    .configure = tmatch_configure,
    .process = tmatch_process,
    .gpu_source = TM_GPU_SOURCE,
    .gpu_entry = "loop_tmatch_gpu",
};
