/* run_print.h - what `onigpu run` prints of a run (src/loop/run.h's data):
 * the start, a line per second while it runs, the summary at the end; all
 * to stdout. */
#ifndef RUN_PRINT_H
#define RUN_PRINT_H

#include "loop/run.h"

/* The block, the link and which stream the probe comes on (loop_run_config.started). */
void run_print_started(int backend, double seconds, const struct loop_run_result *r);
/* One second's line: rate, stimuli, latency, FIFO, drops (loop_run_config.progress). */
void run_print_progress(const struct loop_run_progress *p);
/* The summary: counts and how they relate, the score, the latencies (warm-up
 * apart), the block and why, where the time after the last sample went,
 * drops and stalled reads; truth_kept 0 says the truth file is temporary. */
void run_print_summary(int backend, const char *truth, int truth_kept, const struct loop_run_result *r);

#endif
