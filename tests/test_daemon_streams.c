/* test_daemon_streams.c - data through the onix-emu daemon: the same frames
 * as in-process, read-ahead, late answers, write frames, the GPU stream's
 * host-buffer path and the ground-truth file. */
#include "test_daemon_util.h"
#include "unit.h"

/* --- the same data as in-process --------------------------------------------- */

TEST(daemon_same_as_in_process)
{
    pid_t pid = start_daemon("");
    NEED_DAEMON(pid);
    int rc;
    oni_ctx a = open_spec(CARD_SPEC, &rc);
    oni_ctx b = open_daemon(CARD_SPEC, &rc);
    CHECK_RC(rc, 0);
    if (!a || !b)
        goto out;
    size_t na = 0, nb = 0;
    oni_device_t *ta = device_table(a, &na), *tb = device_table(b, &nb);
    REQUIRE(ta && tb);
    CHECK_EQ(na, nb);
    CHECK(na == nb && !memcmp(ta, tb, na * sizeof *ta));
    /* registers: every hub manager's identity and clock through both paths */
    for (size_t i = 0; i < na; i++) {
        if ((ta[i].idx & 0xFF) != 0xFE)
            continue;
        for (oni_reg_addr_t r = 0; r <= 5; r++) {
            oni_reg_val_t va = 0, vb = 0;
            int ra = oni_read_reg(a, ta[i].idx, r, &va), rb = oni_read_reg(b, ta[i].idx, r, &vb);
            CHECK_EQ(ra, rb);
            CHECK_EQ(va, vb);
        }
    }
    oniemu_link_t la, lb;
    size_t sa = sizeof la, sb = sizeof lb;
    CHECK_RC(oni_get_driver_opt(a, ONI_DRV_EMU_LINK, &la, &sa), 0);
    CHECK_RC(oni_get_driver_opt(b, ONI_DRV_EMU_LINK, &lb, &sb), 0);
    CHECK(!strcmp(la.name, lb.name));
    CHECK(la.bandwidth_Bps == lb.bandwidth_Bps);
    /* the data stream: same frames, byte for byte (fast mode and one seed make it reproducible) */
    size_t cap = 8u << 20;
    uint8_t *ba = malloc(cap), *bb = malloc(cap);
    REQUIRE(ba && bb);
    size_t la_n = capture(a, 5000, ba, cap), lb_n = capture(b, 5000, bb, cap);
    CHECK(la_n > 0);
    CHECK_EQ(la_n, lb_n);
    CHECK(la_n == lb_n && !memcmp(ba, bb, la_n));
    onigpu_stream_stats_t st;
    size_t ss = sizeof st;
    CHECK_RC(oni_get_driver_opt(b, ONI_DRV_STREAM_STATS, &st, &ss), 0);
    CHECK(st.fifo_capacity[0] > 0);
    CHECK_EQ(st.bad_wframes, 0);
    /* a malformed write frame (unknown device index in its wire header) is counted by the daemon's card */
    for (size_t i = 0; i < nb; i++) {
        if (!tb[i].write_size)
            continue;
        char payload[1024] = {0};
        oni_frame_t *f = NULL;
        REQUIRE(tb[i].write_size <= sizeof payload);
        CHECK(oni_create_frame(b, &f, tb[i].idx, payload, tb[i].write_size) > 0);
        REQUIRE(f);
        uint32_t bogus_idx = 0xDEAD;
        memcpy(f->data - ONI_WFRAMEHEADERSZ, &bogus_idx, 4);
        CHECK_RC(oni_write_frame(b, f), ONI_EBADFRAME);
        oni_destroy_frame(f);
        ss = sizeof st;
        CHECK_RC(oni_get_driver_opt(b, ONI_DRV_STREAM_STATS, &st, &ss), 0);
        CHECK_EQ(st.bad_wframes, 1);
        break;
    }
    free(ba);
    free(bb);
    free(ta);
    free(tb);
out:
    if (a)
        oni_destroy_ctx(a);
    if (b)
        oni_destroy_ctx(b);
    CHECK_EQ(stop_daemon(pid, SIGTERM), 0);
}

/* The GPU stream's host-buffer path (ONI_DRV_READ) goes through the daemon's
 * GPU ring; it gives the same bytes as in-process. */
