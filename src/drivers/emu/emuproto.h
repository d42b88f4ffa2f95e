/* emuproto.h - the wire protocol between the emu driver (daemon mode) and the
 * onix-emu daemon. docs/daemon.md describes it in prose; this header is the
 * authority for layouts.
 *
 * Control travels as messages over AF_UNIX SOCK_SEQPACKET connections (one
 * message per packet, host byte order); stream payload travels through rings
 * in one shared-memory file (memfd) that the daemon creates per session and
 * passes to the client with SCM_RIGHTS in the HELLO reply. A session has one
 * connection per channel, so that a blocked data read never delays a register
 * access or a write frame:
 *   CTRL  config registers, options, stats, the signal stream (ring SIGNAL)
 *   DATA  the default read stream (ring DATA)
 *   WRITE the default write stream (ring WRITE)
 *   GPU   the GPU read and write streams (rings GPU, GPUW)
 * On each channel the client sends one request and waits for its reply.
 *
 * Both sides treat every received byte as hostile: emup_parse checks the
 * header and the exact body size of each type, and emup_ring_* check every
 * ring offset against the receiver's own record of the ring. */
#ifndef EMUPROTO_H
#define EMUPROTO_H

#include <stddef.h>
#include <stdint.h>
#include "onigpu.h"
#include "oniemu.h"

#define EMUP_MAGIC 0x554D454Fu /* "OEMU" in memory on little-endian */
#define EMUP_VERSION 5u /* 2: onigpu_stream_stats_t.bad_wframes; 3: the GPUW channel; 4: READ answers and CONFIG_WRITE carry the card's flush count; 5: WRITE carries a deadline */
#define EMUP_MAXMSG 1024 /* largest message, header included */
#define EMUP_MAXSTR 512  /* largest string (spec, path) including its NUL */

/* GPU: the GPU read stream (READ, GPU_DMA card -> GPU); GPUW: the GPU write
 * stream (WRITE, GPU_DMA GPU -> card), so that a write of results never
 * waits behind a read that waits for the card's data. GPU memory
 * (GPU_IMPORT, GPU_RELEASE) on either: the client asks on the channel of
 * the transfer an import serves, PIN and UNPIN on GPU. */
enum emup_chan { EMUP_CHAN_CTRL = 0, EMUP_CHAN_DATA, EMUP_CHAN_WRITE, EMUP_CHAN_GPU, EMUP_CHAN_GPUW, EMUP_NCHAN };

/* Rings; direction: who produces. */
enum emup_ring {
    EMUP_RING_SIGNAL = 0, /* daemon -> client */
    EMUP_RING_DATA,       /* daemon -> client */
    EMUP_RING_WRITE,      /* client -> daemon */
    EMUP_RING_GPU,        /* daemon -> client */
    EMUP_RING_GPUW,       /* client -> daemon */
    EMUP_NRING
};

enum emup_type {
    EMUP_HELLO = 1,    /* c->d, first on CTRL: body = spec string (may be ""), NUL-terminated */
    EMUP_ATTACH,       /* c->d, first on another channel: struct emup_attach */
    EMUP_CONFIG_READ,  /* struct emup_config (value ignored) */
    EMUP_CONFIG_WRITE, /* struct emup_config */
    EMUP_READ,         /* struct emup_read */
    EMUP_WRITE,        /* struct emup_write */
    EMUP_STATS,        /* empty body */
    EMUP_LINK,         /* empty body */
    EMUP_TRUTH,        /* body = path string, NUL-terminated ("" stops) */
    EMUP_GPU_IMPORT,   /* GPU or GPUW: struct emup_gpu_import; status reply, value = import id */
    EMUP_GPU_DMA,      /* GPU channel (card -> GPU), GPUW (GPU -> card): struct emup_gpu_dma; status reply */
    EMUP_GPU_RELEASE,  /* GPU or GPUW: struct emup_gpu_release; status reply */
    EMUP_MODE,         /* empty body; status reply, value = the card's EMU_FEAT_* bits (emu.h) */
    EMUP_NTYPE,
    EMUP_REPLY = 0x80  /* or-ed into the request's type in its reply */
};

