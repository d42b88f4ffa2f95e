/* files.c - the benchmarks' scratch files (bench.h). */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdio.h>
#include "bench/bench.h"

static int rm_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb, (void)type, (void)ftw;
    return remove(path) ? -1 : 0;
}

int bench_rm_tree(const char *dir)
{
    /* depth first, not following links out of the tree */
    return nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS) ? -1 : 0;
}
