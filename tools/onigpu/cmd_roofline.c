/* cmd_roofline.c - `onigpu roofline`: thesis table 5.1 measured on this machine. */
#include <stdio.h>
#include <string.h>
#include "bench/bench.h"
#include "bench/roofline.h"
#include "bench_cli.h"
#include "cli.h"
#include "gpu/gpu.h"

static int run(int argc, char **argv);

CLI_COMMAND(roofline, "roofline", "[--link PRESET] [--out docs/results]",
            "measure CPU/GPU compute and memory ceilings and the card link; plot the MAC kernel against them", NULL, run)

static int body(struct results *r, void *arg, int *measured)
{
    return roofline_bench(arg, r, stdout);
}

static int run(int argc, char **argv)
{
    const char *out = "docs/results", *link = NULL;
    for (int i = 1; i < argc; i++) {
        char opt[64];
        const char *a, *v;
        cli_opt_split(argc, argv, &i, opt, sizeof opt, &a, &v);
        int st;
        if (!strcmp(a, "--out"))
            st = cli_arg_text(&cli_cmd_roofline, a, v, "the name of a directory", &out);
        else if (!strcmp(a, "--link"))
            st = cli_arg_text(&cli_cmd_roofline, a, v, cli_link_allowed(), &link);
        else
            st = cli_bad_arg(&cli_cmd_roofline, a == opt ? argv[i] : a);
        if (st)
            return st;
    }
    int st = cli_check_link(&cli_cmd_roofline, link);
    if (st || (st = cli_arg_outdir(&cli_cmd_roofline, "--out", out, &out)) != 0)
        return st;
    char gpu[128];
    int have_gpu = gpu_name(gpu, sizeof gpu) == 0;
    static const char *const print[] = {"points", NULL};
    struct bench_cli_set set = {"roofline", out, "roofline", have_gpu ? gpu : NULL, print, body, (void *)link};
    return bench_cli_run(&set);
}
