/*
 * Machines are containers: created from a template's local image, labelled so
 * sandgate can find its own again (attach, list, the reaper), removed with
 * their volumes.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/docker/docker.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Keeps the container alive whatever the image's entrypoint; docker-init
 * (HostConfig.Init) is PID 1 above it and reaps orphaned processes.  The loop
 * covers a sleep that has no "infinity". */
#define DOCKER_IDLE_SCRIPT \
	"mkdir -p " DOCKER_WORKSPACE " 2>/dev/null; sleep infinity 2>/dev/null; " \
	"while :; do sleep 86400; done"

static void docker_progress(struct docker_ctx *ctx, struct sg_call *call,
			    double step, const char *msg)
{
	if (call)
		ctx->host->progress(call, step, 3, msg);
}

/* What create_sandbox says of the container: its limits as the engine has them. */
void docker_machine_report(struct docker_ctx *ctx, struct sg_machine *m, const json_t *info)
{
	json_t *facts;

	if (!SG_HOST_HAS(ctx->host, machine_report))
		return;
	facts = docker_limits_facts(info);
	if (facts)
		ctx->host->machine_report(m, facts);
	json_decref(facts);
}

struct docker_machine *docker_machine_new(struct docker_ctx *ctx, const char *cid,
					  const json_t *info)
{
	struct docker_machine *dm = calloc(1, sizeof(*dm)); /* docker_machine_release() */
	const json_t *labels = json_object_get(json_object_get(info, "Config"), "Labels");
	const char *shell = json_string_value(json_object_get(labels, DOCKER_LABEL_SHELL));
	const char *pers = json_string_value(json_object_get(labels, DOCKER_LABEL_PERSISTENT));

	if (!dm)
		return NULL;
	dm->ctx = ctx;
	docker_chan_of(ctx, info, dm->chan, sizeof(dm->chan));
	docker_runner_machine_init(dm, cid);
	pthread_mutex_init(&dm->slock, NULL);
	dm->persistent = pers && !strcmp(pers, "1") &&
			 json_object_get(labels, DOCKER_LABEL_NAME) != NULL;
	if (shell && *shell) {
		char why[200];

		snprintf(dm->shell, sizeof(dm->shell), "%s", shell);
		/* The runner runs commands with /bin/sh: not here. */
		snprintf(why, sizeof(why), "the machine's shell is %s: commands run through "
			 "plain docker exec", dm->shell);
		rnc_site_fallback(&dm->site, why);
	}
	return dm;
}

void docker_machine_free(struct docker_machine *dm)
{
	if (!dm)
		return;
	docker_runner_machine_fini(dm);
	for (size_t i = 0; i < DOCKER_STALE_MAX; i++)
		free(dm->stale[i]);
	pthread_mutex_destroy(&dm->slock);
	free(dm);
}

int docker_machine_handle(struct docker_ctx *ctx, struct sg_machine *m, const json_t *info,
			  struct sg_err *err)
{
	struct docker_machine *dm = docker_machine_new(ctx, m->id, info);

	if (!dm)
		return ctx->host->errf(err, SG_E_NOMEM, "docker: out of memory");
	m->handle = dm;
	docker_machine_report(ctx, m, info);
	return 0;
}

/* The container's address: the default bridge IP, else the first network's. */
static const char *docker_ip_of(const json_t *info)
{
	const json_t *ns = json_object_get(info, "NetworkSettings"), *net;
	const char *ip = json_string_value(json_object_get(ns, "IPAddress")), *key;

	if (ip && *ip)
		return ip;
	json_object_foreach((json_t *)json_object_get(ns, "Networks"), key, net) {
		ip = json_string_value(json_object_get(net, "IPAddress"));
		if (ip && *ip)
			return ip;
	}
	return NULL;
}

