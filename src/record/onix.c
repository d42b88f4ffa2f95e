/* onix.c - what the recording makes of each ONIX device (record.h), and
 * the decoding of its frames. Facts (no code taken):
 *  - NP2.0e raw device: super-frame layout in src/loop/superframe.h (Bonsai
 *    NeuropixelsV2eData.cs, onix-source Neuropixels2e.cpp:580-606): one
 *    sample of 384 channels per frame, 12-bit offset binary (midpoint 2048,
 *    Neuropixels2e.h:101-102), 0.195 uV a bit and "CH" channel names as
 *    onix-source's stream (Neuropixels2e.cpp:61-74). Electrode positions:
 *    the default selection (shank 0, electrodes 0-383) of the NP2.0 probe,
 *    two columns 32 um apart, rows 15 um apart (the probe's published
 *    geometry, e.g. probeinterface's NP2014 layout).
 *  - RHD2164: [u64 hub clock][u16 amplifier[64]][u16 aux[3]], 16-bit offset
 *    binary, 0.195 uV a bit (docs/devices.md; Intan RHD2000 data sheet).
 *  - AnalogIO: [u64 hub clock][i16 x 12] (Bonsai AnalogInputDataFrame.cs:49),
 *    volts a bit 20, 5 or 10 V / 2^16 for CHxx_IN_RANGE 0, 1, 2 at registers
 *    2..13 (onix-source AnalogIO.h:29-52, AnalogIO.cpp:104-118).
 *  - DigitalIO: [u64 hub clock][u8 pins][u8 0][u16 buttons] (Bonsai
 *    DigitalInputDataFrame.cs:35). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "record/rec_int.h"
#include "loop/superframe.h"
#include "oni/util/probe.h"
#include "onix.h"

#define NP2E_CHANNELS 384
#define RHD_CHANNELS 64
#define AIO_CHANNELS 12
#define AIO_READ 32
#define DIO_READ 12
#define RHD_READ 142

static const char *port_of(oni_dev_idx_t idx)
{
    uint32_t hub = idx >> 8;
    if (idx == 8 || hub == 1)
        return "PortA";
    if (idx == 9 || hub == 2)
        return "PortB";
    return NULL;
}

/* Add a stream of nchan channels to w; its index, or -1 (no memory). */
static int32_t add_stream(struct rec_w *w, const char *name, const char *desc, const char *device, double rate,
                          uint32_t nchan, const char *units)
{
    struct rec_stream *s = realloc(w->st, (w->nst + 1) * sizeof *s);
    if (!s)
        return -1;
    w->st = s;
    s = &w->st[w->nst];
    memset(s, 0, sizeof *s);
    if (!(s->chan = calloc(nchan, sizeof *s->chan)))
        return -1;
    snprintf(s->name, sizeof s->name, "%s", name);
    snprintf(s->desc, sizeof s->desc, "%s", desc);
    snprintf(s->device, sizeof s->device, "%s", device);
    snprintf(s->units, sizeof s->units, "%s", units);
    s->rate_hz = rate;
    s->nchan = nchan;
    return (int32_t)w->nst++;
}

static int32_t add_events(struct rec_w *w, const char *name, const char *desc, uint32_t lines)
{
    struct rec_events *e = realloc(w->ev, (w->nev + 1) * sizeof *e);
    if (!e)
        return -1;
    w->ev = e;
    e = &w->ev[w->nev];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    snprintf(e->desc, sizeof e->desc, "%s", desc);
    e->lines = lines;
    return (int32_t)w->nev++;
}

static int np2e_streams(struct rec_w *w, struct rec_dev *d)
{
    const char *port = port_of(d->idx);
    char where[16]; /* a headstage on no known port (more than a breakout's two): named by its device */
    snprintf(where, sizeof where, "Dev%u", (unsigned)d->idx);
    for (int p = 0; p < 2; p++) {
        char name[REC_NAME];
        snprintf(name, sizeof name, "%s-Probe%c", port ? port : where, 'A' + p);
        int32_t s = add_stream(w, name, "Neuropixels 2.0 probe, AP band (NP2.0e headstage)", name, 30000.0,
                               NP2E_CHANNELS, "uV");
        if (s < 0)
            return ONI_EBADALLOC;
        for (uint32_t ch = 0; ch < NP2E_CHANNELS; ch++) {
            struct rec_chan *c = &w->st[s].chan[ch];
            snprintf(c->name, sizeof c->name, "CH%u", ch + 1);
            c->bit_volts = 0.195;
            rec_np2e_site(ch, &c->x_um, &c->y_um);
        }
        d->stream[p] = s;
    }
    return 0;
}

static int rhd_stream(struct rec_w *w, struct rec_dev *d)
{
    const char *port = port_of(d->idx);
    char name[REC_NAME];
    if (port)
        snprintf(name, sizeof name, "%s-RHD2164", port);
    else
        snprintf(name, sizeof name, "Hub%u-RHD2164", d->idx >> 8);
    int32_t s = add_stream(w, name, "Intan RHD2164 amplifiers", name, 30000.0, RHD_CHANNELS, "uV");
    if (s < 0)
        return ONI_EBADALLOC;
    for (uint32_t ch = 0; ch < RHD_CHANNELS; ch++) {
        snprintf(w->st[s].chan[ch].name, sizeof w->st[s].chan[ch].name, "CH%u", ch + 1);
        w->st[s].chan[ch].bit_volts = 0.195;
    }
    d->stream[0] = s;
    return 0;
}

