/* onitest.h - the `test` driver's public side: its register map, driver
 * options, and the checker for the contents of its frames.
 *
 * The test driver (docs/devices-test.md) generates frames as fast as they are
 * read. Every readable device's payload is
 *   bytes 0..7             the device's own 64-bit frame counter (little-endian),
 *                          0 after RESET, +1 per frame of that device
 *   bytes 8..data_sz-1     32-bit little-endian words w[i] = T(dev_idx, i) ^ K(counter),
 *                          the last word cut to the bytes that remain
 * with T and K fixed functions (src/drivers/test/testdrv.h), so a reader can
 * tell a corrupted frame from a lost or reordered one. The frame time is the
 * driver's 64-bit acquisition counter, +1 per emitted frame of any device. */
#ifndef ONITEST_H
#define ONITEST_H

#include <stdint.h>
#include "oni.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Registers of every device other than a hub manager (oni_read_reg / oni_write_reg). */
enum {
    ONITEST_REG_ENABLE = 0,    /* rw: 0 = the device emits nothing; reset value 1 */
    ONITEST_REG_MESSAGE = 1,   /* rw: scratch word, kept until RESET; reset value 0 */
    ONITEST_REG_RATE = 2,      /* rw: round-robin weight 1..ONITEST_MAX_RATE (frames per round);
                                  other values are NACKed */
    ONITEST_REG_READSIZE = 3,  /* ro: read_size of the device table entry */
    ONITEST_REG_WRITESIZE = 4, /* ro: write_size of the device table entry */
    ONITEST_REG_FRAMES_LO = 5, /* ro: frames emitted since RESET, low 32 bits */
    ONITEST_REG_FRAMES_HI = 6, /* ro: high 32 bits */
    ONITEST_REG_WFRAMES = 7    /* ro: write frames accepted since RESET (low 32 bits) */
};
#define ONITEST_MAX_RATE 64u

/* Driver options (oni_set_driver_opt / oni_get_driver_opt). */
enum {
    ONITEST_OPT_STATS = 0x4F470400, /* get: onitest_stats_t */
    ONITEST_OPT_HOLD_ACK            /* set/get uint32_t: non-zero holds register accesses
                                       pending (TRIG stays 1, no answer) until set back to 0,
                                       which completes the held access; lets a host exercise
                                       ONI_ERETRIG and its register timeout */
};

typedef struct {
    uint64_t frames;           /* read frames emitted (all devices) since RESET */
    uint64_t bytes;            /* data-stream bytes returned by reads since RESET */
    uint64_t wframes_accepted; /* write frames accepted (all devices) since RESET */
    uint64_t wframes_rejected; /* malformed write frames refused with ONI_EBADFRAME */
    uint64_t signal_dropped;   /* signal packets dropped because the host did not read them */
} onitest_stats_t;

/* Check a read frame of the test driver. Returns 0 if its payload is the one
 * the driver generates for (f->dev_idx, counter) and counter == *expected;
 * 1 if the payload is right but counter != *expected (frames lost, repeated
 * or reordered: the caller compares); in both cases *expected becomes
 * counter + 1. Returns ONI_EBADFRAME (*expected untouched) for an unknown
 * device, a data_sz that is not the device's read size, or wrong contents;
 * ONI_EINVALARG for NULL arguments. Reads only the frame; thread-safe. */
ONI_EXPORT int onitest_check_frame(const oni_frame_t *f, uint64_t *expected_counter);

#ifdef __cplusplus
}
#endif
#endif
