/* run.c - the closed loop on the emulated card as one call (run.h):
 * NP2.0e super-frames from the card (its GPU data stream, or the default
 * stream) into spike detection, a stimulation written to the breakout
 * board's digital outputs, and the loopback input frame that reports when
 * the outputs changed: the latency from the spike's sample to the
 * stimulator's trigger, both in the host hub's clock. */
#include "run.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "oni/util/clock.h"
#include "oni/util/npy.h"
#include "oniemu.h"
#include "onigpu.h"
#include "onix.h"
#include "loop/superframe.h"
#include "loop/rig.h"
#include "loop/source.h"
#include "loop/stats.h"

#define TAGS 65536        /* stimulations remembered for the echo */
#define MAX_DET (1u << 22)
#define MAX_LAT (1u << 22)
#define MAX_REC (1u << 19)
#define OWED_MAX_MS 100.0 /* data left in the card at the end beyond which the loop fell behind */
#define KEEP_UP_SHARE 0.95 /* ... or a processed frame rate below this share of the probe's */

struct session;

/* One emulated card of the run: its probes are the loop's probes base ..
 * base + rig.nprobes, its frames the loop frame's part after the cards
 * before it. Card 0 has the stimulator the loop writes to and its echoes. */
struct card {
    struct session *s;
    uint32_t k;               /* its place in the run */
    oni_ctx ctx;
    struct loop_rig rig;
    struct loop_np2e_lane lanes[LOOP_RIG_MAX_PROBES]; /* the probes' super-frames in stream order */
    uint8_t slot[LOOP_RIG_MAX_PROBES];                /* probe p's place among them */
    uint32_t base;            /* the loop's probe of its probe 0 */
    char truth[4200];         /* its ground-truth file (card 0: cfg->truth) */
    struct loop_cardsrc cs;
    struct loop_defsrc ds;
    struct loop_source inner; /* its stream (cs or ds), which part_read checks */
    uint64_t first_time;      /* hub clock of its first super-frame read */
    _Atomic int have_first;
    pthread_t reader;         /* GPU stream: the default stream's reader (card 0: the echoes) */
    int reader_started;
};

struct session {
    const struct loop_run_config *cfg;
    struct loop_run_result *res;
    struct card card[LOOP_RUN_MAX_CARDS];
    uint32_t ncards;
    uint32_t nprobes;         /* of all cards */
    uint32_t read_stride;     /* bytes of one super-frame in a block */
    int gpu;                  /* the cards have the GPU data stream: the probes go there */
    double acq_hz;
    uint64_t tag_time[TAGS];
    /* per stimulation, read after the loop stopped: its block, the block's
     * last frame (hub clock), and when the sink began and ended (host ns);
     * tag_card: the card of the spike it answers (LOOP_RUN_MAX_CARDS: unknown) */
    uint64_t tag_seq[TAGS], tag_last[TAGS], tag_ws[TAGS], tag_we[TAGS];
    uint8_t tag_card[TAGS];
    _Atomic uint32_t ntags;
    struct loop_spike *det;
    _Atomic size_t ndet;
    uint64_t *lat, *lat_tag; /* acquisition ticks, tag */
    uint64_t *echo_hub, *echo_host; /* the echo's hub clock; when the host had it (ns) */
    oniemu_link_t link;
    int have_link;
    _Atomic size_t nlat;
    _Atomic uint64_t stims, det_overflow, echo_other, echo_unclocked;
    _Atomic uint64_t det_unkept, lat_unkept; /* past MAX_DET / MAX_LAT: counted, not scored */
    _Atomic uint64_t t_block;    /* time of the last processed frame */
    _Atomic uint64_t t_first_block; /* time of the first block's last frame (0: none yet) */
    _Atomic int echo_stop, echo_err;
    struct loop_ephys_state *st;
    struct loop_ephys_layout lay;
    struct loop_ephys_params p;
    struct loop_zipsrc zs;     /* several cards: their streams side by side */
    struct loop_source inner;  /* with a tap or lanes to check: the source its reads wrap */
    struct loop_config c;
    struct loop *lp;
};

