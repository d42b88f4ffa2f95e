/* bench_emu.h - `onigpu bench emu`: what the emulated ONIX card delivers
 * through liboni per PCIe link preset (the test core read with
 * oni_read_frame). Uses only the public API and include/oniemu.h; the card's
 * own benchmark (generation per core, link model at the card, echo, frame
 * age) is `onix-emu bench`, below the hardware boundary. */
#ifndef BENCH_EMU_H
#define BENCH_EMU_H

#include "bench/bench.h"

struct bench_emu_opts {
    double seconds; /* per link preset (> 0) */
    int quiet;      /* 0: print a line per preset to stdout */
};

/* Read the test core through liboni for o->seconds per link preset and add a
 * row per preset to r's main table (link, block, frames, MB/s), and the
 * method (the card's spec, what is timed) to its meta. Returns 0 or
 * the first ONI error (a context that cannot be opened, a failed read). */
int bench_emu_run(const struct bench_emu_opts *o, struct bench_report *r);

#endif
