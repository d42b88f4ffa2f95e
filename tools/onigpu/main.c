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

/* Whether s[0..n) is a number as docs/cli.md allows one in a size: 0x and
 * hex digits, or decimal digits with at most one point. strtod takes more
 * (spaces, a sign, exponents, hex fractions, inf). */
static int plain_number(const char *s, size_t n)
{
    int hex = n > 2 && s[0] == '0' && (s[1] | 0x20) == 'x', points = 0;
    if (!n || !isdigit((unsigned char)s[0]))
        return 0;
    for (size_t i = hex ? 2 : 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!(hex ? isxdigit(c) : isdigit(c) || (c == '.' && ++points == 1)))
            return 0;
    }
    return 1;
}

int cli_parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0 || !plain_number(s, (size_t)(end - s)))
        return -1;
    double mul = 1;
    if (*end) {
        char u = (char)(*end | 0x20);
        const char *rest = end + 1;
        int decimal = !strcmp(rest, "B") && u != 'b'; /* "kB", "MB": powers of 1000 */
        double base = decimal ? 1000.0 : 1024.0;
        if (u == 'k') mul = base;
        else if (u == 'm') mul = base * base;
        else if (u == 'g') mul = base * base * base;
        else if (u == 'b' && !*rest) mul = 1;
        else return -1;
        if (*rest && strcmp(rest, "B") && strcmp(rest, "iB"))
            return -1;
    }
    double x = v * mul + 0.5;
    if (!(x < 18446744073709551616.0)) /* 2^64; also NaN and infinity */
        return -1;
    *out = (uint64_t)x;
    return 0;
}

void cli_opt_split(int argc, char **argv, int *i, char *buf, size_t cap, const char **name, const char **value)
{
    const char *a = argv[*i], *eq = strchr(a, '=');
    if (eq && (size_t)(eq - a) < cap) {
        memcpy(buf, a, (size_t)(eq - a));
        buf[eq - a] = 0;
        *name = buf;
        *value = eq + 1;
        return;
    }
    *name = a;
    /* "--out --link x" lacks the value: it is not "--link" (as cli_opt_value) */
    *value = *i + 1 < argc && strncmp(argv[*i + 1], "--", 2) ? argv[++*i] : NULL;
}

/* The list parsers split a copy: argv itself is recorded in the results' meta. */
int cli_parse_names(const char *cmd, const char *what, const char *list, int (*parse)(const char *),
                    unsigned all, unsigned *mask)
{
    if (all && !strcmp(list, "all")) {
        *mask = all;
        return 0;
    }
    char *copy = strdup(list);
    if (!copy)
        return -1;
    unsigned m = 0;
    int rc = 0;
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int b = parse(t);
        if (b < 0 || b > 31) {
            fprintf(stderr, "%s: unknown %s '%s'\n", cmd, what, t);
            rc = -1;
            break;
        }
        m |= 1u << b;
    }
    free(copy);
    if (rc || !m)
        return -1;
    *mask = m;
    return 0;
}

int cli_parse_sizes(const char *list, uint64_t max, uint64_t mult, uint32_t *v, size_t cap, size_t *n)
{
    char *copy = strdup(list);
    if (!copy)
        return -1;
    size_t k = 0;
    int rc = 0;
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        uint64_t x;
        if (k == cap || cli_parse_size(t, &x) || !x || x > max || x % mult) {
            rc = -1;
            break;
        }
        v[k++] = (uint32_t)x;
    }
    free(copy);
    if (rc || !k)
        return -1;
    *n = k;
    return 0;
}

int cli_parse_decimal(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || end == s || !plain_number(s, (size_t)(end - s)))
        return -1;
    *out = v;
    return 0;
}

int cli_parse_seconds(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0 || !plain_number(s, (size_t)(end - s)))
        return -1; /* "inf", "nan" (a run that never ends), signs, spaces, exponents: cli.md */
    if (!*end || !strcmp(end, "s")) *out = v;
    else if (!strcmp(end, "ms")) *out = v / 1e3;
    else if (!strcmp(end, "us")) *out = v / 1e6;
    else return -1;
    return 0;
}

int cli_command_line(char ***argv)
{
    *argv = full_argv;
    return full_argc;
}

int cli_check_link(const struct cli_command *cmd, const char *link)
{
    if (!link)
        return 0;
    /* The emu driver knows its presets: a small card opened with this one
     * either starts or says why (it prints the presets it knows). */
    char spec[128];
    if (!*link || strchr(link, ';') || strchr(link, '=') ||
        snprintf(spec, sizeof spec, "devices=testsink;ddr=64K;link=%s", link) >= (int)sizeof spec) {
        fprintf(stderr, "onigpu %s: bad link preset '%s'\n", cmd->name, link);
        return cli_usage(cmd);
    }
    oni_ctx ctx = oni_create_ctx("emu");
    if (!ctx) {
        fprintf(stderr, "onigpu %s: cannot load the emu driver: %s\n", cmd->name, strerror(errno));
        return 1;
    }
    int rc = oni_set_driver_opt(ctx, ONI_DRV_EMU_SPEC, spec, strlen(spec) + 1);
    if (!rc)
        rc = oni_init_ctx(ctx, -1);
    oni_destroy_ctx(ctx);
    if (rc == ONI_EINVALARG) {
        fprintf(stderr, "onigpu %s: unknown link preset '%s'\n", cmd->name, link);
        return cli_usage(cmd);
    }
    if (rc) {
        fprintf(stderr, "onigpu %s: the emulated card cannot be opened with link '%s': %s (%d)\n", cmd->name, link,
                oni_error_str(rc), rc);
        return 1;
    }
    return 0;
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
    char addr[256];
    size_t len = sizeof addr;
    if (rc && net && !oni_get_driver_opt(ctx, ONI_DRV_NET_ADDR, addr, &len)) {
        fprintf(stderr, "onigpu: cannot open the hardware served at %s (driver net): %s\n", addr, oni_error_str(rc));
        oni_destroy_ctx(ctx);
        return NULL;
    }
    if (rc) {
        cli_fail("cannot initialize the hardware", rc);
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
