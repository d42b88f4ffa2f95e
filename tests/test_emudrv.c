/* test_emudrv.c - the emu driver in-process: init, device table, registers,
 * streaming and option handling through oni.h; timeouts and argument checks
 * through the driver table (oni/driver.h). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include "oni.h"
#include "onigpu.h"
#include "oni/driver.h"
#include "oni/util/wire.h"
#include "oni/util/clock.h"
#include "oniemu.h"
#include "onix.h"
#include "unit.h"

#define FAST_SPEC "mode=fast;seed=7"

static oni_ctx open_emu(const char *spec)
{
    oni_ctx ctx = oni_create_ctx("emu");
    if (!ctx)
        return NULL;
    if (spec && oni_set_driver_opt(ctx, ONI_DRV_EMU_SPEC, spec, strlen(spec) + 1)) {
        oni_destroy_ctx(ctx);
        return NULL;
    }
    if (oni_init_ctx(ctx, -1)) {
        oni_destroy_ctx(ctx);
        return NULL;
    }
    return ctx;
}

static oni_device_t *device_table(oni_ctx ctx, size_t *n)
{
    oni_size_t num = 0;
    size_t sz = sizeof num;
    if (oni_get_opt(ctx, ONI_OPT_NUMDEVICES, &num, &sz) || !num)
        return NULL;
    oni_device_t *t = calloc(num, sizeof *t);
    sz = num * sizeof *t;
    if (!t || oni_get_opt(ctx, ONI_OPT_DEVICETABLE, t, &sz)) {
        free(t);
        return NULL;
    }
    *n = num;
    return t;
}

TEST(emudrv_init_and_device_table)
{
    oni_ctx ctx = open_emu(FAST_SPEC);
    REQUIRE(ctx);
    const oni_driver_info_t *di = oni_get_driver_info(ctx);
    REQUIRE(di);
    CHECK(!strcmp(di->name, "emu"));
    size_t n = 0;
    oni_device_t *t = device_table(ctx, &n);
    REQUIRE(t);
    CHECK(n > 1);
    int readable = 0, hubmgr = 0;
    for (size_t i = 0; i < n; i++) {
        readable += t[i].read_size > 0;
        hubmgr += (t[i].idx & 0xFF) == ONIX_HUB_DEV_IDX;
    }
    CHECK(readable > 0);
    CHECK(hubmgr > 0);
    free(t);
    oni_size_t hz = 0;
    size_t sz = sizeof hz;
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_ACQCLKHZ, &hz, &sz), 0);
    CHECK(hz > 0);
    CHECK_RC(oni_destroy_ctx(ctx), 0);
}

TEST(emudrv_registers)
{
    oni_ctx ctx = open_emu(FAST_SPEC);
    REQUIRE(ctx);
    size_t n = 0;
    oni_device_t *t = device_table(ctx, &n);
    REQUIRE(t);
    int checked = 0;
    for (size_t i = 0; i < n; i++) {
        if ((t[i].idx & 0xFF) != ONIX_HUB_DEV_IDX)
            continue;
        oni_reg_val_t v = 0;
        CHECK_RC(oni_read_reg(ctx, t[i].idx, ONIX_HUB_CLKRATEHZ, &v), 0);
        CHECK(v > 0);
        /* identity registers are read-only: the card NACKs the write */
        CHECK_RC(oni_write_reg(ctx, t[i].idx, ONIX_HUB_HARDWAREID, 1), ONI_EWRITEFAILURE);
        /* an address no device has */
        CHECK_RC(oni_read_reg(ctx, t[i].idx, 0x7FFFFFF0u, &v), ONI_EREADFAILURE);
        checked++;
    }
    CHECK(checked > 0);
    free(t);
    oni_destroy_ctx(ctx);
}

/* The register sequence of Open Ephys' onix-loadtest (liboni), with its
 * defaults: the clocks read at CLK_HZ (2), ENABLE (0) set on both devices,
 * the memory monitor's CLK_DIV (1) for 1 Hz, the load tester's FRAME_WORDS
 * (3) and CLK_DIV; then a reset, the start, and MEMUSAGE frames read with
 * the usage taken from 16-bit words 4 (high half) and 5 (low half), in
 * 32-bit words. Here the load tester goes to the GPU stream, which nobody
 * reads, so that the usage grows past 16 bits and the halves tell. Until
 * 2026-11-25 the card had its own registers at 1..9 and the CLK_DIV write
 * failed, as onix-loadtest did on it. */
