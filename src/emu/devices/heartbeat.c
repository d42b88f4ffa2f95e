/* heartbeat.c - host-hub heartbeat: an 8-byte frame counter at a
 * configurable rate. Arguments: hz=N (default 100, 1..1000000); register
 * RATE_HZ is writable. */
#include <string.h>
#include "emu/card.h"

static int hb_init(struct emu_dev *d, struct emu_args *a, char *err, size_t cap)
{
    uint64_t hz;
    int rc = emu_arg_u64(a, "hz", 100, 1, 1000000, 1, &hz, err, cap);
    if (rc)
        return rc;
    d->desc.read_size = 8;
    return emu_dev_set_rate(d, hz * 1000);
}

static void hb_fill(struct emu_dev *d, uint8_t *out, uint64_t t)
{
    (void)t;
    uint64_t n = d->frames; /* frames generated before this one */
    memcpy(out, &n, 8);
}

static int hb_reg_write(struct emu_dev *d, uint32_t addr, uint32_t v)
{
    if (addr != EMU_REG_RATE_HZ || v < 1 || v > 1000000)
        return 0;
    return emu_dev_set_rate(d, (uint64_t)v * 1000) == 0;
}

const struct emu_devtype emu_dev_heartbeat = {
    "heartbeat", ONIX_HEARTBEAT, 0, hb_init, NULL, hb_fill, NULL, hb_reg_write, NULL,
};
