/* cli_oni.h - helpers of the ONI-facing commands (info, read, reg): the
 * connection options every such command takes, number and device-index
 * parsing, and names for onix.h ids. */
#ifndef CLI_ONI_H
#define CLI_ONI_H

#include <stddef.h>
#include <stdint.h>
#include "cli.h"
#include "oni.h"

/* --driver NAME, --emu SPEC, --net HOST:PORT, --host N, --timeout MS (also as --opt=value). */
struct cli_conn {
    const char *driver;  /* NULL: the default, "emu" ("net" with --net) */
    const char *emu;
    const char *net;     /* the `net` driver's server (oninet.h), or NULL */
    int host;            /* -1: the driver's default */
    uint32_t timeout_ms; /* 0: the library's default ONI_OPT_TIMEOUTMS */
};

/* Initialise c to the defaults. */
void cli_conn_init(struct cli_conn *c);

/* If argv[*i] is a connection option, take it (and its value, advancing *i)
 * and return 1; return 0 if it is not one, 2 if its value is missing or bad
 * (said on stderr with cmd's usage: cli_bad_value). */
int cli_conn_arg(const struct cli_command *cmd, struct cli_conn *c, int argc, char **argv, int *i);

/* Open the connection c (cli_open, then ONI_OPT_TIMEOUTMS if given); NULL
 * after printing the error. */
oni_ctx cli_conn_open(const struct cli_conn *c);

/* The device table of an initialized ctx: *t (calloc'ed, the caller frees
 * it; never NULL on success) and *n. 0 or the ONI error (ONI_EBADALLOC). */
int cli_devtable(oni_ctx ctx, oni_device_t **t, oni_size_t *n);

/* Parse a device index: a number (decimal or 0x hex) or "hub.dev" (each 0..255). 0 or -1. */
int cli_parse_dev(const char *s, uint32_t *idx);
/* The short name of an ONIX device / hub id (onix.h's enum name without
 * its prefix: "RHD2164", "HS64"), or "unknown". */
const char *cli_dev_tag(int dev_id);
const char *cli_hub_tag(int hub_id);

/* Write idx as "hub.dev" into buf (at least 12 bytes); returns buf. */
char *cli_fmt_dev(uint32_t idx, char *buf, size_t n);

#endif
