/* fixture.h - helpers for the core's tests around the scripted driver:
 * signal bytes of a device table, data-stream frames, a ready context. */
#ifndef FIXTURE_H
#define FIXTURE_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "oni.h"
#include "scripted.h"

/* Signal bytes a controller sends on reset: DEVICETABLEACK(n) then n
 * DEVICEINST packets. Returns the length, or 0 when out is too small. */
static inline size_t fx_devtable(uint8_t *out, size_t cap, const oni_device_t *devs, uint32_t n)
{
    size_t len = 0;
    int rc = oni_signal_pack(ONI_SIG_DEVICETABLEACK, &n, 4, out, cap);
    if (rc < 0)
        return 0;
    len += (size_t)rc;
    for (uint32_t i = 0; i < n; i++) {
        rc = oni_signal_pack(ONI_SIG_DEVICEINST, &devs[i], sizeof devs[i], out + len, cap - len);
        if (rc < 0)
            return 0;
        len += (size_t)rc;
    }
    return len;
}

/* Payload byte j of the frame with this time from device idx: checkable. */
static inline uint8_t fx_byte(uint64_t time, uint32_t idx, uint32_t j)
{
    return (uint8_t)(time * 131u + idx * 7u + j * 13u + 1u);
}

/* Append one read frame (header, payload, zero padding to 4) at out; returns its length. */
static inline size_t fx_frame(uint8_t *out, uint64_t time, uint32_t idx, uint32_t sz)
{
    memcpy(out, &time, 8);
    memcpy(out + 8, &idx, 4);
    memcpy(out + 12, &sz, 4);
    for (uint32_t j = 0; j < sz; j++)
        out[16 + j] = fx_byte(time, idx, j);
    size_t len = 16 + ((sz + 3u) & ~3u);
    memset(out + 16 + sz, 0, len - 16 - sz);
    return len;
}

/* True if frame f carries exactly what fx_frame(time, idx, sz) wrote. */
static inline int fx_check(const oni_frame_t *f, uint64_t time, uint32_t idx, uint32_t sz)
{
    if (f->time != time || f->dev_idx != idx || f->data_sz != sz)
        return 0;
    for (uint32_t j = 0; j < sz; j++)
        if ((uint8_t)f->data[j] != fx_byte(time, idx, j))
            return 0;
    return 1;
}

static inline int fx_set_u32(oni_ctx ctx, int opt, uint32_t v)
{
    return oni_set_driver_opt(ctx, opt, &v, sizeof v);
}

/* A scripted context whose reset answers with devs; initialized when init
 * is set. NULL on any failure. */
static inline oni_ctx fx_open(const oni_device_t *devs, uint32_t n, int init)
{
    size_t cap = 64 + (size_t)n * 64;
    uint8_t *sig = malloc(cap);
    oni_ctx ctx = oni_create_ctx("scripted");
    if (!ctx)
        fprintf(stderr, "  libonidriver_scripted.so not found: run through ctest, or set "
                        "ONI_DRIVER_PATH to the build directory\n");
    size_t len = sig ? fx_devtable(sig, cap, devs, n) : 0;
    int ok = ctx && len && oni_set_driver_opt(ctx, SCR_OPT_DEVTABLE, sig, len) == 0;
    free(sig);
    if (ok && init)
        ok = oni_init_ctx(ctx, 0) == 0;
    if (!ok && ctx) {
        oni_destroy_ctx(ctx);
        ctx = NULL;
    }
    return ctx;
}

/* Of n frames whose times were counted in seen[] as readers took them:
 * how many were never seen (*missing) and how many more than once (*twice). */
static inline void fx_seen(const atomic_uchar *seen, int n, int *missing, int *twice)
{
    *missing = *twice = 0;
    for (int i = 0; i < n; i++) {
        *missing += seen[i] == 0;
        *twice += seen[i] > 1;
    }
}

static inline struct scr_stats fx_stats(oni_ctx ctx)
{
    struct scr_stats st;
    size_t n = sizeof st;
    memset(&st, 0, sizeof st);
    oni_get_driver_opt(ctx, SCR_OPT_STATS, &st, &n);
    return st;
}

#endif