/* Record what failed (the first one only) and return rc. */
static int fail(struct session *s, int rc, const char *fmt, ...)
{
    if (!s->res->why[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->res->why, sizeof s->res->why, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* "card k: " to open a message about card c, "" when it is the only one. */
static const char *card_who(const struct card *c, char *buf, size_t cap)
{
    if (c->s->ncards == 1)
        return "";
    snprintf(buf, cap, "card %u: ", c->k);
    return buf;
}

/* The card of the loop's probe p. */
static uint32_t card_of_probe(const struct session *s, uint32_t p)
{
    uint32_t k = 0;
    while (k + 1 < s->ncards && p >= s->card[k + 1].base)
        k++;
    return k;
}

/* The card of the spike a stimulation answers: the first listed at t_stim
 * (decide's choice), or LOOP_RUN_MAX_CARDS when none is (a stage's own
 * rule). With one card, card 0. */
static uint8_t stim_card(const struct session *s, const struct loop_ephys_out *o)
{
    if (s->ncards == 1)
        return 0;
    for (uint32_t i = 0; i < o->nspikes && i < ONIGPU_STAGE_MAXSPIKES; i++)
        if (o->spikes[i].time == o->t_stim)
            return (uint8_t)card_of_probe(s, o->spikes[i].chan / LOOP_NP2E_CHANNELS);
    return LOOP_RUN_MAX_CARDS;
}

static int sink_write(void *ctx, uint64_t seq, const void *outp, size_t len, uint32_t timeout_ms)
{
    (void)len, (void)timeout_ms;
    uint64_t ws = oni_now_ns();
    struct session *s = ctx;
    const struct loop_ephys_out *o = outp;
    size_t n = atomic_load(&s->ndet);
    uint32_t i = 0;
    for (; i < o->nspikes && n < MAX_DET; i++)
        s->det[n++] = o->spikes[i];
    atomic_store(&s->ndet, n);
    atomic_fetch_add(&s->det_unkept, o->nspikes - i);
    atomic_fetch_add(&s->det_overflow, o->overflow);
    atomic_store(&s->t_block, o->t_block);
    if (seq == 0)
        atomic_store(&s->t_first_block, o->t_block);
    const struct loop_run_tap *tap = s->cfg->tap;
    if (!o->stim) { /* the chain's decision (onigpu_stage.h) */
        if (tap && tap->detect)
            tap->detect(tap->arg, o, 0, 0);
        return 0;
    }
    /* Stimulate: one write of the digital outputs per block with spikes,
     * its pins naming the stimulation (rig.h), so the loopback input frame
     * says which spike it answers. */
    uint32_t tag = atomic_load(&s->ntags);
    s->tag_time[tag % TAGS] = o->t_stim;
    s->tag_seq[tag % TAGS] = seq;
    s->tag_last[tag % TAGS] = o->t_block;
    s->tag_ws[tag % TAGS] = ws;
    s->tag_card[tag % TAGS] = stim_card(s, o);
    atomic_store(&s->ntags, tag + 1);
    uint32_t pins = loop_rig_stim_pins(tag);
    oni_frame_t *f = NULL;
    struct card *c0 = &s->card[0];
    int rc = oni_create_frame(c0->ctx, &f, c0->rig.dio, &pins, sizeof pins);
    if (rc < 0) /* > 0 on success, as upstream's */
        return rc;
    rc = oni_write_frame(c0->ctx, f);
    s->tag_we[tag % TAGS] = oni_now_ns();
    oni_destroy_frame(f);
    if (rc < 0)
        return rc;
    atomic_fetch_add(&s->stims, 1);
    if (tap && tap->detect)
        tap->detect(tap->arg, o, pins, oni_now_ns());
    return 0;
}

/* Card c's block (its frames of the loop's block) in buf: on the GPU
 * stream its super-frames are checked against its lanes' order (a block of
 * another order would give one probe's samples to another's channels: the
 * read fails; the default stream's source sorts them into their places),
 * and its first super-frame's hub clock is noted. */
static int check_block(struct card *c, const uint8_t *buf, size_t len)
{
    struct session *s = c->s;
    if (!atomic_load_explicit(&c->have_first, memory_order_relaxed)) {
        memcpy(&c->first_time, buf, 8);
        atomic_store(&c->have_first, 1);
    }
    uint32_t np = c->rig.nprobes;
    long bad = np > 1 && s->gpu ? loop_np2e_check_lanes(c->lanes, np, s->read_stride, buf,
                                                        (uint32_t)(len / (np * (size_t)s->read_stride))) : -1;
    if (bad < 0)
        return 0;
    uint32_t dev;
    uint16_t probe;
    const uint8_t *f = buf + (size_t)bad * s->read_stride;
    memcpy(&dev, f + 8, 4);
    memcpy(&probe, f + LOOP_NP2E_READ_HDR + LOOP_NP2E_PROBE_OFF, 2);
    char who[16];
    fail(s, ONI_EBADFRAME, "%ssuper-frame %ld of a block came from device %u probe %u, where the probes' "
         "order (lockstep, rig.h) puts device %u probe %u", card_who(c, who, sizeof who), bad, dev, probe,
         c->lanes[bad % np].dev, c->lanes[bad % np].probe);
    return ONI_EBADFRAME;
}

/* A card's stream as a part of the loop's (several cards: zipsrc). */
static int part_read(void *ctx, void *buf, size_t len, uint32_t timeout_ms)
{
    struct card *c = ctx;
    int rc = c->inner.read(c->inner.ctx, buf, len, timeout_ms);
    return rc ? rc : check_block(c, buf, len);
}

/* Wrapping the source's read (a tap, or one card's): card 0's block
 * checked when it is the only card (check_block), then the block to the
 * tap. */
static int tap_read(void *ctx, void *buf, size_t len, uint32_t timeout_ms)
{
    struct session *s = ctx;
    int rc = s->inner.read(s->inner.ctx, buf, len, timeout_ms);
    if (!rc && s->ncards == 1)
        rc = check_block(&s->card[0], buf, len);
    if (!rc && s->cfg->tap && s->cfg->tap->block)
        s->cfg->tap->block(s->cfg->tap->arg, buf, len);
    return rc;
}

/* The wrapped source's other calls, as they were (blocks into GPU memory
 * are not the tap's: it sees host memory only). */
static int tap_read_async(void *ctx, void *buf, size_t len, volatile uint32_t *done, uint32_t seq, uint32_t tmo)
{
    struct session *s = ctx;
    return s->inner.read_async(s->inner.ctx, buf, len, done, seq, tmo);
}

static int tap_pin(void *ctx, void *buf, size_t len)
{
    struct session *s = ctx;
    return s->inner.pin(s->inner.ctx, buf, len);
}

static int tap_unpin(void *ctx, void *buf, size_t len)
{
    struct session *s = ctx;
    return s->inner.unpin(s->inner.ctx, buf, len);
}

static uint64_t tap_dropped(void *ctx)
{
    struct session *s = ctx;
    return s->inner.dropped(s->inner.ctx);
}

static double ticks_us(const struct session *s, double ticks);

/* A default-stream frame of card 0: a DigitalIO input frame [u64 hub
 * clock][u8 pins] ... whose pins name a stimulation is its echo (rig.h);
 * the probe's own frames are dropped; anything else is counted as other.
 * The echo of a stimulation that answered another card's spike is counted
 * apart: that spike's time is not in card 0's clock. The frame is
 * destroyed. */
static void on_frame(void *arg, oni_frame_t *f)
{
    struct session *s = arg;
    const struct loop_rig *rig = &s->card[0].rig;
    uint64_t host = oni_now_ns();
    int k = -1;
    uint64_t hub = 0;
    int probe = loop_rig_is_probe_dev(rig, f->dev_idx); /* read by the echo reader after the loop stopped */
    if (s->cfg->tap && s->cfg->tap->frame && !probe)
        s->cfg->tap->frame(s->cfg->tap->arg, f);
    if (f->dev_idx == rig->dio && f->data_sz >= LOOP_DIO_INPUT_BYTES) {
        memcpy(&hub, f->data, 8);
        k = loop_rig_stim_of((uint8_t)f->data[8]);
    }
    oni_destroy_frame(f);
    if (probe)
        return;
    /* the latest stimulation with that number mod 128 */
    int64_t last = (int64_t)atomic_load(&s->ntags) - 1, n = last - (last - k) % 128;
    /* An echo older than the stimulation it names came for an earlier one
     * of that number: the reader fell 128 stimulations behind. */
    if (k < 0 || last < k || hub < s->tag_time[(uint64_t)n % TAGS]) {
        atomic_fetch_add(&s->echo_other, 1);
        return;
    }
    if (s->tag_card[(uint64_t)n % TAGS] != 0) {
        atomic_fetch_add(&s->echo_unclocked, 1);
        return;
    }
    size_t i = atomic_load(&s->nlat);
    if (i < MAX_LAT) {
        s->lat[i] = hub - s->tag_time[(uint64_t)n % TAGS];
        s->lat_tag[i] = (uint64_t)n;
        s->echo_hub[i] = hub;
        s->echo_host[i] = host;
        atomic_store(&s->nlat, i + 1);
        if (s->cfg->tap && s->cfg->tap->echo)
            s->cfg->tap->echo(s->cfg->tap->arg, (uint64_t)n, ticks_us(s, (double)s->lat[i]));
    } else {
        atomic_fetch_add(&s->lat_unkept, 1);
    }
}

/* With the probes on the GPU stream, a card's default stream is read here:
 * card 0's for the echoes (on_frame), another card's only so that its
 * FIFO never fills (its frames are of no use to the loop). */
static void *reader_main(void *p)
{
    struct card *c = p;
    struct session *s = c->s;
    while (!atomic_load(&s->echo_stop)) {
        oni_frame_t *f = NULL;
        int rc = oni_read_frame(c->ctx, &f);
        if (rc == ONI_ETIMEOUT)
            continue;
        if (rc < 0) {
            atomic_store(&s->echo_err, rc);
            break;
        }
        if (c->k == 0)
            on_frame(s, f);
        else
            oni_destroy_frame(f);
    }
    return NULL;
}

static double ticks_us(const struct session *s, double ticks)
{
    return ticks / s->acq_hz * 1e6;
}

/* Percentiles (us) of the latencies lat[i] with warm[i] == want_warm (warm
 * NULL: all of them); none gives NaNs. */
static void lat_summary(const struct session *s, const uint64_t *lat, size_t n, const uint8_t *warm, int want_warm,
                        struct loop_run_latency *out)
{
    out->n = 0;
    out->p50_us = out->p99_us = out->p999_us = out->max_us = NAN;
    uint64_t *v = n ? malloc(n * sizeof *v) : NULL;
    if (!v)
        return;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!warm || warm[i] == want_warm)
            v[k++] = lat[i];
    loop_sort_u64(v, k);
    if (k) {
        out->n = k;
        out->p50_us = ticks_us(s, loop_percentile_sorted(v, k, 50));
        out->p99_us = ticks_us(s, loop_percentile_sorted(v, k, 99));
        out->p999_us = ticks_us(s, loop_percentile_sorted(v, k, 99.9));
        out->max_us = ticks_us(s, (double)v[k - 1]);
    }
    free(v);
}

/* Card c's rig of np probes, its lanes, and no other device on its GPU
 * stream (the loop takes it for the probes' frames alone). 0 or an error
 * (said). */
static int find_devices(struct card *c, uint32_t np)
{
    struct session *s = c->s;
    char why[200], who[16];
    int rc = loop_rig_open(c->ctx, np, &c->rig, why, sizeof why);
    if (rc)
        return fail(s, ONI_EINVALARG, "%s%u probe%s need%s a breakout board with an NP2.0e headstage on port A%s "
                    "(devices=breakout:loopback=1,np2e%s): %s", card_who(c, who, sizeof who), np,
                    np > 1 ? "s" : "", np > 1 ? "" : "s", np > 2 ? " and B" : "", np > 2 ? ",np2e" : "", why);
    loop_rig_lanes(&c->rig, c->lanes, c->slot);
    if (!s->gpu)
        return 0;
    oni_size_t ndev = 0;
    size_t sz = sizeof ndev;
    rc = oni_get_opt(c->ctx, ONI_OPT_NUMDEVICES, &ndev, &sz);
    oni_device_t *t = rc || !ndev ? NULL : calloc(ndev, sizeof *t);
    if (!rc && ndev && !t)
        rc = ONI_EBADALLOC;
    sz = ndev * sizeof *t;
    if (!rc && ndev)
        rc = oni_get_opt(c->ctx, ONI_OPT_DEVICETABLE, t, &sz);
    if (rc) {
        free(t);
        return fail(s, rc, "reading the device table: %s", oni_error_str(rc));
    }
    uint32_t shared = 0; /* a device other than the probe's on the GPU stream (+1) */
    for (oni_size_t i = 0; i < ndev && !shared; i++) {
        oni_reg_val_t route = 0;
        if (t[i].read_size && !loop_rig_is_probe_dev(&c->rig, t[i].idx) &&
            oni_read_reg(c->ctx, t[i].idx, ONIEMU_REG_ROUTE, &route) == 0 && route == 1)
            shared = t[i].idx + 1;
    }
    free(t);
    if (shared)
        return fail(s, ONI_EINVALARG,
                    "%sdevice 0x%x is routed to the GPU stream too; the loop needs it for the NP2.0e frames alone "
                    "(route=0 for the others)", card_who(c, who, sizeof who), shared - 1);
    return 0;
}

/* The loop's channel of the truth file's channel c of device dev (the
 * headstage's probe c / 384), or -1 for a probe the loop does not record. */
static long truth_chan(const struct loop_rig *rig, uint64_t dev, uint64_t c)
{
    for (uint32_t k = 0; k < rig->nheads; k++)
        if (rig->head[k].raw == dev && c / LOOP_NP2E_CHANNELS < rig->head[k].nprobes)
            return (long)((2 * k + c / LOOP_NP2E_CHANNELS) * LOOP_NP2E_CHANNELS + c % LOOP_NP2E_CHANNELS);
    return -1;
}

/* Card c's ground truth, from its truth file "dev_idx,unit,channel,
 * sample_time,snr" (the header line is skipped; channel = probe * 384 + the
 * probe's trough channel; time = the super-frame's hub clock), appended to
 * (*t)[0 .. *n) (room for *cap, grown): on the loop's channels (truth_chan,
 * after the cards before c), loop probe p's unit u as unit base[p] + u
 * (unit_bases), at card 0's clock (shift: card 0's clock less c's at the
 * same frame; the loop stamps every frame with card 0's). 0,
 * ONI_EREADFAILURE or ONI_EBADALLOC. */
static int read_truth(const struct card *c, const uint32_t *base, int64_t shift, struct loop_truth **t, size_t *n,
                      size_t *cap)
{
    FILE *f = fopen(c->truth, "r");
    if (!f)
        return ONI_EREADFAILURE;
    char line[256];
    int rc = 0;
    while (!rc && fgets(line, sizeof line, f)) {
        unsigned long long d, u, ch, time;
        float snr;
        if (sscanf(line, "%llu,%llu,%llu,%llu,%f", &d, &u, &ch, &time, &snr) != 5)
            continue;
        long lc = truth_chan(&c->rig, d, ch);
        if (lc < 0 || (shift < 0 && time < (uint64_t)-shift))
            continue;
        if (*n == *cap) {
            size_t want = *cap ? 2 * *cap : 4096;
            struct loop_truth *g = realloc(*t, want * sizeof *g);
            if (!g) {
                rc = ONI_EBADALLOC;
                break;
            }
            *t = g;
            *cap = want;
        }
        uint32_t gc = c->base * LOOP_NP2E_CHANNELS + (uint32_t)lc;
        (*t)[(*n)++] = (struct loop_truth){(uint64_t)((int64_t)time + shift), gc,
                                           base[gc / LOOP_NP2E_CHANNELS] + (uint32_t)u, snr};
    }
    if (ferror(f) && !rc)
        rc = ONI_EREADFAILURE;
    fclose(f);
    return rc;
}

/* The card's spec as the run gives it (without --link's addition). */
static const char *card_spec(const struct loop_run_config *cfg, uint32_t np)
{
    return cfg->spec ? cfg->spec : np > 2 ? LOOP_RUN_DEFAULT_SPEC2 : LOOP_RUN_DEFAULT_SPEC;
}

/* The value of the spec's last key=value into out[cap] ("" when it has
 * none: the emulator's spec parser takes the last one too). */
static void spec_value(const char *spec, const char *key, char *out, size_t cap)
{
    size_t kn = strlen(key);
    out[0] = 0;
    for (const char *p = spec; *p;) { /* "key=value;key=value" */
        size_t n = strcspn(p, ";");
        if (n > kn + 1 && !strncmp(p, key, kn) && p[kn] == '=')
            snprintf(out, cap, "%.*s", (int)(n - kn - 1), p + kn + 1);
        p += n + (p[n] ? 1 : 0);
    }
}

/* The units of the truth template set at dir/templates.npy (its first
 * dimension, from the header alone) into *units. 0 or ONI_EREADFAILURE
 * (said: the file and what is wrong). */
static int set_units(struct session *s, const char *dir, uint32_t *units)
{
    char path[700];
    uint8_t head[4096];
    snprintf(path, sizeof path, "%s/templates.npy", dir);
    FILE *f = fopen(path, "rb");
    size_t got = f ? fread(head, 1, sizeof head, f) : 0;
    if (f)
        fclose(f);
    struct npy_info in;
    if (!f || npy_parse(head, got, &in) || in.ndim != 3 || in.shape[0] > UINT32_MAX)
        return fail(s, ONI_EREADFAILURE, "cannot number the truth units as tmatch does: %s %s", path,
                    f ? "is no .npy array [units][samples][channels]" : "cannot be read");
    *units = (uint32_t)in.shape[0];
    return 0;
}

/* One numbering of units for the truth and tmatch's labels, into
 * base[p] (loop probe p's truth unit u is unit base[p] + u). tmatch numbers
 * the templates of its sets "templates=A+B+..." on from one set to the next
 * (stage_tmatch.c), and the card's spec key templates=DIR writes probe p's
 * truth templates as a set, template i = unit i (docs/emulator.md), so with
 * the sets given in probe order (docs/closed-loop.md) base[p] is the units of
 * the probes before p, read from D/<raw device>-<probe>/templates.npy, D
 * the directory of the probe's card (loop_run_card_templates). A card that
 * writes no templates numbers each probe's units from 0. 0 or
 * ONI_EREADFAILURE (said). */
static int unit_bases(struct session *s, uint32_t base[LOOP_RUN_MAX_PROBES])
{
    char dir[512];
    spec_value(card_spec(s->cfg, s->card[0].rig.nprobes), "templates", dir, sizeof dir);
    memset(base, 0, LOOP_RUN_MAX_PROBES * sizeof *base);
    for (uint32_t p = 0, sum = 0; dir[0] && p < s->nprobes; p++) {
        base[p] = sum;
        const struct card *c = &s->card[card_of_probe(s, p)];
        uint32_t j = p - c->base, units = 0;
        char cdir[560], set[600];
        if (loop_run_card_templates(dir, c->k, cdir, sizeof cdir))
            return fail(s, ONI_EREADFAILURE, "templates=%s: too long a path for card %u's", dir, c->k);
        snprintf(set, sizeof set, "%s/%u-%u", cdir, (unsigned)c->rig.head[j / 2].raw, j % 2);
        if (set_units(s, set, &units))
            return ONI_EREADFAILURE;
        sum += units;
    }
    return 0;
}

/* Open card c for np probes: its spec, its truth file (made empty), a
 * real-time clock; the GPU stream and the link as card 0 has them. 0 or an
 * error (said). */
static int open_card(struct card *c, uint32_t np)
{
    struct session *s = c->s;
    const struct loop_run_config *cfg = s->cfg;
    char spec[512], who[16];
    const char *base = card_spec(cfg, np);
    card_who(c, who, sizeof who);
    char more[600] = "", v[512];
    if (c->k > 0) { /* another card: other neurons (card 0's seed, the spec's or 1, + k), its own templates */
        spec_value(base, "seed", v, sizeof v);
        int m = snprintf(more, sizeof more, ";seed=%llu", (v[0] ? strtoull(v, NULL, 0) : 1) + c->k);
        spec_value(base, "templates", v, sizeof v);
        if (v[0]) {
            m += snprintf(more + m, sizeof more - (size_t)m, ";templates=");
            if (loop_run_card_templates(v, c->k, more + m, sizeof more - (size_t)m))
                return fail(s, ONI_EINVALARG, "%stemplates=%s: too long a path for this card's", who, v);
        }
    }
    int n = snprintf(spec, sizeof spec, "%s%s%s%s", base, cfg->link ? ";link=" : "", cfg->link ? cfg->link : "", more);
    if (n < 0 || (size_t)n >= sizeof spec)
        return fail(s, ONI_EINVALARG, "the card's spec is too long (%d characters, %zu at most)", n, sizeof spec - 1);
    if (c->k == 0) {
        snprintf(c->truth, sizeof c->truth, "%s", cfg->truth);
    } else {
        FILE *f = NULL;
        if (loop_run_card_truth(cfg->truth, c->k, c->truth, sizeof c->truth) || !(f = fopen(c->truth, "w")))
            return fail(s, ONI_EPATHINVALID, "%scannot make its truth file beside %s", who, cfg->truth);
        fclose(f);
    }
    if (!(c->ctx = oni_create_ctx("emu")))
        return fail(s, ONI_EINIT, "cannot load the emu driver");
    uint32_t tmo = 250; /* every wait of the loop is bounded well below a second */
    int rc = oni_set_driver_opt(c->ctx, ONI_DRV_EMU_SPEC, spec, strlen(spec) + 1);
    if (!rc)
        rc = oni_set_opt(c->ctx, ONI_OPT_TIMEOUTMS, &tmo, sizeof tmo);
    if (!rc)
        rc = oni_set_driver_opt(c->ctx, ONI_DRV_EMU_TRUTH_FILE, c->truth, strlen(c->truth) + 1);
    if (!rc)
        rc = oni_init_ctx(c->ctx, -1);
    if (rc)
        return fail(s, rc, "%scannot open the emulated card: %s", who, oni_error_str(rc));
    /* In fast mode the acquisition clock follows the reads, not wall time,
     * so neither the latency nor the keeping-up verdict would mean anything.
     * A driver that cannot say is taken as realtime. */
    uint32_t fast = 0;
    size_t sz = sizeof fast;
    if (oni_get_driver_opt(c->ctx, ONI_DRV_EMU_MODE, &fast, &sz) == 0 && fast)
        return fail(s, ONI_EINVALSTATE, "the card's mode=fast has no real-time clock to close the loop against "
                                        "(latency and keeping up need mode=realtime)");
    /* The GPU data stream is onigpu's firmware extension: a card that does not
     * say it has one (today's firmware, a driver without the option) has none. */
    uint32_t gs = 0;
    sz = sizeof gs;
    int gpu = oni_get_driver_opt(c->ctx, ONI_DRV_GPU_STREAM, &gs, &sz) == 0 && gs == 1;
    if (c->k > 0)
        return gpu == s->gpu ? 0 : fail(s, ONI_EINVALARG, "%sthe cards differ: card 0 has %s GPU stream, this one "
                                        "%s", who, s->gpu ? "a" : "no", gpu ? "has" : "has none");
    s->gpu = gpu;
    s->res->gpu_stream = s->gpu;
    oniemu_link_t l;
    sz = sizeof l;
    if (oni_get_driver_opt(c->ctx, ONI_DRV_EMU_LINK, &l, &sz)) {
        snprintf(s->res->link, sizeof s->res->link, "unknown");
    } else {
        snprintf(s->res->link, sizeof s->res->link, "%.*s", (int)sizeof l.name, l.name);
        s->link = l;
        s->have_link = 1;
    }
    return 0;
}

/* Card c's stream statistics into *ss (zeros on an error, which is
 * returned: the figures are then unknown, never 0). */
static int card_stats(const struct card *c, onigpu_stream_stats_t *ss)
{
    size_t sz = sizeof *ss;
    memset(ss, 0, sizeof *ss);
    return oni_get_driver_opt(c->ctx, ONI_DRV_STREAM_STATS, ss, &sz);
}

/* What the cards hold and dropped: the most any card's probe stream holds,
 * in ms of acquisition (what the loop owes the cards; on the default stream
 * the echoes and the board's other frames count too: a few bytes a second)
 * and as a share of its FIFO, and the frames all cards dropped. */
struct owed {
    double ms, fifo_pct;
    uint64_t dropped;
};

/* The cards' statistics into *o; the first error reading them (then o's
 * figures are NaN and 0: unknown, never 0). */
static int cards_owed(const struct session *s, struct owed *o)
{
    memset(o, 0, sizeof *o);
    for (uint32_t k = 0; k < s->ncards; k++) {
        const struct card *c = &s->card[k];
        onigpu_stream_stats_t ss;
        int rc = card_stats(c, &ss);
        if (rc) {
            *o = (struct owed){NAN, NAN, 0};
            return rc;
        }
        uint64_t frame = (uint64_t)c->rig.nprobes * s->read_stride, cap = ss.fifo_capacity[s->gpu];
        double ms = frame && s->p.fs_hz > 0 ? (double)ss.fifo_bytes[s->gpu] / (double)frame / s->p.fs_hz * 1e3 : 0;
        double pct = cap ? 100.0 * (double)ss.fifo_bytes[s->gpu] / (double)cap : 0.0;
        o->ms = ms > o->ms ? ms : o->ms;
        o->fifo_pct = pct > o->fifo_pct ? pct : o->fifo_pct;
        o->dropped += ss.dropped_frames[0] + ss.dropped_frames[1];
    }
    return 0;
}

/* The most any card's generator fell behind real time, in ms (NaN: a card
 * that cannot say). */
static double cards_lag_ms(const struct session *s)
{
    double most = 0;
    for (uint32_t k = 0; k < s->ncards; k++) {
        oniemu_lag_t lag;
        size_t sz = sizeof lag;
        if (oni_get_driver_opt(s->card[k].ctx, ONI_DRV_EMU_LAG, &lag, &sz))
            return NAN;
        most = lag.max_ns / 1e6 > most ? lag.max_ns / 1e6 : most;
    }
    return most;
}

/* Backends that read blocks into host memory: all a card without the GPU
 * stream can feed (the others need the card's DMA into GPU memory). */
static int host_backend(int b)
{
    return b == LOOP_CPU || b == LOOP_GPU_STAGED || b == LOOP_GPU_MAPPED;
}

/* Card c's probe stream as c->inner, for blocks of in_bytes: the GPU
 * stream (cardsrc), or the default stream (defsrc, which hands card 0's
 * echoes to on_frame and drops other cards' other frames). */
static int card_source(struct card *c, size_t in_bytes)
{
    struct session *s = c->s;
    const struct loop_rig *rig = &c->rig;
    char who[16];
    card_who(c, who, sizeof who);
    int rc;
    oni_dev_idx_t raw[2];
    for (uint32_t k = 0; k < rig->nheads; k++)
        raw[k] = rig->head[k].raw;
    if (s->gpu) {
        for (uint32_t k = 0; k < rig->nheads; k++)
            if ((rc = oni_write_reg(c->ctx, raw[k], ONIEMU_REG_ROUTE, 1)) != 0)
                return fail(s, rc, "%srouting the NP2.0e of port %c to the GPU stream: %s", who, 'A' + (int)k,
                            oni_error_str(rc));
        if ((rc = loop_cardsrc_init(&c->cs, c->ctx, (uint32_t)in_bytes)) != 0)
            return fail(s, rc, "%ssetting up the GPU stream: %s", who, oni_error_str(rc));
        c->cs.spin_ns = (uint64_t)s->c.spin_us * 1000u;
        c->cs.sync_only = !s->cfg->dma_reads; /* the emu driver's reads block no one (docs/closed-loop.md) */
        loop_cardsrc_source(&c->cs, &c->inner);
        return 0;
    }
    /* on the default stream each frame is put in its probe's place as it
     * comes (probe order: no slots), whatever the headstages' order */
    struct loop_defsrc_lane lanes[LOOP_RIG_MAX_PROBES];
    for (uint32_t p = 0; p < rig->nprobes; p++)
        lanes[p] = (struct loop_defsrc_lane){rig->head[p / 2].raw, (uint16_t)(p % 2)};
    if ((rc = loop_defsrc_init(&c->ds, c->ctx, raw, rig->nheads, rig->head[0].raw_read, c->k ? NULL : on_frame,
                               s)) != 0 ||
        (rig->nprobes > 1 && (rc = loop_defsrc_lanes(&c->ds, lanes, rig->nprobes, LOOP_NP2E_PROBE_OFF)) != 0))
        return fail(s, rc, "%ssetting up the default stream: %s", who, oni_error_str(rc));
    loop_defsrc_source(&c->ds, &c->inner);
    return 0;
}

/* The loop's source: card 0's stream, or the cards' side by side (zipsrc,
 * each card's block checked by part_read). */
static int source(struct session *s)
{
    struct loop_source parts[LOOP_RUN_MAX_CARDS];
    uint32_t width[LOOP_RUN_MAX_CARDS];
    for (uint32_t k = 0; k < s->ncards; k++) {
        struct card *c = &s->card[k];
        width[k] = c->rig.nprobes * s->read_stride;
        int rc = card_source(c, (size_t)s->cfg->block * width[k]);
        if (rc)
            return rc;
        parts[k] = (struct loop_source){.ctx = c, .read = part_read};
    }
    if (s->ncards == 1) {
        s->c.src = s->card[0].inner;
        return 0;
    }
    int rc = loop_zipsrc_init(&s->zs, parts, width, s->ncards);
    if (rc)
        return fail(s, rc, "setting up the cards' streams side by side: %s", oni_error_str(rc));
    loop_zipsrc_source(&s->zs, &s->c.src);
    return 0;
}

/* The cards' rigs and the loop frame's layout: card k's probes after the
 * cards before it, each card's super-frames in its stream's order (GPU
 * stream) or in probe order (the default stream's source sorts them). A
 * block each card's FIFO cannot hold never arrives (the loop would wait for
 * it until the end and process nothing); the FIFO fills in whole frames, so
 * a block is whole only with room for the frame coming next (less the 4
 * bytes of padding a frame may end on). 0 or an error (said). */
static int layout(struct session *s)
{
    const struct loop_run_config *cfg = s->cfg;
    uint8_t slot[LOOP_RUN_MAX_PROBES];
    uint32_t raw_read = 0;
    for (uint32_t k = 0; k < s->ncards; k++) {
        struct card *c = &s->card[k];
        uint32_t np = (k + 1 < s->ncards ? s->card[k + 1].base : s->nprobes) - c->base;
        int rc = find_devices(c, np);
        if (rc)
            return rc;
        for (uint32_t h = 0; h < c->rig.nheads; h++) {
            uint32_t r = c->rig.head[h].raw_read;
            if (raw_read && r != raw_read)
                return fail(s, ONI_EINVALARG, "the headstages' DS90UB9x frames differ in size (%u and %u bytes)",
                            raw_read, r);
            raw_read = r;
        }
        for (uint32_t j = 0; j < np; j++)
            slot[c->base + j] = (uint8_t)(c->base + c->slot[j]);
    }
    if (loop_np2e_layout(&s->lay, raw_read, s->nprobes, s->gpu ? slot : NULL))
        return fail(s, ONI_EINVALARG, "the DS90UB9x frames of %u bytes hold no NP2.0e super-frame (%d bytes)",
                    raw_read, LOOP_NP2E_PAYLOAD);
    s->read_stride = loop_np2e_read_stride(raw_read);
    for (uint32_t k = 0; k < s->ncards; k++) {
        const struct card *c = &s->card[k];
        size_t bytes = (size_t)cfg->block * c->rig.nprobes * s->read_stride;
        uint64_t need = bytes + (uint64_t)c->rig.nprobes * s->read_stride - 4;
        onigpu_stream_stats_t ss;
        char who[16];
        if (card_stats(c, &ss) == 0 && ss.fifo_capacity[s->gpu] && ss.fifo_capacity[s->gpu] < need)
            return fail(s, ONI_EINVALARG,
                        "%sa block of %u frames (%zu bytes, and a frame more coming) does not fit the card's %s "
                        "FIFO of %llu bytes (a smaller --block, or more ddr= in the card's spec)",
                        card_who(c, who, sizeof who), cfg->block, bytes, s->gpu ? "GPU-stream" : "default-stream",
                        (unsigned long long)ss.fifo_capacity[s->gpu]);
    }
    return 0;
}

/* Bring up the rigs, set up detection and the loop, start the default
 * streams' readers (GPU stream only: on the default stream the loop's reads
 * see card 0's echoes). 0 or an error (said). */
static int setup(struct session *s)
{
    const struct loop_run_config *cfg = s->cfg;
    uint32_t hz = 0;
    if (!s->gpu && !host_backend(cfg->backend))
        return fail(s, ONI_EINVALARG,
                    "backend %s needs the card's GPU data stream (onigpu's firmware extension), and this card has "
                    "none: cpu, gpu-staged and gpu-mapped run through the default stream",
                    loop_backend_name(cfg->backend));
    int rc = layout(s);
    if (rc)
        return rc;
    if ((rc = oni_get_opt(s->card[0].ctx, ONI_OPT_ACQCLKHZ, &hz, &(size_t){sizeof hz})) != 0)
        return fail(s, rc, "reading the acquisition clock: %s", oni_error_str(rc));
    s->acq_hz = hz ? hz : 250e6; /* the host hub's clock, which both the super-frames and DigitalIO carry */
    size_t in_bytes = (size_t)cfg->block * s->lay.stride;
    loop_ephys_defaults(&s->p);
    if ((rc = loop_ephys_init(s->st, &s->p, &s->lay)) != 0)
        return fail(s, rc, "setting up detection: %s", oni_error_str(rc));
    struct loop_config *c = &s->c;
    memset(c, 0, sizeof *c);
    c->backend = cfg->backend;
    c->work = LOOP_WORK_EPHYS;
    c->in_bytes = in_bytes;
    c->depth = 4;
    c->timeout_ms = 1000;
    c->ephys = s->st;
    c->spin_us = cfg->spin_us ? cfg->spin_us : LOOP_RUN_SPIN_US;
    /* every block's timings, for the stages of the latency (at most 2^19:
     * 16 MiB; stimulations past them get only the hub-clock figures): room
     * for a run that ends late and for a backlog read at the probe's rate
     * and more */
    double nblk = ceil((cfg->seconds + 2) * 1.5 * s->p.fs_hz / cfg->block) + 64;
    c->record_cap = nblk < (double)MAX_REC ? (uint32_t)nblk : MAX_REC;
    if ((rc = source(s)) != 0)
        return rc;
    if ((cfg->tap && cfg->tap->block) || (s->ncards == 1 && s->nprobes > 1)) { /* checked; the recording's */
        s->inner = c->src;
        c->src.ctx = s;
        c->src.read = tap_read;
        c->src.read_async = s->inner.read_async ? tap_read_async : NULL;
        c->src.pin = s->inner.pin ? tap_pin : NULL;
        c->src.unpin = s->inner.unpin ? tap_unpin : NULL;
        c->src.dropped = s->inner.dropped ? tap_dropped : NULL;
    }
    c->sink = (struct loop_sink){s, sink_write};
    c->stages = cfg->stages;
    c->nstages = cfg->nstages;
    c->fs_hz = s->p.fs_hz;
    c->clock_hz = s->acq_hz;
    char why[320] = "";
    c->why = why;
    c->why_cap = sizeof why;
    if ((rc = loop_create(c, &s->lp)) != 0)
        return fail(s, rc, "creating the loop: %s", why[0] ? why : oni_error_str(rc));
    for (uint32_t k = 0; s->gpu && k < s->ncards; k++) {
        struct card *cd = &s->card[k];
        if (pthread_create(&cd->reader, NULL, reader_main, cd))
            return fail(s, ONI_EBADALLOC, "starting a default-stream reader");
        cd->reader_started = 1;
    }
    return 0;
}

/* Stop the default streams' readers (all of them: they share echo_stop). */
static void stop_readers(struct session *s)
{
    atomic_store(&s->echo_stop, 1);
    for (uint32_t k = 0; k < s->ncards; k++) {
        struct card *c = &s->card[k];
        if (c->reader_started) {
            pthread_join(c->reader, NULL);
            c->reader_started = 0;
        }
    }
    atomic_store(&s->echo_stop, 0);
}

/* One live report: frame rate over the last interval, stimulations,
 * latency so far, FIFO fill and backlog, drops. */
static void progress(struct session *s, double t, uint64_t *last_blocks, double *last_t)
{
    struct loop_run_progress p = {.t = t};
    struct loop_stats ls;
    loop_get_stats(s->lp, &ls);
    p.fps = t > *last_t ? (double)(ls.blocks - *last_blocks) * s->cfg->block / (t - *last_t) : 0;
    *last_blocks = ls.blocks;
    *last_t = t;
    p.stims = atomic_load(&s->stims);
    p.stalls = ls.stalls;
    struct loop_run_latency lat;
    lat_summary(s, s->lat, atomic_load(&s->nlat), NULL, 0, &lat);
    p.have_lat = lat.n > 0;
    p.lat_p50_us = lat.p50_us;
    p.lat_p99_us = lat.p99_us;
    struct owed o;
    p.ss_rc = cards_owed(s, &o);
    if (!p.ss_rc) {
        p.fifo_pct = o.fifo_pct;
        p.behind_ms = o.ms;
        p.dropped = o.dropped;
    }
    s->cfg->progress(s->cfg->arg, &p);
}

struct loop_thread {
    struct loop *lp;
    int rc;
};

static void *loop_main(void *p)
{
    struct loop_thread *t = p;
    t->rc = loop_run(t->lp);
    return NULL;
}

static int stop_asked(const struct session *s)
{
    return s->cfg->stop && atomic_load(s->cfg->stop);
}

/* Acquire for cfg->seconds (or until cfg->stop), then stop the loop, the
 * echo reader and acquisition, noting what the card held and dropped as the
 * loop stopped. 0, or an error of the start (nothing ran then). */
static int acquire(struct session *s, int *loop_rc)
{
    const struct loop_run_config *cfg = s->cfg;
    struct loop_run_result *res = s->res;
    if (cfg->started)
        cfg->started(cfg->arg, res);
    uint32_t one = 1, zero = 0;
    char why[200] = "";
    int rc = cfg->tap && cfg->tap->open ? cfg->tap->open(cfg->tap->arg, s->card[0].ctx, why, sizeof why) : 0;
    if (rc)
        return fail(s, rc, "cannot record: %s", why);
    uint32_t started = 0;
    while (!rc && started < s->ncards)
        rc = oni_set_opt(s->card[started++].ctx, ONI_OPT_RUNNING, &one, sizeof one);
    struct loop_thread lt = {s->lp, 0};
    pthread_t lth;
    uint64_t t0 = oni_now_ns();
    if (!rc && pthread_create(&lth, NULL, loop_main, &lt))
        rc = ONI_EBADALLOC;
    if (rc) {
        for (uint32_t k = 0; k < started; k++)
            oni_set_opt(s->card[k].ctx, ONI_OPT_RUNNING, &zero, sizeof zero);
        return fail(s, rc, rc == ONI_EBADALLOC ? "starting the loop" : "starting acquisition: %s", oni_error_str(rc));
    }
    if (cfg->tap && cfg->tap->loop)
        cfg->tap->loop(cfg->tap->arg, s->lp);
    uint64_t last_blocks = 0;
    double last_t = 0;
    for (int sec = 1; sec <= (int)ceil(cfg->seconds) && !loop_error(s->lp) && !stop_asked(s); sec++) {
        double until = sec < cfg->seconds ? sec : cfg->seconds;
        while ((double)(oni_now_ns() - t0) / 1e9 < until && !loop_error(s->lp) && !stop_asked(s)) {
            struct timespec ts = {0, 20000000};
            nanosleep(&ts, NULL);
        }
        if (cfg->progress)
            progress(s, (double)(oni_now_ns() - t0) / 1e9, &last_blocks, &last_t);
    }
    res->stopped = stop_asked(s);
    /* What the loop owes the card as it stops: a loop that keeps up owes a
     * block or two; one slower than the probe owes more every second, and
     * its latency grows with it, long before the FIFO drops anything. The
     * drops counted are those up to here, while the loop read: once it
     * stops, the card drops what nobody reads any more. */
    struct owed o;
    res->stats_rc = cards_owed(s, &o);
    res->owed_ms = o.ms;
    res->dropped = o.dropped;
    res->emu_lag_ms = cards_lag_ms(s);
    loop_stop(s->lp);
    pthread_join(lth, NULL);
    if (cfg->tap && cfg->tap->loop)
        cfg->tap->loop(cfg->tap->arg, NULL);
    /* The last echoes: on the default stream the loop's reads took them,
     * now card 0's reader does. */
    struct card *c0 = &s->card[0];
    if (!c0->reader_started && pthread_create(&c0->reader, NULL, reader_main, c0) == 0)
        c0->reader_started = 1;
    struct timespec settle = {0, 300000000};
    nanosleep(&settle, NULL);
    /* Stop reading before acquisition: stopping flushes the read path, which
     * would wait for the readers otherwise. */
    stop_readers(s);
    for (uint32_t k = 0; k < s->ncards; k++)
        oni_set_opt(s->card[k].ctx, ONI_OPT_RUNNING, &zero, sizeof zero);
    *loop_rc = lt.rc;
    return 0;
}

/* Probe p's events of ev[0 .. n) (chan / 384 == p; all when p < 0) into
 * out; returns how many. (Scoring keeps probes apart by itself: score.h.) */
static size_t probe_truth(const struct loop_truth *ev, size_t n, int p, struct loop_truth *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (p < 0 || ev[i].chan / LOOP_NP2E_CHANNELS == (uint32_t)p)
            out[k++] = ev[i];
    return k;
}

static size_t probe_spikes(const struct loop_spike *ev, size_t n, int p, struct loop_spike *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (p < 0 || ev[i].chan / LOOP_NP2E_CHANNELS == (uint32_t)p)
            out[k++] = ev[i];
    return k;
}

/* The detections scored against the ground truth, after the detector's
 * calibration and up to the last processed frame (or the last spike kept):
 * pooled into res->score, and per probe. 0, or the truth file's error
 * (said; the score is then of no events). */
static int score(struct session *s)
{
    struct loop_run_result *res = s->res;
    struct loop_truth *tr = NULL;
    size_t ntr = 0, cap = 0;
    uint32_t base[LOOP_RUN_MAX_PROBES];
    int rc = unit_bases(s, base);
    const struct card *c0 = &s->card[0];
    for (uint32_t k = 0; !rc && k < s->ncards; k++) {
        const struct card *c = &s->card[k];
        int64_t shift = c->have_first && c0->have_first ? (int64_t)(c0->first_time - c->first_time) : 0;
        if ((rc = read_truth(c, base, shift, &tr, &ntr, &cap)) != 0)
            fail(s, rc, "cannot read the ground truth %s: %s", c->truth, oni_error_str(rc));
    }
    const struct loop_ephys_state *fin = loop_ephys_final(s->lp);
    uint64_t tol = (uint64_t)(LOOP_SCORE_WINDOW_S * s->acq_hz);
    /* The acquisition clock does not start at the first frame read. */
    uint64_t t_lo = atomic_load(&s->t_first_block) + (uint64_t)((double)fin->calib / s->p.fs_hz * s->acq_hz) + tol;
    uint64_t t_hi = atomic_load(&s->t_block) > tol ? atomic_load(&s->t_block) - tol : 0;
    size_t ndet = atomic_load(&s->ndet);
    if (atomic_load(&s->det_unkept) && ndet && s->det[ndet - 1].time > tol && s->det[ndet - 1].time - tol < t_hi)
        t_hi = s->det[ndet - 1].time - tol; /* none kept after it: scored up to the last one kept */
    struct loop_truth *pt = malloc((ntr ? ntr : 1) * sizeof *pt);
    struct loop_spike *pd = malloc((ndet ? ndet : 1) * sizeof *pd);
    int src = pt && pd ? 0 : ONI_EBADALLOC;
    for (int p = -1; !src && p < (int)s->nprobes; p++) {
        size_t nt = probe_truth(tr, ntr, p, pt), nd = probe_spikes(s->det, ndet, p, pd);
        if (p >= 0)
            res->probe[p].spikes = nd;
        src = loop_score_spikes(pt, nt, pd, nd, tol, LOOP_SCORE_RADIUS_UM, t_lo, t_hi,
                                p < 0 ? &res->score : &res->probe[p].score);
    }
    if (src && !rc)
        rc = fail(s, src, "cannot score the detections: %s", oni_error_str(src));
    free(pt);
    free(pd);
    free(tr);
    return rc;
}

const char *loop_run_stage_name(int stage)
{
    static const char *const names[LOOP_RUN_NSTAGES] = {"after", "ready", "handoff", "compute", "write", "echo"};
    return stage >= 0 && stage < LOOP_RUN_NSTAGES ? names[stage] : NULL;
}

static double link_us(const struct session *s, size_t n)
{
    if (!s->have_link)
        return NAN;
    return (s->link.latency_s + (s->link.bandwidth_Bps > 0 ? (double)n / s->link.bandwidth_Bps : 0)) * 1e6;
}

/* Percentiles (us) of n values (ns, NaN = none) into *out. */
static void ns_summary(double *v, size_t n, struct loop_run_latency *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!isnan(v[i]))
            v[k++] = v[i];
    out->n = k;
    out->p50_us = out->p99_us = out->p999_us = out->max_us = NAN;
    if (!k)
        return;
    loop_sort_f64(v, k);
    out->p50_us = loop_percentile_sorted_f64(v, k, 50) / 1e3;
    out->p99_us = loop_percentile_sorted_f64(v, k, 99) / 1e3;
    out->p999_us = loop_percentile_sorted_f64(v, k, 99.9) / 1e3;
    out->max_us = v[k - 1] / 1e3;
}

/* The stages of the time after each block's last sample (run.h), echoes
 * after the warm-up only. The hub clock is placed on the host's clock by
 * the writes: a stimulation's outputs changed after its sink began plus the
 * link's time for the write frame, and before the sink returned, so the
 * offset host - hub lies in [ws + link - Te, we - Te] for every echo; the
 * midpoint of their intersection is taken. */
static int stages(struct session *s)
{
    struct loop_run_result *res = s->res;
    size_t n = res->nlat;
    const struct loop_record *rec = loop_records(s->lp);
    struct loop_stats ls;
    loop_get_stats(s->lp, &ls);
    double lo = -INFINITY, hi = INFINITY, wl = link_us(s, 8 + 4) * 1e3;
    wl = isnan(wl) ? 0 : wl;
    for (size_t i = 0; i < n; i++) {
        double te = (double)s->echo_hub[i] / s->acq_hz * 1e9;
        uint32_t t = res->lat_tag[i] % TAGS;
        double a = (double)s->tag_ws[t] + wl - te, b = (double)s->tag_we[t] - te;
        lo = a > lo ? a : lo;
        hi = b < hi ? b : hi;
    }
    int placed = n && lo <= hi;
    double off = placed ? (lo + hi) / 2 : NAN;
    res->clock_err_us = placed ? (hi - lo) / 2e3 : NAN;
    double *v[LOOP_RUN_NSTAGES];
    int rc = 0;
    for (int k = 0; k < LOOP_RUN_NSTAGES; k++)
        if (!(v[k] = malloc((n ? n : 1) * sizeof *v[k])))
            rc = ONI_EBADALLOC;
    int host_read = host_backend(s->cfg->backend), split = host_read && s->cfg->backend != LOOP_GPU_MAPPED;
    for (size_t i = 0; i < n && !rc; i++) {
        uint32_t t = res->lat_tag[i] % TAGS;
        uint64_t seq = s->tag_seq[t];
        double scratch[LOOP_RUN_NSTAGES], *row[LOOP_RUN_NSTAGES];
        for (int k = 0; k < LOOP_RUN_NSTAGES; k++) {
            v[k][i] = NAN; /* the warm-up's stay NaN: not summed up */
            row[k] = res->lat_warm[i] ? &scratch[k] : &v[k][i];
        }
        double last = off + (double)s->tag_last[t] / s->acq_hz * 1e9, te = off + (double)s->echo_hub[i] / s->acq_hz * 1e9;
        *row[LOOP_RUN_AFTER] = ((double)s->echo_hub[i] - (double)s->tag_last[t]) / s->acq_hz * 1e9;
        *row[LOOP_RUN_WRITE] = te - (double)s->tag_ws[t];
        *row[LOOP_RUN_ECHO] = (double)s->echo_host[i] - te;
        if (host_read && rec && seq < ls.nrecords) {
            double got = (double)rec[seq].t_start + rec[seq].t_in_ns;
            double comp = split ? rec[seq].t_compute_ns : 0;
            *row[LOOP_RUN_READY] = got - last;
            *row[LOOP_RUN_HANDOFF] = (double)s->tag_ws[t] - got - comp;
            if (split)
                *row[LOOP_RUN_COMPUTE] = comp;
        }
    }
    for (int k = 0; k < LOOP_RUN_NSTAGES; k++) {
        if (!rc)
            ns_summary(v[k], n, &res->stage[k]);
        free(v[k]);
    }
    return rc ? fail(s, rc, "no memory for the latency's stages") : 0;
}

/* The echoes kept, each marked warm-up or not, and their percentiles apart. */
static int latencies(struct session *s)
{
    struct loop_run_result *res = s->res;
    size_t n = atomic_load(&s->nlat);
    /* half the run when that is shorter: a run stopped early keeps a part
     * after its warm-up */
    res->warmup_s = res->seconds / 2 < LOOP_RUN_WARMUP_S ? res->seconds / 2 : LOOP_RUN_WARMUP_S;
    res->nlat = n;
    res->lat_tag = malloc((n ? n : 1) * sizeof *res->lat_tag);
    res->lat_us = malloc((n ? n : 1) * sizeof *res->lat_us);
    res->lat_warm = malloc(n ? n : 1);
    if (!res->lat_tag || !res->lat_us || !res->lat_warm) {
        res->nlat = 0;
        return fail(s, ONI_EBADALLOC, "no memory for the latencies");
    }
    /* Warm-up by the spike's time in the acquisition clock, from the first
     * block: the same spikes whichever machine or load. */
    uint64_t warm_end = atomic_load(&s->t_first_block) + (uint64_t)(res->warmup_s * s->acq_hz);
    for (size_t i = 0; i < n; i++) {
        uint32_t tag = (uint32_t)s->lat_tag[i];
        res->lat_tag[i] = tag;
        res->lat_us[i] = ticks_us(s, (double)s->lat[i]);
        res->lat_warm[i] = s->tag_time[tag % TAGS] < warm_end;
    }
    lat_summary(s, s->lat, n, res->lat_warm, 0, &res->lat);
    lat_summary(s, s->lat, n, res->lat_warm, 1, &res->lat_warmup);
    res->link_read_us = link_us(s, s->c.in_bytes);
    res->link_write_us = link_us(s, 8 + 4);
    return stages(s);
}

/* Score and sum up; the first error of the run, the truth or the echo
 * reader (said). */
static int summarize(struct session *s, int loop_rc)
{
    struct loop_run_result *res = s->res;
    struct loop_stats ls;
    res->ran = 1;
    const char *lwhy = loop_error_text(s->lp);
    int rc = loop_rc ? fail(s, loop_rc, "closed loop: %s", lwhy[0] ? lwhy : oni_error_str(loop_rc)) : 0;
    int trc = score(s);
    rc = rc ? rc : trc;
    loop_get_stats(s->lp, &ls);
    res->gpu_left_running = loop_gpu_left_running(s->lp);
    res->seconds = ls.seconds;
    /* processed: blocks sent back, not blocks read (after an error the loop
     * has read blocks it never finished) */
    res->frames = ls.blocks * s->cfg->block;
    res->bytes = ls.blocks * s->c.in_bytes;
    res->fps = ls.seconds > 0 ? res->frames / ls.seconds : 0.0;
    res->stalls = ls.stalls;
    int behind = res->fps < KEEP_UP_SHARE * s->p.fs_hz || res->owed_ms > OWED_MAX_MS || res->dropped;
    /* Without the card's statistics the backlog is unknown: only a slow
     * frame rate gives a verdict then. */
    res->verdict = behind ? 0 : isnan(res->owed_ms) ? -1 : 1;
    res->spikes = atomic_load(&s->ndet);
    res->spikes_overflow = atomic_load(&s->det_overflow);
    res->spikes_unkept = atomic_load(&s->det_unkept);
    res->stims = atomic_load(&s->stims);
    res->echoes_unkept = atomic_load(&s->lat_unkept);
    res->echoes_unclocked = atomic_load(&s->echo_unclocked);
    res->echoes = atomic_load(&s->nlat) + res->echoes_unkept + res->echoes_unclocked;
    res->echoes_other = atomic_load(&s->echo_other);
    int lrc = latencies(s);
    rc = rc ? rc : lrc;
    int erc = atomic_load(&s->echo_err);
    if (erc) /* the latencies then miss the echoes not read */
        rc = rc ? rc : fail(s, erc, "reading a card's default stream (the stimulator's echoes): %s",
                                  oni_error_str(erc));
    if (!res->frames)
        rc = rc ? rc : fail(s, ONI_EREADFAILURE, "the loop processed no frame in %.1f s: no block of %u frames "
                            "came from the card", ls.seconds, s->cfg->block);
    return rc;
}

static void session_free(struct session *s)
{
    if (!s)
        return;
    stop_readers(s);
    /* A GPU kernel that will not stop holds the GPU until the process ends:
     * freeing the card's GPU memory would wait for it for good, so the card
     * (stopped when acquisition ended) is left open (run.h). */
    int gpu_busy = s->lp && loop_gpu_left_running(s->lp);
    loop_destroy(s->lp);
    loop_zipsrc_free(&s->zs);
    for (uint32_t k = 0; k < s->ncards; k++) {
        struct card *c = &s->card[k];
        if (c->ctx && !gpu_busy)
            oni_destroy_ctx(c->ctx);
        loop_defsrc_free(&c->ds);
    }
    free(s->det);
    free(s->lat);
    free(s->lat_tag);
    free(s->echo_hub);
    free(s->echo_host);
    free(s->st);
    free(s);
}

/* The probes of card k of nc cards holding np: spread evenly, the first
 * cards taking one more where they do not divide. */
static uint32_t card_probes(uint32_t np, uint32_t nc, uint32_t k)
{
    return np / nc + (k < np % nc);
}

/* The cards the run's probes are on (loop_run_check bounds them). */
static uint32_t cards_of(const struct loop_run_config *cfg)
{
    uint32_t np = cfg->probes ? cfg->probes : 1;
    return cfg->cards ? cfg->cards : (np + LOOP_RIG_MAX_PROBES - 1) / LOOP_RIG_MAX_PROBES;
}

int loop_run_check(const struct loop_run_config *cfg, char *why, size_t cap)
{
    if (!cfg || !why || !cap)
        return ONI_EINVALARG;
    char bwhy[160];
    uint32_t np = cfg->probes ? cfg->probes : 1, nc = cards_of(cfg);
    if (!cfg->truth)
        snprintf(why, cap, "no ground-truth file given");
    else if (cfg->block > LOOP_RUN_MAX_BLOCK)
        snprintf(why, cap, "a block of %u frames (1..%d, or 0: picked)", cfg->block, LOOP_RUN_MAX_BLOCK);
    else if (cfg->probes > LOOP_RUN_MAX_PROBES)
        snprintf(why, cap, "%u probes (1..%d)", cfg->probes, LOOP_RUN_MAX_PROBES);
    else if (nc > LOOP_RUN_MAX_CARDS || nc > np || (np + nc - 1) / nc > LOOP_RIG_MAX_PROBES)
        snprintf(why, cap, "%u probes on %u cards (1..%d cards, at most %d probes each, no card without one)", np,
                 nc, LOOP_RUN_MAX_CARDS, LOOP_RIG_MAX_PROBES);
    else if (nc > 1 && !host_backend(cfg->backend))
        snprintf(why, cap, "backend %s takes its blocks through one card's DMA into GPU memory; the probes of several "
                 "cards are read into host memory and joined there (cpu, gpu-staged, gpu-mapped)",
                 loop_backend_name(cfg->backend));
    else if (nc > 1 && cfg->tap)
        snprintf(why, cap, "a recording or a view takes one card's probes (at most %d), not %u cards'",
                 LOOP_RIG_MAX_PROBES, nc);
    else if (cfg->spin_us > 1000000)
        snprintf(why, cap, "a spin of %u us (at most 1 s)", cfg->spin_us);
    else if (!(cfg->seconds >= LOOP_RUN_MIN_SECONDS) || cfg->seconds > 86400)
        snprintf(why, cap, "a run of %g s (%g..86400)", cfg->seconds, LOOP_RUN_MIN_SECONDS);
    else if (!loop_backend_available(cfg->backend, bwhy, sizeof bwhy))
        snprintf(why, cap, "backend %s is not available: %s", loop_backend_name(cfg->backend), bwhy);
    else
        return 0;
    return ONI_EINVALARG;
}

/* One run with cfg->block >= 1 (checked). */
static int run_one(const struct loop_run_config *cfg, struct loop_run_result *res)
{
    memset(res, 0, sizeof *res);
    res->owed_ms = res->emu_lag_ms = NAN;
    res->clock_err_us = res->link_read_us = res->link_write_us = NAN;
    res->block = cfg->block;
    struct session *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(res->why, sizeof res->why, "no memory");
        return res->rc = ONI_EBADALLOC;
    }
    s->cfg = cfg;
    s->res = res;
    s->st = calloc(1, sizeof *s->st);
    s->det = malloc(MAX_DET * sizeof *s->det);
    s->lat = malloc(MAX_LAT * sizeof *s->lat);
    s->lat_tag = malloc(MAX_LAT * sizeof *s->lat_tag);
    s->echo_hub = malloc(MAX_LAT * sizeof *s->echo_hub);
    s->echo_host = malloc(MAX_LAT * sizeof *s->echo_host);
    int rc = s->st && s->det && s->lat && s->lat_tag && s->echo_hub && s->echo_host
                 ? 0 : fail(s, ONI_EBADALLOC, "no memory");
    /* the probes spread evenly, the first cards taking one more */
    s->nprobes = cfg->probes ? cfg->probes : 1;
    s->ncards = cards_of(cfg);
    for (uint32_t k = 0, base = 0; k < s->ncards; k++) {
        uint32_t np = card_probes(s->nprobes, s->ncards, k);
        s->card[k].s = s; /* the rest zero (calloc) */
        s->card[k].k = k;
        s->card[k].base = base;
        if (!rc)
            rc = open_card(&s->card[k], np);
        base += np;
    }
    if (!rc)
        rc = setup(s);
    if (!rc) {
        res->block_bytes = s->c.in_bytes;
        res->ai = loop_ephys_flops(s->lay.nchan, cfg->block) / (double)s->c.in_bytes;
        res->fs_hz = s->p.fs_hz;
        res->probes = s->nprobes;
        res->cards = s->ncards;
        for (uint32_t p = 0; p < s->nprobes; p++) {
            res->probe[p].card = card_of_probe(s, p);
            res->probe[p].on_card = p - s->card[res->probe[p].card].base;
        }
    }
    int loop_rc = 0;
    if (!rc)
        rc = acquire(s, &loop_rc);
    if (!rc)
        rc = summarize(s, loop_rc);
    session_free(s);
    return res->rc = rc;
}

