/* test_emu_devices.c - the emulated devices (src/emu/devices, docs/devices.md):
 * their frames and registers, the synthetic neural signal and its ground
 * truth. */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>
#include "emu/neural.h"
#include "test_emu_util.h"
#include "unit.h"

/* --- the neural signal and its ground truth ---------------------------------- */

static int cmp_u16(const void *a, const void *b) { return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b; }

/* Ground-truth spikes are in the signal: at each truth time the unit's
 * channel lies far below a robust noise threshold; the truth file gets the
 * same spikes. */
TEST(emu_ground_truth_in_signal)
{
    char path[] = "/tmp/onigpu-emu-truth-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    unlink(path);
    /* the channel's own noise only (no LFP, offsets, common-mode, hum or
     * artefacts), units of SNR 6 and up firing ~10 Hz */
    struct emu_card *c = card_open("mode=fast;link=unlimited;seed=5;devices=rhd2164:units=12:lfp=0:offset=0:cm=0:"
                                   "line=0:artefacts=0:snr=10:snr_sigma=0.2:snr_min=6:rate=10:burst=0");
    REQUIRE(c);
    CHECK_RC(emu_card_set_truth_file(c, "/dev/null/x.csv"), ONI_EPATHINVALID); /* never a directory */
    CHECK_RC(emu_card_set_truth_file(c, path), 0);
    REQUIRE(emu_card_truth_keep(c, 100000) == 0);
    oni_device_t t[4];
    int n = table_read(c, t, 4);
    uint32_t rhd = find_id(t, n, ONIX_RHD2164);
    card_start(c);
    enum { NF = 15000, CH = 64 }; /* 0.5 s */
    uint16_t *s = malloc((size_t)NF * CH * 2);
    uint64_t *times = malloc(NF * sizeof *times);
    REQUIRE(s && times);
    static struct frame f;
    int k = 0;
    while (k < NF) {
        REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, TMO) == 0);
        if (f.dev != rhd)
            continue;
        times[k] = f.time;
        memcpy(s + (size_t)k * CH, f.data + 8, CH * 2);
        k++;
    }
    size_t nt = emu_card_truth_get(c, NULL, 0);
    struct emu_truth *tr = malloc((nt + 1) * sizeof *tr);
    REQUIRE(tr);
    nt = emu_card_truth_get(c, tr, nt);
    CHECK(nt > 20); /* 12 units at ~10 Hz (lognormal) for 0.5 s */
    /* robust noise of a channel: median absolute deviation around 32768 */
    uint16_t *dev = malloc(NF * sizeof *dev);
    REQUIRE(dev);
    for (int i = 0; i < NF; i++) {
        int v = s[(size_t)i * CH + 40] - 32768;
        dev[i] = (uint16_t)(v < 0 ? -v : v);
    }
    qsort(dev, NF, sizeof *dev, cmp_u16);
    double sigma = dev[NF / 2] / 0.6745;
    /* the noise: 7 uV rms in 300 Hz - 10 kHz = 35.9 LSB of 0.195 uV, and the
     * 1/f part below 300 Hz on top (neural.c): the whole SD a little more */
    const double ap_lsb = 7.0 / 0.195;
    if (!(sigma > ap_lsb * 0.95 && sigma < ap_lsb * 1.4))
        UNIT_FAIL("noise SD %.2f LSB, want %.1f .. %.1f", sigma, ap_lsb * 0.95, ap_lsb * 1.4);
    /* each channel's noise is its own: channels 40 and 10 are the same in a
     * few samples, not in all */
    int same = 0;
    for (int i = 0; i < NF; i++)
        same += s[(size_t)i * CH + 40] == s[(size_t)i * CH + 10];
    CHECK(same < NF / 4);
    size_t checked = 0, below = 0, snr_ok = 0;
    for (size_t i = 0; i < nt; i++) {
        if (tr[i].dev_idx != rhd || tr[i].time > times[NF - 1])
            continue;
        int lo = 0, hi = NF - 1;
        while (lo < hi) { /* frame with this time */
            int mid = (lo + hi) / 2;
            if (times[mid] < tr[i].time)
                lo = mid + 1;
            else
                hi = mid;
        }
        REQUIRE(times[lo] == tr[i].time);
        if (lo + 1 >= NF)
            continue;
        checked++;
        /* the trough: this sample or the next (it lags with the distance) */
        int v = s[(size_t)lo * CH + tr[i].channel] - 32768, v1 = s[(size_t)(lo + 1) * CH + tr[i].channel] - 32768;
        v = v1 < v ? v1 : v;
        below += v < -3 * sigma;
        /* the truth's SNR is the trough's depth over the AP-band noise: the
         * sample less one noise sample (|x| < 4 SD but for overlaps) */
        snr_ok += tr[i].snr >= 6 * 0.85 * 0.85 && fabs(-v / ap_lsb - tr[i].snr) < 4;
    }
    CHECK(checked > 0);
    if (snr_ok < checked * 95 / 100)
        UNIT_FAIL("%zu of %zu truth spikes have a trough of their SNR", snr_ok, checked);
    if (below < checked * 90 / 100)
        UNIT_FAIL("%zu of %zu truth spikes below -3 sigma (%.1f LSB)", below, checked, sigma);
    CHECK_RC(emu_card_write_config(c, ONI_CONFIG_RUNNING, 0), 0); /* flushes the truth file */
    FILE *fp = fopen(path, "r");
    REQUIRE(fp);
    char line[128];
    size_t lines = 0;
    CHECK(fgets(line, sizeof line, fp) && !strcmp(line, "dev_idx,unit,channel,sample_time,snr\n"));
    while (fgets(line, sizeof line, fp)) {
        unsigned d, u, ch;
        unsigned long long tt;
        float snr;
        if (sscanf(line, "%u,%u,%u,%llu,%f", &d, &u, &ch, &tt, &snr) == 5 && lines < nt && tr[lines].time == tt &&
            tr[lines].channel == ch && tr[lines].unit == u && fabs(snr - tr[lines].snr) < 0.006)
            lines++;
    }
    fclose(fp);
    CHECK_EQ(lines, emu_card_truth_get(c, NULL, 0));
    CHECK_RC(emu_card_set_truth_file(c, NULL), 0);
    unlink(path);
    free(s), free(times), free(tr), free(dev);
    emu_card_destroy(c);
}

