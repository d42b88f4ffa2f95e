/* context.c - context lifecycle, context options and driver options. */
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "ctx.h"

/* ---- deadlines ----------------------------------------------------------- */

uint32_t oni_wait_ms(const struct oni_ctx_impl *ctx)
{
    uint32_t ms = atomic_load(&ctx->timeout_ms);
    return ms ? ms : ONI_DEFAULT_TIMEOUTMS;
}

uint64_t oni_deadline(const struct oni_ctx_impl *ctx)
{
    return oni_ms_from_now(oni_wait_ms(ctx));
}

int oni_idle_wait(uint64_t deadline, unsigned *idle)
{
    uint64_t now = oni_now_ns();
    if (now >= deadline)
        return ONI_ETIMEOUT;
    if ((*idle)++ < 64) {
        sched_yield(); /* data is usually microseconds away */
        return 0;
    }
    uint64_t ns = deadline - now < 20000 ? deadline - now : 20000;
    struct timespec ts = {0, (long)ns};
    nanosleep(&ts, NULL);
    return 0;
}

int oni_wait_live(struct oni_ctx_impl *ctx, uint64_t *deadline)
{
    if (atomic_load(&ctx->timeout_ms))
        return ONI_ETIMEOUT;
    oni_reg_val_t run = 1;
    int rc = 0;
    if (pthread_mutex_trylock(&ctx->lock) == 0) {
        rc = ctx->drv.read_config(ctx->dctx, ONI_CONFIG_RUNNING, &run);
        pthread_mutex_unlock(&ctx->lock);
    }
    if (rc < 0)
        return rc;
    if (!run)
        return ONI_ETIMEOUT;
    *deadline = oni_deadline(ctx);
    return 0;
}

/* ---- lifecycle ----------------------------------------------------------- */

int oni_driver_complete(const struct oni_driver *d)
{
    return d->create_ctx && d->destroy_ctx && d->init && d->read_stream && d->write_stream &&
           d->read_config && d->write_config && d->set_opt_callback && d->set_opt && d->get_opt &&
           d->info;
}

/* The default ONI_OPT_TIMEOUTMS: ONI_TIMEOUTMS_ENV when set (so that a
 * program written for upstream, which has no such option, can choose one),
 * else 0 (wait while the device is live, as upstream: docs/timeouts.md). -1
 * if the variable is not a number of milliseconds, 0 .. 2^32 - 1. */
static int64_t default_timeout(void)
{
    const char *s = getenv(ONI_TIMEOUTMS_ENV);
    if (!s)
        return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!isdigit((unsigned char)*s) || *end || errno || v > UINT32_MAX)
        return -1;
    return (int64_t)v;
}

/* Shared by oni_create_ctx and oni_create_ctx_driver; takes over dl. */
static oni_ctx create(const struct oni_driver *drv, void *dl)
{
    int64_t timeout = default_timeout();
    if (timeout < 0) {
        if (dl)
            dlclose(dl);
        errno = EINVAL;
        return NULL;
    }
    struct oni_ctx_impl *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        goto nomem;
    ctx->drv = *drv;
    ctx->dl = dl;
    if (!(ctx->pool = oni_pool_new()))
        goto nomem;
    atomic_init(&ctx->timeout_ms, (uint32_t)timeout);
    atomic_init(&ctx->state, ONI_STATE_UNINIT);
    atomic_init(&ctx->rnext, 0);
    atomic_init(&ctx->rserve, 0);
    if (!(ctx->dctx = drv->create_ctx()))
        goto nomem;
    pthread_mutex_init(&ctx->lock, NULL);
    pthread_mutex_init(&ctx->wlock, NULL);
    /* Writers first: a reset must not wait forever behind reads that
     * overlap one another without a break (glibc lets readers in first). */
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
#ifdef __GLIBC__
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
#endif
    pthread_rwlock_init(&ctx->olock, &ra);
    pthread_rwlockattr_destroy(&ra);
    return ctx;
nomem:
    if (ctx && ctx->pool)
        oni_pool_unref(ctx->pool);
    free(ctx);
    if (dl)
        dlclose(dl);
    errno = ENOMEM;
    return NULL;
}

oni_ctx oni_create_ctx_driver(const struct oni_driver *drv)
{
    if (!drv || !oni_driver_complete(drv)) {
        errno = EINVAL;
        return NULL;
    }
    return create(drv, NULL);
}

