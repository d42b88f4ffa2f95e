/* oni.h - the ONI host API (upstream liboni 4.6 compatible) as implemented by onigpu.
 *
 * Thread safety (see docs/threads.md): calls on one context are serialized by
 * the library, so any call may be made from any thread. oni_read_frame blocks
 * other readers of the same context while it refills; oni_destroy_frame may be
 * called from any thread at any time, also after oni_destroy_ctx. */
/* The include guard is upstream's (api/liboni/oni.h:1), so a program that tests it sees the same. */
#ifndef __ONI_H__
#define __ONI_H__

#include <stddef.h>
#include "onidefs.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ONI_VERSION_MAJOR 4
#define ONI_VERSION_MINOR 6
#define ONI_VERSION_PATCH 0
#define ONI_MAKE_VERSION(major, minor, patch) ((major) * 10000 + (minor) * 100 + (patch))
#define ONI_VERSION ONI_MAKE_VERSION(ONI_VERSION_MAJOR, ONI_VERSION_MINOR, ONI_VERSION_PATCH)

typedef struct oni_ctx_impl *oni_ctx;

/* One entry of the device table; read as a block of 5 uint32, order matters. */
typedef struct {
    oni_size_t idx;        /* RSV.RSV.HUB.IDX */
    oni_dev_id_t id;       /* device kind (onix.h) */
    oni_size_t version;
    oni_size_t read_size;  /* payload bytes of one read frame, 0 = not readable */
    oni_size_t write_size; /* payload bytes of one write frame, 0 = not writable */
} oni_device_t;

/* A frame: read frames are views into library-owned blocks; release with oni_destroy_frame. */
typedef struct {
    const oni_fifo_time_t time;
    const oni_fifo_dat_t dev_idx;
    const oni_fifo_dat_t data_sz;
    char *data;
} oni_frame_t;

/* Context options ONI_OPT_*: onidefs.h, where upstream declares them. */

/* onigpu extension: per-context timeout of blocking calls, in milliseconds
 * (uint32_t, read/write in any state; docs/timeouts.md). A call fails with
 * ONI_ETIMEOUT only when no byte came for that long: every byte starts the
 * wait again. 0, the default, waits as upstream does while the device is
 * live: after each ONI_DEFAULT_TIMEOUTMS with no byte on a data stream the
 * hardware's RUNNING is read; nonzero waits on, 0 gives ONI_ETIMEOUT, a
 * driver error is returned (so a stopped or dead device is reported within
 * ONI_DEFAULT_TIMEOUTMS); the signal stream gets ONI_DEFAULT_TIMEOUTMS per
 * call. The environment variable ONI_TIMEOUTMS (ms) sets new contexts'
 * value, for programs written for upstream (a bad value makes
 * oni_create_ctx fail, EINVAL). The core checks the deadline between driver
 * calls and tells the driver how long one call may wait through
 * set_opt_callback; a driver that blocks inside one of its own calls without
 * honouring it can still block longer (docs/threads.md). The number lies in
 * the open-ended custom range (>= ONI_OPT_CUSTOMBEGIN): it shadows the custom
 * option that would map to config register ONI_CONFIG_CUSTOMBEGIN +
 * 0x4F4700F4 = 0x4F4700FF (docs/errors.md says why that is harmless). */
#define ONI_OPT_TIMEOUTMS 0x4F470100
#define ONI_DEFAULT_TIMEOUTMS 2000u

/* Create a context for driver drv_name (built-in first, then libonidriver_<name>.so).
 * Returns NULL and sets errno (EINVAL: bad name or incomplete driver, ENOENT: not found, ENOMEM). */
ONI_EXPORT oni_ctx oni_create_ctx(const char *drv_name);

/* Open hardware host_idx (-1 = driver default), reset it and read the device table.
 * Context must be uninitialized; returns 0 or an ONI error. */
ONI_EXPORT int oni_init_ctx(oni_ctx ctx, int host_idx);

/* Stop acquisition, close the driver and free the context. Frames still alive stay valid
 * (the caller still owns and destroys them). 0, ONI_ENULLCTX, or the driver's close error
 * (the context is freed either way). */
ONI_EXPORT int oni_destroy_ctx(oni_ctx ctx);

/* Read context option ctx_opt into value; *size is the buffer size in, bytes written out.
 * RUNNING, SYSCLKHZ, ACQCLKHZ, HWADDRESS and custom options are read from the hardware.
 * 0, or ONI_ENULLCTX, ONI_EWRITEONLY (any state), ONI_EPROTCONFIG (a negative option),
 * ONI_EINVALSTATE (before init), ONI_EINVALARG (a NULL pointer), ONI_EBUFFERSIZE (*size = what
 * it takes), the driver's error for a hardware register (docs/errors.md). */