TEST(daemon_gpu_stream_host_read)
{
    pid_t pid = start_daemon("");
    NEED_DAEMON(pid);
    const char *spec = "devices=testcore:route=1;mode=fast;seed=3";
    int rc = -1; /* each open sets it */
    oni_ctx a = open_spec(spec, &rc);
    CHECK_RC(rc, 0);
    oni_ctx b = open_daemon(spec, &rc);
    CHECK_RC(rc, 0);
    enum { BLOCK = 64 << 10, NBLOCK = 8 };
    uint8_t *ba = calloc(NBLOCK, BLOCK), *bb = calloc(NBLOCK, BLOCK);
    if (!a || !b || !ba || !bb)
        goto out;
    uint32_t sz = BLOCK;
    oni_reg_val_t run = 1;
    oni_ctx both[2] = {a, b};
    uint8_t *buf[2] = {ba, bb};
    for (int k = 0; k < 2; k++) {
        CHECK_RC(oni_set_driver_opt(both[k], ONI_DRV_RD_SZ, &sz, sizeof sz), 0);
        CHECK_RC(oni_set_opt(both[k], ONI_OPT_RUNNING, &run, sizeof run), 0);
        for (int i = 0; i < NBLOCK; i++) {
            onigpu_buf_t ob = {buf[k] + (size_t)i * BLOCK, BLOCK};
            CHECK_RC(oni_set_driver_opt(both[k], ONI_DRV_READ, &ob, sizeof ob), 0);
        }
    }
    CHECK(!memcmp(ba, bb, (size_t)NBLOCK * BLOCK));
    uint32_t nonzero = 0;
    for (size_t i = 0; i < (size_t)NBLOCK * BLOCK; i++)
        nonzero += ba[i] != 0;
    CHECK(nonzero > 0);
out:
    free(ba);
    free(bb);
    if (a)
        oni_destroy_ctx(a);
    if (b)
        oni_destroy_ctx(b);
    CHECK_EQ(stop_daemon(pid, SIGTERM), 0);
}

/* A GPU-stream block larger than the daemon's GPU ring (8 MiB) comes through
 * the ring in pieces: the driver read returns it whole, the same bytes as
 * in-process. */
TEST(daemon_gpu_stream_block_larger_than_the_ring)
{
    pid_t pid = start_daemon("");
    NEED_DAEMON(pid);
    const char *spec = "devices=testcore:route=1;mode=fast;seed=3";
    enum { BLOCK = 12 << 20 };
    int rc = -1;
    oni_ctx ctx[2] = {open_spec(spec, &rc), open_daemon(spec, &rc)};
    uint8_t *buf[2] = {malloc(BLOCK), malloc(BLOCK)};
    for (int k = 0; k < 2; k++) {
        REQUIRE(ctx[k] && buf[k]);
        memset(buf[k], 0xEE, BLOCK);
        uint32_t sz = BLOCK;
        oni_reg_val_t run = 1;
        onigpu_buf_t ob = {buf[k], BLOCK};
        CHECK_RC(oni_set_driver_opt(ctx[k], ONI_DRV_RD_SZ, &sz, sizeof sz), 0);
        CHECK_RC(oni_set_opt(ctx[k], ONI_OPT_RUNNING, &run, sizeof run), 0);
        CHECK_RC(oni_set_driver_opt(ctx[k], ONI_DRV_READ, &ob, sizeof ob), 0);
    }
    CHECK(!memcmp(buf[0], buf[1], BLOCK));
    for (int k = 0; k < 2; k++) {
        free(buf[k]);
        oni_destroy_ctx(ctx[k]);
    }
    CHECK_EQ(stop_daemon(pid, SIGTERM), 0);
}

/* --- read-ahead -------------------------------------------------------------- */

/* In real-time mode a data read also brings what the card already holds (one
 * round trip per ring-full); in fast mode exactly what was asked. */
