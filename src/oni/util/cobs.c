/* cobs.c - Consistent Overhead Byte Stuffing for the signal stream, and the
 * signal packet builder drivers use. */
#include <string.h>
#include "oni.h"
#include "oni/util/wire.h"
#include "oni/util/cobs.h"

int oni_cobs_encode(const uint8_t *src, size_t n, uint8_t *dst, size_t dst_cap)
{
    /* Worst case: one code byte per started run of 254 data bytes (one for n = 0). */
    if (n + (n ? (n + 253) / 254 : 1) > dst_cap)
        return -1;
    size_t code_at = 0, out = 1;
    uint8_t code = 1;
    for (size_t i = 0; i < n; i++) {
        if (src[i] == 0) {
            dst[code_at] = code;
            code_at = out++;
            code = 1;
            continue;
        }
        dst[out++] = src[i];
        /* A full run ends its block; a new one starts only if bytes follow,
         * so 254 bytes encode in 255 and a signal packet stays <= 255. */
        if (++code == 0xFF && i + 1 < n) {
            dst[code_at] = code;
            code_at = out++;
            code = 1;
        }
    }
    dst[code_at] = code;
    return (int)out;
}

int oni_cobs_decode(const uint8_t *src, size_t n, uint8_t *dst, size_t dst_cap)
{
    size_t in = 0, out = 0;
    while (in < n) {
        uint8_t code = src[in++];
        if (code == 0 || in + code - 1 > n)
            return ONI_ECOBSPACK;
        for (uint8_t i = 1; i < code; i++) {
            if (src[in] == 0 || out >= dst_cap)
                return ONI_ECOBSPACK;
            dst[out++] = src[in++];
        }
        /* A code below 0xFF stands for a zero, except at the end of the packet. */
        if (code != 0xFF && in < n) {
            if (out >= dst_cap)
                return ONI_ECOBSPACK;
            dst[out++] = 0;
        }
    }
    return (int)out;
}

int oni_signal_pack(uint32_t type, const void *payload, size_t n, uint8_t *dst, size_t dst_cap)
{
    uint8_t raw[4 + ONI_SIGMAXPAYLOAD];
    if (n > ONI_SIGMAXPAYLOAD || (n && !payload) || !dst)
        return ONI_EINVALARG;
    memcpy(raw, &type, 4);
    if (n)
        memcpy(raw + 4, payload, n);
    if (dst_cap < 1)
        return ONI_EBUFFERSIZE;
    int len = oni_cobs_encode(raw, 4 + n, dst, dst_cap - 1);
    if (len < 0)
        return ONI_EBUFFERSIZE;
    dst[len] = 0;
    return len + 1;
}
