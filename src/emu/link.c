/* link.c - the card's PCIe link model: a transfer of n bytes takes
 * latency + n / bandwidth. docs/emulator.md gives the source of each figure.
 *
 * gen2x4 is the thesis card (Nereid Kintex-7, PCIe Gen2 x4: 4 lanes x 5 GT/s x
 * 8b/10b = 2.0 GB/s raw). Its bandwidth is what the thesis measured for 10 MB
 * transfers (tables 4.3-4.5: 1.38-1.70 GB/s; 79-86% of the link), 1.6 GB/s;
 * its latency the 3 us latency term fitted for a Gen2 x4 FPGA (seed 001).
 * The upgrade boards of thesis table 6.2 get the theoretical lane rate times
 * the encoding efficiency (Gen3+: 128b/130b) and 1 us: an upper bound. */
#include <errno.h>
#include <string.h>
#include <time.h>
#include "card.h"
#include "oni.h"
#include "oni/util/clock.h"

/* In the order and with the names of ONIEMU_LINK_PRESETS (oniemu.h; test_emu_card
 * emu_link_presets_named_in_oniemu_h checks). */
static const oniemu_link_t presets[] = {
    {"gen2x4", 1.6e9, 3e-6},
    {"gen3x8", 8 * 8e9 / 8 * 128 / 130, 1e-6},
    {"gen4x8", 8 * 16e9 / 8 * 128 / 130, 1e-6},
    {"gen4x16", 16 * 16e9 / 8 * 128 / 130, 1e-6},
    {"gen5x16", 16 * 32e9 / 8 * 128 / 130, 1e-6},
    {"unlimited", 0, 0},
};

int emu_link_preset(const char *name, oniemu_link_t *out)
{
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        if (!strcmp(name, presets[i].name)) {
            *out = presets[i];
            return 0;
        }
    }
    return ONI_EINVALARG;
}

uint64_t emu_link_ns(const oniemu_link_t *l, size_t n)
{
    double s = l->latency_s + (l->bandwidth_Bps > 0 ? (double)n / l->bandwidth_Bps : 0);
    return (uint64_t)(s * 1e9 + 0.5);
}

/* Sleeping is only trusted up to ~60 us before the deadline (timer slack and
 * wake-up latency); the rest is spun, so short transfers are modelled exactly. */
void emu_wait_until_ns(uint64_t t)
{
    uint64_t now = oni_now_ns();
    if (now + 100000 < t) {
        uint64_t wake = t - 60000;
        struct timespec ts = {(time_t)(wake / 1000000000ull), (long)(wake % 1000000000ull)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            ;
    }
    while (oni_now_ns() < t)
        ;
}

void emu_card_link_delay(struct emu_card *card, size_t n, uint64_t spent_ns)
{
    if (!card)
        return;
    uint64_t need = emu_link_ns(&card->link, n);
    if (need > spent_ns)
        emu_wait_until_ns(oni_now_ns() + (need - spent_ns));
}

void emu_card_link(struct emu_card *card, oniemu_link_t *link)
{
    if (card && link)
        *link = card->link;
}
