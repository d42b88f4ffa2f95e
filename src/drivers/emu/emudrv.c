/* emudrv.c - the `emu` driver: the ONI driver ABI over the emulated ONIX host
 * card (src/emu/emu.h) in this process. The spec string (oniemu.h) describes
 * the card; init creates it, and it runs its generator on its own thread. The
 * GPU stream options go to the GPU stream layer (src/gpustream) over the
 * card's DMA engine (emu/dma.h). The card in another process is this driver
 * served by `onigpu serve` and reached with the net driver (docs/net.md).
 *
 * Locking: the host library serializes configuration, the signal stream and
 * the options this driver does not declare concurrent; it may read the data
 * stream, write the write stream and run the GPU stream options
 * (drv_concurrent_opt) concurrently with them and with each other; the card,
 * its DMA engine and the GPU stream layer are safe for that. Init and destroy
 * never run concurrently with anything else. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "emu/dma.h"
#include "emu/emu.h"
#include "gpustream/gpustream.h"
#include "onigpu.h"
#include "oni/driver.h"
#include "oni/util/opt.h"
#include "oni/util/clock.h"

#define SPEC_MAX 512
#define MAX_READ (1u << 30) /* largest single driver read: keeps byte counts in an int */

struct emudrv {
    int initialized;
    _Atomic uint32_t timeout_ms;
    char *spec;            /* ONI_DRV_EMU_SPEC as set, or NULL */
    char *spec_used;       /* the spec in effect after init */
    char *truth;           /* ONI_DRV_EMU_TRUTH_FILE, or NULL */
    struct emu_card *card;  /* after init */
    struct emu_dma *dma;    /* the card's DMA engine, made by the first GPU stream option */
    struct gpustream *gpu;  /* the GPU stream layer's state, made with it */
};

static const oni_driver_info_t info = {"emu", 1, 0, 0, NULL};

static const oni_driver_info_t *drv_info(void) { return &info; }

static int read_once(struct emudrv *d, enum emu_stream s, void *dst, size_t n, uint32_t t)
{
    if (n > MAX_READ)
        n = MAX_READ;
    return emu_card_read(d->card, s, dst, n, t);
}

/* A string option value: size must be strlen + 1. */
static int get_string(const void *value, size_t len, size_t max)
{
    if (!value || len < 1 || len > max)
        return ONI_EINVALARG;
    const char *s = value;
    return memchr(s, 0, len) == s + len - 1 ? 0 : ONI_EINVALARG;
}

static int put_string(const char *s, void *value, size_t *len)
{
    if (!value || !len)
        return ONI_EINVALARG;
    size_t n = strlen(s) + 1;
    if (*len < n)
        return oni_opt_short(len, n);
    memcpy(value, s, n);
    *len = n;
    return 0;
}

/* Room for a fixed-size value of n bytes of the card (a get option): ONI_EBUFFERSIZE
 * with *len = n for a short buffer, ONI_EINVALSTATE before init, else 0 with
 * *len = n (the caller copies the value in). */
static int card_value(const struct emudrv *d, size_t *len, size_t n)
{
    if (*len < n)
        return oni_opt_short(len, n);
    if (!d->initialized)
        return ONI_EINVALSTATE;
    *len = n;
    return 0;
}

static int set_truth(struct emudrv *d, const char *path)
{
    return emu_card_set_truth_file(d->card, path[0] ? path : NULL);
}

/* --- driver ABI -------------------------------------------------------------- */

static oni_driver_ctx drv_create(void)
{
    struct emudrv *d = calloc(1, sizeof *d);
    if (d)
        atomic_store(&d->timeout_ms, ONI_DEFAULT_TIMEOUTMS);
    return d;
}

static void drv_close(struct emudrv *d)
{
    /* The DMA engine first: it waits for its queued jobs, which use the card;
     * the layer's page-locked memory and staging are released after both. */
    emu_dma_destroy(d->dma);
    emu_card_destroy(d->card);
    gpustream_destroy(d->gpu);
    d->dma = NULL;
    d->card = NULL;
    d->gpu = NULL;
    d->initialized = 0;
}

static int drv_destroy(oni_driver_ctx ctx)
{
    struct emudrv *d = ctx;
    if (!d)
        return ONI_EINVALARG;
    /* The card stops before it goes (its truth file is flushed then), as
     * upstream's riffa driver resets its card at destroy (onidriver_riffa.c:
     * 111-118): the core writes no register there, as upstream's liboni. */
    if (d->initialized)
        (void)emu_card_write_config(d->card, ONI_CONFIG_RUNNING, 0);
    drv_close(d);
    free(d->spec);
    free(d->spec_used);
    free(d->truth);
    free(d);
    return ONI_ESUCCESS;
}

