/* report.c - result sets: tables of rows written as CSV and JSON with the
 * machine's metadata, and an aligned text table for stdout. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <jansson.h>
#include "results.h"
#include "sys.h"

enum { CELL_EMPTY, CELL_STR, CELL_INT, CELL_NUM };
#define MAX_COLS 128

struct cell {
    int type;
    char *s;
    long long i;
    double d;
};

struct table {
    char *name;
    char *cols[MAX_COLS];
    size_t ncols, nrows, cap;
    struct cell *cells; /* nrows * ncols */
};

struct results {
    char *base;        /* "<dir>/<name>-<stamp>" */
    char date[32];     /* ISO 8601 UTC */
    json_t *meta;      /* object: key -> string or number, in order of first setting */
    char *row_cols[MAX_COLS];
    struct cell row[MAX_COLS];
    size_t nrow;
    struct table *tables;
    size_t ntables;
    char **plots;
    size_t nplots;
    int err;
    char *path;        /* last results_path result */
};

static void set_err(struct results *r, int err)
{
    if (!r->err)
        r->err = err;
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* printf into a new heap string, or NULL. */
static char *fmt_str(const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s)
        vsnprintf(s, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return s;
}

static void cell_clear(struct cell *c)
{
    if (c->type == CELL_STR)
        free(c->s);
    memset(c, 0, sizeof *c);
}

/* ---- machine metadata ---------------------------------------------------- */

/* s as a JSON string. jansson takes UTF-8 only: a byte that begins no
 * well-formed UTF-8 sequence (a Latin-1 file name on a command line) becomes
 * U+FFFD, and UTF-8 stays as it is. jansson itself decides what is
 * well-formed: the length of a character is the fewest bytes it accepts. */
static json_t *js_text(const char *s)
{
    json_t *j = s ? json_string(s) : NULL;
    if (j || !s)
        return j;
    size_t n = strlen(s);
    char *t = malloc(3 * n + 1), *o = t;
    if (!t)
        return NULL;
    for (size_t i = 0; i < n;) {
        size_t k = 1;
        if ((unsigned char)s[i] >= 0x80) {
            for (k = 2; k <= 4 && i + k <= n; k++) {
                json_t *c = json_stringn(s + i, k);
                json_decref(c);
                if (c)
                    break;
            }
            if (k > 4 || i + k > n) {
                memcpy(o, "\xef\xbf\xbd", 3);
                o += 3;
                i++;
                continue;
            }
        }
        memcpy(o, s + i, k);
        o += k;
        i += k;
    }
    *o = 0;
    j = json_string(t);
    free(t);
    return j;
}

/* A JSON number for v: an integer when v is whole (so 3.0 reads "3"), null
 * when it is not finite. */
static json_t *js_num(double v)
{
    if (!isfinite(v))
        return json_null();
    if (v == floor(v) && fabs(v) <= 9007199254740992.0) /* 2^53: every whole double below is exact */
        return json_integer((json_int_t)v);
    return json_real(v);
}

/* obj[key] = v (v's reference taken, also on failure). 0 or -1. */
static int js_put(json_t *obj, const char *key, json_t *v)
{
    json_t *k = js_text(key);
    if (!k) {
        json_decref(v);
        return -1;
    }
    int rc = json_object_set_new(obj, json_string_value(k), v); /* takes v, NULL too */
    json_decref(k);
    return rc;
}

static int add_meta(struct results *r, const char *key, json_t *v)
{
    if (!r || !key) {
        json_decref(v);
        return ONI_EINVALARG;
    }
    return js_put(r->meta, key, v) ? ONI_EBADALLOC : ONI_ESUCCESS;
}

int results_meta(struct results *r, const char *key, const char *value)
{
    if (!value)
        return ONI_EINVALARG;
    return add_meta(r, key, js_text(value));
}

/* The shortest %g text of finite v that reads back as v (15 to 17 digits). */
static void num_text(char *buf, size_t len, double v)
{
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, len, "%.*g", digits, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

int results_meta_num(struct results *r, const char *key, double value)
{
    return add_meta(r, key, js_num(value));
}

static void trim(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = 0;
}

/* CPU model from /proc/cpuinfo ("model name", or "Model"/"cpu model" elsewhere). */
static void cpu_model(char *out, size_t len)
{
    snprintf(out, len, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) && strncmp(line, "Model", 5) &&
            strncmp(line, "cpu model", 9))
            continue;
        char *colon = strchr(line, ':');
        if (!colon)
            continue;
        colon++;
        while (*colon == ' ' || *colon == '\t')
            colon++;
        trim(colon);
        snprintf(out, len, "%s", colon);
        break;
    }
    fclose(f);
}

