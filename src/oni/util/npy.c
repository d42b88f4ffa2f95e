/* npy.c - the .npy header (npy.h). */
#include "npy.h"

#include "onidefs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char magic[6] = {(char)0x93, 'N', 'U', 'M', 'P', 'Y'};

/* Bytes of one element of descr, or 0 for one npy_header does not write:
 * a little-endian (or byte-wide) integer or float, or "|S<n>", NumPy's
 * fixed-width byte string of n bytes (1..NPY_MAX_STR), NUL-padded. */
static size_t item_size(const char *d)
{
    if (d[0] == '|' && d[1] == 'S') {
        size_t n = 0, i = 2;
        for (; d[i] >= '0' && d[i] <= '9' && i < 6; i++)
            n = n * 10 + (size_t)(d[i] - '0');
        return !d[i] && i > 2 && d[2] != '0' && n <= NPY_MAX_STR ? n : 0;
    }
    if ((d[0] != '<' && d[0] != '|') || !strchr("iuf", d[1]) || d[2] < '1' || d[2] > '8' || d[3])
        return 0;
    size_t n = (size_t)(d[2] - '0');
    if (n != 1 && n != 2 && n != 4 && n != 8)
        return 0;
    if (d[1] == 'f' && n < 4)
        return 0;
    return n;
}

int npy_header(char buf[NPY_HDR], const char *descr, int ndim, const uint64_t *shape)
{
    if (!item_size(descr) || ndim < 1 || ndim > NPY_MAXDIM)
        return -1;
    char dims[80] = "";
    size_t k = 0;
    for (int i = 0; i < ndim; i++) /* "(3,)" for one dimension, "(3, 4)" for more */
        k += (size_t)snprintf(dims + k, sizeof dims - k, "%s%llu", i ? ", " : "", (unsigned long long)shape[i]);
    char dict[NPY_HDR];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%s%s), }", descr, dims,
                     ndim == 1 ? "," : "");
    if (n < 0 || n > NPY_HDR - 11)
        return -1;
    memcpy(buf, magic, 6);
    buf[6] = 1, buf[7] = 0;
    buf[8] = (char)((NPY_HDR - 10) & 0xFF), buf[9] = (char)((NPY_HDR - 10) >> 8);
    memcpy(buf + 10, dict, (size_t)n);
    memset(buf + 10 + n, ' ', (size_t)(NPY_HDR - 11 - n));
    buf[NPY_HDR - 1] = '\n';
    return 0;
}

/* The value of key in the dict text s[0..n): a pointer just after "'key':"
 * and its blanks, or NULL. */
static const char *find_key(const char *s, size_t n, const char *key)
{
    char pat[24];
    int k = snprintf(pat, sizeof pat, "'%s':", key);
    for (size_t i = 0; i + (size_t)k <= n; i++)
        if (!memcmp(s + i, pat, (size_t)k)) {
            const char *v = s + i + k;
            while (v < s + n && *v == ' ')
                v++;
            return v;
        }
    return NULL;
}

/* An unsigned decimal at *p (advanced), below 2^63. -1 if none. */
static int read_u64(const char **p, const char *end, uint64_t *out)
{
    const char *s = *p;
    uint64_t v = 0;
    if (s >= end || *s < '0' || *s > '9')
        return -1;
    while (s < end && *s >= '0' && *s <= '9') {
        if (v > (UINT64_MAX >> 1) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*s++ - '0');
    }
    *p = s, *out = v;
    return 0;
}

