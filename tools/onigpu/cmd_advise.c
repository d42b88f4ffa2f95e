/* cmd_advise.c - `onigpu advise`: which backend, from this machine's numbers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "oni.h"
#include "bench/advise.h"
#include "cli.h"
#include "cli_oni.h"

static int run(int argc, char **argv);

#define USAGE "[--data SIZE --compute SIZE --ai X | --workload RESULT.json [--row N]] [--serial] [--measure] " \
              "[--link PRESET]"

CLI_COMMAND(advise, "advise", USAGE,
            "thesis figure 6.1 with measured numbers: recommend a backend, predicted (and measured) round trip", run)

/* --- a recorded workload ---------------------------------------------------------
 * The JSON result sets of `onigpu run --out` and `onigpu bench loop` hold one
 * result row per line, flat objects of strings and numbers (bench/report.c).
 * A run row gives block_bytes and ai (the ephys pipeline's FLOP per byte;
 * older ones only bytes, frames and block_frames); a bench loop row gives
 * data, compute ("4kB", "10MB") and ai. */

/* The value of "key" in the flat object row[0..len): a string copied to str
 * (returns 1), or a number in *num (returns 2); 0 if absent. */
static int field(const char *row, size_t len, const char *key, char *str, size_t cap, double *num)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    size_t pl = strlen(pat);
    for (const char *p = row; p + pl <= row + len; p++) {
        if (memcmp(p, pat, pl))
            continue;
        p += pl;
        if (*p == '"') {
            const char *e = memchr(p + 1, '"', (size_t)(row + len - p - 1));
            if (!e || (size_t)(e - p - 1) >= cap)
                return 0;
            memcpy(str, p + 1, (size_t)(e - p - 1));
            str[e - p - 1] = 0;
            return 1;
        }
        char *end;
        *num = strtod(p, &end);
        return end > p ? 2 : 0;
    }
    return 0;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    long n = fseek(f, 0, SEEK_END) ? -1 : ftell(f);
    if (n >= 0 && n < (1l << 30) && !fseek(f, 0, SEEK_SET) && (buf = malloc((size_t)n + 1))) {
        *len = fread(buf, 1, (size_t)n, f);
        buf[*len] = 0;
    }
    fclose(f);
    return buf;
}

/* Fill o->data, o->compute and o->ai (NAN if absent) from row `row` of the
 * result set. 0, or -1 after saying why. */
static int read_workload(const char *path, long row, struct advise_opts *o)
{
    size_t len = 0;
    char *buf = slurp(path, &len);
    if (!buf) {
        fprintf(stderr, "onigpu advise: cannot read %s\n", path);
        return -1;
    }
    int rc = -1;
    const char *p = strstr(buf, "\"results\": [");
    const char *end = p ? strchr(p, ']') : NULL;
    for (long i = 0; p && end && (p = memchr(p + 1, '{', (size_t)(end - p - 1))) && i < row; i++)
        ;
    const char *q = p ? memchr(p, '}', (size_t)(end - p)) : NULL;
    if (!q) {
        fprintf(stderr, "onigpu advise: %s has no result row %ld (not a result set of onigpu run or bench loop?)\n",
                path, row);
        goto out;
    }
    size_t n = (size_t)(q - p);
    char d[32], c[32];
    double bytes = NAN, ai = NAN, x, frames = 0, per = 0;
    if (field(p, n, "block_bytes", d, sizeof d, &bytes) == 2) {
        /* the block's bytes, as the row says */
    } else if (field(p, n, "bytes", d, sizeof d, &bytes) == 2 && field(p, n, "frames", d, sizeof d, &frames) == 2 &&
               field(p, n, "block_frames", d, sizeof d, &per) == 2 && frames >= per && per > 0) {
        bytes = bytes / (frames / per); /* a run result without block_bytes */
    } else if (field(p, n, "data", d, sizeof d, &x) == 1 && field(p, n, "compute", c, sizeof c, &x) == 1) {
        if (cli_parse_size(d, &o->data) || cli_parse_size(c, &o->compute)) {
            fprintf(stderr, "onigpu advise: %s row %ld: sizes '%s' / '%s' not understood\n", path, row, d, c);
            goto out;
        }
        bytes = NAN; /* the sizes came as strings (a "bytes" field seen above does not count) */
    } else {
        fprintf(stderr, "onigpu advise: %s row %ld: no block size (block_bytes, or data and compute)\n", path, row);
        goto out;
    }
    if (!isnan(bytes)) { /* a number from the file: in range before it becomes an integer */
        if (!(bytes >= 4 && bytes <= (double)(1ull << 30))) {
            fprintf(stderr, "onigpu advise: %s row %ld: block of %g bytes (4 B .. 1 GiB)\n", path, row, bytes);
            goto out;
        }
        o->data = o->compute = (uint64_t)llround(bytes);
    }
    /* NAN when the row has none (a run result of an older onigpu): --ai must say. */
    o->ai = field(p, n, "ai", d, sizeof d, &ai) == 2 && ai > 0 ? ai : NAN;
    if (o->ai > 1e4) { /* the limits of --ai; also inf */
        fprintf(stderr, "onigpu advise: %s row %ld: ai %g out of range (0 .. 10^4)\n", path, row, o->ai);
        goto out;
    }
    rc = 0;
out:
    free(buf);
    return rc;
}

static int run(int argc, char **argv)
{
    struct advise_opts o = {4000, 4000, 0.75, 0, 0, NULL, stdout};
    const char *workload = NULL;
    long row = 0;
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
        char opt[64];
        const char *a, *v;
        cli_opt_split(argc, argv, &i, opt, sizeof opt, &a, &v);
        int bad = 0;
        if (!v) {
            bad = 1;
        } else if (!strcmp(a, "--data")) {
            bad = cli_parse_size(v, &data) || data < 4 || data > (1ull << 30);
            given |= 1;
        } else if (!strcmp(a, "--compute")) {
            bad = cli_parse_size(v, &compute) || compute > (64ull << 30);
            given |= 2;
        } else if (!strcmp(a, "--ai")) {
            char *end;
            ai = strtod(v, &end);
            bad = *end || !(ai > 0) || ai > 1e4;
            given |= 4;
        } else if (!strcmp(a, "--workload")) {
            workload = v;
        } else if (!strcmp(a, "--row")) {
            uint64_t r;
            bad = cli_parse_u64(v, &r) || r > 1000000;
            row = (long)r;
        } else if (!strcmp(a, "--link")) {
            o.link = v;
        } else {
            bad = 1;
        }
        if (bad) {
            fprintf(stderr, "onigpu advise: bad argument '%s'\n", a);
            return cli_usage(&cli_cmd_advise);
        }
    }
    int st = cli_check_link(&cli_cmd_advise, o.link);
    if (st)
        return st;
    if (workload && read_workload(workload, row, &o))
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
    if (workload)
        printf("workload: %s row %ld: data %llu B, compute %llu B, AI %.3g FLOP/byte\n", workload, row,
               (unsigned long long)o.data, (unsigned long long)o.compute, o.ai);
    if (o.data < 4 || o.data > (1ull << 30) || o.compute < o.data) {
        fprintf(stderr, "onigpu advise: --compute must be at least --data (and data 4 B .. 1 GiB)\n");
        return cli_usage(&cli_cmd_advise);
    }
    int rc = advise_run(&o);
    return rc ? cli_fail("advise", rc) : 0;
}
