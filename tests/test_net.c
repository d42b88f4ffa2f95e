/* test_net.c - the `net` driver and `onigpu serve` (src/drivers/net): the
 * served driver seen through TCP as if it were local, one session at a time,
 * and every way the server or the network can fail: no server, a server that
 * never answers, one that lies, one that goes away mid-stream (in-process
 * and killed as a process), and a client that breaks the protocol. */
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include "drivers/net/netproto.h"
#include "drivers/net/netserve.h"
#include "oni.h"
#include "onigpu.h"
#include "oniemu.h"
#include "oninet.h"
#include "onitest.h"
#include "oni/driver.h"
#include "oni/util/clock.h"
#include "proc.h"
#include "unit.h"
#include "xfer_check.h"

/* --- the served driver, as if local ------------------------------------------ */

/* A server on a free loopback port, run on its own thread (netserve_start). */
struct server {
    struct netserve *s;
};

static int server_start(struct server *sv, const char *driver)
{
    char err[256];
    int rc = netserve_open(driver, "127.0.0.1:0", NULL, &sv->s, err, sizeof err);
    if (rc) {
        fprintf(stderr, "  server: %s\n", err);
        return rc;
    }
    if ((rc = netserve_start(sv->s)))
        netserve_close(sv->s);
    return rc;
}

static void server_stop(struct server *sv) { netserve_close(sv->s); }

/* A net context on addr, the served emu card given spec (NULL: none),
 * initialized; NULL with *rc the failure. */
static oni_ctx net_open(const char *addr, const char *spec, uint32_t timeout_ms, int *rc)
{
    oni_ctx ctx = oni_create_ctx("net");
    if (!ctx) {
        *rc = ONI_EINVALARG;
        return NULL;
    }
    *rc = oni_set_driver_opt(ctx, ONI_DRV_NET_ADDR, addr, strlen(addr) + 1);
    if (!*rc && timeout_ms)
        *rc = oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &timeout_ms, sizeof timeout_ms);
    if (!*rc && spec)
        *rc = oni_set_driver_opt(ctx, ONI_DRV_EMU_SPEC, spec, strlen(spec) + 1);
    if (!*rc)
        *rc = oni_init_ctx(ctx, -1);
    if (*rc) {
        oni_destroy_ctx(ctx);
        return NULL;
    }
    return ctx;
}

static int devices(oni_ctx ctx, oni_device_t *t, size_t cap)
{
    uint32_t n = 0;
    size_t len = sizeof n;
    if (oni_get_opt(ctx, ONI_OPT_NUMDEVICES, &n, &len) || n > cap)
        return -1;
    len = n * sizeof *t;
    return oni_get_opt(ctx, ONI_OPT_DEVICETABLE, t, &len) ? -1 : (int)n;
}

static int start(oni_ctx ctx, uint32_t block)
{
    uint32_t one = 1;
    int rc = block ? oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &block, sizeof block) : 0;
    return rc ? rc : oni_set_opt(ctx, ONI_OPT_RUNNING, &one, sizeof one);
}

/* Read n frames of the test driver and check each one's contents and its
 * device's counter: none lost, repeated or changed on the way (a device's
 * first frame may have any counter: acquisition may have run before). */
static void read_test_frames(oni_ctx ctx, const oni_device_t *t, int ndev, int n)
{
    uint64_t next[64] = {0};
    int seen[64] = {0};
    int bad = 0, gaps = 0;
    for (int i = 0; i < n; i++) {
        oni_frame_t *f;
        int rc = oni_read_frame(ctx, &f);
        if (rc < 0) {
            CHECK_RC(rc, 0);
            return;
        }
        int d = 0;
        while (d < ndev && t[d].idx != f->dev_idx)
            d++;
        if (d == ndev || d >= 64)
            bad++;
        else if (!seen[d]++ && f->data_sz >= 8) /* the counter leads the payload (onitest.h) */
            memcpy(&next[d], f->data, 8);
        if (d < ndev && d < 64) {
            int r = onitest_check_frame(f, &next[d]);
            bad += r < 0;
            gaps += r == 1;
        }
        oni_destroy_frame(f);
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(gaps, 0);
}

TEST(net_serves_the_test_driver_as_if_local)
{
    struct server sv;
    REQUIRE(server_start(&sv, "test") == 0);
    int rc;
    oni_ctx net = net_open(netserve_addr(sv.s), NULL, 0, &rc);
    CHECK_RC(rc, 0);
    oni_ctx local = oni_create_ctx("test");
    REQUIRE(net && local);
    CHECK_RC(oni_init_ctx(local, -1), 0);

    char remote[64];
    size_t len = sizeof remote;
    CHECK_RC(oni_get_driver_opt(net, ONI_DRV_NET_REMOTE, remote, &len), 0);
    CHECK(!strncmp(remote, "test ", 5));
    CHECK_EQ(len, strlen(remote) + 1);
    CHECK(!strcmp(oni_get_driver_info(net)->name, "net"));

    oni_device_t tn[64], tl[64];
    int nn = devices(net, tn, 64), nl = devices(local, tl, 64);
    CHECK(nn > 4);
    CHECK_EQ(nn, nl);
    CHECK(nn == nl && !memcmp(tn, tl, (size_t)nn * sizeof *tn));

    /* registers: a write read back, and a NACK passed on as the local one */
    oni_reg_val_t v = 0;
    CHECK_RC(oni_write_reg(net, tn[1].idx, ONITEST_REG_MESSAGE, 0xC0FFEE), 0);
    CHECK_RC(oni_read_reg(net, tn[1].idx, ONITEST_REG_MESSAGE, &v), 0);
    CHECK_EQ(v, 0xC0FFEE);
    oni_reg_val_t vl = 0;
    CHECK_RC(oni_read_reg(net, tn[1].idx, 0x7777, &v), oni_read_reg(local, tl[1].idx, 0x7777, &vl));

    /* frames across many blocks, checked frame by frame: blocks smaller than
     * what the driver asks the server for (the rest is kept), then, after a
     * restart, larger (read straight into the library's block) */
    CHECK_RC(start(net, 4096), 0);
    read_test_frames(net, tn, nn, 50000);
    uint32_t zero = 0;
    CHECK_RC(oni_set_opt(net, ONI_OPT_RUNNING, &zero, sizeof zero), 0);
    CHECK_RC(start(net, 128 << 10), 0);
    read_test_frames(net, tn, nn, 50000);

    /* write frames reach the served device: its counter, read through net */
    int sink = -1;
    for (int i = 0; i < nn; i++)
        if (tn[i].write_size == 16 && tn[i].id == 0x4F470003)
            sink = i;
    REQUIRE(sink >= 0);
    uint32_t payload[4] = {1, 2, 3, 4};
    for (int i = 0; i < 100; i++) {
        oni_frame_t *w;
        CHECK(oni_create_frame(net, &w, tn[sink].idx, payload, sizeof payload) > 0);
        CHECK_RC(oni_write_frame(net, w), 24); /* bytes written, header included */
        oni_destroy_frame(w);
    }
    onitest_stats_t st;
    len = sizeof st;
    CHECK_RC(oni_get_driver_opt(net, ONITEST_OPT_STATS, &st, &len), 0);
    CHECK_EQ(len, sizeof st);
    CHECK_EQ(st.wframes_accepted, 100);
    /* a get into a short buffer: the served driver's ONI_EBUFFERSIZE and the size it needs */
    len = 3;
    CHECK_RC(oni_get_driver_opt(net, ONITEST_OPT_STATS, &st, &len), ONI_EBUFFERSIZE);
    CHECK_EQ(len, sizeof st);

    oni_destroy_ctx(local);
    oni_destroy_ctx(net);
    server_stop(&sv);
}

/* After a restart no frame from before it comes out: the first frame of a
 * device carries a counter the driver emitted after the stop. The library
 * drops its block at every RUNNING write; through net the bytes the driver
 * read ahead go with it. Checked against the local test driver too. */
static void restart_check(oni_ctx ctx)
{
    oni_device_t t[64];
    int n = devices(ctx, t, 64);
    REQUIRE(n > 1);
    oni_dev_idx_t dev = t[1].idx;
    uint32_t zero = 0;
    for (int round = 0; round < 3; round++) {
        REQUIRE(start(ctx, 1024) == 0); /* small blocks: the net driver keeps most of what it reads */
        oni_frame_t *f;
        for (int i = 0; i < 100; i++) {
            REQUIRE(oni_read_frame(ctx, &f) >= 0);
            oni_destroy_frame(f);
        }
        CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &zero, sizeof zero), 0);
        oni_reg_val_t emitted = 0;
        CHECK_RC(oni_read_reg(ctx, dev, ONITEST_REG_FRAMES_LO, &emitted), 0);
        REQUIRE(start(ctx, 1024) == 0);
        uint64_t first = UINT64_MAX;
        for (int i = 0; i < 1000 && first == UINT64_MAX; i++) {
            REQUIRE(oni_read_frame(ctx, &f) >= 0);
            if (f->dev_idx == dev)
                memcpy(&first, f->data, 8);
            oni_destroy_frame(f);
        }
        CHECK(first != UINT64_MAX);
        if (first < emitted)
            fprintf(stderr, "  round %d: first counter %llu, %u emitted before the restart\n", round,
                    (unsigned long long)first, emitted);
        CHECK(first >= emitted);
        CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &zero, sizeof zero), 0);
    }
}

