/* portctl.c - a breakout port's controller (ONIX FMCLINKCTRL, version 2 as
 * Bonsai ConfigurePortController.cs:110-111 requires), host hub index 1
 * (port A) or 2 (port B). Registers (ConfigurePortController.cs:113-121,
 * onix-source PortController.h:35-44): ENABLE 0 (the status frames), GPOSTATE
 * 1, DESPWR 2 (deserializer power, on at power-up: the plugin never writes
 * it), PORTVOLTAGE 3 (tenths of a volt, 0..100), SAVEVOLTAGE 4 (stored;
 * applied at card creation in the real board's EEPROM, here kept as
 * written), LINKSTATE 5 (ro: bit 0 serdes lock, bit 1 parity pass), LINKFLAGS
 * 7 (bit 0 set when the lock was lost; writing 1s clears). The link locks
 * while a headstage is plugged in, DESPWR is on and the voltage is in the
 * headstage's range (headstage.h). Frames, on every lock change while
 * acquisition runs: [u64 hub clock][u16 status: LINKSTATE's bits]
 * (PortStatusFrame.cs:25-30). */
#include <string.h>
#include "emu/card.h"

enum { PC_GPOSTATE = 1, PC_DESPWR, PC_PORTVOLTAGE, PC_SAVEVOLTAGE, PC_LINKSTATE, PC_LINKFLAGS = 7 };
/* Bonsai charges the 64-channel headstage at 10 V (ConfigureHeadstage64.cs:176,
 * 187); the plugin's own limit is 7.0 V (PortController.cpp setVoltage). */
#define PC_MAX_DV 100

static int pc_init(struct emu_dev *d, struct emu_args *a, char *err, size_t cap)
{
    d->desc.version = 2;
    (void)a, (void)err, (void)cap;
    d->desc.read_size = 10;
    return 0;
}

static struct emu_port *port_of(struct emu_dev *d) { return &d->card->port[d->port]; }

static uint32_t linkstate(struct emu_dev *d)
{
    return emu_port_locked(d->card, d->port) ? 0x3 : 0x0;
}

static void pc_fill(struct emu_dev *d, uint8_t *out, uint64_t t)
{
    uint64_t clock = emu_dev_hub_clock(d, t);
    uint16_t code = (uint16_t)linkstate(d);
    memcpy(out, &clock, 8);
    memcpy(out + 8, &code, 2);
}

static int pc_reg_read(struct emu_dev *d, uint32_t addr, uint32_t *v)
{
    struct emu_port *p = port_of(d);
    switch (addr) {
    case PC_GPOSTATE: *v = p->gpo; return 1;
    case PC_DESPWR: *v = p->despwr; return 1;
    case PC_PORTVOLTAGE: *v = p->voltage_dv; return 1;
    case PC_SAVEVOLTAGE: *v = p->saved_dv; return 1;
    case PC_LINKSTATE: *v = linkstate(d); return 1;
    case PC_LINKFLAGS: *v = p->linkflags; return 1;
    }
    return 0;
}

static int pc_reg_write(struct emu_dev *d, uint32_t addr, uint32_t v)
{
    struct emu_port *p = port_of(d);
    switch (addr) {
    case PC_GPOSTATE:
        if (v > 7)
            return 0; /* three GPO pins */
        p->gpo = v;
        return 1;
    case PC_DESPWR: p->despwr = v != 0; break;
    case PC_PORTVOLTAGE:
        if (v > PC_MAX_DV)
            return 0;
        p->voltage_dv = v;
        break;
    case PC_SAVEVOLTAGE:
        if (v > PC_MAX_DV)
            return 0;
        p->saved_dv = v;
        return 1;
    case PC_LINKFLAGS: p->linkflags &= ~v; return 1;
    default: return 0;
    }
    emu_port_update(d->card, d->port);
    return 1;
}

const struct emu_devtype emu_dev_portctl = {
    "portctl", ONIX_FMCLINKCTRL, 0, pc_init, NULL, pc_fill, pc_reg_read, pc_reg_write, NULL, NULL,
};
