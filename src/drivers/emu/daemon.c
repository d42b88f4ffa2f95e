/* daemon.c - the emu driver's card in an onix-emu daemon (backend.h), through
 * the session of emuclient.h. The GPU stream: host buffers and chunks move
 * through the daemon's rings, GPU buffers are imported by the daemon (CUDA
 * IPC) and moved by its DMA engine. */
#include <stdio.h>
#include <unistd.h>
#include "backend.h"
#include "emuclient.h"
#include "oni/util/clock.h"

#define PATH_MAX_LEN 512

int emu_daemon_open(const char *path, const char *spec, uint32_t timeout_ms, void **b, char *err, size_t err_cap)
{
    struct emuc *c = NULL;
    int rc = emuc_open(path, spec, timeout_ms, &c, err, err_cap);
    if (!rc)
        *b = c;
    return rc;
}

static void d_close(void *b) { emuc_close(b); }

static int d_read(void *b, enum emu_stream s, void *dst, size_t n, uint32_t t) { return emuc_read(b, s, dst, n, t); }

static int d_write(void *b, enum emu_stream s, const void *src, size_t n, uint32_t t)
{
    return emuc_write(b, s, src, n, t);
}

static int d_read_config(void *b, oni_config_t reg, uint32_t *value, uint32_t t)
{
    return emuc_read_config(b, reg, value, t);
}

static int d_write_config(void *b, oni_config_t reg, uint32_t value, uint32_t t)
{
    return emuc_write_config(b, reg, value, t);
}

static int d_link(void *b, oniemu_link_t *link, uint32_t t) { return emuc_link(b, link, t); }

static int d_stats(void *b, onigpu_stream_stats_t *st, uint32_t t) { return emuc_stats(b, st, t); }

static int d_features(void *b, uint32_t *bits, uint32_t t) { return emuc_features(b, bits, t); }

/* The daemon writes the file: give it a path that does not depend on its cwd. */
static int d_truth_file(void *b, const char *path, uint32_t t)
{
    char abs[PATH_MAX_LEN];
    if (path[0] && path[0] != '/') {
        char cwd[PATH_MAX_LEN];
        if (!getcwd(cwd, sizeof cwd) || snprintf(abs, sizeof abs, "%s/%s", cwd, path) >= (int)sizeof abs)
            return ONI_EINVALARG;
        path = abs;
    }
    return emuc_truth_file(b, path, t);
}

/* --- the GPU stream's DMA operations: the daemon's engine ----------------- */

/* n bytes of the GPU read stream into host memory: the rings may deliver a
 * block in pieces (emuc_read), all within one timeout. On an error the
 * pieces taken before it are lost to the stream (out of the card's FIFO). */
static int dma_read(void *b, void *dst, size_t n, int dst_gpu, uint32_t t)
{
    uint64_t deadline = oni_ms_from_now(t);
    size_t got = 0;
    while (got < n) {
        uint32_t left = oni_ms_left(deadline);
        if (!left)
            return ONI_ETIMEOUT;
        int rc = emuc_read(b, EMU_STREAM_GPU, (uint8_t *)dst + got, n - got, left);
        if (rc < 0)
            return rc;
        got += (size_t)rc;
    }
    return 0;
}

static int dma_write(void *b, const void *src, size_t n, int src_gpu, uint32_t t)
{
    int rc = emuc_write(b, EMU_STREAM_GPU_WRITE, src, n, t);
    return rc < 0 ? rc : 0;
}

static int dma_import(void *b, int write, const uint8_t *handle, uint64_t size, uint32_t *id, uint32_t t)
{
    return emuc_gpu_import(b, write, handle, size, id, t);
}

static int dma_release(void *b, int write, uint32_t id, uint32_t t) { return emuc_gpu_release(b, write, id, t); }

static int dma_remote(void *b, const struct gpustream_remote *d, uint32_t t) { return emuc_gpu_dma(b, d, t); }

static const struct gpustream_dma daemon_ops = {
    .read = dma_read,
    .write = dma_write,
    .import = dma_import,
    .release = dma_release,
    .remote = dma_remote,
};

static int d_gpu(void *b, const struct gpustream_dma **ops, void **card)
{
    *ops = &daemon_ops;
    *card = b;
    return 0;
}

const struct emu_backend emu_daemon = {
    d_close, d_read, d_write, d_read_config, d_write_config, d_link, d_stats, d_features, d_truth_file, d_gpu,
};
