/* riffa.c - a driver that holds liboni to the rules of upstream's riffa
 * driver (api/liboni/drivers/riffa/onidriver_riffa.c, cited by line below as
 * "riffa:N"), the driver of the ONIX PCIe host card. Written as upstream's
 * drivers are (C99, <onidriver.h>), built as libonidriver_riffarules.so
 * and loaded by riffa_host, which drives it as oni-repl does.
 *
 * The rules, and what breaking one does here:
 * - Nothing touches the card before oni_driver_init: riffa keeps a NULL fpga
 *   handle until then (riffa:79, 88) and passes it to fpga_send / fpga_recv
 *   (riffa:136, 146, 171, 190, 204, 226, 235), which would crash. Here: a
 *   message and abort().
 * - A data-stream read is exactly one block: size / 4 words must equal the
 *   block size the driver was last told through set_opt_callback
 *   (ONI_OPT_BLOCKREADSIZE, riffa:231-236), 1024 words until then (riffa:78).
 *   Otherwise ONI_EINVALREADSIZE (riffa:135), as riffa answers.
 * - A data-stream read blocks until the whole block came (fpga_recv with
 *   timeout 0, riffa:136); a signal-stream read blocks until every byte asked
 *   for came (riffa:144-150). Here a read that would wait longer than
 *   RULES_STALL_S seconds aborts: riffa would hang.
 * - Stopping is ONI_CONFIG_RUNNING = 0 and then set_opt_callback(RUNNING, 0),
 *   which empties the DMA buffers (riffa:221-229); a frame the card had
 *   begun to send stays in them until then, so a host that skips the
 *   callback starts its next run in the middle of a frame.
 * - Only the config registers riffa knows (riffa:271-302) may be named; any
 *   other maps to offset 0, the device index register (riffa:300-301), and
 *   would corrupt a register access. Here: a message and abort().
 * - Driver options: none (riffa:242-264, ONI_EINVALOPT).
 *
 * The card behind it (not riffa's business, but needed to run): a device
 * table of three devices, frames generated as the host reads them while
 * running (each device's frames carry its own counter, so a host can tell
 * a lost or torn frame), a register file per device behind the
 * ONI-API.md register protocol, and the device table on RESET. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <oni.h> /* oni_device_t, for the card's table */
#include <onidriver.h>

#define RULES_STALL_S 10
#define NDEV 3
#define NREG 16
#define SIGCAP 4096
#define FRAME_MAX 64

/* Signal packet types (ONI-API.md; upstream's drivers name their own). */
enum { SIG_WACK = 2, SIG_WNACK = 4, SIG_RACK = 8, SIG_RNACK = 16, SIG_TABLEACK = 32, SIG_DEVINST = 64 };

static const oni_device_t table[NDEV] = {
    {0x000, 12, 1, 8, 0},  /* a heartbeat-like device: 8 bytes */
    {0x001, 10, 1, 22, 0}, /* 22 bytes: padded to 24 in the stream */
    {0x002, 8, 1, 0, 4},   /* writable only */
};

struct rules {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int open;                 /* oni_driver_init done */
    oni_size_t block_words;   /* riffa:30, 78, 233 */
    oni_reg_val_t reg_dev, reg_addr, reg_value, reg_rw, trig, running, hwaddr, flags0;
    oni_reg_val_t regs[NDEV][NREG];
    unsigned long long acq;   /* time of the next frame */
    unsigned long long count[NDEV];
    unsigned next_dev;        /* round robin over the readable devices */
    unsigned char stage[FRAME_MAX];
    size_t stage_len, stage_pos; /* a frame in the DMA buffers, partly delivered */
    unsigned char sig[SIGCAP];
    size_t sig_len, sig_pos;
    unsigned long writes;
};

static const oni_driver_info_t info = {"riffarules", 1, 0, 0, NULL};

static void die(const char *why)
{
    fprintf(stderr, "riffarules: rule broken: %s\n", why);
    abort();
}

static void need_open(const struct rules *r, const char *call)
{
    if (!r->open) {
        fprintf(stderr, "riffarules: %s before oni_driver_init: riffa would use its NULL fpga handle\n", call);
        abort();
    }
}

