/* mkdirs.c - see mkdirs.h. */
#include "mkdirs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int make_dirs(const char *dir)
{
    char *p = strdup(dir);
    if (!p)
        return ENOMEM;
    int err = 0;
    for (char *s = p + 1; !err; s++) {
        if (*s != '/' && *s != 0)
            continue;
        char c = *s;
        *s = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            err = errno;
        *s = c;
        if (!c)
            break;
    }
    struct stat st;
    if (!err && (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)))
        err = ENOTDIR;
    free(p);
    return err;
}
