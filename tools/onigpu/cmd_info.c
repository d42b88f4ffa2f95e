/* cmd_info.c - `onigpu info`: driver, clocks, frame and block sizes, the
 * emulated card's link, mode and FIFO (emu driver options), the device table
 * and the hub managers' registers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "cli_oni.h"
#include "onigpu.h"
#include "oniemu.h"
#include "oninet.h"
#include "onix.h"

static int info_run(int argc, char **argv);
CLI_COMMAND(info, "info", "[--driver NAME] [--emu SPEC] [--net HOST:PORT] [--host N] [--timeout MS]",
            "driver, ONI version, clocks, frame/block sizes, device table and hub managers", NULL, info_run)

/* Print a uint32 context option as "label value unit", or the error. */
static void print_opt(oni_ctx ctx, const char *label, int opt, const char *unit)
{
    oni_size_t v = 0;
    size_t len = sizeof v;
    int rc = oni_get_opt(ctx, opt, &v, &len);
    if (rc)
        printf("%-16s ? (%s)\n", label, oni_error_str(rc));
    else
        printf("%-16s %u%s\n", label, v, unit);
}

/* The emu driver's link preset and mode, and the card FIFO of any driver answering
 * ONI_DRV_STREAM_STATS; what a driver does not answer is left out. */
static void print_card(oni_ctx ctx, int emu)
{
    oniemu_link_t link;
    uint32_t fast;
    onigpu_stream_stats_t st;
    size_t len = sizeof link;
    if (emu && !oni_get_driver_opt(ctx, ONI_DRV_EMU_LINK, &link, &len)) {
        if (link.bandwidth_Bps > 0)
            printf("%-16s %s: %.2f GB/s, %.1f us per transfer\n", "link", link.name, link.bandwidth_Bps / 1e9,
                   link.latency_s * 1e6);
        else
            printf("%-16s %s: no bandwidth or latency limit\n", "link", link.name);
    }
    len = sizeof fast;
    if (emu && !oni_get_driver_opt(ctx, ONI_DRV_EMU_MODE, &fast, &len))
        printf("%-16s %s\n", "mode", fast ? "fast (emulated time advances as the host reads)" : "realtime");
    len = sizeof st;
    if (!oni_get_driver_opt(ctx, ONI_DRV_STREAM_STATS, &st, &len))
        printf("%-16s %llu B (DDR): %llu B default stream, %llu B GPU stream\n", "fifo capacity",
               (unsigned long long)(st.fifo_capacity[0] + st.fifo_capacity[1]),
               (unsigned long long)st.fifo_capacity[0], (unsigned long long)st.fifo_capacity[1]);
}

/* The net driver's server, its driver and the UCX transports in use, and
 * how GPU memory's blocks travel (docs/net.md). */
static void print_net(oni_ctx ctx)
{
    char v[256];
    size_t len = sizeof v;
    if (!oni_get_driver_opt(ctx, ONI_DRV_NET_ADDR, v, &len))
        printf("%-16s %s\n", "server", v);
    len = sizeof v;
    if (!oni_get_driver_opt(ctx, ONI_DRV_NET_REMOTE, v, &len))
        printf("%-16s %s\n", "served driver", v);
    len = sizeof v;
    int rc = oni_get_driver_opt(ctx, ONI_DRV_NET_TRANSPORT, v, &len);
    printf("%-16s %s%s\n", "transport", rc ? oni_error_str(rc) : v,
           rc ? "" : " (UCX)");
    printf("%-16s %s\n", "GPU blocks",
           "GPU memory's: by CUDA IPC from a server on this machine that shares the GPU, else staged "
           "through host memory");
}

static void print_devices(const oni_device_t *t, oni_size_t n)
{
    char idx[16], id[16];
    printf("%-16s %u\n", "devices", n);
    printf("  %-9s %-11s %-15s %5s %6s %6s\n", "idx", "id", "name", "ver", "read", "write");
    for (oni_size_t i = 0; i < n; i++)
    {
        /* onigpu's private ids read better in hex */
        snprintf(id, sizeof id, t[i].id > 0xFFFF ? "0x%x" : "%u", t[i].id);
        printf("  %-9s %-11s %-15s %5u %6u %6u\n", cli_fmt_dev(t[i].idx, idx, sizeof idx), id,
               cli_dev_tag((int)t[i].id), t[i].version, t[i].read_size, t[i].write_size);
    }
}

