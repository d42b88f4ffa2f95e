/* driver.h - the driver backend table: how liboni's core calls a driver, and
 * how it finds one (built in, or libonidriver_<name>.so). Included by the
 * core and by the drivers; not installed. */
#ifndef ONI_DRIVER_H
#define ONI_DRIVER_H

#include <stddef.h>
#include "oni.h"
#include "onidriver.h"

/* A driver backend: the driver ABI of onidriver.h as a table of function
 * pointers. Built-in drivers define one statically; external drivers get one
 * filled by dlsym. Every entry is required unless said otherwise. */
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
    /* Optional (NULL: none; always NULL for a driver bound by its 11 upstream
     * symbols): 1 when driver option drv_option may be set or got while other
     * calls run on the context, other such options included. The core then
     * calls it without the config lock, so a transfer that waits for data
     * does not hold up register access or a transfer the other way
     * (docs/threads.md). */
    int (*concurrent_opt)(int drv_option);
    /* Optional (NULL: none): 1 when driver option drv_option names something
     * of the machine the driver runs on (a file path there): a server that
     * serves the driver to remote clients (src/drivers/net/netserve.c)
     * refuses it from them. */
    int (*local_opt)(int drv_option);
};

/* The drivers of src/drivers: test (in liboni), emu and net (each also
 * libonidriver_<name>.so; DEVELOPERS.md says which program links which). */
extern const struct oni_driver onidrv_test;
extern const struct oni_driver onidrv_emu;
extern const struct oni_driver onidrv_net;

/* The drivers oni_create_ctx tries before any library, NULL-terminated:
 * liboni.so has the test driver; the static library tools and tests link
 * (DEVELOPERS.md) has every driver of src/drivers. */
extern const struct oni_driver *const oni_builtin_drivers[];

/* Find driver `name` and fill drv with its table; *dl is the library to
 * dlclose when done (NULL for a built-in one). Searched in order:
 * $ONI_DRIVER_PATH/libonidriver_<name>.so (so it wins over a built-in driver
 * of the same name), the built-in drivers, the directory of the liboni that
 * holds this loader, then the library search path (dlopen). A library built by onigpu (src/drivers/export.c) hands over its
 * whole table, concurrent_opt and local_opt included, through
 * ONI_DRIVER_TABLE_SYM; any other is bound by its 11 upstream symbols.
 * 0, ENOENT (none found) or EINVAL (a bad name, or a library that lacks an
 * entry). */
int oni_load_driver(const char *name, struct oni_driver *drv, void **dl);

/* The optional symbol of an onigpu-built driver library:
 * const struct oni_driver *onigpu_driver_table(size_t table_size) returns the
 * driver's table, or NULL when table_size is not sizeof(struct oni_driver)
 * (a library built with another layout of this struct). */
#define ONI_DRIVER_TABLE_SYM "onigpu_driver_table"

/* 1 when every required entry of drv is set, else 0. */
int oni_driver_complete(const struct oni_driver *drv);

/* Create a context on a backend table that is neither built in nor loaded
 * (test fixtures, fuzzers, programs embedding a driver). The table must stay
 * valid for the context's life. NULL + errno EINVAL if an entry is missing. */
oni_ctx oni_create_ctx_driver(const struct oni_driver *drv);

/* Environment variable naming an extra directory searched for libonidriver_<name>.so. */
#define ONI_DRIVER_PATH_ENV "ONI_DRIVER_PATH"
/* Environment variable giving new contexts' ONI_OPT_TIMEOUTMS (ms, 0 .. 2^32 - 1). */
#define ONI_TIMEOUTMS_ENV "ONI_TIMEOUTMS"

/* The longest a built-in driver's data-stream read waits before it answers
 * 0 bytes: liboni waits out ONI_OPT_TIMEOUTMS across such answers, and
 * between two of them gives the read state to a thread that must change it
 * (starting acquisition while a reader waits for its data; docs/threads.md). */
#define ONI_READ_SLICE_MS 10u

#endif
