/* testdrv.h - private to the `test` driver: its fixed device table and the
 * frame-content functions shared by the generator and onitest_check_frame. */
#ifndef TESTDRV_H
#define TESTDRV_H

#include <stdint.h>
#include <string.h>
#include "onitest.h"

/* One device of the fixed table (docs/devices-test.md). */
struct testdrv_def {
    uint32_t idx, id, version, read_size, write_size;
    uint32_t rate; /* reset value of ONITEST_REG_RATE */
};

/* Hub manager register reset values, by hub number. */
struct testdrv_hub {
    uint32_t hub;
    uint32_t hardware_id, hardware_rev, firmware_ver, clk_hz, delay_ns;
};

#define TESTDRV_SYSCLKHZ 250000000u
#define TESTDRV_ACQCLKHZ 250000000u

extern const struct testdrv_def testdrv_table[];
extern const unsigned testdrv_ndev;
extern const struct testdrv_hub testdrv_hubs[];
extern const unsigned testdrv_nhub;

/* The table entry for dev_idx, or NULL. */
const struct testdrv_def *testdrv_find(uint32_t dev_idx);

/* murmur3's 32-bit finalizer: a cheap bijective mix. */
static inline uint32_t testdrv_mix32(uint32_t h)
{
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    h ^= h >> 16;
    return h;
}

/* T(dev_idx, i): word i after the counter, before keying. */
static inline uint32_t testdrv_word(uint32_t dev_idx, uint32_t i)
{
    return testdrv_mix32(dev_idx * 0x9E3779B1u ^ (i + 1u) * 0x27D4EB2Fu);
}

/* K(counter): the per-frame key XORed into every word. A bijection of the
 * counter's low 32 bits (odd multiplier), so two frames of one device less
 * than 2^32 frames apart never share a key; and one multiply, since the
 * generator computes it for every frame. */
static inline uint32_t testdrv_key(uint64_t counter)
{
    return ((uint32_t)counter ^ (uint32_t)(counter >> 32) ^ 0x632BE5ABu) * 0x9E3779B1u;
}

#endif
