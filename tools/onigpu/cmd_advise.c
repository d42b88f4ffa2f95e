/* cmd_advise.c - `onigpu advise`: which backend, from this machine's numbers. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "oni.h"
#include "bench/advise.h"
#include "bench/bench_loop.h"
#include "cli.h"
#include "cli_oni.h"

static int run(int argc, char **argv);

#define USAGE "[--data SIZE --compute SIZE --ai X | --workload RESULT.json [--row N]] [--serial] [--measure] " \
              "[--link PRESET]\n       onigpu advise --scale SCALE.json [--probes N] [--algo NAME]"

CLI_COMMAND(advise, "advise", USAGE,
            "thesis figure 6.1 with measured numbers: recommend a backend, predicted (and measured) round trip; "
            "or, from a bench scale set, the backend for N probes", NULL, run)

/* --- a recorded workload ---------------------------------------------------------
 * The JSON result sets of `onigpu run --out` and `onigpu bench loop`
 * (bench/report.c), read with jansson. A run row gives block_bytes and
 * ai (the ephys pipeline's FLOP per byte; older ones only bytes, frames and
 * block_frames); a bench loop row gives data, compute ("4kB", "10MB") and ai. */

/* The name of v's type, for messages. */
static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER:
    case JSON_REAL: return "number";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    default: return "null";
    }
}

/* The number under key in row: 1 and *out, 0 when absent or null, -1 (after
 * saying why in msg) when it is of another type. */
static int num_field(const json_t *row, const char *key, double *out, char *msg, size_t len)
{
    const json_t *v = json_object_get(row, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_number(v)) {
        snprintf(msg, len, "%s is not a number: %s", key, type_name(v));
        return -1;
    }
    *out = json_number_value(v);
    return 1;
}

/* The string under key in row, NULL when absent or null; *bad (and msg)
 * when it is of another type. */
static const char *str_field(const json_t *row, const char *key, int *bad, char *msg, size_t len)
{
    const json_t *v = json_object_get(row, key);
    if (!v || json_is_null(v))
        return NULL;
    if (!json_is_string(v)) {
        snprintf(msg, len, "%s is not a string: %s", key, type_name(v));
        *bad = 1;
        return NULL;
    }
    return json_string_value(v);
}

/* o->data and o->compute from the row: block_bytes, bytes / frames x
 * block_frames (a run result without block_bytes: returns 1), or data and
 * compute (a bench loop result: 0). */
static int row_sizes(const json_t *row, struct advise_opts *o, char *msg, size_t len)
{
    double bytes = NAN, frames = 0, per = 0;
    int bad = 0, b = num_field(row, "block_bytes", &bytes, msg, len);
    if (b < 0)
        return -1;
    if (!b) {
        if (num_field(row, "bytes", &bytes, msg, len) < 0 || num_field(row, "frames", &frames, msg, len) < 0 ||
            num_field(row, "block_frames", &per, msg, len) < 0)
            return -1;
        b = !isnan(bytes) && frames >= per && per > 0;
        bytes = b ? bytes / (frames / per) : NAN;
    }
    if (!b) {
        const char *d = str_field(row, "data", &bad, msg, len), *c = bad ? NULL : str_field(row, "compute", &bad, msg, len);
        if (bad)
            return -1;
        if (!d || !c) {
            snprintf(msg, len, "no block size (block_bytes, or data and compute)");
            return -1;
        }
        if (cli_parse_size(d, &o->data) || cli_parse_size(c, &o->compute)) {
            snprintf(msg, len, "sizes '%.40s' / '%.40s' not understood", d, c);
            return -1;
        }
        return 0;
    }
    if (!(bytes >= 4 && bytes <= (double)(1ull << 30))) { /* in range before it becomes an integer */
        snprintf(msg, len, "block of %g bytes (4 B .. 1 GiB)", bytes);
        return -1;
    }
    o->data = o->compute = (uint64_t)llround(bytes);
    return 1;
}

/* Fill o->data, o->compute and o->ai (NAN if absent) from the row; a run
 * row's own ai in *run_ai (NAN for other rows). */
