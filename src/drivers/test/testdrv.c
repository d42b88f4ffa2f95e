/* testdrv.c - the `test` driver: an ONI controller with no hardware behind it.
 *
 * It answers the configuration and signal protocols of ONI-API.md with the
 * fixed device table of testtable.c and a register file per device, and
 * generates read frames as fast as the host reads them: nothing is paced, so
 * the host library's own cost is what a benchmark through it measures.
 * Frame contents are documented in onitest.h, registers and behaviour in
 * docs/devices-test.md.
 *
 * Every entry point takes the context mutex, so the driver is safe whatever
 * locking the host does. A signal read with nothing to deliver waits on a
 * condition variable until ONI_OPT_TIMEOUTMS passes, then returns
 * ONI_ETIMEOUT; a data read waits at most ONI_READ_SLICE_MS of that, then
 * returns 0 bytes (the host waits out its timeout, and may hand the read
 * state to a thread that starts acquisition in between: docs/threads.md). */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include "oni/driver.h"
#include "oni/util/opt.h"
#include "oni/util/wire.h"
#include "oni/util/cobs.h"
#include "oni/util/clock.h"
#include "onix.h"
#include "testdrv.h"

#define MAX_DEV 32 /* rows of testdrv_table this driver can hold (checked at init) */
#define MAX_HUB 8  /* hub numbers 0..7 (checked at init) */
#define HUB_NOREG 3 /* the one address in 0..ONIX_HUB_DELAYNS that onix.h leaves unassigned: NACKed */
#define MAX_FRAME (ONI_RFRAMEHEADERSZ + 1024) /* largest read frame the table may hold */
#define SLACK 32 /* put_frame may store up to this many bytes past a frame's end */
#define SIGQ_CAP 4096

/* A device at run time: its registers, counters and precomputed template. */
struct tdev {
    const struct testdrv_def *def;
    uint64_t idx_size;  /* the frame header's [u32 dev_idx][u32 data_sz] as one store */
    uint32_t frame_sz;  /* bytes on the stream: header + payload padded to 4 */
    uint32_t nfull;     /* whole words after the counter */
    uint32_t tail_mask; /* bytes of the last, partial word (0: none) */
    uint32_t enable, message, rate;
    uint64_t counter;   /* next frame counter = frames emitted */
    uint64_t wframes;
    uint32_t nvec;      /* 32-byte chunks covering the words after the counter */
    uint32_t *tmpl;     /* T(dev_idx, i) for every word after the counter, zero-padded to nvec chunks */
};

/* Eight payload words at once: one AVX2 operation where the CPU has it
 * (read_data_avx2), two SSE2 / NEON ones or plain C elsewhere. */
typedef uint32_t vec8 __attribute__((vector_size(32)));
#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_AVX2() __builtin_cpu_supports("avx2")
#else
#define HAVE_AVX2() 0
#endif

struct tdrv {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int initialized;
    uint32_t timeout_ms;

    struct tdev dev[MAX_DEV];
    unsigned ndev;
    uint32_t hubreg[MAX_HUB][ONIX_HUB_DELAYNS + 1]; /* hub manager registers by hub number */

    /* Configuration registers. */
    uint32_t reg_dev, reg_addr, reg_value, reg_rw, trig, running, hwaddress, custom0;
    uint32_t hold_ack;
    uint32_t held_dev, held_addr, held_value, held_rw; /* access snapshot while TRIG is held */

    /* Data stream: weighted round-robin schedule and the frame straddling reads. */
    struct tdev *sched[MAX_DEV * ONITEST_MAX_RATE];
    unsigned nsched, sched_pos;
    uint64_t acq; /* acquisition counter: the next frame's time */
    uint8_t stage[MAX_FRAME + SLACK];
    uint32_t stage_len, stage_off;

    /* Signal stream: encoded packets waiting for the host. */
    uint8_t sigq[SIGQ_CAP];
    size_t sig_head, sig_tail;

    onitest_stats_t stats;
    int avx2; /* the CPU runs read_data_avx2 */
};

static const oni_driver_info_t info = {"test", 1, 0, 0, NULL};

