/* np2cfg.c - Neuropixels 2.0 probe configuration traffic (np2cfg.h). */
#include "np2cfg.h"

#include <string.h>

#define NCHAN 384
#define BASE_BITS (NCHAN * 4 / 2)   /* configurationBitCount, Neuropixels2e.h:68-69 */
#define SHANK_BITS (1280 + 4 + 4)   /* registersPerShank, Neuropixels2e.h:71-73 */

static void set_bit(unsigned char *bits, int i)
{
    bits[i / 8] |= (unsigned char)(1u << (i % 8));
}

static int get_bit(const unsigned char *bits, int i)
{
    return bits[i / 8] >> (i % 8) & 1;
}

/* toBitReversedBytes (NeuropixelsComponents.h:361-373): bit 8i+j of the
 * chain goes to bit 7-j of byte i. */
static int to_bytes(const unsigned char *bits, int nbits, unsigned char *out)
{
    int n = (nbits - 1) / 8 + 1;
    memset(out, 0, (size_t)n);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < 8 && i * 8 + j < nbits; j++)
            out[i] |= (unsigned char)(get_bit(bits, i * 8 + j) << (8 - j - 1));
    return n;
}

static void write_chain(replay_t *rp, oni_dev_idx_t idx, uint32_t chain, const unsigned char *bits, int nbits,
                        const char *at)
{
    unsigned char bytes[(SHANK_BITS + 7) / 8];
    int n = to_bytes(bits, nbits, bytes);
    /* twice, as both programs do (Neuropixels2e.cpp:637) */
    for (int pass = 0; pass < 2; pass++) {
        rp_i2c_write(rp, idx, RP_NP2_PROBE_ADDR, NP2_SOFT_RESET, 0xFF, 0, at);
        rp_i2c_write(rp, idx, RP_NP2_PROBE_ADDR, NP2_SOFT_RESET, 0x00, 0, at);
        rp_i2c_write(rp, idx, RP_NP2_PROBE_ADDR, NP2_SR_LENGTH1, (uint32_t)(n % 0x100), 0, at);
        rp_i2c_write(rp, idx, RP_NP2_PROBE_ADDR, NP2_SR_LENGTH2, (uint32_t)(n / 0x100), 0, at);
        for (int i = 0; i < n; i++)
            rp_i2c_write(rp, idx, RP_NP2_PROBE_ADDR, chain, bytes[i], 0, at);
    }
    uint32_t status = 0;
    int rc = rp_i2c_read(rp, idx, RP_NP2_PROBE_ADDR, NP2_STATUS, 1, 0, &status);
    /* the plugin only logs a bad status (Neuropixels2e.cpp:651-656): the
     * replay requires SR_OK, since a real probe that took the chain says so */
    rp_check(rp, rc == ONI_ESUCCESS && status == NP2_SR_OK, at,
             "probe STATUS after shift-register chain 0x%02x: rc %d, 0x%02x (want SR_OK 0x80)", (unsigned)chain, rc,
             (unsigned)status);
}

void np2_write_configuration(replay_t *rp, oni_dev_idx_t idx, const char *at)
{
    unsigned char base[2][BASE_BITS / 8];
    unsigned char shank[4][(SHANK_BITS + 7) / 8];
    memset(base, 0, sizeof base);
    memset(shank, 0, sizeof shank);
    /* makeBaseBits, external reference: reference bit 1 (Neuropixels2e.cpp:715-735) */
    for (int i = 0; i < NCHAN; i++) {
        int cfg = i % 2;
        set_bit(base[cfg], (382 - i + cfg) / 2 * 4 + 1);
    }
    /* makeShankBits, external reference (Neuropixels2e.cpp:746-756), then
     * electrodes 0-383 of shank 0 (:758-777) */
    for (int s = 0; s < 4; s++) {
        set_bit(shank[s], 2);
        set_bit(shank[s], 1285);
    }
    const int pixel_offset = (1280 - 1) / 2, ref_offset = 3;
    for (int e = 0; e < NCHAN; e++) {
        int pixel = e / 2;
        pixel = e % 2 == 0 ? pixel + pixel_offset + 2 * ref_offset : pixel_offset - pixel + ref_offset;
        set_bit(shank[0], pixel);
    }
    /* writeConfiguration order (Neuropixels2e.cpp:619-630) */
    write_chain(rp, idx, NP2_SR_CHAIN5, base[0], BASE_BITS, at);
    write_chain(rp, idx, NP2_SR_CHAIN6, base[1], BASE_BITS, at);
    write_chain(rp, idx, NP2_SR_CHAIN1, shank[0], SHANK_BITS, at);
    write_chain(rp, idx, NP2_SR_CHAIN2, shank[1], SHANK_BITS, at);
    write_chain(rp, idx, NP2_SR_CHAIN3, shank[2], SHANK_BITS, at);
    write_chain(rp, idx, NP2_SR_CHAIN4, shank[3], SHANK_BITS, at);
}

void np2_start_streaming(replay_t *rp, oni_dev_idx_t idx, const char *at)
{
    /* SUPERSYNC11 .. SUPERSYNC0 (0x15 down to 0x0A) */
    static const uint8_t sync[12] = {0x18, 0x61, 0x86, 0x18, 0x61, 0x86, 0x18, 0x61, 0x86, 0x18, 0x61, 0xB9};
    for (int i = 0; i < 12; i++)
        rp_i2c_write(rp, idx, RP_NP2_PROBE_ADDR, (uint32_t)(NP2_SUPERSYNC0 + 11 - i), sync[i], 0, at);
    rp_i2c_write(rp, idx, RP_NP2_PROBE_ADDR, NP2_OP_MODE, 0x40, 0, at); /* recording mode */
}

void np2_check_frame(replay_t *rp, const oni_frame_t *f, size_t min_size, const int present[2], rp_clock_t clock[2],
                     int *min, int *max, const char *at)
{
    static const int adc[24] = {0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, 16, 17, 18, 20, 21, 22, 24, 25, 26, 28, 29, 30};
    if (!rp_check(rp, f->data_sz >= min_size, at, "NP2.0e frame of %u bytes, the decoder reads %zu",
                  (unsigned)f->data_sz, min_size))
        return;
    unsigned probe = rp_u16(f, 8);
    if (!rp_check(rp, probe < 2 && present[probe], at, "NP2.0e frame of probe index %u, which has no probe", probe))
        return;
    rp_clock_step(&clock[probe], rp_u64(f, 0));
    for (int i = 0; i < 16; i++)
        for (int k = 0; k < 24; k++) {
            int s = rp_u16(f, 18 + 2 * (size_t)(adc[k] + 36 * i));
            if (s > 4095) {
                rp_fail(rp, at, "NP2.0e sample %d is not 12-bit", s);
                return;
            }
            *min = s < *min ? s : *min;
            *max = s > *max ? s : *max;
        }
}
