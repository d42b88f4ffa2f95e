/* cmd_roofline.c - `onigpu roofline`: thesis table 5.1 measured on this machine. */
#include <stdio.h>
#include <string.h>
#include "bench/roofline.h"
#include "cli.h"

static int run(int argc, char **argv);

CLI_COMMAND(roofline, "roofline", "[--link PRESET] [--out docs/results]",
            "measure CPU/GPU compute and memory ceilings and the card link; plot the MAC kernel against them", run)

static int run(int argc, char **argv)
{
    const char *out = "docs/results", *link = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v && !strcmp(argv[i], "--out")) {
            out = v;
        } else if (v && !strcmp(argv[i], "--link")) {
            link = v;
        } else {
            fprintf(stderr, "onigpu roofline: bad argument '%s'\nusage: onigpu roofline [--link PRESET] [--out DIR]\n",
                    argv[i]);
            return 2;
        }
        i++;
    }
    int rc = roofline_run(out, link, argc, argv, stdout);
    return rc ? cli_fail("roofline", rc) : 0;
}
