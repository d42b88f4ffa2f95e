/* hostcheck.c - what any ONI 4.x host library should answer alike for one
 * driver: the program tools/compat-upstream.sh builds twice, against
 * upstream liboni and against onigpu's, and whose two outputs it compares.
 * It includes only oni.h.
 *
 *   hostcheck DRIVER FRAMES [BLOCKREADSIZE]
 *
 * Prints, one per line: the driver's name and version; the result of init;
 * the options every library reads from the hardware (device count, clocks,
 * hardware address, largest frames); the device table; registers 0..2 of
 * every device in it (result code and value); refused options (a block
 * size of 6, the device table into a short buffer: the code, not what the
 * library leaves in the size, which onigpu sets to the size needed); then, with acquisition
 * running, FRAMES frames: each must come from a device of the table with
 * data_sz = read_size and a time not below the one before, and their count
 * per device is printed; last, stop, reset and destroy. The libraries'
 * versions go to stderr, which the comparison leaves out, and so does
 * anything a library may answer in its own way (RUNNING before any start:
 * upstream asks the hardware, onigpu its own state). Exit 0, or 1 when a
 * call the run depends on fails or a frame breaks the rules above. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "oni.h"

#define MAXDEV 256

static oni_device_t table[MAXDEV];
static unsigned long counts[MAXDEV];

static int print_opt(oni_ctx ctx, int opt, const char *name)
{
    oni_size_t v = 0;
    size_t len = sizeof v;
    int rc = oni_get_opt(ctx, opt, &v, &len);
    printf("opt %-18s rc %d value %u\n", name, rc, rc ? 0u : v);
    return rc;
}

static int set_opt(oni_ctx ctx, int opt, const char *name, oni_size_t v)
{
    int rc = oni_set_opt(ctx, opt, &v, sizeof v);
    printf("set %-18s %u rc %d\n", name, v, rc);
    return rc;
}

/* Read frames frames; returns the number of frames that broke a rule. */
static unsigned long read_frames(oni_ctx ctx, size_t ndev, long frames)
{
    unsigned long bad = 0;
    oni_fifo_time_t last = 0;
    for (long i = 0; i < frames; i++) {
        oni_frame_t *f = NULL;
        int rc = oni_read_frame(ctx, &f);
        if (rc < 0) {
            printf("oni_read_frame rc %d after %ld frames\n", rc, i);
            return bad + 1;
        }
        size_t d = 0;
        while (d < ndev && table[d].idx != f->dev_idx)
            d++;
        if (d == ndev || f->data_sz != table[d].read_size || (i && f->time < last))
            bad++;
        else
            counts[d]++;
        last = f->time;
        oni_destroy_frame(f);
    }
    return bad;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4 || atol(argv[2]) < 1) {
        fprintf(stderr, "usage: hostcheck DRIVER FRAMES [BLOCKREADSIZE]\n");
        return 2;
    }
    int major, minor, patch;
    oni_version(&major, &minor, &patch);
    fprintf(stderr, "hostcheck: library %d.%d.%d, oni.h %d.%d.%d\n", major, minor, patch, ONI_VERSION_MAJOR,
            ONI_VERSION_MINOR, ONI_VERSION_PATCH);
    oni_ctx ctx = oni_create_ctx(argv[1]);
    if (!ctx) {
        perror("hostcheck: oni_create_ctx");
        return 1;
    }
    const oni_driver_info_t *di = oni_get_driver_info(ctx);
    printf("driver %s %d.%d.%d\n", di ? di->name : "?", di ? di->major : 0, di ? di->minor : 0, di ? di->patch : 0);
    int rc = oni_init_ctx(ctx, -1);
    printf("oni_init_ctx rc %d\n", rc);
    if (rc) {
        oni_destroy_ctx(ctx);
        return 1;
    }
    print_opt(ctx, ONI_OPT_NUMDEVICES, "NUMDEVICES");
    print_opt(ctx, ONI_OPT_SYSCLKHZ, "SYSCLKHZ");
    print_opt(ctx, ONI_OPT_ACQCLKHZ, "ACQCLKHZ");
    print_opt(ctx, ONI_OPT_HWADDRESS, "HWADDRESS");
    print_opt(ctx, ONI_OPT_MAXREADFRAMESIZE, "MAXREADFRAMESIZE");
    print_opt(ctx, ONI_OPT_MAXWRITEFRAMESIZE, "MAXWRITEFRAMESIZE");
    size_t len = sizeof table;
    rc = oni_get_opt(ctx, ONI_OPT_DEVICETABLE, table, &len);
    size_t ndev = rc ? 0 : len / sizeof table[0];
    printf("DEVICETABLE rc %d devices %zu\n", rc, ndev);
    for (size_t i = 0; i < ndev; i++) {
        printf("  idx 0x%x id %u version %u read_size %u write_size %u\n", table[i].idx, table[i].id,
               table[i].version, table[i].read_size, table[i].write_size);
        for (oni_reg_addr_t a = 0; a < 3; a++) {
            oni_reg_val_t v = 0;
            int r = oni_read_reg(ctx, table[i].idx, a, &v);
            printf("    register %u rc %d value %u\n", a, r, r ? 0u : v);
        }
    }
    size_t one = sizeof table[0] - 1; /* what a refusal leaves there is each library's own */
    printf("DEVICETABLE into %zu bytes rc %d\n", sizeof table[0] - 1, oni_get_opt(ctx, ONI_OPT_DEVICETABLE, table, &one));
    set_opt(ctx, ONI_OPT_BLOCKREADSIZE, "BLOCKREADSIZE", 6);
    if (argc > 3 && set_opt(ctx, ONI_OPT_BLOCKREADSIZE, "BLOCKREADSIZE", (oni_size_t)atol(argv[3])))
        return 1;
    if (set_opt(ctx, ONI_OPT_RUNNING, "RUNNING", 1))
        return 1;
    print_opt(ctx, ONI_OPT_RUNNING, "RUNNING");
    unsigned long bad = read_frames(ctx, ndev, atol(argv[2]));
    printf("frames %s: %lu broke a rule\n", argv[2], bad);
    for (size_t i = 0; i < ndev; i++)
        if (table[i].read_size)
            printf("  idx 0x%x frames %lu\n", table[i].idx, counts[i]);
    set_opt(ctx, ONI_OPT_RUNNING, "RUNNING", 0);
    print_opt(ctx, ONI_OPT_RUNNING, "RUNNING");
    set_opt(ctx, ONI_OPT_RESET, "RESET", 1);
    print_opt(ctx, ONI_OPT_NUMDEVICES, "NUMDEVICES");
    printf("oni_destroy_ctx rc %d\n", oni_destroy_ctx(ctx));
    return bad ? 1 : 0;
}
