/* onidriver.h - the ONI driver translator ABI (upstream liboni 4.6 compatible).
 * A driver is a shared library libonidriver_<name>.so exporting every function below. */
#ifndef __ONI_DRIVER_H__ /* upstream's guard (api/liboni/onidriver.h:1) */
#define __ONI_DRIVER_H__

#include <stddef.h>
#include "onidefs.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef void *oni_driver_ctx;

typedef enum { ONI_READ_STREAM_DATA = 0, ONI_READ_STREAM_SIGNAL } oni_read_stream_t;
typedef enum { ONI_WRITE_STREAM_DATA = 0 } oni_write_stream_t;

/* Config registers oni_config_t: onidefs.h, where upstream declares them. */

/* Signal stream packet types (bit flags), COBS-encoded, 0-terminated, <= 255 bytes.
 * Deliberately an unnamed enum: upstream's headers declare no signal type, and
 * drivers written for upstream name their own (oni_signal_t, enum oni_signal). */
enum {
    ONI_SIG_NULL = 1,
    ONI_SIG_CONFIGWACK = 2,
    ONI_SIG_CONFIGWNACK = 4,
    ONI_SIG_CONFIGRACK = 8,
    ONI_SIG_CONFIGRNACK = 16,
    ONI_SIG_DEVICETABLEACK = 32,
    ONI_SIG_DEVICEINST = 64
};

/* How the core (liboni) calls a driver, for every function below:
 * - Returns: int functions return >= 0 on success (read_stream/write_stream: a
 *   byte count) or a negative ONI error code, which the core passes on to the
 *   caller of the public call that reached the driver. ONI_ETIMEOUT (onidefs.h)
 *   is a valid error for any call that waits.
 * - Buffers: every pointer argument belongs to the core and is valid only during
 *   the call; a driver copies what it keeps. Pointers a driver returns
 *   (oni_driver_info) stay owned by the driver.
 * - Threads (docs/threads.md): read_stream(DATA), write_stream, and the config /
 *   signal / option calls each come from one thread at a time, but the three
 *   groups may run concurrently on one driver context.
 * - Time (docs/timeouts.md): the core's deadline only runs between calls;
 *   set_opt_callback(ONI_OPT_TIMEOUTMS) tells the driver how long one of its
 *   calls may wait. A call that blocks inside the driver is bounded only by
 *   the driver itself.
 * - Order (docs/drivers.md): as upstream's liboni calls them; the driver hears
 *   of ONI_OPT_BLOCKREADSIZE after init and every reset, and of every
 *   successful oni_set_opt. */

/* The entry points every driver exports. As upstream (api/liboni/onidriver.h:24),
 * a file that defines ONI_DRIVER_IGNORE_FUNCTION_PROTOTYPES before including
 * this header gets neither them nor ONI_DRIVER_EXPORT, which upstream's drivers
 * put on their definitions. */
#ifndef ONI_DRIVER_IGNORE_FUNCTION_PROTOTYPES
#define ONI_DRIVER_EXPORT ONI_EXPORT

/* Allocate a driver context, no hardware opened; NULL on failure (oni_create_ctx: errno ENOMEM). */
ONI_EXPORT oni_driver_ctx oni_driver_create_ctx(void);
/* Close the hardware if open and free driver_ctx; called once, by oni_destroy_ctx, which returns a negative result. */
ONI_EXPORT int oni_driver_destroy_ctx(oni_driver_ctx driver_ctx);
/* Open hardware host_idx (-1: driver default); >= 0 or an ONI error. oni_init_ctx calls it until it succeeds once. */
ONI_EXPORT int oni_driver_init(oni_driver_ctx driver_ctx, int host_idx);
/* Copy at most size bytes of `stream` into data (core-owned); returns the bytes copied, 0 = no data yet (the core
 * polls again until its ONI_OPT_TIMEOUTMS deadline, then returns ONI_ETIMEOUT), or an ONI error (ONI_ETIMEOUT too). */
ONI_EXPORT int oni_driver_read_stream(oni_driver_ctx driver_ctx, oni_read_stream_t stream, void *data, size_t size);
/* Send at most size bytes from data (core-owned); returns the bytes accepted, 0 = none yet (the core polls again
 * until its deadline), or an ONI error (ONI_ETIMEOUT too). A count above size is taken as ONI_EWRITEFAILURE. */
ONI_EXPORT int oni_driver_write_stream(oni_driver_ctx driver_ctx, oni_write_stream_t stream, const char *data,
                                       size_t size);
/* Read config register `config` into *value (custom option n: ONI_CONFIG_CUSTOMBEGIN + n); >= 0 or an ONI error. */
ONI_EXPORT int oni_driver_read_config(oni_driver_ctx driver_ctx, oni_config_t config, oni_reg_val_t *value);
/* Write config register `config` (custom option n: ONI_CONFIG_CUSTOMBEGIN + n); >= 0 or an ONI error. */
ONI_EXPORT int oni_driver_write_config(oni_driver_ctx driver_ctx, oni_config_t config, oni_reg_val_t value);
/* Told of each successful oni_set_opt (already applied; its return becomes oni_set_opt's), of
 * ONI_OPT_BLOCKREADSIZE after init and every reset (return ignored), and, at oni_init_ctx and on
 * change, of ONI_OPT_TIMEOUTMS (uint32_t ms one call may wait, never 0; return ignored). */
ONI_EXPORT int oni_driver_set_opt_callback(oni_driver_ctx driver_ctx, int oni_option, const void *value,
                                           size_t option_len);
/* Set driver option from option_len bytes at value (NULL only with 0); passed on by oni_set_driver_opt. */
ONI_EXPORT int oni_driver_set_opt(oni_driver_ctx driver_ctx, int driver_option, const void *value, size_t option_len);
/* Read driver option into value; *option_len: buffer size in, bytes written out; passed on by oni_get_driver_opt. */
ONI_EXPORT int oni_driver_get_opt(oni_driver_ctx driver_ctx, int driver_option, void *value, size_t *option_len);
/* The driver's name and version, owned by the driver and valid while it is loaded (oni_get_driver_info returns it). */
ONI_EXPORT const oni_driver_info_t *oni_driver_info(void);

#endif /* ONI_DRIVER_IGNORE_FUNCTION_PROTOTYPES */

#ifdef __cplusplus
}
#endif
#endif
