/* ctx.h - the core's internal view of a context, its frame pool and the
 * helpers the core's files share. Only the core (src/oni) includes this. */
#ifndef ONI_CTX_H
#define ONI_CTX_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include "oni/driver.h"
#include "oni/util/clock.h"
#include "oni/util/cobs.h"
#include "oni/util/opt.h"
#include "oni/util/wire.h"
#ifdef ONI_HAVE_SINGLE_THREADED
#include <sys/single_threaded.h>
#endif

/* Limits that bound what a device table may ask of the host (ONI_EBADDEVTABLE beyond). */
#define ONI_MAXDEVICES 65536u          /* one per RSV.RSV.HUB.IDX hub/device pair */
#define ONI_MAXFRAMEPAYLOAD (16u << 20) /* bytes of one frame's payload */
#define ONI_MAXBLOCKSIZE (1u << 30)    /* BLOCKREADSIZE / BLOCKWRITESIZE ceiling */

enum oni_state { ONI_STATE_UNINIT = 0, ONI_STATE_IDLE, ONI_STATE_RUNNING };

/* A block: BLOCKREADSIZE bytes read from the data stream (plus room for a
 * partial frame carried over from the block before). Frames point into it.
 * While it is the context's current block (open), refs is ONI_BLOCK_BIAS
 * minus the frames destroyed outside a biased section (other threads, the
 * one-thread path, a holder kept out); the bias holder's destroys in its
 * sections count in odone instead. The reader counts what it hands out
 * (handed() in frame.c). When the reader moves on it folds both counts into
 * refs, which from then on counts the frames not yet destroyed: each destroy
 * is one atomic subtraction, and whoever brings refs to 0 recycles the
 * block. So handing out a frame touches no shared counter, and the bias
 * holder's destroys take no locked instruction. */
#define ONI_BLOCK_BIAS (1u << 31) /* > frames of any block: (1 GiB + 16 MiB) / 20 bytes */
struct oni_block {
    atomic_uint refs;
    unsigned odone;            /* frames of it the bias holder destroyed while open (biased sections) */
    int open;                  /* it is the context's current block (biased sections) */
    size_t cap;
    struct oni_block *next;
    struct oni_pool *pool;
    struct oni_rseg *segs;     /* descriptors of this block's frames, kept with it */
    _Alignas(16) char data[];
};

enum { ONI_FRAME_READ = 1, ONI_FRAME_WRITE_POOLED, ONI_FRAME_WRITE_HEAP };

/* How every frame the library hands out begins. The public part comes first
 * so an oni_frame_t * is also a struct oni_fhead *; the union lets the
 * library write the fields the user sees as const. */
struct oni_fhead {
    union {
        oni_frame_t pub;
        struct {
            oni_fifo_time_t time;
            oni_fifo_dat_t dev_idx;
            oni_fifo_dat_t data_sz;
            char *data;
        } w;
    } u;
    int kind;
};

/* A read frame: a view into its block. */
struct oni_rframe {
    struct oni_fhead h;
    struct oni_block *block;
};

/* Read-frame descriptors, ONI_SEGFRAMES at a time, owned by one block for
 * its whole life: a block's frames use its segments in order, and the
 * segments are free again when the block is (all its frames destroyed). */
#define ONI_SEGFRAMES 256
struct oni_rseg {
    struct oni_rseg *next;
    struct oni_rframe f[ONI_SEGFRAMES];
};

/* A write frame. */
struct oni_frame {
    struct oni_fhead h;
    struct oni_frame *next;    /* free-list link */
    struct oni_pool *pool;     /* pooled frames: where they go back */
    size_t cap;                /* bytes of buf */
    uint32_t wlen;             /* bytes to send (header + padded payload) */
    _Alignas(16) char buf[];   /* [u32 dev_idx][u32 words][payload] */
};

/* One holder of the read bias (below): its thread, set once, and its flag
 * "inside a biased section", which only that thread writes. A line each. */
struct oni_bias_slot {
    _Alignas(64) _Atomic uintptr_t owner; /* oni_self() of the holder; 0 in slot 0, "nobody" */
    atomic_uint busy;
};
#define ONI_BIAS_HOLDERS 9 /* holders a context may have; then nobody gets the bias again */

/* Recycled blocks and write frames. Anyone may give things back (lock-free
 * push onto the ret_* stacks); only the context's reader or writer takes
 * them out, one at a time under its lock, so the stacks never see ABA. The
 * pool lives while the context or any block / pooled write frame taken from
 * it does. It also holds the read bias (below), which oni_destroy_frame
 * reaches through a frame's block. */
