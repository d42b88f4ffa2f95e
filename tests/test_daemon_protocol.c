/* test_daemon_protocol.c - the daemon's wire protocol (emuproto.h) spoken
 * raw: malformed messages and requests at their limits, the ring rules both
 * sides apply, and a lying daemon whose answers the driver must check. */
#include "test_daemon_util.h"
#include "unit.h"

/* --- messages ---------------------------------------------------------------- */

TEST(daemon_malformed_messages)
{
    pid_t pid = start_daemon(CARD_SPEC);
    NEED_DAEMON(pid);
    uint8_t m[256];
    int s = sock_connect();
    REQUIRE(s >= 0);
    struct emup_config cfg = {ONI_CONFIG_RUNNING, 0};
    struct emup_read rd = {0, 16, 100, 0, 0};
    /* well-formed header, bad content: answered, connection kept */
    CHECK_RC(raw_call(s, m, msg(m, EMUP_MAGIC, EMUP_VERSION + 1, EMUP_CONFIG_READ, &cfg, sizeof cfg)), ONI_EBADCONTROLLER);
    CHECK_RC(raw_call(s, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_CONFIG_READ, &cfg, sizeof cfg - 1)), ONI_EBADFRAME);
    CHECK_RC(raw_call(s, m, msg(m, EMUP_MAGIC, EMUP_VERSION, 77, NULL, 0)), ONI_EBADFRAME);
    CHECK_RC(raw_call(s, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_HELLO, "no-nul", 6)), ONI_EBADFRAME);
    CHECK_RC(raw_call(s, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_HELLO, "a\0b", 4)), ONI_EBADFRAME);
    cfg.reg = 9999;
    CHECK_RC(raw_call(s, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_CONFIG_READ, &cfg, sizeof cfg)), ONI_EBADFRAME);
    /* no session yet */
    CHECK_RC(raw_call(s, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_READ, &rd, sizeof rd)), ONI_EINVALSTATE);
    struct emup_attach at = {12345, EMUP_CHAN_DATA, 0};
    CHECK_RC(raw_call(s, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_ATTACH, &at, sizeof at)), ONI_EINVALSTATE);
    /* header length that disagrees with the packet */
    size_t n = msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_STATS, NULL, 0);
    ((struct emup_hdr *)m)->len = 40;
    CHECK_RC(raw_call(s, m, n), ONI_EBADFRAME);
    /* garbage (bad magic): answered once, then the daemon hangs up on it */
    CHECK_RC(raw_call(s, "garbage-garbage-garbage", 23), ONI_EBADFRAME);
    CHECK_RC(raw_call(s, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_STATS, NULL, 0)), ONI_EDISCONNECTED);
    close(s);

    /* a second HELLO while a session is active */
    int rc;
    oni_ctx ctx = open_daemon("", &rc);
    REQUIRE(ctx);
    s = sock_connect();
    REQUIRE(s >= 0);
    CHECK_RC(raw_call(s, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_HELLO, "", 1)), ONI_EBUSY);
    close(s);
    oni_destroy_ctx(ctx);

    /* the daemon still serves a proper client */
    ctx = open_daemon("", &rc);
    CHECK_RC(rc, 0);
    if (ctx)
        oni_destroy_ctx(ctx);
    CHECK_EQ(stop_daemon(pid, SIGTERM), 0);
}

/* Requests just outside what the daemon takes, each next to one just inside:
 * a packet longer than its header says, a string one byte too long, a packet
 * larger than EMUP_MAXMSG (cut short on receipt), ATTACH
 * to channel EMUP_NCHAN or CTRL, a READ of no bytes or with no time, a
 * configuration or truth-file request off CTRL, a second HELLO, and a READ
 * whose tail goes back. */
