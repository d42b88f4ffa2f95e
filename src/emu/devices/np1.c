/* np1.c - Neuropixels 1.0 probe: 384 channels, AP band at 30 kHz and LFP band
 * at 2.5 kHz, 10-bit samples in 16-bit words, offset binary (512 = 0 V). One
 * frame per LFP sample (2.5 kHz) carrying the 12 AP samples of that period:
 * [u64 frame count][u16 lfp[384]][u16 ap[12][384]]; AP sample i was taken at
 * the frame time + i * 8333 ticks. Arguments: units=N (default 16). */
#include <stdlib.h>
#include <string.h>
#include "emu/neural.h"

#define NP1_CH 384
#define NP1_AP_PER_FRAME 12

struct np1 {
    struct neural ap, lfp;
    uint64_t count;
};

static void np1_fini(struct emu_dev *d)
{
    struct np1 *p = d->priv;
    if (p) {
        neural_fini(&p->ap);
        neural_fini(&p->lfp);
    }
    free(p);
}

static int np1_init(struct emu_dev *d, struct emu_args *a, char *err, size_t cap)
{
    uint64_t units;
    int rc = emu_arg_u64(a, "units", 16, 0, NEURAL_MAX_UNITS, 1, &units, err, cap);
    if (rc)
        return rc;
    struct np1 *p = calloc(1, sizeof *p);
    if (!p)
        return ONI_EBADALLOC;
    d->priv = p; /* np1_fini frees what a failure below leaves (card.h) */
    if ((rc = neural_init(&p->ap, d->card, d->desc.idx, 0, NP1_CH, 30000, 0, 1023, 512, 3.0, (uint32_t)units, 6000)) != 0 ||
        (rc = neural_init(&p->lfp, d->card, d->desc.idx, 1, NP1_CH, 2500, 0, 1023, 512, 20.0, 0, 300)) != 0)
        return rc;
    d->desc.read_size = 8 + NP1_CH * 2 * (1 + NP1_AP_PER_FRAME);
    return emu_dev_set_rate(d, 2500 * 1000ull);
}

static void np1_fill(struct emu_dev *d, uint8_t *out, uint64_t t)
{
    struct np1 *p = d->priv;
    memcpy(out, &p->count, 8);
    p->count++;
    uint16_t *w = (uint16_t *)(void *)(out + 8);
    neural_noise(&p->lfp, w);
    for (int i = 0; i < NP1_AP_PER_FRAME; i++)
        neural_sample(&p->ap, w + NP1_CH * (1 + i), t + (uint64_t)i * p->ap.ticks_per_sample);
}

static int np1_reg_read(struct emu_dev *d, uint32_t addr, uint32_t *v)
{
    struct np1 *p = d->priv;
    switch (addr) {
    case EMU_REG_DEVICE: *v = NP1_CH; return 1;           /* CHANNELS */
    case EMU_REG_DEVICE + 1: *v = p->ap.nunits; return 1; /* UNITS */
    case EMU_REG_DEVICE + 2: *v = 30000; return 1;        /* AP_HZ */
    case EMU_REG_DEVICE + 3: *v = 2500; return 1;         /* LFP_HZ */
    }
    return 0;
}

const struct emu_devtype emu_dev_np1 = {
    "np1", ONIX_NEUROPIX1R0, ONIX_HUB_HSNP1ET, np1_init, np1_fini, np1_fill, np1_reg_read, NULL, NULL, NULL,
};
