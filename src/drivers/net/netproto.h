/* netproto.h - the wire protocol between the `net` driver (netdrv.c) and its
 * server (netserve.c): the ONI driver ABI of onidriver.h carried over UCX
 * links (ucxlink.h: shared memory, TCP or verbs, as UCX picks), so that a
 * program in another process or on another machine drives hardware that a
 * driver there holds. docs/net.md describes it in prose; this header is the
 * authority for layouts.
 *
 * A session has one link per group of driver calls that the host library
 * may make concurrently (onidriver.h, Threads), so a data read that waits
 * for the card never delays a register access or a write:
 *   CTRL   init, config registers, options, the signal stream
 *   DATA   the default read stream
 *   WRITE  the default write stream
 *   GPU    blocks of the GPU read stream (onigpu.h's ONI_DRV_READ)
 *   GPUW   blocks of the GPU write stream (ONI_DRV_WRITE), so that results
 *          written never wait behind a read that waits for the card
 * On each link the client sends one request and waits for its answer.
 * Every message is one UCX active message: its header is a struct netp_hdr
 * and a struct netp_call (request) or struct netp_answer (answer); its body
 * the type's bytes (below), len counting the call or answer and the body.
 * Host byte order: the magic of a peer of the other byte order does not
 * match, and it is refused.
 *
 * Both sides treat every received byte as hostile: netp_parse checks magic,
 * version, type and sizes before a body is taken, and the receiver checks
 * each body against what it asked or allows. A server that listens beyond
 * the loopback wants a shared secret in the HELLO (docs/net.md, Security). */
#ifndef NETPROTO_H
#define NETPROTO_H

#include <stddef.h>
#include <stdint.h>

#define NETP_MAGIC 0x54454E4Fu /* "ONET" in memory on little-endian */
#define NETP_VERSION 4u /* 4: GPU_IPC; 3: over UCX, HELLO carries the secret */
#define NETP_MAXOPT 4096u        /* largest option value, bytes */
#define NETP_MAXXFER (16u << 20) /* largest stream read or write of one request, bytes */
#define NETP_MAXNAME 64u         /* the served driver's "name major.minor.patch", NUL included */
#define NETP_MAXSECRET 256u      /* longest shared secret, bytes */

enum netp_chan { NETP_CHAN_CTRL = 0, NETP_CHAN_DATA, NETP_CHAN_WRITE, NETP_CHAN_GPU, NETP_CHAN_GPUW, NETP_NCHAN };

/* Request types. what/arg/token: the fields of struct netp_call; "+" what
 * follows the call. Answers carry a struct netp_answer, status >= 0 or an
 * ONI error code, and what the line after "->" says. */
enum netp_type {
    NETP_HELLO = 1,        /* first on CTRL: opens the session; + the secret (if any) -> token; + the driver's name */
    NETP_ATTACH,           /* first on DATA, WRITE, GPU and GPUW: what = chan, token -> - */
    NETP_INIT,             /* what = host_idx (int32) -> oni_driver_init's result */
    NETP_READ,             /* what = stream, arg = most bytes -> status = bytes; + that many bytes */
    NETP_WRITE,            /* what = stream; + arg bytes -> status = bytes taken */
    NETP_CONFIG_READ,      /* what = register -> value */
    NETP_CONFIG_WRITE,     /* what = register, arg = value -> - */
    NETP_SET_OPT_CALLBACK, /* what = ONI option; + arg bytes -> - */
    NETP_SET_OPT,          /* what = driver option; + arg bytes -> - */
    NETP_GET_OPT,          /* what = driver option, arg = capacity -> value = length; + the value (status >= 0) */
    NETP_GPU_READ,         /* arg = the client's buffer bytes (0: not known) -> status = RD_SZ; + one block */
    NETP_GPU_WRITE,        /* + arg bytes, one block of WR_SZ -> - */
    NETP_GPU_IPC,          /* on GPU (what = 0: a read) or GPUW (what = 1: a write), from a client on the
                              server's machine: one block moved by the served driver straight into (out
                              of) the client's GPU memory, shared by CUDA IPC; arg = the block's bytes
                              (read: the room there), + struct netp_ipc -> status = bytes (read), 0
                              (write); ONI_EUNIMPL: this server cannot (the client stages instead) */
    NETP_NTYPE,
    NETP_REPLY = 0x80 /* or-ed into the request's type in its answer */
};

struct netp_hdr {
    uint32_t magic;
    uint16_t version;
    uint16_t type;
    uint32_t seq; /* chosen by the client, echoed in the answer */
    uint32_t len; /* body bytes after the header */
};

struct netp_call {
    uint32_t what;
    uint32_t arg;
    uint64_t token;
};

struct netp_answer {
    int32_t status;
    uint32_t value;
    uint64_t token;
};

/* NETP_GPU_IPC's body: the client's GPU allocation as gpu_ipc_export names
 * it (src/gpu/gpu.h), its bytes, and where in it the block starts. The
 * server checks offset + arg against the allocation it maps. */
#define NETP_IPC_HANDLE 64u
struct netp_ipc {
    uint8_t handle[NETP_IPC_HANDLE];
    uint64_t alloc;
    uint64_t offset;
};

/* Whether h may begin a message of the peer: 0, or ONI_EBADCONTROLLER for
 * another protocol or version, ONI_EINVALARG for an unknown type, a request
 * where an answer is due (or the reverse), or a body longer than that type
 * can have. answer: 1 on the client, 0 on the server. */
int netp_check_hdr(const struct netp_hdr *h, int answer);

/* Most bytes that may follow a request's struct netp_call (answer 0) or an
 * answer's struct netp_answer (answer 1) of type t (without NETP_REPLY). */
size_t netp_max_extra(uint16_t t, int answer);

/* The header of a message: the peer's ULINK header bytes (hlen of them)
 * with a body of blen bytes, as ulink_next gives them, into *h and *fixed
 * (a struct netp_answer when answer is 1, on the client; a struct netp_call
 * when 0, on the server). 0, or netp_check_hdr's error for the header, or
 * ONI_EINVALARG where the sizes disagree with it. */
int netp_parse(const void *hdr, size_t hlen, size_t blen, int answer, struct netp_hdr *h, void *fixed);

/* Parse "host:port" ("[v6addr]:port"; an empty host: every address on the
 * server, the loopback on the client; port 0..65535, 0 only to listen: any
 * free port) into socket addresses for UCX. 0, ONI_EBADADDR (not such an address),
 * ONI_ENOHOST (the host does not resolve) or ONI_EBADALLOC; *res from
 * getaddrinfo, freed with freeaddrinfo. */
struct addrinfo;
int netp_resolve(const char *addr, int passive, struct addrinfo **res);

/* 1 for onigpu.h's options whose value names memory of the caller's process
 * (PIN, UNPIN, READ_ASYNC, WRITE_ASYNC, and READ and WRITE as options): they
 * never cross the network, whichever end is asked. GPU blocks travel as
 * NETP_GPU_READ / NETP_GPU_WRITE instead. */
int netp_names_memory(int opt);

/* Make *buf (of *cap bytes) hold at least n: 0, or ONI_EBADALLOC with
 * *buf and *cap as they were. */
int netp_grow(uint8_t **buf, size_t *cap, size_t n);

/* Where a client connects when nothing else says (oninet.h's ONIGPU_NET). */
#define NETP_DEFAULT_ADDR "127.0.0.1:9455"

/* Whether sa is a loopback address (127/8, ::1): a server listening on one
 * is reached from this machine only. */
struct sockaddr;
int netp_is_loopback(const struct sockaddr *sa);

#endif
