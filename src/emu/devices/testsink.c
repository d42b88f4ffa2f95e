/* testsink.c - the thesis test core's sink (figure 4.1): accepts write frames
 * of any whole number of 32-bit words and counts them. Register 0x10/0x11:
 * words received (ro, low/high). */
#include <stdlib.h>
#include "emu/card.h"

struct tsink {
    uint64_t words;
};

static int ts_init(struct emu_dev *d, struct emu_args *a, char *err, size_t cap)
{
    (void)a, (void)err, (void)cap;
    if (!(d->priv = calloc(1, sizeof(struct tsink))))
        return ONI_EBADALLOC;
    d->desc.write_size = 4;
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