static int drv_init(oni_driver_ctx ctx, int host_idx)
{
    struct emudrv *d = ctx;
    if (!d)
        return ONI_EINVALARG;
    if (d->initialized)
        return ONI_EINVALSTATE;
    if (host_idx != -1 && host_idx != 0)
        return ONI_EPATHINVALID; /* one emulated card per context */
    const char *spec = d->spec ? d->spec : getenv(ONIGPU_EMU_ENV);
    if (!spec)
        spec = "";
    char err[256] = "";
    char *used = strdup(spec);
    if (!used)
        return ONI_EBADALLOC;
    int rc = emu_card_create(spec[0] ? spec : NULL, &d->card, err, sizeof err);
    if (rc) {
        /* The host API has no channel for text: a bad --emu spec must still be explained. */
        if (err[0])
            fprintf(stderr, "emu: %s\n", err);
        free(used);
        return rc;
    }
    free(d->spec_used);
    d->spec_used = used;
    d->initialized = 1;
    if (d->truth && (rc = set_truth(d, d->truth)) != 0) {
        drv_close(d);
        return rc;
    }
    return 0;
}

static int drv_read_stream(oni_driver_ctx ctx, oni_read_stream_t stream, void *data, size_t size)
{
    struct emudrv *d = ctx;
    if (!d || !data)
        return ONI_EINVALARG;
    if (!d->initialized)
        return ONI_EINVALSTATE;
    if (!size)
        return 0;
    uint32_t t = atomic_load(&d->timeout_ms);
    if (stream == ONI_READ_STREAM_DATA) { /* waits a slice at most (oni/driver.h), then 0 bytes */
        int rc = read_once(d, EMU_STREAM_DATA, data, size, t < ONI_READ_SLICE_MS ? t : ONI_READ_SLICE_MS);
        return rc == ONI_ETIMEOUT ? 0 : rc;
    }
    if (stream == ONI_READ_STREAM_SIGNAL)
        return read_once(d, EMU_STREAM_SIGNAL, data, size, t);
    return ONI_EINVALARG;
}

static int drv_write_stream(oni_driver_ctx ctx, oni_write_stream_t stream, const char *data, size_t size)
{
    struct emudrv *d = ctx;
    if (stream != ONI_WRITE_STREAM_DATA || !d || !data || !size || size > MAX_READ)
        return ONI_EINVALARG;
    if (!d->initialized)
        return ONI_EINVALSTATE;
    return emu_card_write(d->card, EMU_STREAM_WRITE, data, size, atomic_load(&d->timeout_ms));
}

static int drv_read_config(oni_driver_ctx ctx, oni_config_t reg, oni_reg_val_t *value)
{
    struct emudrv *d = ctx;
    if (!d || !value)
        return ONI_EINVALARG;
    if (!d->initialized)
        return ONI_EINVALSTATE;
    return emu_card_read_config(d->card, reg, value);
}

static int drv_write_config(oni_driver_ctx ctx, oni_config_t reg, oni_reg_val_t value)
{
    struct emudrv *d = ctx;
    if (!d)
        return ONI_EINVALARG;
    if (!d->initialized)
        return ONI_EINVALSTATE;
    return emu_card_write_config(d->card, reg, value);
}

/* The host tells the driver about context options after setting them. Only the
 * timeout concerns this driver (every wait uses it); the block sizes need
 * nothing: reads of any size are served. */
static int drv_set_opt_callback(oni_driver_ctx ctx, int oni_option, const void *value, size_t len)
{
    struct emudrv *d = ctx;
    if (!d)
        return ONI_EINVALARG;
    if (oni_option == ONI_OPT_TIMEOUTMS) {
        uint32_t t;
        if (oni_opt_u32(value, len, &t) || !t)
            return ONI_EINVALARG;
        atomic_store(&d->timeout_ms, t);
    }
    return 0;
}

/* --- the GPU stream's DMA operations: the card's engine --------------------- */

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

/* The context's GPU stream state and the card's DMA engine, created on first
 * use (by one thread only). */
static int gpu_state(struct emudrv *d, struct gpustream **g)
{
    static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;
    int rc = 0;
    pthread_mutex_lock(&create_lock);
    if (!d->dma)
        rc = emu_dma_create(d->card, &d->dma);
    if (!rc && !d->gpu)
        rc = gpustream_create(&engine_ops, d->dma, &d->gpu);
    *g = d->gpu;
    pthread_mutex_unlock(&create_lock);
    return rc;
}

static int gpu_set_opt(struct emudrv *d, int opt, const void *value, size_t len)
{
    struct gpustream *g;
    int rc = gpu_state(d, &g);
    return rc ? rc : gpustream_set_opt(g, opt, value, len, atomic_load(&d->timeout_ms));
}

