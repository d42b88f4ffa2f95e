/* loadtest.c - load-test device (ONIX LOADTEST): frames of a configurable
 * size at a configurable rate to load the host and the link, [u64 hub
 * clock][u16 42 x FRAME_WORDS] as in the ONIX datasheet; accepts write frames
 * of any whole number of 32-bit words (counted, else ignored). Registers: ONIX
 * ENABLE, CLK_DIV, CLK_HZ, FRAME_WORDS (takes effect on RESET, when the new
 * device table announces the new size); the emulator's RATE_HZ is writable
 * too. Arguments: hz=N (default 1000, 1..25000000), bytes=N (default 64,
 * even, >= 8: the initial frame size). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emu/card.h"

#define LT_MAX_HZ 25000000
#define LT_MAX_WORDS ((EMU_MAX_READ - 8) / 2)
#define LT_WORD 42

struct lt {
    uint32_t words, next_words; /* FRAME_WORDS in use; written, for the next reset */
};

static int lt_init(struct emu_dev *d, struct emu_args *a, char *err, size_t cap)
{
    uint64_t hz, bytes;
    int rc;
    if ((rc = emu_arg_u64(a, "hz", 1000, 1, LT_MAX_HZ, 1, &hz, err, cap)) ||
        (rc = emu_arg_u64(a, "bytes", 64, 8, EMU_MAX_READ, 0, &bytes, err, cap)))
        return rc;
    if (bytes % 2) {
        snprintf(err, cap, "loadtest: bytes=%llu is not a multiple of 2", (unsigned long long)bytes);
        return ONI_EINVALARG;
    }
    struct lt *p = calloc(1, sizeof *p);
    if (!p)
        return ONI_EBADALLOC;
    d->priv = p;
    p->words = p->next_words = (uint32_t)(bytes - 8) / 2;
    d->desc.read_size = (uint32_t)bytes;
    d->desc.write_size = 4;
    return emu_dev_set_hz(d, hz, LT_MAX_HZ);
}

static void lt_fini(struct emu_dev *d) { free(d->priv); }

static void lt_fill(struct emu_dev *d, uint8_t *out, uint64_t t)
{
    const struct lt *p = d->priv;
    uint64_t clock = emu_dev_hub_clock(d, t);
    memcpy(out, &clock, 8);
    for (uint32_t i = 0; i < p->words; i++) {
        uint16_t w = LT_WORD;
        memcpy(out + 8 + 2 * i, &w, 2);
    }
}

static int lt_reg_read(struct emu_dev *d, uint32_t addr, uint32_t *v)
{
    if (addr == ONIX_LOADTEST_FRAME_WORDS) {
        *v = ((const struct lt *)d->priv)->next_words;
        return 1;
    }
    return emu_dev_clk_read(d, addr, v);
}

static int lt_reg_write(struct emu_dev *d, uint32_t addr, uint32_t v)
{
    if (addr != ONIX_LOADTEST_FRAME_WORDS)
        return emu_dev_clk_write(d, addr, v, LT_MAX_HZ);
    if (v > LT_MAX_WORDS)
        return 0;
    ((struct lt *)d->priv)->next_words = v;
    return 1;
}

static void lt_reset(struct emu_dev *d)
{
    struct lt *p = d->priv;
    p->words = p->next_words;
    d->desc.read_size = 8 + 2 * p->words;
}

const struct emu_devtype emu_dev_loadtest = {
    "loadtest", ONIX_LOADTEST, 0, lt_init, lt_fini, lt_fill, lt_reg_read, lt_reg_write, NULL, lt_reset,
};
