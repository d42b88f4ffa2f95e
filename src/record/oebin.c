/* oebin.c - the Open Ephys binary format (record.h, docs/recording.md).
 *
 * Facts (no code taken) from the Open Ephys GUI documentation ("Binary
 * format", open-ephys.github.io/gui-docs/User-Manual/Recording-data/
 * Binary-format.html) and the reader of open-ephys-python-tools
 * (src/open_ephys/analysis/formats/BinaryRecording.py, 1.0.1): a recording
 * directory experimentN/recordingM/ holds structure.oebin (JSON: "GUI
 * version", "continuous", "events", "spikes"), continuous/<folder>/ with
 * continuous.dat (int16, channels interleaved), sample_numbers.npy (int64)
 * and timestamps.npy (float64 seconds), events/<folder>/TTL/ with
 * sample_numbers, timestamps, states (int16: +line on, -line off) and
 * full_words (uint64), spikes/<folder>/ with sample_numbers, timestamps,
 * electrode_indices, clusters and waveforms, events/MessageCenter/ with
 * text.npy (fixed-width byte strings, "|S<n>"), sample_numbers and
 * timestamps (load_messages reads them). Folder names are
 * "<processor>-<id>.<stream>": the reader takes the id between '-' and '.'.
 *
 * What onigpu adds, beside the files readers look for: host_ns.npy (int64,
 * CLOCK_MONOTONIC ns when the data reached the recording) in every folder.
 * Events' sample_numbers count the acquisition clock (their sample_rate in
 * structure.oebin is ACQCLKHZ); streams' count their own samples from 0.
 *
 * Consistency: data is appended as it comes; at every flush each .npy
 * header gets the rows its file holds and structure.oebin (written to a
 * temporary name, then renamed) lists what holds data. A reader, or
 * rec_recover after a crash, finds every stream whole up to the last flush. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>
#include "record/rec_int.h"
#include "oni/util/npy.h"
#include "record/oebin.h"

#define EV_BUF 1024
#define PROC "ONIX"
#define PROC_ID 100

struct npyf {
    int fd;
    char descr[8];
    int ndim;
    uint64_t cols;
    size_t row_bytes;
    uint64_t rows, hdr_rows; /* rows written, rows its header says */
};

struct oe_cont {
    char dir[PATH_MAX];
    int made, dat;
    struct npyf sn, ts, host;
};

struct oe_ev {
    char dir[PATH_MAX];
    int made;
    struct npyf sn, ts, st, words, host;
    uint32_t nbuf;
    int64_t b_sn[EV_BUF];
    double b_ts[EV_BUF];
    int16_t b_st[EV_BUF];
    uint64_t b_words[EV_BUF];
    int64_t b_host[EV_BUF];
};

struct oe_spk {
    char dir[PATH_MAX];
    int made;
    struct npyf sn, ts, el, cl, wf, host;
    uint32_t nbuf;
    int64_t b_sn[EV_BUF];
    double b_ts[EV_BUF];
    uint16_t b_el[EV_BUF], b_cl[EV_BUF];
    int64_t b_host[EV_BUF];
};

/* events/MessageCenter/: the text messages, as the GUI's Message Center
 * writes them (text.npy of fixed-width byte strings), made at the first. */
struct oe_msg {
    char dir[PATH_MAX];
    int made;
    struct npyf sn, ts, text, host;
};

struct oe {
    char rdir[PATH_MAX]; /* DIR/Record Node 101/experiment1/recording1 (OEBIN_RECORDING) */
    struct oe_msg m;
    struct oe_cont *c;
    struct oe_ev *e;
    struct oe_spk *s;
    int64_t *i64;        /* scratch of REC_ROWS */
    double *f64;
    int listed;          /* what structure.oebin lists, as a count of things with data */
    int made;            /* rdir is this recording's own (made by oe_open) */
};

static int say(struct rec_w *w, int err, const char *what, const char *path)
{
    snprintf(w->why, sizeof w->why, "%s %.180s: %s", what, path, strerror(err));
    return ONI_EWRITEFAILURE;
}

