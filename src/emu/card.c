/* card.c - the emulated ONIX host card behind emu.h: configuration
 * registers, register files, the signal stream, the read streams (with the
 * fast-mode generator and the link model), the write streams, statistics and
 * ground truth. docs/emulator.md describes the behaviour, docs/devices.md the
 * devices and registers. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "card.h"
#include "headstage.h"
#include "neural.h"
#include "oni.h"
#include "oni/util/wire.h"
#include "oni/util/cobs.h"
#include "oni/util/clock.h"



void emu_card_lock(struct emu_card *c)
{
    atomic_fetch_add_explicit(&c->lock_waiters, 1, memory_order_relaxed);
    pthread_mutex_lock(&c->lock);
    atomic_fetch_sub_explicit(&c->lock_waiters, 1, memory_order_relaxed);
}

void emu_card_yield(struct emu_card *c)
{
    pthread_mutex_unlock(&c->lock);
    /* A woken waiter needs microseconds to run; give it up to ~1 ms. */
    for (int i = 0; i < 1000 && atomic_load_explicit(&c->lock_waiters, memory_order_relaxed); i++)
        sched_yield();
    pthread_mutex_lock(&c->lock);
}

int emu_card_sleep(struct emu_card *c, struct emu_sleeper *s, pthread_cond_t *cv, const struct timespec *ts,
                   uint64_t deadline)
{
    s->asleep++;
    s->deadline = deadline;
    int rc = pthread_cond_timedwait(cv, &c->lock, ts);
    s->asleep--;
    if (s->counted) {
        s->counted--;
        atomic_fetch_sub_explicit(&c->lock_waiters, 1, memory_order_relaxed);
    }
    return rc;
}

void emu_card_rouse(struct emu_card *c, struct emu_sleeper *s, int woke)
{
    if (s->asleep > s->counted && (woke || oni_now_ns() >= s->deadline)) {
        atomic_fetch_add_explicit(&c->lock_waiters, s->asleep - s->counted, memory_order_relaxed);
        s->counted = s->asleep;
    }
}

uint64_t emu_card_now(struct emu_card *c)
{
    if (c->fast)
        return c->gen_now;
    return (uint64_t)((unsigned __int128)(oni_now_ns() - c->t0_ns) * EMU_ACQ_HZ / 1000000000u);
}

static struct emu_dev *find_dev(struct emu_card *c, uint32_t idx)
{
    for (int i = 0; i < c->ndev; i++)
        if (c->dev[i].desc.idx == idx)
            return &c->dev[i];
    return NULL;
}

/* The device at idx if it is in the device table now. */
static struct emu_dev *find_present(struct emu_card *c, uint32_t idx)
{
    struct emu_dev *d = find_dev(c, idx);
    return d && !d->absent ? d : NULL;
}

/* Does hub h have a device in the table now? (Hub 0, the host's, always.) */
static int hub_present(const struct emu_card *c, int h)
{
    if (h == 0)
        return 1;
    for (int i = 0; i < c->ndev; i++)
        if ((int)(c->dev[i].desc.idx >> 8) == h && !c->dev[i].absent)
            return 1;
    return 0;
}

/* --- signal stream ---------------------------------------------------------- */

static void sig_push(struct emu_card *c, uint32_t type, const void *payload, size_t n)
{
    uint8_t pkt[ONI_COBSMAXPACKET + 1];
    int len = oni_signal_pack(type, payload, n, pkt, sizeof pkt);
    if (len < 0 || EMU_SIGQ_CAP - c->sig_fill < (size_t)len) {
        c->sig_dropped++; /* the host is not reading its signal stream */
        return;
    }
    size_t wr = (c->sig_rd + c->sig_fill) % EMU_SIGQ_CAP;
    size_t first = EMU_SIGQ_CAP - wr < (size_t)len ? EMU_SIGQ_CAP - wr : (size_t)len;
    memcpy(c->sigq + wr, pkt, first);
    memcpy(c->sigq, pkt + first, (size_t)len - first);
    c->sig_fill += (size_t)len;
    pthread_cond_signal(&c->sig_cond);
}

/* The device table as RESET sends it: the devices present, then a hub
 * manager entry for each hub that has one of them. */
static void push_table(struct emu_card *c)
{
    uint32_t n = 0;
    for (int i = 0; i < c->ndev; i++)
        n += !c->dev[i].absent;
    for (int h = 0; h < c->nhub; h++)
        n += (uint32_t)hub_present(c, h);
    sig_push(c, ONI_SIG_DEVICETABLEACK, &n, sizeof n);
    for (int i = 0; i < c->ndev; i++)
        if (!c->dev[i].absent)
            sig_push(c, ONI_SIG_DEVICEINST, &c->dev[i].desc, sizeof(oni_device_t));
    for (int h = 0; h < c->nhub; h++) {
        oni_device_t m = {((uint32_t)h << 8) | ONIX_HUB_DEV_IDX, ONIX_ONIGPU_HUBMGR, 1, 0, 0};
        if (hub_present(c, h))
            sig_push(c, ONI_SIG_DEVICEINST, &m, sizeof m);
    }
}

