/* cmd_advise.c - `onigpu advise`: which backend, from this machine's numbers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench/advise.h"
#include "cli.h"

static int run(int argc, char **argv);

CLI_COMMAND(advise, "advise", "--data SIZE --compute SIZE --ai X [--serial] [--measure] [--link PRESET]",
            "thesis figure 6.1 with measured numbers: recommend a backend, predicted (and measured) round trip", run)

static int run(int argc, char **argv)
{
    struct advise_opts o = {4000, 4000, 0.75, 0, 0, NULL, stdout};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "--serial")) {
            o.serial = 1;
            continue;
        }
        if (!strcmp(a, "--measure")) {
            o.measure = 1;
            continue;
        }
        if (!v) {
            bad = 1;
        } else if (!strcmp(a, "--data")) {
            bad = cli_parse_size(v, &o.data) || o.data < 4 || o.data > (1ull << 30);
        } else if (!strcmp(a, "--compute")) {
            bad = cli_parse_size(v, &o.compute) || o.compute > (64ull << 30);
        } else if (!strcmp(a, "--ai")) {
            char *end;
            o.ai = strtod(v, &end);
            bad = *end || !(o.ai > 0) || o.ai > 1e4;
        } else if (!strcmp(a, "--link")) {
            o.link = v;
        } else {
            bad = 1;
        }
        if (bad) {
            fprintf(stderr, "onigpu advise: bad argument '%s'\nusage: onigpu advise --data SIZE --compute SIZE --ai X "
                            "[--serial] [--measure] [--link PRESET]\n", a);
            return 2;
        }
        i++;
    }
    if (o.compute < o.data) {
        fprintf(stderr, "onigpu advise: --compute must be at least --data\n");
        return 2;
    }
    int rc = advise_run(&o);
    return rc ? cli_fail("advise", rc) : 0;
}
