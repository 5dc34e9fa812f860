/*
 * The sandbox_env dispatcher (core/tools/env.h): machines and shells
 * (status, machine_list, default_set, shell_*, machine_create,
 * machine_remove), the help topics built from the loaded plugins, and the
 * plugins' own actions, their params checked against their schemas.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/conf.h"
#include "core/base/err.h"
#include "core/protocol/session.h"
#include "core/registry/machine.h"
#include "core/registry/plugin.h"
#include "core/shell/shell.h"
#include "core/tools/env.h"

/* ---- sandbox_env ----------------------------------------------------------------------- */

struct env_op {
	const char *name;
	const char *description;
	const char *params;  /* "name (required)..." for help */
	const char *example;
	int (*fn)(struct sg_tool_ctx *t, json_t *params, json_t **result, struct sg_err *err);
};

static json_t *machine_row(struct sg_tool_ctx *t, struct sg_entry *e)
{
	char def[SG_ID_MAX], up[32];
	int64_t age = sg_time_s() - e->created;
	bool is_def = sg_session_default_get(t->s, def) && !strcmp(def, e->m.id);

	if (age <= 60)
		snprintf(up, sizeof(up), "%llds", (long long)age);
	else
		snprintf(up, sizeof(up), "%lldh%lldm", (long long)(age / 3600), (long long)(age % 3600 / 60));
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:s, s:b, s:b, s:s}", "name",
			 sg_machine_label(e), "sandbox_id", e->m.id, "backend",
			 e->m.backend->name, "status", e->dead ? "gone" : "running", "purpose",
			 e->purpose, "shells", (int)sg_shell_count(e), "uptime", up, "persistent",
			 !e->ephemeral, "is_default", is_def, "template", e->m.template_name);
}

static json_t *machine_rows(struct sg_tool_ctx *t)
{
	struct sg_entry **v = NULL;
	size_t n = sg_machine_list_visible(t->s, &v);
	json_t *rows = json_array();

	for (size_t i = 0; i < n; i++) {
		json_array_append_new(rows, machine_row(t, v[i]));
		sg_machine_put(v[i]);
	}
	free(v);
	return rows;
}

static int op_machine_list(struct sg_tool_ctx *t, json_t *p, json_t **result, struct sg_err *err)
{
	(void)p;
	(void)err;
	*result = json_pack("{s:o}", "machines", machine_rows(t));
	return 0;
}

static int op_status(struct sg_tool_ctx *t, json_t *p, json_t **result, struct sg_err *err)
{
	char def[SG_ID_MAX];

	(void)p;
	(void)err;
	*result = json_pack("{s:o, s:o, s:o}", "default_machine",
			    sg_session_default_get(t->s, def) ? json_string(def) : json_null(), "machines",
			    machine_rows(t), "shells", sg_shell_list(t->s, NULL));
	return 0;
}

static int op_default_set(struct sg_tool_ctx *t, json_t *p, json_t **result, struct sg_err *err)
{
	const char *m, *id;
	struct sg_entry *e;
	struct sg_shell *sh;

	if (sg_arg_str(p, "machine", false, &m, err) < 0 || sg_arg_str(p, "shell_id", false, &id, err) < 0)
		return -1;
	if ((m && *m) == (id && *id))
		return sg_errf(err, SG_E_INVAL, "Pass exactly one of machine or shell_id");
	if (id && *id) {
		sh = sg_shell_get(t->s, id, err);
		if (!sh)
			return -1;
		sg_shell_make_default(sh);
		e = sg_shell_machine(sh);
		*result = json_pack("{s:{s:s, s:s}}", "default_shell", "machine", sg_machine_label(e),
				    "shell_id", id);
		sg_shell_put(sh);
		return 0;
	}
	e = sg_machine_get(t->s, m, err);
	if (!e)
		return -1;
	sg_session_default_set(t->s, e->m.id);
	*result = json_pack("{s:s, s:s}", "default_machine", e->m.id, "machine", sg_machine_label(e));
	sg_machine_put(e);
	return 0;
}