TEST(daemon_read_ahead_realtime_only)
{
    pid_t pid = start_daemon("");
    NEED_DAEMON(pid);
    static const char *const specs[2] = {"devices=testcore:bytes=776:rate=23280000", "devices=testcore:bytes=776:rate=23280000;mode=fast"};
    for (int k = 0; k < 2; k++) {
        int ctrl = sock_connect(), memfd = -1;
        REQUIRE(ctrl >= 0);
        uint8_t m[EMUP_MAXMSG];
        REQUIRE(send(ctrl, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_HELLO, specs[k], (uint32_t)strlen(specs[k]) + 1),
                     MSG_NOSIGNAL) > 0);
        int n = emup_recv(ctrl, m, sizeof m, oni_now_ns() + 2000000000ull, &memfd);
        struct emup_hello_reply hr;
        REQUIRE(n == (int)(sizeof(struct emup_hdr) + sizeof hr));
        memcpy(&hr, m + sizeof(struct emup_hdr), sizeof hr);
        REQUIRE(hr.rc == 0);
        int data = raw_attach(hr.token, EMUP_CHAN_DATA);
        REQUIRE(data >= 0);
        struct emup_config cfg = {ONI_CONFIG_RESET, 1};
        CHECK_RC(raw_call(ctrl, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_CONFIG_WRITE, &cfg, sizeof cfg)), 0);
        cfg = (struct emup_config){ONI_CONFIG_RUNNING, 1};
        CHECK_RC(raw_call(ctrl, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_CONFIG_WRITE, &cfg, sizeof cfg)), 0);
        usleep(100000); /* the card fills its FIFO (real time) */
        struct emup_read rd = {EMU_STREAM_DATA, 16, 1000, 0, 0};
        REQUIRE(send(data, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_READ, &rd, sizeof rd), MSG_NOSIGNAL) > 0);
        n = emup_recv(data, m, sizeof m, oni_now_ns() + 2000000000ull, NULL);
        struct emup_read_reply rr = {-1, 0, 0, 0, 0};
        CHECK_EQ(n, sizeof(struct emup_hdr) + sizeof rr);
        memcpy(&rr, m + sizeof(struct emup_hdr), sizeof rr);
        CHECK_RC(rr.rc, 0);
        if (k == 0)
            CHECK(rr.len > 16 * 1000); /* 100 ms of a 24 MB/s probe */
        else
            CHECK_EQ(rr.len, 16);
        fprintf(stderr, "  %s: asked 16 bytes, got %u\n", specs[k], rr.len);
        close(memfd);
        close(data);
        close(ctrl);
    }
    CHECK_EQ(stop_daemon(pid, SIGTERM), 0);
}

/* A card whose FIFO overflowed holds more than one read may take (whole
 * frames fill it to within a frame of its end): the daemon's read-ahead
 * takes what is there up to its ring, and reads go on as in-process. It
 * asked the card for all it held, which the card refused (ONI_EINVALARG),
 * and every read failed from then on. */
TEST(daemon_read_ahead_from_a_full_fifo)
{
    pid_t pid = start_daemon("");
    NEED_DAEMON(pid);
    for (int daemon = 0; daemon < 2; daemon++) {
        int rc;
        oni_ctx ctx = daemon ? open_daemon("devices=testcore:bytes=776:rate=23280000;ddr=1M", &rc) : open_spec("devices=testcore:bytes=776:rate=23280000;ddr=1M", &rc);
        REQUIRE(ctx);
        oni_reg_val_t on = 1;
        CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &on, sizeof on), 0);
        usleep(300000); /* 512 KiB FIFO, 24 MB/s: full after about 20 ms */
        int ok = 0, first_err = 0;
        for (int i = 0; i < 100; i++) {
            oni_frame_t *f;
            rc = oni_read_frame(ctx, &f);
            if (rc > 0) {
                ok++;
                oni_destroy_frame(f);
            } else if (!first_err)
                first_err = rc;
        }
        fprintf(stderr, "  %s: %d of 100 reads gave a frame, first error %d (%s)\n", daemon ? "daemon" : "in-process",
                ok, first_err, oni_error_str(first_err));
        CHECK_EQ(ok, 100);
        oni_destroy_ctx(ctx);
    }
    CHECK_EQ(stop_daemon(pid, SIGTERM), 0);
}

/* In real-time mode the daemon reads the default stream ahead, never the GPU
 * stream, whose blocks may leave the card by DMA instead: a GPU-stream READ
 * takes what it asks for, even with more in the card's FIFO. */
