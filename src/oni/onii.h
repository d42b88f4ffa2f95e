/* onii.h - onigpu's private header: the driver backend table and helpers shared
 * by the core, the built-in drivers and the tools. Not installed. */
#ifndef ONII_H
#define ONII_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "oni.h"
#include "onidriver.h"

/* A driver backend: the driver ABI of onidriver.h as a table of function
 * pointers. Built-in drivers define one statically; external drivers get one
 * filled by dlsym. Every entry is required. */
struct oni_driver {
    const char *name;
    oni_driver_ctx (*create_ctx)(void);
    int (*destroy_ctx)(oni_driver_ctx);
    int (*init)(oni_driver_ctx, int host_idx);
    int (*read_stream)(oni_driver_ctx, oni_read_stream_t, void *data, size_t size);
    int (*write_stream)(oni_driver_ctx, oni_write_stream_t, const char *data, size_t size);
    int (*read_config)(oni_driver_ctx, oni_config_t, oni_reg_val_t *value);
    int (*write_config)(oni_driver_ctx, oni_config_t, oni_reg_val_t value);
    int (*set_opt_callback)(oni_driver_ctx, int oni_option, const void *value, size_t len);
    int (*set_opt)(oni_driver_ctx, int drv_option, const void *value, size_t len);
    int (*get_opt)(oni_driver_ctx, int drv_option, void *value, size_t *len);
    const oni_driver_info_t *(*info)(void);
    /* Built-in drivers only (NULL for a loaded one): 1 when driver option
     * drv_option may be set or got while other calls run on the context,
     * other such options included. The core then calls it without the
     * config lock, so a transfer that waits for data does not hold up
     * register access or a transfer the other way (docs/threads.md). */
    int (*concurrent_opt)(int drv_option);
};

/* Built-in drivers (src/drivers/<name>). */
extern const struct oni_driver onidrv_test;
extern const struct oni_driver onidrv_emu;
extern const struct oni_driver onidrv_net;

/* Find driver `name` (built in first, then libonidriver_<name>.so, loader.c)
 * and fill drv with its table; *dl is the library to dlclose when done (NULL
 * for a built-in one). 0, ENOENT (none found) or EINVAL (a bad name, or a
 * library that lacks an entry). */
int oni_load_driver(const char *name, struct oni_driver *drv, void **dl);

/* Option helpers shared by the core and the drivers. oni_opt_short: the
 * answer to a get into a buffer of *len bytes where need are needed: *len =
 * need (what it takes, as oni_get_opt says) and ONI_EBUFFERSIZE.
 * oni_opt_u32: the value of a 32-bit option being set, ONI_EINVALARG unless
 * value holds exactly 4 bytes. */
static inline int oni_opt_short(size_t *len, size_t need)
{
    *len = need;
    return ONI_EBUFFERSIZE;
}

static inline int oni_opt_u32(const void *value, size_t len, uint32_t *out)
{
    if (!value || len != sizeof *out)
        return ONI_EINVALARG;
    memcpy(out, value, sizeof *out);
    return 0;
}

/* 1 when every entry a driver must have is set (all but name and
 * concurrent_opt), else 0. */
int oni_driver_complete(const struct oni_driver *drv);

/* Create a context on a backend table that is neither built in nor loaded
 * (test fixtures, fuzzers, programs embedding a driver). The table must stay
 * valid for the context's life. NULL + errno EINVAL if an entry is missing. */
oni_ctx oni_create_ctx_driver(const struct oni_driver *drv);

/* Environment variable naming an extra directory searched for libonidriver_<name>.so. */
#define ONI_DRIVER_PATH_ENV "ONI_DRIVER_PATH"
/* Environment variable giving new contexts' ONI_OPT_TIMEOUTMS (ms, 1 .. 2^32 - 1). */
#define ONI_TIMEOUTMS_ENV "ONI_TIMEOUTMS"

/* The longest a built-in driver's data-stream read waits before it answers
 * 0 bytes: liboni waits out ONI_OPT_TIMEOUTMS across such answers, and
 * between two of them gives the read state to a thread that must change it
 * (starting acquisition while a reader waits for its data; docs/threads.md). */
#define ONI_READ_SLICE_MS 10u

/* Wire format sizes. ONI_RFRAMEHEADERSZ is onidefs.h's ONI_FRAMEHEADERSZ as a
 * plain integer constant (that one is a sizeof expression; frame.c checks they agree). */
#define ONI_RFRAMEHEADERSZ 16 /* [u64 time][u32 dev_idx][u32 data_sz] */
#define ONI_WFRAMEHEADERSZ 8  /* [u32 dev_idx][u32 payload words] */
#define ONI_COBSMAXPACKET 255 /* encoded bytes, excluding the 0 delimiter */
#define ONI_SIGMAXPAYLOAD 250 /* decoded bytes after the u32 type (fits one COBS packet) */

/* Bytes a payload of n bytes occupies in a stream: padded to 32-bit words. */
static inline size_t oni_pad4(size_t n) { return (n + 3u) & ~(size_t)3u; }

/* COBS (src/oni/util/cobs.c). Encode n bytes of src into dst (no delimiter written);
 * returns the encoded length or -1 if dst_cap is too small. Decode an encoded
 * packet (delimiter excluded) into dst; returns the decoded length or
 * ONI_ECOBSPACK for a malformed packet or too small dst. */
int oni_cobs_encode(const uint8_t *src, size_t n, uint8_t *dst, size_t dst_cap);
int oni_cobs_decode(const uint8_t *src, size_t n, uint8_t *dst, size_t dst_cap);

/* Build one complete signal packet ([u32 type][payload] COBS-encoded, then 0)
 * into dst; returns its length in bytes or a negative ONI error. For drivers. */
int oni_signal_pack(uint32_t type, const void *payload, size_t n, uint8_t *dst, size_t dst_cap);

/* The clock: oni_now_ns, oni_ms_left. */
#include "oni/util/clock.h"

#endif
