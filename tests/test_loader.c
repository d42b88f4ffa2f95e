/* test_loader.c - finding drivers: built-in first, then libonidriver_<name>.so
 * in $ONI_DRIVER_PATH or on the library search path; every failure. */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>
#include "drivers/fixture.h"
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
