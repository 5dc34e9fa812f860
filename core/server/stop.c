/* How a server ends (core/server/stop.h). */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/base/log.h"
#include "core/base/util.h"
#include "core/protocol/session.h"
#include "core/registry/audit.h"
#include "core/registry/machine.h"
#include "core/server/stop.h"

/* How long the audit batch may take to be written on the way out. */
#define FLUSH_MS 1000

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void (*on_first)(int sig);
static int signals;       /* received so far */
static bool begun;        /* sg_stop_begin() ran */
static int64_t deadline;  /* the watchdog's, sg_now_ms() clock */

static void stop_set(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGHUP);
}

void sg_stop_block_signals(void)
{
	sigset_t set;

	stop_set(&set);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
}

_Noreturn void sg_stop_now(int code, const char *why, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, why);
	vsnprintf(msg, sizeof(msg), why, ap);
	va_end(ap);
	SG_WARN("%s", msg);
	if (sg_audit_flush(FLUSH_MS) < 0)
		SG_WARN("the audit rows of the last %d ms may be lost: the database did not answer within %d ms",
			100, FLUSH_MS);
	sg_machine_sweep_reap();
	_exit(code);
}

static void *signal_main(void *arg)
{
	sigset_t set;

	(void)arg;
	stop_set(&set);
	for (;;) {
		int sig = sigwaitinfo(&set, NULL), n;

		if (sig < 0)
			continue; /* EINTR */
		pthread_mutex_lock(&lock);
		n = ++signals;
		pthread_mutex_unlock(&lock);
		if (n > 1)
			sg_stop_now(128 + sig, "signal %d received again: ending at once (calls, sandboxes and sessions left as they are; the next sandgate reaps the sandboxes)",
				    sig);
		on_first(sig);
	}
	return NULL;
}

int sg_stop_signals_start(void (*first)(int sig))
{
	pthread_attr_t attr;
	pthread_t th;
	int rc;

	on_first = first;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	rc = pthread_create(&th, &attr, signal_main, NULL);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		SG_ERROR("cannot start the signal thread: %s", strerror(rc));
		return -1;
	}
	return 0;
}

static void *watchdog_main(void *arg)
{
	(void)arg;
	for (;;) {
		int64_t left = deadline - sg_now_ms();
		struct timespec ts;

		if (left <= 0)
			break;
		ts.tv_sec = left / 1000;
		ts.tv_nsec = (left % 1000) * 1000000L;
		nanosleep(&ts, NULL);
	}
	sg_stop_now(0, "the stop is still not done %d s after the grace period: abandoning what is still blocked (a call, a clean-up or a backend that does not answer); the next sandgate reaps the sandboxes left",
		    SG_STOP_SLACK_MS / 1000);
}

void sg_stop_begin(int grace_ms)
{
	pthread_attr_t attr;
	pthread_t th;
	bool start;

	pthread_mutex_lock(&lock);
	start = !begun;
	if (start) {
		begun = true;
		deadline = sg_now_ms() + (grace_ms > 0 ? grace_ms : 0) + SG_STOP_SLACK_MS;
	}
	pthread_mutex_unlock(&lock);
	if (!start)
		return;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	if (pthread_create(&th, &attr, watchdog_main, NULL) != 0)
		SG_WARN("cannot start the stop's watchdog: a stop blocked in a backend may not end");
	pthread_attr_destroy(&attr);
}

void sg_stop_exit_if_abandoned(int code)
{
	int n = sg_session_abandoned();

	if (n > 0)
		sg_stop_now(code, "%d call(s) did not end after their cancellation: abandoned; ending without them", n);
}