/* Wait on the card (lock held) for at most RULES_STALL_S; 0 once timed out. */
static int wait_card(struct rules *r)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += RULES_STALL_S;
    return pthread_cond_timedwait(&r->wake, &r->lock, &t) == 0;
}

static void put32(unsigned char *p, oni_reg_val_t v)
{
    memcpy(p, &v, 4);
}

/* Queue a COBS packet [type][n payload bytes] with its delimiter (lock held). */
static void sig_push(struct rules *r, oni_reg_val_t type, const unsigned char *payload, size_t n)
{
    unsigned char raw[4 + 32];
    unsigned char *out = r->sig + r->sig_len;
    size_t code_at = 0, o = 1, i;
    unsigned char code = 1;
    if (r->sig_len + n + 8 > SIGCAP)
        die("signal stream never read");
    put32(raw, type);
    if (n)
        memcpy(raw + 4, payload, n);
    n += 4;
    for (i = 0; i < n; i++) {
        if (raw[i] == 0) {
            out[code_at] = code;
            code_at = o++;
            code = 1;
        } else {
            out[o++] = raw[i];
            code++;
        }
    }
    out[code_at] = code;
    out[o++] = 0;
    r->sig_len += o;
    pthread_cond_broadcast(&r->wake);
}

static void reset_card(struct rules *r)
{
    unsigned char p[sizeof(oni_device_t)];
    oni_reg_val_t n = NDEV;
    int i;
    r->running = 0;
    r->trig = 0;
    r->acq = 0;
    r->stage_len = r->stage_pos = 0;
    r->sig_len = r->sig_pos = 0;
    memset(r->count, 0, sizeof r->count);
    memcpy(p, &n, 4);
    sig_push(r, SIG_TABLEACK, p, 4);
    for (i = 0; i < NDEV; i++) {
        memcpy(p, &table[i], sizeof p);
        sig_push(r, SIG_DEVINST, p, sizeof p);
    }
}

/* The next frame of the round robin into the stage (lock held): [u64 time]
 * [u32 idx][u32 size][u32 device counter][bytes (counter + i) & 0xff], zero
 * padding to a word. */
static void next_frame(struct rules *r)
{
    const oni_device_t *d;
    size_t i, pad;
    do {
        d = &table[r->next_dev];
        r->next_dev = (r->next_dev + 1) % NDEV;
    } while (!d->read_size);
    unsigned long long k = r->count[d - table]++;
    memcpy(r->stage, &r->acq, 8);
    r->acq += 100;
    put32(r->stage + 8, d->idx);
    put32(r->stage + 12, d->read_size);
    put32(r->stage + 16, (oni_reg_val_t)k);
    for (i = 4; i < d->read_size; i++)
        r->stage[16 + i] = (unsigned char)(k + i);
    pad = (4 - d->read_size % 4) % 4;
    memset(r->stage + 16 + d->read_size, 0, pad);
    r->stage_len = 16 + d->read_size + pad;
    r->stage_pos = 0;
}

ONI_DRIVER_EXPORT oni_driver_ctx oni_driver_create_ctx(void)
{
    struct rules *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->wake, NULL);
    r->block_words = 1024; /* riffa:78 */
    return r;
}

ONI_DRIVER_EXPORT int oni_driver_destroy_ctx(oni_driver_ctx c)
{
    struct rules *r = c;
    pthread_cond_destroy(&r->wake);
    pthread_mutex_destroy(&r->lock);
    free(r);
    return ONI_ESUCCESS;
}

ONI_DRIVER_EXPORT int oni_driver_init(oni_driver_ctx c, int host_idx)
{
    struct rules *r = c;
    (void)host_idx;
    pthread_mutex_lock(&r->lock);
    r->open = 1; /* riffa:88-101: open, lock and reset the card */
    r->sig_len = r->sig_pos = 0;
    pthread_mutex_unlock(&r->lock);
    return ONI_ESUCCESS;
}

