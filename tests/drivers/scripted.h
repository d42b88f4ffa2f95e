/* scripted.h - the "scripted" fixture driver (libonidriver_scripted.so, also
 * linked into the fuzzers as onifix_scripted): a driver whose streams and
 * answers a test controls through oni_set_driver_opt. Works before init. */
#ifndef SCRIPTED_H
#define SCRIPTED_H

#include <stdint.h>
#include "oni/driver.h"
#include "oni/util/clock.h"
#include "oni/util/cobs.h"
#include "oni/util/wire.h"

enum {
    SCR_OPT_DEVTABLE = 0x5C000000, /* set: raw signal bytes the driver emits on every RESET */
    SCR_OPT_SIGNAL,                /* set: raw bytes appended to the signal stream now */
    SCR_OPT_DATA,                  /* set: the data stream's bytes (replaces, read from the start) */
    SCR_OPT_REPEAT,                /* set u32: 1 = the data bytes repeat forever */
    SCR_OPT_CHUNK,                 /* set u32: most bytes one data read returns (0 = as asked) */
    SCR_OPT_REGMODE,               /* set u32: SCR_REG_*, how register accesses are answered */
    SCR_OPT_EMPTY,                 /* set u32: SCR_EMPTY_*, what a read of a drained stream does */
    SCR_OPT_INITRC,                /* set int32: what oni_driver_init returns */
    SCR_OPT_STATS,                 /* get: struct scr_stats */
    SCR_OPT_WRITTEN,               /* get: the bytes received on the write stream so far */
    SCR_OPT_WRITECHUNK,            /* set u32: most bytes one write_stream call takes (0 = all) */
    SCR_OPT_CALLBACKRC,            /* set int32: what set_opt_callback returns (it still records) */
    SCR_OPT_WRITEROOM,             /* set u32: bytes the write stream takes from now before it is full
                                      (write_stream returns 0); UINT32_MAX = no limit (the default) */
    SCR_OPT_RUNGATE,               /* set u32: 1 = the data stream reads as drained until config
                                      RUNNING is non-zero or RESETACQCOUNTER was written 2 */
    SCR_OPT_TABLEDELAY             /* set u32: ms the signal stream reads as drained after each RESET */
};

enum {
    SCR_REG_ACK,      /* registers are a store; accesses answered with ACK */
    SCR_REG_NACK,     /* every access answered with NACK */
    SCR_REG_SILENT,   /* no answer; TRIG stays set (the access stays pending) */
    SCR_REG_NULLSPAM, /* no answer, but an endless stream of NULLSIG packets */
    SCR_REG_EXTERNAL  /* TRIG clears, no answer: whatever SCR_OPT_SIGNAL queued answers */
};
enum {
    SCR_EMPTY_ZERO,    /* return 0 bytes at once (default) */
    SCR_EMPTY_WAIT,    /* wait the ONI_OPT_TIMEOUTMS the core gave, then ONI_ETIMEOUT */
    SCR_EMPTY_TIMEOUT  /* return ONI_ETIMEOUT at once */
};

#define SCR_NCONFIG (ONI_CONFIG_CUSTOMBEGIN + 16)

struct scr_stats {
    uint32_t timeout_ms;       /* last ONI_OPT_TIMEOUTMS given to set_opt_callback, 0 = none */
    uint32_t callbacks;        /* set_opt_callback calls */
    int32_t last_callback;     /* the option of the last one */
    uint32_t inits, resets;
    uint32_t config[SCR_NCONFIG]; /* current config register values */
    uint32_t reset_written;    /* bytes the write stream had taken at the last RESET */
};

extern const struct oni_driver onifix_scripted;

#endif
