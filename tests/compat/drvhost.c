/* drvhost.c - loads libonidriver_compatdrv.so (driver.c, a driver written
 * against upstream's driver headers only) through ONI_DRIVER_PATH and drives
 * it through the public API: device table, the option callback with a 32-bit
 * value, a config register, frames. Exit 0 when all behaved as the ONI API
 * says; 1 otherwise. */
#include <stdio.h>
#include <string.h>
#include <oni.h>

static int failures;

static void expect(int ok, const char *what, long got)
{
    if (!ok) {
        fprintf(stderr, "compat_drvhost: %s (got %ld)\n", what, got);
        failures++;
    }
}

int main(void)
{
    oni_ctx ctx = oni_create_ctx("compatdrv");
    if (!ctx) {
        fprintf(stderr, "compat_drvhost: oni_create_ctx(\"compatdrv\") failed\n");
        return 1;
    }
    int rc = oni_init_ctx(ctx, -1);
    expect(rc == ONI_ESUCCESS, "oni_init_ctx", rc);
    if (rc) {
        oni_destroy_ctx(ctx);
        return 1;
    }
    const oni_driver_info_t *di = oni_get_driver_info(ctx);
    expect(di && strcmp(di->name, "compatdrv") == 0, "driver info names compatdrv", 0);

    oni_size_t n = 0;
    size_t sz = sizeof n;
    rc = oni_get_opt(ctx, ONI_OPT_NUMDEVICES, &n, &sz);
    expect(rc == ONI_ESUCCESS && n == 1, "one device in the table", (long)n);
    oni_device_t dev;
    memset(&dev, 0, sizeof dev);
    sz = sizeof dev;
    rc = oni_get_opt(ctx, ONI_OPT_DEVICETABLE, &dev, &sz);
    expect(rc == ONI_ESUCCESS && dev.id == 10 && dev.read_size == 4, "device table entry", rc);

    /* The driver sees the option and its value through set_opt_callback. */
    oni_size_t block = 40;
    rc = oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &block, sizeof block);
    expect(rc == ONI_ESUCCESS, "set ONI_OPT_BLOCKREADSIZE", rc);
    oni_reg_val_t v = 0;
    sz = sizeof v;
    rc = oni_get_driver_opt(ctx, 0, &v, &sz);
    expect(rc == ONI_ESUCCESS && v == ONI_OPT_BLOCKREADSIZE, "callback saw ONI_OPT_BLOCKREADSIZE", (long)v);
    sz = sizeof v;
    rc = oni_get_driver_opt(ctx, 1, &v, &sz);
    expect(rc == ONI_ESUCCESS && v == 40, "callback saw the 32-bit value 40", (long)v);

    oni_reg_val_t addr = 7;
    rc = oni_set_opt(ctx, ONI_OPT_HWADDRESS, &addr, sizeof addr);
    expect(rc == ONI_ESUCCESS, "set ONI_OPT_HWADDRESS", rc);
    addr = 0;
    sz = sizeof addr;
    rc = oni_get_opt(ctx, ONI_OPT_HWADDRESS, &addr, &sz);
    expect(rc == ONI_ESUCCESS && addr == 7, "ONI_OPT_HWADDRESS reads back 7", (long)addr);

    oni_size_t run = 1;
    rc = oni_set_opt(ctx, ONI_OPT_RUNNING, &run, sizeof run);
    expect(rc == ONI_ESUCCESS, "start", rc);
    int i;
    for (i = 0; i < 10 && !failures; i++) {
        oni_frame_t *f = NULL;
        rc = oni_read_frame(ctx, &f);
        expect(rc > 0, "oni_read_frame", rc);
        if (rc <= 0)
            break;
        oni_reg_val_t payload = 0;
        memcpy(&payload, f->data, sizeof payload);
        expect(f->time == (oni_fifo_time_t)i && f->dev_idx == 0 && f->data_sz == 4 &&
                   payload == (oni_reg_val_t)i,
               "frame i is time i, device 0, payload i", (long)i);
        oni_destroy_frame(f);
    }
    run = 0;
    rc = oni_set_opt(ctx, ONI_OPT_RUNNING, &run, sizeof run);
    expect(rc == ONI_ESUCCESS, "stop", rc);
    rc = oni_destroy_ctx(ctx);
    expect(rc == ONI_ESUCCESS, "oni_destroy_ctx", rc);
    if (!failures)
        printf("compat_drvhost: ok\n");
    return failures ? 1 : 0;
}
