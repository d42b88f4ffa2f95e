/* cmd_serve.c - `onigpu serve`: hand a driver (and the hardware it holds) to
 * `net` clients in other processes or on other machines, over UCX
 * (src/drivers/net/netserve.h, docs/net.md). */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "oni.h"
#include "oniemu.h"
#include "oninet.h"
#include "cli.h"
#include "cli_oni.h"
#include "common/stopsig.h"
#include "drivers/net/netproto.h"
#include "drivers/net/netserve.h"

static int serve_run(int argc, char **argv);
CLI_COMMAND(serve, "serve", "[--driver NAME] [--listen HOST:PORT] [--secret-file FILE] [--sessions N]",
            "serve a driver's hardware to `net` clients over UCX (oni_create_ctx(\"net\"))",
            "  --driver NAME      the driver to serve, default emu (its card: ONIGPU_EMU, or the client's\n"
            "                     ONI_DRV_EMU_SPEC)\n"
            "  --listen HOST:PORT where to listen, default 127.0.0.1:9455; port 0: any free one. UCX picks the\n"
            "                     transport (shared memory for a client on this machine, TCP or verbs across\n"
            "                     machines; UCX_TLS narrows it)\n"
            "  --secret-file FILE the shared secret clients must give (ONI_DRV_NET_SECRET or ONIGPU_NET_SECRET):\n"
            "                     the file's bytes, a final newline dropped, at most 256; default ONIGPU_NET_SECRET.\n"
            "                     Needed to listen beyond the loopback; it is sent as it is: use a trusted network\n"
            "  --sessions N       exit after N (at least 1) client sessions have ended, default: until SIGINT\n"
            "                     or SIGTERM\n",
            serve_run)

/* The secret from path (or ONIGPU_NET_SECRET when path is NULL) into buf:
 * its length, or -1 with the reason printed. */
static long read_secret(const char *path, char *buf, size_t cap)
{
    size_t n = 0;
    if (!path) {
        const char *env = getenv(ONIGPU_NET_SECRET_ENV);
        n = env ? strlen(env) : 0;
        if (n > cap) {
            fprintf(stderr, "onigpu serve: %s is longer than %zu bytes\n", ONIGPU_NET_SECRET_ENV, cap);
            return -1;
        }
        memcpy(buf, env ? env : "", n);
        return (long)n;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "onigpu serve: --secret-file %s: %s\n", path, strerror(errno));
        return -1;
    }
    n = fread(buf, 1, cap, f);
    int more = fgetc(f) != EOF;
    fclose(f);
    if (n && buf[n - 1] == '\n')
        n--;
    if (more || !n) {
        fprintf(stderr, "onigpu serve: --secret-file %s: want 1 to %zu bytes\n", path, cap);
        return -1;
    }
    return (long)n;
}

/* With the emu driver: the card of sessions whose client names none,
 * $ONIGPU_EMU, made once now so that a bad one is refused before serving
 * (the driver says why on stderr). 0, or exit status 2. */
static int check_emu_env(const char *driver)
{
    const char *spec = getenv(ONIGPU_EMU_ENV);
    if (strcmp(driver, "emu") || !spec || !*spec)
        return 0;
    oni_ctx ctx = oni_create_ctx("emu");
    int rc = ctx ? oni_init_ctx(ctx, -1) : ONI_EBADALLOC;
    if (ctx)
        oni_destroy_ctx(ctx);
    if (!rc)
        return 0;
    fprintf(stderr, "onigpu serve: $%s \"%s\": not a card spec (oniemu.h): %s\n", ONIGPU_EMU_ENV, spec,
            oni_error_str(rc));
    return 2;
}

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
    const char *driver = "emu", *listen = NETP_DEFAULT_ADDR, *secret_file = NULL;
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
        else if (!strcmp(a, "--secret-file"))
            st = cli_arg_text(cmd, a, v, "a file holding the shared secret", &secret_file);
        else if (!strcmp(a, "--sessions"))
            st = cli_arg_count(cmd, a, v, 1, UINT32_MAX, &sessions);
        else
            st = cli_bad_arg(cmd, a == opt ? argv[i] : a);
        if (st)
            return st;
    }
    char secret[NETP_MAXSECRET];
    long secret_n = read_secret(secret_file, secret, sizeof secret);
    if (secret_n < 0)
        return 2;
    if (check_emu_env(driver))
        return 2;
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
    netserve_set_secret(s, secret, (size_t)secret_n);
    if (netserve_ready(s)) {
        fprintf(stderr, "onigpu serve: %s is beyond the loopback: give a shared secret (--secret-file, %s)\n",
                listen, ONIGPU_NET_SECRET_ENV);
        stopsig_end();
        netserve_close(s);
        return 2;
    }
    atomic_store(&running, s);
    if (atomic_load(&stop_asked)) /* a signal while it opened */
        netserve_stop(s);
    if (secret_n)
        printf("onigpu serve: clients must give the shared secret\n");
    printf("onigpu serve: driver %s on %s\n", driver, netserve_addr(s)); /* last: scripts take the address */
    fflush(stdout);
    rc = netserve_run(s, (uint32_t)sessions);
    stopsig_end();
    netserve_close(s);
    return rc ? cli_fail("serving stopped", rc) : 0;
}
