/* testsink.c - the thesis test core's sink (figure 4.1): accepts write frames
 * whose payload is a whole number of write_size units, counts the words and
 * on request hashes the bytes (so a test can check what arrived, not only how
 * much). Arguments: bytes=N (write_size, a multiple of 4, default 4), hash=1
 * (off by default: a byte-wise hash costs ~1.3 ns per byte in the card's
 * write path, which the transfer benchmarks measure). Registers from
 * ONIEMU_REG_DEVICE (oniemu.h): +0/+1 words received (ro, low/high); +2: FNV-1a (32-bit) of every payload byte
 * received, in order (ro; NACK without hash=1). */
#include <stdio.h>
#include <stdlib.h>
#include "emu/card.h"

#define FNV_BASIS 2166136261u
#define FNV_PRIME 16777619u

struct tsink {
    uint64_t words;
    uint32_t hash;
    int hashing;
};

static int ts_init(struct emu_dev *d, struct emu_args *a, char *err, size_t cap)
{
    uint64_t bytes, hash;
    int rc = emu_arg_u64(a, "bytes", 4, 4, 1u << 20, 0, &bytes, err, cap);
    if (!rc)
        rc = emu_arg_u64(a, "hash", 0, 0, 1, 0, &hash, err, cap);
    if (rc)
        return rc;
    if (bytes % 4) {
        snprintf(err, cap, "testsink: bytes=%llu is not a multiple of 4", (unsigned long long)bytes);
        return ONI_EINVALARG;
    }
    struct tsink *p = calloc(1, sizeof *p);
    if (!(d->priv = p))
        return ONI_EBADALLOC;
    p->hash = FNV_BASIS;
    p->hashing = hash != 0;
    d->desc.write_size = (uint32_t)bytes;
    return 0;
}

static void ts_fini(struct emu_dev *d) { free(d->priv); }


static int ts_reg_read(struct emu_dev *d, uint32_t addr, uint32_t *v)
{
    struct tsink *p = d->priv;
    switch (addr) {
    case EMU_REG_DEVICE: *v = (uint32_t)p->words; return 1;
    case EMU_REG_DEVICE + 1: *v = (uint32_t)(p->words >> 32); return 1;
    case EMU_REG_DEVICE + 2: *v = p->hash; return p->hashing;
    }
    return 0;
}

static void ts_write(struct emu_dev *d, const uint8_t *p, size_t n, uint64_t t)
{
    (void)t;
    struct tsink *s = d->priv;
    s->words += n / 4;
    if (!s->hashing)
        return;
    uint32_t h = s->hash;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * FNV_PRIME;
    s->hash = h;
}

const struct emu_devtype emu_dev_testsink = {
    "testsink", ONIX_ONIGPU_TESTSINK, 0, ts_init, ts_fini, NULL, ts_reg_read, NULL, ts_write, NULL,
};
