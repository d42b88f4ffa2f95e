/* test_xfer_daemon.c - the GPU data stream options through the onix-emu
 * daemon (spec "daemon=PATH"), without a GPU: host-buffer READ/WRITE move
 * through the daemon's shared-memory rings with the test core's counter
 * intact; asynchronous jobs on host buffers answer ONI_EUNIMPL; the same
 * option errors as in-process; and the GPU messages (GPU_IMPORT, GPU_DMA,
 * GPU_RELEASE) are checked and answered, never trusted. With a GPU,
 * test_gpu_daemon.c moves data through them. */
#include <stdint.h>
#include <stdlib.h>
#include "unit.h"
#include "xfer_check.h"
#include "xfer_daemon.h"
#include "drivers/emu/emuclient.h"
#include "emu/emu.h" /* stream numbers of the protocol */
#include "gpu/gpu.h"

#define CARD_SPEC "devices=testcore:bytes=1024:route=1,testsink;mode=fast;link=unlimited;ddr=16M"

TEST(xfer_daemon_host_buffers)
{
    XD_START(pid, CARD_SPEC);
    uint32_t core = 0, sink = 0;
    oni_ctx ctx = xd_open(&core, &sink);
    if (!ctx) {
        xd_stop(pid);
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
    /* blocks of 4 MiB in one frame (larger than the default write ring), then
     * of 16 MiB, the whole GPU write ring, placed on the ring's next lap */
    enum { BIG = 16 << 20 };
    uint32_t *big = calloc(1, BIG);
    REQUIRE(big);
    for (wsz = 4 << 20; wsz <= BIG; wsz *= 4) {
        big[0] = sink, big[1] = (wsz - 8) / 4;
        CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_WR_SZ, &wsz, 4), 0);
        CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_WRITE, big, 8), 0);
    }
    free(big);
    /* asynchronous jobs on host buffers: not through the daemon */
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
    xd_stop(pid);
    free(buf);
}

/* Through the daemon too, a GPU-stream read waiting for data holds up
 * neither a write of results (its own channel, GPUW) nor register access. */
TEST(xfer_daemon_waiting_read_holds_up_nothing_else)
{
    xd_check_waiting_read(0);
}

struct client_read {
    struct emuc *c;
    int rc;
};

static void *client_read_gpu(void *arg)
{
    struct client_read *r = arg;
    uint8_t b[4096];
    r->rc = emuc_read(r->c, EMU_STREAM_GPU, b, sizeof b, 2000);
    return NULL;
}

/* The client: a RESET does not wait for a GPU-stream read that waits for
 * data (it once took that read's channel lock to drop what it had read
 * ahead, and held the control channel meanwhile); the read still ends by
 * its own timeout. (Through liboni a RESET waits for such a read anyway:
 * the driver options lock, docs/threads.md.) */
TEST(xfer_daemon_client_reset_beside_a_waiting_read)
{
    XD_START(pid, XFER_SPEC(0)); /* the GPU stream stays empty */
    struct emuc *c = NULL;
    char err[160] = "";
    CHECK_RC(emuc_open(xd_sock, XFER_SPEC(0), 2000, &c, err, sizeof err), 0);
    if (c) {
        struct client_read r = {c, 0};
        pthread_t t;
        int started = pthread_create(&t, NULL, client_read_gpu, &r) == 0;
        CHECK(started);
        struct timespec ts = {0, 100000000}; /* the reader is waiting by now */
        nanosleep(&ts, NULL);
        uint64_t t0 = oni_now_ns();
        CHECK_RC(emuc_write_config(c, ONI_CONFIG_RESET, 1, 2000), 0);
        uint32_t v = 1;
        CHECK_RC(emuc_read_config(c, ONI_CONFIG_RUNNING, &v, 2000), 0); /* the control channel serves */
        uint64_t took = oni_now_ns() - t0;
        CHECK(took < 1000000000u); /* half the read's timeout */
        if (started) {
            pthread_join(t, NULL);
            CHECK_RC(r.rc, ONI_ETIMEOUT);
        }
        emuc_close(c);
    }
    xd_stop(pid);
}

