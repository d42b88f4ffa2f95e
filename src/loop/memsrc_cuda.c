/* memsrc_cuda.c - memsrc's GPU path: block into pinned staging memory, then
 * the copy engine writes it into GPU memory and a stream write publishes
 * seq in the completion word, as the card's DMA engine would. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include "gpu/gpu.h"
#include "loop/source.h"
#include "loop/engine.h"

int loop_memsrc_gpu_ok(void)
{
    return gpu_available(NULL, 0);
}

int loop_memsrc_gpu_init(struct loop_memsrc *m)
{
    /* Pinned staging and the copy stream before the timed path (allocating
     * them there costs milliseconds per buffer): when a GPU backend pins its
     * buffers, not for every source (32 blocks of page-locked memory). */
    if (!m->stream && cudaStreamCreateWithFlags((cudaStream_t *)&m->stream, cudaStreamNonBlocking) != cudaSuccess)
        return ONI_ENOGPU;
    for (int i = 0; i < LOOP_MEMSRC_STAGING; i++)
        if (!m->staging[i] && cudaHostAlloc(&m->staging[i], m->len, cudaHostAllocDefault) != cudaSuccess)
            return ONI_EBADALLOC;
    return 0;
}

int loop_memsrc_read_async(void *ctx, void *buf, size_t len, volatile uint32_t *done, uint32_t seq,
                           uint32_t timeout_ms)
{
    struct loop_memsrc *m = ctx;
    if (len != m->len)
        return ONI_EBUFFERSIZE;
    int rc = loop_memsrc_gpu_init(m); /* done already when the backend pinned buf */
    if (rc)
        return rc;
    uint32_t i = m->next_staging++ % LOOP_MEMSRC_STAGING;
    if (!m->staging[i])
        return ONI_EBADALLOC;
    rc = loop_memsrc_next(m, m->staging[i], timeout_ms);
    if (rc)
        return rc;
    cudaStream_t s = m->stream;
    if (cudaMemcpyAsync(buf, m->staging[i], len, cudaMemcpyHostToDevice, s) != cudaSuccess)
        return ONI_ENOGPU;
    if (cuStreamWriteValue32((CUstream)s, (CUdeviceptr)(uintptr_t)done, seq, 0) != CUDA_SUCCESS)
        return ONI_ENOGPU;
    return 0;
}

int loop_memsrc_pin(void *ctx, void *buf, size_t len)
{
    struct cudaPointerAttributes a;
    if (len != ((struct loop_memsrc *)ctx)->len)
        return ONI_EBUFFERSIZE;
    if (cudaPointerGetAttributes(&a, buf) != cudaSuccess || a.type != cudaMemoryTypeDevice) {
        cudaGetLastError();
        return ONI_EUNIMPL; /* host blocks are filled by the CPU: nothing to pin */
    }
    return loop_memsrc_gpu_init(ctx);
}

int loop_memsrc_unpin(void *ctx, void *buf, size_t len)
{
    return 0; /* the staging stays until loop_memsrc_free */
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
