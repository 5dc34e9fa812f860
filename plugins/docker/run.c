/*
 * docker_run and docker_ps.
 *
 * docker_run is idempotent: a machine of that name the caller already has
 * (sandgate's record) is re-attached, started when stopped, with a note;
 * a container of that name labelled as the caller's that the record lacks
 * (a crash, another state directory) is adopted through the core's
 * persistent-machine path; a name whose container belongs to someone else
 * is "not found" (never re-attached); otherwise the machine is made through
 * that same path (host->machine_create, which lands in named.c).  Either
 * way the answer says whether the container runs, and when its command
 * exited at once, how and with its last log lines.
 *
 * docker_ps lists the caller's machines from the record with the engine's
 * view of each, and adopts the labelled containers the record lacks.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/docker/docker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Adds what the engine says about container id to r: state (and, when it
 * is not running, exit code, error, last logs), image, container name. */
static void docker_run_state(struct docker_ctx *ctx, const char *id, json_t *r)
{
	json_t *st = docker_after_start(ctx, id), *info = NULL;
	struct sg_err err;

	if (st) {
		json_object_update(r, st);
		json_decref(st);
	}
	if (docker_container_inspect(ctx, id, &info, &err) == 0) {
		const char *name = json_string_value(json_object_get(info, "Name"));

		json_object_set_new(r, "image", json_string(json_string_value(
			json_object_get(json_object_get(info, "Config"), "Image")) ?: ""));
		json_object_set_new(r, "container", json_string(name && *name == '/' ? name + 1 : name ?: ""));
	}
	json_decref(info);
}

/* Notes for what docker_run was given and could not change. */
static void docker_run_ignored(const struct docker_opts *o, const json_t *rec, const json_t *info,
			       json_t *r)
{
	const char *had = json_string_value(json_object_get(rec, "purpose"));
	const char *image = json_string_value(json_object_get(json_object_get(info, "Config"), "Image"));
	char note[400];

	if (o->purpose && had && strcmp(o->purpose, had)) {
		snprintf(note, sizeof(note), "passed purpose '%.100s' ignored (existing has '%.100s'); "
			 "remove+recreate to change purpose", o->purpose, had);
		docker_note(r, note);
	}
	if (o->image && image && strcmp(o->image, image)) {
		snprintf(note, sizeof(note), "passed image '%.100s' ignored (existing runs '%.100s'); "
			 "docker_remove it to run another image", o->image, image);
		docker_note(r, note);
	}
	if (o->env || o->cmd || o->exposed || o->workdir || o->shell)
		docker_note(r, "env, ports, workdir, shell and command apply only when the machine is made");
}

/* The caller's machine `rec` (from the record) exists: start it if stopped. */
static int docker_run_reattach(struct docker_ctx *ctx, const json_t *rec, const struct docker_opts *o,
			       json_t **result, struct sg_err *err)
{
	const char *id = json_string_value(json_object_get(rec, "id"));
	const char *name = json_string_value(json_object_get(rec, "name"));
	json_t *info = NULL, *r;
	struct sg_err ierr;
	bool running;

	if (docker_container_inspect(ctx, id, &info, &ierr) < 0) {
		if (ierr.code != SG_E_NOTFOUND) {
			*err = ierr;
			return -1;
		}
		return ctx->host->errf(err, SG_E_GONE, "machine '%s' is recorded but its container "
				       "%.12s is gone (removed outside sandgate): docker_remove it, then "
				       "docker_run again", name, id);
	}
	running = json_is_true(json_object_get(json_object_get(info, "State"), "Running"));
	if (!running && docker_container_start(ctx, id, err) < 0) {
		json_decref(info);
		return -1;
	}
	r = json_pack("{s:s, s:s, s:s, s:s, s:s}", "name", name, "backend", "docker", "sandbox_id", id,
		      "workspace", DOCKER_WORKSPACE, "note", running ?
		      "reattached to existing container (already running)" :
		      "reattached to existing container (started; was stopped)");
	docker_run_ignored(o, rec, info, r);
	json_decref(info);
	docker_run_state(ctx, id, r);
	*result = r;
	return 0;
}

/* Makes (or adopts) the machine through the core: the record, ownership and
 * the session's view stay the core's. */
