/* cli_oni.c - shared helpers of the ONI-facing commands (see cli_oni.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "cli_oni.h"
#include "onix.h"

void cli_conn_init(struct cli_conn *c)
{
    c->driver = NULL;
    c->emu = NULL;
    c->net = NULL;
    c->host = -1;
    c->timeout_ms = 0;
}

int cli_opt_value(const char *name, int argc, char **argv, int *i, const char **value)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n))
        return 0;
    if (a[n] == '=') {
        *value = a + n + 1;
        return 1;
    }
    if (a[n])
        return 0;
    if (*i + 1 >= argc || !strncmp(argv[*i + 1], "--", 2))
        return -1; /* "--driver --verify" lacks the value; it is not "--verify" */
    *value = argv[++*i];
    return 1;
}

int cli_conn_arg(struct cli_conn *c, int argc, char **argv, int *i)
{
    const char *v;
    int rc;
    if ((rc = cli_opt_value("--driver", argc, argv, i, &c->driver)))
        return rc > 0 && *c->driver ? 1 : -1;
    if ((rc = cli_opt_value("--emu", argc, argv, i, &c->emu)))
        return rc;
    if ((rc = cli_opt_value("--net", argc, argv, i, &c->net)))
        return rc > 0 && *c->net ? 1 : -1;
    if ((rc = cli_opt_value("--timeout", argc, argv, i, &v)))
        return rc > 0 && !cli_parse_u32(v, &c->timeout_ms) && c->timeout_ms ? 1 : -1;
    if ((rc = cli_opt_value("--host", argc, argv, i, &v)) <= 0)
        return rc;
    uint32_t h;
    if (!strcmp(v, "-1")) /* the driver's default, the one signed value */
        c->host = -1;
    else if (!cli_parse_u32(v, &h) && h <= 1000000)
        c->host = (int)h;
    else
        return -1;
    return 1;
}

oni_ctx cli_conn_open(const struct cli_conn *c)
{
    if (c->net && c->driver && strcmp(c->driver, "net")) {
        fprintf(stderr, "onigpu: --net is the net driver's address; it does not go with --driver %s\n", c->driver);
        return NULL;
    }
    oni_ctx ctx = cli_open(c->net ? "net" : c->driver, c->emu, c->net, c->host);
    if (ctx && c->timeout_ms) {
        int rc = oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &c->timeout_ms, sizeof c->timeout_ms);
        if (rc) {
            cli_fail("cannot set the timeout", rc);
            oni_destroy_ctx(ctx);
            return NULL;
        }
    }
    return ctx;
}

int cli_devtable(oni_ctx ctx, oni_device_t **t, oni_size_t *n)
{
    size_t len = sizeof *n;
    int rc = oni_get_opt(ctx, ONI_OPT_NUMDEVICES, n, &len);
    if (rc)
        return rc;
    if (!(*t = calloc(*n ? *n : 1, sizeof **t)))
        return ONI_EBADALLOC;
    len = *n * sizeof **t;
    if ((rc = oni_get_opt(ctx, ONI_OPT_DEVICETABLE, *t, &len))) {
        free(*t);
        *t = NULL;
    }
    return rc;
}

int cli_parse_u64(const char *s, uint64_t *out)
{
    /* strtoull would skip leading space and take a sign ("-5" is 2^64 - 5) */
    if (!s || *s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    /* strtoull's base 0 would read "010" as octal: only decimal and 0x. */
    if (s[0] == '0' && s[1] && s[1] != 'x' && s[1] != 'X')
        v = strtoull(s, &end, 10);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

int cli_parse_u32(const char *s, uint32_t *out)
{
    uint64_t v;
    if (cli_parse_u64(s, &v) || v > UINT32_MAX)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

int cli_parse_dev(const char *s, uint32_t *idx)
{
    const char *dot = s ? strchr(s, '.') : NULL;
    if (!dot)
        return cli_parse_u32(s, idx);
    char hub[16];
    size_t n = (size_t)(dot - s);
    uint32_t h, d;
    if (n == 0 || n >= sizeof hub)
        return -1;
    memcpy(hub, s, n);
    hub[n] = 0;
    if (cli_parse_u32(hub, &h) || cli_parse_u32(dot + 1, &d) || h > 255 || d > 255)
        return -1;
    *idx = h << 8 | d;
    return 0;
}

char *cli_fmt_dev(uint32_t idx, char *buf, size_t n)
{
    if (idx >> 16)
        snprintf(buf, n, "0x%x", idx);
    else
        snprintf(buf, n, "%u.%u", idx >> 8, idx & 0xFF);
    return buf;
}

