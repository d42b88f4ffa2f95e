/* testsink.c - the thesis test core's sink (figure 4.1): accepts write frames
 * whose payload is a whole number of write_size units and counts the words.
 * Argument: bytes=N (write_size, a multiple of 4, default 4). Register
 * 0x10/0x11: words received (ro, low/high). */
#include <stdio.h>
#include <stdlib.h>
#include "emu/card.h"

struct tsink {
    uint64_t words;
};

static int ts_init(struct emu_dev *d, struct emu_args *a, char *err, size_t cap)
{
    uint64_t bytes;
    int rc = emu_arg_u64(a, "bytes", 4, 4, 1u << 20, 0, &bytes, err, cap);
    if (rc)
        return rc;
    if (bytes % 4) {
        snprintf(err, cap, "testsink: bytes=%llu is not a multiple of 4", (unsigned long long)bytes);
        return ONI_EINVALARG;
    }
    if (!(d->priv = calloc(1, sizeof(struct tsink))))
        return ONI_EBADALLOC;
    d->desc.write_size = (uint32_t)bytes;
    return 0;
}

static void ts_fini(struct emu_dev *d) { free(d->priv); }

static void ts_fill(struct emu_dev *d, uint8_t *out, uint64_t t) { (void)d, (void)out, (void)t; }

static int ts_reg_read(struct emu_dev *d, uint32_t addr, uint32_t *v)
{
    struct tsink *p = d->priv;
    switch (addr) {
    case EMU_REG_DEVICE: *v = (uint32_t)p->words; return 1;
    case EMU_REG_DEVICE + 1: *v = (uint32_t)(p->words >> 32); return 1;
    }
    return 0;
}

static void ts_write(struct emu_dev *d, const uint8_t *p, size_t n, uint64_t t)
{
    (void)p, (void)t;
    ((struct tsink *)d->priv)->words += n / 4;
}

const struct emu_devtype emu_dev_testsink = {
    "testsink", ONIX_ONIGPU_TESTSINK, 0, ts_init, ts_fini, ts_fill, ts_reg_read, NULL, ts_write,
};