int npy_parse(const uint8_t *buf, size_t len, struct npy_info *out)
{
    memset(out, 0, sizeof *out);
    if (len < 10 || memcmp(buf, magic, 6) || (buf[6] != 1 && buf[6] != 2))
        return -1;
    size_t hl, off;
    if (buf[6] == 1) {
        hl = (size_t)buf[8] | (size_t)buf[9] << 8;
        off = 10;
    } else {
        if (len < 12)
            return -1;
        hl = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
        off = 12;
    }
    if (hl > len - off || hl == 0 || buf[off + hl - 1] != '\n')
        return -1;
    const char *s = (const char *)buf + off, *end = s + hl;
    const char *d = find_key(s, hl, "descr"), *f = find_key(s, hl, "fortran_order"),
               *sh = find_key(s, hl, "shape");
    if (!d || !f || !sh || d >= end || *d != '\'')
        return -1;
    size_t i = 0;
    for (d++; d < end && *d != '\'' && i < sizeof out->descr - 1; d++) {
        if (*d < 0x21 || *d > 0x7e) /* a type string is printable ASCII (a NUL would cut it) */
            return -1;
        out->descr[i++] = *d;
    }
    if (d >= end || *d != '\'' || !(out->item = item_size(out->descr)))
        return -1;
    if (end - f >= 4 && !memcmp(f, "True", 4))
        out->fortran = 1;
    else if (!(end - f >= 5 && !memcmp(f, "False", 5)))
        return -1;
    if (sh >= end || *sh++ != '(')
        return -1;
    for (int i = 0; i < NPY_MAXDIM; i++)
        out->shape[i] = 1;
    for (out->ndim = 0; out->ndim < NPY_MAXDIM;) {
        while (sh < end && *sh == ' ')
            sh++;
        if (sh < end && *sh == ')')
            break;
        if (read_u64(&sh, end, &out->shape[out->ndim]))
            return -1;
        out->ndim++;
        while (sh < end && *sh == ' ')
            sh++;
        if (sh < end && *sh == ',')
            sh++;
    }
    while (sh < end && *sh == ' ')
        sh++;
    if (out->ndim < 1 || sh >= end || *sh != ')')
        return -1;
    uint64_t bytes = out->item; /* the data must fit in 2^63 bytes */
    for (int i = 0; i < out->ndim; i++) {
        if (out->shape[i] && bytes > (UINT64_MAX >> 1) / out->shape[i])
            return -1;
        bytes *= out->shape[i];
    }
    out->data_off = off + hl;
    return 0;
}

/* descr is one of the comma-separated list descrs. */
static int descr_in(const char *descr, const char *descrs)
{
    size_t n = strlen(descr);
    for (const char *p = descrs; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && !memcmp(p, descr, n))
            return 1;
        p += len + (end ? 1 : 0);
    }
    return 0;
}

int npy_check(const uint8_t *buf, size_t len, const char *name, const char *descrs, int ndim, struct npy_info *out,
              char *why, size_t cap)
{
    if (npy_parse(buf, len, out)) {
        snprintf(why, cap, "%s: not a .npy file of a little-endian integer or float array of 1 to %d dimensions "
                           "(version 1 or 2 header)", name, NPY_MAXDIM);
        return ONI_EINVALARG;
    }
    if (!descr_in(out->descr, descrs)) {
        snprintf(why, cap, "%s: dtype '%s', expected %s", name, out->descr, descrs);
        return ONI_EINVALARG;
    }
    if (out->fortran) {
        snprintf(why, cap, "%s: fortran_order True, expected a C-order array (numpy.ascontiguousarray)", name);
        return ONI_EINVALARG;
    }
    if (out->ndim != ndim) {
        snprintf(why, cap, "%s: %d dimension%s, expected %d", name, out->ndim, out->ndim == 1 ? "" : "s", ndim);
        return ONI_EINVALARG;
    }
    uint64_t want = out->item;
    for (int i = 0; i < ndim; i++)
        want *= out->shape[i];
    if (len - out->data_off != want) {
        snprintf(why, cap, "%s: %llu bytes of data, its shape needs %llu", name,
                 (unsigned long long)(len - out->data_off), (unsigned long long)want);
        return ONI_EINVALARG;
    }
    return 0;
}

int npy_load(const char *path, const char *descrs, int ndim, struct npy_info *out, void **data, char *why, size_t cap)
{
    *data = NULL;
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, cap, "%s: cannot open: %s", path, strerror(errno));
        return ONI_EREADFAILURE;
    }
    long size = fseek(f, 0, SEEK_END) ? -1 : ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET)) {
        snprintf(why, cap, "%s: cannot read: %s", path, strerror(errno));
        fclose(f);
        return ONI_EREADFAILURE;
    }
    if (size > (1L << 30)) {
        snprintf(why, cap, "%s: %ld bytes (1 GiB at most)", path, size);
        fclose(f);
        return ONI_EINVALARG;
    }
    uint8_t *buf = malloc(size ? (size_t)size : 1);
    if (!buf) {
        snprintf(why, cap, "%s: no memory for its %ld bytes", path, size);
        fclose(f);
        return ONI_EBADALLOC;
    }
    size_t got = fread(buf, 1, (size_t)size, f);
    int err = ferror(f) ? errno : 0;
    fclose(f);
    if (got != (size_t)size) {
        snprintf(why, cap, "%s: cannot read: %s", path, err ? strerror(err) : "shorter than its size");
        free(buf);
        return ONI_EREADFAILURE;
    }
    int rc = npy_check(buf, (size_t)size, path, descrs, ndim, out, why, cap);
    if (rc) {
        free(buf);
        return rc;
    }
    /* the elements to the start of the allocation */
    size_t n = (size_t)size - out->data_off;
    memmove(buf, buf + out->data_off, n);
    *data = buf;
    return 0;
}
