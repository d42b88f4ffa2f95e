/* test_bench_json.c - the JSON reader of src/bench (json.h): what report.c
 * writes reads back; malformed text and passed limits are refused with the
 * place and the reason. */
#include <stdlib.h>
#include <unistd.h>
#include "oni.h"
#include "bench/json.h"
#include "unit.h"

static char err[256];

static struct bench_json *parse(const char *text)
{
    struct bench_json *v = NULL;
    int rc = bench_json_parse(text, strlen(text), &v, err, sizeof err);
    if (rc)
        UNIT_FAIL("'%s' not parsed: %s", text, err);
    return v;
}

/* text must be refused, with why in the message. */
static void refused(const char *text, size_t len, const char *why)
{
    struct bench_json *v = (struct bench_json *)1;
    int rc = bench_json_parse(text, len, &v, err, sizeof err);
    if (rc != ONI_EINVALARG || v || !strstr(err, why))
        UNIT_FAIL("'%.*s': rc %d, message '%s', want '%s'", (int)len, text, rc, err, why);
}
#define REFUSED(text, why) refused(text, sizeof text - 1, why)

TEST(json_reads_a_result_set)
{
    struct bench_json *v = parse("{\n  \"meta\": {\"command\": \"onigpu run --out \\\"a]b\\\"\", \"cores\": 16},\n"
                                 "  \"results\": [\n    {\"block_bytes\": 12672, \"ai\": 9.74, \"x\": null},\n"
                                 "    {\"data\": \"4kB\", \"ok\": true, \"no\": false, \"e\": -1.5e-3}\n  ],\n"
                                 "  \"tables\": {}, \"plots\": []\n}\n");
    REQUIRE(v);
    CHECK_EQ(v->type, BENCH_JSON_OBJ);
    const struct bench_json *cmd = bench_json_get(bench_json_get(v, "meta"), "command");
    REQUIRE(cmd && cmd->type == BENCH_JSON_STR);
    CHECK(!strcmp(cmd->str, "onigpu run --out \"a]b\""));
    const struct bench_json *res = bench_json_get(v, "results");
    REQUIRE(res && res->type == BENCH_JSON_ARR && res->n == 2);
    CHECK(bench_json_get(bench_json_at(res, 0), "block_bytes")->num == 12672);
    CHECK(bench_json_get(bench_json_at(res, 0), "ai")->num == 9.74);
    CHECK_EQ(bench_json_get(bench_json_at(res, 0), "x")->type, BENCH_JSON_NULL);
    CHECK(!strcmp(bench_json_get(bench_json_at(res, 1), "data")->str, "4kB"));
    CHECK_EQ(bench_json_get(bench_json_at(res, 1), "ok")->b, 1);
    CHECK_EQ(bench_json_get(bench_json_at(res, 1), "no")->b, 0);
    CHECK(bench_json_get(bench_json_at(res, 1), "e")->num == -1.5e-3);
    CHECK(bench_json_at(res, 2) == NULL);
    CHECK(bench_json_get(res, "ai") == NULL); /* an array has no keys */
    CHECK(bench_json_at(v, 0) == NULL);       /* an object has no items by index */
    CHECK(bench_json_get(v, "nosuch") == NULL);
    CHECK_EQ(bench_json_get(v, "tables")->n, 0);
    CHECK(!strcmp(bench_json_type_name(bench_json_get(v, "plots")), "array"));
    bench_json_free(v);
}

