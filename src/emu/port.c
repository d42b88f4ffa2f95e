/* port.c - the breakout board's headstage ports (docs/devices.md, Ports):
 * power and link lock as the port controller's registers set them, the
 * passthrough state RESET applies, and the DS90UB9x raw device's registers:
 * its own (0x8000..), the deserializer's (I2C 0x30, with its alias table)
 * and raw I2C over the link to the headstage (headstage.h). */
#include <string.h>
#include "card.h"
#include "headstage.h"

/* Deserializer registers (DS90UB9x; Bonsai ConfigureDS90UB9x.cs:117-140). */
enum {
    DES_I2CCONFIG = 0x58, /* bit 7: pass every address over the link */
    DES_SERALIAS = 0x5C,
    DES_SLAVEID1 = 0x5E,  /* ..0x64: SlaveID1..7 (8-bit form, address << 1) */
    DES_SLAVEALIAS1 = 0x66 /* ..0x6C: SlaveAlias1..7 */
};

#define RAW_BASE 0x8000u
#define RAW_LINKSTATUS 0x8012u
#define RAW_LASTI2CL 0x8013u /* hub clock of the last I2C transaction, low and high words */
#define RAW_LAST (RAW_BASE + 0x14u)

/* The bit of ONIX_OPT_PASSTHROUGH for port p: port A bit 0, port B bit 2
 * (onix-source OnixSource.cpp:196-208, Bonsai PassthroughState.cs:8-9). */
static uint32_t pt_bit(int p) { return p ? 4u : 1u; }

int emu_port_locked(const struct emu_card *c, int p)
{
    return c->port[p].used && c->port[p].hs && c->port[p].powered;
}

void emu_port_update(struct emu_card *c, int p)
{
    struct emu_port *pt = &c->port[p];
    const struct emu_hs_ops *hs = pt->hs;
    int on = hs && pt->despwr && pt->voltage_dv >= hs->lock_min_dv && pt->voltage_dv <= hs->lock_max_dv;
    if (on == pt->powered)
        return;
    pt->powered = on;
    if (!on)
        pt->linkflags |= 1; /* lock lost: sticky until the host clears it */
    if (hs->power)
        hs->power(pt->hs_priv, on);
    if (pt->raw)
        emu_port_streams(c, p);
    if (pt->ctrl)
        emu_dev_emit(pt->ctrl, emu_card_now(c)); /* the port status frame */
}

void emu_port_streams(struct emu_card *c, int p)
{
    struct emu_port *pt = &c->port[p];
    const struct emu_hs_ops *hs = pt->hs;
    if (!pt->raw)
        return;
    int n = 0;
    for (int s = 0; hs && s < hs->nstreams && s < EMU_HS_MAX_STREAMS; s++) {
        pt->stream_on[s] = pt->powered && (!hs->streaming || hs->streaming(pt->hs_priv, s));
        n += pt->stream_on[s];
    }
    uint64_t want = hs && hs->fill ? (uint64_t)n * hs->rate_mhz : 0;
    if (want != pt->raw->rate_mhz)
        emu_dev_set_rate(pt->raw, want); /* within range: the headstage's rate was checked at init */
}

void emu_port_start(struct emu_card *c)
{
    for (int p = 0; p < 2; p++)
        c->port[p].next_stream = 0;
}

void emu_port_reset(struct emu_card *c)
{
    c->passthrough_now = c->passthrough;
    for (int i = 0; i < c->ndev; i++) {
        struct emu_dev *d = &c->dev[i];
        if (d->port < 0)
            continue;
        struct emu_port *pt = &c->port[d->port];
        int through = (c->passthrough_now & pt_bit(d->port)) != 0;
        if (d == pt->raw)
            d->absent = !through;
        else if (d != pt->ctrl) /* a device of a hub headstage: found at reset if its link locks */
            d->absent = through || !emu_port_locked(c, d->port);
    }
    for (int p = 0; p < 2; p++)
        emu_port_streams(c, p);
}

/* --- the raw device's registers --------------------------------------------- */

/* Decode a raw I2C register address (Bonsai I2CRegisterContext.cs:26-40,
 * onix-source I2CRegisterContext.cpp:40-41, 78-80). 0 if malformed. */