static int row_workload(const json_t *row, struct advise_opts *o, double *run_ai, char *msg, size_t len)
{
    int run_row = row_sizes(row, o, msg, len);
    if (run_row < 0)
        return -1;
    double ai = NAN;
    if (num_field(row, "ai", &ai, msg, len) < 0)
        return -1;
    /* NAN when the row has none (a run result of an older onigpu): --ai must say. */
    if (!isnan(ai) && !(ai > 0 && ai <= 1e4)) { /* the limits of --ai */
        snprintf(msg, len, "ai %g out of range (0 .. 10^4)", ai);
        return -1;
    }
    /* A run row's ai is the pipeline's FLOP per byte of block, each byte read
     * once; advise's AI is the MAC kernel's, per byte read and written
     * (2 * compute bytes): as it is, every FLOP would count twice. */
    *run_ai = run_row ? ai : NAN;
    o->ai = run_row ? ai / 2 : ai;
    return 0;
}

/* Fill o from row `row` of the result set at path. 0, or -1 after saying why. */
static int read_workload(const char *path, long row, struct advise_opts *o, double *run_ai)
{
    char msg[256];
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "onigpu advise: %s: cannot open: %s\n", path, strerror(errno));
        return -1;
    }
    json_error_t e;
    json_t *doc = json_loadf(f, 0, &e);
    fclose(f);
    if (!doc) {
        fprintf(stderr, "onigpu advise: %s: line %d, column %d: %s\n", path, e.line, e.column, e.text);
        return -1;
    }
    const json_t *res = json_object_get(doc, "results"), *r = json_array_get(res, (size_t)row);
    int rc = -1;
    if (!json_is_array(res))
        fprintf(stderr, "onigpu advise: %s has no \"results\" array (not a result set of onigpu run or bench loop?)\n",
                path);
    else if (!r)
        fprintf(stderr, "onigpu advise: %s has no result row %ld (it has %zu)\n", path, row, json_array_size(res));
    else if (!json_is_object(r))
        fprintf(stderr, "onigpu advise: %s row %ld is not an object: %s\n", path, row, type_name(r));
    else if ((rc = row_workload(r, o, run_ai, msg, sizeof msg)))
        fprintf(stderr, "onigpu advise: %s row %ld: %s\n", path, row, msg);
    json_decref(doc);
    return rc;
}

/* --- a bench scale set ----------------------------------------------------------
 * Rows of `onigpu bench scale` (src/bench/bench_scale.h): backend, algo,
 * probes, error, keeping_up, dropped_frames, keeping_share, lat_p999_us. A
 * run kept up when it had no error, kept_up 1 and no drop. */

struct scale_pick {
    int best;        /* row of the backend that kept up with the lowest p99.9, -1: none */
    double best_p999;
    long cpu_limit;  /* the most probes the cpu backend kept up with, 0: none (-1: no cpu row) */
};

/* Print the rows of algo at `probes` and pick (see struct scale_pick). */
static int scale_advise(const json_t *rows, const char *algo, long probes, struct scale_pick *pk)
{
    char msg[128];
    pk->best = -1;
    pk->best_p999 = INFINITY;
    pk->cpu_limit = -1;
    size_t i;
    const json_t *r;
    printf("%-16s %12s %10s %12s  %s\n", "backend", "rate share", "kept up", "p99.9 us", "error");
    json_array_foreach(rows, i, r) {
        double np = NAN, up = NAN, drop = NAN, share = NAN, p999 = NAN;
        int bad = 0;
        const char *be = str_field(r, "backend", &bad, msg, sizeof msg);
        const char *al = bad ? NULL : str_field(r, "algo", &bad, msg, sizeof msg);
        const char *err = bad ? NULL : str_field(r, "error", &bad, msg, sizeof msg);
        if (bad || num_field(r, "probes", &np, msg, sizeof msg) < 0 || num_field(r, "keeping_up", &up, msg, sizeof msg) < 0 ||
            num_field(r, "dropped_frames", &drop, msg, sizeof msg) < 0 ||
            num_field(r, "keeping_share", &share, msg, sizeof msg) < 0 ||
            num_field(r, "lat_p999_us", &p999, msg, sizeof msg) < 0) {
            fprintf(stderr, "onigpu advise: row %zu: %s\n", i, msg);
            return -1;
        }
        if (!be || !al || isnan(np)) {
            fprintf(stderr, "onigpu advise: row %zu has no backend, algo or probes: not a bench scale set?\n", i);
            return -1;
        }
        if (strcmp(al, algo))
            continue;
        int kept = !(err && *err) && up == 1 && drop == 0;
        if (!strcmp(be, "cpu") && kept && (long)np > pk->cpu_limit)
            pk->cpu_limit = (long)np;
        else if (!strcmp(be, "cpu") && pk->cpu_limit < 0)
            pk->cpu_limit = 0;
        if ((long)np != probes)
            continue;
        printf("%-16s %12.2f %10s %12.1f  %s\n", be, share, kept ? "yes" : "no", p999, err ? err : "");
        if (kept && !isnan(p999) && p999 < pk->best_p999) {
            pk->best = (int)i;
            pk->best_p999 = p999;
        }
    }
    return 0;
}

