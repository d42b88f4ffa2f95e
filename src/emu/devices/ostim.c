/* ostim.c - the 64-channel headstage's optical stimulator (ONIX_OSTIM, hub
 * ONIX_HUB_HS64): a CAT4016 LED/laser driver, programmed and triggered
 * through its registers as Bonsai's ConfigureHeadstage64OpticalStimulator.cs
 * :199-232 and Headstage64OpticalStimulatorTrigger.cs:26 do (register map
 * :265-279): 1 MAXCURRENT (potentiometer setting, 255 = 0 mA), 2 PULSEMASK,
 * 11 RESTMASK (channel bit masks), 3 PULSEDUR, 4 PULSEPERIOD, 6 IBI,
 * 8 TRAINDELAY (microseconds), 5 BURSTCOUNT, 7 TRAINCOUNT, 9 TRIGGER
 * (1 = deliver), 10 ENABLE (0: triggers are ignored), 12 RESET, 13 MINRHEOR
 * (590 ohm) and 14 POTRES (100 kohm), read-only (:242-243). No data stream.
 * An obeyed trigger starts a train at trigger + TRAINDELAY; its times are
 * kept in its struct hs64_stim (headstages.h). */
#include <stdlib.h>
#include <string.h>
#include "emu/card.h"
#include "emu/headstages.h"

enum {
    OS_MAXCURRENT = 1, OS_PULSEMASK = 2, OS_PULSEDUR = 3, OS_PULSEPERIOD = 4, OS_BURSTCOUNT = 5, OS_IBI = 6,
    OS_TRAINCOUNT = 7, OS_TRAINDELAY = 8, OS_TRIGGER = 9, OS_ENABLE = 10, OS_RESTMASK = 11, OS_RESET = 12,
    OS_MINRHEOR = 13, OS_POTRES = 14, OS_NREG = 15
};

static void os_defaults(struct hs64_stim *s)
{
    memset(s->reg, 0, sizeof s->reg);
    s->reg[OS_MAXCURRENT] = 255;
    s->reg[OS_PULSEDUR] = 5000;
    s->reg[OS_PULSEPERIOD] = 10000;
    s->reg[OS_BURSTCOUNT] = s->reg[OS_TRAINCOUNT] = 1;
    s->reg[OS_MINRHEOR] = 590;
    s->reg[OS_POTRES] = 100000;
}

static uint64_t os_train_us(const uint32_t *r)
{
    uint64_t pulses = r[OS_BURSTCOUNT] ? r[OS_BURSTCOUNT] : 1, bursts = r[OS_TRAINCOUNT] ? r[OS_TRAINCOUNT] : 1;
    uint64_t burst = (pulses - 1) * r[OS_PULSEPERIOD] + r[OS_PULSEDUR];
    return bursts * burst + (bursts - 1) * r[OS_IBI];
}

static int os_init(struct emu_dev *d, struct emu_args *a, char *err, size_t cap)
{
    (void)a, (void)err, (void)cap;
    struct hs64_stim *s = calloc(1, sizeof *s);
    if (!(d->priv = s))
        return ONI_EBADALLOC;
    s->nreg = OS_NREG;
    os_defaults(s);
    return 0;
}

static void os_fini(struct emu_dev *d) { free(d->priv); }

static int os_read(struct emu_dev *d, uint32_t addr, uint32_t *v)
{
    struct hs64_stim *s = d->priv;
    if (addr == 0 || addr >= OS_NREG)
        return 0;
    *v = s->reg[addr];
    return 1;
}

static int os_write(struct emu_dev *d, uint32_t addr, uint32_t v)
{
    struct hs64_stim *s = d->priv;
    switch (addr) {
    case OS_MINRHEOR: case OS_POTRES: return 0; /* read-only */
    case OS_RESET:
        if (v)
            os_defaults(s);
        return 1;
    case OS_MAXCURRENT:
        if (v > 255)
            return 0;
        break;
    case OS_TRIGGER:
        s->reg[addr] = v;
        if (v == 1)
            hs64_stim_trigger(s, d->card, s->reg[OS_ENABLE] != 0, s->reg[OS_TRAINDELAY], os_train_us(s->reg));
        return 1;
    default:
        if (addr == 0 || addr >= OS_NREG)
            return 0;
    }
    s->reg[addr] = v;
    return 1;
}

const struct emu_devtype emu_dev_ostim = {
    .name = "ostim", .id = ONIX_OSTIM, .hub_kind = ONIX_HUB_HS64, .init = os_init, .fini = os_fini,
    .reg_read = os_read, .reg_write = os_write,
};