/* A trial kept up: no error, no drop, the probe's rate, and no more left
 * in the card at its end than TRIAL_OWED_MS plus two blocks. */
#define TRIAL_OWED_MS 2.0
static int kept_up(const struct loop_run_result *r)
{
    double blk_ms = r->fs_hz > 0 ? r->block / r->fs_hz * 1e3 : 0;
    return r->rc == 0 && r->verdict == 1 && !r->dropped && r->owed_ms <= TRIAL_OWED_MS + 2 * blk_ms;
}

/* The block of the trial after one of block b that did not keep up: twice
 * b, or, when its frame rate was a fraction of the probe's, the power of two
 * that rate says is needed (b x probe / rate: a sanitized build at a tenth of
 * the rate skips the blocks between), at most LOOP_RUN_PICK_MAX (then past
 * it, after a trial of LOOP_RUN_PICK_MAX). */
static uint32_t next_trial(uint32_t b, const struct loop_run_result *r)
{
    if (b >= LOOP_RUN_PICK_MAX)
        return 2 * b;
    double need = r->fps > 0 && r->fps < r->fs_hz ? b * r->fs_hz / r->fps : 2 * b;
    uint32_t n = 2 * b;
    while (n < LOOP_RUN_PICK_MAX && n < need)
        n *= 2;
    return n > LOOP_RUN_PICK_MAX ? LOOP_RUN_PICK_MAX : n;
}

