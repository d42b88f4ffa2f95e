/* test_net.c - the `net` driver and `onigpu serve` (src/drivers/net): the
 * served driver seen through UCX as if it were local, one session at a
 * time, and every way the server or the network can fail: no server, a
 * server that never answers, one that lies, one that goes away mid-stream
 * (in-process and killed as a process), a client killed as a process, and a
 * client that breaks the protocol. Peers written here speak over the same
 * links (ucxlink.h). CTest runs the program twice: with UCX's own choice
 * (shared memory for the messages here) and with UCX_TLS=tcp. */
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>
#include "drivers/net/netproto.h"
#include "drivers/net/netserve.h"
#include "drivers/net/ucxlink.h"
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
 * initialized; NULL with *rc the failure. The timeout (0: the default) is
 * set once it is open: UCX's wire-up of the links under a loaded CI machine
 * is not what the tests of short timeouts are about. */
static oni_ctx net_open(const char *addr, const char *spec, uint32_t timeout_ms, int *rc)
{
    oni_ctx ctx = oni_create_ctx("net");
    if (!ctx) {
        *rc = ONI_EINVALARG;
        return NULL;
    }
    *rc = oni_set_driver_opt(ctx, ONI_DRV_NET_ADDR, addr, strlen(addr) + 1);
    if (!*rc && spec)
        *rc = oni_set_driver_opt(ctx, ONI_DRV_EMU_SPEC, spec, strlen(spec) + 1);
    if (!*rc)
        *rc = oni_init_ctx(ctx, -1);
    if (!*rc && timeout_ms)
        *rc = oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &timeout_ms, sizeof timeout_ms);
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

/* --- peers written here, on links of their own ---------------------------------- */

/* The links' UCX context of the test's own peers (made once, freed at exit). */
static struct ulink_ctx *test_ctx;

static void test_uc_free(void) { ulink_ctx_close(test_ctx); }

static struct ulink_ctx *test_uc(void)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    char err[128];
    pthread_mutex_lock(&lock);
    if (!test_ctx) {
        if (ulink_ctx_open(&test_ctx, err, sizeof err))
            fprintf(stderr, "  %s\n", err);
        else
            atexit(test_uc_free);
    }
    pthread_mutex_unlock(&lock);
    return test_ctx;
}

/* A listener on a free loopback port; addr its "127.0.0.1:port". */
static struct ulink_listener *peer_listen(char *addr, size_t cap)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct ulink_listener *ls;
    char err[128];
    if (!test_uc() || ulink_listen(test_uc(), (struct sockaddr *)&a, sizeof a, NETP_MAXXFER, &ls, err, sizeof err))
        return NULL;
    struct sockaddr_storage sa;
    socklen_t len;
    if (ulink_listener_addr(ls, &sa, &len)) {
        ulink_listener_close(ls);
        return NULL;
    }
    snprintf(addr, cap, "127.0.0.1:%u", ntohs(((struct sockaddr_in *)&sa)->sin_port));
    return ls;
}

/* The next link on ls within ms, or NULL (also when *stop is set). */
static struct ulink *peer_accept(struct ulink_listener *ls, int ms, atomic_int *stop)
{
    uint64_t until = oni_ms_from_now((uint32_t)ms);
    while (!(stop && atomic_load(stop)) && oni_ms_left(until)) {
        struct ulink *l;
        if (ulink_accept(ls, &l))
            return NULL;
        if (l)
            return l;
        struct pollfd p = {.fd = ulink_listener_fd(ls), .events = POLLIN};
        poll(&p, 1, 10);
    }
    return NULL;
}

/* Send a message of the protocol's form: header h, then call or answer
 * fixed (fn bytes), then n bytes. */
static int peer_send(struct ulink *l, const struct netp_hdr *h, const void *fixed, size_t fn, const void *body,
                     size_t n)
{
    uint8_t m[ULINK_MAXHDR];
    memcpy(m, h, sizeof *h);
    memcpy(m + sizeof *h, fixed, fn);
    return ulink_send(l, m, sizeof *h + fn, body, n, oni_now_ns() + 5000000000ull);
}

static int peer_answer(struct ulink *l, const struct netp_hdr *h, int32_t status, uint32_t value, uint64_t token,
                       const void *extra, size_t n)
{
    struct netp_hdr r = {NETP_MAGIC, NETP_VERSION, (uint16_t)(h->type | NETP_REPLY), h->seq,
                         (uint32_t)(sizeof(struct netp_answer) + n)};
    struct netp_answer a = {status, value, token};
    return peer_send(l, &r, &a, sizeof a, extra, n);
}

/* A request from the client on l, as the server reads it: 0, ONI_ETIMEOUT
 * after ms, or the link's error. */