static const oni_driver_info_t *drv_info(void) { return &info; }

static struct tdev *find_dev(struct tdrv *d, uint32_t idx)
{
    for (unsigned i = 0; i < d->ndev; i++)
        if (d->dev[i].def->idx == idx)
            return &d->dev[i];
    return NULL;
}

/* Rebuild the round-robin schedule: round r holds every enabled readable
 * device whose RATE exceeds r, in table order. */
static void build_schedule(struct tdrv *d)
{
    d->nsched = 0;
    for (uint32_t r = 0; r < ONITEST_MAX_RATE; r++)
        for (unsigned i = 0; i < d->ndev; i++) {
            struct tdev *v = &d->dev[i];
            if (v->def->read_size && v->enable && v->rate > r)
                d->sched[d->nsched++] = v;
        }
    if (d->sched_pos >= d->nsched)
        d->sched_pos = 0;
}

/* RESET: registers and counters to their reset values, queues emptied. */
static void reset_state(struct tdrv *d)
{
    for (unsigned i = 0; i < d->ndev; i++) {
        struct tdev *v = &d->dev[i];
        v->enable = 1;
        v->message = 0;
        v->rate = v->def->rate;
        v->counter = 0;
        v->wframes = 0;
    }
    for (unsigned h = 0; h < testdrv_nhub; h++) {
        const struct testdrv_hub *hub = &testdrv_hubs[h];
        uint32_t *r = d->hubreg[hub->hub];
        r[ONIX_HUB_HARDWAREID] = hub->hardware_id;
        r[ONIX_HUB_HARDWAREREV] = hub->hardware_rev;
        r[ONIX_HUB_FIRMWAREVER] = hub->firmware_ver;
        r[HUB_NOREG] = 0;
        r[ONIX_HUB_CLKRATEHZ] = hub->clk_hz;
        r[ONIX_HUB_DELAYNS] = hub->delay_ns;
    }
    d->running = 0;
    d->trig = 0;
    d->acq = 0;
    d->sched_pos = 0;
    d->stage_len = d->stage_off = 0;
    d->sig_head = d->sig_tail = 0;
    memset(&d->stats, 0, sizeof d->stats);
    build_schedule(d);
}

/* Queue one signal packet; a host that never reads loses the newest packets, counted. */
static void sig_push(struct tdrv *d, uint32_t type, const void *payload, size_t n)
{
    uint8_t pkt[ONI_COBSMAXPACKET + 1];
    int len = oni_signal_pack(type, payload, n, pkt, sizeof pkt);
    if (len < 0) {
        d->stats.signal_dropped++;
        return;
    }
    if (d->sig_tail + (size_t)len > SIGQ_CAP && d->sig_head) {
        memmove(d->sigq, d->sigq + d->sig_head, d->sig_tail - d->sig_head);
        d->sig_tail -= d->sig_head;
        d->sig_head = 0;
    }
    if (d->sig_tail + (size_t)len > SIGQ_CAP) {
        d->stats.signal_dropped++;
        return;
    }
    memcpy(d->sigq + d->sig_tail, pkt, (size_t)len);
    d->sig_tail += (size_t)len;
    pthread_cond_broadcast(&d->wake);
}

static void emit_device_table(struct tdrv *d)
{
    uint32_t n = d->ndev;
    sig_push(d, ONI_SIG_DEVICETABLEACK, &n, sizeof n);
    for (unsigned i = 0; i < d->ndev; i++) {
        const struct testdrv_def *def = d->dev[i].def;
        oni_device_t e = {def->idx, def->id, def->version, def->read_size, def->write_size};
        sig_push(d, ONI_SIG_DEVICEINST, &e, sizeof e);
    }
}

static int is_hubmgr(const struct tdev *v) { return (v->def->idx & 0xFF) == ONIX_HUB_DEV_IDX; }

/* One register access; returns 1 for ACK, 0 for NACK. */
static int hubmgr_access(struct tdrv *d, struct tdev *v, uint32_t addr, int write, uint32_t *val)
{
    uint32_t *r = d->hubreg[v->def->idx >> 8]; /* < MAX_HUB: table_fits */
    if (addr > ONIX_HUB_DELAYNS || addr == HUB_NOREG)
        return 0;
    if (write) {
        if (addr != ONIX_HUB_DELAYNS)
            return 0; /* identity and clock registers are read-only */
        r[addr] = *val;
        return 1;
    }
    *val = r[addr];
    return 1;
}

