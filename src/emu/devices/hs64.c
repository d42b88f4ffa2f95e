/* hs64.c - the 64-channel headstage (ONIX_HUB_HS64): a hub of its own on a
 * breakout port, in standard mode, whose devices sit at the offsets Bonsai's
 * ConfigureHeadstage64.cs:106-112 gives them: 0 RHD2164, 1 BNO055, 2 TS4231,
 * 3 electrical stimulator, 4 optical stimulator (rhd2164.c, bno055.c,
 * ts4231.c, estim.c, ostim.c). Its link locks from about 2 V
 * (ConfigureHeadstage64.cs:38-42) through the 10 V Bonsai charges it with
 * (:124-127). Hub manager values (revision, firmware, clock) are the
 * emulator's; no public source gives them. */
#include "emu/headstage.h"
#include "emu/headstages.h"

static const struct emu_devtype *const hs64_devices[] = {
    &emu_dev_rhd2164, &emu_dev_bno055, &emu_dev_ts4231, &emu_dev_estim, &emu_dev_ostim, NULL,
};

const struct emu_hs_ops emu_hs_hs64 = {
    .name = "hs64",
    .hs_id = ONIX_HUB_HS64,
    .hub_rev = 2,
    .hub_fw = 0x0102,
    .hub_clk_hz = 42000000,
    .lock_min_dv = 20,
    .lock_max_dv = 100,
    .hub_devices = hs64_devices,
};