static int peer_request(struct ulink *l, int ms, struct netp_hdr *h, struct netp_call *q, void *in, size_t cap,
                        size_t *n)
{
    uint8_t m[ULINK_MAXHDR];
    size_t hlen;
    int rc = ulink_next(l, m, sizeof m, &hlen, n, oni_ms_from_now((uint32_t)ms));
    if (rc)
        return rc;
    if (netp_parse(m, hlen, *n, 0, h, q) || *n > cap)
        return ONI_EBADCONTROLLER;
    return *n ? ulink_take(l, in, oni_ms_from_now(5000)) : 0;
}

/* A server written here, for answers the real one never gives: it answers
 * HELLO and the ATTACHes as the protocol says, then every request as its
 * mode says (the links of one client at a time, a thread each). */
enum fake_mode {
    FAKE_PLAIN,      /* the signal stream in batches of 10 bytes: batch k is 16k, 16k + 1, ... */
    FAKE_COUNT,      /* READ, GET_OPT and WRITE answer one more than the bytes */
    FAKE_LATE_CONFIG /* CONFIG_READ answered 1 s late */
};
struct fake {
    struct ulink_listener *ls;
    char addr[64];
    enum fake_mode mode;
    pthread_t th;
    atomic_int stop;
    unsigned batch; /* CTRL's thread's */
};

/* One request on l answered as f's mode says; -1 when the client is gone. */
static int fake_serve(struct fake *f, struct ulink *l)
{
    static _Thread_local uint8_t in[1 << 16];
    struct netp_hdr h;
    struct netp_call q;
    size_t got;
    int rc;
    while ((rc = peer_request(l, 100, &h, &q, in, sizeof in, &got)) == ONI_ETIMEOUT)
        if (atomic_load(&f->stop))
            return -1;
    if (rc)
        return -1;
    int more = f->mode == FAKE_COUNT;
    uint8_t out[16] = {0};
    switch (h.type) {
    case NETP_HELLO:
        return peer_answer(l, &h, 0, 0, 7, "fake 1.0.0", 10);
    case NETP_READ: {
        size_t n = q.arg < 10 ? q.arg : 10;
        for (size_t i = 0; i < n; i++)
            out[i] = (uint8_t)(f->batch * 16 + i);
        if (q.what == ONI_READ_STREAM_SIGNAL)
            ++f->batch;
        return peer_answer(l, &h, (int32_t)(n + more), 0, 0, out, n);
    }
    case NETP_GET_OPT:
        return peer_answer(l, &h, 0, 4u + more, 0, out, 4);
    case NETP_WRITE:
        return peer_answer(l, &h, (int32_t)q.arg + more, 0, 0, NULL, 0);
    case NETP_CONFIG_READ:
        if (f->mode == FAKE_LATE_CONFIG)
            usleep(1000000);
        return peer_answer(l, &h, 0, 42, 0, NULL, 0);
    default:
        return peer_answer(l, &h, 0, 0, 0, NULL, 0);
    }
}

struct fake_link {
    struct fake *f;
    struct ulink *l;
    pthread_t th;
};

static void *fake_link_main(void *arg)
{
    struct fake_link *k = arg;
    while (!fake_serve(k->f, k->l)) {
    }
    return NULL;
}

static void *fake_main(void *arg)
{
    struct fake *f = arg;
    while (!atomic_load(&f->stop)) { /* a client: its links, served until all have gone */
        struct fake_link k[NETP_NCHAN];
        int n = 0;
        f->batch = 0;
        while (n < NETP_NCHAN && !atomic_load(&f->stop))
            if ((k[n].l = peer_accept(f->ls, 100, &f->stop)) != NULL) {
                k[n].f = f;
                pthread_create(&k[n].th, NULL, fake_link_main, &k[n]);
                n++;
            }
        for (int c = 0; c < n; c++) {
            pthread_join(k[c].th, NULL);
            ulink_close(k[c].l, oni_ms_from_now(100));
        }
    }
    return NULL;
}

static int fake_start(struct fake *f, enum fake_mode mode)
{
    *f = (struct fake){.mode = mode};
    if (!(f->ls = peer_listen(f->addr, sizeof f->addr)))
        return -1;
    return pthread_create(&f->th, NULL, fake_main, f) ? -1 : 0;
}

static void fake_stop(struct fake *f)
{
    atomic_store(&f->stop, 1);
    pthread_join(f->th, NULL);
    ulink_listener_close(f->ls);
}

