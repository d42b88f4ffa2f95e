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

uint64_t oni_deadline(const struct oni_ctx_impl *ctx)
{
    return oni_ms_from_now(atomic_load(&ctx->timeout_ms));
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

/* ---- lifecycle ----------------------------------------------------------- */

int oni_driver_complete(const struct oni_driver *d)
{
    return d->create_ctx && d->destroy_ctx && d->init && d->read_stream && d->write_stream &&
           d->read_config && d->write_config && d->set_opt_callback && d->set_opt && d->get_opt &&
           d->info;
}

/* The default ONI_OPT_TIMEOUTMS: ONI_TIMEOUTMS_ENV when set (so that a
 * program written for upstream, which has no such option, can pause longer
 * than the default), else ONI_DEFAULT_TIMEOUTMS. -1 if the variable is not a
 * number of milliseconds, 1 .. 2^32 - 1. */
static int64_t default_timeout(void)
{
    const char *s = getenv(ONI_TIMEOUTMS_ENV);
    if (!s)
        return ONI_DEFAULT_TIMEOUTMS;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!isdigit((unsigned char)*s) || *end || errno || v == 0 || v > UINT32_MAX)
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

/* Reset the hardware, read clocks and device table, and install them with
 * every frame size that follows (lock held). Nothing changes on failure. */
static int reset(struct oni_ctx_impl *ctx)
{
    oni_device_t *devs;
    size_t n;
    int rc = oni_read_devtable(ctx, &devs, &n);
    if (rc < 0)
        return rc;
    oni_reg_val_t sys = 0, acq = 0;
    struct oni_hslot *slot = NULL;
    uint32_t mask = 0, shift = 0;
    if ((rc = ctx->drv.read_config(ctx->dctx, ONI_CONFIG_SYSCLKHZ, &sys)) >= 0 &&
             (rc = ctx->drv.read_config(ctx->dctx, ONI_CONFIG_ACQCLKHZ, &acq)) >= 0)
        rc = (slot = build_map(devs, n, &mask, &shift)) ? 0 : ONI_EBADALLOC;
    if (rc < 0) {
        free(devs);
        return rc;
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
    ctx->sysclk_hz = sys;
    ctx->acqclk_hz = acq;
    ctx->max_rframe = ONI_RFRAMEHEADERSZ + rmax;
    ctx->max_wframe = ONI_WFRAMEHEADERSZ + wmax;
    /* A block size the user chose survives a reset while it still fits;
     * a default follows the new table. */
    if (!ctx->block_read_set || ctx->block_read < ctx->max_rframe) {
        ctx->block_read = (oni_size_t)oni_pad4(ctx->max_rframe);
        ctx->block_read_set = 0;
    }
    if (!ctx->block_write_set || ctx->block_write < ctx->max_wframe) {
        ctx->block_write = (oni_size_t)oni_pad4(ctx->max_wframe) > ONI_DEFAULTBLOCKWRITESIZE
                               ? (oni_size_t)oni_pad4(ctx->max_wframe)
                               : ONI_DEFAULTBLOCKWRITESIZE;
        ctx->block_write_set = 0;
    }
    oni_read_release(ctx);
    pthread_mutex_unlock(&ctx->wlock);
    oni_runlock_opt(ctx, rt);
    return 0;
}

static void send_timeout(struct oni_ctx_impl *ctx)
{
    uint32_t ms = atomic_load(&ctx->timeout_ms);
    /* Drivers built for upstream do not know this option; their answer does not matter. */
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
    if ((rc = reset(ctx)) < 0)
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
    if (atomic_load(&ctx->state) != ONI_STATE_UNINIT)
        (void)ctx->drv.write_config(ctx->dctx, ONI_CONFIG_RUNNING, 0); /* best effort */
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

/* Copy a 32-bit option value out, checking the caller's buffer. */
static int put_u32(void *value, size_t *size, uint32_t v)
{
    if (*size < sizeof v)
        return oni_opt_short(size, sizeof v);
    memcpy(value, &v, sizeof v);
    *size = sizeof v;
    return 0;
}

static int get_locked(struct oni_ctx_impl *ctx, int opt, void *value, size_t *size)
{
    oni_reg_val_t v;
    int rc;
    if (opt == ONI_OPT_TIMEOUTMS)
        return put_u32(value, size, atomic_load(&ctx->timeout_ms));
    int state = atomic_load(&ctx->state);
    if (state == ONI_STATE_UNINIT)
        return ONI_EINVALSTATE;
    if (opt != ONI_OPT_DEVICETABLE && opt != ONI_OPT_RESET && opt != ONI_OPT_RESETACQCOUNTER &&
        *size < sizeof v)
        return oni_opt_short(size, sizeof v);
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
    case ONI_OPT_RUNNING:
        return put_u32(value, size, state == ONI_STATE_RUNNING);
    case ONI_OPT_RESET:
    case ONI_OPT_RESETACQCOUNTER:
        return ONI_EWRITEONLY;
    case ONI_OPT_SYSCLKHZ:
        return put_u32(value, size, ctx->sysclk_hz);
    case ONI_OPT_ACQCLKHZ:
        return put_u32(value, size, ctx->acqclk_hz);
    case ONI_OPT_HWADDRESS:
        if ((rc = ctx->drv.read_config(ctx->dctx, ONI_CONFIG_HWADDRESS, &v)) < 0)
            return rc;
        return put_u32(value, size, v);
    case ONI_OPT_MAXREADFRAMESIZE:
        return put_u32(value, size, ctx->max_rframe);
    case ONI_OPT_MAXWRITEFRAMESIZE:
        return put_u32(value, size, ctx->max_wframe);
    case ONI_OPT_BLOCKREADSIZE:
        return put_u32(value, size, ctx->block_read);
    case ONI_OPT_BLOCKWRITESIZE:
        return put_u32(value, size, ctx->block_write);
    default: /* custom: a hardware register */
        rc = ctx->drv.read_config(ctx->dctx, ONI_CONFIG_CUSTOMBEGIN + (opt - ONI_OPT_CUSTOMBEGIN), &v);
        if (rc < 0)
            return rc;
        return put_u32(value, size, v);
    }
}

int oni_get_opt(const oni_ctx ctx, int ctx_opt, void *value, size_t *size)
{
    if (!ctx)
        return ONI_ENULLCTX;
    if (!value || !size)
        return ONI_EINVALARG;
    if (ctx_opt < 0)
        return ONI_EINVALOPT;
    pthread_mutex_lock(&ctx->lock);
    int rc = get_locked(ctx, ctx_opt, value, size);
    pthread_mutex_unlock(&ctx->lock);
    return rc;
}

/* Start or stop acquisition (with reset_counter: ONI_CONFIG_RESETACQCOUNTER
 * = 2 first, the driver's reset-and-run). Buffered data belongs to the run
 * before, so it is dropped, under the read lock together with the driver's
 * writes: the driver drops its frame in progress then, and a reader
 * refilling between the two would keep the start of a frame whose rest is
 * gone. On an error the context stays as it was. */
static int set_running(struct oni_ctx_impl *ctx, int run, int reset_counter)
{
    unsigned rt = oni_rlock_opt(ctx);
    int rc = reset_counter ? ctx->drv.write_config(ctx->dctx, ONI_CONFIG_RESETACQCOUNTER, 2) : 0;
    if (rc >= 0) {
        rc = ctx->drv.write_config(ctx->dctx, ONI_CONFIG_RUNNING, run ? 1 : 0);
        /* The reset-and-run started the hardware, the context stays idle:
         * stop it again (best effort; the error returned is the first). */
        if (rc < 0 && reset_counter)
            (void)ctx->drv.write_config(ctx->dctx, ONI_CONFIG_RUNNING, 0);
    }
    if (rc >= 0)
        oni_read_flush(ctx);
    oni_runlock_opt(ctx, rt);
    if (rc < 0)
        return rc;
    atomic_store(&ctx->state, run ? ONI_STATE_RUNNING : ONI_STATE_IDLE);
    return 0;
}

static int set_locked(struct oni_ctx_impl *ctx, int opt, uint32_t v)
{
    int state = atomic_load(&ctx->state);
    int rc;
    if (opt == ONI_OPT_TIMEOUTMS) {
        if (v == 0)
            return ONI_EINVALARG; /* no "wait forever" */
        atomic_store(&ctx->timeout_ms, v);
        return 0;
    }
    if (state == ONI_STATE_UNINIT)
        return ONI_EINVALSTATE;
    switch (opt) {
    case ONI_OPT_RUNNING:
        return set_running(ctx, v != 0, 0);
    case ONI_OPT_RESET:
        if (state != ONI_STATE_IDLE)
            return ONI_EINVALSTATE;
        if (v == 0)
            return 0; /* nothing to do, as upstream answers: host programs write 0 */
        pthread_rwlock_wrlock(&ctx->olock);
        rc = reset(ctx);
        pthread_rwlock_unlock(&ctx->olock);
        return rc;
    case ONI_OPT_RESETACQCOUNTER:
        if (v == 0)
            return 0; /* as RESET = 0 */
        if (v != 1 && v != 2)
            return ONI_EINVALARG;
        /* 2 = reset and run: a start, so under the read lock like RUNNING (a
         * reader must not meet the new run's bytes before the flush), and
         * RUNNING said too, for drivers that only know 1. */
        if (v == 2)
            return set_running(ctx, 1, 1);
        rc = ctx->drv.write_config(ctx->dctx, ONI_CONFIG_RESETACQCOUNTER, v);
        return rc < 0 ? rc : 0;
    case ONI_OPT_HWADDRESS:
        rc = ctx->drv.write_config(ctx->dctx, ONI_CONFIG_HWADDRESS, v);
        return rc < 0 ? rc : 0;
    case ONI_OPT_BLOCKREADSIZE:
        if (state != ONI_STATE_IDLE)
            return ONI_EINVALSTATE;
        if (v < ctx->max_rframe || v % 4 || v > ONI_MAXBLOCKSIZE)
            return ONI_EINVALREADSIZE;
        unsigned rt = oni_rlock_opt(ctx);
        ctx->block_read = v;
        ctx->block_read_set = 1;
        oni_read_release(ctx); /* blocks are sized for the old value */
        oni_runlock_opt(ctx, rt);
        return 0;
    case ONI_OPT_BLOCKWRITESIZE:
        if (v < ctx->max_wframe || v % 4 || v > ONI_MAXBLOCKSIZE)
            return ONI_EINVALWRITESIZE;
        pthread_mutex_lock(&ctx->wlock);
        ctx->block_write = v;
        ctx->block_write_set = 1;
        pthread_mutex_unlock(&ctx->wlock);
        return 0;
    case ONI_OPT_DEVICETABLE:
    case ONI_OPT_NUMDEVICES:
    case ONI_OPT_SYSCLKHZ:
    case ONI_OPT_ACQCLKHZ:
    case ONI_OPT_MAXREADFRAMESIZE:
    case ONI_OPT_MAXWRITEFRAMESIZE:
        return ONI_EREADONLY;
    default: /* custom: a hardware register */
        rc = ctx->drv.write_config(ctx->dctx, ONI_CONFIG_CUSTOMBEGIN + (opt - ONI_OPT_CUSTOMBEGIN), v);
        return rc < 0 ? rc : 0;
    }
}

int oni_set_opt(oni_ctx ctx, int ctx_opt, const void *value, size_t size)
{
    if (!ctx)
        return ONI_ENULLCTX;
    if (!value)
        return ONI_EINVALARG;
    if (ctx_opt < 0)
        return ONI_EINVALOPT;
    if (size != sizeof(uint32_t))
        return ONI_EBUFFERSIZE; /* every writable option is 32 bits */
    uint32_t v;
    memcpy(&v, value, sizeof v);
    pthread_mutex_lock(&ctx->lock);
    int rc = set_locked(ctx, ctx_opt, v);
    if (rc == 0) {
        rc = ctx->drv.set_opt_callback(ctx->dctx, ctx_opt, value, size);
        if (ctx_opt == ONI_OPT_TIMEOUTMS || rc > 0)
            rc = 0; /* see send_timeout */
    }
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
    pthread_mutex_lock(&ctx->lock);
    int rc = ONI_EINVALSTATE;
    if (atomic_load(&ctx->state) != ONI_STATE_UNINIT)
        rc = oni_reg_access(ctx, dev, addr, value, write);
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
