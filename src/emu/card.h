/* card.h - inside the emulated ONIX host card (emu.h is its outside).
 *
 * Only src/emu, src/emu/devices and the emulator's own tests include this.
 * One mutex (card->lock) guards everything in the card: configuration,
 * register files, the device schedules, the FIFO indices and the signal
 * queue. Frames are generated with the lock held, straight into FIFO memory;
 * readers copy out of the FIFO without it (single consumer per stream). */
#ifndef EMU_CARD_H
#define EMU_CARD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include "emu.h"
#include "onix.h"

#define EMU_ACQ_HZ 250000000ull /* acquisition clock (thesis card: the 250 MHz PCIe user clock) */
#define EMU_SYS_HZ 250000000ull
#define EMU_MAX_DEV 64
#define EMU_MAX_HUB 16
#define EMU_MAX_ARGS 32 /* a neural device takes its signal knobs too (neural.h) */
#define EMU_MAX_NEURAL 64 /* signal generators of one card (neural.h) */
#define EMU_MAX_READ (1u << 20) /* largest read_size a device may have */
#define EMU_GEN_CHUNK (256u << 10) /* bytes generated per hold of the card lock */
#define EMU_BATCH_NS 1000000ull   /* batch= default: 1 ms */
#define EMU_NO_ENABLE 0xFFFFFFFFu  /* emu_dev.enable_reg of a device without an ENABLE register */

/* Register addresses common to every device but the hub managers
 * (docs/devices.md): ENABLE is ONIX's own; the rest are the emulator's
 * block of include/oniemu.h, clear of the real ONIX maps. */
enum {
    EMU_REG_ENABLE = 0, /* rw: 0 = emits nothing, writes still accepted */
    EMU_REG_BASE = ONIEMU_REG_BASE,
    EMU_REG_ROUTE = ONIEMU_REG_ROUTE,
    EMU_REG_READSIZE = ONIEMU_REG_READSIZE,
    EMU_REG_WRITESIZE = ONIEMU_REG_WRITESIZE,
    EMU_REG_FRAMES_LO = ONIEMU_REG_FRAMES_LO,
    EMU_REG_FRAMES_HI = ONIEMU_REG_FRAMES_HI,
    EMU_REG_DROPPED_LO = ONIEMU_REG_DROPPED_LO,
    EMU_REG_DROPPED_HI = ONIEMU_REG_DROPPED_HI,
    EMU_REG_WFRAMES = ONIEMU_REG_WFRAMES,
    EMU_REG_RATE_HZ = ONIEMU_REG_RATE_HZ,
    EMU_REG_DEVICE = ONIEMU_REG_DEVICE
};

/* ONIX_OPT_PASSTHROUGH (custom option 0, onix.h) reaches the card as this
 * configuration register; bit 0 is port A, bit 2 port B. */
#define EMU_CONFIG_PASSTHROUGH ONI_CONFIG_CUSTOMBEGIN
#define EMU_PASSTHROUGH_BITS 0x5u

/* Spec arguments of one device ("np2:units=8:route=1"). */
struct emu_args {
    int n;
    struct {
        char key[16];
        char val[48];
        int used;
    } kv[EMU_MAX_ARGS];
};

/* Value of key (marking it used), or NULL. */
const char *emu_arg(struct emu_args *a, const char *key);
/* Parse key as an unsigned number with optional suffix k/M/G/T; si != 0 means
 * powers of 1000, else powers of 1024. def when absent. ONI_EINVALARG if bad
 * or outside [lo, hi]; err gets a message. */
int emu_arg_u64(struct emu_args *a, const char *key, uint64_t def, uint64_t lo, uint64_t hi, int si,
                uint64_t *out, char *err, size_t cap);
/* The same parser on a bare string. Returns 0 or ONI_EINVALARG. */
int emu_parse_u64(const char *s, int si, uint64_t *out);

struct emu_dev;
struct neural;

