/* missing.c - fixture driver libraries that lack one of the 11 symbols every
 * driver must export: oni_create_ctx must refuse them with EINVAL before
 * calling anything, so nothing here ever runs. Built as it is, it lacks
 * oni_driver_info (libonidriver_missing.so); with WITH_INFO and LACKS_<field>
 * it has oni_driver_info and lacks oni_driver_<field> instead
 * (libonidriver_lacks_<field>.so, tests/drivers/CMakeLists.txt). With
 * WITH_INFO alone it lacks nothing, and its oni_driver_create_ctx fails:
 * libonidriver_nullctx.so, which oni_create_ctx must refuse with ENOMEM. */
#include "onidriver.h"

#ifndef LACKS_create_ctx
oni_driver_ctx oni_driver_create_ctx(void) { return 0; }
#endif
#ifndef LACKS_destroy_ctx
int oni_driver_destroy_ctx(oni_driver_ctx c) { return ONI_EUNIMPL; }
#endif
#ifndef LACKS_init
int oni_driver_init(oni_driver_ctx c, int host_idx) { return ONI_EUNIMPL; }
#endif
#ifndef LACKS_read_stream
int oni_driver_read_stream(oni_driver_ctx c, oni_read_stream_t s, void *d, size_t n) { return ONI_EUNIMPL; }
#endif
#ifndef LACKS_write_stream
int oni_driver_write_stream(oni_driver_ctx c, oni_write_stream_t s, const char *d, size_t n) { return ONI_EUNIMPL; }
#endif
#ifndef LACKS_read_config
int oni_driver_read_config(oni_driver_ctx c, oni_config_t k, oni_reg_val_t *v) { return ONI_EUNIMPL; }
#endif
#ifndef LACKS_write_config
int oni_driver_write_config(oni_driver_ctx c, oni_config_t k, oni_reg_val_t v) { return ONI_EUNIMPL; }
#endif
#ifndef LACKS_set_opt_callback
int oni_driver_set_opt_callback(oni_driver_ctx c, int o, const void *v, size_t n) { return ONI_EUNIMPL; }
#endif
#ifndef LACKS_set_opt
int oni_driver_set_opt(oni_driver_ctx c, int o, const void *v, size_t n) { return ONI_EUNIMPL; }
#endif
#ifndef LACKS_get_opt
int oni_driver_get_opt(oni_driver_ctx c, int o, void *v, size_t *n) { return ONI_EUNIMPL; }
#endif
#ifdef WITH_INFO
static const oni_driver_info_t info = {"lacks", 1, 0, 0, 0};
const oni_driver_info_t *oni_driver_info(void) { return &info; }
#endif
