/* view.h - the live view of the closed loop in a browser (`onigpu run
 * --view`, docs/view.md). The loop's threads hand decimated snapshots to
 * bounded lock-free rings (ring.h) through the run's tap (run.h); a pump
 * thread of the view turns them into one server-sent event every 100 ms; an
 * HTTP server (libmicrohttpd) serves the page (web/view/) and the events to
 * every client. A slow or vanished client loses events of the view, never a
 * sample of the loop: nothing the loop calls waits on the view. */
#ifndef VIEW_VIEW_H
#define VIEW_VIEW_H

#include <stddef.h>
#include <stdint.h>
#include "loop/run.h"

#define VIEW_TRACES 6        /* channels with a live trace */
#define VIEW_PROBE_CHAN 384  /* an NP2.0e probe's channels */
#define VIEW_MAXPROBES 4     /* probes the view draws at most (run --probes) */
#define VIEW_MAXCHAN (VIEW_PROBE_CHAN * VIEW_MAXPROBES) /* the loop's channels: probe p's c is p * 384 + c */
#define VIEW_TICK_MS 100     /* one event per this */
#define VIEW_MAX_CLIENTS 16  /* event streams at once; more get 503 */

struct view;

struct view_config {
    char host[64];        /* bind address: dotted IPv4 ("127.0.0.1" when empty) */
    uint16_t port;        /* 0: a free port (view_port says which) */
    const char *token;    /* NULL: read-only; else POST /control needs it */
    const char *web_dir;  /* the page's folder (index.html, view.js, view.css,
                             node_modules/uplot/dist/) */
    uint32_t decim;       /* frames per trace point (min and max of each); 0: 30 */
    int detect_stage;     /* the chain's detect stage (loop_stage_reconfigure), -1: none */
    uint32_t probes;      /* probes in the loop, 1..VIEW_MAXPROBES (0: 1) */
    /* Told of every accepted change from the page, as a line for the user
     * and the recording (may be NULL); on a server thread. clock: the
     * acquisition clock of the last sample the loop had read when the
     * change was made, or 0 before the first block (release/acquire: what
     * the run's tap did before that block, the recording opening it, is
     * seen by note when clock != 0). */
    void (*note)(void *arg, uint64_t clock, const char *text);
    void *arg;
};

/* "[HOST:]PORT" into c->host, c->port (HOST dotted IPv4 or "localhost";
 * none: loopback). 0, or ONI_EINVALARG with why saying what is wrong. */
int view_parse_addr(const char *s, struct view_config *c, char *why, size_t cap);

/* Check c->web_dir holds the page and the charting library, bind the
 * server and start it. 0 with *out the caller's (view_close), or
 * ONI_EINVALARG (a missing file, an address that cannot be bound),
 * ONI_EUNIMPL (built without libmicrohttpd), ONI_EBADALLOC; why says. */
int view_open(const struct view_config *c, struct view **out, char *why, size_t cap);
/* The port the server listens on. */
uint16_t view_port(const struct view *v);
/* Event streams connected now. */
uint32_t view_clients(const struct view *v);
/* Snapshots and events the view lost so far: rings full (the loop's side)
 * and events a client was too slow for. */
uint64_t view_lost(const struct view *v);
/* The run's tap of the view (into loop_run_config.tap), forwarding every
 * call to next as well (a recording; NULL: none). Owned by v. */
const struct loop_run_tap *view_tap(struct view *v, const struct loop_run_tap *next);
/* The run started (loop_run_config.started): backend and block shown. */
void view_started(struct view *v, const char *backend, const struct loop_run_result *r);
/* The run's live report (loop_run_config.progress). */
void view_progress(struct view *v, const struct loop_run_progress *p);
/* The run ended: its summary, and where its results are (NULL: none), go
 * to every client as the last event. */
void view_end(struct view *v, const struct loop_run_result *r, const char *results);
/* Stop the server (clients get their last events first, for at most
 * linger_ms) and free v (NULL ok). */
void view_close(struct view *v, uint32_t linger_ms);

/* 1 when a request's Host header (NULL: none) names the server bound to
 * the dotted address bound: loopback's names or bound itself, any port;
 * bound "0.0.0.0": any. 0 otherwise (another site's name: DNS rebinding). */
int view_host_ok(const char *bound, const char *host);

/* A change asked by the page (POST /control, body "k=4.5" and/or
 * "channels=1,2,3", '&' between): threshold and trace channels. */
struct view_control {
    int have_k, have_chans;
    double k;                  /* detection threshold in noise SDs */
    uint32_t nchan;
    uint16_t chan[VIEW_TRACES];
};
#define VIEW_K_MIN 2.0
#define VIEW_K_MAX 20.0
/* Parse n bytes at s (not NUL-terminated) into *c, channels below nchan
 * (the loop's: 384 per probe). 0, or ONI_EINVALARG with why naming the key
 * or value and what is allowed (c then unspecified). */
int view_parse_control(const char *s, size_t n, uint32_t nchan, struct view_control *c, char *why, size_t cap);

#endif
