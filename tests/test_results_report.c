/* test_results_report.c - result sets of src/results: CSV and JSON written,
 * well-formed and read back; errors lose no committed rows. */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>
#include "bench/bench.h" /* bench_cell_stats */
#include "results/results.h"
#include "unit.h"

/* text parsed by jansson, NULL (after a failed check) when it is no JSON. */
static json_t *json_parse(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, 0, &e);
    if (!v)
        UNIT_FAIL("not JSON: line %d, column %d: %s", e.line, e.column, e.text);
    return v;
}

/* Member key of object o as a string ("" when it is none). */
static const char *str_of(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

/* Whether member key of object o is the number want (NAN: null). */
static int num_is(const json_t *o, const char *key, double want)
{
    const json_t *v = json_object_get(o, key);
    if (isnan(want))
        return json_is_null(v);
    return json_is_number(v) && json_number_value(v) == want;
}

/* ---- helpers ---------------------------------------------------------------- */

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) == (size_t)n)
        s[n] = 0;
    fclose(f);
    return s;
}

/* The one file in dir whose name ends with suffix (NULL if none or several). */
static char *find_file(const char *dir, const char *suffix, char *buf, size_t len)
{
    DIR *d = opendir(dir);
    int found = 0;
    if (!d)
        return NULL;
    struct dirent *e;
    size_t sl = strlen(suffix);
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n > sl && !strcmp(e->d_name + n - sl, suffix)) {
            snprintf(buf, len, "%s/%s", dir, e->d_name);
            found++;
        }
    }
    closedir(d);
    return found == 1 ? buf : NULL;
}

static void rm_dir(const char *dir)
{
    unit_sh("rm -rf '%s'", dir);
}

/* The folder of result set `name` in dir: the name up to its first '-'. */
static const char *set_dir(const char *dir, const char *bench)
{
    static char buf[600];
    snprintf(buf, sizeof buf, "%s/%s", dir, bench);
    return buf;
}

