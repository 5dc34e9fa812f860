/*
 * The configuration of named machines ([docker] container_name_prefix,
 * admin_machine, auto_network, default_image, restart policy, build limits;
 * [storage] work_home and share_subdir), read once at init, and what
 * follows from a caller's credential: where its machines live (its scope)
 * and what their containers are called.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/docker/docker.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DOCKER_BUILD_TIMEOUT_S  3600u
#define DOCKER_CONTEXT_MAX      (256u * 1024u * 1024u)

static const char *docker_get(struct docker_ctx *ctx, const char *section, const char *key,
			      const char *def)
{
	const char *v = ctx->host->config_get(section, key);

	return v ? v : def;
}

/* A whole number of a key the core already checked ("uint"); 0 allowed. */
static unsigned long docker_get_uint(struct docker_ctx *ctx, const char *key, unsigned long def)
{
	const char *v = ctx->host->config_get("docker", key);
	unsigned long n;
	char *end;

	if (!v || !*v)
		return def;
	errno = 0;
	n = strtoul(v, &end, 10);
	return errno || *end || v[0] == '-' ? def : n;
}

/* [storage] work_home: absolute, else the state directory's "work". */
static int docker_work_home(struct docker_ctx *ctx, struct sg_err *err)
{
	const char *v = ctx->host->config_get("storage", "work_home");
	const char *state = ctx->host->state_dir();
	size_t n;

	if (v && *v && v[0] != '/') {
		snprintf(ctx->work_home_why, sizeof(ctx->work_home_why),
			 "[storage] work_home = '%.200s' is not an absolute path: set an absolute "
			 "host path (the docker daemon bind-mounts what is under it)", v);
		return 0;
	}
	if (!v || !*v) {
		if (!state) {
			snprintf(ctx->work_home_why, sizeof(ctx->work_home_why),
				 "sandgate has no state directory for the default [storage] "
				 "work_home: set [storage] work_home to an absolute path");
			return 0;
		}
		if (asprintf(&ctx->work_home, "%s/work", state) < 0)
			ctx->work_home = NULL;
	} else {
		ctx->work_home = strdup(v);
	}
	if (!ctx->work_home)
		return ctx->host->errf(err, SG_E_NOMEM, "docker: out of memory");
	n = strlen(ctx->work_home);
	while (n > 1 && ctx->work_home[n - 1] == '/')
		ctx->work_home[--n] = '\0';
	return 0;
}

/* [storage] share_subdir: "" or one plain path component. */
static void docker_share_subdir(struct docker_ctx *ctx)
{
	const char *v = docker_get(ctx, "storage", "share_subdir", "_share");

	if (*v && (strchr(v, '/') || !strcmp(v, ".") || !strcmp(v, "..") || strlen(v) > 64)) {
		snprintf(ctx->work_home_why, sizeof(ctx->work_home_why),
			 "[storage] share_subdir = '%.64s' is not one directory name: use a name "
			 "such as _share, or \"\" for no share", v);
		v = "";
	}
	ctx->share_subdir = v;
}

int docker_settings_load(struct docker_ctx *ctx, struct sg_err *err)
{
	pthread_mutex_init(&ctx->net_lock, NULL);
	pthread_mutex_init(&ctx->wh_lock, NULL);
	ctx->wh_remote = -1;
	ctx->prefix = docker_get(ctx, "docker", "container_name_prefix", "sandgate-");
	ctx->admin_machine = docker_get(ctx, "docker", "admin_machine", "admin");
	ctx->auto_network = docker_get(ctx, "docker", "auto_network", "sandgate");
	ctx->default_image = docker_get(ctx, "docker", "default_image", "");
	ctx->restart_name = docker_get(ctx, "docker", "restart_policy_name", "on-failure");
	ctx->restart_max = (unsigned)docker_get_uint(ctx, "restart_max_retry_count", 3);
	ctx->build_timeout_s = (unsigned)docker_get_uint(ctx, "build_timeout", DOCKER_BUILD_TIMEOUT_S);
	ctx->build_context_max = docker_get_uint(ctx, "build_context_max", DOCKER_CONTEXT_MAX);
	docker_share_subdir(ctx);
	return docker_work_home(ctx, err);
}

void docker_settings_free(struct docker_ctx *ctx)
{
	free(ctx->work_home);
	ctx->work_home = NULL;
	pthread_mutex_destroy(&ctx->net_lock);
	pthread_mutex_destroy(&ctx->wh_lock);
}

/* ---- scopes and names --------------------------------------------------------------- */

static void docker_network_name(struct docker_ctx *ctx, struct docker_scope *sc)
{
	if (!*ctx->auto_network)
		sc->network[0] = '\0';
	else if (sc->key[0])
		snprintf(sc->network, sizeof(sc->network), "%.150s-%s", ctx->auto_network, sc->key);
	else
		snprintf(sc->network, sizeof(sc->network), "%.150s", ctx->auto_network);
}

void docker_scope_of(struct docker_ctx *ctx, struct sg_call *call, struct docker_scope *sc)
{
	const struct sg_host_api *h = ctx->host;
	const char *cred = call ? h->call_credential(call) : "";
	bool several = SG_HOST_HAS(h, credentials) && h->credentials() > 1;

	memset(sc, 0, sizeof(*sc));
	snprintf(sc->cred, sizeof(sc->cred), "%s", cred ? cred : "");
	/* Credentials are walls: with several, each has its own directory
	 * under work_home and its own network. */
	if (several)
		snprintf(sc->key, sizeof(sc->key), "%s", sc->cred);
	docker_network_name(ctx, sc);
}

void docker_scope_labels(struct docker_ctx *ctx, const json_t *labels, struct docker_scope *sc)
{
	const char *cred = json_string_value(json_object_get(labels, DOCKER_LABEL_CREDENTIAL));
	const char *key = json_string_value(json_object_get(labels, DOCKER_LABEL_SCOPE));
	const char *net = json_string_value(json_object_get(labels, DOCKER_LABEL_NETWORK));

	(void)ctx;
	memset(sc, 0, sizeof(*sc));
	snprintf(sc->cred, sizeof(sc->cred), "%s", cred ? cred : "");
	snprintf(sc->key, sizeof(sc->key), "%s", key ? key : "");
	snprintf(sc->network, sizeof(sc->network), "%s", net ? net : "");
}

int docker_container_name(struct docker_ctx *ctx, const char *name, char *out, size_t size,
			  struct sg_err *err)
{
	if ((size_t)snprintf(out, size, "%s%s", ctx->prefix, name) >= size)
		return ctx->host->errf(err, SG_E_INVAL, "the container name %s%s is too long: "
				       "use a shorter name or [docker] container_name_prefix",
				       ctx->prefix, name);
	return 0;
}

bool docker_is_admin(struct docker_ctx *ctx, const char *name)
{
	return *ctx->admin_machine && name && !strcmp(name, ctx->admin_machine);
}