/* The net driver on addr, initialized (called straight, as liboni would). */
static oni_driver_ctx drv_open(const char *addr, uint32_t timeout_ms)
{
    oni_driver_ctx d = onidrv_net.create_ctx();
    if (!d)
        return NULL;
    if (onidrv_net.set_opt(d, ONI_DRV_NET_ADDR, addr, strlen(addr) + 1) || onidrv_net.init(d, -1) ||
        (timeout_ms && onidrv_net.set_opt_callback(d, ONI_OPT_TIMEOUTMS, &timeout_ms, sizeof timeout_ms))) {
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
    oni_driver_ctx d = drv_open(f.addr, 0);
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

/* A server that answers the first request (HELLO, on the first link) with a
 * lie; it takes every link of the client, as UCX wants them accepted. */
enum lie { LIE_MAGIC, LIE_SEQ, LIE_TYPE, LIE_LONG, LIE_HUGE, LIE_CLOSE };
struct liar {
    struct ulink_listener *ls;
    char addr[64];
    enum lie lie;
    pthread_t th;
    atomic_int stop;
    _Atomic uint64_t lied_at; /* oni_now_ns when the lie went out */
};

/* The lie as the answer to HELLO h on l. */
static void lie_to(struct liar *lr, struct ulink *l, const struct netp_hdr *h)
{
    static char name[NETP_MAXNAME + 1] = "test 1";
    struct netp_hdr r = {NETP_MAGIC, NETP_VERSION, (uint16_t)(h->type | NETP_REPLY), h->seq,
                         sizeof(struct netp_answer) + 6};
    struct netp_answer a = {0, 0, 7};
    size_t body = 6;
    switch (lr->lie) {
    case LIE_MAGIC: r.magic ^= 1; break;
    case LIE_SEQ: r.seq++; break;
    case LIE_TYPE: r.type = NETP_INIT | NETP_REPLY; break;
    case LIE_LONG: /* more than the client has room for */
        r.len = sizeof a + NETP_MAXNAME;
        body = NETP_MAXNAME;
        break;
    case LIE_HUGE: r.len = 0xFFFFFFF0u; break;
    case LIE_CLOSE: break;
    }
    if (lr->lie != LIE_CLOSE)
        peer_send(l, &r, &a, sizeof a, name, body);
}

/* One link of the liar's client, on a thread of its own (UCX wants its peer
 * to progress every link): the first answers HELLO with the lie, the
 * others only take what comes; until the client has gone or the liar stops. */
struct liar_link {
    struct liar *lr;
    struct ulink *l;
    int first;
    pthread_t th;
};

static void *liar_link_main(void *arg)
{
    struct liar_link *k = arg;
    struct liar *lr = k->lr;
    int lied = !k->first;
    while (!atomic_load(&lr->stop)) {
        struct netp_hdr h;
        struct netp_call q;
        uint8_t in[NETP_MAXSECRET];
        size_t got;
        int rc = peer_request(k->l, 50, &h, &q, in, sizeof in, &got);
        if (rc == ONI_ETIMEOUT)
            continue;
        if (rc || lied)
            break; /* the client gave up */
        lie_to(lr, k->l, &h);
        atomic_store(&lr->lied_at, oni_now_ns());
        lied = 1;
        if (lr->lie == LIE_CLOSE) {
            ulink_break(k->l); /* dropped: the client is told */
            break;
        }
    }
    return NULL;
}

static void *liar_main(void *arg)
{
    struct liar *lr = arg;
    struct liar_link k[NETP_NCHAN];
    int n = 0;
    while (n < NETP_NCHAN && !atomic_load(&lr->stop))
        if ((k[n].l = peer_accept(lr->ls, 50, &lr->stop)) != NULL) {
            k[n] = (struct liar_link){lr, k[n].l, n == 0, 0};
            pthread_create(&k[n].th, NULL, liar_link_main, &k[n]);
            n++;
        }
    for (int i = 0; i < n; i++) {
        pthread_join(k[i].th, NULL);
        ulink_close(k[i].l, oni_ms_from_now(100));
    }
    return NULL;
}

static int liar_start(struct liar *l, enum lie lie)
{
    *l = (struct liar){.lie = lie};
    if (!(l->ls = peer_listen(l->addr, sizeof l->addr)))
        return -1;
    return pthread_create(&l->th, NULL, liar_main, l) ? -1 : 0;
}

static void liar_stop(struct liar *l)
{
    atomic_store(&l->stop, 1);
    pthread_join(l->th, NULL);
    ulink_listener_close(l->ls);
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
    CHECK_RC(onidrv_net.set_opt(d, ONI_DRV_NET_ADDR, l.addr, strlen(l.addr) + 1), 0);
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

/* A raw link to addr ("127.0.0.1:port"), or NULL. */
static struct ulink *raw_connect(const char *addr)
{
    struct addrinfo *res;
    struct ulink *l = NULL;
    if (!test_uc() || netp_resolve(addr, 0, &res))
        return NULL;
    if (ulink_connect(test_uc(), res->ai_addr, res->ai_addrlen, NETP_MAXXFER, oni_ms_from_now(5000), &l))
        l = NULL;
    freeaddrinfo(res);
    return l;
}

static void raw_close(struct ulink *l) { ulink_close(l, oni_ms_from_now(1000)); }

static uint32_t raw_seq;

/* Send a request as a client would, not waiting for its answer. */
static int raw_send(struct ulink *l, uint16_t type, uint32_t what, uint32_t arg, uint64_t token, const void *out,
                    size_t out_n)
{
    struct netp_hdr h = {NETP_MAGIC, NETP_VERSION, type, ++raw_seq, (uint32_t)(sizeof(struct netp_call) + out_n)};
    struct netp_call q = {what, arg, token};
    return peer_send(l, &h, &q, sizeof q, out, out_n);
}

/* The answer to the last raw_send into *a (and up to cap bytes after it
 * into in); *h its header when h is not NULL. 0, or -1 when the server
 * closed the link or answered what no server may. */
static int raw_answer(struct ulink *l, uint16_t type, struct netp_answer *a, void *in, size_t cap,
                      struct netp_hdr *hdr)
{
    uint8_t m[ULINK_MAXHDR];
    size_t hlen, n;
    struct netp_hdr r;
    uint64_t deadline = oni_now_ns() + 5000000000ull;
    if (ulink_next(l, m, sizeof m, &hlen, &n, deadline) || netp_parse(m, hlen, n, 1, &r, a) ||
        r.seq != raw_seq || r.type != (type | NETP_REPLY) || n > cap || (n && ulink_take(l, in, deadline)))
        return -1;
    if (hdr)
        *hdr = r;
    return 0;
}

static int raw_call_out(struct ulink *l, uint16_t type, uint32_t what, uint32_t arg, uint64_t token,
                        const void *out, size_t out_n, struct netp_answer *a, void *in, size_t cap)
{
    if (raw_send(l, type, what, arg, token, out, out_n))
        return -1;
    return raw_answer(l, type, a, in, cap, NULL);
}

static int raw_call(struct ulink *l, uint16_t type, uint32_t what, uint32_t arg, uint64_t token,
                    struct netp_answer *a, void *in, size_t cap)
{
    return raw_call_out(l, type, what, arg, token, NULL, 0, a, in, cap);
}

/* Whether the server closes l within 5 s (what it still sends is dropped). */
static int closed_by_server(struct ulink *l)
{
    uint8_t m[ULINK_MAXHDR];
    size_t hlen, n;
    uint64_t deadline = oni_now_ns() + 5000000000ull;
    int rc;
    while ((rc = ulink_next(l, m, sizeof m, &hlen, &n, deadline)) == 0)
        if (n && ulink_take(l, NULL, deadline))
            break;
    return rc == ONI_EDISCONNECTED || ulink_gone(l);
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
    struct ulink *ctrl = raw_connect(addr), *data = raw_connect(addr);
    REQUIRE(ctrl && data);
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
    CHECK_RC(raw_send(ctrl, NETP_READ, ONI_READ_STREAM_SIGNAL, 1, 0, NULL, 0), 0);
    raw_close(data);
    if (client_gone) {
        raw_close(ctrl);
        ctrl = NULL;
    } else {
        CHECK(closed_by_server(ctrl)); /* the session is ending: CTRL broken under its call */
    }
    struct ulink *next = raw_connect(addr);
    REQUIRE(next);
    CHECK(raw_call(next, NETP_HELLO, 0, 0, 0, &a, name, sizeof name) == 0);
    CHECK_RC(a.status, 0);
    raw_close(next);
    raw_close(ctrl);
    server_stop(&sv);
}

TEST(net_hello_waits_for_an_ending_session) { hello_after_an_ending_session(0); }

TEST(net_hello_waits_for_a_vanished_client) { hello_after_an_ending_session(1); }

/* A client killed (SIGKILL) in the middle of a stream frees the server
 * within a bounded time: UCX finds the peer gone, the session ends with the
 * card stopped, and the next client gets the hardware. */
TEST(net_killed_client_frees_the_server)
{
    char exe[4096];
    if (proc_bin("onigpu", exe, sizeof exe))
        SKIP("no built onigpu (ONIGPU_BIN)");
    struct server sv;
    REQUIRE(server_start(&sv, "test") == 0);
    const char *addr = netserve_addr(sv.s);
    struct proc cl;
    const char *argv[] = {exe, "read", "--driver", "net", "--net", addr, "--seconds", "60", NULL};
    struct proc_opts o = {.capture = PROC_STDOUT_STDERR};
    REQUIRE(proc_start(&cl, exe, argv, &o) == 0);
    int rc = 0;
    oni_ctx ctx = NULL;
    uint64_t t0 = oni_now_ns();
    while (oni_now_ns() - t0 < 20000000000ull) { /* until the child holds the session */
        ctx = net_open(addr, NULL, 0, &rc);
        if (rc == ONI_EBUSY)
            break;
        if (ctx)
            oni_destroy_ctx(ctx);
        ctx = NULL;
        usleep(50000);
    }
    CHECK_RC(rc, ONI_EBUSY);
    usleep(200000); /* it streams */
    proc_stop(&cl, SIGKILL, -1);
    t0 = oni_now_ns();
    rc = ONI_EBUSY;
    while (rc == ONI_EBUSY && oni_now_ns() - t0 < 30000000000ull) {
        ctx = net_open(addr, NULL, 0, &rc);
        if (rc == ONI_EBUSY)
            usleep(100000);
    }
    fprintf(stderr, "  the next client got the server %.2f s after the kill\n", (oni_now_ns() - t0) / 1e9);
    CHECK_RC(rc, 0);
    if (ctx) { /* the card was left stopped: the new session finds it so */
        oni_reg_val_t run = 1;
        CHECK_RC(oni_get_opt(ctx, ONI_OPT_RUNNING, &run, &(size_t){sizeof run}), 0);
        CHECK_EQ(run, 0);
        oni_destroy_ctx(ctx);
    }
    server_stop(&sv);
}

/* More connections at once than the server has room for: the one past
 * the limit (16) is closed at accept. */
TEST(net_connections_beyond_the_limit_closed)
{
    struct server sv;
    REQUIRE(server_start(&sv, "test") == 0);
    const char *addr = netserve_addr(sv.s);
    struct ulink *l[17];
    int n = 0;
    while (n < 16 && (l[n] = raw_connect(addr)) != NULL)
        n++;
    REQUIRE(n == 16);
    l[16] = raw_connect(addr); /* refused, or taken and closed at once */
    CHECK(!l[16] || closed_by_server(l[16]));
    n += l[16] != NULL;
    struct netp_answer a;
    char name[NETP_MAXNAME];
    CHECK(raw_call(l[0], NETP_HELLO, 0, 0, 0, &a, name, sizeof name) == 0); /* the 16 are served */
    CHECK_RC(a.status, 0);
    for (int i = 0; i < n; i++)
        raw_close(l[i]);
    server_stop(&sv);
}

/* --- a server that fails or lies --------------------------------------------- */

/* A server that takes every link, reads what comes and never answers. */
struct mute {
    struct ulink_listener *ls;
    char addr[64];
    pthread_t th;
    atomic_int stop;
    _Atomic uint64_t hello_at; /* when the first request came (oni_now_ns) */
};

static void *mute_main(void *arg)
{
    struct mute *m = arg;
    struct ulink *l[8];
    int n = 0;
    while (!atomic_load(&m->stop)) {
        if (n < 8 && (l[n] = peer_accept(m->ls, 10, &m->stop)) != NULL)
            n++;
        for (int i = 0; i < n; i++) {
            struct netp_hdr h;
            struct netp_call q;
            static uint8_t in[NETP_MAXSECRET];
            size_t got;
            uint64_t zero = 0;
            if (!peer_request(l[i], 1, &h, &q, in, sizeof in, &got))
                atomic_compare_exchange_strong(&m->hello_at, &zero, oni_now_ns());
        }
    }
    for (int i = 0; i < n; i++)
        ulink_close(l[i], oni_ms_from_now(100));
    return NULL;
}

static int mute_start(struct mute *m)
{
    *m = (struct mute){0};
    if (!(m->ls = peer_listen(m->addr, sizeof m->addr)))
        return -1;
    return pthread_create(&m->th, NULL, mute_main, m) ? -1 : 0;
}

static void mute_stop(struct mute *m)
{
    atomic_store(&m->stop, 1);
    pthread_join(m->th, NULL);
    ulink_listener_close(m->ls);
}

/* A server that takes the connection and never answers: init ends with
 * ONI_ETIMEOUT by the timeout and its margin after the HELLO, never hangs. */
TEST(net_mute_server_times_out)
{
    struct mute m;
    REQUIRE(mute_start(&m) == 0);
    uint32_t timeout = 300;
    oni_ctx ctx = oni_create_ctx("net");
    REQUIRE(ctx);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_NET_ADDR, m.addr, strlen(m.addr) + 1), 0);
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &timeout, sizeof timeout), 0);
    int rc = oni_init_ctx(ctx, -1);
    uint64_t end = oni_now_ns(), hello = atomic_load(&m.hello_at);
    double ms = hello ? (end - hello) / 1e6 : -1;
    fprintf(stderr, "  init: %s %.0f ms after the HELLO, timeout %u ms\n", oni_error_str(rc), ms, timeout);
    CHECK_RC(rc, ONI_ETIMEOUT);
    /* the timeout applies from oni_set_opt on: the default (2 s) was not used */
    CHECK(hello && ms < 1800);
    oni_destroy_ctx(ctx);
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
    CHECK_RC(rc, 0);
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
    oni_driver_ctx d = drv_open(f.addr, 50);
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
        oni_driver_ctx d = onidrv_net.create_ctx();
        REQUIRE(d);
        uint32_t ms = 500;
        CHECK_RC(onidrv_net.set_opt(d, ONI_DRV_NET_ADDR, l.addr, strlen(l.addr) + 1), 0);
        CHECK_RC(onidrv_net.set_opt_callback(d, ONI_OPT_TIMEOUTMS, &ms, sizeof ms), 0);
        int rc = onidrv_net.init(d, -1);
        uint64_t end = oni_now_ns(), lied = atomic_load(&l.lied_at);
        if (rc != cases[c].want)
            fprintf(stderr, "  lie %d\n", (int)cases[c].lie);
        CHECK_RC(rc, cases[c].want);
        CHECK(lied && end - lied < 1000000000ull); /* found out, not waited out (2 x 500 + 210 ms) */
        onidrv_net.destroy_ctx(d);
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
    oni_driver_ctx d = drv_open(f.addr, 0);
    REQUIRE(d);
    CHECK_RC(onidrv_net.read_stream(d, ONI_READ_STREAM_DATA, b, 8), ONI_EBADCONTROLLER);
    CHECK_RC(onidrv_net.read_config(d, ONI_CONFIG_RUNNING, &v), ONI_EDISCONNECTED);
    onidrv_net.destroy_ctx(d);

    d = drv_open(f.addr, 0);
    REQUIRE(d);
    CHECK_RC(onidrv_net.read_stream(d, ONI_READ_STREAM_SIGNAL, b, 1), ONI_EBADCONTROLLER);
    CHECK_RC(onidrv_net.read_config(d, ONI_CONFIG_RUNNING, &v), ONI_EDISCONNECTED);
    onidrv_net.destroy_ctx(d);

    d = drv_open(f.addr, 0);
    REQUIRE(d);
    size_t len = sizeof b;
    CHECK_RC(onidrv_net.get_opt(d, 0x4F4704FF, b, &len), ONI_EBADCONTROLLER);
    CHECK_RC(onidrv_net.read_config(d, ONI_CONFIG_RUNNING, &v), ONI_EDISCONNECTED);
    onidrv_net.destroy_ctx(d);

    d = drv_open(f.addr, 0);
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
    } t[] = {{NETP_HELLO, 1, NETP_MAXNAME},  {NETP_HELLO, 0, NETP_MAXSECRET},
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
    struct ulink *ctrl = raw_connect(addr), *data = raw_connect(addr), *again = raw_connect(addr);
    REQUIRE(ctrl && data && again);
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
    raw_close(again);
    raw_close(data);
    raw_close(ctrl);
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

    struct ulink *g = raw_connect(addr); /* not the protocol at all */
    REQUIRE(g);
    CHECK_RC(ulink_send(g, "GET / HTTP/1.0\r\n\r\n", 18, NULL, 0, oni_ms_from_now(5000)), 0);
    CHECK(closed_by_server(g));
    raw_close(g);

    /* another version of onigpu: an answer saying so (and the server's
     * version), then the link closes */
    g = raw_connect(addr);
    REQUIRE(g);
    struct netp_hdr old = {NETP_MAGIC, NETP_VERSION - 1, NETP_HELLO, 7, sizeof(struct netp_call)};
    struct netp_call q0 = {0, 0, 0};
    CHECK_RC(peer_send(g, &old, &q0, sizeof q0, NULL, 0), 0);
    raw_seq = 7;
    struct netp_hdr r = {0};
    CHECK(raw_answer(g, NETP_HELLO, &a, NULL, 0, &r) == 0);
    CHECK(r.len == sizeof a);
    CHECK_RC(a.status, ONI_EBADCONTROLLER);
    CHECK_EQ(a.value, NETP_VERSION);
    CHECK(closed_by_server(g));
    raw_close(g);

    struct ulink *ctrl = raw_connect(addr), *data = raw_connect(addr), *other = raw_connect(addr);
    REQUIRE(ctrl && data && other);
    REQUIRE(raw_call(other, NETP_READ, ONI_READ_STREAM_DATA, 16, 0, &a, name, 0) == 0);
    CHECK_RC(a.status, ONI_EINVALARG); /* the first request must be HELLO or ATTACH */
    CHECK(closed_by_server(other));
    REQUIRE(raw_call(ctrl, NETP_HELLO, 0, 0, 0, &a, name, sizeof name) == 0);
    CHECK_RC(a.status, 0);
    uint64_t token = a.token;
    CHECK(raw_call(data, NETP_ATTACH, NETP_CHAN_DATA, 0, token + 1, &a, NULL, 0) == 0);
    CHECK_RC(a.status, ONI_EINVALARG); /* a wrong token */
    CHECK(closed_by_server(data));
    raw_close(data);
    data = raw_connect(addr);
    REQUIRE(data);
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
    /* a header that claims a body larger than any: the link is dropped, the session ends */
    struct netp_hdr h = {NETP_MAGIC, NETP_VERSION, NETP_WRITE, 99, 0xFFFFFFF0u};
    CHECK_RC(peer_send(ctrl, &h, &q0, sizeof q0, NULL, 0), 0);
    CHECK(closed_by_server(ctrl));
    CHECK(closed_by_server(data)); /* with the whole session */
    raw_close(ctrl);
    raw_close(data);
    raw_close(other);

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
    struct ulink *fd = raw_connect(addr);
    REQUIRE(fd);
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
    raw_close(fd);
    server_stop(&sv);
}

