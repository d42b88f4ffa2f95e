/* driver.c - a driver translator written the way drivers for upstream liboni
 * are: C99, only <onidriver.h> (which, upstream, brings the option and config
 * register names, ONI_FRAMEHEADERSZ and ONI_REGSZ through onidefs.h), symbols
 * marked ONI_DRIVER_EXPORT. Built with -std=c99 -pedantic -Werror against
 * onigpu's headers as libonidriver_compatdrv.so and loaded by compat_drvhost,
 * so a header change that breaks such a driver's source fails the build.
 *
 * The hardware it pretends to be: one device (idx 0, id 10, 4-byte read
 * frames, not writable); frame k of a run is time k, payload the uint32 k.
 * Driver option 0 reads back the last option number set_opt_callback was
 * told of, option 1 its 32-bit value. Like upstream's drivers, it names its
 * own signal packet type oni_signal_t (the public headers leave it free). */
#include <string.h>
#include <onidriver.h>

typedef enum oni_signal {
    COMPAT_DEVICETABLEACK = 32,
    COMPAT_DEVICEINST = 64
} oni_signal_t;

#define PAYLOAD 4
#define FRAME_LEN (ONI_FRAMEHEADERSZ + PAYLOAD)

struct compat_drv {
    unsigned char sig[128]; /* COBS packets waiting on the signal stream */
    size_t sig_len, sig_pos;
    unsigned long long pos; /* byte position in the data stream of this run */
    int last_opt;
    oni_reg_val_t last_val;
    oni_reg_val_t hwaddr;
};

static struct compat_drv the_drv;
/* COMPAT_NAME: built again as libonidriver_compattest.so, named "test" as
 * upstream's own test driver is (tests/compat/CMakeLists.txt). */
#ifndef COMPAT_NAME
#define COMPAT_NAME "compatdrv"
#endif
static const oni_driver_info_t info = {COMPAT_NAME, 1, 0, 0, NULL};

static void put_u32(unsigned char *p, oni_reg_val_t v)
{
    memcpy(p, &v, sizeof v);
}

/* Queue a packet of type and n bytes (4 + n < 254) as COBS with its 0 delimiter. */
static void queue_packet(struct compat_drv *d, oni_signal_t type, unsigned char *src, size_t n)
{
    unsigned char *out = d->sig + d->sig_len;
    size_t code_at = 0, o = 1, i;
    unsigned char code = 1;
    put_u32(src, (oni_reg_val_t)type);
    n += 4;
    for (i = 0; i < n; i++) {
        if (src[i] == 0) {
            out[code_at] = code;
            code_at = o++;
            code = 1;
        } else {
            out[o++] = src[i];
            code++;
        }
    }
    out[code_at] = code;
    out[o++] = 0;
    d->sig_len += o;
}

/* A reset answers with the device table: DEVICETABLEACK (one device), DEVICEINST. */
static void queue_table(struct compat_drv *d)
{
    unsigned char p[4 + 5 * ONI_REGSZ];
    d->sig_len = d->sig_pos = 0;
    put_u32(p + 4, 1);
    queue_packet(d, COMPAT_DEVICETABLEACK, p, 4);
    put_u32(p + 4, 0);       /* idx */
    put_u32(p + 8, 10);      /* id */
    put_u32(p + 12, 1);      /* version */
    put_u32(p + 16, PAYLOAD); /* read_size */
    put_u32(p + 20, 0);      /* write_size */
    queue_packet(d, COMPAT_DEVICEINST, p, sizeof p - 4);
}

ONI_DRIVER_EXPORT oni_driver_ctx oni_driver_create_ctx(void)
{
    memset(&the_drv, 0, sizeof the_drv);
    the_drv.last_opt = -1;
    return &the_drv;
}

ONI_DRIVER_EXPORT int oni_driver_destroy_ctx(oni_driver_ctx c)
{
    (void)c;
    return ONI_ESUCCESS;
}

ONI_DRIVER_EXPORT int oni_driver_init(oni_driver_ctx c, int host_idx)
{
    (void)c;
    (void)host_idx;
    return ONI_ESUCCESS;
}

