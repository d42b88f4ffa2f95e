/* view.c - `run --view`: the live view's options and its life beside the
 * run (view.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "view.h"
#include "record/record.h"

int view_cli_arg(const struct cli_command *cmd, struct view_cli *o, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    if (strcmp(a, "--view") && strncmp(a, "--view=", 7) && strcmp(a, "--view-token") &&
        strncmp(a, "--view-token=", 13))
        return 0;
    char opt[64];
    const char *name, *v;
    cli_opt_split(argc, argv, i, opt, sizeof opt, &name, &v);
    if (!strcmp(name, "--view"))
        return cli_arg_text(cmd, name, v, "[HOST:]PORT (HOST a dotted IPv4 address; loopback when left out)",
                            &o->addr) ? 2 : 1;
    return cli_arg_text(cmd, name, v, "a file holding the token (8 to 127 characters, one line)", &o->token_file)
               ? 2 : 1;
}

/* The token: the file's first line, 8..127 printable characters. */
static int read_token(const struct cli_command *cmd, struct view_cli *o)
{
    FILE *f = fopen(o->token_file, "r");
    if (!f)
        return cli_bad_value(cmd, "--view-token", o->token_file, "a file that can be read: %s", strerror(errno));
    char line[256] = "";
    int ok = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    line[strcspn(line, "\r\n")] = 0;
    size_t n = strlen(line);
    for (size_t k = 0; k < n && ok; k++)
        ok = line[k] > 0x20 && line[k] < 0x7f;
    if (!ok || n < 8 || n >= sizeof o->token)
        return cli_bad_value(cmd, "--view-token", o->token_file,
                             "a file whose first line is the token: 8 to 127 printable characters, no spaces");
    memcpy(o->token, line, n + 1);
    o->cfg.token = o->token;
    return 0;
}

int view_cli_check(const struct cli_command *cmd, struct view_cli *o)
{
    if (o->token_file && !o->addr) {
        fprintf(stderr, "onigpu %s: --view-token is the token of --view: give --view too\n", cmd->name);
        return cli_usage(cmd);
    }
    if (!o->addr)
        return 0;
    char why[200];
    if (view_parse_addr(o->addr, &o->cfg, why, sizeof why))
        return cli_bad_value(cmd, "--view", o->addr, "[HOST:]PORT: %s", why);
    return o->token_file ? read_token(cmd, o) : 0;
}

/* The chain's detect stage, whose threshold the page may change: the
 * built-in chain is filter, reference, detect, decide (src/loop/stage.c);
 * a chain given with --stage has it where it was named, or not at all. */
static int detect_stage(const struct loop_run_config *c)
{
    if (!c->nstages)
        return 2;
    for (uint32_t i = 0; i < c->nstages; i++) {
        const char *t = c->stages[i].text;
        if (t && !strncmp(t, "detect", 6) && (!t[6] || t[6] == ':'))
            return (int)i;
    }
    return -1;
}

/* A change from the page: said to the user, and kept in the recording's
 * messages at the clock it was made (clock 0: before the first block, when
 * the recording may not be open yet; it is not read then). */
static void note(void *arg, uint64_t clock, const char *text)
{
    struct view_cli *o = arg;
    printf("onigpu run: view: %s\n", text);
    fflush(stdout);
    if (clock && o->rec && *o->rec && rec_message(*o->rec, clock, text, 0))
        printf("onigpu run: view: the recording's queue was full: the message was not recorded\n");
}

int view_cli_open(struct view_cli *o, struct loop_run_config *c)
{
    const char *dir = getenv("ONIGPU_WEB_DIR");
    o->cfg.web_dir = dir && *dir ? dir : ONIGPU_WEB_DIR;
    o->cfg.detect_stage = detect_stage(c);
    o->cfg.probes = c->probes;
    o->cfg.note = note;
    o->cfg.arg = o;
    char why[400];
    int rc = view_open(&o->cfg, &o->v, why, sizeof why);
    if (rc) {
        fprintf(stderr, "onigpu run: --view %s: %s\n", o->addr, why);
        return 1;
    }
    c->tap = view_tap(o->v, c->tap);
    printf("onigpu run: live view at http://%s:%u/ (%s)\n", o->cfg.host, view_port(o->v),
           o->cfg.token ? "changes of threshold and traces need the token: open the page with #token=..."
                        : "read-only");
    fflush(stdout);
    return 0;
}

void view_cli_started(struct view_cli *o, const char *backend, const struct loop_run_result *r)
{
    if (o->v)
        view_started(o->v, backend, r);
}

void view_cli_progress(struct view_cli *o, const struct loop_run_progress *p)
{
    if (o->v)
        view_progress(o->v, p);
}

void view_cli_close(struct view_cli *o, const struct loop_run_result *r, const char *results)
{
    if (!o->v)
        return;
    if (r)
        view_end(o->v, r, results);
    view_close(o->v, 2000);
    o->v = NULL;
}
