/* stage.c - the EPHYS processing chain (stage.h): stages named, loaded from
 * shared objects, checked, configured, and run block by block on the CPU. */
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "oni.h"
#include "oni/util/clock.h"
#include "loop/stage.h"

struct chain_stage {
    const struct onigpu_stage *d;
    void *state;
    void *lib;             /* the shared object it came from, or NULL */
    char options[256];
    int decode_first;      /* the chain decodes the frames into x before it */
};

struct loop_chain {
    uint32_t n;
    struct chain_stage s[LOOP_MAXSTAGES];
    struct loop_ephys_layout lay;
    uint32_t nframes;
    double fs_hz, clock_hz;
    uint64_t budget_ns;
    float *x;              /* [nframes][nchan] */
    /* The stage running now, for loop_chain_overrun from another thread:
     * busy is its index + 1 (0: none); gen changes at every entry, so a
     * watcher that reads it twice around the rest knows they are one call's. */
    clockid_t clk;         /* the processing thread's CPU clock (loop_chain_start) */
    int have_clk;
    _Atomic uint32_t busy;
    _Atomic uint64_t gen, busy_seq, busy_wall0, busy_cpu0;
};

static const char *const data_names[] = {"?", "frames", "samples", "spikes", "a decision"};

static const char *data_name(int d)
{
    return d >= ONIGPU_DATA_FRAMES && d <= ONIGPU_DATA_DECISION ? data_names[d] : data_names[0];
}

int loop_stage_opts(const char *stage, const char *options, const char *const *keys, int nkeys, double *vals,
                    int *given, char *err, size_t cap)
{
    const char *p = options ? options : "";
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        int k = -1;
        for (int i = 0; eq && i < nkeys; i++)
            if (strlen(keys[i]) == (size_t)(eq - p) && !strncmp(keys[i], p, (size_t)(eq - p)))
                k = i;
        if (k < 0) {
            char allowed[160] = "";
            for (int i = 0; i < nkeys; i++)
                snprintf(allowed + strlen(allowed), sizeof allowed - strlen(allowed), "%s%s=NUMBER", i ? ", " : "",
                         keys[i]);
            snprintf(err, cap, "stage %s: option '%.*s' (%s)", stage, (int)len, p,
                     nkeys ? allowed : "it takes no options");
            return ONI_EINVALARG;
        }
        char num[64];
        size_t nlen = len - (size_t)(eq + 1 - p);
        snprintf(num, sizeof num, "%.*s", (int)(nlen < sizeof num ? nlen : sizeof num - 1), eq + 1);
        char *q;
        errno = 0;
        double v = strtod(num, &q);
        if (!nlen || *q || errno || !isfinite(v)) {
            snprintf(err, cap, "stage %s: option %s='%.*s' is not a number", stage, keys[k], (int)nlen, eq + 1);
            return ONI_EINVALARG;
        }
        vals[k] = v;
        given[k] = 1;
        p += len + (end ? 1 : 0);
    }
    return 0;
}

/* Split "NAME_OR_FILE[:OPTIONS]": a name (no '/' before the first ':') at
 * that ':', so that options may hold paths (tmatch:templates=/a/b); a file
 * at the first ':' after its last '/'. */
static void split(const char *text, char *file, size_t cap, const char **options)
{
    const char *first = strchr(text, ':');
    const char *slash = strrchr(text, '/');
    if (first && memchr(text, '/', (size_t)(first - text)) == NULL)
        slash = NULL;
    const char *colon = strchr(slash ? slash : text, ':');
    size_t len = colon ? (size_t)(colon - text) : strlen(text);
    snprintf(file, cap, "%.*s", (int)(len < cap ? len : cap - 1), text);
    *options = colon ? colon + 1 : "";
}

/* A descriptor the loop can run: the version, the data kinds, a CPU
 * implementation. 0, or ONI_EINVALARG (said). */