/* A kind of device: what the spec name makes, and its behaviour. */
struct emu_devtype {
    const char *name;  /* spec name */
    uint32_t id;       /* ONIX device id */
    uint32_t hub_kind; /* 0: host hub; else the ONIX_HUB_* of the headstage it lives on */
    /* Parse arguments, set desc.read_size/write_size and the rate
     * (emu_dev_set_rate), allocate priv. 0 or ONI_EINVALARG/EBADALLOC with err. */
    int (*init)(struct emu_dev *d, struct emu_args *a, char *err, size_t cap);
    void (*fini)(struct emu_dev *d); /* may be NULL; also runs after a failed init, on what it left */
    /* Fill one read frame payload (desc.read_size bytes) sampled at time.
     * NULL for a device without read frames (read_size 0: never asked). */
    void (*fill)(struct emu_dev *d, uint8_t *payload, uint64_t time);
    /* Device-specific registers: return 1 = ACK, 0 = NACK (unknown, read-only,
     * bad value). May be NULL. */
    int (*reg_read)(struct emu_dev *d, uint32_t addr, uint32_t *v);
    int (*reg_write)(struct emu_dev *d, uint32_t addr, uint32_t v);
    /* A write frame's payload (n bytes, a multiple of write_size) arrived at time. May be NULL. */
    void (*write)(struct emu_dev *d, const uint8_t *p, size_t n, uint64_t time);
    /* The card was reset (RESET): settings that take effect on reset apply
     * now, before the new device table is sent. May be NULL. */
    void (*reset)(struct emu_dev *d);
};

struct emu_dev {
    const struct emu_devtype *type;
    struct emu_card *card;
    oni_device_t desc;
    uint32_t enable, route;
    /* Address of the ENABLE register: 0 (ONIX's usual), 0x8000 for the
     * DS90UB9x raw device (its low addresses are raw I2C), EMU_NO_ENABLE
     * for none; init may change it, as desc.version (1 before init). */
    uint32_t enable_reg;
    /* Schedule: rate_mhz frames per 1000 s; period = per_q + per_r / rate_mhz ticks. */
    uint64_t rate_mhz;
    uint64_t per_q, per_r, rem, next_due;
    uint64_t frames, dropped, wframes;
    uint32_t clk_div; /* ONIX CLK_DIV of a device that has one (emu_dev_clk_*) */
    uint32_t hub_kind;
    int absent; /* not in the device table now (a port's device, see emu_port): no frames, no access */
    int port;   /* the port (0 A, 1 B) whose state decides absent, or -1 */
    void *priv;
};

/* Set a periodic device's frame rate in millihertz (0 = not periodic).
 * ONI_EINVALARG if one frame per acquisition tick would be exceeded. */
int emu_dev_set_rate(struct emu_dev *d, uint64_t rate_mhz);
/* Clock of d's hub, Hz (the ONIX CLK_HZ register of its periodic devices). */
uint32_t emu_dev_hub_hz(const struct emu_dev *d);
/* Hub clock count at acquisition time t (the "hub clock counter" of ONIX payloads). */
uint64_t emu_dev_hub_clock(const struct emu_dev *d, uint64_t t);
/* ONIX CLK_DIV: one frame per div hub clock cycles. ONI_EINVALARG (nothing
 * changed) when div is 0 or the rate is below 1 Hz or above max_hz. */
int emu_dev_set_clk_div(struct emu_dev *d, uint32_t div, uint64_t max_hz);
/* Frames per second hz (1..max_hz), CLK_DIV following. 0 or ONI_EINVALARG. */
int emu_dev_set_hz(struct emu_dev *d, uint64_t hz, uint64_t max_hz);
/* The ONIX rate registers of heartbeat, loadtest, memusage: CLK_DIV (1, rw)
 * and CLK_HZ (2, ro), with the emulator's RATE_HZ (rw, 1..max_hz). For a
 * device's reg_read / reg_write: 1 = ACK, 0 = not one of them or refused. */
int emu_dev_clk_read(struct emu_dev *d, uint32_t addr, uint32_t *v);
int emu_dev_clk_write(struct emu_dev *d, uint32_t addr, uint32_t v, uint64_t max_hz);
/* Emit one read frame of d now (event devices, e.g. the stimulator's echo);
 * the caller holds the card lock. Counted as generated or dropped; nothing
 * is emitted while acquisition is stopped. */
void emu_dev_emit(struct emu_dev *d, uint64_t time);

/* Threads asleep on one condition of the card lock (a reader waiting for
 * data or for a signal packet). Once woken, or past its deadline, such a
 * thread needs the lock back before it can return; emu_card_rouse counts
 * it among the lock's waiters then, so that emu_card_yield steps back for
 * it too. All fields: card lock. */
struct emu_sleeper {
    unsigned asleep, counted;
    uint64_t deadline; /* oni_now_ns() time of the latest sleeper's timeout */
};

