/* missing.c - a fixture driver library that lacks oni_driver_info, one of the
 * 11 symbols every driver must export: oni_create_ctx must refuse it with
 * EINVAL before calling anything, so nothing here ever runs. */
#include "onidriver.h"

oni_driver_ctx oni_driver_create_ctx(void) { return 0; }
int oni_driver_destroy_ctx(oni_driver_ctx c) { return ONI_EUNIMPL; }
int oni_driver_init(oni_driver_ctx c, int host_idx) { return ONI_EUNIMPL; }
int oni_driver_read_stream(oni_driver_ctx c, oni_read_stream_t s, void *d, size_t n) { return ONI_EUNIMPL; }
int oni_driver_write_stream(oni_driver_ctx c, oni_write_stream_t s, const char *d, size_t n) { return ONI_EUNIMPL; }
int oni_driver_read_config(oni_driver_ctx c, oni_config_t k, oni_reg_val_t *v) { return ONI_EUNIMPL; }
int oni_driver_write_config(oni_driver_ctx c, oni_config_t k, oni_reg_val_t v) { return ONI_EUNIMPL; }
int oni_driver_set_opt_callback(oni_driver_ctx c, int o, const void *v, size_t n) { return ONI_EUNIMPL; }
int oni_driver_set_opt(oni_driver_ctx c, int o, const void *v, size_t n) { return ONI_EUNIMPL; }
int oni_driver_get_opt(oni_driver_ctx c, int o, void *v, size_t *n) { return ONI_EUNIMPL; }
