/* fuzz_data.c - arbitrary bytes as the data stream through oni_read_frame,
 * with a fixed device table; the first two bytes pick the block size and
 * the driver's read size. Every frame handed out must match the table and
 * stay readable while later refills happen and after the context is gone. */
#include <stdint.h>
#include <string.h>
#include "../fixtures/drivers/scripted.h"

static const oni_device_t devs[] = {
    {1, 10, 1, 4, 0},     {2, 10, 1, 5, 0},      {3, 10, 1, 6, 0},  {4, 10, 1, 7, 0},
    {0x100, 10, 1, 1, 0}, {0x101, 10, 1, 64, 0}, {0x102, 10, 1, 33, 0},
    {0x200, 8, 1, 0, 4},
};
#define NDEV (sizeof devs / sizeof devs[0])
#define RING 64

static uint8_t table[4096];
static size_t table_len;

static void set_u32(oni_ctx ctx, int opt, uint32_t v) { oni_set_driver_opt(ctx, opt, &v, sizeof v); }

static void check_frame(const oni_frame_t *f)
{
    size_t i = 0;
    while (i < NDEV && devs[i].idx != f->dev_idx)
        i++;
    if (i == NDEV || devs[i].read_size != f->data_sz || devs[i].read_size == 0)
        __builtin_trap();
    volatile uint8_t sum = 0;
    for (uint32_t j = 0; j < f->data_sz; j++)
        sum += (uint8_t)f->data[j]; /* ASan checks every byte is inside a live block */
    (void)sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    if (!table_len) {
        uint32_t n = NDEV;
        int rc = oni_signal_pack(ONI_SIG_DEVICETABLEACK, &n, 4, table, sizeof table);
        table_len = (size_t)rc;
        for (size_t i = 0; i < NDEV; i++)
            table_len += (size_t)oni_signal_pack(ONI_SIG_DEVICEINST, &devs[i], sizeof devs[i],
                                                 table + table_len, sizeof table - table_len);
    }
    oni_ctx ctx = oni_create_ctx_driver(&onifix_scripted);
    if (!ctx)
        return 0;
    /* A drained stream ends the run at once (the driver's ONI_ETIMEOUT), so
     * the core's own deadline only has to outlast a loaded machine's stalls. */
    uint32_t ms = 600000;
    oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &ms, sizeof ms);
    set_u32(ctx, SCR_OPT_EMPTY, SCR_EMPTY_TIMEOUT);
    oni_set_driver_opt(ctx, SCR_OPT_DEVTABLE, table, table_len);
    if (oni_init_ctx(ctx, 0) != 0)
        __builtin_trap(); /* the fixed table is valid */
    uint32_t block = 80 + 4u * (data[0] % 64);
    oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &block, sizeof block);
    set_u32(ctx, SCR_OPT_CHUNK, data[1] % 17);
    oni_set_driver_opt(ctx, SCR_OPT_DATA, data + 2, size - 2);

    oni_frame_t *ring[RING] = {0};
    size_t n = 0;
    for (;;) {
        oni_frame_t *f = NULL;
        int rc = oni_read_frame(ctx, &f);
        if (rc == ONI_EBADFRAME)
            continue;
        if (rc <= 0)
            break;
        if ((size_t)rc != sizeof(oni_frame_t) + f->data_sz + f->data_sz % 4) /* upstream's answer */
            __builtin_trap();
        check_frame(f);
        oni_destroy_frame(ring[n % RING]);
        ring[n++ % RING] = f;
    }
    oni_destroy_ctx(ctx);
    for (size_t i = 0; i < RING; i++) {
        if (ring[i])
            check_frame(ring[i]); /* still valid after the context */
        oni_destroy_frame(ring[i]);
    }
    return 0;
}
