/* bench_record.h - `onigpu bench record`: what recording costs the closed
 * loop, and how fast the recorder writes (src/record).
 *
 * latency: the same closed loop (loop_run_session, one backend and block)
 * run `rounds` times without and with a recording (Open Ephys format into
 * dir), the order alternating each round; the echoes after the warm-up of
 * each arm pooled: p50, p99, p99.9 and max, and each as the ratio
 * recording / no recording (table "latency").
 * rate: `probes` NP2.0e probes' super-frames made in memory at 30 kHz each
 * (paced in 1 ms blocks) through the recorder for `seconds`, then as fast
 * as the writer takes them (the queue kept below half full): MB/s of continuous data written, what the queue could not take
 * (table "rate"). The recordings are removed afterwards unless keep. */
#ifndef BENCH_RECORD_H
#define BENCH_RECORD_H

#include <stdint.h>
#include "bench/bench.h"

struct bench_record_opts {
    int backend;          /* enum loop_backend (a host-read one) */
    uint32_t block;       /* frames per block */
    double seconds;       /* of each loop run, and of each rate measurement */
    uint32_t rounds;      /* loop runs per arm */
    uint32_t probes;      /* probes of the rate part (0: no rate part) */
    int latency;          /* 1: the latency part */
    const char *dir;      /* an existing directory for the recordings */
    int keep;             /* keep the recordings */
    int format;           /* enum rec_format */
};

/* Run the parts into r. 0, or an ONI error (what was measured stays in r). */
int bench_record_run(const struct bench_record_opts *o, struct results *r);

#endif
