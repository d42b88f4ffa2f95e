/* test_emu_headstages.c - the emulated headstages' chips (src/emu/headstages.h,
 * src/emu/devices): EEPROMs, I2C register models, the traffic Bonsai.ONIX1
 * and the onix-source plugin send them, and their payloads byte for byte as
 * those programs decode them (file:line of each fact in the comments). */
#include <math.h>
#include <stdlib.h>
#include "emu/headstage.h"
#include "emu/headstages.h"
#include "test_emu_util.h"
#include "unit.h"

/* --- headstage EEPROM ---------------------------------------------------------------- */

/* Read the EEPROM as Bonsai's HeadstageEeprom.cs:38-105 does: 16-byte header,
 * checks, device info section, hardware id, revision, name. */
static int eeprom_parse(struct np2e *h, uint32_t *id, int *major, int *minor, char *name)
{
    uint8_t hdr[16], sum = 0;
    uint32_t v;
    for (uint32_t i = 0; i < 16; i++) {
        if (!np2e_i2c_read(h, HS_I2C_EEPROM, i, 1, 0, &v))
            return -1;
        hdr[i] = (uint8_t)v;
        sum = (uint8_t)(sum + hdr[i]);
    }
    if (sum || memcmp(hdr, "HSOE", 4) || hdr[4] != 1 || !hdr[6])
        return -2;
    uint32_t base = hdr[6] * 8u;
    if (!np2e_i2c_read(h, HS_I2C_EEPROM, base, 1, 0, &v) || v != 1 ||
        !np2e_i2c_read(h, HS_I2C_EEPROM, base + 1, 1, 0, &v) || v * 8 < 10)
        return -3;
    uint32_t len = v * 8;
    uint8_t d[256];
    sum = 0;
    for (uint32_t i = 0; i < len; i++) {
        if (!np2e_i2c_read(h, HS_I2C_EEPROM, base + i, 1, 0, &v))
            return -4;
        d[i] = (uint8_t)v;
        sum = (uint8_t)(sum + d[i]);
    }
    if (sum)
        return -5;
    *id = d[2] | d[3] << 8 | d[4] << 16 | (uint32_t)d[5] << 24;
    *minor = d[6], *major = d[7];
    memcpy(name, d + 9, d[8]);
    name[d[8]] = 0;
    return 0;
}

/* The probes' default signal with n units (the tests' references use the same). */
static const struct neural_cfg *np2_units(uint32_t n)
{
    static struct neural_cfg c;
    np2e_signal(&c);
    c.units = n;
    return &c;
}

/* ... with units of SNR 15 and up: every trough far below the noise. */
static const struct neural_cfg *np2_loud(uint32_t n)
{
    static struct neural_cfg c;
    np2e_signal(&c);
    c.units = n;
    c.snr_median = 20, c.snr_min = 15;
    return &c;
}

static const struct neural_cfg *np1_units(uint32_t n)
{
    static struct neural_cfg c;
    np1e_signal(&c);
    c.units = n;
    return &c;
}

static const struct neural_cfg *np1_lfp(void)
{
    static struct neural_cfg ap, c;
    np1e_signal(&ap);
    np1e_lfp_signal(&ap, &c);
    return &c;
}

static struct emu_card *any_card(void) { return card_open("mode=fast;seed=3;devices=heartbeat"); }

TEST(hs_eeprom_as_bonsai_and_onix_source_read_it)
{
    struct emu_card *c = any_card();
    REQUIRE(c);
    static struct np2e h;
    uint64_t sn[2] = {1234, 5678};
    REQUIRE(np2e_init(&h, c, 8, sn, "NP2014", np2_units(4), 0) == 0);
    uint32_t id = 0;
    int major = -1, minor = -1;
    char name[64];
    CHECK_EQ(eeprom_parse(&h, &id, &major, &minor, name), 0);
    CHECK_EQ(id, ONIX_HUB_HSNP2E); /* ConfigureHeadstageNeuropixelsV2e.cs:100, :174 */
    CHECK(major >= 1);             /* MinimumRevision 1.0, :99 */
    CHECK(strcmp(name, "Headstage-NeuropixelsV2.0e") == 0);
    /* onix-source reads the id as 4 single bytes from 18 (HeadStageEEPROM.h:41, .cpp:42-54) */
    uint32_t hsid = 0, v;
    for (uint32_t i = 0; i < 4; i++) {
        REQUIRE(np2e_i2c_read(&h, HS_I2C_EEPROM, 18 + i, 1, 0, &v));
        hsid += (v & 0xFF) << (8 * i);
    }
    CHECK_EQ(hsid, ONIX_HUB_HSNP2E);
    /* a 4-byte read covers 4 registers, first in the low byte (I2CRegisterContext.cs:48-55) */
    REQUIRE(np2e_i2c_read(&h, HS_I2C_EEPROM, 0, 4, 0, &v));
    CHECK_EQ(v, 'H' | 'S' << 8 | 'O' << 16 | (uint32_t)'E' << 24);
    CHECK(!np2e_i2c_read(&h, HS_I2C_EEPROM, 0, 5, 0, &v)); /* at most 4 bytes */
    CHECK(!np2e_i2c_read(&h, 0x33, 0, 1, 0, &v));          /* no chip there */
    np2e_fini(&h);
    emu_card_destroy(c);
}

/* --- NP2.0e: the configuration traffic ---------------------------------------------- */

static int ser_w(struct np2e *h, uint32_t reg, uint32_t v) { return np2e_i2c_write(h, HS_I2C_SER, reg, 1, v); }

/* ConfigureHeadstageNeuropixelsV2e.cs:158-169: shutdown, deselect, supply on, reset pulse. */
static void bonsai_serdes(struct np2e *h)
{
    uint32_t g;
    CHECK(ser_w(h, SER_GPIO10, 0x11));
    CHECK(ser_w(h, SER_GPIO32, 0x11));
    CHECK(np2e_i2c_read(h, HS_I2C_SER, SER_GPIO10, 1, 0, &g));
    CHECK(ser_w(h, SER_GPIO10, g | 0x08));
    CHECK(np2e_i2c_read(h, HS_I2C_SER, SER_GPIO10, 1, 0, &g));
    CHECK(ser_w(h, SER_GPIO10, g & ~0x80u));
    CHECK(ser_w(h, SER_GPIO10, g | 0x80));
}

