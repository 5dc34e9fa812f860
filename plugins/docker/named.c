/*
 * Named machines: the containers of docker_run and sandbox_env
 * machine_create.  Unlike a sandbox (machine.c), a named machine runs its
 * image's own CMD and ENTRYPOINT (or `command`), is called
 * [docker] container_name_prefix + its name, joins its scope's network
 * where peers reach it by name, gets the workspace and share mounts
 * (mounts.c), the create-time env and a restart policy, and outlives
 * sandgate: a container of that name that is the caller's is adopted again
 * rather than made twice.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/docker/docker.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A command that exits at once has exited (or restarted) within the settle
 * time; one that restarts is followed until its restarts run out. */
#define DOCKER_SETTLE_MS      600
#define DOCKER_SETTLE_STEP_MS 200
#define DOCKER_CRASH_MS       4000
#define DOCKER_LOG_LINES  20
#define DOCKER_LOG_CAP    4000

static void docker_progress_step(struct docker_ctx *ctx, struct sg_call *call, double step,
				 const char *msg)
{
	if (call)
		ctx->host->progress(call, step, 3, msg);
}

static void docker_sleep(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static const char *docker_label_of(const json_t *info, const char *key)
{
	const json_t *labels = json_object_get(json_object_get(info, "Config"), "Labels");
	const char *v = json_string_value(json_object_get(labels, key));

	return v ? v : "";
}

bool docker_container_is(struct docker_ctx *ctx, const json_t *info, const char *name,
			 const char *cred)
{
	return !strcmp(docker_label_of(info, DOCKER_LABEL_MANAGED), "1") &&
	       !strcmp(docker_label_of(info, DOCKER_LABEL_PERSISTENT), "1") &&
	       !strcmp(docker_label_of(info, DOCKER_LABEL_NAME), name) &&
	       !strcmp(docker_label_of(info, DOCKER_LABEL_CREDENTIAL), cred) &&
	       ctx->work_home && !strcmp(docker_label_of(info, DOCKER_LABEL_WORK_HOME), ctx->work_home);
}

int docker_container_start(struct docker_ctx *ctx, const char *id, struct sg_err *err)
{
	json_t *info = NULL;
	int rc;

	if (docker_container_inspect(ctx, id, &info, err) < 0)
		return -1;
	rc = docker_mounts_verify(ctx, info, err);
	json_decref(info);
	return rc < 0 ? -1 : docker_container_start_raw(ctx, id, err);
}

/* Whether a container (inspect answer) runs steadily. */
static bool docker_steady(const json_t *info, json_int_t restarts0)
{
	const json_t *st = json_object_get(info, "State");

	return json_is_true(json_object_get(st, "Running")) &&
	       !json_is_true(json_object_get(st, "Restarting")) &&
	       json_integer_value(json_object_get(info, "RestartCount")) == restarts0;
}

/* Inspects id until it runs steadily through the settle time, or has
 * stopped, or (it restarts) the settle window ends.  *info the caller's. */
static int docker_settle(struct docker_ctx *ctx, const char *id, json_t **info, bool *crashing)
{
	struct sg_err err;
	json_int_t restarts0 = -1;
	long waited = 0;

	*crashing = false;
	for (;;) {
		const json_t *st;

		json_decref(*info);
		*info = NULL;
		if (docker_container_inspect(ctx, id, info, &err) < 0)
			return -1;
		st = json_object_get(*info, "State");
		if (restarts0 < 0)
			restarts0 = json_integer_value(json_object_get(*info, "RestartCount"));
		if (!json_is_true(json_object_get(st, "Running")) &&
		    !json_is_true(json_object_get(st, "Restarting")))
			return 0; /* stopped for good */
		if (!docker_steady(*info, restarts0))
			*crashing = true;
		if (waited >= (*crashing ? DOCKER_CRASH_MS : DOCKER_SETTLE_MS))
			return 0;
		docker_sleep(DOCKER_SETTLE_STEP_MS);
		waited += DOCKER_SETTLE_STEP_MS;
	}
}

json_t *docker_after_start(struct docker_ctx *ctx, const char *id)
{
	json_t *info = NULL, *r;
	const json_t *state;
	struct sg_err err;
	struct sg_buf logs = { 0 };
	const char *status, *why;
	json_int_t code;
	bool crashing;
	char line[600];

	if (docker_settle(ctx, id, &info, &crashing) < 0) {
		json_decref(info);
		return NULL;
	}
	state = json_object_get(info, "State");
	status = json_string_value(json_object_get(state, "Status"));
	if (!crashing && json_is_true(json_object_get(state, "Running"))) {
		json_decref(info);
		return json_pack("{s:s, s:b}", "status", "running", "running", 1);
	}
	if (crashing && json_is_true(json_object_get(state, "Running")))
		status = "restarting"; /* between two of its restarts */
	code = json_integer_value(json_object_get(state, "ExitCode"));
	why = json_string_value(json_object_get(state, "Error"));
	docker_logs_tail(ctx, id, DOCKER_LOG_LINES, DOCKER_LOG_CAP, &logs, &err);
	snprintf(line, sizeof(line), "container is '%s' after start; exit_code=%lld; restarts=%lld; "
		 "error='%.300s'", status ? status : "?", (long long)code,
		 (long long)json_integer_value(json_object_get(info, "RestartCount")), why ? why : "");
	r = json_pack("{s:s, s:b, s:I, s:o, s:o}", "status", status ? status : "exited", "running", 0,
		      "exit_code", code, "error", docker_json_text(line, strlen(line)), "logs",
		      docker_json_text(logs.data, logs.len));
	ctx->host->buf_release(&logs);
	json_decref(info);
	return r;
}

/* ---- the container ------------------------------------------------------------------ */

static const char *docker_named_image(struct docker_ctx *ctx, const struct sg_create_req *req,
				      const struct docker_opts *o, char *buf, size_t size,
				      struct sg_err *err)
{
	const char *tmpl = req->template_name;

	if (o->image)
		return o->image;
	if (!tmpl && *ctx->default_image)
		return ctx->default_image;
	if (!tmpl)
		tmpl = ctx->default_template;
	if (docker_template_image(ctx, tmpl, buf, size) < 0) {
		ctx->host->errf(err, SG_E_NOTFOUND, "no docker template %s: add [docker] template.%s = "
				"<image> to the config (built in: base), or give an image", tmpl, tmpl);
		return NULL;
	}
	return buf;
}

static json_t *docker_named_labels(struct docker_ctx *ctx, const struct sg_create_req *req,
				   const struct docker_scope *sc, const struct docker_opts *o,
				   const char *image)
{
	char now[32];

	snprintf(now, sizeof(now), "%lld", (long long)time(NULL));
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}",
			 DOCKER_LABEL_WORK_HOME, ctx->work_home ? ctx->work_home : "",
			 DOCKER_LABEL_MANAGED, "1", DOCKER_LABEL_OWNER, req->owner ? req->owner : "",
			 DOCKER_LABEL_SESSION, req->session_hash ? req->session_hash : "",
			 DOCKER_LABEL_CREATED, now, DOCKER_LABEL_LIFETIME, "0",
			 DOCKER_LABEL_PERSISTENT, "1", DOCKER_LABEL_TEMPLATE,
			 req->template_name ? req->template_name : image, DOCKER_LABEL_NAME, req->name,
			 DOCKER_LABEL_CREDENTIAL, sc->cred, DOCKER_LABEL_SCOPE, sc->key,
			 DOCKER_LABEL_PURPOSE, o->purpose ? o->purpose : "",
			 DOCKER_LABEL_SHELL, o->shell ? o->shell : "", DOCKER_LABEL_NETWORK, sc->network);
}

