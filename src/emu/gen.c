/* gen.c - the acquisition side of the card: device schedules on the
 * acquisition clock, the data-input multiplexer, and the realtime generator
 * thread.
 *
 * Each periodic device has its next due time in acquisition ticks; its period
 * is kept as an exact fraction of ticks (integer quotient + remainder), so
 * over any run the k-th frame is due at floor(k * ACQ_HZ / rate) after the
 * schedule started, without drift. The multiplexer emits the earliest due
 * frame first, ties in device-table order (round-robin over devices due at
 * the same tick), each framed as [u64 time][u32 dev_idx][u32 data_sz]
 * [payload, zero-padded to 4], into the FIFO of the device's route. A frame
 * that does not fit is generated anyway (device state runs on, as on the
 * card) and counted as dropped for its device and stream. */
#include <errno.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include "card.h"
#include "oni.h"
#include "oni/util/wire.h"
#include "oni/util/clock.h"

#define IDLE_WAIT_NS 50000000ull
#define SPIN_MAX_NS 1000000ull /* wake=spin: longest stretch polled with the lock free */

/* A rate changed during acquisition takes effect at once: the next frame is
 * due within one new period of now, not when the old period ends (which may
 * be up to 1000 s away). Never before now, so the stream stays in time order. */
static void pull_in(struct emu_dev *d)
{
    uint64_t soon = emu_card_now(d->card) + d->per_q;
    if (d->next_due > soon)
        d->next_due = soon;
}

int emu_dev_set_rate(struct emu_dev *d, uint64_t rate_mhz)
{
    const uint64_t num = EMU_ACQ_HZ * 1000;
    if (rate_mhz > num)
        return ONI_EINVALARG; /* more than one frame per tick: timestamps would repeat */
    d->rate_mhz = rate_mhz;
    d->per_q = rate_mhz ? num / rate_mhz : 0;
    d->per_r = rate_mhz ? num % rate_mhz : 0;
    d->rem = 0;
    if (rate_mhz && d->card->running)
        pull_in(d);
    return 0;
}

uint32_t emu_dev_hub_hz(const struct emu_dev *d)
{
    return d->card->hub[d->desc.idx >> 8].clk_hz;
}

uint64_t emu_dev_hub_clock(const struct emu_dev *d, uint64_t t)
{
    return (uint64_t)((unsigned __int128)t * emu_dev_hub_hz(d) / EMU_ACQ_HZ);
}

int emu_dev_set_clk_div(struct emu_dev *d, uint32_t div, uint64_t max_hz)
{
    uint64_t num = (uint64_t)emu_dev_hub_hz(d) * 1000;
    if (div == 0 || num / div < 1000 || num / div > max_hz * 1000)
        return ONI_EINVALARG;
    /* Rounded down, never up: a rate a hair high makes the period a hair
     * under div ticks, and floor() stamped every frame one tick early. */
    int rc = emu_dev_set_rate(d, num / div);
    if (!rc)
        d->clk_div = div;
    return rc;
}

int emu_dev_set_hz(struct emu_dev *d, uint64_t hz, uint64_t max_hz)
{
    if (hz < 1 || hz > max_hz)
        return ONI_EINVALARG;
    int rc = emu_dev_set_rate(d, hz * 1000);
    if (!rc)
        d->clk_div = (uint32_t)(emu_dev_hub_hz(d) / hz);
    return rc;
}

int emu_dev_clk_read(struct emu_dev *d, uint32_t addr, uint32_t *v)
{
    /* the same addresses in the heartbeat, loadtest and memusage maps */
    switch (addr) {
    case ONIX_HEARTBEAT_CLK_DIV: *v = d->clk_div; return 1;
    case ONIX_HEARTBEAT_CLK_HZ: *v = emu_dev_hub_hz(d); return 1;
    }
    return 0;
}

int emu_dev_clk_write(struct emu_dev *d, uint32_t addr, uint32_t v, uint64_t max_hz)
{
    if (addr == ONIX_HEARTBEAT_CLK_DIV)
        return emu_dev_set_clk_div(d, v, max_hz) == 0;
    if (addr == EMU_REG_RATE_HZ)
        return emu_dev_set_hz(d, v, max_hz) == 0;
    return 0;
}

/* Generate one frame of d at time t into its route's FIFO, or count it dropped. */
static void put_frame(struct emu_card *c, struct emu_dev *d, uint64_t t)
{
    struct emu_fifo *f = &c->fifo[d->route ? 1 : 0];
    uint32_t sz = d->desc.read_size;
    size_t total = ONI_RFRAMEHEADERSZ + oni_pad4(sz);
    uint8_t *p = emu_fifo_reserve(f, total, c->scratch);
    int drop = p == NULL;
    if (drop)
        p = c->scratch;
    d->type->fill(d, p + ONI_RFRAMEHEADERSZ, t);
    d->frames++;
    if (drop) {
        d->dropped++;
        f->dropped_frames++;
        f->dropped_bytes += total;
        return;
    }
    memcpy(p, &t, 8);
    memcpy(p + 8, &d->desc.idx, 4);
    memcpy(p + 12, &sz, 4);
    memset(p + ONI_RFRAMEHEADERSZ + sz, 0, total - ONI_RFRAMEHEADERSZ - sz);
    emu_fifo_commit(f, p, total);
}