TEST(daemon_request_edges)
{
    pid_t pid = start_daemon(CARD_SPEC);
    NEED_DAEMON(pid);
    int ctrl = sock_connect(), memfd = -1;
    REQUIRE(ctrl >= 0);
    struct emup_hello_reply hr;
    REQUIRE(raw_hello(ctrl, &hr, &memfd) == 0);
    if (memfd >= 0)
        close(memfd);
    int data = raw_attach(hr.token, EMUP_CHAN_DATA);
    REQUIRE(data >= 0);
    uint8_t m[EMUP_MAXMSG];
    struct emup_config cfg[2] = {{ONI_CONFIG_RUNNING, 0}, {0, 0}};
    size_t n = msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_CONFIG_READ, cfg, sizeof cfg);
    ((struct emup_hdr *)m)->len = sizeof cfg[0]; /* the header counts one config of the two sent */
    CHECK_RC(raw_call(ctrl, m, n), ONI_EBADFRAME);
    CHECK_RC(raw_call(ctrl, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_CONFIG_READ, cfg, sizeof cfg[0])), 0);

    /* strings of EMUP_MAXSTR bytes (NUL included) are taken, longer ones not */
    char path[EMUP_MAXSTR + 1];
    memset(path, 'x', sizeof path);
    memcpy(path, "/nonexistent-onigpu-dir/", 24);
    path[EMUP_MAXSTR - 1] = 0;
    CHECK_RC(raw_call(ctrl, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_TRUTH, path, EMUP_MAXSTR)), ONI_EPATHINVALID);
    path[EMUP_MAXSTR - 1] = 'x';
    path[EMUP_MAXSTR] = 0;
    CHECK_RC(raw_call(ctrl, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_TRUTH, path, EMUP_MAXSTR + 1)), ONI_EBADFRAME);

    /* ATTACH names a channel other than CTRL, below EMUP_NCHAN */
    int s = sock_connect();
    REQUIRE(s >= 0);
    struct emup_attach at = {hr.token, EMUP_NCHAN, 0};
    CHECK_RC(raw_call(s, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_ATTACH, &at, sizeof at)), ONI_EBADFRAME);
    at.chan = EMUP_CHAN_CTRL;
    CHECK_RC(raw_call(s, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_ATTACH, &at, sizeof at)), ONI_EBADFRAME);
    close(s);

    /* a packet larger than any message: answered, then the connection is closed */
    s = sock_connect();
    REQUIRE(s >= 0);
    static uint8_t big[2 * EMUP_MAXMSG];
    struct emup_hdr bh = {EMUP_MAGIC, EMUP_VERSION, EMUP_STATS, 1, sizeof big - sizeof bh};
    memcpy(big, &bh, sizeof bh);
    CHECK_RC(raw_call(s, big, sizeof big), ONI_EBADFRAME);
    CHECK_RC(raw_call(s, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_STATS, NULL, 0)), ONI_EDISCONNECTED);
    close(s);

    /* a READ wants bytes and has time to wait */
    struct emup_read rd = {EMU_STREAM_DATA, 0, 100, 0, 0};
    CHECK_RC(raw_call(data, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_READ, &rd, sizeof rd)), ONI_EBADFRAME);
    rd.want = 64;
    rd.timeout_ms = 0;
    CHECK_RC(raw_call(data, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_READ, &rd, sizeof rd)), ONI_EBADFRAME);

    /* configuration and the truth file only on CTRL; HELLO only once */
    CHECK_RC(raw_call(data, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_CONFIG_READ, cfg, sizeof cfg[0])), ONI_EINVALSTATE);
    CHECK_RC(raw_call(data, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_TRUTH, "", 1)), ONI_EINVALSTATE);
    CHECK_RC(raw_call(ctrl, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_HELLO, "", 1)), ONI_EINVALSTATE);
    CHECK_RC(raw_call(data, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_HELLO, "", 1)), ONI_EINVALSTATE);

    /* the tail a READ reports never goes back */
    cfg[0] = (struct emup_config){ONI_CONFIG_RUNNING, 1};
    CHECK_RC(raw_call(ctrl, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_CONFIG_WRITE, cfg, sizeof cfg[0])), 0);
    struct emup_read_reply rr = {0};
    CHECK_RC(raw_read(data, EMU_STREAM_DATA, 64, 0, 5000, &rr), 1);
    CHECK_EQ(rr.len, 64);
    uint64_t end = rr.start + rr.len;
    CHECK_RC(raw_read(data, EMU_STREAM_DATA, 64, end, 5000, &rr), 1);
    CHECK_RC(raw_read(data, EMU_STREAM_DATA, 64, 0, 5000, &rr), ONI_EBADFRAME);
    close(data);
    close(ctrl);
    serves_then_stops(pid);
}

