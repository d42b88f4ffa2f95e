/* cobs.h - Consistent Overhead Byte Stuffing of the signal stream
 * (src/oni/util/cobs.c), for the core, the drivers and the emulated card. */
#ifndef ONI_UTIL_COBS_H
#define ONI_UTIL_COBS_H

#include <stddef.h>
#include <stdint.h>

/* Encode n bytes of src into dst (no delimiter written); returns the encoded
 * length or -1 if dst_cap is too small. */
int oni_cobs_encode(const uint8_t *src, size_t n, uint8_t *dst, size_t dst_cap);

/* Decode an encoded packet (delimiter excluded) into dst; returns the
 * decoded length or ONI_ECOBSPACK for a malformed packet or too small dst. */
int oni_cobs_decode(const uint8_t *src, size_t n, uint8_t *dst, size_t dst_cap);

/* Build one complete signal packet ([u32 type][payload] COBS-encoded, then 0)
 * into dst; returns its length in bytes or a negative ONI error. */
int oni_signal_pack(uint32_t type, const void *payload, size_t n, uint8_t *dst, size_t dst_cap);

#endif