/* Sets m's strings from a container inspect answer. */
int docker_machine_fill(struct docker_ctx *ctx, struct sg_machine *m, const json_t *info,
		       struct sg_err *err)
{
	const struct sg_host_api *h = ctx->host;
	const json_t *config = json_object_get(info, "Config");
	const json_t *labels = json_object_get(config, "Labels");
	const char *id = json_string_value(json_object_get(info, "Id"));
	const char *wd = json_string_value(json_object_get(config, "WorkingDir"));
	const char *tmpl = json_string_value(json_object_get(labels, DOCKER_LABEL_TEMPLATE));
	const char *ip = docker_ip_of(info);

	if (!id || h->machine_set(m, SG_MACHINE_ID, "%s", id) < 0 ||
	    h->machine_set(m, SG_MACHINE_WORKSPACE, "%s", wd && *wd ? wd : DOCKER_WORKSPACE) < 0 ||
	    h->machine_set(m, SG_MACHINE_TEMPLATE, "%s", tmpl ? tmpl : "") < 0 ||
	    h->machine_set(m, SG_MACHINE_URL, "%s%s", ip ? "http://" : "", ip ? ip : "") < 0)
		return h->errf(err, SG_E_PROTO, "docker inspect gave an id, working directory or "
			       "label that is too long or holds control characters");
	return 0;
}

int docker_container_inspect(struct docker_ctx *ctx, const char *id, json_t **info,
			     struct sg_err *err)
{
	char *eid = docker_engine_escape(id), path[DOCKER_ID_MAX * 3 + 32];
	long status;
	int rc = -1;

	*info = NULL;
	if (!eid)
		return ctx->host->errf(err, SG_E_NOMEM, "docker: out of memory");
	snprintf(path, sizeof(path), "/containers/%s/json", eid);
	free(eid);
	if (docker_engine_json(ctx->engine, "GET", path, NULL, &status, info, err) < 0)
		return -1;
	if (status == 404)
		ctx->host->errf(err, SG_E_NOTFOUND, "no container %s on this docker "
				"daemon: check the id with docker ps -a", id);
	else if (status != 200)
		docker_engine_fail(ctx->engine, err, SG_E_BACKEND, "docker inspect",
				   status, *info);
	else
		rc = 0;
	if (rc < 0) {
		json_decref(*info);
		*info = NULL;
	}
	return rc;
}

/* Container ids and names: [A-Za-z0-9_.-], never a path. */
static bool docker_id_ok(const char *id)
{
	size_t i;

	if (!id || !*id || strlen(id) >= DOCKER_ID_MAX)
		return false;
	for (i = 0; id[i]; i++)
		if (!isalnum((unsigned char)id[i]) && !strchr("_.-", id[i]))
			return false;
	return true;
}

/* ---- create ----------------------------------------------------------------------- */

static int docker_label(json_t *labels, const char *key, const char *value)
{
	return json_object_set_new(labels, key, json_string(value ? value : ""));
}

static json_t *docker_labels(const struct sg_create_req *req, const char *tmpl)
{
	json_t *l = json_object();
	char num[32];
	int bad = 0;

	if (!l)
		return NULL;
	bad |= docker_label(l, DOCKER_LABEL_MANAGED, "1");
	bad |= docker_label(l, DOCKER_LABEL_OWNER, req->owner);
	/* Only the hash: a raw session id would let anyone with docker ps
	 * act as the session. */
	bad |= docker_label(l, DOCKER_LABEL_SESSION, req->session_hash);
	snprintf(num, sizeof(num), "%lld", (long long)time(NULL));
	bad |= docker_label(l, DOCKER_LABEL_CREATED, num);
	snprintf(num, sizeof(num), "%u", req->lifetime_s);
	bad |= docker_label(l, DOCKER_LABEL_LIFETIME, num);
	bad |= docker_label(l, DOCKER_LABEL_PERSISTENT, req->persistent ? "1" : "0");
	bad |= docker_label(l, DOCKER_LABEL_TEMPLATE, tmpl);
	if (req->name)
		bad |= docker_label(l, DOCKER_LABEL_NAME, req->name);
	if (bad) {
		json_decref(l);
		return NULL;
	}
	return l;
}

