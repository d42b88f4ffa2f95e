/* test_loop_superframe.c - the NP2.0e super-frame decoder (src/loop/superframe.h)
 * against the facts of the real software: entries of the channel tables of
 * Bonsai.ONIX1 (NeuropixelsV2eData.cs:108-140) and onix-source
 * (Neuropixels2e.h:233), the word offsets both decode at, a super-frame
 * built word by word read back through the layout on CPU, and the probe
 * order check. */
#include <stdlib.h>
#include <string.h>
#include "oni.h"
#include "unit.h"
#include "loop/kernels.h"
#include "loop/superframe.h"
#include "loop/rig.h"
#include "loop/synth.h"

/* Rows of Bonsai's RawToChannel (first and last entries of the rows it
 * comments "Data Index 9, ADC 0", "ADC 8", "ADC 1", "ADC 2", "ADC 3",
 * "ADC 12", "ADC 22" and "ADC 23"): row, first (sub-frame 0), last (15). */
TEST(channel_map_matches_the_tables)
{
    static const uint32_t rows[][3] = {
        {0, 0, 30},   {1, 128, 158}, {3, 1, 31},    {6, 32, 62},
        {9, 33, 63},  {13, 192, 222}, {20, 352, 382}, {23, 353, 383},
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        CHECK_EQ(loop_np2e_channel(rows[r][0], 0), rows[r][1]);
        CHECK_EQ(loop_np2e_channel(rows[r][0], 15), rows[r][2]);
    }
    /* every channel exactly once over the 24 x 16 samples of a super-frame */
    int seen[LOOP_NP2E_CHANNELS] = {0};
    for (uint32_t k = 0; k < LOOP_NP2E_ADCS; k++)
        for (uint32_t i = 0; i < LOOP_NP2E_SUBFRAMES; i++) {
            uint32_t ch = loop_np2e_channel(k, i);
            REQUIRE(ch < LOOP_NP2E_CHANNELS);
            seen[ch]++;
        }
    for (int c = 0; c < LOOP_NP2E_CHANNELS; c++)
        CHECK_EQ(seen[c], 1);
}

/* Bonsai: AmplifierData[AdcIndicies[k] + TrashWords + 36 i] with the
 * indices 0, 1, 2, 4, ... 30; onix-source: (u16 *)data + 9 + 36 i + index.
 * Both are payload word 9 + 36 i + index, byte 18 + 72 i + 2 index. */
TEST(word_offsets_match_both_decoders)
{
    static const uint32_t idx[LOOP_NP2E_ADCS] = {0,  1,  2,  4,  5,  6,  8,  9,  10, 12, 13, 14,
                                                 16, 17, 18, 20, 21, 22, 24, 25, 26, 28, 29, 30};
    for (uint32_t k = 0; k < LOOP_NP2E_ADCS; k++)
        for (uint32_t i = 0; i < LOOP_NP2E_SUBFRAMES; i++) {
            CHECK_EQ(loop_np2e_word(k, i), 4 + 36 * i + idx[k]);
            CHECK_EQ(loop_np2e_sample_off(loop_np2e_channel(k, i)), 2 * (9 + 36 * i + idx[k]));
        }
    CHECK_EQ(LOOP_NP2E_PAYLOAD, 8 + 2 + 2 * 576);
    CHECK_EQ(loop_np2e_read_stride(LOOP_NP2E_PAYLOAD), 16 + 1164);
}

/* A super-frame built word by word as the headstage sends it (sample of ADC
 * row k in sub-frame i = 1000 + its channel), decoded through the layout
 * the kernels walk. */