struct emup_hdr {
    uint32_t magic;
    uint16_t version;
    uint16_t type;
    uint32_t seq; /* chosen by the client, echoed in the reply */
    uint32_t len; /* body bytes after the header */
};

struct emup_attach {
    uint64_t token; /* from the HELLO reply */
    uint32_t chan;  /* enum emup_chan, not CTRL */
    uint32_t pad;
};

struct emup_config {
    uint32_t reg; /* oni_config_t */
    uint32_t value;
};

/* Ask the daemon to produce up to want bytes of stream into the channel's
 * ring. tail: the client has consumed everything before this ring offset. */
struct emup_read {
    uint32_t stream; /* enum emu_stream: DATA, SIGNAL or GPU */
    uint32_t want;
    uint32_t timeout_ms;
    uint32_t pad;
    uint64_t tail;
};

/* The client has put len bytes of write frames at ring offset start.
 * deadline_ns: CLOCK_MONOTONIC time (oni_now_ns) when the client stops
 * waiting for the answer, less its margin for the answer's way back; a write
 * that would reach the card after it delivers nothing and is answered
 * ONI_ETIMEOUT (the client said so already), 0 = none. */
struct emup_write {
    uint32_t stream; /* enum emu_stream: WRITE or GPU_WRITE */
    uint32_t len;
    uint32_t timeout_ms;
    uint32_t pad;
    uint64_t start;
    uint64_t deadline_ns;
};

/* GPU memory of the client, reached by the daemon's DMA engine (CUDA IPC).
 * IMPORT maps the allocation named by handle (cudaIpcMemHandle_t, of the
 * allocation's base) of size bytes and answers an id (never 0); RELEASE
 * unmaps it once no queued job uses it. */
#define EMUP_GPU_HANDLE 64
#define EMUP_GPU_MAXIDS 1024 /* imports a session may hold (released ones count until their jobs are done) */

struct emup_gpu_import {
    uint8_t handle[EMUP_GPU_HANDLE];
    uint64_t size; /* bytes of the allocation */
};

/* Move len bytes between the card and [offset, offset + len) of import id.
 * dir 0: card -> GPU (the GPU read stream), 1: GPU -> card (write frames).
 * Without EMUP_DMA_ASYNC the reply comes when the payload is complete; with
 * it the job is queued in the daemon's DMA engine and, once complete, seq is
 * written to the 32-bit word at done_offset of import done_id. deadline_ns:
 * CLOCK_MONOTONIC time after which a synchronous transfer must not start
 * (both ends run on one machine), 0 = none. EMUP_DMA_RELEASE_BUF releases
 * id, EMUP_DMA_RELEASE_DONE done_id, after this transfer (as RELEASE would):
 * an unpinned buffer costs one round trip less. */
enum { EMUP_DMA_ASYNC = 1, EMUP_DMA_RELEASE_BUF = 2, EMUP_DMA_RELEASE_DONE = 4 };

struct emup_gpu_dma {
    uint32_t id;
    uint32_t dir;
    uint64_t offset;
    uint32_t len;
    uint32_t timeout_ms;
    uint64_t deadline_ns;
    uint32_t flags;   /* EMUP_DMA_* */
    uint32_t done_id; /* EMUP_DMA_ASYNC: the import holding the completion word */
    uint64_t done_offset;
    uint32_t seq;
    uint32_t pad;
};

struct emup_gpu_release {
    uint32_t id;
    uint32_t pad;
};

/* Replies. rc: 0 or a (negative) ONI error of the operation. */
struct emup_ring_desc {
    uint64_t offset; /* bytes from the start of the shared memory */
    uint64_t cap;    /* ring size in bytes */
};

struct emup_hello_reply {
    int32_t rc;
    uint32_t pad;
    uint64_t token;
    uint64_t shm_size;
    struct emup_ring_desc ring[EMUP_NRING];
    char err[128]; /* why, when rc != 0 (NUL-terminated) */
};