json_t *docker_create_body(struct docker_ctx *ctx, const struct sg_create_req *req,
				  const char *tmpl, const char *image)
{
	json_t *body, *labels = docker_labels(req, tmpl);
	struct docker_limits lim;

	if (!labels)
		return NULL;
	docker_limits_for(ctx, tmpl, &lim);
	body = json_pack("{s:s, s:[sss], s:s, s:b, s:b, s:o, s:{s:b}}",
			 "Image", image,
			 "Entrypoint", "/bin/sh", "-c", DOCKER_IDLE_SCRIPT,
			 "WorkingDir", DOCKER_WORKSPACE,
			 "Tty", 0, "OpenStdin", 0,
			 "Labels", labels,
			 "HostConfig", "Init", 1);
	/* No Env: the core gives the create-time environment to every exec. */
	if (body && docker_limits_apply(&lim, json_object_get(body, "HostConfig")) < 0) {
		json_decref(body);
		return NULL;
	}
	return body;
}

/* Maps a failed POST /containers/create; a missing image says how to get it. */
static int docker_create_fail(struct docker_ctx *ctx, const char *tmpl,
			      const char *image, long status, const json_t *reply,
			      struct sg_err *err)
{
	if (status == 404 && strcmp(tmpl, "base") == 0)
		return ctx->host->errf(err, SG_E_NOTFOUND,
				       "image %s (template base) is not on this docker "
				       "daemon: build it with `make image` "
				       "(etc/image/build.sh); sandgate never pulls", image);
	if (status == 404)
		return ctx->host->errf(err, SG_E_NOTFOUND,
				       "image %s (template %s) is not on this docker "
				       "daemon: build or load it (docker build / docker "
				       "load), sandgate never pulls", image, tmpl);
	return docker_engine_fail(ctx->engine, err, SG_E_BACKEND,
				  "docker create", status, reply);
}

/* POST /containers/create; copies the new id into id and its runner
 * channel's name into chan[DOCKER_CHAN_NAME_LEN + 1] ("" none; the caller
 * removes it with the container). */
static int docker_create_container(struct docker_ctx *ctx,
				   const struct sg_create_req *req,
				   const char *tmpl, const char *image, char *id,
				   size_t size, char *chan, struct sg_err *err)
{
	json_t *body = docker_create_body(ctx, req, tmpl, image), *reply = NULL;
	const char *cid;
	long status;
	int rc = -1;

	chan[0] = '\0';
	if (!body)
		return ctx->host->errf(err, SG_E_INVAL, "docker create: owner, name or "
				       "template is not valid UTF-8 text");
	if (docker_chan_add(ctx, body, chan, DOCKER_CHAN_NAME_LEN + 1) < 0) {
		json_decref(body);
		return ctx->host->errf(err, SG_E_NOMEM, "docker: out of memory");
	}
	if (docker_engine_json(ctx->engine, "POST", "/containers/create", body,
			       &status, &reply, err) < 0)
		goto out;
	if (status != 201) {
		docker_create_fail(ctx, tmpl, image, status, reply, err);
		goto out;
	}
	cid = json_string_value(json_object_get(reply, "Id"));
	if (!cid || strlen(cid) >= size) {
		ctx->host->errf(err, SG_E_PROTO, "docker create gave no container id");
		goto out;
	}
	strcpy(id, cid);
	rc = 0;
out:
	if (rc < 0)
		docker_chan_remove(ctx, chan);
	json_decref(body);
	json_decref(reply);
	return rc;
}

int docker_container_running(struct docker_ctx *ctx, const char *id, bool *running,
			     struct sg_err *err)
{
	json_t *info = NULL;

