/* test_net_emu.c - the emulated card in another process: `onigpu serve` of
 * the emu driver as a process of its own, reached with the net driver over
 * UCX (shared memory on this machine; CTest runs the program once more with
 * UCX_TLS=tcp). The same device table, registers and both data streams as
 * the card in this process, write frames, the emu options, a fresh card per
 * session handed over at once, a stopped server (timeouts), a killed one
 * (ONI_EDISCONNECTED within a bounded time) and the server's stop signals.
 * The protocol's own rules and faults are test_net.c's, on the test driver. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>
#include "oni.h"
#include "onigpu.h"
#include "oniemu.h"
#include "oninet.h"
#include "oni/util/clock.h"
#include "oni/util/wire.h"
#include "proc.h"
#include "signals.h"
#include "unit.h"

/* Emulated time and one seed: the card's frames are the same wherever it runs. */
#define CARD_SPEC "mode=fast;seed=11"

/* An `onigpu serve --driver emu` process on a free loopback port. */
struct served {
    struct proc p;
    FILE *out; /* its stdout: one line per session start and end */
    char addr[96];
};

/* Start it; 0 once it prints the address it listens on, -1 (the test
 * skips) when there is no built onigpu, 1 when it did not start. */
static int serve_start(struct served *sv)
{
    char exe[4096];
    if (proc_bin("onigpu", exe, sizeof exe))
        return -1;
    const char *argv[] = {exe, "serve", "--driver", "emu", "--listen", "127.0.0.1:0", NULL};
    struct proc_opts o = {.capture = PROC_STDOUT};
    if (proc_start(&sv->p, exe, argv, &o))
        return 1;
    sv->out = fdopen(sv->p.out, "r");
    sv->p.out = -1; /* sv->out's now */
    char line[256];
    const char *at = sv->out && fgets(line, sizeof line, sv->out) ? strstr(line, " on ") : NULL;
    if (!at) {
        proc_stop(&sv->p, SIGKILL, -1);
        return 1;
    }
    snprintf(sv->addr, sizeof sv->addr, "%s", at + 4);
    sv->addr[strcspn(sv->addr, "\n")] = 0;
    return 0;
}

/* Send sig and wait up to ms: the wait status (proc_wait). */
static int serve_stop(struct served *sv, int sig, int ms)
{
    int st = proc_stop(&sv->p, sig, ms);
    if (sv->out)
        fclose(sv->out);
    sv->out = NULL;
    return st;
}

/* Stop pid (SIGSTOP) and wait until the kernel has stopped it (state T in
 * /proc/PID/stat): a signal is delivered when its process next runs. 0 once
 * stopped, -1 if it did not stop within 5 s. */
static int stop_process(pid_t pid)
{
    kill(pid, SIGSTOP);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    for (int i = 0; i < 500; i++) {
        FILE *f = fopen(path, "r");
        char state = 0;
        int ok = f && fscanf(f, "%*d (%*[^)]) %c", &state) == 1;
        if (f)
            fclose(f);
        if (ok && (state == 'T' || state == 't'))
            return 0;
        usleep(10000);
    }
    return -1;
}

#define NEED_SERVER(sv)                                                                \
    do {                                                                               \
        int need_rc_ = serve_start(sv);                                                \
        if (need_rc_ < 0)                                                              \
            SKIP("no built onigpu (ONIGPU_BIN)");                                      \
        REQUIRE(need_rc_ == 0);                                                        \
    } while (0)

/* A context of the card of spec: through net at addr, or in this process
 * (addr NULL); initialized, its timeout timeout_ms (0: the default). NULL
 * with *rc the failure. */
