/* test_loader.c - finding drivers: libonidriver_<name>.so in
 * $ONI_DRIVER_PATH first, then the built-in drivers, then beside liboni
 * (tests/liboni) or on the library search path; every failure. */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <unistd.h>
#include "ctx.h"
#include "drivers/fixture.h"
#include "oniemu.h"
#include "onigpu.h"
#include "unit.h"

/* CTest sets ONI_DRIVER_PATH to the build directory holding the fixtures. */
static const char *driver_dir(void) { return getenv(ONI_DRIVER_PATH_ENV); }

TEST(builtin_test_driver)
{
    char *saved = driver_dir() ? strdup(driver_dir()) : NULL;
    unsetenv(ONI_DRIVER_PATH_ENV); /* built-ins need no search path */
    oni_ctx ctx = oni_create_ctx("test");
    CHECK(ctx != NULL);
    if (ctx) {
        const oni_driver_info_t *info = oni_get_driver_info(ctx);
        CHECK(info && info->name && strcmp(info->name, "test") == 0);
        CHECK_RC(oni_destroy_ctx(ctx), 0);
    }
    /* Without the search path the fixture is not found. */
    errno = 0;
    CHECK(oni_create_ctx("scripted") == NULL);
    CHECK_EQ(errno, ENOENT);
    if (saved) {
        setenv(ONI_DRIVER_PATH_ENV, saved, 1);
        free(saved);
    }
}

TEST(shared_library_driver)
{
    if (!driver_dir())
        SKIP("ONI_DRIVER_PATH not set (run through ctest)");
    oni_ctx a = oni_create_ctx("scripted");
    oni_ctx b = oni_create_ctx("scripted");
    REQUIRE(a && b);
    const oni_driver_info_t *info = oni_get_driver_info(a);
    REQUIRE(info);
    CHECK(strcmp(info->name, "scripted") == 0);
    CHECK_EQ(info->major, 1);
    /* Two contexts on one library are independent. */
    CHECK_RC(fx_set_u32(a, SCR_OPT_INITRC, (uint32_t)ONI_EINIT), 0);
    oni_device_t d = {1, 10, 1, 4, 0};
    uint8_t sig[100];
    size_t len = fx_devtable(sig, sizeof sig, &d, 1);
    CHECK_RC(oni_set_driver_opt(b, SCR_OPT_DEVTABLE, sig, len), 0);
    CHECK_RC(oni_init_ctx(a, 0), ONI_EINIT);
    CHECK_RC(oni_init_ctx(b, 0), 0);
    CHECK_RC(oni_destroy_ctx(a), 0);
    CHECK_RC(oni_destroy_ctx(b), 0);
}

TEST(driver_not_found)
{
    errno = 0;
    CHECK(oni_create_ctx("no_such_driver") == NULL);
    CHECK_EQ(errno, ENOENT);
}

TEST(driver_missing_a_symbol)
{
    if (!driver_dir())
        SKIP("ONI_DRIVER_PATH not set (run through ctest)");
    errno = 0;
    CHECK(oni_create_ctx("missing") == NULL);
    CHECK_EQ(errno, EINVAL);
}

TEST(not_a_library)
{
    char dir[] = "/tmp/onitest_loader_XXXXXX";
    REQUIRE(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/libonidriver_junk.so", dir);
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fputs("not an ELF file\n", f);
    fclose(f);
    char *saved = driver_dir() ? strdup(driver_dir()) : NULL;
    setenv(ONI_DRIVER_PATH_ENV, dir, 1);
    errno = 0;
    CHECK(oni_create_ctx("junk") == NULL);
    CHECK_EQ(errno, ENOENT);
    if (saved) {
        setenv(ONI_DRIVER_PATH_ENV, saved, 1);
        free(saved);
    } else {
        unsetenv(ONI_DRIVER_PATH_ENV);
    }
    unlink(path);
    rmdir(dir);
}

TEST(bad_names)
{
    static const char *bad[] = {"", "a/b", "../scripted", "sp ace", "x.so",
                                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        errno = 0;
        CHECK(oni_create_ctx(bad[i]) == NULL);
        CHECK_EQ(errno, EINVAL);
    }
    errno = 0;
    CHECK(oni_create_ctx(NULL) == NULL);
    CHECK_EQ(errno, EINVAL);
}

/* Names up to 64 characters are names (not found here: ENOENT); 65 are not. */
TEST(longest_name)
{
    char name[66];
    memset(name, 'a', 64);
    name[64] = 0;
    errno = 0;
    CHECK(oni_create_ctx(name) == NULL);
    CHECK_EQ(errno, ENOENT);
    name[64] = 'a';
    name[65] = 0;
    errno = 0;
    CHECK(oni_create_ctx(name) == NULL);
    CHECK_EQ(errno, EINVAL);
}

/* A library in ONI_DRIVER_PATH wins over the built-in driver of the same
 * name: here the build directory's shadow/libonidriver_test.so, a driver
 * written for upstream that calls itself "test" as upstream's own test
 * driver does (one device, where the built-in test driver has its table of
 * testtable.c). Without it, "test" is the built-in one again. */
TEST(driver_path_wins_over_the_builtin)
{
    if (!driver_dir())
        SKIP("ONI_DRIVER_PATH not set (run through ctest)");
    char *saved = strdup(driver_dir());
    REQUIRE(saved);
    char dir[4096];
    REQUIRE((size_t)snprintf(dir, sizeof dir, "%s/shadow", saved) < sizeof dir);
    REQUIRE(setenv(ONI_DRIVER_PATH_ENV, dir, 1) == 0);
    struct oni_driver drv;
    void *dl = NULL;
    CHECK_RC(oni_load_driver("test", &drv, &dl), 0);
    CHECK(dl != NULL);
    CHECK(drv.info && strcmp(drv.info()->name, "test") == 0);
    if (dl)
        dlclose(dl);
    oni_ctx ctx = oni_create_ctx("test");
    REQUIRE(ctx);
    CHECK_RC(oni_init_ctx(ctx, 0), 0);
    uint32_t n = 0;
    size_t len = sizeof n;
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_NUMDEVICES, &n, &len), 0);
    CHECK_EQ(n, 1); /* the shadowing driver's table, not the built-in one */
    oni_destroy_ctx(ctx);
    REQUIRE(setenv(ONI_DRIVER_PATH_ENV, "/nonexistent-onigpu-dir", 1) == 0);
    dl = (void *)&drv;
    CHECK_RC(oni_load_driver("test", &drv, &dl), 0);
    CHECK(dl == NULL); /* nothing there: the built-in one */
    CHECK(drv.name && strcmp(drv.name, "test") == 0);
    REQUIRE(setenv(ONI_DRIVER_PATH_ENV, saved, 1) == 0);
    free(saved);
}

