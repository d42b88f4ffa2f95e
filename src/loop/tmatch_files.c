/* tmatch_files.c - the template file set (tmatch_files.h): .npy files read
 * with src/oni/util/npy.c, params.py's two keys. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "oni.h"
#include "oni/util/npy.h"
#include "loop/tmatch_files.h"

void tm_files_free(struct tm_files *f)
{
    free(f->templates);
    free(f->chan_map);
    memset(f, 0, sizeof *f);
}

/* The value after "key" "=" on a line of s (blanks around '='), its end at
 * the line's end or a '#'; NULL when the line is not that key's. */
static const char *value_of(const char *line, const char *end, const char *key, const char **vend)
{
    size_t k = strlen(key);
    while (line < end && (*line == ' ' || *line == '\t'))
        line++;
    if ((size_t)(end - line) <= k || memcmp(line, key, k))
        return NULL;
    const char *p = line + k;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (p >= end || *p != '=')
        return NULL;
    for (p++; p < end && (*p == ' ' || *p == '\t'); p++)
        ;
    const char *e = p;
    while (e < end && *e != '#')
        e++;
    while (e > p && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
        e--;
    *vend = e;
    return p;
}

int tm_params_parse(const char *text, size_t len, const char *name, double *fs_hz, int *hp, char *why, size_t cap)
{
    *fs_hz = 0, *hp = -1;
    for (const char *line = text, *stop = text + len; line < stop;) {
        const char *nl = memchr(line, '\n', (size_t)(stop - line));
        const char *end = nl ? nl : stop, *ve, *v;
        if ((v = value_of(line, end, "sample_rate", &ve))) {
            char num[64];
            size_t n = (size_t)(ve - v);
            char *q;
            snprintf(num, sizeof num, "%.*s", (int)(n < sizeof num ? n : sizeof num - 1), v);
            double d = n && n < sizeof num ? strtod(num, &q) : 0;
            if (!n || n >= sizeof num || *q || !(d > 0) || !isfinite(d)) {
                snprintf(why, cap, "%s: sample_rate = '%.*s' is not a positive number", name, (int)(n < 40 ? n : 40),
                         v);
                return ONI_EINVALARG;
            }
            *fs_hz = d;
        } else if ((v = value_of(line, end, "hp_filtered", &ve))) {
            size_t n = (size_t)(ve - v);
            if (n == 4 && !memcmp(v, "True", 4))
                *hp = 1;
            else if (n == 5 && !memcmp(v, "False", 5))
                *hp = 0;
            else {
                snprintf(why, cap, "%s: hp_filtered = '%.*s' (True or False)", name, (int)(n < 40 ? n : 40), v);
                return ONI_EINVALARG;
            }
        }
        line = nl ? nl + 1 : stop;
    }
    return 0;
}

/* dir/name into path[cap]; -1 when it does not fit. */
static int path_of(char *path, size_t cap, const char *dir, const char *name)
{
    int n = snprintf(path, cap, "%s/%s", dir, name);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* An optional file: 1 when it is not there, else npy_load's result. */
static int load_optional(const char *path, const char *descrs, int ndim, struct npy_info *h, void **data, char *why,
                         size_t cap)
{
    *data = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return 1;
    fclose(f);
    return npy_load(path, descrs, ndim, h, data, why, cap);
}

/* Element i of a float32 or float64 array as a double. */
static double elem(const struct npy_info *h, const void *data, size_t i)
{
    if (h->item == 8) {
        double d;
        memcpy(&d, (const uint8_t *)data + i * 8, 8);
        return d;
    }
    float f;
    memcpy(&f, (const uint8_t *)data + i * 4, 4);
    return f;
}

/* templates @ inv, in place, when inv (nch x nch) is not the identity. */
static int unwhiten(struct tm_files *f, const struct npy_info *h, const void *inv)
{
    size_t n = f->nch, ident = 1;
    for (size_t i = 0; i < n && ident; i++)
        for (size_t j = 0; j < n && ident; j++)
            ident = elem(h, inv, i * n + j) == (i == j ? 1.0 : 0.0);
    if (ident)
        return 0;
    double *row = malloc(n * sizeof *row);
    if (!row)
        return ONI_EBADALLOC;
    for (size_t r = 0; r < (size_t)f->ntpl * f->nsamp; r++) {
        float *t = f->templates + r * n;
        for (size_t c = 0; c < n; c++) {
            double s = 0;
            for (size_t i = 0; i < n; i++)
                s += (double)t[i] * elem(h, inv, i * n + c);
            row[c] = s;
        }
        for (size_t c = 0; c < n; c++)
            t[c] = (float)row[c];
    }
    free(row);
    f->unwhitened = 1;
    return 0;
}

static int load(const char *dir, struct tm_files *f, char *why, size_t cap)
{
    char path[4096];
    struct npy_info h;
    void *data = NULL;
    int rc;
    if (path_of(path, sizeof path, dir, "templates.npy")) {
        snprintf(why, cap, "template directory '%.200s': path too long", dir);
        return ONI_EINVALARG;
    }
    if ((rc = npy_load(path, "<f4", 3, &h, &data, why, cap)))
        return rc;
    f->templates = data;
    if (!h.shape[0] || !h.shape[1] || !h.shape[2] || h.shape[0] > UINT32_MAX || h.shape[1] > UINT32_MAX ||
        h.shape[2] > UINT32_MAX) {
        snprintf(why, cap, "%s: shape (%llu, %llu, %llu): n_templates, n_samples and n_channels must not be 0", path,
                 (unsigned long long)h.shape[0], (unsigned long long)h.shape[1], (unsigned long long)h.shape[2]);
        return ONI_EINVALARG;
    }
    f->ntpl = (uint32_t)h.shape[0], f->nsamp = (uint32_t)h.shape[1], f->nch = (uint32_t)h.shape[2];
    for (size_t i = 0; i < (size_t)f->ntpl * f->nsamp * f->nch; i++)
        if (!isfinite(f->templates[i])) {
            snprintf(why, cap, "%s: element %zu is not a finite number", path, i);
            return ONI_EINVALARG;
        }

    path_of(path, sizeof path, dir, "channel_map.npy");
    if ((rc = npy_load(path, "<i4,<i8", 1, &h, &data, why, cap)))
        return rc;
    if (h.shape[0] != f->nch) {
        snprintf(why, cap, "%s: %llu channels, templates.npy has %u (n_channels)", path,
                 (unsigned long long)h.shape[0], f->nch);
        free(data);
        return ONI_EINVALARG;
    }
    if (!(f->chan_map = malloc(f->nch * sizeof *f->chan_map))) {
        free(data);
        return ONI_EBADALLOC;
    }
    for (uint32_t i = 0; i < f->nch; i++) {
        int64_t v;
        if (h.item == 8)
            memcpy(&v, (uint8_t *)data + (size_t)i * 8, 8);
        else {
            int32_t w;
            memcpy(&w, (uint8_t *)data + (size_t)i * 4, 4);
            v = w;
        }
        if (v < 0 || v > UINT32_MAX - 1) {
            snprintf(why, cap, "%s: channel_map[%u] = %lld is no channel", path, i, (long long)v);
            free(data);
            return ONI_EINVALARG;
        }
        f->chan_map[i] = (uint32_t)v;
    }
    free(data);

    path_of(path, sizeof path, dir, "whitening_mat_inv.npy");
    rc = load_optional(path, "<f4,<f8", 2, &h, &data, why, cap);
    if (rc < 0)
        return rc;
    if (rc == 0) {
        if (h.shape[0] != f->nch || h.shape[1] != f->nch) {
            snprintf(why, cap, "%s: shape (%llu, %llu), expected (%u, %u) (n_channels of templates.npy)", path,
                     (unsigned long long)h.shape[0], (unsigned long long)h.shape[1], f->nch, f->nch);
            free(data);
            return ONI_EINVALARG;
        }
        rc = unwhiten(f, &h, data);
        free(data);
        if (rc)
            return rc;
    }

    path_of(path, sizeof path, dir, "channel_positions.npy");
    rc = load_optional(path, "<f4,<f8", 2, &h, &data, why, cap);
    if (rc < 0)
        return rc;
    free(data);
    if (rc == 0 && (h.shape[0] != f->nch || h.shape[1] != 2)) {
        snprintf(why, cap, "%s: shape (%llu, %llu), expected (%u, 2) (n_channels of templates.npy; x, y in um)", path,
                 (unsigned long long)h.shape[0], (unsigned long long)h.shape[1], f->nch);
        return ONI_EINVALARG;
    }

    path_of(path, sizeof path, dir, "params.py");
    FILE *p = fopen(path, "rb");
    f->hp_filtered = -1;
    if (p) {
        char text[8192];
        size_t n = fread(text, 1, sizeof text, p);
        int full = n == sizeof text && fgetc(p) != EOF;
        fclose(p);
        if (full) {
            snprintf(why, cap, "%s: over %zu bytes (a params.py is a few lines)", path, sizeof text);
            return ONI_EINVALARG;
        }
        if ((rc = tm_params_parse(text, n, path, &f->fs_hz, &f->hp_filtered, why, cap)))
            return rc;
    }
    return 0;
}

int tm_files_load(const char *dir, struct tm_files *f, char *why, size_t cap)
{
    memset(f, 0, sizeof *f);
    if (cap)
        why[0] = '\0';
    int rc = load(dir, f, why, cap);
    if (rc == ONI_EBADALLOC && why[0] == '\0')
        snprintf(why, cap, "template directory '%.200s': no memory", dir);
    return rc;
}