/* mkdir of a directory that must be new (excl) or may be there. */
static int make_dir(struct rec_w *w, const char *path, int excl)
{
    if (mkdir(path, 0777) == 0)
        return 0;
    if (errno == EEXIST && !excl) {
        struct stat sb;
        if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
            return 0;
        errno = ENOTDIR;
    }
    if (errno == EEXIST) {
        snprintf(w->why, sizeof w->why, "%s holds a recording already; give a new directory", path);
        return ONI_EINVALARG;
    }
    return say(w, errno, "cannot make the directory", path);
}

static int npyf_create(struct rec_w *w, struct npyf *f, const char *dir, const char *name, const char *descr,
                       int ndim, uint64_t cols, size_t item)
{
    char p[PATH_MAX], h[NPY_HDR];
    memset(f, 0, sizeof *f);
    f->fd = -1;
    snprintf(f->descr, sizeof f->descr, "%s", descr);
    f->ndim = ndim, f->cols = cols;
    f->row_bytes = item * (ndim == 2 ? cols : 1);
    if (rec_path(p, sizeof p, dir, name))
        return say(w, ENAMETOOLONG, "cannot create", dir);
    if ((f->fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) < 0)
        return say(w, errno, "cannot create", p);
    npy_header(h, descr, ndim, (const uint64_t[]){0, cols});
    int err = rec_write_all(f->fd, h, NPY_HDR, -1);
    if (err)
        return say(w, err, "cannot write", p);
    w->bytes += NPY_HDR;
    return 0;
}

static int npyf_append(struct rec_w *w, struct npyf *f, const void *p, uint64_t rows, const char *dir)
{
    if (!rows || !f->row_bytes)
        return 0;
    size_t len = (size_t)rows * f->row_bytes;
    int err = rec_write_all(f->fd, p, len, -1);
    if (err)
        return say(w, err, "cannot write into", dir);
    f->rows += rows;
    w->bytes += len;
    return 0;
}

static void npyf_rows(struct npyf *f, uint64_t rows)
{
    f->rows += rows; /* a file of zero-width rows (waveforms) grows only in its header */
}

static int npyf_header(struct rec_w *w, struct npyf *f, const char *dir)
{
    if (f->fd < 0 || f->hdr_rows == f->rows)
        return 0;
    char h[NPY_HDR];
    npy_header(h, f->descr, f->ndim, (const uint64_t[]){f->rows, f->cols});
    int err = rec_write_all(f->fd, h, NPY_HDR, 0);
    if (err)
        return say(w, err, "cannot update a header in", dir);
    f->hdr_rows = f->rows;
    return 0;
}

static void npyf_close(struct npyf *f)
{
    if (f->fd >= 0) {
        fsync(f->fd);
        close(f->fd);
    }
    f->fd = -1;
}

/* --- folders, made at their first data ------------------------------------- */

static int folder(struct rec_w *w, struct oe *o, const char *kind, const char *name, const char *sub, char *out)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s/%s/%s-%d.%s", o->rdir, kind, PROC, PROC_ID, name) >= (int)sizeof p)
        return say(w, ENAMETOOLONG, "cannot make", o->rdir);
    int rc = make_dir(w, p, 1);
    if (rc)
        return rc;
    if (sub) {
        size_t n = strlen(p);
        if (n + 1 + strlen(sub) >= PATH_MAX)
            return say(w, ENAMETOOLONG, "cannot make", p);
        snprintf(p + n, sizeof p - n, "/%s", sub);
        if ((rc = make_dir(w, p, 1)))
            return rc;
    }
    snprintf(out, PATH_MAX, "%s", p);
    return 0;
}

static int make_cont(struct rec_w *w, struct oe *o, uint32_t s)
{
    struct oe_cont *c = &o->c[s];
    int rc = folder(w, o, "continuous", w->st[s].name, NULL, c->dir);
    char p[PATH_MAX];
    if (rc)
        return rc;
    c->made = 1; /* its files are closed from here on, whatever follows */
    if (rec_path(p, sizeof p, c->dir, "continuous.dat"))
        return say(w, ENAMETOOLONG, "cannot create", c->dir);
    if ((c->dat = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) < 0)
        return say(w, errno, "cannot create", p);
    if ((rc = npyf_create(w, &c->sn, c->dir, "sample_numbers.npy", "<i8", 1, 0, 8)) ||
        (rc = npyf_create(w, &c->ts, c->dir, "timestamps.npy", "<f8", 1, 0, 8)) ||
        (rc = npyf_create(w, &c->host, c->dir, "host_ns.npy", "<i8", 1, 0, 8)))
        return rc;
    return 0;
}

