/* sys.h - what the result files need of the system: running a program of
 * the machine (git, gnuplot) and reading what it says; closing a file
 * written with stdio. Internal to src/results. */
#ifndef RESULTS_SYS_H
#define RESULTS_SYS_H

#include <stddef.h>
#include <stdio.h>

/* Run argv[0], found on PATH, with argv (NULL-terminated), in directory dir
 * (NULL: the current one), stdin from /dev/null. What it writes to fd (1:
 * stdout, 2: stderr; the other goes to /dev/null) is kept in out, up to len -
 * 1 bytes and NUL-terminated (the rest is read and dropped). Returns its exit
 * status (0..255), 127 when it could not be started (not installed, or dir
 * not there), -1 when it was killed by a signal or no process or pipe could
 * be made. Nothing is printed. */
int results_exec(const char *dir, char *const argv[], int fd, char *out, size_t len);

/* fclose f, written with stdio: ONI_ESUCCESS, or ONI_EPATHINVALID when
 * that or any earlier write failed (a full disk that had room again by the
 * last flush fails it too). */
int results_close_written(FILE *f);

#endif