/* Without ONI_DRIVER_PATH the bare file name goes to dlopen's own search. The
 * library search path is fixed at start-up, but dlopen also finds a library
 * already loaded under that soname: load the fixture by its full path first. */
TEST(library_search_path_after_the_driver_path)
{
    if (!driver_dir())
        SKIP("ONI_DRIVER_PATH not set (run through ctest)");
    char path[4096];
    snprintf(path, sizeof path, "%s/libonidriver_scripted.so", driver_dir());
    void *held = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    REQUIRE(held);
    char *saved = strdup(driver_dir());
    unsetenv(ONI_DRIVER_PATH_ENV);
    oni_ctx ctx = oni_create_ctx("scripted");
    CHECK(ctx != NULL);
    if (ctx)
        CHECK_RC(oni_destroy_ctx(ctx), 0);
    setenv(ONI_DRIVER_PATH_ENV, saved, 1);
    free(saved);
    dlclose(held);
}

/* Every one of the 11 symbols is required: a library lacking any one is
 * refused with EINVAL (driver_missing_a_symbol covers oni_driver_info). */
TEST(library_lacking_any_symbol)
{
    if (!driver_dir())
        SKIP("ONI_DRIVER_PATH not set (run through ctest)");
    static const char *lacks[] = {"create_ctx", "destroy_ctx", "init", "read_stream", "write_stream",
                                  "read_config", "write_config", "set_opt_callback", "set_opt", "get_opt"};
    for (size_t i = 0; i < sizeof lacks / sizeof lacks[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "lacks_%s", lacks[i]);
        errno = 0;
        if (oni_create_ctx(name) != NULL || errno != EINVAL)
            UNIT_FAIL("%s: not refused with EINVAL (errno %d)", name, errno);
    }
}

/* A driver whose oni_driver_create_ctx fails (NULL) is refused with ENOMEM,
 * each time it is asked for. */
TEST(driver_create_ctx_failing)
{
    if (!driver_dir())
        SKIP("ONI_DRIVER_PATH not set (run through ctest)");
    for (int i = 0; i < 3; i++) {
        errno = 0;
        CHECK(oni_create_ctx("nullctx") == NULL);
        CHECK_EQ(errno, ENOMEM);
    }
}

/* A library onigpu built hands the loader its whole table: the options it
 * runs concurrently and those naming its machine's files survive loading
 * (the emu driver's library, linked under another name so that the
 * built-in emu does not win). A table of another layout is refused. */
TEST(onigpu_library_keeps_its_table)
{
    if (!driver_dir())
        SKIP("ONI_DRIVER_PATH not set (run through ctest)");
    char lib[4096], dir[] = "/tmp/test_loader.XXXXXX", link[4200];
    snprintf(lib, sizeof lib, "%s/libonidriver_emu.so", driver_dir());
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    REQUIRE(h);
    const struct oni_driver *(*table)(size_t);
    *(void **)&table = dlsym(h, ONI_DRIVER_TABLE_SYM);
    REQUIRE(table);
    CHECK(table(sizeof(struct oni_driver) - 1) == NULL);
    REQUIRE(mkdtemp(dir));
    snprintf(link, sizeof link, "%s/libonidriver_emucopy.so", dir);
    REQUIRE(symlink(lib, link) == 0);
    char *saved = strdup(driver_dir());
    setenv(ONI_DRIVER_PATH_ENV, dir, 1);
    struct oni_driver drv;
    void *dl = NULL;
    CHECK_RC(oni_load_driver("emucopy", &drv, &dl), 0);
    if (dl) {
        CHECK(drv.concurrent_opt && drv.concurrent_opt(ONI_DRV_READ));
        CHECK(drv.local_opt && drv.local_opt(ONI_DRV_EMU_TRUTH_FILE));
        CHECK(drv.local_opt && !drv.local_opt(ONI_DRV_EMU_SPEC));
        dlclose(dl);
    }
    setenv(ONI_DRIVER_PATH_ENV, saved, 1);
    free(saved);
    unlink(link);
    rmdir(dir);
    dlclose(h);
}
