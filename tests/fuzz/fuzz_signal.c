/* fuzz_signal.c - arbitrary bytes as the signal stream (raw, or as COBS
 * packets of arbitrary content): the device table a reset reads, then the
 * answers to register accesses. Whatever comes, the
 * core returns an ONI error or success, never hangs, never touches memory
 * it should not, and a table it accepts is sorted and unique. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "../fixtures/drivers/scripted.h"

static void set_u32(oni_ctx ctx, int opt, uint32_t v) { oni_set_driver_opt(ctx, opt, &v, sizeof v); }

/* An accepted table must be what the core promises. */
static void check_table(oni_ctx ctx)
{
    uint32_t n = 0;
    size_t sz = sizeof n;
    if (oni_get_opt(ctx, ONI_OPT_NUMDEVICES, &n, &sz) != 0)
        __builtin_trap();
    if (n > 65536)
        __builtin_trap();
    oni_device_t *t = n ? malloc(n * sizeof *t) : NULL;
    sz = n * sizeof *t;
    if (n && (!t || oni_get_opt(ctx, ONI_OPT_DEVICETABLE, t, &sz) != 0 || sz != n * sizeof *t))
        __builtin_trap();
    for (uint32_t i = 1; i < n; i++)
        if (t[i - 1].idx >= t[i].idx)
            __builtin_trap();
    free(t);
}

/* With the first byte odd, the rest is [u8 n][n bytes]...: each chunk is
 * sent as one well-formed COBS packet, so the fuzzer explores what tables
 * and answers say rather than only how packets are framed. Returns the
 * signal bytes' length in out. */
static size_t packetize(const uint8_t *data, size_t size, uint8_t *out, size_t cap)
{
    size_t len = 0;
    for (size_t i = 0; i < size;) {
        size_t n = data[i++];
        if (n > size - i)
            n = size - i;
        if (n > 4 + ONI_SIGMAXPAYLOAD)
            n = 4 + ONI_SIGMAXPAYLOAD;
        if (cap - len < 260)
            break;
        int e = oni_cobs_encode(data + i, n, out + len, cap - len - 1);
        if (e < 0)
            break;
        len += (size_t)e;
        out[len++] = 0;
        i += n;
    }
    return len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t sig[1 << 17];
    if (size > 0 && (data[0] & 1)) {
        size = packetize(data + 1, size - 1 < (1 << 16) ? size - 1 : (1 << 16), sig, sizeof sig);
        data = sig;
    }
    oni_ctx ctx = oni_create_ctx_driver(&onifix_scripted);
    if (!ctx)
        return 0;
    uint32_t ms = 50;
    oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &ms, sizeof ms);
    set_u32(ctx, SCR_OPT_EMPTY, SCR_EMPTY_TIMEOUT); /* a drained stream ends the run at once */
    set_u32(ctx, SCR_OPT_REGMODE, SCR_REG_EXTERNAL);
    oni_set_driver_opt(ctx, SCR_OPT_DEVTABLE, data, size);
    if (oni_init_ctx(ctx, 0) == 0) {
        check_table(ctx);
        /* The bytes after the table answer register accesses. */
        for (uint32_t i = 0; i < 8; i++) {
            oni_reg_val_t v = i;
            int rc = i % 2 ? oni_read_reg(ctx, i, i, &v) : oni_write_reg(ctx, i, i, v);
            if (rc == ONI_ETIMEOUT)
                break;
        }
        /* A second reset reads the same bytes again, after the leftovers. */
        uint32_t one = 1;
        if (oni_set_opt(ctx, ONI_OPT_RESET, &one, sizeof one) == 0)
            check_table(ctx);
    }
    oni_destroy_ctx(ctx);
    return 0;
}
