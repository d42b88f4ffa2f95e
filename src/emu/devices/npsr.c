/* npsr.c - the shift-register chains of the Neuropixels ASICs (NP1.0, NP2.0),
 * loaded as Bonsai and onix-source load them (NeuropixelsV2RegisterContext.cs
 * :43-68, NeuropixelsV1RegisterContext.cs:90-136, Neuropixels2e.cpp:633-655):
 * SOFT_RESET 0xFF then 0x00, the byte count in SR_LENGTH1 (low) and
 * SR_LENGTH2 (high), the bytes into the chain's register; STATUS then reads
 * SR_OK (0x80, NeuropixelsV2.cs:107, NeuropixelsV1RegisterContext.cs:15) if
 * the chain took exactly SR_LENGTH bytes and that is its own length. */
#include <string.h>
#include "emu/headstages.h"

void np_sr_soft_reset(struct np_sr *s)
{
    s->count = 0;
    s->chain = 0;
}

void np_sr_length(struct np_sr *s, int high, uint8_t x)
{
    s->len = high ? (s->len & 0x00FFu) | (uint32_t)x << 8 : (s->len & 0xFF00u) | x;
}

uint8_t np_sr_shift(struct np_sr *s, uint32_t reg, uint8_t x, uint32_t n, uint8_t *store)
{
    if (s->chain != reg) { /* another chain: its shifting starts over */
        s->chain = reg;
        s->count = 0;
    }
    if (s->count < n && store)
        store[s->count] = x;
    s->count++;
    int ok = s->count == s->len && s->len == n;
    s->loads += ok;
    return ok ? NP_SR_OK : 0;
}