/* Read the first line of a file into out; 0 on success. */
static int read_line(const char *path, char *out, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int ok = fgets(out, (int)len, f) != NULL;
    fclose(f);
    if (!ok)
        return -1;
    trim(out);
    return 0;
}

/* HEAD's commit of the git checkout holding the working directory, and
 * whether its tracked files differ from it ("yes"/"no"), asked of git
 * itself; "unknown" where git or a checkout is not there. */
static void git_state(char *commit, size_t clen, char *dirty, size_t dlen)
{
    char *const head[] = {"git", "rev-parse", "--verify", "HEAD", NULL};
    /* no optional locks: a status taken beside the user's own git never writes the index */
    char *const status[] = {"git", "--no-optional-locks", "status", "--porcelain", "--untracked-files=no", NULL};
    char out[256];
    snprintf(commit, clen, "unknown");
    snprintf(dirty, dlen, "unknown");
    if (results_exec(NULL, head, 1, out, sizeof out) != 0)
        return;
    trim(out);
    if (!*out || strchr(out, '\n'))
        return;
    snprintf(commit, clen, "%s", out);
    if (results_exec(NULL, status, 1, out, sizeof out) == 0)
        snprintf(dirty, dlen, "%s", *out ? "yes" : "no");
}

/* Whether arg reads as one shell word as it is. */
static int plain_word(const char *arg)
{
    if (!*arg)
        return 0;
    for (; *arg; arg++)
        if (!isalnum((unsigned char)*arg) && !strchr("_@%+=:,./-", *arg))
            return 0;
    return 1;
}

/* Append arg to cmd as one shell word: as it is, or in single quotes (a '
 * inside as '\''), so that the recorded command runs again as given. */
static void append_word(char *cmd, const char *arg)
{
    char *o = cmd + strlen(cmd);
    if (plain_word(arg)) {
        strcpy(o, arg);
        return;
    }
    *o++ = '\'';
    for (; *arg; arg++) {
        if (*arg == '\'') {
            memcpy(o, "'\\''", 4);
            o += 4;
        } else {
            *o++ = *arg;
        }
    }
    *o++ = '\'';
    *o = 0;
}

static int collect_meta(struct results *r, int argc, char **argv, const char *gpu)
{
    char buf[512];
    struct utsname u;
    int rc = 0;

    if (gethostname(buf, sizeof buf) != 0)
        snprintf(buf, sizeof buf, "unknown");
    buf[sizeof buf - 1] = 0;
    rc |= results_meta(r, "hostname", buf);
    cpu_model(buf, sizeof buf);
    rc |= results_meta(r, "cpu", buf);
    rc |= results_meta_num(r, "cores", (double)sysconf(_SC_NPROCESSORS_ONLN));
    if (uname(&u) == 0) {
        snprintf(buf, sizeof buf, "%s %s %s", u.sysname, u.release, u.machine);
        rc |= results_meta(r, "kernel", buf);
    }
    if (gpu)
        rc |= results_meta(r, "gpu", gpu);
    /* On a shared machine the load at the start explains a noisy run. */
    if (read_line("/proc/loadavg", buf, sizeof buf) == 0)
        rc |= results_meta(r, "loadavg", buf);

    size_t need = 1;
    for (int i = 0; i < argc; i++)
        need += 4 * strlen(argv[i]) + 3; /* every byte a quote ('\'') + the quotes + a space */
    char *cmd = calloc(need, 1);
    if (!cmd)
        return ONI_EBADALLOC;
    for (int i = 0; i < argc; i++) {
        if (i)
            strcat(cmd, " ");
        append_word(cmd, argv[i]);
    }
    rc |= results_meta(r, "command", cmd);
    free(cmd);
    rc |= results_meta(r, "date", r->date);
    /* A copied tree (a GPU machine that got the files but an old .git) names
     * its commit through ONIGPU_GIT_COMMIT; git is asked otherwise. */
    const char *env = getenv("ONIGPU_GIT_COMMIT");
    char dirty[16];
    if (env && *env) {
        snprintf(buf, sizeof buf, "%s", env);
        snprintf(dirty, sizeof dirty, "unknown");
    } else {
        git_state(buf, sizeof buf, dirty, sizeof dirty);
    }
    rc |= results_meta(r, "git_commit", buf);
    rc |= results_meta(r, "git_dirty", dirty);
    return rc ? ONI_EBADALLOC : ONI_ESUCCESS;
}