struct start_later {
    struct emuc *c;
    int rc;
};

static void *start_after_a_while(void *arg)
{
    struct start_later *s = arg;
    usleep(200000); /* the reader waits meanwhile: longer than a wrapped timeout would let it */
    s->rc = emuc_write_config(s->c, ONI_CONFIG_RUNNING, 1, 2000);
    return NULL;
}

/* A timeout near UINT32_MAX ms does not wrap to a few ms when the reply
 * margin is added: the read waits for the data. */
TEST(daemon_longest_timeout_does_not_wrap)
{
    pid_t pid = start_daemon(CARD_SPEC);
    NEED_DAEMON(pid);
    struct emuc *c = NULL;
    char err[200] = "";
    CHECK_RC(emuc_open(sock_path, "devices=testcore:bytes=776:rate=23280000", 2000, &c, err, sizeof err), 0);
    if (c) {
        struct start_later s = {c, -1};
        pthread_t th;
        REQUIRE(pthread_create(&th, NULL, start_after_a_while, &s) == 0);
        uint8_t buf[64];
        CHECK(emuc_read(c, EMU_STREAM_DATA, buf, sizeof buf, UINT32_MAX) > 0);
        pthread_join(th, NULL);
        CHECK_RC(s.rc, 0);
        emuc_close(c);
    }
    CHECK_EQ(stop_daemon(pid, SIGTERM), 0);
}

/* --- the ring rules ---------------------------------------------------------- */

/* The ring rules both sides apply (emuproto.h). */
TEST(daemon_ring_arithmetic)
{
    /* contiguous, after head, within one ring of tail */
    CHECK(emup_ring_ok(1024, 0, 0, 0, 1024));
    CHECK(!emup_ring_ok(1024, 0, 0, 0, 1025));
    CHECK(emup_ring_ok(1024, 100, 200, 200, 824));
    CHECK(!emup_ring_ok(1024, 100, 200, 200, 1000)); /* would overwrite unconsumed bytes */
    CHECK(!emup_ring_ok(1024, 100, 200, 150, 10));   /* before head */
    CHECK(!emup_ring_ok(1024, 300, 200, 300, 10));   /* tail after head */
    CHECK(!emup_ring_ok(1024, 0, 1000, 1000, 100));  /* wraps */
    CHECK(emup_ring_ok(1024, 1000, 1000, 1024, 100)); /* the next lap instead */
    CHECK(emup_ring_ok(1024, 1000, 1000, 1024, 1024)); /* a whole ring, nothing unconsumed */
    CHECK(!emup_ring_ok(1024, 999, 1000, 1024, 1024)); /* one byte unconsumed */
    CHECK(!emup_ring_ok(1024, 1000, 1000, 2048, 100)); /* a lap further than needed */
    CHECK(!emup_ring_ok(0, 0, 0, 0, 0));
    CHECK(!emup_ring_ok(1024, 0, 0, UINT64_MAX - 10, 100));
    CHECK_EQ(emup_ring_place(1024, 1000, 24), 1000);
    CHECK_EQ(emup_ring_place(1024, 1000, 25), 1024);
    CHECK_EQ(emup_ring_place(1024, 2048, 1024), 2048);
}

/* Exact fits of the ring rules: a piece that ends exactly at the consumer's
 * tail one lap on, one that ends exactly at the ring's end, and one that
 * starts a whole lap past head. */
TEST(daemon_ring_arithmetic_exact_fits)
{
    CHECK(emup_ring_ok(1024, 1000, 1024, 1024, 1000));  /* ends at tail + cap */
    CHECK(!emup_ring_ok(1024, 1000, 1024, 1024, 1001)); /* one byte over it */
    CHECK(emup_ring_ok(1024, 0, 0, 1000, 24));          /* ends at the ring's end */
    CHECK(!emup_ring_ok(1024, 0, 0, 1024, 100));        /* a whole lap past head */
    CHECK(emup_ring_ok(1024, 0, 0, 1023, 1));           /* the last byte before it */
}

