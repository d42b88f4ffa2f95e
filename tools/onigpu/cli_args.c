/* cli_args.c - the argument helpers every onigpu command shares (cli.h):
 * numbers, sizes and durations as docs/cli.md defines them, and the one way
 * a bad argument is said. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "cli.h"
#include "common/mkdirs.h"

/* Whether s[0..n) is a number as docs/cli.md allows one in a size: 0x and
 * hex digits, or decimal digits with at most one point. strtod takes more
 * (spaces, a sign, exponents, hex fractions, inf). */
static int plain_number(const char *s, size_t n)
{
    int hex = n > 2 && s[0] == '0' && (s[1] | 0x20) == 'x', points = 0;
    if (!n || !isdigit((unsigned char)s[0]))
        return 0;
    for (size_t i = hex ? 2 : 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!(hex ? isxdigit(c) : isdigit(c) || (c == '.' && ++points == 1)))
            return 0;
    }
    return 1;
}

int cli_parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0 || !plain_number(s, (size_t)(end - s)))
        return -1;
    double mul = 1;
    if (*end) {
        char u = (char)(*end | 0x20);
        const char *rest = end + 1;
        int decimal = !strcmp(rest, "B") && u != 'b'; /* "kB", "MB": powers of 1000 */
        double base = decimal ? 1000.0 : 1024.0;
        if (u == 'k') mul = base;
        else if (u == 'm') mul = base * base;
        else if (u == 'g') mul = base * base * base;
        else if (u == 'b' && !*rest) mul = 1;
        else return -1;
        if (*rest && strcmp(rest, "B") && strcmp(rest, "iB"))
            return -1;
    }
    double x = v * mul + 0.5;
    if (!(x < 18446744073709551616.0)) /* 2^64; also NaN and infinity */
        return -1;
    *out = (uint64_t)x;
    return 0;
}

void cli_opt_split(int argc, char **argv, int *i, char *buf, size_t cap, const char **name, const char **value)
{
    const char *a = argv[*i], *eq = strchr(a, '=');
    if (eq && (size_t)(eq - a) < cap) {
        memcpy(buf, a, (size_t)(eq - a));
        buf[eq - a] = 0;
        *name = buf;
        *value = eq + 1;
        return;
    }
    *name = a;
    /* "--out --link x" lacks the value: it is not "--link" */
    *value = *i + 1 < argc && strncmp(argv[*i + 1], "--", 2) ? argv[++*i] : NULL;
}

/* The list parsers split a copy: argv itself is recorded in the results' meta. */
int cli_parse_sizes(const struct cli_command *cmd, const char *opt, const char *list, uint64_t max, uint64_t mult,
                    uint32_t *v, size_t cap, size_t *n)
{
    char *copy = list ? strdup(list) : NULL;
    size_t k = 0;
    int st = 0;
    for (char *save = NULL, *t = copy ? strtok_r(copy, ",", &save) : NULL; t && !st; t = strtok_r(NULL, ",", &save)) {
        uint64_t x;
        if (k == cap)
            st = cli_bad_value(cmd, opt, list, "a list of at most %zu sizes", cap);
        else if (!(st = cli_arg_size(cmd, opt, t, mult, max, mult, &x)))
            v[k++] = (uint32_t)x;
    }
    free(copy);
    if (!st && !k)
        st = cli_bad_value(cmd, opt, list, "a comma-separated list of sizes (as 4K,64K,1M)");
    if (!st)
        *n = k;
    return st;
}

int cli_parse_u32s(const struct cli_command *cmd, const char *opt, const char *list, uint32_t lo, uint32_t hi,
                   uint32_t *v, size_t cap, size_t *n)
{
    char *copy = list ? strdup(list) : NULL;
    size_t k = 0;
    int ok = copy != NULL;
    for (char *save = NULL, *t = copy ? strtok_r(copy, ",", &save) : NULL; t && ok; t = strtok_r(NULL, ",", &save)) {
        uint32_t x;
        ok = k < cap && cli_parse_u32(t, &x) == 0 && x >= lo && x <= hi;
        if (ok)
            v[k++] = x;
    }
    free(copy);
    if (!ok || !k)
        return cli_bad_value(cmd, opt, list, "a comma-separated list of at most %zu whole numbers from %u to %u", cap,
                             lo, hi);
    *n = k;
    return 0;
}

int cli_parse_decimal(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || end == s || !plain_number(s, (size_t)(end - s)))
        return -1;
    *out = v;
    return 0;
}

int cli_parse_seconds(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0 || !plain_number(s, (size_t)(end - s)))
        return -1; /* "inf", "nan" (a run that never ends), signs, spaces, exponents: cli.md */
    if (!*end || !strcmp(end, "s")) *out = v;
    else if (!strcmp(end, "ms")) *out = v / 1e3;
    else if (!strcmp(end, "us")) *out = v / 1e6;
    else return -1;
    return 0;
}

