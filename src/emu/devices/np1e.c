/* np1e.c - the Neuropixels 1.0e headstage: one NP1.0 probe behind a
 * DS90UB933 serializer, a headstage EEPROM and a BNO055 (headstages.h).
 *
 * - serializer registers (0x58): GPIO10 bit 3 takes the probe's MUX out of
 *   reset (a low-high pulse resets it), GPIO32 bit 7 low lights the LED
 *   (ConfigureHeadstageNeuropixelsV1e.cs:119-124, 209-223; onix-source
 *   Neuropixels1e.h:60-63);
 * - headstage EEPROM (0x51): hardware id ONIX_HUB_HSNP1ET (6,
 *   ConfigureHeadstageNeuropixelsV1e.cs:120), revision 1.0;
 * - flex EEPROM (0x50): serial number (u64 at 0), version 10, revision 11,
 *   flex part number 20, probe part number 40 (NeuropixelsV1eMetadata.cs:6-21);
 * - probe ASIC (0x70): NeuropixelsV1.cs:16-31; configured as
 *   NeuropixelsV1RegisterContext.cs:76-144 does: test registers cleared,
 *   REC_MOD ACTIVE, OP_MODE RECORD, the shank chain (121 bytes) and the two
 *   base chains (306 bytes) through npsr.c; a soft reset puts the probe back
 *   in reset (REC_MOD, OP_MODE 0, :140-141). It records while OP_MODE has
 *   RECORD (not POWER_DOWN), REC_MOD is ACTIVE and the MUX is out of reset.
 * - super-frames, 30 kHz: [u64 hub clock][u16 probe index 0][u16 data[13 * 40]]
 *   (NeuropixelsV1eDataFrame.cs:69-75; onix-source Neuropixels1e.cpp:286-316
 *   reads from word 5): frame 0 carries 32 LFP channels, those of super-frame
 *   number mod 12, frames 1..12 the AP band of every channel; ADC k at word
 *   np1e_word(k) of a frame; words 31 and 39 of each frame the frame counter's
 *   high and low 10 bits (NeuropixelsV1eDataFrame.cs:9, :34). 10-bit offset
 *   binary samples (512 = 0 V); AP at 30 kHz, LFP at 2.5 kHz. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emu/headstage.h"
#include "emu/headstages.h"
#include "onix.h"

uint32_t np1e_channel(uint32_t k, uint32_t i)
{
    /* NeuropixelsV1eData.cs:83-115: row k = 24 (k / 2) + k % 2 + 2 i */
    return 24 * (k / 2) + k % 2 + 2 * i;
}

uint32_t np1e_word(uint32_t k)
{
    /* NeuropixelsV1eDataFrame.cs:61-67: 1, 9, 17, 25, 33, 2, 10, ... 7, 15 */
    return 1 + k / 5 + 8 * (k % 5);
}

void np1e_power_on(struct np1e *h)
{
    memset(h->ser, 0, sizeof h->ser);
    h->ser[SER_GPIO10] = (uint8_t)(0x11 | (h->record ? NP1E_GPIO10_MUX : 0)); /* DefaultGPO10Config, :121 */
    h->ser[SER_GPIO32] = 0x91;                                                /* DefaultGPO32Config, :122 */
    memset(h->reg, 0, sizeof h->reg);
    memset(&h->sr, 0, sizeof h->sr);
    if (h->record) {
        h->reg[NP1_OP_MODE] = NP1_OP_RECORD;
        h->reg[NP1_REC_MOD] = NP1_REC_ACTIVE;
        h->reg[NP1_STATUS] = NP_SR_OK;
    }
    bno055_chip_init(&h->bno);
}

void np1e_signal(struct neural_cfg *sig)
{
    /* 10 bits, 1.2e6 / 1024 / gain uV per code at the AP gain 500
     * (onix-bonsai-onix1-docs, articles/getting-started/reference.md) */
    neural_cfg_default(sig, NEURAL_AP, 1.2e6 / 1024 / 500);
    sig->units = 16;
}

void np1e_lfp_signal(const struct neural_cfg *ap, struct neural_cfg *lfp)
{
    neural_cfg_default(lfp, NEURAL_LFP, 1.2e6 / 1024 / 250); /* the LFP gain 250 */
    lfp->lfp_uv = ap->lfp_uv > 0 ? ap->lfp_uv : 50.0;
    lfp->cm_uv = ap->cm_uv, lfp->line_uv = ap->line_uv, lfp->line_hz = ap->line_hz;
    lfp->artefact_hz = ap->artefact_hz, lfp->artefact_uv = ap->artefact_uv, lfp->stim_uv = ap->stim_uv;
    lfp->lowpass_hz = 1000;
}

