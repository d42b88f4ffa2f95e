/* memusage.c - the card's memory monitor (ONIX MEMUSAGE = MemoryMonitor,
 * version 2 as Bonsai ConfigureMemoryMonitor.cs:89-90 requires), always on
 * hub 0 (index 10 on the breakout board). The card's memory here is both
 * data streams' FIFOs. Payload (12 bytes): [u64 hub clock][32-bit words
 * waiting in the FIFOs] as one little-endian u32, as current software reads
 * it (Bonsai MemoryMonitorDataFrame.cs:26-30, onix-source MemoryMonitor.cpp
 * processFrames), or with le=0 as two 16-bit words, high half first (as
 * upstream's onix-loadtest.c:225 reads it).
 * Registers: ONIX ENABLE, CLK_DIV, CLK_HZ, TOTAL_MEM (3, = MEM_WORDS), MEM_USAGE (4); the
 * emulator's RATE_HZ (writable) and, from its device block, FILL_DATA_KIB,
 * FILL_GPU_KIB, CAPACITY_KIB, DROPPED_DATA, DROPPED_GPU (low 32 bits), all
 * read-only. Arguments: hz=N (default 100, 1..100000), le=0|1 (default 1). */
#include <stdlib.h>
#include <string.h>
#include "emu/card.h"

#define MU_MAX_HZ 100000

struct mu {
    int le; /* usage as one little-endian u32 */
};

static int mu_init(struct emu_dev *d, struct emu_args *a, char *err, size_t cap)
{
    d->desc.version = 2;
    uint64_t hz, le;
    int rc;
    if ((rc = emu_arg_u64(a, "hz", 100, 1, MU_MAX_HZ, 1, &hz, err, cap)) ||
        (rc = emu_arg_u64(a, "le", 1, 0, 1, 1, &le, err, cap)))
        return rc;
    struct mu *p = calloc(1, sizeof *p);
    if (!p)
        return ONI_EBADALLOC;
    p->le = (int)le;
    d->priv = p;
    d->desc.read_size = 12;
    return emu_dev_set_hz(d, hz, MU_MAX_HZ);
}

static uint32_t words32(uint64_t bytes) { return bytes / 4 > UINT32_MAX ? UINT32_MAX : (uint32_t)(bytes / 4); }

static uint32_t usage_words(const struct emu_dev *d)
{
    const struct emu_fifo *f = d->card->fifo;
    return words32(f[0].fill + f[1].fill);
}

static void mu_fill(struct emu_dev *d, uint8_t *out, uint64_t t)
{
    uint64_t clock = emu_dev_hub_clock(d, t);
    uint32_t used = usage_words(d);
    memcpy(out, &clock, 8);
    if (!((const struct mu *)d->priv)->le) /* 16-bit words, high half first */
        used = used << 16 | used >> 16;
    memcpy(out + 8, &used, 4);
}

static int mu_reg_read(struct emu_dev *d, uint32_t addr, uint32_t *v)
{
    const struct emu_fifo *f = d->card->fifo;
    switch (addr) {
    case ONIX_MEMUSAGE_MEM_WORDS: *v = words32(f[0].cap + f[1].cap); return 1;
    case ONIX_MEMUSAGE_MEM_USAGE: *v = usage_words(d); return 1;
    case EMU_REG_DEVICE: *v = (uint32_t)(f[0].fill >> 10); return 1;
    case EMU_REG_DEVICE + 1: *v = (uint32_t)(f[1].fill >> 10); return 1;
    case EMU_REG_DEVICE + 2: *v = (uint32_t)(f[0].cap >> 10); return 1;
    case EMU_REG_DEVICE + 3: *v = (uint32_t)f[0].dropped_frames; return 1;
    case EMU_REG_DEVICE + 4: *v = (uint32_t)f[1].dropped_frames; return 1;
    }
    return emu_dev_clk_read(d, addr, v);
}

static void mu_fini(struct emu_dev *d) { free(d->priv); }

static int mu_reg_write(struct emu_dev *d, uint32_t addr, uint32_t v)
{
    return emu_dev_clk_write(d, addr, v, MU_MAX_HZ);
}

const struct emu_devtype emu_dev_memusage = {
    "memusage", ONIX_MEMUSAGE, 0, mu_init, mu_fini, mu_fill, mu_reg_read, mu_reg_write, NULL, NULL,
};
