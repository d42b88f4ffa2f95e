/* test_oni_api.c - API conformance of the ONI core: every function and
 * option, wrong states, NULLs, short buffers and wrong sizes. Uses the
 * scripted fixture driver (tests/fixtures/drivers), found through ONI_DRIVER_PATH. */
#include <errno.h>
#include "drivers/fixture.h"
#include "onix.h"
#include "oni/names.h"
#include "unit.h"

static const oni_device_t devs3[] = {
    {0x0102, 10, 1, 40, 0},  /* readable */
    {0x0001, 8, 2, 0, 12},   /* writable only */
    {0x0200, 10, 3, 7, 4},   /* both, odd read size */
};

TEST(null_context_everywhere)
{
    uint32_t v = 1;
    size_t n = 4;
    oni_frame_t *f = NULL;
    oni_reg_val_t r;
    CHECK_RC(oni_init_ctx(NULL, 0), ONI_ENULLCTX);
    CHECK_RC(oni_destroy_ctx(NULL), ONI_ENULLCTX);
    CHECK_RC(oni_get_opt(NULL, ONI_OPT_NUMDEVICES, &v, &n), ONI_ENULLCTX);
    CHECK_RC(oni_set_opt(NULL, ONI_OPT_RUNNING, &v, 4), ONI_ENULLCTX);
    CHECK_RC(oni_get_driver_opt(NULL, 0, &v, &n), ONI_ENULLCTX);
    CHECK_RC(oni_set_driver_opt(NULL, 0, &v, 4), ONI_ENULLCTX);
    CHECK_RC(oni_read_reg(NULL, 0, 0, &r), ONI_ENULLCTX);
    CHECK_RC(oni_write_reg(NULL, 0, 0, 1), ONI_ENULLCTX);
    CHECK_RC(oni_read_frame(NULL, &f), ONI_ENULLCTX);
    CHECK_RC(oni_create_frame(NULL, &f, 0, &v, 4), ONI_ENULLCTX);
    CHECK_RC(oni_write_frame(NULL, f), ONI_ENULLCTX);
    CHECK(oni_get_driver_info(NULL) == NULL);
    oni_destroy_frame(NULL); /* ignored */
}

TEST(version_and_error_strings)
{
    int ma = -1, mi = -1, pa = -1;
    oni_version(&ma, &mi, &pa);
    CHECK_EQ(ma, ONI_VERSION_MAJOR);
    CHECK_EQ(mi, ONI_VERSION_MINOR);
    CHECK_EQ(pa, ONI_VERSION_PATCH);
    CHECK_EQ(ONI_VERSION, 40600);
    oni_version(NULL, NULL, NULL);
    const char *unknown = oni_error_str(12345);
    CHECK(unknown && *unknown);
    /* Every code has its own text, different from the unknown one and from each other. */
    int codes[64], nc = 0;
    for (int e = 0; e > ONI_MINERRORNUM; e--)
        codes[nc++] = e;
    for (int e = ONI_ETIMEOUT; e > ONI_MINERRORNUM_ONIGPU; e--)
        codes[nc++] = e;
    for (int i = 0; i < nc; i++) {
        const char *s = oni_error_str(codes[i]);
        CHECK(s && *s && strcmp(s, unknown) != 0);
        for (int j = 0; j < i; j++)
            if (strcmp(s, oni_error_str(codes[j])) == 0)
                UNIT_FAIL("codes %d and %d share the text \"%s\"", codes[i], codes[j], s);
    }
    CHECK(strcmp(oni_error_str(ONI_MINERRORNUM), unknown) == 0);
    CHECK(strcmp(oni_error_str(ONI_MINERRORNUM_ONIGPU), unknown) == 0);
}

