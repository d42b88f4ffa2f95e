/* fuzz_headstage.c - libFuzzer target for the headstage models' parsing of
 * what a host sends over raw I2C (src/emu/headstages.h): any sequence of
 * reads and writes to any chip address, register, byte count and value,
 * power cycles and super-frames, on an NP2.0e and an NP1.0e. Input: 8-byte
 * records [op][addr][reg lo][reg hi][u32 value]. No access may crash or
 * touch memory outside the models (ASan); samples stay within their ADC's
 * range; a power cycle leaves nothing streaming. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
/* Compiled into the target for coverage (the library is built without it);
 * np1e.c comes from the archive (its static names are np2e.c's). */
#include "emu/devices/np2e.c"
#include "emu/devices/npsr.c"
#include "emu/devices/hseeprom.c"

static const uint32_t addrs[] = {HS_I2C_PROBE, HS_I2C_BNO055, HS_I2C_FLEX, HS_I2C_EEPROM, HS_I2C_SER,
                                 HS_I2C_NP1_PROBE, 0x30, 0x7F};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct emu_card *c;
    static struct np2e h2;
    static struct np1e h1;
    if (!c) {
        uint64_t sn[2] = {1, 2};
        struct neural_cfg s2, s1; /* the probes' signals as the devices make them, 4 units each */
        np2e_signal(&s2);
        np1e_signal(&s1);
        s2.units = s1.units = 4;
        if (emu_card_create("mode=fast;link=unlimited;ddr=1M;devices=heartbeat", &c, NULL, 0) ||
            np2e_init(&h2, c, 8, sn, "NP2014", &s2, 0) || np1e_init(&h1, c, 9, 3, "PRB_1_4_0480_1", &s1, 0))
            abort();
    }
    np2e_power_on(&h2);
    np1e_power_on(&h1);
    emu_card_lock(c);
    for (; size >= 8; data += 8, size -= 8) {
        uint8_t op = data[0];
        uint32_t addr = op & 0x80 ? data[1] & 0x7F : addrs[data[1] % 8];
        uint32_t reg = (uint32_t)data[2] | (uint32_t)data[3] << 8, v, got = 0;
        unsigned n = (unsigned)((op >> 2) & 7); /* 0..7: bad counts too */
        memcpy(&v, data + 4, 4);
        switch (op & 3) {
        case 0:
            if (op & 0x40)
                np1e_i2c_read(&h1, addr, reg, n, v, &got);
            else
                np2e_i2c_read(&h2, addr, reg, n, v, &got);
            break;
        case 1:
            if (op & 0x40)
                np1e_i2c_write(&h1, addr, reg, n, v);
            else
                np2e_i2c_write(&h2, addr, reg, n, v);
            break;
        case 2: {
            uint8_t out[NP2E_PAYLOAD > NP1E_PAYLOAD ? NP2E_PAYLOAD : NP1E_PAYLOAD];
            uint16_t w[sizeof out / 2];
            if (op & 0x40) {
                np1e_fill(&h1, out, v, v);
                memcpy(w, out, NP1E_PAYLOAD);
                for (int i = 5; i < NP1E_PAYLOAD / 2; i++)
                    if (w[i] >= 1024)
                        abort();
            } else {
                np2e_fill(&h2, (op >> 5) & 1, out, v, v);
                memcpy(w, out, NP2E_PAYLOAD);
                for (int i = 5; i < NP2E_PAYLOAD / 2; i++)
                    if (w[i] >= 4096)
                        abort();
            }
            break;
        }
        case 3:
            np2e_power_on(&h2);
            np1e_power_on(&h1);
            if (np2e_streaming(&h2, 0) || np2e_streaming(&h2, 1) || np1e_streaming(&h1))
                abort();
            break;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return 0;
}