static void read_str(struct np2e *h, uint32_t off, char *s)
{
    uint32_t v;
    for (int i = 0; i < 20; i++) {
        CHECK(np2e_i2c_read(h, HS_I2C_FLEX, off + (uint32_t)i, 1, 0, &v));
        s[i] = (char)v;
    }
    s[20] = 0;
}

static uint64_t read_sn(struct np2e *h)
{
    uint64_t sn = 0;
    uint32_t v;
    for (uint32_t i = 0; i < 8; i++) {
        if (!np2e_i2c_read(h, HS_I2C_FLEX, i, 1, 0, &v))
            return 0;
        sn |= (uint64_t)(v & 0xFF) << (8 * i);
    }
    return sn;
}

/* NeuropixelsV2RegisterContext.cs:43-68: one chain written twice, then STATUS. */
static uint32_t write_chain(struct np2e *h, uint32_t chain, const uint8_t *b, uint32_t n)
{
    for (int rep = 0; rep < 2; rep++) {
        CHECK(np2e_i2c_write(h, HS_I2C_PROBE, NP2_SOFT_RESET, 1, 0xFF));
        CHECK(np2e_i2c_write(h, HS_I2C_PROBE, NP2_SOFT_RESET, 1, 0x00));
        CHECK(np2e_i2c_write(h, HS_I2C_PROBE, NP2_SR_LENGTH1, 1, n % 0x100));
        CHECK(np2e_i2c_write(h, HS_I2C_PROBE, NP2_SR_LENGTH2, 1, n / 0x100));
        for (uint32_t i = 0; i < n; i++)
            CHECK(np2e_i2c_write(h, HS_I2C_PROBE, chain, 1, b[i]));
    }
    uint32_t st = 0;
    CHECK(np2e_i2c_read(h, HS_I2C_PROBE, NP2_STATUS, 1, 0, &st));
    return st;
}

TEST(np2e_configured_as_bonsai_does)
{
    struct emu_card *c = any_card();
    REQUIRE(c);
    static struct np2e h;
    uint64_t sn[2] = {19120001234ull, 19120005678ull};
    REQUIRE(np2e_init(&h, c, 8, sn, "NP2014", np2_units(4), 0) == 0);
    uint32_t v;
    /* as it comes up: unpowered, in reset, no stream, no probe bus connected */
    CHECK(!np2e_streaming(&h, 0) && !np2e_streaming(&h, 1));
    CHECK(!np2e_i2c_read(&h, HS_I2C_FLEX, 0, 1, 0, &v));
    bonsai_serdes(&h);
    CHECK(!np2e_i2c_read(&h, HS_I2C_PROBE, NP2_STATUS, 1, 0, &v)); /* deselected: the probe's bus is off */
    /* probe A: select, metadata (NeuropixelsV2Metadata.cs:13-24), configuration */
    CHECK(ser_w(&h, SER_GPIO32, 0x19)); /* ProbeASelected, ConfigureHeadstageNeuropixelsV2e.cs:107 */
    CHECK_EQ(read_sn(&h), sn[0]);
    char s[21];
    read_str(&h, 0x40, s);
    CHECK(strcmp(s, "NP2014") == 0); /* a quad-shank part number (NeuropixelsProbeMetadata.cpp) */
    read_str(&h, 0x20, s);
    CHECK(s[0] != 0);
    uint8_t base[NP2E_BASE_BYTES], shank[NP2E_SHANK_BYTES];
    for (uint32_t i = 0; i < sizeof base; i++)
        base[i] = (uint8_t)(i * 7);
    memset(shank, 0, sizeof shank);
    shank[3] = 0x40;
    CHECK_EQ(write_chain(&h, NP2_SR_CHAIN5, base, sizeof base), NP2_SR_OK);
    CHECK_EQ(write_chain(&h, NP2_SR_CHAIN6, base, sizeof base), NP2_SR_OK);
    for (uint32_t ch = NP2_SR_CHAIN1; ch >= NP2_SR_CHAIN4; ch--)
        CHECK_EQ(write_chain(&h, ch, shank, sizeof shank), NP2_SR_OK);
    CHECK(memcmp(h.probe[0].chain[NP2_SR_CHAIN1 - NP2_SR_CHAIN5], base, sizeof base) == 0);
    CHECK_EQ(h.probe[0].chain[0][3], 0x40);
    CHECK_EQ(h.probe[0].sr.loads, 2 * 6);
    /* a chain given the wrong length does not load: STATUS says so */
    CHECK_EQ(write_chain(&h, NP2_SR_CHAIN5, base, sizeof base - 1), 0);
    CHECK(!np2e_streaming(&h, 0));
    static const uint8_t sync[12] = {0xB9, 0x61, 0x86, 0x18, 0x61, 0x86, 0x18, 0x61, 0x86, 0x18, 0x61, 0x18};
    for (int i = 11; i >= 0; i--) /* ConfigureNeuropixelsV2PsbDecoder.cs:96-107 */
        CHECK(np2e_i2c_write(&h, HS_I2C_PROBE, NP2_SUPERSYNC0 + (uint32_t)i, 1, sync[i]));
    CHECK(np2e_i2c_write(&h, HS_I2C_PROBE, NP2_OP_MODE, 1, NP2_OP_RECORD));
    CHECK(np2e_streaming(&h, 0));
    CHECK(!np2e_streaming(&h, 1));
    /* probe B: its own flex EEPROM and registers */
    CHECK(ser_w(&h, SER_GPIO32, 0x99)); /* ProbeBSelected, :108 */
    CHECK_EQ(read_sn(&h), sn[1]);
    CHECK(np2e_i2c_read(&h, HS_I2C_PROBE, NP2_OP_MODE, 1, 0, &v));
    CHECK_EQ(v, 0);
    CHECK(np2e_i2c_write(&h, HS_I2C_PROBE, NP2_OP_MODE, 1, NP2_OP_POWERDOWN)); /* disabled: :116 */
    CHECK(!np2e_streaming(&h, 1));
    CHECK(ser_w(&h, SER_GPIO32, 0x11)); /* deselected for acquisition: probe A still records */
    CHECK(np2e_streaming(&h, 0));
    /* ShutdownProbes (:232-235): supply off, registers gone */
    CHECK(ser_w(&h, SER_GPIO10, 0x11));
    CHECK(!np2e_streaming(&h, 0));
    CHECK_EQ(h.probe[0].reg[NP2_OP_MODE], 0);
    np2e_fini(&h);
    emu_card_destroy(c);
}

