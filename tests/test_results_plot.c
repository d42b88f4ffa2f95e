/* test_results_plot.c - figures of src/results (and bench_hist_png's bars of
 * a histogram, src/bench): what the gnuplot script and its
 * data file say (which series, columns, axis labels, log axes; the rows),
 * that gnuplot draws a PNG of the size asked where it is installed, and that
 * a missing or failing gnuplot leaves the script and data and says why. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include "bench/bench.h"
#include "unit.h"

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

/* The file dir/name's text (NULL when it cannot be read). */
static char *slurp_in(const char *dir, const char *name)
{
    char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return slurp(p);
}

static int exists_in(const char *dir, const char *name)
{
    char p[600];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return stat(p, &st) == 0;
}

/* Whether gnuplot is on PATH: the PNG checks need it. */
static int have_gnuplot(void)
{
    return unit_sh("command -v gnuplot >/dev/null 2>&1") == 0;
}

/* 1 when dir/name is a PNG (signature, then IHDR first) of w x h pixels. */
static int png_is(const char *dir, const char *name, unsigned w, unsigned h)
{
    char p[600];
    unsigned char b[24];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "rb");
    if (!f)
        return 0;
    size_t n = fread(b, 1, sizeof b, f);
    fclose(f);
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    if (n != sizeof b || memcmp(b, sig, 8) || memcmp(b + 12, "IHDR", 4))
        return 0;
    unsigned pw = (unsigned)b[16] << 24 | (unsigned)b[17] << 16 | (unsigned)b[18] << 8 | b[19];
    unsigned ph = (unsigned)b[20] << 24 | (unsigned)b[21] << 16 | (unsigned)b[22] << 8 | b[23];
    if (pw != w || ph != h)
        UNIT_FAIL("%s is %u x %u pixels, want %u x %u", name, pw, ph, w, h);
    return pw == w && ph == h;
}

/* The lines of text that are data rows (not comments, not blank). */
static int data_rows(const char *text)
{
    int n = 0;
    for (const char *l = text; l && *l;) {
        const char *e = strchr(l, '\n');
        if (*l != '#' && *l != '\n')
            n++;
        l = e ? e + 1 : l + strlen(l);
    }
    return n;
}

static void rm_rf(const char *dir)
{
    unit_sh("rm -rf '%s'", dir);
}

/* ---- line plots ------------------------------------------------------------- */

/* Two series on log-log axes: the script names each series' block of the
 * data file, its style and legend, the labels and both log axes; the data
 * file holds the plottable points only (<= 0 and NaN are left out). */
