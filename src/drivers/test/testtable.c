/* testtable.c - the test driver's fixed device table, and the frame checker
 * that verifies payloads against it (docs/devices-test.md). */
#include "onix.h"
#include "testdrv.h"

/* Sorted by idx. Read sizes cover every data_sz % 4 (8, 64, 776: 0; 13, 29:
 * 1; 142: 2; 11: 3) so the host's padding is exercised; write sizes are
 * whole words, as the write stream counts words. */
const struct testdrv_def testdrv_table[] = {
    {0x000, ONIX_HEARTBEAT, 1, 8, 0, 1},
    {0x001, ONIX_ONIGPU_TESTCORE, 1, 64, 0, 4},
    {0x002, ONIX_DINPUT32, 1, 13, 0, 1},
    {0x003, ONIX_DOUTPUT32, 1, 0, 4, 1},
    {0x004, ONIX_ONIGPU_TESTSINK, 1, 0, 16, 1},
    {0x0FE, ONIX_ONIGPU_HUBMGR, 1, 0, 0, 1},
    {0x100, ONIX_RHD2164, 1, 142, 0, 2},
    {0x101, ONIX_BNO055, 1, 29, 0, 1},
    {0x102, ONIX_ESTIM, 1, 0, 8, 1},
    {0x1FE, ONIX_ONIGPU_HUBMGR, 1, 0, 0, 1},
    {0x200, ONIX_ONIGPU_NEUROPIX2, 1, 776, 0, 1},
    {0x201, ONIX_TS4231, 1, 11, 0, 1},
    {0x202, ONIX_ONIGPU_STIM, 1, 16, 12, 1},
    {0x2FE, ONIX_ONIGPU_HUBMGR, 1, 0, 0, 1},
};
const unsigned testdrv_ndev = sizeof testdrv_table / sizeof testdrv_table[0];

/* Invented but plausible values: a host hub on the card's 250 MHz clock and
 * two headstages with their own clocks and link delays. */
const struct testdrv_hub testdrv_hubs[] = {
    {0, ONIX_HUB_FMCHOST, 1, 0x0100, 250000000, 0},
    {1, ONIX_HUB_HS64, 2, 0x0102, 42000000, 1200},
    {2, ONIX_HUB_HSNP2E, 1, 0x0203, 50000000, 1500},
};
const unsigned testdrv_nhub = sizeof testdrv_hubs / sizeof testdrv_hubs[0];

const struct testdrv_def *testdrv_find(uint32_t dev_idx)
{
    for (unsigned i = 0; i < testdrv_ndev; i++)
        if (testdrv_table[i].idx == dev_idx)
            return &testdrv_table[i];
    return NULL;
}

int onitest_check_frame(const oni_frame_t *f, uint64_t *expected_counter)
{
    if (!f || !expected_counter || !f->data)
        return ONI_EINVALARG;
    const struct testdrv_def *def = testdrv_find(f->dev_idx);
    if (!def || !def->read_size || f->data_sz != def->read_size)
        return ONI_EBADFRAME;
    const uint8_t *p = (const uint8_t *)f->data;
    uint64_t counter;
    memcpy(&counter, p, 8);
    uint32_t key = testdrv_key(counter);
    uint32_t words = (def->read_size - 8) / 4, rem = (def->read_size - 8) % 4;
    for (uint32_t i = 0; i < words; i++) {
        uint32_t w;
        memcpy(&w, p + 8 + 4 * i, 4);
        if (w != (testdrv_word(f->dev_idx, i) ^ key))
            return ONI_EBADFRAME;
    }
    if (rem) {
        uint32_t w = testdrv_word(f->dev_idx, words) ^ key;
        if (memcmp(p + 8 + 4 * words, &w, rem))
            return ONI_EBADFRAME;
    }
    int in_order = counter == *expected_counter;
    *expected_counter = counter + 1;
    return in_order ? 0 : 1;
}
