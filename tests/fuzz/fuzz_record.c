/* fuzz_record.c - the readers of recordings (src/record): the .npy header
 * parser (src/oni/util/npy.c) and structure.oebin's index (oebin_index.c), which
 * `onigpu recover` runs on whatever a crash left on disk. The first byte
 * picks the parser; the rest is its input. A header that parses must
 * describe data inside 2^63 bytes, and a folder must stay under its kind's
 * directory (no absolute path, no ".." component). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "../../src/oni/util/npy.c"
#include "../../src/record/oebin_index.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size)
        return 0;
    if (data[0] & 1) {
        struct npy_info h;
        if (npy_parse(data + 1, size - 1, &h) == 0) {
            if (h.data_off > size - 1 || !h.item || h.ndim < 1 || h.ndim > NPY_MAXDIM)
                abort();
            char buf[NPY_HDR];
            struct npy_info back;
            /* what parses, written again at the fixed length, parses the same */
            if (npy_header(buf, h.descr, h.ndim, h.shape) == 0 &&
                (npy_parse((const uint8_t *)buf, NPY_HDR, &back) || back.shape[0] != h.shape[0] ||
                 back.ndim != h.ndim || strcmp(back.descr, h.descr)))
                abort();
        }
        return 0;
    }
    static struct oebin_index ix;
    char why[256];
    if (oebin_parse_index((const char *)data + 1, size - 1, &ix, why, sizeof why) == 0)
        for (size_t i = 0; i < ix.n; i++) {
            const char *p = ix.f[i].path;
            if (p[0] == '/' || strstr(p, "/../") || !strncmp(p, "../", 3) ||
                (strlen(p) >= 3 && !strcmp(p + strlen(p) - 3, "/..")))
                abort();
        }
    return 0;
}
