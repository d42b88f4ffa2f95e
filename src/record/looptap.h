/* looptap.h - a recording beside the closed loop: the tap of
 * loop_run_config (src/loop/run.h) that records the probes' blocks, the
 * DigitalIO echoes, every stimulation and the detected spikes. */
#ifndef RECORD_LOOPTAP_H
#define RECORD_LOOPTAP_H

#include "loop/run.h"
#include "record/record.h"

struct rec_loop_tap {
    struct loop_run_tap tap;   /* &tap goes into loop_run_config.tap */
    struct rec_config cfg;     /* stim_stream and spike_stream are set */
    struct rec *r;             /* the recording, once the run opened it */
    oni_dev_idx_t raw[2];      /* the NP2.0e raw devices in table order (port A's, B's): loop
                                  channel p * 384 + c is channel c of probe p % 2 of raw[p / 2] */
    uint32_t nraw;
    /* called once the recording is open, before acquisition (may be NULL) */
    void (*opened)(void *arg, struct rec *r);
    void *arg;
};

/* Set t up to record as c says (c's strings are the caller's, kept). */
void rec_loop_tap_init(struct rec_loop_tap *t, const struct rec_config *c);
/* Close the recording if the run opened it (rec_close, *st may be NULL):
 * 0, or rec_close's error; 0 with st zeroed when it never opened. */
int rec_loop_tap_close(struct rec_loop_tap *t, struct rec_stats *st);

#endif