	if (docker_container_inspect(ctx, id, &info, err) < 0)
		return -1;
	*running = json_is_true(json_object_get(json_object_get(info, "State"), "Running"));
	json_decref(info);
	return 0;
}

int docker_container_start_raw(struct docker_ctx *ctx, const char *id, struct sg_err *err)
{
	char path[DOCKER_ID_MAX + 32];
	json_t *reply = NULL;
	long status;
	int rc;

	snprintf(path, sizeof(path), "/containers/%s/start", id);
	if (docker_engine_json(ctx->engine, "POST", path, NULL, &status, &reply, err) < 0)
		return -1;
	/* 304: already running. */
	rc = status == 204 || status == 304 ? 0 :
	     docker_engine_fail(ctx->engine, err, SG_E_BACKEND, "docker start",
				status, reply);
	json_decref(reply);
	return rc;
}

/* DELETE ?force=1&v=1; a container already gone is success. */
int docker_container_remove(struct docker_ctx *ctx, const char *id, struct sg_err *err)
{
	char path[DOCKER_ID_MAX + 48];
	json_t *reply = NULL;
	long status;
	int rc;

	snprintf(path, sizeof(path), "/containers/%s?force=1&v=1", id);
	if (docker_engine_json(ctx->engine, "DELETE", path, NULL, &status, &reply, err) < 0)
		return -1;
	/* 409 "removal already in progress": someone else is removing it. */
	rc = status == 204 || status == 404 || status == 409 ? 0 :
	     docker_engine_fail(ctx->engine, err, SG_E_BACKEND, "docker rm",
				status, reply);
	json_decref(reply);
	return rc;
}

/* Creates and starts a container from the template's image and fills m.  A
 * container that fails to start is removed again. */
int docker_machine_create(void *priv, const struct sg_create_req *req,
			  struct sg_call *call, struct sg_machine *m,
			  struct sg_err *err)
{
	struct docker_ctx *ctx = priv;
	const char *tmpl = req && req->template_name ? req->template_name :
			   ctx->default_template;
	char image[512], id[DOCKER_ID_MAX], chan[DOCKER_CHAN_NAME_LEN + 1];
	json_t *info = NULL;
	struct sg_err ignore;

	if (!req)
		return ctx->host->errf(err, SG_E_INVAL, "docker create: no request");
	if (docker_check_env(ctx, req->env, err) < 0)
		return -1;
	/* A named machine (docker_run, machine_create) is its own kind. */
	if (req->persistent && req->name && *req->name)
		return docker_named_create(ctx, req, call, m, err);
	if (req->options && json_object_size(req->options))
		return ctx->host->errf(err, SG_E_INVAL, "docker: a sandbox takes no create options; "
				       "a named machine (sandbox_env machine_create, docker_run) does");
	if (docker_template_image(ctx, tmpl, image, sizeof(image)) < 0)
		return ctx->host->errf(err, SG_E_NOTFOUND,
				       "no docker template %s: add [docker] template.%s = "
				       "<image> to the config (built in: base)", tmpl, tmpl);
	/* A warm container of the pool when one is ready (pool.c). */
	if (docker_pool_take(ctx, tmpl, call, m, err) == 0)
		return 0;
	docker_progress(ctx, call, 0, "creating container");
	if (docker_create_container(ctx, req, tmpl, image, id, sizeof(id), chan, err) < 0)
		return -1;
	docker_progress(ctx, call, 1, "starting container");
	if (docker_container_start_raw(ctx, id, err) < 0)
		goto fail;
	docker_progress(ctx, call, 2, "inspecting container");
	if (docker_container_inspect(ctx, id, &info, err) < 0)
		goto fail;
	if (docker_machine_fill(ctx, m, info, err) < 0 ||
	    ctx->host->machine_set(m, SG_MACHINE_TEMPLATE, "%s", tmpl) < 0)
		goto fail;
	if (docker_machine_handle(ctx, m, info, err) < 0)
		goto fail;
	((struct docker_machine *)m->handle)->chan_fresh = true;
	json_decref(info);
	docker_progress(ctx, call, 3, "container ready");
	ctx->host->log(SG_LOG_INFO, DOCKER_PLUGIN, "created container %s from %s",
		       m->id, image);
	return 0;
fail:
	json_decref(info);
	if (docker_container_remove(ctx, id, &ignore) < 0)
		ctx->host->log(SG_LOG_WARNING, DOCKER_PLUGIN,
			       "removing half-made container %s failed: %s", id,
			       ignore.msg);
	else
		docker_chan_remove(ctx, chan);
	return -1;
}

