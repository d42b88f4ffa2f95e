/* test_gpu_listings.c - the thesis' listings 4.2, 4.3 and 4.4 (seed 000),
 * written as the thesis writes them, with the one change C requires: the
 * block size is passed by address (&transfer_size). They must work unchanged
 * against onigpu's emu driver, and the data that lands in GPU memory must be
 * the test core's unbroken counter. Skips without a CUDA device. */
#include <stdint.h>
#include <stdlib.h>
#include "unit.h"
#include "xfer_check.h"
#include "gpu/gpu.h"

#if ONIGPU_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#define SPEC "devices=testcore:bytes=4096:rate=2G:route=1,testsink;mode=fast;link=unlimited;ddr=256M"

#if ONIGPU_HAVE_CUDA
static char why[200];
static int error_count;
static void error_exit(int rc, const char *msg)
{
    UNIT_FAIL("%s: %s", msg, oni_error_str(rc));
    error_count++;
}

/* Copy what the listing left in GPU memory back and check it. */
static void check_gpu(void *device_buffer, uint32_t n, struct xcheck *c)
{
    uint8_t *h = malloc(n);
    CHECK_EQ(cudaMemcpy(h, device_buffer, n, cudaMemcpyDeviceToHost), cudaSuccess);
    xcheck_feed(c, h, n);
    free(h);
}
#endif

TEST(listing_4_2_host_staged)
{
#if !ONIGPU_HAVE_CUDA
    SKIP("no CUDA device: onigpu was built without CUDA");
#else
    if (!gpu_available(why, sizeof why))
        SKIP("%s", why);
    uint32_t core;
    oni_ctx ctx = xfer_open(SPEC, &core, NULL);
    REQUIRE(ctx);
    struct xcheck c;
    xcheck_init(&c, core);
    uint32_t transfer_size = 65536;
    int repeats = 100, rc;
    void *host_buffer, *device_buffer;

    cudaMallocHost(&host_buffer, transfer_size);
    cudaMalloc(&device_buffer, transfer_size);
    oni_set_driver_opt(ctx, ONI_DRV_RD_SZ, &transfer_size, 4);

    for (int i = 0; i < repeats; i++) {
        rc = oni_set_driver_opt(ctx, ONI_DRV_READ, host_buffer, 4);
        if (rc != 0)
            error_exit(rc, "Error reading data\n");
        cudaMemcpy(device_buffer, host_buffer, transfer_size, cudaMemcpyHostToDevice);
        cudaStreamSynchronize(cudaStreamDefault);
        check_gpu(device_buffer, transfer_size, &c);
    }
    CHECK_EQ(error_count, 0);
    CHECK_EQ(c.errors, 0);
    cudaFreeHost(host_buffer);
    cudaFree(device_buffer);
    oni_destroy_ctx(ctx);
#endif
}

TEST(listing_4_3_gpudirect_without_prepinning)
{
#if !ONIGPU_HAVE_CUDA
    SKIP("no CUDA device: onigpu was built without CUDA");
#else
    if (!gpu_available(why, sizeof why))
        SKIP("%s", why);
    uint32_t core;
    oni_ctx ctx = xfer_open(SPEC, &core, NULL);
    REQUIRE(ctx);
    struct xcheck c;
    xcheck_init(&c, core);
    uint32_t transfer_size = 65536;
    int repeats = 100, rc;
    void *device_buffer;

    cudaMalloc(&device_buffer, transfer_size);
    oni_set_driver_opt(ctx, ONI_DRV_RD_SZ, &transfer_size, 4);

    for (int i = 0; i < repeats; i++) {
        rc = oni_set_driver_opt(ctx, ONI_DRV_READ, device_buffer, 8);
        if (rc != 0)
            error_exit(rc, "Error reading data\n");
        check_gpu(device_buffer, transfer_size, &c);
    }
    CHECK_EQ(error_count, 0);
    CHECK_EQ(c.errors, 0);
    cudaFree(device_buffer);
    oni_destroy_ctx(ctx);
#endif
}

TEST(listing_4_4_gpudirect_with_prepinning)
{
#if !ONIGPU_HAVE_CUDA
    SKIP("no CUDA device: onigpu was built without CUDA");
#else
    if (!gpu_available(why, sizeof why))
        SKIP("%s", why);
    uint32_t core;
    oni_ctx ctx = xfer_open(SPEC, &core, NULL);
    REQUIRE(ctx);
    struct xcheck c;
    xcheck_init(&c, core);
    uint32_t transfer_size = 65536;
    int repeats = 100, rc;
    void *device_buffer;

    cudaMalloc(&device_buffer, transfer_size);
    oni_set_driver_opt(ctx, ONI_DRV_RD_SZ, &transfer_size, 4);
    rc = oni_set_driver_opt(ctx, ONI_DRV_PIN, device_buffer, 8);
    CHECK_RC(rc, 0);
    for (int i = 0; i < repeats; i++) {
        rc = oni_set_driver_opt(ctx, ONI_DRV_READ, device_buffer, 8);
        if (rc != 0)
            error_exit(rc, "Error reading data\n");
        check_gpu(device_buffer, transfer_size, &c);
    }
    rc = oni_set_driver_opt(ctx, ONI_DRV_UNPIN, device_buffer, 8);
    CHECK_RC(rc, 0);
    CHECK_EQ(error_count, 0);
    CHECK_EQ(c.errors, 0);
    cudaFree(device_buffer);
    oni_destroy_ctx(ctx);
#endif
}