static int make_ev(struct rec_w *w, struct oe *o, uint32_t e)
{
    struct oe_ev *v = &o->e[e];
    int rc = folder(w, o, "events", w->ev[e].name, "TTL", v->dir);
    v->made = !rc;
    if (rc || (rc = npyf_create(w, &v->sn, v->dir, "sample_numbers.npy", "<i8", 1, 0, 8)) ||
        (rc = npyf_create(w, &v->ts, v->dir, "timestamps.npy", "<f8", 1, 0, 8)) ||
        (rc = npyf_create(w, &v->st, v->dir, "states.npy", "<i2", 1, 0, 2)) ||
        (rc = npyf_create(w, &v->words, v->dir, "full_words.npy", "<u8", 1, 0, 8)) ||
        (rc = npyf_create(w, &v->host, v->dir, "host_ns.npy", "<i8", 1, 0, 8)))
        return rc;
    return 0;
}

static int make_spk(struct rec_w *w, struct oe *o, uint32_t s)
{
    struct oe_spk *v = &o->s[s];
    char name[REC_NAME + 8];
    snprintf(name, sizeof name, "%s-spikes", w->st[s].name);
    int rc = folder(w, o, "spikes", name, NULL, v->dir);
    v->made = !rc;
    if (rc || (rc = npyf_create(w, &v->sn, v->dir, "sample_numbers.npy", "<i8", 1, 0, 8)) ||
        (rc = npyf_create(w, &v->ts, v->dir, "timestamps.npy", "<f8", 1, 0, 8)) ||
        (rc = npyf_create(w, &v->el, v->dir, "electrode_indices.npy", "<u2", 1, 0, 2)) ||
        (rc = npyf_create(w, &v->cl, v->dir, "clusters.npy", "<u2", 1, 0, 2)) ||
        (rc = npyf_create(w, &v->wf, v->dir, "waveforms.npy", "<f4", 2, 0, 4)) ||
        (rc = npyf_create(w, &v->host, v->dir, "host_ns.npy", "<i8", 1, 0, 8)))
        return rc;
    return 0;
}

/* --- structure.oebin ------------------------------------------------------- */

static json_t *cont_json(const struct rec_w *w, uint32_t s)
{
    const struct rec_stream *st = &w->st[s];
    char folder_name[REC_NAME + 16];
    snprintf(folder_name, sizeof folder_name, "%s-%d.%s/", PROC, PROC_ID, st->name);
    json_t *ch = json_array();
    for (uint32_t i = 0; i < st->nchan; i++) {
        char id[96];
        snprintf(id, sizeof id, "onigpu.%s.%s", st->name, st->chan[i].name);
        json_array_append_new(ch, json_pack("{s:s, s:s, s:s, s:s, s:f, s:s}", "channel_name", st->chan[i].name,
                                            "description", st->desc, "identifier", id, "history", PROC,
                                            "bit_volts", st->chan[i].bit_volts, "units", st->units));
    }
    return json_pack("{s:s, s:f, s:s, s:i, s:s, s:s, s:i, s:i, s:o}", "folder_name", folder_name, "sample_rate",
                     st->rate_hz, "source_processor_name", PROC, "source_processor_id", PROC_ID, "stream_name",
                     st->name, "recorded_processor", PROC, "recorded_processor_id", PROC_ID, "num_channels",
                     (int)st->nchan, "channels", ch);
}

static json_t *ev_json(const struct rec_w *w, uint32_t e)
{
    const struct rec_events *ev = &w->ev[e];
    char folder_name[REC_NAME + 24], id[64];
    snprintf(folder_name, sizeof folder_name, "%s-%d.%s/TTL/", PROC, PROC_ID, ev->name);
    snprintf(id, sizeof id, "onigpu.%s", ev->name);
    return json_pack("{s:s, s:s, s:s, s:s, s:f, s:s, s:i, s:s, s:s}", "folder_name", folder_name, "channel_name",
                     ev->name, "description", ev->desc, "identifier", id, "sample_rate", w->acq_hz, "type", "int16",
                     "num_channels", (int)ev->lines, "source_processor", PROC, "stream_name", ev->name);
}