TEST(uninitialized_context)
{
    oni_ctx ctx = fx_open(devs3, 3, 0);
    REQUIRE(ctx);
    uint32_t v = 0;
    size_t n = sizeof v;
    oni_frame_t *f = NULL;
    oni_reg_val_t r;
    const oni_driver_info_t *info = oni_get_driver_info(ctx);
    REQUIRE(info);
    CHECK(strcmp(info->name, "scripted") == 0);
    /* Upstream's answers before init (api/liboni/oni.c:197-542): write-only
     * and read-only options say so in any state, the rest ONI_EINVALSTATE. */
    for (int opt = ONI_OPT_DEVICETABLE; opt <= ONI_OPT_CUSTOMBEGIN + 1; opt++) {
        int ro = opt == ONI_OPT_DEVICETABLE || opt == ONI_OPT_NUMDEVICES || opt == ONI_OPT_SYSCLKHZ ||
                 opt == ONI_OPT_ACQCLKHZ || opt == ONI_OPT_MAXREADFRAMESIZE || opt == ONI_OPT_MAXWRITEFRAMESIZE;
        int wo = opt == ONI_OPT_RESET || opt == ONI_OPT_RESETACQCOUNTER;
        n = sizeof v;
        CHECK_RC(oni_get_opt(ctx, opt, &v, &n), wo ? ONI_EWRITEONLY : ONI_EINVALSTATE);
        CHECK_RC(oni_set_opt(ctx, opt, &v, sizeof v), ro ? ONI_EREADONLY : ONI_EINVALSTATE);
    }
    /* Register access before init goes to the driver, as upstream's does (it
     * only asserts, api/liboni/oni.c:560 and 601); this one answers it. */
    CHECK_RC(oni_read_reg(ctx, 0x0102, 0, &r), 0);
    CHECK_RC(oni_write_reg(ctx, 0x0102, 0, 1), 0);
    CHECK_RC(oni_read_frame(ctx, &f), ONI_EINVALSTATE);
    CHECK_RC(oni_create_frame(ctx, &f, 0x0001, &v, 4), ONI_EINVALSTATE);
    /* Timeout and driver options work before init (the CLI sets the emu spec there). */
    n = sizeof v;
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_TIMEOUTMS, &v, &n), 0);
    CHECK_EQ(v, 0); /* the default: wait while the device is live */
    CHECK_EQ(n, 4);
    CHECK_RC(fx_set_u32(ctx, SCR_OPT_REPEAT, 1), 0);
    struct scr_stats st;
    n = sizeof st;
    CHECK_RC(oni_get_driver_opt(ctx, SCR_OPT_STATS, &st, &n), 0);
    CHECK_EQ(st.inits, 0);
    oni_destroy_ctx(ctx);
}

TEST(init_twice_and_init_failure)
{
    oni_ctx ctx = fx_open(devs3, 3, 0);
    REQUIRE(ctx);
    CHECK_RC(fx_set_u32(ctx, SCR_OPT_INITRC, (uint32_t)ONI_EINIT), 0);
    CHECK_RC(oni_init_ctx(ctx, 0), ONI_EINIT);
    CHECK_RC(fx_set_u32(ctx, SCR_OPT_INITRC, 0), 0);
    CHECK_RC(oni_init_ctx(ctx, -1), 0); /* a failed driver init can be retried */
    CHECK_RC(oni_init_ctx(ctx, 0), ONI_EINVALSTATE);
    CHECK_EQ(fx_stats(ctx).inits, 2);
    CHECK_RC(oni_destroy_ctx(ctx), 0);
}

