/* rhd2164.c - Intan RHD2164 on the 64-channel headstage's hub (ONIX_RHD2164,
 * hub ONIX_HUB_HS64): 64 amplifier channels and 3 auxiliary inputs sampled
 * at 30 kHz (Bonsai Rhd2164Data.cs, Rhd2000DataFrame.cs:64-69).
 * Payload, 142 bytes: [u64 hub clock][u16 amplifier[64]][u16 aux[3]].
 * Amplifier codes: 0.195 uV/LSB, offset binary (32768 = 0 V), or two's
 * complement while FORMAT bit 6 is set (Intan RHD2000 data sheet, register 4).
 *
 * Registers (Bonsai Rhd2000.cs:9-35, ConfigureRhd2164.cs:41-95; data sheet):
 * 0x00..0x15 the chip's read-write registers, 0x28..0x2C "INTAN", 0x3C die
 * revision, 0x3D amplifier polarity (0: bipolar), 0x3E amplifiers (64),
 * 0x3F chip id (4 = RHD2164), all read-only; 0x8000 ENABLE, the stream on or
 * off (the hub's own register, not the chip's). The bandwidth registers are
 * stored, the signal's band stays that of neural.h. Arguments: the signal's
 * knobs (neural.h; units default 8). */
#include <stdlib.h>
#include <string.h>
#include "emu/neural.h"

#define RHD_CH 64
#define RHD_AUX 3
#define RHD_ENABLE 0x8000u
#define RHD_FORMAT 0x04u
#define RHD_TWOSCOMP (1u << 6)

struct rhd {
    struct neural n;
    uint8_t reg[0x40];
    uint64_t count;
};

/* Power-on values the headstage's FPGA leaves: the data sheet's
 * recommendations for 30 kS/s per channel, amplifiers on, offset binary. */
static void rhd_defaults(struct rhd *p)
{
    static const uint8_t init[0x16] = {
        0xDE, 0x20, 0x28, 0x02, 0x1C, 0x00, 0x00, 0x00, /* 0x04: DSP on, cutoff 12 (offset binary) */
        0x16, 0x17, 0xA8, 0x80, 0x10, 0x7C,             /* bandwidth: ~7.5 kHz .. ~0.1 Hz */
        0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, /* every amplifier powered */
    };
    memset(p->reg, 0, sizeof p->reg);
    memcpy(p->reg, init, sizeof init);
    memcpy(p->reg + 0x28, "INTAN", 5);
    p->reg[0x3C] = 0;  /* die revision */
    p->reg[0x3D] = 0;  /* bipolar amplifiers */
    p->reg[0x3E] = 64; /* amplifiers */
    p->reg[0x3F] = 4;  /* RHD2164 */
}

static int rhd_init(struct emu_dev *d, struct emu_args *a, char *err, size_t cap)
{
    /* wideband, 0.195 uV per code (Intan RHD2164 data sheet; onix-bonsai-onix1-docs
     * reference.md), sites of a line 20 um apart */
    struct neural_cfg sig;
    neural_cfg_default(&sig, NEURAL_WIDE, 0.195);
    sig.units = 8;
    int rc = neural_cfg_args(&sig, a, err, cap);
    if (rc)
        return rc;
    struct rhd *p = calloc(1, sizeof *p);
    if (!p)
        return ONI_EBADALLOC;
    d->priv = p; /* rhd_fini frees what a failure below leaves (card.h) */
    d->enable_reg = RHD_ENABLE; /* the card's ENABLE; register 0 is the chip's ADCCONF */
    rhd_defaults(p);
    if ((rc = neural_init(&p->n, d->card, d->desc.idx, 0, RHD_CH, 30000, 0, 65535, 32768, &sig)) != 0)
        return rc;
    d->desc.read_size = 8 + RHD_CH * 2 + RHD_AUX * 2;
    return emu_dev_set_rate(d, 30000 * 1000ull);
}

static void rhd_fini(struct emu_dev *d)
{
    struct rhd *p = d->priv;
    if (p)
        neural_fini(&p->n);
    free(p);
}

static void rhd_fill(struct emu_dev *d, uint8_t *out, uint64_t t)
{
    struct rhd *p = d->priv;
    uint64_t clk = emu_dev_hub_clock(d, t);
    uint16_t amp[RHD_CH];
    memcpy(out, &clk, 8);
    neural_sample(&p->n, amp, t);
    if (p->reg[RHD_FORMAT] & RHD_TWOSCOMP)
        for (int i = 0; i < RHD_CH; i++)
            amp[i] ^= 0x8000; /* offset binary to two's complement */
    memcpy(out + 8, amp, sizeof amp);
    /* aux inputs (0.0000374 V/LSB, unsigned): slow ramps, as from a connected accelerometer */
    uint16_t aux[RHD_AUX] = {(uint16_t)(32768 + (p->count >> 4)), (uint16_t)(32768 - (p->count >> 5)), 32768};
    memcpy(out + 8 + RHD_CH * 2, aux, sizeof aux);
    p->count++;
}

static int rhd_reg_read(struct emu_dev *d, uint32_t addr, uint32_t *v)
{
    struct rhd *p = d->priv;
    if (addr >= sizeof p->reg)
        return 0;
    *v = p->reg[addr];
    return 1;
}

static int rhd_reg_write(struct emu_dev *d, uint32_t addr, uint32_t v)
{
    struct rhd *p = d->priv;
    if (addr > 0x15 || v > 0xFF)
        return 0; /* read-only or not a register; a register is 8 bits wide */
    p->reg[addr] = (uint8_t)v;
    return 1;
}

const struct emu_devtype emu_dev_rhd2164 = {
    .name = "rhd2164", .id = ONIX_RHD2164, .hub_kind = ONIX_HUB_HS64, .init = rhd_init, .fini = rhd_fini,
    .fill = rhd_fill, .reg_read = rhd_reg_read, .reg_write = rhd_reg_write,
};