TEST(net_restart_drops_what_was_read_ahead)
{
    oni_ctx local = oni_create_ctx("test");
    REQUIRE(local);
    CHECK_RC(oni_init_ctx(local, -1), 0);
    restart_check(local);
    oni_destroy_ctx(local);
    struct server sv;
    REQUIRE(server_start(&sv, "test") == 0);
    int rc;
    oni_ctx net = net_open(netserve_addr(sv.s), NULL, 0, &rc);
    CHECK_RC(rc, 0);
    if (net) {
        restart_check(net);
        oni_destroy_ctx(net);
    }
    server_stop(&sv);
}

/* The served driver's options before its init go to it (the emu card's
 * spec); the net driver's own are refused where they make no sense. */
TEST(net_options_reach_the_served_driver)
{
    struct server sv;
    REQUIRE(server_start(&sv, "emu") == 0);
    const char *addr = netserve_addr(sv.s);
    int rc;
    oni_ctx ctx = net_open(addr, "devices=rhd2164;mode=fast", 0, &rc);
    CHECK_RC(rc, 0);
    REQUIRE(ctx);
    oni_device_t t[16];
    int n = devices(ctx, t, 16);
    int rhd = 0;
    for (int i = 0; i < n; i++)
        rhd += t[i].id == ONIX_RHD2164;
    CHECK_EQ(rhd, 1);
    char spec[256];
    size_t len = sizeof spec;
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_EMU_SPEC, spec, &len), 0);
    CHECK(strstr(spec, "rhd2164") != NULL);
    len = sizeof spec;
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_NET_ADDR, spec, &len), 0);
    CHECK(!strcmp(spec, addr));
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_NET_ADDR, "127.0.0.1:1", 12), ONI_EINVALSTATE);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_NET_REMOTE, "x", 2), ONI_EREADONLY);

    /* a value option passes both ways; one naming this process's memory is refused */
    uint32_t rd = 8192, got = 0;
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_RD_SZ, &rd, sizeof rd), 0);
    len = sizeof got;
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_RD_SZ, &got, &len), 0);
    CHECK_EQ(got, 8192);
    static char buf[8192];
    onigpu_buf_t b = {buf, sizeof buf};
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_PIN, &b, sizeof b), ONI_EUNIMPL);
    len = sizeof b;
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_WRITE_ASYNC, &b, &len), ONI_EUNIMPL);
    /* larger than the protocol carries */
    static char big[NETP_MAXOPT + 1];
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_EMU_TRUTH_FILE, big, sizeof big), ONI_EINVALARG);
    /* a path of the server's machine is not a client's to name */
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_EMU_TRUTH_FILE, "/tmp/net-truth", 15), ONI_EUNIMPL);

    /* frames flow (the card's, unchecked here) */
    CHECK_RC(start(ctx, 0), 0);
    for (int i = 0; i < 1000; i++) {
        oni_frame_t *f;
        rc = oni_read_frame(ctx, &f);
        if (rc < 0) {
            CHECK_RC(rc, 0);
            break;
        }
        oni_destroy_frame(f);
    }
    oni_destroy_ctx(ctx);
    server_stop(&sv);
}

/* A listener that accepts, reads and never answers (fd 0: only listens). */
struct mute {
    int lfd;
    pthread_t th;
    char addr[64];
    int stop[2];
};

/* A server written here, for answers the real one never gives: it answers
 * HELLO and the ATTACHes as the protocol says, then every request as its
 * mode says (the three connections of one client at a time). */
enum fake_mode {
    FAKE_PLAIN,      /* the signal stream in batches of 10 bytes: batch k is 16k, 16k + 1, ... */
    FAKE_COUNT,      /* READ, GET_OPT and WRITE answer one more than the bytes */
    FAKE_LATE_CONFIG /* CONFIG_READ answered 1 s late */
};
struct fake {
    struct mute m; /* its listening socket and stop pipe */
    enum fake_mode mode;
    pthread_t th;
};

static int fake_answer(int fd, const struct netp_hdr *h, int32_t status, uint32_t value, uint64_t token,
                       const void *extra, size_t n)
{
    struct netp_hdr r = {NETP_MAGIC, NETP_VERSION, (uint16_t)(h->type | NETP_REPLY), h->seq,
                         (uint32_t)(sizeof(struct netp_answer) + n)};
    struct netp_answer a = {status, value, token};
    struct iovec iov[3] = {{&r, sizeof r}, {&a, sizeof a}, {(void *)extra, n}};
    return netp_send(fd, iov, n ? 3 : 2, oni_now_ns() + 2000000000ull);
}

/* One request on fd answered as f's mode says; -1 when the client is gone. */
static int fake_serve(struct fake *f, int fd, unsigned *batch)
{
    static uint8_t in[1 << 16];
    struct netp_hdr h;
    struct netp_call q;
    if (netp_recv(fd, &h, sizeof h, 0) || netp_check_hdr(&h, 0) || netp_recv(fd, &q, sizeof q, 0) ||
        h.len - sizeof q > sizeof in || netp_recv(fd, in, h.len - sizeof q, 0))
        return -1;
    int more = f->mode == FAKE_COUNT;
    uint8_t out[16] = {0};
    switch (h.type) {
    case NETP_HELLO:
        return fake_answer(fd, &h, 0, 0, 7, "fake 1.0.0", 10);
    case NETP_READ: {
        size_t n = q.arg < 10 ? q.arg : 10;
        for (size_t i = 0; i < n; i++)
            out[i] = (uint8_t)(*batch * 16 + i);
        if (q.what == ONI_READ_STREAM_SIGNAL)
            ++*batch;
        return fake_answer(fd, &h, (int32_t)(n + more), 0, 0, out, n);
    }
    case NETP_GET_OPT:
        return fake_answer(fd, &h, 0, 4u + more, 0, out, 4);
    case NETP_WRITE:
        return fake_answer(fd, &h, (int32_t)q.arg + more, 0, 0, NULL, 0);
    case NETP_CONFIG_READ:
        if (f->mode == FAKE_LATE_CONFIG)
            usleep(1000000);
        return fake_answer(fd, &h, 0, 42, 0, NULL, 0);
    default:
        return fake_answer(fd, &h, 0, 0, 0, NULL, 0);
    }
}

static void *fake_main(void *arg)
{
    struct fake *f = arg;
    for (;;) { /* a client: its three connections, served until one closes */
        int fd[NETP_NCHAN], n = 0, gone = 0;
        unsigned batch = 0;
        while (n < NETP_NCHAN) {
            struct pollfd p[2] = {{.fd = f->m.lfd, .events = POLLIN}, {.fd = f->m.stop[0], .events = POLLIN}};
            if (poll(p, 2, -1) < 0 || p[1].revents) {
                gone = 2;
                break;
            }
            fd[n++] = accept(f->m.lfd, NULL, NULL);
        }
        while (!gone) {
            struct pollfd p[NETP_NCHAN + 1];
            for (int c = 0; c < NETP_NCHAN; c++)
                p[c] = (struct pollfd){.fd = fd[c], .events = POLLIN};
            p[NETP_NCHAN] = (struct pollfd){.fd = f->m.stop[0], .events = POLLIN};
            if (poll(p, NETP_NCHAN + 1, -1) < 0 || p[NETP_NCHAN].revents)
                gone = 2;
            for (int c = 0; c < NETP_NCHAN && !gone; c++)
                if (p[c].revents && fake_serve(f, fd[c], &batch))
                    gone = 1;
        }
        for (int c = 0; c < n; c++)
            close(fd[c]);
        if (gone != 1)
            return NULL;
    }
}

