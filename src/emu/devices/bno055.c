/* bno055.c - Bosch BNO055 9-axis IMU at 100 Hz. Payload (28 bytes, the
 * chip's fused-output registers): [i16 euler[3] (1/16 deg: heading, roll,
 * pitch)][i16 quaternion[4] (w, x, y, z; 1 = 2^14)][i16 linear accel[3]
 * (1/100 m/s^2)][i16 gravity[3] (1/100 m/s^2)][i8 temperature (C)][u8
 * calibration status]. The head turns slowly about the vertical axis. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "emu/card.h"

struct bno {
    uint64_t count;
};

static int bno_init(struct emu_dev *d, struct emu_args *a, char *err, size_t cap)
{
    (void)a, (void)err, (void)cap;
    if (!(d->priv = calloc(1, sizeof(struct bno))))
        return ONI_EBADALLOC;
    d->desc.read_size = 28;
    return emu_dev_set_rate(d, 100 * 1000ull);
}

static void bno_fini(struct emu_dev *d) { free(d->priv); }

static void bno_fill(struct emu_dev *d, uint8_t *out, uint64_t t)
{
    (void)t;
    struct bno *p = d->priv;
    double heading = fmod((double)p->count * 0.36, 360.0); /* 36 deg/s */
    double roll = 5 * sin((double)p->count * 0.01), half = heading * 3.14159265358979 / 360;
    int16_t v[13] = {
        (int16_t)lrint(heading * 16), (int16_t)lrint(roll * 16), 0,
        (int16_t)lrint(cos(half) * 16384), 0, 0, (int16_t)lrint(sin(half) * 16384),
        (int16_t)(p->count % 7) - 3, (int16_t)(p->count % 5) - 2, 0,
        0, 0, 981,
    };
    memcpy(out, v, sizeof v);
    out[26] = 25;   /* temperature */
    out[27] = 0xFF; /* fully calibrated */
    p->count++;
}

const struct emu_devtype emu_dev_bno055 = {
    "bno055", ONIX_BNO055, ONIX_HUB_HS64, bno_init, bno_fini, bno_fill, NULL, NULL, NULL, NULL,
};
