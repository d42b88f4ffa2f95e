/* result_set.h - read back a result set (the JSON of bench/report.c) that a
 * command under test wrote into a directory: the columns of its rows, to
 * check how the numbers of a row relate (rates to counts, units). */
#ifndef TEST_RESULT_SET_H
#define TEST_RESULT_SET_H

#include <glob.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>

/* The one file dir/pattern (a glob) parsed; NULL when there is none, more
 * than one, or it is no valid JSON. Free with json_decref. */
static inline json_t *result_set_load(const char *dir, const char *pattern)
{
    char pat[512];
    json_t *v = NULL;
    glob_t g;
    snprintf(pat, sizeof pat, "%s/%s", dir, pattern);
    if (glob(pat, 0, NULL, &g) != 0)
        return NULL;
    if (g.gl_pathc == 1)
        v = json_load_file(g.gl_pathv[0], 0, NULL);
    globfree(&g);
    return v;
}

/* Rows in the main table ("results"). */
static inline size_t result_rows(const json_t *v)
{
    return json_array_size(json_object_get(v, "results"));
}

/* The number in column col of row i of the main table; NAN when absent or not a number. */
static inline double result_num(const json_t *v, size_t i, const char *col)
{
    const json_t *c = json_object_get(json_array_get(json_object_get(v, "results"), i), col);
    return json_is_number(c) ? json_number_value(c) : NAN;
}

/* The string in column col of row i of the main table; "" when absent or not a string. */
static inline const char *result_str(const json_t *v, size_t i, const char *col)
{
    const char *s = json_string_value(json_object_get(json_array_get(json_object_get(v, "results"), i), col));
    return s ? s : "";
}

/* a and b equal but for rounding (relative 1e-9; both 0 is equal). */
static inline int result_close(double a, double b)
{
    return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b));
}

#endif
