/* bench_cli.c - see bench_cli.h. */
#include "bench_cli.h"

#include <stdio.h>
#include <string.h>
#include "bench/bench.h"
#include "common/stopsig.h"

static void on_stop(void *arg)
{
    (void)arg;
    bench_stop();
}

int bench_cli_signals(const char *cmd)
{
    int rc = stopsig_start(on_stop, NULL);
    if (rc)
        fprintf(stderr, "onigpu %s: cannot take SIGINT/SIGTERM: %s\n", cmd, strerror(rc));
    return rc ? 1 : 0;
}

void bench_cli_signals_end(const char *cmd)
{
    stopsig_end();
    if (bench_stopped())
        fprintf(stderr, "onigpu %s: ended early by a signal; the results hold what was measured until then\n", cmd);
}
