/* memsrc_cuda.c - memsrc's GPU path: block into pinned staging memory, then
 * the copy engine writes it into GPU memory and a stream write publishes
 * seq in the completion word, as the card's DMA engine would. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include "loop/source.h"
#include "loop/engine.h"

int loop_memsrc_gpu_ok(void)
{
    return loop_gpu_available(LOOP_GPU_DIRECT, NULL, 0);
}

int loop_memsrc_gpu_init(struct loop_memsrc *m)
{
    /* Pinned staging and the copy stream up front: allocating them inside
     * the timed path costs milliseconds per buffer. */
    if (!m->stream && cudaStreamCreateWithFlags((cudaStream_t *)&m->stream, cudaStreamNonBlocking) != cudaSuccess)
        return ONI_ENOGPU;
    for (int i = 0; i < LOOP_MEMSRC_STAGING; i++)
        if (!m->staging[i] && cudaHostAlloc(&m->staging[i], m->len, cudaHostAllocDefault) != cudaSuccess)
            return ONI_EBADALLOC;
    return 0;
}

int loop_memsrc_read_async(void *ctx, void *buf, size_t len, volatile uint32_t *done, uint32_t seq)
{
    struct loop_memsrc *m = ctx;
    if (len != m->len)
        return ONI_EBUFFERSIZE;
    if (!m->stream)
        return ONI_EINVALSTATE;
    uint32_t i = m->next_staging++ % LOOP_MEMSRC_STAGING;
    if (!m->staging[i])
        return ONI_EBADALLOC;
    int rc = loop_memsrc_next(m, m->staging[i], 1000);
    if (rc)
        return rc;
    cudaStream_t s = m->stream;
    if (cudaMemcpyAsync(buf, m->staging[i], len, cudaMemcpyHostToDevice, s) != cudaSuccess)
        return ONI_ENOGPU;
    if (cuStreamWriteValue32((CUstream)s, (CUdeviceptr)(uintptr_t)done, seq, 0) != CUDA_SUCCESS)
        return ONI_ENOGPU;
    return 0;
}

void loop_memsrc_gpu_free(struct loop_memsrc *m)
{
    if (m->stream) {
        cudaStreamSynchronize(m->stream);
        cudaStreamDestroy(m->stream);
        m->stream = NULL;
    }
    for (int i = 0; i < LOOP_MEMSRC_STAGING; i++) {
        cudaFreeHost(m->staging[i]);
        m->staging[i] = NULL;
    }
}