static int read_data(struct rules *r, unsigned char *out, size_t size)
{
    size_t got = 0;
    if ((size >> 2) != r->block_words || size % 4) {
        fprintf(stderr, "riffarules: data read of %lu bytes, block is %lu words: ONI_EINVALREADSIZE (riffa:135)\n",
                (unsigned long)size, (unsigned long)r->block_words);
        return ONI_EINVALREADSIZE;
    }
    while (got < size) {
        if (r->stage_pos == r->stage_len) {
            if (!r->running) {
                if (!wait_card(r))
                    die("a data read waited with the card stopped: riffa's fpga_recv (timeout 0) hangs");
                continue;
            }
            next_frame(r);
        }
        size_t n = r->stage_len - r->stage_pos;
        if (n > size - got)
            n = size - got;
        memcpy(out + got, r->stage + r->stage_pos, n);
        r->stage_pos += n;
        got += n;
    }
    return (int)size;
}

static int read_signal(struct rules *r, unsigned char *out, size_t size)
{
    size_t got = 0;
    while (got < size) {
        if (r->sig_pos == r->sig_len) {
            if (!wait_card(r))
                die("a signal read waited for bytes that never come: riffa's fpga_recv (timeout 0) hangs");
            continue;
        }
        out[got++] = r->sig[r->sig_pos++];
    }
    return (int)size;
}

ONI_DRIVER_EXPORT int oni_driver_read_stream(oni_driver_ctx c, oni_read_stream_t s, void *data, size_t size)
{
    struct rules *r = c;
    int rc;
    pthread_mutex_lock(&r->lock);
    need_open(r, "read_stream");
    if (s == ONI_READ_STREAM_DATA)
        rc = read_data(r, data, size);
    else if (s == ONI_READ_STREAM_SIGNAL)
        rc = read_signal(r, data, size);
    else
        rc = ONI_EPATHINVALID; /* riffa:153 */
    pthread_mutex_unlock(&r->lock);
    return rc;
}

ONI_DRIVER_EXPORT int oni_driver_write_stream(oni_driver_ctx c, oni_write_stream_t s, const char *data,
                                              size_t size)
{
    struct rules *r = c;
    oni_reg_val_t hdr[2];
    pthread_mutex_lock(&r->lock);
    need_open(r, "write_stream");
    pthread_mutex_unlock(&r->lock);
    if (s != ONI_WRITE_STREAM_DATA)
        return ONI_EPATHINVALID; /* riffa:166 */
    if (size % 4)
        die("a write of a part of a word: riffa sends size >> 2 words (riffa:162) and drops the rest");
    /* The card takes whole frames [u32 idx][u32 words][words]. */
    if (size < 8)
        die("a write shorter than a frame header");
    memcpy(hdr, data, 8);
    if (hdr[0] != table[2].idx || (size_t)hdr[1] * 4 + 8 != size)
        die("a write that is not one frame of the writable device");
    pthread_mutex_lock(&r->lock);
    r->writes++;
    r->regs[2][7] = (oni_reg_val_t)r->writes;
    pthread_mutex_unlock(&r->lock);
    return (int)size; /* riffa:176 */
}

/* The registers riffa maps (riffa:271-302); anything else is a broken rule. */
static void known_config(oni_config_t reg)
{
    if ((int)reg < 0 || reg > ONI_CONFIG_CUSTOMBEGIN)
        die("a config register riffa does not map: it would write the device index register (riffa:300-301)");
}

ONI_DRIVER_EXPORT int oni_driver_read_config(oni_driver_ctx c, oni_config_t reg, oni_reg_val_t *value)
{
    struct rules *r = c;
    pthread_mutex_lock(&r->lock);
    need_open(r, "read_config");
    known_config(reg);
    switch (reg) {
    case ONI_CONFIG_DEV_IDX: *value = r->reg_dev; break;
    case ONI_CONFIG_REG_ADDR: *value = r->reg_addr; break;
    case ONI_CONFIG_REG_VALUE: *value = r->reg_value; break;
    case ONI_CONFIG_RW: *value = r->reg_rw; break;
    case ONI_CONFIG_TRIG: *value = r->trig; break;
    case ONI_CONFIG_RUNNING: *value = r->running; break;
    case ONI_CONFIG_SYSCLKHZ:
    case ONI_CONFIG_ACQCLKHZ: *value = 250000000; break;
    case ONI_CONFIG_HWADDRESS: *value = r->hwaddr; break;
    case ONI_CONFIG_CUSTOMBEGIN: *value = r->flags0; break;
    default: *value = 0; break;
    }
    pthread_mutex_unlock(&r->lock);
    return ONI_ESUCCESS;
}