/* The GPU messages, raw: malformed bodies, unknown ids, a handle that cannot
 * be opened, the wrong channel. The session serves on after each. */
TEST(xfer_daemon_gpu_messages)
{
    XD_START(pid, CARD_SPEC);
    int ctrl = -1, gpu = -1, gpuw = -1;
    CHECK_RC(xd_session(&ctrl, &gpu, &gpuw), 0);
    struct emup_gpu_import imp = {.size = 4096};
    memset(imp.handle, 0xA5, sizeof imp.handle); /* no process exported this */
    uint32_t id = 99;
    /* a daemon without CUDA says so; with CUDA it cannot open the handle */
    CHECK_RC(xd_call(gpu, EMUP_GPU_IMPORT, &imp, sizeof imp, &id), gpu_available(NULL, 0) ? ONI_EINVALARG : ONI_ENOGPU);
    CHECK_EQ(id, 0);
    CHECK_RC(xd_call(ctrl, EMUP_GPU_IMPORT, &imp, sizeof imp, NULL), ONI_EINVALSTATE); /* GPU channel only */
    CHECK_RC(xd_call(gpu, EMUP_GPU_IMPORT, &imp, sizeof imp - 1, NULL), ONI_EBADFRAME);
    imp.size = 0;
    CHECK_RC(xd_call(gpu, EMUP_GPU_IMPORT, &imp, sizeof imp, NULL), ONI_EBADFRAME);

    struct emup_gpu_dma ok = {.id = 7, .len = 4096, .timeout_ms = 100};
    struct emup_gpu_dma d = ok;
    CHECK_RC(xd_call(gpu, EMUP_GPU_DMA, &d, sizeof d, NULL), ONI_ENOTPINNED); /* never imported */
    d.flags = EMUP_DMA_ASYNC, d.done_id = 8;
    CHECK_RC(xd_call(gpu, EMUP_GPU_DMA, &d, sizeof d, NULL), ONI_ENOTPINNED);
    struct emup_gpu_dma bad[] = {ok, ok, ok, ok, ok, ok, ok, ok, ok};
    bad[0].id = 0;
    bad[1].dir = 2;
    bad[2].len = 0;
    bad[3].timeout_ms = 0;
    bad[4].flags = EMUP_DMA_ASYNC; /* without a completion word */
    bad[5].done_id = 3;            /* a completion word without ASYNC */
    bad[6].flags = 8;
    bad[7].offset = UINT64_MAX - 100;
    bad[8].flags = EMUP_DMA_ASYNC, bad[8].done_id = 3, bad[8].done_offset = 2; /* unaligned word */
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (xd_call(gpu, EMUP_GPU_DMA, &bad[i], sizeof bad[i], NULL) != ONI_EBADFRAME)
            UNIT_FAIL("malformed GPU_DMA %zu accepted", i);
    CHECK_RC(xd_call(gpu, EMUP_GPU_DMA, &ok, sizeof ok - 4, NULL), ONI_EBADFRAME);
    /* each direction on its own channel; GPU memory on the GPU channel */
    d = ok;
    CHECK_RC(xd_call(gpuw, EMUP_GPU_DMA, &d, sizeof d, NULL), ONI_EINVALSTATE);
    d.dir = 1;
    CHECK_RC(xd_call(gpu, EMUP_GPU_DMA, &d, sizeof d, NULL), ONI_EINVALSTATE);
    CHECK_RC(xd_call(gpuw, EMUP_GPU_DMA, &d, sizeof d, NULL), ONI_ENOTPINNED);
    imp.size = 4096; /* GPU memory on either GPU channel */
    CHECK_RC(xd_call(gpuw, EMUP_GPU_IMPORT, &imp, sizeof imp, NULL), gpu_available(NULL, 0) ? ONI_EINVALARG : ONI_ENOGPU);
    struct emup_gpu_release gone = {12345, 0};
    CHECK_RC(xd_call(gpuw, EMUP_GPU_RELEASE, &gone, sizeof gone, NULL), ONI_ENOTPINNED);
    struct emup_write w = {EMU_STREAM_GPU_WRITE, 8, 100, 0, 0, 0};
    CHECK_RC(xd_call(gpu, EMUP_WRITE, &w, sizeof w, NULL), ONI_EINVALARG);

    struct emup_gpu_release rel = {12345, 0};
    CHECK_RC(xd_call(gpu, EMUP_GPU_RELEASE, &rel, sizeof rel, NULL), ONI_ENOTPINNED);
    rel.id = 0;
    CHECK_RC(xd_call(gpu, EMUP_GPU_RELEASE, &rel, sizeof rel, NULL), ONI_EBADFRAME);
    /* the session still works */
    struct emup_config cfg = {ONI_CONFIG_RUNNING, 0};
    uint32_t running = 99;
    CHECK_RC(xd_call(ctrl, EMUP_CONFIG_READ, &cfg, sizeof cfg, &running), 0);
    CHECK(running <= 1);
    close(gpuw);
    close(gpu);
    close(ctrl);
    xd_stop(pid);
}

