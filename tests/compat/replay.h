/* replay.h - what the replays of real ONIX software (replay_onixsource.c,
 * replay_bonsai.c) share: calls through the public ONI API (<oni.h>,
 * <onix.h>, C99) that report each failure with the place in the replayed
 * program's source that makes the same call, and the raw I2C access through a
 * DS90UB9x passthrough device as both programs encode it, and the thread
 * both programs poll the BNO055 on.
 *
 * Nothing here is onigpu's: a program written against upstream liboni could
 * carry these helpers unchanged. */
#ifndef COMPAT_REPLAY_H
#define COMPAT_REPLAY_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <oni.h>
#include <onix.h>

typedef struct {
    oni_ctx ctx;
    const char *who;  /* the program name in messages */
    int failures;     /* under lock: a poller thread records failures too */
    pthread_mutex_t lock;
    int verbose;      /* REPLAY_VERBOSE set: every call is printed */
    oni_device_t *table;
    oni_size_t ntable;
} replay_t;

/* Creates and initializes a context on `driver` at `index`; 0, or -1 after
 * reporting why (the replay cannot go on). */
int rp_open(replay_t *rp, const char *who, const char *driver, int index, const char *at);
/* Destroys the context and the table; returns the exit status (0 if no failure). */
int rp_close(replay_t *rp);