/* ---- attach, destroy, release ------------------------------------------------------ */

/* Binds m to container id when sandgate made it (label managed=1).  A
 * stopped sandbox (host reboot) is started again, or is gone; a stopped
 * named machine is started unless docker_stop stopped it (what it kept),
 * and is bound stopped when it does not start (docker_start, docker_logs
 * and docker_remove still reach it). */
int docker_machine_attach(void *priv, const char *id, const json_t *kept,
			  struct sg_call *call, struct sg_machine *m, struct sg_err *err)
{
	struct docker_ctx *ctx = priv;
	const json_t *labels, *state;
	json_t *info = NULL;
	const char *managed, *pers, *cid;
	bool persistent;
	struct sg_err serr;
	int rc = -1;

	(void)call;
	if (!docker_id_ok(id))
		return ctx->host->errf(err, SG_E_INVAL, "docker attach: %.64s is not a "
				       "container id or name", id ? id : "(null)");
	if (docker_container_inspect(ctx, id, &info, err) < 0)
		return -1;
	labels = json_object_get(json_object_get(info, "Config"), "Labels");
	managed = json_string_value(json_object_get(labels, DOCKER_LABEL_MANAGED));
	pers = json_string_value(json_object_get(labels, DOCKER_LABEL_PERSISTENT));
	persistent = pers && !strcmp(pers, "1") && json_object_get(labels, DOCKER_LABEL_NAME);
	if (!managed || strcmp(managed, "1") != 0) {
		ctx->host->errf(err, SG_E_NOTFOUND, "container %s was not made by "
				"sandgate (no %s=1 label): sandgate only adopts its own",
				id, DOCKER_LABEL_MANAGED);
		goto out;
	}
	state = json_object_get(info, "State");
	cid = json_string_value(json_object_get(info, "Id"));
	if (!json_is_true(json_object_get(state, "Running")) &&
	    !(persistent && json_is_true(json_object_get(kept, "stopped")))) {
		rc = cid ? (persistent ? docker_container_start(ctx, cid, &serr)
				       : docker_container_start_raw(ctx, cid, &serr)) : -1;
		if (rc < 0 && !persistent) {
			ctx->host->errf(err, SG_E_GONE, "container %s is stopped and does not "
					"start again: destroy it and create a new machine", id);
			goto out;
		}
		if (rc < 0)
			ctx->host->log(SG_LOG_WARNING, DOCKER_PLUGIN, "machine container %s does "
				       "not start again (%s): bound stopped", id, serr.msg);
		rc = -1;
		json_decref(info);
		if (docker_container_inspect(ctx, cid, &info, err) < 0)
			return -1;
	}
	if (docker_machine_fill(ctx, m, info, err) < 0 ||
	    docker_machine_handle(ctx, m, info, err) < 0)
		goto out;
	rc = 0;
out:
	json_decref(info);
	return rc;
}

/* Removes the container with its anonymous volumes (execs die with it),
 * then its network when no machine uses that any more. */
int docker_machine_destroy(struct sg_machine *m, struct sg_call *call,
			   struct sg_err *err)
{
	struct docker_ctx *ctx = docker_ctx_of(m, err);
	const json_t *labels;
	json_t *info = NULL;
	const char *net;
	struct sg_err ierr;
	char netname[192] = "", chan[DOCKER_CHAN_NAME_LEN + 1] = "";

