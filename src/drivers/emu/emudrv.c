/* emudrv.c - the `emu` driver: the ONI driver ABI over the emulated ONIX host
 * card (src/emu/emu.h), either in this process or in an onix-emu daemon
 * (emuclient.c). The spec string (oniemu.h) decides: a "daemon=PATH" key
 * selects the daemon and the remaining keys describe the card it creates for
 * this context; without it the card is created here and runs its generator
 * on its own thread. The two are one table (backend.h: local.c,
 * daemon.c); the GPU stream options go to the GPU stream layer
 * (src/gpustream) over the backend's DMA operations.
 *
 * Locking: the host library serializes configuration, the signal stream and
 * the options this driver does not declare concurrent; it may read the data
 * stream, write the write stream and run the GPU stream options
 * (drv_concurrent_opt) concurrently with them and with each other; both
 * backends and the GPU stream layer are safe for that. Init and destroy never
 * run concurrently with anything else. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "backend.h"
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
    const struct emu_backend *be; /* emu_local or emu_daemon, after init */
    void *b;                      /* its state */
    struct gpustream *gpu;        /* the GPU stream layer's state, made on first use */
};

static const oni_driver_info_t info = {"emu", 1, 0, 0, NULL};

static const oni_driver_info_t *drv_info(void) { return &info; }

static int read_once(struct emudrv *d, enum emu_stream s, void *dst, size_t n, uint32_t t)
{
    if (n > MAX_READ)
        n = MAX_READ;
    return d->be->read(d->b, s, dst, n, t);
}

/* --- spec ------------------------------------------------------------------- */

/* Split spec into the daemon socket path (the value of a "daemon" key, "" if
 * none) and the other keys, in order. Returns 0 or ONI_EINVALARG (too long,
 * empty daemon path, or daemon given twice). */
static int split_spec(const char *spec, char *path, char *rest)
{
    size_t n = strlen(spec);
    if (n >= SPEC_MAX)
        return ONI_EINVALARG;
    path[0] = rest[0] = 0;
    const char *p = spec;
    while (*p) {
        const char *end = strchr(p, ';');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len && (*p == ' ' || *p == '\t'))
            p++, len--;
        if (len >= 7 && !strncmp(p, "daemon=", 7)) {
            if (path[0] || len == 7)
                return ONI_EINVALARG;
            memcpy(path, p + 7, len - 7);
            path[len - 7] = 0;
        } else if (len) {
            if (rest[0])
                strcat(rest, ";");
            strncat(rest, p, len);
        }
        p += len;
        if (*p == ';')
            p++;
    }
    return 0;
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

static int set_truth(struct emudrv *d, const char *path)
{
    return d->be->truth_file(d->b, path, atomic_load(&d->timeout_ms));
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
    /* The card's DMA engine goes with the card, and waits for its jobs: the
     * layer's page-locked memory and staging are released after it. */
    if (d->be)
        d->be->close(d->b);
    gpustream_destroy(d->gpu);
    d->gpu = NULL;
    d->be = NULL;
    d->b = NULL;
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
        (void)d->be->write_config(d->b, ONI_CONFIG_RUNNING, 0, atomic_load(&d->timeout_ms));
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
    char path[SPEC_MAX], rest[SPEC_MAX], err[256] = "";
    int rc = split_spec(spec, path, rest);
    if (rc) {
        fprintf(stderr, "emu: bad spec \"%s\": daemon= given twice, empty, or spec too long\n", spec);
        return rc;
    }
    char *used = strdup(spec);
    if (!used)
        return ONI_EBADALLOC;
    if (path[0])
        rc = emu_daemon_open(path, rest, atomic_load(&d->timeout_ms), &d->b, err, sizeof err);
    else
        rc = emu_local_open(rest[0] ? rest : NULL, &d->b, err, sizeof err);
    if (rc) {
        /* The host API has no channel for text: a bad --emu spec must still be explained. */
        if (err[0])
            fprintf(stderr, "emu: %s\n", err);
        free(used);
        return rc;
    }
    free(d->spec_used);
    d->spec_used = used;
    d->be = path[0] ? &emu_daemon : &emu_local;
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
    return d->be->write(d->b, EMU_STREAM_WRITE, data, size, atomic_load(&d->timeout_ms));
}

static int drv_read_config(oni_driver_ctx ctx, oni_config_t reg, oni_reg_val_t *value)
{
    struct emudrv *d = ctx;
    if (!d || !value)
        return ONI_EINVALARG;
    if (!d->initialized)
        return ONI_EINVALSTATE;
    return d->be->read_config(d->b, reg, value, atomic_load(&d->timeout_ms));
}

static int drv_write_config(oni_driver_ctx ctx, oni_config_t reg, oni_reg_val_t value)
{
    struct emudrv *d = ctx;
    if (!d)
        return ONI_EINVALARG;
    if (!d->initialized)
        return ONI_EINVALSTATE;
    return d->be->write_config(d->b, reg, value, atomic_load(&d->timeout_ms));
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

/* The context's GPU stream state, created on first use over the backend's
 * DMA operations (by one thread only). */
static int gpu_state(struct emudrv *d, struct gpustream **g)
{
    static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;
    const struct gpustream_dma *ops;
    void *card;
    int rc = 0;
    pthread_mutex_lock(&create_lock);
    if (!d->gpu && (rc = d->be->gpu(d->b, &ops, &card)) == 0)
        rc = gpustream_create(ops, card, &d->gpu);
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
    uint32_t t = atomic_load(&d->timeout_ms);
    int rc;
    switch (opt) {
    case ONI_DRV_EMU_SPEC:
        if (d->initialized)
            return put_string(d->spec_used, value, len);
        return put_string(d->spec ? d->spec : "", value, len);
    case ONI_DRV_EMU_TRUTH_FILE:
        return put_string(d->truth ? d->truth : "", value, len);
    case ONI_DRV_EMU_LINK: {
        oniemu_link_t link;
        if (*len < sizeof link)
            return oni_opt_short(len, sizeof link);
        if (!d->initialized)
            return ONI_EINVALSTATE;
        if ((rc = d->be->link(d->b, &link, t)) != 0)
            return rc;
        memcpy(value, &link, sizeof link);
        *len = sizeof link;
        return 0;
    }
    case ONI_DRV_EMU_MODE: {
        uint32_t fast = 0;
        if (*len < sizeof fast)
            return oni_opt_short(len, sizeof fast);
        if (!d->initialized)
            return ONI_EINVALSTATE;
        if ((rc = d->be->features(d->b, &fast, t)) != 0)
            return rc;
        fast = (fast & EMU_FEAT_FAST) != 0;
        memcpy(value, &fast, sizeof fast);
        *len = sizeof fast;
        return 0;
    }
    case ONI_DRV_GPU_STREAM: {
        uint32_t bits = 0;
        if (*len < sizeof bits)
            return oni_opt_short(len, sizeof bits);
        if (!d->initialized)
            return ONI_EINVALSTATE;
        if ((rc = d->be->features(d->b, &bits, t)) != 0)
            return rc;
        bits = (bits & EMU_FEAT_GPUSTREAM) != 0;
        memcpy(value, &bits, sizeof bits);
        *len = sizeof bits;
        return 0;
    }
    case ONI_DRV_STREAM_STATS: {
        onigpu_stream_stats_t st;
        if (*len < sizeof st)
            return oni_opt_short(len, sizeof st);
        if (!d->initialized)
            return ONI_EINVALSTATE;
        if ((rc = d->be->stats(d->b, &st, t)) != 0)
            return rc;
        memcpy(value, &st, sizeof st);
        *len = sizeof st;
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