static oni_ctx card_open(const char *addr, const char *spec, uint32_t timeout_ms, int *rc)
{
    oni_ctx ctx = oni_create_ctx(addr ? "net" : "emu");
    if (!ctx) {
        *rc = ONI_EINVALARG;
        return NULL;
    }
    *rc = addr ? oni_set_driver_opt(ctx, ONI_DRV_NET_ADDR, addr, strlen(addr) + 1) : 0;
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

/* The device table (the caller frees it), its length in *n; NULL on failure. */
static oni_device_t *device_table(oni_ctx ctx, size_t *n)
{
    oni_size_t num = 0;
    size_t len = sizeof num;
    if (oni_get_opt(ctx, ONI_OPT_NUMDEVICES, &num, &len) || !num)
        return NULL;
    oni_device_t *t = calloc(num, sizeof *t);
    len = num * sizeof *t;
    if (t && oni_get_opt(ctx, ONI_OPT_DEVICETABLE, t, &len)) {
        free(t);
        return NULL;
    }
    *n = num;
    return t;
}

/* nframes frames of the default stream after RUNNING = 1, each as its
 * header fields and payload, packed into out: the bytes used (0: failed). */
static size_t capture(oni_ctx ctx, int nframes, uint8_t *out, size_t cap)
{
    oni_reg_val_t run = 1;
    if (oni_set_opt(ctx, ONI_OPT_RUNNING, &run, sizeof run))
        return 0;
    size_t len = 0;
    for (int i = 0; i < nframes; i++) {
        oni_frame_t *f;
        if (oni_read_frame(ctx, &f) <= 0)
            return 0;
        size_t need = sizeof f->time + sizeof f->dev_idx + sizeof f->data_sz + f->data_sz;
        if (len + need > cap) {
            oni_destroy_frame(f);
            break;
        }
        memcpy(out + len, &f->time, sizeof f->time);
        memcpy(out + len + 8, &f->dev_idx, sizeof f->dev_idx);
        memcpy(out + len + 12, &f->data_sz, sizeof f->data_sz);
        memcpy(out + len + 16, f->data, f->data_sz);
        len += need;
        oni_destroy_frame(f);
    }
    return len;
}

static const oni_device_t *first_writable(const oni_device_t *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (t[i].write_size)
            return &t[i];
    return NULL;
}

/* The same card through serve as in this process: device table, every hub
 * manager's registers, the link, the frames of the default stream byte for
 * byte, the stream statistics and a malformed write frame counted. */
TEST(net_emu_same_as_in_process)
{
    struct served sv;
    NEED_SERVER(&sv);
    int rc;
    oni_ctx a = card_open(NULL, CARD_SPEC, 0, &rc);
    CHECK_RC(rc, 0);
    oni_ctx b = card_open(sv.addr, CARD_SPEC, 0, &rc);
    CHECK_RC(rc, 0);
    size_t na = 0, nb = 0;
    oni_device_t *ta = a ? device_table(a, &na) : NULL, *tb = b ? device_table(b, &nb) : NULL;
    uint8_t *ba = malloc(8u << 20), *bb = malloc(8u << 20);
    if (!ta || !tb || !ba || !bb) {
        CHECK(0);
        goto out;
    }
    CHECK_EQ(na, nb);
    CHECK(na == nb && !memcmp(ta, tb, na * sizeof *ta));
    int hubs = 0;
    for (size_t i = 0; i < na; i++) {
        if ((ta[i].idx & 0xFF) != 0xFE)
            continue;
        hubs++;
        for (oni_reg_addr_t r = 0; r <= 5; r++) {
            oni_reg_val_t va = 0, vb = 0;
            int ra = oni_read_reg(a, ta[i].idx, r, &va), rb = oni_read_reg(b, tb[i].idx, r, &vb);
            CHECK_EQ(ra, rb);
            CHECK_EQ(va, vb);
        }
    }
    CHECK(hubs > 0);
    oniemu_link_t la, lb;
    size_t sa = sizeof la, sb = sizeof lb;
    CHECK_RC(oni_get_driver_opt(a, ONI_DRV_EMU_LINK, &la, &sa), 0);
    CHECK_RC(oni_get_driver_opt(b, ONI_DRV_EMU_LINK, &lb, &sb), 0);
    CHECK_EQ(sb, sizeof lb);
    CHECK(!strcmp(la.name, lb.name) && la.bandwidth_Bps == lb.bandwidth_Bps);
    size_t la_n = capture(a, 5000, ba, 8u << 20), lb_n = capture(b, 5000, bb, 8u << 20);
    CHECK(la_n > 0);
    CHECK_EQ(la_n, lb_n);
    CHECK(la_n == lb_n && !memcmp(ba, bb, la_n));
    onigpu_stream_stats_t st;
    size_t ss = sizeof st;
    CHECK_RC(oni_get_driver_opt(b, ONI_DRV_STREAM_STATS, &st, &ss), 0);
    CHECK(st.fifo_capacity[0] > 0);
    CHECK_EQ(st.bad_wframes, 0);
    /* a write frame whose wire header names no device: refused and counted by the served card */
    const oni_device_t *w = first_writable(tb, nb);
    REQUIRE(w && w->write_size <= 1024);
    char payload[1024] = {0};
    oni_frame_t *f = NULL;
    CHECK(oni_create_frame(b, &f, w->idx, payload, w->write_size) > 0);
    REQUIRE(f);
    uint32_t bogus_idx = 0xDEAD;
    memcpy(f->data - ONI_WFRAMEHEADERSZ, &bogus_idx, 4);
    CHECK_RC(oni_write_frame(b, f), ONI_EBADFRAME);
    oni_destroy_frame(f);
    ss = sizeof st;
    CHECK_RC(oni_get_driver_opt(b, ONI_DRV_STREAM_STATS, &st, &ss), 0);
    CHECK_EQ(st.bad_wframes, 1);
out:
    free(ba);
    free(bb);
    free(ta);
    free(tb);
    if (a)
        oni_destroy_ctx(a);
    if (b)
        oni_destroy_ctx(b);
    CHECK_EQ(proc_exit_code(serve_stop(&sv, SIGTERM, 10000)), 0);
}

/* Blocks of the GPU stream into host memory (ONI_DRV_READ): the same bytes
 * as in this process, also after a pause (a stop empties the default
 * stream's FIFO only: the GPU stream reads on after the next start), and a
 * block the buffer cannot hold refused as there. */
TEST(net_emu_gpu_stream_host_blocks)
{
    struct served sv;
    NEED_SERVER(&sv);
    const char *spec = "devices=testcore:route=1;mode=fast;seed=3";
    int rc;
    oni_ctx both[2] = {card_open(NULL, spec, 0, &rc), NULL};
    CHECK_RC(rc, 0);
    both[1] = card_open(sv.addr, spec, 0, &rc);
    CHECK_RC(rc, 0);
    enum { BLOCK = 64 << 10, NBLOCK = 8, PAUSE_AT = 5 };
    uint8_t *buf[2] = {calloc(NBLOCK, BLOCK), calloc(NBLOCK, BLOCK)};
    if (both[0] && both[1] && buf[0] && buf[1]) {
        uint32_t sz = BLOCK;
        oni_reg_val_t run = 1;
        int small[2];
        for (int k = 0; k < 2; k++) {
            CHECK_RC(oni_set_driver_opt(both[k], ONI_DRV_RD_SZ, &sz, sizeof sz), 0);
            CHECK_RC(oni_set_opt(both[k], ONI_OPT_RUNNING, &run, sizeof run), 0);
            for (int i = 0; i < NBLOCK; i++) {
                onigpu_buf_t ob = {buf[k] + (size_t)i * BLOCK, BLOCK};
                if (i == PAUSE_AT) { /* stop and start again */
                    oni_reg_val_t stop = 0;
                    CHECK_RC(oni_set_opt(both[k], ONI_OPT_RUNNING, &stop, sizeof stop), 0);
                    CHECK_RC(oni_set_opt(both[k], ONI_OPT_RUNNING, &run, sizeof run), 0);
                }
                CHECK_RC(oni_set_driver_opt(both[k], ONI_DRV_READ, &ob, sizeof ob), 0);
            }
            onigpu_buf_t tiny = {buf[k], BLOCK / 2};
            small[k] = oni_set_driver_opt(both[k], ONI_DRV_READ, &tiny, sizeof tiny);
        }
        CHECK(!memcmp(buf[0], buf[1], (size_t)NBLOCK * BLOCK));
        size_t nonzero = 0;
        for (size_t i = 0; i < (size_t)NBLOCK * BLOCK; i++)
            nonzero += buf[0][i] != 0;
        CHECK(nonzero > 0);
        CHECK(small[0] < 0);
        CHECK_RC(small[1], small[0]);
    }
    free(buf[0]);
    free(buf[1]);
    for (int k = 0; k < 2; k++)
        if (both[k])
            oni_destroy_ctx(both[k]);
    CHECK_EQ(proc_exit_code(serve_stop(&sv, SIGTERM, 10000)), 0);
}

/* Write frames reach the served card's device: its counter of accepted
 * frames, read back through the same session. */
TEST(net_emu_write_frames)
{
    struct served sv;
    NEED_SERVER(&sv);
    int rc;
    oni_ctx ctx = card_open(sv.addr, "devices=stim;mode=fast", 0, &rc);
    CHECK_RC(rc, 0);
    size_t n = 0;
    oni_device_t *t = ctx ? device_table(ctx, &n) : NULL;
    const oni_device_t *w = t ? first_writable(t, n) : NULL;
    if (w && w->write_size <= 256) {
        oni_reg_val_t before = 0, after = 0;
        CHECK_RC(oni_read_reg(ctx, w->idx, ONIEMU_REG_WFRAMES, &before), 0);
        uint8_t payload[256] = {0};
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
    } else {
        CHECK(0); /* no writable device of the size expected */
    }
    free(t);
    if (ctx)
        oni_destroy_ctx(ctx);
    CHECK_EQ(proc_exit_code(serve_stop(&sv, SIGTERM, 10000)), 0);
}

/* The emu driver's options through the server: the spec the card was made
 * from, the mode, the GPU stream's presence, read-only options refused by
 * the served driver, and the truth file (a path on the server's machine)
 * refused by the server. */
TEST(net_emu_driver_options)
{
    struct served sv;
    NEED_SERVER(&sv);
    int rc;
    const char *spec = "devices=rhd2164;mode=fast;seed=5";
    oni_ctx ctx = card_open(sv.addr, spec, 0, &rc);
    CHECK_RC(rc, 0);
    if (ctx) {
        char got[128];
        size_t len = sizeof got;
        CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_EMU_SPEC, got, &len), 0);
        CHECK(!strcmp(got, spec));
        CHECK_EQ(len, strlen(spec) + 1);
        uint32_t v = 7;
        len = sizeof v;
        CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_EMU_MODE, &v, &len), 0);
        CHECK_EQ(v, 1);
        len = sizeof v;
        CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_GPU_STREAM, &v, &len), 0);
        CHECK_EQ(v, 1);
        CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_EMU_MODE, &v, sizeof v), ONI_EREADONLY);
        /* a spec once the card is made: refused by the served driver as by a local one */
        CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_EMU_SPEC, spec, strlen(spec) + 1), ONI_EINVALSTATE);
        const char *truth = "/tmp/onigpu-net-emu-truth.csv";
        CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_EMU_TRUTH_FILE, truth, strlen(truth) + 1), ONI_EUNIMPL);
        CHECK(access(truth, F_OK) != 0);
        uint32_t rd = 8192, back = 0;
        CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_RD_SZ, &rd, sizeof rd), 0);
        len = sizeof back;
        CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_RD_SZ, &back, &len), 0);
        CHECK_EQ(back, rd);
        oni_destroy_ctx(ctx);
    }
    /* a bad card spec fails the init with the served driver's code */
    ctx = card_open(sv.addr, "nosuchkey=1", 0, &rc);
    CHECK(ctx == NULL);
    CHECK_RC(rc, ONI_EINVALARG);
    CHECK_EQ(proc_exit_code(serve_stop(&sv, SIGTERM, 10000)), 0);
}