oni_ctx oni_create_ctx(const char *drv_name)
{
    struct oni_driver drv;
    void *dl = NULL;
    int err = oni_load_driver(drv_name, &drv, &dl);
    if (err) {
        errno = err;
        return NULL;
    }
    return create(&drv, dl);
}

/* The read path's map of readable devices (open addressing, at most a
 * quarter full, first probe at the top bits of idx * 0x9E3779B1: see
 * header_ok in frame.c); NULL when out of memory. */
static struct oni_hslot *build_map(const oni_device_t *devs, size_t n, uint32_t *mask,
                                   uint32_t *shift)
{
    uint32_t bits = 4;
    while ((1u << bits) < 4 * n)
        bits++;
    uint32_t size = 1u << bits;
    struct oni_hslot *slot = calloc(size, sizeof *slot);
    if (!slot)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (!devs[i].read_size)
            continue;
        uint32_t h = (devs[i].idx * 0x9E3779B1u) >> (32 - bits);
        while (slot[h].want)
            h = (h + 1) & (size - 1);
        slot[h].want = oni_frame_key(devs[i].idx, devs[i].read_size) + 1;
    }
    *mask = size - 1;
    *shift = 32 - bits;
    return slot;
}

/* Reset the hardware (ONI_CONFIG_RESET = value), read the device table and
 * install it with every frame size that follows (lock held). Nothing changes
 * on failure. As upstream's reset routine (api/liboni/oni.c:1051-1062): both
 * block sizes go back to their defaults, one largest frame each rounded up
 * to a word, and the driver is told the read block size (its answer is not
 * looked at there either: the riffa driver sizes its DMA reads by it). */
static int reset(struct oni_ctx_impl *ctx, oni_reg_val_t value)
{
    oni_device_t *devs;
    size_t n;
    int rc = oni_read_devtable(ctx, value, &devs, &n);
    if (rc < 0)
        return rc;
    uint32_t mask = 0, shift = 0;
    struct oni_hslot *slot = build_map(devs, n, &mask, &shift);
    if (!slot) {
        free(devs);
        return ONI_EBADALLOC;
    }
    oni_size_t rmax = 0, wmax = 0;
    for (size_t i = 0; i < n; i++) {
        if (devs[i].read_size > rmax)
            rmax = devs[i].read_size;
        if (devs[i].write_size > wmax)
            wmax = devs[i].write_size;
    }
    unsigned rt = oni_rlock_opt(ctx);
    pthread_mutex_lock(&ctx->wlock);
    free(ctx->devs);
    free(ctx->hslot);
    ctx->devs = devs;
    ctx->ndev = n;
    ctx->hslot = slot;
    ctx->hmask = mask;
    ctx->hshift = shift;
    ctx->max_rframe = ONI_RFRAMEHEADERSZ + rmax;
    ctx->max_wframe = ONI_WFRAMEHEADERSZ + wmax;
    ctx->block_read = (oni_size_t)oni_pad4(ctx->max_rframe);
    ctx->block_write = (oni_size_t)oni_pad4(ctx->max_wframe);
    oni_read_release(ctx);
    pthread_mutex_unlock(&ctx->wlock);
    oni_runlock_opt(ctx, rt);
    oni_size_t block = ctx->block_read;
    (void)ctx->drv.set_opt_callback(ctx->dctx, ONI_OPT_BLOCKREADSIZE, &block, sizeof block);
    return 0;
}

/* Tell the driver how long one of its calls may wait (oni_wait_ms). Drivers
 * built for upstream do not know this option; their answer does not matter. */
static void send_timeout(struct oni_ctx_impl *ctx)
{
    uint32_t ms = oni_wait_ms(ctx);
    (void)ctx->drv.set_opt_callback(ctx->dctx, ONI_OPT_TIMEOUTMS, &ms, sizeof ms);
}

int oni_init_ctx(oni_ctx ctx, int host_idx)
{
    if (!ctx)
        return ONI_ENULLCTX;
    pthread_mutex_lock(&ctx->lock);
    pthread_rwlock_wrlock(&ctx->olock);
    int rc = ONI_EINVALSTATE;
    if (atomic_load(&ctx->state) != ONI_STATE_UNINIT)
        goto out;
    /* After a failed reset, a retry must not open the hardware twice. */
    if (!ctx->drv_open) {
        if ((rc = ctx->drv.init(ctx->dctx, host_idx)) < 0)
            goto out;
        ctx->drv_open = 1;
    }
    send_timeout(ctx);
    if ((rc = reset(ctx, 1)) < 0)
        goto out;
    atomic_store(&ctx->state, ONI_STATE_IDLE);
out:
    pthread_rwlock_unlock(&ctx->olock);
    pthread_mutex_unlock(&ctx->lock);
    return rc < 0 ? rc : 0;
}