int np1e_init(struct np1e *h, struct emu_card *card, uint32_t dev_idx, uint64_t sn, const char *pn,
              const struct neural_cfg *sig, int record)
{
    memset(h, 0, sizeof *h);
    h->card = card;
    h->record = record;
    h->present = sn != 0;
    hs_eeprom_build(h->eeprom, ONIX_HUB_HSNP1ET, 1, 0, "Headstage-NeuropixelsV1.0e");
    memset(h->flex, 0xFF, sizeof h->flex);
    for (int b = 0; b < 8; b++)
        h->flex[b] = (uint8_t)(sn >> (8 * b));
    h->flex[10] = 1;
    h->flex[11] = 0;
    memset(h->flex + 20, 0, 40);
    memcpy(h->flex + 20, "NP1_FLEX_0", 10);
    memcpy(h->flex + 40, pn, strlen(pn) < 20 ? strlen(pn) : 20);
    int rc;
    struct neural_cfg lfp;
    np1e_lfp_signal(sig, &lfp);
    if ((rc = neural_init(&h->ap, card, dev_idx, 0, NP1E_CH, NP1E_HZ, 0, 1023, 512, sig)) != 0 ||
        (rc = neural_init(&h->lfp, card, dev_idx, 1, NP1E_CH, NP1E_HZ / 12, 0, 1023, 512, &lfp)) != 0)
        return rc;
    np1e_power_on(h);
    return 0;
}

void np1e_fini(struct np1e *h)
{
    neural_fini(&h->ap);
    neural_fini(&h->lfp);
}

int np1e_streaming(const struct np1e *h)
{
    return h->present && (h->ser[SER_GPIO10] & NP1E_GPIO10_MUX) &&
           (h->reg[NP1_OP_MODE] & (NP1_OP_RECORD | NP1_OP_POWERDOWN)) == NP1_OP_RECORD &&
           (h->reg[NP1_REC_MOD] & NP1_REC_ACTIVE) == NP1_REC_ACTIVE;
}

int np1e_i2c_read(struct np1e *h, uint32_t addr, uint32_t reg, unsigned nbytes, uint64_t t, uint32_t *v)
{
    switch (addr) {
    case HS_I2C_SER: return hs_bytes_read(h->ser, sizeof h->ser, reg, nbytes, v);
    case HS_I2C_EEPROM: return hs_bytes_read(h->eeprom, sizeof h->eeprom, reg, nbytes, v);
    case HS_I2C_BNO055: return bno055_chip_read(&h->bno, reg, nbytes, t, v);
    case HS_I2C_FLEX: return h->present && hs_bytes_read(h->flex, sizeof h->flex, reg, nbytes, v);
    case HS_I2C_NP1_PROBE: return h->present && hs_bytes_read(h->reg, sizeof h->reg, reg, nbytes, v);
    }
    return 0;
}

static void probe_write(struct np1e *h, uint32_t r, uint8_t x)
{
    switch (r) {
    case NP1_SR_CHAIN1: h->reg[NP1_STATUS] = np_sr_shift(&h->sr, r, x, NP1E_SHANK_BYTES, h->shank); return;
    case NP1_SR_CHAIN2: h->reg[NP1_STATUS] = np_sr_shift(&h->sr, r, x, NP1E_BASE_BYTES, h->base[0]); return;
    case NP1_SR_CHAIN3: h->reg[NP1_STATUS] = np_sr_shift(&h->sr, r, x, NP1E_BASE_BYTES, h->base[1]); return;
    case NP1_STATUS: return; /* read-only */
    case NP1_SR_LENGTH1: np_sr_length(&h->sr, 0, x); break;
    case NP1_SR_LENGTH2: np_sr_length(&h->sr, 1, x); break;
    case NP1_SOFT_RESET:
        if (x == 0 && h->reg[NP1_SOFT_RESET] == 0xFF) {
            np_sr_soft_reset(&h->sr);
            h->reg[NP1_STATUS] = 0;
            h->reg[NP1_OP_MODE] = h->reg[NP1_REC_MOD] = 0;
        }
        break;
    }
    h->reg[r] = x;
}

int np1e_i2c_write(struct np1e *h, uint32_t addr, uint32_t reg, unsigned nbytes, uint32_t v)
{
    if (nbytes < 1 || nbytes > 4)
        return 0;
    switch (addr) {
    case HS_I2C_SER:
        if (reg + nbytes > sizeof h->ser)
            return 0;
        for (unsigned i = 0; i < nbytes; i++) {
            uint8_t x = (uint8_t)(v >> (8 * i));
            if (reg + i == SER_GPIO10 && !(x & NP1E_GPIO10_MUX) && (h->ser[SER_GPIO10] & NP1E_GPIO10_MUX))
                h->frames = 0; /* MUX reset: the probe's frame counter restarts */
            h->ser[reg + i] = x;
        }
        return 1;
    case HS_I2C_EEPROM: return 1; /* write-protected: acknowledged, unchanged */
    case HS_I2C_FLEX: return h->present;
    case HS_I2C_BNO055: return bno055_chip_write(&h->bno, reg, nbytes, v);
    case HS_I2C_NP1_PROBE:
        if (!h->present || reg + nbytes > sizeof h->reg)
            return 0;
        for (unsigned i = 0; i < nbytes; i++)
            probe_write(h, reg + i, (uint8_t)(v >> (8 * i)));
        return 1;
    }
    return 0;
}

