/*
 * docker_stop, docker_start, docker_restart and docker_remove on a machine
 * the core resolved for the caller.  Its shells end before a stop or a
 * restart (they would die half-way); a start checks first that the
 * container's mounts are still the directories sandgate made (mounts.c);
 * a stop is remembered in the machine's record, so a restarted sandgate
 * does not start it again on its own.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/docker/docker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DOCKER_STOP_DEFAULT_S 10

/* What the container was made with: its scope and name (labels). */
static int docker_labels_of(struct docker_ctx *ctx, const char *id, struct docker_scope *sc,
			    char *name, size_t size, json_t **info, struct sg_err *err)
{
	const json_t *labels;

	if (docker_container_inspect(ctx, id, info, err) < 0)
		return -1;
	labels = json_object_get(json_object_get(*info, "Config"), "Labels");
	docker_scope_labels(ctx, labels, sc);
	snprintf(name, size, "%s", json_string_value(json_object_get(labels, DOCKER_LABEL_NAME)) ?: "");
	return 0;
}

static void docker_keep_stopped(struct docker_ctx *ctx, struct sg_machine *m, bool stopped)
{
	json_t *k = json_pack("{s:b}", "stopped", stopped);

	if (ctx->host->machine_keep(m, k) < 0)
		ctx->host->log(SG_LOG_WARNING, DOCKER_PLUGIN, "could not remember that %s is %s",
			       m->id, stopped ? "stopped" : "started");
	json_decref(k);
}

static unsigned docker_timeout_param(const json_t *params)
{
	const json_t *t = json_object_get(params, "timeout");

	return json_is_integer(t) ? (unsigned)json_integer_value(t) : DOCKER_STOP_DEFAULT_S;
}

/* POST /containers/{id}/<verb>?t=secs.  304 (already so) is success. */
static int docker_post_verb(struct docker_ctx *ctx, const char *id, const char *verb, unsigned secs,
			    struct sg_err *err)
{
	char path[DOCKER_ID_MAX + 64], what[64];
	json_t *reply = NULL;
	long status;
	int rc;

	snprintf(path, sizeof(path), "/containers/%s/%s?t=%u", id, verb, secs);
	if (docker_engine_json(ctx->engine, "POST", path, NULL, &status, &reply, err) < 0)
		return -1;
	snprintf(what, sizeof(what), "docker %s", verb);
	rc = status == 204 || status == 304 ? 0 :
	     status == 404 ? ctx->host->errf(err, SG_E_GONE, "container %.12s is gone", id) :
	     docker_engine_fail(ctx->engine, err, SG_E_BACKEND, what, status, reply);
	json_decref(reply);
	return rc;
}

int docker_act_stop(void *priv, struct sg_machine *m, const json_t *params, struct sg_call *call,
		    json_t **result, struct sg_err *err)
{
	struct docker_ctx *ctx = priv;

	(void)call;
	ctx->host->shells_close(m);
	if (docker_post_verb(ctx, m->id, "stop", docker_timeout_param(params), err) < 0)
		return -1;
	docker_keep_stopped(ctx, m, true);
	*result = json_pack("{s:s}", "status", "stopped");
	return 0;
}

int docker_act_start(void *priv, struct sg_machine *m, const json_t *params, struct sg_call *call,
		     json_t **result, struct sg_err *err)
{
	struct docker_ctx *ctx = priv;

	(void)params;
	(void)call;
	if (docker_container_start(ctx, m->id, err) < 0)
		return -1;
	docker_keep_stopped(ctx, m, false);
	*result = docker_after_start(ctx, m->id);
	if (!*result)
		*result = json_pack("{s:s}", "status", "unknown");
	return 0;
}

int docker_act_restart(void *priv, struct sg_machine *m, const json_t *params, struct sg_call *call,
		       json_t **result, struct sg_err *err)
{
	struct docker_ctx *ctx = priv;
	json_t *info = NULL;
	int rc;

	(void)call;
	ctx->host->shells_close(m);
	if (docker_container_inspect(ctx, m->id, &info, err) < 0)
		return -1;
	rc = docker_mounts_verify(ctx, info, err);
	json_decref(info);
	if (rc < 0 || docker_post_verb(ctx, m->id, "restart", docker_timeout_param(params), err) < 0)
		return -1;
	docker_keep_stopped(ctx, m, false);
	*result = docker_after_start(ctx, m->id);
	if (!*result)
		*result = json_pack("{s:s}", "status", "unknown");
	if (json_object_get(*result, "error"))
		json_object_set_new(*result, "error", json_string(
			"the container does not run after restart: see exit_code and logs"));
	return 0;
}

/* Empties /share/<name> from inside the container (what it wrote there is
 * root's), so the host directory can go. */
static void docker_purge_inside(struct docker_ctx *ctx, struct sg_machine *m, const char *name)
{
	const char *argv[] = { "/bin/sh", "-c",
			       "cd \"/share/$1\" 2>/dev/null && find . -mindepth 1 -delete 2>/dev/null; exit 0",
			       "sg", name, NULL };
	struct docker_run r = { .argv = argv, .cwd = "/", .cap = 4096, .group = true,
				.timeout_ms = ctx->api_timeout_s * 1000u };
	struct sg_exec_result res;
	struct sg_err e;

	memset(&res, 0, sizeof(res));
	docker_run_for(m, &r);
	if (docker_run(ctx, m->id, &r, NULL, &res, &e) < 0)
		ctx->host->log(SG_LOG_DEBUG, DOCKER_PLUGIN, "purge inside %s: %s", m->id, e.msg);
	ctx->host->buf_release(&res.out);
	ctx->host->buf_release(&res.err);
}

int docker_act_remove(void *priv, struct sg_machine *m, const json_t *params, struct sg_call *call,
		      json_t **result, struct sg_err *err)
{
	struct docker_ctx *ctx = priv;
	bool purge = json_is_true(json_object_get(params, "purge"));
	struct docker_scope sc;
	char name[DOCKER_ID_MAX] = "", share[DOCKER_PATH_MAX], rel[DOCKER_PATH_MAX];
	json_t *info = NULL, *r;
	struct sg_err ierr, perr;
	bool have = false, running = false;

	if (docker_labels_of(ctx, m->id, &sc, name, sizeof(name), &info, &ierr) == 0) {
		have = *name != '\0';
		running = json_is_true(json_object_get(json_object_get(info, "State"), "Running"));
	}
	json_decref(info);
	if (purge && have && running && !docker_is_admin(ctx, name))
		docker_purge_inside(ctx, m, name);
	if (ctx->host->machine_remove(call, m, err) < 0)
		return -1;
	r = json_pack("{s:s, s:b}", "status", "removed", "purged", 0);
	if (purge && have && docker_share_dir(ctx, &sc, name, share, sizeof(share)) == 0) {
		snprintf(rel, sizeof(rel), "%s", share + strlen(ctx->work_home) + 1);
		if (docker_tree_remove(ctx, rel, &perr) == 0)
			json_object_set_new(r, "purged", json_true());
		else
			docker_note(r, perr.msg);
	} else if (purge) {
		docker_note(r, "nothing to purge: the machine has no share directory");
	}
	*result = r;
	return 0;
}
