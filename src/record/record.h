/* record.h - recordings that analysis tools read, written live beside the
 * acquisition: the Open Ephys binary format (docs/recording.md) or NWB 2.x
 * (HDF5), from a writer thread fed through a bounded queue.
 *
 * rec_open reads the device table of an initialized context and decides
 * what each device becomes (src/record/onix.c): an NP2.0e headstage's raw
 * device one continuous stream per probe (384 channels, 0.195 uV a bit), an
 * RHD2164 one of 64 channels, the breakout board's AnalogIO one of 12
 * channels (volts a bit from each channel's input range), its DigitalIO
 * TTL events (pins lines 1-8, buttons 9-24); the stimuli a program sends
 * are TTL events of their own, detected spikes a spike channel per stream.
 * Every sample and event carries the acquisition clock (timestamps in
 * seconds = clock / ACQCLKHZ, exact) and the host's CLOCK_MONOTONIC time
 * (ns) at which the frame was handed to the recording.
 *
 * The producer calls (rec_frame, rec_frames, rec_stim, rec_spikes) copy
 * their data into the queue and return at once, from any thread: they never
 * wait for the disk. When the queue is full the data is not recorded, and
 * counted (rec_stats: lost_msgs, lost_bytes): a writer slower than the
 * data never blocks the caller silently, nor loses it silently. The writer
 * makes the files consistent at every flush (about once a second): a
 * process killed then leaves a recording that `onigpu recover DIR`
 * (rec_recover) trims to its last whole flush. A write that fails (a full
 * disk, a file size limit) ends the recording there, consistent. */
#ifndef RECORD_RECORD_H
#define RECORD_RECORD_H

#include <stddef.h>
#include <stdint.h>
#include "oni.h"

enum rec_format { REC_OPENEPHYS = 0, REC_NWB, REC_NFORMATS };

#define REC_QUEUE_DEFAULT (64u << 20) /* bytes of the queue */
#define REC_FLUSH_MS 1000             /* the writer makes the files consistent this often */

struct rec_config {
    const char *dir;      /* made (mkdir -p); must not hold a recording already */
    int format;           /* enum rec_format */
    size_t queue_bytes;   /* 0: REC_QUEUE_DEFAULT; at least 1 MiB */
    uint32_t flush_ms;    /* 0: REC_FLUSH_MS */
    const char *session;  /* a description of the session (NULL: "onigpu recording") */
    int stim_stream;      /* 1: a TTL event channel for the stimuli (rec_stim) */
    int spike_stream;     /* 1: a spike channel for every continuous stream (rec_spikes) */
};

struct rec;

/* Where NP2.0e channel ch (0..383) sits on the probe, in um (the default
 * electrode selection, onix.c): what recordings write and the live view
 * draws. */
void rec_np2e_site(uint32_t ch, float *x_um, float *y_um);

/* The format named s ("openephys", "nwb"), or -1. */
int rec_format_of(const char *s);
/* The name of format f. */
const char *rec_format_name(int f);

/* Start a recording of ctx's devices (t[0..n), its device table; ctx is
 * read, not kept) as c says: the directory made, the files created (O_EXCL:
 * nothing is ever overwritten), the writer thread started. 0 and *out, or:
 * ONI_EINVALARG (a bad config; a directory that holds a recording; no
 * device to record), ONI_EWRITEFAILURE (a file or directory that cannot be
 * made), ONI_EUNIMPL (NWB in a build without HDF5), ONI_EBADALLOC; why says
 * which, and nothing is left behind. */
int rec_open(const struct rec_config *c, oni_ctx ctx, const oni_device_t *t, size_t n, struct rec **out,
             char *why, size_t cap);

/* The devices rec_open records, as "0x108 NP2.0e probes, 0x7 DigitalIO
 * events" into buf (a short list for the user), and those it does not. */
void rec_describe(const struct rec *r, char *buf, size_t cap);

/* Queue frame f (a device of the table; others are counted, not
 * recorded), received at host_ns (0: now). 0, or ONI_EBUFFERSIZE when the
 * queue had no room (counted as lost). The caller keeps f. */
int rec_frame(struct rec *r, const oni_frame_t *f, uint64_t host_ns);
/* Queue a block of frames in read-frame form ([u64 time][u32 dev_idx][u32
 * data_sz][payload padded to 4 bytes], repeated; len bytes), as the GPU
 * data stream and the loop's default-stream source lay them out. As
 * rec_frame; ONI_EINVALARG for a block that is not whole frames. */
int rec_frames(struct rec *r, const void *blk, size_t len, uint64_t host_ns);
/* Queue a stimulation: the output pins written (bits 0-7) at host_ns, in
 * answer to the sample at acquisition clock `cause` (its events' time). */
int rec_stim(struct rec *r, uint64_t cause, uint32_t pins, uint64_t host_ns);

struct rec_spike {
    uint64_t clock;   /* acquisition clock of the spike's sample */
    uint32_t chan;    /* channel of the stream */
    int32_t unit;     /* sorted unit, or -1 (unsorted: cluster 0) */
};
/* Queue n spikes detected on the stream of device dev_idx (probe p of an
 * NP2.0e; 0 for others). As rec_frame. */
int rec_spikes(struct rec *r, oni_dev_idx_t dev_idx, uint32_t probe, const struct rec_spike *s, uint32_t n,
               uint64_t host_ns);

#define REC_MSG_TEXT 128 /* bytes of a message's text at most (longer ones are cut) */
/* Queue a text message (a change the user made during the run, as the
 * Open Ephys GUI's MessageCenter keeps them) at acquisition clock `clock`
 * (0: the last sample the recording received), received at host_ns. As
 * rec_frame; ONI_EINVALARG for an empty text. */
int rec_message(struct rec *r, uint64_t clock, const char *text, uint64_t host_ns);

struct rec_stats {
    uint64_t frames;         /* frames recorded (into streams or events) */
    uint64_t frames_other;   /* frames of devices not recorded */
    uint64_t samples;        /* rows of continuous data written */
    uint64_t events, spikes; /* TTL events and spikes written */
    uint64_t messages;       /* text messages written */
    uint64_t lost_msgs, lost_bytes; /* not queued: the queue was full */
    uint64_t unwritten;      /* frames, stimulations and spike lists not written: they came after the recording failed */
    uint64_t bytes;          /* bytes written to the files */
    size_t queue_peak;       /* most bytes the queue held */
    size_t queued, queue_cap;/* bytes it holds now, and can hold */
    int failed;              /* the recording stopped at a write that failed */
    char why[256];           /* why, for the user */
};

/* What the recording did so far (any thread; the writer's figures as of
 * its last flush, the queue's as of now). */
void rec_get_stats(struct rec *r, struct rec_stats *st);

/* Write out what the queue holds, close every file whole and free r;
 * *st (may be NULL) gets the final figures. 0, or ONI_EWRITEFAILURE when
 * the recording failed or could not be closed (st->why says). */
int rec_close(struct rec *r, struct rec_stats *st);

/* `onigpu recover DIR`: make the Open Ephys recording in DIR (the
 * directory given to rec_open; the recording is DIR/Record Node
 * 101/experiment1/recording1) consistent after its process died: in every
 * folder structure.oebin lists, every file cut to the rows all of them hold
 * and every .npy header set to that count. Prints
 * nothing: *report (cap bytes) says what it did. 0; ONI_EINVALARG when DIR
 * holds no recording onigpu can read (report says why); ONI_EWRITEFAILURE. */
int rec_recover(const char *dir, char *report, size_t cap);

#endif