static int starts(const char *s, const char *prefix)
{
    return !strncmp(s, prefix, strlen(prefix));
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* ---- tests ------------------------------------------------------------------ */

TEST(report_writes_csv_and_json)
{
    char dir[] = "/tmp/onigpu-bench-XXXXXX";
    REQUIRE(mkdtemp(dir));
    char out[300];
    snprintf(out, sizeof out, "%s/results", dir);
    REQUIRE(mkdir(out, 0777) == 0);
    char *argv[] = {"onigpu", "bench", "frames", "--label", "a \"quoted\" word"};
    int err = 0;
    struct results *r = results_open(out, "frames", 5, argv, "Test GPU", &err);
    REQUIRE(r != NULL);
    CHECK_RC(results_meta(r, "driver", "test"), ONI_ESUCCESS);
    CHECK_RC(results_meta_num(r, "seconds", 2.5), ONI_ESUCCESS);
    CHECK_RC(results_meta(r, "driver", "test2"), ONI_ESUCCESS); /* last wins */

    for (int i = 0; i < 3; i++) {
        results_cell_int(r, "block", 4096 << i);
        results_cell_str(r, "name", i == 1 ? "with,comma" : "plain");
        results_cell_num(r, "rate", i == 2 ? NAN : 1.5 * i);
        if (i != 1)
            results_cell_num(r, "opt", 7);
        CHECK_RC(results_row(r, NULL), ONI_ESUCCESS);
    }
    struct bench_stats s = {.n = 3, .mean = 2, .sd = 1, .min = 1, .p50 = 2, .p90 = 3, .p99 = 3, .p999 = 3, .max = 3};
    results_cell_str(r, "path", "direct");
    bench_cell_stats(r, "t", &s);
    CHECK_RC(results_row(r, "fit"), ONI_ESUCCESS);

    FILE *tf = tmpfile();
    REQUIRE(tf != NULL);
    results_print(r, NULL, tf);
    rewind(tf);
    char line[256] = "";
    CHECK(fgets(line, sizeof line, tf) != NULL);
    CHECK(strstr(line, "block") && strstr(line, "name") && strstr(line, "rate"));
    fclose(tf);

    const char *png = results_path(r, "-x.png");
    CHECK(png && strstr(png, "/results/frames/frames-") && strstr(png, "-x.png"));
    CHECK_RC(results_close(r), ONI_ESUCCESS);

    char path[1024];
    char *csv = find_file(set_dir(out, "frames"), "-fit.csv", path, sizeof path) ? slurp(path) : NULL;
    REQUIRE(csv != NULL);
    CHECK(starts(csv, "path,t_n,t_mean_ns,t_sd_ns,t_min_ns,t_p50_ns,t_p90_ns,t_p99_ns,t_p999_ns,t_max_ns\n"));
    CHECK(strstr(csv, "\ndirect,3,2,1,1,2,3,3,3,3\n") != NULL);
    free(csv);

    /* The main table: exactly one .csv other than -fit.csv. */
    DIR *d = opendir(set_dir(out, "frames"));
    REQUIRE(d != NULL);
    struct dirent *e;
    csv = NULL;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n > 4 && !strcmp(e->d_name + n - 4, ".csv") && !strstr(e->d_name, "-fit.csv")) {
            snprintf(path, sizeof path, "%s/%s", set_dir(out, "frames"), e->d_name);
            csv = slurp(path);
        }
    }
    closedir(d);
    REQUIRE(csv != NULL);
    CHECK_EQ(count_lines(csv), 4);
    CHECK(starts(csv, "block,name,rate,opt\n"));
    CHECK(strstr(csv, "\n4096,plain,0,7\n") != NULL);
    CHECK(strstr(csv, "\n8192,\"with,comma\",1.5,\n") != NULL); /* quoted, empty opt */
    CHECK(strstr(csv, "\n16384,plain,,7\n") != NULL);            /* NaN -> empty */
    free(csv);

    char *json = find_file(set_dir(out, "frames"), ".json", path, sizeof path) ? slurp(path) : NULL;
    REQUIRE(json != NULL);
    json_t *doc = json_parse(json), *meta = json_object_get(doc, "meta");
    REQUIRE(json_is_object(meta));
    CHECK(*str_of(meta, "hostname") && *str_of(meta, "cpu") && *str_of(meta, "kernel"));
    CHECK(*str_of(meta, "loadavg") && json_is_integer(json_object_get(meta, "cores")));
    CHECK(!strcmp(str_of(meta, "gpu"), "Test GPU"));
    CHECK(!strcmp(str_of(meta, "command"), "onigpu bench frames --label 'a \"quoted\" word'"));
    CHECK(!strncmp(str_of(meta, "date"), "20", 2));
    CHECK(!strcmp(str_of(meta, "driver"), "test2"));
    CHECK(num_is(meta, "seconds", 2.5));
    CHECK(*str_of(meta, "git_commit") && *str_of(meta, "git_dirty"));
    /* the keys in the order they were first set */
    const char *order[] = {"hostname", "cpu", "cores", "kernel", "gpu", "loadavg", "command", "date",
                           "git_commit", "git_dirty", "driver", "seconds"};
    void *it = json_object_iter(meta);
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++, it = json_object_iter_next(meta, it))
        if (!it || strcmp(json_object_iter_key(it), order[i]))
            UNIT_FAIL("meta key %zu is %s, want %s", i, it ? json_object_iter_key(it) : "(none)", order[i]);
    const json_t *rows = json_object_get(doc, "results"), *row1 = json_array_get(rows, 1);
    CHECK_EQ(json_array_size(rows), 3);
    CHECK(json_object_size(row1) == 4 && num_is(row1, "block", 8192) && !strcmp(str_of(row1, "name"), "with,comma"));
    CHECK(num_is(row1, "rate", 1.5) && num_is(row1, "opt", NAN));
    CHECK(num_is(json_array_get(rows, 2), "rate", NAN));
    const json_t *fit = json_array_get(json_object_get(json_object_get(doc, "tables"), "fit"), 0);
    CHECK(!strcmp(str_of(fit, "path"), "direct") && num_is(fit, "t_n", 3) && num_is(fit, "t_p50_ns", 2));
    CHECK(json_is_array(json_object_get(doc, "plots")) && json_array_size(json_object_get(doc, "plots")) == 0);
    json_decref(doc);
    free(json);

    rm_dir(dir);
}

/* A result set goes to <dir>/<bench>/, <bench> its name up to the first '-':
 * every file of it, and only there. */
