/* bench_cli.c - see bench_cli.h. */
#include "bench_cli.h"

#include <stdio.h>
#include <string.h>
#include "bench/bench.h"
#include "cli.h"
#include "common/stopsig.h"
#include "loop/loop.h"

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

int bench_cli_backends(const struct cli_command *cmd, const char *opt, const char *list, unsigned *mask)
{
    if (list && !strcmp(list, "all"))
        return 0;
    int st = cli_parse_names(cmd, opt, list, loop_backend_parse, loop_backend_name, LOOP_NBACKENDS, *mask, mask);
    for (int b = 0; b < LOOP_NBACKENDS && !st; b++) {
        char why[160];
        if ((*mask >> b & 1) && !loop_backend_available(b, why, sizeof why)) {
            fprintf(stderr, "onigpu %s: backend %s is not available: %s\n", cmd->name, loop_backend_name(b), why);
            return 1;
        }
    }
    return st;
}

int bench_cli_run(const struct bench_cli_set *s)
{
    if (bench_cli_signals(s->cmd))
        return 1;
    char **full;
    int nfull = cli_command_line(&full), rc = 0, measured = -1;
    struct results *r = results_open(s->out, s->name, nfull, full, s->gpu, &rc);
    if (r)
        rc = s->body(r, s->arg, &measured);
    bench_cli_signals_end(s->cmd);
    if (!r)
        return cli_fail(s->out, rc);
    if (measured < 0)
        measured = results_rows(r) > 0;
    if (!measured) {
        results_discard(r);
        if (rc)
            return cli_fail(s->cmd, rc);
        fprintf(stderr, "onigpu %s: nothing was measured; no results written to %s\n", s->cmd, s->out);
        return 1;
    }
    for (const char *const *t = s->print; t && *t; t++)
        results_print(r, *t, stdout);
    char where[1024];
    const char *json = results_path(r, ".json");
    snprintf(where, sizeof where, "%s", json ? json : s->out);
    int wrc = results_close(r);
    if (!wrc)
        printf("results: %s\n", where);
    fflush(stdout);
    if (rc)
        return cli_fail(s->cmd, rc);
    return wrc ? cli_fail("writing results", wrc) : 0;
}