TEST(daemon_gpu_stream_not_read_ahead)
{
    pid_t pid = start_daemon("");
    NEED_DAEMON(pid);
    int ctrl = sock_connect(), memfd = -1;
    REQUIRE(ctrl >= 0);
    uint8_t m[128], buf[EMUP_MAXMSG];
    static const char spec[] = "devices=testcore:bytes=256:rate=10k:route=1";
    struct emup_hello_reply hr;
    REQUIRE(send(ctrl, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_HELLO, spec, sizeof spec), MSG_NOSIGNAL) > 0);
    REQUIRE(emup_recv(ctrl, buf, sizeof buf, oni_now_ns() + 2000000000ull, &memfd) ==
            (int)(sizeof(struct emup_hdr) + sizeof hr));
    memcpy(&hr, buf + sizeof(struct emup_hdr), sizeof hr);
    REQUIRE(hr.rc == 0);
    if (memfd >= 0)
        close(memfd);
    int gpu = raw_attach(hr.token, EMUP_CHAN_GPU);
    REQUIRE(gpu >= 0);
    struct emup_config run = {ONI_CONFIG_RUNNING, 1};
    CHECK_RC(raw_call(ctrl, m, msg(m, EMUP_MAGIC, EMUP_VERSION, EMUP_CONFIG_WRITE, &run, sizeof run)), 0);
    struct emup_read_reply rr = {0};
    CHECK_RC(raw_read(gpu, EMU_STREAM_GPU, 64, 0, 5000, &rr), 1);
    CHECK_EQ(rr.len, 64);
    usleep(50000); /* about 500 more frames in the FIFO */
    uint64_t tail = rr.start + rr.len;
    CHECK_RC(raw_read(gpu, EMU_STREAM_GPU, 64, tail, 5000, &rr), 1);
    CHECK_EQ(rr.len, 64);
    close(gpu);
    close(ctrl);
    serves_then_stops(pid);
}

/* RESET empties the card's FIFO; data the driver read ahead goes with it. */
TEST(daemon_reset_drops_read_ahead)
{
    pid_t pid = start_daemon("");
    NEED_DAEMON(pid);
    int rc;
    oni_ctx ctx = open_daemon("devices=testcore:bytes=776:rate=23280000", &rc); /* real time: the daemon reads ahead */
    REQUIRE(ctx);
    oni_reg_val_t on = 1, off = 0;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &on, sizeof on), 0);
    oni_frame_t *f;
    REQUIRE(oni_read_frame(ctx, &f) > 0);
    oni_destroy_frame(f);
    usleep(50000); /* about 1.2 MB wait in the card ... */
    REQUIRE(oni_read_frame(ctx, &f) > 0); /* ... and come over with this read */
    uint64_t before = f->time;
    oni_destroy_frame(f);
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &off, sizeof off), 0);
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RESET, &on, sizeof on), 0);
    usleep(200000);
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &on, sizeof on), 0);
    /* the first frame after the reset is a new one (200 ms later), not one read ahead before it */
    REQUIRE(oni_read_frame(ctx, &f) > 0);
    CHECK(f->time > before + 250000000ull / 1000 * 150);
    fprintf(stderr, "  last frame before the reset at %.1f ms, first after at %.1f ms\n", before / 250e3,
            f->time / 250e3);
    oni_destroy_frame(f);
    oni_destroy_ctx(ctx);
    CHECK_EQ(stop_daemon(pid, SIGTERM), 0);
}

/* Stop acquisition, wait, start it again (RUNNING 1 -> 0 -> 1, no RESET):
 * the card empties its FIFOs at the start, and liboni its buffer. Sets the
 * time of the last frame before the stop and the first after the start. */
static int restart(oni_ctx ctx, uint64_t *before, uint64_t *after, int *badframes)
{
    oni_reg_val_t on = 1, off = 0;
    if (oni_set_opt(ctx, ONI_OPT_RUNNING, &on, sizeof on))
        return -1;
    oni_frame_t *f;
    if (oni_read_frame(ctx, &f) <= 0)
        return -2;
    oni_destroy_frame(f);
    usleep(50000);
    for (int i = 0; i < 200; i++) {
        if (oni_read_frame(ctx, &f) <= 0)
            return -3;
        *before = f->time;
        oni_destroy_frame(f);
    }
    if (oni_set_opt(ctx, ONI_OPT_RUNNING, &off, sizeof off))
        return -4;
    usleep(200000);
    if (oni_set_opt(ctx, ONI_OPT_RUNNING, &on, sizeof on))
        return -5;
    int rc;
    *badframes = 0;
    while ((rc = oni_read_frame(ctx, &f)) == ONI_EBADFRAME)
        ++*badframes;
    if (rc <= 0)
        return rc;
    *after = f->time;
    oni_destroy_frame(f);
    return 0;
}

