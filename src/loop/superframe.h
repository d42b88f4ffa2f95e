/* superframe.h - the Neuropixels 2.0e super-frame, as the NP2.0e headstage sends
 * it through its DS90UB9x serializer (the passthrough raw device's frames),
 * and the ephys layout (kernels.h) that walks it in place.
 *
 * Facts (no code taken): Bonsai.ONIX1 OpenEphys.Onix1/NeuropixelsV2eData.cs
 * :183-189 (payload: u64 hub clock, u16 probe index, 16 x 36 u16 amplifier
 * words), :148-165 (sub-frame i's ADC data starts at word TrashWords + 36 i),
 * :171-180 (the 24 ADCs' word indices), :108-140 (ADC row and sub-frame to
 * channel); NeuropixelsV2.cs:11-18 (384 channels, 16 sub-frames, 24 ADCs, 4
 * trash words, 36 words per sub-frame); onix-source Source/Devices/
 * Neuropixels2e.cpp:580-606 (the same offsets: probe index at word 4, ADC
 * data from word 9) and Neuropixels2e.h:101-102 (4096 ADC bins, midpoint
 * 2048). One super-frame carries one sample of each of the probe's 384
 * channels; a headstage with two probes sends one super-frame per probe per
 * sample period, told apart by the probe index. */
#ifndef LOOP_NP2E_H
#define LOOP_NP2E_H

#include <stdint.h>
#include "loop/kernels.h"

#define LOOP_NP2E_CHANNELS 384
#define LOOP_NP2E_SUBFRAMES 16
#define LOOP_NP2E_ADCS 24
#define LOOP_NP2E_TRASH 4            /* words before sub-frame 0's ADC data */
#define LOOP_NP2E_FRAME_WORDS 36     /* words per sub-frame */
#define LOOP_NP2E_PROBE_OFF 8        /* payload byte offset of the u16 probe index */
#define LOOP_NP2E_DATA_OFF 10        /* payload byte offset of the amplifier words */
#define LOOP_NP2E_PAYLOAD (LOOP_NP2E_DATA_OFF + 2 * LOOP_NP2E_SUBFRAMES * LOOP_NP2E_FRAME_WORDS) /* 1162 */
#define LOOP_NP2E_MAXPROBES 16       /* of one loop: four cards of two headstages of two probes */
#define LOOP_NP2E_READ_HDR 16        /* read frame header before the payload: time, dev_idx, data_sz */

/* The probe channel (0..383) that ADC row k (0..23, in the order of the
 * word indices) samples in sub-frame i (0..15). */
uint32_t loop_np2e_channel(uint32_t k, uint32_t i);
/* Index of that sample among the payload's amplifier words. */
uint32_t loop_np2e_word(uint32_t k, uint32_t i);
/* Payload byte offset of channel ch's sample (ch 0..383). */
uint32_t loop_np2e_sample_off(uint32_t ch);

/* Bytes one super-frame takes in a block of read frames: the read frame
 * header, then the payload of payload_bytes (the device table's read_size)
 * padded to 4 bytes. */
uint32_t loop_np2e_read_stride(uint32_t payload_bytes);
/* One probe's super-frames on the stream: its headstage's raw device and
 * its probe index there (the payload's u16 at LOOP_NP2E_PROBE_OFF). */
struct loop_np2e_lane {
    uint32_t dev;
    uint16_t probe;
};

/* The layout of a block of super-frames of nprobes probes (1 to
 * LOOP_NP2E_MAXPROBES), each payload_bytes long (>= LOOP_NP2E_PAYLOAD), in
 * read-frame form: one pipeline frame is nprobes consecutive super-frames,
 * probe p's at position slot[p] among them (slot NULL: probe p at p);
 * channel p * 384 + ch is probe p's channel ch, each probe a common-average
 * group; the timestamp is the first super-frame's hub clock. ONI_EINVALARG for another probe count, a payload
 * too short, or slot not a permutation. */
int loop_np2e_layout(struct loop_ephys_layout *lay, uint32_t payload_bytes, uint32_t nprobes, const uint8_t *slot);
/* Check that the read frames of nframes pipeline frames of blk (each n
 * super-frames of read_stride bytes) come in the lanes' order: super-frame
 * k of a pipeline frame from lanes[k]'s device with its probe index.
 * Returns the first read frame that does not, or -1 when all do. */
long loop_np2e_check_lanes(const struct loop_np2e_lane *lanes, uint32_t n, uint32_t read_stride, const uint8_t *blk,
                           uint32_t nframes);

#endif