static int fake_start(struct fake *f, enum fake_mode mode)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    f->mode = mode;
    f->m.lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (f->m.lfd < 0 || bind(f->m.lfd, (struct sockaddr *)&a, sizeof a) || listen(f->m.lfd, 8) ||
        getsockname(f->m.lfd, (struct sockaddr *)&a, &len) || pipe(f->m.stop))
        return -1;
    snprintf(f->m.addr, sizeof f->m.addr, "127.0.0.1:%u", ntohs(a.sin_port));
    return pthread_create(&f->th, NULL, fake_main, f) ? -1 : 0;
}

static void fake_stop(struct fake *f)
{
    if (write(f->m.stop[1], "x", 1) != 1)
        return;
    pthread_join(f->th, NULL);
    close(f->m.lfd);
    close(f->m.stop[0]);
    close(f->m.stop[1]);
}

/* The net driver on addr, initialized (called straight, as liboni would). */
static oni_driver_ctx drv_open(const char *addr, uint32_t timeout_ms)
{
    oni_driver_ctx d = onidrv_net.create_ctx();
    if (!d)
        return NULL;
    if (onidrv_net.set_opt(d, ONI_DRV_NET_ADDR, addr, strlen(addr) + 1) ||
        (timeout_ms && onidrv_net.set_opt_callback(d, ONI_OPT_TIMEOUTMS, &timeout_ms, sizeof timeout_ms)) ||
        onidrv_net.init(d, -1)) {
        onidrv_net.destroy_ctx(d);
        return NULL;
    }
    return d;
}

/* The signal bytes one READ brought are handed out in order, at most the
 * size asked for; a RESET (value 1) drops those left, a write of 0 to RESET
 * does not. */
TEST(net_signal_bytes_kept_until_reset)
{
    struct fake f;
    REQUIRE(fake_start(&f, FAKE_PLAIN) == 0);
    oni_driver_ctx d = drv_open(f.m.addr, 0);
    REQUIRE(d);
    uint8_t b[16] = {0};
    CHECK_RC(onidrv_net.read_stream(d, ONI_READ_STREAM_SIGNAL, b, 2), 2);
    CHECK(b[0] == 0 && b[1] == 1);
    CHECK_RC(onidrv_net.read_stream(d, ONI_READ_STREAM_SIGNAL, b, 1), 1);
    CHECK_EQ(b[0], 2);
    CHECK_RC(onidrv_net.write_config(d, ONI_CONFIG_RESET, 0), 0);
    CHECK_RC(onidrv_net.read_stream(d, ONI_READ_STREAM_SIGNAL, b, 1), 1);
    CHECK_EQ(b[0], 3);
    CHECK_RC(onidrv_net.read_stream(d, ONI_READ_STREAM_SIGNAL, b, sizeof b), 6); /* what is left, not more */
    CHECK(b[0] == 4 && b[5] == 9);
    CHECK_RC(onidrv_net.read_stream(d, ONI_READ_STREAM_SIGNAL, b, 1), 1);
    CHECK_EQ(b[0], 16); /* the next batch */
    CHECK_RC(onidrv_net.write_config(d, ONI_CONFIG_RESET, 1), 0);
    CHECK_RC(onidrv_net.read_stream(d, ONI_READ_STREAM_SIGNAL, b, 2), 2);
    CHECK(b[0] == 32 && b[1] == 33);
    onidrv_net.destroy_ctx(d);
    fake_stop(&f);
}

/* Blocks of the GPU streams through net into and out of host memory: the
 * test core's counter runs on across every block (both buffer forms), a
 * buffer shorter than the block is refused, write frames reach the sink
 * whole (its hash), and a READ waiting for data holds up neither a WRITE, a
 * register read nor an option (xfer_check.h). The device-memory path is
 * test_gpu_net's. */
TEST(net_gpu_blocks_through_host_memory)
{
    struct server sv;
    REQUIRE(server_start(&sv, "emu") == 0);
    int rc;
    oni_ctx ctx = net_open(netserve_addr(sv.s), XFER_SPEC(1), 0, &rc);
    CHECK_RC(rc, 0);
    REQUIRE(ctx);
    oni_device_t t[16];
    int n = devices(ctx, t, 16);
    uint32_t core = UINT32_MAX, sink = UINT32_MAX;
    for (int i = 0; i < n; i++) {
        if (t[i].id == ONIX_ONIGPU_TESTCORE)
            core = t[i].idx;
        if (t[i].id == ONIX_ONIGPU_TESTSINK)
            sink = t[i].idx;
    }
    REQUIRE(core != UINT32_MAX && sink != UINT32_MAX);
    xfer_check_waiting_read(ctx, sink, 0); /* before RUNNING: the GPU stream stays empty */

    uint32_t rd = 8192, one = 1;
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_RD_SZ, &rd, sizeof rd), 0);
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &one, sizeof one), 0);
    static uint8_t buf[8192];
    onigpu_buf_t b = {buf, sizeof buf};
    struct xcheck c;
    xcheck_init(&c, core);
    for (int i = 0; i < 40; i++) {
        rc = i % 2 ? oni_set_driver_opt(ctx, ONI_DRV_READ, buf, 8) : oni_set_driver_opt(ctx, ONI_DRV_READ, &b, sizeof b);
        CHECK_RC(rc, 0);
        if (rc)
            break;
        xcheck_feed(&c, buf, sizeof buf);
    }
    CHECK_EQ(c.errors, 0);
    CHECK(c.frames >= 40 * 8192 / 4112);
    onigpu_buf_t small = {buf, 4096};
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ, &small, sizeof small), ONI_EBUFFERSIZE);

    uint32_t wsz = 8192; /* larger than the 4096 of xfer_check_waiting_read: the driver keeps the new WR_SZ */
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_WR_SZ, &wsz, sizeof wsz), 0);
    oni_reg_val_t want = 0; /* the hash so far (the block of xfer_check_waiting_read): FNV-1a goes on from it */
    CHECK_RC(oni_read_reg(ctx, sink, XSUM_REG, &want), 0);
    for (uint32_t k = 0; k < 4; k++) {
        want = xsum_frames(buf, wsz, 1024, sink, 10 + k, want);
        CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_WRITE, buf, 8), 0);
    }
    oni_reg_val_t got = 0;
    CHECK_RC(oni_read_reg(ctx, sink, XSUM_REG, &got), 0);
    CHECK_EQ(got, want);
    onigpu_buf_t shortw = {buf, 4096};
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_WRITE, &shortw, sizeof shortw), ONI_EBUFFERSIZE);
    oni_destroy_ctx(ctx);
    server_stop(&sv);
}

/* --- addresses, options and opening ------------------------------------------ */

TEST(net_bad_addresses)
{
    struct netserve *s = NULL;
    char err[256] = "";
    CHECK_RC(netserve_open("test", "127.0.0.1:70000", NULL, &s, err, sizeof err), ONI_EPATHINVALID);
    CHECK(strstr(err, "70000") != NULL);
    CHECK_RC(netserve_open("nosuchdriver", "127.0.0.1:0", NULL, &s, err, sizeof err), ONI_EPATHINVALID);
    CHECK(strstr(err, "nosuchdriver") != NULL);
    oni_ctx ctx = oni_create_ctx("net");
    REQUIRE(ctx);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_NET_ADDR, "127.0.0.1:9", 5), ONI_EINVALARG); /* no NUL in it */
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_NET_ADDR, NULL, 0), ONI_EINVALARG);
    static const char *bad[] = {"nohostport", "127.0.0.1:", "127.0.0.1:http", "::1:80", "127.0.0.1:99999",
                                "127.0.0.1:65536", "127.0.0.1:0", "127.0.0.1:-1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_NET_ADDR, bad[i], strlen(bad[i]) + 1), 0);
        int rc = oni_init_ctx(ctx, -1);
        if (rc != ONI_EBADADDR)
            fprintf(stderr, "  address '%s'\n", bad[i]);
        CHECK_RC(rc, ONI_EBADADDR);
    }
    /* a name that does not resolve is told from a malformed address */
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_NET_ADDR, "no-such-host.invalid:80", 24), 0);
    CHECK_RC(oni_init_ctx(ctx, -1), ONI_ENOHOST);
    oni_destroy_ctx(ctx);
}

