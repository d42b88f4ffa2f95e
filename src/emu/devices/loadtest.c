/* loadtest.c - load-test device (ONIX LOADTEST = LoadTester, version 2 as
 * Bonsai ConfigureLoadTester.cs:124-125 requires): frames of a configurable
 * size at a configurable rate to load the host and the link. Registers
 * (ConfigureLoadTester.cs:127-132): ENABLE 0, CLK_DIV 1, CLK_HZ 2 (ro),
 * DT0H16_WORDS 3 (16-bit counter words per read frame), HTOD32_WORDS 4
 * (32-bit dummy words after the loopback value in a write frame), DTOH_START
 * 5 (the counter's first value); the word counts take effect on RESET, when
 * the new device table announces the new frame size; the emulator's RATE_HZ
 * is writable too. Read frames (LoadTesterDataFrame.cs:34-39): [u64 hub
 * clock][u64 hub clock delta: the hub clock when the last loopback frame
 * arrived minus the value it carried, 0 before the first (the tutorial's
 * "timestamps its arrival", bonsai-onix1-docs tune-readsize.md)][u16 counter
 * x DT0H16_WORDS], the counter counting up by one per
 * word from DTOH_START, across frames. Write frames: [u64 loopback value]
 * [u32 dummy x HTOD32_WORDS] (LoadTesterLoopback.cs:41-47): the table's
 * write_size is that frame, 8 + 4 x HTOD32_WORDS, from the RESET after the
 * write (no public source gives the firmware's write_size; this one takes
 * exactly the frames Bonsai writes). Arguments:
 * hz=N (default 1000, 1..25000000), bytes=N (default 64, even, >= 16: the
 * initial frame size, 16 + 2 x DT0H16_WORDS). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emu/card.h"

#define LT_MAX_HZ 25000000
#define LT_MAX_WORDS ((EMU_MAX_READ - 16) / 2)
#define LT_MAX_HTOD ((EMU_MAX_READ - 8) / 4)
enum { LT_DTOH_WORDS = 3, LT_HTOD_WORDS, LT_DTOH_START };

struct lt {
    uint32_t words, next_words; /* DT0H16_WORDS in use; written, for the next reset */
    uint32_t next_htod, start; /* HTOD32_WORDS written, for the next reset */
    uint16_t counter;
    uint64_t delta; /* of the last loopback frame, at its arrival */
};

static int lt_init(struct emu_dev *d, struct emu_args *a, char *err, size_t cap)
{
    d->desc.version = 2;
    uint64_t hz, bytes;
    int rc;
    if ((rc = emu_arg_u64(a, "hz", 1000, 1, LT_MAX_HZ, 1, &hz, err, cap)) ||
        (rc = emu_arg_u64(a, "bytes", 64, 16, EMU_MAX_READ, 0, &bytes, err, cap)))
        return rc;
    if (bytes % 2) {
        snprintf(err, cap, "loadtest: bytes=%llu is not a multiple of 2", (unsigned long long)bytes);
        return ONI_EINVALARG;
    }
    struct lt *p = calloc(1, sizeof *p);
    if (!p)
        return ONI_EBADALLOC;
    d->priv = p;
    p->words = p->next_words = (uint32_t)(bytes - 16) / 2;
    d->desc.read_size = 16 + 2 * p->words;
    d->desc.write_size = 8;
    return emu_dev_set_hz(d, hz, LT_MAX_HZ);
}

static void lt_fini(struct emu_dev *d) { free(d->priv); }

static void lt_fill(struct emu_dev *d, uint8_t *out, uint64_t t)
{
    struct lt *p = d->priv;
    uint64_t clock = emu_dev_hub_clock(d, t);
    memcpy(out, &clock, 8);
    memcpy(out + 8, &p->delta, 8);
    for (uint32_t i = 0; i < p->words; i++, p->counter++)
        memcpy(out + 16 + 2 * i, &p->counter, 2);
}

static void lt_write(struct emu_dev *d, const uint8_t *src, size_t n, uint64_t t)
{
    uint64_t value;
    if (n < 8)
        return;
    memcpy(&value, src, 8);
    ((struct lt *)d->priv)->delta = emu_dev_hub_clock(d, t) - value;
}

static int lt_reg_read(struct emu_dev *d, uint32_t addr, uint32_t *v)
{
    const struct lt *p = d->priv;
    switch (addr) {
    case LT_DTOH_WORDS: *v = p->next_words; return 1;
    case LT_HTOD_WORDS: *v = p->next_htod; return 1;
    case LT_DTOH_START: *v = p->start; return 1;
    }
    return emu_dev_clk_read(d, addr, v);
}

static int lt_reg_write(struct emu_dev *d, uint32_t addr, uint32_t v)
{
    struct lt *p = d->priv;
    switch (addr) {
    case LT_DTOH_WORDS:
        if (v > LT_MAX_WORDS)
            return 0;
        p->next_words = v;
        return 1;
    case LT_HTOD_WORDS:
        if (v > LT_MAX_HTOD)
            return 0;
        p->next_htod = v;
        return 1;
    case LT_DTOH_START:
        if (v > 0xFFFF)
            return 0;
        p->start = v;
        return 1;
    }
    return emu_dev_clk_write(d, addr, v, LT_MAX_HZ);
}

static void lt_reset(struct emu_dev *d)
{
    struct lt *p = d->priv;
    p->words = p->next_words;
    p->counter = (uint16_t)p->start;
    d->desc.read_size = 16 + 2 * p->words;
    d->desc.write_size = 8 + 4 * p->next_htod;
}

const struct emu_devtype emu_dev_loadtest = {
    "loadtest", ONIX_LOADTEST, 0, lt_init, lt_fini, lt_fill, lt_reg_read, lt_reg_write, lt_write, lt_reset,
};