struct oni_pool {
    atomic_uint refs;
    _Atomic(struct oni_block *) ret_blocks;
    _Atomic(struct oni_frame *) ret_wframes; /* pooled write frames given back */
    struct oni_block *blocks;  /* reader's own free blocks (read lock) */
    struct oni_frame *wframes; /* writer's own free write frames (write lock) */
    /* The holder's slot (| 1 while a lock holder keeps it out), &slot[0]
     * when nobody holds the bias. Read on every call: a line of its own,
     * away from the counts above that every write frame changes. */
    _Alignas(64) _Atomic uintptr_t bias;
    unsigned holders; /* slots handed out (read lock) */
    int off;          /* no new holder: ONIGPU_READ_BIAS=0, no membarrier, or all slots used (read lock) */
    struct oni_bias_slot slot[1 + ONI_BIAS_HOLDERS];
};

/* A readable device in the read path's map (open addressing): want is its
 * frame header's [u32 dev_idx][u32 data_sz] read as one u64 (oni_frame_key)
 * plus 1, so that 0 marks an empty slot (no device's is 0: its read_size
 * would have to be 0xFFFFFFFF, far above the largest allowed). */
struct oni_hslot {
    uint64_t want;
};

/* A read frame header's [u32 dev_idx][u32 data_sz] as the one u64 that
 * loading those 8 bytes gives. The streams are little-endian, and the core
 * reads their fields in place. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the ONI streams are little-endian; the core reads them in place"
#endif
static inline uint64_t oni_frame_key(uint32_t idx, uint32_t sz) { return idx | (uint64_t)sz << 32; }

struct oni_ctx_impl {
    struct oni_driver drv;     /* copy of the backend table */
    void *dl;                  /* dlopen handle of an external driver, or NULL */
    oni_driver_ctx dctx;
    /* Lock order: lock, then olock, then the read lock, then wlock. lock:
     * state, options, registers and the signal stream; the read lock (rnext
     * and rserve, oni_rlock): the read path; wlock: the write path. The
     * device table changes only with all of them held. olock: the driver
     * options that drv.concurrent_opt lets run beside everything else take
     * it shared; the driver's init and reset take it exclusive, so such an
     * option never runs while the hardware behind it is being set up. */
    pthread_mutex_t lock, wlock;
    pthread_rwlock_t olock;
    atomic_uint rnext, rserve;
    atomic_uint rwant;         /* callers in oni_rlock_opt: a refill waiting for data gives way */
    _Atomic int state;
    int drv_open;              /* the driver's init succeeded */
    _Atomic uint32_t timeout_ms; /* ONI_OPT_TIMEOUTMS; 0: wait while the device is live (oni_wait_live) */
    unsigned reg_owed;         /* answers of register accesses that failed after TRIG (lock) */
    struct {                   /* a signal packet read in part when its reader gave up (lock) */
        uint8_t raw[ONI_COBSMAXPACKET];
        size_t len;
        int overlong;
    } sig;
    uint8_t *wpend;            /* the unsent rest of a frame whose write timed out (wlock) */
    size_t wpend_len, wpend_cap;
    oni_device_t *devs;        /* sorted by idx */
    size_t ndev;
    struct oni_hslot *hslot;   /* hmask + 1 slots, first probe (idx * 0x9E3779B1) >> hshift */
    uint32_t hmask, hshift;
    oni_size_t max_rframe, max_wframe; /* header included */
    oni_size_t block_read, block_write; /* back to their defaults at every reset, as upstream's */
    struct oni_pool *pool;
    /* Read state (read lock): bytes [pos, end) of cur are unparsed;
     * fill_left bytes of the current refill are still to be read from the
     * driver. The frames handed out of cur since it was (re)filled from the
     * front took descriptors in order: seg_base in the segments before seg,
     * then seg's from its first up to fnext (fend: its end). */
    struct oni_block *cur;
    size_t pos, end, fill_left;
    uint32_t seg_base;
    struct oni_rseg *seg;
    struct oni_rframe *fnext, *fend;
};

/* Timeouts (docs/timeouts.md). A blocking call fails with ONI_ETIMEOUT only
 * when no byte at all came for the timeout: every byte moves the deadline on.
 * oni_wait_ms: the timeout in ms, ONI_OPT_TIMEOUTMS or, while that is 0 (the
 * default), ONI_DEFAULT_TIMEOUTMS, which is also what the driver is told
 * through set_opt_callback. oni_deadline: the oni_now_ns() time that far
 * from now. oni_idle_wait: the pause after a driver returned no bytes: yields
 * first, then sleeps briefly, so a silent driver costs little CPU; *idle
 * counts the pauses of one call (start at 0); ONI_ETIMEOUT once past the
 * deadline, else 0. */