/* The address forms of oninet.h: host:port, [v6]:port, :port (the
 * loopback for a client, every address for a server); nothing else. */
static int family_of(const char *addr, int passive, int *loopback)
{
    struct addrinfo *res;
    int rc = netp_resolve(addr, passive, &res);
    if (rc)
        return rc;
    int f = res->ai_family;
    if (f == AF_INET)
        *loopback = ntohl(((struct sockaddr_in *)res->ai_addr)->sin_addr.s_addr) == INADDR_LOOPBACK ? 1 : 0;
    else
        *loopback = IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)res->ai_addr)->sin6_addr) ? 1 : 0;
    freeaddrinfo(res);
    return f;
}

TEST(net_address_forms)
{
    int lo = -1;
    CHECK_EQ(family_of("127.0.0.1:80", 0, &lo), AF_INET);
    CHECK_EQ(lo, 1);
    CHECK_EQ(family_of("[::1]:80", 0, &lo), AF_INET6);
    CHECK_EQ(lo, 1);
    lo = -1;
    CHECK(family_of(":80", 0, &lo) > 0);
    CHECK_EQ(lo, 1); /* a client: the loopback */
    lo = -1;
    CHECK(family_of(":80", 1, &lo) > 0);
    CHECK_EQ(lo, 0); /* a server: every address */
    CHECK_EQ(family_of("127.0.0.1:65535", 0, &lo), AF_INET);
    static const char *bad[] = {"127.0.0.1:", "::1:80", "127.0.0.1:+80", "127.0.0.1: 80", "127.0.0.1:8o",
                                "[::1]80", "noport", "127.0.0.1:65536", "127.0.0.1:0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct addrinfo *res = NULL;
        int rc = netp_resolve(bad[i], 0, &res);
        if (rc != ONI_EBADADDR)
            fprintf(stderr, "  address '%s'\n", bad[i]);
        CHECK_RC(rc, ONI_EBADADDR);
        if (!rc)
            freeaddrinfo(res);
    }
    /* nor may a server listen on one */
    struct netserve *s = NULL;
    char err[256];
    CHECK_RC(netserve_open("test", "127.0.0.1:", NULL, &s, err, sizeof err), ONI_EPATHINVALID);
    if (s)
        netserve_close(s);
}

/* The driver's own option rules: the address's length and NUL, every
 * option that names this process's memory, the largest option the protocol
 * carries, and the length a get reports. */
TEST(net_option_edges)
{
    struct server sv;
    REQUIRE(server_start(&sv, "test") == 0);
    oni_ctx ctx = oni_create_ctx("net");
    REQUIRE(ctx);
    char addr[256];
    memset(addr, 'a', sizeof addr - 1);
    addr[sizeof addr - 1] = 0;
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_NET_ADDR, addr, sizeof addr), 0); /* 255 characters */
    char got[300];
    size_t len = sizeof got;
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_NET_ADDR, got, &len), 0);
    CHECK_EQ(len, sizeof addr);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_NET_ADDR, "127.0.0.1:1\0x", 14), ONI_EINVALARG);
    const char *a = netserve_addr(sv.s);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_NET_ADDR, a, strlen(a) + 1), 0);
    CHECK_RC(oni_init_ctx(ctx, -1), 0);

    static const int memory[] = {ONI_DRV_PIN, ONI_DRV_UNPIN, ONI_DRV_READ, ONI_DRV_WRITE, ONI_DRV_READ_ASYNC,
                                 ONI_DRV_WRITE_ASYNC};
    static char buf[4096];
    onigpu_buf_t b = {buf, sizeof buf};
    for (size_t i = 0; i < sizeof memory / sizeof memory[0]; i++) {
        int block = memory[i] == ONI_DRV_READ || memory[i] == ONI_DRV_WRITE; /* travel as GPU blocks */
        CHECK_RC(oni_set_driver_opt(ctx, memory[i], &b, sizeof b), block ? ONI_EINVALOPT : ONI_EUNIMPL);
        len = sizeof b;
        CHECK_RC(oni_get_driver_opt(ctx, memory[i], &b, &len), ONI_EUNIMPL);
    }
    static char big[NETP_MAXOPT];
    CHECK_RC(oni_set_driver_opt(ctx, 0x4F4704FF, big, sizeof big), ONI_EINVALOPT); /* the test driver's answer */
    onitest_stats_t st;
    len = sizeof st + 10;
    CHECK_RC(oni_get_driver_opt(ctx, ONITEST_OPT_STATS, &st, &len), 0);
    CHECK_EQ(len, sizeof st);
    oni_destroy_ctx(ctx);
    server_stop(&sv);
}

/* A port of this machine's that nobody listens on. */
static int closed_port(char *addr, size_t cap)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) || getsockname(s, (struct sockaddr *)&a, &len))
        return -1;
    close(s);
    snprintf(addr, cap, "127.0.0.1:%u", ntohs(a.sin_port));
    return 0;
}

TEST(net_no_server)
{
    char addr[64];
    REQUIRE(closed_port(addr, sizeof addr) == 0);
    int rc;
    uint64_t t0 = oni_now_ns();
    oni_ctx ctx = net_open(addr, NULL, 500, &rc);
    CHECK(ctx == NULL);
    CHECK_RC(rc, ONI_ECONNREFUSED); /* nobody listening: not a bad address */
    CHECK(oni_now_ns() - t0 < 1000000000ull); /* refused at once, not waited out (2 x 500 + 210 ms) */
}

/* A server that answers the first request with a lie. */
enum lie { LIE_MAGIC, LIE_SEQ, LIE_TYPE, LIE_LONG, LIE_HUGE, LIE_CLOSE };
struct liar {
    struct mute m; /* its listening socket */
    enum lie lie;
    pthread_t th;
};