static int check_descriptor(const struct onigpu_stage *d, const char *what, char *why, size_t cap)
{
    if (d->version != ONIGPU_STAGE_VERSION) {
        snprintf(why, cap, "%s: stage API version %u, this onigpu runs version %u (rebuild the stage against "
                           "this onigpu_stage.h)", what, d->version, ONIGPU_STAGE_VERSION);
        return ONI_EINVALARG;
    }
    if (!d->name || !d->name[0] || d->input < ONIGPU_DATA_FRAMES || d->input > ONIGPU_DATA_DECISION ||
        d->output < ONIGPU_DATA_SAMPLES || d->output > ONIGPU_DATA_DECISION) {
        snprintf(why, cap, "%s: the descriptor needs a name, an input (ONIGPU_DATA_*) and an output other than "
                           "frames (input %d, output %d)", what, d->input, d->output);
        return ONI_EINVALARG;
    }
    if (!d->process) {
        snprintf(why, cap, "%s: stage %s has no CPU implementation (process), which the loop runs", what, d->name);
        return ONI_EINVALARG;
    }
    if (d->state_bytes > (1u << 30)) {
        snprintf(why, cap, "%s: stage %s asks for %zu bytes of state (1 GiB at most)", what, d->name, d->state_bytes);
        return ONI_EINVALARG;
    }
    return 0;
}

/* Stage i of the chain from spec: a built-in name or a shared object. */
static int open_stage(struct chain_stage *cs, const struct loop_stage_spec *spec, uint32_t i, char *why, size_t cap)
{
    char what[320];
    const char *options = spec->options ? spec->options : "";
    if (spec->stage) {
        cs->d = spec->stage;
        snprintf(what, sizeof what, "stage %u", i + 1);
    } else {
        char file[256];
        if (!spec->text || !spec->text[0]) {
            snprintf(why, cap, "stage %u: no name or file given", i + 1);
            return ONI_EINVALARG;
        }
        split(spec->text, file, sizeof file, &options);
        snprintf(what, sizeof what, "stage %u (%s)", i + 1, file);
        if (!strchr(file, '/')) {
            cs->d = loop_stage_builtin(file, strlen(file));
            if (!cs->d) {
                snprintf(why, cap, "%s: no built-in stage of that name (filter, reference, detect, decide, tmatch); a "
                                   "shared object is named by a path with a '/' (./mystage.so)", what);
                return ONI_EINVALARG;
            }
        } else {
            cs->lib = dlopen(file, RTLD_NOW | RTLD_LOCAL);
            if (!cs->lib) {
                const char *e = dlerror();
                snprintf(why, cap, "%s: cannot load: %s", what, e ? e : "unknown error");
                return ONI_EINVALARG;
            }
            cs->d = dlsym(cs->lib, "onigpu_stage");
            if (!cs->d) {
                snprintf(why, cap, "%s: exports no 'onigpu_stage' (a stage defines const struct onigpu_stage "
                                   "onigpu_stage, include/onigpu_stage.h)", what);
                return ONI_EINVALARG;
            }
        }
    }
    if (strlen(options) >= sizeof cs->options) {
        snprintf(why, cap, "%s: options longer than %zu characters", what, sizeof cs->options - 1);
        return ONI_EINVALARG;
    }
    snprintf(cs->options, sizeof cs->options, "%s", options);
    return check_descriptor(cs->d, what, why, cap);
}

static int is_builtin(const struct onigpu_stage *d)
{
    return d == &loop_stage_filter || d == &loop_stage_reference || d == &loop_stage_detect ||
           d == &loop_stage_decide;
}

static struct onigpu_stage_env env_of(const struct loop_chain *ch, const struct chain_stage *cs, const char *options,
                                      const void *init)
{
    return (struct onigpu_stage_env){ch->lay.nchan, ch->nframes, ch->fs_hz, ch->clock_hz, options, init};
}

/* Data kinds in order: every stage reads what is there; SAMPLES read first
 * are decoded from the frames. Appends decide to a chain without a decision.
 * 0, or ONI_EINVALARG (said). */
static int check_chain(struct loop_chain *ch, char *why, size_t cap)
{
    int have[ONIGPU_DATA_DECISION + 1] = {0, 1, 0, 0, 0};
    if (ch->n < LOOP_MAXSTAGES) {
        int decided = 0;
        for (uint32_t i = 0; i < ch->n; i++)
            decided |= ch->s[i].d->output == ONIGPU_DATA_DECISION;
        if (!decided)
            ch->s[ch->n++].d = &loop_stage_decide;
    }
    for (uint32_t i = 0; i < ch->n; i++) {
        const struct onigpu_stage *d = ch->s[i].d;
        if (d->input == ONIGPU_DATA_SAMPLES && !have[ONIGPU_DATA_SAMPLES]) {
            ch->s[i].decode_first = 1; /* the frames decoded: samples from here on */
            have[ONIGPU_DATA_SAMPLES] = 1;
        }
        if (!have[d->input]) {
            snprintf(why, cap, "stage %u (%s) reads %s, which no stage before it writes%s", i + 1, d->name,
                     data_name(d->input),
                     d == &loop_stage_decide ? " (decide was appended: the chain makes no decision of its own)" : "");
            return ONI_EINVALARG;
        }
        have[d->output] = 1;
    }
    if (!have[ONIGPU_DATA_DECISION]) {
        snprintf(why, cap, "the chain of %u stages makes no decision (%d stages at most)", ch->n, LOOP_MAXSTAGES);
        return ONI_EINVALARG;
    }
    return 0;
}