/* The FIFO of one read data stream: a ring in lazily committed memory. */
struct emu_fifo {
    uint8_t *base;
    size_t cap;             /* bytes */
    size_t rd, wr, fill;    /* card lock */
    size_t hiwater;         /* highest offset written since the last trim */
    uint64_t frames, bytes; /* delivered into the FIFO */
    uint64_t dropped_frames, dropped_bytes;
    uint64_t recentres, moved, trims; /* consume(): ring restarts, bytes they moved, page give-backs */
    size_t want;            /* bytes the waiting reader needs; 0 = none waits */
    struct emu_sleeper sleeper; /* that reader, asleep on cond */
    int busy;               /* a reader holds the stream: 1 emu_card_read, 2 a peek until its consume */
    size_t held;            /* that reader copies [rd, rd + held) without the lock: a flush keeps them */
    uint64_t epoch;         /* flushes so far: a consume of spans peeked before one consumes nothing */
    uint64_t taken_epoch;   /* epoch when the last read or peek found its bytes */
    int keep_pages;         /* never give pages back: the DMA engine may have them page-locked */
    pthread_cond_t cond;
};

/* Reserve cap bytes of address space (committed only when written) for an
 * empty FIFO. 0 or ONI_EBADALLOC. */
int emu_fifo_init(struct emu_fifo *f, size_t cap);
/* Unmap the store; safe on a FIFO whose init failed or never ran (zeroed). */
void emu_fifo_fini(struct emu_fifo *f);
/* Room for n contiguous bytes at the write position, or NULL if the FIFO
 * cannot take n more bytes. *split: the frame wraps, write it to a scratch
 * buffer and pass that to emu_fifo_commit. */
uint8_t *emu_fifo_reserve(struct emu_fifo *f, size_t n, uint8_t *scratch);
/* Append the n bytes reserved at p (the FIFO's own memory, or the scratch
 * buffer of a frame that wraps, copied in two pieces): one frame more. */
void emu_fifo_commit(struct emu_fifo *f, const uint8_t *p, size_t n);
/* Spans of the first n bytes (n <= fill). */
void emu_fifo_spans(const struct emu_fifo *f, size_t n, struct emu_span sp[2]);
/* Drop the first n bytes (n <= fill); keeps the used region small (see fifo.c). */
void emu_fifo_consume(struct emu_fifo *f, size_t n);
/* Forget the contents and move the epoch on (see taken_epoch). The bytes a
 * reader still copies ([rd, rd + held)) stay in the ring, out of the
 * writer's way, until that reader consumes: new data goes after them. */
void emu_fifo_flush(struct emu_fifo *f);

struct emu_hub {
    uint32_t kind, rev, fw, clk_hz, delay_ns;
};

struct emu_hs_ops;

/* A headstage port of the breakout board (docs/devices.md, Ports): its port
 * controller's registers, the headstage plugged in, and, for a serdes
 * headstage, the deserializer's I2C registers and the raw device. All
 * fields: card lock. */
struct emu_port {
    int used;                      /* the breakout board has this port (spec `breakout`) */
    const struct emu_hs_ops *hs;   /* headstage plugged in, or NULL */
    void *hs_priv;
    struct emu_dev *ctrl, *raw;    /* port controller (idx 1 / 2), raw device (idx 8 / 9) */
    uint32_t voltage_dv, saved_dv, despwr, gpo, linkflags;
    int powered;                   /* voltage in the headstage's lock range and DESPWR on */
    uint8_t des[256];              /* deserializer registers (I2C 0x30) */
    uint32_t raw_reg[0x15];        /* raw device registers 0x8000.. (ENABLE is the device's enable) */
    int stream_on[4];              /* which headstage streams send frames (ops->streaming) */
    int next_stream;               /* the stream of the raw device's next frame */
};


/* A ground-truth spike. */
struct emu_truth {
    uint32_t dev_idx, unit, channel; /* channel: the waveform's trough channel */
    uint64_t time; /* acquisition clock at the waveform's trough */
    float snr;     /* the trough's depth on that channel / the noise SD */
};

#define EMU_SIGQ_CAP 65536

/* A write frame waiting for the generator to reach its arrival time t. */
#define EMU_WPEND_MAX 256
#define EMU_WPEND_BYTES 64
struct emu_wpend {
    struct emu_dev *d;
    uint64_t t;
    uint32_t n;
    uint8_t data[EMU_WPEND_BYTES];
};

