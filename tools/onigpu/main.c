/* main.c - `onigpu`: dispatch to the registered subcommands. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "gpu/gpu.h"
#include "oniemu.h"
#include "oninet.h"

#define MAX_COMMANDS 64
static const struct cli_command *commands[MAX_COMMANDS];
static int ncommands;
static int full_argc;     /* the command line, "onigpu" first (cli_command_line) */
static char **full_argv;

void cli_register(const struct cli_command *cmd)
{
    if (ncommands < MAX_COMMANDS)
        commands[ncommands++] = cmd;
}

int cli_usage(const struct cli_command *cmd)
{
    fprintf(stderr, "usage: onigpu %s %s\n  %s\n", cmd->name, cmd->usage, cmd->help);
    return 2;
}

/* True if argv has -h or --help. */
static int wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return 1;
    return 0;
}

int cli_fail(const char *what, int rc)
{
    fprintf(stderr, "onigpu: %s: %s (%d)\n", what, oni_error_str(rc), rc);
    return 1;
}

int cli_command_line(char ***argv)
{
    *argv = full_argv;
    return full_argc;
}

static const char *const link_presets[] = {ONIEMU_LINK_PRESETS};
#define NPRESETS (sizeof link_presets / sizeof link_presets[0])

const char *cli_link_allowed(void)
{
    static char text[160];
    if (!text[0]) {
        size_t n = (size_t)snprintf(text, sizeof text, "a link preset (");
        for (size_t i = 0; i < NPRESETS && n < sizeof text; i++)
            n += (size_t)snprintf(text + n, sizeof text - n, "%s%s", i ? ", " : "", link_presets[i]);
        if (n < sizeof text)
            snprintf(text + n, sizeof text - n, ")");
    }
    return text;
}

int cli_check_link(const struct cli_command *cmd, const char *link)
{
    if (!link)
        return 0;
    for (size_t i = 0; i < NPRESETS; i++)
        if (!strcmp(link, link_presets[i]))
            return 0;
    return cli_bad_value(cmd, "--link", link, "%s", cli_link_allowed());
}

/* What a failed open of hardware at an address means, for the
 * codes that say (onidefs.h); NULL for the others. */
static const char *open_hint(int rc)
{
    switch (rc) {
    case ONI_ECONNREFUSED: return "connection refused: nobody listens there";
    case ONI_EBADADDR: return "bad address syntax: want HOST:PORT or [IPv6]:PORT, port 1-65535";
    case ONI_ENOHOST: return "unknown host: the name does not resolve";
    case ONI_EACCESS: return "permission denied";
    case ONI_ETIMEOUT: return "no answer within the timeout";
    default: return NULL;
    }
}

/* Say why the context of driver drv could not be initialized (rc): where it
 * looked (net: the server's address) and where that came from, in words for
 * the codes that tell apart what went wrong. */
static void open_failed(oni_ctx ctx, const char *drv, const char *net_addr, int rc)
{
    const char *hint = open_hint(rc);
    char addr[256];
    size_t len = sizeof addr;
    if (!strcmp(drv, "net") && !oni_get_driver_opt(ctx, ONI_DRV_NET_ADDR, addr, &len)) {
        const char *from = net_addr ? "--net" : getenv(ONIGPU_NET_ENV) && *getenv(ONIGPU_NET_ENV) ? "$" ONIGPU_NET_ENV
                                                                                                   : "the default";
        fprintf(stderr, "onigpu: cannot open the hardware served at %s (%s; driver net): %s%s\n", addr, from,
                hint ? hint : oni_error_str(rc), rc == ONI_ECONNREFUSED ? " (is `onigpu serve` running?)" : "");
    } else {
        cli_fail("cannot initialize the hardware", rc);
    }
}

oni_ctx cli_open(const char *drv, const char *emu_spec, const char *net_addr, int host_idx)
{
    if (!drv)
        drv = "emu";
    oni_ctx ctx = oni_create_ctx(drv);
    if (!ctx) {
        fprintf(stderr, "onigpu: cannot load driver '%s': %s\n", drv, strerror(errno));
        return NULL;
    }
    int rc = 0, net = !strcmp(drv, "net");
    if (net_addr && net)
        rc = oni_set_driver_opt(ctx, ONI_DRV_NET_ADDR, net_addr, strlen(net_addr) + 1);
    if (!rc && emu_spec && (net || !strcmp(drv, "emu")))
        rc = oni_set_driver_opt(ctx, ONI_DRV_EMU_SPEC, emu_spec, strlen(emu_spec) + 1);
    if (!rc)
        rc = oni_init_ctx(ctx, host_idx);
    if (rc) {
        open_failed(ctx, drv, net_addr, rc);
        oni_destroy_ctx(ctx);
        return NULL;
    }
    return ctx;
}