TEST(np2e_missing_probe_nacks)
{
    struct emu_card *c = any_card();
    REQUIRE(c);
    static struct np2e h;
    uint64_t sn[2] = {42, 0};
    REQUIRE(np2e_init(&h, c, 8, sn, "NP2014", np2_units(0), 0) == 0);
    bonsai_serdes(&h);
    uint32_t v;
    CHECK(ser_w(&h, SER_GPIO32, 0x99));
    /* NeuropixelsV2Metadata.cs:25-31 takes a failed read (-5) as "no probe" */
    CHECK(!np2e_i2c_read(&h, HS_I2C_FLEX, 0, 1, 0, &v));
    CHECK(!np2e_i2c_write(&h, HS_I2C_PROBE, NP2_OP_MODE, 1, NP2_OP_RECORD));
    CHECK(ser_w(&h, SER_GPIO32, 0x19));
    CHECK_EQ(read_sn(&h), 42);
    np2e_fini(&h);
    emu_card_destroy(c);
}

/* --- NP2.0e: the super-frame -------------------------------------------------------- */

/* Channel map entries copied from Bonsai's table (NeuropixelsV2eData.cs:78-110)
 * as facts: row k (data index order), column = frame i. */
TEST(np2e_channel_map_is_bonsais)
{
    static const struct { uint32_t k, i, ch; } want[] = {
        {0, 0, 0}, {0, 15, 30}, {1, 0, 128}, {2, 1, 258}, {3, 0, 1}, {5, 15, 287}, {6, 1, 34},
        {9, 0, 33}, {12, 2, 68}, {13, 15, 222}, {17, 0, 321}, {18, 0, 96}, {21, 0, 97}, {23, 15, 383},
    };
    for (size_t j = 0; j < sizeof want / sizeof want[0]; j++)
        CHECK_EQ(np2e_channel(want[j].k, want[j].i), want[j].ch);
    /* every channel exactly once; words: TrashWords + 36 i + AdcIndicies[k] (:128-132, :141-150) */
    int seen[NP2E_CH] = {0};
    for (uint32_t i = 0; i < NP2E_FRAMES; i++)
        for (uint32_t k = 0; k < NP2E_ADCS; k++)
            seen[np2e_channel(k, i)]++;
    for (int ch = 0; ch < NP2E_CH; ch++)
        CHECK_EQ(seen[ch], 1);
    CHECK_EQ(np2e_word(0, 0), 4);
    CHECK_EQ(np2e_word(3, 0), 8);
    CHECK_EQ(np2e_word(23, 15), 4 + 36 * 15 + 30);
    CHECK_EQ(NP2E_PAYLOAD, 8 + 2 + 2 * 576);
}

/* Decode a super-frame as onix-source does (Neuropixels2e.cpp:580-604):
 * probe index at word 4, samples from word 9 at 36 i + adcIndices[j]. */
static void decode_onix_source(const uint8_t *payload, uint16_t *probe, uint64_t *clk, uint16_t *ch)
{
    static const int adc[24] = {0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, 16, 17, 18, 20, 21, 22, 24, 25, 26, 28, 29, 30};
    uint16_t w[NP2E_PAYLOAD / 2];
    memcpy(w, payload, sizeof w);
    *probe = w[4];
    memcpy(clk, payload, 8);
    for (int i = 0; i < NP2E_FRAMES; i++)
        for (int j = 0; j < NP2E_ADCS; j++)
            ch[np2e_channel((uint32_t)j, (uint32_t)i)] = w[9 + adc[j] + i * 36];
}

TEST(np2e_superframe_decodes_to_the_signal)
{
    struct emu_card *c = any_card();
    REQUIRE(c);
    static struct np2e h;
    static struct neural ref;
    uint64_t sn[2] = {1, 2};
    REQUIRE(np2e_init(&h, c, 8, sn, "NP2014", np2_units(6), 1) == 0);
    CHECK(np2e_streaming(&h, 0) && np2e_streaming(&h, 1)); /* record=1: set up as the software leaves it */
    /* the same generator as probe B's, to compare with */
    REQUIRE(neural_init(&ref, c, 8, 1, NP2E_CH, NP2E_HZ, 0, 4095, 2048, np2_units(6)) == 0);
    uint8_t out[NP2E_PAYLOAD];
    uint16_t want[NP2E_CH], got[NP2E_CH], probe;
    uint64_t clk;
    int diff = 0;
    for (int s = 0; s < 300; s++) {
        uint64_t t = (uint64_t)s * (EMU_ACQ_HZ / NP2E_HZ);
        np2e_fill(&h, 1, out, 1000 + (uint64_t)s, t);
        neural_sample(&ref, want, t);
        decode_onix_source(out, &probe, &clk, got);
        CHECK_EQ(probe, 1);
        CHECK_EQ(clk, 1000 + (uint64_t)s);
        diff += memcmp(want, got, sizeof got) != 0;
        for (int ch = 0; ch < NP2E_CH; ch++)
            CHECK(got[ch] < 4096); /* 12-bit codes */
    }
    CHECK_EQ(diff, 0);
    /* words with no sample are 0 (the four before each frame's samples, the fourth of each ADC group) */
    uint16_t w[NP2E_PAYLOAD / 2];
    memcpy(w, out, sizeof w);
    CHECK(w[5] == 0 && w[6] == 0 && w[7] == 0 && w[8] == 0 && w[5 + 7] == 0);
    neural_fini(&ref);
    np2e_fini(&h);
    emu_card_destroy(c);
}

