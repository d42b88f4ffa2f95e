/* np2e.c - the Neuropixels 2.0e headstage: two NP2.0 probes behind a
 * DS90UB933 serializer, a headstage EEPROM and a BNO055 on the serializer's
 * I2C bus (headstages.h). What the host sees, and from where:
 *
 * - serializer registers (0x58): a plain register file; GPIO10 bit 3 powers
 *   the probes, bit 7 low holds them in reset (a low-high pulse resets
 *   them); GPIO32 connects one probe's I2C bus at a time: bit 3 set selects
 *   a probe, bit 7 picks B over A (the three values Bonsai and onix-source
 *   write: ConfigureHeadstageNeuropixelsV2e.cs:103-108, 197-235;
 *   Neuropixels2e.h:154-159, Neuropixels2e.cpp:500-528);
 * - headstage EEPROM (0x51, 16-bit register addresses): hardware id
 *   ONIX_HUB_HSNP2E (8, ConfigureHeadstageNeuropixelsV2e.cs:100), revision
 *   1.0 (:99), name "Headstage-NeuropixelsV2.0e" (as :177 names it);
 * - per probe, seen only while selected: the flex EEPROM (0x50) with the
 *   probe serial number (u64 at 0x00), flex version/revision (0x10/0x11),
 *   flex part number (0x20) and probe part number (0x40), 20-byte strings
 *   (NeuropixelsV2Metadata.cs:7-23, NeuropixelsProbeMetadata.cpp:40-75); and,
 *   while powered and out of reset, the probe ASIC (0x10) with the registers
 *   of NeuropixelsV2.cs:21-52: shift-register chains loaded as both programs
 *   do (NeuropixelsV2RegisterContext.cs:43-68, Neuropixels2e.cpp:633-655:
 *   SOFT_RESET 0xFF then 0x00, SR_LENGTH1/2, the bytes into the chain's
 *   register, twice; then STATUS), super-sync words, OP_MODE recording;
 * - super-frames: one per probe per 30 kHz sample, while the probe records:
 *   [u64 hub clock][u16 probe index][u16 data[16 * 36]] (NeuropixelsV2eData.cs
 *   :153-159; onix-source Neuropixels2e.cpp:580-604 reads the same offsets),
 *   12-bit offset binary samples (2048 = 0 V, NeuropixelsV2eData.cs:120);
 *   words that carry no sample are 0.
 *
 * Chains (npsr.c): 96 bytes base (SR_CHAIN5, 6), 161 bytes shank (1..4). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emu/headstage.h"
#include "emu/headstages.h"
#include "onix.h"

uint32_t np2e_channel(uint32_t k, uint32_t i)
{
    /* NeuropixelsV2eData.cs:78-110: ADC k = 3g + s (g = 0..7, s = 0..2) gives
     * channels 128 s + 32 (g / 2) + g % 2 + 2 i */
    uint32_t g = k / 3, s = k % 3;
    return 128 * s + 32 * (g / 2) + g % 2 + 2 * i;
}

uint32_t np2e_word(uint32_t k, uint32_t i)
{
    return NP2E_TRASH + NP2E_FRAME_WORDS * i + 4 * (k / 3) + k % 3;
}

static void put_str(uint8_t *p, const char *s, size_t max)
{
    size_t n = strlen(s);
    memset(p, 0, max);
    memcpy(p, s, n < max ? n : max);
}

static void probe_reset(struct np2e_probe *p)
{
    memset(p->reg, 0, sizeof p->reg);
    memset(&p->sr, 0, sizeof p->sr);
}

/* The configuration Bonsai and onix-source leave: chains loaded, super-sync
 * written, recording (ConfigureNeuropixelsV2PsbDecoder.cs:96-110). */
static void probe_record(struct np2e_probe *p)
{
    static const uint8_t sync[12] = {0xB9, 0x61, 0x86, 0x18, 0x61, 0x86, 0x18, 0x61, 0x86, 0x18, 0x61, 0x18};
    memcpy(p->reg + NP2_SUPERSYNC0, sync, sizeof sync);
    p->reg[NP2_STATUS] = NP2_SR_OK;
    p->reg[NP2_OP_MODE] = NP2_OP_RECORD;
}