/* --scale: the backend for probes probes of algo from a bench scale set. 0, 1 (none kept up) or 2. */
static int advise_scale(const char *path, long probes, const char *algo)
{
    json_error_t e;
    json_t *doc = json_load_file(path, 0, &e);
    if (!doc) {
        fprintf(stderr, "onigpu advise: %s: line %d, column %d: %s\n", path, e.line, e.column, e.text);
        return 2;
    }
    const json_t *rows = json_object_get(doc, "results");
    int st = 2;
    if (!json_is_array(rows)) {
        fprintf(stderr, "onigpu advise: %s has no \"results\" array (not a result set of onigpu bench scale?)\n", path);
    } else {
        if (probes <= 0) { /* the largest in the set */
            size_t i;
            const json_t *r;
            json_array_foreach(rows, i, r) {
                double np = NAN;
                if (num_field(r, "probes", &np, (char[8]){0}, 8) > 0 && np > probes)
                    probes = (long)np;
            }
        }
        printf("from %s: %s, %ld probe%s (%ld channels)\n", path, algo, probes, probes == 1 ? "" : "s", 384 * probes);
        struct scale_pick pk;
        if (scale_advise(rows, algo, probes, &pk) == 0) {
            if (pk.cpu_limit >= 0)
                printf("cpu backend: kept up with %ld probe%s at most in this set\n", pk.cpu_limit,
                       pk.cpu_limit == 1 ? "" : "s");
            const char *be = pk.best < 0 ? NULL : json_string_value(json_object_get(json_array_get(rows, (size_t)pk.best), "backend"));
            if (be)
                printf("recommended backend: %s (kept up, lowest p99.9: %.1f us)\n", be, pk.best_p999);
            else
                printf("recommended backend: none kept up with %ld probes here\n", probes);
            st = be ? 0 : 1;
        }
    }
    json_decref(doc);
    return st;
}