struct results *results_open(const char *dir, const char *name, int argc,
                                       char **argv, const char *gpu, int *err)
{
    int e = ONI_EINVALARG;
    struct results *r = NULL;
    /* the set's folder: its name up to the first '-', which must be a file name */
    if (!dir || !*dir || !name || !*name || strchr(name, '/') || *name == '-' || *name == '.' || argc < 0 ||
        (argc && !argv))
        goto fail;
    e = ONI_EBADALLOC;
    char *folder = fmt_str("%s/%.*s", dir, (int)strcspn(name, "-"), name);
    if (!folder)
        goto fail;
    /* dir is the caller's (the CLI's --out, made by cli_arg_outdir); the
     * set's folder is ours */
    struct stat st;
    if (mkdir(folder, 0777) != 0 && errno != EEXIST)
        e = ONI_EPATHINVALID;
    else if (stat(folder, &st) != 0 || !S_ISDIR(st.st_mode))
        e = ONI_EPATHINVALID;
    else
        e = ONI_ESUCCESS;
    if (!e && !(r = calloc(1, sizeof *r)))
        e = ONI_EBADALLOC;
    if (e || !(r->meta = json_object())) {
        free(folder);
        e = e ? e : ONI_EBADALLOC;
        goto fail;
    }
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    strftime(r->date, sizeof r->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    r->base = fmt_str("%s/%s-%s", folder, name, stamp);
    free(folder);
    if (!r->base)
        goto fail;
    e = collect_meta(r, argc, argv, gpu);
    if (e)
        goto fail;
    return r;
fail:
    if (r) {
        free(r->base);
        r->base = NULL; /* nothing to write */
        results_close(r);
    }
    if (err)
        *err = e;
    return NULL;
}

/* ---- rows ------------------------------------------------------------------ */

/* The pending cell for column col (created if new), or NULL on error. */
static struct cell *row_cell(struct results *r, const char *col)
{
    if (!r)
        return NULL;
    if (!col || !*col) {
        set_err(r, ONI_EINVALARG);
        return NULL;
    }
    for (size_t i = 0; i < r->nrow; i++) {
        if (!strcmp(r->row_cols[i], col)) {
            cell_clear(&r->row[i]);
            return &r->row[i];
        }
    }
    if (r->nrow == MAX_COLS) {
        set_err(r, ONI_EINVALARG);
        return NULL;
    }
    char *name = dup_str(col);
    if (!name) {
        set_err(r, ONI_EBADALLOC);
        return NULL;
    }
    r->row_cols[r->nrow] = name;
    memset(&r->row[r->nrow], 0, sizeof r->row[0]);
    return &r->row[r->nrow++];
}

void results_cell_str(struct results *r, const char *col, const char *value)
{
    struct cell *c = row_cell(r, col);
    if (!c)
        return;
    if (!value)
        return; /* stays empty */
    c->s = dup_str(value);
    if (!c->s) {
        set_err(r, ONI_EBADALLOC);
        return;
    }
    c->type = CELL_STR;
}

void results_cell_int(struct results *r, const char *col, long long value)
{
    struct cell *c = row_cell(r, col);
    if (c) {
        c->type = CELL_INT;
        c->i = value;
    }
}

void results_cell_num(struct results *r, const char *col, double value)
{
    struct cell *c = row_cell(r, col);
    if (c && isfinite(value)) {
        c->type = CELL_NUM;
        c->d = value;
    }
}

static void clear_row(struct results *r)
{
    for (size_t i = 0; i < r->nrow; i++) {
        free(r->row_cols[i]);
        cell_clear(&r->row[i]);
    }
    r->nrow = 0;
}

static struct table *find_table(const struct results *r, const char *name)
{
    for (size_t i = 0; i < r->ntables; i++)
        if (!strcmp(r->tables[i].name, name))
            return &r->tables[i];
    return NULL;
}

/* A new, empty table named name (columns come with its rows). */
static struct table *new_table(struct results *r, const char *name)
{
    char *n = dup_str(name);
    struct table *t = n ? realloc(r->tables, (r->ntables + 1) * sizeof *t) : NULL;
    if (!t) {
        free(n);
        return NULL;
    }
    r->tables = t;
    t = &r->tables[r->ntables++];
    memset(t, 0, sizeof *t);
    t->name = n;
    return t;
}

/* Append a column to t; rows already there get an empty cell in it. */
static int add_column(struct table *t, const char *name)
{
    if (t->ncols == MAX_COLS)
        return ONI_EINVALARG;
    char *col = dup_str(name);
    if (!col)
        return ONI_EBADALLOC;
    if (t->cap) {
        struct cell *cells = calloc(t->cap * (t->ncols + 1), sizeof *cells);
        if (!cells) {
            free(col);
            return ONI_EBADALLOC;
        }
        for (size_t i = 0; i < t->nrows; i++)
            memcpy(&cells[i * (t->ncols + 1)], &t->cells[i * t->ncols], t->ncols * sizeof *cells);
        free(t->cells);
        t->cells = cells;
    }
    t->cols[t->ncols++] = col;
    return ONI_ESUCCESS;
}

int results_row(struct results *r, const char *table)
{
    if (!r)
        return ONI_EINVALARG;
    if (!table)
        table = "results";
    int rc = ONI_ESUCCESS;
    struct table *t = find_table(r, table);
    if (!r->nrow || (table[0] == 0) || strchr(table, '/')) {
        rc = ONI_EINVALARG; /* an empty row or a table name that is no file name */
        goto out;
    }
    size_t extra = 0; /* columns this row adds: check before changing anything */
    for (size_t i = 0; i < r->nrow; i++) {
        size_t c = 0;
        while (t && c < t->ncols && strcmp(t->cols[c], r->row_cols[i]))
            c++;
        extra += !t || c == t->ncols;
    }
    if ((t ? t->ncols : 0) + extra > MAX_COLS) {
        rc = ONI_EINVALARG;
        goto out;
    }
    if (!t && !(t = new_table(r, table))) {
        rc = ONI_EBADALLOC;
        goto out;
    }
    size_t map[MAX_COLS];
    for (size_t i = 0; i < r->nrow; i++) {
        size_t c = 0;
        while (c < t->ncols && strcmp(t->cols[c], r->row_cols[i]))
            c++;
        if (c == t->ncols && (rc = add_column(t, r->row_cols[i])))
            goto out;
        map[i] = c;
    }
    if (t->nrows == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 16;
        struct cell *cells = realloc(t->cells, cap * t->ncols * sizeof *cells);
        if (!cells) {
            rc = ONI_EBADALLOC;
            goto out;
        }
        t->cells = cells;
        t->cap = cap;
    }
    struct cell *row = &t->cells[t->nrows * t->ncols];
    memset(row, 0, t->ncols * sizeof *row);
    for (size_t i = 0; i < r->nrow; i++) {
        row[map[i]] = r->row[i]; /* moves ownership of the string */
        memset(&r->row[i], 0, sizeof r->row[i]);
    }
    t->nrows++;
out:
    clear_row(r);
    set_err(r, rc);
    return rc ? rc : r->err;
}

/* ---- output ---------------------------------------------------------------- */

/* Text of a cell for the CSV (exact: numbers read back as they were) or the
 * text table (numbers to 6 digits); empty for an empty cell. */
static void cell_text(const struct cell *c, char *buf, size_t len, int exact)
{
    switch (c->type) {
    case CELL_STR: snprintf(buf, len, "%s", c->s); break;
    case CELL_INT: snprintf(buf, len, "%lld", c->i); break;
    case CELL_NUM:
        if (exact)
            num_text(buf, len, c->d);
        else
            snprintf(buf, len, "%.6g", c->d);
        break;
    default: buf[0] = 0; break;
    }
}

static void csv_field(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static int write_csv(const struct results *r, const struct table *t)
{
    char *path = strcmp(t->name, "results") ? fmt_str("%s-%s.csv", r->base, t->name)
                                            : fmt_str("%s.csv", r->base);
    if (!path)
        return ONI_EBADALLOC;
    FILE *f = fopen(path, "w");
    free(path);
    if (!f)
        return ONI_EPATHINVALID;
    char buf[1024];
    for (size_t c = 0; c < t->ncols; c++) {
        if (c)
            fputc(',', f);
        csv_field(f, t->cols[c]);
    }
    fputc('\n', f);
    for (size_t i = 0; i < t->nrows; i++) {
        for (size_t c = 0; c < t->ncols; c++) {
            if (c)
                fputc(',', f);
            const struct cell *cl = &t->cells[i * t->ncols + c];
            cell_text(cl, buf, sizeof buf, 1);
            csv_field(f, cl->type == CELL_STR ? cl->s : buf); /* a string whole, however long */
        }
        fputc('\n', f);
    }
    return results_close_written(f);
}

/* The rows of t as a JSON array of objects, or NULL when memory ran out. */
static json_t *js_rows(const struct table *t)
{
    json_t *rows = json_array();
    for (size_t i = 0; rows && i < t->nrows; i++) {
        json_t *row = json_object();
        int bad = json_array_append_new(rows, row);
        for (size_t c = 0; !bad && c < t->ncols; c++) {
            const struct cell *cl = &t->cells[i * t->ncols + c];
            json_t *v = cl->type == CELL_STR   ? js_text(cl->s)
                        : cl->type == CELL_INT ? json_integer(cl->i)
                        : cl->type == CELL_NUM ? js_num(cl->d)
                                               : json_null();
            bad = js_put(row, t->cols[c], v);
        }
        if (bad) {
            json_decref(rows);
            rows = NULL;
        }
    }
    return rows;
}

/* The JSON document of the result set: meta, results, tables, plots. */
static json_t *js_doc(const struct results *r)
{
    json_t *doc = json_object(), *tables = json_object(), *plots = json_array();
    const struct table *res = find_table(r, "results");
    int bad = js_put(doc, "meta", json_incref(r->meta));
    bad |= js_put(doc, "results", res ? js_rows(res) : json_array());
    bad |= js_put(doc, "tables", json_incref(tables));
    bad |= js_put(doc, "plots", json_incref(plots));
    for (size_t i = 0; !bad && i < r->ntables; i++)
        if (strcmp(r->tables[i].name, "results"))
            bad = js_put(tables, r->tables[i].name, js_rows(&r->tables[i]));
    for (size_t i = 0; !bad && i < r->nplots; i++)
        bad = json_array_append_new(plots, js_text(r->plots[i]));
    json_decref(tables);
    json_decref(plots);
    if (bad) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

static int write_json(const struct results *r)
{
    char *path = fmt_str("%s.json", r->base);
    json_t *doc = path ? js_doc(r) : NULL;
    int rc = ONI_EBADALLOC;
    if (doc) /* 17 digits: every number reads back as the double it was */
        rc = json_dump_file(doc, path, JSON_INDENT(2) | JSON_REAL_PRECISION(17)) ? ONI_EPATHINVALID
                                                                                    : ONI_ESUCCESS;
    json_decref(doc);
    free(path);
    return rc;
}

size_t results_rows(const struct results *r)
{
    size_t n = 0;
    for (size_t i = 0; r && i < r->ntables; i++)
        n += r->tables[i].nrows;
    return n;
}

void results_print(const struct results *r, const char *table, FILE *f)
{
    if (!r || !f)
        return;
    const struct table *t = find_table(r, table ? table : "results");
    if (!t)
        return;
    size_t w[MAX_COLS];
    char buf[256];
    for (size_t c = 0; c < t->ncols; c++) {
        w[c] = strlen(t->cols[c]);
        for (size_t i = 0; i < t->nrows; i++) {
            cell_text(&t->cells[i * t->ncols + c], buf, sizeof buf, 0);
            if (strlen(buf) > w[c])
                w[c] = strlen(buf);
        }
    }
    for (size_t c = 0; c < t->ncols; c++)
        fprintf(f, "%s%*s", c ? "  " : "", (int)w[c], t->cols[c]);
    fputc('\n', f);
    for (size_t i = 0; i < t->nrows; i++) {
        for (size_t c = 0; c < t->ncols; c++) {
            cell_text(&t->cells[i * t->ncols + c], buf, sizeof buf, 0);
            fprintf(f, "%s%*s", c ? "  " : "", (int)w[c], buf);
        }
        fputc('\n', f);
    }
}

const char *results_path(struct results *r, const char *suffix)
{
    if (!r || !suffix)
        return NULL;
    char *p = fmt_str("%s%s", r->base, suffix);
    if (!p) {
        set_err(r, ONI_EBADALLOC);
        return NULL;
    }
    free(r->path);
    r->path = p;
    return p;
}

/* Remember a plot file (by its name within the result directory). */
static int add_plot(struct results *r, const char *path)
{
    const char *slash = strrchr(path, '/');
    char **p = realloc(r->plots, (r->nplots + 1) * sizeof *p);
    if (!p)
        return ONI_EBADALLOC;
    r->plots = p;
    if (!(p[r->nplots] = dup_str(slash ? slash + 1 : path)))
        return ONI_EBADALLOC;
    r->nplots++;
    return ONI_ESUCCESS;
}

/* The PNG of a plot or histogram drawn (rc 0: listed in the JSON) or not
 * (RESULTS_NOT_RENDERED: said, and not an error). */
static int plot_done(struct results *r, const char *path, int rc, const char *why)
{
    if (rc == ONI_ESUCCESS)
        return add_plot(r, path);
    if (rc != RESULTS_NOT_RENDERED)
        return rc;
    size_t n = strlen(path) - 4; /* path ends in ".png" */
    fprintf(stderr, "plot %s not rendered: %s; its script %.*s.gp and data %.*s.dat are written "
                    "(draw it with gnuplot in that directory)\n",
            path, why, (int)n, path, (int)n, path);
    return ONI_ESUCCESS;
}

/* The PNG's path of figure tag, or NULL (a tag that is no file name: *rc). */
static const char *plot_path(struct results *r, const char *tag, int *rc)
{
    *rc = ONI_EINVALARG;
    if (!r || !tag || !*tag || strchr(tag, '/'))
        return NULL;
    char *suffix = fmt_str("-%s.png", tag);
    const char *path = suffix ? results_path(r, suffix) : NULL;
    free(suffix);
    *rc = path ? ONI_ESUCCESS : ONI_EBADALLOC;
    return path;
}

int results_add_plot(struct results *r, const char *tag, const struct results_plot *p)
{
    char why[512] = "";
    int rc;
    const char *path = plot_path(r, tag, &rc);
    if (!path)
        return rc;
    return plot_done(r, path, results_plot_png(path, p, why, sizeof why), why);
}

int results_add_bars(struct results *r, const char *tag, const struct results_bars *b)
{
    char why[512] = "";
    int rc;
    const char *path = plot_path(r, tag, &rc);
    if (!path)
        return rc;
    return plot_done(r, path, results_bars_png(path, b, why, sizeof why), why);
}

void results_discard(struct results *r)
{
    if (!r)
        return;
    char *slash = r->base ? strrchr(r->base, '/') : NULL;
    if (slash) {
        *slash = 0;
        rmdir(r->base); /* fails, and keeps it, when it holds anything */
    }
    free(r->base);
    r->base = NULL; /* nothing to write */
    results_close(r);
}

int results_close(struct results *r)
{
    if (!r)
        return ONI_ESUCCESS;
    /* Rows already committed are written even after a sticky error, so a
     * bad cell late in a long run loses nothing else. */
    int rc = r->err;
    if (r->base) {
        for (size_t i = 0; i < r->ntables; i++) {
            int e = write_csv(r, &r->tables[i]);
            rc = rc ? rc : e;
        }
        int e = write_json(r);
        rc = rc ? rc : e;
    }
    clear_row(r);
    for (size_t i = 0; i < r->ntables; i++) {
        struct table *t = &r->tables[i];
        for (size_t k = 0; k < t->nrows * t->ncols; k++)
            cell_clear(&t->cells[k]);
        for (size_t c = 0; c < t->ncols; c++)
            free(t->cols[c]);
        free(t->cells);
        free(t->name);
    }
    free(r->tables);
    json_decref(r->meta);
    for (size_t i = 0; i < r->nplots; i++)
        free(r->plots[i]);
    free(r->plots);
    free(r->path);
    free(r->base);
    free(r);
    return rc;
}