int loop_chain_create(const struct loop_config *cfg, const struct loop_ephys_state *init, uint32_t nframes,
                      struct loop_chain **out, char *why, size_t cap)
{
    static const struct loop_stage_spec builtin[] = {
        {NULL, &loop_stage_filter, NULL}, {NULL, &loop_stage_reference, NULL}, {NULL, &loop_stage_detect, NULL},
        {NULL, &loop_stage_decide, NULL}};
    const struct loop_stage_spec *specs = cfg->nstages ? cfg->stages : builtin;
    uint32_t n = cfg->nstages ? cfg->nstages : 4;
    *out = NULL;
    if (cfg->nstages && !cfg->stages) {
        snprintf(why, cap, "%u stages and no list of them", cfg->nstages);
        return ONI_EINVALARG;
    }
    if (n > LOOP_MAXCHAIN) {
        snprintf(why, cap, "a chain of %u stages (%d at most)", n, LOOP_MAXCHAIN);
        return ONI_EINVALARG;
    }
    struct loop_chain *ch = calloc(1, sizeof *ch);
    if (!ch) {
        snprintf(why, cap, "no memory for the chain");
        return ONI_EBADALLOC;
    }
    ch->lay = init->lay;
    ch->nframes = nframes;
    ch->fs_hz = cfg->fs_hz > 0 ? cfg->fs_hz : 30000.0;
    ch->clock_hz = cfg->clock_hz > 0 ? cfg->clock_hz : 250e6;
    ch->budget_ns = (uint64_t)(cfg->stage_budget_us ? cfg->stage_budget_us : LOOP_STAGE_BUDGET_US) * 1000u;
    int rc = 0;
    for (uint32_t i = 0; i < n && !rc; i++, ch->n++)
        rc = open_stage(&ch->s[i], &specs[i], i, why, cap);
    if (!rc)
        rc = check_chain(ch, why, cap);
    size_t nx = (size_t)nframes * ch->lay.nchan;
    ch->x = rc ? NULL : malloc((nx ? nx : 1) * sizeof(float));
    if (!rc && !ch->x) {
        snprintf(why, cap, "no memory for the chain's samples");
        rc = ONI_EBADALLOC;
    }
    for (uint32_t i = 0; i < ch->n && !rc; i++) {
        struct chain_stage *cs = &ch->s[i];
        const struct onigpu_stage *d = cs->d;
        if (d->state_bytes && !(cs->state = calloc(1, d->state_bytes))) {
            snprintf(why, cap, "stage %u (%s): no memory for its %zu bytes of state", i + 1, d->name, d->state_bytes);
            rc = ONI_EBADALLOC;
            break;
        }
        char err[256] = "";
        struct onigpu_stage_env env = env_of(ch, cs, cs->options, is_builtin(d) ? init : NULL);
        if (d->configure && (rc = d->configure(cs->state, &env, err, sizeof err)) != 0)
            snprintf(why, cap, "stage %u (%s) refused its configuration%s%s", i + 1, d->name, err[0] ? ": " : "",
                     err[0] ? err : oni_error_str(rc));
    }
    if (rc) {
        loop_chain_destroy(ch);
        return rc;
    }
    *out = ch;
    return 0;
}

void loop_chain_destroy(struct loop_chain *ch)
{
    if (!ch)
        return;
    for (uint32_t i = 0; i < ch->n; i++) {
        free(ch->s[i].state);
        if (ch->s[i].lib)
            dlclose(ch->s[i].lib);
    }
    free(ch->x);
    free(ch);
}

int loop_chain_is_builtin(const struct loop_chain *ch)
{
    static const struct onigpu_stage *const order[] = {&loop_stage_filter, &loop_stage_reference, &loop_stage_detect,
                                                       &loop_stage_decide};
    if (ch->n != 4)
        return 0;
    for (uint32_t i = 0; i < 4; i++)
        if (ch->s[i].d != order[i])
            return 0;
    return 1;
}

