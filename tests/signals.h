/* signals.h - for tests that send a signal to one thread of a child process
 * (a process-directed signal goes to any thread that does not block it, and
 * a handler must work on every one). Linux /proc only. */
#ifndef TESTS_SIGNALS_H
#define TESTS_SIGNALS_H

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
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

/* A thread of pid other than its main thread that does not block sig (TSan's
 * own thread blocks all); 0 when there is none. */
static pid_t other_thread_taking(pid_t pid, int sig)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
    DIR *d = opendir(dir);
    pid_t tid = 0;
    for (struct dirent *e; d && (e = readdir(d)) && !tid;) {
        pid_t t = (pid_t)atoi(e->d_name);
        if (t > 0 && t != pid && !sig_bit(proc_sigmask(pid, t, "SigBlk"), sig))
            tid = t;
    }
    if (d)
        closedir(d);
    return tid;
}

/* Send sig to thread tid of pid only; 0 or -1 (errno). */
static int send_to_thread(pid_t pid, pid_t tid, int sig) { return (int)syscall(SYS_tgkill, pid, tid, sig); }

#endif