#define LT_WORDS 100
#define LT_HZ 1000

static const oni_device_t *find_dev(const oni_device_t *t, size_t n, oni_dev_id_t id)
{
    for (size_t i = 0; i < n; i++)
        if (t[i].id == id)
            return &t[i];
    return NULL;
}

/* The usage of a MEMUSAGE frame as onix-loadtest decodes it. */
static uint32_t loadtest_usage(const oni_frame_t *f)
{
    uint16_t w[6];
    memcpy(w, f->data, sizeof w);
    return (uint32_t)w[4] << 16 | w[5];
}

/* Configure as onix-loadtest does; 0 or the first failing call's code. */
static int loadtest_configure(oni_ctx ctx, oni_dev_idx_t lt, oni_dev_idx_t mu, oni_reg_val_t *clk)
{
    oni_reg_val_t mu_clk = 0, one = 1;
    int rc;
    if ((rc = oni_set_opt(ctx, ONI_OPT_RESET, &one, sizeof one)) || (rc = oni_read_reg(ctx, lt, 2, clk)) ||
        (rc = oni_read_reg(ctx, mu, 2, &mu_clk)) || (rc = oni_write_reg(ctx, lt, 0, 1)) ||
        (rc = oni_write_reg(ctx, mu, 0, 1)) || (rc = oni_write_reg(ctx, mu, 1, mu_clk / 1)) ||
        (rc = oni_write_reg(ctx, lt, 3, LT_WORDS)) || (rc = oni_write_reg(ctx, lt, 1, *clk / LT_HZ)))
        return rc;
    oni_size_t block = 2048;
    if ((rc = oni_set_opt(ctx, ONI_OPT_RESET, &one, sizeof one)) ||
        (rc = oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &block, sizeof block)))
        return rc;
    return 0;
}

TEST(emudrv_onix_loadtest_sequence)
{
    /* memusage:le=0: the word order onix-loadtest.c:225 decodes (current
     * software reads one little-endian word, the emulator's default) */
    oni_ctx ctx = open_emu("devices=loadtest,memusage:le=0;mode=fast;link=unlimited;ddr=4M");
    REQUIRE(ctx);
    size_t n = 0;
    oni_device_t *t = device_table(ctx, &n);
    REQUIRE(t);
    const oni_device_t *ltd = find_dev(t, n, ONIX_LOADTEST), *mud = find_dev(t, n, ONIX_MEMUSAGE);
    REQUIRE(ltd && mud);
    oni_dev_idx_t lt = ltd->idx, mu = mud->idx;
    free(t);
    CHECK_RC(oni_write_reg(ctx, lt, ONIEMU_REG_ROUTE, 1), 0);
    oni_reg_val_t clk = 0, v = 0;
    REQUIRE(loadtest_configure(ctx, lt, mu, &clk) == 0);
    CHECK_EQ(clk, 250000000);
    /* FRAME_WORDS took effect with the reset: the new table says so */
    t = device_table(ctx, &n);
    REQUIRE(t && find_dev(t, n, ONIX_LOADTEST));
    CHECK_EQ(find_dev(t, n, ONIX_LOADTEST)->read_size, 16 + 2 * LT_WORDS);
    CHECK_EQ(find_dev(t, n, ONIX_MEMUSAGE)->read_size, 12);
    free(t);
    CHECK_RC(oni_read_reg(ctx, lt, ONIX_LOADTEST_CLK_DIV, &v), 0);
    CHECK_EQ(v, clk / LT_HZ);
    CHECK_RC(oni_read_reg(ctx, lt, ONIEMU_REG_RATE_HZ, &v), 0);
    CHECK_EQ(v, LT_HZ);
    oni_reg_val_t mem_words = 0;
    CHECK_RC(oni_read_reg(ctx, mu, ONIX_MEMUSAGE_MEM_WORDS, &mem_words), 0);
    CHECK_EQ(mem_words, (4u << 20) / 4);
    oni_reg_val_t run = 1;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &run, sizeof run), 0);
    /* each load-test frame takes 16 + 216 bytes = 58 words of the GPU
     * stream's FIFO (2 MiB) until it is full; the default stream holds up to
     * a block (2048 bytes) of memusage frames generated ahead (7 words each) */
    const uint64_t per_frame = (16 + 16 + 2 * LT_WORDS) / 4, cap_words = mem_words / 2;
    const uint64_t ahead = 7 * (2048 / 28 + 1);
    uint32_t last = 0;
    int frames = 0, bad_clock = 0;
    while (frames < 12) {
        oni_frame_t *f = NULL;
        REQUIRE(oni_read_frame(ctx, &f) > 0);
        if (f->dev_idx != mu) {
            oni_destroy_frame(f);
            continue;
        }
        uint64_t hub_clock;
        memcpy(&hub_clock, f->data, 8);
        bad_clock += hub_clock != f->time;
        uint32_t usage = loadtest_usage(f);
        uint64_t due = f->time / (clk / LT_HZ) + 1, want = due * per_frame;
        if (want > cap_words)
            want = cap_words - per_frame; /* full: a frame does not fit whole */
        CHECK(usage >= want && usage <= want + per_frame + ahead);
        CHECK(usage >= last);
        last = usage;
        frames++;
        oni_destroy_frame(f);
    }
    CHECK_EQ(bad_clock, 0);
    CHECK(last > 0x10000); /* both halves were used */
    /* what onix-loadtest meets when it raises the rate past the device's range */
    CHECK_RC(oni_write_reg(ctx, lt, ONIX_LOADTEST_CLK_DIV, 2), ONI_EWRITEFAILURE);
    CHECK_RC(oni_write_reg(ctx, lt, ONIX_LOADTEST_CLK_DIV, 0), ONI_EWRITEFAILURE);
    CHECK_RC(oni_write_reg(ctx, mu, ONIX_MEMUSAGE_CLK_HZ, 1), ONI_EWRITEFAILURE);
    CHECK_RC(oni_read_reg(ctx, lt, ONIEMU_REG_DROPPED_LO, &v), 0);
    CHECK(v > 0); /* the GPU stream's FIFO filled */
    oni_destroy_ctx(ctx);
}

