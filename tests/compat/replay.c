/* replay.c - helpers of the replays of real ONIX software (replay.h). */
#define _POSIX_C_SOURCE 200809L
#include "replay.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void vsay(const replay_t *rp, const char *tag, const char *at, const char *fmt, va_list ap)
{
    fprintf(stderr, "%s: %s", rp->who, tag);
    if (at)
        fprintf(stderr, " [%s]", at);
    fputs(": ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

static void vfail(replay_t *rp, const char *at, const char *fmt, va_list ap)
{
    pthread_mutex_lock(&rp->lock);
    vsay(rp, "FAIL", at, fmt, ap);
    rp->failures++;
    pthread_mutex_unlock(&rp->lock);
}

void rp_fail(replay_t *rp, const char *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(rp, at, fmt, ap);
    va_end(ap);
}

int rp_failures(replay_t *rp)
{
    pthread_mutex_lock(&rp->lock);
    int n = rp->failures;
    pthread_mutex_unlock(&rp->lock);
    return n;
}

int rp_check(replay_t *rp, int ok, const char *at, const char *fmt, ...)
{
    if (!ok) {
        va_list ap;
        va_start(ap, fmt);
        vfail(rp, at, fmt, ap);
        va_end(ap);
    }
    return ok;
}

void rp_note(replay_t *rp, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s: ", rp->who);
    vprintf(fmt, ap);
    putchar('\n');
    fflush(stdout);
    va_end(ap);
}

static void trace(const replay_t *rp, const char *what, long a, long b, long c, int rc)
{
    if (rp->verbose)
        fprintf(stderr, "%s:   %s %lx %lx %lx -> %d\n", rp->who, what, a, b, c, rc);
}

int rp_open(replay_t *rp, const char *who, const char *driver, int index, const char *at)
{
    memset(rp, 0, sizeof *rp);
    pthread_mutex_init(&rp->lock, NULL);
    rp->who = who;
    rp->verbose = getenv("REPLAY_VERBOSE") != NULL;
    rp->ctx = oni_create_ctx(driver);
    if (!rp->ctx) {
        rp_fail(rp, at, "oni_create_ctx(\"%s\") found no driver (ONI_DRIVER_PATH=%s)", driver,
                getenv("ONI_DRIVER_PATH") ? getenv("ONI_DRIVER_PATH") : "unset");
        return -1;
    }
    int rc = oni_init_ctx(rp->ctx, index);
    if (rc != ONI_ESUCCESS) {
        rp_fail(rp, at, "oni_init_ctx(%d): %d (%s)", index, rc, oni_error_str(rc));
        oni_destroy_ctx(rp->ctx);
        rp->ctx = NULL;
        return -1;
    }
    return 0;
}

int rp_close(replay_t *rp)
{
    if (rp->ctx) {
        int rc = oni_destroy_ctx(rp->ctx);
        rp_check(rp, rc == ONI_ESUCCESS, NULL, "oni_destroy_ctx: %d", rc);
    }
    free(rp->table);
    rp->table = NULL;
    printf("%s: %s (%d failure%s)\n", rp->who, rp->failures ? "FAILED" : "passed", rp->failures,
           rp->failures == 1 ? "" : "s");
    return rp->failures ? 1 : 0;
}

int rp_set(replay_t *rp, int opt, uint32_t value, const char *at)
{
    int rc = oni_set_opt(rp->ctx, opt, &value, sizeof value);
    trace(rp, "set_opt", opt, (long)value, 0, rc);
    rp_check(rp, rc == ONI_ESUCCESS, at, "oni_set_opt(%d, %u): %d (%s)", opt, (unsigned)value, rc,
             oni_error_str(rc));
    return rc;
}

int rp_get(replay_t *rp, int opt, uint32_t *value, const char *at)
{
    size_t sz = sizeof *value;
    *value = 0;
    int rc = oni_get_opt(rp->ctx, opt, value, &sz);
    trace(rp, "get_opt", opt, (long)*value, (long)sz, rc);
    rp_check(rp, rc == ONI_ESUCCESS, at, "oni_get_opt(%d): %d (%s)", opt, rc, oni_error_str(rc));
    return rc;
}

int rp_read_table(replay_t *rp, const char *at)
{
    uint32_t n = 0;
    int rc = rp_get(rp, ONI_OPT_NUMDEVICES, &n, at);
    if (rc)
        return rc;
    free(rp->table);
    rp->ntable = 0;
    rp->table = calloc(n ? n : 1, sizeof *rp->table);
    if (!rp->table)
        return ONI_EBADALLOC;
    size_t sz = n * sizeof *rp->table;
    rc = oni_get_opt(rp->ctx, ONI_OPT_DEVICETABLE, rp->table, &sz);
    if (!rp_check(rp, rc == ONI_ESUCCESS && sz == n * sizeof *rp->table, at,
                  "ONI_OPT_DEVICETABLE of %u devices: %d, %zu bytes", (unsigned)n, rc, sz))
        return rc ? rc : ONI_EBADDEVTABLE;
    rp->ntable = n;
    return 0;
}

int rp_clroni_properties(replay_t *rp, uint32_t *acq_hz, const char *at)
{
    uint32_t v;
    return !rp_get(rp, ONI_OPT_SYSCLKHZ, &v, at) && !rp_get(rp, ONI_OPT_ACQCLKHZ, acq_hz, at) &&
           !rp_get(rp, ONI_OPT_MAXREADFRAMESIZE, &v, at) && !rp_get(rp, ONI_OPT_MAXWRITEFRAMESIZE, &v, at) &&
           rp_read_table(rp, at) == 0;
}

const oni_device_t *rp_device(const replay_t *rp, oni_dev_idx_t idx)
{
    for (oni_size_t i = 0; i < rp->ntable; i++)
        if (rp->table[i].idx == idx)
            return &rp->table[i];
    return NULL;
}

int rp_expect_device(replay_t *rp, oni_dev_idx_t idx, oni_dev_id_t id, uint32_t min_version, const char *at)
{
    const oni_device_t *d = rp_device(rp, idx);
    if (!d) {
        rp_fail(rp, at, "no device at index %u (want %s, id %u)", (unsigned)idx, onix_device_str((int)id),
                (unsigned)id);
        return 0;
    }
    if (!rp_check(rp, d->id == id, at, "device %u is id %u (%s), want %u (%s)", (unsigned)idx,
                  (unsigned)d->id, onix_device_str((int)d->id), (unsigned)id, onix_device_str((int)id)))
        return 0;
    return rp_check(rp, d->version >= min_version, at, "device %u (%s) is v%u, v%u or later required",
                    (unsigned)idx, onix_device_str((int)id), (unsigned)d->version, (unsigned)min_version);
}

int rp_frame_size_ok(replay_t *rp, const oni_frame_t *f, const char *at)
{
    const oni_device_t *d = rp_device(rp, f->dev_idx);
    return rp_check(rp, d && f->data_sz == d->read_size, at, "frame of device %u with %u bytes, the table says %u",
                    (unsigned)f->dev_idx, (unsigned)f->data_sz, d ? (unsigned)d->read_size : 0u);
}

int rp_read(replay_t *rp, oni_dev_idx_t idx, oni_reg_addr_t addr, oni_reg_val_t *v, const char *at)
{
    *v = 0;
    int rc = oni_read_reg(rp->ctx, idx, addr, v);
    trace(rp, "read_reg", (long)idx, (long)addr, (long)*v, rc);
    rp_check(rp, rc == ONI_ESUCCESS, at, "oni_read_reg(%u, 0x%x): %d (%s)", (unsigned)idx, (unsigned)addr, rc,
             oni_error_str(rc));
    return rc;
}

int rp_write(replay_t *rp, oni_dev_idx_t idx, oni_reg_addr_t addr, oni_reg_val_t v, const char *at)
{
    int rc = oni_write_reg(rp->ctx, idx, addr, v);
    trace(rp, "write_reg", (long)idx, (long)addr, (long)v, rc);
    rp_check(rp, rc == ONI_ESUCCESS, at, "oni_write_reg(%u, 0x%x, 0x%x): %d (%s)", (unsigned)idx,
             (unsigned)addr, (unsigned)v, rc, oni_error_str(rc));
    return rc;
}

static uint32_t i2c_reg(uint32_t i2c, uint32_t reg, unsigned nbytes, int reg16)
{
    uint32_t a = (reg << 7) | (i2c & 0x7f);
    if (reg16)
        a |= 0x80000000u;
    if (nbytes)
        a |= (uint32_t)(nbytes - 1) << 28;
    return a;
}

int rp_i2c_write(replay_t *rp, oni_dev_idx_t idx, uint32_t i2c, uint32_t reg, uint32_t v, int reg16, const char *at)
{
    int rc = oni_write_reg(rp->ctx, idx, i2c_reg(i2c, reg, 0, reg16), v);
    trace(rp, "i2c_write", (long)i2c, (long)reg, (long)v, rc);
    rp_check(rp, rc == ONI_ESUCCESS, at, "I2C write 0x%02x reg 0x%x = 0x%x through device %u: %d (%s)",
             (unsigned)i2c, (unsigned)reg, (unsigned)v, (unsigned)idx, rc, oni_error_str(rc));
    return rc;
}

int rp_i2c_read(replay_t *rp, oni_dev_idx_t idx, uint32_t i2c, uint32_t reg, unsigned nbytes, int reg16,
                uint32_t *v)
{
    *v = 0;
    int rc = oni_read_reg(rp->ctx, idx, i2c_reg(i2c, reg, nbytes, reg16), v);
    trace(rp, "i2c_read", (long)i2c, (long)reg, (long)*v, rc);
    return rc;
}

uint16_t rp_u16(const oni_frame_t *f, size_t byte)
{
    const unsigned char *p = (const unsigned char *)f->data + byte;
    return (uint16_t)(p[0] | p[1] << 8);
}

uint32_t rp_u32(const oni_frame_t *f, size_t byte)
{
    return (uint32_t)rp_u16(f, byte) | (uint32_t)rp_u16(f, byte + 2) << 16;
}

uint64_t rp_u64(const oni_frame_t *f, size_t byte)
{
    return (uint64_t)rp_u32(f, byte) | (uint64_t)rp_u32(f, byte + 4) << 32;
}

void rp_sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

void rp_clock_step(rp_clock_t *c, uint64_t hub)
{
    if (c->n && hub <= c->last)
        c->backwards++;
    if (!c->n)
        c->first = hub;
    c->last = hub;
    c->n++;
}

void rp_check_rate(replay_t *rp, const char *name, const rp_clock_t *c, double hz, uint32_t clock_hz, const char *at)
{
    rp_check(rp, c->backwards == 0, at, "%s hub clock did not increase %d times", name, c->backwards);
    if (!rp_check(rp, c->n >= 2, at, "%s: %ld frames", name, c->n) ||
        !rp_check(rp, clock_hz > 0, at, "%s: hub clock rate 0", name))
        return;
    double period = (double)(c->last - c->first) / (double)(c->n - 1) / clock_hz;
    rp_check(rp, fabs(period * hz - 1) < 0.1, at, "%s: %ld frames, mean period %.3g us by the hub clock, want %.3g us",
             name, c->n, period * 1e6, 1e6 / hz);
}

void rp_bno_poll(replay_t *rp, rp_bno_t *b)
{
    for (size_t i = 0; i < b->nreads; i++) {
        uint32_t v, reg = 0x1A + b->reads[i][0];
        int rc = rp_i2c_read(rp, RP_PASSTHROUGH_A, RP_BNO_ADDR, reg, b->reads[i][1], 0, &v);
        if (!rp_check(rp, rc == ONI_ESUCCESS, b->at_read, "BNO055 read at 0x%x: %d (%s)", (unsigned)reg, rc,
                      oni_error_str(rc)))
            return;
    }
    oni_reg_val_t lo = 0, hi = 0;
    if (rp_read(rp, RP_PASSTHROUGH_A, RP_DS_LASTI2CL, &lo, b->at_time) ||
        rp_read(rp, RP_PASSTHROUGH_A, RP_DS_LASTI2CH, &hi, b->at_time))
        return;
    uint64_t t = (uint64_t)hi << 32 | lo;
    rp_check(rp, t > b->last, b->at_time, "LASTI2C time %llu does not advance (previous %llu)",
             (unsigned long long)t, (unsigned long long)b->last);
    b->last = t;
    b->polls++;
}

static int poller_stopped(rp_poller_t *p)
{
    pthread_mutex_lock(&p->rp->lock);
    int stop = p->stop;
    pthread_mutex_unlock(&p->rp->lock);
    return stop;
}

static void *poller_main(void *arg)
{
    rp_poller_t *p = arg;
    double next = rp_now();
    while (!poller_stopped(p)) {
        double left = next - rp_now();
        if (left > 0)
            rp_sleep_ms((unsigned)(left * 1e3) + 1);
        p->fn();
        next += p->period_ms * 1e-3;
    }
    return NULL;
}

int rp_poller_start(rp_poller_t *p, const char *at)
{
    p->stop = 0;
    p->started = pthread_create(&p->thread, NULL, poller_main, p) == 0;
    return rp_check(p->rp, p->started, at, "cannot start the polling thread") ? 0 : -1;
}

void rp_poller_stop(rp_poller_t *p)
{
    if (!p->started)
        return;
    pthread_mutex_lock(&p->rp->lock);
    p->stop = 1;
    pthread_mutex_unlock(&p->rp->lock);
    pthread_join(p->thread, NULL);
    p->started = 0;
}

double rp_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
