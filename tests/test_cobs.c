/* test_cobs.c - COBS encode/decode and signal packets (src/oni/util/cobs.c). */
#include "oni.h"
#include "oni/util/wire.h"
#include "onidriver.h"
#include "oni/util/cobs.h"
#include "unit.h"

static uint32_t rng = 12345;
static uint32_t rnd(void)
{
    rng = rng * 1103515245u + 12345u;
    return rng >> 8;
}

/* Encode then decode n bytes; the encoding must hold no 0 and the round trip must be exact. */
static void round_trip(const uint8_t *src, size_t n)
{
    uint8_t enc[1200], dec[1100];
    int e = oni_cobs_encode(src, n, enc, sizeof enc);
    REQUIRE(e > 0);
    CHECK((size_t)e <= n + (n + 253) / 254 + (n == 0));
    CHECK(memchr(enc, 0, (size_t)e) == NULL);
    int d = oni_cobs_decode(enc, (size_t)e, dec, sizeof dec);
    CHECK_EQ(d, n);
    if (d == (int)n)
        CHECK(memcmp(src, dec, n) == 0);
}

TEST(cobs_edge_lengths)
{
    static const size_t lens[] = {0, 1, 2, 253, 254, 255, 256, 507, 508, 509, 1000};
    uint8_t buf[1000];
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        memset(buf, 0x5A, sizeof buf); /* no zeros: longest runs */
        round_trip(buf, lens[k]);
        memset(buf, 0, sizeof buf); /* only zeros */
        round_trip(buf, lens[k]);
        for (size_t i = 0; i < lens[k]; i++)
            buf[i] = (uint8_t)(i % 7 == 3 ? 0 : i + 1);
        round_trip(buf, lens[k]);
    }
}

TEST(cobs_known_encodings)
{
    uint8_t enc[300], src[254];
    const uint8_t one_zero[] = {0};
    CHECK_EQ(oni_cobs_encode(one_zero, 1, enc, sizeof enc), 2);
    CHECK(enc[0] == 1 && enc[1] == 1);
    const uint8_t mixed[] = {0x11, 0x22, 0x00, 0x33};
    CHECK_EQ(oni_cobs_encode(mixed, 4, enc, sizeof enc), 5);
    CHECK(enc[0] == 3 && enc[1] == 0x11 && enc[2] == 0x22 && enc[3] == 2 && enc[4] == 0x33);
    /* 254 non-zero bytes: one full block, no trailing code byte. */
    memset(src, 7, sizeof src);
    CHECK_EQ(oni_cobs_encode(src, 254, enc, sizeof enc), 255);
    CHECK_EQ(enc[0], 0xFF);
    /* Exact capacities: enough succeeds, one less fails. */
    CHECK_EQ(oni_cobs_encode(src, 254, enc, 255), 255);
    CHECK_EQ(oni_cobs_encode(src, 254, enc, 254), -1);
    CHECK_EQ(oni_cobs_encode(src, 0, enc, 0), -1);
}

TEST(cobs_random_round_trips)
{
    uint8_t buf[1000];
    for (int iter = 0; iter < 3000; iter++) {
        size_t n = rnd() % sizeof buf;
        int zero_pct = (int)(rnd() % 101);
        for (size_t i = 0; i < n; i++)
            buf[i] = (int)(rnd() % 100) < zero_pct ? 0 : (uint8_t)(rnd() % 255 + 1);
        round_trip(buf, n);
    }
}

TEST(cobs_malformed)
{
    uint8_t dec[300];
    const uint8_t zero_code[] = {0x00, 0x11};
    CHECK_RC(oni_cobs_decode(zero_code, 2, dec, sizeof dec), ONI_ECOBSPACK);
    const uint8_t short_run[] = {0x05, 0x11, 0x22}; /* promises 4 bytes, has 2 */
    CHECK_RC(oni_cobs_decode(short_run, 3, dec, sizeof dec), ONI_ECOBSPACK);
    const uint8_t inner_zero[] = {0x03, 0x11, 0x00};
    CHECK_RC(oni_cobs_decode(inner_zero, 3, dec, sizeof dec), ONI_ECOBSPACK);
    const uint8_t ok[] = {0x03, 0x11, 0x22, 0x02, 0x33};
    CHECK_EQ(oni_cobs_decode(ok, 5, dec, sizeof dec), 4);
    CHECK_RC(oni_cobs_decode(ok, 5, dec, 3), ONI_ECOBSPACK); /* too small dst */
    CHECK_EQ(oni_cobs_decode(ok, 0, dec, sizeof dec), 0);
}