/* Trials of LOOP_RUN_TRIAL_S with blocks 1, 2, 4, ... up to LOOP_RUN_PICK_MAX
 * (next_trial: fewer when a trial's rate says so), each on a card of its own against cfg->truth emptied first: the first that
 * keeps up is *block, why said in res->block_why (none: the largest tried).
 * Nothing of a trial is recorded (cfg->tap).
 * A stop during the trials makes the trial it cut short the run's result, or
 * the one before when the cut one processed nothing (*block = 0, res holds
 * it, stopped). 0, or the error of a trial that could not run (res holds it:
 * a card that cannot serve the loop fails the same way in every trial). */
static int pick_block(const struct loop_run_config *cfg, struct loop_run_result *res, uint32_t *block)
{
    char why[320] = "";
    struct loop_run_config t = *cfg;
    t.seconds = LOOP_RUN_TRIAL_S;
    t.started = NULL;
    t.progress = NULL;
    t.tap = NULL; /* the recording is of the run, not of its trials */
    struct loop_run_result prev;
    memset(&prev, 0, sizeof prev);
    uint32_t last = 0;
    *block = 0;
    for (uint32_t b = 1; b <= LOOP_RUN_PICK_MAX; b = next_trial(b, &prev)) {
        if (truncate(cfg->truth, 0)) {
            if (last)
                loop_run_result_free(&prev);
            snprintf(res->why, sizeof res->why, "cannot empty the truth file %s for a trial", cfg->truth);
            return ONI_EPATHINVALID;
        }
        t.block = b;
        struct loop_run_result r;
        int rc = run_one(&t, &r);
        /* stopped, nothing could run, or a GPU left busy for good: this is the result */
        if (r.stopped || r.gpu_left_running || (rc && !r.ran && !last)) {
            if (r.stopped && !r.frames && last) { /* stopped as it began: the trial before */
                loop_run_result_free(&r);
                r = prev;
                rc = r.rc;
                r.stopped = 1;
                b = last;
            } else if (last) {
                loop_run_result_free(&prev);
            }
            *res = r;
            snprintf(res->block_why, sizeof res->block_why, "%s during the trials, at the trial of block %u",
                     r.stopped ? "stopped" : "failed", b);
            return rc;
        }
        if (rc && !r.ran) /* e.g. a block the FIFO cannot hold: the largest tried */
            break;
        if (last)
            loop_run_result_free(&prev);
        prev = r; /* kept: a stop as the next trial begins makes it the result */
        last = b;
        size_t k = strlen(why);
        snprintf(why + k, sizeof why - k, "%s%u: %.0f/s, %.1f ms left%s", k ? "; " : "", b, r.fps, r.owed_ms,
                 r.rc ? " (error)" : r.dropped ? " (drops)" : "");
        if (kept_up(&r)) {
            loop_run_result_free(&prev);
            *block = b;
            snprintf(res->block_why, sizeof res->block_why, "the smallest that kept up in %.1f s trials (%s)",
                     LOOP_RUN_TRIAL_S, why);
            return 0;
        }
    }
    if (last)
        loop_run_result_free(&prev);
    *block = last;
    snprintf(res->block_why, sizeof res->block_why, "none kept up in %.1f s trials: the largest tried (%s)",
             LOOP_RUN_TRIAL_S, why);
    return 0;
}

