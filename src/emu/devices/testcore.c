/* testcore.c - the thesis test core's source (figure 4.1): a 64-bit counter
 * incremented every word, continuing from frame to frame, at a configurable
 * rate. On the card it emits one word per 250 MHz clock (2 GB/s); here any
 * rate up to one frame per acquisition tick. Arguments: bytes=N (payload,
 * multiple of 8, default 4096), rate=R (bytes/s, SI suffixes, default 2G).
 * Registers from ONIEMU_REG_DEVICE (oniemu.h): +0 RATE_KBPS (rw, kB/s), +1
 * BYTES (ro), +2/+3 the next counter value (ro, low/high). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emu/card.h"

struct tcore {
    uint64_t next, rate_Bps;
};

static int set_rate(struct emu_dev *d, uint64_t rate_Bps)
{
    struct tcore *p = d->priv;
    unsigned __int128 mhz = (unsigned __int128)rate_Bps * 1000 / d->desc.read_size;
    if (!mhz || mhz > UINT64_MAX || emu_dev_set_rate(d, (uint64_t)mhz))
        return ONI_EINVALARG; /* the cast would wrap a rate far above one frame per tick */
    p->rate_Bps = rate_Bps;
    return 0;
}

static int tc_init(struct emu_dev *d, struct emu_args *a, char *err, size_t cap)
{
    uint64_t bytes, rate;
    int rc;
    if ((rc = emu_arg_u64(a, "bytes", 4096, 8, EMU_MAX_READ, 0, &bytes, err, cap)) ||
        (rc = emu_arg_u64(a, "rate", 2000000000ull, 1, UINT64_MAX, 1, &rate, err, cap)))
        return rc;
    if (bytes % 8) {
        snprintf(err, cap, "testcore: bytes=%llu is not a multiple of 8", (unsigned long long)bytes);
        return ONI_EINVALARG;
    }
    if (!(d->priv = calloc(1, sizeof(struct tcore))))
        return ONI_EBADALLOC;
    d->desc.read_size = (uint32_t)bytes;
    if (set_rate(d, rate)) {
        snprintf(err, cap, "testcore: rate=%llu B/s gives less than 1 frame in 1000 s or more than one per tick",
                 (unsigned long long)rate);
        return ONI_EINVALARG;
    }
    return 0;
}

static void tc_fini(struct emu_dev *d) { free(d->priv); }

static void tc_fill(struct emu_dev *d, uint8_t *out, uint64_t t)
{
    (void)t;
    struct tcore *p = d->priv;
    uint64_t v = p->next;
    size_t n = d->desc.read_size / 8;
    for (size_t i = 0; i < n; i++) { /* frames are 4-byte aligned in the FIFO */
        uint64_t x = v + i;
        memcpy(out + 8 * i, &x, 8);
    }
    p->next = v + n;
}

static int tc_reg_read(struct emu_dev *d, uint32_t addr, uint32_t *v)
{
    struct tcore *p = d->priv;
    switch (addr) {
    case EMU_REG_DEVICE: *v = (uint32_t)(p->rate_Bps / 1000 > UINT32_MAX ? UINT32_MAX : p->rate_Bps / 1000); return 1;
    case EMU_REG_DEVICE + 1: *v = d->desc.read_size; return 1;
    case EMU_REG_DEVICE + 2: *v = (uint32_t)p->next; return 1;
    case EMU_REG_DEVICE + 3: *v = (uint32_t)(p->next >> 32); return 1;
    }
    return 0;
}

static int tc_reg_write(struct emu_dev *d, uint32_t addr, uint32_t v)
{
    return addr == EMU_REG_DEVICE && v && set_rate(d, (uint64_t)v * 1000) == 0;
}

const struct emu_devtype emu_dev_testcore = {
    "testcore", ONIX_ONIGPU_TESTCORE, 0, tc_init, tc_fini, tc_fill, tc_reg_read, tc_reg_write, NULL, NULL,
};