/* A host read of the GPU stream that the daemon answers with ONI_ETIMEOUT
 * (nothing routed there) leaves nothing pending: a GPU_DMA read after it
 * gets its own answer at once (here ONI_ENOTPINNED for an id never
 * imported), not a wait for an answer that already came. */
TEST(xfer_daemon_read_answered_timeout_leaves_nothing_pending)
{
    XD_START(pid, XFER_SPEC(0)); /* the GPU stream stays empty */
    struct emuc *c = NULL;
    char err[200] = "";
    CHECK_RC(emuc_open(xd_sock, XFER_SPEC(0), 2000, &c, err, sizeof err), 0);
    if (c) {
        static uint8_t buf[4096];
        CHECK_RC(emuc_read(c, EMU_STREAM_GPU, buf, sizeof buf, 50), ONI_ETIMEOUT);
        for (int i = 0; i < 3; i++) {
            struct gpustream_remote d = {.write = 0, .id = 777, .len = 8, .buf = buf};
            uint64_t t0 = oni_now_ns();
            CHECK_RC(emuc_gpu_dma(c, &d, 300), ONI_ENOTPINNED);
            CHECK(oni_now_ns() - t0 < 250000000u); /* not the 300 ms timeout */
        }
        emuc_close(c);
    }
    xd_stop(pid);
}

/* With the session c (a 30 kHz source of 776-byte frames) through daemon pid: start, read a little (the
 * daemon reads ahead), then write config reg = value while the daemon is
 * stopped, so the client gives up (ONI_ETIMEOUT) before the answer comes.
 * The daemon runs again on return. */
static void late_config_write(pid_t pid, struct emuc *c, uint32_t reg, uint32_t value, uint8_t *buf)
{
    CHECK_RC(emuc_write_config(c, ONI_CONFIG_RUNNING, 1, 1000), 0);
    usleep(100000);
    CHECK_RC(emuc_read(c, EMU_STREAM_DATA, buf, 16, 1000), 16); /* the daemon reads ahead */
    kill(pid, SIGSTOP);
    waitpid(pid, NULL, WUNTRACED);
    CHECK_RC(emuc_write_config(c, reg, value, 50), ONI_ETIMEOUT);
    kill(pid, SIGCONT);
}

/* The default stream gives nothing more: what the client held was dropped. */
static void check_read_ahead_dropped(struct emuc *c, uint8_t *buf, size_t cap)
{
    size_t total = 0;
    int rc;
    while ((rc = emuc_read(c, EMU_STREAM_DATA, buf, cap, 100)) > 0)
        total += (size_t)rc;
    CHECK_EQ(total, 0);
    CHECK_RC(rc, ONI_ETIMEOUT);
}

