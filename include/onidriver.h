/* onidriver.h - the ONI driver translator ABI (upstream liboni 4.6 compatible).
 * A driver is a shared library libonidriver_<name>.so exporting every function below. */
#ifndef ONIDRIVER_H
#define ONIDRIVER_H

#include <stddef.h>
#include "onidefs.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef void *oni_driver_ctx;

typedef enum { ONI_READ_STREAM_DATA = 0, ONI_READ_STREAM_SIGNAL } oni_read_stream_t;
typedef enum { ONI_WRITE_STREAM_DATA = 0 } oni_write_stream_t;

typedef enum {
    ONI_CONFIG_DEV_IDX = 0,
    ONI_CONFIG_REG_ADDR,
    ONI_CONFIG_REG_VALUE,
    ONI_CONFIG_RW,
    ONI_CONFIG_TRIG,
    ONI_CONFIG_RUNNING,
    ONI_CONFIG_RESET,
    ONI_CONFIG_SYSCLKHZ,
    ONI_CONFIG_ACQCLKHZ,
    ONI_CONFIG_RESETACQCOUNTER,
    ONI_CONFIG_HWADDRESS,
    ONI_CONFIG_CUSTOMBEGIN
} oni_config_t;

/* Signal stream packet types (bit flags), COBS-encoded, 0-terminated, <= 255 bytes. */
typedef enum {
    ONI_SIG_NULL = 1,
    ONI_SIG_CONFIGWACK = 2,
    ONI_SIG_CONFIGWNACK = 4,
    ONI_SIG_CONFIGRACK = 8,
    ONI_SIG_CONFIGRNACK = 16,
    ONI_SIG_DEVICETABLEACK = 32,
    ONI_SIG_DEVICEINST = 64
} oni_signal_t;

ONI_EXPORT oni_driver_ctx oni_driver_create_ctx(void);
ONI_EXPORT int oni_driver_destroy_ctx(oni_driver_ctx driver_ctx);
ONI_EXPORT int oni_driver_init(oni_driver_ctx driver_ctx, int host_idx);
ONI_EXPORT int oni_driver_read_stream(oni_driver_ctx driver_ctx, oni_read_stream_t stream, void *data, size_t size);
ONI_EXPORT int oni_driver_write_stream(oni_driver_ctx driver_ctx, oni_write_stream_t stream, const char *data, size_t size);
ONI_EXPORT int oni_driver_read_config(oni_driver_ctx driver_ctx, oni_config_t config, oni_reg_val_t *value);
ONI_EXPORT int oni_driver_write_config(oni_driver_ctx driver_ctx, oni_config_t config, oni_reg_val_t value);
ONI_EXPORT int oni_driver_set_opt_callback(oni_driver_ctx driver_ctx, int oni_option, const void *value, size_t option_len);
ONI_EXPORT int oni_driver_set_opt(oni_driver_ctx driver_ctx, int driver_option, const void *value, size_t option_len);
ONI_EXPORT int oni_driver_get_opt(oni_driver_ctx driver_ctx, int driver_option, void *value, size_t *option_len);
ONI_EXPORT const oni_driver_info_t *oni_driver_info(void);

#ifdef __cplusplus
}
#endif
#endif