TEST(emudrv_streaming)
{
    oni_ctx ctx = open_emu(FAST_SPEC);
    REQUIRE(ctx);
    size_t n = 0;
    oni_device_t *t = device_table(ctx, &n);
    REQUIRE(t);
    oni_reg_val_t run = 1;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &run, sizeof run), 0);
    uint64_t last_time[64] = {0};
    uint32_t last_idx[64];
    int nlast = 0, bad = 0;
    for (int k = 0; k < 20000; k++) {
        oni_frame_t *f = NULL;
        int rc = oni_read_frame(ctx, &f);
        if (rc <= 0) {
            CHECK_RC(rc, 1);
            break;
        }
        const oni_device_t *d = NULL;
        for (size_t i = 0; i < n; i++)
            if (t[i].idx == f->dev_idx)
                d = &t[i];
        if (!d || f->data_sz != d->read_size)
            bad++;
        int j = 0;
        while (j < nlast && last_idx[j] != f->dev_idx)
            j++;
        if (j == nlast && nlast < 64)
            last_idx[nlast++] = f->dev_idx;
        else if (j < nlast && f->time < last_time[j])
            bad++; /* time runs backwards within one device */
        if (j < 64)
            last_time[j] = f->time;
        oni_destroy_frame(f);
    }
    CHECK_EQ(bad, 0);
    CHECK(nlast > 0);
    onigpu_stream_stats_t st;
    size_t sz = sizeof st;
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_STREAM_STATS, &st, &sz), 0);
    CHECK_EQ(sz, sizeof st);
    CHECK(st.fifo_capacity[0] > 0);
    free(t);
    oni_destroy_ctx(ctx);
}

