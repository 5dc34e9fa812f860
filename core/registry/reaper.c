#include "config.h"

#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#include "core/base/log.h"
#include "core/registry/machine.h"
#include "core/registry/reaper.h"
#include "core/registry/usage.h"

static pthread_t reaper_thread;
static pthread_mutex_t reaper_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t reaper_cond;
static bool reaper_running, reaper_stop_flag;

static void *reaper_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&reaper_lock);
	while (!reaper_stop_flag) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&reaper_cond, &reaper_lock, &ts);
		if (reaper_stop_flag)
			break;
		pthread_mutex_unlock(&reaper_lock);
		sg_machine_save_touches();
		sg_machine_reap_expired();
		sg_usage_save();
		pthread_mutex_lock(&reaper_lock);
	}
	pthread_mutex_unlock(&reaper_lock);
	return NULL;
}

int sg_reaper_start(void)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&reaper_cond, &ca);
	pthread_condattr_destroy(&ca);
	reaper_stop_flag = false;
	if (pthread_create(&reaper_thread, NULL, reaper_main, NULL) != 0) {
		SG_ERROR("cannot start the expiry thread");
		return -1;
	}
	reaper_running = true;
	return 0;
}

void sg_reaper_stop(void)
{
	if (!reaper_running)
		return;
	pthread_mutex_lock(&reaper_lock);
	reaper_stop_flag = true;
	pthread_cond_signal(&reaper_cond);
	pthread_mutex_unlock(&reaper_lock);
	pthread_join(reaper_thread, NULL);
	pthread_cond_destroy(&reaper_cond);
	reaper_running = false;
	sg_usage_remove();
}
