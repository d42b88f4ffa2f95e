/* onix.h - ONIX device and hub identifiers (ONI API 4.6 compatible), plus onigpu's private ids. */
#ifndef __ONIX_H__ /* upstream's guard (api/liboni/onix.h:1) */
#define __ONIX_H__

#include "oni.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    ONIX_NULL = 0,
    ONIX_INFO = 1,
    ONIX_RHD2132 = 2,
    ONIX_RHD2164 = 3,
    ONIX_ESTIM = 4,
    ONIX_OSTIM = 5,
    ONIX_TS4231 = 6,
    ONIX_DINPUT32 = 7,
    ONIX_DOUTPUT32 = 8,
    ONIX_BNO055 = 9,
    ONIX_TEST0 = 10,
    ONIX_NEUROPIX1R0 = 11,
    ONIX_HEARTBEAT = 12,
    ONIX_AD51X2 = 13,
    ONIX_FMCVCTRL = 14,
    ONIX_AD7617 = 15,
    ONIX_AD576X = 16,
    ONIX_TESTREG0 = 17,
    ONIX_BREAKDIG1R3 = 18,
    ONIX_FMCCLKIN1R3 = 19,
    ONIX_FMCCLKOUT1R3 = 20,
    ONIX_TS4231V2ARR = 21,
    ONIX_FMCANALOG1R3 = 22,
    ONIX_FMCLINKCTRL = 23,
    ONIX_DS90UB9RAW = 24,
    ONIX_TS4231V1ARR = 25,
    ONIX_MAX10ADCCORE = 26,
    ONIX_LOADTEST = 27,
    ONIX_MEMUSAGE = 28,
    ONIX_HARPSYNCINPUT = 30,
    ONIX_RHS2116 = 31,
    ONIX_RHS2116TRIGGER = 32,
    ONIX_NRIC1384 = 33,
    ONIX_I2CRAW = 34,
    ONIX_PERSTHEARTBEAT = 35,

    /* onigpu private range: devices with no upstream id (docs/devices.md lists them). */
    ONIX_ONIGPU_BEGIN = 0x4F470000u,      /* "OG" */
    ONIX_ONIGPU_NEUROPIX2 = 0x4F470001u,  /* Neuropixels 2.0 probe, 384 ch */
    ONIX_ONIGPU_TESTCORE = 0x4F470002u,   /* thesis fig. 4.1 source: 64-bit counter */
    ONIX_ONIGPU_TESTSINK = 0x4F470003u,   /* thesis fig. 4.1 sink: accepts anything */
    ONIX_ONIGPU_STIM = 0x4F470004u,       /* stimulator: timestamps each write frame */
    ONIX_ONIGPU_HUBMGR = 0x4F470005u      /* hub manager device at (hub << 8) | 254 */
};

enum {
    ONIX_HUB_NULL = 0,
    ONIX_HUB_FMCHOST = 1,
    ONIX_HUB_HS64 = 2,
    ONIX_HUB_HSNP = 3,
    ONIX_HUB_HSRHS2116 = 4,
    ONIX_HUB_HS64S = 5,
    ONIX_HUB_HSNP1ET = 6,
    ONIX_HUB_HSNP2EB = 7,
    ONIX_HUB_HSNP2E = 8,
    ONIX_HUB_HSNRIC1384 = 9,
    ONIX_HUB_HSNP1EH = 10,
    ONIX_HUB_ACQBOARD = 256,
    ONIX_HUB_RHYTHM = 257,
    ONIX_HUB_ACQBOARD3D = 258
};

/* Each hub's manager device sits at index (hub << 8) | ONIX_HUB_DEV_IDX and
 * answers these registers, read-only but DELAYNS (read/write; docs/devices.md). */
#define ONIX_HUB_DEV_IDX 254
enum {
    ONIX_HUB_HARDWAREID = 0,
    ONIX_HUB_HARDWAREREV = 1,
    ONIX_HUB_FIRMWAREVER = 2,
    ONIX_HUB_CLKRATEHZ = 4,
    ONIX_HUB_DELAYNS = 5
};
/* Registers of host-hub devices, from the ONIX datasheets (open-ephys
 * onix-docs, "Hardware Guide/Datasheets"). CLK_HZ is the clock that CLK_DIV
 * divides: frames per second = CLK_HZ / CLK_DIV. */
enum {
    ONIX_HEARTBEAT_ENABLE = 0,
    ONIX_HEARTBEAT_CLK_DIV = 1,
    ONIX_HEARTBEAT_CLK_HZ = 2 /* ro */
};
enum {
    ONIX_LOADTEST_ENABLE = 0,
    ONIX_LOADTEST_CLK_DIV = 1,
    ONIX_LOADTEST_CLK_HZ = 2,     /* ro */
    ONIX_LOADTEST_FRAME_WORDS = 3 /* 16-bit words after the hub clock in each frame; on reset */
};
enum {
    ONIX_MEMUSAGE_ENABLE = 0,
    ONIX_MEMUSAGE_CLK_DIV = 1,
    ONIX_MEMUSAGE_CLK_HZ = 2,    /* ro */
    ONIX_MEMUSAGE_MEM_WORDS = 3, /* ro: memory for frames, 32-bit words */
    ONIX_MEMUSAGE_MEM_USAGE = 4  /* ro: 32-bit words in use, as in the frames */
};

/* ONIX-specific context option: the first custom option (upstream numbering). */
enum {
    ONIX_OPT_PASSTHROUGH = ONI_OPT_CUSTOMBEGIN
};

/* Name of a device id ("RHD2164", "NEUROPIX2", ...) or hub hardware id
 * ("HS64", ...); "unknown" for an id not listed here. Static strings, never NULL. */
ONI_EXPORT const char *onix_device_str(int dev_id);
ONI_EXPORT const char *onix_hub_str(int hub_hardware_id);

#ifdef __cplusplus
}
#endif
#endif