static int gpu_get_opt(struct emudrv *d, int opt, void *value, size_t *len)
{
    struct gpustream *g;
    int rc = gpu_state(d, &g);
    return rc ? rc : gpustream_get_opt(g, opt, value, len);
}

static int drv_set_opt(oni_driver_ctx ctx, int opt, const void *value, size_t len)
{
    struct emudrv *d = ctx;
    if (!d)
        return ONI_EINVALARG;
    int rc;
    switch (opt) {
    case ONI_DRV_EMU_SPEC:
        if (d->initialized)
            return ONI_EINVALSTATE;
        if ((rc = get_string(value, len, SPEC_MAX)) != 0)
            return rc;
        free(d->spec);
        d->spec = strdup(value);
        return d->spec ? 0 : ONI_EBADALLOC;
    case ONI_DRV_EMU_TRUTH_FILE: {
        if ((rc = get_string(value, len, SPEC_MAX)) != 0)
            return rc;
        char *t = strdup(value);
        if (!t)
            return ONI_EBADALLOC;
        if (d->initialized && (rc = set_truth(d, t)) != 0) {
            free(t);
            return rc;
        }
        free(d->truth);
        d->truth = t;
        return 0;
    }
    case ONI_DRV_EMU_LINK:
    case ONI_DRV_EMU_MODE:
    case ONI_DRV_EMU_LAG:
    case ONI_DRV_STREAM_STATS:
    case ONI_DRV_GPU_STREAM:
        return ONI_EREADONLY;
    }
    if (gpustream_opt(opt))
        return d->initialized ? gpu_set_opt(d, opt, value, len) : ONI_EINVALSTATE;
    return ONI_EINVALOPT;
}

static int drv_get_opt(oni_driver_ctx ctx, int opt, void *value, size_t *len)
{
    struct emudrv *d = ctx;
    if (!d || !value || !len)
        return ONI_EINVALARG;
    switch (opt) {
    case ONI_DRV_EMU_SPEC:
        if (d->initialized)
            return put_string(d->spec_used, value, len);
        return put_string(d->spec ? d->spec : "", value, len);
    case ONI_DRV_EMU_TRUTH_FILE:
        return put_string(d->truth ? d->truth : "", value, len);
    case ONI_DRV_EMU_LINK: {
        oniemu_link_t link;
        int rc = card_value(d, len, sizeof link);
        if (rc)
            return rc;
        emu_card_link(d->card, &link);
        memcpy(value, &link, sizeof link);
        return 0;
    }
    case ONI_DRV_EMU_LAG: {
        oniemu_lag_t lag;
        int rc = card_value(d, len, sizeof lag);
        if (rc)
            return rc;
        emu_card_lag(d->card, &lag);
        memcpy(value, &lag, sizeof lag);
        return 0;
    }
    case ONI_DRV_EMU_MODE: {
        uint32_t fast;
        int rc = card_value(d, len, sizeof fast);
        if (rc)
            return rc;
        fast = (emu_card_features(d->card) & EMU_FEAT_FAST) != 0;
        memcpy(value, &fast, sizeof fast);
        return 0;
    }
    case ONI_DRV_GPU_STREAM: {
        uint32_t bits;
        int rc = card_value(d, len, sizeof bits);
        if (rc)
            return rc;
        bits = (emu_card_features(d->card) & EMU_FEAT_GPUSTREAM) != 0;
        memcpy(value, &bits, sizeof bits);
        return 0;
    }
    case ONI_DRV_STREAM_STATS: {
        onigpu_stream_stats_t st;
        int rc = card_value(d, len, sizeof st);
        if (rc)
            return rc;
        emu_card_stats(d->card, &st);
        memcpy(value, &st, sizeof st);
        return 0;
    }
    }
    if (gpustream_opt(opt))
        return d->initialized ? gpu_get_opt(d, opt, value, len) : ONI_EINVALSTATE;
    return ONI_EINVALOPT;
}

/* The GPU stream's options are thread-safe (the DMA engine has a lock, a
 * queue and a thread per direction, and reads block sizes and pins under a
 * lock it never holds across a transfer: docs/transfers.md, Threads). */
static int drv_concurrent_opt(int opt) { return gpustream_opt(opt); }

/* The truth file is a path of the machine the card runs on (driver.h). */
static int drv_local_opt(int opt) { return opt == ONI_DRV_EMU_TRUTH_FILE; }

/* The emu driver's backend table (oni/driver.h); libonidriver_emu.so exports it through export.c. */
const struct oni_driver onidrv_emu = {
    "emu",
    drv_create,
    drv_destroy,
    drv_init,
    drv_read_stream,
    drv_write_stream,
    drv_read_config,
    drv_write_config,
    drv_set_opt_callback,
    drv_set_opt,
    drv_get_opt,
    drv_info,
    drv_concurrent_opt,
    drv_local_opt,
};