/* A RESET whose answer comes too late (the daemon stopped meanwhile) is
 * still carried out: what the client read ahead before it is dropped, as
 * in-process, where the card's FIFO is emptied (realtime mode, where the
 * daemon reads ahead). */
TEST(xfer_daemon_late_reset_drops_read_ahead)
{
    XD_START(pid, "devices=testcore:bytes=776:rate=23280000");
    struct emuc *c = NULL;
    char err[200] = "";
    CHECK_RC(emuc_open(xd_sock, "devices=testcore:bytes=776:rate=23280000", 2000, &c, err, sizeof err), 0);
    if (c) {
        static uint8_t buf[1 << 16];
        late_config_write(pid, c, ONI_CONFIG_RESET, 1, buf);
        usleep(100000);
        uint32_t run = 9;
        CHECK_RC(emuc_read_config(c, ONI_CONFIG_RUNNING, &run, 1000), 0);
        CHECK_EQ(run, 0);
        check_read_ahead_dropped(c, buf, sizeof buf);
        emuc_close(c);
    }
    xd_stop(pid);
}

/* A stop (RUNNING 0) whose answer comes too late also empties the card's
 * default FIFO: once its answer comes, with the card's flush count, what the
 * client read ahead before the stop is dropped. Unlike a RESET, a late stop
 * is not counted before its answer comes. */
TEST(xfer_daemon_late_stop_drops_read_ahead)
{
    XD_START(pid, "devices=testcore:bytes=776:rate=23280000");
    struct emuc *c = NULL;
    char err[200] = "";
    CHECK_RC(emuc_open(xd_sock, "devices=testcore:bytes=776:rate=23280000", 2000, &c, err, sizeof err), 0);
    if (c) {
        static uint8_t buf[1 << 16];
        late_config_write(pid, c, ONI_CONFIG_RUNNING, 0, buf);
        uint32_t run = 9;
        CHECK_RC(emuc_read_config(c, ONI_CONFIG_RUNNING, &run, 2000), 0); /* after the late answer */
        CHECK_EQ(run, 0);
        check_read_ahead_dropped(c, buf, sizeof buf);
        emuc_close(c);
    }
    xd_stop(pid);
}

/* A late READ answer carries the flush count from when its bytes left the
 * card: received after a RESET, it must not lower the count the client
 * keeps, and its bytes, from before the RESET, are dropped. */
TEST(xfer_daemon_late_read_after_a_reset_is_dropped)
{
    XD_START(pid, "devices=testcore:bytes=776:rate=23280000");
    struct emuc *c = NULL;
    char err[200] = "";
    CHECK_RC(emuc_open(xd_sock, "devices=testcore:bytes=776:rate=23280000", 2000, &c, err, sizeof err), 0);
    if (c) {
        static uint8_t buf[1 << 16];
        CHECK_RC(emuc_write_config(c, ONI_CONFIG_RUNNING, 1, 1000), 0);
        usleep(100000); /* frames in the card's FIFO */
        kill(pid, SIGSTOP);
        waitpid(pid, NULL, WUNTRACED);
        CHECK_RC(emuc_read(c, EMU_STREAM_DATA, buf, 16, 50), ONI_ETIMEOUT); /* answered once the daemon runs */
        kill(pid, SIGCONT);
        usleep(100000); /* the answer, with what the FIFO held, is sent before the RESET below */
        CHECK_RC(emuc_write_config(c, ONI_CONFIG_RESET, 1, 2000), 0);
        check_read_ahead_dropped(c, buf, sizeof buf);
        emuc_close(c);
    }
    xd_stop(pid);
}

/* A late READ answer that ends exactly at the ring's end, then the answer
 * to the next READ, which starts the next lap: two pieces, never one read
 * across the ring's end (that would copy bytes of the next ring). */
