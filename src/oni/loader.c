/* loader.c - find a driver by name: libonidriver_<name>.so in
 * $ONI_DRIVER_PATH first, then the built-in drivers, then the library next to
 * the liboni that holds this loader, then the library search path
 * (oni/driver.h, docs/drivers.md). */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ctx.h"

#define MAXNAME 64

/* Names become file names: plain characters only, so that no name can reach
 * outside the search directories. */
static int valid_name(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > MAXNAME)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

/* Fill drv from the library: the whole table of a driver onigpu built
 * (export.c), else its 11 upstream symbols; 0 or EINVAL. */
static int bind_symbols(void *dl, struct oni_driver *drv)
{
    const struct oni_driver *(*table)(size_t);
    *(void **)&table = dlsym(dl, ONI_DRIVER_TABLE_SYM);
    const struct oni_driver *t = table ? table(sizeof *t) : NULL;
    if (t) {
        *drv = *t;
        drv->name = NULL; /* it names itself through info(), as any other */
        return oni_driver_complete(drv) ? 0 : EINVAL;
    }
    /* POSIX guarantees function pointers survive the trip through void *. */
#define SYM(field, sym) *(void **)&drv->field = dlsym(dl, sym)
    SYM(create_ctx, "oni_driver_create_ctx");
    SYM(destroy_ctx, "oni_driver_destroy_ctx");
    SYM(init, "oni_driver_init");
    SYM(read_stream, "oni_driver_read_stream");
    SYM(write_stream, "oni_driver_write_stream");
    SYM(read_config, "oni_driver_read_config");
    SYM(write_config, "oni_driver_write_config");
    SYM(set_opt_callback, "oni_driver_set_opt_callback");
    SYM(set_opt, "oni_driver_set_opt");
    SYM(get_opt, "oni_driver_get_opt");
    SYM(info, "oni_driver_info");
#undef SYM
    drv->name = NULL; /* an external driver names itself through info() */
    drv->concurrent_opt = NULL; /* and gets its options one at a time */
    drv->local_opt = NULL;
    return oni_driver_complete(drv) ? 0 : EINVAL;
}

/* The library file in the directory of the object that holds this code
 * (liboni.so; the program itself when linked statically), so that a program
 * linked with -loni finds the drivers installed beside it. NULL if none. */
static void *open_beside_liboni(const char *file, char *path, size_t cap)
{
    Dl_info at;
    if (!dladdr((void *)open_beside_liboni, &at) || !at.dli_fname)
        return NULL;
    const char *slash = strrchr(at.dli_fname, '/');
    if (!slash)
        return NULL; /* no directory named: nothing beside it to look in */
    int dir = (int)(slash - at.dli_fname);
    if ((size_t)snprintf(path, cap, "%.*s/%s", dir, at.dli_fname, file) >= cap)
        return NULL;
    return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

int oni_load_driver(const char *name, struct oni_driver *drv, void **dl)
{
    if (!valid_name(name))
        return EINVAL;
    char file[MAXNAME + 32], path[4096];
    snprintf(file, sizeof file, "libonidriver_%s.so", name);
    void *h = NULL;
    /* The explicit directory wins over everything, the built-in drivers
     * included: a driver put there on purpose (upstream's own test driver,
     * "test") must not be shadowed by one of the same name built in. */
    const char *dir = getenv(ONI_DRIVER_PATH_ENV);
    if (dir && *dir && (size_t)snprintf(path, sizeof path, "%s/%s", dir, file) < sizeof path)
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    for (const struct oni_driver *const *b = oni_builtin_drivers; !h && *b; b++) {
        if ((*b)->name && strcmp((*b)->name, name) == 0) {
            *drv = **b;
            *dl = NULL;
            return 0;
        }
    }
    if (!h)
        h = open_beside_liboni(file, path, sizeof path);
    if (!h)
        h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return ENOENT;
    if (bind_symbols(h, drv)) {
        dlclose(h);
        return EINVAL;
    }
    *dl = h;
    return 0;
}
