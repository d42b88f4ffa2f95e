/* cmd_serve.c - `onigpu serve`: hand a driver (and the hardware it holds) to
 * `net` clients on other machines (src/drivers/net/netserve.h, docs/net.md). */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include "cli.h"
#include "cli_oni.h"
#include "drivers/net/netproto.h"
#include "drivers/net/netserve.h"

static int serve_run(int argc, char **argv);
CLI_COMMAND(serve, "serve", "[--driver NAME] [--listen HOST:PORT] [--sessions N]",
            "serve a driver's hardware to `net` clients over TCP (oni_create_ctx(\"net\"))",
            "  --driver NAME      the driver to serve, default emu (its card: ONIGPU_EMU, or the client's\n"
            "                     ONI_DRV_EMU_SPEC)\n"
            "  --listen HOST:PORT where to listen, default 127.0.0.1:9455; port 0: any free one. Whoever\n"
            "                     reaches the address can drive the hardware: listen on a trusted network only\n"
            "  --sessions N       exit after N client sessions have ended, default: until SIGINT or SIGTERM\n",
            serve_run)

static struct netserve *running;

static void on_signal(int sig)
{
    (void)sig;
    if (running)
        netserve_stop(running);
}

static int serve_run(int argc, char **argv)
{
    const char *driver = "emu", *listen = NETP_DEFAULT_ADDR, *v;
    uint32_t sessions = 0;
    for (int i = 1; i < argc; i++) {
        int rc;
        if ((rc = cli_opt_value("--driver", argc, argv, &i, &driver)) ||
            (rc = cli_opt_value("--listen", argc, argv, &i, &listen))) {
            if (rc < 0)
                return cli_usage(&cli_cmd_serve);
        } else if ((rc = cli_opt_value("--sessions", argc, argv, &i, &v))) {
            if (rc < 0 || cli_parse_u32(v, &sessions))
                return cli_usage(&cli_cmd_serve);
        } else {
            return cli_usage(&cli_cmd_serve);
        }
    }
    struct netserve *s;
    char err[256];
    int rc = netserve_open(driver, listen, stdout, &s, err, sizeof err);
    if (rc) {
        fprintf(stderr, "onigpu serve: %s\n", err);
        return 1;
    }
    running = s;
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    printf("onigpu serve: driver %s on %s\n", driver, netserve_addr(s));
    fflush(stdout);
    rc = netserve_run(s, sessions);
    running = NULL;
    netserve_close(s);
    return rc ? cli_fail("serving stopped", rc) : 0;
}
