/* bench_cli.c - see bench_cli.h. */
#include "bench_cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bench/bench.h"
#include "common/mkdirs.h"
#include "common/stopsig.h"

int bench_cli_out(const char *cmd, const char *dir)
{
    int err = make_dirs(dir);
    if (err) {
        if (err == ENOTDIR)
            fprintf(stderr, "onigpu %s: --out %s: not a directory\n", cmd, dir);
        else
            fprintf(stderr, "onigpu %s: --out %s: cannot create the directory: %s\n", cmd, dir, strerror(err));
        return 2;
    }
    /* a file of our own, removed at once: the directory takes files */
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/.onigpu-out-XXXXXX", dir);
    int fd = mkstemp(probe);
    if (fd < 0) {
        fprintf(stderr, "onigpu %s: --out %s: no file can be made there: %s\n", cmd, dir, strerror(errno));
        return 2;
    }
    close(fd);
    unlink(probe);
    return 0;
}

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
