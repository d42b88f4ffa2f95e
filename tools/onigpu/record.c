/* record.c - the recorder of `onigpu read --record DIR` (record.h): one
 * buffered file per readable device, written with write(2) so that a failed
 * write is known to the byte and the file can be cut back to whole records.
 * The index is made at the start as devices.csv.part with its room taken
 * (a full disk cannot keep it from being written at the end) and renamed to
 * devices.csv once every file is on disk (fsync): its presence says the
 * recording ended and what the files hold. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "record.h"
#include "common/mkdirs.h"
#include "cli_oni.h"
#include "onix.h"
#include "oni/names.h" /* short names for tables and files */

#define REC_BUF (256u << 10) /* bytes buffered per device before a write */
#define ROW_MAX 192           /* room for one row of devices.csv (its fields are bounded) */
#define INDEX "devices.csv"
#define INDEX_PART "devices.csv.part"

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
    int index_fd;        /* INDEX_PART, or -1 */
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

/* Free r, closing what it opened; with unlink, also removing every file it
 * made (a recording that never started leaves nothing behind). */
static void rec_free(struct recorder *r, int unlink_files)
{
    char p[4096];
    for (oni_size_t i = 0; i < r->n; i++) {
        if (r->dev[i].fd >= 0) {
            close(r->dev[i].fd);
            path_of(r, r->dev[i].file, p, sizeof p);
            if (unlink_files)
                unlink(p);
        }
        free(r->dev[i].buf);
    }
    if (r->index_fd >= 0) {
        close(r->index_fd);
        path_of(r, INDEX_PART, p, sizeof p);
        if (unlink_files)
            unlink(p);
    }
    free(r->dev);
    free(r->dir);
    free(r);
}

void rec_abort(struct recorder *r)
{
    rec_free(r, 1);
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
    r->index_fd = -1;
    char p[4096];
    int rc, err = make_dirs(dir);
    if (err) {
        fprintf(stderr, "onigpu read: cannot make the directory %s: %s\n", dir, strerror(err));
        goto fail;
    }
    path_of(r, INDEX, p, sizeof p);
    if (access(p, F_OK) == 0) {
        fprintf(stderr, "onigpu read: %s holds a recording already (%s); give a new directory\n", dir, p);
        goto fail;
    }
    /* O_EXCL: a recording under way (or cut off) in dir is not taken over */
    path_of(r, INDEX_PART, p, sizeof p);
    if ((r->index_fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) < 0) {
        if (errno == EEXIST)
            fprintf(stderr, "onigpu read: %s holds a recording under way or cut off (%s); give a new directory\n",
                    dir, p);
        else
            say_errno(r, "cannot create", INDEX_PART, errno);
        goto fail;
    }
    if ((rc = posix_fallocate(r->index_fd, 0, (off_t)ROW_MAX * ((off_t)n + 1)))) {
        say_errno(r, "cannot make room for", INDEX_PART, rc);
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
    rec_abort(r); /* what this call made goes again */
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
            say_errno(r, "recording stopped: cannot write", v->file, err);
            if (ftruncate(v->fd, (off_t)whole) == 0)
                v->kept = whole;
            else
                say_errno(r, "cannot cut back to whole records", v->file, errno);
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

/* Fill INDEX_PART (its room taken at rec_open) with what each file holds
 * and rename it to INDEX, after every file is on disk. 0, or -1 after
 * saying why (INDEX_PART is then left, and no INDEX). */
static int write_index(struct recorder *r)
{
    char *csv = malloc((size_t)ROW_MAX * (r->n + 1)), idx[16];
    if (!csv) {
        fprintf(stderr, "onigpu read: out of memory\n");
        return -1;
    }
    int len = snprintf(csv, ROW_MAX, "file,idx,hub_dev,id,name,version,read_size,record_bytes,frames\n");
    for (oni_size_t i = 0; i < r->n; i++) {
        const struct rec_dev *v = &r->dev[i];
        len += snprintf(csv + len, ROW_MAX, "%s,%u,%s,%u,%.40s,%u,%u,%zu,%llu\n", v->file, v->d.idx,
                        cli_fmt_dev(v->d.idx, idx, sizeof idx), v->d.id, onix_device_tag((int)v->d.id), v->d.version,
                        v->d.read_size, v->rec_sz, (unsigned long long)v->frames);
    }
    int err = 0;
    ssize_t w = pwrite(r->index_fd, csv, (size_t)len, 0);
    free(csv);
    if (w != len)
        err = w < 0 ? errno : EIO;
    else if (ftruncate(r->index_fd, len) || fsync(r->index_fd))
        err = errno;
    char from[4096], to[4096];
    path_of(r, INDEX_PART, from, sizeof from);
    path_of(r, INDEX, to, sizeof to);
    if (!err && rename(from, to))
        err = errno;
    if (err) {
        say_errno(r, "cannot write", INDEX_PART, err);
        return -1;
    }
    int dfd = open(r->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* the rename on disk too */
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
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
        if (fsync(v->fd) | close(v->fd)) {
            say_errno(r, "cannot write", v->file, errno);
            rc = -1;
        }
        v->fd = -1;
    }
    if (write_index(r))
        rc = -1;
    rec_free(r, 0);
    return rc;
}
