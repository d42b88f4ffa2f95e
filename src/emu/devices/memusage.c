/* memusage.c - the card's memory-usage monitor (ONIX MEMUSAGE), always on hub
 * 0: reports the fill of both FIFOs in the card's DDR. Payload (40 bytes):
 * [u64 bytes waiting, default stream][u64 bytes waiting, GPU stream][u64
 * capacity of each stream's FIFO][u64 frames dropped, default][u64 frames
 * dropped, GPU], as of the frame's time. Registers: 0x10 FILL_DATA_KIB,
 * 0x11 FILL_GPU_KIB, 0x12 CAPACITY_KIB, 0x13 DROPPED_DATA, 0x14 DROPPED_GPU
 * (low 32 bits), all read-only; RATE_HZ writable. Argument: hz=N (default
 * 100, 1..100000). */
#include <string.h>
#include "emu/card.h"

static int mu_init(struct emu_dev *d, struct emu_args *a, char *err, size_t cap)
{
    uint64_t hz;
    int rc = emu_arg_u64(a, "hz", 100, 1, 100000, 1, &hz, err, cap);
    if (rc)
        return rc;
    d->desc.read_size = 40;
    return emu_dev_set_rate(d, hz * 1000);
}

static void mu_fill(struct emu_dev *d, uint8_t *out, uint64_t t)
{
    (void)t;
    const struct emu_fifo *f = d->card->fifo;
    uint64_t v[5] = {f[0].fill, f[1].fill, f[0].cap, f[0].dropped_frames, f[1].dropped_frames};
    memcpy(out, v, sizeof v);
}

static int mu_reg_read(struct emu_dev *d, uint32_t addr, uint32_t *v)
{
    const struct emu_fifo *f = d->card->fifo;
    switch (addr) {
    case EMU_REG_DEVICE: *v = (uint32_t)(f[0].fill >> 10); return 1;
    case EMU_REG_DEVICE + 1: *v = (uint32_t)(f[1].fill >> 10); return 1;
    case EMU_REG_DEVICE + 2: *v = (uint32_t)(f[0].cap >> 10); return 1;
    case EMU_REG_DEVICE + 3: *v = (uint32_t)f[0].dropped_frames; return 1;
    case EMU_REG_DEVICE + 4: *v = (uint32_t)f[1].dropped_frames; return 1;
    }
    return 0;
}

static int mu_reg_write(struct emu_dev *d, uint32_t addr, uint32_t v)
{
    if (addr != EMU_REG_RATE_HZ || v < 1 || v > 100000)
        return 0;
    return emu_dev_set_rate(d, (uint64_t)v * 1000) == 0;
}

const struct emu_devtype emu_dev_memusage = {
    "memusage", ONIX_MEMUSAGE, 0, mu_init, NULL, mu_fill, mu_reg_read, mu_reg_write, NULL,
};