struct emu_card {
    pthread_mutex_t lock;
    atomic_uint lock_waiters; /* threads blocked in emu_card_lock */
    int fast;           /* mode=fast */
    int spin;           /* wake=spin: the generator and waiting readers poll instead of sleeping */
    uint64_t batch_ns;  /* batch=: the generator's longest sleep past a due frame with no reader waiting */
    uint64_t seed;
    oniemu_link_t link;
    char spec[512];

    struct emu_dev dev[EMU_MAX_DEV];
    int ndev;
    struct emu_hub hub[EMU_MAX_HUB];
    int nhub;

    /* configuration registers */
    uint32_t reg_dev, reg_addr, reg_value, reg_rw, running, hwaddress;

    /* acquisition clock: realtime = (now - t0_ns) * ACQ / 1e9; fast = gen_now */
    uint64_t t0_ns;
    uint64_t gen_now;   /* time of the last frame generated */
    uint64_t lag_now, lag_max; /* acquisition ticks the generator owes (emu_gen_note_lag) */
    uint8_t *scratch;   /* one frame, for frames that wrap around a FIFO's end */

    struct emu_fifo fifo[2]; /* [0] EMU_STREAM_DATA, [1] EMU_STREAM_GPU */
    struct emu_dev *memusage;
    int gpustream;      /* the firmware has the GPU data stream (spec gpustream=, default 1) */
    struct emu_port port[2];   /* breakout ports A, B */
    uint32_t passthrough;      /* ONIX_OPT_PASSTHROUGH as written (bit 0 A, bit 2 B) */
    uint32_t passthrough_now;  /* as the last RESET applied it */

    /* signal stream: encoded packets */
    uint8_t sigq[EMU_SIGQ_CAP];
    size_t sig_rd, sig_fill;
    uint64_t sig_dropped;
    pthread_cond_t sig_cond;
    struct emu_sleeper sig_sleeper;

    /* write streams */
    uint64_t bad_wframes;
    /* write frames that arrived while the generator was behind, applied in
     * time order as it passes their arrival (gen.c) */
    struct emu_wpend wpend[EMU_WPEND_MAX];
    unsigned wpend_rd, wpend_n;

    /* ground truth */
    FILE *truth_file;
    uint64_t truth_flushed; /* the acquisition time of the file's last flush */
    struct emu_truth *truth;
    size_t ntruth, truth_cap;
    int truth_keep;
    /* the signal generators (neural.h): stimuli reach each one's artefact;
     * templates_dir (spec key templates=) gets their truth templates */
    struct neural *neural[EMU_MAX_NEURAL];
    int nneural;
    char templates_dir[256];

    /* realtime generator thread */
    pthread_t thread;
    int thread_up, stop;
    pthread_cond_t gen_cond;
};

/* Take the card lock for a short access (everyone but the generator thread).
 * The waiters are counted so that a long holder can step back for them. */
void emu_card_lock(struct emu_card *c);
/* Between two chunks of a long hold: hand the lock to the counted waiters,
 * then take it again. glibc mutexes are not fair: unlocking and relocking at
 * once wins the lock back before a woken waiter runs, so a generator that is
 * behind (a slow or loaded machine, a sanitizer) would starve every reader. */
void emu_card_yield(struct emu_card *c);
/* Sleep on cv (card lock held) until woken or until ts (= deadline, an
 * oni_now_ns() time); returns what pthread_cond_timedwait returned. */
int emu_card_sleep(struct emu_card *c, struct emu_sleeper *s, pthread_cond_t *cv, const struct timespec *ts,
                   uint64_t deadline);
/* For a long holder of the card lock, between chunks: count the sleepers of
 * s as lock waiters if they were woken (woke) or their deadline passed. */
void emu_card_rouse(struct emu_card *c, struct emu_sleeper *s, int woke);
/* Acquisition clock now (card lock held). */
uint64_t emu_card_now(struct emu_card *c);
/* After generating up to now (card lock held): how long ago the oldest
 * frame not yet made was due, into lag_now, and the most it was into
 * lag_max (ONI_DRV_EMU_LAG). */
void emu_gen_note_lag(struct emu_card *c, uint64_t now);
/* Record a ground-truth spike (card lock held). */
/* A stimulus reached the card at the current sample (a DigitalIO or
 * stimulator write frame): every signal generator draws its artefact from
 * its next sample on. Card lock held. */