TEST(signal_pack_round_trip)
{
    uint8_t pkt[300], dec[300], payload[ONI_SIGMAXPAYLOAD + 1];
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (uint8_t)(i * 3 + 1);
    for (size_t n = 0; n <= ONI_SIGMAXPAYLOAD; n++) {
        int len = oni_signal_pack(ONI_SIG_DEVICEINST, payload, n, pkt, sizeof pkt);
        REQUIRE(len > 0);
        CHECK(len - 1 <= ONI_COBSMAXPACKET); /* packet fits the protocol's limit */
        CHECK_EQ(pkt[len - 1], 0);
        CHECK(memchr(pkt, 0, (size_t)len - 1) == NULL);
        int d = oni_cobs_decode(pkt, (size_t)len - 1, dec, sizeof dec);
        REQUIRE(d == (int)(n + 4));
        uint32_t type;
        memcpy(&type, dec, 4);
        CHECK_EQ(type, ONI_SIG_DEVICEINST);
        CHECK(memcmp(dec + 4, payload, n) == 0);
    }
    /* The largest payload, no zeros in it: exactly 255 encoded bytes + delimiter fit 256. */
    memset(payload, 0xAB, sizeof payload);
    CHECK_EQ(oni_signal_pack(0x01010101u, payload, ONI_SIGMAXPAYLOAD, pkt, 256), 256);
    CHECK_RC(oni_signal_pack(ONI_SIG_NULL, payload, ONI_SIGMAXPAYLOAD + 1, pkt, sizeof pkt), ONI_EINVALARG);
    CHECK_RC(oni_signal_pack(ONI_SIG_NULL, NULL, 4, pkt, sizeof pkt), ONI_EINVALARG);
    CHECK_RC(oni_signal_pack(ONI_SIG_NULL, NULL, 0, NULL, 10), ONI_EINVALARG);
    CHECK_RC(oni_signal_pack(ONI_SIG_NULL, NULL, 0, pkt, 3), ONI_EBUFFERSIZE);
    CHECK_RC(oni_signal_pack(ONI_SIG_NULL, NULL, 0, pkt, 0), ONI_EBUFFERSIZE);
}

/* For every length around the 254-byte runs, with no zeros (the most code
 * bytes), encoding into exactly the bytes it needs succeeds and into one
 * less returns -1 without writing past the capacity. Guards the capacity
 * bound of oni_cobs_encode ((n + 253) / 254 code bytes: with n + 252, 255
 * bytes were let into 256 and the encoder wrote a 257th). */
TEST(cobs_exact_capacity_every_length)
{
    static const size_t lens[] = {1, 2, 253, 254, 255, 256, 507, 508, 509, 762, 763, 1000};
    uint8_t src[1000], enc[1100];
    memset(src, 0x5A, sizeof src);
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        size_t n = lens[k], need = n + (n + 253) / 254;
        memset(enc, 0xCC, sizeof enc);
        CHECK_EQ(oni_cobs_encode(src, n, enc, need - 1), -1);
        if (enc[need - 1] != 0xCC)
            UNIT_FAIL("n %zu: byte %zu written past a capacity of %zu", n, need - 1, need - 1);
        CHECK_EQ(oni_cobs_encode(src, n, enc, need), (int)need);
    }
}

/* oni_signal_pack needs room for the packet and its 0 delimiter: a buffer
 * one byte short is refused (ONI_EBUFFERSIZE) and not written past. Guards
 * the dst_cap - 1 given to the encoder (with dst_cap the delimiter landed one
 * byte beyond the buffer). */
TEST(signal_pack_exact_capacity)
{
    uint8_t payload[ONI_SIGMAXPAYLOAD], pkt[300];
    memset(payload, 0xAB, sizeof payload);
    memset(pkt, 0xCC, sizeof pkt);
    CHECK_RC(oni_signal_pack(0x01010101u, payload, ONI_SIGMAXPAYLOAD, pkt, 255), ONI_EBUFFERSIZE);
    CHECK_EQ(pkt[255], 0xCC);
    CHECK_EQ(oni_signal_pack(0x01010101u, payload, ONI_SIGMAXPAYLOAD, pkt, 256), 256);
    /* A short packet: [u32 type] encodes in 5 bytes, 6 with the delimiter. */
    memset(pkt, 0xCC, sizeof pkt);
    CHECK_RC(oni_signal_pack(ONI_SIG_DEVICETABLEACK, NULL, 0, pkt, 5), ONI_EBUFFERSIZE);
    CHECK_EQ(pkt[5], 0xCC);
    CHECK_EQ(oni_signal_pack(ONI_SIG_DEVICETABLEACK, NULL, 0, pkt, 6), 6);
}
