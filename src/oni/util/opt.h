/* opt.h - helpers for option values, shared by the core and the drivers. */
#ifndef ONI_UTIL_OPT_H
#define ONI_UTIL_OPT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "onidefs.h"

/* The answer to a get into a buffer of *len bytes where need are needed:
 * *len = need (what it takes, as oni_get_opt says) and ONI_EBUFFERSIZE. */
static inline int oni_opt_short(size_t *len, size_t need)
{
    *len = need;
    return ONI_EBUFFERSIZE;
}

/* The value of a 32-bit option being set into *out: 0, or ONI_EINVALARG
 * unless value holds exactly 4 bytes. */
static inline int oni_opt_u32(const void *value, size_t len, uint32_t *out)
{
    if (!value || len != sizeof *out)
        return ONI_EINVALARG;
    memcpy(out, value, sizeof *out);
    return 0;
}

#endif
