/* run.h - the closed loop on the emulated card as one call (`onigpu run`).
 *
 * loop_run_session opens the emulated card through liboni (the emu driver's
 * options, include/oniemu.h), brings up its rig as the real software does
 * (rig.h: a breakout board, an NP2.0e headstage on port A in passthrough,
 * probe A recording), runs spike detection on the probe's super-frames
 * (superframe.h) with the chosen backend of the engine (loop.h), and stimulates
 * once for every block with detections by writing the breakout board's
 * digital outputs (rig.h). The board's loopback wire brings each change of
 * the outputs back as a DigitalIO input frame whose hub clock is the
 * stimulator's own trigger time; latency = that time - the hub clock of the
 * super-frame of the block's first spike (one clock, the host hub's). The
 * super-frames come on the card's GPU data stream when the card has one
 * (ONI_DRV_GPU_STREAM), else on the default stream, where only the host
 * backends (cpu, gpu-staged, gpu-mapped) can run. At the end the detections
 * are scored against the card's ground truth. Nothing here prints: progress
 * goes to a callback, the summary into a struct.
 *
 * How the counts relate (docs/closed-loop.md):
 *   spikes detected  every detection the loop sent back;
 *   stimulations     one per block with at least one detection (<= blocks);
 *   echoes           stimulations the loopback input reported (<= stimulations);
 *   scored events    ground-truth spikes inside the scored window (from the
 *                    end of the detector's calibration to the last processed
 *                    frame, less the match tolerance at both ends); recall =
 *                    matched events / scored events, precision = detections
 *                    in the window that match / detections in the window. */
#ifndef LOOP_RUN_H
#define LOOP_RUN_H

#include <stddef.h>
#include <stdint.h>
#include "oni.h"
#include "loop/loop.h"
#include "loop/kernels.h"
#include "loop/synth.h"

#define LOOP_RUN_MAX_BLOCK 1500  /* frames per block at most: 50 ms at 30 kHz */
#define LOOP_RUN_MIN_SECONDS 0.5 /* the detector calibrates on the first 0.2 s */
#define LOOP_RUN_TOL_S 1e-3      /* spike match tolerance */
#define LOOP_RUN_WARMUP_S 1.0    /* latencies of the first second are reported apart */
/* A real rig: the breakout board with its loopback wire, an NP2.0e on port A. */
#define LOOP_RUN_DEFAULT_SPEC "devices=breakout:loopback=1,np2e;mode=realtime"

struct loop_run_result;

/* A recording beside the loop (cmd_run.c makes one from src/record). Every
 * call comes from one of the loop's threads and must not block: copy and
 * return. NULL members are not called. */
struct loop_run_tap {
    void *arg;
    /* Once the rig is up, before acquisition starts: nonzero (an ONI error,
     * why said in why) refuses the run. */
    int (*open)(void *arg, oni_ctx ctx, char *why, size_t cap);
    /* A block of the probe's super-frames in host memory as the loop read
     * it (read-frame form, len bytes); host-read backends only (cpu,
     * gpu-staged, gpu-mapped), on the receiving thread. */
    void (*block)(void *arg, const void *blk, size_t len);
    /* A default-stream frame other than the probe's (DigitalIO echoes,
     * other devices), before the loop looks at it; f stays the loop's. */
    void (*frame)(void *arg, const oni_frame_t *f);
    /* A block's detections and, when it has any, the stimulation written
     * for it (the pins, at host_ns); on the sending thread. */
    void (*detect)(void *arg, const struct loop_ephys_out *o, uint32_t pins, uint64_t host_ns);
};

struct loop_run_progress {
    double t;           /* seconds since acquisition started */
    double fps;         /* frames per second over the last interval */
    uint64_t stims;
    int have_lat;       /* the latency percentiles below are of >= 1 echo */
    double lat_p50_us, lat_p99_us;
    int ss_rc;          /* 0, or the error reading the card's statistics (the rest unknown) */
    double fifo_pct, behind_ms;
    uint64_t dropped;
};

