/* analogio.c - the breakout board's analog I/O (ONIX FMCANALOG1R3 =
 * AnalogIO, version 2 as Bonsai ConfigureAnalogIO.cs:184-185 requires), host
 * hub index 6: 12 channels at 100 kHz (onix-source AnalogIO.h:101).
 * Registers (ConfigureAnalogIO.cs:193-206, AnalogIO.h:31-44): ENABLE 0, CHDIR
 * 1 (bit k: channel k is an output), CH00INRANGE..CH11INRANGE 2..13 (0 +-10
 * V, 1 +-2.5 V, 2 +-5 V). Frames (32 bytes, AnalogInputDataFrame.cs):
 * [u64 hub clock][i16 sample x 12]; an input channel reads 0 (nothing is
 * connected), an output channel the value last written to it. Write frames:
 * [u16 sample x 12] (AnalogOutput.cs: offset binary, 0x8000 = 0 V), one per
 * channel, taken by the output channels. */
#include <stdlib.h>
#include <string.h>
#include "emu/card.h"

#define AIO_CH 12
#define AIO_HZ 100000

struct aio {
    uint32_t dir, range[AIO_CH];
    int16_t out[AIO_CH];
};

static int aio_init(struct emu_dev *d, struct emu_args *a, char *err, size_t cap)
{
    d->desc.version = 2;
    (void)a, (void)err, (void)cap;
    struct aio *p = calloc(1, sizeof *p);
    if (!p)
        return ONI_EBADALLOC;
    d->priv = p;
    d->desc.read_size = 8 + 2 * AIO_CH;
    d->desc.write_size = 2 * AIO_CH;
    return emu_dev_set_rate(d, AIO_HZ * 1000ull);
}

static void aio_fini(struct emu_dev *d) { free(d->priv); }

static void aio_fill(struct emu_dev *d, uint8_t *out, uint64_t t)
{
    const struct aio *p = d->priv;
    uint64_t clock = emu_dev_hub_clock(d, t);
    memcpy(out, &clock, 8);
    for (int k = 0; k < AIO_CH; k++) {
        int16_t s = (p->dir >> k) & 1 ? p->out[k] : 0;
        memcpy(out + 8 + 2 * k, &s, 2);
    }
}

static void aio_write(struct emu_dev *d, const uint8_t *src, size_t n, uint64_t t)
{
    (void)t;
    struct aio *p = d->priv;
    for (int k = 0; k < AIO_CH && (size_t)(2 * k + 2) <= n; k++) {
        uint16_t u;
        memcpy(&u, src + 2 * k, 2);
        p->out[k] = (int16_t)(u ^ 0x8000); /* offset binary to two's complement */
    }
}

static int aio_reg_read(struct emu_dev *d, uint32_t addr, uint32_t *v)
{
    const struct aio *p = d->priv;
    if (addr == 1) {
        *v = p->dir;
        return 1;
    }
    if (addr >= 2 && addr < 2 + AIO_CH) {
        *v = p->range[addr - 2];
        return 1;
    }
    return 0;
}

static int aio_reg_write(struct emu_dev *d, uint32_t addr, uint32_t v)
{
    struct aio *p = d->priv;
    if (addr == 1 && v < (1u << AIO_CH)) {
        p->dir = v;
        return 1;
    }
    if (addr >= 2 && addr < 2 + AIO_CH && v <= 2) {
        p->range[addr - 2] = v;
        return 1;
    }
    return 0;
}

const struct emu_devtype emu_dev_analogio = {
    "analogio", ONIX_FMCANALOG1R3, 0, aio_init, aio_fini, aio_fill, aio_reg_read, aio_reg_write, aio_write, NULL,
};
