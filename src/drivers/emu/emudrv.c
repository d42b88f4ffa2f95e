/* emudrv.c - the `emu` driver: the ONI driver ABI over the emulated ONIX host
 * card (src/emu/emu.h), either in this process or in an onix-emu daemon
 * (emuclient.c). The spec string (oniemu.h) decides: a "daemon=PATH" key
 * selects the daemon and the remaining keys describe the card it creates for
 * this context; without it the card is created here and runs its generator
 * on its own thread.
 *
 * Locking: the host library serializes configuration, the signal stream and
 * the options this driver does not declare concurrent; it may read the data
 * stream, write the write stream and run the GPU stream options
 * (drv_concurrent_opt) concurrently with them and with each other; the card,
 * the daemon client and gpustream.c are safe for that. Init and destroy never
 * run concurrently with anything else. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "emuclient.h"
#include "emudrv.h"
#include "gpustream.h"
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
    struct emu_card *card; /* in-process mode */
    struct emuc *daemon;   /* daemon mode */
    struct gpustream *gpu; /* gpustream.h's state */
};

static const oni_driver_info_t info = {"emu", 1, 0, 0, NULL};

static const oni_driver_info_t *drv_info(void) { return &info; }

struct emu_card *emudrv_card(struct emudrv *d) { return d ? d->card : NULL; }

struct emuc *emudrv_daemon(struct emudrv *d) { return d ? d->daemon : NULL; }

uint32_t emudrv_timeout_ms(struct emudrv *d) { return atomic_load(&d->timeout_ms); }

struct gpustream **emudrv_gpustream(struct emudrv *d) { return &d->gpu; }

static int read_once(struct emudrv *d, enum emu_stream s, void *dst, size_t n, uint32_t t)
{
    if (n > MAX_READ)
        n = MAX_READ;
    return d->daemon ? emuc_read(d->daemon, s, dst, n, t) : emu_card_read(d->card, s, dst, n, t);
}

/* Read n bytes of s in pieces, all within one timeout (see emudrv.h). */
int emudrv_stream_read(struct emudrv *d, enum emu_stream s, void *dst, size_t n, uint32_t timeout_ms)
{
    if (!d || !dst || !n || n > MAX_READ)
        return ONI_EINVALARG;
    if (!d->initialized)
        return ONI_EINVALSTATE;
    if (s != EMU_STREAM_DATA && s != EMU_STREAM_SIGNAL && s != EMU_STREAM_GPU)
        return ONI_EINVALARG;
    uint32_t t = timeout_ms;
    if (s == EMU_STREAM_SIGNAL)
        return read_once(d, s, dst, n, t);
    /* The daemon's rings may deliver a block in pieces (emuc_read): all of
     * them share one timeout, however slowly each comes. A piece that fails
     * ends the call, and the pieces taken before it are lost to the stream
     * (out of the card's FIFO, in dst only): emudrv.h. */
    uint64_t deadline = oni_ms_from_now(t);
    size_t got = 0;
    while (got < n) {
        uint32_t left = oni_ms_left(deadline);
        if (!left)
            return ONI_ETIMEOUT;
        int rc = read_once(d, s, (uint8_t *)dst + got, n - got, left);
        if (rc < 0)
            return rc;
        got += (size_t)rc;
    }
    return (int)got;
}

int emudrv_stream_write(struct emudrv *d, enum emu_stream s, const void *src, size_t n, uint32_t timeout_ms)
{
    if (!d || !src || !n || n > MAX_READ)
        return ONI_EINVALARG;
    if (!d->initialized)
        return ONI_EINVALSTATE;
    if (s != EMU_STREAM_WRITE && s != EMU_STREAM_GPU_WRITE)
        return ONI_EINVALARG;
    return d->daemon ? emuc_write(d->daemon, s, src, n, timeout_ms) : emu_card_write(d->card, s, src, n, timeout_ms);
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
    if (d->card)
        return emu_card_set_truth_file(d->card, path[0] ? path : NULL);
    if (!d->daemon)
        return 0;
    /* The daemon writes the file: give it a path that does not depend on its cwd. */
    char abs[SPEC_MAX];
    if (path[0] && path[0] != '/') {
        char cwd[SPEC_MAX];
        if (!getcwd(cwd, sizeof cwd) || snprintf(abs, sizeof abs, "%s/%s", cwd, path) >= (int)sizeof abs)
            return ONI_EINVALARG;
        path = abs;
    }
    return emuc_truth_file(d->daemon, path, atomic_load(&d->timeout_ms));
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
    emu_gpu_close(d);
    emuc_close(d->daemon);
    if (d->card)
        emu_card_destroy(d->card);
    d->daemon = NULL;
    d->card = NULL;
    d->initialized = 0;
}