/* One session at a time, each with a card of its own: a second client is
 * ONI_EBUSY; the next one, opened as soon as the first is destroyed, gets
 * the server at once and a fresh card, stopped. */
TEST(net_emu_card_per_session_handed_over)
{
    struct served sv;
    NEED_SERVER(&sv);
    int rc;
    oni_ctx a = card_open(sv.addr, "devices=stim;mode=fast", 0, &rc);
    CHECK_RC(rc, 0);
    oni_ctx b = card_open(sv.addr, "devices=stim;mode=fast", 0, &rc);
    CHECK(b == NULL);
    CHECK_RC(rc, ONI_EBUSY);
    for (int round = 0; round < 3 && a; round++) {
        size_t n = 0;
        oni_device_t *t = device_table(a, &n);
        const oni_device_t *w = t ? first_writable(t, n) : NULL;
        REQUIRE(w && w->write_size <= 256);
        oni_reg_val_t count = 99, run = 1;
        CHECK_RC(oni_read_reg(a, w->idx, ONIEMU_REG_WFRAMES, &count), 0);
        CHECK_EQ(count, 0); /* a new card: nothing of the last session's */
        size_t len = sizeof run;
        CHECK_RC(oni_get_opt(a, ONI_OPT_RUNNING, &run, &len), 0);
        CHECK_EQ(run, 0);
        run = 1;
        CHECK_RC(oni_set_opt(a, ONI_OPT_RUNNING, &run, sizeof run), 0);
        uint8_t payload[256] = {0};
        for (int i = 0; i < 5; i++) {
            oni_frame_t *f = NULL;
            CHECK(oni_create_frame(a, &f, w->idx, payload, w->write_size) > 0);
            if (f)
                CHECK(oni_write_frame(a, f) > 0);
            oni_destroy_frame(f);
        }
        free(t);
        oni_destroy_ctx(a);
        a = card_open(sv.addr, "devices=stim;mode=fast", 0, &rc); /* at once: never ONI_EBUSY */
        CHECK_RC(rc, 0);
    }
    if (a)
        oni_destroy_ctx(a);
    CHECK_EQ(proc_exit_code(serve_stop(&sv, SIGTERM, 10000)), 0);
}