uint32_t oni_wait_ms(const struct oni_ctx_impl *ctx);
uint64_t oni_deadline(const struct oni_ctx_impl *ctx);
int oni_idle_wait(uint64_t deadline, unsigned *idle);
/* A data-stream wait reached its deadline with no byte. With ONI_OPT_TIMEOUTMS
 * set, that is the end: ONI_ETIMEOUT. At the default 0, as upstream waits
 * for as long as the hardware delivers, the core asks the driver whether the
 * device still runs (ONI_CONFIG_RUNNING): a driver error is returned (a dead
 * device), RUNNING 0 gives ONI_ETIMEOUT (a stopped one), RUNNING != 0 gives
 * 0 with *deadline moved on (a live device with a slow table: wait on).
 * The config lock is only tried (the reader holds the read lock, which comes
 * after it): when another call holds it, the device is busy answering that
 * one, so the wait goes on too. */
int oni_wait_live(struct oni_ctx_impl *ctx, uint64_t *deadline);

/* signal.c: reset the hardware (ONI_CONFIG_RESET = value, nonzero) and read
 * its device table into ctx (lock held; takes wlock around the driver's
 * RESET, where a write's kept rest is dropped). */
int oni_read_devtable(struct oni_ctx_impl *ctx, oni_reg_val_t value, oni_device_t **devs, size_t *ndev);
/* signal.c: one register access (lock held). */
int oni_reg_access(struct oni_ctx_impl *ctx, oni_dev_idx_t dev, oni_reg_addr_t addr, oni_reg_val_t *value, int write);

/* frame.c: the pool and the read-path state. */
struct oni_pool *oni_pool_new(void);
void oni_pool_unref(struct oni_pool *pool);
/* The read path's private answer when a refill that waits for data gave way
 * to a caller of oni_rlock_opt; oni_read_frame reads again, users never see it. */
#define ONI_EYIELD (-1000)

/* Drop buffered data (read lock held). */
void oni_read_flush(struct oni_ctx_impl *ctx);
/* Release the current block (context going away or table changing; read lock held). */
void oni_read_release(struct oni_ctx_impl *ctx);

/* ---- the read bias (frame.c) -------------------------------------------
 * The read lock and a block's reference count each cost a locked
 * instruction per frame, 20 cycles apiece on Intel cores, where the rest of
 * oni_read_frame + oni_destroy_frame is about as much (docs/results/frames/log.md).
 * Almost always one thread reads a context and destroys what it read, so the
 * first reader gets the bias, a slot of its own (struct oni_bias_slot): its
 * oni_read_frame takes no lock and its oni_destroy_frame of a frame of the
 * current block counts in the block's odone with a plain add. Such a call is
 * a biased section:
 *
 *     holder: s = bias; if s->owner == me: s->busy = 1; compiler fence;
 *             if bias == s: work; s->busy = 0 (release)
 *
 * Any other thread that needs the read state takes the ticket lock and keeps
 * the holder out: bias |= 1, then membarrier(2), which runs a full memory
 * barrier on every thread of the process, then waits for s->busy == 0.
 * After the barrier either the holder's busy = 1 is visible (so we wait for
 * its busy = 0), or its look at bias after it sees the mark (so it takes the
 * lock too): the holder needs no fence of its own. The lock holder clears
 * the mark when it gives the lock back. A reader other than the holder takes
 * the bias over with a fresh slot, so a former holder that was about to set
 * busy when the bias moved writes only its old slot, which nobody waits on.
 * After ONI_BIAS_HOLDERS holders nobody gets it again. The hand-overs are
 * release stores read by acquire loads, which TSan sees; the mark's store is
 * ordered by membarrier alone. Off where membarrier is missing (or fails
 * later: frame.c, barrier_all) or ONIGPU_READ_BIAS=0. */

/* An id of the calling thread, unique among live threads and never 0: the
 * thread pointer (one instruction) where the compiler exposes it. */
#if defined(__has_builtin) && (defined(__x86_64__) || defined(__aarch64__))
#if __has_builtin(__builtin_thread_pointer)
#define ONI_HAVE_THREAD_POINTER
#endif
#endif
static inline uintptr_t oni_self(void)
{
#ifdef ONI_HAVE_THREAD_POINTER
    return (uintptr_t)__builtin_thread_pointer();
#else
    return (uintptr_t)pthread_self(); /* glibc: the thread's descriptor */
#endif
}

/* Whether the calling thread is the process's only thread (glibc's
 * __libc_single_threaded; 0 where the C library has no such flag). glibc
 * clears it in pthread_create before a second thread starts, whoever calls
 * it, so while it is set nothing can race with us: the read path then skips
 * even the bias. (A thread started by a raw clone, or from a signal handler,
 * is not covered: docs/threads.md.) */