static int sig_read(struct emu_card *c, uint8_t *dst, size_t n, uint64_t deadline)
{
    struct timespec ts;
    oni_timespec_at(deadline, &ts);
    emu_card_lock(c);
    while (!c->sig_fill) {
        if (oni_now_ns() >= deadline || emu_card_sleep(c, &c->sig_sleeper, &c->sig_cond, &ts, deadline) == ETIMEDOUT) {
            if (c->sig_fill)
                break;
            pthread_mutex_unlock(&c->lock);
            return ONI_ETIMEOUT;
        }
    }
    if (n > c->sig_fill)
        n = c->sig_fill;
    if (n > INT_MAX)
        n = INT_MAX;
    for (size_t i = 0; i < n; i++)
        dst[i] = c->sigq[(c->sig_rd + i) % EMU_SIGQ_CAP];
    c->sig_rd = (c->sig_rd + n) % EMU_SIGQ_CAP;
    c->sig_fill -= n;
    pthread_mutex_unlock(&c->lock);
    return (int)n;
}

/* --- register files ---------------------------------------------------------- */

static int hub_access(struct emu_card *c, uint32_t hub, uint32_t addr, int write, uint32_t *v)
{
    if (hub >= (uint32_t)c->nhub || !hub_present(c, (int)hub))
        return 0;
    struct emu_hub *h = &c->hub[hub];
    if (write) {
        if (addr != ONIX_HUB_DELAYNS)
            return 0;
        h->delay_ns = *v;
        return 1;
    }
    switch (addr) {
    case ONIX_HUB_HARDWAREID: *v = h->kind; return 1;
    case ONIX_HUB_HARDWAREREV: *v = h->rev; return 1;
    case ONIX_HUB_FIRMWAREVER: *v = h->fw; return 1;
    case ONIX_HUB_CLKRATEHZ: *v = h->clk_hz; return 1;
    case ONIX_HUB_DELAYNS: *v = h->delay_ns; return 1;
    default: return 0;
    }
}

static int common_read(struct emu_dev *d, uint32_t addr, uint32_t *v)
{
    if (addr == d->enable_reg) {
        *v = d->enable;
        return 1;
    }
    switch (addr) {
    case EMU_REG_ROUTE: *v = d->route; return d->desc.read_size > 0;
    case EMU_REG_READSIZE: *v = d->desc.read_size; return 1;
    case EMU_REG_WRITESIZE: *v = d->desc.write_size; return 1;
    case EMU_REG_FRAMES_LO: *v = (uint32_t)d->frames; return 1;
    case EMU_REG_FRAMES_HI: *v = (uint32_t)(d->frames >> 32); return 1;
    case EMU_REG_DROPPED_LO: *v = (uint32_t)d->dropped; return 1;
    case EMU_REG_DROPPED_HI: *v = (uint32_t)(d->dropped >> 32); return 1;
    case EMU_REG_WFRAMES: *v = (uint32_t)d->wframes; return 1;
    case EMU_REG_RATE_HZ: *v = (uint32_t)((d->rate_mhz + 500) / 1000); return 1;
    }
    return d->type->reg_read ? d->type->reg_read(d, addr, v) : 0;
}

static int common_write(struct emu_card *c, struct emu_dev *d, uint32_t addr, uint32_t v)
{
    if (addr == d->enable_reg) {
        if (v > 1)
            return 0;
        if (v && !d->enable) { /* its schedule resumes now, not in the past */
            uint64_t now = c->running ? emu_card_now(c) : 0;
            if (d->next_due < now)
                d->next_due = now;
            d->rem = 0;
        }
        d->enable = v;
        pthread_cond_signal(&c->gen_cond);
        return 1;
    }
    switch (addr) {
    case EMU_REG_ROUTE:
        if (!d->desc.read_size || v > 1 || (v && !c->gpustream))
            return 0; /* a card without the GPU stream has one read stream */
        d->route = v;
        return 1;
    case EMU_REG_RATE_HZ:
        break; /* writable only where the device says so */
    default:
        if (addr >= EMU_REG_BASE && addr < EMU_REG_DEVICE)
            return 0; /* read-only */
    }
    int ack = d->type->reg_write ? d->type->reg_write(d, addr, v) : 0;
    if (ack)
        pthread_cond_signal(&c->gen_cond); /* a new rate changes the next due time */
    return ack;
}

