/* run_report.h - the result set of `onigpu run`. */
#ifndef RUN_REPORT_H
#define RUN_REPORT_H

#include "loop/run.h"

/* The result set of `onigpu run` in dir: one row of r (the run on backend,
 * its ground truth in the file truth) and one row of each echo's latency;
 * argc/argv the command line. 0 or an ONI error (results_open's). */
int run_report_write(const char *dir, int argc, char **argv, int backend, const char *truth,
                     const struct loop_run_result *r);

#endif