static int op_shell_new(struct sg_tool_ctx *t, json_t *p, json_t **result, struct sg_err *err)
{
	const char *purpose;
	struct sg_entry *e = NULL;
	struct sg_shell *sh;
	bool created;

	if (sg_arg_str(p, "purpose", false, &purpose, err) < 0 ||
	    sg_env_machine(t, p, "machine", &e, &created, err) < 0)
		return -1;
	sh = sg_shell_new(e, purpose, t->call, err);
	if (sh) {
		json_t *r = NULL;

		sg_shell_read(sh, 0, &r, err);
		*result = json_pack("{s:s, s:s, s:O}", "shell_id", sg_shell_id(sh), "machine",
				    sg_machine_label(e), "bash_pid", json_object_get(r, "bash_pid"));
		json_decref(r);
		sg_env_add_machine(*result, e, created);
		sg_shell_put(sh);
	}
	sg_machine_put(e);
	return sh ? 0 : -1;
}

static int op_shell_remove(struct sg_tool_ctx *t, json_t *p, json_t **result, struct sg_err *err)
{
	const char *id;
	struct sg_shell *sh;

	if (sg_arg_str(p, "shell_id", false, &id, err) < 0)
		return -1;
	if (!id || !*id)
		return sg_errf(err, SG_E_INVAL, "Missing required param: shell_id");
	sh = sg_shell_get(t->s, id, err);
	if (!sh || sg_shell_remove(sh, err) < 0)
		return -1;
	*result = json_pack("{s:s, s:s}", "shell_id", id, "status", "removed");
	return 0;
}

static int op_shell_list(struct sg_tool_ctx *t, json_t *p, json_t **result, struct sg_err *err)
{
	const char *m;

	if (sg_arg_str(p, "machine", false, &m, err) < 0)
		return -1;
	/* An object, not the reference's bare array: structuredContent is one. */
	*result = json_pack("{s:o}", "shells", sg_shell_list(t->s, m));
	return 0;
}

static int op_shell_interrupt(struct sg_tool_ctx *t, json_t *p, json_t **result, struct sg_err *err)
{
	struct sg_shell *sh = NULL;
	bool created;
	int r;

	if (sg_env_shell(t, p, &sh, &created, err) < 0)
		return -1;
	r = sg_shell_interrupt(sh, result, err);
	if (r == 0)
		sg_env_add_machine(*result, sg_shell_machine(sh), created);
	sg_shell_put(sh);
	return r;
}

/* A persistent machine: it belongs to the caller's credential and outlives
 * the session. */
static int create_persistent(struct sg_tool_ctx *t, const char *backend, const char *name,
			     const char *tmpl, const char *purpose, json_t *options, json_t **result,
			     struct sg_err *err)
{
	struct sg_create_req req = { 0 };
	struct sg_entry *e;

	req.template_name = tmpl && *tmpl ? tmpl : NULL;
	req.name = name;
	req.options = options;
	if (sg_machine_create_persistent(t->s, backend, &req, purpose, t->call, &e, err) < 0)
		return -1;
	*result = sg_machine_summary(e);
	sg_machine_put(e);
	return 0;
}

/* The backend's create options: params.options and every parameter the
 * core does not know (a backend's own, such as docker's image or ports:
 * the backend checks them and names any it does not take).  A new object
 * in *out (the caller's). */
static int create_options(json_t *p, json_t **out, struct sg_err *err)
{
	static const char *const core_keys[] = { "name", "backend", "template", "purpose", "options", NULL };
	json_t *options = json_object_get(p, "options"), *v;
	const char *k;

	*out = NULL;
	if (options && !json_is_object(options) && !json_is_null(options))
		return sg_errf(err, SG_E_INVAL, "params.options must be an object");
	*out = json_is_object(options) ? json_copy(options) : json_object();
	json_object_foreach(p, k, v) {
		bool core = false;

		for (size_t i = 0; core_keys[i]; i++)
			core |= !strcmp(k, core_keys[i]);
		if (core)
			continue;
		if (json_object_get(*out, k)) {
			json_decref(*out);
			*out = NULL;
			return sg_errf(err, SG_E_INVAL, "'%s' is given both in options and as a parameter: give it once", k);
		}
		json_object_set(*out, k, v);
	}
	return 0;
}

static int op_machine_create(struct sg_tool_ctx *t, json_t *p, json_t **result, struct sg_err *err)
{
	const char *name, *backend, *tmpl, *purpose;
	json_t *options = NULL;
	int r;

	if (sg_arg_str(p, "name", true, &name, err) < 0 || sg_arg_str(p, "backend", false, &backend, err) < 0 ||
	    sg_arg_str(p, "template", false, &tmpl, err) < 0 || sg_arg_str(p, "purpose", false, &purpose, err) < 0 ||
	    create_options(p, &options, err) < 0)
		return -1;
	r = create_persistent(t, backend && *backend ? backend : NULL, name, tmpl, purpose,
			      json_object_size(options) ? options : NULL, result, err);
	json_decref(options);
	return r;
}

