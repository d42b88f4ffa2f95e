/* headstage.h - what a headstage on a port of the emulated breakout board
 * implements, and what the card gives it (docs/devices.md, Ports).
 *
 * A port (A or B) of the breakout board has a port controller (ONIX
 * FMCLINKCTRL, host hub index 1 or 2) that powers the headstage and reports
 * its serdes link's lock. A headstage is one of two kinds:
 *  - a serdes headstage (NP2.0e, NP1.0e): no hub of its own; its chips sit on
 *    an I2C bus behind a DS90UB933 serializer. With ONIX_OPT_PASSTHROUGH on
 *    for its port, after the next RESET the host hub lists a DS90UB9x raw
 *    device (ONIX_DS90UB9RAW) at index 8 (port A) or 9 (port B), through
 *    which the host reaches the deserializer (I2C 0x30, the card's), the
 *    serializer (0x58 or its alias, the card's: GPIO writes are passed on
 *    through gpio()) and, through the deserializer's alias table, the
 *    headstage's chips (emu_i2c_chip, the headstage's). The raw device's
 *    frames carry what fill() writes.
 *  - a hub headstage (64-channel headstage): a hub of its own, hub 1 (port A)
 *    or 2 (port B), listing hub_devices in standard mode.
 * Everything here runs with the card lock held (card.h). */
#ifndef EMU_HEADSTAGE_H
#define EMU_HEADSTAGE_H

#include "card.h"

#define EMU_HS_MAX_CHIPS 8

struct emu_hs;

/* One chip on a serdes headstage's I2C bus. Register accesses of the raw
 * device (Bonsai I2CRegisterContext.cs:26-40 encodes them as (reg << 7) |
 * 7-bit address, byte count - 1 in bits 28-29, bit 31 for a 16-bit register
 * address) reach it decoded: reg, reg16 (1: a 16-bit register address), n
 * bytes (1..4) starting at reg, little-endian in the 32-bit value (first
 * byte in bits 0-7). Return 1 = ACK, 0 = NACK (the host gets
 * ONI_SIG_CONFIG?NACK). */
struct emu_i2c_chip {
    uint8_t addr; /* 7-bit I2C address on the headstage's bus (the "slave ID", before aliasing) */
    int (*read)(struct emu_hs *h, void *chip, uint32_t reg, int reg16, unsigned n, uint32_t *v);
    int (*write)(struct emu_hs *h, void *chip, uint32_t reg, int reg16, unsigned n, uint32_t v);
    void *chip;
};

/* A kind of headstage: what a spec name ("np2e", "np1e", "hs64") makes. */
struct emu_hs_type {
    const char *name;
    uint32_t hub_id; /* ONIX_HUB_*: its EEPROM's hardware id; a hub headstage's HARDWAREID */
    uint32_t hub_rev, hub_fw, hub_clk_hz; /* hub headstage: its hub manager's registers */
    /* Port voltages, in tenths of a volt as PORTVOLTAGE takes them, at which
     * its link locks (the port controller's LINKSTATE). */
    uint32_t lock_min_dv, lock_max_dv;
    /* Hub headstage: its devices in standard mode, in index order, NULL
     * terminated; NULL for a serdes headstage. */
    const struct emu_devtype *const *hub_devices;
    /* Parse arguments (a: the headstage's spec arguments, each used one
     * marked by emu_arg), add chips (emu_hs_add_chip), set read_size and
     * rate_mhz, allocate priv. 0 or ONI_EINVALARG / ONI_EBADALLOC with err. */
    int (*init)(struct emu_hs *h, struct emu_args *a, char *err, size_t cap);
    void (*fini)(struct emu_hs *h); /* may be NULL; runs after a failed init too */
    /* One raw-device frame: read_size bytes of payload at acquisition time
     * t; raw is the raw device (emu_dev_hub_clock(raw, t) is its hub clock).
     * NULL: the raw device sends no frames. */
    void (*fill)(struct emu_hs *h, struct emu_dev *raw, uint8_t *payload, uint64_t t);
    /* The serializer's GPIO registers (DS90UB933 GPIO10 at 0x0D, GPIO32 at
     * 0x0E; Bonsai ConfigureDS90UB9x.cs:185-191) were written. May be NULL. */
    void (*gpio)(struct emu_hs *h, uint8_t gpio10, uint8_t gpio32);
    /* The headstage was powered on (on = 1: the port voltage entered the
     * lock range with DESPWR on) or off (on = 0): chips return to their
     * power-on state. May be NULL. */
    void (*power)(struct emu_hs *h, int on);
};

/* A headstage plugged into a port. The card owns it; type->init fills it. */
struct emu_hs {
    const struct emu_hs_type *type;
    struct emu_card *card;
    int port;           /* 0 = port A, 1 = port B */
    uint32_t read_size; /* bytes of one raw-device frame payload */
    uint64_t rate_mhz;  /* raw-device frames per 1000 s (0: none; emu_hs_set_rate to change) */
    struct emu_i2c_chip chip[EMU_HS_MAX_CHIPS];
    int nchip;
    void *priv;
};

/* Add a chip at 7-bit I2C address addr to h's bus. 0, or ONI_EINVALARG if
 * the address is taken or invalid or the bus is full. */
int emu_hs_add_chip(struct emu_hs *h, uint8_t addr,
                    int (*read)(struct emu_hs *, void *, uint32_t, int, unsigned, uint32_t *),
                    int (*write)(struct emu_hs *, void *, uint32_t, int, unsigned, uint32_t), void *chip);
/* Change the raw device's frame rate (millihertz; 0 stops it), e.g. when the
 * probes start streaming. 0 or ONI_EINVALARG. */
int emu_hs_set_rate(struct emu_hs *h, uint64_t rate_mhz);
/* Emit one raw-device frame now (an event), if the port is in passthrough
 * and acquisition runs; else nothing. */
void emu_hs_emit(struct emu_hs *h, uint64_t t);

#endif
