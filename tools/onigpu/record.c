/* record.c - the recorder of `onigpu read --record DIR` (record.h): one
 * buffered file per readable device, written with write(2) so that a failed
 * write is known to the byte and the file can be cut back to whole records. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "record.h"
#include "bench/bench.h"
#include "cli_oni.h"
#include "onix.h"

#define REC_BUF (256u << 10) /* bytes buffered per device before a write */

struct rec_dev {
    oni_device_t d;
    char file[32];   /* name in the directory */
    int fd;
    size_t rec_sz;   /* 8 + read_size */
    uint8_t *buf;    /* allocated at the device's first frame */
    size_t cap, len;
    uint64_t frames; /* records in the file or the buffer */
    uint64_t kept;   /* bytes written to the file */
};

struct recorder {
    char *dir;
    struct rec_dev *dev; /* readable devices, by index as the table is */
    oni_size_t n;
    int failed;
};

static void path_of(const struct recorder *r, const char *file, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/%s", r->dir, file);
}

static void say_errno(const struct recorder *r, const char *what, const char *file, int err)
{
    char p[4096];
    path_of(r, file, p, sizeof p);
    fprintf(stderr, "onigpu read: %s %s: %s\n", what, p, strerror(err));
}

/* Free r, closing what it opened. */
static void rec_free(struct recorder *r)
{
    for (oni_size_t i = 0; i < r->n; i++) {
        if (r->dev[i].fd >= 0)
            close(r->dev[i].fd);
        free(r->dev[i].buf);
    }
    free(r->dev);
    free(r->dir);
    free(r);
}

struct recorder *rec_open(const char *dir, const oni_device_t *t, oni_size_t n)
{
    struct recorder *r = calloc(1, sizeof *r);
    if (!r || !(r->dir = strdup(dir)) || !(r->dev = calloc(n ? n : 1, sizeof *r->dev))) {
        fprintf(stderr, "onigpu read: out of memory\n");
        if (r)
            free(r->dir);
        free(r);
        return NULL;
    }
    char p[4096];
    int rc = bench_make_dirs(dir);
    if (rc) {
        fprintf(stderr, "onigpu read: cannot make the directory %s: %s\n", dir, oni_error_str(rc));
        goto fail;
    }
    path_of(r, "devices.csv", p, sizeof p);
    if (access(p, F_OK) == 0) {
        fprintf(stderr, "onigpu read: %s holds a recording already (%s); give a new directory\n", dir, p);
        goto fail;
    }
    for (oni_size_t i = 0; i < n; i++) {
        if (!t[i].read_size)
            continue;
        struct rec_dev *v = &r->dev[r->n++];
        v->d = t[i];
        v->rec_sz = 8 + (size_t)t[i].read_size;
        snprintf(v->file, sizeof v->file, "hub%u-dev%u.raw", t[i].idx >> 8, t[i].idx & 0xFF);
        path_of(r, v->file, p, sizeof p);
        /* O_EXCL: a file left by another recording is never overwritten */
        v->fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (v->fd < 0) {
            say_errno(r, "cannot create", v->file, errno);
            goto fail;
        }
    }
    return r;
fail:
    for (oni_size_t i = 0; i < r->n; i++) { /* what this call made goes again */
        path_of(r, r->dev[i].file, p, sizeof p);
        if (r->dev[i].fd >= 0)
            unlink(p);
    }
    rec_free(r);
    return NULL;
}

/* Write v's buffer out. On a failure, cut the file back to whole records
 * (what the buffer held of the last one is lost with the rest of it) and
 * return -1 after saying why. */
static int flush_dev(struct recorder *r, struct rec_dev *v)
{
    size_t done = 0;
    while (done < v->len) {
        ssize_t w = write(v->fd, v->buf + done, v->len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int err = w < 0 ? errno : EIO;
            v->kept += done;
            uint64_t whole = v->kept / v->rec_sz * v->rec_sz;
            v->frames = whole / v->rec_sz;
            if (ftruncate(v->fd, (off_t)whole) == 0)
                v->kept = whole;
            say_errno(r, "recording stopped: cannot write", v->file, err);
            v->len = 0;
            r->failed = 1;
            return -1;
        }
        done += (size_t)w;
    }
    v->kept += done;
    v->len = 0;
    return 0;
}

static struct rec_dev *find_dev(struct recorder *r, oni_dev_idx_t idx)
{
    oni_size_t lo = 0, hi = r->n; /* the table is sorted by index (oni_init_ctx) */
    while (lo < hi) {
        oni_size_t mid = lo + (hi - lo) / 2;
        if (r->dev[mid].d.idx < idx)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < r->n && r->dev[lo].d.idx == idx ? &r->dev[lo] : NULL;
}

int rec_frame(struct recorder *r, const oni_frame_t *f)
{
    if (r->failed)
        return -1;
    struct rec_dev *v = find_dev(r, f->dev_idx);
    if (!v || f->data_sz != v->d.read_size) {
        fprintf(stderr, "onigpu read: recording stopped: a frame of device %u with %u bytes, not in the table\n",
                f->dev_idx, f->data_sz);
        r->failed = 1;
        return -1;
    }
    if (!v->buf) {
        v->cap = v->rec_sz > REC_BUF ? v->rec_sz : REC_BUF;
        if (!(v->buf = malloc(v->cap))) {
            fprintf(stderr, "onigpu read: recording stopped: out of memory\n");
            r->failed = 1;
            return -1;
        }
    }
    if (v->cap - v->len < v->rec_sz && flush_dev(r, v))
        return -1;
    memcpy(v->buf + v->len, &f->time, 8);
    memcpy(v->buf + v->len + 8, f->data, f->data_sz);
    v->len += v->rec_sz;
    v->frames++;
    return 0;
}

/* devices.csv: what each file holds. Written last, so that its presence
 * says the recording ended (rec_open refuses such a directory). */
static int write_index(struct recorder *r)
{
    char p[4096], idx[16];
    path_of(r, "devices.csv", p, sizeof p);
    FILE *f = fopen(p, "wx");
    if (!f) {
        say_errno(r, "cannot create", "devices.csv", errno);
        return -1;
    }
    fprintf(f, "file,idx,hub_dev,id,name,version,read_size,record_bytes,frames\n");
    for (oni_size_t i = 0; i < r->n; i++) {
        const struct rec_dev *v = &r->dev[i];
        fprintf(f, "%s,%u,%s,%u,%s,%u,%u,%zu,%llu\n", v->file, v->d.idx, cli_fmt_dev(v->d.idx, idx, sizeof idx),
                v->d.id, onix_device_str((int)v->d.id), v->d.version, v->d.read_size, v->rec_sz,
                (unsigned long long)v->frames);
    }
    int err = ferror(f) ? EIO : 0;
    if (fclose(f) && !err)
        err = errno;
    if (err) {
        say_errno(r, "cannot write", "devices.csv", err);
        return -1;
    }
    return 0;
}

int rec_close(struct recorder *r)
{
    int rc = r->failed ? -1 : 0;
    for (oni_size_t i = 0; i < r->n; i++) {
        struct rec_dev *v = &r->dev[i];
        if (v->len && flush_dev(r, v))
            rc = -1;
        if (close(v->fd)) {
            say_errno(r, "cannot write", v->file, errno);
            rc = -1;
        }
        v->fd = -1;
    }
    if (write_index(r))
        rc = -1;
    rec_free(r);
    return rc;
}