TEST(read_only_options)
{
    oni_ctx ctx = fx_open(devs3, 3, 1);
    REQUIRE(ctx);
    uint32_t v = 0;
    size_t n = sizeof v;
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_NUMDEVICES, &v, &n), 0);
    CHECK_EQ(v, 3);
    CHECK_EQ(n, 4);

    oni_device_t t[4];
    n = 2 * sizeof(oni_device_t); /* short */
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_DEVICETABLE, t, &n), ONI_EBUFFERSIZE);
    CHECK_EQ(n, 3 * sizeof(oni_device_t)); /* tells what it needs */
    n = sizeof t;
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_DEVICETABLE, t, &n), 0);
    CHECK_EQ(n, 3 * 20);
    /* Sorted by idx. */
    CHECK_EQ(t[0].idx, 0x0001);
    CHECK_EQ(t[1].idx, 0x0102);
    CHECK_EQ(t[2].idx, 0x0200);
    CHECK_EQ(t[1].read_size, 40);
    CHECK_EQ(t[2].write_size, 4);
    CHECK_EQ(t[0].version, 2);

    n = sizeof v;
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_SYSCLKHZ, &v, &n), 0);
    CHECK_EQ(v, 250000000);
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_ACQCLKHZ, &v, &n), 0);
    CHECK_EQ(v, 250000000);
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_MAXREADFRAMESIZE, &v, &n), 0);
    CHECK_EQ(v, 16 + 40);
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_MAXWRITEFRAMESIZE, &v, &n), 0);
    CHECK_EQ(v, 8 + 12);
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_BLOCKREADSIZE, &v, &n), 0);
    CHECK_EQ(v, 56);
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_BLOCKWRITESIZE, &v, &n), 0);
    CHECK(v >= 20 && v % 4 == 0);
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_RUNNING, &v, &n), 0);
    CHECK_EQ(v, 0);

    static const int ro[] = {ONI_OPT_DEVICETABLE, ONI_OPT_NUMDEVICES, ONI_OPT_SYSCLKHZ,
                             ONI_OPT_ACQCLKHZ, ONI_OPT_MAXREADFRAMESIZE, ONI_OPT_MAXWRITEFRAMESIZE};
    for (size_t i = 0; i < sizeof ro / sizeof ro[0]; i++)
        CHECK_RC(oni_set_opt(ctx, ro[i], &v, sizeof v), ONI_EREADONLY);
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_RESET, &v, &n), ONI_EWRITEONLY);
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_RESETACQCOUNTER, &v, &n), ONI_EWRITEONLY);

    /* Short buffers, NULLs, unknown options. */
    uint16_t small;
    n = sizeof small;
    for (int opt = ONI_OPT_NUMDEVICES; opt <= ONI_OPT_CUSTOMBEGIN; opt++) {
        if (opt == ONI_OPT_RESET || opt == ONI_OPT_RESETACQCOUNTER)
            continue;
        n = sizeof small;
        CHECK_RC(oni_get_opt(ctx, opt, &small, &n), ONI_EBUFFERSIZE);
        CHECK_EQ(n, 4);
    }
    n = 4;
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_TIMEOUTMS, &small, &(size_t){2}), ONI_EBUFFERSIZE);
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_NUMDEVICES, NULL, &n), ONI_EINVALARG);
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_NUMDEVICES, &v, NULL), ONI_EINVALARG);
    /* A number below ONI_OPT_CUSTOMBEGIN that names no option: upstream's
     * ONI_EPROTCONFIG (api/liboni/oni.c:352 and 522). */
    CHECK_RC(oni_get_opt(ctx, -1, &v, &n), ONI_EPROTCONFIG);
    CHECK_RC(oni_set_opt(ctx, -5, &v, 4), ONI_EPROTCONFIG);
    /* Read-only options are refused before their value is looked at. */
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_NUMDEVICES, NULL, 0), ONI_EREADONLY);
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, NULL, 4), ONI_EINVALARG);
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &v, 2), ONI_EBUFFERSIZE);
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &v, 8), ONI_EBUFFERSIZE);
    CHECK_RC(oni_get_driver_opt(ctx, SCR_OPT_STATS, NULL, &n), ONI_EINVALARG);
    CHECK_RC(oni_set_driver_opt(ctx, SCR_OPT_DATA, NULL, 4), ONI_EINVALARG);
    CHECK_RC(oni_set_driver_opt(ctx, 77, &v, 4), ONI_EINVALOPT); /* the driver's answer */
    oni_destroy_ctx(ctx);
}