struct loop_run_config {
    int backend;        /* enum loop_backend */
    const char *spec;   /* the card (ONI_DRV_EMU_SPEC); NULL: LOOP_RUN_DEFAULT_SPEC */
    const char *link;   /* PCIe link preset appended to the spec; NULL: the spec's */
    uint32_t block;     /* frames per block, 1..LOOP_RUN_MAX_BLOCK */
    double seconds;     /* LOOP_RUN_MIN_SECONDS..86400 */
    const char *truth;  /* the card's ground-truth file: an existing empty file (the card appends) */
    /* Set to nonzero (any thread, a signal watcher) to end the run early;
     * it then ends as at --seconds: stopped, scored, summed up. May be NULL. */
    const _Atomic int *stop;
    /* Called once as acquisition starts, with the result's link, block_bytes,
     * ai and fs_hz known (may be NULL). */
    void (*started)(void *arg, const struct loop_run_result *res);
    /* Called after every second of acquisition (may be NULL). */
    void (*progress)(void *arg, const struct loop_run_progress *p);
    void *arg;
    const struct loop_run_tap *tap; /* a recording (NULL: none) */
};

struct loop_run_latency {
    size_t n;           /* echoes kept */
    double p50_us, p99_us, p999_us, max_us; /* NaN when n == 0 */
};

/* What a run measured. Valid after loop_run_session returned 0 or an error
 * of the run itself (rc of the result); what is unknown is NaN. */
struct loop_run_result {
    int ran;                /* 1: acquisition ran; the figures below are of it */
    char link[32];          /* the card's link preset, as it reports it */
    int gpu_stream;         /* 1: the probe came on the card's GPU data stream; 0: on the default stream */
    uint32_t block;
    size_t block_bytes;     /* bytes per block (the workload, for `onigpu advise`) */
    double ai;              /* FLOP per byte of the detection pipeline */
    double fs_hz;           /* the probe's frame rate */
    double seconds;         /* the loop's wall time */
    int stopped;            /* 1: ended early by cfg.stop */
    uint64_t frames, bytes; /* processed: blocks sent back, not read */
    double fps;
    double owed_ms;         /* data left in the card's GPU-stream FIFO at the end (NaN: unknown) */
    int stats_rc;           /* 0, or the error reading the card's statistics at the end */
    uint64_t dropped;       /* frames the card dropped while the loop read */
    int verdict;            /* 1 keeping up, 0 behind, -1 unknown */
    uint64_t stalls;        /* stalled reads: reads that waited for a free block slot
                               (back-pressure on the card, not loss) */
    uint64_t spikes, spikes_overflow, spikes_unkept;
    struct loop_score score;
    double warmup_s;        /* the first warmup_s of acquisition (LOOP_RUN_WARMUP_S, or half
                               the loop's time when shorter): latencies apart */
    uint64_t stims, echoes, echoes_unkept;
    uint64_t echoes_other;  /* default-stream frames that name no stimulation (other devices, other pins) */
    struct loop_run_latency lat;        /* echoes of spikes after the warm-up */
    struct loop_run_latency lat_warmup; /* echoes of spikes in the warm-up */
    /* Every echo kept: the stimulation's tag, its latency (us), and 1 when
     * its spike fell in the warm-up. Owned by the result. */
    size_t nlat;
    uint32_t *lat_tag;
    double *lat_us;
    uint8_t *lat_warm;
    int rc;                 /* the run's first error (0: none) */
    char why[256];          /* what failed, for the user ("" when rc == 0) */
};

/* Run the closed loop as cfg says and sum it up into *res (the caller's;
 * free its arrays with loop_run_result_free). Returns:
 *   0                      the run did its job;
 *   ONI_EINVALARG          cfg is wrong, or the card cannot serve the loop
 *                          (no breakout board or NP2.0e, another device on
 *                          the GPU stream, a block that does not fit its
 *                          FIFO, a backend that needs the GPU stream on a
 *                          card without one); res->why says; nothing ran;
 *   ONI_EINVALSTATE        the card runs in mode=fast (no real-time clock);
 *   another ONI error      the card or the loop failed (res->why says where);
 *                          after acquisition started, res holds what was
 *                          measured up to it, and res->rc the error.
 * A run that processed no frame is an error too (ONI_EREADFAILURE, why
 * says): it did not close the loop. */
int loop_run_session(const struct loop_run_config *cfg, struct loop_run_result *res);

/* Free what loop_run_session allocated in res (NULL ok). */
void loop_run_result_free(struct loop_run_result *res);

#endif
