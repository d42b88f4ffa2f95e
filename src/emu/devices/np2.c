/* np2.c - Neuropixels 2.0 probe: 384 channels sampled at 30 kHz, 12-bit
 * samples in 16-bit words (docs/devices.md). Payload: [u64 sample count]
 * [u16 ch[384]], offset binary (2048 = 0 V). Signal: band-limited noise plus
 * spiking units (neural.h). Arguments: units=N (default 16). */
#include <stdlib.h>
#include <string.h>
#include "emu/neural.h"

#define NP2_CH 384

struct np2 {
    struct neural n;
    uint64_t count;
};

static int np2_init(struct emu_dev *d, struct emu_args *a, char *err, size_t cap)
{
    uint64_t units;
    int rc = emu_arg_u64(a, "units", 16, 0, NEURAL_MAX_UNITS, 1, &units, err, cap);
    if (rc)
        return rc;
    struct np2 *p = calloc(1, sizeof *p);
    if (!p)
        return ONI_EBADALLOC;
    d->priv = p; /* np2_fini frees what a failure below leaves (card.h) */
    if ((rc = neural_init(&p->n, d->card, d->desc.idx, 0, NP2_CH, 30000, 0, 4095, 2048, 8.0, (uint32_t)units, 6000)) != 0)
        return rc;
    d->desc.read_size = 8 + NP2_CH * 2;
    return emu_dev_set_rate(d, 30000 * 1000ull);
}

static void np2_fini(struct emu_dev *d)
{
    struct np2 *p = d->priv;
    if (p)
        neural_fini(&p->n);
    free(p);
}

static void np2_fill(struct emu_dev *d, uint8_t *out, uint64_t t)
{
    struct np2 *p = d->priv;
    memcpy(out, &p->count, 8);
    p->count++;
    neural_sample(&p->n, (uint16_t *)(void *)(out + 8), t);
}

static int np2_reg_read(struct emu_dev *d, uint32_t addr, uint32_t *v)
{
    struct np2 *p = d->priv;
    switch (addr) {
    case EMU_REG_DEVICE: *v = NP2_CH; return 1;          /* CHANNELS */
    case EMU_REG_DEVICE + 1: *v = p->n.nunits; return 1; /* UNITS */
    }
    return 0;
}

const struct emu_devtype emu_dev_np2 = {
    "np2", ONIX_ONIGPU_NEUROPIX2, ONIX_HUB_HSNP2E, np2_init, np2_fini, np2_fill, np2_reg_read, NULL, NULL, NULL,
};