void np2e_power_on(struct np2e *h)
{
    memset(h->ser, 0, sizeof h->ser);
    h->ser[SER_GPIO10] = h->record ? NP2E_GPIO10_SUPPLY | NP2E_GPIO10_RESET | 0x11 : 0x11;
    h->ser[SER_GPIO32] = 0x11;
    bno055_chip_init(&h->bno);
    for (int i = 0; i < 2; i++) {
        probe_reset(&h->probe[i]);
        if (h->record && h->probe[i].present)
            probe_record(&h->probe[i]);
    }
}

uint32_t np2e_slot(uint32_t ch)
{
    return (ch % 32) / 2; /* the i of np2e_channel: the frame that carries ch */
}

void np2e_signal(struct neural_cfg *sig)
{
    /* 12 bits, 1e6 / 80 / 2^12 uV per code (onix-bonsai-onix1-docs,
     * articles/getting-started/reference.md: Neuropixels 2.0 probe) */
    neural_cfg_default(sig, NEURAL_WIDE, 1e6 / 80 / 4096);
    sig->site = np2_site;
    sig->slot = np2e_slot;
}

int np2e_init(struct np2e *h, struct emu_card *card, uint32_t dev_idx, const uint64_t sn[2], const char *pn,
              const struct neural_cfg *sig, int record)
{
    memset(h, 0, sizeof *h);
    h->card = card;
    h->record = record;
    hs_eeprom_build(h->eeprom, ONIX_HUB_HSNP2E, 1, 0, "Headstage-NeuropixelsV2.0e");
    for (int i = 0; i < 2; i++) {
        struct np2e_probe *p = &h->probe[i];
        p->present = sn[i] != 0;
        memset(p->flex, 0xFF, sizeof p->flex);
        for (int b = 0; b < 8; b++)
            p->flex[b] = (uint8_t)(sn[i] >> (8 * b));
        p->flex[0x10] = 1; /* flex version 1.0 */
        p->flex[0x11] = 0;
        put_str(p->flex + 0x20, "NPNH_FLEX_2", 20);
        put_str(p->flex + 0x40, pn, 20);
        int rc = neural_init(&p->sig, card, dev_idx, (uint32_t)i, NP2E_CH, NP2E_HZ, 0, 4095, 2048, sig);
        if (rc)
            return rc;
    }
    np2e_power_on(h);
    return 0;
}

void np2e_fini(struct np2e *h)
{
    for (int i = 0; i < 2; i++)
        neural_fini(&h->probe[i].sig);
}

/* The probe whose I2C bus GPIO32 connects, or NULL. */
static struct np2e_probe *selected(struct np2e *h)
{
    uint8_t g = h->ser[SER_GPIO32];
    if (!(g & NP2E_GPIO32_SELECT))
        return NULL;
    struct np2e_probe *p = &h->probe[(g & NP2E_GPIO32_B) ? 1 : 0];
    return p->present ? p : NULL;
}

static int powered(const struct np2e *h)
{
    uint8_t g = h->ser[SER_GPIO10];
    return (g & NP2E_GPIO10_SUPPLY) && (g & NP2E_GPIO10_RESET);
}

int np2e_streaming(const struct np2e *h, int p)
{
    const struct np2e_probe *q = &h->probe[p];
    return q->present && powered(h) && (q->reg[NP2_OP_MODE] & (NP2_OP_RECORD | NP2_OP_POWERDOWN)) == NP2_OP_RECORD;
}

static uint32_t chain_bytes(uint32_t reg)
{
    return reg == NP2_SR_CHAIN5 || reg == NP2_SR_CHAIN6 ? NP2E_BASE_BYTES : NP2E_SHANK_BYTES;
}

