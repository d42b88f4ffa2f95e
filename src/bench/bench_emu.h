/* bench_emu.h - `onigpu bench emu`: the emulated ONIX card measured through
 * liboni, the public API and include/oniemu.h only (above the hardware
 * boundary, as a host sees a card): what it delivers per PCIe link preset
 * against the link model, its generation rate with one core, the
 * stimulator's echo, and how old a realtime frame is when it is read. */
#ifndef BENCH_EMU_H
#define BENCH_EMU_H

#include "bench/bench.h"

enum { BENCH_EMU_LINK = 1, BENCH_EMU_GEN = 2, BENCH_EMU_ECHO = 4, BENCH_EMU_AGE = 8, BENCH_EMU_ALL = 15 };

struct bench_emu_opts {
    double seconds; /* per measurement (> 0) */
    int quiet;      /* 0: print a line per measurement to stdout */
    unsigned parts; /* BENCH_EMU_* (0: all) */
};

/* The parts' names, in the order of the bits: "link", "gen", "echo", "age". */
extern const char *const bench_emu_parts[4];

/* Measure the card for o->seconds per measurement, each part into a table
 * of r: link (main table: the test core per link preset, MB/s against the
 * link model), gen (one core's generation per device set, fast mode),
 * echo (write frame -> the stimulator's echo read back, per round trip),
 * age (realtime np2 frames: read time minus timestamp, wake=sleep and
 * spin); the method of each to its meta. Returns 0 or the first ONI error
 * (a context that cannot be opened, a failed read). */
int bench_emu_run(const struct bench_emu_opts *o, struct results *r);

#endif