/* A hostname the kernel takes: the name when it is one. */
static bool docker_hostname_ok(const char *name)
{
	size_t n = strlen(name);

	if (!n || n > 63 || name[0] == '-' || name[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)name[i]) && name[i] != '-')
			return false;
	return true;
}

static json_t *docker_named_body(struct docker_ctx *ctx, const struct sg_create_req *req,
				 const struct docker_scope *sc, const struct docker_opts *o,
				 const char *image, json_t *mounts)
{
	json_t *labels = docker_named_labels(ctx, req, sc, o, image);
	json_t *hc, *body, *policy;
	struct docker_limits lim;

	if (!labels)
		return NULL;
	policy = json_pack("{s:s}", "Name", ctx->restart_name);
	if (!strcmp(ctx->restart_name, "on-failure"))
		json_object_set_new(policy, "MaximumRetryCount", json_integer(ctx->restart_max));
	hc = json_pack("{s:b, s:O, s:o}", "Init", 1, "Mounts", mounts, "RestartPolicy", policy);
	docker_limits_for(ctx, req->template_name, &lim);
	if (docker_is_admin(ctx, req->name))
		docker_admin_caps(&lim);
	if (hc && docker_limits_apply(&lim, hc) < 0) {
		json_decref(hc);
		json_decref(labels);
		return NULL;
	}
	body = json_pack("{s:s, s:o, s:s, s:b, s:b, s:o}", "Image", image, "Labels", labels,
			 "WorkingDir", o->workdir ? o->workdir : DOCKER_WORKSPACE, "Tty", 0,
			 "OpenStdin", 0, "HostConfig", hc);
	if (!body)
		return NULL;
	if (docker_hostname_ok(req->name))
		json_object_set_new(body, "Hostname", json_string(req->name));
	if (o->env)
		json_object_set(body, "Env", o->env);
	if (o->cmd)
		json_object_set(body, "Cmd", o->cmd);
	if (o->exposed)
		json_object_set(body, "ExposedPorts", o->exposed);
	if (o->bindings)
		json_object_set(hc, "PortBindings", o->bindings);
	if (*sc->network) {
		json_object_set_new(hc, "NetworkMode", json_string(sc->network));
		json_object_set_new(body, "NetworkingConfig",
				    json_pack("{s:{s:{s:[s]}}}", "EndpointsConfig", sc->network,
					      "Aliases", req->name));
	}
	return body;
}

