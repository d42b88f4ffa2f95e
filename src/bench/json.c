/* json.c - a recursive-descent JSON reader (json.h). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "oni.h"
#include "bench/json.h"

#define MAX_NUMBER 128 /* characters of one number */

struct parser {
    const unsigned char *s;
    size_t len, pos;
    int depth, rc;
    char *err;
    size_t errlen;
};

/* Record the first error, with where it happened. Returns p->rc. */
static int fail(struct parser *p, const char *fmt, ...)
{
    if (p->rc)
        return p->rc;
    p->rc = ONI_EINVALARG;
    if (!p->err || !p->errlen)
        return p->rc;
    size_t line = 1, col = 1;
    for (size_t i = 0; i < p->pos && i < p->len; i++, col++)
        if (p->s[i] == '\n')
            line++, col = 0;
    int n = snprintf(p->err, p->errlen, "line %zu, column %zu: ", line, col);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < p->errlen)
        vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return p->rc;
}

static int no_memory(struct parser *p)
{
    if (!p->rc) {
        p->rc = ONI_EBADALLOC;
        if (p->err && p->errlen)
            snprintf(p->err, p->errlen, "out of memory");
    }
    return p->rc;
}

static void skip_ws(struct parser *p)
{
    while (p->pos < p->len &&
           (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\r' || p->s[p->pos] == '\n'))
        p->pos++;
}

/* The next byte, or -1 at the end. */
static int peek(const struct parser *p)
{
    return p->pos < p->len ? p->s[p->pos] : -1;
}

/* "what" for the byte at pos, for messages. */
static int unexpected(struct parser *p, const char *wanted)
{
    int c = peek(p);
    if (c < 0)
        return fail(p, "unexpected end of text, expected %s", wanted);
    if (c >= 0x20 && c < 0x7f)
        return fail(p, "unexpected '%c', expected %s", c, wanted);
    return fail(p, "unexpected byte 0x%02x, expected %s", c, wanted);
}

/* ---- strings ------------------------------------------------------------ */

struct buf {
    char *s;
    size_t n, cap;
};

static int buf_put(struct parser *p, struct buf *b, const unsigned char *c, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 32;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s)
            return no_memory(p);
        b->s = s;
        b->cap = cap;
    }
    memcpy(b->s + b->n, c, n);
    b->n += n;
    b->s[b->n] = 0;
    return 0;
}

size_t bench_json_utf8(const char *text, size_t n)
{
    const unsigned char *s = (const unsigned char *)text;
    if (!n)
        return 0;
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (!len || n < len)
        return 0;
    unsigned char lo = 0x80, hi = 0xBF; /* the second byte's range */
    if (c == 0xE0)
        lo = 0xA0;
    else if (c == 0xED)
        hi = 0x9F;
    else if (c == 0xF0)
        lo = 0x90;
    else if (c == 0xF4)
        hi = 0x8F;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    return len;
}

static size_t utf8_put(unsigned long cp, unsigned char *o)
{
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | cp >> 6);
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | cp >> 12);
        o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | cp >> 18);
    o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Four hex digits at pos (after "\u"); -1 if they are not. */
static long hex4(struct parser *p)
{
    if (p->len - p->pos < 4)
        return -1;
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int c = p->s[p->pos + (size_t)i], d = c >= '0' && c <= '9' ? c - '0'
                                             : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                             : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                                    : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    p->pos += 4;
    return v;
}

/* A \u escape at pos (just after the "\u"), a surrogate pair taken whole. */
static int unicode_escape(struct parser *p, struct buf *b)
{
    long cp = hex4(p);
    if (cp < 0)
        return fail(p, "\\u needs four hex digits");
    if (cp >= 0xDC00 && cp <= 0xDFFF)
        return fail(p, "\\u%04lx: a low surrogate without a high one", cp);
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        long lo = -1;
        if (p->len - p->pos >= 2 && p->s[p->pos] == '\\' && p->s[p->pos + 1] == 'u') {
            p->pos += 2;
            lo = hex4(p);
        }
        if (lo < 0xDC00 || lo > 0xDFFF)
            return fail(p, "\\u%04lx: a high surrogate without a low one", cp);
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    if (cp == 0)
        return fail(p, "\\u0000 is not taken (strings end at NUL here)");
    unsigned char o[4];
    return buf_put(p, b, o, utf8_put((unsigned long)cp, o));
}

static int escape(struct parser *p, struct buf *b)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    int c = peek(p);
    const char *k = c > 0 ? strchr(from, c) : NULL;
    if (c == 'u') {
        p->pos++;
        return unicode_escape(p, b);
    }
    if (!k)
        return unexpected(p, "an escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)");
    p->pos++;
    return buf_put(p, b, (const unsigned char *)&to[k - from], 1);
}