void emu_dev_emit(struct emu_dev *d, uint64_t time)
{
    if (d->enable && !d->absent && d->desc.read_size && d->card->running) /* stopped: no frames, as in the periodic case */
        put_frame(d->card, d, time);
}

static int periodic(const struct emu_dev *d) { return d->enable && !d->absent && d->rate_mhz && d->desc.read_size; }

static void advance(struct emu_dev *d)
{
    d->next_due += d->per_q;
    d->rem += d->per_r;
    if (d->rem >= d->rate_mhz) {
        d->rem -= d->rate_mhz;
        d->next_due++;
    }
}

/* Every frame due at or before until, up to about max_bytes, or one frame
 * when a thread waits for the card lock (a register access, a reader, a
 * writer): then max_bytes, as behind. A generator that fell behind (a
 * starved or instrumented build) so holds the lock for one frame's work, not
 * a chunk's (under ASan a chunk took milliseconds, and each register access
 * of a BNO055 poll waited that long). */
static size_t gen_range(struct emu_card *c, uint64_t until, size_t max_bytes)
{
    size_t tried = 0;
    while (tried < max_bytes) {
        if (tried && atomic_load_explicit(&c->lock_waiters, memory_order_relaxed))
            return max_bytes;
        struct emu_dev *best = NULL;
        uint64_t second = UINT64_MAX;
        for (int i = 0; i < c->ndev; i++) {
            struct emu_dev *d = &c->dev[i];
            if (!periodic(d))
                continue;
            if (!best || d->next_due < best->next_due) {
                if (best && best->next_due < second)
                    second = best->next_due;
                best = d;
            } else if (d->next_due < second) {
                second = d->next_due;
            }
        }
        if (!best || best->next_due > until)
            break;
        size_t frame = ONI_RFRAMEHEADERSZ + oni_pad4(best->desc.read_size);
        do { /* a run of best's frames until another device is due */
            uint64_t t = best->next_due;
            put_frame(c, best, t);
            tried += frame;
            c->gen_now = t;
            advance(best);
        } while (tried < max_bytes && best->next_due <= until && best->next_due < second);
    }
    return tried;
}

static void apply_write(struct emu_card *c)
{
    struct emu_wpend *w = &c->wpend[c->wpend_rd];
    if (w->d->type->write)
        w->d->type->write(w->d, w->data, w->n, w->t);
    c->wpend_rd = (c->wpend_rd + 1) % EMU_WPEND_MAX;
    c->wpend_n--;
}

size_t emu_gen_until(struct emu_card *c, uint64_t until, size_t max_bytes)
{
    size_t tried = 0;
    while (c->wpend_n && c->wpend[c->wpend_rd].t <= until) {
        tried += gen_range(c, c->wpend[c->wpend_rd].t, max_bytes - tried);
        if (tried >= max_bytes)
            return tried;
        apply_write(c);
    }
    return tried + gen_range(c, until, max_bytes - tried);
}

int emu_gen_defer_write(struct emu_card *c, struct emu_dev *d, const uint8_t *src, size_t n, uint64_t t)
{
    if (c->wpend_n == EMU_WPEND_MAX || n > EMU_WPEND_BYTES)
        return -1;
    struct emu_wpend *w = &c->wpend[(c->wpend_rd + c->wpend_n) % EMU_WPEND_MAX];
    w->d = d;
    w->t = t;
    w->n = (uint32_t)n;
    memcpy(w->data, src, n);
    c->wpend_n++;
    return 0;
}

void emu_gen_flush_writes(struct emu_card *c)
{
    while (c->wpend_n)
        apply_write(c);
}

uint64_t emu_gen_next_due(struct emu_card *c)
{
    uint64_t t = UINT64_MAX;
    for (int i = 0; i < c->ndev; i++)
        if (periodic(&c->dev[i]) && c->dev[i].next_due < t)
            t = c->dev[i].next_due;
    return t;
}

/* When FIFO k will hold need more bytes: the due time of the frame that
 * completes them when one periodic device feeds it (after m more periods:
 * advance() m times), else the earliest due frame of those that feed it.
 * UINT64_MAX when none does. */
static uint64_t need_due(const struct emu_card *c, int k, size_t need)
{
    const struct emu_dev *only = NULL;
    int n = 0;
    uint64_t first = UINT64_MAX;
    for (int i = 0; i < c->ndev; i++) {
        const struct emu_dev *d = &c->dev[i];
        if (!periodic(d) || (d->route ? 1 : 0) != k)
            continue;
        n++;
        only = d;
        if (d->next_due < first)
            first = d->next_due;
    }
    if (n != 1)
        return first;
    uint64_t frame = ONI_RFRAMEHEADERSZ + oni_pad4(only->desc.read_size);
    uint64_t m = (need + frame - 1) / frame - 1;
    return only->next_due + m * only->per_q + (uint64_t)(((unsigned __int128)m * only->per_r + only->rem) / only->rate_mhz);
}

