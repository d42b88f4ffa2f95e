/* xfer_check.h - helpers of the GPU stream tests (test_xfer*.c, test_gpu*.c):
 * open the emulated card with its test core routed to the GPU stream, and
 * check the test core's counter continuity across blocks of the stream.
 *
 * The test core (docs/devices.md) emits frames [u64 time][u32 dev_idx][u32
 * data_sz][payload]; its payload is a run of 64-bit little-endian words that
 * count up by one, continuing from frame to frame. A block of the stream may
 * start and end anywhere in a frame, so the checker is a byte-wise parser that
 * keeps its state between blocks. */
#ifndef XFER_CHECK_H
#define XFER_CHECK_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "oni.h"
#include "onigpu.h"
#include "oniemu.h"
#include "onix.h"
#include "gpu/gpu.h"
#include "oni/util/clock.h"
#include "unit.h"

struct xcheck {
    uint8_t hdr[16];
    size_t hdr_have;
    uint64_t left;      /* payload bytes left in the current frame */
    uint64_t pad;       /* padding bytes after it */
    uint8_t word[8];
    size_t word_have;
    uint64_t next;      /* the counter value expected next */
    int started;
    uint32_t dev;       /* the core's dev_idx */
    uint64_t frames, words, errors;
};

static inline void xcheck_init(struct xcheck *c, uint32_t dev)
{
    memset(c, 0, sizeof *c);
    c->dev = dev;
}

static inline void xcheck_word(struct xcheck *c)
{
    uint64_t v;
    memcpy(&v, c->word, 8);
    if (c->started && v != c->next) {
        if (c->errors < 5)
            fprintf(stderr, "  counter: got %llu, want %llu (word %llu)\n", (unsigned long long)v,
                    (unsigned long long)c->next, (unsigned long long)c->words);
        c->errors++;
    }
    c->started = 1;
    c->next = v + 1;
    c->words++;
    c->word_have = 0;
}

/* Feed n bytes of the GPU stream, in order. */
static inline void xcheck_feed(struct xcheck *c, const uint8_t *p, size_t n)
{
    while (n) {
        if (c->left == 0 && c->pad == 0 && c->hdr_have < 16) {
            size_t k = 16 - c->hdr_have < n ? 16 - c->hdr_have : n;
            memcpy(c->hdr + c->hdr_have, p, k);
            c->hdr_have += k, p += k, n -= k;
            if (c->hdr_have == 16) {
                uint32_t dev, sz;
                memcpy(&dev, c->hdr + 8, 4);
                memcpy(&sz, c->hdr + 12, 4);
                if (dev != c->dev || sz % 8) {
                    if (c->errors < 5)
                        fprintf(stderr, "  frame header: dev %u size %u\n", dev, sz);
                    c->errors++;
                }
                c->left = sz;
                c->pad = (4 - sz % 4) % 4;
                c->hdr_have = 0;
                c->frames++;
                if (!sz)
                    c->hdr_have = 0;
            }
            continue;
        }
        if (c->left) {
            size_t k = 8 - c->word_have;
            if (k > c->left)
                k = (size_t)c->left;
            if (k > n)
                k = n;
            memcpy(c->word + c->word_have, p, k);
            c->word_have += k, c->left -= k, p += k, n -= k;
            if (c->word_have == 8)
                xcheck_word(c);
            continue;
        }
        size_t k = c->pad < n ? (size_t)c->pad : n;
        c->pad -= k, p += k, n -= k;
    }
}

/* Spec of the emulated card for these tests: the test core on the GPU
 * stream (route=1) or the default stream, the test sink (hashing what it receives), fast link. */
#define XFER_SPEC(route) \
    "devices=testcore:bytes=4096:rate=1G:route=" #route ",testsink:hash=1;mode=fast;link=unlimited;ddr=64M"

/* What the test sink's register HASH (ONIEMU_REG_DEVICE + 2) holds after receiving these payload
 * bytes (FNV-1a, 32-bit, in order; start from XSUM_START). */
