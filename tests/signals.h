/* signals.h - for tests of how a child process takes signals: which of its
 * threads could take one (a process-directed signal goes to any thread that
 * does not block it). Linux /proc only. */
#ifndef TESTS_SIGNALS_H
#define TESTS_SIGNALS_H

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* The mask named field ("SigBlk", "SigCgt") in the status file of thread tid
 * of pid (tid = pid: the process); all ones when it cannot be read. */
static unsigned long long proc_sigmask(pid_t pid, pid_t tid, const char *field)
{
    char p[64], line[256], key[16];
    snprintf(p, sizeof p, "/proc/%d/task/%d/status", (int)pid, (int)tid);
    snprintf(key, sizeof key, "%s: %%llx", field);
    FILE *f = fopen(p, "r");
    unsigned long long mask = ~0ull;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, key, &mask) == 1)
            break;
    if (f)
        fclose(f);
    return mask;
}

static int sig_bit(unsigned long long mask, int sig) { return (int)((mask >> (sig - 1)) & 1); }

/* How many threads of pid, main included, do not block sig (TSan's own
 * thread blocks all); -1 when that cannot be read. A thread in sigwait for
 * sig counts: the kernel unblocks what it waits for while it waits. */
static int threads_taking(pid_t pid, int sig)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        pid_t t = (pid_t)atoi(e->d_name);
        n += t > 0 && !sig_bit(proc_sigmask(pid, t, "SigBlk"), sig);
    }
    closedir(d);
    return n;
}

/* How many threads pid has now; 0 when that cannot be read. */
static int thread_count(pid_t pid)
{
    char p[64], line[256];
    snprintf(p, sizeof p, "/proc/%d/status", (int)pid);
    FILE *f = fopen(p, "r");
    int n = 0;
    while (f && fgets(line, sizeof line, f) && sscanf(line, "Threads: %d", &n) != 1)
        ;
    if (f)
        fclose(f);
    return n;
}

#endif