TEST(layout_reads_a_super_frame)
{
    struct loop_ephys_layout lay;
    CHECK_RC(loop_np2e_layout(&lay, LOOP_NP2E_PAYLOAD, 0, NULL), ONI_EINVALARG);
    CHECK_RC(loop_np2e_layout(&lay, LOOP_NP2E_PAYLOAD, LOOP_NP2E_MAXPROBES + 1, NULL), ONI_EINVALARG);
    CHECK_RC(loop_np2e_layout(&lay, LOOP_NP2E_PAYLOAD - 2, 1, NULL), ONI_EINVALARG);
    CHECK_RC(loop_np2e_layout(&lay, LOOP_NP2E_PAYLOAD, 2, (const uint8_t[]){1, 1}), ONI_EINVALARG);
    CHECK_RC(loop_np2e_layout(&lay, LOOP_NP2E_PAYLOAD, 2, (const uint8_t[]){0, 2}), ONI_EINVALARG);
    CHECK_RC(loop_np2e_layout(&lay, LOOP_NP2E_PAYLOAD, 2, NULL), 0);
    CHECK(loop_ephys_layout_ok(&lay));
    CHECK_EQ(lay.nchan, 768);
    CHECK_EQ(lay.time_off, 16);
    uint32_t rs = loop_np2e_read_stride(LOOP_NP2E_PAYLOAD);
    uint8_t *fr = calloc(2, rs);
    REQUIRE(fr);
    for (uint32_t p = 0; p < 2; p++) {
        uint16_t *w = (uint16_t *)(void *)(fr + p * rs + 16 + LOOP_NP2E_DATA_OFF);
        uint16_t probe = (uint16_t)p;
        memcpy(fr + p * rs + 16 + 8, &probe, 2);
        for (uint32_t k = 0; k < LOOP_NP2E_ADCS; k++)
            for (uint32_t i = 0; i < LOOP_NP2E_SUBFRAMES; i++)
                w[loop_np2e_word(k, i)] = (uint16_t)(1000 * p + loop_np2e_channel(k, i));
    }
    int bad = 0;
    for (uint32_t c = 0; c < 768; c++) {
        uint16_t v;
        memcpy(&v, fr + lay.off[c], 2);
        bad += v != (uint16_t)(1000 * (c / 384) + c % 384);
    }
    CHECK_EQ(bad, 0);
    /* slots: probe 0's super-frame second */
    struct loop_ephys_layout swapped;
    CHECK_RC(loop_np2e_layout(&swapped, LOOP_NP2E_PAYLOAD, 2, (const uint8_t[]){1, 0}), 0);
    CHECK_EQ(swapped.off[0], lay.off[384]);
    CHECK_EQ(swapped.off[384 + 5], lay.off[5]);
    const struct loop_np2e_lane lanes[2] = {{0, 0}, {0, 1}};
    CHECK_EQ(loop_np2e_check_lanes(lanes, 2, rs, fr, 1), -1);
    uint16_t one = 1;
    memcpy(fr + 16 + LOOP_NP2E_PROBE_OFF, &one, 2); /* probe 0's frame says probe 1 */
    CHECK_EQ(loop_np2e_check_lanes(lanes, 2, rs, fr, 1), 0);
    uint32_t dev9 = 9;
    memcpy(fr + 16 + LOOP_NP2E_PROBE_OFF, &(uint16_t){0}, 2);
    memcpy(fr + rs + 8, &dev9, 4); /* the second comes from another headstage */
    CHECK_EQ(loop_np2e_check_lanes(lanes, 2, rs, fr, 1), 1);
    free(fr);
}

/* Detection on synthetic super-frames (synth.h) of two probes finds spikes on
 * both probes' channels. */
TEST(detects_on_both_probes)
{
    struct loop_synth *sy = calloc(1, sizeof *sy);
    struct loop_ephys_state *st = calloc(1, sizeof *st);
    struct loop_ephys_out *out = calloc(1, sizeof *out);
    REQUIRE(sy && st && out);
    REQUIRE(loop_synth_init(sy, 2, 100.0, 5) == 0);
    struct loop_ephys_params p;
    loop_ephys_defaults(&p);
    REQUIRE(loop_ephys_init(st, &p, &sy->lay) == 0);
    uint8_t *blk = malloc((size_t)32 * sy->lay.stride);
    REQUIRE(blk);
    uint64_t on[2] = {0, 0};
    for (int b = 0; b < 30000 / 32; b++) {
        loop_synth_block(sy, blk, 32);
        loop_ephys_cpu(st, blk, 32, out);
        for (uint32_t i = 0; i < out->nspikes; i++)
            on[out->spikes[i].chan / 384]++;
    }
    CHECK(on[0] > 10);
    CHECK(on[1] > 10);
    free(blk);
    free(sy);
    free(st);
    free(out);
}

/* The stimulator's pins (rig.h): pin 0 changes on every stimulation, the
 * input frame's pins give back n mod 128, and pins no stimulation writes
 * (the reset state among them) name none. */
TEST(stim_pins_name_the_stimulation)
{
    uint32_t prev = 0;
    int bad = 0;
    for (uint64_t n = 0; n < 1000; n++) {
        uint32_t p = loop_rig_stim_pins(n);
        bad += p > 0xFF || ((p ^ prev) & 1) == 0 || loop_rig_stim_of((uint8_t)p) != (int)(n % 128);
        prev = p;
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(loop_rig_stim_of(0), -1);
    int named = 0;
    for (int p = 0; p < 256; p++)
        named += loop_rig_stim_of((uint8_t)p) >= 0;
    CHECK_EQ(named, 128);
}
