/* test_xfer_agent.c - selecting the DMA engine's agent mode (src/emu/dma.h,
 * ONI_DRV_DMA_AGENT) and its error paths, with or without a GPU: without one
 * the agent is refused with ONI_ENOGPU and the engine goes on with the copy
 * path (host transfers unchanged); bad option values are refused; with a GPU
 * the mode turns on and off and reports its limit. */
#include <stdint.h>
#include <stdlib.h>
#include "unit.h"
#include "oni.h"
#include "emu/emu.h"
#include "emu/dma.h"
#include "emu/dma_agent.h"
#include "gpu/gpu.h"
#include "xfer_check.h"

#define SPEC "devices=testcore:bytes=1024:route=1,testsink;mode=fast;link=unlimited;ddr=16M"

static int set_u32(oni_ctx ctx, uint32_t v)
{
    return oni_set_driver_opt(ctx, ONI_DRV_DMA_AGENT, &v, sizeof v);
}

static uint32_t get_u32(oni_ctx ctx, int *rc)
{
    uint32_t v = 0xFFFFFFFFu;
    size_t len = sizeof v;
    *rc = oni_get_driver_opt(ctx, ONI_DRV_DMA_AGENT, &v, &len);
    return v;
}

TEST(agent_mode_follows_the_gpu_and_host_reads_go_on)
{
    int gpu = gpu_available(NULL, 0);
    struct emu_card *c = NULL;
    char err[200] = "";
    REQUIRE(emu_card_create(SPEC, &c, err, sizeof err) == 0);
    REQUIRE(emu_card_write_config(c, ONI_CONFIG_RUNNING, 1) == 0);
    struct emu_dma *d = NULL;
    REQUIRE(emu_dma_create(c, &d) == 0);
    CHECK_EQ(emu_dma_agent(d), 0); /* off by default */
    CHECK_RC(emu_dma_set_agent(d, 65536), gpu ? 0 : ONI_ENOGPU);
    CHECK_EQ(emu_dma_agent(d), gpu ? 65536 : 0);
    /* host memory never goes to the agent: the stream goes on unchanged */
    uint8_t *buf = malloc(3 * 4096);
    CHECK_RC(emu_dma_read(d, buf, 16, 0, 1000), 0);
    uint32_t dev;
    memcpy(&dev, buf + 8, 4);
    struct xcheck chk;
    xcheck_init(&chk, dev);
    xcheck_feed(&chk, buf, 16);
    for (int i = 0; i < 20; i++) {
        CHECK_RC(emu_dma_read(d, buf, 3 * 4096, 0, 1000), 0);
        xcheck_feed(&chk, buf, 3 * 4096);
    }
    CHECK_EQ(chk.errors, 0);
    struct emu_dma_stats st;
    emu_dma_stats(d, &st);
    CHECK_EQ(st.agent_reads, 0);
    CHECK_EQ(st.agent_failed, 0);
    CHECK_EQ(st.agent_launches, gpu ? 1 : 0);
    CHECK_RC(emu_dma_set_agent(d, 0), 0);
    CHECK_EQ(emu_dma_agent(d), 0);
    CHECK_RC(emu_dma_set_agent(NULL, 1), ONI_EINVALARG);
    CHECK_EQ(emu_dma_agent(NULL), 0);
    emu_dma_destroy(d);
    emu_card_destroy(c);
    free(buf);
}

TEST(agent_api_without_a_kernel)
{
    struct emu_agent *a = NULL;
    if (!gpu_available(NULL, 0)) {
        CHECK_RC(emu_agent_start(&a), ONI_ENOGPU);
        void *dev = NULL;
        int x;
        CHECK_RC(emu_agent_devptr(&x, &dev), ONI_ENOGPU);
    }
    if (!ONIGPU_HAVE_CUDA) { /* dma_agent_nocuda.c: there is no agent to post to or wait for */
        uint32_t done = 0;
        uint64_t ticket = 0;
        int x = 1;
        CHECK_RC(emu_agent_post(a, &x, &x, sizeof x, &done, 1, 1, 0, &ticket), ONI_ENOGPU);
        CHECK_RC(emu_agent_wait(a, ticket, 0), ONI_ENOGPU);
    }
    CHECK_RC(emu_agent_start(NULL), ONI_EINVALARG);
    CHECK_RC(emu_agent_stop(NULL, 10), 0);
}

TEST(agent_option_values)
{
    int gpu = gpu_available(NULL, 0), rc;
    uint32_t core, sink;
    oni_ctx ctx = xfer_open(SPEC, &core, &sink);
    REQUIRE(ctx);
    CHECK_EQ(get_u32(ctx, &rc), 0);
    CHECK_RC(rc, 0);
    CHECK_RC(set_u32(ctx, 4096), gpu ? 0 : ONI_ENOGPU);
    CHECK_EQ(get_u32(ctx, &rc), gpu ? 4096 : 0);
    CHECK_RC(set_u32(ctx, ONIGPU_MAX_BLOCK + 1), ONI_EINVALARG);
    uint64_t wide = 4096;
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_DMA_AGENT, &wide, sizeof wide), ONI_EINVALARG);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_DMA_AGENT, NULL, 4), ONI_EINVALARG);
    uint16_t small;
    size_t len = sizeof small;
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_DMA_AGENT, &small, &len), ONI_EBUFFERSIZE);
    CHECK_RC(set_u32(ctx, 0), 0);
    CHECK_EQ(get_u32(ctx, &rc), 0);
    oni_destroy_ctx(ctx);
}