/* GPU memory by CUDA IPC (NETP_GPU_IPC) only on the GPU link for reads and
 * the GPUW link for writes, with a body of exactly one struct netp_ipc; a
 * handle this server cannot map (no GPU here, or none of a process's) is
 * ONI_EUNIMPL, which sends the client to staging, and the session goes on. */
TEST(net_server_gpu_ipc_rules)
{
    struct server sv;
    REQUIRE(server_start(&sv, "emu") == 0);
    const char *addr = netserve_addr(sv.s);
    struct netp_answer a;
    char name[NETP_MAXNAME];
    struct ulink *ctrl = raw_connect(addr), *gpu = raw_connect(addr), *gpuw = raw_connect(addr);
    REQUIRE(ctrl && gpu && gpuw);
    REQUIRE(raw_call(ctrl, NETP_HELLO, 0, 0, 0, &a, name, sizeof name) == 0);
    uint64_t token = a.token;
    CHECK(raw_call(gpu, NETP_ATTACH, NETP_CHAN_GPU, 0, token, &a, NULL, 0) == 0);
    CHECK_RC(a.status, 0);
    CHECK(raw_call(gpuw, NETP_ATTACH, NETP_CHAN_GPUW, 0, token, &a, NULL, 0) == 0);
    CHECK_RC(a.status, 0);
    struct netp_ipc body;
    memset(&body, 0xA5, sizeof body); /* no allocation's handle */
    body.alloc = 1 << 20;
    body.offset = 0;
    CHECK(raw_call_out(gpu, NETP_GPU_IPC, 0, 4096, 0, &body, sizeof body, &a, NULL, 0) == 0);
    CHECK_RC(a.status, ONI_EINVALSTATE); /* before INIT */
    CHECK(raw_call(ctrl, NETP_INIT, (uint32_t)-1, 0, 0, &a, NULL, 0) == 0);
    CHECK_RC(a.status, 0);
    CHECK(raw_call_out(gpu, NETP_GPU_IPC, 0, 4096, 0, &body, sizeof body, &a, NULL, 0) == 0);
    CHECK_RC(a.status, ONI_EUNIMPL);
    CHECK(raw_call_out(gpuw, NETP_GPU_IPC, 1, 4096, 0, &body, sizeof body, &a, NULL, 0) == 0);
    CHECK_RC(a.status, ONI_EUNIMPL);
    CHECK(raw_call_out(gpu, NETP_GPU_IPC, 1, 4096, 0, &body, sizeof body, &a, NULL, 0) == 0);
    CHECK_RC(a.status, ONI_EINVALARG); /* a write on the read link */
    CHECK(raw_call_out(gpuw, NETP_GPU_IPC, 0, 4096, 0, &body, sizeof body, &a, NULL, 0) == 0);
    CHECK_RC(a.status, ONI_EINVALARG); /* a read on the write link */
    CHECK(raw_call_out(ctrl, NETP_GPU_IPC, 0, 4096, 0, &body, sizeof body, &a, NULL, 0) == 0);
    CHECK_RC(a.status, ONI_EINVALARG);
    CHECK(raw_call_out(gpu, NETP_GPU_IPC, 0, 4096, 0, &body, sizeof body - 8, &a, NULL, 0) == 0);
    CHECK_RC(a.status, ONI_EINVALARG); /* a body that is not one struct netp_ipc */
    CHECK(raw_call(ctrl, NETP_CONFIG_READ, ONI_CONFIG_RUNNING, 0, 0, &a, NULL, 0) == 0);
    CHECK_RC(a.status, 0); /* the session goes on */
    raw_close(gpuw);
    raw_close(gpu);
    raw_close(ctrl);
    server_stop(&sv);
}

