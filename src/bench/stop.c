/* stop.c - a benchmark asked to end early (bench.h). */
#include <stdatomic.h>
#include "bench.h"

static atomic_int stop_asked;

void bench_stop(void)
{
    atomic_store(&stop_asked, 1);
}

int bench_stopped(void)
{
    return atomic_load(&stop_asked);
}
