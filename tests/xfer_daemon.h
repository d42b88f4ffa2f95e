/* xfer_daemon.h - helpers of the tests of GPU transfers through the onix-emu
 * daemon (test_xfer_daemon.c, test_gpu_daemon.c): start the built daemon from
 * $ONIGPU_BIN (set by tests/CMakeLists.txt) on a private socket, and talk the
 * protocol raw (emuproto.h) to send what a proper client never would. */
#ifndef XFER_DAEMON_H
#define XFER_DAEMON_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include "daemon_spawn.h"
#include "drivers/emu/emuproto.h"
#include "oni.h"
#include "oni/util/clock.h"
#include "xfer_check.h"

static char xd_sock[108];

static inline int xd_connect(void) { return daemon_connect(xd_sock); }

/* Start onix-emu serving spec (daemon_spawn) on this test's socket. */
static inline pid_t xd_start(const char *spec)
{
    snprintf(xd_sock, sizeof xd_sock, "/tmp/onigpu-test-xd-%d.sock", (int)getpid());
    return daemon_spawn(xd_sock, spec, 0);
}

/* In a test: start the daemon on spec into a new pid_t named pid; the test
 * skips when there is no built daemon and fails when it does not start. */
#define XD_START(pid, spec)                                                            \
    pid_t pid = xd_start(spec);                                                        \
    if (pid == 0)                                                                      \
        SKIP("no onix-emu: set ONIGPU_BIN to the build directory");                    \
    REQUIRE(pid > 0)

static inline void xd_stop(pid_t pid) { daemon_stop(pid, SIGTERM, xd_sock); }

/* One raw request and its status answer: the answer's rc (its value in
 * *value when not NULL), or a transport error. */
static inline int xd_call(int s, uint16_t type, const void *body, size_t len, uint32_t *value)
{
    static uint32_t seq;
    if (emup_send(s, type, ++seq, body, len, -1))
        return ONI_EDISCONNECTED;
    uint8_t buf[EMUP_MAXMSG];
    int n = emup_recv(s, buf, sizeof buf, oni_now_ns() + 5000000000ull, NULL);
    if (n < 0)
        return n;
    struct emup_status_reply st;
    if ((size_t)n != sizeof(struct emup_hdr) + sizeof st)
        return ONI_EBADFRAME;
    memcpy(&st, buf + sizeof(struct emup_hdr), sizeof st);
    if (value)
        *value = st.value;
    return st.rc;
}

/* An emu context through the daemon xd_start started, opened as xfer_open
 * does (NULL on failure). */
static inline oni_ctx xd_open(uint32_t *core, uint32_t *sink)
{
    char spec[160];
    snprintf(spec, sizeof spec, "daemon=%s", xd_sock);
    return xfer_open(spec, core, sink);
}

/* A raw session: HELLO on *ctrl, the GPU channel attached on *gpu and,
 * unless gpuw is NULL, the GPU write channel on *gpuw. */
static inline int xd_session(int *ctrl, int *gpu, int *gpuw)
{
    *ctrl = xd_connect();
    *gpu = xd_connect();
    if (gpuw && (*gpuw = xd_connect()) < 0)
        return ONI_EPATHINVALID;
    if (*ctrl < 0 || *gpu < 0 || emup_send(*ctrl, EMUP_HELLO, 1, "", 1, -1))
        return ONI_EPATHINVALID;
    uint8_t buf[EMUP_MAXMSG];
    int memfd = -1;
    int n = emup_recv(*ctrl, buf, sizeof buf, oni_now_ns() + 5000000000ull, &memfd);
    if (memfd >= 0)
        close(memfd);
    struct emup_hello_reply hr;
    if (n != (int)(sizeof(struct emup_hdr) + sizeof hr))
        return n < 0 ? n : ONI_EBADFRAME;
    memcpy(&hr, buf + sizeof(struct emup_hdr), sizeof hr);
    if (hr.rc)
        return hr.rc;
    struct emup_attach at = {hr.token, EMUP_CHAN_GPU, 0};
    int rc = xd_call(*gpu, EMUP_ATTACH, &at, sizeof at, NULL);
    at.chan = EMUP_CHAN_GPUW;
    return rc || !gpuw ? rc : xd_call(*gpuw, EMUP_ATTACH, &at, sizeof at, NULL);
}

/* In a test: xfer_check_waiting_read through the daemon, on a card whose
 * GPU stream stays empty (the write from device memory when gpu is set). */
static inline void xd_check_waiting_read(int gpu)
{
    XD_START(pid, XFER_SPEC(0));
    uint32_t core = 0, sink = 0;
    oni_ctx ctx = xd_open(&core, &sink);
    if (ctx) {
        xfer_check_waiting_read(ctx, sink, gpu);
        oni_destroy_ctx(ctx);
    }
    xd_stop(pid);
    CHECK(ctx != NULL);
}

#endif