#define XSUM_START 2166136261u
#define XSUM_REG (ONIEMU_REG_DEVICE + 2)
static inline uint32_t xsum(uint32_t h, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

/* Write frames of f bytes (8-byte header to dev `sink`, payload a pattern
 * varying with seed) filling n bytes at blk; returns the hash h extended by
 * their payloads, as the sink will see them. */
static inline uint32_t xsum_frames(uint8_t *blk, size_t n, size_t f, uint32_t sink, uint32_t seed, uint32_t h)
{
    for (size_t k = 0; k + f <= n; k += f) {
        uint32_t hdr[2] = {sink, (uint32_t)(f - 8) / 4};
        memcpy(blk + k, hdr, 8);
        for (size_t i = 8; i < f; i++)
            blk[k + i] = (uint8_t)((k + i) * 131u + seed);
        h = xsum(h, blk + k + 8, f - 8);
    }
    return h;
}

/* Open and init an emu context with spec; find the test core and sink.
 * Returns NULL (and prints why) on failure. */
static inline oni_ctx xfer_open(const char *spec, uint32_t *core, uint32_t *sink)
{
    oni_ctx ctx = oni_create_ctx("emu");
    if (!ctx) {
        fprintf(stderr, "  oni_create_ctx(emu) failed\n");
        return NULL;
    }
    int rc = oni_set_driver_opt(ctx, ONI_DRV_EMU_SPEC, spec, strlen(spec) + 1);
    if (!rc)
        rc = oni_init_ctx(ctx, -1);
    oni_size_t n = 0;
    size_t sz = sizeof n;
    if (!rc)
        rc = oni_get_opt(ctx, ONI_OPT_NUMDEVICES, &n, &sz);
    oni_device_t table[64];
    sz = sizeof table;
    if (!rc && n > 64)
        rc = ONI_EBUFFERSIZE;
    if (!rc)
        rc = oni_get_opt(ctx, ONI_OPT_DEVICETABLE, table, &sz);
    int found = 0;
    for (oni_size_t i = 0; !rc && i < n; i++) {
        if (table[i].id == ONIX_ONIGPU_TESTCORE && core)
            *core = table[i].idx, found |= 1;
        if (table[i].id == ONIX_ONIGPU_TESTSINK && sink)
            *sink = table[i].idx, found |= 2;
    }
    if (!rc && (found & 1) != 1)
        rc = ONI_EDEVID;
    int run = 1;
    if (!rc)
        rc = oni_set_opt(ctx, ONI_OPT_RUNNING, &run, sizeof run);
    if (rc) {
        fprintf(stderr, "  opening the emulated card (%s): %s\n", spec, oni_error_str(rc));
        oni_destroy_ctx(ctx);
        return NULL;
    }
    return ctx;
}

struct xfer_blocked_read {
    oni_ctx ctx;
    int rc;
};

static inline void *xfer_read_nothing(void *arg)
{
    struct xfer_blocked_read *r = arg;
    uint8_t buf[4096] = {0};
    r->rc = oni_set_driver_opt(r->ctx, ONI_DRV_READ, buf, 8);
    return NULL;
}

/* On ctx, whose GPU stream stays empty: an ONI_DRV_READ on another thread
 * waits out a 1 s timeout while an ONI_DRV_WRITE to sink (its hash checked;
 * from device memory not pinned when gpu is set), a register read and an
 * option get finish within half of it. Uses unit.h. */
static inline void xfer_check_waiting_read(oni_ctx ctx, uint32_t sink, int gpu)
{
    uint32_t ms = 1000, wsz = 4096;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &ms, sizeof ms), 0);
    uint8_t *blk = calloc(1, wsz), *dev = NULL;
    CHECK(blk != NULL);
    if (!blk)
        return;
    uint32_t want = xsum_frames(blk, wsz, 1024, sink, 1, XSUM_START);
    if (gpu) {
        CHECK_RC(gpu_alloc((void **)&dev, wsz), 0);
        CHECK_RC(dev ? gpu_copy(dev, blk, wsz) : ONI_ENOGPU, 0);
    }
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_WR_SZ, &wsz, sizeof wsz), 0);
    struct xfer_blocked_read r = {ctx, 0};
    pthread_t t;
    uint64_t t0 = oni_now_ns();
    int started = pthread_create(&t, NULL, xfer_read_nothing, &r) == 0;
    CHECK(started);
    struct timespec ts = {0, 100000000}; /* the reader is waiting by now */
    nanosleep(&ts, NULL);
    uint64_t t1 = oni_now_ns();
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_WRITE, gpu ? dev : blk, 8), 0);
    oni_reg_val_t got = 0;
    CHECK_RC(oni_read_reg(ctx, sink, XSUM_REG, &got), 0);
    CHECK_EQ(got, want);
    uint32_t rd = 0;
    size_t len = sizeof rd;
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_RD_SZ, &rd, &len), 0);
    uint64_t others = oni_now_ns() - t1;
    if (started) {
        pthread_join(t, NULL);
        uint64_t reader = oni_now_ns() - t0;
        CHECK_RC(r.rc, ONI_ETIMEOUT);
        CHECK(reader >= 900000000u); /* the read did wait out its timeout meanwhile */
    }
    CHECK(others < 500000000u); /* half the read's wait: not behind it */
    if (dev)
        gpu_free(dev);
    free(blk);
}

#endif
