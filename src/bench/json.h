/* json.h - a JSON reader (RFC 8259) for the result sets bench/report.c writes,
 * read back by `onigpu advise --workload`: the whole text is parsed into a
 * tree. Strings are UTF-8 and hold no NUL (\u0000 is refused); numbers are
 * finite doubles. Limits: BENCH_JSON_MAX_BYTES of text, BENCH_JSON_MAX_DEPTH
 * nested arrays and objects. Errors are ONI error codes. */
#ifndef BENCH_JSON_H
#define BENCH_JSON_H

#include <stddef.h>

#define BENCH_JSON_MAX_BYTES (64u << 20)
#define BENCH_JSON_MAX_DEPTH 64

enum bench_json_type { BENCH_JSON_NULL, BENCH_JSON_BOOL, BENCH_JSON_NUM, BENCH_JSON_STR, BENCH_JSON_ARR, BENCH_JSON_OBJ };

struct bench_json {
    enum bench_json_type type;
    int b;                    /* BOOL */
    double num;               /* NUM */
    char *str;                /* STR: NUL-terminated UTF-8 */
    size_t n;                 /* ARR, OBJ: members */
    char **keys;              /* OBJ: n keys */
    struct bench_json *items; /* ARR, OBJ: n values */
};

/* Parse text[0..len) (no NUL needed) into a new tree *out. ONI_EINVALARG for
 * malformed text or a limit passed, with "line L, column C: why" in err;
 * ONI_EBADALLOC. */
int bench_json_parse(const char *text, size_t len, struct bench_json **out, char *err, size_t errlen);

/* bench_json_parse of the file at path; ONI_EPATHINVALID (and why in err)
 * when it cannot be read or is larger than BENCH_JSON_MAX_BYTES. */
int bench_json_load(const char *path, struct bench_json **out, char *err, size_t errlen);

/* Free a tree from bench_json_parse. NULL-safe. */
void bench_json_free(struct bench_json *v);

/* The value of key in object v (the last one when repeated); NULL when absent or v is no object. */
const struct bench_json *bench_json_get(const struct bench_json *v, const char *key);

/* Item i of array v; NULL when out of range or v is no array. */
const struct bench_json *bench_json_at(const struct bench_json *v, size_t i);

/* Length of the well-formed UTF-8 sequence at text[0..n) (1 to 4), 0 if there
 * is none: overlong forms, surrogates and code points past U+10FFFF are not. */
size_t bench_json_utf8(const char *text, size_t n);

/* The name of v's type for messages: "null", "boolean", "number", "string", "array", "object". */
const char *bench_json_type_name(const struct bench_json *v);

#endif
