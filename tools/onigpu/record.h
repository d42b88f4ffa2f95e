/* record.h - the CLI's side of recording (src/record/record.h): the
 * `--record DIR [--format openephys|nwb]` options of `read` and `run`,
 * opening the recording with what the user is told, and its last words. */
#ifndef CLI_RECORD_H
#define CLI_RECORD_H

#include "cli.h"
#include "oni.h"
#include "record/record.h"

struct rec_cli {
    const char *dir;  /* NULL: no recording */
    int format;       /* enum rec_format */
    int have_format;
};

/* Take argv[*i] if it is --record or --format (with its value; *i
 * advanced): 1 taken, 0 not one of them, 2 bad value (said, usage shown). */
int rec_cli_arg(const struct cli_command *cmd, struct rec_cli *o, int argc, char **argv, int *i);
/* After parsing: --format without --record is an error. 0 or 2 (said). */
int rec_cli_check(const struct cli_command *cmd, const struct rec_cli *o);

/* Make o->dir (mkdir -p) and open the recording of ctx's device table
 * (stimuli and spike channels when stim_spikes). Prints what is recorded.
 * NULL after printing why (prog names the command). */
struct rec *rec_cli_open(const char *prog, const struct rec_cli *o, oni_ctx ctx, int stim_spikes);
/* Close r and print its summary (rows, events, spikes, bytes, what was
 * lost). 0, or 1 when the recording failed or lost data (said). */
int rec_cli_close(const char *prog, struct rec *r, const struct rec_cli *o);

#endif
