/* hseeprom.c - byte-wide memories on a headstage's I2C bus (hs_bytes_read),
 * and the headstage EEPROM at I2C 0x51 of the serialized
 * headstages, in the layout Bonsai's HeadstageEeprom.cs:10-36 reads: a
 * 16-byte header ("HSOE", version 1, section offsets in units of 8 bytes,
 * zero checksum in byte 15) and a device info section (version 1, length,
 * u32 hardware id, revision minor then major, name length, name, zero
 * checksum in its last byte). The device info section starts at byte 16, so
 * the hardware id is at bytes 18-21, where onix-source reads it
 * (HeadStageEEPROM.h:41, HeadStageEEPROM.cpp:42-54). Sections the software
 * does not read (internal, link, power, encoding, records) are marked
 * absent (offset 0). */
#include <string.h>
#include "emu/headstages.h"

static void checksum(uint8_t *p, size_t n)
{
    uint8_t sum = 0;
    for (size_t i = 0; i + 1 < n; i++)
        sum = (uint8_t)(sum + p[i]);
    p[n - 1] = (uint8_t)(0x100 - sum);
}

int hs_bytes_read(const uint8_t *m, size_t size, uint32_t reg, unsigned n, uint32_t *v)
{
    if (n < 1 || n > 4 || reg + n > size)
        return 0;
    *v = 0;
    for (unsigned i = 0; i < n; i++)
        *v |= (uint32_t)m[reg + i] << (8 * i);
    return 1;
}

void hs_eeprom_build(uint8_t *img, uint32_t hw_id, uint8_t major, uint8_t minor, const char *name)
{
    memset(img, 0xFF, HS_EEPROM_SIZE); /* erased EEPROM cells */
    memset(img, 0, 16);
    memcpy(img, "HSOE", 4);
    img[4] = 1; /* header version */
    img[6] = 2; /* device info at byte 16 */
    checksum(img, 16);
    size_t nlen = strlen(name);
    if (nlen > HS_EEPROM_SIZE - 16 - 10)
        nlen = HS_EEPROM_SIZE - 16 - 10;
    size_t len = (9 + nlen + 1 + 7) / 8 * 8; /* fixed fields, name, checksum; whole units of 8 */
    uint8_t *d = img + 16;
    memset(d, 0, len);
    d[0] = 1; /* device info version */
    d[1] = (uint8_t)(len / 8);
    for (int i = 0; i < 4; i++)
        d[2 + i] = (uint8_t)(hw_id >> (8 * i));
    d[6] = minor;
    d[7] = major;
    d[8] = (uint8_t)nlen;
    memcpy(d + 9, name, nlen);
    checksum(d, len);
}
