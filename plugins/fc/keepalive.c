/*
 * The keepalive worker (ref. 2.7): one thread, started on first use, sends
 * POST /sandboxes/{id}/timeout for the sandboxes queued by
 * machine_keepalive(), so a tool call never waits for it.  A failure is
 * logged, never fatal: the call it rode along with has its own answer.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/fc/fc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FC_KA_QUEUE_MAX 256

struct fc_ka_item {
	char id[FC_ID_MAX];
	unsigned lifetime_s;
	struct fc_ka_item *next;
};

struct fc_keepalive {
	struct fc_ctx *ctx;          /* borrowed */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct fc_ka_item *head;     /* owned queue, FIFO */
	unsigned queued;
	bool stop;
	bool started;
	pthread_t thread;
};

struct fc_keepalive *fc_keepalive_new(struct fc_ctx *ctx)
{
	struct fc_keepalive *ka = calloc(1, sizeof(*ka)); /* freed by fc_keepalive_free() */

	if (!ka)
		return NULL;
	ka->ctx = ctx;
	pthread_mutex_init(&ka->lock, NULL);
	pthread_cond_init(&ka->cond, NULL);
	return ka;
}

static void fc_ka_send(struct fc_ctx *ctx, const struct fc_ka_item *it)
{
	struct sg_err err;

	if (fc_api_set_timeout(ctx, it->id, it->lifetime_s, &err) == 0)
		return;
	/* A sandbox killed while its keepalive was on the way is no fault. */
	ctx->host->log(err.code == SG_E_GONE ? SG_LOG_DEBUG : SG_LOG_WARNING, FC_PLUGIN,
		       "keepalive of sandbox %s failed: %s", it->id, err.msg);
}

static void *fc_ka_main(void *arg)
{
	struct fc_keepalive *ka = arg;

	pthread_mutex_lock(&ka->lock);
	for (;;) {
		struct fc_ka_item *it;

		while (!ka->head && !ka->stop)
			pthread_cond_wait(&ka->cond, &ka->lock);
		if (ka->stop)
			break;
		it = ka->head;
		ka->head = it->next;
		ka->queued--;
		pthread_mutex_unlock(&ka->lock);
		fc_ka_send(ka->ctx, it);
		free(it);
		pthread_mutex_lock(&ka->lock);
	}
	pthread_mutex_unlock(&ka->lock);
	return NULL;
}

/* Called with ka->lock held.  An id already queued is updated in place. */
static bool fc_ka_update(struct fc_keepalive *ka, const char *id, unsigned lifetime_s)
{
	for (struct fc_ka_item *it = ka->head; it; it = it->next) {
		if (strcmp(it->id, id) == 0) {
			it->lifetime_s = lifetime_s;
			return true;
		}
	}
	return false;
}

void fc_keepalive_push(struct fc_keepalive *ka, const char *id, unsigned lifetime_s)
{
	struct fc_ka_item *it = NULL, **tail;

	pthread_mutex_lock(&ka->lock);
	if (ka->stop || fc_ka_update(ka, id, lifetime_s))
		goto out;
	if (ka->queued >= FC_KA_QUEUE_MAX) {
		ka->ctx->host->log(SG_LOG_WARNING, FC_PLUGIN,
				   "keepalive queue full: sandbox %s skipped this time", id);
		goto out;
	}
	if (!ka->started) {
		if (pthread_create(&ka->thread, NULL, fc_ka_main, ka) != 0) {
			ka->ctx->host->log(SG_LOG_WARNING, FC_PLUGIN,
					   "cannot start the keepalive thread: sandbox %s not kept alive", id);
			goto out;
		}
		ka->started = true;
	}
	it = calloc(1, sizeof(*it)); /* freed by the worker or fc_keepalive_free() */
	if (!it)
		goto out;
	snprintf(it->id, sizeof(it->id), "%s", id);
	it->lifetime_s = lifetime_s;
	for (tail = &ka->head; *tail; tail = &(*tail)->next)
		;
	*tail = it;
	ka->queued++;
	pthread_cond_signal(&ka->cond);
out:
	pthread_mutex_unlock(&ka->lock);
}

void fc_keepalive_forget(struct fc_keepalive *ka, const char *id)
{
	pthread_mutex_lock(&ka->lock);
	for (struct fc_ka_item **p = &ka->head; *p; p = &(*p)->next) {
		struct fc_ka_item *it = *p;

		if (strcmp(it->id, id) == 0) {
			*p = it->next;
			ka->queued--;
			free(it);
			break; /* an id is queued once (fc_ka_update) */
		}
	}
	pthread_mutex_unlock(&ka->lock);
}

void fc_keepalive_free(struct fc_keepalive *ka)
{
	if (!ka)
		return;
	pthread_mutex_lock(&ka->lock);
	ka->stop = true;
	pthread_cond_broadcast(&ka->cond);
	pthread_mutex_unlock(&ka->lock);
	if (ka->started)
		pthread_join(ka->thread, NULL); /* at most one request in flight */
	while (ka->head) {
		struct fc_ka_item *it = ka->head;

		ka->head = it->next;
		free(it);
	}
	pthread_cond_destroy(&ka->cond);
	pthread_mutex_destroy(&ka->lock);
	free(ka);
}
