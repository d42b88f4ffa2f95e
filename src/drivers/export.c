/* export.c - turns a driver's backend table into the upstream driver ABI
 * (onidriver.h), so that it builds as libonidriver_<name>.so; and hands the
 * whole table to onigpu's loader (ONI_DRIVER_TABLE_SYM, oni/driver.h), which
 * thus keeps concurrent_opt and local_opt. Compiled once per driver with
 * -DONIDRV_TABLE=onidrv_<name>. */
#include "oni/driver.h"

#ifndef ONIDRV_TABLE
#error "define ONIDRV_TABLE to the driver's struct oni_driver"
#endif

#define T ONIDRV_TABLE

oni_driver_ctx oni_driver_create_ctx(void) { return T.create_ctx(); }
int oni_driver_destroy_ctx(oni_driver_ctx c) { return T.destroy_ctx(c); }
int oni_driver_init(oni_driver_ctx c, int host_idx) { return T.init(c, host_idx); }
/* An upstream host (oni.c reads block_read_size and refuses less) needs the
 * whole data block, as riffa's blocking read gives it; onigpu's liboni takes
 * the table instead and keeps the drivers' read-slice contract. */
int oni_driver_read_stream(oni_driver_ctx c, oni_read_stream_t s, void *d, size_t n)
{
    if (s != ONI_READ_STREAM_DATA)
        return T.read_stream(c, s, d, n);
    size_t got = 0;
    while (got < n) {
        int rc = T.read_stream(c, s, (char *)d + got, n - got);
        if (rc < 0)
            return rc;
        got += (size_t)rc;
    }
    return (int)got;
}
int oni_driver_write_stream(oni_driver_ctx c, oni_write_stream_t s, const char *d, size_t n) { return T.write_stream(c, s, d, n); }
int oni_driver_read_config(oni_driver_ctx c, oni_config_t k, oni_reg_val_t *v) { return T.read_config(c, k, v); }
int oni_driver_write_config(oni_driver_ctx c, oni_config_t k, oni_reg_val_t v) { return T.write_config(c, k, v); }
int oni_driver_set_opt_callback(oni_driver_ctx c, int o, const void *v, size_t n) { return T.set_opt_callback(c, o, v, n); }
int oni_driver_set_opt(oni_driver_ctx c, int o, const void *v, size_t n) { return T.set_opt(c, o, v, n); }
int oni_driver_get_opt(oni_driver_ctx c, int o, void *v, size_t *n) { return T.get_opt(c, o, v, n); }
const oni_driver_info_t *oni_driver_info(void) { return T.info(); }

/* The table itself, for a liboni built with the same struct oni_driver. */
ONI_EXPORT const struct oni_driver *onigpu_driver_table(size_t table_size);
const struct oni_driver *onigpu_driver_table(size_t table_size)
{
    return table_size == sizeof(struct oni_driver) ? &T : NULL;
}
