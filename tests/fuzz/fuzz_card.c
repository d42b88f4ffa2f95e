/* fuzz_card.c - libFuzzer target for the emulated card's parsers of outside
 * bytes (src/emu): the spec string (ONI_DRV_EMU_SPEC, the daemon's command
 * line) and the write frames a host sends on the write streams. The first
 * input byte picks which; the rest is the input. An accepted spec must give
 * a card that opens and closes; a write must be taken whole (n) or refused
 * (ONI_EBADFRAME), never crash or read past the input (ASan). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
/* Compiled into the target, so that libFuzzer's coverage instrumentation
 * sees the parsers (the library is built without it); the archive's copies
 * are then never pulled in. */
#include "emu/spec.c"
#include "emu/card.c"

/* A card with a device of every write kind, made once. */
static struct emu_card *writable_card(void)
{
    static struct emu_card *c;
    if (!c && emu_card_create("mode=fast;link=unlimited;ddr=1M;devices=stim,breakout,testsink", &c, NULL, 0))
        abort();
    return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t what = data[0];
    data++, size--;
    if (what & 1) {
        struct emu_card *c = writable_card();
        enum emu_stream s = what & 2 ? EMU_STREAM_GPU_WRITE : EMU_STREAM_WRITE;
        uint8_t *copy = malloc(size ? size : 1); /* exactly size bytes: ASan sees a read past them */
        if (!copy)
            return 0;
        memcpy(copy, data, size);
        int rc = emu_card_write(c, s, copy, size, 100);
        if (size && rc != (int)size && rc != ONI_EBADFRAME)
            abort();
        free(copy);
        return 0;
    }
    if (size > 4096)
        return 0;
    char *spec = malloc(size + 1);
    if (!spec)
        return 0;
    memcpy(spec, data, size);
    spec[size] = 0;
    /* templates=DIR makes the card write files into DIR: never from a fuzzer
     * (tests write only under /tmp and their build directory). The key's
     * value is a checked copy (spec.c), refused and accepted in test_neural. */
    if (strstr(spec, "templates")) {
        free(spec);
        return 0;
    }
    struct emu_card *c = NULL;
    char err[200];
    if (emu_card_create(spec, &c, err, sizeof err) == 0) {
        if (!c)
            abort();
        emu_card_destroy(c);
    } else if (c) {
        abort(); /* a refused spec leaves no card */
    }
    free(spec);
    return 0;
}
