/* oniemu.h - options of the `emu` driver (the emulated ONIX host).
 *
 * The emulated card is configured by a spec string "key=value;key=value":
 *   devices=breakout,np2e device set (docs/devices.md lists names and arguments): breakout =
 *                         the host + breakout board, headstages plug into its ports (port=a|b)
 *   link=gen2x4           PCIe link preset: gen2x4 (default, the thesis card), gen3x8,
 *                         gen4x8, gen4x16, gen5x16, unlimited
 *   mode=realtime|fast    realtime: the acquisition clock follows wall time;
 *                         fast: emulated time advances as fast as the host reads
 *   wake=sleep|spin       realtime: sleep until frames are due (default), or poll
 *                         the clock (a core each for the generator and a waiting
 *                         reader; lower latency where timer wake-ups are late)
 *   batch=1000            realtime, wake=sleep: with no reader waiting, the generator
 *                         wakes at most every batch us (0..10^7; 0: at every frame's due time);
 *                         a waiting reader's block is made when its last frame is due
 *   ddr=4G                card FIFO ("DDR") capacity, split between the two data streams
 *   seed=1                seed of every random source (neural data is reproducible)
 *   gpustream=1           the firmware has the GPU data stream (0: default stream only;
 *                         ONI_DRV_GPU_STREAM of onigpu.h reports it)
 * The spec comes from ONI_DRV_EMU_SPEC (set before oni_init_ctx), else from the
 * environment variable ONIGPU_EMU, else defaults. The card runs in the process
 * that opens it; in a process of its own it is `onigpu serve` of this driver,
 * opened with the net driver (oninet.h, docs/net.md). */
#ifndef ONIEMU_H
#define ONIEMU_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ONIGPU_EMU_ENV "ONIGPU_EMU"

enum {
    ONI_DRV_EMU_SPEC = 0x4F470300, /* set (uninitialized ctx only): value = spec string, size = strlen + 1;
                                      get: the spec in use */
    ONI_DRV_EMU_TRUTH_FILE,        /* set: value = path string; ground-truth spikes are appended there as CSV
                                      "dev_idx,unit,channel,sample_time,snr" while generating; a regular file
                                      (created if missing), else ONI_EPATHINVALID */
    ONI_DRV_EMU_LINK,              /* get: oniemu_link_t of the link preset in use */
    ONI_DRV_EMU_MODE,              /* get: uint32_t, 0 = realtime, 1 = fast (mode=fast) */
    ONI_DRV_EMU_LAG                /* get: oniemu_lag_t, how far the card's generator has fallen
                                      behind its real-time clock since acquisition started */
};
/* The FIFO ("DDR") capacity is fifo_capacity of ONI_DRV_STREAM_STATS (onigpu.h). */

/* Registers the emulated card adds to every device but the hub managers
 * (docs/devices.md). They sit in one block at 0x4F4704xx (onigpu's "OG"
 * prefix, as its private device ids and driver options), which no ONIX map
 * uses: the device maps are small (0.. and, for DS90UB9x, 0x8000..), and
 * the raw I2C encoding ((reg << 7) | i2c address, bytes - 1 in bits 28-29,
 * 16-bit registers in bit 31) leaves bit 30 clear. So each device keeps its
 * real ONIX registers at their real addresses, ENABLE at 0 for all. The
 * base itself is reserved. */
enum {
    ONIEMU_REG_BASE = 0x4F470400,
    ONIEMU_REG_ROUTE = 0x4F470401,      /* rw, readable devices: data stream, 0 default, 1 GPU */
    ONIEMU_REG_READSIZE = 0x4F470402,   /* ro */
    ONIEMU_REG_WRITESIZE = 0x4F470403,  /* ro */
    ONIEMU_REG_FRAMES_LO = 0x4F470404,  /* ro: frames generated (delivered + dropped) */
    ONIEMU_REG_FRAMES_HI = 0x4F470405,
    ONIEMU_REG_DROPPED_LO = 0x4F470406, /* ro: frames dropped because the route's FIFO was full */
    ONIEMU_REG_DROPPED_HI = 0x4F470407,
    ONIEMU_REG_WFRAMES = 0x4F470408,    /* ro: write frames accepted, low 32 bits */
    ONIEMU_REG_RATE_HZ = 0x4F470409,    /* frames per second (rounded); rw where docs/devices.md says so */
    ONIEMU_REG_DEVICE = 0x4F470410      /* first of the emulator's device-specific registers */
};

typedef struct {
    char name[16];
    double bandwidth_Bps; /* 0 = unlimited */
    double latency_s;     /* per transfer */
} oniemu_link_t;

/* A real card makes every frame at its time; the emulated one makes them on
 * a thread of the host, which a loaded machine can starve. Then frames come
 * late, and every latency measured on them includes the delay: lag says by
 * how much. now_ns: the oldest frame due and not yet made, that long ago
 * (0: none owed); max_ns: the most now_ns was, looked at each time the
 * generator ran, since acquisition last started. Both 0 in mode=fast. */
typedef struct {
    uint64_t now_ns;
    uint64_t max_ns;
} oniemu_lag_t;

/* The link presets' names, slowest first, as an initializer list:
 * static const char *const presets[] = {ONIEMU_LINK_PRESETS}; */
#define ONIEMU_LINK_PRESETS "gen2x4", "gen3x8", "gen4x8", "gen4x16", "gen5x16", "unlimited"

#ifdef __cplusplus
}
#endif
#endif
