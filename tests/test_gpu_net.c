/* test_gpu_net.c - blocks of the GPU streams through the net driver into and
 * out of GPU memory (cudaMalloc): each goes through a host staging buffer of
 * the driver (docs/net.md). The host-memory path is test_net's. Skips
 * without a GPU. */
#include "drivers/net/netserve.h"
#include "oninet.h"
#include "xfer_check.h"

#define NEED_GPU()                                                                     \
    do {                                                                               \
        char why[200];                                                                 \
        if (!gpu_available(why, sizeof why))                                           \
            SKIP("%s", why);                                                           \
    } while (0)

struct server {
    struct netserve *s;
};

/* The emulated card of xfer_check.h served on a loopback port, and a net
 * context on it, initialized; NULL on failure. */
static oni_ctx open_served(struct server *sv)
{
    char err[256];
    if (netserve_open("emu", "127.0.0.1:0", NULL, &sv->s, err, sizeof err))
        return NULL;
    if (netserve_start(sv->s)) {
        netserve_close(sv->s);
        return NULL;
    }
    const char *addr = netserve_addr(sv->s), *spec = XFER_SPEC(1);
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
    oni_destroy_ctx(ctx);
    netserve_close(sv->s);
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
 * buffer forms; the bytes checked after a copy back); write frames from GPU
 * memory reach the sink whole; a write from GPU memory does not wait behind
 * a read that waits for data; a block longer than the allocation is refused. */
TEST(gpu_net_blocks_through_gpu_memory)
{
    NEED_GPU();
    struct server sv;
    oni_ctx ctx = open_served(&sv);
    REQUIRE(ctx);
    uint32_t core = find_dev(ctx, ONIX_ONIGPU_TESTCORE), sink = find_dev(ctx, ONIX_ONIGPU_TESTSINK);
    CHECK(core != UINT32_MAX && sink != UINT32_MAX);
    xfer_check_waiting_read(ctx, sink, 1);

    enum { BLK = 8192 };
    uint8_t *dev = NULL, *host = malloc(BLK);
    CHECK_RC(gpu_alloc((void **)&dev, BLK), 0);
    REQUIRE(dev && host);
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
    rd = 2 * BLK; /* the allocation is shorter than the block */
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
    gpu_free(dev);
    free(host);
    close_served(&sv, ctx);
}