static inline int oni_one_thread(void)
{
#ifdef ONI_HAVE_SINGLE_THREADED
    return __libc_single_threaded;
#else
    return 0;
#endif
}

/* The slot bias points at, with the mark cleared. */
static inline struct oni_bias_slot *oni_bias_slot(uintptr_t bias)
{
    return (struct oni_bias_slot *)(bias & ~(uintptr_t)1);
}

/* Enter a biased section of pool p: returns 1, with the caller's slot in
 * *slot, if it holds the bias and nobody keeps it out (leave with
 * oni_bias_leave), else 0. */
static inline int oni_bias_enter(struct oni_pool *p, struct oni_bias_slot **slot)
{
    uintptr_t b = atomic_load_explicit(&p->bias, memory_order_relaxed);
    struct oni_bias_slot *s = oni_bias_slot(b);
    if (atomic_load_explicit(&s->owner, memory_order_relaxed) != oni_self())
        return 0;
    atomic_store_explicit(&s->busy, 1, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst); /* the store before the load; membarrier does the rest */
    if (atomic_load_explicit(&p->bias, memory_order_acquire) == (uintptr_t)s) {
        *slot = s;
        return 1;
    }
    atomic_store_explicit(&s->busy, 0, memory_order_release);
    return 0;
}
static inline void oni_bias_leave(struct oni_bias_slot *s)
{
    atomic_store_explicit(&s->busy, 0, memory_order_release);
}

/* The read lock, a ticket lock: take a ticket (one atomic add), go when
 * rserve shows it; give the lock back with a plain release store of the next
 * ticket. The lock is taken in turn: a reader that gives it back and asks
 * again at once (a loop of reads that time out) cannot starve a caller that
 * waits for it, as it could with a test-and-set lock. Waiting spins, then
 * yields, then sleeps 20 us between looks (oni_backoff); each holder is
 * parsing (nanoseconds) or in a refill that ONI_OPT_TIMEOUTMS bounds, so the
 * wait is bounded too. Taking it also keeps the bias holder out (above). */
void oni_backoff(unsigned *tries);
/* The slow parts (frame.c): wait for ticket t; keep the holder of slot s out of p. */
void oni_rlock_wait(struct oni_ctx_impl *ctx, unsigned t);
void oni_bias_keep_out(struct oni_pool *p, struct oni_bias_slot *s);
/* Take the read lock; returns the ticket oni_runlock needs. rserve is read
 * first, so that the load is not behind the locked add: had it already
 * shown our ticket, every earlier holder was gone. */
static inline unsigned oni_rlock(struct oni_ctx_impl *ctx)
{
    unsigned serving = atomic_load_explicit(&ctx->rserve, memory_order_acquire);
    unsigned t = atomic_fetch_add_explicit(&ctx->rnext, 1, memory_order_relaxed);
    if (serving != t)
        oni_rlock_wait(ctx, t);
    struct oni_bias_slot *s = oni_bias_slot(atomic_load_explicit(&ctx->pool->bias, memory_order_relaxed));
    uintptr_t owner = atomic_load_explicit(&s->owner, memory_order_relaxed);
    if (owner && owner != oni_self())
        oni_bias_keep_out(ctx->pool, s);
    return t;
}
/* Give the read lock taken with ticket t to the next one, and the bias back
 * to its holder if oni_rlock kept it out. */
static inline void oni_runlock(struct oni_ctx_impl *ctx, unsigned t)
{
    uintptr_t b = atomic_load_explicit(&ctx->pool->bias, memory_order_relaxed);
    if (b & 1)
        atomic_store_explicit(&ctx->pool->bias, b & ~(uintptr_t)1, memory_order_release);
    atomic_store_explicit(&ctx->rserve, t + 1, memory_order_release);
}

/* oni_rlock for a call that changes what the read path sees (ONI_OPT_RUNNING,
 * ONI_OPT_RESET, ONI_OPT_BLOCKREADSIZE): a reader whose refill waits for data
 * sees rwant and gives the lock up (frame.c, refill), so the call is not held
 * up until that reader's deadline when the data may only come after it (a
 * start while a reader waits, as upstream hosts do). A driver that blocks
 * inside read_stream still holds it up until that call returns. */
static inline unsigned oni_rlock_opt(struct oni_ctx_impl *ctx)
{
    atomic_fetch_add_explicit(&ctx->rwant, 1, memory_order_relaxed);
    return oni_rlock(ctx);
}
static inline void oni_runlock_opt(struct oni_ctx_impl *ctx, unsigned t)
{
    atomic_fetch_sub_explicit(&ctx->rwant, 1, memory_order_relaxed);
    oni_runlock(ctx, t);
}

#endif