static int reg_access(struct tdrv *d, uint32_t dev_idx, uint32_t addr, int write, uint32_t *val)
{
    struct tdev *v = find_dev(d, dev_idx);
    if (!v)
        return 0;
    if (is_hubmgr(v))
        return hubmgr_access(d, v, addr, write, val);
    if (write) {
        switch (addr) {
        case ONITEST_REG_ENABLE: v->enable = *val; build_schedule(d); return 1;
        case ONITEST_REG_MESSAGE: v->message = *val; return 1;
        case ONITEST_REG_RATE:
            if (*val < 1 || *val > ONITEST_MAX_RATE)
                return 0;
            v->rate = *val;
            build_schedule(d);
            return 1;
        default: return 0; /* read-only or unknown */
        }
    }
    switch (addr) {
    case ONITEST_REG_ENABLE: *val = v->enable; return 1;
    case ONITEST_REG_MESSAGE: *val = v->message; return 1;
    case ONITEST_REG_RATE: *val = v->rate; return 1;
    case ONITEST_REG_READSIZE: *val = v->def->read_size; return 1;
    case ONITEST_REG_WRITESIZE: *val = v->def->write_size; return 1;
    case ONITEST_REG_FRAMES_LO: *val = (uint32_t)v->counter; return 1;
    case ONITEST_REG_FRAMES_HI: *val = (uint32_t)(v->counter >> 32); return 1;
    case ONITEST_REG_WFRAMES: *val = (uint32_t)v->wframes; return 1;
    default: return 0;
    }
}

/* Carry out the triggered access and queue its answer; TRIG drops to 0. */
static void complete_access(struct tdrv *d, uint32_t dev_idx, uint32_t addr, uint32_t value, uint32_t rw)
{
    int write = rw != 0;
    int ack = reg_access(d, dev_idx, addr, write, &value);
    if (ack && !write)
        d->reg_value = value;
    d->trig = 0;
    sig_push(d, write ? (ack ? ONI_SIG_CONFIGWACK : ONI_SIG_CONFIGWNACK)
                      : (ack ? ONI_SIG_CONFIGRACK : ONI_SIG_CONFIGRNACK),
             NULL, 0);
}

static oni_driver_ctx drv_create(void)
{
    struct tdrv *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&d->wake, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&d->lock, NULL);
    d->timeout_ms = ONI_DEFAULT_TIMEOUTMS;
    d->avx2 = HAVE_AVX2();
    return d;
}

static int drv_destroy(oni_driver_ctx ctx)
{
    struct tdrv *d = ctx;
    if (!d)
        return ONI_EINVALARG;
    for (unsigned i = 0; i < d->ndev; i++)
        free(d->dev[i].tmpl);
    pthread_cond_destroy(&d->wake);
    pthread_mutex_destroy(&d->lock);
    free(d);
    return ONI_ESUCCESS;
}

/* Precompute a device's header word and payload template. */
static int setup_dev(struct tdev *v, const struct testdrv_def *def)
{
    v->def = def;
    if (def->read_size && (def->read_size < 8 || ONI_RFRAMEHEADERSZ + oni_pad4(def->read_size) > MAX_FRAME))
        return ONI_EBADDEVTABLE; /* the table must fit the counter and the stage */
    v->idx_size = def->idx | (uint64_t)def->read_size << 32;
    if (!def->read_size)
        return ONI_ESUCCESS;
    uint32_t after = def->read_size - 8;
    v->frame_sz = ONI_RFRAMEHEADERSZ + (uint32_t)oni_pad4(def->read_size);
    v->nfull = after / 4;
    v->tail_mask = after % 4 ? (1u << (8 * (after % 4))) - 1 : 0;
    v->nvec = (v->nfull + (v->tail_mask != 0) + 7) / 8;
    v->tmpl = calloc(8 * (size_t)v->nvec + 8, sizeof(uint32_t));
    if (!v->tmpl)
        return ONI_EBADALLOC;
    for (uint32_t i = 0; i <= v->nfull; i++)
        v->tmpl[i] = testdrv_word(def->idx, i);
    return ONI_ESUCCESS;
}

