/*
 * Kills that keep no caller waiting (docker_kill_group_later).  A command
 * on the plain path that times out is killed with an exec of its own, and
 * that exec shared the command's deadline, all but spent by then (the
 * 800 ms after the timeout a caller is promised its answer in): under a
 * slow engine the kill's requests gave up and the command ran on in the
 * sandbox.  Here one thread does the kills in order, each with
 * DOCKER_KILL_TIMEOUT_MS of its own (docker_kill_group, run with no
 * deadline on this thread), while the caller answers on time.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/docker/docker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/docker/engine.h"

#define DOCKER_KILLS_MAX 64          /* queued at once; beyond, a kill is done at once */
#define DOCKER_KILLS_STOP_MS 10000   /* what is queued at the stop gets this, in all */

struct docker_kill {
	char cid[DOCKER_ID_MAX];
	long pgid;
	char *sh;                    /* owned, or NULL: /bin/sh */
	struct docker_kill *next;
};

void docker_killer_init(struct docker_killer *k)
{
	memset(k, 0, sizeof(*k));
	pthread_mutex_init(&k->lock, NULL);
	pthread_cond_init(&k->cond, NULL);
	k->tail = &k->head;
}

static void *killer_main(void *arg)
{
	struct docker_ctx *ctx = arg;
	struct docker_killer *k = &ctx->killer;

	pthread_mutex_lock(&k->lock);
	for (;;) {
		struct docker_kill *it;

		while (!k->head && !k->stop)
			pthread_cond_wait(&k->cond, &k->lock);
		if (!k->head)
			break; /* stopped, and nothing left */
		it = k->head;
		k->head = it->next;
		if (!k->head)
			k->tail = &k->head;
		k->queued--;
		/* At the stop, what is left shares one deadline: a hung engine
		 * cannot hold the exit a kill's timeout per kill. */
		docker_engine_deadline(k->stop ? k->stop_deadline : 0);
		pthread_mutex_unlock(&k->lock);
		docker_kill_group(ctx, it->cid, it->pgid, it->sh);
		free(it->sh);
		free(it);
		pthread_mutex_lock(&k->lock);
	}
	pthread_mutex_unlock(&k->lock);
	return NULL;
}

/* Called with k->lock held.  Returns true when the kill was queued. */
static bool killer_queue(struct docker_ctx *ctx, struct docker_kill *it)
{
	struct docker_killer *k = &ctx->killer;

	if (k->stop || k->queued >= DOCKER_KILLS_MAX)
		return false;
	if (!k->started) {
		if (pthread_create(&k->thread, NULL, killer_main, ctx) != 0)
			return false;
		k->started = true;
	}
	*k->tail = it;
	k->tail = &it->next;
	k->queued++;
	pthread_cond_signal(&k->cond);
	return true;
}

void docker_kill_group_later(struct docker_ctx *ctx, const char *cid, long pgid, const char *sh)
{
	struct docker_kill *it;
	bool queued = false;

	if (pgid <= 1)
		return;
	it = calloc(1, sizeof(*it)); /* freed by killer_main() */
	if (it && (!sh || (it->sh = strdup(sh)))) {
		snprintf(it->cid, sizeof(it->cid), "%s", cid);
		it->pgid = pgid;
		pthread_mutex_lock(&ctx->killer.lock);
		queued = killer_queue(ctx, it);
		pthread_mutex_unlock(&ctx->killer.lock);
	}
	if (queued)
		return;
	if (it)
		free(it->sh);
	free(it);
	/* no memory, no thread, a full queue or the stop: at once, as before */
	docker_kill_group(ctx, cid, pgid, sh);
}

void docker_killer_stop(struct docker_ctx *ctx)
{
	struct docker_killer *k = &ctx->killer;

	pthread_mutex_lock(&k->lock);
	k->stop = true;
	k->stop_deadline = docker_now_ms() + DOCKER_KILLS_STOP_MS;
	pthread_cond_broadcast(&k->cond);
	pthread_mutex_unlock(&k->lock);
	if (k->started)
		pthread_join(k->thread, NULL);
	k->started = false;
	pthread_cond_destroy(&k->cond);
	pthread_mutex_destroy(&k->lock);
}