TEST(report_set_goes_to_its_benchmark_folder)
{
    char dir[] = "/tmp/onigpu-bench-XXXXXX";
    REQUIRE(mkdtemp(dir));
    int err = 0;
    struct results *r = results_open(dir, "run-cpu", 0, NULL, NULL, &err);
    REQUIRE(r != NULL);
    const char *p = results_path(r, ".csv");
    char want[600];
    snprintf(want, sizeof want, "%s/run/run-cpu-2", dir); /* then the stamp: 20YYMMDD-HHMMSS */
    CHECK(p && !strncmp(p, want, strlen(want)) && strlen(p) == strlen(dir) + strlen("/run/run-cpu-YYYYMMDD-HHMMSS.csv"));
    results_cell_int(r, "a", 1);
    CHECK_RC(results_row(r, NULL), ONI_ESUCCESS);
    results_cell_int(r, "b", 2);
    CHECK_RC(results_row(r, "lat"), ONI_ESUCCESS);
    CHECK_RC(results_close(r), ONI_ESUCCESS);
    CHECK(unit_sh("cd '%s' && test \"$(ls)\" = run && ls run | grep -c '^run-cpu-[0-9]\\{8\\}-[0-9]\\{6\\}"
                  "\\(\\.csv\\|-lat\\.csv\\|\\.json\\)$' | grep -qx 3 && test $(ls run | wc -l) = 3", dir) == 0);
    /* a name without '-' is its own folder */
    r = results_open(dir, "floor", 0, NULL, NULL, &err);
    REQUIRE(r != NULL);
    p = results_path(r, ".json");
    snprintf(want, sizeof want, "%s/floor/floor-", dir);
    CHECK(p && !strncmp(p, want, strlen(want)));
    CHECK_RC(results_close(r), ONI_ESUCCESS);
    rm_dir(dir);
}

/* meta git_commit/git_dirty of a result set opened in directory cwd. */
static void git_meta(const char *cwd, char *commit, char *dirty, size_t len)
{
    char here[4096], out[600];
    commit[0] = dirty[0] = 0;
    if (!getcwd(here, sizeof here) || chdir(cwd))
        return;
    snprintf(out, sizeof out, "%s/out", cwd);
    if (mkdir(out, 0777) != 0)
        return;
    int err = 0;
    struct results *r = results_open(out, "g", 0, NULL, NULL, &err);
    const char *json = r ? results_path(r, ".json") : NULL;
    char path[700];
    snprintf(path, sizeof path, "%s", json ? json : "");
    results_close(r);
    if (chdir(here))
        return;
    json_t *v = json_load_file(path, 0, NULL), *m = json_object_get(v, "meta");
    snprintf(commit, len, "%s", str_of(m, "git_commit"));
    snprintf(dirty, len, "%s", str_of(m, "git_dirty"));
    json_decref(v);
    unit_sh("rm -rf '%s'", out);
}

/* The commit is git's own answer (rev-parse HEAD), dirty when a tracked
 * file changed, and "unknown" outside a checkout (or without git). */
TEST(report_git_commit_from_git)
{
    char dir[] = "/tmp/onigpu-git-XXXXXX", commit[100], dirty[100], want[100] = "";
    REQUIRE(mkdtemp(dir));
    git_meta(dir, commit, dirty, sizeof commit);
    CHECK(!strcmp(commit, "unknown") && !strcmp(dirty, "unknown"));
    if (unit_sh("command -v git >/dev/null") != 0) {
        rm_dir(dir);
        SKIP("git not installed: only the unknown case checked");
    }
    REQUIRE(unit_sh("cd '%s' && git init -q && echo a > f && git add f && git -c user.name=t -c user.email=t@t "
                    "commit -qm one && git rev-parse HEAD > head", dir) == 0);
    char head[600];
    snprintf(head, sizeof head, "%s/head", dir);
    FILE *f = fopen(head, "r");
    REQUIRE(f && fgets(want, sizeof want, f));
    fclose(f);
    want[strcspn(want, "\n")] = 0;
    git_meta(dir, commit, dirty, sizeof commit);
    CHECK(strlen(want) >= 40 && !strcmp(commit, want));
    CHECK(!strcmp(dirty, "no")); /* an untracked file (head) does not count */
    REQUIRE(unit_sh("echo b >> '%s/f'", dir) == 0);
    git_meta(dir, commit, dirty, sizeof commit);
    CHECK(!strcmp(commit, want) && !strcmp(dirty, "yes"));
    rm_dir(dir);
}