static int aio_stream(oni_ctx ctx, struct rec_w *w, struct rec_dev *d)
{
    int32_t s = add_stream(w, "AnalogInput", "breakout board analog inputs", "BreakoutBoard", 100000.0,
                           AIO_CHANNELS, "V");
    if (s < 0)
        return ONI_EBADALLOC;
    static const double span[3] = {20.0, 5.0, 10.0};
    for (uint32_t ch = 0; ch < AIO_CHANNELS; ch++) {
        oni_reg_val_t range = 0;
        if (oni_read_reg(ctx, d->idx, 2 + ch, &range) || range > 2)
            range = 0; /* unreadable: the power-up range, +-10 V */
        snprintf(w->st[s].chan[ch].name, sizeof w->st[s].chan[ch].name, "AI%u", ch);
        w->st[s].chan[ch].bit_volts = span[range] / 65536.0;
    }
    d->stream[0] = s;
    return 0;
}

int rec_map_devices(oni_ctx ctx, const oni_device_t *t, size_t n, struct rec_dev *d, size_t cap, size_t *nd,
                    struct rec_w *w)
{
    *nd = 0;
    for (size_t i = 0; i < n && *nd < cap; i++) {
        struct rec_dev *v = &d[*nd];
        memset(v, 0, sizeof *v);
        v->idx = t[i].idx, v->id = t[i].id, v->read_size = t[i].read_size;
        v->stream[0] = v->stream[1] = v->ev = -1;
        int rc = 0;
        if (t[i].id == ONIX_DS90UB9RAW && t[i].read_size == LOOP_NP2E_PAYLOAD) {
            v->kind = REC_DEV_NP2E;
            rc = np2e_streams(w, v);
        } else if (t[i].id == ONIX_RHD2164 && t[i].read_size == RHD_READ) {
            v->kind = REC_DEV_RHD2164;
            rc = rhd_stream(w, v);
        } else if (t[i].id == ONIX_FMCANALOG1R3 && t[i].read_size == AIO_READ) {
            v->kind = REC_DEV_AIO;
            rc = aio_stream(ctx, w, v);
        } else if (t[i].id == ONIX_BREAKDIG1R3 && t[i].read_size == DIO_READ) {
            v->kind = REC_DEV_DIO;
            if ((v->ev = add_events(w, "DigitalInputs",
                                    "breakout board digital inputs (lines 1-8) and buttons (lines 9-24)", 24)) < 0)
                rc = ONI_EBADALLOC;
        } else {
            continue;
        }
        if (rc)
            return rc;
        (*nd)++;
    }
    return 0;
}

static uint64_t u64_at(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static uint16_t u16_at(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

/* Events for every line of the word that changed (every line set on the
 * first frame: the state recording started in). */
static int dio_events(struct rec_w *w, struct rec_dev *d, uint64_t clk, uint32_t word, uint64_t host)
{
    uint32_t changed = d->have_word ? word ^ d->word : word;
    d->word = word, d->have_word = 1;
    int rc = 0;
    for (uint32_t line = 0; line < 24 && !rc; line++)
        if (changed >> line & 1) {
            rc = rec_w_format(w)->ttl(w, (uint32_t)d->ev, clk, line + 1, (int)(word >> line & 1), word, host);
            w->ev[d->ev].n++;
        }
    return rc;
}

void rec_np2e_site(uint32_t ch, float *x_um, float *y_um) { np2_site(ch, x_um, y_um); }

/* Payload offset of each NP2.0e channel's sample, once (superframe.h). */
static uint16_t np2e_off[NP2E_CHANNELS];
static void np2e_offsets(void)
{
    for (uint32_t ch = 0; ch < NP2E_CHANNELS; ch++)
        np2e_off[ch] = (uint16_t)loop_np2e_sample_off(ch);
}

int rec_decode(struct rec_w *w, struct rec_dev *d, uint64_t time, const uint8_t *p, uint32_t len, uint64_t host)
{
    int16_t row[NP2E_CHANNELS];
    switch (d->kind) {
    case REC_DEV_NP2E: {
        uint16_t probe = u16_at(p + LOOP_NP2E_PROBE_OFF);
        if (probe > 1)
            return 0; /* no probe the headstage has: not a sample */
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        pthread_once(&once, np2e_offsets);
        for (uint32_t ch = 0; ch < NP2E_CHANNELS; ch++)
            row[ch] = (int16_t)((int)u16_at(p + np2e_off[ch]) - 2048);
        return rec_w_row(w, (uint32_t)d->stream[probe], row, u64_at(p), host);
    }
    case REC_DEV_RHD2164:
        for (uint32_t ch = 0; ch < RHD_CHANNELS; ch++)
            row[ch] = (int16_t)((int)u16_at(p + 8 + 2 * ch) - 32768);
        return rec_w_row(w, (uint32_t)d->stream[0], row, time, host);
    case REC_DEV_AIO:
        for (uint32_t ch = 0; ch < AIO_CHANNELS; ch++)
            row[ch] = (int16_t)u16_at(p + 8 + 2 * ch);
        return rec_w_row(w, (uint32_t)d->stream[0], row, u64_at(p), host);
    case REC_DEV_DIO:
        return dio_events(w, d, u64_at(p), (uint32_t)p[8] | (uint32_t)u16_at(p + 10) << 8, host);
    }
    (void)len;
    return 0;
}