/* When the generator has work next (acquisition ticks, now = the clock):
 * the frame that completes a waiting reader's bytes, a queued write, and
 * otherwise the next due frame, but no sooner than batch_ns from now
 * (batch 0: every frame). */
static uint64_t next_work(struct emu_card *c, uint64_t now)
{
    uint64_t due = emu_gen_next_due(c);
    if (due == UINT64_MAX)
        return due;
    uint64_t batch = (uint64_t)((unsigned __int128)c->batch_ns * EMU_ACQ_HZ / 1000000000u);
    uint64_t t = due > now + batch ? due : now + batch;
    if (c->wpend_n && c->wpend[c->wpend_rd].t < t)
        t = c->wpend[c->wpend_rd].t;
    for (int k = 0; k < 2; k++) {
        const struct emu_fifo *f = &c->fifo[k];
        if (f->want > f->fill) {
            uint64_t r = need_due(c, k, f->want - f->fill);
            t = r < t ? r : t;
        }
    }
    return t;
}

void emu_gen_note_lag(struct emu_card *c, uint64_t now)
{
    uint64_t due = emu_gen_next_due(c);
    c->lag_now = due < now ? now - due : 0;
    if (c->lag_now > c->lag_max)
        c->lag_max = c->lag_now;
}

void emu_gen_restart(struct emu_card *c, uint64_t t)
{
    for (int i = 0; i < c->ndev; i++) {
        c->dev[i].next_due = t;
        c->dev[i].rem = 0;
    }
}

void emu_gen_wake(struct emu_card *c)
{
    for (int s = 0; s < 2; s++) {
        struct emu_fifo *f = &c->fifo[s];
        int woke = f->want && f->fill >= f->want;
        if (woke)
            pthread_cond_signal(&f->cond);
        emu_card_rouse(c, &f->sleeper, woke);
    }
    emu_card_rouse(c, &c->sig_sleeper, c->sig_fill > 0); /* sig_push woke it */
}

/* Realtime: generate what is due by the wall clock, then sleep until there
 * is work (next_work: a waiting reader's last frame, else at most batch_ns
 * past the next due frame; a configuration change or a reader that starts
 * waiting wakes us); with wake=spin, poll the clock for every frame instead
 * (a timer wake-up is late by tens of us on some machines, e.g. VMs). */
static void *gen_main(void *arg)
{
    struct emu_card *c = arg;
#ifdef __linux__
    prctl(PR_SET_TIMERSLACK, 1000UL); /* wake within ~1 us of a frame's due time, not the default 50 us */
#endif
    pthread_mutex_lock(&c->lock);
    while (!c->stop) {
        uint64_t wake_ns = oni_now_ns() + IDLE_WAIT_NS;
        if (c->running) {
            uint64_t now = emu_card_now(c);
            size_t n = emu_gen_until(c, now, EMU_GEN_CHUNK);
            emu_gen_note_lag(c, now);
            emu_gen_wake(c);
            if (n >= EMU_GEN_CHUNK) { /* behind: let readers and registers in, then go on */
                emu_card_yield(c);
                continue;
            }
            uint64_t due = c->spin ? emu_gen_next_due(c) : next_work(c, emu_card_now(c));
            if (due != UINT64_MAX) {
                uint64_t due_ns = c->t0_ns + (uint64_t)((unsigned __int128)due * 1000000000u / EMU_ACQ_HZ);
                if (due_ns < wake_ns)
                    wake_ns = due_ns;
            }
        }
        if (c->spin && c->running && wake_ns < oni_now_ns() + SPIN_MAX_NS) {
            /* wake=spin: poll the clock with the lock free (configuration
             * changes are seen at the next frame or within SPIN_MAX_NS) */
            pthread_mutex_unlock(&c->lock);
            while (oni_now_ns() < wake_ns)
                ;
            pthread_mutex_lock(&c->lock);
            continue;
        }
        struct timespec ts = {(time_t)(wake_ns / 1000000000ull), (long)(wake_ns % 1000000000ull)};
        pthread_cond_timedwait(&c->gen_cond, &c->lock, &ts);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

int emu_gen_start_thread(struct emu_card *c)
{
    c->stop = 0;
    if (pthread_create(&c->thread, NULL, gen_main, c))
        return ONI_EBADALLOC;
    c->thread_up = 1;
    return 0;
}

void emu_gen_stop_thread(struct emu_card *c)
{
    if (!c->thread_up)
        return;
    pthread_mutex_lock(&c->lock);
    c->stop = 1;
    pthread_cond_signal(&c->gen_cond);
    pthread_mutex_unlock(&c->lock);
    pthread_join(c->thread, NULL);
    c->thread_up = 0;
}
