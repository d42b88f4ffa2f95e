/* recover.c - `onigpu recover DIR` (record.h: rec_recover): an Open Ephys
 * recording left by a process that died is made consistent from what is on
 * disk alone. The files of a folder hold the same number of rows when
 * whole; a crash can leave some with more rows than others (written before
 * the next ones), a row cut in two, and headers of the last flush. Every
 * file is cut to the rows every file of its folder holds and every header
 * rewritten to say so. Nothing is added, and a folder structure.oebin does
 * not list (made after the last flush) is left alone. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>
#include "record/rec_int.h"
#include "oni/util/npy.h"
#include "record/oebin.h"

#define MAX_FILES 8

static void addf(char *buf, size_t cap, const char *fmt, ...)
{
    size_t n = strlen(buf);
    if (n + 1 >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, cap - n, fmt, ap);
    va_end(ap);
}

struct file {
    char path[PATH_MAX];
    int fd;
    int npy;           /* 1: a .npy file; 0: continuous.dat */
    struct npy_info h;
    size_t row;        /* bytes per row */
    uint64_t rows;     /* whole rows it holds */
};

/* Open and measure one file of a folder. 0, 1 when absent (and optional),
 * or an ONI error with why in report. */
static int measure(struct file *f, const char *dir, const char *name, int npy, size_t dat_row, int optional,
                   char *report, size_t cap)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    f->npy = npy;
    if (rec_path(f->path, sizeof f->path, dir, name)) {
        addf(report, cap, "%s/%s: path too long\n", dir, name);
        return ONI_EINVALARG;
    }
    if ((f->fd = open(f->path, O_RDWR | O_CLOEXEC)) < 0) {
        if (errno == ENOENT && optional)
            return 1;
        addf(report, cap, "cannot open %s: %s\n", f->path, strerror(errno));
        return errno == ENOENT ? ONI_EINVALARG : ONI_EWRITEFAILURE;
    }
    struct stat sb;
    if (fstat(f->fd, &sb)) {
        addf(report, cap, "cannot read %s: %s\n", f->path, strerror(errno));
        return ONI_EWRITEFAILURE;
    }
    uint64_t size = (uint64_t)sb.st_size, data = size;
    if (npy) {
        uint8_t hdr[NPY_HDR];
        ssize_t r = pread(f->fd, hdr, sizeof hdr, 0);
        if (r != NPY_HDR || npy_parse(hdr, NPY_HDR, &f->h) || f->h.data_off != NPY_HDR || f->h.fortran) {
            addf(report, cap, "%s: not a .npy header onigpu wrote (%d bytes read)\n", f->path, (int)r);
            return ONI_EINVALARG;
        }
        f->row = f->h.item * (f->h.ndim == 2 ? f->h.shape[1] : 1);
        data = size - NPY_HDR;
    } else {
        f->row = dat_row;
    }
    /* zero-width rows (waveforms): as many as its header says */
    f->rows = f->row ? data / f->row : f->h.shape[0];
    return 0;
}

/* Cut f to rows and set its header. */
static int settle(struct file *f, uint64_t rows, char *report, size_t cap)
{
    uint64_t base = f->npy ? NPY_HDR : 0;
    if (f->row && ftruncate(f->fd, (off_t)(base + rows * f->row))) {
        addf(report, cap, "cannot cut %s: %s\n", f->path, strerror(errno));
        return ONI_EWRITEFAILURE;
    }
    if (f->npy) {
        char h[NPY_HDR];
        npy_header(h, f->h.descr, f->h.ndim, (const uint64_t[]){rows, f->h.shape[1]});
        int err = rec_write_all(f->fd, h, NPY_HDR, 0);
        if (err) {
            addf(report, cap, "cannot write %s: %s\n", f->path, strerror(err));
            return ONI_EWRITEFAILURE;
        }
    }
    if (fsync(f->fd) && errno != EINVAL) {
        addf(report, cap, "cannot write %s: %s\n", f->path, strerror(errno));
        return ONI_EWRITEFAILURE;
    }
    return 0;
}