/* Bytes the daemon read ahead into the client's DATA ring before the card
 * emptied its FIFOs go too: the first frame after the restart is new, and
 * whole, through the daemon as in-process (before 2026-11-24 the client
 * returned a frame from before the stop, then a bad frame). */
TEST(daemon_restart_drops_read_ahead)
{
    pid_t pid = start_daemon("");
    NEED_DAEMON(pid);
    for (int daemon = 0; daemon < 2; daemon++) {
        int rc;
        oni_ctx ctx = daemon ? open_daemon("devices=testcore:bytes=776:rate=23280000", &rc) : open_spec("devices=testcore:bytes=776:rate=23280000", &rc);
        REQUIRE(ctx);
        uint64_t before = 0, after = 0;
        int bad = 0;
        CHECK_RC(restart(ctx, &before, &after, &bad), 0);
        fprintf(stderr, "  %s: last frame before the stop at %.1f ms, first after the restart at %.1f ms, %d bad frames\n",
                daemon ? "daemon" : "in-process", before / 250e3, after / 250e3, bad);
        CHECK(after > before + 250000000ull / 1000 * 150);
        CHECK_EQ(bad, 0);
        oni_destroy_ctx(ctx);
    }
    CHECK_EQ(stop_daemon(pid, SIGTERM), 0);
}

/* --- late answers ------------------------------------------------------------ */

/* nframes frames into out, packed as capture() does; bad reads counted. */
static size_t frames_into(oni_ctx ctx, int nframes, uint8_t *out, size_t cap, int *bad)
{
    size_t len = 0;
    for (int i = 0; i < nframes; i++) {
        oni_frame_t *f;
        int rc = oni_read_frame(ctx, &f);
        if (rc == ONI_EBADFRAME) {
            ++*bad;
            continue;
        }
        if (rc <= 0) {
            fprintf(stderr, "  read_frame: %d\n", rc);
            ++*bad;
            continue;
        }
        len = pack_frame(out, len, cap, f);
        oni_destroy_frame(f);
    }
    return len;
}

/* Many READs the client gave up on (the daemon stopped) are all answered
 * once it runs again, and every byte of them is kept, in order: in fast mode
 * the stream equals the in-process card's (before 2026-11-24 the client kept
 * at most four late answers and dropped the rest). */
TEST(daemon_many_late_reads)
{
    pid_t pid = start_daemon(CARD_SPEC);
    NEED_DAEMON(pid);
    static uint8_t a[1 << 20], b[1 << 20];
    int rc, bad_a = 0, bad_b = 0;
    const int nlate = 6;
    oni_reg_val_t on = 1;
    oni_ctx ctx = open_spec(CARD_SPEC, &rc);
    REQUIRE(ctx);
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &on, sizeof on), 0);
    size_t na = frames_into(ctx, 300, a, sizeof a, &bad_a);
    oni_destroy_ctx(ctx);

    ctx = open_daemon("", &rc);
    REQUIRE(ctx);
    uint32_t timeout = 50;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &timeout, sizeof timeout), 0);
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &on, sizeof on), 0);
    size_t nb = frames_into(ctx, 10, b, sizeof b, &bad_b);
    kill(pid, SIGSTOP);
    int st;
    REQUIRE(waitpid(pid, &st, WUNTRACED) == pid && WIFSTOPPED(st));
    oni_frame_t *f;
    /* drain what liboni holds, then nlate READs time out */
    int timeouts = 0;
    for (int i = 0; i < 1000 && timeouts < nlate; i++) {
        rc = oni_read_frame(ctx, &f);
        if (rc > 0) {
            nb = pack_frame(b, nb, sizeof b, f);
            oni_destroy_frame(f);
        } else if (rc == ONI_ETIMEOUT)
            timeouts++;
        else
            bad_b++;
    }
    kill(pid, SIGCONT);
    usleep(100000);
    size_t more = frames_into(ctx, 300, b + nb, sizeof b - nb, &bad_b);
    nb += more;
    size_t cmp = na < nb ? na : nb;
    size_t diff = 0;
    while (diff < cmp && a[diff] == b[diff])
        diff++;
    fprintf(stderr, "  %d late READs: in-process %zu bytes of frames, daemon %zu, first difference at byte %zu of %zu, bad reads %d\n",
            nlate, na, nb, diff, cmp, bad_b);
    CHECK_EQ(bad_b, 0);
    CHECK_EQ(diff, cmp);
    oni_destroy_ctx(ctx);
    CHECK_EQ(stop_daemon(pid, SIGTERM), 0);
}

