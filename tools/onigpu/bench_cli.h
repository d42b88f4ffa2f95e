/* bench_cli.h - what every `onigpu bench ...` does around its body: check
 * --out before any work, and take SIGINT/SIGTERM as "end early"
 * (bench_stop), so that a stopped benchmark writes what it measured. */
#ifndef BENCH_CLI_H
#define BENCH_CLI_H

/* Check that results can be written in dir: made if missing (with its
 * parents), a directory, a file can be made there. 0, or exit status 2
 * after saying why ("onigpu <cmd>: --out DIR: ..."). */
int bench_cli_out(const char *cmd, const char *dir);

/* Take SIGINT and SIGTERM from now on, on a thread of their own, as
 * bench_stop (call it before any other thread starts: a driver's, a
 * helper's). 0, or 1 after saying why. */
int bench_cli_signals(const char *cmd);

/* Stop taking them (after the body returned), and say on stderr when the
 * run was ended early. */
void bench_cli_signals_end(const char *cmd);

#endif