/* Records a failure of the replayed program's step `at` (file:line). */
void rp_fail(replay_t *rp, const char *at, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* The failures recorded so far (any thread). */
int rp_failures(replay_t *rp);
/* Records a failure unless ok; returns ok. */
int rp_check(replay_t *rp, int ok, const char *at, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* Prints a progress line (the stage of the replayed program). */
void rp_note(replay_t *rp, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Options with a 32-bit value, the way both programs pass them (size 4).
 * Each returns the liboni result; a nonzero one is recorded as a failure. */
int rp_set(replay_t *rp, int opt, uint32_t value, const char *at);
int rp_get(replay_t *rp, int opt, uint32_t *value, const char *at);
/* Reads NUMDEVICES and DEVICETABLE into rp->table; 0 or the failed result. */
int rp_read_table(replay_t *rp, const char *at);
/* What clroni's Context reads on creation and after each Refresh (clroni
 * Context.cs:117-130, 140-144, as Bonsai.ONIX1 uses it): SYSCLKHZ, ACQCLKHZ
 * (into *acq_hz), both maximum frame sizes, the table. 1, or 0 on failure. */
int rp_clroni_properties(replay_t *rp, uint32_t *acq_hz, const char *at);
/* The table entry at idx, or NULL. */
const oni_device_t *rp_device(const replay_t *rp, oni_dev_idx_t idx);
/* Checks the entry at idx has id `id` and version >= min_version. */
int rp_expect_device(replay_t *rp, oni_dev_idx_t idx, oni_dev_id_t id, uint32_t min_version, const char *at);

/* Checks a frame has the read size its device's table entry gives. */
int rp_frame_size_ok(replay_t *rp, const oni_frame_t *f, const char *at);

/* Registers; failures recorded. Return the liboni result. */
int rp_read(replay_t *rp, oni_dev_idx_t idx, oni_reg_addr_t addr, oni_reg_val_t *v, const char *at);
int rp_write(replay_t *rp, oni_dev_idx_t idx, oni_reg_addr_t addr, oni_reg_val_t v, const char *at);

/* Raw I2C through a DS90UB9x passthrough device (onix-source
 * I2CRegisterContext.cpp:38-83, Bonsai I2CRegisterContext.cs:25-46): the
 * register address is (reg << 7) | 7-bit I2C address, bit 31 for 16-bit
 * register addresses, (nbytes - 1) << 28 on reads. rp_i2c_read returns the
 * liboni result without recording it, since both programs take
 * ONI_EREADFAILURE as "no chip there" in places; rp_i2c_write records. */
int rp_i2c_write(replay_t *rp, oni_dev_idx_t idx, uint32_t i2c, uint32_t reg, uint32_t v, int reg16, const char *at);
int rp_i2c_read(replay_t *rp, oni_dev_idx_t idx, uint32_t i2c, uint32_t reg, unsigned nbytes, int reg16,
                uint32_t *v);

/* Little-endian fields of a frame payload. */
uint16_t rp_u16(const oni_frame_t *f, size_t byte);
uint32_t rp_u32(const oni_frame_t *f, size_t byte);
uint64_t rp_u64(const oni_frame_t *f, size_t byte);

/* The hub clocks of one stream of frames. */
typedef struct {
    long n;
    uint64_t first, last;
    int backwards; /* times it did not increase */
} rp_clock_t;
void rp_clock_step(rp_clock_t *c, uint64_t hub);
/* Checks that c never went back and that its mean period, in ticks of
 * clock_hz, is within 10 % of 1/hz. */
void rp_check_rate(replay_t *rp, const char *name, const rp_clock_t *c, double hz, uint32_t clock_hz, const char *at);
/* A function called every period_ms on a thread of its own while frames are
 * read, as both programs poll the BNO055 (onix-source PolledBno055.cpp:199-217,
 * a juce thread that sleeps out the rest of each interval; Bonsai
 * PolledBno055Data.cs:71-73, Observable.Interval on a NewThreadScheduler). */
typedef struct {
    replay_t *rp;
    void (*fn)(void);
    unsigned period_ms;
    int stop;         /* under rp->lock */
    pthread_t thread;
    int started;
} rp_poller_t;
/* Starts p->fn every p->period_ms; 0, or records a failure and returns -1. */
int rp_poller_start(rp_poller_t *p, const char *at);
/* Stops the poller and waits for its last call to end. */
void rp_poller_stop(rp_poller_t *p);

/* One BNO055 sample as a program polls it through port A's passthrough device:
 * I2C reads of reads[i] = {offset from register 0x1A, bytes}, then LASTI2CL/H,
 * the hub clock of the last I2C transaction, which must advance. at_read and
 * at_time cite the program's lines. */
typedef struct {
    const uint32_t (*reads)[2];
    size_t nreads;
    const char *at_read, *at_time;
    uint64_t last;
    long polls;
} rp_bno_t;
/* Takes one sample; failures recorded. */
void rp_bno_poll(replay_t *rp, rp_bno_t *b);

/* Seconds of a monotonic clock. */
double rp_now(void);

/* Sleeps ms milliseconds (both programs wait for hardware to settle). */
void rp_sleep_ms(unsigned ms);

/* Device ids and registers of the breakout board and headstages as the
 * replayed programs name them (cited where they are used). */
enum {
    RP_PORTA = 1, RP_PORTB = 2,        /* port controller device indices: OnixDevice.h:40-41 */
    RP_PASSTHROUGH_A = 8,              /* DS90UB9x raw device of port A: OnixDevice.h:238-241 */
    RP_DS_ENABLE = 0x8000, RP_DS_READSZ, RP_DS_TRIGGER, RP_DS_TRIGGEROFF, RP_DS_DATAGATE, RP_DS_SYNCBITS,
    RP_DS_MARK, RP_DS_MAGIC_MASK, RP_DS_MAGIC, RP_DS_MAGIC_WAIT, RP_DS_DATAMODE, RP_DS_DATALINES0,
    RP_DS_DATALINES1,                  /* DS90UB9x.h:33-45 */
    RP_DS_LASTI2CL = 0x8013, RP_DS_LASTI2CH = 0x8014, /* DS90UB9x.h:51-52 */
    RP_DES_ADDR = 0x30, RP_SER_ADDR = 0x58,           /* DS90UB9x.h:55-56 */
    RP_EEPROM_ADDR = 0x51,             /* HeadStageEEPROM.h:40, HeadstageEeprom.cs:8 */
    RP_NP2_PROBE_ADDR = 0x10, RP_NP2_FLEX_ADDR = 0x50, /* Neuropixels2e.h:148-149 */
    RP_BNO_ADDR = 0x28                 /* PolledBno055.h:83 */
};

#endif
