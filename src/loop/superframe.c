/* superframe.c - the NP2.0e super-frame decoder (superframe.h).
 *
 * The channel map of Bonsai's table (NeuropixelsV2eData.cs:108-140) follows
 * a rule, written here as arithmetic: row k of the 24 ADC rows is ADC
 * g + 8 m with g = k / 3 and m = k % 3 (the rows go ADC 0, 8, 16, 1, 9, 17,
 * ...), and in sub-frame i it samples channel 128 m + 32 (g / 2) + g % 2 + 2 i.
 * Its word in sub-frame i is 4 g + m (the word indices 0, 1, 2, 4, 5, 6, ...
 * of :171-180: three ADC words and a zero word per group). test_loop_np2e
 * checks the rule against entries of both sources' tables. */
#include "oni.h"
#include "loop/superframe.h"

#include <string.h>

uint32_t loop_np2e_channel(uint32_t k, uint32_t i)
{
    uint32_t g = k / 3, m = k % 3;
    return 128 * m + 32 * (g / 2) + g % 2 + 2 * i;
}

uint32_t loop_np2e_word(uint32_t k, uint32_t i)
{
    return LOOP_NP2E_TRASH + LOOP_NP2E_FRAME_WORDS * i + 4 * (k / 3) + k % 3;
}

uint32_t loop_np2e_sample_off(uint32_t ch)
{
    uint32_t m = ch / 128, r = ch % 128;
    uint32_t g = 2 * (r / 32) + r % 2, i = (r % 32) / 2;
    return LOOP_NP2E_DATA_OFF + 2 * loop_np2e_word(3 * g + m, i);
}

uint32_t loop_np2e_read_stride(uint32_t payload_bytes)
{
    return LOOP_NP2E_READ_HDR + ((payload_bytes + 3u) & ~3u);
}

int loop_np2e_layout(struct loop_ephys_layout *lay, uint32_t payload_bytes, uint32_t nprobes, const uint8_t *slot)
{
    if (!lay || nprobes < 1 || nprobes > LOOP_NP2E_MAXPROBES || payload_bytes < LOOP_NP2E_PAYLOAD ||
        payload_bytes > 16384)
        return ONI_EINVALARG;
    uint32_t seen = 0;
    for (uint32_t p = 0; slot && p < nprobes; p++) {
        if (slot[p] >= nprobes || (seen & 1u << slot[p]))
            return ONI_EINVALARG;
        seen |= 1u << slot[p];
    }
    uint32_t rs = loop_np2e_read_stride(payload_bytes);
    memset(lay, 0, sizeof *lay);
    lay->nchan = LOOP_NP2E_CHANNELS * nprobes;
    lay->stride = rs * nprobes;
    lay->time_off = LOOP_NP2E_READ_HDR; /* the hub clock opens the payload */
    lay->group = LOOP_NP2E_CHANNELS;    /* each probe its own common average */
    for (uint32_t p = 0; p < nprobes; p++) {
        uint32_t base = (slot ? slot[p] : p) * rs + LOOP_NP2E_READ_HDR;
        for (uint32_t ch = 0; ch < LOOP_NP2E_CHANNELS; ch++)
            lay->off[p * LOOP_NP2E_CHANNELS + ch] = (uint16_t)(base + loop_np2e_sample_off(ch));
    }
    return 0;
}

long loop_np2e_check_lanes(const struct loop_np2e_lane *lanes, uint32_t n, uint32_t read_stride, const uint8_t *blk,
                           uint32_t nframes)
{
    for (uint64_t f = 0; f < (uint64_t)nframes * n; f++) {
        const uint8_t *fr = blk + f * read_stride;
        uint32_t dev;
        uint16_t probe;
        memcpy(&dev, fr + 8, 4); /* the read frame header: [u64 time][u32 dev_idx][u32 data_sz] */
        memcpy(&probe, fr + LOOP_NP2E_READ_HDR + LOOP_NP2E_PROBE_OFF, 2);
        if (dev != lanes[f % n].dev || probe != lanes[f % n].probe)
            return (long)f;
    }
    return -1;
}
