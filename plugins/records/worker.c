/* A refill thread's lock, wakeups and stop (plugins/records/worker.h). */
#include "config.h"

#include <errno.h>
#include <time.h>

#include "plugins/records/worker.h"

int mrec_worker_start(struct mrec_worker *w, void *(*fn)(void *), void *arg)
{
	pthread_condattr_t ca;
	int rc;

	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_init(&ca);
	/* Timed waits that a change of the wall clock neither cuts nor stretches. */
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cond, &ca);
	pthread_condattr_destroy(&ca);
	rc = pthread_create(&w->thread, NULL, fn, arg);
	if (rc != 0) {
		pthread_cond_destroy(&w->cond);
		pthread_mutex_destroy(&w->lock);
		errno = rc;
		return -1;
	}
	w->running = true;
	return 0;
}

void mrec_worker_stop(struct mrec_worker *w)
{
	if (!w->running)
		return;
	pthread_mutex_lock(&w->lock);
	__atomic_store_n(&w->stop, true, __ATOMIC_RELEASE); /* read unlocked by _stopping() */
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	w->running = false;
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
}

void mrec_worker_lock(struct mrec_worker *w)
{
	pthread_mutex_lock(&w->lock);
}

void mrec_worker_unlock(struct mrec_worker *w)
{
	pthread_mutex_unlock(&w->lock);
}

bool mrec_worker_wait(struct mrec_worker *w, unsigned s)
{
	struct timespec ts;

	if (w->stop)
		return true;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += s;
	pthread_cond_timedwait(&w->cond, &w->lock, &ts);
	return w->stop;
}

void mrec_worker_wake(struct mrec_worker *w)
{
	pthread_cond_signal(&w->cond);
}

bool mrec_worker_stopping(struct mrec_worker *w)
{
	return __atomic_load_n(&w->stop, __ATOMIC_ACQUIRE);
}