static int decode(uint32_t a, uint32_t *i2c, uint32_t *reg, unsigned *n, int *reg16)
{
    *i2c = a & 0x7F;
    *reg16 = (a >> 31) & 1;
    *n = ((a >> 28) & 3) + 1;
    *reg = (a >> 7) & 0xFFFF;
    if (a & 0x4F800000u) /* bits 23-27 and 30 are never set */
        return 0;
    return *reg16 || *reg <= 0xFF;
}

/* Stamp an I2C transaction over the link with the hub clock (LASTI2CL/H:
 * the plugin's polled BNO055 timestamps, PolledBno055.cpp:301-309). */
static void stamp(struct emu_card *c, struct emu_port *pt)
{
    uint64_t t = emu_dev_hub_clock(pt->raw, emu_card_now(c));
    pt->raw_reg[RAW_LASTI2CL - RAW_BASE] = (uint32_t)t;
    pt->raw_reg[RAW_LASTI2CL + 1 - RAW_BASE] = (uint32_t)(t >> 32);
}

static uint32_t des_get(const struct emu_port *pt, uint32_t reg, unsigned n)
{
    uint32_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint32_t)pt->des[(reg + i) & 0xFF] << (8 * i);
    return v;
}

/* The headstage-side address a host-side I2C address reaches through the
 * deserializer's alias table, or -1 (NACK). */
static int remote_addr(const struct emu_port *pt, uint32_t a)
{
    if (pt->des[DES_SERALIAS] && a == (uint32_t)pt->des[DES_SERALIAS] >> 1)
        return EMU_HS_SER_ADDR;
    for (int k = 0; k < 7; k++)
        if (pt->des[DES_SLAVEALIAS1 + k] && a == (uint32_t)pt->des[DES_SLAVEALIAS1 + k] >> 1)
            return pt->des[DES_SLAVEID1 + k] >> 1;
    return pt->des[DES_I2CCONFIG] & 0x80 ? (int)a : -1;
}

int emu_port_raw_read(struct emu_card *c, int p, uint32_t addr, uint32_t *v)
{
    struct emu_port *pt = &c->port[p];
    if (addr >= RAW_BASE + 1 && addr <= RAW_LAST) {
        *v = addr == RAW_LINKSTATUS ? (uint32_t)emu_port_locked(c, p) : pt->raw_reg[addr - RAW_BASE];
        return 1;
    }
    uint32_t i2c, reg;
    unsigned n;
    int reg16;
    if (!decode(addr, &i2c, &reg, &n, &reg16) || !i2c)
        return 0;
    if (i2c == EMU_HS_DES_ADDR) {
        if (reg16)
            return 0;
        *v = des_get(pt, reg, n);
        return 1;
    }
    int to = remote_addr(pt, i2c);
    if (to < 0 || !emu_port_locked(c, p) || !pt->hs->i2c_read)
        return 0;
    stamp(c, pt);
    return pt->hs->i2c_read(pt->hs_priv, (uint32_t)to, reg, n, reg16, v);
}

int emu_port_raw_write(struct emu_card *c, int p, uint32_t addr, uint32_t v)
{
    struct emu_port *pt = &c->port[p];
    if (addr >= RAW_BASE + 1 && addr <= RAW_LAST) {
        if (addr >= RAW_LINKSTATUS)
            return 0; /* read-only */
        pt->raw_reg[addr - RAW_BASE] = v;
        return 1;
    }
    uint32_t i2c, reg;
    unsigned n;
    int reg16;
    if (!decode(addr, &i2c, &reg, &n, &reg16) || !i2c)
        return 0;
    if (i2c == EMU_HS_DES_ADDR) {
        if (reg16)
            return 0;
        for (unsigned i = 0; i < n; i++)
            pt->des[(reg + i) & 0xFF] = (uint8_t)(v >> (8 * i));
        return 1;
    }
    int to = remote_addr(pt, i2c);
    if (to < 0 || !emu_port_locked(c, p) || !pt->hs->i2c_write)
        return 0;
    stamp(c, pt);
    int ack = pt->hs->i2c_write(pt->hs_priv, (uint32_t)to, reg, n, reg16, v);
    emu_port_streams(c, p); /* the write may have started or stopped a probe */
    return ack;
}