static int op_machine_remove(struct sg_tool_ctx *t, json_t *p, json_t **result, struct sg_err *err)
{
	const char *m;
	struct sg_entry *e;
	char id[SG_ID_MAX];

	if (sg_arg_str(p, "machine", true, &m, err) < 0)
		return -1;
	e = sg_machine_get(t->s, m, err);
	if (!e)
		return -1;
	snprintf(id, sizeof(id), "%s", e->m.id);
	if (sg_machine_kill(e, t->call, err) < 0)
		return -1;
	sg_session_default_clear(t->s, id);
	*result = json_pack("{s:s, s:s}", "machine", m, "status", "removed");
	return 0;
}

static int op_help(struct sg_tool_ctx *t, json_t *p, json_t **result, struct sg_err *err);

static const struct env_op core_ops[] = {
	{ "help", "the operations and help topics", NULL, NULL, op_help },
	{ "status", "the default machine, your machines and their shells", NULL, NULL, op_status },
	{ "machine_list", "your machines (and shared ones): name, backend, status, purpose, shells, uptime",
	  NULL, "{\"action\":\"machine_list\"}", op_machine_list },
	{ "default_set", "make a machine the session's default, or a shell its machine's default shell",
	  "exactly one of machine, shell_id", "{\"action\":\"default_set\",\"params\":{\"machine\":\"dev\"}}",
	  op_default_set },
	{ "shell_new", "open another persistent shell (it does not become the default)",
	  "machine (optional), purpose (optional)",
	  "{\"action\":\"shell_new\",\"params\":{\"purpose\":\"server\"}}", op_shell_new },
	{ "shell_remove", "kill a shell, what it runs and its background jobs",
	  "shell_id (required)", "{\"action\":\"shell_remove\",\"params\":{\"shell_id\":\"sh_0123456789ab\"}}",
	  op_shell_remove },
	{ "shell_list", "your shells: id, machine, purpose, status, last command, bash_pid",
	  "machine (optional)", "{\"action\":\"shell_list\"}", op_shell_list },
	{ "shell_interrupt", "stop the command a shell runs (its process groups); the shell stays",
	  "shell_id or machine (its default shell)",
	  "{\"action\":\"shell_interrupt\",\"params\":{\"shell_id\":\"sh_0123456789ab\"}}", op_shell_interrupt },
	{ "machine_create", "a persistent machine: kept after the session, reachable only with your credential",
	  "name (required), backend, template, purpose, options (an object, or the backend's own parameters given beside these: see <backend>_help)",
	  "{\"action\":\"machine_create\",\"params\":{\"name\":\"dev\"}}", op_machine_create },
	{ "machine_remove", "destroy a machine (persistent or not) and its shells", "machine (required)",
	  "{\"action\":\"machine_remove\",\"params\":{\"machine\":\"dev\"}}", op_machine_remove },
};

static const size_t n_core_ops = sizeof(core_ops) / sizeof(core_ops[0]);

/* ---- discovery ---------------------------------------------------------------------------- */

/* The action `name` of a loaded plugin, or NULL. */
static const struct sg_action *plugin_action(const char *name, struct sg_plugin **owner)
{
	for (struct sg_plugin *pl = sg_plugin_first(); pl; pl = pl->next) {
		const struct sg_backend *b = pl->b;

		for (size_t i = 0; b->actions && i < b->n_actions; i++) {
			if (b->actions[i].name && !strcmp(b->actions[i].name, name)) {
				*owner = pl;
				return &b->actions[i];
			}
		}
	}
	return NULL;
}

static json_t *op_json(const struct env_op *op)
{
	json_t *o = json_pack("{s:s, s:s}", "action", op->name, "description", op->description);

	if (op->params)
		json_object_set_new(o, "params", json_string(op->params));
	if (op->example)
		json_object_set_new(o, "example", json_string(op->example));
	return o;
}

