/*
 * The shared network of named machines ([docker] auto_network, one per
 * credential when the server serves several): a user-defined bridge, made
 * on first use and labelled as sandgate's, where peers resolve each other
 * by machine name (an alias); removed when the last machine that uses it
 * is removed.  Races with another sandgate on the same engine are settled
 * by the engine: a second create is a conflict, a removal of a network in
 * use fails, and a create that meets a network just removed is retried.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/docker/docker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int docker_network_path(struct docker_ctx *ctx, const char *net, char *out, size_t size,
			       struct sg_err *err)
{
	char *e = docker_engine_escape(net);

	if (!e)
		return ctx->host->errf(err, SG_E_NOMEM, "docker: out of memory");
	snprintf(out, size, "/networks/%s", e);
	free(e);
	return 0;
}

int docker_network_ensure(struct docker_ctx *ctx, const char *net, struct sg_err *err)
{
	char path[512];
	json_t *reply = NULL, *body;
	long status;
	int rc = -1;

	if (!net || !*net)
		return 0;
	if (docker_network_path(ctx, net, path, sizeof(path), err) < 0 ||
	    docker_engine_json(ctx->engine, "GET", path, NULL, &status, &reply, err) < 0)
		return -1;
	json_decref(reply);
	reply = NULL;
	if (status == 200)
		return 0;
	body = json_pack("{s:s, s:s, s:b, s:{s:s}}", "Name", net, "Driver", "bridge",
			 "CheckDuplicate", 1, "Labels", DOCKER_LABEL_MANAGED, "1");
	if (docker_engine_json(ctx->engine, "POST", "/networks/create", body, &status, &reply, err) < 0)
		goto out;
	/* 409: another sandgate made it meanwhile. */
	if (status == 201 || status == 409)
		rc = 0;
	else
		docker_engine_fail(ctx->engine, err, SG_E_BACKEND, "docker network create", status, reply);
	if (status == 201)
		ctx->host->log(SG_LOG_INFO, DOCKER_PLUGIN, "made network %s", net);
out:
	json_decref(body);
	json_decref(reply);
	return rc;
}

/* True when a container sandgate made still names net, stopped ones too
 * (they would not start without it). */
static bool docker_network_labelled(struct docker_ctx *ctx, const char *net)
{
	char filter[512];
	json_t *reply;
	bool used = true;

	snprintf(filter, sizeof(filter), "{\"label\":[\"%s=%s\"]}", DOCKER_LABEL_NETWORK, net);
	reply = docker_containers(ctx, filter, true, NULL);
	if (reply)
		used = json_array_size(reply) > 0;
	json_decref(reply);
	return used;
}

void docker_network_release(struct docker_ctx *ctx, const char *net)
{
	char path[512];
	json_t *reply = NULL;
	const char *managed;
	struct sg_err err;
	long status;

	if (!net || !*net)
		return;
	pthread_mutex_lock(&ctx->net_lock);
	if (docker_network_labelled(ctx, net) ||
	    docker_network_path(ctx, net, path, sizeof(path), &err) < 0 ||
	    docker_engine_json(ctx->engine, "GET", path, NULL, &status, &reply, &err) < 0 ||
	    status != 200)
		goto out;
	managed = json_string_value(json_object_get(json_object_get(reply, "Labels"),
						    DOCKER_LABEL_MANAGED));
	/* Not ours, or something else is attached to it: it stays. */
	if (!managed || strcmp(managed, "1") || json_object_size(json_object_get(reply, "Containers")))
		goto out;
	json_decref(reply);
	reply = NULL;
	if (docker_engine_json(ctx->engine, "DELETE", path, NULL, &status, &reply, &err) == 0 &&
	    (status == 204 || status == 200))
		ctx->host->log(SG_LOG_INFO, DOCKER_PLUGIN, "removed network %s: no machine uses it", net);
out:
	pthread_mutex_unlock(&ctx->net_lock);
	json_decref(reply);
}