TEST(writable_options_and_callbacks)
{
    oni_ctx ctx = fx_open(devs3, 3, 1);
    REQUIRE(ctx);
    uint32_t v;
    size_t n = sizeof v;
    struct scr_stats st = fx_stats(ctx);
    CHECK_EQ(st.timeout_ms, ONI_DEFAULT_TIMEOUTMS); /* what one driver call may wait, given at init */
    uint32_t before = st.callbacks;

    /* RUNNING: driver register follows, callback called. */
    v = 1;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &v, 4), 0);
    st = fx_stats(ctx);
    CHECK_EQ(st.config[ONI_CONFIG_RUNNING], 1);
    CHECK_EQ(st.callbacks, before + 1);
    CHECK_EQ(st.last_callback, ONI_OPT_RUNNING);
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_RUNNING, &v, &n), 0);
    CHECK_EQ(v, 1);
    /* RESET and BLOCKREADSIZE are IDLE-only. */
    v = 1;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RESET, &v, 4), ONI_EINVALSTATE);
    v = 64;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &v, 4), ONI_EINVALSTATE);
    CHECK_EQ(fx_stats(ctx).callbacks, before + 1); /* failures call nothing */
    v = 0;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &v, 4), 0);
    CHECK_EQ(fx_stats(ctx).config[ONI_CONFIG_RUNNING], 0);

    /* BLOCKREADSIZE: >= max read frame (56), multiple of 4. */
    v = 52;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &v, 4), ONI_EINVALREADSIZE);
    v = 58;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &v, 4), ONI_EINVALREADSIZE);
    v = 4096;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &v, 4), 0);
    CHECK_EQ(fx_stats(ctx).last_callback, ONI_OPT_BLOCKREADSIZE);
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_BLOCKREADSIZE, &v, &n), 0);
    CHECK_EQ(v, 4096);
    /* BLOCKWRITESIZE: >= max write frame (20), multiple of 4. */
    v = 16;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_BLOCKWRITESIZE, &v, 4), ONI_EINVALWRITESIZE);
    v = 22;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_BLOCKWRITESIZE, &v, 4), ONI_EINVALWRITESIZE);
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_BLOCKWRITESIZE, &v, &n), 0);
    CHECK_EQ(v, 20); /* the default: one largest write frame, as upstream's */
    v = 24;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_BLOCKWRITESIZE, &v, 4), 0);
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_BLOCKWRITESIZE, &v, &n), 0);
    CHECK_EQ(v, 24);
    /* and IDLE-only, as upstream (api/liboni/oni.c:489) */
    v = 1;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &v, 4), 0);
    v = 28;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_BLOCKWRITESIZE, &v, 4), ONI_EINVALSTATE);
    v = 0;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &v, 4), 0);

    /* HWADDRESS and custom options go to hardware registers. */
    v = 0x77;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_HWADDRESS, &v, 4), 0);
    CHECK_EQ(fx_stats(ctx).config[ONI_CONFIG_HWADDRESS], 0x77);
    v = 0;
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_HWADDRESS, &v, &n), 0);
    CHECK_EQ(v, 0x77);
    v = 0xABC;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_CUSTOMBEGIN + 3, &v, 4), 0);
    CHECK_EQ(fx_stats(ctx).config[ONI_CONFIG_CUSTOMBEGIN + 3], 0xABC);
    CHECK_EQ(fx_stats(ctx).last_callback, ONI_OPT_CUSTOMBEGIN + 3);
    v = 0;
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_CUSTOMBEGIN + 3, &v, &n), 0);
    CHECK_EQ(v, 0xABC);
    /* A register the driver does not have: its error comes back. */
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_CUSTOMBEGIN + 100, &v, 4), ONI_EINVALOPT);

    /* RESETACQCOUNTER: every nonzero value goes to the hardware register and
     * nothing else happens, 0 does nothing (api/liboni/oni.c:426-442). */
    v = 3;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RESETACQCOUNTER, &v, 4), 0);
    CHECK_EQ(fx_stats(ctx).config[ONI_CONFIG_RESETACQCOUNTER], 3);
    v = 1;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RESETACQCOUNTER, &v, 4), 0);
    v = 0;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RESETACQCOUNTER, &v, 4), 0);
    CHECK_EQ(fx_stats(ctx).config[ONI_CONFIG_RESETACQCOUNTER], 1); /* not passed on */
    CHECK_EQ(fx_stats(ctx).last_callback, ONI_OPT_RESETACQCOUNTER); /* but the driver is told */
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_RUNNING, &v, &n), 0);
    CHECK_EQ(v, 0);
    /* 2 is the hardware's reset-and-run: no RUNNING write, and the context
     * stays IDLE, so block sizes and RESET may still be set (clroni's
     * Start(true) configures after it). */
    v = 2;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RESETACQCOUNTER, &v, 4), 0);
    CHECK_EQ(fx_stats(ctx).config[ONI_CONFIG_RESETACQCOUNTER], 2);
    CHECK_EQ(fx_stats(ctx).config[ONI_CONFIG_RUNNING], 0);
    v = 4096;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &v, 4), 0);

    /* RESET: the table is read again, and both block sizes go back to their
     * defaults, as upstream's reset routine sets them (api/liboni/oni.c:1055). */
    uint32_t resets = fx_stats(ctx).resets;
    v = 0; /* nothing to do (upstream's answer; its hosts write 0 after init) */
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RESET, &v, 4), 0);
    CHECK_EQ(fx_stats(ctx).resets, resets);
    v = 1;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RESET, &v, 4), 0);
    CHECK_EQ(fx_stats(ctx).resets, resets + 1);
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_NUMDEVICES, &v, &n), 0);
    CHECK_EQ(v, 3);
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_BLOCKREADSIZE, &v, &n), 0);
    CHECK_EQ(v, 56);
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_BLOCKWRITESIZE, &v, &n), 0);
    CHECK_EQ(v, 20);
    oni_destroy_ctx(ctx);
}