TEST(daemon_ring_rules)
{
    pid_t pid = start_daemon(CARD_SPEC);
    NEED_DAEMON(pid);
    int ctrl = sock_connect(), memfd = -1;
    REQUIRE(ctrl >= 0);
    struct emup_hello_reply hr;
    REQUIRE(raw_hello(ctrl, &hr, &memfd) == 0);
    CHECK(memfd >= 0);
    int data = raw_attach(hr.token, EMUP_CHAN_DATA), wr = raw_attach(hr.token, EMUP_CHAN_WRITE);
    REQUIRE(data >= 0 && wr >= 0);
    CHECK(raw_attach(hr.token + 1, EMUP_CHAN_GPU) < 0); /* wrong token */
    CHECK(raw_attach(hr.token, EMUP_CHAN_DATA) < 0);    /* channel taken */
    uint8_t m[128];
    struct emup_read rd = {EMU_STREAM_DATA, 64, 50, 0, 0};
    /* not running: the read times out inside the daemon */
    CHECK_RC(raw_call(data, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_READ, &rd, sizeof rd)), ONI_ETIMEOUT);
    rd.tail = 4096; /* beyond anything produced */
    CHECK_RC(raw_call(data, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_READ, &rd, sizeof rd)), ONI_EBADFRAME);
    rd.tail = 0;
    rd.stream = EMU_STREAM_SIGNAL; /* the signal stream belongs to CTRL */
    CHECK_RC(raw_call(data, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_READ, &rd, sizeof rd)), ONI_EINVALARG);
    struct emup_config cfg = {ONI_CONFIG_RUNNING, 1};
    CHECK_RC(raw_call(data, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_CONFIG_WRITE, &cfg, sizeof cfg)), ONI_EINVALSTATE);
    uint64_t wcap = hr.ring[EMUP_RING_WRITE].cap;
    struct emup_write w = {EMU_STREAM_WRITE, 64, 50, 0, wcap - 32, 0}; /* wraps */
    CHECK_RC(raw_call(wr, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_WRITE, &w, sizeof w)), ONI_EBADFRAME);
    w.start = wcap; /* skipping a whole lap ahead */
    CHECK_RC(raw_call(wr, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_WRITE, &w, sizeof w)), ONI_EBADFRAME);
    w.len = (uint32_t)wcap + 4;
    w.start = 0;
    CHECK_RC(raw_call(wr, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_WRITE, &w, sizeof w)), ONI_EBADFRAME);
    w.stream = EMU_STREAM_GPU_WRITE; /* on the wrong channel */
    w.len = 64;
    CHECK_RC(raw_call(wr, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_WRITE, &w, sizeof w)), ONI_EINVALARG);
    /* a write channel reads nothing, whatever the stream number: -1 once
     * matched its "no stream" entry, and the tail went to a ring pointer out
     * of bounds, so that a second read with an earlier tail was refused */
    rd = (struct emup_read){0xFFFFFFFFu, 64, 50, 0, 8};
    CHECK_RC(raw_call(wr, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_READ, &rd, sizeof rd)), ONI_EINVALARG);
    rd.tail = 0;
    CHECK_RC(raw_call(wr, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_READ, &rd, sizeof rd)), ONI_EINVALARG);
    /* a well-placed write of a malformed frame: the card's verdict comes back */
    uint8_t *shm = mmap(NULL, (size_t)hr.shm_size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    REQUIRE(shm != MAP_FAILED);
    uint32_t bogus[4] = {0xDEAD, 100, 0, 0};
    memcpy(shm + hr.ring[EMUP_RING_WRITE].offset, bogus, sizeof bogus);
    w = (struct emup_write){EMU_STREAM_WRITE, sizeof bogus, 50, 0, 0, 0};
    CHECK_RC(raw_call(wr, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_WRITE, &w, sizeof w)), ONI_EBADFRAME);
    /* and the same offset again: already taken */
    CHECK_RC(raw_call(wr, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_WRITE, &w, sizeof w)), ONI_EBADFRAME);
    munmap(shm, (size_t)hr.shm_size);
    close(memfd);
    close(data);
    close(wr);
    close(ctrl);
    /* the session ended with CTRL: a proper client is served */
    serves_then_stops(pid);
}

/* A piece that ends exactly at the ring's end does not wrap: it goes at the
 * producer's position, not on the next lap (fast mode: exactly what is asked). */