/* One byte into probe register r. */
static void probe_write(struct np2e_probe *p, uint32_t r, uint8_t x)
{
    if (r >= NP2_SR_CHAIN6 && r <= NP2_SR_CHAIN1) {
        p->reg[NP2_STATUS] = np_sr_shift(&p->sr, r, x, chain_bytes(r), p->chain[NP2_SR_CHAIN1 - r]);
        return;
    }
    switch (r) {
    case NP2_STATUS: return; /* read-only */
    case NP2_SOFT_RESET:
        if (x == 0 && p->reg[NP2_SOFT_RESET] == 0xFF) { /* the falling write ends the soft reset */
            np_sr_soft_reset(&p->sr);
            p->reg[NP2_STATUS] = 0;
        }
        break;
    case NP2_SR_LENGTH1: np_sr_length(&p->sr, 0, x); break;
    case NP2_SR_LENGTH2: np_sr_length(&p->sr, 1, x); break;
    }
    p->reg[r] = x;
}

int np2e_i2c_read(struct np2e *h, uint32_t addr, uint32_t reg, unsigned nbytes, uint64_t t, uint32_t *v)
{
    struct np2e_probe *p;
    switch (addr) {
    case HS_I2C_SER: return hs_bytes_read(h->ser, sizeof h->ser, reg, nbytes, v);
    case HS_I2C_EEPROM: return hs_bytes_read(h->eeprom, sizeof h->eeprom, reg, nbytes, v);
    case HS_I2C_BNO055: return bno055_chip_read(&h->bno, reg, nbytes, t, v);
    case HS_I2C_FLEX:
        p = selected(h);
        return p ? hs_bytes_read(p->flex, sizeof p->flex, reg, nbytes, v) : 0;
    case HS_I2C_PROBE:
        p = selected(h);
        return p && powered(h) ? hs_bytes_read(p->reg, sizeof p->reg, reg, nbytes, v) : 0;
    }
    return 0;
}

static void ser_write(struct np2e *h, uint32_t r, uint8_t x)
{
    uint8_t old = h->ser[r];
    h->ser[r] = x;
    if (r != SER_GPIO10)
        return;
    /* probes lose their registers without supply, and on a reset pulse */
    int was_on = (old & NP2E_GPIO10_SUPPLY) && (old & NP2E_GPIO10_RESET);
    if (was_on && !powered(h))
        for (int i = 0; i < 2; i++)
            probe_reset(&h->probe[i]);
}

int np2e_i2c_write(struct np2e *h, uint32_t addr, uint32_t reg, unsigned nbytes, uint32_t v)
{
    struct np2e_probe *p = NULL;
    if (nbytes < 1 || nbytes > 4)
        return 0;
    switch (addr) {
    case HS_I2C_SER:
        if (reg + nbytes > sizeof h->ser)
            return 0;
        for (unsigned i = 0; i < nbytes; i++)
            ser_write(h, reg + i, (uint8_t)(v >> (8 * i)));
        return 1;
    case HS_I2C_EEPROM:
    case HS_I2C_FLEX:
        /* write-protected EEPROMs: the chip acknowledges, nothing changes */
        return addr == HS_I2C_EEPROM || selected(h) != NULL;
    case HS_I2C_BNO055: return bno055_chip_write(&h->bno, reg, nbytes, v);
    case HS_I2C_PROBE:
        p = selected(h);
        if (!p || !powered(h) || reg + nbytes > sizeof p->reg)
            return 0;
        for (unsigned i = 0; i < nbytes; i++)
            probe_write(p, reg + i, (uint8_t)(v >> (8 * i)));
        return 1;
    }
    return 0;
}

/* The super-frame word of each channel's sample (np2e_word of its ADC and
 * frame), once. */
static uint16_t word_of[NP2E_CH];
static pthread_once_t word_once = PTHREAD_ONCE_INIT;
static void words(void)
{
    for (uint32_t i = 0; i < NP2E_FRAMES; i++)
        for (uint32_t k = 0; k < NP2E_ADCS; k++)
            word_of[np2e_channel(k, i)] = (uint16_t)np2e_word(k, i);
}