TEST(callback_errors_come_back)
{
    oni_ctx ctx = fx_open(devs3, 3, 1);
    REQUIRE(ctx);
    REQUIRE(fx_set_u32(ctx, SCR_OPT_CALLBACKRC, (uint32_t)ONI_EINVALARG) == 0);
    uint32_t v = 1;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_HWADDRESS, &v, 4), ONI_EINVALARG);
    CHECK_EQ(fx_stats(ctx).last_callback, ONI_OPT_HWADDRESS);
    /* Except for the timeout, which drivers built for upstream do not know. */
    v = 500;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &v, 4), 0);
    CHECK_EQ(fx_stats(ctx).timeout_ms, 500);
    oni_destroy_ctx(ctx);
}

TEST(timeout_option)
{
    oni_ctx ctx = fx_open(devs3, 3, 0);
    REQUIRE(ctx);
    uint32_t v = 0;
    size_t n = sizeof v;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &v, 4), 0); /* the default: wait while live */
    CHECK_EQ(fx_stats(ctx).timeout_ms, ONI_DEFAULT_TIMEOUTMS); /* what one driver call may wait then */
    v = 150;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &v, 4), 0);
    CHECK_EQ(fx_stats(ctx).timeout_ms, 150); /* callback before init too */
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &v, 2), ONI_EBUFFERSIZE);
    REQUIRE(oni_init_ctx(ctx, 0) == 0);
    CHECK_EQ(fx_stats(ctx).timeout_ms, 150); /* and again at init */
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_TIMEOUTMS, &v, &n), 0);
    CHECK_EQ(v, 150);
    v = 300;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &v, 4), 0);
    CHECK_EQ(fx_stats(ctx).timeout_ms, 300);
    oni_destroy_ctx(ctx);
}

TEST(create_errors)
{
    errno = 0;
    CHECK(oni_create_ctx(NULL) == NULL);
    CHECK_EQ(errno, EINVAL);
    errno = 0;
    CHECK(oni_create_ctx("") == NULL);
    CHECK_EQ(errno, EINVAL);
    errno = 0;
    CHECK(oni_create_ctx("../scripted") == NULL);
    CHECK_EQ(errno, EINVAL);
    errno = 0;
    CHECK(oni_create_ctx_driver(NULL) == NULL);
    CHECK_EQ(errno, EINVAL);
    struct oni_driver incomplete = {.name = "incomplete"};
    errno = 0;
    CHECK(oni_create_ctx_driver(&incomplete) == NULL);
    CHECK_EQ(errno, EINVAL);
}

