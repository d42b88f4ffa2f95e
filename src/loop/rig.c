/* rig.c - bring-up of the breakout board + NP2.0e rig (rig.h), in the order
 * and with the register writes of Bonsai.ONIX1 (OpenEphys.Onix1/, cited by
 * file:line), through oni.h and onix.h only. What the loop leaves out of
 * Bonsai's sequence: the headstage and flex EEPROM checks beyond the probe's
 * serial number, the probes' shift-register (electrode) configuration (the
 * probe keeps its reset selection), the BNO055, and the waits between steps
 * (Bonsai sleeps 20-500 ms for real hardware to settle). A probe the loop
 * does not record is powered down, as Bonsai does with a probe it does not
 * enable. Each port's headstage is brought up in turn, A first. */
#include "loop/rig.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "onix.h"

/* PortController (ConfigurePortController.cs:108-121) */
enum { PC_ENABLE = 0, PC_DESPWR = 2, PC_PORTVOLTAGE = 3, PC_LINKSTATE = 5, PC_LOCK = 0x1 };
/* DS90UB9x raw device (ConfigureDS90UB9x.cs:37-49, 59-60) */
enum {
    DS_ENABLE = 0x8000, DS_READSZ, DS_TRIGGER, DS_TRIGGEROFF, DS_DATAGATE, DS_SYNCBITS, DS_MARK,
    DS_MAGIC_MASK, DS_MAGIC, DS_MAGIC_WAIT, DS_DATAMODE, DS_DATALINES0, DS_DATALINES1
};
enum { I2C_DES = 0x30, I2C_SER = 0x58, I2C_PROBE = 0x10, I2C_FLEX = 0x50 };
/* deserializer and serializer registers (ConfigureDS90UB9x.cs:124-157) */
enum {
    DES_PORTSEL = 0x4C, DES_I2CCONFIG = 0x58, DES_SERALIAS = 0x5C, DES_SLAVEID2 = 0x5F, DES_SLAVEID3 = 0x60,
    DES_SLAVEALIAS2 = 0x67, DES_SLAVEALIAS3 = 0x68, DES_PORTMODE = 0x6D, DES_GPIOCTRL0 = 0x6E, DES_GPIOCTRL1 = 0x6F
};
enum { SER_GPIO10 = 0x0D, SER_GPIO32 = 0x0E };
/* NP2.0e serializer GPIO values (ConfigureHeadstageNeuropixelsV2e.cs:103-108) */
enum { GPO10_SUPPLY = 1 << 3, GPO10_RESET = 1 << 7, GPO32_NONE = 0x11, GPO32_PROBE_A = 0x19, GPO32_PROBE_B = 0x99 };
/* Probe registers (NeuropixelsV2.cs:21-52) */
enum { NP_OP_MODE = 0x00, NP_SUPERSYNC0 = 0x0A, NP_OP_RECORD = 0x40, NP_OP_POWERDOWN = 0x80 };
/* AnalogIO (ConfigureAnalogIO.cs:297; device 6 of ConfigureBreakoutBoard) */
enum { AIO_ADDR = 6, AIO_ENABLE = 0 };
/* DigitalIO (ConfigureDigitalIO.cs:137-140) */
enum { DIO_ENABLE = 0, DIO_BASE_FREQ_HZ = 5, DIO_DEAD_TICKS = 6, DIO_SAMPLE_PERIOD = 7 };

struct bring {
    oni_ctx ctx;
    struct loop_rig *rig;
    struct loop_rig_head *h; /* the headstage being brought up */
    char *why;
    size_t cap;
};

