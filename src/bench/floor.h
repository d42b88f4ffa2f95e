/* floor.h - `onigpu bench floor`: the latency floor of each way a host thread
 * can move a small block from page-locked host memory into GPU memory and
 * learn that it has landed (docs/transfers.md, "The floor of a host-driven
 * 4 KiB copy").
 *
 * Method: every mechanism runs in the same process, interleaved in rounds
 * (each round runs 1/rounds of every mechanism's repetitions, the order
 * rotating from round to round) so that machine noise hits all alike. One
 * sample is the time from just before the first call of a transfer to the
 * moment the host knows the bytes are in GPU memory. Every wait has a
 * deadline; after each slice the device buffer is copied back and compared
 * with the host buffer (whose first and last 8 bytes carry the transfer's
 * sequence number). */
#ifndef BENCH_FLOOR_H
#define BENCH_FLOOR_H

#include <stdint.h>
#include <stdio.h>

enum floor_mech {
    FLOOR_MEMCPY_QUERY = 0, /* cudaMemcpyAsync, spin on cudaStreamQuery (gpu_stream_wait before 2026-11-24) */
    FLOOR_MEMCPY_FLAG,      /* cudaMemcpyAsync + cuStreamWriteValue32 to a mapped host word, spin on the word
                             * (gpu_copy_async + gpu_stream_wait now) */
    FLOOR_MEMCPY_SYNC,      /* cudaMemcpyAsync + cudaStreamSynchronize (the device's schedule flag decides) */
    FLOOR_DRV_MEMCPY_FLAG,  /* as memcpy-flag, the copy through the driver API (cuMemcpyHtoDAsync) */
    FLOOR_ARMED,            /* wait-value + copy + write-value queued ahead; timed: store go, spin on done */
    FLOOR_KERNEL_PULL,      /* a persistent kernel polls a mapped doorbell and pulls the block itself */
    FLOOR_DOORBELL_RTT,     /* the same kernel with no payload: doorbell poll + done write round trip */
    FLOOR_LAUNCH_QUERY,     /* an empty kernel launch, spin on cudaStreamQuery (launch reference) */
    FLOOR_PTR_ATTRS,        /* no transfer: gpu_query of the device block (six pointer attributes) */
    FLOOR_PTR_ID,           /* no transfer: gpu_buffer_id of the device block (one attribute) */
    FLOOR_NMECH
};

#define FLOOR_ALL_MECHS ((1u << FLOOR_NMECH) - 1)
#define FLOOR_MAX_SIZE (16u << 20)
#define FLOOR_MAX_REPS 100000000u /* keeps every sequence number of a run distinct (32 bits) */

/* Name of a mechanism ("memcpy-query", ...), NULL when out of range. */
const char *floor_mech_name(int mech);
/* The mechanism of a name, or -1. */
int floor_mech_parse(const char *name);

struct results;

struct bench_floor_opts {
    uint64_t reps;        /* timed transfers per mechanism, 1 .. FLOOR_MAX_REPS */
    uint32_t size;        /* bytes per transfer, 8 .. FLOOR_MAX_SIZE */
    unsigned mechs;       /* bits 1 << enum floor_mech (non-zero) */
    unsigned rounds;      /* rounds the repetitions are split into (>= 1; capped at reps) */
    uint32_t timeout_ms;  /* deadline of every wait (> 0) */
    const char *out_dir;  /* where the command opens the result set (required) */
    FILE *log;            /* progress and errors (NULL: quiet); the table goes to stdout */
};

/* 0 when o can be run, else ONI_EINVALARG (see the field comments). */
int bench_floor_check(const struct bench_floor_opts *o);

/* The body of `onigpu bench floor` (the shape of bench.h): run the
 * benchmark and add to r, the open set "floor", one row per mechanism (n,
 * mean, min, p50, p99, p99.9, max in us, max/p50, p50 over the first
 * mechanism's p50), once every mechanism was measured; *measured says
 * whether it got that far (else the command writes no set). Says on stdout
 * what the table shows. Returns 0; ONI_EINVALARG for bad options or a NULL
 * r (nothing run); ONI_ENOGPU without a usable GPU or a CUDA build (nothing
 * run, the reason logged) or when a CUDA call fails; ONI_ETIMEOUT when a
 * wait passed its deadline; ONI_EREADFAILURE when the device buffer did not
 * hold the host's bytes; ONI_EBADALLOC. Every error is logged with the
 * mechanism it happened in. */
int bench_floor_run(const struct bench_floor_opts *o, struct results *r, int *measured);

#endif