TEST(daemon_piece_ending_at_the_ring_end_stays)
{
    pid_t pid = start_daemon(CARD_SPEC);
    NEED_DAEMON(pid);
    int ctrl = sock_connect(), memfd = -1;
    REQUIRE(ctrl >= 0);
    struct emup_hello_reply hr;
    REQUIRE(raw_hello(ctrl, &hr, &memfd) == 0);
    if (memfd >= 0)
        close(memfd);
    int data = raw_attach(hr.token, EMUP_CHAN_DATA);
    REQUIRE(data >= 0);
    uint8_t m[128];
    struct emup_config run = {ONI_CONFIG_RUNNING, 1};
    CHECK_RC(raw_call(ctrl, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_CONFIG_WRITE, &run, sizeof run)), 0);
    uint64_t cap = hr.ring[EMUP_RING_DATA].cap, piece = cap / 4, tail = 0;
    for (int i = 0; i < 4; i++) {
        struct emup_read_reply rr = {0};
        CHECK_RC(raw_read(data, EMU_STREAM_DATA, (uint32_t)piece, tail, 5000, &rr), 1);
        CHECK_EQ(rr.start, tail); /* the last one ends at cap */
        CHECK_EQ(rr.len, piece);
        tail = rr.start + rr.len;
    }
    close(data);
    close(ctrl);
    serves_then_stops(pid);
}

/* A client that tries to shrink the session's shared file is refused (the
 * file is sealed): the daemon's next ring access would otherwise fault and
 * kill it (SIGBUS; before 2026-11-24). */
TEST(daemon_client_cannot_shrink_the_rings)
{
    pid_t pid = start_daemon(CARD_SPEC);
    NEED_DAEMON(pid);
    int ctrl = sock_connect(), memfd = -1;
    REQUIRE(ctrl >= 0);
    struct emup_hello_reply hr;
    REQUIRE(raw_hello(ctrl, &hr, &memfd) == 0);
    int wr = raw_attach(hr.token, EMUP_CHAN_WRITE);
    REQUIRE(wr >= 0);
    CHECK(ftruncate(memfd, 0) != 0); /* sealed */
    uint8_t m[128];
    struct emup_write w = {EMU_STREAM_WRITE, 16, 50, 0, 0, 0};
    int rc = raw_call(wr, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_WRITE, &w, sizeof w));
    usleep(100000);
    int st = 0;
    pid_t gone = waitpid(pid, &st, WNOHANG);
    fprintf(stderr, "  WRITE answered %d; daemon %s\n", rc,
            gone == pid ? (WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "exited") : "alive");
    CHECK(gone == 0);
    if (gone == pid)
        daemon_pid = 0;
    close(memfd);
    close(wr);
    close(ctrl);
    if (gone == 0)
        CHECK_EQ(stop_daemon(pid, SIGTERM), 0);
}

/* A signal-stream READ takes all the daemon has (the host reads the signal
 * stream a byte at a time): the next bytes come from the ring, even with the
 * daemon stopped. */
TEST(daemon_signal_bytes_served_from_the_ring)
{
    pid_t pid = start_daemon(CARD_SPEC);
    NEED_DAEMON(pid);
    struct emuc *c = NULL;
    char err[200] = "";
    CHECK_RC(emuc_open(sock_path, "", 2000, &c, err, sizeof err), 0);
    if (c) {
        uint8_t b[2];
        CHECK_RC(emuc_write_config(c, ONI_CONFIG_RESET, 1, 2000), 0); /* the device table comes as signal packets */
        CHECK_RC(emuc_read(c, EMU_STREAM_SIGNAL, b, 1, 2000), 1);
        kill(pid, SIGSTOP);
        waitpid(pid, NULL, WUNTRACED);
        CHECK_RC(emuc_read(c, EMU_STREAM_SIGNAL, b + 1, 1, 200), 1);
        kill(pid, SIGCONT);
        emuc_close(c);
    }
    CHECK_EQ(stop_daemon(pid, SIGTERM), 0);
}

/* --- a lying daemon: the driver checks what it is told ----------------------- */

enum { LIE_GARBAGE, LIE_VERSION, LIE_NO_FD, LIE_RING_OUTSIDE, LIE_SHORT_FILE, LIE_SLOW, LIE_SEQ, LIE_RING_ONE_PAST,
       LIE_READ_OUTSIDE, LIE_TRICKLE };