static json_t *msg_json(const struct rec_w *w)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:f, s:s, s:i, s:s, s:s}", "folder_name", "MessageCenter/",
                     "channel_name", "Messages", "description",
                     "changes made during the run (the live view's threshold and trace channels), at the "
                     "acquisition clock they took effect", "identifier", "onigpu.messages", "sample_rate", w->acq_hz,
                     "type", "string", "num_channels", 1, "source_processor", "Message Center", "stream_name",
                     "MessageCenter");
}

static json_t *spk_json(const struct rec_w *w, uint32_t s)
{
    const struct rec_stream *st = &w->st[s];
    char folder_name[REC_NAME + 24], name[REC_NAME + 8];
    snprintf(name, sizeof name, "%s-spikes", st->name);
    snprintf(folder_name, sizeof folder_name, "%s-%d.%s/", PROC, PROC_ID, name);
    json_t *src = json_array();
    json_array_append_new(src, json_pack("{s:s, s:f}", "channel_name", "any", "bit_volts", st->chan[0].bit_volts));
    return json_pack("{s:s, s:s, s:s, s:f, s:i, s:s, s:s, s:o}", "folder", folder_name, "name", name, "stream_name",
                     st->name, "sample_rate", st->rate_hz, "num_channels", 1, "source_processor", PROC,
                     "description", "onigpu's detections: electrode_indices = the stream's channel (0-based), "
                                    "clusters = sorted unit + 1 (0 unsorted), no waveforms",
                     "source_channels", src);
}

/* Things holding data: what structure.oebin lists. */
static int count_listed(const struct rec_w *w, const struct oe *o)
{
    int n = 0;
    for (uint32_t s = 0; s < w->nst; s++)
        n += o->c[s].made + o->s[s].made;
    for (uint32_t e = 0; e < w->nev; e++)
        n += o->e[e].made;
    return n + o->m.made;
}

static int write_oebin(struct rec_w *w, struct oe *o)
{
    json_t *root = json_object(), *c = json_array(), *e = json_array(), *s = json_array();
    json_object_set_new(root, "GUI version", json_string("0.6.7"));
    for (uint32_t i = 0; i < w->nst; i++)
        if (o->c[i].made)
            json_array_append_new(c, cont_json(w, i));
    for (uint32_t i = 0; i < w->nev; i++)
        if (o->e[i].made)
            json_array_append_new(e, ev_json(w, i));
    if (o->m.made)
        json_array_append_new(e, msg_json(w));
    for (uint32_t i = 0; i < w->nst; i++)
        if (o->s[i].made)
            json_array_append_new(s, spk_json(w, i));
    json_object_set_new(root, "continuous", c);
    json_object_set_new(root, "events", e);
    json_object_set_new(root, "spikes", s);
    char *text = json_dumps(root, JSON_INDENT(4) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!text) {
        snprintf(w->why, sizeof w->why, "out of memory writing structure.oebin");
        return ONI_EBADALLOC;
    }
    char tmp[PATH_MAX], to[PATH_MAX];
    int rc = 0;
    if (rec_path(tmp, sizeof tmp, o->rdir, "structure.oebin.tmp") || rec_path(to, sizeof to, o->rdir, "structure.oebin"))
        rc = say(w, ENAMETOOLONG, "cannot write", o->rdir);
    int fd = rc ? -1 : open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (!rc && fd < 0)
        rc = say(w, errno, "cannot write", tmp);
    int err = fd < 0 ? 0 : rec_write_all(fd, text, strlen(text), -1);
    if (!rc && err)
        rc = say(w, err, "cannot write", tmp);
    if (fd >= 0 && close(fd) && !rc)
        rc = say(w, errno, "cannot write", tmp);
    if (!rc && rename(tmp, to))
        rc = say(w, errno, "cannot rename", tmp);
    if (rc && fd >= 0)
        unlink(tmp);
    if (!rc) {
        w->bytes += strlen(text);
        o->listed = count_listed(w, o);
    }
    free(text);
    return rc;
}

/* --- the format's functions ------------------------------------------------ */

