/* plot.c - plots and histograms drawn by gnuplot. For <stem>.png the points
 * go to <stem>.dat and the script that draws them to <stem>.gp, both kept
 * beside the PNG: a user restyles the figure and draws it again with
 * `gnuplot <stem>.gp` in that directory. gnuplot is run once per figure;
 * where it is missing or fails, the script and the data are still written. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "results.h"
#include "sys.h"

/* Where a figure's files go: "<dir>/<base>.png|.gp|.dat". */
struct fig {
    char *dir;  /* "." when path has no directory */
    char *base; /* file name without ".png" */
    char *gp, *dat;
};

static void fig_free(struct fig *f)
{
    free(f->dir);
    free(f->base);
    free(f->gp);
    free(f->dat);
}

static char *join(const char *a, const char *b, const char *c)
{
    size_t n = strlen(a) + strlen(b) + strlen(c) + 1;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s%s%s", a, b, c);
    return s;
}

/* The files of the figure drawn to path, which must end in ".png". */
static int fig_init(struct fig *f, const char *path)
{
    memset(f, 0, sizeof *f);
    size_t n = path ? strlen(path) : 0;
    if (n <= 4 || strcmp(path + n - 4, ".png"))
        return ONI_EINVALARG;
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    f->dir = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : strdup(".");
    f->base = strndup(name, strlen(name) - 4);
    f->gp = join(path, "", "");
    f->dat = join(path, "", "");
    if (!f->dir || !f->base || !f->gp || !f->dat || !*f->base) {
        int rc = f->base && !*f->base ? ONI_EINVALARG : ONI_EBADALLOC;
        fig_free(f);
        return rc;
    }
    strcpy(f->gp + n - 4, ".gp");
    strcpy(f->dat + n - 4, ".dat");
    return ONI_ESUCCESS;
}

/* s and then ext as one gnuplot string: single quotes take it as it is, a '
 * doubled; a line break would end the command, so it becomes a space. */
static void gp_str2(FILE *f, const char *s, const char *ext)
{
    fputc('\'', f);
    for (int part = 0; part < 2; part++, s = ext)
        for (; s && *s; s++) {
            if (*s == '\'')
                fputc('\'', f);
            fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
        }
    fputc('\'', f);
}

static void gp_str(FILE *f, const char *s)
{
    gp_str2(f, s, NULL);
}

/* The script's head: terminal (pngcairo where this gnuplot has it: cairo
 * draws antialiased text and lines; else libgd's png), output, title, axes. */
static void gp_head(FILE *f, const struct fig *g, const char *title, const char *xlabel,
                    const char *ylabel, int logx, int logy)
{
    fprintf(f, "# %s.gp - drawn by onigpu from %s.dat; draw it again with: gnuplot %s.gp\n"
               "# (in this directory)\n",
            g->base, g->base, g->base);
    fprintf(f, "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
               "    set terminal pngcairo size %d,%d enhanced font 'Sans,11'\n"
               "} else {\n"
               "    set terminal png size %d,%d enhanced\n"
               "}\n",
            RESULTS_PLOT_W, RESULTS_PLOT_H, RESULTS_PLOT_W, RESULTS_PLOT_H);
    fprintf(f, "set encoding utf8\nset output ");
    gp_str2(f, g->base, ".png");
    fputc('\n', f);
    const char *what[] = {"title", "xlabel", "ylabel"}, *text[] = {title, xlabel, ylabel};
    for (int i = 0; i < 3; i++) {
        if (!text[i])
            continue;
        fprintf(f, "set %s ", what[i]);
        gp_str(f, text[i]);
        fputs(" noenhanced\n", f); /* '_' and '^' in labels are no markup */
    }
    fputs("set grid\nset key below\n", f);
    const char *axis[] = {"x", "y"};
    int log[] = {logx, logy};
    for (int i = 0; i < 2; i++)
        if (log[i])
            fprintf(f, "set logscale %s 10\nset format %s '10^{%%L}'\n", axis[i], axis[i]);
}

/* Run gnuplot on the figure's script. ONI_ESUCCESS when the PNG came out,
 * else RESULTS_NOT_RENDERED with why in why[len] (when given). */
static int render(const struct fig *g, char *why, size_t len)
{
    char *png = join(g->dir, "/", g->base), *out = png ? join(png, ".png", "") : NULL;
    char err[512], gp[1024];
    snprintf(gp, sizeof gp, "%s.gp", g->base);
    char *argv[] = {"gnuplot", gp, NULL};
    int rc = RESULTS_NOT_RENDERED;
    if (!out) {
        snprintf(err, sizeof err, "out of memory");
    } else {
        unlink(out); /* no PNG of an earlier drawing left to look like this one */
        int st = results_exec(g->dir, argv, 2, err, sizeof err);
        struct stat sb;
        if (st == 0 && stat(out, &sb) == 0 && sb.st_size > 0)
            rc = ONI_ESUCCESS;
        else if (st == 127)
            snprintf(err, sizeof err, "gnuplot could not be run (not installed? Debian: gnuplot-nox)");
        else if (st == 0)
            snprintf(err, sizeof err, "gnuplot made no PNG");
        else if (!err[0])
            snprintf(err, sizeof err, "gnuplot failed (exit %d)", st);
    }
    if (rc && why && len) {
        err[strcspn(err, "\n")] = 0; /* its first line says where */
        snprintf(why, len, "%s", err);
    }
    free(png);
    free(out);
    return rc;
}

