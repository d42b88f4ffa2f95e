/* test_emu_util.h - helpers of the emulated card's tests (test_emu*.c): open a
 * card, access registers through the configuration registers and the signal
 * stream exactly as a driver does, and read whole frames. */
#ifndef EMU_UTIL_H
#define EMU_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "emu/card.h"
#include "oni.h"
#include "oni/util/wire.h"
#include "oni/util/cobs.h"
#include "oni/util/clock.h"

#define TMO 2000 /* ms */

static inline struct emu_card *card_open(const char *spec)
{
    struct emu_card *c = NULL;
    char err[200] = "";
    int rc = emu_card_create(spec, &c, err, sizeof err);
    if (rc)
        fprintf(stderr, "  emu_card_create(\"%s\"): %s (%s)\n", spec, oni_error_str(rc), err);
    return c;
}

/* Next signal packet: type and decoded payload (up to cap bytes). */
static inline int sig_next(struct emu_card *c, uint32_t *type, uint8_t *payload, size_t cap, size_t *n)
{
    uint8_t enc[ONI_COBSMAXPACKET + 1], dec[ONI_COBSMAXPACKET + 1];
    size_t len = 0;
    for (;;) {
        uint8_t b;
        int rc = emu_card_read(c, EMU_STREAM_SIGNAL, &b, 1, TMO);
        if (rc < 0)
            return rc;
        if (!b)
            break;
        if (len == sizeof enc)
            return ONI_ECOBSPACK;
        enc[len++] = b;
    }
    int m = oni_cobs_decode(enc, len, dec, sizeof dec);
    if (m < 4)
        return ONI_ECOBSPACK;
    memcpy(type, dec, 4);
    *n = (size_t)m - 4;
    memcpy(payload, dec + 4, *n < cap ? *n : cap);
    return 0;
}

/* A register access; returns the answer's packet type (ACK/NACK) or an error. */
static inline int reg_io(struct emu_card *c, uint32_t dev, uint32_t addr, int write, uint32_t *v)
{
    int rc;
    if ((rc = emu_card_write_config(c, ONI_CONFIG_DEV_IDX, dev)) || (rc = emu_card_write_config(c, ONI_CONFIG_REG_ADDR, addr)) ||
        (write && (rc = emu_card_write_config(c, ONI_CONFIG_REG_VALUE, *v))) ||
        (rc = emu_card_write_config(c, ONI_CONFIG_RW, write ? 1 : 0)) || (rc = emu_card_write_config(c, ONI_CONFIG_TRIG, 1)))
        return rc;
    uint32_t type;
    uint8_t p[256];
    size_t n;
    do {
        if ((rc = sig_next(c, &type, p, sizeof p, &n)) < 0)
            return rc;
    } while (!(type & (ONI_SIG_CONFIGWACK | ONI_SIG_CONFIGWNACK | ONI_SIG_CONFIGRACK | ONI_SIG_CONFIGRNACK)));
    if (type == ONI_SIG_CONFIGRACK && (rc = emu_card_read_config(c, ONI_CONFIG_REG_VALUE, v)))
        return rc;
    return (int)type;
}

static inline int reg_get(struct emu_card *c, uint32_t dev, uint32_t addr, uint32_t *v)
{
    return reg_io(c, dev, addr, 0, v);
}

static inline int reg_set(struct emu_card *c, uint32_t dev, uint32_t addr, uint32_t v)
{
    return reg_io(c, dev, addr, 1, &v);
}

struct frame {
    uint64_t time;
    uint32_t dev, sz;
    uint8_t data[16384];
};

/* Read one whole frame of stream s. Returns 0 or an error. */
static inline int frame_read(struct emu_card *c, enum emu_stream s, struct frame *f, uint32_t tmo)
{
    uint8_t h[16];
    int rc = emu_card_read(c, s, h, 16, tmo);
    if (rc != 16)
        return rc < 0 ? rc : ONI_EREADFAILURE;
    memcpy(&f->time, h, 8);
    memcpy(&f->dev, h + 8, 4);
    memcpy(&f->sz, h + 12, 4);
    size_t n = oni_pad4(f->sz);
    if (n > sizeof f->data)
        return ONI_EBUFFERSIZE;
    if (!n)
        return 0;
    rc = emu_card_read(c, s, f->data, n, tmo);
    return rc == (int)n ? 0 : rc < 0 ? rc : ONI_EREADFAILURE;
}

/* The device table after a RESET (ndev entries at most). Returns the count or an error. */
static inline int table_read(struct emu_card *c, oni_device_t *t, int max)
{
    int rc = emu_card_write_config(c, ONI_CONFIG_RESET, 1);
    if (rc)
        return rc;
    uint32_t type, count = 0;
    uint8_t p[256];
    size_t n;
    do {
        if ((rc = sig_next(c, &type, p, sizeof p, &n)) < 0)
            return rc;
    } while (type != ONI_SIG_DEVICETABLEACK);
    memcpy(&count, p, 4);
    for (uint32_t i = 0; i < count; i++) {
        if ((rc = sig_next(c, &type, p, sizeof p, &n)) < 0)
            return rc;
        if (type != ONI_SIG_DEVICEINST || n != sizeof(oni_device_t))
            return ONI_EBADDEVTABLE;
        if ((int)i < max)
            memcpy(&t[i], p, sizeof *t);
    }
    return (int)count;
}

/* dev_idx of the first device with id, or UINT32_MAX. */
static inline uint32_t find_id(const oni_device_t *t, int n, uint32_t id)
{
    for (int i = 0; i < n; i++)
        if (t[i].id == id)
            return t[i].idx;
    return UINT32_MAX;
}

#endif
