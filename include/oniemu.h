/* oniemu.h - options of the `emu` driver (the emulated ONIX host).
 *
 * The emulated card is configured by a spec string "key=value;key=value":
 *   devices=np2,stim      device set (docs/devices.md lists names and arguments)
 *   link=gen2x4           PCIe link preset: gen2x4 (default, the thesis card), gen3x8,
 *                         gen4x8, gen4x16, gen5x16, unlimited
 *   mode=realtime|fast    realtime: the acquisition clock follows wall time;
 *                         fast: emulated time advances as fast as the host reads
 *   wake=sleep|spin       realtime: sleep until frames are due (default), or poll
 *                         the clock (a core each for the generator and a waiting
 *                         reader; lower latency where timer wake-ups are late)
 *   ddr=4G                card FIFO ("DDR") capacity, split between the two data streams
 *   seed=1                seed of every random source (neural data is reproducible)
 *   daemon=/path.sock     use the onix-emu daemon at that socket instead of an
 *                         in-process card
 * The spec comes from ONI_DRV_EMU_SPEC (set before oni_init_ctx), else from the
 * environment variable ONIGPU_EMU, else defaults. */
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
                                      "dev_idx,unit,channel,sample_time" while generating; a regular file
                                      (created if missing), else ONI_EPATHINVALID */
    ONI_DRV_EMU_LINK,              /* get: oniemu_link_t of the link preset in use */
    ONI_DRV_EMU_MODE               /* get: uint32_t, 0 = realtime, 1 = fast (mode=fast) */
};
/* The FIFO ("DDR") capacity is fifo_capacity of ONI_DRV_STREAM_STATS (onigpu.h). */

typedef struct {
    char name[16];
    double bandwidth_Bps; /* 0 = unlimited */
    double latency_s;     /* per transfer */
} oniemu_link_t;

#ifdef __cplusplus
}
#endif
#endif