/* ---- line plots ------------------------------------------------------------ */

static int plottable(const struct results_plot *p, double x, double y)
{
    return isfinite(x) && isfinite(y) && (!p->logx || x > 0) && (!p->logy || y > 0);
}

/* ONI_EINVALARG unless p has series and at least one plottable point. */
static int plot_check(const struct results_plot *p)
{
    if (!p || !p->series || !p->nseries)
        return ONI_EINVALARG;
    int any = 0;
    for (size_t s = 0; s < p->nseries; s++) {
        const struct results_series *se = &p->series[s];
        if (se->n && (!se->x || !se->y))
            return ONI_EINVALARG;
        for (size_t i = 0; i < se->n; i++)
            any |= plottable(p, se->x[i], se->y[i]);
    }
    return any ? ONI_ESUCCESS : ONI_EINVALARG;
}

/* One block per series (gnuplot's index), blocks apart by two blank lines. */
static int plot_data(const struct fig *g, const struct results_plot *p)
{
    FILE *f = fopen(g->dat, "w");
    if (!f)
        return ONI_EPATHINVALID;
    fprintf(f, "# %s.dat - the points of %s.gp: one block per series (index 0, 1, ...), columns x y\n",
            g->base, g->base);
    for (size_t s = 0; s < p->nseries; s++) {
        const struct results_series *se = &p->series[s];
        fprintf(f, "%s# index %zu: %s\n", s ? "\n\n" : "", s, se->name ? se->name : "");
        int none = 1;
        for (size_t i = 0; i < se->n; i++) {
            if (!plottable(p, se->x[i], se->y[i]))
                continue; /* not finite, or <= 0 on a log axis */
            fprintf(f, "%.17g %.17g\n", se->x[i], se->y[i]);
            none = 0;
        }
        if (none)
            fputs("NaN NaN\n", f); /* keeps the block, so the next series keeps its index */
    }
    return results_close_written(f);
}

static int plot_script(const struct fig *g, const struct results_plot *p)
{
    static const char *with[] = {"lines lw 2", "points pt 7 ps 0.8", "linespoints lw 2 pt 7 ps 0.8"};
    FILE *f = fopen(g->gp, "w");
    if (!f)
        return ONI_EPATHINVALID;
    gp_head(f, g, p->title, p->xlabel, p->ylabel, p->logx, p->logy);
    fputs("plot ", f);
    for (size_t s = 0; s < p->nseries; s++) {
        int style = p->series[s].style;
        if (s)
            fputs(", \\\n     ''", f); /* '': the file named before */
        else
            gp_str2(f, g->base, ".dat");
        fprintf(f, " index %zu using 1:2 with %s title ", s,
                with[style >= 0 && style <= 2 ? style : RESULTS_LINES]);
        gp_str(f, p->series[s].name ? p->series[s].name : "");
        fputs(" noenhanced", f);
    }
    fputc('\n', f);
    return results_close_written(f);
}

int results_plot_png(const char *path, const struct results_plot *p, char *why, size_t len)
{
    struct fig g;
    int rc = plot_check(p);
    if (rc || (rc = fig_init(&g, path)))
        return rc;
    rc = plot_data(&g, p);
    if (!rc)
        rc = plot_script(&g, p);
    if (!rc)
        rc = render(&g, why, len);
    fig_free(&g);
    return rc;
}

/* ---- bar charts ------------------------------------------------------------ */

static int bars_data(const struct fig *g, const struct results_bars *b)
{
    FILE *f = fopen(g->dat, "w");
    if (!f)
        return ONI_EPATHINVALID;
    fprintf(f, "# %s.dat - the bars of %s.gp, columns: from to count\n"
               "# %llu below the first bar, %llu above the last\n",
            g->base, g->base, (unsigned long long)b->under, (unsigned long long)b->over);
    for (size_t i = 0; i < b->n; i++)
        fprintf(f, "%.17g %.17g %llu\n", b->from[i], b->to[i], (unsigned long long)b->count[i]);
    return results_close_written(f);
}

static int bars_script(const struct fig *g, const struct results_bars *b)
{
    FILE *f = fopen(g->gp, "w");
    if (!f)
        return ONI_EPATHINVALID;
    gp_head(f, g, b->title, b->xlabel, "count", b->logx, 0);
    /* a box from each bar's first edge to its last, from 0 to its count */
    fputs("set yrange [0:*]\nset style fill solid 0.8 noborder\nplot ", f);
    gp_str2(f, g->base, ".dat");
    fputs(" using (($1+$2)/2):3:1:2:(0):3 with boxxyerror notitle\n", f);
    return results_close_written(f);
}

int results_bars_png(const char *path, const struct results_bars *b, char *why, size_t len)
{
    if (!b || !b->n || !b->from || !b->to || !b->count)
        return ONI_EINVALARG;
    for (size_t i = 0; i < b->n; i++)
        if (!isfinite(b->from[i]) || !isfinite(b->to[i]) || (b->logx && b->from[i] <= 0))
            return ONI_EINVALARG;
    struct fig g;
    int rc = fig_init(&g, path);
    if (rc)
        return rc;
    rc = bars_data(&g, b);
    if (!rc)
        rc = bars_script(&g, b);
    if (!rc)
        rc = render(&g, why, len);
    fig_free(&g);
    return rc;
}
