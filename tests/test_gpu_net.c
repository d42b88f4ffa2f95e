/* test_gpu_net.c - blocks of the GPU streams through the net driver into and
 * out of GPU memory (cudaMalloc): from a server in this process each goes
 * through a host staging buffer of the driver; from a server process on
 * this machine (`onigpu serve`, sharing the GPU) the served card moves it
 * straight into (out of) the allocation, shared by CUDA IPC (docs/net.md).
 * The host-memory path is test_net's. Skips without a GPU. */
#include "drivers/net/netserve.h"
#include "oninet.h"
#include "proc.h"
#include "xfer_check.h"

#define NEED_GPU()                                                                     \
    do {                                                                               \
        char why[200];                                                                 \
        if (!gpu_available(why, sizeof why))                                           \
            SKIP("%s", why);                                                           \
    } while (0)

/* The emulated card's server on a loopback port: on a thread of this
 * process (s), or an `onigpu serve` process (p, when p.pid). */
struct server {
    struct netserve *s;
    struct proc p;
    char addr[96];
};

static int start_thread(struct server *sv)
{
    char err[256];
    memset(sv, 0, sizeof *sv);
    if (netserve_open("emu", "127.0.0.1:0", NULL, &sv->s, err, sizeof err))
        return -1;
    if (netserve_start(sv->s)) {
        netserve_close(sv->s);
        return -1;
    }
    snprintf(sv->addr, sizeof sv->addr, "%s", netserve_addr(sv->s));
    return 0;
}

/* 0, or -1 when it did not start (no line with its address in 20 s). */
static int start_process(struct server *sv, const char *exe)
{
    memset(sv, 0, sizeof *sv);
    const char *argv[] = {exe, "serve", "--driver", "emu", "--listen", "127.0.0.1:0", NULL};
    struct proc_opts o = {.capture = PROC_STDOUT};
    if (proc_start(&sv->p, exe, argv, &o))
        return -1;
    char line[256] = "";
    size_t n = 0;
    long long end = proc_now_ms() + 20000;
    while (!strchr(line, '\n') && n < sizeof line - 1 && proc_now_ms() < end) {
        struct pollfd pf = {sv->p.out, POLLIN, 0};
        if (poll(&pf, 1, 100) == 1) {
            if (read(sv->p.out, line + n, 1) != 1)
                break;
            line[++n] = 0;
        }
    }
    const char *at = strstr(line, " on ");
    if (!at) {
        proc_stop(&sv->p, SIGKILL, -1);
        return -1;
    }
    snprintf(sv->addr, sizeof sv->addr, "%s", at + 4);
    sv->addr[strcspn(sv->addr, "\n")] = 0;
    return 0;
}

/* A net context on sv's emulated card of xfer_check.h, initialized; NULL
 * on failure. */
static oni_ctx open_served(struct server *sv)
{
    const char *addr = sv->addr, *spec = XFER_SPEC(1);
    oni_ctx ctx = oni_create_ctx("net");
    if (ctx && !oni_set_driver_opt(ctx, ONI_DRV_NET_ADDR, addr, strlen(addr) + 1) &&
        !oni_set_driver_opt(ctx, ONI_DRV_EMU_SPEC, spec, strlen(spec) + 1) && !oni_init_ctx(ctx, -1))
        return ctx;
    if (ctx)
        oni_destroy_ctx(ctx);
    return NULL;
}

static void close_served(struct server *sv, oni_ctx ctx)
{
    if (ctx)
        oni_destroy_ctx(ctx);
    if (sv->s)
        netserve_close(sv->s);
    if (sv->p.pid) {
        int st = proc_stop(&sv->p, SIGTERM, 10000);
        if (proc_exit_code(st) != 0) /* which way it ended, for whoever reads the log */
            fprintf(stderr, "  the server ended with wait status %d (%s %d)\n", st,
                    st >= 0 && WIFSIGNALED(st) ? "signal" : "exit code", st >= 0 && WIFSIGNALED(st) ? WTERMSIG(st)
                                                                                  : proc_exit_code(st));
        CHECK_EQ(proc_exit_code(st), 0);
    }
}

static uint32_t ipc_blocks(oni_ctx ctx)
{
    uint32_t n = UINT32_MAX;
    size_t len = sizeof n;
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_NET_GPU_IPC, &n, &len), 0);
    return n;
}