static int oe_open(struct rec_w *w)
{
    struct oe *o = calloc(1, sizeof *o);
    if (!o)
        return ONI_EBADALLOC;
    w->fmt_state = o;
    o->c = calloc(w->nst ? w->nst : 1, sizeof *o->c);
    o->e = calloc(w->nev ? w->nev : 1, sizeof *o->e);
    o->s = calloc(w->nst ? w->nst : 1, sizeof *o->s);
    o->i64 = malloc(REC_ROWS * sizeof *o->i64);
    o->f64 = malloc(REC_ROWS * sizeof *o->f64);
    if (!o->c || !o->e || !o->s || !o->i64 || !o->f64) {
        snprintf(w->why, sizeof w->why, "out of memory");
        return ONI_EBADALLOC;
    }
    for (uint32_t i = 0; i < w->nst; i++) {
        struct oe_cont *c = &o->c[i];
        struct oe_spk *v = &o->s[i];
        c->dat = c->sn.fd = c->ts.fd = c->host.fd = -1;
        v->sn.fd = v->ts.fd = v->el.fd = v->cl.fd = v->wf.fd = v->host.fd = -1;
    }
    for (uint32_t i = 0; i < w->nev; i++) {
        struct oe_ev *v = &o->e[i];
        v->sn.fd = v->ts.fd = v->st.fd = v->words.fd = v->host.fd = -1;
    }
    char p[PATH_MAX];
    int rc = make_dir(w, w->dir, 0);
    if (rc)
        return rc;
    /* the GUI's layout: a record node, its first experiment, its first recording */
    static const char *const level[3] = {OEBIN_NODE, "experiment1", "recording1"};
    snprintf(o->rdir, sizeof o->rdir, "%s", w->dir);
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s", o->rdir);
        if (rec_path(o->rdir, sizeof o->rdir, p, level[i]))
            return say(w, ENAMETOOLONG, "cannot make", p);
        if ((rc = make_dir(w, o->rdir, 1)))
            return rc;
    }
    o->made = 1;
    static const char *const sub[3] = {"continuous", "events", "spikes"};
    for (int i = 0; i < 3; i++) {
        if (rec_path(p, sizeof p, o->rdir, sub[i]))
            return say(w, ENAMETOOLONG, "cannot make", o->rdir);
        if ((rc = make_dir(w, p, 1)))
            return rc;
    }
    return write_oebin(w, o);
}

static int oe_samples(struct rec_w *w, uint32_t s, const int16_t *rows, uint32_t n, const uint64_t *clk,
                      const uint64_t *host, uint64_t first)
{
    struct oe *o = w->fmt_state;
    struct oe_cont *c = &o->c[s];
    int rc = c->made ? 0 : make_cont(w, o, s);
    if (rc)
        return rc;
    size_t len = (size_t)n * w->st[s].nchan * 2;
    int err = rec_write_all(c->dat, rows, len, -1);
    if (err)
        return say(w, err, "cannot write into", c->dir);
    w->bytes += len;
    for (uint32_t i = 0; i < n; i++)
        o->i64[i] = (int64_t)(first + i), o->f64[i] = (double)clk[i] / w->acq_hz;
    if ((rc = npyf_append(w, &c->sn, o->i64, n, c->dir)) || (rc = npyf_append(w, &c->ts, o->f64, n, c->dir)))
        return rc;
    return npyf_append(w, &c->host, host, n, c->dir);
}

static int ev_flush(struct rec_w *w, struct oe_ev *v)
{
    int rc;
    if ((rc = npyf_append(w, &v->sn, v->b_sn, v->nbuf, v->dir)) ||
        (rc = npyf_append(w, &v->ts, v->b_ts, v->nbuf, v->dir)) ||
        (rc = npyf_append(w, &v->st, v->b_st, v->nbuf, v->dir)) ||
        (rc = npyf_append(w, &v->words, v->b_words, v->nbuf, v->dir)) ||
        (rc = npyf_append(w, &v->host, v->b_host, v->nbuf, v->dir)))
        return rc;
    v->nbuf = 0;
    return 0;
}