/* The header of a message as ulink_next gives it: exactly a header and its
 * call (answer), a body of the size the header says, nothing else. */
TEST(net_parse_rules)
{
    uint8_t m[ULINK_MAXHDR] = {0};
    struct netp_hdr h = {NETP_MAGIC, NETP_VERSION, NETP_WRITE, 5, sizeof(struct netp_call) + 100}, got;
    struct netp_call q = {ONI_WRITE_STREAM_DATA, 100, 0}, qq;
    memcpy(m, &h, sizeof h);
    memcpy(m + sizeof h, &q, sizeof q);
    size_t hl = sizeof h + sizeof q;
    CHECK_RC(netp_parse(m, hl, 100, 0, &got, &qq), 0);
    CHECK(got.seq == 5 && qq.arg == 100);
    CHECK_RC(netp_parse(m, hl, 99, 0, &got, &qq), ONI_EINVALARG);  /* the body shorter than said */
    CHECK_RC(netp_parse(m, hl, 101, 0, &got, &qq), ONI_EINVALARG); /* longer */
    CHECK_RC(netp_parse(m, hl - 1, 100, 0, &got, &qq), ONI_EINVALARG); /* a header cut short */
    CHECK_RC(netp_parse(m, hl + 1, 100, 0, &got, &qq), ONI_EINVALARG); /* one with more */
    CHECK_RC(netp_parse(m, hl, 100, 1, &got, &qq), ONI_EINVALARG);     /* a request read as an answer */
    CHECK_RC(netp_parse(m, 3, 0, 0, &got, &qq), ONI_EINVALARG);        /* not even a header */
    h.version = NETP_VERSION + 1; /* another onigpu's: told as such, the header filled in */
    memcpy(m, &h, sizeof h);
    CHECK_RC(netp_parse(m, sizeof h, 0, 0, &got, &qq), ONI_EBADCONTROLLER);
    CHECK_EQ(got.version, NETP_VERSION + 1);
}