int loop_run_session(const struct loop_run_config *cfg, struct loop_run_result *res)
{
    if (!res)
        return ONI_EINVALARG;
    memset(res, 0, sizeof *res);
    res->owed_ms = res->emu_lag_ms = NAN;
    if (!cfg)
        return res->rc = ONI_EINVALARG;
    if ((res->rc = loop_run_check(cfg, res->why, sizeof res->why)) != 0)
        return res->rc;
    if (cfg->block)
        return run_one(cfg, res);
    uint32_t b = 0;
    char why[sizeof res->block_why];
    int rc = pick_block(cfg, res, &b);
    res->block_picked = 1;
    if (rc || !b)
        return res->rc = rc;
    memcpy(why, res->block_why, sizeof why);
    if (truncate(cfg->truth, 0)) {
        snprintf(res->why, sizeof res->why, "cannot empty the truth file %s after the trials", cfg->truth);
        return res->rc = ONI_EPATHINVALID;
    }
    struct loop_run_config c = *cfg;
    c.block = b;
    rc = run_one(&c, res);
    res->block_picked = 1;
    memcpy(res->block_why, why, sizeof why);
    return rc;
}

void loop_run_result_free(struct loop_run_result *res)
{
    if (!res)
        return;
    free(res->lat_tag);
    free(res->lat_us);
    free(res->lat_warm);
    res->lat_tag = NULL;
    res->lat_us = NULL;
    res->lat_warm = NULL;
    res->nlat = 0;
}