/* Whether testdrv_table and testdrv_hubs fit this driver's arrays: a table
 * grown past them is refused at init instead of overrunning them. */
static int table_fits(void)
{
    if (testdrv_ndev > MAX_DEV)
        return 0;
    for (unsigned i = 0; i < testdrv_ndev; i++)
        if ((testdrv_table[i].idx >> 8) >= MAX_HUB)
            return 0;
    for (unsigned h = 0; h < testdrv_nhub; h++)
        if (testdrv_hubs[h].hub >= MAX_HUB)
            return 0;
    return 1;
}

static int drv_init(oni_driver_ctx ctx, int host_idx)
{
    struct tdrv *d = ctx;
    if (!d)
        return ONI_EINVALARG;
    if (host_idx != -1 && host_idx != 0)
        return ONI_EPATHINVALID; /* one emulated host only */
    pthread_mutex_lock(&d->lock);
    int rc = d->initialized ? ONI_EINVALSTATE : table_fits() ? ONI_ESUCCESS : ONI_EBADDEVTABLE;
    for (unsigned i = 0; !rc && i < testdrv_ndev; i++) {
        rc = setup_dev(&d->dev[i], &testdrv_table[i]);
        d->ndev = i + 1;
    }
    if (!rc) {
        reset_state(d);
        d->initialized = 1;
    } else if (rc != ONI_EINVALSTATE) {
        for (unsigned i = 0; i < d->ndev; i++) /* a failed init leaves nothing behind */
            free(d->dev[i].tmpl);
        memset(d->dev, 0, sizeof d->dev);
        d->ndev = 0;
    }
    pthread_mutex_unlock(&d->lock);
    return rc;
}

/* Write one whole frame of v at p, which must have frame_sz + SLACK bytes
 * of room: the payload words are keyed 32 bytes at a time, so up to 28
 * bytes past the frame get template bytes that the next frame overwrites.
 * The hot path: a few stores per 32 bytes. */
static inline __attribute__((always_inline)) void put_frame(struct tdev *v, uint64_t t, uint8_t *p)
{
    uint64_t c = v->counter++;
    memcpy(p, &t, 8);
    memcpy(p + 8, &v->idx_size, 8);
    memcpy(p + 16, &c, 8);
    uint32_t key = testdrv_key(c);
    vec8 kv = {key, key, key, key, key, key, key, key};
    const uint32_t *tm = v->tmpl;
    uint8_t *q = p + 24;
    for (uint32_t n = v->nvec; n; n--, tm += 8, q += 32) {
        vec8 w;
        memcpy(&w, tm, 32);
        w ^= kv;
        memcpy(q, &w, 32);
    }
    if (v->tail_mask) { /* the last word's unused bytes are padding: zeros */
        uint32_t w = (v->tmpl[v->nfull] ^ key) & v->tail_mask;
        memcpy(p + 24 + 4 * v->nfull, &w, 4);
    }
}

/* Wait until pred(d) holds or ms pass; lock held. */
static int wait_for(struct tdrv *d, int (*pred)(const struct tdrv *), uint32_t ms)
{
    if (pred(d))
        return ONI_ESUCCESS;
    struct timespec until;
    oni_timespec_at(oni_ms_from_now(ms), &until);
    while (!pred(d))
        if (pthread_cond_timedwait(&d->wake, &d->lock, &until) == ETIMEDOUT)
            return pred(d) ? ONI_ESUCCESS : ONI_ETIMEOUT;
    return ONI_ESUCCESS;
}

static int can_emit(const struct tdrv *d) { return d->running && (d->nsched || d->stage_off < d->stage_len); }
static int sig_pending(const struct tdrv *d) { return d->sig_tail > d->sig_head; }

