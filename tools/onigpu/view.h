/* view.h - the CLI's side of the live view (src/view/view.h): `run`'s
 * `--view [HOST:]PORT` and `--view-token FILE` options, the server opened
 * before the run with what the user is told, and the run's reports handed
 * on to it. */
#ifndef CLI_VIEW_H
#define CLI_VIEW_H

#include "cli.h"
#include "loop/run.h"
#include "view/view.h"

struct rec;

struct view_cli {
    const char *addr;        /* --view (NULL: no view) */
    const char *token_file;  /* --view-token */
    char token[128];
    struct view_config cfg;
    struct view *v;          /* once open */
    /* run --record: the recording once the run opened it (record.h's
     * rec_loop_tap.r), where the page's changes go as messages; NULL: none */
    struct rec *const *rec;
};

/* Take argv[*i] if it is --view or --view-token (with its value; *i
 * advanced): 1 taken, 0 not one of them, 2 bad value (said, usage shown). */
int view_cli_arg(const struct cli_command *cmd, struct view_cli *o, int argc, char **argv, int *i);
/* After parsing: the address, the token file (read now), --view-token
 * without --view. 0 or 2 (said). */
int view_cli_check(const struct cli_command *cmd, struct view_cli *o);
/* Open the server for the run c describes and put its tap in front of
 * c->tap (a recording keeps its calls). Prints the page's address. 0, or 1
 * after saying why. */
int view_cli_open(struct view_cli *o, struct loop_run_config *c);
/* The run's reports, handed on (o not open: nothing). */
void view_cli_started(struct view_cli *o, const char *backend, const struct loop_run_result *r);
void view_cli_progress(struct view_cli *o, const struct loop_run_progress *p);
/* The summary and the results' folder (NULL: none) to the page, then the
 * server stops once its clients have them (at most 2 s). */
void view_cli_close(struct view_cli *o, const struct loop_run_result *r, const char *results);

#endif