/* A string at pos (its opening quote) into a new heap string *out. */
static int string(struct parser *p, char **out)
{
    struct buf b = {0};
    p->pos++;
    for (;;) {
        int c = peek(p);
        if (c < 0) {
            fail(p, "unterminated string");
            break;
        }
        if (c == '"') {
            p->pos++;
            if (!b.s && buf_put(p, &b, (const unsigned char *)"", 0))
                break;
            *out = b.s;
            return 0;
        }
        if (c < 0x20) {
            fail(p, "control character 0x%02x in a string (it must be escaped)", c);
            break;
        }
        if (c == '\\') {
            p->pos++;
            if (escape(p, &b))
                break;
            continue;
        }
        size_t n = bench_json_utf8((const char *)p->s + p->pos, p->len - p->pos);
        if (!n) {
            fail(p, "invalid UTF-8 byte 0x%02x in a string", c);
            break;
        }
        if (buf_put(p, &b, p->s + p->pos, n))
            break;
        p->pos += n;
    }
    free(b.s);
    return p->rc;
}

/* ---- numbers and literals ------------------------------------------------- */

static size_t digits(const struct parser *p, size_t i)
{
    size_t n = 0;
    while (i + n < p->len && p->s[i + n] >= '0' && p->s[i + n] <= '9')
        n++;
    return n;
}

/* The length of the number at pos by the JSON grammar, 0 if none. */
static size_t number_len(const struct parser *p)
{
    size_t i = p->pos, n;
    if (i < p->len && p->s[i] == '-')
        i++;
    if (!(n = digits(p, i)) || (p->s[i] == '0' && n > 1))
        return 0;
    i += n;
    if (i < p->len && p->s[i] == '.') {
        if (!(n = digits(p, i + 1)))
            return 0;
        i += 1 + n;
    }
    if (i < p->len && (p->s[i] == 'e' || p->s[i] == 'E')) {
        i++;
        if (i < p->len && (p->s[i] == '+' || p->s[i] == '-'))
            i++;
        if (!(n = digits(p, i)))
            return 0;
        i += n;
    }
    return i - p->pos;
}

static int number(struct parser *p, double *out)
{
    size_t n = number_len(p);
    if (!n)
        return unexpected(p, "a number (-?digits[.digits][e[+-]digits], no leading zeros)");
    if (n >= MAX_NUMBER)
        return fail(p, "a number of %zu characters (at most %d)", n, MAX_NUMBER - 1);
    char tmp[MAX_NUMBER];
    memcpy(tmp, p->s + p->pos, n);
    tmp[n] = 0;
    errno = 0;
    *out = strtod(tmp, NULL);
    if (!isfinite(*out))
        return fail(p, "number %s is out of range", tmp);
    p->pos += n;
    return 0;
}

static int literal(struct parser *p, struct bench_json *v)
{
    static const struct { const char *word; enum bench_json_type type; int b; } lit[] = {
        {"true", BENCH_JSON_BOOL, 1}, {"false", BENCH_JSON_BOOL, 0}, {"null", BENCH_JSON_NULL, 0}};
    for (size_t i = 0; i < sizeof lit / sizeof lit[0]; i++) {
        size_t n = strlen(lit[i].word);
        if (p->len - p->pos >= n && !memcmp(p->s + p->pos, lit[i].word, n)) {
            p->pos += n;
            v->type = lit[i].type;
            v->b = lit[i].b;
            return 0;
        }
    }
    return unexpected(p, "a value");
}

/* ---- arrays and objects --------------------------------------------------- */

static int value(struct parser *p, struct bench_json *v);

/* Room for one more member of v (its items, and its keys for an object). */
static int grow(struct parser *p, struct bench_json *v, size_t *cap)
{
    if (v->n < *cap)
        return 0;
    size_t c = *cap ? 2 * *cap : 4;
    struct bench_json *items = realloc(v->items, c * sizeof *items);
    if (items)
        v->items = items;
    if (items && v->type == BENCH_JSON_OBJ) {
        char **keys = realloc(v->keys, c * sizeof *keys);
        if (!keys)
            return no_memory(p);
        v->keys = keys;
    }
    if (!items)
        return no_memory(p);
    *cap = c;
    return 0;
}

/* One member of object v at pos: "key": value. */
static int member(struct parser *p, struct bench_json *v)
{
    if (peek(p) != '"')
        return unexpected(p, "a key (a string)");
    char *key = NULL;
    if (string(p, &key))
        return p->rc;
    skip_ws(p);
    if (peek(p) != ':') {
        free(key);
        return unexpected(p, "':' after the key");
    }
    p->pos++;
    v->keys[v->n] = key;
    memset(&v->items[v->n], 0, sizeof v->items[0]);
    v->n++; /* counted now, so that bench_json_free frees the key after an error */
    return value(p, &v->items[v->n - 1]);
}