/* Fill exactly size bytes of the data stream; frames straddle calls. */
static inline __attribute__((always_inline)) void read_data_body(struct tdrv *d, uint8_t *dst,
                                                                  size_t size)
{
    size_t off = 0;
    if (d->stage_off < d->stage_len) {
        size_t n = d->stage_len - d->stage_off;
        if (n > size)
            n = size;
        memcpy(dst, d->stage + d->stage_off, n);
        d->stage_off += (uint32_t)n;
        off = n;
    }
    /* The loop keeps the acquisition counter, the schedule position and the
     * frame count in registers. */
    uint64_t acq = d->acq, frames = 0;
    unsigned pos = d->sched_pos;
    while (off < size) {
        struct tdev *v = d->sched[pos];
        if (++pos == d->nsched)
            pos = 0;
        if (size - off >= v->frame_sz + SLACK) {
            put_frame(v, acq++, dst + off);
            off += v->frame_sz;
        } else { /* the last frame(s) of the read go through the stage */
            put_frame(v, acq++, d->stage);
            size_t n = size - off < v->frame_sz ? size - off : v->frame_sz;
            memcpy(dst + off, d->stage, n);
            off += n;
            if (n < v->frame_sz) {
                d->stage_len = v->frame_sz;
                d->stage_off = (uint32_t)n;
            }
        }
        frames++;
    }
    d->acq = acq;
    d->sched_pos = pos;
    d->stats.frames += frames;
    d->stats.bytes += size;
}

static void read_data_plain(struct tdrv *d, uint8_t *dst, size_t size)
{
    read_data_body(d, dst, size);
}

#if defined(__x86_64__) && defined(__GNUC__)
/* The same loop compiled for AVX2, chosen at run time (no ifunc: sanitizers
 * and dlopen are happy with a plain branch). */
__attribute__((target("avx2"))) static void read_data_avx2(struct tdrv *d, uint8_t *dst, size_t size)
{
    read_data_body(d, dst, size);
}
#else
#define read_data_avx2 read_data_plain
#endif

static void read_data(struct tdrv *d, uint8_t *dst, size_t size)
{
    if (d->avx2)
        read_data_avx2(d, dst, size);
    else
        read_data_plain(d, dst, size);
}

static int drv_read_stream(oni_driver_ctx ctx, oni_read_stream_t stream, void *data, size_t size)
{
    struct tdrv *d = ctx;
    if (!d || (!data && size))
        return ONI_EINVALARG;
    if (size > INT_MAX)
        return ONI_EINVALARG;
    if (stream != ONI_READ_STREAM_DATA && stream != ONI_READ_STREAM_SIGNAL)
        return ONI_EINVALARG;
    pthread_mutex_lock(&d->lock);
    int rc;
    if (!d->initialized) {
        rc = ONI_EINVALSTATE;
    } else if (!size) {
        rc = 0;
    } else if (stream == ONI_READ_STREAM_DATA) {
        rc = wait_for(d, can_emit, d->timeout_ms < ONI_READ_SLICE_MS ? d->timeout_ms : ONI_READ_SLICE_MS);
        if (rc == ONI_ETIMEOUT)
            rc = 0;
        else if (!rc) {
            /* A stage left over from a schedule that is now empty still drains. */
            if (!d->nsched && d->stage_len - d->stage_off < size)
                size = d->stage_len - d->stage_off;
            read_data(d, data, size);
            rc = (int)size;
        }
    } else {
        rc = wait_for(d, sig_pending, d->timeout_ms);
        if (!rc) {
            size_t n = d->sig_tail - d->sig_head;
            if (n > size)
                n = size;
            memcpy(data, d->sigq + d->sig_head, n);
            d->sig_head += n;
            rc = (int)n;
        }
    }
    pthread_mutex_unlock(&d->lock);
    return rc;
}

/* Parse write frames [u32 dev_idx][u32 words][payload]. Frames before a
 * malformed one are taken, as a card would have consumed them. */
