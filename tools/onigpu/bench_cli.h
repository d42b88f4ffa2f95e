/* bench_cli.h - what every `onigpu bench ...` does around its body: take
 * SIGINT/SIGTERM as "end early" (bench_stop), so that a stopped benchmark
 * writes what it measured. (--out is checked by cli_arg_outdir, cli.h.) */
#ifndef BENCH_CLI_H
#define BENCH_CLI_H

/* Take SIGINT and SIGTERM from now on, on a thread of their own, as
 * bench_stop (call it before any other thread starts: a driver's, a
 * helper's). 0, or 1 after saying why. */
int bench_cli_signals(const char *cmd);

/* Stop taking them (after the body returned), and say on stderr when the
 * run was ended early. */
void bench_cli_signals_end(const char *cmd);

#endif