static int docker_run_make(struct docker_ctx *ctx, const json_t *params, const char *name,
			   const char *purpose, bool adopting, struct sg_call *call,
			   json_t **result, struct sg_err *err)
{
	struct sg_create_req req = { .name = name };
	json_t *opts = json_deep_copy(params), *r = NULL;
	const char *id;
	int rc;

	json_object_del(opts, "name");
	req.options = opts;
	rc = ctx->host->machine_create(call, &sg_backend, &req, purpose, &r, err);
	json_decref(opts);
	if (rc < 0)
		return -1;
	id = json_string_value(json_object_get(r, "sandbox_id"));
	if (adopting)
		docker_note(r, "reattached to existing container (adopted: sandgate's record lacked it)");
	if (id)
		docker_run_state(ctx, id, r);
	*result = r;
	return 0;
}

int docker_act_run(void *priv, struct sg_machine *m, const json_t *params, struct sg_call *call,
		   json_t **result, struct sg_err *err)
{
	struct docker_ctx *ctx = priv;
	const char *name = json_string_value(json_object_get(params, "name"));
	struct docker_opts o;
	struct docker_scope sc;
	struct sg_err ferr, ierr;
	char cname[DOCKER_ID_MAX];
	json_t *rec, *info = NULL, *opts;
	int rc;

	(void)m;
	if (!name || !*name)
		return ctx->host->errf(err, SG_E_INVAL, "docker_run needs name: the machine's name");
	/* o borrows from opts until the end. */
	opts = json_deep_copy(params);
	json_object_del(opts, "name");
	if (docker_opts_parse(ctx, opts, "docker_run", &o, err) < 0) {
		json_decref(opts);
		return -1;
	}
	rec = docker_find_machine(ctx, call, name, &ferr);
	if (rec && !strcmp(json_string_value(json_object_get(rec, "name")) ?: "", name)) {
		rc = docker_run_reattach(ctx, rec, &o, result, err);
		goto out;
	}
	docker_scope_of(ctx, call, &sc);
	rc = docker_container_name(ctx, name, cname, sizeof(cname), err);
	if (rc == 0 && docker_container_inspect(ctx, cname, &info, &ierr) == 0 &&
	    !docker_container_is(ctx, info, name, sc.cred)) {
		/* Someone else's: a wall, not a re-attach. */
		rc = ctx->host->errf(err, SG_E_NOTFOUND, "machine '%s' not found among yours, and the "
				     "container name %s is in use on this engine: choose another name",
				     name, cname);
	} else if (rc == 0) {
		rc = docker_run_make(ctx, params, name, o.purpose, info != NULL, call, result, err);
	}
out:
	json_decref(info);
	json_decref(rec);
	docker_opts_free(&o);
	json_decref(opts);
	return rc;
}

/* ---- docker_ps ------------------------------------------------------------------------ */

/* The caller's labelled containers, stopped ones too: a new array. */
static json_t *docker_ps_labelled(struct docker_ctx *ctx, const struct docker_scope *sc)
{
	char filter[DOCKER_PATH_MAX + 512], *lab;
	json_t *reply, *wh;

	/* The work_home label goes through the JSON encoder: it is a path. */
	wh = json_sprintf("%s=%s", DOCKER_LABEL_WORK_HOME, ctx->work_home ? ctx->work_home : "");
	lab = json_dumps(wh, JSON_ENCODE_ANY);
	json_decref(wh);
	if (!lab)
		return json_array();
	snprintf(filter, sizeof(filter), "{\"label\":[\"%s=1\",\"%s=1\",\"%s=%s\",%s]}",
		 DOCKER_LABEL_MANAGED, DOCKER_LABEL_PERSISTENT, DOCKER_LABEL_CREDENTIAL, sc->cred, lab);
	free(lab);
	reply = docker_containers(ctx, filter, true, NULL);
	return reply ? reply : json_array();
}

static bool docker_ps_recorded(const json_t *list, const char *id)
{
	const json_t *e;
	size_t i;

	json_array_foreach(list, i, e)
		if (!strcmp(json_string_value(json_object_get(e, "id")) ?: "", id))
			return true;
	return false;
}