/* A triggered register access (lock held), answered on the signal stream. */
static void reg_access(struct rules *r)
{
    int i;
    for (i = 0; i < NDEV && table[i].idx != r->reg_dev; i++)
        ;
    int ok = i < NDEV && r->reg_addr < NREG;
    if (ok && r->reg_rw)
        r->regs[i][r->reg_addr] = r->reg_value;
    else if (ok)
        r->reg_value = r->regs[i][r->reg_addr];
    sig_push(r, r->reg_rw ? (ok ? SIG_WACK : SIG_WNACK) : (ok ? SIG_RACK : SIG_RNACK), NULL, 0);
}

ONI_DRIVER_EXPORT int oni_driver_write_config(oni_driver_ctx c, oni_config_t reg, oni_reg_val_t value)
{
    struct rules *r = c;
    pthread_mutex_lock(&r->lock);
    need_open(r, "write_config");
    known_config(reg);
    switch (reg) {
    case ONI_CONFIG_DEV_IDX: r->reg_dev = value; break;
    case ONI_CONFIG_REG_ADDR: r->reg_addr = value; break;
    case ONI_CONFIG_REG_VALUE: r->reg_value = value; break;
    case ONI_CONFIG_RW: r->reg_rw = value; break;
    case ONI_CONFIG_TRIG:
        if (value)
            reg_access(r); /* answered at once: TRIG reads 0 again */
        break;
    case ONI_CONFIG_RUNNING:
        r->running = value; /* the frame in the DMA buffers stays there (riffa:221-229) */
        break;
    case ONI_CONFIG_RESET:
        if (value)
            reset_card(r);
        break;
    case ONI_CONFIG_RESETACQCOUNTER:
        r->acq = 0;
        if (value == 2)
            r->running = 1; /* reset and run */
        break;
    case ONI_CONFIG_HWADDRESS: r->hwaddr = value; break;
    case ONI_CONFIG_CUSTOMBEGIN: r->flags0 = value; break;
    default: break; /* SYSCLKHZ, ACQCLKHZ: the card ignores writes */
    }
    pthread_cond_broadcast(&r->wake);
    pthread_mutex_unlock(&r->lock);
    return ONI_ESUCCESS;
}

ONI_DRIVER_EXPORT int oni_driver_set_opt_callback(oni_driver_ctx c, int oni_option, const void *value,
                                                  size_t option_len)
{
    struct rules *r = c;
    oni_reg_val_t v = 0;
    (void)option_len; /* riffa:219 */
    pthread_mutex_lock(&r->lock);
    if (oni_option == ONI_OPT_RUNNING || oni_option == ONI_OPT_BLOCKREADSIZE)
        memcpy(&v, value, 4);
    if (oni_option == ONI_OPT_RUNNING && v == 0) {
        need_open(r, "set_opt_callback(RUNNING, 0)");
        r->stage_len = r->stage_pos = 0; /* riffa:221-229: empty the DMA buffers */
    } else if (oni_option == ONI_OPT_BLOCKREADSIZE) {
        need_open(r, "set_opt_callback(BLOCKREADSIZE)");
        r->block_words = v >> 2; /* riffa:233-236 */
    }
    pthread_mutex_unlock(&r->lock);
    return ONI_ESUCCESS; /* riffa:238 */
}

ONI_DRIVER_EXPORT int oni_driver_set_opt(oni_driver_ctx c, int driver_option, const void *value,
                                         size_t option_len)
{
    (void)c;
    (void)driver_option;
    (void)value;
    (void)option_len;
    return ONI_EINVALOPT; /* riffa:251 */
}

ONI_DRIVER_EXPORT int oni_driver_get_opt(oni_driver_ctx c, int driver_option, void *value, size_t *option_len)
{
    (void)c;
    (void)driver_option;
    (void)value;
    (void)option_len;
    return ONI_EINVALOPT; /* riffa:263 */
}

ONI_DRIVER_EXPORT const oni_driver_info_t *oni_driver_info(void)
{
    return &info;
}
