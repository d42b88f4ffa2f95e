/* outclock.c - the breakout board's clock output (ONIX FMCCLKOUT1R3 =
 * OutputClock, version 1; Bonsai ConfigureOutputClock.cs:106-115), host hub
 * index 5. No frames. Registers: 0 NULL (no command: reads 0, writes are
 * accepted and do nothing), CLOCK_GATE 1 (bit 0), HIGH_CYCLES 2 and
 * LOW_CYCLES 3 (>= 1), DELAY_CYCLES 4, GATE_RUN 5 (bit 0), BASE_FREQ_HZ 6 (ro:
 * the hub clock). The emulator keeps the settings; nothing is wired to the
 * output. */
#include <stdlib.h>
#include "emu/card.h"

struct oclk {
    uint32_t reg[6];
};

static int oclk_init(struct emu_dev *d, struct emu_args *a, char *err, size_t cap)
{
    d->desc.version = 1;
    d->enable_reg = EMU_NO_ENABLE;
    (void)a, (void)err, (void)cap;
    struct oclk *p = calloc(1, sizeof *p);
    if (!p)
        return ONI_EBADALLOC;
    p->reg[2] = p->reg[3] = 1;
    d->priv = p;
    return 0;
}

static void oclk_fini(struct emu_dev *d) { free(d->priv); }

static int oclk_reg_read(struct emu_dev *d, uint32_t addr, uint32_t *v)
{
    if (addr == 6) {
        *v = emu_dev_hub_hz(d);
        return 1;
    }
    if (addr > 5)
        return 0;
    *v = ((struct oclk *)d->priv)->reg[addr];
    return 1;
}

static int oclk_reg_write(struct emu_dev *d, uint32_t addr, uint32_t v)
{
    struct oclk *p = d->priv;
    switch (addr) {
    case 0: return 1;
    case 1:
    case 5:
        if (v > 1)
            return 0;
        break;
    case 2:
    case 3:
        if (v < 1)
            return 0;
        break;
    case 4: break;
    default: return 0;
    }
    p->reg[addr] = v;
    return 1;
}

const struct emu_devtype emu_dev_outclock = {
    "outclock", ONIX_FMCCLKOUT1R3, 0, oclk_init, oclk_fini, NULL, oclk_reg_read, oclk_reg_write, NULL, NULL,
};
