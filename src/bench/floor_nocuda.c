/* floor_nocuda.c - `onigpu bench floor` in a build without CUDA: nothing to measure. */
#include "bench/floor.h"
#include "oni.h"

int bench_floor_run(const struct bench_floor_opts *o, struct results *r, int *measured)
{
    (void)r;
    int rc = bench_floor_check(o);
    if (rc)
        return rc;
    *measured = 0;
    if (o->log)
        fprintf(o->log, "onigpu bench floor: every mechanism needs a GPU: built without CUDA\n");
    return ONI_ENOGPU;
}
