/* stopsig.c - see stopsig.h. */
#include "stopsig.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

static struct watcher {
    sigset_t set;
    void (*on_stop)(void *);
    void *arg;
    pthread_t thread;
    int running;        /* main's only */
    atomic_int ending;  /* the next signal is stopsig_end's */
} watcher;

static void *watch(void *p)
{
    struct watcher *w = p;
    for (;;) {
        int sig;
        if (sigwait(&w->set, &sig))
            continue;
        if (atomic_load(&w->ending))
            return NULL;
        w->on_stop(w->arg);
    }
}

int stopsig_start(void (*on_stop)(void *arg), void *arg)
{
    struct watcher *w = &watcher;
    if (w->running)
        return EBUSY;
    w->on_stop = on_stop;
    w->arg = arg;
    atomic_store(&w->ending, 0);
    sigemptyset(&w->set);
    sigaddset(&w->set, SIGINT);
    sigaddset(&w->set, SIGTERM);
    sigset_t old;
    int rc = pthread_sigmask(SIG_BLOCK, &w->set, &old);
    if (rc)
        return rc;
    if ((rc = pthread_create(&w->thread, NULL, watch, w))) {
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        return rc;
    }
    w->running = 1;
    return 0;
}

void stopsig_end(void)
{
    if (!watcher.running)
        return;
    atomic_store(&watcher.ending, 1);
    pthread_kill(watcher.thread, SIGTERM); /* to the watcher alone: it returns */
    pthread_join(watcher.thread, NULL);
    watcher.running = 0;
}
