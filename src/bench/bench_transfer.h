/* bench_transfer.h - `onigpu bench transfer`: thesis chapter 4's transfer
 * benchmark over every path of the GPU data stream (include/onigpu.h), both
 * directions, on the emulated card with a chosen PCIe link preset.
 *
 * Method: sizes double from min_size to max_size; each size is repeated until
 * `total` bytes moved (at least min_reps, at most max_reps times); one
 * transfer is timed from the call that starts it to the moment all its data
 * has arrived (thesis 4.1). The card's test core keeps its FIFO filled; the
 * wait for data to be available is not timed. */
#ifndef BENCH_TRANSFER_H
#define BENCH_TRANSFER_H

#include <stdint.h>
#include <stdio.h>

struct results;

struct results;

enum xfer_path {
    XFER_REFERENCE = 0, /* plain page-locked cudaMemcpyAsync + sync, no card: the ceiling */
    XFER_ORIGINAL,      /* oni_read_frame / oni_write_frame + cudaMemcpy per frame (listing 4.1) */
    XFER_STAGED,        /* ONI_DRV_READ/WRITE of a page-locked host block + copy (listing 4.2) */
    XFER_DIRECT,        /* ONI_DRV_READ/WRITE of a GPU buffer, pinned per transfer (listing 4.3) */
    XFER_PREPINNED,     /* the same, pinned once with ONI_DRV_PIN (listing 4.4) */
    XFER_CHUNKED,       /* GPU buffer staged in chunks with overlap (ONI_DRV_CHUNK_SZ, seed 001) */
    /* Not in "all": the reference copy, but walking through a 64 MiB
     * page-locked host ring the way the card's DMA walks its FIFO (every
     * transfer from new addresses), in 4 KiB pages or transparent huge pages.
     * They tell the card's own time from what fresh host addresses cost the
     * copy engine. */
    XFER_RING,
    XFER_RING_THP,
    /* Not in "all": direct prepinned, with the card's DMA agent on
     * (ONI_DRV_DMA_AGENT = xfer_opts.agent_max): a GPU-resident kernel moves
     * the blocks, no CUDA call per transfer. */
    XFER_AGENT,
    XFER_NPATHS
};

#define XFER_ALL_PATHS ((1u << (XFER_CHUNKED + 1)) - 1) /* "all": every path of the card and the reference */

enum { XFER_DIR_READ = 1, XFER_DIR_WRITE = 2 }; /* card -> GPU, GPU -> card */

struct xfer_opts {
    uint64_t min_size, max_size; /* bytes, powers of two not needed; doubled from min */
    uint64_t total;              /* bytes per size */
    uint64_t min_reps, max_reps;
    unsigned paths;              /* bit (1 << enum xfer_path) */
    unsigned dirs;               /* XFER_DIR_* bits */
    const char *link;            /* emu link preset, e.g. "gen2x4", "unlimited" */
    uint32_t chunk;              /* chunk size of XFER_CHUNKED */
    uint32_t agent_max;          /* ONI_DRV_DMA_AGENT of XFER_AGENT (0: every size) */
    const char *out_dir;         /* where the command opens the result set */
    FILE *log;                   /* progress lines (NULL: quiet) */
};

/* Name of a path ("reference", "original", ...) and its inverse (-1: unknown). */
const char *xfer_path_name(int path);
int xfer_path_parse(const char *name);

#define XFER_OUTLIERS_MAX 100 /* rows of table "outliers" per path and size */

/* The body of `onigpu bench transfer` for the link o->link (the shape of
 * bench.h): adds to r, the open set "transfer-<link>", rows per
 * direction/path/size (n, mean, SD, min, p50, p90, p99, p99.9, max in ns,
 * MB/s, max/p50), tables "fit" (t = l + s/b per path), "pin",
 * "outliers" and "targets", and PNG plots of time against size and
 * histograms at 4 KiB and 8 MiB. Returns 0 or the first ONI error;
 * ONI_ENOGPU when there is no GPU (nothing added). */
int bench_transfer_run(const struct xfer_opts *o, struct results *r);

#endif