/* An array or object at pos (its opening bracket), into v. */
static int container(struct parser *p, struct bench_json *v, int obj)
{
    const char close = obj ? '}' : ']';
    v->type = obj ? BENCH_JSON_OBJ : BENCH_JSON_ARR;
    if (++p->depth > BENCH_JSON_MAX_DEPTH)
        return fail(p, "nested deeper than %d arrays and objects", BENCH_JSON_MAX_DEPTH);
    p->pos++;
    skip_ws(p);
    if (peek(p) == close) {
        p->pos++;
        p->depth--;
        return 0;
    }
    size_t cap = 0;
    for (;;) {
        skip_ws(p);
        if (grow(p, v, &cap))
            return p->rc;
        if (obj) {
            if (member(p, v))
                return p->rc;
        } else {
            memset(&v->items[v->n], 0, sizeof v->items[0]);
            if (value(p, &v->items[v->n++]))
                return p->rc;
        }
        skip_ws(p);
        if (peek(p) == close)
            break;
        if (peek(p) != ',')
            return unexpected(p, obj ? "',' or '}'" : "',' or ']'");
        p->pos++;
    }
    p->pos++;
    p->depth--;
    return 0;
}

static int value(struct parser *p, struct bench_json *v)
{
    skip_ws(p);
    int c = peek(p);
    if (c == '{' || c == '[')
        return container(p, v, c == '{');
    if (c == '"') {
        v->type = BENCH_JSON_STR;
        return string(p, &v->str);
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        v->type = BENCH_JSON_NUM;
        return number(p, &v->num);
    }
    return literal(p, v);
}

/* ---- public ----------------------------------------------------------------- */

static void free_members(struct bench_json *v)
{
    for (size_t i = 0; i < v->n; i++) {
        free_members(&v->items[i]);
        if (v->type == BENCH_JSON_OBJ)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
}

void bench_json_free(struct bench_json *v)
{
    if (!v)
        return;
    free_members(v);
    free(v);
}

int bench_json_parse(const char *text, size_t len, struct bench_json **out, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = 0;
    if (!out || (!text && len))
        return ONI_EINVALARG;
    *out = NULL;
    struct parser p = {(const unsigned char *)text, len, 0, 0, 0, err, errlen};
    if (len > BENCH_JSON_MAX_BYTES)
        return fail(&p, "text of %zu bytes (at most %u)", len, BENCH_JSON_MAX_BYTES);
    struct bench_json *v = calloc(1, sizeof *v);
    if (!v)
        return no_memory(&p);
    if (!value(&p, v)) {
        skip_ws(&p);
        if (p.pos < p.len)
            unexpected(&p, "the end of the text");
    }
    if (p.rc) {
        bench_json_free(v);
        return p.rc;
    }
    *out = v;
    return 0;
}

/* The whole of f, up to one byte past BENCH_JSON_MAX_BYTES (which tells a
 * file that is too large), into a new buffer; NULL when out of memory. */
static char *read_all(FILE *f, size_t *len)
{
    size_t cap = 1u << 16, n = 0;
    char *text = malloc(cap);
    while (text) {
        n += fread(text + n, 1, cap - n, f);
        if (n < cap || n > BENCH_JSON_MAX_BYTES)
            break;
        size_t more = cap * 2 > BENCH_JSON_MAX_BYTES + 1u ? BENCH_JSON_MAX_BYTES + 1u : cap * 2;
        char *t = realloc(text, more);
        if (!t)
            free(text);
        text = t;
        cap = more;
    }
    *len = n;
    return text;
}

int bench_json_load(const char *path, struct bench_json **out, char *err, size_t errlen)
{
    if (!path || !out)
        return ONI_EINVALARG;
    if (!err)
        errlen = 0;
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open: %s", strerror(errno));
        return ONI_EPATHINVALID;
    }
    size_t n = 0;
    char *text = read_all(f, &n);
    int bad = ferror(f);
    fclose(f);
    int rc = !text ? ONI_EBADALLOC : bad || n > BENCH_JSON_MAX_BYTES ? ONI_EPATHINVALID : 0;
    if (rc)
        snprintf(err, errlen, "%s", !text ? "out of memory" : bad ? "read error" : "larger than 64 MiB");
    else
        rc = bench_json_parse(text, n, out, err, errlen);
    free(text);
    return rc;
}

const struct bench_json *bench_json_get(const struct bench_json *v, const char *key)
{
    if (!v || v->type != BENCH_JSON_OBJ || !key)
        return NULL;
    for (size_t i = v->n; i-- > 0;)
        if (!strcmp(v->keys[i], key))
            return &v->items[i];
    return NULL;
}

const struct bench_json *bench_json_at(const struct bench_json *v, size_t i)
{
    return v && v->type == BENCH_JSON_ARR && i < v->n ? &v->items[i] : NULL;
}

const char *bench_json_type_name(const struct bench_json *v)
{
    static const char *names[] = {"null", "boolean", "number", "string", "array", "object"};
    return v ? names[v->type] : "nothing";
}