/* A driver (the built-in test driver) that claims one byte more than it was
 * asked for on one stream. */
static oni_read_stream_t lie_on;

static int lying_read(oni_driver_ctx c, oni_read_stream_t s, void *data, size_t size)
{
    int rc = onidrv_test.read_stream(c, s, data, size);
    return s == lie_on && rc == (int)size ? rc + 1 : rc;
}

/* A read answer larger than the buffer is the driver's fault, and the core
 * says so (ONI_EREADFAILURE) on both read streams; the signal stream took
 * one byte of it and went on. */
TEST(driver_claiming_more_than_asked)
{
    struct oni_driver liar = onidrv_test;
    liar.read_stream = lying_read;
    lie_on = ONI_READ_STREAM_SIGNAL;
    oni_ctx ctx = oni_create_ctx_driver(&liar);
    REQUIRE(ctx);
    CHECK_RC(oni_init_ctx(ctx, -1), ONI_EREADFAILURE);
    oni_destroy_ctx(ctx);
    lie_on = ONI_READ_STREAM_DATA;
    ctx = oni_create_ctx_driver(&liar);
    REQUIRE(ctx);
    CHECK_RC(oni_init_ctx(ctx, -1), 0);
    uint32_t run = 1;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &run, sizeof run), 0);
    oni_frame_t *f = NULL;
    CHECK_RC(oni_read_frame(ctx, &f), ONI_EREADFAILURE);
    oni_destroy_ctx(ctx);
}

/* ONI_TIMEOUTMS sets new contexts' ONI_OPT_TIMEOUTMS (for programs written
 * for upstream, which cannot set it); a value that is not 0 .. 2^32 - 1 ms
 * makes context creation fail with EINVAL rather than be ignored. */
TEST(timeout_from_the_environment)
{
    REQUIRE(setenv("ONI_TIMEOUTMS", "60000", 1) == 0);
    oni_ctx ctx = oni_create_ctx_driver(&onidrv_test);
    REQUIRE(ctx);
    uint32_t v = 0;
    size_t n = sizeof v;
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_TIMEOUTMS, &v, &n), 0);
    CHECK_EQ(v, 60000);
    oni_destroy_ctx(ctx);
    static const char *bad[] = {"", "abc", "12ms", "-5", "4294967296", " 5"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        REQUIRE(setenv("ONI_TIMEOUTMS", bad[i], 1) == 0);
        errno = 0;
        ctx = oni_create_ctx_driver(&onidrv_test);
        if (ctx) {
            UNIT_FAIL("ONI_TIMEOUTMS=\"%s\" was taken", bad[i]);
            oni_destroy_ctx(ctx);
        }
        CHECK_EQ(errno, EINVAL);
    }
    unsetenv("ONI_TIMEOUTMS");
    ctx = oni_create_ctx_driver(&onidrv_test);
    REQUIRE(ctx);
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_TIMEOUTMS, &v, &n), 0);
    CHECK_EQ(v, 0);
    oni_destroy_ctx(ctx);
}

/* ONI_TIMEOUTMS takes the whole range 1 .. 2^32 - 1 ms (docs/errors.md):
 * the ends are accepted as they are. Guards the upper bound (v > UINT32_MAX;
 * with >= the largest value made context creation fail). */
TEST(timeout_from_the_environment_edges)
{
    static const char *good[] = {"1", "4294967295"};
    static const uint32_t want[] = {1, 4294967295u};
    for (size_t i = 0; i < 2; i++) {
        REQUIRE(setenv("ONI_TIMEOUTMS", good[i], 1) == 0);
        oni_ctx ctx = oni_create_ctx_driver(&onidrv_test);
        if (!ctx) {
            UNIT_FAIL("ONI_TIMEOUTMS=\"%s\" was refused", good[i]);
            continue;
        }
        uint32_t v = 0;
        size_t n = sizeof v;
        CHECK_RC(oni_get_opt(ctx, ONI_OPT_TIMEOUTMS, &v, &n), 0);
        CHECK_EQ(v, want[i]);
        oni_destroy_ctx(ctx);
    }
    unsetenv("ONI_TIMEOUTMS");
}

