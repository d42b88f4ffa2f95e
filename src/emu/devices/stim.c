/* stim.c - stimulator / digital-output sink (private id ONIX_ONIGPU_STIM).
 * Takes write frames of any whole number of 32-bit words; the first word is
 * the tag (e.g. a sequence number or a stimulus pattern). Each write frame is
 * stamped with the acquisition clock when it arrives (after the PCIe link)
 * and, while ECHO is 1 and acquisition runs, answered by a read frame in the
 * normal read stream:
 * [u32 tag][u32 words received][u64 receipt time], whose header time is the
 * receipt time too, so the host measures its closed loop end to end.
 * Registers from ONIEMU_REG_DEVICE (oniemu.h): +0 ECHO (rw, default 1),
 * +1 LAST_TAG, +2/+3 LAST_TIME (low/high), all but ECHO read-only. Argument: echo=0|1. */
#include <stdlib.h>
#include <string.h>
#include "emu/card.h"

struct stim {
    uint32_t echo, tag, words;
    uint64_t time;
};

static int stim_init(struct emu_dev *d, struct emu_args *a, char *err, size_t cap)
{
    uint64_t echo;
    int rc = emu_arg_u64(a, "echo", 1, 0, 1, 1, &echo, err, cap);
    if (rc)
        return rc;
    struct stim *p = calloc(1, sizeof *p);
    if (!p)
        return ONI_EBADALLOC;
    p->echo = (uint32_t)echo;
    d->priv = p;
    d->desc.read_size = 16;
    d->desc.write_size = 4;
    return 0;
}

static void stim_fini(struct emu_dev *d) { free(d->priv); }

static void stim_fill(struct emu_dev *d, uint8_t *out, uint64_t t)
{
    struct stim *p = d->priv;
    memcpy(out, &p->tag, 4);
    memcpy(out + 4, &p->words, 4);
    memcpy(out + 8, &t, 8);
}

static void stim_write(struct emu_dev *d, const uint8_t *src, size_t n, uint64_t t)
{
    struct stim *p = d->priv;
    memcpy(&p->tag, src, 4);
    p->words = (uint32_t)(n / 4);
    p->time = t;
    emu_card_stimulus(d->card);
    if (p->echo)
        emu_dev_emit(d, t);
}

static int stim_reg_read(struct emu_dev *d, uint32_t addr, uint32_t *v)
{
    struct stim *p = d->priv;
    switch (addr) {
    case EMU_REG_DEVICE: *v = p->echo; return 1;
    case EMU_REG_DEVICE + 1: *v = p->tag; return 1;
    case EMU_REG_DEVICE + 2: *v = (uint32_t)p->time; return 1;
    case EMU_REG_DEVICE + 3: *v = (uint32_t)(p->time >> 32); return 1;
    }
    return 0;
}

static int stim_reg_write(struct emu_dev *d, uint32_t addr, uint32_t v)
{
    if (addr != EMU_REG_DEVICE || v > 1)
        return 0;
    ((struct stim *)d->priv)->echo = v;
    return 1;
}

const struct emu_devtype emu_dev_stim = {
    "stim", ONIX_ONIGPU_STIM, 0, stim_init, stim_fini, stim_fill, stim_reg_read, stim_reg_write, stim_write, NULL,
};
