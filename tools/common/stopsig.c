/* stopsig.c - see stopsig.h. */
#include "stopsig.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>

static struct watcher {
    sigset_t set;
    void (*on_stop)(void *);
    void *arg;
    pthread_t thread;
    int running;
} watcher;

static void *watch(void *p)
{
    struct watcher *w = p;
    for (;;) {
        int sig;
        if (sigwait(&w->set, &sig) == 0) {
            /* not cancelled halfway: on_stop may hold a lock or write a pipe */
            int was;
            pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &was);
            w->on_stop(w->arg);
            pthread_setcancelstate(was, NULL);
        }
    }
    return NULL;
}

int stopsig_start(void (*on_stop)(void *arg), void *arg)
{
    struct watcher *w = &watcher;
    if (w->running)
        return EBUSY;
    w->on_stop = on_stop;
    w->arg = arg;
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
    pthread_cancel(watcher.thread); /* sigwait is a cancellation point */
    pthread_join(watcher.thread, NULL);
    watcher.running = 0;
}
