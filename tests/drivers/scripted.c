/* scripted.c - the "scripted" fixture driver (see scripted.h): no hardware,
 * every byte of its streams and every register answer set by the test. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "scripted.h"

#define NREGS 64
#define WRITTEN_CAP (1u << 20)

struct buf {
    uint8_t *p;
    size_t len, pos;
};

struct scr {
    pthread_mutex_t lock;
    struct buf devtable, signal, data;
    uint8_t *written;
    size_t nwritten;
    uint32_t repeat, chunk, regmode, empty, wchunk, wroom, rungate, table_delay;
    uint64_t quiet_until; /* oni_now_ns() before which the signal stream reads as drained */
    int32_t init_rc, callback_rc;
    int nullspam;
    size_t nullpos;
    struct scr_stats st;
    struct { uint32_t dev, addr, val; } regs[NREGS];
    int nregs;
};

static int set_bytes(struct buf *b, const void *v, size_t n, int append)
{
    size_t keep = append ? b->len - b->pos : 0;
    uint8_t *p = malloc(keep + n + 1);
    if (!p)
        return ONI_EBADALLOC;
    if (keep)
        memcpy(p, b->p + b->pos, keep);
    if (n)
        memcpy(p + keep, v, n);
    free(b->p);
    b->p = p;
    b->len = keep + n;
    b->pos = 0;
    return 0;
}

static oni_driver_ctx scr_create(void)
{
    struct scr *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    if (!(s->written = malloc(WRITTEN_CAP))) {
        free(s);
        return NULL;
    }
    pthread_mutex_init(&s->lock, NULL);
    s->wroom = UINT32_MAX;
    s->st.config[ONI_CONFIG_SYSCLKHZ] = 250000000;
    s->st.config[ONI_CONFIG_ACQCLKHZ] = 250000000;
    return s;
}

static int scr_destroy(oni_driver_ctx c)
{
    struct scr *s = c;
    free(s->devtable.p);
    free(s->signal.p);
    free(s->data.p);
    free(s->written);
    pthread_mutex_destroy(&s->lock);
    free(s);
    return 0;
}

static int scr_init(oni_driver_ctx c, int host_idx)
{
    struct scr *s = c;
    pthread_mutex_lock(&s->lock);
    s->st.inits++;
    int rc = s->init_rc;
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* What a read of a drained stream returns (lock held; may drop it to wait). */
static int drained(struct scr *s)
{
    if (s->empty == SCR_EMPTY_TIMEOUT)
        return ONI_ETIMEOUT;
    if (s->empty == SCR_EMPTY_WAIT) {
        uint32_t ms = s->st.timeout_ms ? s->st.timeout_ms : 1000;
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
        pthread_mutex_unlock(&s->lock);
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&s->lock);
        return ONI_ETIMEOUT;
    }
    return 0;
}

static int read_signal(struct scr *s, uint8_t *dst, size_t size)
{
    static const uint8_t nullsig[] = {0x02, 0x01, 0x01, 0x01, 0x01, 0x00}; /* type 1, COBS */
    if (oni_now_ns() < s->quiet_until)
        return drained(s);
    if (s->signal.pos < s->signal.len) {
        size_t n = s->signal.len - s->signal.pos < size ? s->signal.len - s->signal.pos : size;
        memcpy(dst, s->signal.p + s->signal.pos, n);
        s->signal.pos += n;
        return (int)n;
    }
    if (s->nullspam) {
        for (size_t i = 0; i < size; i++) {
            dst[i] = nullsig[s->nullpos];
            s->nullpos = (s->nullpos + 1) % sizeof nullsig;
        }
        return (int)size;
    }
    return drained(s);
}