static int oe_ttl(struct rec_w *w, uint32_t e, uint64_t clk, uint32_t line, int on, uint64_t word, uint64_t host)
{
    struct oe *o = w->fmt_state;
    struct oe_ev *v = &o->e[e];
    int rc = v->made ? 0 : make_ev(w, o, e);
    if (rc)
        return rc;
    uint32_t i = v->nbuf++;
    v->b_sn[i] = (int64_t)clk;
    v->b_ts[i] = (double)clk / w->acq_hz;
    v->b_st[i] = (int16_t)(on ? (int)line : -(int)line);
    v->b_words[i] = word;
    v->b_host[i] = (int64_t)host;
    return v->nbuf == EV_BUF ? ev_flush(w, v) : 0;
}

static int spk_flush(struct rec_w *w, struct oe_spk *v)
{
    int rc;
    if ((rc = npyf_append(w, &v->sn, v->b_sn, v->nbuf, v->dir)) ||
        (rc = npyf_append(w, &v->ts, v->b_ts, v->nbuf, v->dir)) ||
        (rc = npyf_append(w, &v->el, v->b_el, v->nbuf, v->dir)) ||
        (rc = npyf_append(w, &v->cl, v->b_cl, v->nbuf, v->dir)) ||
        (rc = npyf_append(w, &v->host, v->b_host, v->nbuf, v->dir)))
        return rc;
    npyf_rows(&v->wf, v->nbuf);
    v->nbuf = 0;
    return 0;
}

static int oe_spike(struct rec_w *w, uint32_t s, uint64_t clk, uint64_t sample, uint32_t chan, int32_t unit,
                    uint64_t host)
{
    struct oe *o = w->fmt_state;
    struct oe_spk *v = &o->s[s];
    int rc = v->made ? 0 : make_spk(w, o, s);
    if (rc)
        return rc;
    uint32_t i = v->nbuf++;
    v->b_sn[i] = (int64_t)sample;
    v->b_ts[i] = (double)clk / w->acq_hz;
    v->b_el[i] = (uint16_t)chan;
    v->b_cl[i] = (uint16_t)(unit < 0 ? 0 : unit + 1);
    v->b_host[i] = (int64_t)host;
    return v->nbuf == EV_BUF ? spk_flush(w, v) : 0;
}

static int make_msg(struct rec_w *w, struct oe *o)
{
    struct oe_msg *m = &o->m;
    char desc[16];
    snprintf(desc, sizeof desc, "|S%d", REC_MSG_TEXT);
    if (snprintf(m->dir, sizeof m->dir, "%s/events/MessageCenter", o->rdir) >= (int)sizeof m->dir)
        return say(w, ENAMETOOLONG, "cannot make", o->rdir);
    char ev[PATH_MAX];
    if (snprintf(ev, sizeof ev, "%s/events", o->rdir) >= (int)sizeof ev)
        return say(w, ENAMETOOLONG, "cannot make", o->rdir);
    m->sn.fd = m->ts.fd = m->text.fd = m->host.fd = -1; /* closed at the end: those made */
    int rc = make_dir(w, ev, 0);
    if (rc || (rc = make_dir(w, m->dir, 1)))
        return rc;
    m->made = 1;
    if ((rc = npyf_create(w, &m->sn, m->dir, "sample_numbers.npy", "<i8", 1, 0, 8)) ||
        (rc = npyf_create(w, &m->ts, m->dir, "timestamps.npy", "<f8", 1, 0, 8)) ||
        (rc = npyf_create(w, &m->text, m->dir, "text.npy", desc, 1, 0, REC_MSG_TEXT)) ||
        (rc = npyf_create(w, &m->host, m->dir, "host_ns.npy", "<i8", 1, 0, 8)))
        return rc;
    return 0;
}

/* A message: written at once (they are few); its sample number counts the
 * acquisition clock, as the TTL events' do. */
static int oe_message(struct rec_w *w, uint64_t clk, const char *text, uint64_t host)
{
    struct oe *o = w->fmt_state;
    int rc = o->m.made ? 0 : make_msg(w, o);
    char t[REC_MSG_TEXT] = {0};
    memcpy(t, text, strnlen(text, REC_MSG_TEXT));
    int64_t sn = (int64_t)clk, h = (int64_t)host;
    double ts = (double)clk / w->acq_hz;
    struct oe_msg *m = &o->m;
    if (rc || (rc = npyf_append(w, &m->sn, &sn, 1, m->dir)) || (rc = npyf_append(w, &m->ts, &ts, 1, m->dir)) ||
        (rc = npyf_append(w, &m->text, t, 1, m->dir)))
        return rc;
    return npyf_append(w, &m->host, &h, 1, m->dir);
}

