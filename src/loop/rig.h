/* rig.h - the closed loop's rig: an ONIX breakout board with an NP2.0e
 * headstage on one port and the board's digital outputs as the stimulator,
 * brought up through liboni as the real software brings it up (Bonsai.ONIX1,
 * cited in rig.c), on any card that presents the real device table.
 *
 * loop_rig_open leaves probe A of the headstage recording (super-frames of
 * the DS90UB9x raw device, superframe.h), probe B powered down, the AnalogIO's
 * stream off (the loop uses no analog channel), and the DigitalIO sampling
 * its inputs asynchronously (one frame per change). The stimulator is the
 * DigitalIO's output port, written as Bonsai's DigitalOutput writes it: a
 * write frame of one u32 whose bits 0-7 are the pins. */
#ifndef LOOP_RIG_H
#define LOOP_RIG_H

#include <stddef.h>
#include <stdint.h>
#include "oni.h"

/* DigitalIO (Bonsai ConfigureDigitalIO.cs:131-141, DigitalInputDataFrame.cs:34-41) */
#define LOOP_DIO_ADDR 7
#define LOOP_DIO_INPUT_BYTES 12 /* [u64 hub clock][u8 inputs][u8 pad][u16 buttons] */

struct loop_rig {
    int port;                   /* 1 = A, 2 = B */
    oni_dev_idx_t portctl, raw, dio;
    int aio;                    /* the AnalogIO's index (its stream turned off), -1: none */
    uint32_t raw_read;          /* the raw device's frame size: the super-frame's */
    uint32_t dio_read, dio_write;
    double volts;               /* the port voltage the link locked at, plus Bonsai's margin */
    uint64_t probe_sn;          /* probe A's serial number (flex EEPROM) */
};

/* Bring the rig up on ctx (an initialized context, not running): port 1 or
 * 2. 0, or an ONI error with what failed in why: a device the board lacks
 * (named), no link lock at any voltage, no probe A, a register the card
 * refused. */
int loop_rig_open(oni_ctx ctx, int port, struct loop_rig *rig, char *why, size_t cap);

/* The port state that stimulation number n writes: pin 0 toggles on every
 * stimulation (a stimulator triggered on its edges), pins 1-7 carry n mod
 * 128, so the loopback input frame names the stimulation. */
uint32_t loop_rig_stim_pins(uint64_t n);
/* n mod 128 of the stimulation whose pins an input frame reports, or -1 for
 * pins no stimulation writes (the reset state 0, a hand on an input). */
int loop_rig_stim_of(uint8_t pins);

#endif
