/* view_int.h - inside the live view (view.h): the rings the loop fills, the
 * pump's state, the queue of events the server streams (server.c). */
#ifndef VIEW_INT_H
#define VIEW_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include "loop/kernels.h"
#include "view/ring.h"
#include "view/view.h"

#define VIEW_QUEUE 32          /* events kept for the clients (3.2 s) */
#define VIEW_RATE_TICKS 10     /* per-channel rates over the last second */
#define VIEW_MAX_UNITS 512     /* units 0..this-1 get a rate (a sorter's template index); others not */
#define VIEW_TOP_UNITS 10      /* the most active units a tick lists */
#define VIEW_AUTO_TICKS 15     /* at this tick the busiest channels are traced (none chosen) */
#define VIEW_SEL_BASE (VIEW_MAXCHAN + 1) /* the selection word: 6 digits of this base (channel + 1, 0: none) */
#define VIEW_TBUF 8192         /* trace points a tick takes at most (the ring's size) */
#define VIEW_EBUF 16384        /* events a tick takes at most (the ring's size) */
#define VIEW_LAT_STEP 1.001    /* latency bins: each 0.1 % wider than the last, from 1 us */
#define VIEW_LAT_BINS 18432    /* ... to 1.001^18432 us (about 100 s); below 1 us: bin 0 */

/* Trace points: min and max of each selected channel over c->decim frames. */
struct view_trace_rec {
    uint64_t t;                      /* acquisition clock of the first frame */
    uint64_t sel;                    /* the selection word they are of */
    int16_t lo[VIEW_TRACES], hi[VIEW_TRACES];    /* raw: ADC code - 2048 */
    int16_t flo[VIEW_TRACES], fhi[VIEW_TRACES];  /* through the detector's band-pass, rounded */
};

enum { VIEW_EV_SPIKE = 0, VIEW_EV_STIM = 1 };
struct view_event_rec {
    uint64_t t;      /* acquisition clock */
    uint32_t kind;   /* VIEW_EV_* */
    uint32_t chan;   /* spike: channel; stim: pins */
    uint32_t unit;   /* spike: its unit (onigpu_spike.unit), ONIGPU_UNIT_NONE unlabelled */
};

struct view_echo_rec {
    uint64_t tag;
    double lat_us;
};

/* One event of the stream, as sent ("event: ...\ndata: ...\n\n"). */
struct view_msgq {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *msg[VIEW_QUEUE];
    size_t len[VIEW_QUEUE];
    uint64_t seq;        /* events queued so far; event s is msg[s % VIEW_QUEUE] */
    int ended;           /* the end event is queued: no more */
    char *hello;         /* what a new client is sent first */
    size_t hello_len;
};

/* A growing text buffer (JSON). */
struct view_buf {
    char *s;
    size_t len, cap;
    int oom;
};

struct view {
    struct view_config cfg;
    char token[128];
    /* the loop's side: one producer per ring */
    struct view_ring traces, events, echoes;
    _Atomic uint64_t sel;            /* trace channels: view_sel_pack's word */
    _Atomic uint64_t sel_set;        /* 1: the page chose them (else the pump picks the busiest) */
    uint32_t nprobes, nchan;         /* probes in the loop and their channels (384 each) */
    struct loop_ephys_layout lay;    /* the probes' frames in a block (tap_open) */
    _Atomic int have_lay;
    _Atomic double acq_hz;           /* the acquisition clock (tap_open; the pump reads it) */
    _Atomic uint64_t last_clk;       /* the last frame's clock of the last block (release: note's clock) */
    /* the block thread's bucket */
    uint32_t bn;
    uint64_t bt, bsel;
    int16_t blo[VIEW_TRACES], bhi[VIEW_TRACES];
    float bflo[VIEW_TRACES], bfhi[VIEW_TRACES];
    float fb[2][3], fa[2][2];        /* the detector's band-pass (loop_ephys_init's design) */
    float fz[VIEW_TRACES][4];        /* its state per traced channel */
    double lo_hz, hi_hz;
    /* the run's tap, and the one it forwards to */
    struct loop_run_tap tap;
    const struct loop_run_tap *next;
    /* the loop, for threshold changes (tap->loop) */
    pthread_mutex_t lmu;
    struct loop *lp;
    double k;                        /* the threshold now (noise SDs) */
    /* the run's state as the control thread last reported it (smu) */
    pthread_mutex_t smu;
    struct loop_run_progress prog;
    int have_prog;
    char backend[32];
    uint32_t block;
    int gpu_stream;
    _Atomic int started;             /* set (release) after the fields above: the pump reads them after */
    double fs_hz;
    _Atomic uint64_t t0;             /* first sample's acquisition clock (0: none yet) */
    /* the pump */
    pthread_t pump;
    int pump_started;
    _Atomic int stop;                /* the pump ends */
    _Atomic int closing;             /* the server ends: streams end */
    struct view_trace_rec *tbuf;     /* what one tick takes from the rings */
    struct view_event_rec *ebuf;
    uint16_t rate[VIEW_RATE_TICKS][VIEW_MAXCHAN];
    uint16_t urate[VIEW_RATE_TICKS][VIEW_MAX_UNITS]; /* spikes per unit, per tick */
    uint16_t uchan[VIEW_MAX_UNITS];  /* the channel of each unit's last spike */
    uint32_t tick;
    uint32_t *lat_bins;              /* echoes per latency bin (VIEW_LAT_BINS), the pump's */
    uint64_t nlat;
    double lat_min, lat_max;         /* us */
    uint64_t nspikes, nstims;
    /* the stream */
    struct view_msgq q;
    _Atomic uint32_t clients;
    _Atomic uint64_t sent_lost;      /* events clients were too slow for */
    void *mhd;                       /* struct MHD_Daemon */
    uint16_t port;
    /* the page's files, read at open */
    struct view_file {
        const char *url, *path, *type;
        char *data;
        size_t len;
    } files[6];
};

/* view_buf: append printf-style / raw; the text is NUL-terminated. */
void view_buf_printf(struct view_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void view_buf_free(struct view_buf *b);
/* Queue one event for every client (takes b's text). */
void view_queue(struct view *v, const char *event, struct view_buf *b);
/* The selection word <-> channels: up to VIEW_TRACES channels below
 * VIEW_MAXCHAN as digits of base VIEW_SEL_BASE (1537^6 < 2^64), so one
 * atomic word carries a selection across all four probes. */
uint64_t view_sel_pack(const uint16_t *ch, uint32_t n);
uint32_t view_sel_unpack(uint64_t w, uint16_t *ch);
/* The probes' layout (v->nprobes side by side, as the loop lays them) from
 * a raw device's read size, and the band-pass
 * of the filtered traces (tap_open; tests): 0, or ONI_EINVALARG (no NP2.0e
 * super-frame fits), ONI_EBADALLOC. */
int view_probe_layout(struct view *v, uint32_t read_size);
/* Apply a parsed change: 0, or an ONI error with why (nothing changed then). */
int view_apply(struct view *v, const struct view_control *c, char *why, size_t cap);
/* server.c: start / stop the HTTP server on v->cfg's address. */
int view_server_start(struct view *v, char *why, size_t cap);
void view_server_stop(struct view *v);

#endif
