/* bno055.c - Bosch BNO055 9-axis IMU, in both forms ONIX has it:
 *
 * - the chip itself (bno055_chip_*, headstages.h), polled by the host over
 *   I2C 0x28 behind the serializer of the NP headstages (Bonsai
 *   PolledBno055Data.cs:64-111, onix-source PolledBno055.cpp): its page 0
 *   register file (BNO055 data sheet table 4-2), configured as Bonsai's
 *   ConfigurePolledBno055.cs:40-45 does (power mode, page, oscillator, axis
 *   map, operation mode NDOF), the fused-output block 0x1A..0x35 read in
 *   1- to 4-byte accesses;
 * - the device of the 64-channel headstage's hub (ONIX_BNO055, spec name
 *   bno055): the headstage's FPGA polls the chip at 100 Hz and sends
 *   [u64 hub clock][the 28 bytes of 0x1A..0x35] (Bonsai Bno055DataFrame.cs
 *   Bno055Payload: HubClock then Bno055DataPayload), 36 bytes.
 *
 * Both read the same motion (bno055_data). The axis map and sign registers
 * are stored and read back but not applied to the output. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "emu/card.h"
#include "emu/headstages.h"

/* page 0 registers used here (data sheet table 4-2) */
enum {
    BNO_CHIP_ID = 0x00, BNO_ACC_ID = 0x01, BNO_MAG_ID = 0x02, BNO_GYR_ID = 0x03,
    BNO_SW_REV_LSB = 0x04, BNO_SW_REV_MSB = 0x05, BNO_BL_REV = 0x06, BNO_PAGE_ID = 0x07,
    BNO_DATA_FIRST = 0x1A, BNO_ST_RESULT = 0x36, BNO_SYS_STATUS = 0x39,
    BNO_UNIT_SEL = 0x3B, BNO_OPR_MODE = 0x3D, BNO_PWR_MODE = 0x3E, BNO_SYS_TRIGGER = 0x3F,
    BNO_TEMP_SOURCE = 0x40, BNO_AXIS_MAP_CONFIG = 0x41, BNO_AXIS_MAP_SIGN = 0x42,
    BNO_OFFSETS_FIRST = 0x55, BNO_OFFSETS_LAST = 0x6A
};

static void put16(uint8_t *p, double v)
{
    long x = lrint(v);
    x = x < -32768 ? -32768 : x > 32767 ? 32767 : x;
    p[0] = (uint8_t)((uint16_t)x & 0xFF);
    p[1] = (uint8_t)((uint16_t)x >> 8);
}

void bno055_data(double t, uint8_t *out)
{
    double heading = fmod(t * 36.0, 360.0); /* degrees */
    double roll = 5 * sin(t), half = heading * 3.14159265358979 / 360;
    memset(out, 0, BNO055_DATA);
    put16(out + 0, heading * 16); /* euler: heading, roll, pitch */
    put16(out + 2, roll * 16);
    put16(out + 6, cos(half) * 16384); /* quaternion w, x, y, z: about the vertical */
    put16(out + 12, sin(half) * 16384);
    put16(out + 14, 3 * sin(7 * t)); /* linear acceleration: small jitter, 1/100 m/s^2 */
    put16(out + 16, 2 * cos(5 * t));
    put16(out + 24, 981); /* gravity: 9.81 m/s^2 along z */
    out[26] = 25;         /* temperature, C */
    out[27] = 0xFF;       /* calibration: system, gyro, accel, mag fully calibrated */
}

void bno055_chip_init(struct bno055_chip *b)
{
    memset(b->reg, 0, sizeof b->reg);
    b->reg[BNO_CHIP_ID] = 0xA0;
    b->reg[BNO_ACC_ID] = 0xFB;
    b->reg[BNO_MAG_ID] = 0x32;
    b->reg[BNO_GYR_ID] = 0x0F;
    b->reg[BNO_SW_REV_LSB] = 0x11;
    b->reg[BNO_SW_REV_MSB] = 0x03;
    b->reg[BNO_BL_REV] = 0x15;
    b->reg[BNO_ST_RESULT] = 0x0F; /* every self test passed */
    b->reg[BNO_UNIT_SEL] = 0x80;
    b->reg[BNO_AXIS_MAP_CONFIG] = 0x24;
}

static int fusion(const struct bno055_chip *b)
{
    uint8_t m = b->reg[BNO_OPR_MODE] & 0x0F;
    return m >= 0x08 && m <= 0x0C;
}

int bno055_chip_read(struct bno055_chip *b, uint32_t reg, unsigned nbytes, uint64_t t, uint32_t *v)
{
    if (nbytes < 1 || nbytes > 4 || reg + nbytes > sizeof b->reg)
        return 0;
    uint8_t data[BNO055_DATA] = {0};
    if (fusion(b))
        bno055_data((double)t / EMU_ACQ_HZ, data);
    *v = 0;
    for (unsigned i = 0; i < nbytes; i++) {
        uint32_t r = reg + i;
        uint8_t x = r >= BNO_DATA_FIRST && r < BNO_DATA_FIRST + BNO055_DATA ? data[r - BNO_DATA_FIRST]
                    : r == BNO_SYS_STATUS ? (fusion(b) ? 5 : 0) /* 5: fusion algorithm running */
                                          : b->reg[r];
        *v |= (uint32_t)x << (8 * i);
    }
    return 1;
}

static int writable(uint32_t r)
{
    switch (r) {
    case BNO_PAGE_ID: case BNO_UNIT_SEL: case BNO_OPR_MODE: case BNO_PWR_MODE: case BNO_SYS_TRIGGER:
    case BNO_TEMP_SOURCE: case BNO_AXIS_MAP_CONFIG: case BNO_AXIS_MAP_SIGN:
        return 1;
    }
    return r >= BNO_OFFSETS_FIRST && r <= BNO_OFFSETS_LAST;
}

int bno055_chip_write(struct bno055_chip *b, uint32_t reg, unsigned nbytes, uint32_t v)
{
    if (nbytes < 1 || nbytes > 4 || reg + nbytes > sizeof b->reg)
        return 0;
    /* an I2C chip acknowledges every byte; writes to read-only registers are ignored */
    for (unsigned i = 0; i < nbytes; i++)
        if (writable(reg + i))
            b->reg[reg + i] = (uint8_t)(v >> (8 * i));
    return 1;
}

/* --- the hs64 hub device --------------------------------------------------- */

static int bno_init(struct emu_dev *d, struct emu_args *a, char *err, size_t cap)
{
    (void)a, (void)err, (void)cap;
    d->desc.read_size = 8 + BNO055_DATA;
    return emu_dev_set_rate(d, 100 * 1000ull);
}

static void bno_fill(struct emu_dev *d, uint8_t *out, uint64_t t)
{
    uint64_t clk = emu_dev_hub_clock(d, t);
    memcpy(out, &clk, 8);
    bno055_data((double)t / EMU_ACQ_HZ, out + 8);
}

const struct emu_devtype emu_dev_bno055 = {
    "bno055", ONIX_BNO055, ONIX_HUB_HS64, bno_init, NULL, bno_fill, NULL, NULL, NULL, NULL,
};
