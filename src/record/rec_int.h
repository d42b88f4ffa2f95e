/* rec_int.h - inside the recorder: what the device map (onix.c) makes of
 * the device table, and the table of functions every format implements
 * (oebin.c: Open Ephys binary; nwb.c: NWB 2.x). The writer thread
 * (writer.c) is the only caller of a format's functions. */
#ifndef RECORD_REC_INT_H
#define RECORD_REC_INT_H

#include <stddef.h>
#include <stdint.h>
#include "record/record.h"

#define REC_NAME 48
#define REC_ROWS 2048        /* rows a stream buffers before its format gets them */
#define REC_CLOCK_RING 65536 /* recent sample clocks per stream: spikes find their sample number */

struct rec_chan {
    char name[16];
    double bit_volts;
    float x_um, y_um;   /* position on the probe (NWB electrodes table), 0 when unknown */
    uint32_t shank;
};

/* A continuous stream: rows of nchan int16 samples. */
struct rec_stream {
    char name[REC_NAME];   /* "PortA-ProbeA": Open Ephys stream names hold no '.' */
    char desc[96];
    char device[REC_NAME]; /* the device it comes from, for NWB's device group */
    char units[8];         /* of bit_volts: "uV", "V" */
    double rate_hz;
    uint32_t nchan;
    struct rec_chan *chan;
    uint64_t rows;         /* rows handed to the format so far */
    /* rows waiting for the format */
    int16_t *buf;
    uint64_t *clk, *host;
    uint32_t nbuf;
    /* the last REC_CLOCK_RING rows' clocks: clock -> sample number */
    uint64_t *ring;
    uint64_t spikes;
};

/* A TTL event channel. */
struct rec_events {
    char name[REC_NAME];   /* "DigitalInputs", "Stimuli" */
    char desc[96];
    uint32_t lines;
    uint64_t n;
};

enum rec_msg_type { REC_MSG_BLOCK = 1, REC_MSG_STIM, REC_MSG_SPIKES, REC_MSG_TEXT_MSG };

/* A device of the table and what it becomes. */
enum rec_kind { REC_DEV_NP2E = 1, REC_DEV_RHD2164, REC_DEV_AIO, REC_DEV_DIO };
struct rec_dev {
    oni_dev_idx_t idx;
    uint32_t id, read_size;
    int kind;
    int32_t stream[2];     /* its continuous streams (NP2.0e: probe A, B), -1: none */
    int32_t ev;            /* its event channel, -1: none */
    uint32_t word;         /* DigitalIO: the last state (pins | buttons << 8) */
    int have_word;
};

struct rec_w;
struct rec_fmt {
    const char *name;
    /* Make the format's files under w->dir (w's streams and channels are
     * known): 0 or an ONI error, why in w->why. */
    int (*open)(struct rec_w *w);
    /* n rows of stream s, the first being sample number first. */
    int (*samples)(struct rec_w *w, uint32_t s, const int16_t *rows, uint32_t n, const uint64_t *clk,
                   const uint64_t *host, uint64_t first);
    /* One TTL event of channel e: line (1-based), on or off, the whole word. */
    int (*ttl)(struct rec_w *w, uint32_t e, uint64_t clk, uint32_t line, int on, uint64_t word, uint64_t host);
    /* One spike of stream s at its sample number sample. */
    int (*spike)(struct rec_w *w, uint32_t s, uint64_t clk, uint64_t sample, uint32_t chan, int32_t unit,
                 uint64_t host);
    /* One text message at acquisition clock clk (text NUL-terminated, at
     * most REC_MSG_TEXT bytes). */
    int (*message)(struct rec_w *w, uint64_t clk, const char *text, uint64_t host);
    /* Everything so far on disk and consistent (a reader finds it whole). */
    int (*flush)(struct rec_w *w);
    /* Flush and close; after a failure, close what is open (failed != 0). */
    int (*close)(struct rec_w *w, int failed);
};

extern const struct rec_fmt rec_fmt_openephys;
extern const struct rec_fmt rec_fmt_nwb;

/* The writer's state that the formats see. */
struct rec_w {
    char *dir;
    char session[128];
    double acq_hz;
    struct rec_stream *st;
    uint32_t nst;
    struct rec_events *ev;
    uint32_t nev;
    int spike_streams;     /* every stream has a spike channel */
    uint64_t last_clk;     /* the clock of the last row of any stream (messages at clock 0 take it) */
    uint64_t messages;     /* text messages handed to the format */
    void *fmt_state;       /* the format's own */
    uint64_t bytes;        /* written to files */
    char why[256];
};

/* onix.c: the devices of t[0..n) that are recorded into d (cap entries;
 * *nd of them), their streams and event channels into w (allocated). Reads
 * registers of ctx (AnalogIO ranges). 0, ONI_EBADALLOC. */
int rec_map_devices(oni_ctx ctx, const oni_device_t *t, size_t n, struct rec_dev *d, size_t cap, size_t *nd,
                    struct rec_w *w);
/* Decode one frame of device dev into w's streams and events (through
 * rec_w_row and rec_w_ttl); 0, or the format's error. */
int rec_decode(struct rec_w *w, struct rec_dev *dev, uint64_t time, const uint8_t *data, uint32_t len,
               uint64_t host);

/* writer.c, for the decoders: a row of stream s (nchan samples). */
int rec_w_row(struct rec_w *w, uint32_t s, const int16_t *row, uint64_t clk, uint64_t host);
/* The format of the recording w belongs to. */
const struct rec_fmt *rec_w_format(const struct rec_w *w);
/* The sample number of stream s whose clock is clk (the nearest before it
 * among recent rows; estimated from the rate when it is older or newer). */
uint64_t rec_w_sample_of(const struct rec_w *w, uint32_t s, uint64_t clk);

/* util: write all of buf at offset off of fd (pwrite), or append when off
 * < 0. 0, or the errno value. */
int rec_write_all(int fd, const void *buf, size_t len, int64_t off);
/* Path "a/b" into out; -1 when it does not fit. */
int rec_path(char *out, size_t cap, const char *a, const char *b);

#endif
