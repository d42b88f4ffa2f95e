/* onidefs.h - ONI basic types, error codes and driver info (ONI API 4.6 compatible). */
/* Include guard as upstream's (api/liboni/onidefs.h:1). */
#ifndef __ONI_DEFS_H__
#define __ONI_DEFS_H__

#include <stdint.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define ONI_EXPORT __declspec(dllexport)
#else
#define ONI_EXPORT __attribute__((visibility("default")))
#endif

typedef uint32_t oni_size_t;
typedef uint32_t oni_dev_id_t;
typedef uint32_t oni_dev_idx_t;
typedef uint32_t oni_reg_addr_t;
typedef uint32_t oni_reg_val_t;
typedef uint32_t oni_fifo_dat_t;
typedef uint64_t oni_fifo_time_t;

/* Bytes of a read frame's header [u64 time][u32 dev_idx][u32 data_sz], and of
 * a register value (upstream's names; drivers use them). */
#define ONI_FRAMEHEADERSZ (2 * sizeof(oni_fifo_dat_t) + sizeof(oni_fifo_time_t))
#define ONI_REGSZ sizeof(oni_reg_val_t)
/* Bytes to 32-bit FIFO words (upstream's name, api/liboni/onidefs.h:87). */
#define BYTE_TO_FIFO_SHIFT 2

/* Context options: the value is the enum position (upstream numbering). */
enum {
    ONI_OPT_DEVICETABLE = 0,
    ONI_OPT_NUMDEVICES,
    ONI_OPT_RUNNING,
    ONI_OPT_RESET,
    ONI_OPT_SYSCLKHZ,
    ONI_OPT_ACQCLKHZ,
    ONI_OPT_RESETACQCOUNTER,
    ONI_OPT_HWADDRESS,
    ONI_OPT_MAXREADFRAMESIZE,
    ONI_OPT_MAXWRITEFRAMESIZE,
    ONI_OPT_BLOCKREADSIZE,
    ONI_OPT_BLOCKWRITESIZE,
    ONI_OPT_CUSTOMBEGIN
};

/* Config registers of the driver ABI (onidriver.h); custom option n maps to
 * ONI_CONFIG_CUSTOMBEGIN + n. */
typedef enum {
    ONI_CONFIG_DEV_IDX = 0,
    ONI_CONFIG_REG_ADDR,
    ONI_CONFIG_REG_VALUE,
    ONI_CONFIG_RW,
    ONI_CONFIG_TRIG,
    ONI_CONFIG_RUNNING,
    ONI_CONFIG_RESET,
    ONI_CONFIG_SYSCLKHZ,
    ONI_CONFIG_ACQCLKHZ,
    ONI_CONFIG_RESETACQCOUNTER,
    ONI_CONFIG_HWADDRESS,
    ONI_CONFIG_CUSTOMBEGIN
} oni_config_t;

typedef struct {
    const char *name;
    const int major;
    const int minor;
    const int patch;
    const char *pre_release;
} oni_driver_info_t;

/* Error codes. 0 to ONI_MINERRORNUM are upstream's; onigpu's own codes start
 * at -100 so they can never collide with codes upstream may add later. */
enum {
    ONI_ESUCCESS = 0,
    ONI_EPATHINVALID = -1,
    ONI_EDEVID = -2,
    ONI_EDEVIDX = -3,
    ONI_EWRITESIZE = -4,
    ONI_EREADFAILURE = -5,
    ONI_EWRITEFAILURE = -6,
    ONI_ENULLCTX = -7,
    ONI_ESEEKFAILURE = -8,
    ONI_EINVALSTATE = -9,
    ONI_EINVALOPT = -10,
    ONI_EINVALARG = -11,
    ONI_ECOBSPACK = -12,
    ONI_ERETRIG = -13,
    ONI_EBUFFERSIZE = -14,
    ONI_EBADDEVTABLE = -15,
    ONI_EBADALLOC = -16,
    ONI_ECLOSEFAIL = -17,
    ONI_EREADONLY = -18,
    ONI_EUNIMPL = -19,
    ONI_EINVALREADSIZE = -20,
    ONI_ENOREADDEV = -21,
    ONI_EINIT = -22,
    ONI_EWRITEONLY = -23,
    ONI_EINVALWRITESIZE = -24,
    ONI_ENOTWRITEDEV = -25,
    ONI_EDEVIDXREPEAT = -26,
    ONI_EPROTCONFIG = -27,
    ONI_EBADFRAME = -28,
    ONI_EBADCONTROLLER = -29,
    ONI_MINERRORNUM = -30,

    /* onigpu extensions (see docs/errors.md) */
    ONI_ETIMEOUT = -100,      /* a blocking call passed ONI_OPT_TIMEOUTMS */
    ONI_EDISCONNECTED = -101, /* the hardware (or emulator daemon) went away */
    ONI_ENOGPU = -102,        /* GPU memory or a GPU path was asked for, but no usable GPU / no CUDA build */
    ONI_ENOTPINNED = -103,    /* unpin of a buffer that is not pinned */
    ONI_EPINNED = -104,       /* buffer already pinned, or freed while pinned */
    ONI_EOVERFLOW = -105,     /* hardware FIFO overflowed; data was dropped and counted */
    ONI_EBUSY = -106,         /* resource in use (e.g. a stream already owned by another reader) */
    /* why hardware could not be opened, where ONI_EPATHINVALID would not say */
    ONI_EBADADDR = -107,      /* an address that is not one: not HOST:PORT, a port out of range, a path too long */
    ONI_ENOHOST = -108,       /* a host name that does not resolve */
    ONI_ECONNREFUSED = -109,  /* nobody listens at the address (or the socket is left by a daemon that died) */
    ONI_ENOSOCKET = -110,     /* nothing at the socket path */
    ONI_ENOTSOCKET = -111,    /* something at the socket path that is not a socket (a file, a directory) */
    ONI_EACCESS = -112,       /* permission denied to the socket or its directory */
    ONI_MINERRORNUM_ONIGPU = -113
};

#ifdef __cplusplus
}
#endif
#endif
