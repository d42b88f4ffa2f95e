/* host.c - a host program written the way programs against upstream liboni
 * are: C99, only <oni.h> and <onix.h>, linked with -loni. It is built with
 * -std=c99 -pedantic -Werror against onigpu's headers and shared library, and
 * run against the test driver, so a change that breaks source or binary
 * compatibility for such programs fails the build or this run.
 *
 * Usage: compat_host [driver] [frames] [name]   (defaults: test 10000; name:
 * the name the loaded driver must report, when the driver was asked for by
 * another name, as the riffa name pointed at the emu driver)
 * Exit 0 when every call behaved as the ONI API says; 1 otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <oni.h>
#include <onix.h>

static int failures;

static void expect(int ok, const char *what, int rc)
{
    if (!ok) {
        fprintf(stderr, "compat_host: %s: %d (%s)\n", what, rc, oni_error_str(rc));
        failures++;
    }
}

/* Write one frame to the first writable device; its write counter (register
 * 7 of the test driver) must move by one. */
static void write_one(oni_ctx ctx, const oni_device_t *table, oni_size_t n)
{
    oni_size_t i;
    for (i = 0; i < n; i++)
        if (table[i].write_size > 0)
            break;
    if (i == n)
        return;
    oni_reg_val_t before = 0, after = 0;
    int rc = oni_read_reg(ctx, table[i].idx, 7, &before);
    expect(rc == ONI_ESUCCESS, "oni_read_reg", rc);
    char payload[64];
    memset(payload, 0x5a, sizeof payload);
    oni_frame_t *w = NULL;
    rc = oni_create_frame(ctx, &w, table[i].idx, payload, table[i].write_size);
    expect(rc == (int)sizeof(oni_frame_t) + (int)table[i].write_size + (int)table[i].write_size % 4,
           "oni_create_frame (sizeof(oni_frame_t) + size + size % 4, as upstream)", rc);
    if (rc < 0)
        return;
    rc = oni_write_frame(ctx, w);
    expect(rc > 0, "oni_write_frame (bytes written)", rc);
    oni_destroy_frame(w);
    rc = oni_read_reg(ctx, table[i].idx, 7, &after);
    expect(rc == ONI_ESUCCESS && after == before + 1, "write counter after one write frame", rc);
}

int main(int argc, char **argv)
{
    const char *driver = argc > 1 ? argv[1] : "test";
    long want = argc > 2 ? atol(argv[2]) : 10000;
    const char *name = argc > 3 ? argv[3] : NULL;
    int major, minor, patch;
    oni_version(&major, &minor, &patch);
    printf("liboni %d.%d.%d\n", major, minor, patch);
    expect(ONI_MAKE_VERSION(major, minor, patch) == ONI_VERSION, "oni_version against ONI_VERSION", 0);

    oni_ctx ctx = oni_create_ctx(driver);
    if (!ctx) {
        fprintf(stderr, "compat_host: no driver %s\n", driver);
        return 1;
    }
    int rc = oni_init_ctx(ctx, -1);
    expect(rc == ONI_ESUCCESS, "oni_init_ctx", rc);
    if (rc) {
        oni_destroy_ctx(ctx);
        return 1;
    }
    const oni_driver_info_t *info = oni_get_driver_info(ctx);
    expect(info != NULL, "oni_get_driver_info", 0);
    if (info)
        printf("driver %s %d.%d.%d\n", info->name, info->major, info->minor, info->patch);
    if (name)
        expect(info && info->name && strcmp(info->name, name) == 0, "the driver loaded reports another name", 0);

    oni_size_t n = 0;
    size_t sz = sizeof n;
    rc = oni_get_opt(ctx, ONI_OPT_NUMDEVICES, &n, &sz);
    expect(rc == ONI_ESUCCESS && n > 0, "ONI_OPT_NUMDEVICES", rc);
    oni_device_t *table = calloc(n ? n : 1, sizeof *table);
    sz = n * sizeof *table;
    rc = oni_get_opt(ctx, ONI_OPT_DEVICETABLE, table, &sz);
    expect(rc == ONI_ESUCCESS && sz == n * sizeof *table, "ONI_OPT_DEVICETABLE", rc);
    for (oni_size_t i = 0; i < n; i++)
        printf("  %04x  id %-10u  %s  read %u  write %u\n", table[i].idx, table[i].id,
               onix_device_str(table[i].id), table[i].read_size, table[i].write_size);

    oni_reg_val_t hz = 0;
    sz = sizeof hz;
    rc = oni_get_opt(ctx, ONI_OPT_ACQCLKHZ, &hz, &sz);
    expect(rc == ONI_ESUCCESS && hz > 0, "ONI_OPT_ACQCLKHZ", rc);
    oni_size_t block = 4096;
    rc = oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &block, sizeof block);
    expect(rc == ONI_ESUCCESS, "ONI_OPT_BLOCKREADSIZE", rc);
    /* a wrong size must be refused, not read past */
    rc = oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &block, 2);
    expect(rc == ONI_EBUFFERSIZE, "BLOCKREADSIZE with size 2", rc);

    oni_reg_val_t run = 1;
    rc = oni_set_opt(ctx, ONI_OPT_RUNNING, &run, sizeof run);
    expect(rc == ONI_ESUCCESS, "ONI_OPT_RUNNING", rc);
    long got = 0;
    oni_fifo_time_t last = 0;
    for (; got < want; got++) {
        oni_frame_t *f = NULL;
        rc = oni_read_frame(ctx, &f); /* bytes consumed, or an error */
        if (rc <= 0) {
            expect(0, "oni_read_frame", rc);
            break;
        }
        if (f->time < last)
            expect(0, "frame times go backwards", 0);
        last = f->time;
        oni_destroy_frame(f);
    }
    printf("read %ld frames\n", got);
    write_one(ctx, table, n);

    run = 0;
    rc = oni_set_opt(ctx, ONI_OPT_RUNNING, &run, sizeof run);
    expect(rc == ONI_ESUCCESS, "stop", rc);
    free(table);
    rc = oni_destroy_ctx(ctx);
    expect(rc == ONI_ESUCCESS, "oni_destroy_ctx", rc);
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
