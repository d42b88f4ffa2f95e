/* mkdirs.h - mkdir -p for the tools. */
#ifndef TOOLS_MKDIRS_H
#define TOOLS_MKDIRS_H

/* Make dir and its missing parents (mode 0777 less the umask). 0, or the
 * errno value of the first that could not be made (ENOTDIR: dir, or a
 * parent, is there but not a directory; ENOMEM). */
int make_dirs(const char *dir);

#endif
