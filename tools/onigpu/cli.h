/* cli.h - how `onigpu` subcommands plug in, and the option helpers they share.
 *
 * Each subcommand lives in its own file tools/onigpu/cmd_<name>.c and registers
 * itself with CLI_COMMAND; main.c dispatches. A name with a space ("bench
 * frames") is a sub-subcommand. A command returns the process exit status: 0
 * ok, 1 failure (message printed), 2 usage error (usage printed). */
#ifndef CLI_H
#define CLI_H

#include <stddef.h>
#include <stdint.h>
#include "oni.h"

struct cli_command {
    const char *name;  /* "info", "bench frames" */
    const char *usage; /* one line: arguments */
    const char *help;  /* one line: what it does */
    const char *options; /* --help: lines of "  --opt ARG  what, default", or NULL */
    int (*run)(int argc, char **argv); /* argv[0] is the command's last word */
};

/* Add cmd to the command table (at start-up, from CLI_COMMAND's constructor). */
void cli_register(const struct cli_command *cmd);

#define CLI_COMMAND(ident, name_, usage_, help_, options_, fn)                         \
    static const struct cli_command cli_cmd_##ident = {name_, usage_, help_, options_, fn}; \
    __attribute__((constructor)) static void cli_reg_##ident(void) { cli_register(&cli_cmd_##ident); }

/* Print "usage: onigpu <name> <usage>" and the help line to stderr; returns 2. */
int cli_usage(const struct cli_command *cmd);

/* --- arguments (cli_args.c) ---------------------------------------------------
 * Every command parses with these, so a bad argument reads the same in all:
 *   onigpu <cmd>: <opt> <value>: must be <what is allowed>
 * followed by the usage line, exit status 2 (docs/cli.md). The cli_arg_*
 * helpers parse, check the range and say what was wrong: they return 0, or
 * 2 after printing (the command returns that status). value NULL means the
 * option came without one ("--out --link x": cli_opt_split's rule). */

/* Say that opt's value is bad: "onigpu <cmd>: <opt> <value>: must be <allowed>"
 * ("<opt> needs a value: <allowed>" when value is NULL), then the usage. Returns 2. */
int cli_bad_value(const struct cli_command *cmd, const char *opt, const char *value, const char *allowed, ...)
    __attribute__((format(printf, 4, 5)));
/* Say that arg is no option of cmd ("unknown option"), an argument it does
 * not take ("unexpected argument"), or a flag given a value; then the usage. Returns 2. */
int cli_bad_arg(const struct cli_command *cmd, const char *arg);

/* A whole number (cli_parse_u64) from lo to hi into *out. 0 or 2. */
int cli_arg_count(const struct cli_command *cmd, const char *opt, const char *v, uint64_t lo, uint64_t hi,
                  uint64_t *out);
/* A duration (cli_parse_seconds) above lo (lo_open) or from lo, at most hi, into *out. 0 or 2. */
int cli_arg_seconds(const struct cli_command *cmd, const char *opt, const char *v, double lo, int lo_open, double hi,
                    double *out);
/* A size (cli_parse_size) from lo to hi bytes (UINT64_MAX: no bound), a
 * multiple of mult (1: any), into *out. 0 or 2. */
int cli_arg_size(const struct cli_command *cmd, const char *opt, const char *v, uint64_t lo, uint64_t hi,
                 uint64_t mult, uint64_t *out);
/* A value that must not be empty (a name, a path: `what` says which) into *out. 0 or 2. */
int cli_arg_text(const struct cli_command *cmd, const char *opt, const char *v, const char *what, const char **out);

/* A file to write (replaced if there): not empty, not a directory, in a
 * directory that exists. 0 or 2. */
int cli_arg_outfile(const struct cli_command *cmd, const char *opt, const char *v, const char **out);
/* A directory to write results in: not empty, not under a file, made if
 * missing (with its parents), and a file can be made there (one is made and
 * removed). Call it after the whole command line is parsed, before any
 * work, also for a default. 0 or 2. */
int cli_arg_outdir(const struct cli_command *cmd, const char *opt, const char *v, const char **out);
/* One name of a set of n (name(0..n-1)), as parse gives its number, into
 * *out: "must be one of a, b, c" otherwise. 0 or 2. */