/* Probe B's spikes are truth channels 384..767; at a truth time its channel dips. */
TEST(np2e_probe_b_truth)
{
    struct emu_card *c = any_card();
    REQUIRE(c);
    REQUIRE(emu_card_truth_keep(c, 10000) == 0);
    static struct np2e h;
    uint64_t sn[2] = {1, 2};
    REQUIRE(np2e_init(&h, c, 8, sn, "NP2014", np2_loud(8), 1) == 0);
    enum { NS = 15000 };
    static uint16_t ch[NS][NP2E_CH];
    uint8_t out[NP2E_PAYLOAD];
    uint16_t probe;
    uint64_t clk;
    const uint64_t dt = EMU_ACQ_HZ / NP2E_HZ;
    emu_card_lock(c);
    for (int s = 0; s < NS; s++) {
        np2e_fill(&h, 0, out, 0, (uint64_t)s * dt);
        np2e_fill(&h, 1, out, 0, (uint64_t)s * dt);
        decode_onix_source(out, &probe, &clk, ch[s]);
    }
    pthread_mutex_unlock(&c->lock);
    static struct emu_truth tr[10000];
    size_t n = emu_card_truth_get(c, tr, 10000), a = 0, b = 0, dips = 0;
    for (size_t i = 0; i < n; i++) {
        CHECK_EQ(tr[i].dev_idx, 8);
        if (tr[i].channel < NP2E_CH) {
            a++;
            continue;
        }
        b++;
        CHECK(tr[i].channel < 2 * NP2E_CH);
        uint64_t s = tr[i].time / dt;
        /* the trough (this sample or the next, as the channel's distance and
         * sampling slot shift it) against the channel's level 0.5 ms before:
         * 15 SD and more of 2.3 LSB, less noise, LFP and overlaps */
        uint32_t k = tr[i].channel - NP2E_CH;
        if (s >= 15 && s + 1 < NS) {
            int v = ch[s][k] < ch[s + 1][k] ? ch[s][k] : ch[s + 1][k];
            dips += v - ch[s - 15][k] < -17;
        }
    }
    CHECK(a > 5 && b > 5);
    CHECK(dips * 10 >= b * 9);
    np2e_fini(&h);
    emu_card_destroy(c);
}

/* --- NP2.0e as a breakout port sees it (headstage.h) ----------------------------- */

static struct emu_args args_of(const char *const *kv)
{
    struct emu_args a;
    memset(&a, 0, sizeof a);
    for (; kv[0]; kv += 2, a.n++) {
        snprintf(a.kv[a.n].key, sizeof a.kv[a.n].key, "%s", kv[0]);
        snprintf(a.kv[a.n].val, sizeof a.kv[a.n].val, "%s", kv[1]);
    }
    return a;
}

TEST(np2e_ops_arguments_and_streams)
{
    const struct emu_hs_ops *o = &emu_hs_np2e;
    CHECK(strcmp(o->name, "np2e") == 0);
    CHECK_EQ(o->hs_id, ONIX_HUB_HSNP2E);
    CHECK_EQ(o->nstreams, 2);
    CHECK_EQ(o->read_size, 1162);
    CHECK_EQ(o->rate_mhz, 30000000);
    CHECK(o->lock_min_dv <= 33 && o->lock_max_dv >= 43); /* Bonsai's search: 3.3 V, then +1.0 V */
    struct emu_card *c = any_card();
    REQUIRE(c);
    char err[200] = "";
    void *priv = NULL;
    static const char *const bad[] = {"pn", "NP2014-WITH-A-VERY-LONG-NAME", NULL};
    struct emu_args a = args_of(bad);
    CHECK_RC(o->init(&priv, c, 8, &a, err, sizeof err), ONI_EINVALARG);
    CHECK(strstr(err, "pn=") != NULL);
    o->fini(priv);
    priv = NULL;
    static const char *const units[] = {"units", "5000", NULL};
    a = args_of(units);
    CHECK_RC(o->init(&priv, c, 8, &a, err, sizeof err), ONI_EINVALARG);
    o->fini(priv);
    priv = NULL;
    static const char *const one[] = {"sn_b", "0", "sn_a", "777", "record", "1", NULL};
    a = args_of(one);
    REQUIRE(o->init(&priv, c, 8, &a, err, sizeof err) == 0);
    for (int i = 0; i < a.n; i++)
        CHECK(a.kv[i].used);
    CHECK(o->streaming(priv, 0));
    CHECK(!o->streaming(priv, 1)); /* no probe B */
    uint32_t v;
    CHECK(o->i2c_write(priv, HS_I2C_SER, SER_GPIO32, 1, 0, 0x19));
    CHECK(o->i2c_read(priv, HS_I2C_FLEX, 0, 4, 0, &v));
    CHECK_EQ(v, 777);
    CHECK(o->i2c_read(priv, HS_I2C_EEPROM, 18, 4, 1, &v));
    CHECK_EQ(v, ONIX_HUB_HSNP2E);
    emu_card_lock(c);
    CHECK(o->i2c_read(priv, HS_I2C_BNO055, 0, 1, 0, &v)); /* reads the card's clock: lock held */
    pthread_mutex_unlock(&c->lock);
    CHECK_EQ(v, 0xA0);
    /* power cycle: back to the power-on state (record=1: recording again) */
    CHECK(o->i2c_write(priv, HS_I2C_PROBE, NP2_OP_MODE, 1, 0, NP2_OP_POWERDOWN));
    CHECK(!o->streaming(priv, 0));
    o->power(priv, 0);
    o->power(priv, 1);
    CHECK(o->streaming(priv, 0));
    uint8_t out[1162];
    o->fill(priv, 0, out, 12345, 0);
    uint64_t clk;
    memcpy(&clk, out, 8);
    CHECK_EQ(clk, 12345);
    o->fini(priv);
    emu_card_destroy(c);
}

TEST(hs64_ops_lists_bonsais_devices)
{
    const struct emu_hs_ops *o = &emu_hs_hs64;
    /* ConfigureHeadstage64.cs:106-112 */
    static const uint32_t want[] = {ONIX_RHD2164, ONIX_BNO055, ONIX_TS4231V1ARR, ONIX_ESTIM, ONIX_OSTIM};
    int n = 0;
    for (; o->hub_devices[n]; n++) {
        REQUIRE(n < 5);
        CHECK_EQ(o->hub_devices[n]->id, want[n]);
        CHECK_EQ(o->hub_devices[n]->hub_kind, ONIX_HUB_HS64);
    }
    CHECK_EQ(n, 5);
    CHECK_EQ(o->hs_id, ONIX_HUB_HS64);
    CHECK(o->lock_min_dv <= 33 && o->lock_max_dv >= 65); /* Bonsai ramps down from 6.5 V */
    CHECK_EQ(o->nstreams, 0);
}

/* --- NP1.0e ------------------------------------------------------------------------- */

static int np1_w(struct np1e *h, uint32_t reg, uint32_t v) { return np1e_i2c_write(h, HS_I2C_NP1_PROBE, reg, 1, v); }