void emu_card_stimulus(struct emu_card *c);
void emu_card_truth_add(struct emu_card *c, uint32_t dev_idx, uint32_t unit, uint32_t ch, uint64_t time, float snr);
/* Tests: keep ground truth in memory (up to cap entries) from now on. */
int emu_card_truth_keep(struct emu_card *c, size_t cap);
/* Tests: copy up to max kept entries into out; returns how many exist. */
size_t emu_card_truth_get(struct emu_card *c, struct emu_truth *out, size_t max);
/* Tests: a device's counters by dev_idx (ONI_EDEVIDX if none). */
int emu_card_dev_counts(struct emu_card *c, uint32_t dev_idx, uint64_t *frames, uint64_t *dropped,
                        uint64_t *wframes);

/* Generation (gen.c), card lock held. Produce every frame due at or before
 * until, and apply the queued write frames that arrived by then, each after
 * the frames due before it; stops after about max_bytes, or after one frame
 * when a thread waits for the card lock; returns the bytes of the frames
 * generated, delivered or dropped (0: none was due), max_bytes or more when
 * it stopped before until: the caller is behind and lets the lock's waiters
 * in (emu_card_yield) before it goes on. */
size_t emu_gen_until(struct emu_card *c, uint64_t until, size_t max_bytes);
/* Queue the payload of a write frame for d, arriving at t, to be applied when
 * the generator reaches t (card lock held); 0, or -1 if it does not fit. */
int emu_gen_defer_write(struct emu_card *c, struct emu_dev *d, const uint8_t *src, size_t n, uint64_t t);
/* Apply every queued write frame now, in order (card lock held): before the
 * card stops, resets or restarts its clock. */
void emu_gen_flush_writes(struct emu_card *c);
/* Earliest due time of an enabled periodic device, UINT64_MAX if none. */
uint64_t emu_gen_next_due(struct emu_card *c);
/* Signal readers whose wanted bytes are there, and count every sleeper that
 * was woken or whose deadline passed as a lock waiter (card lock held; a long
 * holder calls it before emu_card_yield). */
void emu_gen_wake(struct emu_card *c);
/* Restart every schedule at time t. */
void emu_gen_restart(struct emu_card *c, uint64_t t);
/* Start the realtime generator thread (0 or ONI_EBADALLOC) / stop and join it
 * (nothing if none runs). */
int emu_gen_start_thread(struct emu_card *c);
void emu_gen_stop_thread(struct emu_card *c);

/* The link model (link.c). */
/* The preset called name into *out: 0, or ONI_EINVALARG for no such preset. */
int emu_link_preset(const char *name, oniemu_link_t *out);
/* Modelled duration of a transfer of n bytes, ns. */
uint64_t emu_link_ns(const oniemu_link_t *l, size_t n);
/* Wait until oni_now_ns() >= t (sleep, then spin the last stretch). */
void emu_wait_until_ns(uint64_t t);

/* Spec parsing (spec.c): fills c->dev, c->hub, mode, link, seed, ddr. */
int emu_spec_parse(struct emu_card *c, const char *spec, size_t *ddr, char *err, size_t cap);

/* Ports (port.c), card lock held. */
/* Apply the state RESET brings: passthrough as written, which devices of
 * the ports are present, headstage streams. */
void emu_port_reset(struct emu_card *c);
/* Acquisition starts: the raw devices' streams alternate from stream 0. */
void emu_port_start(struct emu_card *c);
/* Power and lock of port p after a port controller write. */
void emu_port_update(struct emu_card *c, int p);
/* 1 if port p's link is locked. */
int emu_port_locked(const struct emu_card *c, int p);
/* A raw device's register access (ds90ub9x.c): 1 = ACK. */
int emu_port_raw_read(struct emu_card *c, int p, uint32_t addr, uint32_t *v);
int emu_port_raw_write(struct emu_card *c, int p, uint32_t addr, uint32_t v);
/* The raw device's frame rate from its headstage's streaming streams. */
void emu_port_streams(struct emu_card *c, int p);

/* Device kinds (src/emu/devices). */
extern const struct emu_devtype emu_dev_rhd2164, emu_dev_bno055,
    emu_dev_heartbeat, emu_dev_testcore, emu_dev_testsink, emu_dev_loadtest, emu_dev_stim,
    emu_dev_memusage, emu_dev_digitalio, emu_dev_persthb, emu_dev_portctl, emu_dev_analogio,
    emu_dev_harpsync, emu_dev_outclock, emu_dev_ds90ub9x;

/* Headstage kinds (headstage.h); tests may add their own with emu_hs_register. */
/* Make headstage kind ops known to the spec parser (tests: a minimal headstage). 0 or ONI_EINVALARG (full). */
int emu_hs_register(const struct emu_hs_ops *ops);

#endif