TEST(report_columns_grow_and_errors_keep_rows)
{
    char dir[] = "/tmp/onigpu-bench-XXXXXX";
    REQUIRE(mkdtemp(dir));
    int err = 0;
    struct results *r = results_open(dir, "t", 0, NULL, NULL, &err);
    REQUIRE(r != NULL);
    results_cell_int(r, "a", 1);
    CHECK_RC(results_row(r, NULL), ONI_ESUCCESS);
    results_cell_int(r, "a", 2);
    results_cell_int(r, "b", 3); /* a column the first row did not have */
    CHECK_RC(results_row(r, NULL), ONI_ESUCCESS);
    results_cell_int(r, "b", 4);
    CHECK_RC(results_row(r, NULL), ONI_ESUCCESS);
    CHECK_RC(results_row(r, NULL), ONI_EINVALARG); /* an empty row */
    results_cell_int(r, "a", 5);
    CHECK_RC(results_row(r, NULL), ONI_EINVALARG); /* sticky, but the row is kept */
    char col[16];
    for (int i = 0; i < 140; i++) { /* more columns than a table may have (128) */
        snprintf(col, sizeof col, "c%d", i);
        results_cell_int(r, col, i);
    }
    CHECK_RC(results_row(r, "wide"), ONI_EINVALARG);
    CHECK_RC(results_close(r), ONI_EINVALARG);

    char path[512];
    /* The main CSV is the JSON's name with .csv (a -wide.csv exists too). */
    char *json = find_file(set_dir(dir, "t"), ".json", path, sizeof path) ? slurp(path) : NULL;
    REQUIRE(json != NULL);
    strcpy(path + strlen(path) - 5, ".csv");
    char *csv = slurp(path);
    REQUIRE(csv != NULL);
    CHECK(!strcmp(csv, "a,b\n1,\n2,3\n,4\n5,\n"));
    free(csv);
    json_t *doc = json_parse(json);
    const json_t *rows = json_object_get(doc, "results");
    CHECK_EQ(json_array_size(rows), 4);
    CHECK(num_is(json_array_get(rows, 0), "a", 1) && num_is(json_array_get(rows, 0), "b", NAN));
    CHECK(num_is(json_array_get(rows, 2), "a", NAN) && num_is(json_array_get(rows, 2), "b", 4));
    /* The too-wide row kept its first 128 cells. */
    const json_t *wide = json_array_get(json_object_get(json_object_get(doc, "tables"), "wide"), 0);
    CHECK(json_object_size(wide) == 128 && num_is(wide, "c127", 127) && !json_object_get(wide, "c128"));
    CHECK(!json_object_get(json_object_get(doc, "meta"), "gpu")); /* not given */
    json_decref(doc);
    free(json);
    rm_dir(dir);
}

TEST(report_open_errors)
{
    int err = 0;
    CHECK(results_open(NULL, "x", 0, NULL, NULL, &err) == NULL);
    CHECK_EQ(err, ONI_EINVALARG);
    CHECK(results_open("/tmp", "a/b", 0, NULL, NULL, &err) == NULL);
    CHECK_EQ(err, ONI_EINVALARG);
    CHECK(results_open("/tmp", "x", 1, NULL, NULL, &err) == NULL);
    CHECK_EQ(err, ONI_EINVALARG);
    /* a set's folder is its name up to the first '-': there must be one, and no "." or ".." */
    CHECK(results_open("/tmp", "-x", 0, NULL, NULL, &err) == NULL);
    CHECK_EQ(err, ONI_EINVALARG);
    CHECK(results_open("/tmp", "..-x", 0, NULL, NULL, &err) == NULL);
    CHECK_EQ(err, ONI_EINVALARG);
    /* A directory below a regular file cannot be made. */
    char file[] = "/tmp/onigpu-bench-file-XXXXXX";
    int fd = mkstemp(file);
    REQUIRE(fd >= 0);
    close(fd);
    char sub[300];
    snprintf(sub, sizeof sub, "%s/results", file);
    CHECK(results_open(sub, "x", 0, NULL, NULL, &err) == NULL);
    CHECK_EQ(err, ONI_EPATHINVALID);
    unlink(file);
    /* dir itself must exist: the CLI makes --out, the report only its set's folder */
    char dir[] = "/tmp/onigpu-bench-XXXXXX", missing[300];
    REQUIRE(mkdtemp(dir));
    snprintf(missing, sizeof missing, "%s/not-made", dir);
    CHECK(results_open(missing, "x", 0, NULL, NULL, &err) == NULL);
    CHECK_EQ(err, ONI_EPATHINVALID);
    CHECK(access(missing, F_OK) != 0);
    rmdir(dir);
    CHECK_RC(results_close(NULL), ONI_ESUCCESS);
    CHECK_RC(results_row(NULL, NULL), ONI_EINVALARG);
    CHECK_RC(results_meta(NULL, "k", "v"), ONI_EINVALARG);
}