static int op_help(struct sg_tool_ctx *t, json_t *p, json_t **result, struct sg_err *err)
{
	json_t *ops = json_array(), *more = json_object();

	(void)t;
	(void)p;
	(void)err;
	for (size_t i = 0; i < n_core_ops; i++) {
		const char *n = core_ops[i].name;

		if (strcmp(n, "help") && strcmp(n, "status"))
			json_array_append_new(ops, op_json(&core_ops[i]));
	}
	for (struct sg_plugin *pl = sg_plugin_first(); pl; pl = pl->next) {
		char topic[80];

		snprintf(topic, sizeof(topic), "%s_help", pl->b->name);
		json_object_set_new(more, topic, json_string_nocheck(pl->b->summary ? pl->b->summary : pl->b->name));
	}
	*result = json_pack("{s:[{s:s, s:s}, {s:s, s:s}], s:o, s:o, s:s}", "default_actions", "action", "help",
			    "description", "this list", "action", "status", "description",
			    "the default machine, your machines and their shells",
			    "operations", ops, "more_help", more, "note",
			    "Run commands with sandbox_shell_exec (a persistent bash per shell: cwd and exports stay), "
			    "follow long ones with sandbox_shell_read; edit files with sandbox_file_read/write/patch/search. "
			    "machine takes a sandbox_id from create_sandbox or a persistent machine's name; without it the "
			    "session's default machine is used (created on first use). <backend>_help lists a backend's own actions.");
	return 0;
}

/* The <backend>_help topic: the plugin's own action table and help text,
 * plus the core's actions for that backend. */
static int backend_help(struct sg_plugin *pl, json_t **result)
{
	const struct sg_backend *b = pl->b;
	json_t *ops = json_array();

	for (size_t i = 0; b->actions && i < b->n_actions; i++) {
		const struct sg_action *a = &b->actions[i];
		json_t *o = json_pack("{s:s, s:s, s:b}", "action", a->name, "description",
				      a->summary ? a->summary : "", "needs_machine", a->needs_machine);
		json_t *schema = a->params_schema ? json_loads(a->params_schema, 0, NULL) : NULL;

		json_object_set_new(o, "params", schema ? schema : json_object());
		if (a->example)
			json_object_set_new(o, "example", json_string(a->example));
		json_array_append_new(ops, o);
	}
	json_array_append_new(ops, json_pack("{s:s, s:s, s:s++}", "action", "machine_create", "description",
		"a persistent machine on this backend (kept after the session; yours only)",
		"example", "{\"action\":\"machine_create\",\"params\":{\"name\":\"dev\",\"backend\":\"", b->name,
		"\"}}"));
	*result = json_pack("{s:s, s:s, s:s, s:o}", "backend", b->name, "summary", b->summary ? b->summary : "",
			    "help", b->help ? b->help : "", "operations", ops);
	return 0;
}

/* The params of an action against its declared schema: every required
 * property given, and no unknown one where the schema says so (a typo
 * would otherwise be silently ignored). */
static int check_params(const struct sg_plugin *pl, const struct sg_action *a, json_t *p,
			struct sg_err *err)
{
	json_t *schema = json_loads(a->params_schema, 0, NULL), *props, *v;
	const char *key;
	size_t i;
	int r = 0;

	props = json_object_get(schema, "properties");
	json_array_foreach(json_object_get(schema, "required"), i, v) {
		const char *k = json_string_value(v);

		if (k && !json_object_get(p, k)) {
			r = sg_errf(err, SG_E_INVAL, "%s needs params.%s: see sandbox_env action=%s_help for its params",
				    a->name, k, pl->b->name);
			goto out;
		}
	}
	if (!json_is_false(json_object_get(schema, "additionalProperties")))
		goto out;
	json_object_foreach(p, key, v) {
		if (!json_object_get(props, key)) {
			char *valid = NULL;
			const char *k;
			json_t *pv;

			json_object_foreach(props, k, pv) {
				char *prev = valid;

				valid = prev ? sg_xasprintf("%s, %s", prev, k) : sg_xstrdup(k);
				free(prev);
			}
			r = sg_errf(err, SG_E_INVAL, "%s has no parameter '%s': valid ones are %s", a->name, key,
				    valid ? valid : "(none)");
			free(valid);
			goto out;
		}
	}
out:
	json_decref(schema);
	return r;
}