int oni_destroy_ctx(oni_ctx ctx)
{
    if (!ctx)
        return ONI_ENULLCTX;
    /* As upstream (api/liboni/oni.c:174), the driver alone closes the
     * hardware: no register write comes before. */
    int rc = ctx->drv.destroy_ctx(ctx->dctx);
    if (ctx->dl)
        dlclose(ctx->dl);
    unsigned rt = oni_rlock(ctx); /* keeps out a bias holder destroying frames (ctx.h) */
    oni_read_release(ctx);
    oni_runlock(ctx, rt);
    oni_pool_unref(ctx->pool); /* frames still out keep the pool alive */
    free(ctx->devs);
    free(ctx->hslot);
    free(ctx->wpend);
    pthread_mutex_destroy(&ctx->lock);
    pthread_mutex_destroy(&ctx->wlock);
    pthread_rwlock_destroy(&ctx->olock);
    free(ctx);
    return rc < 0 ? rc : 0;
}

const oni_driver_info_t *oni_get_driver_info(const oni_ctx ctx)
{
    return ctx ? ctx->drv.info() : NULL;
}

/* ---- context options ----------------------------------------------------- */

/* Each option is checked in upstream's order (api/liboni/oni.c:197-542):
 * state, then the value's size, then the value; where upstream would
 * dereference a NULL pointer, onigpu answers ONI_EINVALARG at that point. */

/* Copy a 32-bit option value out, checking the caller's buffer. */
static int put_u32(void *value, size_t *size, uint32_t v)
{
    if (*size < sizeof v)
        return oni_opt_short(size, sizeof v);
    memcpy(value, &v, sizeof v);
    *size = sizeof v;
    return 0;
}

/* A config register read into a 32-bit option value. */
static int put_config(struct oni_ctx_impl *ctx, oni_config_t reg, void *value, size_t *size)
{
    if (*size < sizeof(oni_reg_val_t))
        return oni_opt_short(size, sizeof(oni_reg_val_t));
    oni_reg_val_t v;
    int rc = ctx->drv.read_config(ctx->dctx, reg, &v);
    if (rc < 0)
        return rc;
    return put_u32(value, size, v);
}

static int get_locked(struct oni_ctx_impl *ctx, int opt, void *value, size_t *size)
{
    if (opt == ONI_OPT_RESET || opt == ONI_OPT_RESETACQCOUNTER)
        return ONI_EWRITEONLY; /* in any state, as upstream */
    if (opt < 0)
        return ONI_EPROTCONFIG; /* below ONI_OPT_CUSTOMBEGIN and none of upstream's */
    if (opt != ONI_OPT_TIMEOUTMS && atomic_load(&ctx->state) == ONI_STATE_UNINIT)
        return ONI_EINVALSTATE;
    if (!value || !size)
        return ONI_EINVALARG;
    if (opt == ONI_OPT_TIMEOUTMS) /* any state */
        return put_u32(value, size, atomic_load(&ctx->timeout_ms));
    switch (opt) {
    case ONI_OPT_DEVICETABLE: {
        size_t need = ctx->ndev * sizeof(oni_device_t);
        if (*size < need)
            return oni_opt_short(size, need);
        if (need)
            memcpy(value, ctx->devs, need);
        *size = need;
        return 0;
    }
    case ONI_OPT_NUMDEVICES:
        return put_u32(value, size, (uint32_t)ctx->ndev);
    case ONI_OPT_RUNNING: /* what the hardware says, as upstream reads it */
        return put_config(ctx, ONI_CONFIG_RUNNING, value, size);
    case ONI_OPT_SYSCLKHZ:
        return put_config(ctx, ONI_CONFIG_SYSCLKHZ, value, size);
    case ONI_OPT_ACQCLKHZ:
        return put_config(ctx, ONI_CONFIG_ACQCLKHZ, value, size);
    case ONI_OPT_HWADDRESS:
        return put_config(ctx, ONI_CONFIG_HWADDRESS, value, size);
    case ONI_OPT_MAXREADFRAMESIZE:
        return put_u32(value, size, ctx->max_rframe);
    case ONI_OPT_MAXWRITEFRAMESIZE:
        return put_u32(value, size, ctx->max_wframe);
    case ONI_OPT_BLOCKREADSIZE:
        return put_u32(value, size, ctx->block_read);
    case ONI_OPT_BLOCKWRITESIZE:
        return put_u32(value, size, ctx->block_write);
    default: /* custom: a hardware register */
        return put_config(ctx, ONI_CONFIG_CUSTOMBEGIN + (opt - ONI_OPT_CUSTOMBEGIN), value, size);
    }
}