ONI_DRIVER_EXPORT int oni_driver_read_stream(oni_driver_ctx c, oni_read_stream_t s, void *data, size_t size)
{
    struct compat_drv *d = c;
    unsigned char *out = data;
    size_t i;
    if (s == ONI_READ_STREAM_SIGNAL) {
        for (i = 0; i < size && d->sig_pos < d->sig_len; i++)
            out[i] = d->sig[d->sig_pos++];
        return (int)i;
    }
    for (i = 0; i < size; i++, d->pos++) {
        unsigned long long k = d->pos / FRAME_LEN;
        size_t off = (size_t)(d->pos % FRAME_LEN);
        unsigned char f[FRAME_LEN];
        memcpy(f, &k, 8);
        put_u32(f + 8, 0);
        put_u32(f + 12, PAYLOAD);
        put_u32(f + ONI_FRAMEHEADERSZ, (oni_reg_val_t)k);
        out[i] = f[off];
    }
    return (int)size;
}

ONI_DRIVER_EXPORT int oni_driver_write_stream(oni_driver_ctx c, oni_write_stream_t s, const char *data,
                                              size_t size)
{
    (void)c;
    (void)s;
    (void)data;
    (void)size;
    return ONI_ENOTWRITEDEV;
}

ONI_DRIVER_EXPORT int oni_driver_read_config(oni_driver_ctx c, oni_config_t reg, oni_reg_val_t *value)
{
    struct compat_drv *d = c;
    switch (reg) {
    case ONI_CONFIG_SYSCLKHZ:
    case ONI_CONFIG_ACQCLKHZ:
        *value = 100000000;
        return ONI_ESUCCESS;
    case ONI_CONFIG_HWADDRESS:
        *value = d->hwaddr;
        return ONI_ESUCCESS;
    case ONI_CONFIG_RESET:
    case ONI_CONFIG_RESETACQCOUNTER:
        return ONI_EWRITEONLY;
    default:
        *value = 0;
        return ONI_ESUCCESS;
    }
}

ONI_DRIVER_EXPORT int oni_driver_write_config(oni_driver_ctx c, oni_config_t reg, oni_reg_val_t value)
{
    struct compat_drv *d = c;
    switch (reg) {
    case ONI_CONFIG_RESET:
        if (value)
            queue_table(d);
        return ONI_ESUCCESS;
    case ONI_CONFIG_RUNNING:
        d->pos = 0; /* every run starts at frame 0 */
        return ONI_ESUCCESS;
    case ONI_CONFIG_HWADDRESS:
        d->hwaddr = value;
        return ONI_ESUCCESS;
    case ONI_CONFIG_SYSCLKHZ:
    case ONI_CONFIG_ACQCLKHZ:
        return ONI_EREADONLY;
    default:
        return ONI_ESUCCESS;
    }
}

ONI_DRIVER_EXPORT int oni_driver_set_opt_callback(oni_driver_ctx c, int oni_option, const void *value,
                                                  size_t option_len)
{
    struct compat_drv *d = c;
    if (oni_option < ONI_OPT_DEVICETABLE || oni_option >= ONI_OPT_CUSTOMBEGIN)
        return ONI_ESUCCESS; /* options this driver does not know */
    d->last_opt = oni_option;
    d->last_val = 0;
    if (option_len == ONI_REGSZ)
        memcpy(&d->last_val, value, ONI_REGSZ);
    return ONI_ESUCCESS;
}

ONI_DRIVER_EXPORT int oni_driver_set_opt(oni_driver_ctx c, int driver_option, const void *value, size_t option_len)
{
    (void)c;
    (void)driver_option;
    (void)value;
    (void)option_len;
    return ONI_EINVALOPT;
}

ONI_DRIVER_EXPORT int oni_driver_get_opt(oni_driver_ctx c, int driver_option, void *value, size_t *option_len)
{
    struct compat_drv *d = c;
    oni_reg_val_t v;
    if (*option_len < ONI_REGSZ)
        return ONI_EBUFFERSIZE;
    if (driver_option == 0)
        v = (oni_reg_val_t)d->last_opt;
    else if (driver_option == 1)
        v = d->last_val;
    else
        return ONI_EINVALOPT;
    memcpy(value, &v, ONI_REGSZ);
    *option_len = ONI_REGSZ;
    return ONI_ESUCCESS;
}

ONI_DRIVER_EXPORT const oni_driver_info_t *oni_driver_info(void)
{
    return &info;
}