static int run_plugin_action(struct sg_tool_ctx *t, struct sg_plugin *pl, const struct sg_action *a,
			     json_t *p, json_t **result, struct sg_err *err)
{
	struct sg_entry *e = NULL;
	bool created = false;
	int r;

	if (check_params(pl, a, p, err) < 0)
		return -1;
	if (a->needs_machine && sg_env_machine(t, p, "machine", &e, &created, err) < 0)
		return -1;
	if (e && e->m.backend != pl->b) {
		sg_errf(err, SG_E_INVAL, "%s only works on %s machines; '%s' is on %s", a->name, pl->b->name,
			sg_machine_label(e), e->m.backend->name);
		sg_machine_put(e);
		return -1;
	}
	sg_err_clear(err);
	r = a->handler(pl->priv, e ? &e->m : NULL, p, t->call, result, err);
	if (r < 0 && err->code == SG_E_OK)
		sg_errf(err, SG_E_BACKEND, "%s failed", a->name);
	if (r == 0 && !json_is_object(*result)) {
		json_t *v = *result;

		*result = json_pack("{s:o}", "result", v ? v : json_null());
	}
	if (r == 0 && e)
		sg_env_add_machine(*result, e, created);
	sg_machine_put(e);
	return r;
}


static char *valid_actions(void)
{
	struct sg_buf b = { 0 };

	for (size_t i = 0; i < n_core_ops; i++) {
		sg_buf_append(&b, i ? ", " : "", i ? 2 : 0);
		sg_buf_append(&b, core_ops[i].name, strlen(core_ops[i].name));
	}
	for (struct sg_plugin *pl = sg_plugin_first(); pl; pl = pl->next) {
		char *topic = sg_xasprintf(", %s_help", pl->b->name);

		sg_buf_append(&b, topic, strlen(topic));
		free(topic);
		for (size_t i = 0; pl->b->actions && i < pl->b->n_actions; i++) {
			sg_buf_append(&b, ", ", 2);
			sg_buf_append(&b, pl->b->actions[i].name, strlen(pl->b->actions[i].name));
		}
	}
	return b.data;
}

/* The action's parameters: those under `params` and those given flat next
 * to `action` (what the seed's agents send), merged; one given both ways is
 * an error.  A new object in *out (the caller's). */
static int env_params(json_t *args, json_t **out, struct sg_err *err)
{
	json_t *p = json_object_get(args, "params"), *v;
	const char *k;

	*out = NULL;
	if (p && !json_is_object(p) && !json_is_null(p))
		return sg_errf(err, SG_E_INVAL, "argument 'params' must be an object, e.g. {\"shell_id\": \"sh_...\"}");
	*out = json_is_object(p) ? json_copy(p) : json_object();
	json_object_foreach(args, k, v) {
		if (!strcmp(k, "action") || !strcmp(k, "params"))
			continue;
		if (json_object_get(*out, k)) {
			json_decref(*out);
			*out = NULL;
			return sg_errf(err, SG_E_INVAL,
				       "parameter '%s' is given both flat and under params: give it once", k);
		}
		json_object_set(*out, k, v);
	}
	return 0;
}

int sg_tool_env(struct sg_tool_ctx *t, json_t *args, json_t **result, struct sg_err *err)
{
	const char *action;
	json_t *p = NULL, *empty = NULL;
	struct sg_plugin *pl = NULL;
	const struct sg_action *a;
	char *valid;
	size_t n;
	int r = -1;

	if (sg_arg_str(args, "action", true, &action, err) < 0)
		return -1;
	if (env_params(args, &empty, err) < 0)
		return -1;
	p = empty;
	for (size_t i = 0; i < n_core_ops; i++) {
		if (!strcmp(core_ops[i].name, action)) {
			r = core_ops[i].fn(t, p, result, err);
			goto out;
		}
	}
	n = strlen(action);
	if (n > 5 && !strcmp(action + n - 5, "_help")) {
		char name[64];

		snprintf(name, sizeof(name), "%.*s", (int)(n - 5), action);
		if ((pl = sg_plugin_find(name)) != NULL) {
			r = backend_help(pl, result);
			goto out;
		}
	}
	a = plugin_action(action, &pl);
	if (a) {
		r = run_plugin_action(t, pl, a, p, result, err);
		goto out;
	}
	valid = valid_actions();
	sg_errf(err, SG_E_NOTFOUND, "Unknown action: %.64s. Valid actions: %s. Call action=help for what they do.",
		action, valid ? valid : "help, status");
	free(valid);
out:
	json_decref(empty);
	return r;
}

