/* ds90ub9x.c - the DS90UB9x raw device (ONIX DS90UB9RAW, version 3 as
 * Bonsai ConfigureDS90UB9x.cs:34 requires) of a breakout port in
 * passthrough: host hub index 8 (port A) or 9 (port B), in the table only
 * while ONIX_OPT_PASSTHROUGH has the port's bit at the last RESET. Its
 * registers: ENABLE at 0x8000 (ConfigureDS90UB9x.cs:37), the managed block
 * 0x8001-0x8014 (stored; LINKSTATUS 0x8012 reads the link's lock), and raw
 * I2C accesses (port.c). Its frames are the headstage's (headstage.h):
 * read_size and rate come from the headstage, the payload from its fill. */
#include "emu/card.h"
#include "emu/headstage.h"

static int raw_init(struct emu_dev *d, struct emu_args *a, char *err, size_t cap)
{
    (void)a, (void)err, (void)cap;
    d->desc.version = 3;
    d->enable_reg = 0x8000;
    return 0; /* read_size and rate follow the headstage (spec.c, port.c) */
}

static int raw_port(const struct emu_dev *d) { return d->port; }

static void raw_fill(struct emu_dev *d, uint8_t *out, uint64_t t)
{
    struct emu_port *pt = &d->card->port[raw_port(d)];
    const struct emu_hs_ops *hs = pt->hs;
    int n = hs->nstreams < EMU_HS_MAX_STREAMS ? hs->nstreams : EMU_HS_MAX_STREAMS;
    int s = pt->next_stream % n;
    for (int k = 0; k < n && !pt->stream_on[s]; k++)
        s = (s + 1) % n;
    pt->next_stream = (s + 1) % n;
    hs->fill(pt->hs_priv, s, out, emu_dev_hub_clock(d, t), t);
}

static int raw_reg_read(struct emu_dev *d, uint32_t addr, uint32_t *v)
{
    return emu_port_raw_read(d->card, raw_port(d), addr, v);
}

static int raw_reg_write(struct emu_dev *d, uint32_t addr, uint32_t v)
{
    return emu_port_raw_write(d->card, raw_port(d), addr, v);
}

const struct emu_devtype emu_dev_ds90ub9x = {
    "ds90ub9x", ONIX_DS90UB9RAW, 0, raw_init, NULL, raw_fill, raw_reg_read, raw_reg_write, NULL, NULL,
};