int cli_arg_name(const struct cli_command *cmd, const char *opt, const char *v, int (*parse)(const char *),
                 const char *(*name)(int), int n, int *out);
/* A comma-separated list of such names into a bit mask (bit = the name's
 * number, below 32), or "all" into `all` (when not 0). A name not in the set,
 * or an empty list, is said as cli_bad_value says it ("<opt> li: must be one
 * of link, gen, echo, age ..."). 0 or 2. */
int cli_parse_names(const struct cli_command *cmd, const char *opt, const char *list, int (*parse)(const char *),
                    const char *(*name)(int), int n, unsigned all, unsigned *mask);

/* Parse "4096", "4K", "4KiB", "16M", "1G" (powers of 1024; "kB"/"MB" are powers of 1000). 0 or -1. */
int cli_parse_size(const char *s, uint64_t *out);
/* Parse "10", "2.5s", "500ms", "100us" into seconds (finite, >= 0). 0 or -1. */
int cli_parse_seconds(const char *s, double *out);
/* A whole string that is a number as cli.md allows one (decimal with an
 * optional fraction, or 0x hex; no sign, space or exponent) into *out. 0 or -1. */
int cli_parse_decimal(const char *s, double *out);
/* Parse a whole string as a uint64: decimal or 0x hex, no sign or space. 0 or -1. */
int cli_parse_u64(const char *s, uint64_t *out);
/* The same for a uint32. */
int cli_parse_u32(const char *s, uint32_t *out);
/* The option at argv[*i] as *name and *value: "--opt=VALUE" (the name
 * copied into buf, cap bytes) or "--opt VALUE" (*i stepped past the value).
 * *value is NULL when the value is missing, as when the next argument is
 * another option ("--...": "--driver --verify" gives --driver no value). */
void cli_opt_split(int argc, char **argv, int *i, char *buf, size_t cap, const char **name, const char **value);
/* A comma-separated list of at most cap sizes (cli_arg_size), each from
 * mult to max (max <= UINT32_MAX) and a multiple of mult, into v[0..cap);
 * *n how many. 0, or 2 after saying which size is wrong (cli_bad_value). */
int cli_parse_sizes(const struct cli_command *cmd, const char *opt, const char *list, uint64_t max, uint64_t mult,
                    uint32_t *v, size_t cap, size_t *n);

/* A comma-separated list of at most cap whole numbers (cli_parse_u32), each
 * from lo to hi, into v[0..cap); *n how many. 0, or 2 after saying what is
 * allowed (cli_bad_value). */
int cli_parse_u32s(const struct cli_command *cmd, const char *opt, const char *list, uint32_t lo, uint32_t hi,
                   uint32_t *v, size_t cap, size_t *n);

/* The command line as typed, "onigpu" first ("onigpu bench loop --sizes
 * ..."): what a result set records as its command. Returns argc, *argv set. */
int cli_command_line(char ***argv);

/* Check an emulated card's PCIe link preset (NULL: the card's default, ok)
 * against oniemu.h's ONIEMU_LINK_PRESETS. 0, or 2 for a name that is no
 * preset (said as cli_bad_value says it, with cmd's usage). */
int cli_check_link(const struct cli_command *cmd, const char *link);

/* "a link preset (gen2x4, ...)": what --link allows, for cli_bad_value. */
const char *cli_link_allowed(void);

/* Open and initialize a context for driver `drv` (NULL = "emu"); `emu_spec`
 * (NULL = default) is passed to the emu driver as ONI_DRV_EMU_SPEC (to the
 * served driver through `net`), `net_addr` (NULL = default) to the net driver
 * as ONI_DRV_NET_ADDR. On failure returns NULL after saying why on stderr:
 * for net the server's address and whence it came (--net, $ONIGPU_NET, the
 * default), and what the error code means. */
oni_ctx cli_open(const char *drv, const char *emu_spec, const char *net_addr, int host_idx);

/* Print "onigpu: <what>: <oni_error_str(rc)>" to stderr; returns 1. */
int cli_fail(const char *what, int rc);

#endif