/* The same seed gives the same data; another seed other data (a generator
 * that ignored the seed, or made a constant, passed the first check alone). */
TEST(emu_neural_data_reproducible)
{
    static const int seeds[3] = {9, 9, 10};
    uint8_t d[3][4096];
    for (int r = 0; r < 3; r++) {
        char spec[96];
        snprintf(spec, sizeof spec, "mode=fast;link=unlimited;seed=%d;devices=rhd2164", seeds[r]);
        struct emu_card *c = card_open(spec);
        REQUIRE(c);
        card_start(c);
        CHECK_RC(emu_card_read(c, EMU_STREAM_DATA, d[r], 4096, TMO), 4096);
        emu_card_destroy(c);
    }
    CHECK(!memcmp(d[0], d[1], sizeof d[0]));
    CHECK(memcmp(d[0], d[2], sizeof d[0]) != 0);
}

/* The next frame of device dev on the default stream (others skipped). */
static int dev_frame(struct emu_card *c, uint32_t dev, struct frame *f)
{
    for (int i = 0; i < 100000; i++) {
        int rc = frame_read(c, EMU_STREAM_DATA, f, TMO);
        if (rc || f->dev == dev)
            return rc;
    }
    return ONI_ETIMEOUT;
}

/* The units in the ground truth (neural.h): each fires again at least the
 * 2 ms refractory period after its previous spike, and 64 units at 3-20 Hz
 * give 96 .. 1280 spikes in 1 s of rhd2164 (30000 frames). */