static int fail(struct bring *b, int rc, const char *fmt, ...)
{
    if (b->why && b->cap && !b->why[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(b->why, b->cap, fmt, ap);
        va_end(ap);
    }
    return rc;
}

static int wr(struct bring *b, oni_dev_idx_t dev, oni_reg_addr_t addr, oni_reg_val_t v, const char *what)
{
    int rc = oni_write_reg(b->ctx, dev, addr, v);
    return rc ? fail(b, rc, "%s: writing register 0x%x of device %u: %s", what, addr, dev, oni_error_str(rc)) : 0;
}

/* Raw I2C through the DS90UB9x device: register (reg << 7) | 7-bit address,
 * byte count - 1 in bits 28-29 (I2CRegisterContext.cs:26-46). */
static oni_reg_addr_t i2c_addr(uint32_t chip, uint32_t reg, unsigned n)
{
    return (reg << 7) | (chip & 0x7F) | ((n - 1u) << 28);
}

static int i2c_wr(struct bring *b, uint32_t chip, uint32_t reg, uint32_t v, const char *what)
{
    return wr(b, b->h->raw, i2c_addr(chip, reg, 1), v, what);
}

static int i2c_rd(struct bring *b, uint32_t chip, uint32_t reg, unsigned n, uint32_t *v)
{
    oni_reg_val_t x = 0;
    int rc = oni_read_reg(b->ctx, b->h->raw, i2c_addr(chip, reg, n), &x);
    *v = x;
    return rc;
}

/* The device table after PASSTHROUGH: each port's controller at its port
 * number, its raw device at 7 + port, the DigitalIO at 7 (OnixDevice.h and
 * ConfigureDigitalIO.cs:33). */
static int find(struct bring *b)
{
    oni_size_t n = 0;
    size_t sz = sizeof n;
    int rc = oni_get_opt(b->ctx, ONI_OPT_NUMDEVICES, &n, &sz);
    oni_device_t *t = rc || !n ? NULL : calloc(n, sizeof *t);
    sz = n * sizeof *t;
    if (!rc && n && !t)
        rc = ONI_EBADALLOC;
    if (!rc && n)
        rc = oni_get_opt(b->ctx, ONI_OPT_DEVICETABLE, t, &sz);
    if (rc) {
        free(t);
        return fail(b, rc, "reading the device table: %s", oni_error_str(rc));
    }
    struct loop_rig *r = b->rig;
    int pc[2] = {0, 0}, raw[2] = {0, 0}, dio = 0;
    r->aio = -1;
    for (oni_size_t i = 0; i < n; i++) {
        if (t[i].idx == AIO_ADDR && t[i].id == ONIX_FMCANALOG1R3)
            r->aio = (int)t[i].idx;
        for (uint32_t k = 0; k < r->nheads; k++) {
            struct loop_rig_head *h = &r->head[k];
            if (t[i].idx == (oni_dev_idx_t)h->port && t[i].id == ONIX_FMCLINKCTRL)
                pc[k] = 1, h->portctl = t[i].idx;
            if (t[i].idx == (oni_dev_idx_t)(7 + h->port) && t[i].id == ONIX_DS90UB9RAW)
                raw[k] = 1, h->raw = t[i].idx, h->raw_read = t[i].read_size;
        }
        if (t[i].idx == LOOP_DIO_ADDR && t[i].id == ONIX_BREAKDIG1R3)
            dio = 1, r->dio = t[i].idx, r->dio_read = t[i].read_size, r->dio_write = t[i].write_size;
    }
    free(t);
    for (uint32_t k = 0; k < r->nheads; k++) {
        int p = r->head[k].port;
        char port = p == 1 ? 'A' : 'B';
        if (!pc[k])
            return fail(b, ONI_EDEVID, "no port controller (id 23) for port %c at device %d: not a breakout board",
                        port, p);
        if (!raw[k])
            return fail(b, ONI_EDEVID, "no DS90UB9x raw device (id 24) at device %d: port %c has no serialized "
                        "headstage in passthrough", 7 + p, port);
    }
    if (!dio || r->dio_read < LOOP_DIO_INPUT_BYTES || r->dio_write < 4)
        return fail(b, ONI_EDEVID, "no DigitalIO (id 18) with inputs and outputs at device 7: the stimulator");
    return 0;
}

/* Power and lock the link: ENABLE, DESPWR, then the NP2.0e voltage search
 * 3.3 .. 5.5 V in 0.2 V steps, 1.0 V more once locked
 * (ConfigurePortController.cs:64-67, ConfigureHeadstageNeuropixelsV2ePortController.cs:12-41). */
static int link(struct bring *b)
{
    struct loop_rig_head *r = b->h;
    int rc = wr(b, r->portctl, PC_ENABLE, 1, "port controller");
    if (!rc)
        rc = wr(b, r->portctl, PC_DESPWR, 1, "port controller");
    for (int dv = 33; !rc && dv <= 55; dv += 2) {
        oni_reg_val_t st = 0;
        if ((rc = wr(b, r->portctl, PC_PORTVOLTAGE, 0, "port voltage")) ||
            (rc = wr(b, r->portctl, PC_PORTVOLTAGE, (oni_reg_val_t)dv, "port voltage")))
            break;
        if (oni_read_reg(b->ctx, r->portctl, PC_LINKSTATE, &st) == 0 && (st & PC_LOCK)) {
            rc = wr(b, r->portctl, PC_PORTVOLTAGE, 0, "port voltage");
            if (!rc)
                rc = wr(b, r->portctl, PC_PORTVOLTAGE, (oni_reg_val_t)dv + 10, "port voltage");
            if (!rc && (oni_read_reg(b->ctx, r->portctl, PC_LINKSTATE, &st) || !(st & PC_LOCK)))
                break;
            r->volts = (dv + 10) / 10.0;
            return rc;
        }
    }
    if (!rc)
        wr(b, r->portctl, PC_PORTVOLTAGE, 0, "port voltage"); /* as Bonsai's dispose: power off */
    return rc ? rc : fail(b, ONI_EREADFAILURE, "no link lock on port %c at 3.3 to 5.5 V: no headstage there",
                          r->port == 1 ? 'A' : 'B');
}

/* The raw device and the link's chips as ConfigureHeadstageNeuropixelsV2e.cs
 * :115-170 sets them: streams, link mode, I2C aliases of the probe and its
 * flex EEPROM, the probes' supply on and a reset pulse. */
static int serdes(struct bring *b)
{
    static const struct { oni_reg_addr_t a; oni_reg_val_t v; } regs[] = {
        {DS_ENABLE, 0}, {DS_TRIGGEROFF, 0}, {DS_TRIGGER, 0}, {DS_SYNCBITS, 0}, {DS_DATAGATE, 0}, {DS_MARK, 0},
        {DS_READSZ, 0x00100009}, {DS_MAGIC_MASK, 0xC000003F}, {DS_MAGIC, 0x2E}, {DS_MAGIC_WAIT, 0},
        {DS_DATAMODE, 0x200002B5}, {DS_DATALINES0, 0xFFFFF8A6}, {DS_DATALINES1, 0xFFFFF97B},
    };
    struct loop_rig_head *r = b->h;
    int rc = 0;
    for (size_t i = 0; !rc && i < sizeof regs / sizeof regs[0]; i++)
        rc = wr(b, r->raw, regs[i].a, regs[i].v, "DS90UB9x");
    /* Initialize933SerDesLink (ConfigureDS90UB9x.cs:62-74), raw 12-bit high-frequency mode (1) */
    static const uint8_t des[][2] = {
        {DES_PORTSEL, 0x01}, {DES_PORTMODE, 0x4 + 1}, {DES_I2CCONFIG, 0x58}, {DES_SERALIAS, I2C_SER << 1},
        {DES_GPIOCTRL0, 0x10}, {DES_GPIOCTRL1, 0x32},
        {DES_SLAVEID2, I2C_PROBE << 1}, {DES_SLAVEALIAS2, I2C_PROBE << 1},
        {DES_SLAVEID3, I2C_FLEX << 1}, {DES_SLAVEALIAS3, I2C_FLEX << 1},
    };
    for (size_t i = 0; !rc && i < sizeof des / sizeof des[0]; i++)
        rc = i2c_wr(b, I2C_DES, des[i][0], des[i][1], "deserializer");
    uint32_t g = 0;
    if (!rc)
        rc = i2c_wr(b, I2C_SER, SER_GPIO10, 0x11, "serializer GPIO10"); /* probes off, in reset */
    if (!rc)
        rc = i2c_wr(b, I2C_SER, SER_GPIO32, GPO32_NONE, "serializer GPIO32");
    if (!rc && (rc = i2c_rd(b, I2C_SER, SER_GPIO10, 1, &g)) != 0)
        return fail(b, rc, "reading the serializer's GPIO10: %s", oni_error_str(rc));
    g = (g | GPO10_SUPPLY) & 0xFF;
    if (!rc)
        rc = i2c_wr(b, I2C_SER, SER_GPIO10, g, "serializer GPIO10"); /* supply on */
    if (!rc)
        rc = i2c_wr(b, I2C_SER, SER_GPIO10, g & ~(uint32_t)GPO10_RESET, "serializer GPIO10"); /* reset pulse */
    if (!rc)
        rc = i2c_wr(b, I2C_SER, SER_GPIO10, g | GPO10_RESET, "serializer GPIO10");
    return rc;
}

/* Probe idx (0 = A, 1 = B) of the headstage recording
 * (ConfigureNeuropixelsV2PsbDecoder.cs:77-151): selected, its serial number
 * read, the raw device's stream on, the super-sync pattern, OP_MODE record,
 * deselected. */
static int probe_on(struct bring *b, uint32_t idx)
{
    static const uint8_t sync[12] = {0xB9, 0x61, 0x86, 0x18, 0x61, 0x86, 0x18, 0x61, 0x86, 0x18, 0x61, 0x18};
    struct loop_rig_head *h = b->h;
    char port = h->port == 1 ? 'A' : 'B', probe = idx ? 'B' : 'A';
    int rc = i2c_wr(b, I2C_SER, SER_GPIO32, idx ? GPO32_PROBE_B : GPO32_PROBE_A, "selecting a probe");
    uint32_t lo = 0, hi = 0;
    if (!rc && (i2c_rd(b, I2C_FLEX, 0, 4, &lo) || i2c_rd(b, I2C_FLEX, 4, 4, &hi) || (lo == 0 && hi == 0)))
        return fail(b, ONI_EREADFAILURE, "no probe %c on the headstage of port %c (its flex EEPROM gives no "
                    "serial number)", probe, port);
    h->probe_sn[idx] = (uint64_t)hi << 32 | lo;
    if (!rc)
        rc = wr(b, h->raw, DS_ENABLE, 1, "DS90UB9x");
    for (int i = 0; !rc && i < 12; i++)
        rc = i2c_wr(b, I2C_PROBE, NP_SUPERSYNC0 + (uint32_t)i, sync[i], "probe super-sync");
    if (!rc)
        rc = i2c_wr(b, I2C_PROBE, NP_OP_MODE, NP_OP_RECORD, "probe OP_MODE");
    if (!rc)
        rc = i2c_wr(b, I2C_SER, SER_GPIO32, GPO32_NONE, "deselecting the probe");
    return rc;
}

/* Probe B, where there is one, powered down: the disabled probe of
 * ConfigureNeuropixelsV2PsbDecoder.cs:143-151, so the raw device streams
 * probe A's super-frames alone. */
static int probe_b_off(struct bring *b)
{
    uint32_t lo = 0, hi = 0;
    int rc = i2c_wr(b, I2C_SER, SER_GPIO32, GPO32_PROBE_B, "selecting probe B");
    if (!rc && i2c_rd(b, I2C_FLEX, 0, 4, &lo) == 0 && i2c_rd(b, I2C_FLEX, 4, 4, &hi) == 0 && (lo || hi))
        rc = i2c_wr(b, I2C_PROBE, NP_OP_MODE, NP_OP_POWERDOWN, "probe B OP_MODE");
    if (!rc)
        rc = i2c_wr(b, I2C_SER, SER_GPIO32, GPO32_NONE, "deselecting probe B");
    return rc;
}

/* One port's headstage: link, serializer, its probes. */
static int head(struct bring *b)
{
    int rc = link(b);
    if (!rc)
        rc = serdes(b);
    for (uint32_t i = 0; !rc && i < b->h->nprobes; i++)
        rc = probe_on(b, i);
    if (!rc && b->h->nprobes < 2)
        rc = probe_b_off(b);
    return rc;
}

/* Asynchronous sampling: a frame per change of the inputs, no dead time
 * (ConfigureDigitalIO.cs:109-124 with SampleRate unset, DeadTime 0). */
static int digital_io(struct bring *b)
{
    struct loop_rig *r = b->rig;
    oni_reg_val_t hz = 0;
    /* The loop uses no analog channel: the AnalogIO's 100 kHz stream off
     * (Bonsai's Enable = false), so the default stream carries little more
     * than the DigitalIO's frames. */
    int rc = r->aio >= 0 ? wr(b, (oni_dev_idx_t)r->aio, AIO_ENABLE, 0, "AnalogIO") : 0;
    if (!rc)
        rc = wr(b, r->dio, DIO_ENABLE, 1, "DigitalIO");
    if (!rc && (rc = oni_read_reg(b->ctx, r->dio, DIO_BASE_FREQ_HZ, &hz)) != 0)
        return fail(b, rc, "DigitalIO: reading BASE_FREQ_HZ: %s", oni_error_str(rc));
    if (!rc)
        rc = wr(b, r->dio, DIO_DEAD_TICKS, 0, "DigitalIO");
    if (!rc)
        rc = wr(b, r->dio, DIO_SAMPLE_PERIOD, 0, "DigitalIO");
    return rc;
}

int loop_rig_open(oni_ctx ctx, uint32_t nprobes, struct loop_rig *rig, char *why, size_t cap)
{
    if (!ctx || !rig || nprobes < 1 || nprobes > LOOP_RIG_MAX_PROBES)
        return ONI_EINVALARG;
    memset(rig, 0, sizeof *rig);
    rig->nprobes = nprobes;
    rig->nheads = (nprobes + 1) / 2;
    for (uint32_t k = 0; k < rig->nheads; k++) {
        rig->head[k].port = (int)k + 1;
        rig->head[k].nprobes = nprobes - 2 * k < 2 ? nprobes - 2 * k : 2;
    }
    if (why && cap)
        why[0] = 0;
    struct bring b = {ctx, rig, NULL, why, cap};
    /* PASSTHROUGH bit 0 for port A, bit 2 for B (PassthroughState.cs:8-9),
     * in effect from the RESET that follows (ContextTask.cs:275-295). */
    oni_reg_val_t pass = rig->nheads == 2 ? 1 | 4 : 1, reset = 1;
    int rc = oni_set_opt(ctx, ONIX_OPT_PASSTHROUGH, &pass, sizeof pass);
    if (rc)
        return fail(&b, rc, "setting passthrough on port%s: %s", rig->nheads == 2 ? "s A and B" : " A",
                    oni_error_str(rc));
    if ((rc = oni_set_opt(ctx, ONI_OPT_RESET, &reset, sizeof reset)) != 0)
        return fail(&b, rc, "resetting the card: %s", oni_error_str(rc));
    rc = find(&b);
    for (uint32_t k = 0; !rc && k < rig->nheads; k++) {
        b.h = &rig->head[k];
        rc = head(&b);
    }
    if (!rc)
        rc = digital_io(&b);
    return rc;
}

int loop_rig_is_probe_dev(const struct loop_rig *rig, uint32_t dev)
{
    for (uint32_t k = 0; k < rig->nheads; k++)
        if (rig->head[k].raw == dev)
            return 1;
    return 0;
}

void loop_rig_lanes(const struct loop_rig *rig, struct loop_np2e_lane *lanes, uint8_t *slot)
{
    uint32_t n = 0;
    for (uint16_t idx = 0; idx < 2; idx++)
        for (uint32_t k = 0; k < rig->nheads; k++)
            if (rig->head[k].nprobes > idx) {
                lanes[n] = (struct loop_np2e_lane){rig->head[k].raw, idx};
                slot[2 * k + idx] = (uint8_t)n++;
            }
}

uint32_t loop_rig_stim_pins(uint64_t n)
{
    return (uint32_t)((n & 0x7F) << 1) | (uint32_t)((n + 1) & 1);
}

int loop_rig_stim_of(uint8_t pins)
{
    int k = pins >> 1;
    return (pins & 1) == ((k + 1) & 1) ? k : -1;
}
