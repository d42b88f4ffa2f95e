/* cmd_reg.c - `onigpu reg get|set`: one register access through the signal
 * stream, with NACKs and timeouts explained. */
#include <stdio.h>
#include <string.h>
#include "cli.h"
#include "cli_oni.h"

static int reg_run(int argc, char **argv);
CLI_COMMAND(reg, "reg", "get DEV ADDR | set DEV ADDR VALUE  [--driver NAME] [--emu SPEC] [--net HOST:PORT] [--host N] [--timeout MS]",
            "read or write a device register (DEV: number or hub.dev; numbers decimal or 0x hex)", NULL, reg_run)

/* Say what a failed access means; returns the exit status 1. */
static int explain(int set, const char *dev, uint32_t addr, int rc)
{
    const char *op = set ? "write" : "read";
    switch (rc) {
    case ONI_EREADFAILURE:
    case ONI_EWRITEFAILURE:
        fprintf(stderr, "onigpu reg: device %s refused (NACK) the %s of register 0x%x: %s\n", dev, op, addr,
                set ? "unknown device or address, read-only register, or value out of range"
                    : "unknown device or address");
        break;
    case ONI_ETIMEOUT:
        fprintf(stderr, "onigpu reg: no answer from device %s to the %s of register 0x%x within the timeout\n",
                dev, op, addr);
        break;
    case ONI_ERETRIG:
        fprintf(stderr, "onigpu reg: a previous register access is still pending; try again\n");
        break;
    default:
        fprintf(stderr, "onigpu reg: %s of register 0x%x of device %s failed: %s (%d)\n", op, addr, dev,
                oni_error_str(rc), rc);
        break;
    }
    return 1;
}

static int reg_run(int argc, char **argv)
{
    struct cli_conn conn;
    cli_conn_init(&conn);
    const char *pos[4];
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        int rc = cli_conn_arg(&cli_cmd_reg, &conn, argc, argv, &i);
        if (rc > 1)
            return rc;
        if (rc)
            continue;
        if (npos == 4 || (argv[i][0] == '-' && argv[i][1] == '-'))
            return cli_bad_arg(&cli_cmd_reg, argv[i]);
        pos[npos++] = argv[i];
    }
    if (npos < 1 || (strcmp(pos[0], "get") && strcmp(pos[0], "set")))
        return cli_bad_value(&cli_cmd_reg, "operation", npos ? pos[0] : NULL, "get or set");
    int set = !strcmp(pos[0], "set");
    uint32_t dev, addr, value = 0;
    if (npos != (set ? 4 : 3)) {
        fprintf(stderr, "onigpu reg: %s takes %s, %d given\n", pos[0], set ? "DEV ADDR VALUE" : "DEV ADDR", npos - 1);
        return cli_usage(&cli_cmd_reg);
    }
    if (cli_parse_dev(pos[1], &dev))
        return cli_bad_value(&cli_cmd_reg, "DEV", pos[1], "a device index: a number (decimal or 0x hex) or hub.dev "
                                                         "(each 0 to 255)");
    if (cli_parse_u32(pos[2], &addr))
        return cli_bad_value(&cli_cmd_reg, "ADDR", pos[2], "a register address from 0 to 0xffffffff (decimal or 0x hex)");
    if (set && cli_parse_u32(pos[3], &value))
        return cli_bad_value(&cli_cmd_reg, "VALUE", pos[3], "a value from 0 to 0xffffffff (decimal or 0x hex)");
    oni_ctx ctx = cli_conn_open(&conn);
    if (!ctx)
        return 1;
    char name[16];
    cli_fmt_dev(dev, name, sizeof name);
    int rc, status = 0;
    if (set) {
        rc = oni_write_reg(ctx, dev, addr, value);
        if (rc)
            status = explain(1, name, addr, rc);
        else
            printf("%s reg 0x%x <- 0x%08x (%u)\n", name, addr, value, value);
    } else {
        rc = oni_read_reg(ctx, dev, addr, &value);
        if (rc)
            status = explain(0, name, addr, rc);
        else
            printf("%s reg 0x%x = 0x%08x (%u)\n", name, addr, value, value);
    }
    oni_destroy_ctx(ctx);
    return status;
}
