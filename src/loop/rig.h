/* rig.h - the closed loop's rig: an ONIX breakout board with an NP2.0e
 * headstage on port A (and B) and the board's digital outputs as the stimulator,
 * brought up through liboni as the real software brings it up (Bonsai.ONIX1,
 * cited in rig.c), on any card that presents the real device table.
 *
 * loop_rig_open leaves the probes it is asked for recording (super-frames of
 * each headstage's DS90UB9x raw device, superframe.h), the others powered
 * down, the AnalogIO's
 * stream off (the loop uses no analog channel), and the DigitalIO sampling
 * its inputs asynchronously (one frame per change). The stimulator is the
 * DigitalIO's output port, written as Bonsai's DigitalOutput writes it: a
 * write frame of one u32 whose bits 0-7 are the pins. */
#ifndef LOOP_RIG_H
#define LOOP_RIG_H

#include <stddef.h>
#include <stdint.h>
#include "oni.h"
#include "loop/superframe.h"

/* DigitalIO (Bonsai ConfigureDigitalIO.cs:131-141, DigitalInputDataFrame.cs:34-41) */
#define LOOP_DIO_ADDR 7
#define LOOP_DIO_INPUT_BYTES 12 /* [u64 hub clock][u8 inputs][u8 pad][u16 buttons] */

#define LOOP_RIG_MAX_PROBES 4 /* two ports, an NP2.0e of two probes on each */

/* One port's headstage. */
struct loop_rig_head {
    int port;                   /* 1 = A, 2 = B */
    oni_dev_idx_t portctl, raw;
    uint32_t raw_read;          /* the raw device's frame size: the super-frame's */
    double volts;               /* the port voltage the link locked at, plus Bonsai's margin */
    uint32_t nprobes;           /* probes recording: 1 (probe A) or 2 (A and B) */
    uint64_t probe_sn[2];       /* their serial numbers (flex EEPROM) */
};

struct loop_rig {
    uint32_t nprobes, nheads;   /* probe p is probe p % 2 of head[p / 2] */
    struct loop_rig_head head[2]; /* port A's, then port B's */
    oni_dev_idx_t dio;
    int aio;                    /* the AnalogIO's index (its stream turned off), -1: none */
    uint32_t dio_read, dio_write;
};

/* Bring the rig up on ctx (an initialized context, not running) with
 * nprobes probes recording (1 to LOOP_RIG_MAX_PROBES, taken in the order
 * port A probe A, A's B, port B's A, B's B; both ports in passthrough when
 * more than two). 0, or an ONI error with what failed in why: a device the
 * board lacks (named), no link lock at any voltage, a probe missing, a
 * register the card refused; ONI_EINVALARG for another probe count. */
int loop_rig_open(oni_ctx ctx, uint32_t nprobes, struct loop_rig *rig, char *why, size_t cap);
/* 1 when dev is one of the rig's raw devices (the probes' frames). */
int loop_rig_is_probe_dev(const struct loop_rig *rig, uint32_t dev);
/* The rig's probes as the stream carries them, into lanes[0 .. nprobes)
 * (superframe.h): each sample period the probe-A super-frames of every
 * head in device order, then the probe-B ones (the raw devices' schedules
 * start together with acquisition and alternate their probes), and slot[p],
 * probe p's position among them (for loop_np2e_layout). */
void loop_rig_lanes(const struct loop_rig *rig, struct loop_np2e_lane *lanes, uint8_t *slot);

/* The port state that stimulation number n writes: pin 0 toggles on every
 * stimulation (a stimulator triggered on its edges), pins 1-7 carry n mod
 * 128, so the loopback input frame names the stimulation. */
uint32_t loop_rig_stim_pins(uint64_t n);
/* n mod 128 of the stimulation whose pins an input frame reports, or -1 for
 * pins no stimulation writes (the reset state 0, a hand on an input). */
int loop_rig_stim_of(uint8_t pins);

#endif