/* READs the client gave up on (daemon stopped) are answered once it runs
 * again; the first brings a ring-full read ahead. The reads after them
 * return frames from what the client holds: the next READ found the ring
 * full and was answered ONI_EBUSY, which oni_read_frame returned (before
 * 2026-11-25). */
TEST(daemon_late_reads_fill_the_ring)
{
    pid_t pid = start_daemon("");
    NEED_DAEMON(pid);
    int rc;
    oni_ctx ctx = open_daemon("devices=testcore:bytes=776:rate=69840000", &rc);
    REQUIRE(ctx);
    oni_reg_val_t on = 1;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &on, sizeof on), 0);
    usleep(400000); /* about 29 MB wait in the card */
    uint32_t timeout = 50;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &timeout, sizeof timeout), 0);
    kill(pid, SIGSTOP);
    int st;
    waitpid(pid, &st, WUNTRACED);
    oni_frame_t *f;
    int r1 = oni_read_frame(ctx, &f), r2 = oni_read_frame(ctx, &f);
    kill(pid, SIGCONT);
    timeout = 2000;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &timeout, sizeof timeout), 0);
    int errs = 0, first = 0;
    for (int i = 0; i < 20; i++) {
        rc = oni_read_frame(ctx, &f);
        if (rc > 0)
            oni_destroy_frame(f);
        else if (!errs++)
            first = rc;
    }
    fprintf(stderr, "  while stopped: %d, %d; then %d errors in 20 reads, first %d (%s)\n", r1, r2, errs, first,
            oni_error_str(first));
    CHECK_EQ(errs, 0);
    oni_destroy_ctx(ctx);
    CHECK_EQ(stop_daemon(pid, SIGTERM), 0);
}

/* --- write frames ------------------------------------------------------------ */

/* The first device of table t (n entries) that takes write frames, or NULL. */
static const oni_device_t *first_writable(const oni_device_t *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (t[i].write_size)
            return &t[i];
    return NULL;
}

/* Write frames through the daemon's write ring reach the device: its count of
 * accepted write frames (register 8, common to every device) moves with them. */
TEST(daemon_write_frames)
{
    pid_t pid = start_daemon("");
    NEED_DAEMON(pid);
    int rc;
    oni_ctx ctx = open_daemon("devices=stim;mode=fast", &rc);
    REQUIRE(ctx);
    size_t n = 0;
    oni_device_t *t = device_table(ctx, &n);
    REQUIRE(t);
    const oni_device_t *w = first_writable(t, n);
    REQUIRE(w);
    oni_reg_val_t before = 0, after = 0;
    CHECK_RC(oni_read_reg(ctx, w->idx, ONIEMU_REG_WFRAMES, &before), 0);
    uint8_t payload[256] = {0};
    REQUIRE(w->write_size <= sizeof payload);
    for (int i = 0; i < 100; i++) {
        oni_frame_t *f = NULL;
        payload[0] = (uint8_t)i;
        CHECK(oni_create_frame(ctx, &f, w->idx, payload, w->write_size) > 0);
        if (f)
            CHECK(oni_write_frame(ctx, f) > 0);
        oni_destroy_frame(f);
    }
    CHECK_RC(oni_read_reg(ctx, w->idx, ONIEMU_REG_WFRAMES, &after), 0);
    CHECK_EQ(after - before, 100);
    free(t);
    oni_destroy_ctx(ctx);
    CHECK_EQ(stop_daemon(pid, SIGTERM), 0);
}