static uint32_t find_dev(oni_ctx ctx, uint32_t id)
{
    oni_device_t t[16];
    size_t len = sizeof t;
    if (oni_get_opt(ctx, ONI_OPT_DEVICETABLE, t, &len))
        return UINT32_MAX;
    for (size_t i = 0; i < len / sizeof t[0]; i++)
        if (t[i].id == id)
            return t[i].idx;
    return UINT32_MAX;
}

/* The test core's counter runs on across blocks read into GPU memory (both
 * buffer forms, at an offset into the allocation; the bytes checked after a
 * copy back); write frames from GPU memory reach the sink whole; a write
 * from GPU memory does not wait behind a read that waits for data; a block
 * longer than the rest of the allocation is refused. *ipc: the blocks that
 * went by CUDA IPC. */
static void blocks_through_gpu_memory(struct server *sv, uint32_t *ipc)
{
    oni_ctx ctx = open_served(sv);
    REQUIRE(ctx);
    uint32_t core = find_dev(ctx, ONIX_ONIGPU_TESTCORE), sink = find_dev(ctx, ONIX_ONIGPU_TESTSINK);
    CHECK(core != UINT32_MAX && sink != UINT32_MAX);
    xfer_check_waiting_read(ctx, sink, 1);

    enum { BLK = 8192 };
    uint8_t *alloc = NULL, *dev, *host = malloc(BLK);
    CHECK_RC(gpu_alloc((void **)&alloc, 2 * BLK), 0);
    REQUIRE(alloc && host);
    dev = alloc + BLK;
    uint32_t rd = BLK, one = 1;
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_RD_SZ, &rd, sizeof rd), 0);
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &one, sizeof one), 0);
    struct xcheck c;
    xcheck_init(&c, core);
    onigpu_buf_t b = {dev, BLK};
    for (int i = 0; i < 40; i++) {
        CHECK_RC(gpu_memset(dev, 0, BLK), 0); /* what is checked came through this read */
        int rc = i % 2 ? oni_set_driver_opt(ctx, ONI_DRV_READ, dev, 8) : oni_set_driver_opt(ctx, ONI_DRV_READ, &b, sizeof b);
        CHECK_RC(rc, 0);
        if (rc || gpu_copy(host, dev, BLK))
            break;
        xcheck_feed(&c, host, BLK);
    }
    CHECK_EQ(c.errors, 0);
    CHECK(c.frames >= 40 * BLK / 4112);
    rd = 2 * BLK; /* the rest of the allocation is shorter than the block */
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_RD_SZ, &rd, sizeof rd), 0);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_READ, dev, 8), ONI_EBUFFERSIZE);

    uint32_t wsz = BLK;
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_WR_SZ, &wsz, sizeof wsz), 0);
    oni_reg_val_t want = 0, got = 0;
    CHECK_RC(oni_read_reg(ctx, sink, XSUM_REG, &want), 0); /* FNV-1a goes on from the hash so far */
    for (uint32_t k = 0; k < 4; k++) {
        want = xsum_frames(host, BLK, 2048, sink, 20 + k, want);
        CHECK_RC(gpu_copy(dev, host, BLK), 0);
        CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_WRITE, dev, 8), 0);
    }
    CHECK_RC(oni_read_reg(ctx, sink, XSUM_REG, &got), 0);
    CHECK_EQ(got, want);
    *ipc = ipc_blocks(ctx);
    gpu_free(alloc);
    free(host);
    close_served(sv, ctx);
}

/* From a server on a thread of this process every block is staged: CUDA
 * IPC does not open a handle in the process that made it. */
TEST(gpu_net_blocks_through_gpu_memory)
{
    NEED_GPU();
    struct server sv;
    REQUIRE(start_thread(&sv) == 0);
    uint32_t ipc = UINT32_MAX;
    blocks_through_gpu_memory(&sv, &ipc);
    CHECK_EQ(ipc, 0);
}

/* From a server process on this machine the card moves the blocks into and
 * out of the allocation itself: the 40 reads, the 4 writes and the
 * waiting-read check's write go by CUDA IPC. */
TEST(gpu_net_blocks_by_cuda_ipc_from_a_local_server)
{
    NEED_GPU();
    char exe[4096];
    if (proc_bin("onigpu", exe, sizeof exe))
        SKIP("no built onigpu (ONIGPU_BIN)");
    struct server sv;
    REQUIRE(start_process(&sv, exe) == 0);
    uint32_t ipc = 0;
    blocks_through_gpu_memory(&sv, &ipc);
    fprintf(stderr, "  blocks by CUDA IPC: %u\n", ipc);
    CHECK(ipc >= 45);
}
