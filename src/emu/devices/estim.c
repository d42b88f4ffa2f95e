/* estim.c - the 64-channel headstage's electrical stimulator (ONIX_ESTIM,
 * hub ONIX_HUB_HS64), programmed and triggered through its registers as
 * Bonsai's ConfigureHeadstage64ElectricalStimulator.cs:162-187 and
 * Headstage64ElectricalStimulatorTrigger.cs:27 do (register map :203-220):
 * 1 BIPHASIC, 2 CURRENT1, 3 CURRENT2, 15 RESTCURR (16-bit DAC codes over
 * +-2500 uA, :199-200, :222-226), 4 PULSEDUR1, 5 INTERPHASEINTERVAL,
 * 6 PULSEDUR2, 7 INTERPULSEINTERVAL, 8 BURSTCOUNT, 9 INTERBURSTINTERVAL,
 * 10 TRAINCOUNT, 11 TRAINDELAY (times in microseconds, as Bonsai writes its
 * properties), 12 TRIGGER (1 = deliver), 13 POWERON, 14 ENABLE (0: triggers
 * are ignored), 16 RESET (1: every parameter to its default), 17 REZ (DAC
 * bits, 16, read-only). No data stream. A trigger that is obeyed (ENABLE
 * and POWERON set) starts a pulse train at trigger + TRAINDELAY; its times
 * are kept in its struct hs64_stim (headstages.h). */
#include <stdlib.h>
#include <string.h>
#include "emu/card.h"
#include "emu/headstages.h"

enum {
    ES_BIPHASIC = 1, ES_CURRENT1 = 2, ES_CURRENT2 = 3, ES_PULSEDUR1 = 4, ES_IPHI = 5, ES_PULSEDUR2 = 6,
    ES_IPI = 7, ES_BURSTCOUNT = 8, ES_IBI = 9, ES_TRAINCOUNT = 10, ES_TRAINDELAY = 11, ES_TRIGGER = 12,
    ES_POWERON = 13, ES_ENABLE = 14, ES_RESTCURR = 15, ES_RESET = 16, ES_REZ = 17, ES_NREG = 18
};

#define ES_ZERO_UA 32767u /* DAC code of 0 uA: (2^16 - 1) / 2 */

static void es_defaults(struct hs64_stim *s)
{
    memset(s->reg, 0, sizeof s->reg);
    s->reg[ES_BIPHASIC] = 1;
    s->reg[ES_CURRENT1] = s->reg[ES_CURRENT2] = s->reg[ES_RESTCURR] = ES_ZERO_UA;
    s->reg[ES_PULSEDUR1] = s->reg[ES_PULSEDUR2] = 100;
    s->reg[ES_BURSTCOUNT] = s->reg[ES_TRAINCOUNT] = 1;
    s->reg[ES_REZ] = 16;
}

/* Microseconds from train start to train end. */
static uint64_t es_train_us(const uint32_t *r)
{
    uint64_t pulse = (uint64_t)r[ES_PULSEDUR1] + r[ES_IPHI] + r[ES_PULSEDUR2];
    uint64_t pulses = r[ES_BURSTCOUNT] ? r[ES_BURSTCOUNT] : 1, bursts = r[ES_TRAINCOUNT] ? r[ES_TRAINCOUNT] : 1;
    uint64_t burst = pulses * pulse + (pulses - 1) * r[ES_IPI];
    return bursts * burst + (bursts - 1) * r[ES_IBI];
}

void hs64_stim_trigger(struct hs64_stim *s, struct emu_card *c, int on, uint32_t delay_us, uint64_t train_us)
{
    if (!on) {
        s->ignored++;
        return;
    }
    s->triggers++;
    s->trigger = emu_card_now(c);
    s->start = s->trigger + (uint64_t)delay_us * (EMU_ACQ_HZ / 1000000);
    s->end = s->start + train_us * (EMU_ACQ_HZ / 1000000);
}

static int es_init(struct emu_dev *d, struct emu_args *a, char *err, size_t cap)
{
    (void)a, (void)err, (void)cap;
    struct hs64_stim *s = calloc(1, sizeof *s);
    if (!(d->priv = s))
        return ONI_EBADALLOC;
    s->nreg = ES_NREG;
    es_defaults(s);
    return 0;
}

static void es_fini(struct emu_dev *d) { free(d->priv); }

static int es_read(struct emu_dev *d, uint32_t addr, uint32_t *v)
{
    struct hs64_stim *s = d->priv;
    if (addr == 0 || addr >= ES_NREG)
        return 0;
    *v = s->reg[addr];
    return 1;
}

static int es_write(struct emu_dev *d, uint32_t addr, uint32_t v)
{
    struct hs64_stim *s = d->priv;
    switch (addr) {
    case ES_REZ: return 0; /* read-only */
    case ES_RESET:
        if (v)
            es_defaults(s);
        return 1;
    case ES_TRIGGER:
        s->reg[addr] = v;
        if (v == 1)
            hs64_stim_trigger(s, d->card, s->reg[ES_ENABLE] && s->reg[ES_POWERON], s->reg[ES_TRAINDELAY],
                              es_train_us(s->reg));
        return 1;
    case ES_CURRENT1: case ES_CURRENT2: case ES_RESTCURR:
        if (v > 0xFFFF)
            return 0; /* a 16-bit DAC code */
        break;
    default:
        if (addr == 0 || addr >= ES_NREG)
            return 0;
    }
    s->reg[addr] = v;
    return 1;
}

const struct emu_devtype emu_dev_estim = {
    .name = "estim", .id = ONIX_ESTIM, .hub_kind = ONIX_HUB_HS64, .init = es_init, .fini = es_fini,
    .reg_read = es_read, .reg_write = es_write,
};