/* BLOCKREADSIZE and BLOCKWRITESIZE go up to 1 GiB inclusive (ONI_MAXBLOCKSIZE,
 * docs/errors.md), one word more is refused. Setting them allocates nothing
 * (blocks are made at the next read or write, which this test does not do).
 * Guards both ceilings' comparisons. */
TEST(block_sizes_up_to_one_gib)
{
    oni_ctx ctx = fx_open(devs3, 3, 1);
    REQUIRE(ctx);
    uint32_t v = 1u << 30;
    size_t n = sizeof v;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &v, 4), 0);
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_BLOCKREADSIZE, &v, &n), 0);
    CHECK_EQ(v, 1u << 30);
    v = (1u << 30) + 4;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &v, 4), ONI_EINVALREADSIZE);
    v = 1u << 30;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_BLOCKWRITESIZE, &v, 4), 0);
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_BLOCKWRITESIZE, &v, &n), 0);
    CHECK_EQ(v, 1u << 30);
    v = (1u << 30) + 4;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_BLOCKWRITESIZE, &v, 4), ONI_EINVALWRITESIZE);
    oni_destroy_ctx(ctx);
}

/* The test driver, refusing to start (config RUNNING = 1) while refuse_running
 * is set; refusing_dctx: its context, for a look at the hardware's state. */
static int refuse_running;
static oni_driver_ctx refusing_dctx;

static int refusing_write_config(oni_driver_ctx c, oni_config_t k, oni_reg_val_t v)
{
    refusing_dctx = c;
    if (refuse_running && k == ONI_CONFIG_RUNNING && v)
        return ONI_EWRITEFAILURE;
    return onidrv_test.write_config(c, k, v);
}

/* An initialized context on that driver, refusing from now on (NULL if it
 * did not open). The table must outlive the context: static. */
static oni_ctx open_refusing(void)
{
    static struct oni_driver drv;
    drv = onidrv_test;
    drv.write_config = refusing_write_config;
    oni_ctx ctx = oni_create_ctx_driver(&drv);
    if (ctx && oni_init_ctx(ctx, -1)) {
        oni_destroy_ctx(ctx);
        ctx = NULL;
    }
    refuse_running = ctx != NULL;
    return ctx;
}

/* Whether ONI_OPT_RUNNING reads 0. */
static int reads_idle(oni_ctx ctx)
{
    uint32_t v = 1;
    size_t n = sizeof v;
    return oni_get_opt(ctx, ONI_OPT_RUNNING, &v, &n) == 0 && v == 0;
}

/* A start the driver refuses fails with the driver's error and leaves the
 * context as it was: ONI_OPT_RUNNING still reads 0, and BLOCKREADSIZE and
 * RESET (idle only) still work. Guards set_running's early return (without
 * it the state said running although the hardware never started). */
TEST(running_refused_by_the_driver_keeps_the_state)
{
    oni_ctx ctx = open_refusing();
    REQUIRE(ctx);
    uint32_t v = 1;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RUNNING, &v, 4), ONI_EWRITEFAILURE);
    refuse_running = 0;
    CHECK(reads_idle(ctx));
    v = 4096;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &v, 4), 0);
    v = 1;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RESET, &v, 4), 0);
    oni_destroy_ctx(ctx);
}

/* RESETACQCOUNTER = 2 is the hardware's reset-and-run alone, as upstream
 * passes it (api/liboni/oni.c:436): no RUNNING write follows (this driver
 * refuses every one), the hardware runs, ONI_OPT_RUNNING reads what the
 * hardware says (api/liboni/oni.c:239), the context stays IDLE so
 * BLOCKREADSIZE may still be set, and frames come. */
