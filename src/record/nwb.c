/* nwb.c - NWB 2.x through the HDF5 C library (record.h, docs/recording.md).
 *
 * Facts (no code taken) from the NWB core schema 2.7.0 (github.com/
 * NeurodataWithoutBorders/nwb-schema, core/nwb.file.yaml, nwb.base.yaml,
 * nwb.ecephys.yaml, nwb.epoch.yaml, nwb.device.yaml) and hdmf-common's
 * table.yaml: the root group is an NWBFile (attribute nwb_version; datasets
 * file_create_date, identifier, session_description, session_start_time,
 * timestamps_reference_time; groups acquisition, analysis, processing,
 * stimulus/presentation, stimulus/templates, general); every typed object
 * carries the attributes neurodata_type, namespace and object_id; an
 * ElectricalSeries has data (with unit, conversion, offset, resolution),
 * timestamps (interval, unit) and electrodes, a DynamicTableRegion into
 * general/extracellular_ephys/electrodes (a DynamicTable: colnames,
 * description, id, and the columns location, group, group_name, here also x,
 * y); an ElectrodeGroup has description, location and a link to its Device.
 * Stimuli are a TimeIntervals table (intervals/stimuli: start_time,
 * stop_time, and a pins column), the DigitalIO inputs a TimeSeries of the
 * input word at each change, the messages (changes made during the run) an
 * AnnotationSeries, acquisition/messages (nwb.misc.yaml: text data with
 * timestamps).
 *
 * Live: every dataset that grows is chunked and extendible; once all are
 * made, the file is switched to HDF5's single-writer / multiple-reader mode
 * (H5Fstart_swmr_write), so a reader can follow it (h5py: swmr=True), and
 * every flush leaves it readable up to there. */
#include <stdio.h>
#include <string.h>
#include "record/rec_int.h"

#if ONIGPU_HAVE_HDF5
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <hdf5.h>

#define NWB_VERSION "2.7.0"
#define CHUNK_ROWS 1024
#define EV_CHUNK 256

struct nwb_series {
    hid_t g, data, ts;
    uint64_t n;
};

struct nwb {
    hid_t f, str;          /* the file; the variable-length UTF-8 string type */
    struct nwb_series *s;  /* per stream */
    struct nwb_series dio; /* DigitalInputs: data = word */
    int have_dio;
    double dio_last;       /* time of the last DigitalInputs row */
    hid_t stim_id, stim_start, stim_stop, stim_pins; /* intervals/stimuli columns */
    struct nwb_series msg; /* acquisition/messages: an AnnotationSeries */
    hid_t msg_type;        /* its text: fixed-width UTF-8 strings (SWMR appends no variable-length data) */
    uint64_t nstim;
    double *ts;            /* scratch */
};

static int h5fail(struct rec_w *w, const char *what)
{
    snprintf(w->why, sizeof w->why, "HDF5: cannot %s in %.150s/onigpu.nwb", what, w->dir);
    return ONI_EWRITEFAILURE;
}

static void uuid4(char out[37])
{
    unsigned char b[16];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, b, 16) != 16)
        for (int i = 0; i < 16; i++)
            b[i] = (unsigned char)(rand() >> 4);
    if (fd >= 0)
        close(fd);
    b[6] = (b[6] & 0x0F) | 0x40, b[8] = (b[8] & 0x3F) | 0x80;
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3],
             b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

static int attr_str(struct nwb *o, hid_t loc, const char *name, const char *v)
{
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(loc, name, o->str, sp, H5P_DEFAULT, H5P_DEFAULT);
    int rc = a < 0 || H5Awrite(a, o->str, &v) < 0;
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(sp);
    return rc;
}

static int attr_num(hid_t loc, const char *name, hid_t type, const void *v)
{
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(loc, name, type, sp, H5P_DEFAULT, H5P_DEFAULT);
    int rc = a < 0 || H5Awrite(a, type, v) < 0;
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(sp);
    return rc;
}

static int attr_strs(struct nwb *o, hid_t loc, const char *name, const char **v, hsize_t n)
{
    hid_t sp = H5Screate_simple(1, &n, NULL);
    hid_t a = H5Acreate2(loc, name, o->str, sp, H5P_DEFAULT, H5P_DEFAULT);
    int rc = a < 0 || H5Awrite(a, o->str, v) < 0;
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(sp);
    return rc;
}