/* A server that is stopped (SIGSTOP) does not answer: the call in progress
 * returns ONI_ETIMEOUT after its answer deadline (2 x the timeout + 210 ms,
 * docs/net.md) and not much later; the session is over then, so every later
 * call returns ONI_EDISCONNECTED at once, however many. Continued, the
 * server ends that session with the card stopped and serves the next. */
TEST(net_emu_stopped_server_times_out)
{
    struct served sv;
    NEED_SERVER(&sv);
    int rc;
    const uint32_t t_ms = 300;
    oni_ctx ctx = card_open(sv.addr, CARD_SPEC, t_ms, &rc);
    CHECK_RC(rc, 0);
    if (ctx) {
        oni_reg_val_t run = 1;
        CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &run, sizeof run), 0);
        size_t n = 0;
        oni_device_t *t = device_table(ctx, &n);
        REQUIRE(t);
        CHECK(stop_process(sv.p.pid) == 0);
        oni_reg_val_t v;
        uint64_t t0 = oni_now_ns();
        rc = oni_read_reg(ctx, t[0].idx, 0, &v);
        double took_ms = (oni_now_ns() - t0) / 1e6;
        fprintf(stderr, "  a register read of the stopped server: %.0f ms (deadline %u ms)\n", took_ms,
                2 * t_ms + 210);
        CHECK_RC(rc, ONI_ETIMEOUT);
        CHECK(took_ms >= 2 * t_ms);
        CHECK(took_ms < 2 * t_ms + 210 + 3000); /* bounded: the margin is a loaded CI machine's */
        t0 = oni_now_ns();
        for (int i = 0; i < 200; i++) {
            oni_frame_t *f;
            CHECK_RC(oni_read_reg(ctx, t[0].idx, 0, &v), ONI_EDISCONNECTED);
            CHECK_RC(oni_read_frame(ctx, &f), ONI_EDISCONNECTED);
        }
        CHECK(oni_now_ns() - t0 < 1000000000ull);
        free(t);
        kill(sv.p.pid, SIGCONT);
        oni_destroy_ctx(ctx);
    } else {
        kill(sv.p.pid, SIGCONT);
    }
    rc = ONI_EBUSY;
    uint64_t t0 = oni_now_ns();
    while (rc == ONI_EBUSY && oni_now_ns() - t0 < 20000000000ull) {
        ctx = card_open(sv.addr, CARD_SPEC, 0, &rc);
        if (rc == ONI_EBUSY)
            usleep(100000);
    }
    CHECK_RC(rc, 0);
    if (ctx) {
        oni_reg_val_t run = 1;
        size_t len = sizeof run;
        CHECK_RC(oni_get_opt(ctx, ONI_OPT_RUNNING, &run, &len), 0);
        CHECK_EQ(run, 0);
        oni_destroy_ctx(ctx);
    }
    CHECK_EQ(proc_exit_code(serve_stop(&sv, SIGTERM, 10000)), 0);
}