int cli_parse_u64(const char *s, uint64_t *out)
{
    /* strtoull would skip leading space and take a sign ("-5" is 2^64 - 5) */
    if (!s || *s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    /* strtoull's base 0 would read "010" as octal: only decimal and 0x. */
    if (s[0] == '0' && s[1] && s[1] != 'x' && s[1] != 'X')
        v = strtoull(s, &end, 10);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

int cli_parse_u32(const char *s, uint32_t *out)
{
    uint64_t v;
    if (cli_parse_u64(s, &v) || v > UINT32_MAX)
        return -1;
    *out = (uint32_t)v;
    return 0;
}


int cli_bad_value(const struct cli_command *cmd, const char *opt, const char *value, const char *allowed, ...)
{
    if (value)
        fprintf(stderr, "onigpu %s: %s %s: must be ", cmd->name, opt, *value ? value : "''");
    else
        fprintf(stderr, "onigpu %s: %s needs a value: ", cmd->name, opt);
    va_list ap;
    va_start(ap, allowed);
    vfprintf(stderr, allowed, ap);
    va_end(ap);
    fputc('\n', stderr);
    return cli_usage(cmd);
}

/* Whether the usage line shows name as a flag: "[--verify]". */
static int is_flag(const struct cli_command *cmd, const char *name, size_t n)
{
    char want[72];
    if (n + 3 > sizeof want)
        return 0;
    snprintf(want, sizeof want, "[%.*s]", (int)n, name);
    return strstr(cmd->usage, want) != NULL;
}

int cli_bad_arg(const struct cli_command *cmd, const char *arg)
{
    const char *eq = strchr(arg, '=');
    if (strncmp(arg, "--", 2))
        fprintf(stderr, "onigpu %s: %s: unexpected argument\n", cmd->name, arg);
    else if (eq && is_flag(cmd, arg, (size_t)(eq - arg)))
        fprintf(stderr, "onigpu %s: %s: takes no value\n", cmd->name, arg);
    else
        fprintf(stderr, "onigpu %s: %s: unknown option\n", cmd->name, arg);
    return cli_usage(cmd);
}

/* n bytes as the largest binary unit that divides it: "64 KiB", "1 GiB", "796 B". */
static const char *fmt_size(uint64_t n, char *buf, size_t cap)
{
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (u < 4 && n && n % 1024 == 0) {
        n /= 1024;
        u++;
    }
    snprintf(buf, cap, "%llu %s", (unsigned long long)n, unit[u]);
    return buf;
}

int cli_arg_count(const struct cli_command *cmd, const char *opt, const char *v, uint64_t lo, uint64_t hi,
                  uint64_t *out)
{
    uint64_t x;
    if (v && !cli_parse_u64(v, &x) && x >= lo && x <= hi) {
        *out = x;
        return 0;
    }
    if (hi == UINT64_MAX)
        return cli_bad_value(cmd, opt, v, "a whole number >= %llu (decimal or 0x hex)", (unsigned long long)lo);
    return cli_bad_value(cmd, opt, v, "a whole number from %llu to %llu (decimal or 0x hex)", (unsigned long long)lo,
                         (unsigned long long)hi);
}

int cli_arg_seconds(const struct cli_command *cmd, const char *opt, const char *v, double lo, int lo_open, double hi,
                    double *out)
{
    double x;
    if (v && !cli_parse_seconds(v, &x) && (lo_open ? x > lo : x >= lo) && x <= hi) {
        *out = x;
        return 0;
    }
    char most[48] = "";
    if (isfinite(hi))
        snprintf(most, sizeof most, " and at most %g s", hi);
    return cli_bad_value(cmd, opt, v, "a duration %s %g s%s (as 2.5, 2.5s, 500ms, 100us)",
                         lo_open ? "above" : "of at least", lo, most);
}

int cli_arg_size(const struct cli_command *cmd, const char *opt, const char *v, uint64_t lo, uint64_t hi,
                 uint64_t mult, uint64_t *out)
{
    uint64_t x;
    if (v && !cli_parse_size(v, &x) && x >= lo && x <= hi && x % mult == 0) {
        *out = x;
        return 0;
    }
    char a[32], b[48] = "", m[48] = "";
    if (mult > 1)
        snprintf(m, sizeof m, ", a multiple of %llu", (unsigned long long)mult);
    if (hi != UINT64_MAX) {
        char h[32];
        snprintf(b, sizeof b, " to %s", fmt_size(hi, h, sizeof h));
    }
    return cli_bad_value(cmd, opt, v, "a size %s %s%s%s (as 4096, 64K, 1M, 4kB)", hi == UINT64_MAX ? "of at least" : "from",
                         fmt_size(lo, a, sizeof a), b, m);
}

int cli_arg_text(const struct cli_command *cmd, const char *opt, const char *v, const char *what, const char **out)
{
    if (v && *v) {
        *out = v;
        return 0;
    }
    return cli_bad_value(cmd, opt, v, "%s", what);
}

/* The nearest existing ancestor of path (path itself included) into buf,
 * and its stat; 0, or -1 when none could be looked at (a name too long). */
static int existing_ancestor(const char *path, char *buf, size_t cap, struct stat *sb)
{
    if (snprintf(buf, cap, "%s", path) >= (int)cap)
        return -1;
    for (;;) {
        if (!stat(buf, sb))
            return 0;
        if (errno != ENOENT && errno != ENOTDIR) /* "file/sub": the walk up finds the file */
            return -1;
        char *slash = strrchr(buf, '/');
        while (slash && slash > buf && slash[1] == 0) { /* "a/b/" */
            *slash = 0;
            slash = strrchr(buf, '/');
        }
        if (!slash)
            snprintf(buf, cap, ".");
        else if (slash == buf)
            buf[1] = 0; /* "/" */
        else
            *slash = 0;
    }
}

int cli_arg_outfile(const struct cli_command *cmd, const char *opt, const char *v, const char **out)
{
    if (cli_arg_text(cmd, opt, v, "the name of a file to write", out))
        return 2;
    struct stat sb;
    if (!stat(v, &sb))
        return S_ISDIR(sb.st_mode) ? cli_bad_value(cmd, opt, v, "a file to write: this is a directory")
                                   : 0; /* replaced; one that cannot be written is said when it is opened */
    char parent[4096];
    if (snprintf(parent, sizeof parent, "%s", v) >= (int)sizeof parent)
        return cli_bad_value(cmd, opt, v, "a file name shorter than %zu bytes", sizeof parent);
    char *slash = strrchr(parent, '/');
    if (!slash)
        snprintf(parent, sizeof parent, ".");
    else
        slash[slash == parent] = 0; /* "/x": "/" */
    if (stat(parent, &sb))
        return cli_bad_value(cmd, opt, v, "a file in an existing directory: %s: %s", parent, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return cli_bad_value(cmd, opt, v, "a file in a directory: %s is not a directory", parent);
    return 0;
}

int cli_arg_outdir(const struct cli_command *cmd, const char *opt, const char *v, const char **out)
{
    if (cli_arg_text(cmd, opt, v, "the name of a directory", out))
        return 2;
    char up[4096];
    struct stat sb;
    if (existing_ancestor(v, up, sizeof up, &sb))
        return cli_bad_value(cmd, opt, v, "a directory: it cannot be looked at: %s", strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return cli_bad_value(cmd, opt, v, "a directory: %s is not a directory", up);
    int err = make_dirs(v);
    if (err)
        return cli_bad_value(cmd, opt, v, "a directory that can be made: %s", strerror(err));
    /* a file of our own, removed at once: the directory takes files (access()
     * would say yes to root on a read-only or virtual file system) */
    char probe[4096 + 32];
    snprintf(probe, sizeof probe, "%s/.onigpu-out-XXXXXX", v);
    int fd = mkstemp(probe);
    if (fd < 0)
        return cli_bad_value(cmd, opt, v, "a directory a file can be made in: %s", strerror(errno));
    close(fd);
    unlink(probe);
    return 0;
}

/* "a, b, c": the n names of a set. */
static const char *names_text(const char *(*name)(int), int n, char *buf, size_t cap)
{
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < n && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%s", i ? ", " : "", name(i));
    return buf;
}

int cli_arg_name(const struct cli_command *cmd, const char *opt, const char *v, int (*parse)(const char *),
                 const char *(*name)(int), int n, int *out)
{
    int x = v ? parse(v) : -1;
    if (x >= 0) {
        *out = x;
        return 0;
    }
    char all[512];
    return cli_bad_value(cmd, opt, v, "one of %s", names_text(name, n, all, sizeof all));
}

int cli_parse_names(const struct cli_command *cmd, const char *opt, const char *list, int (*parse)(const char *),
                    const char *(*name)(int), int n, unsigned all, unsigned *mask)
{
    if (list && all && !strcmp(list, "all")) {
        *mask = all;
        return 0;
    }
    char *copy = list ? strdup(list) : NULL;
    if (list && !copy) {
        fprintf(stderr, "onigpu %s: %s: %s\n", cmd->name, opt, strerror(ENOMEM));
        return 2;
    }
    unsigned m = 0;
    const char *bad = NULL; /* the name not in the set; none: the list names nothing */
    for (char *save = NULL, *t = copy ? strtok_r(copy, ",", &save) : NULL; t; t = strtok_r(NULL, ",", &save)) {
        int b = parse(t);
        if (b < 0 || b > 31) {
            bad = list + (t - copy); /* the name itself, in list (still there after copy is freed) */
            m = 0;
            break;
        }
        m |= 1u << b;
    }
    free(copy);
    if (m) {
        *mask = m;
        return 0;
    }
    char names[512], one[512];
    if (bad)
        snprintf(one, sizeof one, "%.*s", (int)strcspn(bad, ","), bad);
    return cli_bad_value(cmd, opt, bad ? one : list, "one of %s (a comma-separated list%s)",
                         names_text(name, n, names, sizeof names), all ? ", or all" : "");
}