TEST(np1e_configured_as_bonsai_does)
{
    struct emu_card *c = any_card();
    REQUIRE(c);
    static struct np1e h;
    REQUIRE(np1e_init(&h, c, 9, 18005106123ull, "PRB_1_4_0480_1", np1_units(4), 0) == 0);
    uint32_t v;
    /* EEPROM id 6 (ConfigureHeadstageNeuropixelsV1e.cs:120), at 18 as onix-source reads it */
    CHECK(np1e_i2c_read(&h, HS_I2C_EEPROM, 18, 4, 0, &v));
    CHECK_EQ(v, ONIX_HUB_HSNP1ET);
    /* flex metadata (NeuropixelsV1eMetadata.cs:6-21) */
    uint64_t sn = 0;
    for (uint32_t i = 0; i < 8; i++) {
        REQUIRE(np1e_i2c_read(&h, HS_I2C_FLEX, i, 1, 0, &v));
        sn |= (uint64_t)v << (8 * i);
    }
    CHECK_EQ(sn, 18005106123ull);
    char pn[21] = {0};
    for (uint32_t i = 0; i < 20; i++) {
        REQUIRE(np1e_i2c_read(&h, HS_I2C_FLEX, 40 + i, 1, 0, &v));
        pn[i] = (char)v;
    }
    CHECK(strcmp(pn, "PRB_1_4_0480_1") == 0);
    /* serializer defaults, then the MUX reset pulse (:175-177, :216-223) */
    CHECK(np1e_i2c_write(&h, HS_I2C_SER, SER_GPIO10, 1, 0x11));
    CHECK(np1e_i2c_write(&h, HS_I2C_SER, SER_GPIO32, 1, 0x91));
    CHECK(np1e_i2c_read(&h, HS_I2C_SER, SER_GPIO32, 1, 0, &v));
    CHECK(np1e_i2c_write(&h, HS_I2C_SER, SER_GPIO32, 1, v & ~0x80u)); /* LED on */
    CHECK(np1e_i2c_read(&h, HS_I2C_SER, SER_GPIO10, 1, 0, &v));
    CHECK(np1e_i2c_write(&h, HS_I2C_SER, SER_GPIO10, 1, v & ~0x08u));
    CHECK(np1e_i2c_write(&h, HS_I2C_SER, SER_GPIO10, 1, v | 0x08u));
    /* NeuropixelsV1RegisterContext.cs:76-144 */
    CHECK(np1_w(&h, 0x02, 0));
    for (uint32_t r = 0x03; r <= 0x07; r++)
        CHECK(np1_w(&h, r, 0));
    CHECK(np1_w(&h, 0x09, 0));
    CHECK(np1_w(&h, NP1_REC_MOD, NP1_REC_ACTIVE));
    CHECK(np1_w(&h, NP1_OP_MODE, NP1_OP_RECORD));
    CHECK(np1e_streaming(&h));
    CHECK(np1_w(&h, NP1_SR_LENGTH1, NP1E_SHANK_BYTES % 256));
    CHECK(np1_w(&h, NP1_SR_LENGTH2, NP1E_SHANK_BYTES / 256));
    for (int i = 0; i < NP1E_SHANK_BYTES; i++)
        CHECK(np1_w(&h, NP1_SR_CHAIN1, (uint32_t)i & 0xFF));
    for (int chain = 0; chain < 2; chain++) {
        for (int rep = 0; rep < 2; rep++) {
            CHECK(np1_w(&h, NP1_SOFT_RESET, 0xFF));
            CHECK(np1_w(&h, NP1_SOFT_RESET, 0x00));
            CHECK(np1_w(&h, NP1_SR_LENGTH1, NP1E_BASE_BYTES % 256));
            CHECK(np1_w(&h, NP1_SR_LENGTH2, NP1E_BASE_BYTES / 256));
            for (int i = 0; i < NP1E_BASE_BYTES; i++)
                CHECK(np1_w(&h, chain ? NP1_SR_CHAIN3 : NP1_SR_CHAIN2, (uint32_t)(i + chain) & 0xFF));
        }
        CHECK(np1e_i2c_read(&h, HS_I2C_NP1_PROBE, NP1_STATUS, 1, 0, &v));
        CHECK_EQ(v, NP_SR_OK); /* :131 */
    }
    CHECK_EQ(h.shank[120], 120);
    CHECK_EQ(h.base[1][305], (305 + 1) & 0xFF);
    CHECK(!np1e_streaming(&h)); /* the soft reset left the probe in reset (:140-141) */
    CHECK(np1_w(&h, NP1_OP_MODE, NP1_OP_RECORD));
    CHECK(np1_w(&h, NP1_REC_MOD, NP1_REC_ACTIVE));
    CHECK(np1e_streaming(&h));
    CHECK(np1e_i2c_write(&h, HS_I2C_SER, SER_GPIO10, 1, 0x11)); /* MUX in reset: no data */
    CHECK(!np1e_streaming(&h));
    np1e_fini(&h);
    emu_card_destroy(c);
}

/* Decode a super-frame as Bonsai does (NeuropixelsV1eDataFrame.cs:6-56): LFP
 * from frame 0, AP of frame i + 1 for ADC k at (i + 1) * 40 + adcToFrameIndex[k]. */
TEST(np1e_superframe_decodes_to_the_signal)
{
    static const int adc[32] = {1, 9, 17, 25, 33, 2, 10, 18, 26, 34, 3, 11, 19, 27, 35, 4,
                                12, 20, 28, 36, 5, 13, 21, 29, 37, 6, 14, 22, 30, 38, 7, 15};
    CHECK_EQ(np1e_channel(2, 0), 24); /* NeuropixelsV1eData.cs:86 */
    CHECK_EQ(np1e_channel(31, 11), 383);
    CHECK_EQ(np1e_channel(1, 5), 11);
    for (uint32_t k = 0; k < 32; k++)
        CHECK_EQ(np1e_word(k), (uint32_t)adc[k]);
    CHECK_EQ(NP1E_PAYLOAD, 1050);
    struct emu_card *c = any_card();
    REQUIRE(c);
    static struct np1e h;
    static struct neural ref, lref;
    REQUIRE(np1e_init(&h, c, 9, 1, "PRB_1_4_0480_1", np1_units(5), 1) == 0);
    CHECK(np1e_streaming(&h));
    REQUIRE(neural_init(&ref, c, 9, 0, 384, 30000, 0, 1023, 512, np1_units(5)) == 0);
    REQUIRE(neural_init(&lref, c, 9, 1, 384, 2500, 0, 1023, 512, np1_lfp()) == 0);
    uint8_t out[NP1E_PAYLOAD];
    uint16_t w[NP1E_PAYLOAD / 2], ap[384], lfp[384];
    int bad_ap = 0, bad_lfp = 0, bad_fc = 0;
    for (int s = 0; s < 240; s++) {
        uint64_t t = (uint64_t)s * (EMU_ACQ_HZ / 30000);
        np1e_fill(&h, out, 77, t);
        neural_sample(&ref, ap, t);
        if (s % 12 == 0)
            neural_sample(&lref, lfp, t);
        memcpy(w, out, sizeof w);
        CHECK_EQ(w[4], 0); /* probe index */
        const uint16_t *d = w + 5;
        for (int k = 0; k < 32; k++) {
            bad_lfp += d[adc[k]] != lfp[np1e_channel((uint32_t)k, (uint32_t)(s % 12))];
            for (int i = 0; i < 12; i++)
                bad_ap += d[(i + 1) * 40 + adc[k]] != ap[np1e_channel((uint32_t)k, (uint32_t)i)];
        }
        for (int f = 0; f < 13; f++)
            bad_fc += (int)((d[f * 40 + 31] << 10) | d[f * 40 + 39]) != s * 13 + f;
    }
    CHECK_EQ(bad_ap, 0);
    CHECK_EQ(bad_lfp, 0);
    CHECK_EQ(bad_fc, 0);
    neural_fini(&ref);
    neural_fini(&lref);
    np1e_fini(&h);
    emu_card_destroy(c);
}

