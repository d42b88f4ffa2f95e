/* lean.c - a program as a user builds it against liboni (only <oni.h>, C99,
 * linked with -loni): the test driver runs with no CUDA runtime and no C++
 * runtime in the process, and the emu driver is found beside liboni.so with
 * no ONI_DRIVER_PATH set. Exit 0 when all holds, 1 with what failed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <oni.h>

/* 1 when a library whose name contains what is mapped into this process. */
static int mapped(const char *what)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[1024];
    int found = 0;
    if (!f)
        return -1;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, what) != NULL;
    fclose(f);
    return found;
}

/* Create and init a context on driver name; 0 when it names itself so. */
static int open_driver(const char *name, oni_ctx *out)
{
    oni_ctx ctx = oni_create_ctx(name);
    if (!ctx) {
        fprintf(stderr, "lean: oni_create_ctx(\"%s\") failed\n", name);
        return 1;
    }
    int rc = oni_init_ctx(ctx, -1);
    const oni_driver_info_t *info = oni_get_driver_info(ctx);
    if (rc || !info || strcmp(info->name, name) != 0) {
        fprintf(stderr, "lean: %s: init %d (%s), driver \"%s\"\n", name, rc, oni_error_str(rc),
                info ? info->name : "?");
        oni_destroy_ctx(ctx);
        return 1;
    }
    *out = ctx;
    return 0;
}

int main(void)
{
    oni_ctx ctx;
    int bad = 0;
    if (getenv("ONI_DRIVER_PATH")) {
        fprintf(stderr, "lean: ONI_DRIVER_PATH is set: the lookup beside liboni.so would go untested\n");
        return 1;
    }
    if (open_driver("test", &ctx))
        return 1;
    /* A sanitizer's runtime brings libstdc++ itself (libubsan needs it): there
     * only the CUDA runtime is looked for. */
#ifdef LEAN_SANITIZED
    static const char *const absent[] = {"libcudart", "libcuda.so"};
#else
    static const char *const absent[] = {"libcudart", "libcuda.so", "libstdc++"};
#endif
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++) {
        if (mapped(absent[i])) {
            fprintf(stderr, "lean: %s is loaded with the test driver running\n", absent[i]);
            bad = 1;
        }
    }
    oni_destroy_ctx(ctx);
    if (open_driver("emu", &ctx))
        return 1;
    oni_destroy_ctx(ctx);
    if (!bad)
        printf("lean: test driver without CUDA or C++ runtime; emu found beside liboni.so\n");
    return bad;
}
