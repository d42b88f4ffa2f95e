/* stopsig.h - SIGINT and SIGTERM for onigpu's commands, taken on one thread
 * of their own.
 *
 * A process-directed signal goes to any thread that does not block it, and
 * its handler runs there in signal context. The commands instead block both
 * signals in every thread and take them with sigwait on one thread, where the
 * stop action runs as ordinary code. Delivery then does not depend on which
 * thread the kernel picks: TSan defers a handler to its thread's next
 * intercepted call and drops it when that thread ends first (the former onix-emu
 * daemon missed 3 SIGTERMs in 1000 starts on a loaded machine, the CI of 2026-11-25). */
#ifndef TOOLS_STOPSIG_H
#define TOOLS_STOPSIG_H

/* Block SIGINT and SIGTERM in the calling thread, and so in every thread it
 * starts afterwards, and start a thread that calls on_stop(arg) for
 * each of them that arrives. Call it before the process starts any other
 * thread (one started earlier could still take the signals). 0, or an errno
 * value (the mask is then as it was). One at a time per process. */
int stopsig_start(void (*on_stop)(void *arg), void *arg);

/* End the thread stopsig_start started, once on_stop is no longer wanted
 * (the signals stay blocked: one that comes later is ignored). Then no
 * thread of ours is left at exit, where a TSan build would wait 1 s for it.
 * Does nothing when there is no such thread. */
void stopsig_end(void);

#endif