/* NP1.0e truth: each spike's super-frame carries, in the AP band of its
 * channel, a sample far below the noise (AP SD 7 uV = 3 LSB around 512, units
 * of SNR 8 and up here); truth channels are 0..383. */
TEST(np1e_truth_in_ap_band)
{
    struct emu_card *c = any_card();
    REQUIRE(c);
    REQUIRE(emu_card_truth_keep(c, 100000) == 0);
    static struct np1e h;
    struct neural_cfg loud;
    np1e_signal(&loud);
    loud.units = 10, loud.snr_median = 12, loud.snr_min = 8;
    REQUIRE(np1e_init(&h, c, 9, 1, "PRB_1_4_0480_1", &loud, 1) == 0);
    enum { NS = 15000 }; /* 0.5 s */
    static uint16_t ap[NS][NP1E_CH];
    uint8_t out[NP1E_PAYLOAD];
    uint16_t w[NP1E_PAYLOAD / 2];
    const uint64_t dt = EMU_ACQ_HZ / NP1E_HZ;
    emu_card_lock(c);
    for (int s = 0; s < NS; s++) {
        np1e_fill(&h, out, 0, (uint64_t)s * dt);
        memcpy(w, out, sizeof w);
        for (uint32_t i = 0; i < 12; i++)
            for (uint32_t k = 0; k < 32; k++)
                ap[s][np1e_channel(k, i)] = w[5 + (i + 1) * 40 + np1e_word(k)];
    }
    pthread_mutex_unlock(&c->lock);
    static struct emu_truth tr[100000];
    size_t n = emu_card_truth_get(c, tr, 100000), checked = 0, below = 0;
    for (size_t i = 0; i < n; i++) {
        CHECK(tr[i].channel < NP1E_CH);
        CHECK_EQ(tr[i].time % dt, 0);
        uint64_t s = tr[i].time / dt;
        if (s + 1 >= NS)
            continue;
        checked++;
        /* the trough is this sample or the next (the lag with distance) */
        int v = ap[s][tr[i].channel] < ap[s + 1][tr[i].channel] ? ap[s][tr[i].channel] : ap[s + 1][tr[i].channel];
        below += v < 512 - 5 * 3;
    }
    CHECK(checked > 10 * 0.5 * 3 / 2);
    if (below < checked * 95 / 100)
        UNIT_FAIL("%zu of %zu np1e truth spikes below -5 sigma", below, checked);
    np1e_fini(&h);
    emu_card_destroy(c);
}

/* --- BNO055, polled over I2C (PolledBno055Data.cs:64-111) ---------------------------- */

TEST(bno055_polled_as_bonsai_does)
{
    static struct np2e h;
    struct emu_card *c = any_card();
    REQUIRE(c);
    uint64_t sn[2] = {1, 2};
    REQUIRE(np2e_init(&h, c, 8, sn, "NP2014", np2_units(0), 0) == 0);
    uint32_t v;
    CHECK(np2e_i2c_read(&h, HS_I2C_BNO055, 0x00, 1, 0, &v));
    CHECK_EQ(v, 0xA0); /* CHIP_ID */
    CHECK(np2e_i2c_read(&h, HS_I2C_BNO055, 0x2E + 4, 2, 0, &v));
    CHECK_EQ(v, 0); /* config mode: no fused output */
    /* ConfigurePolledBno055.cs:40-45 */
    CHECK(np2e_i2c_write(&h, HS_I2C_BNO055, 0x3E, 1, 0x00));
    CHECK(np2e_i2c_write(&h, HS_I2C_BNO055, 0x07, 1, 0x00));
    CHECK(np2e_i2c_write(&h, HS_I2C_BNO055, 0x3F, 1, 0x00));
    CHECK(np2e_i2c_write(&h, HS_I2C_BNO055, 0x41, 1, 0x09)); /* YZX */
    CHECK(np2e_i2c_write(&h, HS_I2C_BNO055, 0x42, 1, 0x06));
    CHECK(np2e_i2c_write(&h, HS_I2C_BNO055, 0x3D, 1, 0x0C)); /* NDOF */
    CHECK(np2e_i2c_read(&h, HS_I2C_BNO055, 0x41, 2, 0, &v));
    CHECK_EQ(v, 0x0609);
    CHECK(np2e_i2c_write(&h, HS_I2C_BNO055, 0x00, 1, 0x55)); /* read-only: acknowledged, unchanged */
    CHECK(np2e_i2c_read(&h, HS_I2C_BNO055, 0x00, 1, 0, &v));
    CHECK_EQ(v, 0xA0);
    /* the poll: 4 + 2 bytes per block, as PolledBno055Data.cs:75-99 reads */
    uint8_t d[2][28];
    for (int k = 0; k < 2; k++) {
        uint64_t t = (uint64_t)k * EMU_ACQ_HZ; /* 1 s apart */
        static const int at[][2] = {{0, 4}, {4, 2}, {6, 4}, {10, 4}, {14, 4}, {18, 2}, {20, 4}, {24, 2}, {26, 2}};
        for (size_t j = 0; j < sizeof at / sizeof at[0]; j++) {
            REQUIRE(np2e_i2c_read(&h, HS_I2C_BNO055, 0x1A + (uint32_t)at[j][0], (unsigned)at[j][1], t, &v));
            for (int b = 0; b < at[j][1]; b++)
                d[k][at[j][0] + b] = (uint8_t)(v >> (8 * b));
        }
    }
    int16_t g[2], head[2], qw;
    memcpy(&g[0], d[0] + 24, 2);
    memcpy(&head[0], d[0], 2);
    memcpy(&head[1], d[1], 2);
    memcpy(&qw, d[0] + 6, 2);
    CHECK_EQ(g[0], 981);            /* gravity z, 1/100 m/s^2 */
    CHECK_EQ(qw, 16384);            /* unit quaternion at heading 0 */
    CHECK_EQ(head[1] - head[0], 36 * 16); /* 36 deg/s, 1/16 deg */
    CHECK_EQ(d[0][27], 0xFF);       /* calibrated */
    np2e_fini(&h);
    emu_card_destroy(c);
}

