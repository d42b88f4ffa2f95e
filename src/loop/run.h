/* run.h - the closed loop on the emulated card as one call (`onigpu run`).
 *
 * loop_run_session opens the emulated card through liboni (the emu driver's
 * options, include/oniemu.h), brings up its rig as the real software does
 * (rig.h: a breakout board, NP2.0e headstages in passthrough on port A and,
 * for more than two probes, B; cfg.probes probes recording), runs spike
 * detection on the probes' super-frames side by side (superframe.h) with the
 * chosen backend of the engine (loop.h), and stimulates
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
 *                    frame, less the match window at both ends), matched one
 *                    to one with the detections (score.h: +-0.4 ms, 50
 *                    um on the probe; a second detection of one spike is a false
 *                    positive): precision, recall, F1, recall per SNR band. */
#ifndef LOOP_RUN_H
#define LOOP_RUN_H

#include <stddef.h>
#include <stdint.h>
#include "oni.h"
#include "loop/loop.h"
#include "loop/kernels.h"
#include "loop/rig.h"
#include "loop/synth.h"

#define LOOP_RUN_MAX_BLOCK 1500  /* frames per block at most: 50 ms at 30 kHz */
#define LOOP_RUN_MIN_SECONDS 0.5 /* the detector calibrates on the first 0.2 s */
#define LOOP_RUN_WARMUP_S 1.0    /* latencies of the first second are reported apart */
#define LOOP_RUN_TRIAL_S 1.0     /* block 0 (pick): each candidate block's trial run */
#define LOOP_RUN_PICK_MAX 256    /* ... blocks 1, 2, 4, ... up to this one */
#define LOOP_RUN_SPIN_US 50u     /* spin_us 0: how long a waiting loop thread spins (yielding) before it sleeps */
/* A real rig: the breakout board with its loopback wire, an NP2.0e on port A
 * (and, for more than two probes, another on port B). */
#define LOOP_RUN_DEFAULT_SPEC "devices=breakout:loopback=1,np2e;mode=realtime"
#define LOOP_RUN_DEFAULT_SPEC2 "devices=breakout:loopback=1,np2e,np2e;mode=realtime"
#define LOOP_RUN_MAX_CARDS 4     /* emulated cards of one run */
#define LOOP_RUN_MAX_PROBES (LOOP_RUN_MAX_CARDS * LOOP_RIG_MAX_PROBES)

struct loop_run_result;

/* A recording beside the loop (cmd_run.c makes one from src/record), of the
 * run after the block trials (block 0) only: a stop during the trials leaves
 * the tap unopened. Every
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
    /* A block's detections and, when the chain decided to stimulate, the
     * pins written for it at host_ns (pins 0: no stimulation); on the
     * sending thread. */
    void (*detect)(void *arg, const struct loop_ephys_out *o, uint32_t pins, uint64_t host_ns);
    /* A stimulation's echo: its tag and its latency (us, as res->lat_us);
     * on the thread that read the echo. */
    void (*echo)(void *arg, uint64_t tag, double lat_us);
    /* The loop, once its thread started, and NULL once it
     * stopped (before it is destroyed): loop_stage_reconfigure may be called
     * on it from another thread in between. On the run's own thread. */
    void (*loop)(void *arg, struct loop *lp);
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
    uint64_t stalls;    /* stalled reads so far (loop_stats.stalls) */
};