#define LIE_SLOW_MS 600 /* LIE_SLOW: each answer of the handshake comes this late */
/* LIE_TRICKLE: each GPU-stream READ is answered with TRICKLE_BYTES, TRICKLE_MS late */
#define TRICKLE_MS 60
#define TRICKLE_BYTES 4
#define TRICKLE_PIECES 100

struct liar {
    int lie, listen_fd;
    pthread_t th;                      /* answering (liar_main) */
    uint32_t asked_ms[TRICKLE_PIECES]; /* LIE_TRICKLE: the timeout of each READ it answered */
    int reads;
};

/* LIE_TRICKLE: answer up to TRICKLE_PIECES READs on the GPU channel gpu, each
 * with the next TRICKLE_BYTES of the ring after TRICKLE_MS, noting their
 * timeouts in l; until the client hangs up. */
static void trickle(struct liar *l, int gpu, uint8_t *buf)
{
    uint64_t head = 0;
    for (int i = 0; i < TRICKLE_PIECES; i++) {
        int n = emup_recv(gpu, buf, EMUP_MAXMSG, oni_now_ns() + 5000000000ull, NULL);
        if (n != (int)(sizeof(struct emup_hdr) + sizeof(struct emup_read)))
            return;
        struct emup_hdr h;
        struct emup_read rq;
        memcpy(&h, buf, sizeof h);
        memcpy(&rq, buf + sizeof h, sizeof rq);
        l->asked_ms[l->reads++] = rq.timeout_ms;
        usleep(TRICKLE_MS * 1000);
        struct emup_read_reply rr = {0, TRICKLE_BYTES, head, 0, 0};
        if (emup_send(gpu, EMUP_READ | EMUP_REPLY, h.seq, &rr, sizeof rr, -1))
            return;
        head += TRICKLE_BYTES;
    }
}

static void *liar_main(void *arg)
{
    struct liar *l = arg;
    int conn[EMUP_NCHAN], n = 0;
    while (n < EMUP_NCHAN) {
        struct pollfd p = {l->listen_fd, POLLIN, 0};
        if (poll(&p, 1, 3000) <= 0)
            break;
        conn[n++] = accept(l->listen_fd, NULL, NULL);
    }
    uint8_t buf[EMUP_MAXMSG];
    if (n == EMUP_NCHAN && emup_recv(conn[0], buf, sizeof buf, oni_now_ns() + 3000000000ull, NULL) > 0) {
        struct emup_hdr h;
        memcpy(&h, buf, sizeof h);
        struct emup_hello_reply hr = {0};
        hr.shm_size = 1 << 20;
        for (int i = 0; i < EMUP_NRING; i++)
            hr.ring[i] = (struct emup_ring_desc){(uint64_t)i << 16, 1 << 16};
        int fd = memfd_create("liar", 0);
        if (ftruncate(fd, l->lie == LIE_SHORT_FILE ? 4096 : 1 << 20))
            fd = -1;
        if (l->lie == LIE_RING_OUTSIDE)
            hr.ring[2].offset = (1 << 20) - 100;
        if (l->lie == LIE_RING_ONE_PAST) /* the last ring ends one byte past the file */
            hr.ring[EMUP_NRING - 1].offset = (1 << 20) - (1 << 16) + 1;
        if (l->lie == LIE_SEQ) /* the answer to another request */
            h.seq++;
        if (l->lie == LIE_SLOW)
            usleep(LIE_SLOW_MS * 1000);
        if (l->lie == LIE_GARBAGE)
            send(conn[0], "nonsense-nonsense", 17, MSG_NOSIGNAL);
        else if (l->lie == LIE_VERSION) {
            struct emup_hdr bad = {EMUP_MAGIC, EMUP_VERSION + 1, EMUP_HELLO | EMUP_REPLY, h.seq, sizeof hr};
            memcpy(buf, &bad, sizeof bad);
            memcpy(buf + sizeof bad, &hr, sizeof hr);
            send(conn[0], buf, sizeof bad + sizeof hr, MSG_NOSIGNAL);
        } else
            emup_send(conn[0], EMUP_HELLO | EMUP_REPLY, h.seq, &hr, sizeof hr, l->lie == LIE_NO_FD ? -1 : fd);
        if (fd >= 0)
            close(fd);
        int attach = l->lie == LIE_SLOW || l->lie == LIE_READ_OUTSIDE || l->lie == LIE_TRICKLE;
        for (int i = 1; attach && i < EMUP_NCHAN; i++) { /* every ATTACH answered (LIE_SLOW: late) */
            if (emup_recv(conn[i], buf, sizeof buf, oni_now_ns() + 3000000000ull, NULL) <= 0)
                break;
            memcpy(&h, buf, sizeof h);
            if (l->lie == LIE_SLOW)
                usleep(LIE_SLOW_MS * 1000);
            struct emup_status_reply st = {0, 0};
            emup_send(conn[i], EMUP_ATTACH | EMUP_REPLY, h.seq, &st, sizeof st, -1);
        }
        /* LIE_READ_OUTSIDE: a DATA READ answered with bytes a whole ring
         * past anything produced */
        if (l->lie == LIE_READ_OUTSIDE &&
            emup_recv(conn[EMUP_CHAN_DATA], buf, sizeof buf, oni_now_ns() + 3000000000ull, NULL) > 0) {
            memcpy(&h, buf, sizeof h);
            struct emup_read_reply rr = {0, 64, 1 << 16, 0, 0};
            emup_send(conn[EMUP_CHAN_DATA], EMUP_READ | EMUP_REPLY, h.seq, &rr, sizeof rr, -1);
        }
        if (l->lie == LIE_TRICKLE)
            trickle(l, conn[EMUP_CHAN_GPU], buf);
        emup_recv(conn[0], buf, sizeof buf, oni_now_ns() + 3000000000ull, NULL); /* until the client hangs up */
    }
    for (int i = 0; i < n; i++)
        close(conn[i]);
    return NULL;
}

