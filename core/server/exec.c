/* The executor (core/server/exec.h). */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#include "core/base/conf.h"
#include "core/base/mem.h"
#include "core/server/exec.h"

/* At most POOL_IDLE_MAX workers wait for a job, each at most POOL_IDLE_S
 * seconds.  Everything below is under lock. */
#define POOL_IDLE_MAX 4
#define POOL_IDLE_S 60
#define WORKER_STACK (256 * 1024)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER; /* running or threads fell */
static pthread_cond_t pool_cond = PTHREAD_COND_INITIALIZER; /* a job for a waiting worker */
static int running;                  /* admitted jobs */
static struct sg_exec_job *queued;   /* handed to waiting workers */
static int idle, n_queued, threads;
static bool stopping;

int sg_exec_admit(void)
{
	int max = (int)sg_config_int("server", "max_calls", 256), rc = -1;

	pthread_mutex_lock(&lock);
	if (running < max) {
		running++;
		rc = 0;
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

/* Called with lock held. */
static void release_locked(void)
{
	running--;
	pthread_cond_broadcast(&done_cond);
}

static void *worker(void *arg)
{
	struct sg_exec_job *job = arg;

	for (;;) {
		struct timespec until;

		bool last;

		job->run(job);
		pthread_mutex_lock(&lock);
		release_locked();
		last = running == 0;
		pthread_mutex_unlock(&lock);
		/* The last call of a burst ends: its threads' freed memory
		 * goes back to the system. */
		if (last)
			sg_mem_trim_idle();
		pthread_mutex_lock(&lock);
		job = NULL;
		if (!stopping && idle < POOL_IDLE_MAX) {
			idle++;
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_sec += POOL_IDLE_S;
			while (!queued && !stopping &&
			       pthread_cond_timedwait(&pool_cond, &lock, &until) != ETIMEDOUT)
				;
			idle--;
			job = queued;
			if (job) {
				queued = job->next;
				n_queued--;
			}
		}
		if (!job) {
			threads--;
			pthread_cond_broadcast(&done_cond);
			pthread_mutex_unlock(&lock);
			return NULL;
		}
		pthread_mutex_unlock(&lock);
	}
}

int sg_exec_start(struct sg_exec_job *job, bool here)
{
	pthread_attr_t attr;
	pthread_t th;
	int rc;

	if (here) {
		job->run(job);
		pthread_mutex_lock(&lock);
		release_locked();
		pthread_mutex_unlock(&lock);
		return 0;
	}
	pthread_mutex_lock(&lock);
	if (idle > n_queued) {
		job->next = queued;
		queued = job;
		n_queued++;
		pthread_mutex_unlock(&lock);
		/* Signalled after the unlock: woken with the lock still held,
		 * the worker would only block on it and be woken again. */
		pthread_cond_signal(&pool_cond);
		return 0;
	}
	threads++;
	pthread_mutex_unlock(&lock);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, WORKER_STACK);
	rc = pthread_create(&th, &attr, worker, job);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		pthread_mutex_lock(&lock);
		threads--;
		release_locked();
		pthread_mutex_unlock(&lock);
		return -1;
	}
	return 0;
}

void sg_exec_drain(void)
{
	pthread_mutex_lock(&lock);
	while (running > 0)
		pthread_cond_wait(&done_cond, &lock);
	stopping = true;
	pthread_cond_broadcast(&pool_cond);
	while (threads > 0 && running == 0)
		pthread_cond_wait(&done_cond, &lock);
	stopping = false;
	pthread_mutex_unlock(&lock);
}