static void *liar_main(void *arg)
{
    struct liar *l = arg;
    int fd = accept(l->m.lfd, NULL, NULL);
    struct netp_hdr h;
    struct netp_call q;
    if (fd < 0 || netp_recv(fd, &h, sizeof h, 0) || netp_recv(fd, &q, sizeof q, 0)) {
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    struct {
        struct netp_hdr h;
        struct netp_answer a;
        char name[100];
    } r = {{NETP_MAGIC, NETP_VERSION, (uint16_t)(h.type | NETP_REPLY), h.seq, sizeof r.a + 6}, {0, 0, 7}, "test 1"};
    switch (l->lie) {
    case LIE_MAGIC: r.h.magic ^= 1; break;
    case LIE_SEQ: r.h.seq++; break;
    case LIE_TYPE: r.h.type = NETP_INIT | NETP_REPLY; break;
    case LIE_LONG: r.h.len = sizeof r.a + NETP_MAXNAME; break; /* more than the client has room for */
    case LIE_HUGE: r.h.len = 0xFFFFFFF0u; break;
    case LIE_CLOSE: close(fd); return NULL;
    }
    struct iovec iov = {&r, sizeof r};
    netp_send(fd, &iov, 1, oni_now_ns() + 1000000000ull);
    char b[64];
    while (read(fd, b, sizeof b) > 0) { /* until the client gives up */
    }
    close(fd);
    return NULL;
}

static int liar_start(struct liar *l, enum lie lie)
{
    *l = (struct liar){.lie = lie};
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    l->m.lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (l->m.lfd < 0 || bind(l->m.lfd, (struct sockaddr *)&sa, sizeof sa) || listen(l->m.lfd, 4) ||
        getsockname(l->m.lfd, (struct sockaddr *)&sa, &len))
        return -1;
    snprintf(l->m.addr, sizeof l->m.addr, "127.0.0.1:%u", ntohs(sa.sin_port));
    return pthread_create(&l->th, NULL, liar_main, l) ? -1 : 0;
}

static void liar_stop(struct liar *l)
{
    pthread_join(l->th, NULL);
    close(l->m.lfd);
}

/* A failed open (here a lying server) leaves nothing behind: the same
 * driver context connects to the next address it is given. */
TEST(net_failed_open_can_be_retried)
{
    struct liar l;
    REQUIRE(liar_start(&l, LIE_SEQ) == 0);
    struct server sv;
    REQUIRE(server_start(&sv, "test") == 0);
    oni_driver_ctx d = onidrv_net.create_ctx();
    REQUIRE(d);
    CHECK_RC(onidrv_net.set_opt(d, ONI_DRV_NET_ADDR, l.m.addr, strlen(l.m.addr) + 1), 0);
    CHECK_RC(onidrv_net.init(d, -1), ONI_EBADCONTROLLER);
    const char *addr = netserve_addr(sv.s);
    CHECK_RC(onidrv_net.set_opt(d, ONI_DRV_NET_ADDR, addr, strlen(addr) + 1), 0);
    CHECK_RC(onidrv_net.init(d, -1), 0);
    onidrv_net.destroy_ctx(d);
    liar_stop(&l);
    server_stop(&sv);
}

/* --- sessions ---------------------------------------------------------------- */

/* One session at a time; the next one may start as soon as the first is gone. */
TEST(net_one_session_at_a_time)
{
    struct server sv;
    REQUIRE(server_start(&sv, "test") == 0);
    const char *addr = netserve_addr(sv.s);
    int rc;
    oni_ctx a = net_open(addr, NULL, 0, &rc);
    CHECK_RC(rc, 0);
    oni_ctx b = net_open(addr, NULL, 0, &rc);
    CHECK(b == NULL);
    CHECK_RC(rc, ONI_EBUSY);
    for (int i = 0; i < 20; i++) { /* closed and opened back to back: never ONI_EBUSY */
        oni_destroy_ctx(a);
        a = net_open(addr, NULL, 0, &rc);
        CHECK_RC(rc, 0);
    }
    oni_destroy_ctx(a);
    server_stop(&sv);
}

/* A raw connection to addr ("127.0.0.1:port"), or -1. */
static int raw_connect(const char *addr)
{
    struct addrinfo *res;
    if (netp_resolve(addr, 0, &res))
        return -1;
    int s = socket(res->ai_family, SOCK_STREAM, 0);
    if (s >= 0 && connect(s, res->ai_addr, res->ai_addrlen)) {
        close(s);
        s = -1;
    }
    freeaddrinfo(res);
    return s;
}

/* Send a request as a client would; its answer into *a (and up to cap
 * bytes after it into in). 0, or -1 when the server closed the connection
 * or answered what no server may. */
static int raw_call_out(int fd, uint16_t type, uint32_t what, uint32_t arg, uint64_t token, const void *out,
                        size_t out_n, struct netp_answer *a, void *in, size_t cap)
{
    static uint32_t seq;
    struct netp_hdr h = {NETP_MAGIC, NETP_VERSION, type, ++seq, (uint32_t)(sizeof(struct netp_call) + out_n)};
    struct netp_call q = {what, arg, token};
    struct iovec iov[3] = {{&h, sizeof h}, {&q, sizeof q}, {(void *)out, out_n}};
    uint64_t deadline = oni_now_ns() + 5000000000ull;
    struct netp_hdr r;
    if (netp_send(fd, iov, out_n ? 3 : 2, deadline) || netp_recv(fd, &r, sizeof r, deadline) ||
        netp_check_hdr(&r, 1) ||
        r.seq != h.seq || r.type != (type | NETP_REPLY) || r.len - sizeof *a > cap ||
        netp_recv(fd, a, sizeof *a, deadline) || netp_recv(fd, in, r.len - sizeof *a, deadline))
        return -1;
    return 0;
}

static int raw_call(int fd, uint16_t type, uint32_t what, uint32_t arg, uint64_t token, struct netp_answer *a,
                    void *in, size_t cap)
{
    return raw_call_out(fd, type, what, arg, token, NULL, 0, a, in, cap);
}

/* Whether the server closes fd within 5 s. */
static int closed_by_server(int fd)
{
    char b;
    return netp_recv(fd, &b, 1, oni_now_ns() + 5000000000ull) == ONI_EDISCONNECTED;
}

/* A session ends while its CTRL thread sits in a 300 ms signal read: by its
 * DATA connection closing (client_gone 0), or by its client vanishing whole,
 * killed and started again (1: its one connection closes under the call, no
 * thread of it has seen that yet). A new HELLO waits for it either way. */
static void hello_after_an_ending_session(int client_gone)
{
    struct server sv;
    REQUIRE(server_start(&sv, "test") == 0);
    const char *addr = netserve_addr(sv.s);
    struct netp_answer a;
    char name[NETP_MAXNAME];
    static char sig[4096];
    int ctrl = raw_connect(addr), data = raw_connect(addr);
    REQUIRE(ctrl >= 0 && data >= 0);
    REQUIRE(raw_call(ctrl, NETP_HELLO, 0, 0, 0, &a, name, sizeof name) == 0);
    if (!client_gone) /* gone: CTRL alone, so no thread of the session is idle to see it go */
        CHECK(raw_call(data, NETP_ATTACH, NETP_CHAN_DATA, 0, a.token, &a, NULL, 0) == 0);
    uint32_t ms = 1;
    CHECK(raw_call_out(ctrl, NETP_SET_OPT_CALLBACK, ONI_OPT_TIMEOUTMS, sizeof ms, 0, &ms, sizeof ms, &a, NULL, 0) ==
          0);
    CHECK(raw_call(ctrl, NETP_INIT, (uint32_t)-1, 0, 0, &a, NULL, 0) == 0);
    CHECK_RC(a.status, 0);
    int drained = 0;
    for (int i = 0; i < 100 && !drained; i++) /* the signal stream empty */
        drained = raw_call(ctrl, NETP_READ, ONI_READ_STREAM_SIGNAL, sizeof sig, 0, &a, sig, sizeof sig) ||
                  a.status == ONI_ETIMEOUT;
    REQUIRE(drained);
    ms = 300;
    CHECK(raw_call_out(ctrl, NETP_SET_OPT_CALLBACK, ONI_OPT_TIMEOUTMS, sizeof ms, 0, &ms, sizeof ms, &a, NULL, 0) ==
          0);
    /* a signal read, not waited for: the CTRL thread sits in it for 300 ms */
    struct netp_hdr h = {NETP_MAGIC, NETP_VERSION, NETP_READ, 1000, sizeof(struct netp_call)};
    struct netp_call q = {ONI_READ_STREAM_SIGNAL, 1, 0};
    struct iovec iov[2] = {{&h, sizeof h}, {&q, sizeof q}};
    CHECK_RC(netp_send(ctrl, iov, 2, oni_now_ns() + 1000000000ull), 0);
    close(data);
    if (client_gone) {
        close(ctrl);
        ctrl = -1;
    } else {
        CHECK(closed_by_server(ctrl)); /* the session is ending: CTRL shut down under its call */
    }
    int next = raw_connect(addr);
    REQUIRE(next >= 0);
    CHECK(raw_call(next, NETP_HELLO, 0, 0, 0, &a, name, sizeof name) == 0);
    CHECK_RC(a.status, 0);
    close(next);
    if (ctrl >= 0)
        close(ctrl);
    server_stop(&sv);
}

TEST(net_hello_waits_for_an_ending_session) { hello_after_an_ending_session(0); }

TEST(net_hello_waits_for_a_vanished_client) { hello_after_an_ending_session(1); }

/* A client that vanishes without a word (its machine lost power: no FIN,
 * no RST) holds its session only until TCP keepalive finds it gone; then the
 * next client gets the hardware. The vanishing is TCP_REPAIR's silent close
 * (needs CAP_NET_ADMIN; skipped without). */
TEST(net_vanished_client_frees_the_server)
{
    struct server sv;
    REQUIRE(server_start(&sv, "test") == 0);
    const char *addr = netserve_addr(sv.s);
    struct netp_answer a;
    char name[NETP_MAXNAME];
    int fd = raw_connect(addr);
    REQUIRE(fd >= 0);
    REQUIRE(raw_call(fd, NETP_HELLO, 0, 0, 0, &a, name, sizeof name) == 0);
    CHECK_RC(a.status, 0);
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_REPAIR, &one, sizeof one)) {
        close(fd);
        server_stop(&sv);
        SKIP("TCP_REPAIR refused (no CAP_NET_ADMIN): cannot vanish silently");
    }
    close(fd); /* in repair mode: nothing goes out */
    int rc = ONI_EBUSY;
    uint64_t t0 = oni_now_ns();
    oni_ctx ctx = NULL;
    while (rc == ONI_EBUSY && oni_now_ns() - t0 < 30000000000ull) {
        ctx = net_open(addr, NULL, 0, &rc);
        if (rc == ONI_EBUSY)
            usleep(200000);
    }
    fprintf(stderr, "  the next client got the server after %.1f s\n", (oni_now_ns() - t0) / 1e9);
    CHECK_RC(rc, 0);
    if (ctx)
        oni_destroy_ctx(ctx);
    server_stop(&sv);
}