/* A write frame whose oni_write_frame said ONI_ETIMEOUT (nothing taken:
 * errors.md) does not reach the device later, when the stopped daemon runs
 * again: the caller that tries again would send it twice. Before
 * 2026-11-25 (protocol 4) the daemon delivered it once it ran. */
TEST(daemon_timed_out_write_not_delivered_later)
{
    pid_t pid = start_daemon("");
    NEED_DAEMON(pid);
    int rc;
    oni_ctx ctx = open_daemon("devices=stim;mode=fast", &rc);
    REQUIRE(ctx);
    size_t n = 0;
    oni_device_t *t = device_table(ctx, &n);
    REQUIRE(t);
    const oni_device_t *w = first_writable(t, n);
    REQUIRE(w);
    oni_reg_val_t before = 0, after = 0;
    CHECK_RC(oni_read_reg(ctx, w->idx, ONIEMU_REG_WFRAMES, &before), 0);
    uint32_t timeout = 100;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &timeout, sizeof timeout), 0);
    uint8_t payload[256] = {0};
    oni_frame_t *f = NULL;
    REQUIRE(oni_create_frame(ctx, &f, w->idx, payload, w->write_size) > 0);
    kill(pid, SIGSTOP);
    int wst;
    waitpid(pid, &wst, WUNTRACED);
    rc = oni_write_frame(ctx, f);
    kill(pid, SIGCONT);
    usleep(200000);
    CHECK_RC(rc, ONI_ETIMEOUT);
    int rc2 = oni_write_frame(ctx, f); /* the caller tries again */
    CHECK(rc2 > 0);
    CHECK_RC(oni_read_reg(ctx, w->idx, ONIEMU_REG_WFRAMES, &after), 0);
    fprintf(stderr, "  write: %d (%s), again: %d; device's write-frame count went up by %u\n", rc,
            oni_error_str(rc), rc2, after - before);
    CHECK_EQ(after - before, 1);
    oni_destroy_frame(f);
    free(t);
    oni_destroy_ctx(ctx);
    CHECK_EQ(stop_daemon(pid, SIGTERM), 0);
}

/* --- the truth file ---------------------------------------------------------- */

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *b = malloc(1 << 24);
    *n = b ? fread(b, 1, (1 << 24) - 1, f) : 0;
    fclose(f);
    return b;
}

/* ONI_DRV_EMU_TRUTH_FILE: the ground truth goes to the file in both modes; the
 * daemon gets a relative path made absolute against the client's directory. */
TEST(daemon_truth_file)
{
    pid_t pid = start_daemon("");
    NEED_DAEMON(pid);
    const char *spec = "devices=rhd2164;mode=fast;seed=5";
    char pa[128], pb[128], abs_b[4096 + 160], cwd[4096];
    snprintf(pa, sizeof pa, "/tmp/emudrv-truth-%d-a.csv", (int)getpid());
    snprintf(pb, sizeof pb, "emudrv-truth-%d-b.csv", (int)getpid());
    REQUIRE(getcwd(cwd, sizeof cwd));
    snprintf(abs_b, sizeof abs_b, "%s/%s", cwd, pb);
    int rc;
    oni_ctx ctx[2] = {open_spec(spec, &rc), open_daemon(spec, &rc)};
    const char *path[2] = {pa, pb};
    uint8_t *buf = malloc(8u << 20);
    REQUIRE(buf);
    for (int k = 0; k < 2; k++) {
        REQUIRE(ctx[k]);
        CHECK_RC(oni_set_driver_opt(ctx[k], ONI_DRV_EMU_TRUTH_FILE, path[k], strlen(path[k]) + 1), 0);
        char got[256];
        size_t sz = sizeof got;
        CHECK_RC(oni_get_driver_opt(ctx[k], ONI_DRV_EMU_TRUTH_FILE, got, &sz), 0);
        CHECK(!strcmp(got, path[k]));
        CHECK(capture(ctx[k], 10000, buf, 8u << 20) > 0);
        oni_destroy_ctx(ctx[k]);
    }
    size_t na = 0, nb = 0;
    char *a = slurp(pa, &na), *b = slurp(abs_b, &nb);
    CHECK(a && b);
    CHECK(na > 0 && nb > 0);
    /* same seed, same data: one file is a prefix of the other (they may stop at different points) */
    if (a && b)
        CHECK(!memcmp(a, b, na < nb ? na : nb));
    fprintf(stderr, "  truth files: %zu and %zu bytes\n", na, nb);
    free(a);
    free(b);
    free(buf);
    unlink(pa);
    unlink(abs_b);
    CHECK_EQ(stop_daemon(pid, SIGTERM), 0);
}

