/* persthb.c - the breakout board's persistent heartbeat (ONIX
 * PERSTHEARTBEAT, version 1; Bonsai ConfigurePersistentHeartbeat.cs:76-89),
 * host hub index 0. Always on: ENABLE (0) reads 1 and takes no writes.
 * CLK_DIV (1, rw: CLK_HZ / 10 MHz .. CLK_HZ / MIN_HB_HZ, else NACK), CLK_HZ
 * (2, ro: the hub clock), MIN_HB_HZ (3, ro). Frames: [u64 hub clock].
 * Argument: hz=N (default 100, MIN_HB_HZ..10000000). */
#include <string.h>
#include "emu/card.h"

#define PHB_MIN_HZ 100 /* MIN_HB_HZ: not public; Bonsai's default rate (100) must pass its check */
#define PHB_MAX_HZ 10000000

static int phb_init(struct emu_dev *d, struct emu_args *a, char *err, size_t cap)
{
    d->desc.version = 1;
    d->enable_reg = EMU_NO_ENABLE;
    uint64_t hz;
    int rc = emu_arg_u64(a, "hz", 100, PHB_MIN_HZ, PHB_MAX_HZ, 1, &hz, err, cap);
    if (rc)
        return rc;
    d->desc.read_size = 8;
    return emu_dev_set_clk_div(d, emu_dev_hub_hz(d) / (uint32_t)hz, PHB_MAX_HZ);
}

static void phb_fill(struct emu_dev *d, uint8_t *out, uint64_t t)
{
    uint64_t clock = emu_dev_hub_clock(d, t);
    memcpy(out, &clock, 8);
}

static int phb_reg_read(struct emu_dev *d, uint32_t addr, uint32_t *v)
{
    switch (addr) {
    case 0: *v = 1; return 1;
    case 1: *v = d->clk_div; return 1;
    case 2: *v = emu_dev_hub_hz(d); return 1;
    case 3: *v = PHB_MIN_HZ; return 1;
    }
    return 0;
}

static int phb_reg_write(struct emu_dev *d, uint32_t addr, uint32_t v)
{
    if (addr != 1 || v == 0 || v > emu_dev_hub_hz(d) / PHB_MIN_HZ)
        return 0;
    return emu_dev_set_clk_div(d, v, PHB_MAX_HZ) == 0;
}

const struct emu_devtype emu_dev_persthb = {
    "persthb", ONIX_PERSTHEARTBEAT, 0, phb_init, NULL, phb_fill, phb_reg_read, phb_reg_write, NULL, NULL,
};