void np1e_fill(struct np1e *h, uint8_t *out, uint64_t hub_clock, uint64_t t)
{
    uint16_t ap[NP1E_CH], data[NP1E_FRAMES * NP1E_FRAME_WORDS];
    uint32_t j = (uint32_t)(h->frames % 12);
    if (j == 0)
        neural_sample(&h->lfp, h->lfp_now, t);
    neural_sample(&h->ap, ap, t);
    memset(data, 0, sizeof data);
    for (uint32_t f = 0; f < NP1E_FRAMES; f++) {
        uint16_t *w = data + f * NP1E_FRAME_WORDS;
        for (uint32_t k = 0; k < NP1E_ADCS; k++)
            w[np1e_word(k)] = f == 0 ? h->lfp_now[np1e_channel(k, j)] : ap[np1e_channel(k, f - 1)];
        uint32_t fc = (uint32_t)((h->frames * NP1E_FRAMES + f) & 0xFFFFF);
        w[31] = (uint16_t)(fc >> 10);
        w[39] = (uint16_t)(fc & 0x3FF);
    }
    h->frames++;
    uint16_t index = 0;
    memcpy(out, &hub_clock, 8);
    memcpy(out + 8, &index, 2);
    memcpy(out + 10, data, sizeof data);
}

/* --- the headstage on a breakout port (headstage.h) ------------------------------------ */

static int hs_init(void **priv, struct emu_card *c, uint32_t dev_idx, struct emu_args *a, char *err, size_t cap)
{
    uint64_t record, sn;
    struct neural_cfg sig;
    np1e_signal(&sig);
    int rc;
    if ((rc = neural_cfg_args(&sig, a, err, cap)) ||
        (rc = emu_arg_u64(a, "record", 0, 0, 1, 1, &record, err, cap)) ||
        (rc = emu_arg_u64(a, "sn", 18194802001ull, 0, UINT64_MAX, 1, &sn, err, cap)))
        return rc;
    const char *pn = emu_arg(a, "pn");
    if (pn && (!*pn || strlen(pn) > 20)) {
        snprintf(err, cap, "np1e: pn=%s: a probe part number has 1 to 20 characters", pn);
        return ONI_EINVALARG;
    }
    struct np1e *h = malloc(sizeof *h);
    if (!h)
        return ONI_EBADALLOC;
    *priv = h;
    /* PRB_1_4_0480_1: an NP1.0 part number onix-source accepts (NeuropixelsProbeMetadata.cpp) */
    rc = np1e_init(h, c, dev_idx, sn, pn ? pn : "PRB_1_4_0480_1", &sig, (int)record);
    if (rc)
        snprintf(err, cap, "np1e: out of memory");
    return rc;
}

static void hs_fini(void *priv)
{
    if (priv)
        np1e_fini(priv);
    free(priv);
}

static int hs_read(void *priv, uint32_t addr, uint32_t reg, unsigned n, int reg16, uint32_t *v)
{
    struct np1e *h = priv;
    (void)reg16;
    return np1e_i2c_read(h, addr, reg, n, emu_card_now(h->card), v);
}

static int hs_write(void *priv, uint32_t addr, uint32_t reg, unsigned n, int reg16, uint32_t v)
{
    (void)reg16;
    return np1e_i2c_write(priv, addr, reg, n, v);
}

static int hs_streaming(void *priv, int s)
{
    (void)s;
    return np1e_streaming(priv);
}

static void hs_fill(void *priv, int s, uint8_t *out, uint64_t hub_clock, uint64_t t)
{
    (void)s;
    np1e_fill(priv, out, hub_clock, t);
}

static void hs_power(void *priv, int on)
{
    (void)on;
    np1e_power_on(priv);
}

const struct emu_hs_ops emu_hs_np1e = {
    .name = "np1e",
    .hs_id = ONIX_HUB_HSNP1ET,
    .lock_min_dv = 30, /* Bonsai searches 3.3 V to 5.5 V, then adds 1.0 V (ConfigureHeadstageNeuropixelsV1e.cs:133-136) */
    .lock_max_dv = 55,
    .nstreams = 1,
    .read_size = NP1E_PAYLOAD,
    .rate_mhz = NP1E_HZ * 1000ull,
    .init = hs_init,
    .fini = hs_fini,
    .i2c_read = hs_read,
    .i2c_write = hs_write,
    .streaming = hs_streaming,
    .fill = hs_fill,
    .power = hs_power,
};