/* --- the 64-channel headstage's devices -------------------------------------------- */

TEST(rhd2164_registers_and_enable)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;seed=2;devices=rhd2164,bno055");
    REQUIRE(c);
    oni_device_t t[8];
    int n = table_read(c, t, 8);
    uint32_t rhd = find_id(t, n, ONIX_RHD2164), bno = find_id(t, n, ONIX_BNO055);
    REQUIRE(rhd != UINT32_MAX && bno != UINT32_MAX);
    uint32_t v = 0;
    /* read-only identification (Rhd2000.cs:32-35; RHD2000 data sheet registers 40-44, 60-63) */
    CHECK_RC(reg_get(c, rhd, 0x3F, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 4);
    CHECK_RC(reg_get(c, rhd, 0x3E, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 64);
    char intan[6] = {0};
    for (int i = 0; i < 5; i++) {
        CHECK_RC(reg_get(c, rhd, 0x28 + (uint32_t)i, &v), ONI_SIG_CONFIGRACK);
        intan[i] = (char)v;
    }
    CHECK(strcmp(intan, "INTAN") == 0);
    CHECK_RC(reg_set(c, rhd, 0x3F, 1), ONI_SIG_CONFIGWNACK);
    /* ConfigureRhd2164.cs:41-78: FORMAT and BW0..BW5 read, modified, written back; then ENABLE */
    CHECK_RC(reg_get(c, rhd, 0x04, &v), ONI_SIG_CONFIGRACK);
    CHECK_RC(reg_set(c, rhd, 0x04, v & ~(1u << 6)), ONI_SIG_CONFIGWACK);
    for (uint32_t r = 0x08; r <= 0x0d; r++) {
        CHECK_RC(reg_get(c, rhd, r, &v), ONI_SIG_CONFIGRACK);
        CHECK_RC(reg_set(c, rhd, r, v), ONI_SIG_CONFIGWACK);
    }
    CHECK_RC(reg_set(c, rhd, 0x08, 0x100), ONI_SIG_CONFIGWNACK); /* 8-bit registers */
    CHECK_RC(reg_set(c, rhd, 0x8000, 1), ONI_SIG_CONFIGWACK);    /* Rhd2164.ENABLE, :95 */
    CHECK_RC(reg_get(c, rhd, 0x8000, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 1);
    CHECK_RC(reg_set(c, rhd, 0x8000, 2), ONI_SIG_CONFIGWNACK);
    emu_card_destroy(c);
}

/* Payloads: [u64 hub clock] first (Rhd2000DataFrame.cs:64-69, Bno055DataFrame.cs
 * Bno055Payload), the hub clock that of the frame's time on the hub's clock. */
TEST(hs64_payloads_start_with_the_hub_clock)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;seed=2;devices=rhd2164,bno055");
    REQUIRE(c);
    oni_device_t t[8];
    int n = table_read(c, t, 8);
    uint32_t rhd = find_id(t, n, ONIX_RHD2164), bno = find_id(t, n, ONIX_BNO055);
    REQUIRE(rhd != UINT32_MAX && bno != UINT32_MAX);
    for (int i = 0; i < n; i++) {
        if (t[i].idx == rhd)
            CHECK_EQ(t[i].read_size, 8 + 64 * 2 + 3 * 2);
        if (t[i].idx == bno)
            CHECK_EQ(t[i].read_size, 8 + 28);
    }
    uint32_t hz = 0;
    CHECK_RC(reg_get(c, (rhd & ~0xFFu) | ONIX_HUB_DEV_IDX, ONIX_HUB_CLKRATEHZ, &hz), ONI_SIG_CONFIGRACK);
    REQUIRE(hz > 0);
    card_start(c);
    static struct frame f;
    int nr = 0, nb = 0;
    uint64_t last = 0;
    while (nr < 3000 || nb < 2) {
        REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, TMO) == 0);
        uint64_t clk;
        memcpy(&clk, f.data, 8);
        if (f.dev == rhd || f.dev == bno)
            CHECK_EQ(clk, (uint64_t)((unsigned __int128)f.time * hz / EMU_ACQ_HZ));
        if (f.dev == rhd) {
            CHECK(nr == 0 || clk > last);
            last = clk;
            nr++;
        } else if (f.dev == bno) {
            int16_t g;
            memcpy(&g, f.data + 8 + 24, 2);
            CHECK_EQ(g, 981);
            nb++;
        }
    }
    /* ENABLE 0x8000 = 0: the RHD2164 stops sending (ConfigureRhd2164.cs:78) */
    CHECK_RC(reg_set(c, rhd, 0x8000, 0), ONI_SIG_CONFIGWACK);
    uint64_t f1, f2, x;
    REQUIRE(emu_card_dev_counts(c, rhd, &f1, &x, &x) == 0);
    for (int i = 0; i < 20; i++)
        REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, TMO) == 0);
    REQUIRE(emu_card_dev_counts(c, rhd, &f2, &x, &x) == 0);
    CHECK_EQ(f2, f1);
    CHECK(f1 >= 3000);
    emu_card_destroy(c);
}

/* BNO055 fusion frames: the head turns at 36 deg/s, so frame k (100 Hz)
 * has heading 0.36 k deg in 1/16 deg and the quaternion of that turn about
 * the vertical (w = cos(h/2), z = sin(h/2), 1 = 2^14); gravity 9.81 m/s^2
 * on z, 25 C and every calibration status bit set (Bno055DataFrame.cs). */