TEST(emu_units_fire_at_their_rates_after_a_refractory_period)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;seed=11;devices=rhd2164:units=64");
    REQUIRE(c);
    REQUIRE(emu_card_truth_keep(c, 100000) == 0);
    oni_device_t t[4];
    int n = table_read(c, t, 4);
    uint32_t rhd = find_id(t, n, ONIX_RHD2164);
    card_start(c);
    static struct frame f;
    for (int k = 0; k < 30000; k++)
        REQUIRE(dev_frame(c, rhd, &f) == 0);
    size_t nt = emu_card_truth_get(c, NULL, 0);
    struct emu_truth *tr = malloc((nt + 1) * sizeof *tr);
    REQUIRE(tr);
    nt = emu_card_truth_get(c, tr, nt);
    uint64_t last[NEURAL_MAX_UNITS] = {0}, min_gap = UINT64_MAX;
    int seen[NEURAL_MAX_UNITS] = {0};
    for (size_t i = 0; i < nt; i++) {
        uint32_t u = tr[i].unit;
        REQUIRE(u < NEURAL_MAX_UNITS);
        if (seen[u] && tr[i].time - last[u] < min_gap)
            min_gap = tr[i].time - last[u];
        seen[u] = 1;
        last[u] = tr[i].time;
    }
    /* 2 ms of the acquisition clock, less a sample's rounding */
    if (min_gap < EMU_ACQ_HZ * 19 / 10000)
        UNIT_FAIL("a unit fired again after %.3f ms", min_gap * 1e3 / EMU_ACQ_HZ);
    if (nt < 64 * 3 / 2 || nt > 64 * 20)
        UNIT_FAIL("%zu spikes of 64 units in 1 s, want 96 .. 1280", nt);
    free(tr);
    emu_card_destroy(c);
}

/* RESET stops acquisition, and like RUNNING = 0 flushes the truth file. */
TEST(emu_reset_flushes_the_truth_file)
{
    char path[] = "/tmp/onigpu-emu-truth-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=rhd2164:units=64");
    REQUIRE(c);
    REQUIRE(emu_card_truth_keep(c, 1 << 20) == 0);
    REQUIRE(emu_card_set_truth_file(c, path) == 0);
    card_start(c);
    static uint8_t buf[1 << 20];
    for (int i = 0; i < 8; i++)
        REQUIRE(emu_card_read(c, EMU_STREAM_DATA, buf, sizeof buf, TMO) == (int)sizeof buf);
    CHECK_RC(emu_card_write_config(c, ONI_CONFIG_RESET, 1), 0);
    size_t spikes = emu_card_truth_get(c, NULL, 0), lines = 0;
    FILE *fp = fopen(path, "r");
    REQUIRE(fp);
    for (int ch; (ch = fgetc(fp)) != EOF;)
        lines += ch == '\n';
    fclose(fp);
    CHECK(spikes > 0);
    CHECK_EQ(lines, spikes + 1); /* a header line */
    emu_card_destroy(c);
    unlink(path);
}

/* --- frames and registers of each device ------------------------------------- */

/* heartbeat: 100 Hz by default; its payload is its hub's clock, which on a
 * headstage hub (HS64, 42 MHz) counts 42/250 of the 250 MHz frame time. */
