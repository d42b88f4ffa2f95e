/* memsrc_nocuda.c - memsrc without CUDA: no GPU path. */
#include "loop/source.h"

int loop_memsrc_read_async(void *ctx, void *buf, size_t len, volatile uint32_t *done, uint32_t seq,
                           uint32_t timeout_ms)
{
    return ONI_ENOGPU;
}

int loop_memsrc_gpu_ok(void)
{
    return 0;
}

void loop_memsrc_gpu_free(struct loop_memsrc *m)
{
}

int loop_memsrc_gpu_init(struct loop_memsrc *m)
{
    return ONI_ENOGPU;
}

int loop_memsrc_pin(void *ctx, void *buf, size_t len)
{
    return ONI_ENOGPU;
}

int loop_memsrc_unpin(void *ctx, void *buf, size_t len)
{
    return ONI_ENOGPU;
}
