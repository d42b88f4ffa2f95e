/* heartbeat.c - host-hub heartbeat (ONIX HEARTBEAT): frames of the hub clock
 * count, [u64 hub clock], at a configurable rate. Registers: ONIX ENABLE,
 * CLK_DIV, CLK_HZ; the emulator's RATE_HZ is writable too. Argument: hz=N
 * (default 100, 1..1000000). */
#include <string.h>
#include "emu/card.h"

#define HB_MAX_HZ 1000000

static int hb_init(struct emu_dev *d, struct emu_args *a, char *err, size_t cap)
{
    uint64_t hz;
    int rc = emu_arg_u64(a, "hz", 100, 1, HB_MAX_HZ, 1, &hz, err, cap);
    if (rc)
        return rc;
    d->desc.read_size = 8;
    return emu_dev_set_hz(d, hz, HB_MAX_HZ);
}

static void hb_fill(struct emu_dev *d, uint8_t *out, uint64_t t)
{
    uint64_t clock = emu_dev_hub_clock(d, t);
    memcpy(out, &clock, 8);
}

static int hb_reg_write(struct emu_dev *d, uint32_t addr, uint32_t v)
{
    return emu_dev_clk_write(d, addr, v, HB_MAX_HZ);
}

const struct emu_devtype emu_dev_heartbeat = {
    "heartbeat", ONIX_HEARTBEAT, 0, hb_init, NULL, hb_fill, emu_dev_clk_read, hb_reg_write, NULL, NULL,
};
