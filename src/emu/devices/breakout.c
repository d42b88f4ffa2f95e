/* breakout.c - the host hub's breakout board digital I/O (ONIX BREAKDIG1R3).
 * Inputs: digital input 0 carries a square wave (a sync pulse train) of
 * `hz` Hz; the board emits a frame at each edge, as the card does on an
 * input change: [u16 digital inputs][u16 buttons][u16 link state][u16 0].
 * Outputs: a write frame of one or more words sets the digital outputs to
 * its first word (low 8 bits). Registers from ONIEMU_REG_DEVICE (oniemu.h):
 * +0 OUTPUTS (ro, the last value written), +1 PULSE_HZ (ro). Argument: hz=N (default 1, 1..10000). */
#include <stdlib.h>
#include <string.h>
#include "emu/card.h"

struct brk {
    uint32_t hz, outputs;
    uint16_t inputs;
};

static int brk_init(struct emu_dev *d, struct emu_args *a, char *err, size_t cap)
{
    uint64_t hz;
    int rc = emu_arg_u64(a, "hz", 1, 1, 10000, 1, &hz, err, cap);
    if (rc)
        return rc;
    struct brk *p = calloc(1, sizeof *p);
    if (!p)
        return ONI_EBADALLOC;
    p->hz = (uint32_t)hz;
    d->priv = p;
    d->desc.read_size = 8;
    d->desc.write_size = 4;
    return emu_dev_set_rate(d, hz * 2 * 1000); /* two edges per period */
}

static void brk_fini(struct emu_dev *d) { free(d->priv); }

static void brk_fill(struct emu_dev *d, uint8_t *out, uint64_t t)
{
    (void)t;
    struct brk *p = d->priv;
    p->inputs ^= 1; /* this edge */
    uint16_t v[4] = {p->inputs, 0, 0x3, 0};
    memcpy(out, v, sizeof v);
}

static void brk_write(struct emu_dev *d, const uint8_t *src, size_t n, uint64_t t)
{
    (void)n, (void)t;
    struct brk *p = d->priv;
    memcpy(&p->outputs, src, 4);
    p->outputs &= 0xFF;
}

static int brk_reg_read(struct emu_dev *d, uint32_t addr, uint32_t *v)
{
    struct brk *p = d->priv;
    switch (addr) {
    case EMU_REG_DEVICE: *v = p->outputs; return 1;
    case EMU_REG_DEVICE + 1: *v = p->hz; return 1;
    }
    return 0;
}

const struct emu_devtype emu_dev_breakout = {
    "breakout", ONIX_BREAKDIG1R3, 0, brk_init, brk_fini, brk_fill, brk_reg_read, NULL, brk_write, NULL,
};
