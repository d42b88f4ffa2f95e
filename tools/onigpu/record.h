/* record.h - the CLI's side of recording (src/record/record.h): the
 * `--record DIR [--format openephys|nwb]` options of `read` and `run`,
 * opening the recording with what the user is told, and its last words. */
#ifndef CLI_RECORD_H
#define CLI_RECORD_H

#include "cli.h"
#include "oni.h"
#include "record/record.h"
#include "record/looptap.h"

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


/* `run --record`: the loop's tap (src/record/looptap.h); its open prints
 * what is recorded. */
struct rec_tap {
    struct rec_loop_tap t;
    const struct rec_cli *o;
};
/* 0 when backend b hands the tap its blocks in host memory (cpu,
 * gpu-staged, gpu-mapped); else 2 after saying so. */
int rec_cli_run_check(int backend);
/* Make o->dir (mkdir -p) and fill t for it; NULL after saying why. The
 * result goes into loop_run_config.tap. */
const struct loop_run_tap *rec_cli_tap(struct rec_tap *t, const struct rec_cli *o);
/* Close t's recording if it opened (rec_cli_close's summary); 0, or 1 (said). */
int rec_cli_tap_close(struct rec_tap *t);

#endif