static int write_frames(struct tdrv *d, const uint8_t *p, size_t n)
{
    size_t off = 0;
    while (off < n) {
        uint32_t hdr[2];
        if (n - off < ONI_WFRAMEHEADERSZ)
            goto bad;
        memcpy(hdr, p + off, sizeof hdr);
        struct tdev *v = find_dev(d, hdr[0]);
        uint64_t bytes = (uint64_t)hdr[1] * 4;
        if (!v || !v->def->write_size || !bytes || bytes % v->def->write_size ||
            bytes > n - off - ONI_WFRAMEHEADERSZ)
            goto bad;
        v->wframes++;
        d->stats.wframes_accepted++;
        off += ONI_WFRAMEHEADERSZ + (size_t)bytes;
    }
    return (int)n;
bad:
    d->stats.wframes_rejected++;
    return ONI_EBADFRAME;
}

static int drv_write_stream(oni_driver_ctx ctx, oni_write_stream_t stream, const char *data, size_t size)
{
    struct tdrv *d = ctx;
    if (!d || !data || !size || size > INT_MAX || stream != ONI_WRITE_STREAM_DATA)
        return ONI_EINVALARG;
    pthread_mutex_lock(&d->lock);
    int rc = d->initialized ? write_frames(d, (const uint8_t *)data, size) : ONI_EINVALSTATE;
    pthread_mutex_unlock(&d->lock);
    return rc;
}

static int read_config_locked(struct tdrv *d, oni_config_t cfg, oni_reg_val_t *value)
{
    switch (cfg) {
    case ONI_CONFIG_DEV_IDX: *value = d->reg_dev; break;
    case ONI_CONFIG_REG_ADDR: *value = d->reg_addr; break;
    case ONI_CONFIG_REG_VALUE: *value = d->reg_value; break;
    case ONI_CONFIG_RW: *value = d->reg_rw; break;
    case ONI_CONFIG_TRIG: *value = d->trig; break;
    case ONI_CONFIG_RUNNING: *value = d->running; break;
    case ONI_CONFIG_RESET: *value = 0; break;
    case ONI_CONFIG_SYSCLKHZ: *value = TESTDRV_SYSCLKHZ; break;
    case ONI_CONFIG_ACQCLKHZ: *value = TESTDRV_ACQCLKHZ; break;
    case ONI_CONFIG_RESETACQCOUNTER: *value = 0; break;
    case ONI_CONFIG_HWADDRESS: *value = d->hwaddress; break;
    case ONI_CONFIG_CUSTOMBEGIN: *value = d->custom0; break;
    default: return ONI_EINVALOPT;
    }
    return ONI_ESUCCESS;
}

static int drv_read_config(oni_driver_ctx ctx, oni_config_t cfg, oni_reg_val_t *value)
{
    struct tdrv *d = ctx;
    if (!d || !value)
        return ONI_EINVALARG;
    pthread_mutex_lock(&d->lock);
    int rc = d->initialized ? read_config_locked(d, cfg, value) : ONI_EINVALSTATE;
    pthread_mutex_unlock(&d->lock);
    return rc;
}

static int trigger(struct tdrv *d, uint32_t value)
{
    if (!value)
        return ONI_ESUCCESS;
    if (d->trig)
        return ONI_ERETRIG;
    if (d->hold_ack) {
        d->trig = 1;
        d->held_dev = d->reg_dev;
        d->held_addr = d->reg_addr;
        d->held_value = d->reg_value;
        d->held_rw = d->reg_rw;
        return ONI_ESUCCESS;
    }
    complete_access(d, d->reg_dev, d->reg_addr, d->reg_value, d->reg_rw);
    return ONI_ESUCCESS;
}