/* The three attributes every typed object has. */
static int typed(struct nwb *o, hid_t loc, const char *ns, const char *type)
{
    char id[37];
    uuid4(id);
    return attr_str(o, loc, "namespace", ns) | attr_str(o, loc, "neurodata_type", type) |
           attr_str(o, loc, "object_id", id);
}

static hid_t group(hid_t loc, const char *name)
{
    return H5Gcreate2(loc, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
}

static int str_dataset(struct nwb *o, hid_t loc, const char *name, const char *v)
{
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t d = H5Dcreate2(loc, name, o->str, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int rc = d < 0 || H5Dwrite(d, o->str, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v) < 0;
    if (d >= 0)
        H5Dclose(d);
    H5Sclose(sp);
    return rc;
}

/* A fixed 1-D dataset of n elements of type from v; its id (closed by the caller) or -1. */
static hid_t vec(hid_t loc, const char *name, hid_t type, const void *v, hsize_t n)
{
    hid_t sp = H5Screate_simple(1, &n, NULL);
    hid_t d = H5Dcreate2(loc, name, type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (d >= 0 && n && H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0) {
        H5Dclose(d);
        d = -1;
    }
    H5Sclose(sp);
    return d;
}

/* An extendible dataset: rows x cols (cols 0: one dimension), chunked. */
static hid_t growing(hid_t loc, const char *name, hid_t type, hsize_t cols, hsize_t chunk)
{
    int nd = cols ? 2 : 1;
    hsize_t dims[2] = {0, cols}, max[2] = {H5S_UNLIMITED, cols}, ch[2] = {chunk, cols ? cols : 1};
    hid_t sp = H5Screate_simple(nd, dims, max);
    hid_t p = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(p, nd, ch);
    hid_t d = H5Dcreate2(loc, name, type, sp, H5P_DEFAULT, p, H5P_DEFAULT);
    H5Pclose(p);
    H5Sclose(sp);
    return d;
}

/* Append n rows (of cols values; 0: one) of type from v to d, which holds have rows. */
static int append(hid_t d, hid_t type, const void *v, hsize_t have, hsize_t n, hsize_t cols)
{
    int nd = cols ? 2 : 1;
    hsize_t size[2] = {have + n, cols}, start[2] = {have, 0}, count[2] = {n, cols};
    if (!n)
        return 0;
    if (H5Dset_extent(d, size) < 0)
        return -1;
    hid_t fs = H5Dget_space(d), ms = H5Screate_simple(nd, count, NULL);
    int rc = H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
             H5Dwrite(d, type, ms, fs, H5P_DEFAULT, v) < 0;
    H5Sclose(ms);
    H5Sclose(fs);
    return rc;
}

static void iso_now(char *buf, size_t cap)
{
    time_t t = time(NULL);
    struct tm tm;
    strftime(buf, cap, "%Y-%m-%dT%H:%M:%S%z", localtime_r(&t, &tm));
    size_t n = strlen(buf); /* +hhmm -> +hh:mm, as ISO 8601 writes it */
    if (n >= 5 && cap > n + 1) {
        memmove(buf + n - 1, buf + n - 2, 3);
        buf[n - 2] = ':';
    }
}

/* general/devices, general/extracellular_ephys: a Device and an
 * ElectrodeGroup per stream, and the electrodes table of every channel. */
static int electrodes(struct rec_w *w, struct nwb *o, hid_t gen, hid_t *table)
{
    hid_t dev = group(gen, "devices"), ee = group(gen, "extracellular_ephys");
    int bad = dev < 0 || ee < 0;
    size_t n = 0;
    for (uint32_t s = 0; s < w->nst; s++)
        n += w->st[s].nchan;
    int64_t *id = malloc((n ? n : 1) * sizeof *id);
    float *x = malloc((n ? n : 1) * sizeof *x), *y = malloc((n ? n : 1) * sizeof *y);
    const char **loc = malloc((n ? n : 1) * sizeof *loc), **gname = malloc((n ? n : 1) * sizeof *gname);
    hobj_ref_t *ref = malloc((n ? n : 1) * sizeof *ref);
    bad |= !id || !x || !y || !loc || !gname || !ref;
    size_t k = 0;
    for (uint32_t s = 0; s < w->nst && !bad; s++) {
        const struct rec_stream *st = &w->st[s];
        hid_t d = group(dev, st->name), eg = group(ee, st->name);
        bad |= d < 0 || eg < 0 || typed(o, d, "core", "Device") || attr_str(o, d, "description", st->desc) ||
               typed(o, eg, "core", "ElectrodeGroup") || attr_str(o, eg, "description", st->desc) ||
               attr_str(o, eg, "location", "unknown");
        char path[128];
        snprintf(path, sizeof path, "/general/devices/%s", st->name);
        bad |= H5Lcreate_soft(path, eg, "device", H5P_DEFAULT, H5P_DEFAULT) < 0;
        snprintf(path, sizeof path, "/general/extracellular_ephys/%s", st->name);
        for (uint32_t c = 0; c < st->nchan && !bad; c++, k++) {
            id[k] = (int64_t)k, x[k] = st->chan[c].x_um, y[k] = st->chan[c].y_um;
            loc[k] = "unknown", gname[k] = st->name;
            bad |= H5Rcreate(&ref[k], o->f, path, H5R_OBJECT, -1) < 0;
        }
        if (d >= 0)
            H5Gclose(d);
        if (eg >= 0)
            H5Gclose(eg);
    }
    hid_t t = bad ? -1 : group(ee, "electrodes");
    bad |= t < 0;
    static const char *cols[] = {"location", "group", "group_name", "x", "y"};
    static const char *const doc[] = {"the brain area: unknown to the recording", "the electrode group",
                                      "the electrode group's name", "x on the probe (um)", "y on the probe (um)"};
    if (!bad)
        bad |= typed(o, t, "hdmf-common", "DynamicTable") ||
               attr_str(o, t, "description", "every channel recorded, in the order of the streams") ||
               attr_strs(o, t, "colnames", cols, 5);
    hid_t ds[6] = {-1, -1, -1, -1, -1, -1};
    if (!bad) {
        ds[0] = vec(t, "id", H5T_NATIVE_INT64, id, n);
        ds[1] = vec(t, "location", o->str, loc, n);
        ds[2] = vec(t, "group", H5T_STD_REF_OBJ, ref, n);
        ds[3] = vec(t, "group_name", o->str, gname, n);
        ds[4] = vec(t, "x", H5T_NATIVE_FLOAT, x, n);
        ds[5] = vec(t, "y", H5T_NATIVE_FLOAT, y, n);
        bad |= ds[0] < 0 || typed(o, ds[0], "hdmf-common", "ElementIdentifiers");
        for (int i = 1; i < 6 && !bad; i++)
            bad |= ds[i] < 0 || typed(o, ds[i], "hdmf-common", "VectorData") ||
                   attr_str(o, ds[i], "description", doc[i - 1]);
    }
    for (int i = 0; i < 6; i++)
        if (ds[i] >= 0)
            H5Dclose(ds[i]);
    free(id), free(x), free(y), free(loc), free(gname), free(ref);
    if (dev >= 0)
        H5Gclose(dev);
    if (ee >= 0)
        H5Gclose(ee);
    *table = t;
    return bad ? h5fail(w, "write the electrodes table") : 0;
}

/* acquisition/<stream>: an ElectricalSeries of its channels (rows first..). */
static int series(struct rec_w *w, struct nwb *o, hid_t acq, uint32_t s, uint64_t first_row)
{
    const struct rec_stream *st = &w->st[s];
    struct nwb_series *v = &o->s[s];
    v->g = group(acq, st->name);
    if (v->g < 0)
        return h5fail(w, "make an ElectricalSeries");
    double scale = st->units[0] == 'u' ? 1e-6 : 1.0; /* bit_volts in uV or V; NWB's unit is volts */
    double conv = st->chan[0].bit_volts * scale, zero = 0, res = -1;
    int same = 1;
    for (uint32_t c = 1; c < st->nchan; c++)
        same &= st->chan[c].bit_volts == st->chan[0].bit_volts;
    int bad = typed(o, v->g, "core", "ElectricalSeries") || attr_str(o, v->g, "description", st->desc) ||
              attr_str(o, v->g, "comments", "recorded by onigpu; timestamps are the acquisition clock / ACQCLKHZ");
    v->data = growing(v->g, "data", H5T_STD_I16LE, st->nchan, CHUNK_ROWS);
    v->ts = growing(v->g, "timestamps", H5T_IEEE_F64LE, 0, CHUNK_ROWS * 4);
    bad |= v->data < 0 || v->ts < 0;
    if (!bad) {
        double one = same ? conv : 1.0;
        int32_t interval = 1;
        bad |= attr_str(o, v->data, "unit", "volts") || attr_num(v->data, "conversion", H5T_NATIVE_DOUBLE, &one) ||
               attr_num(v->data, "offset", H5T_NATIVE_DOUBLE, &zero) ||
               attr_num(v->data, "resolution", H5T_NATIVE_DOUBLE, &res) ||
               attr_str(o, v->ts, "unit", "seconds") || attr_num(v->ts, "interval", H5T_NATIVE_INT32, &interval);
    }
    if (!bad && !same) { /* channels of their own scale (AnalogIO ranges) */
        float *cc = malloc(st->nchan * sizeof *cc);
        for (uint32_t c = 0; cc && c < st->nchan; c++)
            cc[c] = (float)(st->chan[c].bit_volts * scale);
        hid_t d = cc ? vec(v->g, "channel_conversion", H5T_NATIVE_FLOAT, cc, st->nchan) : -1;
        int32_t axis = 1;
        bad |= d < 0 || attr_num(d, "axis", H5T_NATIVE_INT32, &axis);
        if (d >= 0)
            H5Dclose(d);
        free(cc);
    }
    int64_t *rows = malloc(st->nchan * sizeof *rows);
    for (uint32_t c = 0; rows && c < st->nchan; c++)
        rows[c] = (int64_t)(first_row + c);
    hid_t e = bad || !rows ? -1 : vec(v->g, "electrodes", H5T_NATIVE_INT64, rows, st->nchan);
    free(rows);
    hobj_ref_t tref;
    bad |= e < 0 || H5Rcreate(&tref, o->f, "/general/extracellular_ephys/electrodes", H5R_OBJECT, -1) < 0 ||
           typed(o, e, "hdmf-common", "DynamicTableRegion") ||
           attr_str(o, e, "description", "the channels of this stream") ||
           attr_num(e, "table", H5T_STD_REF_OBJ, &tref);
    if (e >= 0)
        H5Dclose(e);
    return bad ? h5fail(w, "make an ElectricalSeries") : 0;
}

static int dio_series(struct rec_w *w, struct nwb *o, hid_t acq, const struct rec_events *ev)
{
    struct nwb_series *v = &o->dio;
    v->g = group(acq, ev->name);
    int bad = v->g < 0 || typed(o, v->g, "core", "TimeSeries") || attr_str(o, v->g, "description", ev->desc);
    v->data = bad ? -1 : growing(v->g, "data", H5T_STD_U64LE, 0, EV_CHUNK);
    v->ts = bad ? -1 : growing(v->g, "timestamps", H5T_IEEE_F64LE, 0, EV_CHUNK);
    int32_t interval = 1;
    bad |= v->data < 0 || v->ts < 0 || attr_str(o, v->data, "unit", "n/a") || attr_str(o, v->ts, "unit", "seconds") ||
           attr_num(v->ts, "interval", H5T_NATIVE_INT32, &interval);
    o->have_dio = !bad;
    return bad ? h5fail(w, "make the DigitalInputs series") : 0;
}

/* acquisition/messages: the changes made during the run as an
 * AnnotationSeries (core: a TimeSeries whose data is text, unit "n/a",
 * resolution -1), one row a message at its time. */
static int msg_series(struct rec_w *w, struct nwb *o, hid_t acq)
{
    struct nwb_series *v = &o->msg;
    o->msg_type = H5Tcopy(H5T_C_S1);
    int bad = o->msg_type < 0 || H5Tset_size(o->msg_type, REC_MSG_TEXT) < 0 ||
              H5Tset_strpad(o->msg_type, H5T_STR_NULLPAD) < 0 || H5Tset_cset(o->msg_type, H5T_CSET_UTF8) < 0;
    v->g = bad ? -1 : group(acq, "messages");
    bad |= v->g < 0 || typed(o, v->g, "core", "AnnotationSeries") ||
           attr_str(o, v->g, "description", "changes made during the run (the live view's threshold and trace "
                                            "channels), at the acquisition clock they took effect");
    v->data = bad ? -1 : growing(v->g, "data", o->msg_type, 0, EV_CHUNK);
    v->ts = bad ? -1 : growing(v->g, "timestamps", H5T_IEEE_F64LE, 0, EV_CHUNK);
    int32_t interval = 1;
    float res = -1.0f, conv = 1.0f, off = 0.0f;
    bad |= v->data < 0 || v->ts < 0 || attr_str(o, v->data, "unit", "n/a") ||
           attr_num(v->data, "resolution", H5T_NATIVE_FLOAT, &res) ||
           attr_num(v->data, "conversion", H5T_NATIVE_FLOAT, &conv) ||
           attr_num(v->data, "offset", H5T_NATIVE_FLOAT, &off) || attr_str(o, v->ts, "unit", "seconds") ||
           attr_num(v->ts, "interval", H5T_NATIVE_INT32, &interval);
    return bad ? h5fail(w, "make the messages series") : 0;
}

/* intervals/stimuli: a TimeIntervals table. */
static int stim_table(struct rec_w *w, struct nwb *o, hid_t root)
{
    hid_t iv = group(root, "intervals");
    hid_t t = iv < 0 ? -1 : group(iv, "stimuli");
    static const char *cols[] = {"start_time", "stop_time", "pins"};
    int bad = t < 0 || typed(o, t, "core", "TimeIntervals") ||
              attr_str(o, t, "description", "stimulations: the output pins written, at the sample they answered") ||
              attr_strs(o, t, "colnames", cols, 3);
    if (!bad) {
        o->stim_id = growing(t, "id", H5T_NATIVE_INT64, 0, EV_CHUNK);
        o->stim_start = growing(t, "start_time", H5T_IEEE_F64LE, 0, EV_CHUNK);
        o->stim_stop = growing(t, "stop_time", H5T_IEEE_F64LE, 0, EV_CHUNK);
        o->stim_pins = growing(t, "pins", H5T_STD_U32LE, 0, EV_CHUNK);
        bad |= o->stim_id < 0 || o->stim_start < 0 || o->stim_stop < 0 || o->stim_pins < 0 ||
               typed(o, o->stim_id, "hdmf-common", "ElementIdentifiers") ||
               typed(o, o->stim_start, "hdmf-common", "VectorData") ||
               attr_str(o, o->stim_start, "description", "the acquisition clock of the spike answered (s)") ||
               typed(o, o->stim_stop, "hdmf-common", "VectorData") ||
               attr_str(o, o->stim_stop, "description", "as start_time: a stimulation is an instant here") ||
               typed(o, o->stim_pins, "hdmf-common", "VectorData") ||
               attr_str(o, o->stim_pins, "description", "the digital output pins written (bits 0-7)");
    }
    if (t >= 0)
        H5Gclose(t);
    if (iv >= 0)
        H5Gclose(iv);
    return bad ? h5fail(w, "make intervals/stimuli") : 0;
}

static int nwb_open(struct rec_w *w)
{
    struct nwb *o = calloc(1, sizeof *o);
    if (!o)
        return ONI_EBADALLOC;
    w->fmt_state = o;
    o->f = o->stim_id = o->stim_start = o->stim_stop = o->stim_pins = -1;
    o->s = calloc(w->nst ? w->nst : 1, sizeof *o->s);
    o->ts = malloc(REC_ROWS * sizeof *o->ts);
    if (!o->s || !o->ts)
        return ONI_EBADALLOC;
    for (uint32_t i = 0; i < w->nst; i++)
        o->s[i].g = o->s[i].data = o->s[i].ts = -1;
    o->dio.g = o->dio.data = o->dio.ts = -1;
    o->msg.g = o->msg.data = o->msg.ts = o->msg_type = -1;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* errors are said here, not printed by the library */
    if (mkdir(w->dir, 0777) && errno != EEXIST) {
        snprintf(w->why, sizeof w->why, "cannot make the directory %.180s: %s", w->dir, strerror(errno));
        return ONI_EWRITEFAILURE;
    }
    char path[4096];
    if (rec_path(path, sizeof path, w->dir, "onigpu.nwb"))
        return h5fail(w, "name the file");
    if (access(path, F_OK) == 0) {
        snprintf(w->why, sizeof w->why, "%.200s holds a recording already; give a new directory", path);
        return ONI_EINVALARG;
    }
    o->str = H5Tcopy(H5T_C_S1);
    H5Tset_size(o->str, H5T_VARIABLE);
    H5Tset_cset(o->str, H5T_CSET_UTF8);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST); /* SWMR needs it */
    o->f = H5Fcreate(path, H5F_ACC_EXCL, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (o->f < 0)
        return h5fail(w, "create the file (it must be new)");
    char now[40], id[37];
    iso_now(now, sizeof now);
    uuid4(id);
    const char *dates[1] = {now};
    int bad = attr_str(o, o->f, "nwb_version", NWB_VERSION) || typed(o, o->f, "core", "NWBFile");
    hid_t d = vec(o->f, "file_create_date", o->str, dates, 1);
    bad |= d < 0;
    if (d >= 0)
        H5Dclose(d);
    bad |= str_dataset(o, o->f, "identifier", id) || str_dataset(o, o->f, "session_description", w->session) ||
           str_dataset(o, o->f, "session_start_time", now) || str_dataset(o, o->f, "timestamps_reference_time", now);
    hid_t acq = group(o->f, "acquisition"), an = group(o->f, "analysis"), pr = group(o->f, "processing"),
          stim = group(o->f, "stimulus"), gen = group(o->f, "general");
    hid_t pres = stim < 0 ? -1 : group(stim, "presentation"), tmpl = stim < 0 ? -1 : group(stim, "templates");
    bad |= acq < 0 || an < 0 || pr < 0 || stim < 0 || gen < 0 || pres < 0 || tmpl < 0;
    if (bad)
        return h5fail(w, "write the file's required groups");
    hid_t table = -1;
    int rc = electrodes(w, o, gen, &table);
    uint64_t row = 0;
    for (uint32_t s = 0; s < w->nst && !rc; s++) {
        rc = series(w, o, acq, s, row);
        row += w->st[s].nchan;
    }
    for (uint32_t e = 0; e < w->nev && !rc; e++)
        if (!strcmp(w->ev[e].name, "DigitalInputs"))
            rc = dio_series(w, o, acq, &w->ev[e]);
    if (!rc && w->nev && !strcmp(w->ev[w->nev - 1].name, "Stimuli"))
        rc = stim_table(w, o, o->f);
    if (!rc)
        rc = msg_series(w, o, acq);
    hid_t gs[] = {acq, an, pr, pres, tmpl, stim, gen, table};
    for (size_t i = 0; i < sizeof gs / sizeof gs[0]; i++)
        if (gs[i] >= 0)
            H5Gclose(gs[i]);
    if (!rc && H5Fstart_swmr_write(o->f) < 0)
        rc = h5fail(w, "start single-writer/multiple-reader mode");
    return rc;
}

static int nwb_samples(struct rec_w *w, uint32_t s, const int16_t *rows, uint32_t n, const uint64_t *clk,
                       const uint64_t *host, uint64_t first)
{
    struct nwb *o = w->fmt_state;
    struct nwb_series *v = &o->s[s];
    (void)host, (void)first;
    for (uint32_t i = 0; i < n; i++)
        o->ts[i] = (double)clk[i] / w->acq_hz;
    if (append(v->data, H5T_NATIVE_INT16, rows, v->n, n, w->st[s].nchan) ||
        append(v->ts, H5T_NATIVE_DOUBLE, o->ts, v->n, n, 0))
        return h5fail(w, "append samples");
    v->n += n;
    w->bytes += (uint64_t)n * (w->st[s].nchan * 2 + 8);
    return 0;
}

static int nwb_ttl(struct rec_w *w, uint32_t e, uint64_t clk, uint32_t line, int on, uint64_t word, uint64_t host)
{
    struct nwb *o = w->fmt_state;
    double t = (double)clk / w->acq_hz;
    (void)on, (void)host;
    if (!strcmp(w->ev[e].name, "Stimuli")) {
        if (line != 1) /* one row a stimulation (its 8 lines come together) */
            return 0;
        int64_t id = (int64_t)o->nstim;
        uint32_t pins = (uint32_t)word;
        if (append(o->stim_id, H5T_NATIVE_INT64, &id, o->nstim, 1, 0) ||
            append(o->stim_start, H5T_NATIVE_DOUBLE, &t, o->nstim, 1, 0) ||
            append(o->stim_stop, H5T_NATIVE_DOUBLE, &t, o->nstim, 1, 0) ||
            append(o->stim_pins, H5T_NATIVE_UINT32, &pins, o->nstim, 1, 0))
            return h5fail(w, "append a stimulation");
        o->nstim++;
        return 0;
    }
    /* one row per input frame: its changed lines share the time */
    if (!o->have_dio || (o->dio.n && t == o->dio_last))
        return 0;
    o->dio_last = t;
    if (append(o->dio.data, H5T_NATIVE_UINT64, &word, o->dio.n, 1, 0) ||
        append(o->dio.ts, H5T_NATIVE_DOUBLE, &t, o->dio.n, 1, 0))
        return h5fail(w, "append a DigitalInputs change");
    o->dio.n++;
    return 0;
}

static int nwb_spike(struct rec_w *w, uint32_t s, uint64_t clk, uint64_t sample, uint32_t chan, int32_t unit,
                     uint64_t host)
{
    (void)w, (void)s, (void)clk, (void)sample, (void)chan, (void)unit, (void)host;
    return 0; /* detections are no sorted units: NWB gets none (docs/recording.md) */
}

static int nwb_message(struct rec_w *w, uint64_t clk, const char *text, uint64_t host)
{
    struct nwb *o = w->fmt_state;
    struct nwb_series *v = &o->msg;
    char t[REC_MSG_TEXT] = {0};
    memcpy(t, text, strnlen(text, REC_MSG_TEXT));
    double ts = (double)clk / w->acq_hz;
    (void)host;
    if (append(v->data, o->msg_type, t, v->n, 1, 0) || append(v->ts, H5T_NATIVE_DOUBLE, &ts, v->n, 1, 0))
        return h5fail(w, "append a message");
    v->n++;
    return 0;
}

static int nwb_flush(struct rec_w *w)
{
    struct nwb *o = w->fmt_state;
    return H5Fflush(o->f, H5F_SCOPE_GLOBAL) < 0 ? h5fail(w, "flush") : 0;
}

static void close_series(struct nwb_series *v)
{
    if (v->data >= 0)
        H5Dclose(v->data);
    if (v->ts >= 0)
        H5Dclose(v->ts);
    if (v->g >= 0)
        H5Gclose(v->g);
}

static int nwb_close(struct rec_w *w, int failed)
{
    struct nwb *o = w->fmt_state;
    if (!o)
        return 0;
    int rc = 0;
    for (uint32_t s = 0; o->s && s < w->nst; s++)
        close_series(&o->s[s]);
    close_series(&o->dio);
    close_series(&o->msg);
    if (o->msg_type >= 0)
        H5Tclose(o->msg_type);
    hid_t st[] = {o->stim_id, o->stim_start, o->stim_stop, o->stim_pins};
    for (int i = 0; i < 4; i++)
        if (st[i] >= 0)
            H5Dclose(st[i]);
    if (o->f >= 0 && H5Fclose(o->f) < 0 && !failed)
        rc = h5fail(w, "close");
    if (o->str > 0)
        H5Tclose(o->str);
    free(o->s);
    free(o->ts);
    free(o);
    w->fmt_state = NULL;
    return rc;
}

#else /* built without HDF5 */

static int nwb_open(struct rec_w *w)
{
    snprintf(w->why, sizeof w->why, "NWB needs the HDF5 C library, and this build has none "
                                    "(Debian: apt-get install libhdf5-dev, then build again)");
    return ONI_EUNIMPL;
}

static int nwb_none(struct rec_w *w, int failed)
{
    (void)w, (void)failed;
    return 0;
}

#define nwb_samples NULL
#define nwb_ttl NULL
#define nwb_spike NULL
#define nwb_message NULL
#define nwb_flush NULL
#define nwb_close nwb_none
#endif

const struct rec_fmt rec_fmt_nwb = {"nwb",   nwb_open,  nwb_samples, nwb_ttl,
                                    nwb_spike, nwb_message, nwb_flush,  nwb_close};