uint32_t loop_run_probe_card(const struct loop_run_config *cfg, uint32_t p, uint32_t *on_card)
{
    uint32_t np = cfg->probes ? cfg->probes : 1, nc = cards_of(cfg), k = 0;
    while (k + 1 < nc && p >= card_probes(np, nc, k)) {
        p -= card_probes(np, nc, k);
        k++;
    }
    if (on_card)
        *on_card = p;
    return k;
}

int loop_run_card_templates(const char *dir, uint32_t k, char *path, size_t cap)
{
    int n = !dir || !path ? -1 : k ? snprintf(path, cap, "%s/card%u", dir, k) : snprintf(path, cap, "%s", dir);
    return n >= 0 && (size_t)n < cap ? 0 : ONI_EINVALARG;
}

int loop_run_card_truth(const char *truth, uint32_t k, char *path, size_t cap)
{
    int n = truth && path && k ? snprintf(path, cap, "%s.card%u", truth, k) : -1;
    return n >= 0 && (size_t)n < cap ? 0 : ONI_EINVALARG;
}

void loop_run_truth_remove(const char *truth)
{
    if (!truth)
        return;
    remove(truth);
    for (uint32_t k = 1; k < LOOP_RUN_MAX_CARDS; k++) {
        char path[4200];
        if (!loop_run_card_truth(truth, k, path, sizeof path))
            remove(path);
    }
}

int loop_run_truth_new(const char *dir, char *path, size_t cap, char *why, size_t why_cap)
{
    int fd;
    if (!dir) {
        snprintf(path, cap, "/tmp/onigpu-truth-%d-XXXXXX.csv", (int)getpid());
        fd = mkstemps(path, 4);
        if (fd < 0) {
            snprintf(why, why_cap, "cannot create a temporary file in /tmp: %s", strerror(errno));
            return ONI_EPATHINVALID;
        }
    } else {
        char stamp[32];
        time_t now = time(NULL);
        struct tm tm;
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", gmtime_r(&now, &tm));
        snprintf(path, cap, "%s/truth-%s.csv", dir, stamp);
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0666);
        if (fd < 0) {
            snprintf(why, why_cap, "a directory where %s can be made: %s%s", path, strerror(errno),
                     errno == EEXIST ? " (a run started in the same second: not replaced)" : "");
            return ONI_EPATHINVALID;
        }
    }
    close(fd);
    return 0;
}