TEST(bno055_frame_fields)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=bno055,memusage:enable=0");
    REQUIRE(c);
    oni_device_t t[8];
    int n = table_read(c, t, 8);
    uint32_t bno = find_id(t, n, ONIX_BNO055);
    card_start(c);
    static struct frame f;
    for (int k = 0; k <= 100;) {
        REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, TMO) == 0);
        if (f.dev != bno)
            continue;
        CHECK_EQ(f.sz, 36);
        int16_t v[13];
        memcpy(v, f.data + 8, sizeof v);
        double h = 0.36 * k, half = h * M_PI / 360;
        CHECK(abs(v[0] - (int)lrint(h * 16)) <= 1);
        CHECK(abs(v[3] - (int)lrint(cos(half) * 16384)) <= 1);
        CHECK(abs(v[6] - (int)lrint(sin(half) * 16384)) <= 1);
        CHECK_EQ(v[12], 981);
        CHECK_EQ((int8_t)f.data[8 + 26], 25);
        CHECK_EQ(f.data[8 + 27], 0xFF);
        k++;
    }
    emu_card_destroy(c);
}

/* Run a stimulator device type on its own (its registers need no table). */
static struct emu_dev stim_dev(struct emu_card *c, const struct emu_devtype *type)
{
    struct emu_dev d;
    memset(&d, 0, sizeof d);
    d.type = type;
    d.card = c;
    struct emu_args a = {0};
    char err[80];
    CHECK_EQ(type->init(&d, &a, err, sizeof err), 0);
    return d;
}

/* Bonsai: ConfigureHeadstage64ElectricalStimulator.cs:162-187, Headstage64ElectricalStimulatorTrigger.cs:27 */
TEST(estim_programmed_and_triggered_as_bonsai_does)
{
    struct emu_card *c = any_card();
    REQUIRE(c);
    struct emu_dev d = stim_dev(c, &emu_dev_estim);
    REQUIRE(d.priv);
    struct hs64_stim *s = d.priv;
    uint32_t v;
    CHECK(d.type->reg_read(&d, 17, &v) && v == 16); /* REZ */
    CHECK(!d.type->reg_write(&d, 17, 12));
    uint32_t code = (uint32_t)((65535 / 5000.0) * (100 + 2500)); /* MicroampsToCode(100), :222-226 */
    CHECK(d.type->reg_write(&d, 2, code));
    CHECK(d.type->reg_write(&d, 3, 65535 - code));
    CHECK(d.type->reg_write(&d, 15, 32767));
    CHECK(!d.type->reg_write(&d, 2, 70000)); /* not a 16-bit code */
    CHECK(d.type->reg_write(&d, 11, 1000)); /* TRAINDELAY 1 ms */
    CHECK(d.type->reg_write(&d, 4, 200));   /* 200 us phases, 50 us between, 800 us between pulses */
    CHECK(d.type->reg_write(&d, 5, 50));
    CHECK(d.type->reg_write(&d, 6, 200));
    CHECK(d.type->reg_write(&d, 7, 800));
    CHECK(d.type->reg_write(&d, 8, 3));     /* 3 pulses a burst */
    CHECK(d.type->reg_write(&d, 9, 10000));
    CHECK(d.type->reg_write(&d, 10, 2));    /* 2 bursts */
    emu_card_lock(c);
    CHECK(d.type->reg_write(&d, 12, 1));    /* not armed: ignored */
    CHECK_EQ(s->ignored, 1);
    CHECK_EQ(s->triggers, 0);
    CHECK(d.type->reg_write(&d, 14, 1));    /* arm: ENABLE, POWERON */
    CHECK(d.type->reg_write(&d, 13, 1));
    CHECK(d.type->reg_write(&d, 12, 1));
    pthread_mutex_unlock(&c->lock);
    CHECK_EQ(s->triggers, 1);
    const uint64_t us = EMU_ACQ_HZ / 1000000;
    CHECK_EQ(s->start - s->trigger, 1000 * us);
    /* burst: 3 x 450 + 2 x 800 = 2950 us; train: 2 bursts + 10000 us */
    CHECK_EQ(s->end - s->start, (2 * 2950 + 10000) * us);
    CHECK(d.type->reg_write(&d, 16, 1)); /* RESET: defaults back */
    CHECK(d.type->reg_read(&d, 8, &v) && v == 1);
    CHECK(d.type->reg_read(&d, 2, &v) && v == 32767);
    CHECK(!d.type->reg_read(&d, 18, &v));
    d.type->fini(&d);
    emu_card_destroy(c);
}

/* Bonsai: ConfigureHeadstage64OpticalStimulator.cs:199-232, Headstage64OpticalStimulatorTrigger.cs:26 */
TEST(ostim_programmed_and_triggered_as_bonsai_does)
{
    struct emu_card *c = any_card();
    REQUIRE(c);
    struct emu_dev d = stim_dev(c, &emu_dev_ostim);
    REQUIRE(d.priv);
    struct hs64_stim *s = d.priv;
    uint32_t v;
    CHECK(d.type->reg_read(&d, 13, &v) && v == 590);    /* MINRHEOR, :242 */
    CHECK(d.type->reg_read(&d, 14, &v) && v == 100000); /* POTRES, :243 */
    CHECK(!d.type->reg_write(&d, 14, 1));
    CHECK(d.type->reg_write(&d, 1, 100));   /* MAXCURRENT pot setting */
    CHECK(!d.type->reg_write(&d, 1, 256));
    CHECK(d.type->reg_write(&d, 2, 0x0F));  /* PULSEMASK */
    CHECK(d.type->reg_write(&d, 3, 5000));  /* 5 ms pulses at 20 Hz */
    CHECK(d.type->reg_write(&d, 4, 50000));
    CHECK(d.type->reg_write(&d, 5, 4));     /* 4 pulses, 1 burst */
    CHECK(d.type->reg_write(&d, 7, 1));
    CHECK(d.type->reg_write(&d, 8, 0));
    emu_card_lock(c);
    CHECK(d.type->reg_write(&d, 10, 1));    /* ENABLE */
    CHECK(d.type->reg_write(&d, 9, 1));     /* TRIGGER */
    CHECK(d.type->reg_write(&d, 10, 0));
    CHECK(d.type->reg_write(&d, 9, 1));     /* disabled: ignored */
    pthread_mutex_unlock(&c->lock);
    CHECK_EQ(s->triggers, 1);
    CHECK_EQ(s->ignored, 1);
    const uint64_t us = EMU_ACQ_HZ / 1000000;
    CHECK_EQ(s->start, s->trigger);
    CHECK_EQ(s->end - s->start, (3 * 50000 + 5000) * us);
    d.type->fini(&d);
    emu_card_destroy(c);
}