TEST(plot_script_and_data_say_what_is_drawn)
{
    char dir[] = "/tmp/onigpu-plot-XXXXXX", path[600], why[256] = "";
    REQUIRE(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/fig.png", dir);
    double x[4] = {10, 100, 0, 1000}, y1[4] = {5, 50, 7, NAN}, y2[3] = {1, 2, 3};
    struct results_series s[2] = {{"p50 it's", x, y1, 4, RESULTS_LINES_POINTS}, {"max_ns", x, y2, 3, RESULTS_POINTS}};
    struct results_plot p = {"latency, 4 KiB", "bytes per transfer", "time (us)", 1, 1, s, 2};
    int rc = results_plot_png(path, &p, why, sizeof why);
    CHECK(rc == ONI_ESUCCESS || rc == RESULTS_NOT_RENDERED);

    char *gp = slurp_in(dir, "fig.gp"), *dat = slurp_in(dir, "fig.dat");
    REQUIRE(gp && dat);
    CHECK(strstr(gp, "set output 'fig.png'\n") != NULL);
    CHECK(strstr(gp, "set title 'latency, 4 KiB' noenhanced\n") != NULL);
    CHECK(strstr(gp, "set xlabel 'bytes per transfer' noenhanced\n") != NULL);
    CHECK(strstr(gp, "set ylabel 'time (us)' noenhanced\n") != NULL);
    CHECK(strstr(gp, "set logscale x 10\n") && strstr(gp, "set logscale y 10\n"));
    CHECK(strstr(gp, "set terminal pngcairo size 800,520") != NULL);
    /* the quote in the name doubled, as gnuplot's single-quoted strings want */
    CHECK(strstr(gp, "plot 'fig.dat' index 0 using 1:2 with linespoints lw 2 pt 7 ps 0.8 "
                     "title 'p50 it''s' noenhanced, \\\n     '' index 1 using 1:2 with points pt 7 ps 0.8 "
                     "title 'max_ns' noenhanced\n") != NULL);
    CHECK(strstr(gp, "index 2") == NULL);
    /* series 0: (10,5) (100,50); x = 0 and y = NaN are not plottable here */
    CHECK(strstr(dat, "# index 0: p50 it's\n10 5\n100 50\n\n\n# index 1: max_ns\n10 1\n100 2\n") != NULL);
    CHECK_EQ(data_rows(dat), 4);
    free(gp);
    free(dat);
    if (have_gnuplot()) {
        if (rc != ONI_ESUCCESS)
            UNIT_FAIL("gnuplot is installed, but the PNG was not drawn: %s", why);
        CHECK(png_is(dir, "fig.png", RESULTS_PLOT_W, RESULTS_PLOT_H));
    }
    rm_rf(dir);
}

/* Linear axes: no logscale; a series without one plottable point keeps its
 * block (a NaN row), so the next series keeps its index and legend. */
TEST(plot_linear_and_an_empty_series)
{
    char dir[] = "/tmp/onigpu-plot-XXXXXX", path[600], why[256] = "";
    REQUIRE(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/lin.png", dir);
    double x[3] = {-1, 0, 2}, y[3] = {-5, 0, 5};
    struct results_series s[3] = {{"none", x, y, 0, RESULTS_LINES}, {"a", x, y, 3, RESULTS_LINES}, {NULL, x, y, 1, 7}};
    struct results_plot p = {NULL, "x", "y", 0, 0, s, 3};
    int rc = results_plot_png(path, &p, why, sizeof why);
    CHECK(rc == ONI_ESUCCESS || rc == RESULTS_NOT_RENDERED);
    char *gp = slurp_in(dir, "lin.gp"), *dat = slurp_in(dir, "lin.dat");
    REQUIRE(gp && dat);
    CHECK(strstr(gp, "logscale") == NULL && strstr(gp, "set title") == NULL);
    CHECK(strstr(dat, "# index 0: none\nNaN NaN\n\n\n# index 1: a\n-1 -5\n0 0\n2 5\n\n\n# index 2: \n-1 -5\n") != NULL);
    CHECK(strstr(gp, "index 2 using 1:2 with lines lw 2 title '' noenhanced") != NULL); /* unknown style: lines */
    free(gp);
    free(dat);
    if (have_gnuplot()) {
        if (rc != ONI_ESUCCESS)
            UNIT_FAIL("gnuplot is installed, but the PNG was not drawn: %s", why);
        CHECK(png_is(dir, "lin.png", RESULTS_PLOT_W, RESULTS_PLOT_H));
        /* the user's way: draw it again from the saved script */
        CHECK(unit_sh("cd '%s' && rm lin.png && gnuplot lin.gp 2>/dev/null", dir) == 0);
        CHECK(png_is(dir, "lin.png", RESULTS_PLOT_W, RESULTS_PLOT_H));
    }
    rm_rf(dir);
}

TEST(plot_bad_input_is_refused_before_any_file)
{
    char dir[] = "/tmp/onigpu-plot-XXXXXX", path[600];
    REQUIRE(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/e.png", dir);
    double x[1] = {0}, y[1] = {1};
    struct results_series s = {"a", x, y, 1, RESULTS_LINES};
    struct results_plot p = {"t", "x", "y", 1, 0, &s, 1};
    CHECK_RC(results_plot_png(path, &p, NULL, 0), ONI_EINVALARG); /* x = 0 on a log axis: nothing to plot */
    p.nseries = 0;
    CHECK_RC(results_plot_png(path, &p, NULL, 0), ONI_EINVALARG);
    CHECK_RC(results_plot_png(path, NULL, NULL, 0), ONI_EINVALARG);
    p.nseries = 1;
    p.logx = 0;
    struct results_series bad = {"b", NULL, y, 1, RESULTS_LINES};
    struct results_plot q = {"t", "x", "y", 0, 0, &bad, 1};
    CHECK_RC(results_plot_png(path, &q, NULL, 0), ONI_EINVALARG);
    char other[600];
    snprintf(other, sizeof other, "%s/e.svg", dir);
    CHECK_RC(results_plot_png(other, &p, NULL, 0), ONI_EINVALARG);
    CHECK_RC(results_plot_png(NULL, &p, NULL, 0), ONI_EINVALARG);
    CHECK_RC(results_plot_png(".png", &p, NULL, 0), ONI_EINVALARG);
    CHECK(!exists_in(dir, "e.gp") && !exists_in(dir, "e.dat"));
    snprintf(other, sizeof other, "%s/no-such-dir/e.png", dir);
    CHECK_RC(results_plot_png(other, &p, NULL, 0), ONI_EPATHINVALID);
    rm_rf(dir);
}

/* ---- histograms ------------------------------------------------------------- */

TEST(hist_script_and_bins)
{
    char dir[] = "/tmp/onigpu-plot-XXXXXX", path[600], why[256] = "";
    REQUIRE(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/h.png", dir);
    uint64_t ns[8] = {1000, 1000, 1100, 2000, 5000, 9000, 9500, 10000};
    struct bench_hist h;
    REQUIRE(bench_hist_make(&h, ns, 8, 4, 1, 1000, 10000) == ONI_ESUCCESS);
    int rc = bench_hist_png(path, "4 KiB transfers", "time (ns)", &h, why, sizeof why);
    CHECK(rc == ONI_ESUCCESS || rc == RESULTS_NOT_RENDERED);
    char *gp = slurp_in(dir, "h.gp"), *dat = slurp_in(dir, "h.dat");
    REQUIRE(gp && dat);
    CHECK(strstr(gp, "set xlabel 'time (ns)' noenhanced\n") && strstr(gp, "set ylabel 'count' noenhanced\n"));
    CHECK(strstr(gp, "set logscale x 10\n") && !strstr(gp, "set logscale y"));
    CHECK(strstr(gp, "using (($1+$2)/2):3:1:2:(0):3 with boxxyerror") != NULL);
    /* one row per bin: its edges and count, the counts adding up to n */
    CHECK_EQ(data_rows(dat), 4);
    double e0, e1;
    unsigned long long c, total = 0;
    const char *l = strstr(dat, "\n1000 ");
    REQUIRE(l);
    for (size_t i = 0; i < 4 && l && sscanf(l + 1, "%lf %lf %llu", &e0, &e1, &c) == 3; i++) {
        CHECK(fabs(e0 - bench_hist_edge(&h, i)) < 1e-6 && fabs(e1 - bench_hist_edge(&h, i + 1)) < 1e-6);
        CHECK_EQ(c, h.count[i]);
        total += c;
        l = strchr(l + 1, '\n');
    }
    CHECK_EQ(total, 8);
    free(gp);
    free(dat);
    if (have_gnuplot()) {
        if (rc != ONI_ESUCCESS)
            UNIT_FAIL("gnuplot is installed, but the PNG was not drawn: %s", why);
        CHECK(png_is(dir, "h.png", RESULTS_PLOT_W, RESULTS_PLOT_H));
    }
    bench_hist_free(&h);
    CHECK_RC(bench_hist_png(path, "t", "x", &h, NULL, 0), ONI_EINVALARG); /* freed: no counts */
    rm_rf(dir);
}

/* ---- gnuplot missing or failing --------------------------------------------- */

/* Runs fn with PATH set to path, then puts PATH back. */
static void with_path(const char *path, void (*fn)(const char *), const char *arg)
{
    char *old = getenv("PATH") ? strdup(getenv("PATH")) : NULL;
    setenv("PATH", path, 1);
    fn(arg);
    if (old)
        setenv("PATH", old, 1);
    else
        unsetenv("PATH");
    free(old);
}

/* results_plot_png of two points to dir/name.png; its return, why in why[len]. */
static int plot_two(const char *dir, const char *name, char *why, size_t len)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s.png", dir, name);
    double x[2] = {1, 2}, y[2] = {3, 4};
    struct results_series s = {"a", x, y, 2, RESULTS_LINES};
    struct results_plot p = {"t", "x", "y", 0, 0, &s, 1};
    return results_plot_png(path, &p, why, len);
}

static void plot_without(const char *dir)
{
    char why[256] = "";
    CHECK_RC(plot_two(dir, "m", why, sizeof why), RESULTS_NOT_RENDERED);
    CHECK(strstr(why, "gnuplot could not be run") != NULL);
    CHECK(exists_in(dir, "m.gp") && exists_in(dir, "m.dat") && !exists_in(dir, "m.png"));
}

TEST(plot_without_gnuplot_keeps_script_and_data)
{
    char dir[] = "/tmp/onigpu-plot-XXXXXX";
    REQUIRE(mkdtemp(dir));
    with_path("/nonexistent", plot_without, dir);
    rm_rf(dir);
}

static void plot_failing(const char *dir)
{
    char why[256] = "";
    CHECK_RC(plot_two(dir, "f", why, sizeof why), RESULTS_NOT_RENDERED);
    if (strcmp(why, "f.gp: no terminal here"))
        UNIT_FAIL("why: <%s>", why);
}

/* A gnuplot that fails (exit 1): its first line of stderr is the reason. */
TEST(plot_with_failing_gnuplot_says_its_message)
{
    char dir[] = "/tmp/onigpu-plot-XXXXXX";
    REQUIRE(mkdtemp(dir));
    REQUIRE(unit_sh("mkdir '%s/bin' && printf '#!/bin/sh\\necho \"$1: no terminal here\" >&2\\necho more >&2\\n"
                    "exit 1\\n' > '%s/bin/gnuplot' && chmod +x '%s/bin/gnuplot'", dir, dir, dir) == 0);
    char bin[600];
    snprintf(bin, sizeof bin, "%s/bin:/bin:/usr/bin", dir);
    with_path(bin, plot_failing, dir);
    rm_rf(dir);
}

/* ---- in a result set ------------------------------------------------------------ */

static void report_plots(const char *dir)
{
    int err = 0;
    struct results *r = results_open(dir, "p-x", 0, NULL, NULL, &err);
    REQUIRE(r != NULL);
    double x[2] = {1, 2}, y[2] = {3, 4};
    struct results_series s = {"a", x, y, 2, RESULTS_LINES};
    struct results_plot p = {"t", "x", "y", 0, 0, &s, 1};
    /* drawn or not, the figure is no lost result: 0 */
    CHECK_RC(results_add_plot(r, "lines", &p), ONI_ESUCCESS);
    CHECK_RC(results_add_plot(r, "bad/tag", &p), ONI_EINVALARG);
    char gp[600], json[600];
    snprintf(gp, sizeof gp, "%s", results_path(r, "-lines.gp"));
    snprintf(json, sizeof json, "%s", results_path(r, ".json"));
    results_cell_int(r, "k", 1);
    CHECK_RC(results_row(r, NULL), ONI_ESUCCESS);
    CHECK_RC(results_close(r), ONI_ESUCCESS);
    struct stat st;
    CHECK(stat(gp, &st) == 0);
    json_t *v = json_load_file(json, 0, NULL);
    REQUIRE(v);
    const json_t *plots = json_object_get(v, "plots");
    /* the PNG is listed where gnuplot drew it, and only then */
    const char *base = strrchr(gp, '/') + 1;
    char png[600];
    snprintf(png, sizeof png, "%.*s.png", (int)(strlen(base) - 3), base);
    if (have_gnuplot()) {
        CHECK(json_array_size(plots) == 1 && !strcmp(json_string_value(json_array_get(plots, 0)) ?: "", png));
    } else {
        CHECK(json_array_size(plots) == 0);
    }
    json_decref(v);
}

TEST(report_lists_drawn_plots)
{
    char dir[] = "/tmp/onigpu-plot-XXXXXX";
    REQUIRE(mkdtemp(dir));
    report_plots(dir);
    with_path("/nonexistent", report_plots, dir);
    rm_rf(dir);
}