struct loop_run_config {
    int backend;        /* enum loop_backend */
    const char *spec;   /* each card (ONI_DRV_EMU_SPEC); NULL: LOOP_RUN_DEFAULT_SPEC (SPEC2 for a card
                           of > 2 probes) */
    uint32_t probes;    /* probes in the loop, 1..LOOP_RUN_MAX_PROBES (0: 1): their channels side by
                           side (probe p's channel c is p * 384 + c), one chain, one decision for
                           all, written to card 0's stimulator */
    uint32_t cards;     /* emulated cards the probes are on, 1..LOOP_RUN_MAX_CARDS, at most
                           LOOP_RIG_MAX_PROBES each (0: as few as hold them); the probes are
                           spread evenly, the first cards taking one more where they do not
                           divide, each card's in rig.h's order. Card k > 0 writes its truth to
                           loop_run_card_truth's file, and its truth templates (templates= in
                           the spec) to loop_run_card_templates's directory. Several cards take
                           host backends only (cpu, gpu-staged, gpu-mapped) and no tap */
    const char *link;   /* PCIe link preset appended to the spec; NULL: the spec's */
    uint32_t block;     /* frames per block, 1..LOOP_RUN_MAX_BLOCK; 0: pick it (trials of
                           LOOP_RUN_TRIAL_S with blocks 1, 2, 4, ... LOOP_RUN_PICK_MAX (a trial
                           at a fraction of the probe's rate skips the powers of two that rate
                           rules out), each emptying the truth file first: the smallest that keeps up;
                           res->block and res->block_why say which and why) */
    uint32_t spin_us;   /* a waiting loop thread spins, yielding, this long before it sleeps:
                           the engine's hand-offs until the other thread wakes it, the card
                           source's DMA completion word in 20 us polls; 0: LOOP_RUN_SPIN_US */
    int dma_reads;      /* GPU stream, host backends: 1 hands a block the card's FIFO does not
                           hold yet to the card's DMA engine (ONI_DRV_READ_ASYNC) and polls its
                           completion word, as a driver that holds the context's lock in a
                           blocking read needs; 0: blocking reads (ONI_DRV_READ), which the emu
                           driver runs beside everything else (docs/latency.md) */
    double seconds;     /* LOOP_RUN_MIN_SECONDS..86400 */
    const char *truth;  /* card 0's ground-truth file: an existing empty file (the card appends) */
    /* The processing chain (loop.h, include/onigpu_stage.h); 0 stages: the
     * built-in one. A stage refused (not loaded, not configured) fails the
     * run before acquisition, ONI_EINVALARG, why saying why. */
    const struct loop_stage_spec *stages;
    uint32_t nstages;
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

/* Where the time after a block's last sample goes (docs/latency.md), per
 * echoed stimulation after the warm-up. AFTER is exact (both ends in the hub
 * clock); the others place the hub clock on the host's clock (the card's
 * acquisition clock runs on it at a fixed offset, bounded by every
 * stimulation's write: res->clock_err_us) and cover it: READY + HANDOFF +
 * COMPUTE + WRITE = AFTER. READY, HANDOFF and COMPUTE are NaN for backends
 * whose reads the host does not see end (the GPU writes them). ECHO is not
 * part of the latency: the loopback input frame's way back to the host. */
enum loop_run_stage {
    LOOP_RUN_AFTER = 0, /* the block's last sample -> the outputs changed (hub clock) */
    LOOP_RUN_READY,     /* the last sample -> the block in the loop's memory (FIFO, card, link) */
    LOOP_RUN_HANDOFF,   /* block read -> the sink called, less COMPUTE: the loop's thread hand-offs */
    LOOP_RUN_COMPUTE,   /* the process stage (host-timed; GPU backends: launch to result) */
    LOOP_RUN_WRITE,     /* the sink called -> the outputs changed (frame, link, card) */
    LOOP_RUN_ECHO,      /* the outputs changed -> the echo frame read by the host */
    LOOP_RUN_NSTAGES
};
/* "after", "ready", ... (NULL for another value). */
const char *loop_run_stage_name(int stage);

/* What a run measured. Valid after loop_run_session returned 0 or an error
 * of the run itself (rc of the result); what is unknown is NaN. */
struct loop_run_result {
    int ran;                /* 1: acquisition ran; the figures below are of it */
    int gpu_left_running;   /* 1: GPU work would not stop (loop_gpu_left_running): the card's context
                               is left open, stopped, and only the process's end frees the GPU */
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
    double emu_lag_ms;      /* the most an emulated card's generator fell behind real time while the
                               loop ran (ONI_DRV_EMU_LAG, the largest of the cards'; NaN: unknown):
                               every latency includes what it was then; a real card has none */
    int stats_rc;           /* 0, or the error reading the card's statistics at the end */
    uint64_t dropped;       /* frames the card dropped while the loop read */
    int verdict;            /* 1 keeping up, 0 behind, -1 unknown */
    uint64_t stalls;        /* stalled reads: reads that waited for a free block slot
                               (back-pressure on the card, not loss) */
    uint64_t spikes, spikes_overflow, spikes_unkept;
    struct loop_score score;  /* all probes, each scored apart (a detection matches its probe's spikes) */
    uint32_t probes, cards;
    struct {
        uint32_t card, on_card; /* its card, and its place there (rig.h: 0 port A's probe A, 1 A's B,
                                   2 B's A, 3 B's B) */
        uint64_t spikes;      /* kept detections on the probe's channels */
        struct loop_score score;
    } probe[LOOP_RUN_MAX_PROBES];
    double warmup_s;        /* the first warmup_s of acquisition (LOOP_RUN_WARMUP_S, or half
                               the loop's time when shorter): latencies apart */
    uint64_t stims, echoes, echoes_unkept;
    uint64_t echoes_unclocked; /* echoes of stimulations answering a spike of a card other than card 0
                                  (its clock is not card 0's: no latency) */
    uint64_t echoes_other;  /* default-stream frames that name no stimulation (other devices, other pins),
                               or an earlier one of its number (the reader 128 stimulations behind) */
    struct loop_run_latency lat;        /* echoes of spikes after the warm-up */
    struct loop_run_latency lat_warmup; /* echoes of spikes in the warm-up */
    struct loop_run_latency stage[LOOP_RUN_NSTAGES]; /* after the warm-up (enum loop_run_stage) */
    double clock_err_us;    /* the stages' clock placement is within this (NaN: not placed) */
    double link_read_us, link_write_us; /* the card's link model for one block / one stimulation */
    int block_picked;       /* 1: cfg.block was 0 and the trials picked res.block */
    char block_why[400];    /* why that block ("" when cfg.block was given) */
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
/* Whether loop_run_session takes cfg as given, before any card is opened:
 * 0, or ONI_EINVALARG with why[cap] saying what it refuses (bounds, a probe
 * count the cards cannot hold, several cards with a GPU-resident backend or
 * a tap, an unavailable backend). */
int loop_run_check(const struct loop_run_config *cfg, char *why, size_t cap);

/* Make a new, empty ground-truth file for a run at path[cap]: in dir as
 * truth-<UTC date and time>.csv (an existing file of that name is never
 * replaced: ONI_EPATHINVALID, as for a dir where no file can be made), or,
 * for a NULL dir, a temporary file in /tmp of this process's own
 * (mkstemps: no name another user could have put a link at), which the
 * caller removes. 0, or the ONI error with why saying what failed. */
int loop_run_truth_new(const char *dir, char *path, size_t cap, char *why, size_t why_cap);
/* The ground-truth file of card k >= 1 of a run whose cfg.truth is truth:
 * "<truth>.card<k>" into path[cap] (made, emptied, by the run; removing it
 * is the caller's, as with truth). 0, or ONI_EINVALARG (no room). */
int loop_run_card_truth(const char *truth, uint32_t k, char *path, size_t cap);
/* Remove a run's truth files: truth and every card's beside it (those
 * that are not there are no error). */
void loop_run_truth_remove(const char *truth);
/* Where card k writes its truth templates when the spec says templates=dir:
 * dir itself for card 0, "<dir>/card<k>" for the others (each card's sets
 * are <raw device>-<probe> there, docs/emulator.md). 0, or ONI_EINVALARG (no
 * room). */
int loop_run_card_templates(const char *dir, uint32_t k, char *path, size_t cap);
/* The card of the loop's probe p in a run of cfg (cfg.cards, bounded by
 * loop_run_check), and into *on_card (may be NULL) its place there. */
uint32_t loop_run_probe_card(const struct loop_run_config *cfg, uint32_t p, uint32_t *on_card);

/* Free what loop_run_session allocated in res (NULL ok). */
void loop_run_result_free(struct loop_run_result *res);

#endif