struct emup_status_reply { /* ATTACH, CONFIG_*, WRITE, TRUTH, and errors of any type */
    int32_t rc;
    uint32_t value; /* CONFIG_READ: the register */
};

struct emup_read_reply {
    int32_t rc;
    uint32_t len;   /* bytes produced at [start, start + len) */
    uint64_t start; /* ring offset */
    uint32_t epoch; /* data streams: the card's flush count when these bytes left its FIFO */
    uint32_t pad;
};

struct emup_stats_reply {
    int32_t rc;
    uint32_t pad;
    onigpu_stream_stats_t stats;
};

struct emup_link_reply {
    int32_t rc;
    uint32_t pad;
    oniemu_link_t link;
};

/* A parsed request (or reply: body only, use the matching struct). */
struct emup_msg {
    uint16_t type;
    uint32_t seq;
    const uint8_t *body;
    uint32_t len;
    union {
        struct emup_attach attach;
        struct emup_config config;
        struct emup_read read;
        struct emup_write write;
        struct emup_gpu_import gpu_import;
        struct emup_gpu_dma gpu_dma;
        struct emup_gpu_release gpu_release;
        const char *str; /* HELLO spec, TRUTH path: points into body */
    } u;
};

/* Parse and check one received request of n bytes. Returns 0, ONI_EBADFRAME
 * (short, bad magic, wrong body size for the type, unterminated or overlong
 * string, unknown type or field out of range) or ONI_EBADCONTROLLER (other
 * protocol version). On error m->seq/type are set when the header was
 * readable, so that the receiver can answer. */
int emup_parse(const uint8_t *buf, size_t n, struct emup_msg *m);

/* Check a reply of n bytes to the request (type, seq): header, REPLY bit,
 * and body size exactly body_len (status-only error replies are accepted
 * too: *is_status is then set). Returns 0, ONI_EBADCONTROLLER (the peer speaks
 * another protocol version) or ONI_EBADFRAME. */
int emup_check_reply(const uint8_t *buf, size_t n, uint16_t type, uint32_t seq, size_t body_len,
                     int *is_status);

/* Is the placement of len bytes at ring offset start valid for a ring of cap
 * bytes whose producer has reached head and whose consumer has reached tail?
 * Valid: tail <= head <= start < head + cap, contiguous in the ring (start %
 * cap + len <= cap) and, while bytes are unconsumed (tail < head), within one
 * ring of the tail (start + len - tail <= cap). */
int emup_ring_ok(uint64_t cap, uint64_t tail, uint64_t head, uint64_t start, uint64_t len);

/* Where a producer at head places len contiguous bytes: head, or the start of
 * the next lap when they would wrap. */
uint64_t emup_ring_place(uint64_t cap, uint64_t head, uint64_t len);

/* Send one message (header + body), and fd with SCM_RIGHTS when fd >= 0,
 * waiting for room in the socket as long as it takes (the daemon's answers).
 * Returns 0 or ONI_EDISCONNECTED (peer gone or socket error). */
int emup_send(int sock, uint16_t type, uint32_t seq, const void *body, size_t len, int fd);

/* emup_send waiting for room only until deadline (oni_now_ns() time; 0 =
 * no deadline): a peer that stopped reading (SIGSTOP) leaves its socket
 * full. A message goes whole or not at all (SOCK_SEQPACKET), so after
 * ONI_ETIMEOUT nothing of it was sent and the connection is usable. Returns
 * 0, ONI_ETIMEOUT or ONI_EDISCONNECTED. */
int emup_send_until(int sock, uint16_t type, uint32_t seq, const void *body, size_t len, int fd,
                    uint64_t deadline);

/* Receive one message into buf (cap >= EMUP_MAXMSG), waiting until deadline
 * (oni_now_ns() time; 0 = no deadline). A passed descriptor is stored in
 * *fd (else -1; fd may be NULL, then any passed descriptor is closed).
 * Returns the message size, ONI_ETIMEOUT, ONI_EDISCONNECTED (peer closed or
 * error) or ONI_EBADFRAME (truncated message). */
int emup_recv(int sock, uint8_t *buf, size_t cap, uint64_t deadline, int *fd);

#endif