/* Carry out the access the configuration registers describe; 1 = ACK. */
static int reg_access(struct emu_card *c, int write, uint32_t *v)
{
    if ((c->reg_dev & 0xFF) == ONIX_HUB_DEV_IDX && c->reg_dev < ((uint32_t)EMU_MAX_HUB << 8))
        return hub_access(c, c->reg_dev >> 8, c->reg_addr, write, v);
    struct emu_dev *d = find_present(c, c->reg_dev);
    if (!d)
        return 0;
    return write ? common_write(c, d, c->reg_addr, *v) : common_read(d, c->reg_addr, v);
}

/* --- configuration registers ---------------------------------------------- */

int emu_card_read_config(struct emu_card *c, oni_config_t reg, uint32_t *value)
{
    if (!c || !value)
        return ONI_EINVALARG;
    int rc = 0;
    emu_card_lock(c);
    switch (reg) {
    case ONI_CONFIG_DEV_IDX: *value = c->reg_dev; break;
    case ONI_CONFIG_REG_ADDR: *value = c->reg_addr; break;
    case ONI_CONFIG_REG_VALUE: *value = c->reg_value; break;
    case ONI_CONFIG_RW: *value = c->reg_rw; break;
    case ONI_CONFIG_TRIG: *value = 0; break; /* accesses complete at once */
    case ONI_CONFIG_RUNNING: *value = c->running; break;
    case ONI_CONFIG_RESET: *value = 0; break;
    case ONI_CONFIG_SYSCLKHZ: *value = (uint32_t)EMU_SYS_HZ; break;
    case ONI_CONFIG_ACQCLKHZ: *value = (uint32_t)EMU_ACQ_HZ; break;
    case ONI_CONFIG_RESETACQCOUNTER: *value = 0; break;
    case ONI_CONFIG_HWADDRESS: *value = c->hwaddress; break;
    case EMU_CONFIG_PASSTHROUGH: *value = c->passthrough; break;
    default: rc = ONI_EINVALOPT;
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

/* Start acquisition at time t: the FIFOs start empty, every schedule at t. */
static void start(struct emu_card *c, uint64_t t)
{
    emu_fifo_flush(&c->fifo[0]);
    emu_fifo_flush(&c->fifo[1]);
    emu_gen_restart(c, t);
    emu_port_start(c);
    c->lag_now = c->lag_max = 0;
    c->running = 1;
    pthread_cond_signal(&c->gen_cond);
}

static void reset_counter(struct emu_card *c)
{
    emu_gen_flush_writes(c); /* their arrival times are on the old clock */
    c->t0_ns = oni_now_ns();
    c->gen_now = 0;
    emu_gen_restart(c, 0);
}

int emu_card_write_config(struct emu_card *c, oni_config_t reg, uint32_t value)
{
    if (!c)
        return ONI_EINVALARG;
    int rc = 0;
    emu_card_lock(c);
    switch (reg) {
    case ONI_CONFIG_DEV_IDX: c->reg_dev = value; break;
    case ONI_CONFIG_REG_ADDR: c->reg_addr = value; break;
    case ONI_CONFIG_REG_VALUE: c->reg_value = value; break;
    case ONI_CONFIG_RW: c->reg_rw = value; break;
    case ONI_CONFIG_TRIG:
        if (value) {
            int write = c->reg_rw != 0;
            uint32_t v = c->reg_value;
            int ack = reg_access(c, write, &v);
            if (ack && !write)
                c->reg_value = v;
            sig_push(c, write ? (ack ? ONI_SIG_CONFIGWACK : ONI_SIG_CONFIGWNACK)
                              : (ack ? ONI_SIG_CONFIGRACK : ONI_SIG_CONFIGRNACK), NULL, 0);
        }
        break;
    case ONI_CONFIG_RUNNING:
        if (value && !c->running) /* fast mode: the clock moves on past the last frame */
            start(c, c->fast && c->gen_now ? c->gen_now + 1 : emu_card_now(c));
        else if (!value && c->running) {
            emu_gen_flush_writes(c);
            c->running = 0;
            /* The host flushes what it buffered of the default stream now
             * (ONI_OPT_RUNNING flushes buffers), so its FIFO goes too: the
             * rest of a frame the host had only part of would start its next
             * read. The GPU stream's blocks stay readable until the next start. */
            emu_fifo_flush(&c->fifo[0]);
            if (c->truth_file)
                fflush(c->truth_file);
        }
        break;
    case ONI_CONFIG_RESET:
        if (value) {
            if (c->running && c->truth_file)
                fflush(c->truth_file); /* acquisition stops: as RUNNING = 0 does */
            emu_gen_flush_writes(c);
            c->running = 0;
            emu_fifo_flush(&c->fifo[0]);
            emu_fifo_flush(&c->fifo[1]);
            for (int i = 0; i < c->ndev; i++)
                if (c->dev[i].type->reset)
                    c->dev[i].type->reset(&c->dev[i]);
            emu_port_reset(c);
            push_table(c);
        }
        break;
    case ONI_CONFIG_RESETACQCOUNTER:
        if (value == 1) {
            reset_counter(c);
        } else if (value == 2) {
            reset_counter(c);
            start(c, 0);
        } else {
            rc = ONI_EINVALARG;
        }
        break;
    case ONI_CONFIG_HWADDRESS: c->hwaddress = value; break;
    case EMU_CONFIG_PASSTHROUGH:
        /* ONIX_OPT_PASSTHROUGH: bit 0 port A, bit 2 port B; in effect from the next RESET */
        if (value & ~EMU_PASSTHROUGH_BITS)
            rc = ONI_EINVALARG;
        else
            c->passthrough = value;
        break;
    case ONI_CONFIG_SYSCLKHZ:
    case ONI_CONFIG_ACQCLKHZ: rc = ONI_EREADONLY; break;
    default: rc = ONI_EINVALOPT;
    }
    if (c->fast && (reg == ONI_CONFIG_RUNNING || reg == ONI_CONFIG_RESETACQCOUNTER || reg == ONI_CONFIG_TRIG)) {
        /* a fast-mode reader waiting for a source generates itself once there is one */
        pthread_cond_broadcast(&c->fifo[0].cond);
        pthread_cond_broadcast(&c->fifo[1].cond);
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

/* --- read streams ---------------------------------------------------------- */

static int fifo_index(enum emu_stream s)
{
    return s == EMU_STREAM_DATA ? 0 : s == EMU_STREAM_GPU ? 1 : -1;
}

/* Does an enabled periodic device feed FIFO k (fast mode: worth generating)? */
static int has_source(struct emu_card *c, int k)
{
    for (int i = 0; i < c->ndev; i++) {
        struct emu_dev *d = &c->dev[i];
        if (d->enable && !d->absent && d->rate_mhz && d->desc.read_size && (d->route ? 1 : 0) == k)
            return 1;
    }
    return 0;
}

/* The most bytes one read of FIFO k can wait for (card lock held). Whole
 * frames fill the FIFO only to within a frame of its end: past cap minus the
 * largest enabled frame routed there (one larger than the FIFO is always
 * dropped and never fills it), not always to cap. */
static size_t read_max(const struct emu_card *c, int k)
{
    size_t cap = c->fifo[k].cap, big = 0;
    for (int i = 0; i < c->ndev; i++) {
        const struct emu_dev *d = &c->dev[i];
        size_t f = ONI_RFRAMEHEADERSZ + oni_pad4(d->desc.read_size);
        if (d->desc.read_size && d->enable && !d->absent && (d->route ? 1 : 0) == k && f <= cap && f > big)
            big = f;
    }
    return big ? cap - big + 4 : cap;
}

size_t emu_card_read_max(struct emu_card *c, enum emu_stream s)
{
    int k = fifo_index(s);
    if (!c || k < 0)
        return 0;
    emu_card_lock(c);
    size_t n = read_max(c, k);
    pthread_mutex_unlock(&c->lock);
    return n;
}

/* Wait (card lock held) up to timeout_ms until FIFO k holds n bytes; in fast
 * mode generate them in this thread. The stream is marked busy on success.
 * The clock is read only when the bytes are not there yet. */
static int wait_fill(struct emu_card *c, int k, size_t n, uint32_t timeout_ms)
{
    struct emu_fifo *f = &c->fifo[k];
    if (n > read_max(c, k))
        return ONI_EINVALARG; /* could never be whole */
    if (f->busy)
        return ONI_EBUSY;
    f->busy = 1;
    if (f->fill >= n) {
        f->held = n;
        return 0;
    }
    uint64_t deadline = oni_ms_from_now(timeout_ms);
    struct timespec ts;
    oni_timespec_at(deadline, &ts);
    while (f->fill < n) {
        if (c->fast && c->running && has_source(c, k)) {
            emu_gen_until(c, UINT64_MAX, EMU_GEN_CHUNK);
            emu_gen_wake(c);
            if (f->fill >= n)
                break;
            if (oni_now_ns() >= deadline)
                break;
            emu_card_yield(c); /* let registers and writers in between chunks */
            continue;
        }
        if (oni_now_ns() >= deadline)
            break;
        if (c->spin && c->running) { /* wake=spin: poll, a few us at a time with the lock free */
            pthread_mutex_unlock(&c->lock);
            uint64_t until = oni_now_ns() + 2000;
            while (oni_now_ns() < until)
                ;
            emu_card_lock(c);
            continue;
        }
        f->want = n;
        if (c->batch_ns && c->running)
            pthread_cond_signal(&c->gen_cond); /* a batching generator wakes for this block's last frame */
        emu_card_sleep(c, &f->sleeper, &f->cond, &ts, deadline);
        f->want = 0;
    }
    if (f->fill < n) {
        f->busy = 0;
        return ONI_ETIMEOUT;
    }
    f->held = n; /* only now: a flush while waiting must not keep bytes that were not there */
    return 0;
}

/* End a hold of FIFO f (card lock held): drop the n bytes read, or, if a
 * flush came meanwhile, the held bytes it kept (they predate it). */
static void let_go(struct emu_fifo *f, uint64_t epoch, size_t n)
{
    emu_fifo_consume(f, f->epoch == epoch ? n : f->held);
    f->held = 0;
    f->busy = 0;
}

int emu_card_read_some(struct emu_card *c, enum emu_stream s, void *dst, size_t n, size_t most,
                       uint32_t timeout_ms)
{
    if (!c || !dst || !n || most < n || most > INT_MAX)
        return ONI_EINVALARG;
    if (s == EMU_STREAM_SIGNAL) {
        uint64_t t0 = oni_now_ns();
        int rc = sig_read(c, dst, most, oni_ms_from_now(timeout_ms));
        if (rc > 0)
            emu_wait_until_ns(t0 + emu_link_ns(&c->link, (size_t)rc));
        return rc;
    }
    int k = fifo_index(s);
    if (k < 0)
        return ONI_EINVALARG;
    struct emu_fifo *f = &c->fifo[k];
    emu_card_lock(c);
    int rc = wait_fill(c, k, n, timeout_ms);
    if (rc) {
        pthread_mutex_unlock(&c->lock);
        return rc;
    }
    n = f->fill < most ? f->fill : most; /* what is there now, up to most */
    f->held = n;
    struct emu_span sp[2];
    emu_fifo_spans(f, n, sp);
    uint64_t epoch = f->taken_epoch = f->epoch;
    pthread_mutex_unlock(&c->lock);
    uint64_t t0 = oni_now_ns(); /* the transfer starts once the data is there */
    memcpy(dst, sp[0].p, sp[0].n);
    memcpy((uint8_t *)dst + sp[0].n, sp[1].p, sp[1].n);
    emu_card_lock(c);
    let_go(f, epoch, n);
    pthread_mutex_unlock(&c->lock);
    emu_wait_until_ns(t0 + emu_link_ns(&c->link, n));
    return (int)n;
}

int emu_card_read(struct emu_card *c, enum emu_stream s, void *dst, size_t n, uint32_t timeout_ms)
{
    return emu_card_read_some(c, s, dst, n, n, timeout_ms);
}

int emu_card_fifo_peek(struct emu_card *c, enum emu_stream s, size_t n, struct emu_span span[2],
                       uint32_t timeout_ms)
{
    int k = fifo_index(s);
    if (!c || !span || !n || k < 0)
        return ONI_EINVALARG;
    emu_card_lock(c);
    int rc = wait_fill(c, k, n, timeout_ms);
    if (!rc) {
        emu_fifo_spans(&c->fifo[k], n, span);
        c->fifo[k].busy = 2; /* held, spans valid, until this consumer consumes */
        c->fifo[k].taken_epoch = c->fifo[k].epoch;
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

uint64_t emu_card_flushes(struct emu_card *c)
{
    emu_card_lock(c);
    uint64_t n = c->fifo[0].epoch; /* every flush empties the default FIFO */
    pthread_mutex_unlock(&c->lock);
    return n;
}

int emu_card_fifo_consume(struct emu_card *c, enum emu_stream s, size_t n)
{
    int k = fifo_index(s);
    if (!c || k < 0)
        return ONI_EINVALARG;
    emu_card_lock(c);
    struct emu_fifo *f = &c->fifo[k];
    int rc = 0;
    if (f->busy == 1) {
        rc = ONI_EBUSY; /* emu_card_read is copying out of this FIFO */
    } else {
        if (n > (f->busy == 2 ? f->held : f->fill)) {
            rc = ONI_EINVALARG; /* more than was peeked: consume nothing, let go */
            n = 0;
        }
        let_go(f, f->busy == 2 ? f->taken_epoch : f->epoch, n);
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

/* --- write streams ----------------------------------------------------------- */

/* The write frame at p + off of the n bytes at p, if it is whole and valid
 * (a writable device of the table, a whole number of its write_size): its
 * device, with its payload's bytes in *bytes; NULL if not. */
static struct emu_dev *wframe_at(struct emu_card *c, const uint8_t *p, size_t n, size_t off, size_t *bytes)
{
    uint32_t idx, words;
    if (n - off < ONI_WFRAMEHEADERSZ)
        return NULL;
    memcpy(&idx, p + off, 4);
    memcpy(&words, p + off + 4, 4);
    uint64_t b = (uint64_t)words * 4;
    struct emu_dev *d = find_present(c, idx);
    if (!d || !d->desc.write_size || !words || b % d->desc.write_size || b > n - off - ONI_WFRAMEHEADERSZ)
        return NULL;
    *bytes = (size_t)b;
    return d;
}

/* Check that src is whole, valid write frames. */
static int check_wframes(struct emu_card *c, const uint8_t *p, size_t n)
{
    size_t bytes;
    for (size_t off = 0; off < n; off += ONI_WFRAMEHEADERSZ + bytes)
        if (!wframe_at(c, p, n, off, &bytes))
            return 0;
    return 1;
}

/* Queue all the write frames at p (checked) for the generator, or none; 1 if queued. */
static int defer_wframes(struct emu_card *c, const uint8_t *p, size_t n, uint64_t now)
{
    size_t bytes, frames = 0;
    struct emu_dev *d;
    for (size_t off = 0; off < n; off += ONI_WFRAMEHEADERSZ + bytes, frames++)
        if (!wframe_at(c, p, n, off, &bytes) || bytes > EMU_WPEND_BYTES)
            return 0;
    if (frames > EMU_WPEND_MAX - c->wpend_n)
        return 0;
    for (size_t off = 0; off < n && (d = wframe_at(c, p, n, off, &bytes)); off += ONI_WFRAMEHEADERSZ + bytes) {
        d->wframes++;
        emu_gen_defer_write(c, d, p + off + ONI_WFRAMEHEADERSZ, bytes, now);
    }
    return 1;
}

/* Realtime, card lock held: write frames take effect at their arrival `now`,
 * after every frame due by then, so an echo never overtakes a frame due
 * before it and each read stream stays in time order. Generate what is due;
 * a generator thread that fell behind (a starved machine, a sanitizer) may
 * owe more than one chunk: then the frames are queued for the generator to
 * apply when it gets there (returns 1), as a card's write does not wait for
 * its read side. While the queue is full, catch up a chunk per hold of the
 * lock, queueing as soon as the generator's progress applied a queued write
 * and so made room (a generator slower than real time never catches up to
 * `now`, but it does reach writes queued long before), until the deadline
 * (then ONI_ETIMEOUT: the frames are not delivered). Sets *now to the time
 * to stamp a delivery made at once with: `now`, or the last generated
 * frame's time if the generator thread went past `now` while the lock was
 * free. */
static int catch_up(struct emu_card *c, const uint8_t *p, size_t n, uint64_t *now, uint64_t deadline)
{
    while (c->running && emu_gen_until(c, *now, EMU_GEN_CHUNK) >= EMU_GEN_CHUNK) {
        if (defer_wframes(c, p, n, *now)) {
            pthread_cond_signal(&c->gen_cond); /* a batching generator applies it when it gets there */
            return 1;
        }
        if (oni_now_ns() >= deadline)
            return ONI_ETIMEOUT; /* so far behind that the frames could not go in order in time */
        emu_gen_wake(c);
        emu_card_yield(c);
        uint64_t cur = emu_card_now(c);
        if (cur < *now)
            *now = cur; /* the counter was reset meanwhile */
    }
    if (c->gen_now > *now)
        *now = c->gen_now;
    return 0;
}

int emu_card_write(struct emu_card *c, enum emu_stream s, const void *src, size_t n, uint32_t timeout_ms)
{
    if (!c || !src || !n || n > INT_MAX || (s != EMU_STREAM_WRITE && s != EMU_STREAM_GPU_WRITE))
        return ONI_EINVALARG;
    uint64_t t0 = oni_now_ns();
    const uint8_t *p = src;
    emu_card_lock(c);
    int ok = check_wframes(c, p, n);
    if (!ok)
        c->bad_wframes++;
    pthread_mutex_unlock(&c->lock);
    if (!ok)
        return ONI_EBADFRAME;
    emu_wait_until_ns(t0 + emu_link_ns(&c->link, n)); /* the frames cross the link first */
    emu_card_lock(c);
    uint64_t now = emu_card_now(c);
    int late = c->running && !c->fast ? catch_up(c, p, n, &now, oni_ms_from_now(timeout_ms)) : 0;
    if (late) {
        if (late > 0)
            emu_gen_wake(c); /* readers: the chunk generated here */
        pthread_mutex_unlock(&c->lock);
        return late > 0 ? (int)n : ONI_ETIMEOUT;
    }
    /* The frames are read (and checked) again from src: a caller that
     * changed them since the check gets no more delivered from the first
     * one that changed. */
    size_t bytes;
    struct emu_dev *d;
    for (size_t off = 0; off < n && (d = wframe_at(c, p, n, off, &bytes)); off += ONI_WFRAMEHEADERSZ + bytes) {
        d->wframes++;
        if (d->type->write)
            d->type->write(d, p + off + ONI_WFRAMEHEADERSZ, bytes, now);
    }
    emu_gen_wake(c);
    pthread_mutex_unlock(&c->lock);
    return (int)n;
}

/* --- statistics and ground truth ------------------------------------------- */

void emu_card_lag(struct emu_card *c, oniemu_lag_t *lag)
{
    emu_card_lock(c);
    uint64_t now = c->lag_now, max = c->lag_max;
    pthread_mutex_unlock(&c->lock);
    lag->now_ns = (uint64_t)((unsigned __int128)now * 1000000000u / EMU_ACQ_HZ);
    lag->max_ns = (uint64_t)((unsigned __int128)max * 1000000000u / EMU_ACQ_HZ);
}

void emu_card_stats(struct emu_card *c, onigpu_stream_stats_t *st)
{
    if (!c || !st)
        return;
    emu_card_lock(c);
    for (int k = 0; k < 2; k++) {
        st->fifo_bytes[k] = c->fifo[k].fill;
        st->fifo_capacity[k] = c->fifo[k].cap;
        st->dropped_frames[k] = c->fifo[k].dropped_frames;
        st->dropped_bytes[k] = c->fifo[k].dropped_bytes;
    }
    st->bad_wframes = c->bad_wframes;
    pthread_mutex_unlock(&c->lock);
}

int emu_card_fast(const struct emu_card *c)
{
    return c && c->fast; /* set by the spec at creation, never changed */
}

uint32_t emu_card_features(const struct emu_card *c)
{
    if (!c)
        return 0;
    return (c->fast ? EMU_FEAT_FAST : 0) | (c->gpustream ? EMU_FEAT_GPUSTREAM : 0);
}

int emu_card_dev_counts(struct emu_card *c, uint32_t dev_idx, uint64_t *frames, uint64_t *dropped,
                        uint64_t *wframes)
{
    if (!c)
        return ONI_EINVALARG;
    emu_card_lock(c);
    struct emu_dev *d = find_dev(c, dev_idx);
    if (d) {
        if (frames)
            *frames = d->frames;
        if (dropped)
            *dropped = d->dropped;
        if (wframes)
            *wframes = d->wframes;
    }
    pthread_mutex_unlock(&c->lock);
    return d ? 0 : ONI_EDEVIDX;
}


void emu_card_stimulus(struct emu_card *c)
{
    for (int i = 0; i < c->nneural; i++)
        neural_stimulus(c->neural[i]);
}

/* spec key templates=DIR: each generator with units writes its file set
 * into DIR/<dev_idx>-<stream> (docs/emulator.md, Ground truth). */
static int write_templates(struct emu_card *c, char *err, size_t cap)
{
    if (!c->templates_dir[0])
        return 0;
    if (mkdir(c->templates_dir, 0755) && errno != EEXIST) {
        snprintf(err, cap, "templates=%s: cannot create the directory: %s", c->templates_dir, strerror(errno));
        return ONI_EPATHINVALID;
    }
    for (int i = 0; i < c->nneural; i++) {
        const struct neural *n = c->neural[i];
        char dir[512];
        if (!n->nunits)
            continue;
        snprintf(dir, sizeof dir, "%s/%u-%u", c->templates_dir, n->dev_idx, n->stream);
        int rc = neural_write_templates(n, dir, err, cap);
        if (rc)
            return rc;
    }
    return 0;
}

void emu_card_truth_add(struct emu_card *c, uint32_t dev_idx, uint32_t unit, uint32_t ch, uint64_t time, float snr)
{
    if (c->truth_file) {
        fprintf(c->truth_file, "%u,%u,%u,%llu,%.2f\n", dev_idx, unit, ch, (unsigned long long)time, snr);
        /* at most 100 ms of the truth in the buffer: a host killed mid-run
         * leaves the truth of what it recorded */
        if (time - c->truth_flushed >= EMU_ACQ_HZ / 10 || time < c->truth_flushed) {
            fflush(c->truth_file);
            c->truth_flushed = time;
        }
    }
    if (c->truth_keep && c->ntruth < c->truth_cap)
        c->truth[c->ntruth++] = (struct emu_truth){dev_idx, unit, ch, time, snr};
}

int emu_card_set_truth_file(struct emu_card *c, const char *path)
{
    if (!c)
        return ONI_EINVALARG;
    FILE *f = NULL;
    if (path) {
        /* A regular file only: opening a FIFO for writing waits for a
         * reader (for good), and a FIFO or device
         * could block every write of the generator. O_NONBLOCK keeps the
         * open itself from waiting; writes block again, as to any file. */
        int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_CLOEXEC, 0666);
        struct stat sb;
        int fl = fd < 0 ? -1 : fcntl(fd, F_GETFL);
        if (fd < 0 || fstat(fd, &sb) || !S_ISREG(sb.st_mode) || fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) ||
            !(f = fdopen(fd, "a"))) {
            if (fd >= 0)
                close(fd);
            return ONI_EPATHINVALID;
        }
        if (fseek(f, 0, SEEK_END) == 0 && ftell(f) == 0)
            fprintf(f, "dev_idx,unit,channel,sample_time,snr\n");
    }
    emu_card_lock(c);
    FILE *old = c->truth_file;
    c->truth_file = f;
    pthread_mutex_unlock(&c->lock);
    if (old)
        fclose(old);
    return 0;
}

int emu_card_truth_keep(struct emu_card *c, size_t cap)
{
    struct emu_truth *t = calloc(cap ? cap : 1, sizeof *t);
    if (!c || !t) {
        free(t);
        return c ? ONI_EBADALLOC : ONI_EINVALARG;
    }
    emu_card_lock(c);
    free(c->truth);
    c->truth = t;
    c->truth_cap = cap;
    c->ntruth = 0;
    c->truth_keep = 1;
    pthread_mutex_unlock(&c->lock);
    return 0;
}

size_t emu_card_truth_get(struct emu_card *c, struct emu_truth *out, size_t max)
{
    emu_card_lock(c);
    size_t n = c->ntruth;
    if (out)
        memcpy(out, c->truth, (n < max ? n : max) * sizeof *out);
    pthread_mutex_unlock(&c->lock);
    return n;
}

/* --- life cycle ---------------------------------------------------------------- */

void emu_card_destroy(struct emu_card *c)
{
    if (!c)
        return;
    emu_gen_stop_thread(c);
    for (int i = 0; i < c->ndev; i++)
        if (c->dev[i].type->fini)
            c->dev[i].type->fini(&c->dev[i]);
    for (int p = 0; p < 2; p++)
        if (c->port[p].hs && c->port[p].hs->fini)
            c->port[p].hs->fini(c->port[p].hs_priv);
    emu_fifo_fini(&c->fifo[0]);
    emu_fifo_fini(&c->fifo[1]);
    if (c->truth_file)
        fclose(c->truth_file);
    free(c->truth);
    free(c->scratch);
    pthread_cond_destroy(&c->sig_cond);
    pthread_cond_destroy(&c->gen_cond);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

int emu_card_create(const char *spec, struct emu_card **out, char *err, size_t err_cap)
{
    char dummy[8];
    if (!err || !err_cap)
        err = dummy, err_cap = sizeof dummy;
    err[0] = 0;
    if (!out)
        return ONI_EINVALARG;
    *out = NULL;
    struct emu_card *c = calloc(1, sizeof *c);
    if (!c)
        return ONI_EBADALLOC;
    pthread_mutex_init(&c->lock, NULL);
    c->batch_ns = EMU_BATCH_NS;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->sig_cond, &ca);
    pthread_cond_init(&c->gen_cond, &ca);
    pthread_condattr_destroy(&ca);
    size_t ddr = 0;
    int rc = emu_spec_parse(c, spec, &ddr, err, err_cap);
    if (!rc)
        rc = write_templates(c, err, err_cap);
    if (!rc && (!(c->scratch = calloc(1, ONI_RFRAMEHEADERSZ + EMU_MAX_READ + 4)) ||
                emu_fifo_init(&c->fifo[0], ddr / 2 & ~(size_t)3) ||
                emu_fifo_init(&c->fifo[1], ddr / 2 & ~(size_t)3))) {
        snprintf(err, err_cap, "cannot reserve %zu bytes of card memory", ddr);
        rc = ONI_EBADALLOC;
    }
    c->fifo[1].keep_pages = 1; /* see fifo.c */
    c->t0_ns = oni_now_ns();
    if (!rc && !c->fast)
        rc = emu_gen_start_thread(c);
    if (rc) {
        emu_card_destroy(c);
        return rc;
    }
    *out = c;
    return 0;
}