static int folder_consistent(const char *rdir, const struct oebin_folder *fo, char *report, size_t cap)
{
    static const char *const cont[] = {"sample_numbers.npy", "timestamps.npy", NULL};
    static const char *const ev[] = {"sample_numbers.npy", "timestamps.npy", "states.npy", "full_words.npy", NULL};
    static const char *const spk[] = {"sample_numbers.npy", "timestamps.npy", "electrode_indices.npy",
                                      "clusters.npy",       "waveforms.npy",  NULL};
    const char *const *names = fo->kind == OEBIN_CONTINUOUS ? cont : fo->kind == OEBIN_EVENTS ? ev : spk;
    char dir[PATH_MAX];
    if (rec_path(dir, sizeof dir, rdir, fo->path)) {
        addf(report, cap, "%s: path too long\n", fo->path);
        return ONI_EINVALARG;
    }
    struct file f[MAX_FILES];
    int nf = 0, rc = 0;
    if (fo->kind == OEBIN_CONTINUOUS)
        rc = measure(&f[nf++], dir, "continuous.dat", 0, (size_t)fo->nchan * 2, 0, report, cap);
    for (int i = 0; names[i] && !rc; i++)
        rc = measure(&f[nf++], dir, names[i], 1, 0, 0, report, cap);
    if (!rc) {
        rc = measure(&f[nf++], dir, "host_ns.npy", 1, 0, 1, report, cap);
        if (rc == 1) {
            close(f[--nf].fd);
            rc = 0;
        }
    }
    uint64_t rows = UINT64_MAX;
    int changed = 0;
    for (int i = 0; i < nf && !rc; i++)
        if (f[i].rows < rows)
            rows = f[i].rows;
    if (rows == UINT64_MAX)
        rows = 0;
    for (int i = 0; i < nf && !rc; i++) {
        if (f[i].rows != rows || (f[i].npy && f[i].h.shape[0] != rows))
            changed = 1;
        rc = settle(&f[i], rows, report, cap);
    }
    for (int i = 0; i < nf; i++)
        if (f[i].fd >= 0)
            close(f[i].fd);
    if (!rc)
        addf(report, cap, "%s: %llu rows%s\n", fo->path, (unsigned long long)rows, changed ? " (made consistent)" : "");
    return rc;
}

int oebin_consistent(const char *rdir, char *report, size_t cap)
{
    report[0] = 0;
    char p[PATH_MAX];
    if (rec_path(p, sizeof p, rdir, "structure.oebin")) {
        addf(report, cap, "%s: path too long\n", rdir);
        return ONI_EINVALARG;
    }
    FILE *fp = fopen(p, "rb");
    if (!fp) {
        addf(report, cap, "cannot open %s: %s (no Open Ephys recording there)\n", p, strerror(errno));
        return ONI_EINVALARG;
    }
    size_t cap_text = 1 << 20, n = 0;
    char *text = malloc(cap_text);
    while (text) {
        size_t r = fread(text + n, 1, cap_text - n, fp);
        n += r;
        if (n < cap_text)
            break;
        char *g = cap_text < (64u << 20) ? realloc(text, cap_text * 2) : NULL;
        if (!g) {
            free(text);
            text = NULL;
            break;
        }
        text = g, cap_text *= 2;
    }
    fclose(fp);
    if (!text) {
        addf(report, cap, "%s: too large or out of memory\n", p);
        return ONI_EINVALARG;
    }
    struct oebin_index *ix = malloc(sizeof *ix);
    char why[256];
    int rc = ix ? oebin_parse_index(text, n, ix, why, sizeof why) : -1;
    free(text);
    if (rc) {
        addf(report, cap, "%s: %s\n", p, ix ? why : "out of memory");
        free(ix);
        return ONI_EINVALARG;
    }
    for (size_t i = 0; i < ix->n && !rc; i++)
        rc = folder_consistent(rdir, &ix->f[i], report, cap);
    free(ix);
    return rc;
}

int rec_recover(const char *dir, char *report, size_t cap)
{
    char rdir[PATH_MAX];
    if (snprintf(rdir, sizeof rdir, "%s/" OEBIN_RECORDING, dir) >= (int)sizeof rdir) {
        snprintf(report, cap, "%s: path too long\n", dir);
        return ONI_EINVALARG;
    }
    return oebin_consistent(rdir, report, cap);
}