TEST(xfer_daemon_late_answer_at_the_ring_end)
{
    uint32_t core = 0;
    oni_ctx local = xfer_open(XFER_SPEC(1), &core, NULL); /* the core's dev_idx */
    REQUIRE(local);
    oni_destroy_ctx(local);
    XD_START(pid, XFER_SPEC(1));
    struct emuc *c = NULL;
    char err[200] = "";
    CHECK_RC(emuc_open(xd_sock, XFER_SPEC(1), 2000, &c, err, sizeof err), 0);
    enum { MB = 1 << 20, RING = 8 * MB }; /* the GPU ring (docs/daemon.md) */
    uint8_t *buf = malloc(2 * MB);
    if (c && buf) {
        struct xcheck x;
        xcheck_init(&x, core);
        CHECK_RC(emuc_write_config(c, ONI_CONFIG_RUNNING, 1, 2000), 0);
        for (int i = 0; i < RING / MB - 1; i++) { /* fast mode: exactly what is asked */
            CHECK_RC(emuc_read(c, EMU_STREAM_GPU, buf, MB, 2000), MB);
            xcheck_feed(&x, buf, MB);
        }
        kill(pid, SIGSTOP);
        waitpid(pid, NULL, WUNTRACED);
        CHECK_RC(emuc_read(c, EMU_STREAM_GPU, buf, MB, 50), ONI_ETIMEOUT); /* answered late: up to RING */
        kill(pid, SIGCONT);
        size_t got = 0;
        while (got < 3 * MB) {
            int rc = emuc_read(c, EMU_STREAM_GPU, buf, 2 * MB, 2000);
            CHECK(rc > 0);
            if (rc <= 0)
                break;
            xcheck_feed(&x, buf, (size_t)rc);
            got += (size_t)rc;
        }
        CHECK_EQ(x.errors, 0);
        CHECK(x.words > 0);
    }
    free(buf);
    emuc_close(c);
    xd_stop(pid);
}

/* The same with the data read first, before any call on the control
 * channel has received the RESET's late answer: a RESET not answered in time
 * already counts as a flush, so what was read ahead before it is dropped. */
TEST(xfer_daemon_unanswered_reset_drops_read_ahead)
{
    XD_START(pid, "devices=testcore:bytes=776:rate=23280000");
    struct emuc *c = NULL;
    char err[200] = "";
    CHECK_RC(emuc_open(xd_sock, "devices=testcore:bytes=776:rate=23280000", 2000, &c, err, sizeof err), 0);
    if (c) {
        static uint8_t buf[1 << 16];
        late_config_write(pid, c, ONI_CONFIG_RESET, 1, buf);
        check_read_ahead_dropped(c, buf, sizeof buf);
        emuc_close(c);
    }
    xd_stop(pid);
}

/* A stop empties only the card's default-stream FIFO; the GPU stream stays
 * readable, and reads on after the next start. Through the daemon the
 * client once compared every ring with the default FIFO's flush count, so
 * after one pause every GPU-stream answer read as taken before a flush and
 * was dropped unseen: the GPU stream gave nothing until the timeout. */
TEST(xfer_daemon_gpu_stream_reads_on_after_a_pause)
{
    const char *spec = "devices=testcore:bytes=1024:route=1;mode=fast;link=unlimited";
    XD_START(pid, spec);
    struct emuc *c = NULL;
    char err[160] = "";
    CHECK_RC(emuc_open(xd_sock, spec, 2000, &c, err, sizeof err), 0);
    if (c) {
        static uint8_t buf[4096];
        CHECK_RC(emuc_write_config(c, ONI_CONFIG_RUNNING, 1, 1000), 0);
        CHECK(emuc_read(c, EMU_STREAM_GPU, buf, sizeof buf, 1000) > 0);
        for (int i = 0; i < 2; i++) {
            CHECK_RC(emuc_write_config(c, ONI_CONFIG_RUNNING, 0, 1000), 0);
            CHECK_RC(emuc_write_config(c, ONI_CONFIG_RUNNING, 1, 1000), 0);
            CHECK(emuc_read(c, EMU_STREAM_GPU, buf, sizeof buf, 1000) > 0);
        }
        emuc_close(c);
    }
    xd_stop(pid);
}
