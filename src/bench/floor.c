/* floor.c - `onigpu bench floor`'s mechanism names and option check, built
 * with and without CUDA (the measurement is floor_cuda.c / floor_nocuda.c). */
#include <string.h>
#include "bench/floor.h"
#include "oni.h"

static const char *const names[FLOOR_NMECH] = {
    "memcpy-query", "memcpy-flag", "memcpy-sync", "drv-memcpy-flag",
    "armed",        "kernel-pull", "doorbell-rtt", "launch-query",
    "ptr-attrs",    "ptr-id",
};

const char *floor_mech_name(int mech)
{
    return mech >= 0 && mech < FLOOR_NMECH ? names[mech] : NULL;
}

int floor_mech_parse(const char *name)
{
    for (int m = 0; name && m < FLOOR_NMECH; m++)
        if (!strcmp(name, names[m]))
            return m;
    return -1;
}

int bench_floor_check(const struct bench_floor_opts *o)
{
    if (!o || !o->reps || o->reps > FLOOR_MAX_REPS || o->size < 8 || o->size > FLOOR_MAX_SIZE || !o->mechs ||
        (o->mechs & ~FLOOR_ALL_MECHS) || !o->rounds || !o->timeout_ms || !o->out_dir)
        return ONI_EINVALARG;
    return 0;
}