/* More connections at once than the server has room for: the one past
 * the limit (16) is closed at accept. */
TEST(net_connections_beyond_the_limit_closed)
{
    struct server sv;
    REQUIRE(server_start(&sv, "test") == 0);
    const char *addr = netserve_addr(sv.s);
    int fd[17], n = 0;
    while (n < 17 && (fd[n] = raw_connect(addr)) >= 0)
        n++;
    REQUIRE(n == 17);
    CHECK(closed_by_server(fd[16]));
    struct netp_answer a;
    char name[NETP_MAXNAME];
    CHECK(raw_call(fd[0], NETP_HELLO, 0, 0, 0, &a, name, sizeof name) == 0); /* the 16 are served */
    CHECK_RC(a.status, 0);
    for (int i = 0; i < n; i++)
        close(fd[i]);
    server_stop(&sv);
}

/* --- a server that fails or lies --------------------------------------------- */

static void *mute_main(void *arg)
{
    struct mute *m = arg;
    int conns[8], n = 0;
    for (;;) {
        struct pollfd p[10] = {{.fd = m->lfd, .events = POLLIN}, {.fd = m->stop[0], .events = POLLIN}};
        for (int i = 0; i < n; i++)
            p[2 + i] = (struct pollfd){.fd = conns[i], .events = POLLIN};
        if (poll(p, (nfds_t)(2 + n), -1) < 0 || p[1].revents)
            break;
        if ((p[0].revents & POLLIN) && n < 8)
            conns[n++] = accept(m->lfd, NULL, NULL);
        char buf[256];
        for (int i = 0; i < n; i++)
            if (p[2 + i].revents && read(conns[i], buf, sizeof buf) <= 0) {
                close(conns[i]);
                conns[i--] = conns[--n];
            }
    }
    for (int i = 0; i < n; i++)
        close(conns[i]);
    return NULL;
}

static int mute_start(struct mute *m)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    m->lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (m->lfd < 0 || bind(m->lfd, (struct sockaddr *)&a, sizeof a) || listen(m->lfd, 8) ||
        getsockname(m->lfd, (struct sockaddr *)&a, &len) || pipe(m->stop))
        return -1;
    snprintf(m->addr, sizeof m->addr, "127.0.0.1:%u", ntohs(a.sin_port));
    return pthread_create(&m->th, NULL, mute_main, m) ? -1 : 0;
}

static void mute_stop(struct mute *m)
{
    if (write(m->stop[1], "x", 1) != 1)
        return;
    pthread_join(m->th, NULL);
    close(m->lfd);
    close(m->stop[0]);
    close(m->stop[1]);
}

/* A server that takes the connection and never answers: init ends with
 * ONI_ETIMEOUT by the timeout and its margin, never hangs. */
TEST(net_mute_server_times_out)
{
    struct mute m;
    REQUIRE(mute_start(&m) == 0);
    int rc;
    uint32_t timeout = 300;
    uint64_t t0 = oni_now_ns();
    oni_ctx ctx = net_open(m.addr, NULL, timeout, &rc);
    double ms = (oni_now_ns() - t0) / 1e6;
    fprintf(stderr, "  init: %s after %.0f ms, timeout %u ms\n", oni_error_str(rc), ms, timeout);
    CHECK(ctx == NULL);
    CHECK_RC(rc, ONI_ETIMEOUT);
    /* the timeout applies from oni_set_opt on: the default (2 s) was not used */
    CHECK(ms < 1800);
    mute_stop(&m);
}

/* A served call that times out there (a register answer held back) comes
 * back as the served driver's ONI_ETIMEOUT; the session goes on. */
TEST(net_late_register_answer_keeps_the_session)
{
    struct server sv;
    REQUIRE(server_start(&sv, "test") == 0);
    int rc;
    oni_ctx ctx = net_open(netserve_addr(sv.s), NULL, 300, &rc);
    REQUIRE(ctx);
    uint32_t hold = 1;
    CHECK_RC(oni_set_driver_opt(ctx, ONITEST_OPT_HOLD_ACK, &hold, sizeof hold), 0);
    oni_reg_val_t v;
    CHECK_RC(oni_read_reg(ctx, 0, ONITEST_REG_MESSAGE, &v), ONI_ETIMEOUT);
    hold = 0;
    CHECK_RC(oni_set_driver_opt(ctx, ONITEST_OPT_HOLD_ACK, &hold, sizeof hold), 0);
    for (int i = 0; i < 5 && (rc = oni_read_reg(ctx, 0, ONITEST_REG_MESSAGE, &v)) == ONI_ERETRIG; i++)
        usleep(10000);
    CHECK_RC(rc, 0);
    oni_destroy_ctx(ctx);
    server_stop(&sv);
}

/* A call not answered in time ends the session: the next call is
 * ONI_EDISCONNECTED at once, never the late answer taken for its own. */
TEST(net_late_answer_ends_the_session)
{
    struct fake f;
    REQUIRE(fake_start(&f, FAKE_LATE_CONFIG) == 0);
    oni_driver_ctx d = drv_open(f.m.addr, 50);
    REQUIRE(d);
    oni_reg_val_t v;
    CHECK_RC(onidrv_net.read_config(d, ONI_CONFIG_RUNNING, &v), ONI_ETIMEOUT);
    CHECK_RC(onidrv_net.read_config(d, ONI_CONFIG_RUNNING, &v), ONI_EDISCONNECTED);
    onidrv_net.destroy_ctx(d);
    fake_stop(&f);
}

/* The server goes away while a reader streams: the reader's next read
 * fails with ONI_EDISCONNECTED within the timeout, and so does every later
 * call; nothing hangs. */
TEST(net_server_gone_mid_stream)
{
    struct server sv;
    REQUIRE(server_start(&sv, "test") == 0);
    int rc;
    oni_ctx ctx = net_open(netserve_addr(sv.s), NULL, 1000, &rc);
    REQUIRE(ctx);
    CHECK_RC(start(ctx, 4096), 0);
    oni_frame_t *f;
    for (int i = 0; i < 1000; i++) {
        rc = oni_read_frame(ctx, &f);
        REQUIRE(rc >= 0);
        oni_destroy_frame(f);
    }
    server_stop(&sv);
    uint64_t t0 = oni_now_ns();
    do
        rc = oni_read_frame(ctx, &f);
    while (rc >= 0 && (oni_destroy_frame(f), 1)); /* frames already in the library's block come first */
    CHECK_RC(rc, ONI_EDISCONNECTED);
    CHECK(oni_now_ns() - t0 < 1500000000ull);
    oni_reg_val_t v;
    CHECK_RC(oni_read_reg(ctx, 0, ONITEST_REG_MESSAGE, &v), ONI_EDISCONNECTED);
    CHECK_RC(oni_destroy_ctx(ctx), 0);
}

/* The same with `onigpu serve` killed (SIGKILL) as a process. */
TEST(net_killed_server_process)
{
    char exe[4096];
    if (proc_bin("onigpu", exe, sizeof exe))
        SKIP("no built onigpu (ONIGPU_BIN)");
    struct proc srv;
    struct proc_opts o = {.capture = PROC_STDOUT};
    const char *argv[] = {exe, "serve", "--driver", "test", "--listen", "127.0.0.1:0", NULL};
    REQUIRE(proc_start(&srv, exe, argv, &o) == 0);
    char line[256] = "";
    FILE *f = fdopen(srv.out, "r");
    srv.out = -1; /* f's now */
    const char *addr = f && fgets(line, sizeof line, f) ? strstr(line, " on ") : NULL;
    REQUIRE(addr);
    char a[96];
    snprintf(a, sizeof a, "%s", addr + 4);
    a[strcspn(a, "\n")] = 0;
    int rc;
    oni_ctx ctx = net_open(a, NULL, 1000, &rc);
    CHECK_RC(rc, 0);
    if (ctx) {
        CHECK_RC(start(ctx, 4096), 0);
        oni_frame_t *fr;
        for (int i = 0; i < 1000 && oni_read_frame(ctx, &fr) >= 0; i++)
            oni_destroy_frame(fr);
    }
    proc_stop(&srv, SIGKILL, -1);
    if (ctx) {
        oni_frame_t *fr;
        uint64_t t0 = oni_now_ns();
        while ((rc = oni_read_frame(ctx, &fr)) >= 0)
            oni_destroy_frame(fr);
        CHECK_RC(rc, ONI_EDISCONNECTED);
        CHECK(oni_now_ns() - t0 < 1500000000ull);
        oni_destroy_ctx(ctx);
    }
    fclose(f);
}