/* Hub managers: one line per hub, each register read on its own so one NACK spoils nothing else. */
static void print_hubs(oni_ctx ctx, const oni_device_t *t, oni_size_t n)
{
    static const struct { uint32_t addr; const char *fmt; } regs[] = {
        {ONIX_HUB_HARDWAREREV, "  rev %u"},
        {ONIX_HUB_FIRMWAREVER, "  firmware 0x%04x"},
        {ONIX_HUB_CLKRATEHZ, "  clock %u Hz"},
        {ONIX_HUB_DELAYNS, "  delay %u ns"},
    };
    int any = 0;
    for (oni_size_t i = 0; i < n; i++) {
        if ((t[i].idx & 0xFF) != ONIX_HUB_DEV_IDX)
            continue;
        if (!any++)
            printf("hubs\n");
        oni_reg_val_t v;
        int rc = oni_read_reg(ctx, t[i].idx, ONIX_HUB_HARDWAREID, &v);
        if (rc)
            printf("  hub %-3u hardware ? (%s)", t[i].idx >> 8, oni_error_str(rc));
        else
            printf("  hub %-3u %s (%u)", t[i].idx >> 8, cli_hub_tag((int)v), v);
        for (size_t r = 0; r < sizeof regs / sizeof regs[0]; r++) {
            rc = oni_read_reg(ctx, t[i].idx, regs[r].addr, &v);
            if (rc)
                printf("  reg %u: %s", regs[r].addr, oni_error_str(rc));
            else
                printf(regs[r].fmt, v);
        }
        printf("\n");
    }
    if (!any)
        printf("hubs             no hub manager devices\n");
}

static int info_run(int argc, char **argv)
{
    struct cli_conn conn;
    cli_conn_init(&conn);
    for (int i = 1; i < argc; i++) {
        int rc = cli_conn_arg(&cli_cmd_info, &conn, argc, argv, &i);
        if (rc != 1)
            return rc ? rc : cli_bad_arg(&cli_cmd_info, argv[i]);
    }
    oni_ctx ctx = cli_conn_open(&conn);
    if (!ctx)
        return 1;
    const oni_driver_info_t *di = oni_get_driver_info(ctx);
    int major, minor, patch;
    oni_version(&major, &minor, &patch);
    if (di)
        printf("%-16s %s %d.%d.%d%s%s\n", "driver", di->name, di->major, di->minor, di->patch,
               di->pre_release && *di->pre_release ? "-" : "", di->pre_release ? di->pre_release : "");
    printf("%-16s %d.%d.%d\n", "ONI API", major, minor, patch);
    print_opt(ctx, "system clock", ONI_OPT_SYSCLKHZ, " Hz");
    print_opt(ctx, "acq clock", ONI_OPT_ACQCLKHZ, " Hz");
    print_opt(ctx, "max read frame", ONI_OPT_MAXREADFRAMESIZE, " B (header included)");
    print_opt(ctx, "max write frame", ONI_OPT_MAXWRITEFRAMESIZE, " B (header included)");
    print_opt(ctx, "block read", ONI_OPT_BLOCKREADSIZE, " B");
    print_opt(ctx, "block write", ONI_OPT_BLOCKWRITESIZE, " B");
    print_opt(ctx, "hw address", ONI_OPT_HWADDRESS, "");
    print_card(ctx, di && !strcmp(di->name, "emu"));
    if (di && !strcmp(di->name, "net"))
        print_net(ctx);

    int status = 0;
    oni_size_t n = 0;
    oni_device_t *table = NULL;
    int rc = cli_devtable(ctx, &table, &n);
    if (rc) {
        status = cli_fail("cannot read the device table", rc);
    } else {
        print_devices(table, n);
        print_hubs(ctx, table, n);
    }
    free(table);
    oni_destroy_ctx(ctx);
    return status;
}