TEST(emu_heartbeat_default_rate_and_hub_clock)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=rhd2164,heartbeat:hub=1,memusage:enable=0");
    REQUIRE(c);
    oni_device_t t[8];
    int n = table_read(c, t, 8);
    uint32_t hb = find_id(t, n, ONIX_HEARTBEAT), v = 0;
    CHECK_EQ(hb >> 8, 1);
    CHECK_EQ(reg_get(c, hb, EMU_REG_RATE_HZ, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 100);
    CHECK_EQ(reg_get(c, hb, ONIX_HEARTBEAT_CLK_HZ, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 42000000);
    card_start(c);
    static struct frame f;
    for (int k = 0; k < 3; k++) {
        REQUIRE(dev_frame(c, hb, &f) == 0);
        uint64_t clock;
        memcpy(&clock, f.data, 8);
        CHECK_EQ(clock, f.time * 42 / 250);
    }
    CHECK(f.time > 0);
    emu_card_destroy(c);
}

/* digitalio (breakout:loopback=1): output writes as Bonsai's DigitalOutput
 * makes them (one u32) come back on the inputs; in asynchronous mode
 * (SAMPLE_PERIOD 0) each change is one 12-byte input frame [u64 hub clock]
 * [u8 pins][u8 0][u16 buttons] whose hub clock is the write's arrival; a
 * write that changes nothing gives no frame; SAMPLE_PERIOD p gives a frame
 * every p + 2 ticks of BASE_FREQ_HZ. Without loopback the inputs stay 0. */
TEST(emu_digitalio_loopback_and_sampling)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=breakout:loopback=1,heartbeat:hz=10000");
    REQUIRE(c);
    oni_device_t t[32];
    int n = table_read(c, t, 32);
    uint32_t dio = find_id(t, n, ONIX_BREAKDIG1R3), hb = find_id(t, n, ONIX_HEARTBEAT), v = 0;
    CHECK_EQ(dio, 7);
    CHECK_EQ(reg_get(c, dio, 5, &v), ONI_SIG_CONFIGRACK); /* BASE_FREQ_HZ */
    CHECK_EQ(v, 250000000);
    card_start(c);
    static struct frame f;
    for (int k = 0; k < 5; k++) /* 0.5 ms of acquisition */
        REQUIRE(dev_frame(c, hb, &f) == 0);
    uint32_t pins[3] = {0x1A5, 0x1A5, 0x03};
    uint64_t seen[2];
    int got = 0;
    for (int w = 0; w < 3; w++)
        CHECK_RC(card_write_frame(c, EMU_STREAM_WRITE, dio, &pins[w], 1), 12);
    while (got < 2) {
        REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, TMO) == 0);
        if (f.dev != dio)
            continue;
        uint64_t clock;
        memcpy(&clock, f.data, 8);
        CHECK_EQ(f.sz, 12);
        CHECK_EQ(clock, f.time); /* the host hub's clock is the acquisition clock */
        CHECK_EQ(f.data[8], got ? 0x03 : 0xA5);
        CHECK_EQ(f.data[9], 0);
        CHECK_EQ(f.data[10] | f.data[11], 0);
        seen[got++] = clock;
    }
    CHECK(seen[0] > 0 && seen[1] >= seen[0]);
    for (int k = 0; k < 20; k++) { /* the unchanged second write made none */
        REQUIRE(frame_read(c, EMU_STREAM_DATA, &f, TMO) == 0);
        CHECK(f.dev != dio);
    }
    CHECK_EQ(reg_set(c, dio, 7, 2498), ONI_SIG_CONFIGWACK); /* 250 MHz / (2498 + 2) = 100 kHz */
    uint64_t last = 0;
    for (int k = 0; k < 4; k++) {
        REQUIRE(dev_frame(c, dio, &f) == 0);
        CHECK_EQ(f.data[8], 0x03);
        if (k)
            CHECK_EQ(f.time - last, 2500);
        last = f.time;
    }
    emu_card_destroy(c);
    REQUIRE((c = card_open("mode=fast;link=unlimited;devices=breakout")));
    n = table_read(c, t, 32);
    card_start(c);
    CHECK_RC(card_write_frame(c, EMU_STREAM_WRITE, 7, &pins[2], 1), 12);
    CHECK_EQ(reg_set(c, 7, 7, 2498), ONI_SIG_CONFIGWACK);
    REQUIRE(dev_frame(c, 7, &f) == 0);
    CHECK_EQ(f.data[8], 0); /* no wire: the inputs stay low */
    emu_card_destroy(c);
    struct emu_card *bad = NULL;
    char err[200];
    CHECK_RC(emu_card_create("devices=breakout:loopback=2", &bad, err, sizeof err), ONI_EINVALARG);
    CHECK_RC(emu_card_create("devices=breakout:hz=7", &bad, err, sizeof err), ONI_EINVALARG);
    CHECK(strstr(err, "hz") != NULL);
}

/* stim: ECHO takes only 0 and 1; LAST_TAG and LAST_TIME are read-only;
 * LAST_TIME's two halves are the echo's receipt time. */