TEST(net_lying_server)
{
    static const struct {
        enum lie lie;
        int want;
    } cases[] = {{LIE_MAGIC, ONI_EBADCONTROLLER}, {LIE_SEQ, ONI_EBADCONTROLLER}, {LIE_TYPE, ONI_EBADCONTROLLER},
                 {LIE_LONG, ONI_EBADCONTROLLER},  {LIE_HUGE, ONI_EBADCONTROLLER}, {LIE_CLOSE, ONI_EDISCONNECTED}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct liar l;
        REQUIRE(liar_start(&l, cases[c].lie) == 0);
        int rc;
        uint64_t t0 = oni_now_ns();
        oni_ctx ctx = net_open(l.m.addr, NULL, 500, &rc);
        CHECK(ctx == NULL);
        if (rc != cases[c].want)
            fprintf(stderr, "  lie %d\n", (int)cases[c].lie);
        CHECK_RC(rc, cases[c].want);
        CHECK(oni_now_ns() - t0 < 1000000000ull); /* found out, not waited out (2 x 500 + 210 ms) */
        liar_stop(&l);
    }
}

/* An answer whose count is not the bytes it carries (READ, GET_OPT) is a
 * broken server: ONI_EBADCONTROLLER, and the session ends; a WRITE answered
 * as taking more than was sent fails. */
TEST(net_answer_count_not_its_bytes)
{
    struct fake f;
    REQUIRE(fake_start(&f, FAKE_COUNT) == 0);
    oni_reg_val_t v;
    uint8_t b[16];
    oni_driver_ctx d = drv_open(f.m.addr, 0);
    REQUIRE(d);
    CHECK_RC(onidrv_net.read_stream(d, ONI_READ_STREAM_DATA, b, 8), ONI_EBADCONTROLLER);
    CHECK_RC(onidrv_net.read_config(d, ONI_CONFIG_RUNNING, &v), ONI_EDISCONNECTED);
    onidrv_net.destroy_ctx(d);

    d = drv_open(f.m.addr, 0);
    REQUIRE(d);
    CHECK_RC(onidrv_net.read_stream(d, ONI_READ_STREAM_SIGNAL, b, 1), ONI_EBADCONTROLLER);
    CHECK_RC(onidrv_net.read_config(d, ONI_CONFIG_RUNNING, &v), ONI_EDISCONNECTED);
    onidrv_net.destroy_ctx(d);

    d = drv_open(f.m.addr, 0);
    REQUIRE(d);
    size_t len = sizeof b;
    CHECK_RC(onidrv_net.get_opt(d, 0x4F4704FF, b, &len), ONI_EBADCONTROLLER);
    CHECK_RC(onidrv_net.read_config(d, ONI_CONFIG_RUNNING, &v), ONI_EDISCONNECTED);
    onidrv_net.destroy_ctx(d);

    d = drv_open(f.m.addr, 0);
    REQUIRE(d);
    CHECK_RC(onidrv_net.write_stream(d, ONI_WRITE_STREAM_DATA, (const char *)b, 8), ONI_EWRITEFAILURE);
    onidrv_net.destroy_ctx(d);
    fake_stop(&f);
}

/* --- a client that breaks the protocol --------------------------------------- */

/* The header rules of netproto.h, one bound at a time. */
static int hdr_ok(uint16_t type, uint32_t extra, int answer)
{
    size_t fixed = answer ? sizeof(struct netp_answer) : sizeof(struct netp_call);
    struct netp_hdr h = {NETP_MAGIC, NETP_VERSION, (uint16_t)(type | (answer ? NETP_REPLY : 0)), 1,
                         (uint32_t)(fixed + extra)};
    return netp_check_hdr(&h, answer);
}

TEST(net_header_rules)
{
    static const struct {
        uint16_t type;
        int answer;
        uint32_t most;
    } t[] = {{NETP_HELLO, 1, NETP_MAXNAME},  {NETP_HELLO, 0, 0},
             {NETP_READ, 1, NETP_MAXXFER},   {NETP_READ, 0, 0},
             {NETP_WRITE, 0, NETP_MAXXFER},  {NETP_WRITE, 1, 0},
             {NETP_SET_OPT, 0, NETP_MAXOPT}, {NETP_SET_OPT_CALLBACK, 0, NETP_MAXOPT},
             {NETP_GET_OPT, 1, NETP_MAXOPT}, {NETP_GET_OPT, 0, 0},
             {NETP_ATTACH, 0, 0},            {NETP_CONFIG_READ, 1, 0}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (hdr_ok(t[i].type, t[i].most, t[i].answer) || !hdr_ok(t[i].type, t[i].most + 1, t[i].answer))
            fprintf(stderr, "  type %u answer %d\n", t[i].type, t[i].answer);
        CHECK_RC(hdr_ok(t[i].type, t[i].most, t[i].answer), 0);
        CHECK_RC(hdr_ok(t[i].type, t[i].most + 1, t[i].answer), ONI_EINVALARG);
        CHECK_EQ(netp_max_extra(t[i].type, t[i].answer), t[i].most);
    }
    struct netp_hdr h = {NETP_MAGIC, NETP_VERSION, NETP_INIT, 1, sizeof(struct netp_call)};
    CHECK_RC(netp_check_hdr(&h, 0), 0);
    h.type = NETP_INIT | NETP_REPLY; /* an answer where a request is due */
    CHECK_RC(netp_check_hdr(&h, 0), ONI_EINVALARG);
    h.type = NETP_NTYPE;
    CHECK_RC(netp_check_hdr(&h, 0), ONI_EINVALARG);
    h.type = 0;
    CHECK_RC(netp_check_hdr(&h, 0), ONI_EINVALARG);
    h.type = NETP_INIT;
    h.len = sizeof(struct netp_call) - 1;
    CHECK_RC(netp_check_hdr(&h, 0), ONI_EINVALARG);
    h.len = sizeof(struct netp_call);
    h.version = NETP_VERSION + 1;
    CHECK_RC(netp_check_hdr(&h, 0), ONI_EBADCONTROLLER);
    h.version = NETP_VERSION;
    h.magic ^= 0x01000000u;
    CHECK_RC(netp_check_hdr(&h, 0), ONI_EBADCONTROLLER);
    /* an answer where an answer is due, without the reply bit */
    struct netp_hdr r = {NETP_MAGIC, NETP_VERSION, NETP_INIT, 1, sizeof(struct netp_answer)};
    CHECK_RC(netp_check_hdr(&r, 1), ONI_EINVALARG);
    r.type |= NETP_REPLY;
    CHECK_RC(netp_check_hdr(&r, 1), 0);
}

/* Which request may come on which connection, and when (raw requests). */
TEST(net_server_request_rules)
{
    struct server sv;
    REQUIRE(server_start(&sv, "test") == 0);
    const char *addr = netserve_addr(sv.s);
    struct netp_answer a;
    char name[NETP_MAXNAME];
    int ctrl = raw_connect(addr), data = raw_connect(addr), again = raw_connect(addr);
    REQUIRE(ctrl >= 0 && data >= 0 && again >= 0);
    REQUIRE(raw_call(ctrl, NETP_HELLO, 0, 0, 0, &a, name, sizeof name) == 0);
    uint64_t token = a.token;
    CHECK(raw_call(data, NETP_ATTACH, NETP_CHAN_DATA, 0, token, &a, NULL, 0) == 0);
    CHECK_RC(a.status, 0);
    CHECK(raw_call(again, NETP_ATTACH, NETP_CHAN_DATA, 0, token, &a, NULL, 0) == 0);
    CHECK_RC(a.status, ONI_EINVALARG); /* DATA is taken */

    /* before INIT: the served driver's options, both ways, and the timeout */
    onitest_stats_t st;
    CHECK(raw_call(ctrl, NETP_GET_OPT, ONITEST_OPT_STATS, 0, 0, &a, &st, sizeof st) == 0);
    CHECK_RC(a.status, ONI_EBUFFERSIZE); /* room for nothing: the size it needs */
    CHECK_EQ(a.value, sizeof st);
    uint32_t ms = 500;
    CHECK(raw_call_out(ctrl, NETP_SET_OPT_CALLBACK, ONI_OPT_TIMEOUTMS, sizeof ms, 0, &ms, sizeof ms, &a, NULL, 0) ==
          0);
    CHECK_RC(a.status, 0);
    uint32_t hold = 0;
    CHECK(raw_call_out(ctrl, NETP_SET_OPT, ONITEST_OPT_HOLD_ACK, 2, 0, &hold, sizeof hold, &a, NULL, 0) == 0);
    CHECK_RC(a.status, ONI_EINVALARG); /* arg is not the byte count */

    CHECK(raw_call(ctrl, NETP_INIT, (uint32_t)-1, 0, 0, &a, NULL, 0) == 0);
    CHECK_RC(a.status, 0);
    CHECK(raw_call(data, NETP_CONFIG_READ, ONI_CONFIG_RUNNING, 0, 0, &a, NULL, 0) == 0);
    CHECK_RC(a.status, ONI_EINVALARG); /* registers belong to CTRL */
    CHECK(raw_call(ctrl, NETP_CONFIG_READ, ONI_CONFIG_RUNNING, 0, 0, &a, NULL, 0) == 0);
    CHECK_RC(a.status, 0);
    close(again);
    close(data);
    close(ctrl);
    server_stop(&sv);
}