TEST(emudrv_options)
{
    oni_ctx ctx = oni_create_ctx("emu");
    REQUIRE(ctx);
    char buf[64];
    size_t sz = sizeof buf;
    /* before init: the spec as set; wrong sizes refused */
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_EMU_SPEC, FAST_SPEC, strlen(FAST_SPEC)), ONI_EINVALARG);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_EMU_SPEC, FAST_SPEC, strlen(FAST_SPEC) + 2), ONI_EINVALARG);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_EMU_SPEC, NULL, 4), ONI_EINVALARG);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_EMU_SPEC, FAST_SPEC, strlen(FAST_SPEC) + 1), 0);
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_EMU_SPEC, buf, &sz), 0);
    CHECK(!strcmp(buf, FAST_SPEC));
    CHECK_EQ(sz, strlen(FAST_SPEC) + 1);
    sz = 3;
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_EMU_SPEC, buf, &sz), ONI_EBUFFERSIZE);
    CHECK_EQ(sz, strlen(FAST_SPEC) + 1); /* what it takes, as oni_get_opt says */
    oniemu_link_t link;
    sz = sizeof link;
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_EMU_LINK, &link, &sz), ONI_EINVALSTATE);
    uint32_t mode = 7;
    sz = sizeof mode;
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_EMU_MODE, &mode, &sz), ONI_EINVALSTATE);
    uint32_t rd = 4096;
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_RD_SZ, &rd, sizeof rd), ONI_EINVALSTATE);
    CHECK_RC(oni_init_ctx(ctx, -1), 0);
    /* after init */
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_EMU_SPEC, "", 1), ONI_EINVALSTATE);
    sz = sizeof link;
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_EMU_LINK, &link, &sz), 0);
    CHECK_EQ(sz, sizeof link);
    CHECK(link.name[0] != 0);
    sz = sizeof link - 1;
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_EMU_LINK, &link, &sz), ONI_EBUFFERSIZE);
    CHECK_EQ(sz, sizeof link);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_EMU_LINK, &link, sizeof link), ONI_EREADONLY);
    sz = sizeof mode;
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_EMU_MODE, &mode, &sz), 0);
    CHECK_EQ(sz, sizeof mode);
    CHECK_EQ(mode, 1); /* FAST_SPEC */
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_EMU_MODE, &mode, sizeof mode), ONI_EREADONLY);
    onigpu_stream_stats_t st;
    sz = sizeof st - 8;
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_STREAM_STATS, &st, &sz), ONI_EBUFFERSIZE);
    CHECK_EQ(sz, sizeof st);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_STREAM_STATS, &st, sizeof st), ONI_EREADONLY);
    CHECK_RC(oni_set_driver_opt(ctx, 0x4F4703FF, buf, 4), ONI_EINVALOPT);
    sz = sizeof buf;
    CHECK_RC(oni_get_driver_opt(ctx, 0x12345, buf, &sz), ONI_EINVALOPT);
    oni_destroy_ctx(ctx);
}

/* ONI_DRV_EMU_MODE follows the spec as the card reads it: the last mode= wins, realtime by default. */
TEST(emudrv_mode_option)
{
    static const struct { const char *spec; uint32_t fast; } cases[] = {
        {"mode=fast", 1}, {"", 0}, {"seed=3; mode=realtime", 0}, {"mode=realtime;mode=fast;seed=2", 1},
        {"mode=fast;mode=realtime", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        oni_ctx ctx = open_emu(cases[i].spec);
        REQUIRE(ctx);
        uint32_t mode = 7;
        size_t sz = sizeof mode;
        CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_EMU_MODE, &mode, &sz), 0);
        if (mode != cases[i].fast)
            UNIT_FAIL("spec \"%s\": mode %u, want %u", cases[i].spec, mode, cases[i].fast);
        oni_destroy_ctx(ctx);
    }
}

/* ONI_DRV_EMU_LAG: a card whose generator cannot keep up (a test core asked
 * for 200 GB/s) says it fell behind by about the time it ran; a card that
 * keeps up owes next to nothing; mode=fast, whose clock follows the reads,
 * owes nothing. Read-only, after init, sized. */
TEST(emudrv_lag_option)
{
    oni_ctx ctx = oni_create_ctx("emu");
    REQUIRE(ctx);
    oniemu_lag_t lag;
    size_t sz = sizeof lag;
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_EMU_LAG, &lag, &sz), ONI_EINVALSTATE);
    oni_destroy_ctx(ctx);
    static const struct {
        const char *spec;
        uint64_t lo_ns, hi_ns; /* max_ns within */
    } cases[] = {
        {"mode=realtime;link=unlimited;ddr=64M;devices=testcore:bytes=4096:rate=200G:route=1", 50000000u,
         10000000000u},
        {"mode=realtime;devices=testcore:bytes=64:rate=1M", 0, 500000000u},
        {"mode=fast;devices=testcore:bytes=64:rate=1M", 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        REQUIRE((ctx = open_emu(cases[i].spec)) != NULL);
        uint32_t one = 1;
        CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &one, sizeof one), 0);
        usleep(100000);
        sz = sizeof lag - 1;
        CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_EMU_LAG, &lag, &sz), ONI_EBUFFERSIZE);
        CHECK_EQ(sz, sizeof lag);
        CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_EMU_LAG, &lag, &sz), 0);
        if (lag.max_ns < cases[i].lo_ns || lag.max_ns > cases[i].hi_ns || lag.now_ns > lag.max_ns)
            UNIT_FAIL("spec \"%s\": lag now %.3f ms, max %.3f ms; want max %.3f..%.3f ms", cases[i].spec,
                      lag.now_ns / 1e6, lag.max_ns / 1e6, cases[i].lo_ns / 1e6, cases[i].hi_ns / 1e6);
        CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_EMU_LAG, &lag, sizeof lag), ONI_EREADONLY);
        oni_destroy_ctx(ctx);
    }
}