void loop_chain_state(const struct loop_chain *ch, struct loop_ephys_state *st)
{
    for (uint32_t i = 0; i < ch->n; i++) {
        const struct loop_ephys_state *s = ch->s[i].state;
        if (ch->s[i].d == &loop_stage_filter) {
            memcpy(st->b, s->b, sizeof st->b);
            memcpy(st->a, s->a, sizeof st->a);
            memcpy(st->z, s->z, sizeof st->z);
        } else if (ch->s[i].d == &loop_stage_detect) {
            st->refractory = s->refractory;
            st->calib = s->calib;
            st->k = s->k;
            st->nsamples = s->nsamples;
            memcpy(st->thr, s->thr, sizeof st->thr);
            memcpy(st->last, s->last, sizeof st->last);
            memcpy(st->hist, s->hist, sizeof st->hist);
            st->radius = s->radius;
            st->sweep = s->sweep;
            memcpy(st->excl, s->excl, sizeof st->excl);
        } else if (ch->s[i].d == &loop_stage_decide) {
            st->lockout = s->lockout;
            st->stim_last = s->stim_last;
            st->nunits = s->nunits;
            memcpy(st->units, s->units, sizeof st->units);
        }
    }
}

void loop_chain_start(struct loop_chain *ch)
{
    ch->have_clk = pthread_getcpuclockid(pthread_self(), &ch->clk) == 0;
    for (uint32_t i = 0; i < ch->n; i++)
        if (ch->s[i].d->start)
            ch->s[i].d->start(ch->s[i].state);
}

void loop_chain_stop(struct loop_chain *ch)
{
    for (uint32_t i = 0; i < ch->n; i++)
        if (ch->s[i].d->stop)
            ch->s[i].d->stop(ch->s[i].state);
}

/* Clock c in ns into *ns: 0, or -1 when it cannot be read. */
static int clock_ns(clockid_t c, uint64_t *ns)
{
    struct timespec ts;
    if (clock_gettime(c, &ts))
        return -1;
    *ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    return 0;
}

/* The calling thread's processor time: a stage's budget is of its own work,
 * not of the time the thread waited for a core (a loaded machine). */
static uint64_t cpu_ns(void)
{
    uint64_t ns = 0;
    clock_ns(CLOCK_THREAD_CPUTIME_ID, &ns);
    return ns;
}

int loop_chain_process(struct loop_chain *ch, const uint8_t *blk, uint64_t seq, struct onigpu_out *out, char *why,
                       size_t cap)
{
    struct onigpu_block b = {seq,     ch->nframes, ch->lay.nchan, ch->lay.stride, ch->lay.time_off,
                             ch->lay.off, blk,    ch->x,         out,            ch->fs_hz};
    loop_ephys_out_reset(out);
    if (ch->nframes)
        out->t_block = onigpu_frame_time(&b, ch->nframes - 1);
    for (uint32_t i = 0; i < ch->n; i++) {
        struct chain_stage *cs = &ch->s[i];
        if (cs->decode_first)
            loop_ephys_decode(&ch->lay, blk, ch->nframes, ch->x);
        uint64_t t0 = cpu_ns();
        atomic_store_explicit(&ch->busy_seq, seq, memory_order_relaxed);
        atomic_store_explicit(&ch->busy_cpu0, t0, memory_order_relaxed);
        atomic_store_explicit(&ch->busy_wall0, oni_now_ns(), memory_order_relaxed);
        atomic_fetch_add_explicit(&ch->gen, 1, memory_order_release);
        atomic_store_explicit(&ch->busy, i + 1, memory_order_release);
        int rc = cs->d->process(cs->state, &b);
        atomic_store_explicit(&ch->busy, 0, memory_order_release);
        uint64_t dt = cpu_ns() - t0;
        if (rc) {
            snprintf(why, cap, "stage %u (%s) failed on block %llu: %s", i + 1, cs->d->name, (unsigned long long)seq,
                     oni_error_str(rc));
            return rc;
        }
        if (dt > ch->budget_ns) {
            snprintf(why, cap, "stage %u (%s) took %.3f ms of processor time on block %llu, over its budget of %.3f ms", i + 1,
                     cs->d->name, dt / 1e6, (unsigned long long)seq, ch->budget_ns / 1e6);
            return ONI_ETIMEOUT;
        }
        if (out->nspikes > ONIGPU_STAGE_MAXSPIKES || (out->stim && out->stim != 1)) {
            snprintf(why, cap, "stage %u (%s) left block %llu's output inconsistent (%u spikes listed, at most %d; "
                               "stim %u, 0 or 1)", i + 1, cs->d->name, (unsigned long long)seq, out->nspikes,
                     ONIGPU_STAGE_MAXSPIKES, out->stim);
            return ONI_EINVALSTATE;
        }
    }
    return 0;
}