/* A client that breaks the protocol gets an error or loses its
 * connection; the server goes on serving the next one. */
TEST(net_server_survives_a_bad_client)
{
    struct server sv;
    REQUIRE(server_start(&sv, "test") == 0);
    const char *addr = netserve_addr(sv.s);
    struct netp_answer a;
    char name[NETP_MAXNAME];

    int g = raw_connect(addr); /* not the protocol at all */
    REQUIRE(g >= 0);
    CHECK(write(g, "GET / HTTP/1.0\r\n\r\n", 18) == 18);
    CHECK(closed_by_server(g));
    close(g);

    /* another version of onigpu: an answer saying so (and the server's
     * version), then the connection closes */
    g = raw_connect(addr);
    REQUIRE(g >= 0);
    struct {
        struct netp_hdr h;
        struct netp_call q;
    } old_hello = {{NETP_MAGIC, NETP_VERSION - 1, NETP_HELLO, 7, sizeof(struct netp_call)}, {0, 0, 0}};
    CHECK(write(g, &old_hello, sizeof old_hello) == (ssize_t)sizeof old_hello);
    struct netp_hdr r = {0};
    uint64_t dl = oni_now_ns() + 5000000000ull;
    CHECK_RC(netp_recv(g, &r, sizeof r, dl), 0);
    CHECK_RC(netp_check_hdr(&r, 1), 0);
    CHECK(r.type == (NETP_HELLO | NETP_REPLY) && r.seq == 7 && r.len == sizeof a);
    CHECK_RC(netp_recv(g, &a, sizeof a, dl), 0);
    CHECK_RC(a.status, ONI_EBADCONTROLLER);
    CHECK_EQ(a.value, NETP_VERSION);
    CHECK(closed_by_server(g));
    close(g);

    int ctrl = raw_connect(addr), data = raw_connect(addr), other = raw_connect(addr);
    REQUIRE(ctrl >= 0 && data >= 0 && other >= 0);
    REQUIRE(raw_call(other, NETP_READ, ONI_READ_STREAM_DATA, 16, 0, &a, name, 0) == 0);
    CHECK_RC(a.status, ONI_EINVALARG); /* the first request must be HELLO or ATTACH */
    CHECK(closed_by_server(other));
    REQUIRE(raw_call(ctrl, NETP_HELLO, 0, 0, 0, &a, name, sizeof name) == 0);
    CHECK_RC(a.status, 0);
    uint64_t token = a.token;
    CHECK(raw_call(data, NETP_ATTACH, NETP_CHAN_DATA, 0, token + 1, &a, NULL, 0) == 0);
    CHECK_RC(a.status, ONI_EINVALARG); /* a wrong token */
    CHECK(closed_by_server(data));
    close(data);
    data = raw_connect(addr);
    REQUIRE(data >= 0);
    CHECK(raw_call(data, NETP_ATTACH, NETP_CHAN_DATA, 0, token, &a, NULL, 0) == 0);
    CHECK_RC(a.status, 0);
    CHECK(raw_call(data, NETP_READ, ONI_READ_STREAM_SIGNAL, 16, 0, &a, name, 0) == 0);
    CHECK_RC(a.status, ONI_EINVALARG); /* the signal stream belongs to CTRL */
    CHECK(raw_call(ctrl, NETP_CONFIG_READ, ONI_CONFIG_RUNNING, 0, 0, &a, NULL, 0) == 0);
    CHECK_RC(a.status, ONI_EINVALSTATE); /* before INIT */
    CHECK(raw_call(data, NETP_READ, ONI_READ_STREAM_DATA, 16, 0, &a, name, 0) == 0);
    CHECK_RC(a.status, ONI_EINVALSTATE);
    CHECK(raw_call(ctrl, NETP_INIT, (uint32_t)-1, 0, 0, &a, NULL, 0) == 0);
    CHECK_RC(a.status, 0);
    CHECK(raw_call(ctrl, NETP_INIT, (uint32_t)-1, 0, 0, &a, NULL, 0) == 0);
    CHECK_RC(a.status, ONI_EINVALSTATE); /* once */
    CHECK(raw_call(ctrl, NETP_ATTACH, NETP_CHAN_WRITE, 0, token, &a, NULL, 0) == 0);
    CHECK_RC(a.status, ONI_EINVALARG); /* ATTACH only comes first */
    /* a header that claims a body larger than any: the connection is dropped, the session ends */
    struct netp_hdr h = {NETP_MAGIC, NETP_VERSION, NETP_WRITE, 99, 0xFFFFFFF0u};
    CHECK(write(ctrl, &h, sizeof h) == (ssize_t)sizeof h);
    CHECK(closed_by_server(ctrl));
    CHECK(closed_by_server(data)); /* with the whole session */
    close(ctrl);
    close(data);
    close(other);

    int rc;
    oni_ctx ctx = net_open(addr, NULL, 0, &rc);
    CHECK_RC(rc, 0);
    if (ctx)
        oni_destroy_ctx(ctx);
    server_stop(&sv);
}

/* A client that sends a memory option as an ordinary one (its value would be
 * an address in the server) is refused by the server, whatever the driver
 * there would do with it; so are GPU blocks on the CTRL connection. */
TEST(net_server_refuses_memory_options)
{
    struct server sv;
    REQUIRE(server_start(&sv, "emu") == 0);
    const char *addr = netserve_addr(sv.s);
    int fd = raw_connect(addr);
    REQUIRE(fd >= 0);
    struct netp_answer a;
    char name[NETP_MAXNAME];
    REQUIRE(raw_call(fd, NETP_HELLO, 0, 0, 0, &a, name, sizeof name) == 0);
    static const int memory[] = {ONI_DRV_PIN, ONI_DRV_UNPIN, ONI_DRV_READ, ONI_DRV_WRITE, ONI_DRV_READ_ASYNC,
                                 ONI_DRV_WRITE_ASYNC};
    onigpu_buf_t b = {(void *)(uintptr_t)0x1000, 4096}; /* anywhere */
    for (size_t i = 0; i < sizeof memory / sizeof memory[0]; i++) {
        CHECK(raw_call_out(fd, NETP_SET_OPT, (uint32_t)memory[i], sizeof b, 0, &b, sizeof b, &a, NULL, 0) == 0);
        CHECK_RC(a.status, ONI_EUNIMPL);
        CHECK(raw_call(fd, NETP_GET_OPT, (uint32_t)memory[i], sizeof b, 0, &a, &b, sizeof b) == 0);
        CHECK_RC(a.status, ONI_EUNIMPL);
    }
    /* GPU blocks only on their own connections */
    static uint8_t blk[8];
    CHECK(raw_call(fd, NETP_GPU_READ, 0, 4096, 0, &a, NULL, 0) == 0);
    CHECK_RC(a.status, ONI_EINVALARG);
    CHECK(raw_call_out(fd, NETP_GPU_WRITE, 0, sizeof blk, 0, blk, sizeof blk, &a, NULL, 0) == 0);
    CHECK_RC(a.status, ONI_EINVALARG);
    close(fd);
    server_stop(&sv);
}