/* The lying daemon, answering as lie on a thread of its own at a new
 * sock_path: 0, or -1 when it could not start. liar_stop waits for it and
 * frees the path. */
static int liar_start(struct liar *l, int lie)
{
    memset(l, 0, sizeof *l);
    l->lie = lie;
    if ((l->listen_fd = liar_listen()) < 0)
        return -1;
    if (pthread_create(&l->th, NULL, liar_main, l)) {
        liar_close(l->listen_fd);
        return -1;
    }
    return 0;
}

static void liar_stop(struct liar *l)
{
    pthread_join(l->th, NULL);
    liar_close(l->listen_fd);
}

TEST(daemon_lying_daemon)
{
    static const struct {
        int lie, want;
    } cases[] = {{LIE_GARBAGE, ONI_EBADFRAME},
                 {LIE_VERSION, ONI_EBADCONTROLLER},
                 {LIE_NO_FD, ONI_EBADFRAME},
                 {LIE_RING_OUTSIDE, ONI_EBADFRAME},
                 {LIE_SHORT_FILE, ONI_EBADFRAME},
                 {LIE_SEQ, ONI_EBADFRAME},
                 {LIE_RING_ONE_PAST, ONI_EBADFRAME}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct liar l;
        REQUIRE(liar_start(&l, cases[c].lie) == 0);
        int rc = 0;
        oni_ctx ctx = open_daemon("", &rc);
        CHECK(ctx == NULL);
        CHECK_RC(rc, cases[c].want);
        if (ctx)
            oni_destroy_ctx(ctx);
        liar_stop(&l);
    }
}

/* A daemon that answers each step of the handshake (HELLO, then an ATTACH
 * per channel) just within the timeout: oni_init_ctx still ends by the
 * timeout, ONI_ETIMEOUT (Failure behaviour, docs/daemon.md). Before
 * 2026-11-25 each step had a whole timeout of its own, and init took five
 * timeouts and more. */