	(void)call;
	if (!ctx)
		return -1;
	if (!docker_id_ok(m->id))
		return ctx->host->errf(err, SG_E_INVAL, "docker destroy: %.64s is not a "
				       "container id", m->id);
	if (docker_container_inspect(ctx, m->id, &info, &ierr) == 0) {
		labels = json_object_get(json_object_get(info, "Config"), "Labels");
		net = json_string_value(json_object_get(labels, DOCKER_LABEL_NETWORK));
		snprintf(netname, sizeof(netname), "%s", net ? net : "");
		docker_chan_of(ctx, info, chan, sizeof(chan));
		json_decref(info);
	}
	if (docker_container_remove(ctx, m->id, err) < 0)
		return -1;
	docker_chan_remove(ctx, chan);
	ctx->host->log(SG_LOG_INFO, DOCKER_PLUGIN, "removed container %s", m->id);
	docker_network_release(ctx, netname);
	return 0;
}

void docker_machine_release(struct sg_machine *m)
{
	if (!m)
		return;
	docker_machine_free(m->handle);
	m->handle = NULL;
}

/* ---- list ------------------------------------------------------------------------ */

static json_int_t docker_label_int(const json_t *labels, const char *key)
{
	const char *v = json_string_value(json_object_get(labels, key));

	return v ? strtoll(v, NULL, 10) : 0;
}

/* {id, owner, persistent, created, lifetime} of one container of `docker
 * ps`, from its labels. */
static json_t *docker_entry(const json_t *c)
{
	const json_t *labels = json_object_get(c, "Labels");
	const char *id = json_string_value(json_object_get(c, "Id"));
	const char *owner = json_string_value(json_object_get(labels, DOCKER_LABEL_OWNER));

	return json_pack("{s:s, s:s, s:b, s:I, s:I}", "id", id ? id : "", "owner", owner ? owner : "",
			 "persistent", docker_label_int(labels, DOCKER_LABEL_PERSISTENT) == 1,
			 "created", docker_label_int(labels, DOCKER_LABEL_CREATED),
			 "lifetime", docker_label_int(labels, DOCKER_LABEL_LIFETIME));
}

json_t *docker_containers(struct docker_ctx *ctx, const char *filters, bool all,
			  struct sg_err *err)
{
	char *f = docker_engine_escape(filters), *path;
	json_t *reply = NULL;
	struct sg_err ignore;
	long status;

	if (!err)
		err = &ignore;
	if (!f || asprintf(&path, "/containers/json?%sfilters=%s", all ? "all=1&" : "", f) < 0) {
		free(f);
		ctx->host->errf(err, SG_E_NOMEM, "docker: out of memory");
		return NULL;
	}
	free(f);
	if (docker_engine_json(ctx->engine, "GET", path, NULL, &status, &reply, err) == 0 &&
	    (status != 200 || !json_is_array(reply))) {
		docker_engine_fail(ctx->engine, err, SG_E_BACKEND, "docker ps", status, reply);
		json_decref(reply);
		reply = NULL;
	}
	free(path);
	return reply;
}

/* Lists every container with the managed label, running or not. */
int docker_machine_list(void *priv, struct sg_call *call, json_t **machines,
			struct sg_err *err)
{
	struct docker_ctx *ctx = priv;
	json_t *reply, *c;
	size_t i;

	(void)call;
	*machines = NULL;
	reply = docker_containers(ctx, "{\"label\":[\"" DOCKER_LABEL_MANAGED "=1\"]}", true, err);
	if (!reply)
		return -1;
	*machines = json_array();
	json_array_foreach(reply, i, c)
		json_array_append_new(*machines, docker_entry(c));
	json_decref(reply);
	return 0;
}
