/* np2cfg.h - the Neuropixels 2.0 probe configuration traffic both replays
 * send (raw I2C through the DS90UB9x device): shift-register chains, the
 * super-frame sync word and the operating mode. The bits follow onix-source
 * Neuropixels2e.cpp:715-785 for the external reference and electrodes 0-383
 * of shank 0 connected; the write sequence follows Neuropixels2e.cpp:632-657
 * and Bonsai NeuropixelsV2RegisterContext.cs:43-67 (the same in both). */
#ifndef COMPAT_NP2CFG_H
#define COMPAT_NP2CFG_H

#include "replay.h"

enum {
    NP2_OP_MODE = 0x00, NP2_STATUS = 0x09, NP2_SUPERSYNC0 = 0x0A, NP2_SR_CHAIN6 = 0x16, NP2_SR_CHAIN5 = 0x17,
    NP2_SR_CHAIN4 = 0x18, NP2_SR_CHAIN3 = 0x19, NP2_SR_CHAIN2 = 0x1A, NP2_SR_CHAIN1 = 0x1B, NP2_SR_LENGTH2 = 0x1C,
    NP2_SR_LENGTH1 = 0x1D, NP2_SOFT_RESET = 0x1F, /* Neuropixels2e.h:167-198, NeuropixelsV2.cs */
    NP2_SR_OK = 0x80                              /* NeuropixelsV2.cs:105-107 */
};

/* Writes the base (chains 5, 6) and shank (chains 1-4) configuration to the
 * selected probe; each chain's STATUS must read SR_OK afterwards. */
void np2_write_configuration(replay_t *rp, oni_dev_idx_t idx, const char *at);
/* The super-frame sync words and recording mode (Neuropixels2e.cpp:437-455,
 * Bonsai ConfigureNeuropixelsV2PsbDecoder.cs:126-140). */
void np2_start_streaming(replay_t *rp, oni_dev_idx_t idx, const char *at);

/* Checks one frame of the DS90UB9x raw device carrying NP2.0e data, as
 * both programs decode it (onix-source Neuropixels2e.cpp:575-617, Bonsai
 * NeuropixelsV2eData.cs:142-189): at least min_size bytes, the probe index
 * at byte 8 naming a probe in present[], 16 sub-frames of 36 words from byte
 * 18 with ADC k of sub-frame i at word adc[k] + 36 i, 12-bit samples. Steps
 * clock[probe] by the hub clock at byte 0; widens [*min, *max] by the samples. */
void np2_check_frame(replay_t *rp, const oni_frame_t *f, size_t min_size, const int present[2], rp_clock_t clock[2],
                     int *min, int *max, const char *at);

#endif
