/* digitalio.c - the breakout board's digital I/O (ONIX BREAKDIG1R3 =
 * DigitalIO, version 2 as Bonsai ConfigureDigitalIO.cs:133-134 requires),
 * host hub index 7. Registers (ConfigureDigitalIO.cs:137-140, onix-source
 * DigitalIO.h:29-35): ENABLE 0, BASE_FREQ_HZ 5 (ro, the hub clock),
 * DEAD_TICKS 6 (stored), SAMPLE_PERIOD 7 (0: a frame at each input change;
 * else one every SAMPLE_PERIOD + 2 ticks of BASE_FREQ_HZ: the "- 2" of
 * ConfigureDigitalIO.cs:98 and DigitalIO.cpp configureDevice). Frames (12
 * bytes, DigitalInputDataFrame.cs:41-47, DigitalIO.cpp processFrames):
 * [u64 hub clock][u8 input pins 0-7][u8 0][u16 buttons]. Output: a write
 * frame of one u32, the pins in bits 0-7 (DigitalOutput.cs:39). Argument
 * loopback=0|1 (default 0): 1 wires output pin k to input pin k, so each
 * write that changes the pins changes the inputs at the write's arrival, and
 * in asynchronous mode gives one input frame stamped with that time (the
 * closed loop's stimulator trigger time). Without it the inputs stay 0 and
 * the buttons are never pressed. */
#include <stdlib.h>
#include <string.h>
#include "emu/card.h"

enum { DIO_BASE_FREQ_HZ = 5, DIO_DEAD_TICKS, DIO_SAMPLE_PERIOD };

struct dio {
    int loopback;
    uint32_t outputs, dead_ticks, period;
    uint8_t inputs;
};

static int dio_init(struct emu_dev *d, struct emu_args *a, char *err, size_t cap)
{
    d->desc.version = 2;
    uint64_t loop;
    int rc = emu_arg_u64(a, "loopback", 0, 0, 1, 1, &loop, err, cap);
    if (rc)
        return rc;
    struct dio *p = calloc(1, sizeof *p);
    if (!p)
        return ONI_EBADALLOC;
    p->loopback = (int)loop;
    d->priv = p;
    d->desc.read_size = 12;
    d->desc.write_size = 4;
    return 0;
}

static void dio_fini(struct emu_dev *d) { free(d->priv); }

static void dio_fill(struct emu_dev *d, uint8_t *out, uint64_t t)
{
    const struct dio *p = d->priv;
    uint64_t clock = emu_dev_hub_clock(d, t);
    memcpy(out, &clock, 8);
    out[8] = p->inputs;
    out[9] = 0;
    memset(out + 10, 0, 2); /* buttons */
}

static void dio_write(struct emu_dev *d, const uint8_t *src, size_t n, uint64_t t)
{
    (void)n;
    struct dio *p = d->priv;
    uint32_t old = p->outputs;
    memcpy(&p->outputs, src, 4);
    p->outputs &= 0xFF;
    if (p->outputs != old)
        emu_card_stimulus(d->card); /* an edge: the stimulator it drives fires (its artefact, neural.h) */
    if (!p->loopback || p->inputs == (uint8_t)p->outputs)
        return;
    p->inputs = (uint8_t)p->outputs;
    if (!p->period)
        emu_dev_emit(d, t); /* asynchronous mode: the change is a frame */
}

static int dio_reg_read(struct emu_dev *d, uint32_t addr, uint32_t *v)
{
    const struct dio *p = d->priv;
    switch (addr) {
    case DIO_BASE_FREQ_HZ: *v = emu_dev_hub_hz(d); return 1;
    case DIO_DEAD_TICKS: *v = p->dead_ticks; return 1;
    case DIO_SAMPLE_PERIOD: *v = p->period; return 1;
    case EMU_REG_DEVICE: *v = p->outputs; return 1; /* OUTPUTS (the emulator's): the pins last written */
    }
    return 0;
}

static int dio_reg_write(struct emu_dev *d, uint32_t addr, uint32_t v)
{
    struct dio *p = d->priv;
    switch (addr) {
    case DIO_DEAD_TICKS: p->dead_ticks = v; return 1;
    case DIO_SAMPLE_PERIOD:
        if (v && v > UINT32_MAX - 2)
            return 0;
        if (v && emu_dev_set_clk_div(d, v + 2, emu_dev_hub_hz(d)))
            return 0;
        if (!v)
            emu_dev_set_rate(d, 0);
        p->period = v;
        return 1;
    }
    return 0;
}

const struct emu_devtype emu_dev_digitalio = {
    "digitalio", ONIX_BREAKDIG1R3, 0, dio_init, dio_fini, dio_fill, dio_reg_read, dio_reg_write, dio_write, NULL,
};