/* A truth file that is a FIFO nobody reads is refused at once
 * (ONI_EPATHINVALID): opening it for writing blocked the daemon's CTRL
 * thread for good (before 2026-11-25), so the session never ended and
 * SIGTERM waited out its 10 s for that thread. */
TEST(daemon_truth_file_not_a_fifo)
{
    pid_t pid = start_daemon(CARD_SPEC);
    NEED_DAEMON(pid);
    char fifo[128];
    snprintf(fifo, sizeof fifo, "/tmp/onigpu-test-fifo-%d", (int)getpid());
    unlink(fifo);
    REQUIRE(mkfifo(fifo, 0600) == 0);
    int rc;
    oni_ctx ctx = open_daemon("", &rc);
    REQUIRE(ctx);
    uint32_t timeout = 300;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &timeout, sizeof timeout), 0);
    rc = oni_set_driver_opt(ctx, ONI_DRV_EMU_TRUTH_FILE, fifo, strlen(fifo) + 1);
    fprintf(stderr, "  truth file on a FIFO: %d (%s)\n", rc, oni_error_str(rc));
    CHECK_RC(rc, ONI_EPATHINVALID);
    int rd = open(fifo, O_RDONLY | O_NONBLOCK); /* with a reader the open would succeed */
    CHECK(rd >= 0);
    rc = oni_set_driver_opt(ctx, ONI_DRV_EMU_TRUTH_FILE, fifo, strlen(fifo) + 1);
    fprintf(stderr, "  truth file on a FIFO with a reader: %d (%s)\n", rc, oni_error_str(rc));
    CHECK_RC(rc, ONI_EPATHINVALID);
    if (rd >= 0)
        close(rd);
    oni_destroy_ctx(ctx);
    uint64_t t0 = oni_now_ns();
    rc = ONI_EBUSY;
    while (rc == ONI_EBUSY && oni_now_ns() - t0 < 3000000000ull) {
        ctx = open_daemon("", &rc);
        if (ctx)
            oni_destroy_ctx(ctx);
    }
    fprintf(stderr, "  new session after the client left: %d (%s) after %.0f ms\n", rc, oni_error_str(rc),
            (oni_now_ns() - t0) / 1e6);
    CHECK_RC(rc, 0);
    t0 = oni_now_ns();
    int st = stop_daemon(pid, SIGTERM);
    fprintf(stderr, "  SIGTERM: exit after %.1f s\n", (oni_now_ns() - t0) / 1e9);
    CHECK(oni_now_ns() - t0 < 2000000000ull);
    CHECK_EQ(st, 0);
    unlink(fifo);
}

/* A relative truth-file path names a file in the client's working directory,
 * not in the daemon's: here the client moves to another directory after the
 * daemon started. */
TEST(daemon_truth_file_relative_to_the_client)
{
    pid_t pid = start_daemon("");
    NEED_DAEMON(pid);
    char dir[] = "/tmp/onigpu-truth-XXXXXX", cwd[4096], want[128];
    REQUIRE(getcwd(cwd, sizeof cwd) && mkdtemp(dir));
    snprintf(want, sizeof want, "%s/t.csv", dir);
    REQUIRE(chdir(dir) == 0);
    int rc;
    oni_ctx ctx = open_daemon("devices=rhd2164;mode=fast", &rc);
    CHECK_RC(rc, 0);
    if (ctx) {
        CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_EMU_TRUTH_FILE, "t.csv", 6), 0); /* created at once */
        oni_destroy_ctx(ctx);
    }
    CHECK(chdir(cwd) == 0);
    struct stat sb;
    CHECK(stat(want, &sb) == 0);
    unlink(want);
    rmdir(dir);
    unlink("t.csv"); /* where a daemon that took the path as given would have put it */
    CHECK_EQ(stop_daemon(pid, SIGTERM), 0);
}