/* Maps a failed POST /containers/create of a named machine. */
static int docker_named_fail(struct docker_ctx *ctx, const char *image, const char *cname,
			     long status, const json_t *reply, struct sg_err *err)
{
	const char *msg = docker_reply_message(reply);

	if (status == 404 && strstr(msg, "network"))
		return ctx->host->errf(err, SG_E_UNAVAILABLE, "docker create %s: %s", cname, msg);
	if (status == 404)
		return ctx->host->errf(err, SG_E_NOTFOUND, "image %s is not on this docker daemon: "
				       "build it (docker_build) or load it (docker load); sandgate "
				       "never pulls", image);
	if (status == 409)
		return ctx->host->errf(err, SG_E_EXISTS, "a container named %s exists already "
				       "(made meanwhile): call again to use it", cname);
	return docker_engine_fail(ctx->engine, err, SG_E_BACKEND, "docker create", status, reply);
}

/* POST /containers/create?name=cname, on the network made first (under the
 * network lock: a release cannot remove it in between).  One retry when
 * another sandgate removed the network meanwhile. */
static int docker_named_post(struct docker_ctx *ctx, const struct docker_scope *sc,
			     const char *cname, const char *image, const json_t *body, char *id,
			     size_t size, struct sg_err *err)
{
	char path[512], *ename = docker_engine_escape(cname);
	json_t *reply = NULL;
	long status = 0;
	const char *cid;
	int rc = -1;

	if (!ename)
		return ctx->host->errf(err, SG_E_NOMEM, "docker: out of memory");
	snprintf(path, sizeof(path), "/containers/create?name=%s", ename);
	free(ename);
	pthread_mutex_lock(&ctx->net_lock);
	for (int attempt = 0; attempt < 2 && rc < 0; attempt++) {
		json_decref(reply);
		reply = NULL;
		if (docker_network_ensure(ctx, sc->network, err) < 0 ||
		    docker_engine_json(ctx->engine, "POST", path, body, &status, &reply, err) < 0)
			break;
		if (status == 201)
			rc = 0;
		else if (!(status == 404 && strstr(docker_reply_message(reply), "network")))
			break;
	}
	pthread_mutex_unlock(&ctx->net_lock);
	if (rc < 0 && status && status != 201)
		docker_named_fail(ctx, image, cname, status, reply, err);
	cid = json_string_value(json_object_get(reply, "Id"));
	if (rc == 0 && (!cid || strlen(cid) >= size))
		rc = ctx->host->errf(err, SG_E_PROTO, "docker create gave no container id");
	else if (rc == 0)
		snprintf(id, size, "%s", cid);
	json_decref(reply);
	return rc;
}

/* Binds m to the container of an inspect answer. */
static int docker_named_bind(struct docker_ctx *ctx, struct sg_machine *m, const json_t *info,
			     struct sg_err *err)
{
	if (docker_machine_fill(ctx, m, info, err) < 0 ||
	    ctx->host->machine_set(m, SG_MACHINE_WORKSPACE, "%s", DOCKER_WORKSPACE) < 0)
		return -1;
	return docker_machine_handle(ctx, m, info, err);
}

