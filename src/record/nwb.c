/* nwb.c - NWB 2.x through the HDF5 C library (record.h). */
#include <stdio.h>
#include "record/rec_int.h"

static int nwb_open(struct rec_w *w)
{
    snprintf(w->why, sizeof w->why, "NWB is not written yet");
    return ONI_EUNIMPL;
}

const struct rec_fmt rec_fmt_nwb = {"nwb", nwb_open, NULL, NULL, NULL, NULL, NULL};
