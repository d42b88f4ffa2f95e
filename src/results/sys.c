/* sys.c - run a program of the machine and read its output (posix_spawn;
 * posix_spawn_file_actions_addchdir_np needs glibc 2.29 and _GNU_SOURCE, which
 * the build defines); close a written file. */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include "oni.h"
#include "sys.h"

extern char **environ;

/* Read fd to its end: the first len - 1 bytes into out, the rest dropped. */
static void drain(int fd, char *out, size_t len)
{
    size_t n = 0;
    char sink[4096];
    for (;;) {
        char *p = n + 1 < len ? out + n : sink;
        size_t room = n + 1 < len ? len - 1 - n : sizeof sink;
        ssize_t k = read(fd, p, room);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        if (p != sink)
            n += (size_t)k;
    }
    if (len)
        out[n] = 0;
}

int results_exec(const char *dir, char *const argv[], int fd, char *out, size_t len)
{
    int pipefd[2];
    if ((fd != 1 && fd != 2) || pipe2(pipefd, O_CLOEXEC) != 0)
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, fd == 1 ? 2 : 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], fd);
    if (dir)
        posix_spawn_file_actions_addchdir_np(&fa, dir);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(pipefd[1]);
    if (rc != 0) {
        close(pipefd[0]);
        if (len)
            out[0] = 0;
        return 127; /* glibc reports a failed exec (or chdir) here */
    }
    drain(pipefd[0], out, len);
    close(pipefd[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int results_close_written(FILE *f)
{
    int bad = ferror(f);
    return fclose(f) == 0 && !bad ? ONI_ESUCCESS : ONI_EPATHINVALID;
}