/* A block read that waits in the served card (its GPU stream carries
 * nothing) when the server is killed (SIGKILL): ONI_EDISCONNECTED, soon
 * after the kill and long before the read's 5 s timeout. */
struct waiting_read {
    oni_ctx ctx;
    int rc;
    _Atomic uint64_t done_ns;
};

static void *read_block(void *arg)
{
    struct waiting_read *w = arg;
    static uint8_t buf[4096];
    onigpu_buf_t ob = {buf, sizeof buf};
    w->rc = oni_set_driver_opt(w->ctx, ONI_DRV_READ, &ob, sizeof ob);
    atomic_store(&w->done_ns, oni_now_ns());
    return NULL;
}

TEST(net_emu_killed_server_ends_a_waiting_read)
{
    struct served sv;
    NEED_SERVER(&sv);
    int rc;
    struct waiting_read w = {card_open(sv.addr, "devices=rhd2164", 5000, &rc), 0, 0};
    CHECK_RC(rc, 0);
    if (!w.ctx) {
        serve_stop(&sv, SIGKILL, -1);
        return;
    }
    uint32_t sz = 4096;
    oni_reg_val_t run = 1;
    CHECK_RC(oni_set_driver_opt(w.ctx, ONI_DRV_RD_SZ, &sz, sizeof sz), 0);
    CHECK_RC(oni_set_opt(w.ctx, ONI_OPT_RUNNING, &run, sizeof run), 0);
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, read_block, &w) == 0);
    usleep(300000); /* the read waits in the card */
    CHECK_EQ(atomic_load(&w.done_ns), 0);
    uint64_t killed = oni_now_ns();
    serve_stop(&sv, SIGKILL, 5000);
    pthread_join(th, NULL);
    double after_ms = (atomic_load(&w.done_ns) - killed) / 1e6;
    fprintf(stderr, "  the waiting read ended %.0f ms after the kill\n", after_ms);
    CHECK_RC(w.rc, ONI_EDISCONNECTED);
    CHECK(after_ms < 3000); /* found gone, not waited out (2 x 5 s + 210 ms) */
    oni_reg_val_t v;
    CHECK_RC(oni_read_reg(w.ctx, 0, 0, &v), ONI_EDISCONNECTED);
    oni_destroy_ctx(w.ctx);
}