static int run(int argc, char **argv)
{
    struct advise_opts o = {4000, 4000, 0.75, 0, 0, NULL, stdout};
    const char *workload = NULL, *scale = NULL, *algo = "threshold";
    long row = 0, probes = 0;
    int given = 0; /* --data, --compute, --ai given: they override the workload's */
    uint64_t data = 0, compute = 0;
    double ai = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--serial")) {
            o.serial = 1;
            continue;
        }
        if (!strcmp(argv[i], "--measure")) {
            o.measure = 1;
            continue;
        }
        const struct cli_command *cmd = &cli_cmd_advise;
        char opt[64];
        const char *a, *v;
        cli_opt_split(argc, argv, &i, opt, sizeof opt, &a, &v);
        int st = 0;
        if (!strcmp(a, "--data")) {
            st = cli_arg_size(cmd, a, v, 4, 1ull << 30, 4, &data);
            given |= 1;
        } else if (!strcmp(a, "--compute")) {
            st = cli_arg_size(cmd, a, v, 4, 64ull << 30, 1, &compute);
            given |= 2;
        } else if (!strcmp(a, "--ai")) {
            if (!v || cli_parse_decimal(v, &ai) || !bench_loop_iters(ai)) /* quarters, 0.25 .. 10^4: as bench loop */
                st = cli_bad_value(cmd, a, v, "a multiple of 0.25 from 0.25 to 10000");
            given |= 4;
        } else if (!strcmp(a, "--workload")) {
            st = cli_arg_text(cmd, a, v, "a result set's JSON file (onigpu run --out, onigpu bench loop)", &workload);
        } else if (!strcmp(a, "--scale")) {
            st = cli_arg_text(cmd, a, v, "a result set's JSON file of onigpu bench scale", &scale);
        } else if (!strcmp(a, "--probes")) {
            uint64_t n = 0;
            st = cli_arg_count(cmd, a, v, 1, 64, &n);
            probes = (long)n;
        } else if (!strcmp(a, "--algo")) {
            st = cli_arg_text(cmd, a, v, "an algorithm of bench scale (threshold)", &algo);
        } else if (!strcmp(a, "--row")) {
            uint64_t r = 0;
            st = cli_arg_count(cmd, a, v, 0, 1000000, &r);
            row = (long)r;
        } else if (!strcmp(a, "--link")) {
            st = cli_arg_text(cmd, a, v, cli_link_allowed(), &o.link);
        } else {
            st = cli_bad_arg(cmd, a == opt ? argv[i] : a);
        }
        if (st)
            return st;
    }
    int st = cli_check_link(&cli_cmd_advise, o.link);
    if (st)
        return st;
    if (scale && (workload || given)) {
        fprintf(stderr, "onigpu advise: --scale takes no workload (--workload, --data, --compute, --ai)\n");
        return cli_usage(&cli_cmd_advise);
    }
    if (scale)
        return advise_scale(scale, probes, algo);
    double run_ai = NAN;
    if (workload && read_workload(workload, row, &o, &run_ai))
        return cli_usage(&cli_cmd_advise);
    if (given & 1)
        o.data = data;
    if (given & 2)
        o.compute = compute;
    if (given & 4)
        o.ai = ai;
    if (isnan(o.ai)) {
        fprintf(stderr, "onigpu advise: %s row %ld has no arithmetic intensity (ai): give --ai\n", workload, row);
        return cli_usage(&cli_cmd_advise);
    }
    /* The model and --measure run the MAC kernel, whose AI comes in quarters
     * (4 x AI whole iterations): a workload's AI is taken to the nearest. */
    double q = fmax(0.25, round(4.0 * o.ai) / 4.0);
    if (q != o.ai) {
        printf("AI %.4g is modelled as %.4g: the MAC kernel's AI comes in quarters\n", o.ai, q);
        o.ai = q;
    }
    if (workload && !(given & 4) && !isnan(run_ai))
        printf("workload: %s row %ld: data %llu B, compute %llu B, AI %.3g FLOP/byte of block read, "
               "%.3g per byte read and written (the model's)\n",
               workload, row, (unsigned long long)o.data, (unsigned long long)o.compute, run_ai, o.ai);
    else if (workload)
        printf("workload: %s row %ld: data %llu B, compute %llu B, AI %.3g FLOP/byte\n", workload, row,
               (unsigned long long)o.data, (unsigned long long)o.compute, o.ai);
    /* the workload's sizes, or --data and --compute as given (each checked, not yet against the other) */
    if (o.data < 4 || o.data > (1ull << 30) || o.data % 4) {
        fprintf(stderr, "onigpu advise: data %llu B: must be 4 B to 1 GiB, a multiple of 4\n",
                (unsigned long long)o.data);
        return cli_usage(&cli_cmd_advise);
    }
    if (o.compute < o.data) {
        fprintf(stderr, "onigpu advise: compute %llu B: must be at least the data, %llu B (--compute, --data)\n",
                (unsigned long long)o.compute, (unsigned long long)o.data);
        return cli_usage(&cli_cmd_advise);
    }
    int rc = advise_run(&o);
    return rc ? cli_fail("advise", rc) : 0;
}
