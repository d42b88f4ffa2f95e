/* cmd_serve.c - `onigpu serve`: hand a driver (and the hardware it holds) to
 * `net` clients on other machines (src/drivers/net/netserve.h, docs/net.md). */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include "cli.h"
#include "cli_oni.h"
#include "common/stopsig.h"
#include "drivers/net/netproto.h"
#include "drivers/net/netserve.h"

static int serve_run(int argc, char **argv);
CLI_COMMAND(serve, "serve", "[--driver NAME] [--listen HOST:PORT] [--sessions N]",
            "serve a driver's hardware to `net` clients over TCP (oni_create_ctx(\"net\"))",
            "  --driver NAME      the driver to serve, default emu (its card: ONIGPU_EMU, or the client's\n"
            "                     ONI_DRV_EMU_SPEC)\n"
            "  --listen HOST:PORT where to listen, default 127.0.0.1:9455; port 0: any free one. Whoever\n"
            "                     reaches the address can drive the hardware: listen on a trusted network only\n"
            "  --sessions N       exit after N (at least 1) client sessions have ended, default: until SIGINT\n"
            "                     or SIGTERM\n",
            serve_run)

/* The server SIGINT/SIGTERM stop (NULL until it is open; closed only after
 * stopsig_end, so on_stop never sees it freed), and whether one came. */
static struct netserve *_Atomic running;
static atomic_int stop_asked;

static void on_stop(void *arg)
{
    (void)arg;
    atomic_store(&stop_asked, 1);
    struct netserve *s = atomic_load(&running);
    if (s)
        netserve_stop(s);
}

static int serve_run(int argc, char **argv)
{
    const struct cli_command *cmd = &cli_cmd_serve;
    const char *driver = "emu", *listen = NETP_DEFAULT_ADDR;
    uint64_t sessions = 0; /* 0: until stopped (--sessions itself is at least 1) */
    for (int i = 1; i < argc; i++) {
        char opt[64];
        const char *a, *v;
        cli_opt_split(argc, argv, &i, opt, sizeof opt, &a, &v);
        int st;
        if (!strcmp(a, "--driver"))
            st = cli_arg_text(cmd, a, v, "a driver name (emu, test, or NAME of libonidriver_NAME.so)", &driver);
        else if (!strcmp(a, "--listen"))
            st = cli_arg_text(cmd, a, v, "HOST:PORT to listen on (port 0: any free one)", &listen);
        else if (!strcmp(a, "--sessions"))
            st = cli_arg_count(cmd, a, v, 1, UINT32_MAX, &sessions);
        else
            st = cli_bad_arg(cmd, a == opt ? argv[i] : a);
        if (st)
            return st;
    }
    int rc = stopsig_start(on_stop, NULL); /* before the served driver starts threads */
    if (rc) {
        fprintf(stderr, "onigpu serve: cannot take SIGINT/SIGTERM: %s\n", strerror(rc));
        return 1;
    }
    struct netserve *s;
    char err[256];
    if ((rc = netserve_open(driver, listen, stdout, &s, err, sizeof err))) {
        fprintf(stderr, "onigpu serve: %s\n", err);
        stopsig_end();
        return 1;
    }
    atomic_store(&running, s);
    if (atomic_load(&stop_asked)) /* a signal while it opened */
        netserve_stop(s);
    printf("onigpu serve: driver %s on %s\n", driver, netserve_addr(s));
    fflush(stdout);
    rc = netserve_run(s, (uint32_t)sessions);
    stopsig_end();
    netserve_close(s);
    return rc ? cli_fail("serving stopped", rc) : 0;
}