static int oe_flush(struct rec_w *w)
{
    struct oe *o = w->fmt_state;
    int rc = 0;
    struct oe_msg *m = &o->m;
    if (m->made && !(rc = npyf_header(w, &m->sn, m->dir)) && !(rc = npyf_header(w, &m->ts, m->dir)) &&
        !(rc = npyf_header(w, &m->text, m->dir)))
        rc = npyf_header(w, &m->host, m->dir);
    for (uint32_t e = 0; e < w->nev && !rc; e++) {
        struct oe_ev *v = &o->e[e];
        if (v->made && !(rc = ev_flush(w, v)))
            if (!(rc = npyf_header(w, &v->sn, v->dir)) && !(rc = npyf_header(w, &v->ts, v->dir)) &&
                !(rc = npyf_header(w, &v->st, v->dir)) && !(rc = npyf_header(w, &v->words, v->dir)))
                rc = npyf_header(w, &v->host, v->dir);
    }
    for (uint32_t s = 0; s < w->nst && !rc; s++) {
        struct oe_cont *c = &o->c[s];
        if (c->made && !(rc = npyf_header(w, &c->sn, c->dir)) && !(rc = npyf_header(w, &c->ts, c->dir)))
            rc = npyf_header(w, &c->host, c->dir);
        struct oe_spk *v = &o->s[s];
        if (!rc && v->made && !(rc = spk_flush(w, v)))
            if (!(rc = npyf_header(w, &v->sn, v->dir)) && !(rc = npyf_header(w, &v->ts, v->dir)) &&
                !(rc = npyf_header(w, &v->el, v->dir)) && !(rc = npyf_header(w, &v->cl, v->dir)) &&
                !(rc = npyf_header(w, &v->wf, v->dir)))
                rc = npyf_header(w, &v->host, v->dir);
    }
    if (!rc && count_listed(w, o) != o->listed)
        rc = write_oebin(w, o);
    return rc;
}

static int oe_close(struct rec_w *w, int failed)
{
    struct oe *o = w->fmt_state;
    if (!o)
        return 0;
    int rc = failed || !o->made ? 0 : oe_flush(w);
    uint32_t nst = o->c && o->s ? w->nst : 0, nev = o->e ? w->nev : 0; /* an open that failed early */
    /* only what was made has files */
    for (uint32_t s = 0; s < nst; s++) {
        struct oe_cont *c = &o->c[s];
        if (c->dat >= 0) {
            if (fsync(c->dat) && !rc && errno != EINVAL)
                rc = say(w, errno, "cannot write", c->dir);
            close(c->dat);
        }
        if (c->made)
            npyf_close(&c->sn), npyf_close(&c->ts), npyf_close(&c->host);
        struct oe_spk *v = &o->s[s];
        if (v->made)
            npyf_close(&v->sn), npyf_close(&v->ts), npyf_close(&v->el), npyf_close(&v->cl), npyf_close(&v->wf),
                npyf_close(&v->host);
    }
    for (uint32_t e = 0; e < nev; e++) {
        struct oe_ev *v = &o->e[e];
        if (v->made)
            npyf_close(&v->sn), npyf_close(&v->ts), npyf_close(&v->st), npyf_close(&v->words),
                npyf_close(&v->host);
    }
    if (o->m.made)
        npyf_close(&o->m.sn), npyf_close(&o->m.ts), npyf_close(&o->m.text), npyf_close(&o->m.host);
    if ((failed || rc) && o->made) { /* what the failed write left: cut back to whole rows everywhere */
        char report[512];
        if (count_listed(w, o) != o->listed) /* list what was made since the last flush, if it can */
            write_oebin(w, o);
        int rrc = oebin_consistent(o->rdir, report, sizeof report);
        if (rrc && !rc)
            rc = rrc;
    }
    free(o->c), free(o->e), free(o->s), free(o->i64), free(o->f64);
    free(o);
    w->fmt_state = NULL;
    return rc;
}

const struct rec_fmt rec_fmt_openephys = {"openephys", oe_open, oe_samples, oe_ttl, oe_spike,
                                          oe_message, oe_flush, oe_close};
