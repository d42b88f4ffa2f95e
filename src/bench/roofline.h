/* roofline.h - `onigpu roofline` (thesis table 5.1 and its roofline plot) and
 * the measured numbers `onigpu advise` decides with. */
#ifndef BENCH_ROOFLINE_H
#define BENCH_ROOFLINE_H

#include <stdint.h>
#include <stdio.h>

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
/* The command: measure, print table 5.1, write CSV + JSON + PNG into out_dir. */
int roofline_run(const char *out_dir, const char *link, int argc, char **argv, FILE *log);

#endif
