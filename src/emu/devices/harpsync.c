/* harpsync.c - the breakout board's Harp synchronization input (ONIX
 * HARPSYNCINPUT, version 2 as Bonsai ConfigureHarpSyncInput.cs:39-40
 * requires), host hub index 12. Registers (ConfigureHarpSyncInput.cs:43-44):
 * ENABLE 0, SOURCE 1 (0 breakout, 1 clock adapter). Frames, once a second
 * as the Harp clock's seconds roll over (12 bytes,
 * HarpSyncInputDataFrame.cs): [u64 hub clock][u32 Harp seconds]. The
 * emulated Harp clock counts from second 0 after each RESET. */
#include <stdlib.h>
#include <string.h>
#include "emu/card.h"

struct harp {
    uint32_t source, seconds;
};

static int harp_init(struct emu_dev *d, struct emu_args *a, char *err, size_t cap)
{
    d->desc.version = 2;
    (void)a, (void)err, (void)cap;
    if (!(d->priv = calloc(1, sizeof(struct harp))))
        return ONI_EBADALLOC;
    d->desc.read_size = 12;
    return emu_dev_set_rate(d, 1000);
}

static void harp_fini(struct emu_dev *d) { free(d->priv); }

static void harp_fill(struct emu_dev *d, uint8_t *out, uint64_t t)
{
    struct harp *p = d->priv;
    uint64_t clock = emu_dev_hub_clock(d, t);
    memcpy(out, &clock, 8);
    memcpy(out + 8, &p->seconds, 4);
    p->seconds++;
}

static int harp_reg_read(struct emu_dev *d, uint32_t addr, uint32_t *v)
{
    if (addr != 1)
        return 0;
    *v = ((struct harp *)d->priv)->source;
    return 1;
}

static int harp_reg_write(struct emu_dev *d, uint32_t addr, uint32_t v)
{
    if (addr != 1 || v > 1)
        return 0;
    ((struct harp *)d->priv)->source = v;
    return 1;
}

static void harp_reset(struct emu_dev *d) { ((struct harp *)d->priv)->seconds = 0; }

const struct emu_devtype emu_dev_harpsync = {
    "harpsync", ONIX_HARPSYNCINPUT, 0, harp_init, harp_fini, harp_fill, harp_reg_read, harp_reg_write, NULL,
    harp_reset,
};