TEST(emudrv_env_spec)
{
    /* ONIGPU_EMU is used when no spec was set: a bad one there is refused */
    setenv(ONIGPU_EMU_ENV, "mode=fast;nosuchkey=1", 1);
    oni_ctx ctx = oni_create_ctx("emu");
    REQUIRE(ctx);
    CHECK_RC(oni_init_ctx(ctx, -1), ONI_EINVALARG);
    oni_destroy_ctx(ctx);
    /* a spec set explicitly wins over the environment */
    ctx = open_emu(FAST_SPEC);
    CHECK(ctx != NULL);
    oni_destroy_ctx(ctx);
    unsetenv(ONIGPU_EMU_ENV);
    /* blanks before a key and empty keys are allowed */
    ctx = open_emu("mode=fast; ;seed=3;");
    CHECK(ctx != NULL);
    if (ctx) {
        uint32_t mode = 0;
        size_t sz = sizeof mode;
        CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_EMU_MODE, &mode, &sz), 0);
        CHECK_EQ(mode, 1);
        oni_destroy_ctx(ctx);
    }
    /* unknown keys are refused, the daemon= of the onix-emu daemon among
     * them: the card in another process is `onigpu serve` (docs/net.md) */
    static const char *const bad[] = {"nosuchkey=1", "daemon=/tmp/a.sock;mode=fast"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ctx = oni_create_ctx("emu");
        REQUIRE(ctx);
        CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_EMU_SPEC, bad[i], strlen(bad[i]) + 1), 0);
        CHECK_RC(oni_init_ctx(ctx, -1), ONI_EINVALARG);
        oni_destroy_ctx(ctx);
    }
}

/* A spec (here from ONIGPU_EMU, which has no length limit of its own) of
 * up to 511 characters is taken; 512 are refused, not cut. */
TEST(emudrv_longest_spec)
{
    char spec[600];
    for (size_t len = 511; len <= 512; len++) {
        memset(spec, ';', len); /* empty keys, skipped */
        memcpy(spec, "mode=fast", 9);
        spec[len] = 0;
        setenv(ONIGPU_EMU_ENV, spec, 1);
        oni_ctx ctx = oni_create_ctx("emu");
        REQUIRE(ctx);
        CHECK_RC(oni_init_ctx(ctx, -1), len < 512 ? 0 : ONI_EINVALARG);
        oni_destroy_ctx(ctx);
    }
    unsetenv(ONIGPU_EMU_ENV);
}

/* A string option's size is its length + 1: a NUL inside is refused, and a
 * truth file set before init that cannot be opened fails the init. */
TEST(emudrv_string_options_checked)
{
    oni_ctx ctx = oni_create_ctx("emu");
    REQUIRE(ctx);
    static const char inner[] = "mode=fast\0x"; /* sizeof: 12, with the NUL at the end */
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_EMU_SPEC, inner, sizeof inner), ONI_EINVALARG);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_EMU_TRUTH_FILE, inner, sizeof inner), ONI_EINVALARG);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_EMU_SPEC, FAST_SPEC, strlen(FAST_SPEC) + 1), 0);
    const char *bad = "/nonexistent-onigpu-dir/truth.csv";
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_EMU_TRUTH_FILE, bad, strlen(bad) + 1), 0); /* opened at init */
    CHECK_RC(oni_init_ctx(ctx, -1), ONI_EPATHINVALID);
    oni_destroy_ctx(ctx);
}

/* Driver-level: every wait honours ONI_OPT_TIMEOUTMS. */
struct reader {
    oni_ctx ctx;
    atomic_int stop, frames, bad, errors;
};

static void *read_until_stopped(void *p)
{
    struct reader *r = p;
    while (!atomic_load(&r->stop)) {
        oni_frame_t *f = NULL;
        int rc = oni_read_frame(r->ctx, &f);
        if (rc > 0) {
            atomic_fetch_add(&r->frames, 1);
            oni_destroy_frame(f);
        } else if (rc == ONI_EBADFRAME) {
            atomic_fetch_add(&r->bad, 1);
        } else if (!atomic_load(&r->stop)) {
            atomic_fetch_add(&r->errors, 1);
        }
    }
    return NULL;
}