ONI_EXPORT int oni_get_opt(const oni_ctx ctx, int ctx_opt, void *value, size_t *size);

/* Write context option ctx_opt from value of size bytes (4: every writable option is
 * 32 bits), checked in upstream's order, then call the driver's set_opt_callback and return
 * its answer as it is (docs/drivers.md). ONI_ENULLCTX, ONI_EREADONLY (any state),
 * ONI_EPROTCONFIG, ONI_EINVALSTATE (RESET, BLOCKREADSIZE, BLOCKWRITESIZE: IDLE only),
 * ONI_EBUFFERSIZE, ONI_EINVALARG (NULL value), ONI_EINVALREADSIZE / ONI_EINVALWRITESIZE, the
 * driver's error (docs/errors.md). RESET brings both block sizes back to their defaults. */
ONI_EXPORT int oni_set_opt(oni_ctx ctx, int ctx_opt, const void *value, size_t size);

/* Read driver-specific option drv_opt (onigpu.h, oniemu.h) into value; *size is the buffer size in, bytes
 * written out; returns the driver's answer (0 or an ONI error). Any state. */
ONI_EXPORT int oni_get_driver_opt(const oni_ctx ctx, int drv_opt, void *value, size_t *size);

/* Write driver-specific option drv_opt from value of size bytes (NULL only with size 0); returns the
 * driver's answer (0 or an ONI error). Any state. */
ONI_EXPORT int oni_set_driver_opt(oni_ctx ctx, int drv_opt, const void *value, size_t size);

/* Read register addr of device dev_idx into *value through the signal stream (in any state, as
 * upstream: before init the driver answers as it can); 0, ONI_EREADFAILURE on NACK,
 * ONI_ERETRIG if an access is still pending, ONI_ETIMEOUT if no answer within ONI_OPT_TIMEOUTMS. */
ONI_EXPORT int oni_read_reg(const oni_ctx ctx, oni_dev_idx_t dev_idx, oni_reg_addr_t addr, oni_reg_val_t *value);

/* Write value to register addr of device dev_idx through the signal stream; 0, ONI_EWRITEFAILURE on NACK,
 * ONI_ERETRIG if an access is still pending, ONI_ETIMEOUT if no answer within ONI_OPT_TIMEOUTMS. */
ONI_EXPORT int oni_write_reg(const oni_ctx ctx, oni_dev_idx_t dev_idx, oni_reg_addr_t addr, oni_reg_val_t value);

/* Read the next frame. On success returns upstream's sizeof(oni_frame_t) + data_sz + data_sz % 4
 * (> 0) and *frame is owned by the caller until oni_destroy_frame. No heap allocation in steady
 * state. Errors: ONI_ETIMEOUT (docs/timeouts.md), ONI_EBADFRAME (bytes that are no
 * frame of the table were dropped; the next call goes on), ONI_ENOREADDEV, ONI_EINVALSTATE,
 * ONI_ENULLCTX, ONI_EINVALARG (NULL frame), ONI_EBADALLOC, or the driver's read error
 * (docs/errors.md). */
ONI_EXPORT int oni_read_frame(const oni_ctx ctx, oni_frame_t **frame);

/* Make a write frame for dev_idx holding a copy of data (data_sz: a multiple of the device's
 * write_size, 0 too); the caller owns *frame until oni_destroy_frame. Returns upstream's
 * sizeof(oni_frame_t) + data_sz + data_sz % 4 (> 0), or ONI_ENULLCTX, ONI_EINVALARG
 * (NULL frame, or NULL data with data_sz > 0), ONI_EDEVIDX (no such device), ONI_ENOTWRITEDEV,
 * ONI_EWRITESIZE, ONI_EINVALSTATE, ONI_EBADALLOC. */
ONI_EXPORT int oni_create_frame(const oni_ctx ctx, oni_frame_t **frame, oni_dev_idx_t dev_idx, void *data, size_t data_sz);

/* Send a write frame made by oni_create_frame (padded to a word); returns upstream's 8 + data_sz
 * (> 0) or an ONI error. */
ONI_EXPORT int oni_write_frame(const oni_ctx ctx, const oni_frame_t *frame);

/* Release a frame (read or write). NULL is ignored. Thread-safe. */
ONI_EXPORT void oni_destroy_frame(oni_frame_t *frame);

/* Library version (ONI API version this library implements). */
ONI_EXPORT void oni_version(int *major, int *minor, int *patch);

/* Info of the context's driver, or NULL for a NULL context. */
ONI_EXPORT const oni_driver_info_t *oni_get_driver_info(const oni_ctx ctx);

/* Human-readable text for an ONI error code (also onigpu's own codes). Never NULL. */
ONI_EXPORT const char *oni_error_str(int err);

#ifdef __cplusplus
}
#endif
#endif
