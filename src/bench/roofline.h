/* roofline.h - `onigpu roofline` (thesis table 5.1 and its roofline plot) and
 * the measured numbers `onigpu advise` decides with. */
#ifndef BENCH_ROOFLINE_H
#define BENCH_ROOFLINE_H

#include <stdint.h>
#include <stdio.h>

struct results;

struct roofline {
    double cpu_gflops, cpu_gbps; /* MAC at high AI in cache; memcpy, bytes read + written */
    double gpu_gflops, gpu_gbps; /* 0 without a GPU */
    int have_gpu;
    char gpu_name[128];
    double link_gbps, link_lat_us; /* the card's PCIe link (emu preset in use), 0 = unlimited */
    char link_name[16];
    int have_link;
    double link_4k_mbps, link_10m_mbps; /* measured card -> host reads of 4 kB and 10 MB blocks (0 = failed) */
};

/* Measure the ceilings (quick: smaller buffers, about a second in all).
 * link: emu link preset to ask the emulated card about (NULL = its default).
 * 0 or an ONI error (a missing GPU or card is not an error: have_* say so). */
int roofline_measure(struct roofline *r, int quick, const char *link);
/* The body of `onigpu roofline` (the shape of bench.h): measure, add the
 * ceilings (table 5.1, table "results"), the MAC points (table "points") and
 * the plot to rep (opened by the caller, who prints and closes it), and say
 * table 5.1 on log (NULL: quiet). 0 or an ONI error; after an error during
 * the points the rows measured stay in rep, with meta "error". */
int roofline_bench(const char *link, struct results *rep, FILE *log);

#endif