TEST(reset_and_run_is_the_register_write_alone)
{
    oni_ctx ctx = open_refusing();
    REQUIRE(ctx);
    uint32_t v = 2;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RESETACQCOUNTER, &v, 4), 0);
    CHECK(!reads_idle(ctx));
    v = 4096;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &v, 4), 0);
    oni_frame_t *f = NULL;
    CHECK(oni_read_frame(ctx, &f) > 0);
    oni_destroy_frame(f);
    refuse_running = 0;
    oni_destroy_ctx(ctx);
}

static int named(const char *s, const char *want)
{
    return s && !strcmp(s, want);
}

/* onix.h's names of device and hub ids are upstream's texts
 * (api/liboni/onix.c): neighbours in the tables keep their own, the first
 * and last entry of each table are found, an id without a name gives
 * upstream's "Unknown device" / "Unknown Hub". */
TEST(onix_id_names)
{
    CHECK(named(onix_device_str(ONIX_NULL), "Placeholder device: neither generates or accepts data"));
    CHECK(named(onix_device_str(ONIX_RHD2132), "Intan RHD2132 bioamplifier"));
    CHECK(named(onix_device_str(ONIX_RHD2164), "Intan RHD2164 bioamplifier"));
    CHECK(named(onix_device_str(ONIX_HEARTBEAT), "Heartbeat"));
    CHECK(named(onix_device_str(ONIX_PERSTHEARTBEAT), "Persistent heartbeat"));
    CHECK(named(onix_device_str(ONIX_DS90UB9RAW), "Raw DS90UB9x deserializer"));
    CHECK(named(onix_device_str((int)ONIX_ONIGPU_HUBMGR), "onigpu hub manager (private id)"));
    CHECK(named(onix_device_str(29), "Unknown device")); /* no id 29 in onix.h */
    CHECK(named(onix_device_str(12345), "Unknown device"));
    CHECK(named(onix_hub_str(ONIX_HUB_NULL), "Placeholder Hub"));
    CHECK(named(onix_hub_str(ONIX_HUB_HSNP2EB), "Open Ephys ONIX Headstage-Neuropixels2.0e-Beta"));
    CHECK(named(onix_hub_str(ONIX_HUB_HSNP2E), "Open Ephys ONIX Headstage-Neuropixels2.0e"));
    CHECK(named(onix_hub_str(ONIX_HUB_ACQBOARD3D), "Open Ephys 3D-capable Acquisition Board"));
    CHECK(named(onix_hub_str(11), "Unknown Hub"));
    /* onigpu's short names for its tools' tables (oni/names.h) */
    CHECK(named(onix_device_tag(ONIX_NULL), "NULL"));
    CHECK(named(onix_device_tag(ONIX_RHD2164), "RHD2164"));
    CHECK(named(onix_device_tag((int)ONIX_ONIGPU_HUBMGR), "HUBMGR"));
    CHECK(named(onix_device_tag(12345), "unknown"));
    CHECK(named(onix_hub_tag(ONIX_HUB_HSNP2E), "HSNP2E"));
    CHECK(named(onix_hub_tag(ONIX_HUB_ACQBOARD3D), "ACQBOARD3D"));
    CHECK(named(onix_hub_tag(11), "unknown"));
}

/* The clock's deadline helpers (oni/util/clock.h): milliseconds left round
 * up and stop at 0 and UINT32_MAX; a time as a timespec splits exactly. */
TEST(clock_deadline_helpers)
{
    uint64_t now = oni_now_ns();
    CHECK(now > 0 && oni_now_ns() >= now);
    CHECK_EQ(oni_ms_left(now - 1), 0);
    uint32_t left = oni_ms_left(now + 10000500000ull); /* 10 s and half a ms */
    CHECK(left >= 10000 && left <= 10001);
    CHECK_EQ(oni_ms_left(UINT64_MAX), UINT32_MAX);
    struct timespec ts;
    oni_timespec_at(1234567890123ull, &ts);
    CHECK_EQ(ts.tv_sec, 1234);
    CHECK_EQ(ts.tv_nsec, 567890123);
}