int loop_chain_overrun(struct loop_chain *ch, uint64_t wall_limit_ns, char *why, size_t cap)
{
    uint64_t g = atomic_load_explicit(&ch->gen, memory_order_acquire);
    uint32_t i = atomic_load_explicit(&ch->busy, memory_order_acquire);
    uint64_t seq = atomic_load_explicit(&ch->busy_seq, memory_order_relaxed);
    uint64_t cpu0 = atomic_load_explicit(&ch->busy_cpu0, memory_order_relaxed);
    uint64_t wall0 = atomic_load_explicit(&ch->busy_wall0, memory_order_relaxed);
    uint64_t cpu;
    if (!i || !ch->have_clk || clock_ns(ch->clk, &cpu))
        return 0;
    uint64_t wall = oni_now_ns();
    /* the stage returned, or another call began, while we looked */
    if (atomic_load_explicit(&ch->busy, memory_order_acquire) != i ||
        atomic_load_explicit(&ch->gen, memory_order_acquire) != g)
        return 0;
    /* Grace past the budget, so that a stage that does return late is
     * reported by loop_chain_process (and joined), not left to its thread. */
    uint64_t grace = ch->budget_ns > 100000000u ? ch->budget_ns : 100000000u;
    uint64_t used = cpu > cpu0 ? cpu - cpu0 : 0, held = wall > wall0 ? wall - wall0 : 0;
    if (used <= ch->budget_ns + grace && held <= wall_limit_ns)
        return 0;
    snprintf(why, cap, "stage %u (%s) has not returned from block %llu after %.3f ms (%.3f ms of processor time; "
                       "budget %.3f ms): the loop stopped without it", i, ch->s[i - 1].d->name,
             (unsigned long long)seq, held / 1e6, used / 1e6, ch->budget_ns / 1e6);
    return ONI_ETIMEOUT;
}

int loop_chain_reconfigure(struct loop_chain *ch, uint32_t i, const char *options, char *why, size_t cap)
{
    if (i >= ch->n) {
        snprintf(why, cap, "no stage %u (the chain has %u)", i + 1, ch->n);
        return ONI_EINVALARG;
    }
    struct chain_stage *cs = &ch->s[i];
    if (!cs->d->reconfigure) {
        snprintf(why, cap, "stage %u (%s) takes no change of configuration while running", i + 1, cs->d->name);
        return ONI_EUNIMPL;
    }
    char err[256] = "";
    const char *opts = options ? options : "";
    struct onigpu_stage_env env = env_of(ch, cs, opts, NULL);
    int rc = cs->d->reconfigure(cs->state, &env, err, sizeof err);
    if (rc) {
        snprintf(why, cap, "stage %u (%s) refused the change%s%s", i + 1, cs->d->name, err[0] ? ": " : "",
                 err[0] ? err : oni_error_str(rc));
        return rc;
    }
    snprintf(cs->options, sizeof cs->options, "%s", opts);
    return 0;
}

uint32_t loop_chain_count(const struct loop_chain *ch)
{
    return ch ? ch->n : 0;
}

int loop_stage_check(const char *text, char *why, size_t cap)
{
    struct chain_stage cs = {0};
    struct loop_stage_spec spec = {text, NULL, NULL};
    int rc = open_stage(&cs, &spec, 0, why, cap);
    if (cs.lib)
        dlclose(cs.lib);
    return rc;
}

const struct onigpu_stage *loop_chain_stage(const struct loop_chain *ch, uint32_t i, void **state, int *decode_first)
{
    if (!ch || i >= ch->n)
        return NULL;
    if (state)
        *state = ch->s[i].state;
    if (decode_first)
        *decode_first = ch->s[i].decode_first;
    return ch->s[i].d;
}

uint32_t loop_chain_nframes(const struct loop_chain *ch)
{
    return ch->nframes;
}

const struct loop_ephys_layout *loop_chain_layout(const struct loop_chain *ch)
{
    return &ch->lay;
}

double loop_chain_fs_hz(const struct loop_chain *ch)
{
    return ch->fs_hz;
}