void np2e_fill(struct np2e *h, int p, uint8_t *out, uint64_t hub_clock, uint64_t t)
{
    uint16_t ch[NP2E_CH], data[NP2E_FRAMES * NP2E_FRAME_WORDS];
    uint16_t index = (uint16_t)p;
    pthread_once(&word_once, words);
    neural_sample(&h->probe[p].sig, ch, t);
    memset(data, 0, sizeof data);
    for (uint32_t c = 0; c < NP2E_CH; c++)
        data[word_of[c]] = ch[c];
    memcpy(out, &hub_clock, 8);
    memcpy(out + 8, &index, 2);
    memcpy(out + 10, data, sizeof data);
}

/* --- the headstage on a breakout port (headstage.h) ------------------------------------ */

static int hs_init(void **priv, struct emu_card *c, uint32_t dev_idx, struct emu_args *a, char *err, size_t cap)
{
    uint64_t record, sn[2];
    struct neural_cfg sig;
    np2e_signal(&sig);
    int rc;
    if ((rc = neural_cfg_args(&sig, a, err, cap)) ||
        (rc = emu_arg_u64(a, "record", 0, 0, 1, 1, &record, err, cap)) ||
        (rc = emu_arg_u64(a, "sn_a", 21050000001ull, 0, UINT64_MAX, 1, &sn[0], err, cap)) ||
        (rc = emu_arg_u64(a, "sn_b", 21050000002ull, 0, UINT64_MAX, 1, &sn[1], err, cap)))
        return rc;
    const char *pn = emu_arg(a, "pn");
    if (pn && (!*pn || strlen(pn) > 20)) {
        snprintf(err, cap, "np2e: pn=%s: a probe part number has 1 to 20 characters", pn);
        return ONI_EINVALARG;
    }
    struct np2e *h = malloc(sizeof *h);
    if (!h)
        return ONI_EBADALLOC;
    *priv = h;
    rc = np2e_init(h, c, dev_idx, sn, pn ? pn : "NP2014", &sig, (int)record);
    if (rc)
        snprintf(err, cap, "np2e: out of memory");
    return rc;
}

static void hs_fini(void *priv)
{
    if (priv)
        np2e_fini(priv);
    free(priv);
}

/* The card gives no time to I2C accesses; a BNO055 read samples the motion now. */
static int hs_read(void *priv, uint32_t addr, uint32_t reg, unsigned n, int reg16, uint32_t *v)
{
    struct np2e *h = priv;
    (void)reg16;
    return np2e_i2c_read(h, addr, reg, n, emu_card_now(h->card), v);
}

static int hs_write(void *priv, uint32_t addr, uint32_t reg, unsigned n, int reg16, uint32_t v)
{
    (void)reg16;
    return np2e_i2c_write(priv, addr, reg, n, v);
}

static int hs_streaming(void *priv, int s) { return np2e_streaming(priv, s); }

static void hs_fill(void *priv, int s, uint8_t *out, uint64_t hub_clock, uint64_t t) { np2e_fill(priv, s, out, hub_clock, t); }

static void hs_power(void *priv, int on)
{
    (void)on; /* off or on, the chips come back in their power-on state */
    np2e_power_on(priv);
}

const struct emu_hs_ops emu_hs_np2e = {
    .name = "np2e",
    .hs_id = ONIX_HUB_HSNP2E,
    .lock_min_dv = 30, /* ConfigureHeadstageNeuropixelsV2e.cs:56-58: 3.0 V to 5.5 V */
    .lock_max_dv = 55,
    .nstreams = 2,
    .read_size = NP2E_PAYLOAD,
    .rate_mhz = NP2E_HZ * 1000ull,
    .init = hs_init,
    .fini = hs_fini,
    .i2c_read = hs_read,
    .i2c_write = hs_write,
    .streaming = hs_streaming,
    .fill = hs_fill,
    .power = hs_power,
};
