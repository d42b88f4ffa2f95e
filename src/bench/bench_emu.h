/* bench_emu.h - `onigpu bench emu`: how fast the emulated ONIX card generates
 * frames with one core (fast mode), and what its PCIe link model makes of
 * transfers, per preset, at the card boundary and through liboni.
 *
 * This benchmark measures the card itself, so it calls the card's interface
 * (src/emu/emu.h) directly, like the emu driver does; the liboni rows use
 * only the public API. */
#ifndef BENCH_EMU_H
#define BENCH_EMU_H

#include "bench/bench.h"

struct bench_emu_opts {
    double seconds; /* per measurement (> 0) */
    int quiet;      /* 0: print a line per measurement to stdout */
    const char *only; /* NULL: everything; else a comma list of gen,link,liboni,echo,age */
};

/* Run every measurement and add rows to r: table "results" (generation:
 * device set, path read|peek, MB/s, frames/s, times real time), table
 * "link" (preset, block, MB/s, model MB/s, per-transfer stats) and table
 * "liboni" (preset, MB/s through oni_read_frame) and table "echo" (write
 * frame -> stimulator echo read back, latency stats, realtime mode) and
 * table "age" (realtime np2 frames: read time minus timestamp). Returns 0 or the first
 * ONI error (a card that cannot be created, a failed read). */
int bench_emu_run(const struct bench_emu_opts *o, struct bench_report *r);

#endif