/* Adopts each labelled container of the caller the record lacks. */
static void docker_ps_adopt(struct docker_ctx *ctx, struct sg_call *call, const json_t *labelled,
			    const json_t *list, json_t *adopted)
{
	const json_t *c;
	size_t i;

	json_array_foreach(labelled, i, c) {
		const char *id = json_string_value(json_object_get(c, "Id"));
		const json_t *labels = json_object_get(c, "Labels");
		const char *name = json_string_value(json_object_get(labels, DOCKER_LABEL_NAME));
		const char *purpose = json_string_value(json_object_get(labels, DOCKER_LABEL_PURPOSE));
		struct sg_create_req req = { .name = name };
		json_t *r = NULL;
		struct sg_err err;

		if (!id || !name || !*name || docker_ps_recorded(list, id))
			continue;
		if (ctx->host->machine_create(call, &sg_backend, &req, purpose, &r, &err) == 0) {
			json_array_append_new(adopted, json_string(name));
			ctx->host->log(SG_LOG_INFO, DOCKER_PLUGIN, "docker_ps adopted %s (%.12s)", name, id);
		} else {
			ctx->host->log(SG_LOG_WARNING, DOCKER_PLUGIN, "docker_ps could not adopt %s "
				       "(%.12s): %s", name, id, err.msg);
		}
		json_decref(r);
	}
}

/* One row: the record's view and the engine's. */
static json_t *docker_ps_row(struct docker_ctx *ctx, const json_t *e)
{
	const char *id = json_string_value(json_object_get(e, "id")) ?: "";
	json_int_t created = json_integer_value(json_object_get(e, "created"));
	json_t *info = NULL, *row;
	const json_t *state;
	const char *status = "gone", *name;
	struct sg_err err;
	char when[40];

	docker_iso_time(created, when, sizeof(when));
	row = json_pack("{s:s, s:s, s:s, s:s, s:I, s:b}", "name", json_string_value(json_object_get(e, "name")) ?: "",
			"id", id, "purpose", json_string_value(json_object_get(e, "purpose")) ?: "",
			"created", when, "created_unix", created, "shared",
			json_is_true(json_object_get(e, "shared")));
	if (docker_container_inspect(ctx, id, &info, &err) == 0) {
		state = json_object_get(info, "State");
		status = json_string_value(json_object_get(state, "Status")) ?: "unknown";
		name = json_string_value(json_object_get(info, "Name"));
		json_object_set_new(row, "image", json_string(json_string_value(
			json_object_get(json_object_get(info, "Config"), "Image")) ?: ""));
		json_object_set_new(row, "container", json_string(name && *name == '/' ? name + 1 : name ?: ""));
		if (!json_is_true(json_object_get(state, "Running")))
			json_object_set_new(row, "exit_code", json_integer(json_integer_value(
				json_object_get(state, "ExitCode"))));
	}
	json_object_set_new(row, "status", json_string(status));
	json_decref(info);
	return row;
}

static int docker_ps_newest_first(const void *a, const void *b)
{
	json_int_t x = json_integer_value(json_object_get(*(json_t *const *)a, "created_unix"));
	json_int_t y = json_integer_value(json_object_get(*(json_t *const *)b, "created_unix"));

	return x < y ? 1 : x > y ? -1 : 0;
}

int docker_act_ps(void *priv, struct sg_machine *m, const json_t *params, struct sg_call *call,
		  json_t **result, struct sg_err *err)
{
	struct docker_ctx *ctx = priv;
	const struct sg_host_api *h = ctx->host;
	bool all = json_is_true(json_object_get(params, "all"));
	struct docker_scope sc;
	json_t *list, *labelled, *adopted = json_array(), *rows = json_array(), **v, *e;
	size_t i, n = 0;

	(void)m;
	if (!SG_HOST_HAS(h, call_machines))
		return h->errf(err, SG_E_NOTSUP, "docker_ps needs a sandgate whose plugin ABI is 2.1 or newer");
	docker_scope_of(ctx, call, &sc);
	list = h->call_machines(call, &sg_backend);
	labelled = docker_ps_labelled(ctx, &sc);
	docker_ps_adopt(ctx, call, labelled, list, adopted);
	if (json_array_size(adopted)) {
		json_decref(list);
		list = h->call_machines(call, &sg_backend);
	}
	v = calloc(json_array_size(list) + 1, sizeof(*v));
	if (!v) {
		json_decref(list);
		json_decref(labelled);
		json_decref(adopted);
		json_decref(rows);
		return h->errf(err, SG_E_NOMEM, "docker: out of memory");
	}
	json_array_foreach(list, i, e) {
		json_t *row = docker_ps_row(ctx, e);

		if (!all && strcmp(json_string_value(json_object_get(row, "status")), "running")) {
			json_decref(row);
			continue;
		}
		v[n++] = row;
	}
	qsort(v, n, sizeof(*v), docker_ps_newest_first);
	for (i = 0; i < n; i++)
		json_array_append_new(rows, v[i]);
	free(v);
	*result = json_pack("{s:o, s:o}", "containers", rows, "adopted", adopted);
	json_decref(list);
	json_decref(labelled);
	return 0;
}
