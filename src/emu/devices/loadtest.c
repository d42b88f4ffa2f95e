/* loadtest.c - load-test device (ONIX LOADTEST): frames of a configurable
 * size at a configurable rate, [u64 frame count][u32 words counting up from
 * the frame count's low word...], to load the host and the link; accepts
 * write frames of any whole number of words. Arguments: hz=N (default 1000,
 * 1..25000000), bytes=N (default 64, multiple of 4, >= 8). RATE_HZ is writable. */
#include <stdio.h>
#include <string.h>
#include "emu/card.h"

static int lt_init(struct emu_dev *d, struct emu_args *a, char *err, size_t cap)
{
    uint64_t hz, bytes;
    int rc;
    if ((rc = emu_arg_u64(a, "hz", 1000, 1, 25000000, 1, &hz, err, cap)) ||
        (rc = emu_arg_u64(a, "bytes", 64, 8, EMU_MAX_READ, 0, &bytes, err, cap)))
        return rc;
    if (bytes % 4) {
        snprintf(err, cap, "loadtest: bytes=%llu is not a multiple of 4", (unsigned long long)bytes);
        return ONI_EINVALARG;
    }
    d->desc.read_size = (uint32_t)bytes;
    d->desc.write_size = 4;
    return emu_dev_set_rate(d, hz * 1000);
}

static void lt_fill(struct emu_dev *d, uint8_t *out, uint64_t t)
{
    (void)t;
    uint64_t n = d->frames;
    memcpy(out, &n, 8);
    uint32_t *w = (uint32_t *)(void *)(out + 8);
    for (uint32_t i = 0; i < (d->desc.read_size - 8) / 4; i++)
        w[i] = (uint32_t)n + i;
}

static int lt_reg_write(struct emu_dev *d, uint32_t addr, uint32_t v)
{
    if (addr != EMU_REG_RATE_HZ || v < 1 || v > 25000000)
        return 0;
    return emu_dev_set_rate(d, (uint64_t)v * 1000) == 0;
}

const struct emu_devtype emu_dev_loadtest = {
    "loadtest", ONIX_LOADTEST, 0, lt_init, NULL, lt_fill, NULL, lt_reg_write, NULL,
};
