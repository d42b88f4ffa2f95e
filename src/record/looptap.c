/* looptap.c - the closed loop's recording tap (looptap.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "record/looptap.h"
#include "onix.h"

static int tap_open(void *arg, oni_ctx ctx, char *why, size_t cap)
{
    struct rec_loop_tap *t = arg;
    oni_size_t n = 0;
    size_t len = sizeof n;
    int rc = oni_get_opt(ctx, ONI_OPT_NUMDEVICES, &n, &len);
    oni_device_t *tab = rc ? NULL : calloc(n ? n : 1, sizeof *tab);
    len = n * sizeof *tab;
    if (!rc && (!tab || oni_get_opt(ctx, ONI_OPT_DEVICETABLE, tab, &len)))
        rc = tab ? ONI_EREADFAILURE : ONI_EBADALLOC;
    for (oni_size_t i = 0; !rc && i < n && t->nraw < 2; i++)
        if (tab[i].id == ONIX_DS90UB9RAW)
            t->raw[t->nraw++] = tab[i].idx;
    if (!rc)
        rc = rec_open(&t->cfg, ctx, tab, n, &t->r, why, cap);
    else
        snprintf(why, cap, "cannot read the device table: %s", oni_error_str(rc));
    free(tab);
    if (!rc && t->opened)
        t->opened(t->arg, t->r);
    return rc;
}

static void tap_block(void *arg, const void *blk, size_t len)
{
    struct rec_loop_tap *t = arg;
    rec_frames(t->r, blk, len, 0);
}

static void tap_frame(void *arg, const oni_frame_t *f)
{
    struct rec_loop_tap *t = arg;
    rec_frame(t->r, f, 0);
}

static void tap_detect(void *arg, const struct loop_ephys_out *o, uint32_t pins, uint64_t host_ns)
{
    struct rec_loop_tap *t = arg;
    if (!o->nspikes)
        return;
    /* each probe's spikes on its own stream (the loop's channel p * 384 + c) */
    for (uint32_t p = 0; p < 2 * t->nraw; p++) {
        struct rec_spike sp[LOOP_EPHYS_MAXSPIKES];
        uint32_t n = 0;
        for (uint32_t i = 0; i < o->nspikes; i++)
            if (o->spikes[i].chan / 384 == p)
                sp[n++] = (struct rec_spike){o->spikes[i].time, o->spikes[i].chan % 384,
                                             o->spikes[i].unit == ONIGPU_UNIT_NONE ? -1 : (int32_t)o->spikes[i].unit};
        if (n)
            rec_spikes(t->r, t->raw[p / 2], p % 2, sp, n, host_ns);
    }
    if (pins) /* the chain decided to stimulate: the outputs were written */
        rec_stim(t->r, o->t_stim, pins, host_ns);
}

void rec_loop_tap_init(struct rec_loop_tap *t, const struct rec_config *c)
{
    memset(t, 0, sizeof *t);
    t->cfg = *c;
    t->cfg.stim_stream = t->cfg.spike_stream = 1;
    t->tap = (struct loop_run_tap){.arg = t, .open = tap_open, .block = tap_block, .frame = tap_frame,
                                   .detect = tap_detect};
}

int rec_loop_tap_close(struct rec_loop_tap *t, struct rec_stats *st)
{
    if (!t->r) {
        if (st)
            memset(st, 0, sizeof *st);
        return 0;
    }
    int rc = rec_close(t->r, st);
    t->r = NULL;
    return rc;
}