/* A result set in a new directory: its command line argv, one results row
 * filled by fill; the JSON read back (NULL after a failed check), the main
 * CSV's text in *csv (free it). The directory is removed. */
static json_t *write_and_read(int argc, char **argv, void (*fill)(struct results *), char **csv)
{
    char dir[] = "/tmp/onigpu-bench-XXXXXX", path[512];
    *csv = NULL;
    if (!mkdtemp(dir))
        return NULL;
    int e = 0;
    struct results *r = results_open(dir, "t", argc, argv, NULL, &e);
    json_t *v = NULL;
    if (r) {
        fill(r);
        CHECK_RC(results_row(r, NULL), ONI_ESUCCESS);
        CHECK_RC(results_close(r), ONI_ESUCCESS);
    }
    json_error_t je;
    if (find_file(set_dir(dir, "t"), ".json", path, sizeof path) && !(v = json_load_file(path, 0, &je)))
        UNIT_FAIL("%s is not valid JSON: %s", path, je.text);
    if (find_file(set_dir(dir, "t"), ".csv", path, sizeof path))
        *csv = slurp(path);
    rm_dir(dir);
    return v;
}

/* The value of column col in row 0 of the results. */
static const json_t *cell(const json_t *v, const char *col)
{
    return json_object_get(json_array_get(json_object_get(v, "results"), 0), col);
}

static char long_str[3001];

static void fill_long(struct results *r)
{
    /* "\xc3\xa9" (e acute) across the old 1023-byte cut */
    memset(long_str, 'x', sizeof long_str - 1);
    memcpy(long_str + 1022, "\xc3\xa9", 2);
    results_cell_str(r, "s", long_str);
}

/* Found by a review: a string cell went through a 1024-byte buffer, so a
 * longer one was cut short in the CSV and the JSON without a word, and the
 * cut could split a UTF-8 character (the JSON was then no UTF-8). */
TEST(report_long_strings_kept_whole)
{
    char *csv;
    json_t *v = write_and_read(0, NULL, fill_long, &csv);
    REQUIRE(v && csv);
    CHECK(!strcmp(json_string_value(cell(v, "s")) ?: "", long_str));
    size_t n = strlen(long_str);
    CHECK(!strncmp(csv, "s\n", 2) && !strncmp(csv + 2, long_str, n) && !strcmp(csv + 2 + n, "\n"));
    json_decref(v);
    free(csv);
}

static const double exact[] = {12345678901.0, 0.1, 1.0 / 3, 1e-300, 4.0e15 + 1, -2.5, 123456789.123456789};

static void fill_numbers(struct results *r)
{
    char col[8];
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
        snprintf(col, sizeof col, "n%zu", i);
        results_cell_num(r, col, exact[i]);
    }
    results_meta_num(r, "m", exact[0]);
}

/* Found by a review: numbers were written with 10 significant digits, so a
 * total of 12345678901 ns came back as 12345678900 (and 1/3 as 0.3333333333);
 * each is now written with the fewest digits that read back exactly. */
TEST(report_numbers_read_back_exactly)
{
    char *csv;
    json_t *v = write_and_read(0, NULL, fill_numbers, &csv);
    REQUIRE(v && csv);
    char col[8];
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
        snprintf(col, sizeof col, "n%zu", i);
        const json_t *n = cell(v, col);
        if (!json_is_number(n) || json_number_value(n) != exact[i])
            UNIT_FAIL("%s: %.17g came back as %.17g", col, exact[i], json_is_number(n) ? json_number_value(n) : NAN);
    }
    const json_t *m = json_object_get(json_object_get(v, "meta"), "m");
    CHECK(json_is_number(m) && json_number_value(m) == exact[0]);
    /* the CSV's text too, and short where short is exact */
    const char *row = strchr(csv, '\n');
    REQUIRE(row);
    char *end;
    CHECK(strtod(row + 1, &end) == exact[0] && *end == ',');
    CHECK(!strncmp(end, ",0.1,", 5));
    json_decref(v);
    free(csv);
}

static void fill_bytes(struct results *r)
{
    results_cell_str(r, "s", "a\xff\xc3 \xc3\xa9\xf0\x9f\x98\x80 \xed\xa0\x80");
}

