/* result_set.h - read back a result set (the JSON of bench/report.c) that a
 * command under test wrote into a directory: the columns of its rows, to
 * check how the numbers of a row relate (rates to counts, units). */
#ifndef TEST_RESULT_SET_H
#define TEST_RESULT_SET_H

#include <glob.h>
#include <math.h>
#include <stdio.h>
#include "bench/json.h"

/* The one file dir/pattern (a glob) parsed; NULL when there is none, more
 * than one, or it is no valid JSON. Free with bench_json_free. */
static struct bench_json *result_set_load(const char *dir, const char *pattern)
{
    char pat[512], err[200];
    struct bench_json *v = NULL;
    glob_t g;
    snprintf(pat, sizeof pat, "%s/%s", dir, pattern);
    if (glob(pat, 0, NULL, &g) != 0)
        return NULL;
    if (g.gl_pathc != 1 || bench_json_load(g.gl_pathv[0], &v, err, sizeof err))
        v = NULL;
    globfree(&g);
    return v;
}

/* Rows in the main table ("results"). */
static size_t result_rows(const struct bench_json *v)
{
    const struct bench_json *t = bench_json_get(v, "results");
    return t && t->type == BENCH_JSON_ARR ? t->n : 0;
}

/* The number in column col of row i of the main table; NAN when absent or not a number. */
static double result_num(const struct bench_json *v, size_t i, const char *col)
{
    const struct bench_json *c = bench_json_get(bench_json_at(bench_json_get(v, "results"), i), col);
    return c && c->type == BENCH_JSON_NUM ? c->num : NAN;
}

/* a and b equal but for rounding (relative 1e-9; both 0 is equal). */
static int result_close(double a, double b)
{
    return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b));
}

#endif