TEST(emu_stim_registers)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=stim,heartbeat:hz=1000,memusage:enable=0");
    REQUIRE(c);
    oni_device_t t[8];
    int n = table_read(c, t, 8);
    uint32_t stim = find_id(t, n, ONIX_ONIGPU_STIM), hb = find_id(t, n, ONIX_HEARTBEAT), v = 0;
    CHECK_EQ(reg_set(c, stim, EMU_REG_DEVICE, 2), ONI_SIG_CONFIGWNACK);
    CHECK_EQ(reg_set(c, stim, EMU_REG_DEVICE + 1, 1), ONI_SIG_CONFIGWNACK); /* values ECHO would take */
    CHECK_EQ(reg_set(c, stim, EMU_REG_DEVICE + 2, 0), ONI_SIG_CONFIGWNACK);
    CHECK_EQ(reg_get(c, stim, EMU_REG_DEVICE, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 1);
    card_start(c);
    static struct frame f;
    for (int k = 0; k < 10; k++) /* 10 ms of acquisition: past 2^16 ticks */
        REQUIRE(dev_frame(c, hb, &f) == 0);
    uint32_t w = 77, lo = 0, hi = 1;
    CHECK_RC(card_write_frame(c, EMU_STREAM_WRITE, stim, &w, 1), 12);
    REQUIRE(dev_frame(c, stim, &f) == 0);
    uint64_t rt;
    memcpy(&rt, f.data + 8, 8);
    CHECK(rt > 65536);
    CHECK_EQ(reg_get(c, stim, EMU_REG_DEVICE + 2, &lo), ONI_SIG_CONFIGRACK);
    CHECK_EQ(reg_get(c, stim, EMU_REG_DEVICE + 3, &hi), ONI_SIG_CONFIGRACK);
    CHECK_EQ(((uint64_t)hi << 32) | lo, rt);
    emu_card_destroy(c);
}

/* testcore: RATE_KBPS saturates at 2^32 - 1 for rates above that many kB/s
 * (1 MiB frames, 5 TB/s: 4.8 M frames/s, under one per tick). */
