/* fuzz_npy.c - the readers of the template file set (src/loop/stage_tmatch.c):
 * a .npy file checked as an array of a dtype and dimensions
 * (src/oni/util/npy.c npy_check) and params.py's two keys
 * (src/loop/tmatch_files.c tm_params_parse). The first byte picks the
 * reader and, for npy_check, the dimensions asked for; the rest is its
 * input. What is accepted must describe exactly the bytes given. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "../../src/loop/tmatch_files.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size)
        return 0;
    char why[512];
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    if (data[0] & 1) {
        double fs;
        int hp;
        if (tm_params_parse((const char *)p, n, "params.py", &fs, &hp, why, sizeof why) == 0 &&
            (!(fs == 0 || (fs > 0 && isfinite(fs))) || hp < -1 || hp > 1))
            abort();
        return 0;
    }
    int ndim = 1 + (data[0] >> 1) % NPY_MAXDIM;
    struct npy_info h;
    if (npy_check(p, n, "x.npy", "<f4,<f8,<i4,<i8", ndim, &h, why, sizeof why) == 0) {
        uint64_t want = h.item;
        for (int i = 0; i < h.ndim; i++)
            want *= h.shape[i];
        if (h.ndim != ndim || h.fortran || h.data_off > n || n - h.data_off != want)
            abort();
    } else if (!why[0]) {
        abort(); /* a refusal says why */
    }
    return 0;
}
