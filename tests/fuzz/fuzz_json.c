/* fuzz_json.c - libFuzzer target for the JSON reader of src/bench (json.h),
 * which reads result files a user names (`onigpu advise --workload`). The
 * input is the text. It must be parsed or refused with a message, never
 * crash or read past the input (ASan); a tree that comes back holds strings
 * of well-formed UTF-8 without NUL and finite numbers. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
/* Compiled into the target, so that libFuzzer's coverage instrumentation
 * sees the parser (the library is built without it). */
#include "bench/json.c"

static void check_string(const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t k = bench_json_utf8(s + i, n - i);
        if (!k)
            abort();
        i += k;
    }
}

static void check_tree(const struct bench_json *v, int depth)
{
    if (depth > BENCH_JSON_MAX_DEPTH)
        abort();
    if (v->type == BENCH_JSON_NUM && !isfinite(v->num))
        abort();
    if (v->type == BENCH_JSON_STR)
        check_string(v->str);
    for (size_t i = 0; i < v->n; i++) {
        if (v->type == BENCH_JSON_OBJ) {
            check_string(v->keys[i]);
            if (bench_json_get(v, v->keys[i]) == NULL)
                abort();
        }
        check_tree(&v->items[i], depth + 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = malloc(size ? size : 1); /* exactly size bytes: ASan sees a read past them */
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    struct bench_json *v = NULL;
    char err[128];
    int rc = bench_json_parse(copy, size, &v, err, sizeof err);
    if (rc == 0 && v)
        check_tree(v, 0);
    else if ((rc != ONI_EINVALARG && rc != ONI_EBADALLOC) || v || !err[0])
        abort();
    bench_json_free(v);
    free(copy);
    return 0;
}