/* The command list, on stdout when asked for, on stderr after a usage error. */
static void print_help(FILE *f)
{
    fprintf(f, "onigpu - acquisition-to-GPU stack for closed-loop experiments (ONI API %d.%d.%d)\n\n"
               "usage: onigpu <command> [options]   (onigpu <command> --help for details; onigpu --version)\n\n",
            ONI_VERSION_MAJOR, ONI_VERSION_MINOR, ONI_VERSION_PATCH);
    for (int i = 0; i < ncommands; i++)
        fprintf(f, "  %-16s %s\n", commands[i]->name, commands[i]->help);
}

/* `onigpu --version`: what a bug report needs to say about this build. */
static int print_version(void)
{
    int major, minor, patch;
    oni_version(&major, &minor, &patch);
    printf("onigpu %s\nONI API %d.%d.%d (liboni.so.1)\n", ONIGPU_VERSION, major, minor, patch);
    char why[200] = "";
    if (!gpu_available(why, sizeof why)) /* says whether CUDA was built in */
        printf("GPU: %s\n", why);
    else if (gpu_name(why, sizeof why) == 0)
        printf("GPU: device 0: %s\n", why);
    else
        printf("GPU: device 0 (no name: %s)\n", gpu_error());
    return 0;
}

/* Find the command named by argv[1] (and argv[2] for two-word names). */
static const struct cli_command *find(int argc, char **argv, int *words)
{
    for (int i = 0; i < ncommands; i++) {
        const char *n = commands[i]->name, *sp = strchr(n, ' ');
        if (!sp && !strcmp(n, argv[1])) {
            *words = 1;
            return commands[i];
        }
        if (sp && argc > 2 && (size_t)(sp - n) == strlen(argv[1]) && !strncmp(n, argv[1], (size_t)(sp - n)) &&
            !strcmp(sp + 1, argv[2])) {
            *words = 2;
            return commands[i];
        }
    }
    return NULL;
}

/* The second word of a two-word command whose first is `word` ("bench frames"
 * in "bench"), or NULL. */
static const char *in_group(const char *name, const char *word)
{
    const char *sp = strchr(name, ' ');
    size_t len = strlen(word);
    return sp && (size_t)(sp - name) == len && !strncmp(name, word, len) ? sp + 1 : NULL;
}

/* List the two-word commands of group `word` with their help lines on `f`;
 * returns how many there are (0: `word` is no group, nothing printed). */
static int print_group(FILE *f, const char *word)
{
    int n = 0;
    for (int i = 0; i < ncommands; i++) {
        const char *second = in_group(commands[i]->name, word);
        if (!second)
            continue;
        if (!n++)
            fprintf(f, "usage: onigpu %s <command> [options]   (onigpu %s <command> --help for details)\n\n",
                    word, word);
        fprintf(f, "  %-16s %s\n", second, commands[i]->help);
    }
    return n;
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        print_help(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version"))
        return print_version();
    int words = 0;
    const struct cli_command *cmd = find(argc, argv, &words);
    if (!cmd && argc > 2 && (!strcmp(argv[2], "-h") || !strcmp(argv[2], "--help")) &&
        print_group(stdout, argv[1]))
        return 0; /* "onigpu bench --help" lists the group */
    if (!cmd) {
        /* a missing or unknown second word of a group is a usage error */
        for (int i = 0; i < ncommands; i++)
            if (in_group(commands[i]->name, argv[1])) {
                if (argc > 2)
                    fprintf(stderr, "onigpu: unknown command '%s %s'\n\n", argv[1], argv[2]);
                print_group(stderr, argv[1]);
                return 2;
            }
    }
    if (!cmd) {
        fprintf(stderr, "onigpu: unknown command '%s'\n\n", argv[1]);
        print_help(stderr);
        return 2;
    }
    argv[0] = "onigpu"; /* recorded as typed, not as the path of the binary */
    full_argc = argc;
    full_argv = argv;
    int sub_argc = argc - words;
    char **sub_argv = argv + words;
    if (wants_help(sub_argc, sub_argv)) {
        printf("usage: onigpu %s %s\n  %s\n", cmd->name, cmd->usage, cmd->help);
        if (cmd->options)
            printf("options:\n%s", cmd->options);
        return 0;
    }
    return cmd->run(sub_argc, sub_argv);
}