/* A context of spec with a 1 s timeout and a thread reading it; NULL on failure. */
static oni_ctx start_reading(const char *spec, struct reader *r, pthread_t *th)
{
    oni_ctx ctx = open_emu(spec);
    uint32_t t = 1000;
    if (!ctx || oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &t, sizeof t)) {
        oni_destroy_ctx(ctx);
        return NULL;
    }
    memset(r, 0, sizeof *r);
    r->ctx = ctx;
    if (pthread_create(th, NULL, read_until_stopped, r)) {
        oni_destroy_ctx(ctx);
        return NULL;
    }
    return ctx;
}

/* A thread already reading when another starts the card (upstream hosts do
 * both): the start is not held up by the waiting reader, and the reader gets
 * the new run's frames whole. RESETACQCOUNTER = 2 started the card outside
 * the read lock, so the reader met one torn frame at every start (8 of 8). */
TEST(emudrv_start_while_a_reader_waits)
{
    for (int trial = 0; trial < 4; trial++) {
        struct reader r;
        pthread_t th;
        oni_ctx ctx = start_reading("seed=3;devices=breakout,rhd2164", &r, &th);
        REQUIRE(ctx);
        usleep(50000); /* the reader waits in the driver */
        int opt = trial % 2 ? ONI_OPT_RUNNING : ONI_OPT_RESETACQCOUNTER;
        oni_reg_val_t v = trial % 2 ? 1 : 2;
        uint64_t t0 = oni_now_ns();
        CHECK_RC(oni_set_opt(ctx, opt, &v, sizeof v), 0);
        CHECK((oni_now_ns() - t0) / 1e6 < 500);
        while (atomic_load(&r.frames) <= 100 && oni_now_ns() - t0 < 5000000000ull)
            usleep(10000); /* about 10 ms; more on a loaded machine under TSan */
        atomic_store(&r.stop, 1);
        v = 0;
        CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &v, sizeof v), 0);
        pthread_join(th, NULL);
        CHECK(atomic_load(&r.frames) > 100);
        CHECK_EQ(atomic_load(&r.bad), 0);
        CHECK_EQ(atomic_load(&r.errors), 0);
        oni_destroy_ctx(ctx);
    }
}

/* Pause and resume while a thread reads (upstream hosts do): the card kept
 * its FIFO at a stop while the host flushed its buffer, so the rest of a
 * frame whose start was flushed began the next read (14 torn in 20 cycles). */
TEST(emudrv_pause_resume_while_reading)
{
    struct reader r;
    pthread_t th;
    oni_ctx ctx = start_reading("seed=4;devices=breakout,rhd2164", &r, &th);
    REQUIRE(ctx);
    for (int i = 0; i < 20; i++) {
        oni_reg_val_t v = 1;
        CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &v, sizeof v), 0);
        usleep(20000);
        v = 0;
        CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &v, sizeof v), 0);
        usleep(5000);
    }
    atomic_store(&r.stop, 1);
    oni_reg_val_t v = 1; /* the reader's last wait ends with data */
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &v, sizeof v), 0);
    pthread_join(th, NULL);
    CHECK(atomic_load(&r.frames) > 100); /* frames not read by a stop are flushed; TSan reads slowly */
    CHECK_EQ(atomic_load(&r.bad), 0);
    CHECK_EQ(atomic_load(&r.errors), 0);
    oni_destroy_ctx(ctx);
}

