/* ctx.h - the core's internal view of a context, its frame pool and the
 * helpers the core's files share. Only the core (src/oni) includes this. */
#ifndef ONI_CTX_H
#define ONI_CTX_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include "onii.h"

/* Limits that bound what a device table may ask of the host (ONI_EBADDEVTABLE beyond). */
#define ONI_MAXDEVICES 65536u          /* one per RSV.RSV.HUB.IDX hub/device pair */
#define ONI_MAXFRAMEPAYLOAD (16u << 20) /* bytes of one frame's payload */
#define ONI_MAXBLOCKSIZE (1u << 30)    /* BLOCKREADSIZE / BLOCKWRITESIZE ceiling */
#define ONI_DEFAULTBLOCKWRITESIZE 4096u

enum oni_state { ONI_STATE_UNINIT = 0, ONI_STATE_IDLE, ONI_STATE_RUNNING };

/* A block: BLOCKREADSIZE bytes read from the data stream (plus room for a
 * partial frame carried over from the block before). Frames point into it;
 * refs counts them plus one while it is the context's current block. */
struct oni_block {
    atomic_uint refs;
    size_t cap;
    struct oni_block *next;
    struct oni_pool *pool;
    _Alignas(16) char data[];
};

enum { ONI_FRAME_READ = 1, ONI_FRAME_WRITE_POOLED, ONI_FRAME_WRITE_HEAP };

/* Every frame the library hands out. The public part comes first so an
 * oni_frame_t * is also a struct oni_frame *; the union lets the library
 * write the fields the user sees as const. */
struct oni_frame {
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
    struct oni_frame *next;    /* free-list link */
    struct oni_block *block;   /* read frames: the block data points into */
    struct oni_pool *pool;     /* pooled frames: where they go back */
    size_t cap;                /* write frames: bytes of buf */
    uint32_t wlen;             /* write frames: bytes to send (header + padded payload) */
    _Alignas(16) char buf[];   /* write frames: [u32 dev_idx][u32 words][payload] */
};

/* A slab of read-frame descriptors, allocated together and freed with the pool. */
struct oni_slab {
    struct oni_slab *next;
    struct oni_frame f[];
};

/* Recycled frames and blocks. Anyone may give things back (lock-free push
 * onto the ret_* stacks); only the context's reader or writer takes them out,
 * one at a time under its lock, so the stacks never see ABA. The pool lives
 * while the context or any block / pooled write frame taken from it does. */
struct oni_pool {
    atomic_uint refs;
    _Atomic(struct oni_frame *) ret_frames;  /* read descriptors given back */
    _Atomic(struct oni_block *) ret_blocks;
    _Atomic(struct oni_frame *) ret_wframes; /* pooled write frames given back */
    struct oni_frame *frames;  /* reader's own free descriptors (read lock) */
    struct oni_block *blocks;  /* reader's own free blocks (read lock) */
    struct oni_frame *wframes; /* writer's own free write frames (write lock) */
    struct oni_slab *slabs;
};

struct oni_ctx_impl {
    struct oni_driver drv;     /* copy of the backend table */
    void *dl;                  /* dlopen handle of an external driver, or NULL */
    oni_driver_ctx dctx;
    /* Lock order: lock, then rlock, then wlock. lock: state, options,
     * registers and the signal stream; rlock: the read path; wlock: the
     * write path. The device table changes only with all three held. */
    pthread_mutex_t lock, rlock, wlock;
    _Atomic int state;
    int drv_open;              /* the driver's init succeeded */
    _Atomic uint32_t timeout_ms;
    oni_size_t sysclk_hz, acqclk_hz;
    oni_device_t *devs;        /* sorted by idx */
    size_t ndev;
    /* dev_idx -> read_size lookup for the read path: open addressing, 0 = empty slot. */
    uint32_t *hkey, *hval;     /* hkey holds idx + 1 so that 0 marks an empty slot */
    uint32_t hmask;
    oni_size_t max_rframe, max_wframe; /* header included */
    oni_size_t block_read, block_write;
    struct oni_pool *pool;
    /* Read state (rlock): bytes [pos, end) of cur are unparsed; fill_left
     * bytes of the current refill are still to be read from the driver. */
    struct oni_block *cur;
    size_t pos, end, fill_left;
};

/* Built-in driver tables, NULL-terminated (builtin.c). */
extern const struct oni_driver *const oni_builtin_drivers[];

/* loader.c: fill drv (and *dl for an external driver) for drv_name; returns 0 or an errno value. */
int oni_load_driver(const char *name, struct oni_driver *drv, void **dl);

/* Deadline helpers: the oni_now_ns() time timeout_ms from now; and the pause
 * after a driver returned no bytes: yields first, then sleeps briefly, so a
 * silent driver costs little CPU; *idle counts the pauses of one call (start
 * at 0). Returns ONI_ETIMEOUT once past the deadline, else 0. */
uint64_t oni_deadline(const struct oni_ctx_impl *ctx);
int oni_idle_wait(uint64_t deadline, unsigned *idle);

/* signal.c: reset the hardware and read its device table into ctx (lock held). */
int oni_read_devtable(struct oni_ctx_impl *ctx, oni_device_t **devs, size_t *ndev);
/* signal.c: one register access (lock held). */
int oni_reg_access(struct oni_ctx_impl *ctx, oni_dev_idx_t dev, oni_reg_addr_t addr, oni_reg_val_t *value, int write);

/* frame.c: the pool and the read-path state. */
struct oni_pool *oni_pool_new(void);
void oni_pool_unref(struct oni_pool *pool);
/* Drop buffered data (rlock held). */
void oni_read_flush(struct oni_ctx_impl *ctx);
/* Release the current block (context going away or table changing; rlock held). */
void oni_read_release(struct oni_ctx_impl *ctx);

#endif