int oni_get_opt(const oni_ctx ctx, int ctx_opt, void *value, size_t *size)
{
    if (!ctx)
        return ONI_ENULLCTX;
    pthread_mutex_lock(&ctx->lock);
    int rc = get_locked(ctx, ctx_opt, value, size);
    pthread_mutex_unlock(&ctx->lock);
    return rc;
}

/* Write ONI_CONFIG_RUNNING and drop buffered data, which belongs to the run
 * before (upstream dumps its buffers there too: api/liboni/oni.c:397). Under
 * the read lock together with the driver's write: the driver drops its frame
 * in progress then, and a reader refilling between the two would keep the
 * start of a frame whose rest is gone. On an error the context stays as it was. */
static int set_running(struct oni_ctx_impl *ctx, uint32_t v)
{
    unsigned rt = oni_rlock_opt(ctx);
    int rc = ctx->drv.write_config(ctx->dctx, ONI_CONFIG_RUNNING, v);
    if (rc >= 0)
        oni_read_flush(ctx);
    oni_runlock_opt(ctx, rt);
    if (rc < 0)
        return rc;
    atomic_store(&ctx->state, v ? ONI_STATE_RUNNING : ONI_STATE_IDLE);
    return 0;
}

/* A block size the read or write path will use: at least one largest frame,
 * a whole number of words, and (onigpu's bound, docs/errors.md) at most
 * ONI_MAXBLOCKSIZE. */
static int block_ok(uint32_t v, oni_size_t max_frame)
{
    return v >= max_frame && v % 4 == 0 && v <= ONI_MAXBLOCKSIZE;
}

/* The option's own work, value already checked for size (4 bytes). */
static int set_value(struct oni_ctx_impl *ctx, int opt, uint32_t v)
{
    int rc;
    switch (opt) {
    case ONI_OPT_RUNNING:
        return set_running(ctx, v);
    case ONI_OPT_RESET:
        if (v == 0)
            return 0; /* as upstream: nothing to do */
        pthread_rwlock_wrlock(&ctx->olock);
        rc = reset(ctx, v);
        pthread_rwlock_unlock(&ctx->olock);
        return rc;
    case ONI_OPT_RESETACQCOUNTER:
        /* Any nonzero value goes to the hardware, and nothing else happens:
         * 2 (reset and run) starts the hardware, the context keeps its state
         * (api/liboni/oni.c:426-442). */
        rc = v ? ctx->drv.write_config(ctx->dctx, ONI_CONFIG_RESETACQCOUNTER, v) : 0;
        return rc < 0 ? rc : 0;
    case ONI_OPT_HWADDRESS:
        rc = ctx->drv.write_config(ctx->dctx, ONI_CONFIG_HWADDRESS, v);
        return rc < 0 ? rc : 0;
    case ONI_OPT_BLOCKREADSIZE: {
        if (!block_ok(v, ctx->max_rframe))
            return ONI_EINVALREADSIZE;
        unsigned rt = oni_rlock_opt(ctx);
        ctx->block_read = v;
        oni_read_release(ctx); /* blocks are sized for the old value */
        oni_runlock_opt(ctx, rt);
        return 0;
    }
    case ONI_OPT_BLOCKWRITESIZE:
        if (!block_ok(v, ctx->max_wframe))
            return ONI_EINVALWRITESIZE;
        pthread_mutex_lock(&ctx->wlock);
        ctx->block_write = v;
        pthread_mutex_unlock(&ctx->wlock);
        return 0;
    default: /* custom: a hardware register */
        rc = ctx->drv.write_config(ctx->dctx, ONI_CONFIG_CUSTOMBEGIN + (opt - ONI_OPT_CUSTOMBEGIN), v);
        return rc < 0 ? rc : 0;
    }
}