TEST(emudrv_timeout)
{
    const struct oni_driver *drv = &onidrv_emu;
    oni_driver_ctx d = drv->create_ctx();
    REQUIRE(d);
    char buf[64];
    CHECK_RC(drv->read_stream(d, ONI_READ_STREAM_DATA, buf, sizeof buf), ONI_EINVALSTATE);
    CHECK_RC(drv->set_opt(d, ONI_DRV_EMU_SPEC, FAST_SPEC, strlen(FAST_SPEC) + 1), 0);
    CHECK_RC(drv->init(d, 3), ONI_EPATHINVALID);
    REQUIRE(drv->init(d, -1) == 0);
    CHECK_RC(drv->init(d, -1), ONI_EINVALSTATE);
    uint32_t t = 0;
    CHECK_RC(drv->set_opt_callback(d, ONI_OPT_TIMEOUTMS, &t, sizeof t), ONI_EINVALARG);
    t = 1000;
    CHECK_RC(drv->set_opt_callback(d, ONI_OPT_TIMEOUTMS, &t, 2), ONI_EINVALARG);
    CHECK_RC(drv->set_opt_callback(d, ONI_OPT_TIMEOUTMS, &t, sizeof t), 0);
    /* not running: no data ever comes; a data read waits one slice of the
     * timeout (oni/driver.h, 10 ms), not all of it, then answers 0 bytes (the
     * bound is generous: the machine may be loaded) */
    uint64_t t0 = oni_now_ns();
    CHECK_RC(drv->read_stream(d, ONI_READ_STREAM_DATA, buf, sizeof buf), 0);
    double ms = (oni_now_ns() - t0) / 1e6;
    CHECK(ms >= ONI_READ_SLICE_MS * 0.9 && ms < 500);
    /* nothing pending on the signal stream after init (no reset was written):
     * it waits the whole timeout */
    t0 = oni_now_ns();
    CHECK_RC(drv->read_stream(d, ONI_READ_STREAM_SIGNAL, buf, 1), ONI_ETIMEOUT);
    ms = (oni_now_ns() - t0) / 1e6;
    CHECK(ms >= 950 && ms < 1000 + 2000);
    CHECK_RC(drv->read_stream(d, (oni_read_stream_t)7, buf, 1), ONI_EINVALARG);
    CHECK_RC(drv->write_stream(d, (oni_write_stream_t)1, buf, 8), ONI_EINVALARG);
    CHECK_RC(drv->read_config(d, ONI_CONFIG_RUNNING, NULL), ONI_EINVALARG);
    CHECK_RC(drv->destroy_ctx(d), 0);
}

static uint64_t bad_wframes(oni_ctx ctx)
{
    onigpu_stream_stats_t st;
    size_t sz = sizeof st;
    return oni_get_driver_opt(ctx, ONI_DRV_STREAM_STATS, &st, &sz) ? UINT64_MAX : st.bad_wframes;
}

/* A malformed write frame is refused and counted in the stream stats, and the stream keeps working. */
TEST(emudrv_write_stream)
{
    oni_ctx ctx = open_emu(FAST_SPEC);
    REQUIRE(ctx);
    size_t n = 0;
    oni_device_t *t = device_table(ctx, &n);
    REQUIRE(t);
    const oni_device_t *w = NULL;
    for (size_t i = 0; i < n && !w; i++)
        if (t[i].write_size)
            w = &t[i];
    if (!w) {
        free(t);
        oni_destroy_ctx(ctx);
        SKIP("the default device set has no writable device");
    }
    char payload[1024] = {1, 2, 3, 4};
    REQUIRE(w->write_size <= sizeof payload);
    oni_frame_t *f = NULL;
    CHECK(oni_create_frame(ctx, &f, w->idx, payload, w->write_size) > 0);
    REQUIRE(f);
    CHECK(oni_write_frame(ctx, f) > 0);
    CHECK_EQ(bad_wframes(ctx), 0);
    /* the frame damaged on its way: an unknown device index in its wire header (before the payload) */
    uint32_t idx = w->idx, bogus_idx = 0xDEAD;
    memcpy(f->data - ONI_WFRAMEHEADERSZ, &bogus_idx, 4);
    CHECK_RC(oni_write_frame(ctx, f), ONI_EBADFRAME);
    CHECK_EQ(bad_wframes(ctx), 1);
    memcpy(f->data - ONI_WFRAMEHEADERSZ, &idx, 4);
    CHECK(oni_write_frame(ctx, f) > 0);
    CHECK_EQ(bad_wframes(ctx), 1);
    oni_destroy_frame(f);
    free(t);
    oni_destroy_ctx(ctx);

    const struct oni_driver *drv = &onidrv_emu;
    oni_driver_ctx d = drv->create_ctx();
    REQUIRE(d);
    REQUIRE(drv->set_opt(d, ONI_DRV_EMU_SPEC, FAST_SPEC, strlen(FAST_SPEC) + 1) == 0);
    REQUIRE(drv->init(d, -1) == 0);
    uint32_t bogus[2] = {0xDEAD, 1000}; /* unknown device, payload missing */
    CHECK_RC(drv->write_stream(d, ONI_WRITE_STREAM_DATA, (const char *)bogus, sizeof bogus), ONI_EBADFRAME);
    drv->destroy_ctx(d);
}

