/* local.c - the emu driver's card in this process (backend.h): the card of
 * src/emu/emu.h, its GPU stream moved by the card's DMA engine (emu/dma.h). */
#include <stdlib.h>
#include "backend.h"
#include "emu/dma.h"

struct local {
    struct emu_card *card;
    struct emu_dma *dma; /* created by the first GPU stream option */
};

int emu_local_open(const char *spec, void **b, char *err, size_t err_cap)
{
    struct local *l = calloc(1, sizeof *l);
    if (!l)
        return ONI_EBADALLOC;
    int rc = emu_card_create(spec, &l->card, err, err_cap);
    if (rc) {
        free(l);
        return rc;
    }
    *b = l;
    return 0;
}

/* The engine first: it waits for its queued jobs, which use the card. */
static void l_close(void *b)
{
    struct local *l = b;
    if (!l)
        return;
    emu_dma_destroy(l->dma);
    emu_card_destroy(l->card);
    free(l);
}

static int l_read(void *b, enum emu_stream s, void *dst, size_t n, uint32_t t)
{
    return emu_card_read(((struct local *)b)->card, s, dst, n, t);
}

static int l_write(void *b, enum emu_stream s, const void *src, size_t n, uint32_t t)
{
    return emu_card_write(((struct local *)b)->card, s, src, n, t);
}

static int l_read_config(void *b, oni_config_t reg, uint32_t *value, uint32_t t)
{
    return emu_card_read_config(((struct local *)b)->card, reg, value);
}

static int l_write_config(void *b, oni_config_t reg, uint32_t value, uint32_t t)
{
    return emu_card_write_config(((struct local *)b)->card, reg, value);
}

static int l_link(void *b, oniemu_link_t *link, uint32_t t)
{
    emu_card_link(((struct local *)b)->card, link);
    return 0;
}

static int l_stats(void *b, onigpu_stream_stats_t *st, uint32_t t)
{
    emu_card_stats(((struct local *)b)->card, st);
    return 0;
}

static int l_features(void *b, uint32_t *bits, uint32_t t)
{
    *bits = emu_card_features(((struct local *)b)->card);
    return 0;
}

static int l_truth_file(void *b, const char *path, uint32_t t)
{
    return emu_card_set_truth_file(((struct local *)b)->card, path[0] ? path : NULL);
}

/* --- the GPU stream's DMA operations: the card's engine ------------------- */

static int dma_read(void *e, void *dst, size_t n, int dst_gpu, uint32_t t)
{
    return emu_dma_read(e, dst, n, dst_gpu, t);
}

static int dma_write(void *e, const void *src, size_t n, int src_gpu, uint32_t t)
{
    return emu_dma_write(e, src, n, src_gpu, t);
}

static int dma_wait_data(void *e, size_t n, uint32_t t) { return emu_dma_wait_data(e, n, t); }

static int dma_submit(void *e, int write, const onigpu_xfer_t *x, int buf_gpu, int done_gpu, uint32_t t)
{
    return emu_dma_submit(e, write, x, buf_gpu, done_gpu, t);
}

static int dma_idle(void *e) { return emu_dma_idle(e); }

static int dma_set_agent(void *e, size_t max_bytes) { return emu_dma_set_agent(e, max_bytes); }

static size_t dma_agent(void *e) { return emu_dma_agent(e); }

static const struct gpustream_dma engine_ops = {
    .read = dma_read,
    .write = dma_write,
    .wait_data = dma_wait_data,
    .submit = dma_submit,
    .idle = dma_idle,
    .set_agent = dma_set_agent,
    .agent = dma_agent,
};

static int l_gpu(void *b, const struct gpustream_dma **ops, void **card)
{
    struct local *l = b;
    int rc = l->dma ? 0 : emu_dma_create(l->card, &l->dma);
    if (rc)
        return rc;
    *ops = &engine_ops;
    *card = l->dma;
    return 0;
}

const struct emu_backend emu_local = {
    l_close, l_read, l_write, l_read_config, l_write_config, l_link, l_stats, l_features, l_truth_file, l_gpu,
};