static int drv_destroy(oni_driver_ctx ctx)
{
    struct emudrv *d = ctx;
    if (!d)
        return ONI_EINVALARG;
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
        rc = emuc_open(path, rest, atomic_load(&d->timeout_ms), &d->daemon, err, sizeof err);
    else
        rc = emu_card_create(rest[0] ? rest : NULL, &d->card, err, sizeof err);
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
    if (stream != ONI_WRITE_STREAM_DATA)
        return ONI_EINVALARG;
    return emudrv_stream_write(ctx, EMU_STREAM_WRITE, data, size, emudrv_timeout_ms(ctx));
}

static int drv_read_config(oni_driver_ctx ctx, oni_config_t reg, oni_reg_val_t *value)
{
    struct emudrv *d = ctx;
    if (!d || !value)
        return ONI_EINVALARG;
    if (!d->initialized)
        return ONI_EINVALSTATE;
    if (d->daemon)
        return emuc_read_config(d->daemon, reg, value, atomic_load(&d->timeout_ms));
    return emu_card_read_config(d->card, reg, value);
}

static int drv_write_config(oni_driver_ctx ctx, oni_config_t reg, oni_reg_val_t value)
{
    struct emudrv *d = ctx;
    if (!d)
        return ONI_EINVALARG;
    if (!d->initialized)
        return ONI_EINVALSTATE;
    if (d->daemon)
        return emuc_write_config(d->daemon, reg, value, atomic_load(&d->timeout_ms));
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

static int is_gpu_opt(int opt) { return opt >= ONI_DRV_RD_SZ && opt <= ONI_DRV_DMA_AGENT && opt != ONI_DRV_STREAM_STATS; }

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
        return ONI_EREADONLY;
    }
    if (is_gpu_opt(opt))
        return d->initialized ? emu_gpu_set_opt(d, opt, value, len) : ONI_EINVALSTATE;
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
        if (d->daemon) {
            if ((rc = emuc_link(d->daemon, &link, t)) != 0)
                return rc;
        } else {
            emu_card_link(d->card, &link);
        }
        memcpy(value, &link, sizeof link);
        *len = sizeof link;
        return 0;
    }
    case ONI_DRV_EMU_MODE: {
        uint32_t fast = (uint32_t)emu_card_fast(d->card);
        if (*len < sizeof fast)
            return oni_opt_short(len, sizeof fast);
        if (!d->initialized)
            return ONI_EINVALSTATE;
        if (d->daemon && (rc = emuc_mode(d->daemon, &fast, t)) != 0)
            return rc;
        memcpy(value, &fast, sizeof fast);
        *len = sizeof fast;
        return 0;
    }
    case ONI_DRV_STREAM_STATS: {
        onigpu_stream_stats_t st;
        if (*len < sizeof st)
            return oni_opt_short(len, sizeof st);
        if (!d->initialized)
            return ONI_EINVALSTATE;
        if (d->daemon) {
            if ((rc = emuc_stats(d->daemon, &st, t)) != 0)
                return rc;
        } else {
            emu_card_stats(d->card, &st);
        }
        memcpy(value, &st, sizeof st);
        *len = sizeof st;
        return 0;
    }
    }
    if (is_gpu_opt(opt))
        return d->initialized ? emu_gpu_get_opt(d, opt, value, len) : ONI_EINVALSTATE;
    return ONI_EINVALOPT;
}

/* The GPU stream's options are thread-safe (the DMA engine has a lock, a
 * queue and a thread per direction, and reads block sizes and pins under a
 * lock it never holds across a transfer: docs/transfers.md, Threads). */
static int drv_concurrent_opt(int opt) { return is_gpu_opt(opt); }

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