/* The same driver built as libonidriver_emu.so (as an upstream host would load it). */
TEST(emudrv_shared_library)
{
    const char *dir = getenv(ONI_DRIVER_PATH_ENV);
    if (!dir)
        SKIP("ONI_DRIVER_PATH not set (tests/CMakeLists.txt sets it to the build directory)");
    char path[4096];
    snprintf(path, sizeof path, "%s/libonidriver_emu.so", dir);
    if (access(path, F_OK)) {
        UNIT_FAIL("%s missing: CMake always builds it", path);
        return;
    }
    /* It must load on its own (liboni symbols it uses resolved): a failure here is a build bug. */
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        UNIT_FAIL("dlopen: %s", dlerror());
    REQUIRE(h);
    oni_driver_ctx (*create)(void) = (oni_driver_ctx (*)(void))dlsym(h, "oni_driver_create_ctx");
    int (*destroy)(oni_driver_ctx) = (int (*)(oni_driver_ctx))dlsym(h, "oni_driver_destroy_ctx");
    int (*init)(oni_driver_ctx, int) = (int (*)(oni_driver_ctx, int))dlsym(h, "oni_driver_init");
    int (*set_opt)(oni_driver_ctx, int, const void *, size_t) =
        (int (*)(oni_driver_ctx, int, const void *, size_t))dlsym(h, "oni_driver_set_opt");
    int (*read_config)(oni_driver_ctx, oni_config_t, oni_reg_val_t *) =
        (int (*)(oni_driver_ctx, oni_config_t, oni_reg_val_t *))dlsym(h, "oni_driver_read_config");
    const oni_driver_info_t *(*dinfo)(void) = (const oni_driver_info_t *(*)(void))dlsym(h, "oni_driver_info");
    REQUIRE(create && destroy && init && set_opt && read_config && dinfo);
    CHECK(!strcmp(dinfo()->name, "emu"));
    oni_driver_ctx d = create();
    REQUIRE(d);
    CHECK_RC(set_opt(d, ONI_DRV_EMU_SPEC, FAST_SPEC, strlen(FAST_SPEC) + 1), 0);
    CHECK_RC(init(d, -1), 0);
    oni_reg_val_t hz = 0;
    CHECK_RC(read_config(d, ONI_CONFIG_ACQCLKHZ, &hz), 0);
    CHECK(hz > 0);
    CHECK_RC(destroy(d), 0);
    dlclose(h);
}

/* ONIX_OPT_PASSTHROUGH through liboni as the plugin sets it
 * (OnixSource.cpp:196-208: bit 0 port A, bit 2 port B), then RESET: the
 * raw devices appear at 8 and 9; a bit that names no port is refused. */
TEST(emudrv_passthrough_option)
{
    oni_ctx ctx = open_emu("devices=breakout;mode=fast");
    REQUIRE(ctx);
    int val = 1 << 0 | 1 << 2, one = 1;
    CHECK_RC(oni_set_opt(ctx, ONIX_OPT_PASSTHROUGH, &val, sizeof val), 0);
    int got = 0;
    size_t sz = sizeof got;
    CHECK_RC(oni_get_opt(ctx, ONIX_OPT_PASSTHROUGH, &got, &sz), 0);
    CHECK_EQ(got, 5);
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RESET, &one, sizeof one), 0);
    size_t n = 0;
    oni_device_t *t = device_table(ctx, &n);
    REQUIRE(t);
    int raw = 0;
    for (size_t i = 0; i < n; i++)
        raw += t[i].id == ONIX_DS90UB9RAW && (t[i].idx == 8 || t[i].idx == 9) && t[i].version >= 3;
    CHECK_EQ(raw, 2);
    free(t);
    oni_reg_val_t v = 0;
    CHECK_RC(oni_read_reg(ctx, 8, (0x5C << 7) | 0x30, &v), 0); /* deserializer SER_ALIAS */
    CHECK_EQ(v, 0x58 << 1);
    val = 2;
    CHECK_RC(oni_set_opt(ctx, ONIX_OPT_PASSTHROUGH, &val, sizeof val), ONI_EINVALARG);
    uint32_t gs = 7;
    sz = sizeof gs;
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_GPU_STREAM, &gs, &sz), 0);
    CHECK_EQ(gs, 1);
    CHECK_RC(oni_set_driver_opt(ctx, ONI_DRV_GPU_STREAM, &gs, sizeof gs), ONI_EREADONLY);
    oni_destroy_ctx(ctx);
    REQUIRE((ctx = open_emu("devices=breakout;gpustream=0")));
    sz = sizeof gs;
    CHECK_RC(oni_get_driver_opt(ctx, ONI_DRV_GPU_STREAM, &gs, &sz), 0);
    CHECK_EQ(gs, 0);
    oni_destroy_ctx(ctx);
}