/* A server with a shared secret takes a client that has it (option or
 * environment) and refuses one without, before any driver call; one that
 * listens beyond the loopback will not run without a secret. */
TEST(net_shared_secret)
{
    struct netserve *s;
    char err[256];
    REQUIRE(netserve_open("test", "127.0.0.1:0", NULL, &s, err, sizeof err) == 0);
    static char longer[NETP_MAXSECRET + 1];
    CHECK_RC(netserve_set_secret(s, longer, sizeof longer), ONI_EINVALARG);
    CHECK_RC(netserve_set_secret(s, "s3cret", 6), 0);
    REQUIRE(netserve_start(s) == 0);
    CHECK_RC(netserve_set_secret(s, "other", 5), ONI_EINVALARG); /* not while it runs */
    const char *addr = netserve_addr(s);
    int rc;
    oni_ctx ctx = net_open(addr, NULL, 0, &rc);
    CHECK(ctx == NULL);
    CHECK_RC(rc, ONI_EACCESS);
    static const char *wrong[] = {"s3cre", "s3cret!", "S3cret"};
    for (size_t i = 0; i < 3; i++) {
        oni_ctx c = oni_create_ctx("net");
        REQUIRE(c);
        CHECK_RC(oni_set_driver_opt(c, ONI_DRV_NET_ADDR, addr, strlen(addr) + 1), 0);
        CHECK_RC(oni_set_driver_opt(c, ONI_DRV_NET_SECRET, wrong[i], strlen(wrong[i])), 0);
        CHECK_RC(oni_init_ctx(c, -1), ONI_EACCESS);
        oni_destroy_ctx(c);
    }
    oni_ctx c = oni_create_ctx("net");
    REQUIRE(c);
    CHECK_RC(oni_set_driver_opt(c, ONI_DRV_NET_ADDR, addr, strlen(addr) + 1), 0);
    CHECK_RC(oni_set_driver_opt(c, ONI_DRV_NET_SECRET, "s3cret", 6), 0);
    CHECK_RC(oni_init_ctx(c, -1), 0);
    char v[8];
    size_t len = sizeof v;
    CHECK_RC(oni_get_driver_opt(c, ONI_DRV_NET_SECRET, v, &len), ONI_EWRITEONLY);
    CHECK_RC(oni_set_driver_opt(c, ONI_DRV_NET_SECRET, "x", 1), ONI_EINVALSTATE); /* connected */
    oni_destroy_ctx(c);
    setenv(ONIGPU_NET_SECRET_ENV, "s3cret", 1);
    ctx = net_open(addr, NULL, 0, &rc);
    unsetenv(ONIGPU_NET_SECRET_ENV);
    CHECK_RC(rc, 0);
    if (ctx)
        oni_destroy_ctx(ctx);
    netserve_close(s);

    /* every address of this machine: not without a secret */
    REQUIRE(netserve_open("test", "0.0.0.0:0", NULL, &s, err, sizeof err) == 0);
    CHECK_RC(netserve_start(s), ONI_EACCESS);
    CHECK_RC(netserve_run(s, 1), ONI_EACCESS);
    netserve_close(s);
}

/* The transports UCX chose are told once connected: UCX's own names, and
 * under UCX_TLS=tcp that one. */
TEST(net_transport_is_told)
{
    struct server sv;
    REQUIRE(server_start(&sv, "test") == 0);
    oni_ctx ctx = oni_create_ctx("net");
    REQUIRE(ctx);
    char t[64];
    size_t len = sizeof t;
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_NET_TRANSPORT, t, &len), ONI_EINVALSTATE);
    oni_destroy_ctx(ctx);
    int rc;
    ctx = net_open(netserve_addr(sv.s), NULL, 0, &rc);
    REQUIRE(ctx);
    len = sizeof t;
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_NET_TRANSPORT, t, &len), 0);
    CHECK_EQ(len, strlen(t) + 1);
    CHECK(t[0] && strcmp(t, "?"));
    fprintf(stderr, "  transports: %s\n", t);
    const char *tls = getenv("UCX_TLS");
    if (tls && !strcmp(tls, "tcp"))
        CHECK(!strcmp(t, "tcp"));
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_NET_TRANSPORT, "x", 2), ONI_EREADONLY);
    oni_destroy_ctx(ctx);
    server_stop(&sv);
}
