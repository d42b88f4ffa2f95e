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

int cli_conn_arg(const struct cli_command *cmd, struct cli_conn *c, int argc, char **argv, int *i)
{
    static const char *const names[] = {"--driver", "--emu", "--net", "--timeout", "--host"};
    char buf[64];
    const char *name, *v;
    size_t k = 0, n = sizeof names / sizeof names[0];
    for (; k < n; k++) { /* "--driver" or "--driver=...", not "--drivers" */
        size_t len = strlen(names[k]);
        if (!strncmp(argv[*i], names[k], len) && (!argv[*i][len] || argv[*i][len] == '='))
            break;
    }
    if (k == n)
        return 0;
    cli_opt_split(argc, argv, i, buf, sizeof buf, &name, &v);
    uint64_t x;
    switch (k) {
    case 0:
        return cli_arg_text(cmd, name, v, "a driver name (emu, test, net, or NAME of libonidriver_NAME.so)",
                            &c->driver) ? 2 : 1;
    case 1:
        if (!v)
            return cli_bad_value(cmd, name, v, "the emulated card's spec string (oniemu.h)");
        c->emu = v;
        return 1;
    case 2:
        return cli_arg_text(cmd, name, v, "HOST:PORT of an `onigpu serve`", &c->net) ? 2 : 1;
    case 3:
        if (cli_arg_count(cmd, name, v, 1, UINT32_MAX, &x))
            return 2;
        c->timeout_ms = (uint32_t)x;
        return 1;
    default:
        if (v && !strcmp(v, "-1")) { /* the driver's default, the one signed value */
            c->host = -1;
            return 1;
        }
        if (!v || cli_parse_u64(v, &x) || x > 1000000)
            return cli_bad_value(cmd, name, v, "-1 (the driver's default) or a whole number from 0 to 1000000");
        c->host = (int)x;
        return 1;
    }
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


/* ---- short names of ONIX ids ------------------------------------------------ */

/* onix_device_str / onix_hub_str give upstream's texts, sentences; tables
 * and files take these: the enum's name in onix.h without its prefix. */
struct id_tag {
    int id;
    const char *tag;
};

static const struct id_tag dev_tags[] = {
    {ONIX_NULL, "NULL"},
    {ONIX_INFO, "INFO"},
    {ONIX_RHD2132, "RHD2132"},
    {ONIX_RHD2164, "RHD2164"},
    {ONIX_ESTIM, "ESTIM"},
    {ONIX_OSTIM, "OSTIM"},
    {ONIX_TS4231, "TS4231"},
    {ONIX_DINPUT32, "DINPUT32"},
    {ONIX_DOUTPUT32, "DOUTPUT32"},
    {ONIX_BNO055, "BNO055"},
    {ONIX_TEST0, "TEST0"},
    {ONIX_NEUROPIX1R0, "NEUROPIX1R0"},
    {ONIX_HEARTBEAT, "HEARTBEAT"},
    {ONIX_AD51X2, "AD51X2"},
    {ONIX_FMCVCTRL, "FMCVCTRL"},
    {ONIX_AD7617, "AD7617"},
    {ONIX_AD576X, "AD576X"},
    {ONIX_TESTREG0, "TESTREG0"},
    {ONIX_BREAKDIG1R3, "BREAKDIG1R3"},
    {ONIX_FMCCLKIN1R3, "FMCCLKIN1R3"},
    {ONIX_FMCCLKOUT1R3, "FMCCLKOUT1R3"},
    {ONIX_TS4231V2ARR, "TS4231V2ARR"},
    {ONIX_FMCANALOG1R3, "FMCANALOG1R3"},
    {ONIX_FMCLINKCTRL, "FMCLINKCTRL"},
    {ONIX_DS90UB9RAW, "DS90UB9RAW"},
    {ONIX_TS4231V1ARR, "TS4231V1ARR"},
    {ONIX_MAX10ADCCORE, "MAX10ADCCORE"},
    {ONIX_LOADTEST, "LOADTEST"},
    {ONIX_MEMUSAGE, "MEMUSAGE"},
    {ONIX_HARPSYNCINPUT, "HARPSYNCINPUT"},
    {ONIX_RHS2116, "RHS2116"},
    {ONIX_RHS2116TRIGGER, "RHS2116TRIGGER"},
    {ONIX_NRIC1384, "NRIC1384"},
    {ONIX_I2CRAW, "I2CRAW"},
    {ONIX_PERSTHEARTBEAT, "PERSTHEARTBEAT"},
    {(int)ONIX_ONIGPU_NEUROPIX2, "NEUROPIX2"},
    {(int)ONIX_ONIGPU_TESTCORE, "TESTCORE"},
    {(int)ONIX_ONIGPU_TESTSINK, "TESTSINK"},
    {(int)ONIX_ONIGPU_STIM, "STIM"},
    {(int)ONIX_ONIGPU_HUBMGR, "HUBMGR"},
};

static const struct id_tag hub_tags[] = {
    {ONIX_HUB_NULL, "NULL"},
    {ONIX_HUB_FMCHOST, "FMCHOST"},
    {ONIX_HUB_HS64, "HS64"},
    {ONIX_HUB_HSNP, "HSNP"},
    {ONIX_HUB_HSRHS2116, "HSRHS2116"},
    {ONIX_HUB_HS64S, "HS64S"},
    {ONIX_HUB_HSNP1ET, "HSNP1ET"},
    {ONIX_HUB_HSNP2EB, "HSNP2EB"},
    {ONIX_HUB_HSNP2E, "HSNP2E"},
    {ONIX_HUB_HSNRIC1384, "HSNRIC1384"},
    {ONIX_HUB_HSNP1EH, "HSNP1EH"},
    {ONIX_HUB_ACQBOARD, "ACQBOARD"},
    {ONIX_HUB_RHYTHM, "RHYTHM"},
    {ONIX_HUB_ACQBOARD3D, "ACQBOARD3D"},
};

static const char *find_tag(const struct id_tag *t, size_t n, int id)
{
    for (size_t i = 0; i < n; i++)
        if (t[i].id == id)
            return t[i].tag;
    return "unknown";
}

const char *cli_dev_tag(int dev_id)
{
    return find_tag(dev_tags, sizeof dev_tags / sizeof dev_tags[0], dev_id);
}

const char *cli_hub_tag(int hub_id)
{
    return find_tag(hub_tags, sizeof hub_tags / sizeof hub_tags[0], hub_id);
}
