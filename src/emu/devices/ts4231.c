/* ts4231.c - the 64-channel headstage's TS4231 light-to-digital converters
 * (ONIX_TS4231V1ARR, id 25, Bonsai ConfigureTS4231V1.cs:25-37: ENABLE at 0).
 * A frame is the envelope of a lighthouse base station's sweep seen by one
 * sensor: [u64 hub clock][u16 sensor index][u32 envelope width][i16
 * envelope type], 16 bytes (TS4231V1DataFrame.cs:42-54). The emulated room
 * has no base station, so the device is listed, configurable and silent. */
#include "emu/headstages.h"

static int ts_init(struct emu_dev *d, struct emu_args *a, char *err, size_t cap)
{
    (void)a, (void)err, (void)cap;
    d->desc.read_size = 16;
    return 0;
}

const struct emu_devtype emu_dev_ts4231 = {
    .name = "ts4231", .id = ONIX_TS4231V1ARR, .hub_kind = ONIX_HUB_HS64, .init = ts_init,
};