static int write_config_locked(struct tdrv *d, oni_config_t cfg, oni_reg_val_t value)
{
    switch (cfg) {
    case ONI_CONFIG_DEV_IDX: d->reg_dev = value; break;
    case ONI_CONFIG_REG_ADDR: d->reg_addr = value; break;
    case ONI_CONFIG_REG_VALUE: d->reg_value = value; break;
    case ONI_CONFIG_RW: d->reg_rw = value; break;
    case ONI_CONFIG_TRIG: return trigger(d, value);
    case ONI_CONFIG_RUNNING:
        /* A frame half delivered is dropped: the next read starts on a frame. */
        d->running = value != 0;
        d->stage_len = d->stage_off = 0;
        pthread_cond_broadcast(&d->wake);
        break;
    case ONI_CONFIG_RESET:
        if (value) {
            reset_state(d);
            emit_device_table(d);
        }
        break;
    case ONI_CONFIG_RESETACQCOUNTER:
        if (value) {
            d->acq = 0;
            if (value == 2) {
                d->running = 1;
                pthread_cond_broadcast(&d->wake);
            }
        }
        break;
    case ONI_CONFIG_HWADDRESS: d->hwaddress = value; break;
    case ONI_CONFIG_CUSTOMBEGIN: d->custom0 = value; break;
    case ONI_CONFIG_SYSCLKHZ:
    case ONI_CONFIG_ACQCLKHZ: return ONI_EREADONLY;
    default: return ONI_EINVALOPT;
    }
    return ONI_ESUCCESS;
}

static int drv_write_config(oni_driver_ctx ctx, oni_config_t cfg, oni_reg_val_t value)
{
    struct tdrv *d = ctx;
    if (!d)
        return ONI_EINVALARG;
    pthread_mutex_lock(&d->lock);
    int rc = d->initialized ? write_config_locked(d, cfg, value) : ONI_EINVALSTATE;
    pthread_mutex_unlock(&d->lock);
    return rc;
}

static int drv_set_opt_callback(oni_driver_ctx ctx, int opt, const void *value, size_t len)
{
    struct tdrv *d = ctx;
    if (!d)
        return ONI_EINVALARG;
    if (opt != ONI_OPT_TIMEOUTMS)
        return ONI_ESUCCESS; /* nothing else concerns a driver with no hardware */
    uint32_t ms;
    if (oni_opt_u32(value, len, &ms) || !ms)
        return ONI_EINVALARG;
    pthread_mutex_lock(&d->lock);
    d->timeout_ms = ms;
    pthread_mutex_unlock(&d->lock);
    return ONI_ESUCCESS;
}

static int drv_set_opt(oni_driver_ctx ctx, int opt, const void *value, size_t len)
{
    struct tdrv *d = ctx;
    if (!d)
        return ONI_EINVALARG;
    if (opt == ONITEST_OPT_STATS)
        return ONI_EREADONLY; /* as the emu driver answers for its statistics */
    if (opt != ONITEST_OPT_HOLD_ACK)
        return ONI_EINVALOPT;
    uint32_t hold;
    if (oni_opt_u32(value, len, &hold))
        return ONI_EINVALARG;
    pthread_mutex_lock(&d->lock);
    d->hold_ack = hold;
    if (!hold && d->trig)
        complete_access(d, d->held_dev, d->held_addr, d->held_value, d->held_rw);
    pthread_mutex_unlock(&d->lock);
    return ONI_ESUCCESS;
}

static int drv_get_opt(oni_driver_ctx ctx, int opt, void *value, size_t *len)
{
    struct tdrv *d = ctx;
    if (!d || !value || !len)
        return ONI_EINVALARG;
    size_t need;
    if (opt == ONITEST_OPT_STATS)
        need = sizeof(onitest_stats_t);
    else if (opt == ONITEST_OPT_HOLD_ACK)
        need = sizeof(uint32_t);
    else
        return ONI_EINVALOPT;
    if (*len < need)
        return oni_opt_short(len, need);
    pthread_mutex_lock(&d->lock);
    memcpy(value, opt == ONITEST_OPT_STATS ? (const void *)&d->stats : (const void *)&d->hold_ack, need);
    pthread_mutex_unlock(&d->lock);
    *len = need;
    return ONI_ESUCCESS;
}

const struct oni_driver onidrv_test = {
    .name = "test",
    .create_ctx = drv_create,
    .destroy_ctx = drv_destroy,
    .init = drv_init,
    .read_stream = drv_read_stream,
    .write_stream = drv_write_stream,
    .read_config = drv_read_config,
    .write_config = drv_write_config,
    .set_opt_callback = drv_set_opt_callback,
    .set_opt = drv_set_opt,
    .get_opt = drv_get_opt,
    .info = drv_info,
    .concurrent_opt = NULL, /* its options go one at a time, under the config lock */
};