TEST(emu_testcore_rate_register_saturates)
{
    struct emu_card *c = card_open("mode=fast;devices=testcore:bytes=1048576:rate=5000000000000,memusage:enable=0");
    REQUIRE(c);
    oni_device_t t[8];
    int n = table_read(c, t, 8);
    uint32_t core = find_id(t, n, ONIX_ONIGPU_TESTCORE), v = 0;
    CHECK_EQ(reg_get(c, core, EMU_REG_DEVICE, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, UINT32_MAX);
    emu_card_destroy(c);
}

/* testsink: HASH is FNV-1a (32-bit, basis 2166136261) of the payload bytes
 * in order, NACKed without hash=1; the words-received count is 64-bit (low
 * and high registers). */
TEST(emu_testsink_hash_and_word_count)
{
    struct emu_card *c = card_open("mode=fast;devices=testsink:hash=1,testsink,memusage:enable=0");
    REQUIRE(c);
    oni_device_t t[8];
    int n = table_read(c, t, 8);
    uint32_t hashed = UINT32_MAX, plain = UINT32_MAX, v = 0;
    for (int i = 0; i < n; i++)
        if (t[i].id == ONIX_ONIGPU_TESTSINK)
            *(hashed == UINT32_MAX ? &hashed : &plain) = t[i].idx;
    REQUIRE(plain != UINT32_MAX);
    uint32_t w[60] = {0x04030201u, 0x08070605u};
    CHECK_RC(card_write_frame(c, EMU_STREAM_WRITE, hashed, w, 2), 16);
    CHECK_EQ(reg_get(c, hashed, EMU_REG_DEVICE + 2, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 671377293u); /* FNV-1a of the bytes 1..8 */
    CHECK_EQ(reg_get(c, plain, EMU_REG_DEVICE + 2, &v), ONI_SIG_CONFIGRNACK);
    uint64_t words = 0;
    while (words < 70000) {
        CHECK_RC(card_write_frame(c, EMU_STREAM_WRITE, plain, w, 60), 8 + 240);
        words += 60;
    }
    CHECK_EQ(reg_get(c, plain, EMU_REG_DEVICE, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, words);
    CHECK_EQ(reg_get(c, plain, EMU_REG_DEVICE + 1, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 0);
    emu_card_destroy(c);
}

/* loadtest (LoadTester v2): DT0H16_WORDS starts at (bytes - 16) / 2 and
 * reads back what was written at once, but the frames keep their size until
 * the next RESET; its largest value is accepted; HTOD32_WORDS is taken.
 * Frames: [u64 hub clock][u64 hub clock - last loopback value][u16 counter
 * from DTOH_START, one up per word across frames]; a write frame's first
 * 8 bytes are the loopback value. hz goes up to 2.5x10^7. */
TEST(emu_loadtest_frame_words_and_payload)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=loadtest:bytes=64:hz=25000000,memusage:enable=0");
    REQUIRE(c);
    oni_device_t t[8];
    int n = table_read(c, t, 8);
    uint32_t lt = find_id(t, n, ONIX_LOADTEST), v = 0;
    CHECK_EQ(t[0].version, 2);
    CHECK_EQ(reg_get(c, lt, ONIX_LOADTEST_FRAME_WORDS, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 24);
    CHECK_EQ(reg_get(c, lt, EMU_REG_RATE_HZ, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 25000000);
    CHECK_EQ(reg_set(c, lt, ONIX_LOADTEST_FRAME_WORDS, 524280), ONI_SIG_CONFIGWACK);
    CHECK_EQ(reg_set(c, lt, ONIX_LOADTEST_FRAME_WORDS, 524281), ONI_SIG_CONFIGWNACK);
    CHECK_EQ(reg_set(c, lt, ONIX_LOADTEST_FRAME_WORDS, 4), ONI_SIG_CONFIGWACK);
    CHECK_EQ(reg_get(c, lt, ONIX_LOADTEST_FRAME_WORDS, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 4);
    CHECK_EQ(reg_set(c, lt, 4, 3), ONI_SIG_CONFIGWACK); /* HTOD32_WORDS */
    CHECK_EQ(reg_get(c, lt, 4, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, 3);
    CHECK_EQ(reg_set(c, lt, 5, 0xFFFE), ONI_SIG_CONFIGWACK); /* DTOH_START, from the next reset */
    CHECK_EQ(reg_set(c, lt, 5, 0x10000), ONI_SIG_CONFIGWNACK);
    card_start(c);
    static struct frame f;
    uint16_t want = 0;
    for (int k = 0; k < 3; k++) {
        REQUIRE(dev_frame(c, lt, &f) == 0);
        CHECK_EQ(f.sz, 64);
        uint64_t clock, delta;
        memcpy(&clock, f.data, 8);
        memcpy(&delta, f.data + 8, 8);
        CHECK_EQ(clock, f.time);
        CHECK_EQ(delta, 0); /* nothing looped back yet */
        for (int i = 0; i < 24; i++, want++) {
            uint16_t w;
            memcpy(&w, f.data + 16 + 2 * i, 2);
            CHECK_EQ(w, want);
        }
    }
    uint64_t back = f.time;
    uint32_t wf[5] = {(uint32_t)back, (uint32_t)(back >> 32), 9, 9, 9}; /* as LoadTesterLoopback writes */
    CHECK_EQ(t[0].write_size, 8); /* HTOD32_WORDS takes effect at the next reset */
    CHECK_RC(card_write_frame(c, EMU_STREAM_WRITE, lt, wf, 5), ONI_EBADFRAME);
    CHECK_RC(card_write_frame(c, EMU_STREAM_WRITE, lt, wf, 2), 16);
    uint64_t clock = 0, delta = 0;
    for (int k = 0; k < 100000 && delta == 0; k++) { /* fast mode generated some frames ahead */
        REQUIRE(dev_frame(c, lt, &f) == 0);
        memcpy(&clock, f.data, 8);
        memcpy(&delta, f.data + 8, 8);
    }
    /* the arrival's hub clock minus the value: at most this frame's clock, and
     * the same in the frames after it until the next loopback */
    CHECK(delta > 0 && delta <= clock - back);
    uint64_t first = delta;
    REQUIRE(dev_frame(c, lt, &f) == 0);
    memcpy(&delta, f.data + 8, 8);
    CHECK_EQ(delta, first);
    n = table_read(c, t, 8);
    CHECK_EQ(t[0].read_size, 16 + 2 * 4);
    CHECK_EQ(t[0].write_size, 8 + 4 * 3); /* the loopback value and HTOD32_WORDS words */
    card_start(c);
    REQUIRE(dev_frame(c, lt, &f) == 0);
    CHECK_EQ(f.sz, 24);
    uint16_t w[4];
    memcpy(w, f.data + 16, 8);
    CHECK_EQ(w[0], 0xFFFE);
    CHECK_EQ(w[1], 0xFFFF);
    CHECK_EQ(w[2], 0);
    emu_card_destroy(c);
}

/* memusage: MEM_WORDS saturates at 2^32 - 1 (ddr=64G: 16 Gi words); hz is
 * 1..10^5; FILL_GPU_KIB and DROPPED_GPU are the GPU stream's. */
TEST(emu_memusage_registers_per_stream)
{
    struct emu_card *c = card_open("mode=fast;ddr=64G;devices=memusage");
    REQUIRE(c);
    oni_device_t t[4];
    int n = table_read(c, t, 4);
    uint32_t mu = find_id(t, n, ONIX_MEMUSAGE), v = 0;
    CHECK_EQ(reg_get(c, mu, ONIX_MEMUSAGE_MEM_WORDS, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, UINT32_MAX);
    CHECK_EQ(reg_set(c, mu, EMU_REG_RATE_HZ, 100000), ONI_SIG_CONFIGWACK);
    CHECK_EQ(reg_set(c, mu, EMU_REG_RATE_HZ, 100001), ONI_SIG_CONFIGWNACK);
    emu_card_destroy(c);
    struct emu_card *bad = NULL;
    char err[200];
    CHECK_RC(emu_card_create("devices=memusage:hz=100001", &bad, err, sizeof err), ONI_EINVALARG);
}

/* memusage's device block: FILL_DATA_KIB/FILL_GPU_KIB and
 * DROPPED_DATA/DROPPED_GPU are each stream's own (the GPU stream here fills
 * its FIFO and drops; the default stream is read). */
TEST(emu_memusage_fill_and_drops_per_stream)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;ddr=64K;devices=testcore:bytes=1024:rate=100M:route=1,"
                                   "heartbeat:hz=1000,memusage:enable=0");
    REQUIRE(c);
    oni_device_t t[8];
    int n = table_read(c, t, 8);
    uint32_t mu = find_id(t, n, ONIX_MEMUSAGE), hb = find_id(t, n, ONIX_HEARTBEAT), v = 0;
    card_start(c);
    static struct frame f;
    for (int k = 0; k < 50; k++) /* 50 ms: the test core makes ~4900 frames of 1 KiB for the GPU stream */
        REQUIRE(dev_frame(c, hb, &f) == 0);
    onigpu_stream_stats_t st;
    emu_card_stats(c, &st);
    REQUIRE(st.dropped_frames[1] > 0);
    CHECK(st.fifo_bytes[1] >= 16384); /* most of its 32 KiB FIFO (ddr is both FIFOs') */
    CHECK_EQ(reg_get(c, mu, EMU_REG_DEVICE, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, st.fifo_bytes[0] >> 10);
    CHECK_EQ(reg_get(c, mu, EMU_REG_DEVICE + 1, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, st.fifo_bytes[1] >> 10);
    CHECK_EQ(reg_get(c, mu, EMU_REG_DEVICE + 3, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, st.dropped_frames[0]);
    CHECK_EQ(reg_get(c, mu, EMU_REG_DEVICE + 4, &v), ONI_SIG_CONFIGRACK);
    CHECK_EQ(v, (uint32_t)st.dropped_frames[1]);
    emu_card_destroy(c);
}

/* The stimulator's artefact (src/emu/neural.c) starts from the write frames
 * that reach the card: a DigitalIO write that changes the outputs and every
 * stim write; a DigitalIO write that changes nothing is no stimulus. */
TEST(emu_stimulus_writes_reach_the_signal)
{
    struct emu_card *c = card_open("mode=fast;link=unlimited;devices=breakout:loopback=1,stim,rhd2164:units=0");
    REQUIRE(c);
    REQUIRE(c->nneural == 1);
    const struct neural *n = c->neural[0];
    oni_device_t t[32];
    int nd = table_read(c, t, 32);
    uint32_t dio = find_id(t, nd, ONIX_BREAKDIG1R3), stim = find_id(t, nd, ONIX_ONIGPU_STIM);
    card_start(c);
    uint32_t pins[3] = {0x03, 0x03, 0x02}, tag = 7;
    for (int w = 0; w < 3; w++)
        CHECK_RC(card_write_frame(c, EMU_STREAM_WRITE, dio, &pins[w], 1), 12);
    CHECK_EQ(n->stim_count, 2); /* the repeated 0x03 changed nothing */
    CHECK_RC(card_write_frame(c, EMU_STREAM_WRITE, stim, &tag, 1), 12);
    CHECK_EQ(n->stim_count, 3);
    emu_card_destroy(c);
}
