/*
 * A background thread that refills machines made ahead (docker.so's warm
 * pool, local.so's spares): one lock that also guards the caller's own
 * state, a condition variable on CLOCK_MONOTONIC that wakes the thread (a
 * take, the stop), and the stop flag.
 *
 * The struct lives inside the caller's own (zeroed, e.g. by calloc).  Its
 * lock guards `stop` and whatever else the caller says it guards; the
 * thread holds it except while it works (a make, a remove), as the caller's
 * loop unlocks around those.
 */
#ifndef SG_PLUGINS_WORKER_H
#define SG_PLUGINS_WORKER_H

#include <pthread.h>
#include <stdbool.h>

struct mrec_worker {
	pthread_mutex_t lock;  /* guards stop, and the caller's own state */
	pthread_cond_t cond;   /* a wake, or the stop */
	pthread_t thread;
	bool running;          /* the thread was started and not yet joined */
	bool stop;             /* mrec_worker_stop() was called: set atomically under
	                        * lock, read under lock or by mrec_worker_stopping() */
};

/* Initialises w's lock and condition variable and starts the thread
 * fn(arg); whatever fn reaches through arg must be in place before (fn may
 * run before this returns).  w: zeroed, not yet started.  Returns 0, or -1
 * with errno set (pthread_create's error number: EAGAIN, ...) and w's lock
 * and condition variable destroyed again: no thread, nothing to stop. */
int mrec_worker_start(struct mrec_worker *w, void *(*fn)(void *), void *arg);

/* Sets stop, wakes the thread, joins it and destroys the lock and the
 * condition variable: after it the caller's state is its alone.  Called
 * without the lock, from another thread than w's.  A w that was never
 * started (running false): nothing. */
void mrec_worker_stop(struct mrec_worker *w);

/* Takes and gives back w's lock. */
void mrec_worker_lock(struct mrec_worker *w);
void mrec_worker_unlock(struct mrec_worker *w);

/* Waits, with the lock held (given up while it waits, held again on
 * return), up to s seconds of CLOCK_MONOTONIC for a wake or the stop (or
 * a spurious wakeup: the caller's loop looks again).  Returns at once when
 * stop is already set.  Returns whether stop is set. */
bool mrec_worker_wait(struct mrec_worker *w, unsigned s);

/* Wakes the thread from mrec_worker_wait (the caller's state changed);
 * called with the lock held. */
void mrec_worker_wake(struct mrec_worker *w);

/* Whether stop is set, without the lock (an atomic read: the thread asks
 * while it works without the lock). */
bool mrec_worker_stopping(struct mrec_worker *w);

#endif /* SG_PLUGINS_WORKER_H */