TEST(daemon_slow_handshake_within_the_timeout)
{
    struct liar l;
    REQUIRE(liar_start(&l, LIE_SLOW) == 0);
    oni_ctx ctx = oni_create_ctx("emu");
    REQUIRE(ctx);
    char spec[600];
    snprintf(spec, sizeof spec, "daemon=%s", sock_path);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_EMU_SPEC, spec, strlen(spec) + 1), 0);
    uint32_t timeout = 1000; /* each answer comes after LIE_SLOW_MS: the second one after the timeout */
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &timeout, sizeof timeout), 0);
    uint64_t t0 = oni_now_ns();
    int rc = oni_init_ctx(ctx, -1);
    double ms = (oni_now_ns() - t0) / 1e6;
    fprintf(stderr, "  init: %d (%s) after %.0f ms, timeout %u ms\n", rc, oni_error_str(rc), ms, timeout);
    CHECK_RC(rc, ONI_ETIMEOUT);
    CHECK(ms < 2 * timeout); /* before: 5 x LIE_SLOW_MS and more */
    oni_destroy_ctx(ctx);
    liar_stop(&l);
}

/* A READ answer that places its bytes a whole ring past anything produced
 * is refused (ONI_EBADFRAME), not copied out of the ring. */
TEST(daemon_lying_read_answer)
{
    struct liar l;
    REQUIRE(liar_start(&l, LIE_READ_OUTSIDE) == 0);
    struct emuc *c = NULL;
    char err[200] = "";
    CHECK_RC(emuc_open(sock_path, "", 2000, &c, err, sizeof err), 0);
    if (c) {
        uint8_t buf[64];
        CHECK_RC(emuc_read(c, EMU_STREAM_DATA, buf, sizeof buf, 1000), ONI_EBADFRAME);
        emuc_close(c);
    }
    liar_stop(&l);
}

/* A daemon that answers a block's READs a few bytes at a time, slower in all
 * than the timeout: ONI_DRV_READ of a host buffer ends with ONI_ETIMEOUT once
 * the timeout has passed, and each READ after the first asks only for the
 * time left. Before 2026-11-25 each piece had a whole timeout of its own, and
 * the read took TRICKLE_PIECES x TRICKLE_MS (6 s) and succeeded. */
TEST(daemon_trickled_read_within_the_timeout)
{
    struct liar l;
    REQUIRE(liar_start(&l, LIE_TRICKLE) == 0);
    /* the driver itself: liboni's init would want a device table */
    const struct oni_driver *drv = &onidrv_emu;
    oni_driver_ctx d = drv->create_ctx();
    REQUIRE(d);
    char spec[600];
    snprintf(spec, sizeof spec, "daemon=%s", sock_path);
    CHECK_RC(drv->set_opt(d, ONI_DRV_EMU_SPEC, spec, strlen(spec) + 1), 0);
    CHECK_RC(drv->init(d, -1), 0); /* with the default timeout */
    uint32_t timeout = 1000, block = TRICKLE_PIECES * TRICKLE_BYTES;
    CHECK_RC(drv->set_opt_callback(d, ONI_OPT_TIMEOUTMS, &timeout, sizeof timeout), 0);
    CHECK_RC(drv->set_opt(d, ONI_DRV_RD_SZ, &block, sizeof block), 0);
    uint8_t buf[TRICKLE_PIECES * TRICKLE_BYTES];
    uint64_t t0 = oni_now_ns();
    int rc = drv->set_opt(d, ONI_DRV_READ, buf, 8);
    double ms = (oni_now_ns() - t0) / 1e6;
    fprintf(stderr, "  read: %d (%s) after %.0f ms, timeout %u ms, %d pieces every %d ms\n", rc, oni_error_str(rc),
            ms, timeout, TRICKLE_PIECES, TRICKLE_MS);
    CHECK_RC(rc, ONI_ETIMEOUT);
    CHECK(ms < TRICKLE_PIECES * TRICKLE_MS / 2); /* does not hang on; before: all the pieces */
    CHECK_RC(drv->destroy_ctx(d), 0);
    liar_stop(&l);
    /* each READ after the first waits only for what is left, at least one piece's time less */
    CHECK(l.reads >= 2);
    uint32_t longest = 0;
    for (int i = 1; i < l.reads; i++) {
        CHECK(l.asked_ms[i] >= 1);
        longest = l.asked_ms[i] > longest ? l.asked_ms[i] : longest;
    }
    fprintf(stderr, "  %d READs; after the first, the longest timeout asked: %u ms\n", l.reads, longest);
    CHECK(longest <= timeout - TRICKLE_MS);
}