static int set_locked(struct oni_ctx_impl *ctx, int opt, const void *value, size_t size)
{
    int state = atomic_load(&ctx->state);
    switch (opt) {
    case ONI_OPT_DEVICETABLE:
    case ONI_OPT_NUMDEVICES:
    case ONI_OPT_SYSCLKHZ:
    case ONI_OPT_ACQCLKHZ:
    case ONI_OPT_MAXREADFRAMESIZE:
    case ONI_OPT_MAXWRITEFRAMESIZE:
        return ONI_EREADONLY; /* in any state, as upstream */
    case ONI_OPT_RESET:
    case ONI_OPT_BLOCKREADSIZE:
    case ONI_OPT_BLOCKWRITESIZE:
        if (state != ONI_STATE_IDLE)
            return ONI_EINVALSTATE;
        break;
    case ONI_OPT_TIMEOUTMS:
        break; /* any state */
    default:
        if (opt < 0)
            return ONI_EPROTCONFIG; /* as any other number below ONI_OPT_CUSTOMBEGIN upstream does not know */
        if (state == ONI_STATE_UNINIT)
            return ONI_EINVALSTATE;
    }
    if (size != sizeof(uint32_t))
        return ONI_EBUFFERSIZE; /* every writable option is 32 bits */
    if (!value)
        return ONI_EINVALARG;
    uint32_t v;
    memcpy(&v, value, sizeof v);
    if (opt == ONI_OPT_TIMEOUTMS) {
        atomic_store(&ctx->timeout_ms, v);
        send_timeout(ctx);
        return 0;
    }
    int rc = set_value(ctx, opt, v);
    if (rc < 0)
        return rc;
    /* Upstream returns the driver's answer as it is (api/liboni/oni.c:541). */
    return ctx->drv.set_opt_callback(ctx->dctx, opt, value, size);
}

int oni_set_opt(oni_ctx ctx, int ctx_opt, const void *value, size_t size)
{
    if (!ctx)
        return ONI_ENULLCTX;
    pthread_mutex_lock(&ctx->lock);
    int rc = set_locked(ctx, ctx_opt, value, size);
    pthread_mutex_unlock(&ctx->lock);
    return rc;
}

/* ---- driver options and registers --------------------------------------- */

/* The lock a driver option runs under: olock shared when the driver lets it
 * run beside other calls, else the config lock. Returns what to unlock with. */
static int opt_lock(struct oni_ctx_impl *ctx, int drv_opt)
{
    int shared = ctx->drv.concurrent_opt && ctx->drv.concurrent_opt(drv_opt);
    if (shared)
        pthread_rwlock_rdlock(&ctx->olock);
    else
        pthread_mutex_lock(&ctx->lock);
    return shared;
}

static void opt_unlock(struct oni_ctx_impl *ctx, int shared)
{
    if (shared)
        pthread_rwlock_unlock(&ctx->olock);
    else
        pthread_mutex_unlock(&ctx->lock);
}

int oni_set_driver_opt(oni_ctx ctx, int drv_opt, const void *value, size_t size)
{
    if (!ctx)
        return ONI_ENULLCTX;
    if (!value && size)
        return ONI_EINVALARG;
    int shared = opt_lock(ctx, drv_opt);
    int rc = ctx->drv.set_opt(ctx->dctx, drv_opt, value, size);
    opt_unlock(ctx, shared);
    return rc;
}

int oni_get_driver_opt(const oni_ctx ctx, int drv_opt, void *value, size_t *size)
{
    if (!ctx)
        return ONI_ENULLCTX;
    if (!value || !size)
        return ONI_EINVALARG;
    int shared = opt_lock(ctx, drv_opt);
    int rc = ctx->drv.get_opt(ctx->dctx, drv_opt, value, size);
    opt_unlock(ctx, shared);
    return rc;
}

static int reg(struct oni_ctx_impl *ctx, oni_dev_idx_t dev, oni_reg_addr_t addr,
               oni_reg_val_t *value, int write)
{
    if (!ctx)
        return ONI_ENULLCTX;
    if (!value)
        return ONI_EINVALARG;
    /* In any state, as upstream (api/liboni/oni.c:554-635, which only
     * asserts): before init the driver answers, whatever it does then. */
    pthread_mutex_lock(&ctx->lock);
    int rc = oni_reg_access(ctx, dev, addr, value, write);
    pthread_mutex_unlock(&ctx->lock);
    return rc;
}

int oni_read_reg(const oni_ctx ctx, oni_dev_idx_t dev_idx, oni_reg_addr_t addr, oni_reg_val_t *value)
{
    return reg(ctx, dev_idx, addr, value, 0);
}

int oni_write_reg(const oni_ctx ctx, oni_dev_idx_t dev_idx, oni_reg_addr_t addr, oni_reg_val_t value)
{
    return reg(ctx, dev_idx, addr, &value, 1);
}