/* The container of that name exists: adopt it when it is the caller's. */
static int docker_named_adopt(struct docker_ctx *ctx, const struct sg_create_req *req,
			      const struct docker_scope *sc, const char *cname, json_t *info,
			      struct sg_machine *m, struct sg_err *err)
{
	const char *id = json_string_value(json_object_get(info, "Id"));
	json_t *now = NULL;
	struct sg_err serr;
	int rc;

	if (!docker_container_is(ctx, info, req->name, sc->cred))
		return ctx->host->errf(err, SG_E_EXISTS, "the container name %s is taken on this "
				       "engine by a container that is not your machine '%s': "
				       "choose another name", cname, req->name);
	if (!json_is_true(json_object_get(json_object_get(info, "State"), "Running")) &&
	    docker_container_start(ctx, id, &serr) < 0)
		ctx->host->log(SG_LOG_WARNING, DOCKER_PLUGIN, "adopting %s: it does not start (%s)",
			       cname, serr.msg);
	if (docker_container_inspect(ctx, id, &now, err) < 0)
		return -1;
	rc = docker_named_bind(ctx, m, now, err);
	json_decref(now);
	if (rc == 0)
		ctx->host->log(SG_LOG_INFO, DOCKER_PLUGIN, "adopted container %s (%.12s)", cname, m->id);
	return rc;
}

static int docker_named_make(struct docker_ctx *ctx, const struct sg_create_req *req,
			     const struct docker_scope *sc, const struct docker_opts *o,
			     const char *cname, struct sg_call *call, struct sg_machine *m,
			     struct sg_err *err)
{
	char buf[512], id[DOCKER_ID_MAX];
	const char *image = docker_named_image(ctx, req, o, buf, sizeof(buf), err);
	json_t *mounts = NULL, *body = NULL, *info = NULL;
	struct sg_err ignore;
	int rc = -1;

	if (!image)
		return -1;
	docker_progress_step(ctx, call, 0.5, "making the workspace and share directories");
	if (docker_mounts_make(ctx, sc, req->name, &mounts, err) < 0)
		return -1;
	body = docker_named_body(ctx, req, sc, o, image, mounts);
	if (!body) {
		json_decref(mounts);
		return ctx->host->errf(err, SG_E_INVAL, "docker create: a name, label or option is "
				       "not valid UTF-8 text");
	}
	docker_progress_step(ctx, call, 1, "creating the container");
	if (docker_named_post(ctx, sc, cname, image, body, id, sizeof(id), err) < 0)
		goto out;
	docker_progress_step(ctx, call, 2, "starting the container");
	if (docker_container_start_raw(ctx, id, err) < 0 ||
	    docker_container_inspect(ctx, id, &info, err) < 0 ||
	    docker_named_bind(ctx, m, info, err) < 0) {
		if (docker_container_remove(ctx, id, &ignore) < 0)
			ctx->host->log(SG_LOG_WARNING, DOCKER_PLUGIN, "removing half-made %s: %s",
				       cname, ignore.msg);
		docker_network_release(ctx, sc->network);
		goto out;
	}
	docker_progress_step(ctx, call, 3, "container started");
	ctx->host->log(SG_LOG_INFO, DOCKER_PLUGIN, "made container %s (%.12s) from %s", cname, id,
		       image);
	rc = 0;
out:
	json_decref(info);
	json_decref(body);
	json_decref(mounts);
	return rc;
}

int docker_named_create(struct docker_ctx *ctx, const struct sg_create_req *req,
			struct sg_call *call, struct sg_machine *m, struct sg_err *err)
{
	struct docker_opts o;
	struct docker_scope sc;
	char cname[DOCKER_ID_MAX];
	struct sg_err ierr;
	json_t *info = NULL;
	int rc;

	if (ctx->work_home_why[0])
		return ctx->host->errf(err, SG_E_INVAL, "%s", ctx->work_home_why);
	if (docker_opts_parse(ctx, req->options, "docker_run", &o, err) < 0)
		return -1;
	docker_scope_of(ctx, call, &sc);
	if (docker_container_name(ctx, req->name, cname, sizeof(cname), err) < 0) {
		docker_opts_free(&o);
		return -1;
	}
	rc = docker_container_inspect(ctx, cname, &info, &ierr);
	if (rc == 0)
		rc = docker_named_adopt(ctx, req, &sc, cname, info, m, err);
	else if (ierr.code == SG_E_NOTFOUND)
		rc = docker_named_make(ctx, req, &sc, &o, cname, call, m, err);
	else if (err)
		*err = ierr;
	json_decref(info);
	docker_opts_free(&o);
	return rc;
}
