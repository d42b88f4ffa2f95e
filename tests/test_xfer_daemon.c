/* test_xfer_daemon.c - the GPU data stream options through the onix-emu
 * daemon (spec "daemon=PATH"): host-buffer READ/WRITE move through the
 * daemon's shared-memory rings with the test core's counter intact; direct
 * and asynchronous GPU transfers, which need the DMA engine in the daemon,
 * answer ONI_EUNIMPL; the same error paths as in-process. The daemon is the
 * built onix-emu from $ONIGPU_BIN (set by tests/CMakeLists.txt). */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include "unit.h"
#include "xfer_check.h"

#define CARD_SPEC "devices=testcore:bytes=1024:route=1,testsink;mode=fast;link=unlimited;ddr=16M"

static char sock_path[108];

static int can_connect(void)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", sock_path);
    int s = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    int ok = s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a) == 0;
    if (s >= 0)
        close(s);
    return ok;
}

/* Start onix-emu; its pid, 0 when there is no built daemon, -1 on failure. */
static pid_t start_daemon(void)
{
    const char *bin = getenv("ONIGPU_BIN");
    if (!bin)
        return 0;
    char exe[4096];
    snprintf(exe, sizeof exe, "%s/onix-emu", bin);
    if (access(exe, X_OK))
        return 0;
    snprintf(sock_path, sizeof sock_path, "/tmp/onigpu-test-xfer-%d.sock", (int)getpid());
    pid_t pid = fork();
    if (pid == 0) {
        execl(exe, exe, "--socket", sock_path, "--spec", CARD_SPEC, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; pid > 0 && i < 500; i++) { /* up to 5 s */
        if (can_connect())
            return pid;
        if (waitpid(pid, NULL, WNOHANG) == pid)
            return -1;
        usleep(10000);
    }
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    return -1;
}

static void stop_daemon(pid_t pid)
{
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
}

TEST(xfer_daemon_host_buffers)
{
    pid_t pid = start_daemon();
    if (pid == 0)
        SKIP("no onix-emu: set ONIGPU_BIN to the build directory");
    REQUIRE(pid > 0);
    char spec[160];
    snprintf(spec, sizeof spec, "daemon=%s", sock_path);
    uint32_t core = 0, sink = 0;
    oni_ctx ctx = xfer_open(spec, &core, &sink);
    if (!ctx) {
        stop_daemon(pid);
        REQUIRE(ctx);
    }
    struct xcheck c;
    xcheck_init(&c, core);
    uint8_t *buf = malloc(1 << 20);
    for (uint32_t n = 4; n <= (1u << 20); n = n * 4 + 4) {
        CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_RD_SZ, &n, 4), 0);
        for (int i = 0; i < 5; i++) {
            int rc = oni_set_driver_opt(ctx, ONI_DRV_READ, buf, 8);
            CHECK_RC(rc, 0);
            if (!rc)
                xcheck_feed(&c, buf, n);
        }
    }
    CHECK_EQ(c.errors, 0);
    CHECK(c.frames > 100);
    /* write frames through the daemon, and a malformed one */
    uint32_t frames[2][4] = {{sink, 2, 1, 2}, {sink, 2, 3, 4}};
    uint32_t wsz = sizeof frames;
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_WR_SZ, &wsz, 4), 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_WRITE, frames, 8), 0);
    frames[1][0] = 0xDEAD;
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_WRITE, frames, 8), ONI_EBADFRAME);
    /* no DMA engine in this process: asynchronous jobs are not available */
    volatile uint32_t done = 0;
    onigpu_xfer_t x = {buf, 1 << 20, &done, 1, 0};
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ_ASYNC, &x, sizeof x), ONI_EUNIMPL);
    /* the same option checks as in-process */
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, buf, 8), ONI_ENOTPINNED);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, buf, 8), 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, buf, 8), ONI_EPINNED);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_UNPIN, buf, 8), 0);
    /* and the stream still goes on without a gap */
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ, buf, 8), 0);
    uint32_t n = 0;
    size_t sz = sizeof n;
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_RD_SZ, &n, &sz), 0);
    xcheck_feed(&c, buf, n);
    CHECK_EQ(c.errors, 0);
    oni_destroy_ctx(ctx);
    stop_daemon(pid);
    free(buf);
}
