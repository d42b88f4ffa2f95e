/* daemon_spawn.h - start the built onix-emu daemon for a test, on a socket
 * of the test's own, connect to it and stop it (test_daemon.c, xfer_daemon.h). */
#ifndef DAEMON_SPAWN_H
#define DAEMON_SPAWN_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

/* A connection to the daemon's socket at path, or -1. */
static inline int daemon_connect(const char *path)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a) == 0)
        return s;
    if (s >= 0)
        close(s);
    return -1;
}

/* Start $ONIGPU_BIN/onix-emu serving spec on socket path, allowed nofile
 * descriptors (0: no limit). Returns its pid once it accepts connections,
 * 0 when there is no built daemon, -1 when it did not start within 10 s
 * (CUDA's start or a sanitized build on a loaded machine takes seconds).
 * The daemon dies with the test (PR_SET_PDEATHSIG), even one that died
 * before the daemon had set that up. */
static inline pid_t daemon_spawn(const char *path, const char *spec, rlim_t nofile)
{
    const char *bin = getenv("ONIGPU_BIN");
    char exe[4096];
    if (!bin || snprintf(exe, sizeof exe, "%s/onix-emu", bin) >= (int)sizeof exe || access(exe, X_OK))
        return 0;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127); /* the test died before the line above */
        struct rlimit lim = {nofile, nofile};
        if (nofile && setrlimit(RLIMIT_NOFILE, &lim))
            _exit(127);
        execl(exe, exe, "--socket", path, "--spec", spec, (char *)NULL);
        _exit(127);
    }
    if (pid < 0)
        return -1;
    for (int i = 0; i < 1000; i++) {
        int s = daemon_connect(path);
        if (s >= 0) {
            close(s);
            return pid;
        }
        if (waitpid(pid, NULL, WNOHANG) == pid)
            return -1;
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

/* Send sig to the daemon at pid (its socket: path) and reap it: its wait
 * status, or -1 when it had not exited 20 s later; it is then killed and its
 * socket removed, so that a daemon that ignores a stop fails a check rather
 * than hangs the suite. */
static inline int daemon_stop(pid_t pid, int sig, const char *path)
{
    int status = -1;
    kill(pid, sig);
    pid_t got = 0;
    for (int i = 0; i < 4000 && (got = waitpid(pid, &status, WNOHANG)) == 0; i++)
        usleep(5000);
    if (got == 0) {
        fprintf(stderr, "  the daemon (pid %d) did not exit within 20 s of signal %d: killed\n", (int)pid, sig);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        unlink(path);
        status = -1;
    }
    return status;
}

#endif
