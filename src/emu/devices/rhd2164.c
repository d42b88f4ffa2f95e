/* rhd2164.c - Intan RHD2164: 64 amplifier channels at 30 kHz, 16-bit offset
 * binary (32768 = 0 V, 0.195 uV/LSB), plus 3 auxiliary inputs. Payload:
 * [u64 sample count][u16 ch[64]][u16 aux[3]] = 142 bytes. Arguments:
 * units=N (default 8). */
#include <stdlib.h>
#include <string.h>
#include "emu/neural.h"

#define RHD_CH 64

struct rhd {
    struct neural n;
    uint64_t count;
};

static int rhd_init(struct emu_dev *d, struct emu_args *a, char *err, size_t cap)
{
    uint64_t units;
    int rc = emu_arg_u64(a, "units", 8, 0, NEURAL_MAX_UNITS, 1, &units, err, cap);
    if (rc)
        return rc;
    struct rhd *p = calloc(1, sizeof *p);
    if (!p)
        return ONI_EBADALLOC;
    d->priv = p; /* rhd_fini frees what a failure below leaves (card.h) */
    if ((rc = neural_init(&p->n, d, RHD_CH, 30000, 0, 65535, 32768, 12.0, (uint32_t)units, 6000)) != 0)
        return rc;
    d->desc.read_size = 8 + RHD_CH * 2 + 3 * 2;
    return emu_dev_set_rate(d, 30000 * 1000ull);
}

static void rhd_fini(struct emu_dev *d)
{
    struct rhd *p = d->priv;
    if (p)
        neural_fini(&p->n);
    free(p);
}

static void rhd_fill(struct emu_dev *d, uint8_t *out, uint64_t t)
{
    struct rhd *p = d->priv;
    memcpy(out, &p->count, 8);
    neural_sample(&p->n, (uint16_t *)(void *)(out + 8), t);
    /* aux inputs: slow ramps, as from a connected accelerometer */
    uint16_t aux[3] = {(uint16_t)(32768 + (p->count >> 4)), (uint16_t)(32768 - (p->count >> 5)), 32768};
    memcpy(out + 8 + RHD_CH * 2, aux, sizeof aux);
    p->count++;
}

static int rhd_reg_read(struct emu_dev *d, uint32_t addr, uint32_t *v)
{
    struct rhd *p = d->priv;
    switch (addr) {
    case EMU_REG_DEVICE: *v = RHD_CH; return 1;          /* CHANNELS */
    case EMU_REG_DEVICE + 1: *v = p->n.nunits; return 1; /* UNITS */
    }
    return 0;
}

const struct emu_devtype emu_dev_rhd2164 = {
    "rhd2164", ONIX_RHD2164, ONIX_HUB_HS64, rhd_init, rhd_fini, rhd_fill, rhd_reg_read, NULL, NULL, NULL,
};