static int read_data(struct scr *s, uint8_t *dst, size_t size)
{
    struct buf *b = &s->data;
    if (s->chunk && size > s->chunk)
        size = s->chunk;
    int gated = s->rungate && !s->st.config[ONI_CONFIG_RUNNING] &&
                s->st.config[ONI_CONFIG_RESETACQCOUNTER] != 2;
    if (gated || b->len == 0 || (!s->repeat && b->pos == b->len))
        return drained(s);
    size_t done = 0;
    while (done < size) {
        if (b->pos == b->len) {
            if (!s->repeat)
                break;
            b->pos = 0;
        }
        size_t n = b->len - b->pos < size - done ? b->len - b->pos : size - done;
        memcpy(dst + done, b->p + b->pos, n);
        b->pos += n;
        done += n;
    }
    return (int)done;
}

static int scr_read_stream(oni_driver_ctx c, oni_read_stream_t stream, void *data, size_t size)
{
    struct scr *s = c;
    pthread_mutex_lock(&s->lock);
    int rc = stream == ONI_READ_STREAM_SIGNAL ? read_signal(s, data, size)
             : stream == ONI_READ_STREAM_DATA ? read_data(s, data, size)
                                              : ONI_EINVALARG;
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static int scr_write_stream(oni_driver_ctx c, oni_write_stream_t stream, const char *data, size_t size)
{
    struct scr *s = c;
    if (stream != ONI_WRITE_STREAM_DATA)
        return ONI_EINVALARG;
    pthread_mutex_lock(&s->lock);
    if (s->wchunk && size > s->wchunk)
        size = s->wchunk;
    if (size > s->wroom)
        size = s->wroom;
    if (s->wroom != UINT32_MAX)
        s->wroom -= (uint32_t)size;
    int rc = ONI_EWRITEFAILURE;
    if (s->nwritten + size <= WRITTEN_CAP) {
        memcpy(s->written + s->nwritten, data, size);
        s->nwritten += size;
        rc = (int)size;
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static uint32_t *reg_slot(struct scr *s, uint32_t dev, uint32_t addr)
{
    for (int i = 0; i < s->nregs; i++)
        if (s->regs[i].dev == dev && s->regs[i].addr == addr)
            return &s->regs[i].val;
    if (s->nregs == NREGS)
        return NULL;
    s->regs[s->nregs].dev = dev;
    s->regs[s->nregs].addr = addr;
    s->regs[s->nregs].val = 0;
    return &s->regs[s->nregs++].val;
}

/* Answer a triggered register access as the register mode says (lock held). */
static int trigger(struct scr *s)
{
    uint32_t *cfg = s->st.config;
    int write = cfg[ONI_CONFIG_RW] != 0;
    uint8_t pkt[16];
    uint32_t type;
    switch (s->regmode) {
    case SCR_REG_SILENT:
        return 0;
    case SCR_REG_NULLSPAM:
        s->nullspam = 1;
        return 0;
    case SCR_REG_EXTERNAL:
        cfg[ONI_CONFIG_TRIG] = 0;
        return 0;
    case SCR_REG_NACK:
        type = write ? ONI_SIG_CONFIGWNACK : ONI_SIG_CONFIGRNACK;
        break;
    default: {
        uint32_t *r = reg_slot(s, cfg[ONI_CONFIG_DEV_IDX], cfg[ONI_CONFIG_REG_ADDR]);
        if (!r) {
            type = write ? ONI_SIG_CONFIGWNACK : ONI_SIG_CONFIGRNACK;
        } else if (write) {
            *r = cfg[ONI_CONFIG_REG_VALUE];
            type = ONI_SIG_CONFIGWACK;
        } else {
            cfg[ONI_CONFIG_REG_VALUE] = *r;
            type = ONI_SIG_CONFIGRACK;
        }
    }
    }
    cfg[ONI_CONFIG_TRIG] = 0;
    int n = oni_signal_pack(type, NULL, 0, pkt, sizeof pkt);
    return n < 0 ? n : set_bytes(&s->signal, pkt, (size_t)n, 1);
}

static int scr_read_config(oni_driver_ctx c, oni_config_t k, oni_reg_val_t *v)
{
    struct scr *s = c;
    if ((unsigned)k >= SCR_NCONFIG)
        return ONI_EINVALOPT;
    pthread_mutex_lock(&s->lock);
    *v = s->st.config[k];
    pthread_mutex_unlock(&s->lock);
    return 0;
}

static int scr_write_config(oni_driver_ctx c, oni_config_t k, oni_reg_val_t v)
{
    struct scr *s = c;
    if ((unsigned)k >= SCR_NCONFIG)
        return ONI_EINVALOPT;
    int rc = 0;
    pthread_mutex_lock(&s->lock);
    s->st.config[k] = v;
    if (k == ONI_CONFIG_TRIG && v)
        rc = trigger(s);
    if (k == ONI_CONFIG_RESET && v) {
        s->st.resets++;
        s->st.reset_written = (uint32_t)s->nwritten;
        s->quiet_until = oni_now_ns() + (uint64_t)s->table_delay * 1000000u;
        s->nullspam = 0;
        rc = set_bytes(&s->signal, s->devtable.p, s->devtable.len, 1);
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static int scr_set_opt_callback(oni_driver_ctx c, int opt, const void *v, size_t n)
{
    struct scr *s = c;
    pthread_mutex_lock(&s->lock);
    s->st.callbacks++;
    s->st.last_callback = opt;
    if (opt == ONI_OPT_TIMEOUTMS && n == 4)
        memcpy(&s->st.timeout_ms, v, 4);
    int rc = s->callback_rc;
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static int scr_set_opt(oni_driver_ctx c, int opt, const void *v, size_t n)
{
    struct scr *s = c;
    uint32_t u = 0;
    int rc = 0;
    if (opt >= SCR_OPT_REPEAT && opt != SCR_OPT_STATS && opt != SCR_OPT_WRITTEN) {
        if (n != 4)
            return ONI_EBUFFERSIZE;
        memcpy(&u, v, 4);
    }
    pthread_mutex_lock(&s->lock);
    switch (opt) {
    case SCR_OPT_DEVTABLE: rc = set_bytes(&s->devtable, v, n, 0); break;
    case SCR_OPT_SIGNAL: rc = set_bytes(&s->signal, v, n, 1); break;
    case SCR_OPT_DATA: rc = set_bytes(&s->data, v, n, 0); break;
    case SCR_OPT_REPEAT: s->repeat = u; break;
    case SCR_OPT_CHUNK: s->chunk = u; break;
    case SCR_OPT_REGMODE: s->regmode = u; s->nullspam = 0; break;
    case SCR_OPT_EMPTY: s->empty = u; break;
    case SCR_OPT_INITRC: s->init_rc = (int32_t)u; break;
    case SCR_OPT_WRITECHUNK: s->wchunk = u; break;
    case SCR_OPT_CALLBACKRC: s->callback_rc = (int32_t)u; break;
    case SCR_OPT_WRITEROOM: s->wroom = u; break;
    case SCR_OPT_RUNGATE: s->rungate = u; break;
    case SCR_OPT_TABLEDELAY: s->table_delay = u; break;
    default: rc = ONI_EINVALOPT;
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static int scr_get_opt(oni_driver_ctx c, int opt, void *v, size_t *n)
{
    struct scr *s = c;
    int rc = 0;
    pthread_mutex_lock(&s->lock);
    if (opt == SCR_OPT_STATS) {
        if (*n < sizeof s->st)
            rc = ONI_EBUFFERSIZE;
        else
            memcpy(v, &s->st, *n = sizeof s->st);
    } else if (opt == SCR_OPT_WRITTEN) {
        if (*n < s->nwritten)
            rc = ONI_EBUFFERSIZE;
        else
            memcpy(v, s->written, *n = s->nwritten);
    } else {
        rc = ONI_EINVALOPT;
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static const oni_driver_info_t scr_info_v = {"scripted", 1, 0, 0, NULL};

static const oni_driver_info_t *scr_info(void) { return &scr_info_v; }

const struct oni_driver onifix_scripted = {
    "scripted", scr_create, scr_destroy, scr_init, scr_read_stream, scr_write_stream,
    scr_read_config, scr_write_config, scr_set_opt_callback, scr_set_opt, scr_get_opt, scr_info,
    NULL, /* every option under the config lock */
    NULL, /* no option names something of this machine */
};
