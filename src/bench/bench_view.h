/* bench_view.h - `onigpu bench view`: what the live view costs the closed
 * loop (src/view, docs/view.md).
 *
 * The same closed loop (loop_run_session, one backend and block) run
 * `rounds` times in each of four arms: no view ("off"), the view's server
 * and tap with no client ("0"), with one and with three clients reading
 * the event stream (view/client.h: what a browser's EventSource reads; not
 * browsers drawing, whose own CPU would be the machine's figure, not the
 * view's). The arms' order rotates each round, so drift of the machine
 * falls on all of them. The echoes after the warm-up of each arm pooled:
 * p50, p99, p99.9 and max, each also as the ratio to "off"; the loop's
 * frames/s; what each client received per run (events, kB) and the view
 * events lost (table "latency"); a plot of p50 and p99.9 by arm. */
#ifndef BENCH_VIEW_H
#define BENCH_VIEW_H

#include <stdint.h>
#include "bench/bench.h"

struct bench_view_opts {
    int backend;          /* enum loop_backend */
    uint32_t block;       /* frames per block */
    double seconds;       /* of each loop run */
    uint32_t rounds;      /* loop runs per arm */
    const char *web_dir;  /* the page's folder (view_open checks it) */
    const char *tmp_dir;  /* an existing directory for the runs' truth files */
};

/* Run the arms into r. 0, or an ONI error (what was measured stays in r;
 * why says what failed, cap bytes). */
int bench_view_run(const struct bench_view_opts *o, struct results *r, char *why, size_t cap);

#endif