/* Found by a review: a string's bytes went to the JSON as they were, so a
 * command line with a Latin-1 file name (or any byte that is no UTF-8) made
 * a file that is not JSON (RFC 8259: UTF-8), and advise could not read it.
 * Each byte of no well-formed UTF-8 becomes U+FFFD; UTF-8 stays as it is. */
TEST(report_json_is_utf8_whatever_the_bytes)
{
    char *argv[] = {"onigpu", "run", "--out", "caf\xe9"};
    char *csv;
    json_t *v = write_and_read(4, argv, fill_bytes, &csv);
    REQUIRE(v && csv);
    const char *cmd = json_string_value(json_object_get(json_object_get(v, "meta"), "command"));
    CHECK(cmd && !strcmp(cmd, "onigpu run --out 'caf\xef\xbf\xbd'"));
    const char *s = json_string_value(cell(v, "s"));
    CHECK(s && !strcmp(s, "a\xef\xbf\xbd\xef\xbf\xbd \xc3\xa9\xf0\x9f\x98\x80 \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"));
    CHECK(strstr(csv, "a\xff\xc3 ") != NULL); /* the CSV keeps the bytes */
    json_decref(v);
    free(csv);
}

static void fill_one(struct results *r)
{
    results_cell_int(r, "a", 1);
}

/* Found by a review: the command was the arguments joined with spaces, so
 * where one argument ended was lost ("--out my dir" read as two words) and
 * the recorded command did not run again as given. An argument with
 * anything but letters, digits and _@%+=:,./- is now shell-quoted. */
TEST(report_command_keeps_argument_boundaries)
{
    char *argv[] = {"onigpu", "run", "--seconds=0.5", "--out", "my dir", "--label", "it's", "", "a\"b\\c"};
    char *csv;
    json_t *v = write_and_read(9, argv, fill_one, &csv);
    REQUIRE(v);
    const char *cmd = json_string_value(json_object_get(json_object_get(v, "meta"), "command"));
    REQUIRE(cmd);
    if (strcmp(cmd, "onigpu run --seconds=0.5 --out 'my dir' --label 'it'\\''s' '' 'a\"b\\c'"))
        UNIT_FAIL("command recorded as <%s>", cmd);
    json_decref(v);
    free(csv);
}

/* Every control byte is escaped in the JSON (0x1f, the last, too), a CR
 * makes a CSV field quoted, a quote in it is doubled, and several extra tables are a valid object. */
TEST(report_control_bytes_and_several_tables)
{
    char dir[] = "/tmp/onigpu-bench-XXXXXX", path[512];
    REQUIRE(mkdtemp(dir));
    int e = 0;
    struct results *r = results_open(dir, "t", 0, NULL, NULL, &e);
    REQUIRE(r);
    results_cell_str(r, "s", "a\x1f" "b");
    results_cell_str(r, "cr", "c\rd");
    results_cell_str(r, "q", "say \"hi\"");
    CHECK_RC(results_row(r, NULL), ONI_ESUCCESS);
    const char *names[] = {"one", "two", "three"};
    for (int i = 0; i < 3; i++) {
        results_cell_int(r, "k", i);
        CHECK_RC(results_row(r, names[i]), ONI_ESUCCESS);
    }
    CHECK_RC(results_close(r), ONI_ESUCCESS);
    REQUIRE(find_file(set_dir(dir, "t"), ".json", path, sizeof path));
    char *text = slurp(path);
    REQUIRE(text);
    CHECK(strcasestr(text, "a\\u001fb") != NULL); /* escaped in the text */
    json_t *v = json_parse(text);
    free(text);
    const json_t *row = json_array_get(json_object_get(v, "results"), 0);
    CHECK(!strcmp(str_of(row, "s"), "a\x1f" "b"));
    CHECK(!strcmp(str_of(row, "cr"), "c\rd"));
    const json_t *tables = json_object_get(v, "tables");
    CHECK(json_object_size(tables) == 3);
    for (int i = 0; i < 3; i++) {
        CHECK(num_is(json_array_get(json_object_get(tables, names[i]), 0), "k", i));
    }
    json_decref(v);
    /* the main CSV: the one that is no -<table>.csv */
    strcpy(path + strlen(path) - 5, ".csv");
    char *csv = slurp(path);
    REQUIRE(csv);
    CHECK(!strcmp(csv, "s,cr,q\na\x1f" "b,\"c\rd\",\"say \"\"hi\"\"\"\n")); /* quotes doubled */
    free(csv);
    rm_dir(dir);
}