TEST(json_string_escapes_and_utf8)
{
    struct bench_json *v = parse("[\"q\\\" b\\\\ s\\/ \\b\\f\\n\\r\\t\", \"\\u00e9\\u20AC\\ud83d\\ude00\", "
                                 "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\", \"\", \"\x7f\"]");
    REQUIRE(v && v->n == 5);
    CHECK(!strcmp(v->items[0].str, "q\" b\\ s/ \b\f\n\r\t"));
    CHECK(!strcmp(v->items[1].str, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"));
    CHECK(!strcmp(v->items[2].str, v->items[1].str));
    CHECK(!strcmp(v->items[3].str, ""));
    bench_json_free(v);
    /* the last of repeated keys wins */
    v = parse("{\"a\": 1, \"a\": 2}");
    REQUIRE(v);
    CHECK(bench_json_get(v, "a")->num == 2);
    bench_json_free(v);
}

TEST(json_refuses_malformed_text)
{
    REFUSED("", "unexpected end of text, expected a value");
    REFUSED("  \n ", "line 2, column 2: unexpected end");
    REFUSED("{\"a\": 1,}", "column 9: unexpected '}', expected a key");
    REFUSED("[1, 2,]", "unexpected ']', expected a value");
    REFUSED("[1 2]", "expected ',' or ']'");
    REFUSED("{\"a\" 1}", "expected ':' after the key");
    REFUSED("{\"a\": 1", "unexpected end of text, expected ',' or '}'");
    REFUSED("{a: 1}", "expected a key");
    REFUSED("[\"abc", "unterminated string");
    REFUSED("[\"a\nb\"]", "control character 0x0a in a string");
    REFUSED("[\"\\x\"]", "unexpected 'x', expected an escape");
    REFUSED("[\"\\u12\"]", "\\u needs four hex digits");
    REFUSED("[\"\\ud83d\"]", "a high surrogate without a low one");
    REFUSED("[\"\\ud83d\\u0041\"]", "a high surrogate without a low one");
    REFUSED("[\"\\ude00\"]", "a low surrogate without a high one");
    REFUSED("[\"\\u0000\"]", "\\u0000 is not taken");
    REFUSED("[01]", "expected a number");
    REFUSED("[1.]", "expected a number");
    REFUSED("[-]", "expected a number");
    REFUSED("[.5]", "unexpected '.', expected a value");
    REFUSED("[+1]", "unexpected '+'");
    REFUSED("[1e]", "expected a number");
    REFUSED("[nan]", "unexpected 'n', expected a value");
    REFUSED("[inf]", "unexpected 'i'");
    REFUSED("[-inf]", "expected a number");
    REFUSED("[1e400]", "number 1e400 is out of range");
    REFUSED("[tru]", "expected a value");
    REFUSED("{} {}", "column 4: unexpected '{', expected the end of the text");
    REFUSED("[1]\x00", "unexpected byte 0x00, expected the end");
    REFUSED("[\"\xff\"]", "invalid UTF-8 byte 0xff");
    REFUSED("[\"\xc0\x80\"]", "invalid UTF-8 byte 0xc0");       /* overlong NUL */
    REFUSED("[\"\xed\xa0\x80\"]", "invalid UTF-8 byte 0xed");   /* a surrogate */
    REFUSED("[\"\xf4\x90\x80\x80\"]", "invalid UTF-8 byte 0xf4"); /* past U+10FFFF */
    REFUSED("[\"\xe2\x82\"]", "invalid UTF-8 byte 0xe2");       /* cut short */
    REFUSED("[\"\xf5\x80\x80\x80\"]", "invalid UTF-8 byte 0xf5"); /* no lead byte past F4 */
    REFUSED("[\"\x1f\"]", "control character 0x1f in a string"); /* the last one */
    char many[200];
    memset(many, '1', sizeof many);
    many[0] = '[';
    many[sizeof many - 1] = ']';
    refused(many, sizeof many, "a number of 198 characters (at most 127)");
    /* the bound itself: 127 digits are a number, 128 are not */
    many[129] = ']';
    refused(many, 130, "a number of 128 characters (at most 127)");
    many[128] = ']';
    struct bench_json *v = NULL;
    CHECK_EQ(bench_json_parse(many, 129, &v, err, sizeof err), 0);
    CHECK(v && v->n == 1 && v->items[0].num > 1e125);
    bench_json_free(v);
}

/* The edges of each UTF-8 length, from \u escapes and as raw bytes, and the
 * last code point through a surrogate pair. */
TEST(json_utf8_edges)
{
    struct bench_json *v = parse("[\"\\u007f\", \"\\u0080\", \"\\u07ff\", \"\\u0800\", \"\\uffff\", "
                                 "\"\\ud800\\udc00\", \"\\udbff\\udfff\", \"\xf4\x8f\xbf\xbf\", \"\xed\x9f\xbf\"]");
    REQUIRE(v && v->n == 9);
    static const char *want[] = {"\x7f", "\xc2\x80", "\xdf\xbf", "\xe0\xa0\x80", "\xef\xbf\xbf",
                                 "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf", "\xf4\x8f\xbf\xbf", "\xed\x9f\xbf"};
    for (size_t i = 0; i < 9; i++)
        if (strcmp(v->items[i].str, want[i]))
            UNIT_FAIL("item %zu decoded wrong", i);
    bench_json_free(v);
}

TEST(json_limits_depth_and_size)
{
    enum { D = BENCH_JSON_MAX_DEPTH };
    char text[2 * (D + 1) + 1];
    for (int deep = D; deep <= D + 1; deep++) {
        memset(text, '[', (size_t)deep);
        memset(text + deep, ']', (size_t)deep);
        struct bench_json *v = NULL;
        int rc = bench_json_parse(text, 2 * (size_t)deep, &v, err, sizeof err);
        CHECK_EQ(rc, deep > D ? ONI_EINVALARG : 0);
        if (deep > D)
            CHECK(strstr(err, "nested deeper than 64") != NULL);
        bench_json_free(v);
    }
    /* the size is checked before a byte is read */
    struct bench_json *v = NULL;
    CHECK_EQ(bench_json_parse("[]", BENCH_JSON_MAX_BYTES + 1u, &v, err, sizeof err), ONI_EINVALARG);
    CHECK(strstr(err, "at most 67108864") != NULL);
    CHECK_EQ(bench_json_parse(NULL, 1, &v, err, sizeof err), ONI_EINVALARG);
    CHECK_EQ(bench_json_parse("[]", 2, NULL, err, sizeof err), ONI_EINVALARG);
    CHECK_EQ(bench_json_parse("[]", 2, &v, NULL, 0), 0); /* no room for a message is fine */
    bench_json_free(v);
    CHECK_EQ(bench_json_parse("[", 1, &v, NULL, 0), ONI_EINVALARG);
    bench_json_free(NULL);
}

TEST(json_load_reads_files)
{
    struct bench_json *v = NULL;
    CHECK_EQ(bench_json_load("/nonexistent/x.json", &v, err, sizeof err), ONI_EPATHINVALID);
    CHECK(strstr(err, "cannot open") != NULL);
    char path[] = "/tmp/onigpu-json-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    /* larger than the first read, so the buffer grows */
    size_t n = 200000;
    char *text = malloc(n);
    REQUIRE(text);
    memset(text, ' ', n);
    memcpy(text, "{\"k\": \"v\"}", 10);
    CHECK(write(fd, text, n) == (ssize_t)n);
    close(fd);
    CHECK_EQ(bench_json_load(path, &v, err, sizeof err), 0);
    CHECK(v && !strcmp(bench_json_get(v, "k")->str, "v"));
    bench_json_free(v);
    FILE *f = fopen(path, "a");
    REQUIRE(f);
    fputs("x", f);
    fclose(f);
    CHECK_EQ(bench_json_load(path, &v, err, sizeof err), ONI_EINVALARG);
    CHECK(strstr(err, "line 1, column 200001: unexpected 'x'") != NULL);
    free(text);
    unlink(path);
}