/* SIGTERM and SIGINT stop the server (exit 0) promptly, with a session
 * open or none; the session's client gets ONI_EDISCONNECTED. With a session
 * open (the server's link threads and the card's running) one thread takes
 * the stop signals: stopsig's, in sigwait. */
TEST(net_emu_serve_stop_signals)
{
    static const int sigs[] = {SIGTERM, SIGINT};
    for (size_t k = 0; k < 2; k++) {
        for (int with_client = 0; with_client < 2; with_client++) {
            struct served sv;
            NEED_SERVER(&sv);
            int rc = 0;
            oni_ctx ctx = with_client ? card_open(sv.addr, CARD_SPEC, 1000, &rc) : NULL;
            CHECK_RC(rc, 0);
            if (ctx) {
                CHECK(thread_count(sv.p.pid) > 2);
                CHECK_EQ(threads_taking(sv.p.pid, SIGTERM), 1);
                CHECK_EQ(threads_taking(sv.p.pid, SIGINT), 1);
            }
            uint64_t t0 = oni_now_ns();
            int st = serve_stop(&sv, sigs[k], 10000);
            if (proc_exit_code(st) != 0)
                UNIT_FAIL("signal %d, %s client: wait status %d, want exit 0", sigs[k], with_client ? "a" : "no", st);
            CHECK(oni_now_ns() - t0 < 5000000000ull);
            if (ctx) {
                oni_reg_val_t v;
                CHECK_RC(oni_read_reg(ctx, 0, 0, &v), ONI_EDISCONNECTED);
                oni_destroy_ctx(ctx);
            }
        }
    }
}

