/* headstage.h - what a headstage on a port of the emulated breakout board
 * implements, and what the card gives it (docs/devices.md, Ports).
 *
 * A port (A or B) of the breakout board has a port controller (ONIX
 * FMCLINKCTRL at host-hub index 1 or 2) that powers the headstage and
 * reports its serdes link's lock. A headstage is one of two kinds:
 *  - a serdes headstage (NP2.0e, NP1.0e): no hub of its own; its chips, the
 *    DS90UB933 serializer (0x58) included, sit on the I2C bus behind the
 *    link. With ONIX_OPT_PASSTHROUGH on for its port, from the next RESET the
 *    host hub lists a DS90UB9x raw device (ONIX_DS90UB9RAW) at index 8 (port
 *    A) or 9 (port B). Its register accesses with I2C address 0x30 reach the
 *    deserializer (the card's); others go over the link to the address the
 *    deserializer's alias table maps them to (SER_ALIAS -> 0x58, SlaveAliasN
 *    -> SlaveIDN), i.e. to i2c_read / i2c_write here, with the address the
 *    chip answers to. The raw device's frames carry what fill() writes.
 *  - a hub headstage (64-channel headstage): a hub of its own, hub 1 (port
 *    A) or 2 (port B), listing hub_devices in standard mode.
 * Every callback runs with the card lock held (card.h). */
#ifndef EMU_HEADSTAGE_H
#define EMU_HEADSTAGE_H

#include "card.h"

#define EMU_HS_MAX_STREAMS 4
#define EMU_HS_SER_ADDR 0x58 /* DS90UB933 serializer (Bonsai ConfigureDS90UB9x.cs:66) */
#define EMU_HS_DES_ADDR 0x30 /* deserializer, on the card side of the link (ConfigureDS90UB9x.cs:65) */

/* A kind of headstage: what a spec name ("np2e", "np1e", "hs64") makes. */
struct emu_hs_ops {
    const char *name;
    uint32_t hs_id; /* ONIX_HUB_*: its EEPROM hardware id; a hub headstage's HARDWAREID */
    uint32_t hub_rev, hub_fw, hub_clk_hz; /* hub headstage only: its hub manager's registers */
    /* Port voltages, in tenths of a volt as PORTVOLTAGE takes them, at which
     * its link locks (port controller LINKSTATE bit 0). */
    uint32_t lock_min_dv, lock_max_dv;
    /* Hub headstage: its devices in standard mode, in index order, NULL
     * terminated; NULL for a serdes headstage. */
    const struct emu_devtype *const *hub_devices;

    /* Serdes headstage: the raw device's frames. They come from nstreams
     * streams (np2e: 2, probe A and B) of equal rate, each rate_mhz frames
     * per 1000 s while streaming(); frames of the streaming streams alternate
     * (0, 1, 0, 1, ... from the first frame of an acquisition). read_size:
     * bytes of one payload, the same for every stream. */
    int nstreams;
    uint32_t read_size;
    uint64_t rate_mhz;

    /* Parse the headstage's spec arguments (mark each one used with
     * emu_arg), allocate *priv. dev_idx: the raw device's index. 0 or
     * ONI_EINVALARG / ONI_EBADALLOC with a message in err. */
    int (*init)(void **priv, struct emu_card *c, uint32_t dev_idx, struct emu_args *a, char *err, size_t cap);
    void (*fini)(void *priv); /* may be NULL; runs after a failed init too */
    /* A raw I2C access over the link, decoded from the raw device's register
     * address (Bonsai I2CRegisterContext.cs:26-40: (reg << 7) | 7-bit
     * address, byte count - 1 in bits 28-29, bit 31 for a 16-bit register
     * address): n bytes (1..4) from register reg, little-endian in the value
     * (first byte in bits 0-7). 1 = ACK, 0 = NACK. */
    int (*i2c_read)(void *priv, uint32_t i2c_addr, uint32_t reg, unsigned n, int reg16, uint32_t *v);
    int (*i2c_write)(void *priv, uint32_t i2c_addr, uint32_t reg, unsigned n, int reg16, uint32_t v);
    /* 1 if stream s sends frames now (its probe was set to record). Asked
     * after every raw I2C write and at RESET and start. NULL: always. */
    int (*streaming)(void *priv, int s);
    /* One frame of stream s, taken at acquisition time t: read_size bytes.
     * hub_clock: the raw device's hub clock at t (the host hub's, a count of
     * the acquisition clock, as the DigitalIO frames carry). */
    void (*fill)(void *priv, int s, uint8_t *payload, uint64_t hub_clock, uint64_t t);
    /* The port's power went on (1: voltage in the lock range and DESPWR on)
     * or off (0): chips go to their power-on state. May be NULL. */
    void (*power)(void *priv, int on);
};

#endif
