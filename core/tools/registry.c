#include "config.h"

#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/protocol/call.h"
#include "core/base/conf.h"
#include "core/base/err.h"
#include "core/base/log.h"
#include "core/registry/machine.h"
#include "core/registry/provision.h"
#include "core/protocol/session.h"
#include "core/protocol/bulk.h"
#include "core/protocol/dump.h"
#include "core/protocol/jsonrpc.h"
#include "core/registry/redact.h"
#include "core/tools/cut.h"
#include "core/tools/registry.h"
#include "core/base/util.h"

#define SG_TOOLS_MAX 64

static const struct sg_tool *tools[SG_TOOLS_MAX];
static const char *families[SG_TOOLS_MAX]; /* NULL: served whatever [server] tools says */
static json_t *schemas[SG_TOOLS_MAX];
static json_t *annotations[SG_TOOLS_MAX];
static json_t *out_schemas[SG_TOOLS_MAX];
static size_t n_tools;
static json_t *tools_list;
/* The serialised tools/list result, so HTTP does not re-dump it per request
 * (doc/http.md "Performance"); built and read under tools_text_lock. */
static char *tools_text;
static size_t tools_text_len;
static pthread_mutex_t tools_text_lock = PTHREAD_MUTEX_INITIALIZER;

static void tools_text_clear(void)
{
	pthread_mutex_lock(&tools_text_lock);
	free(tools_text);
	tools_text = NULL;
	json_decref(tools_list);
	tools_list = NULL;
	pthread_mutex_unlock(&tools_text_lock);
}

/* Parses one of a tool's JSON texts; NULL text gives NULL. */
static json_t *tool_json(const struct sg_tool *t, const char *what, const char *text)
{
	json_error_t jerr;
	json_t *j;

	if (!text)
		return NULL;
	j = json_loads(text, 0, &jerr);
	if (!json_is_object(j)) {
		SG_ERROR("tool '%s': %s is not a JSON object: %s (line %d)", t->name, what, jerr.text,
			 jerr.line);
		abort();
	}
	return j;
}

void sg_tools_register_family(const char *family, const struct sg_tool *list, size_t n)
{
	for (size_t i = 0; i < n && n_tools < SG_TOOLS_MAX; i++) {
		const struct sg_tool *t = &list[i];

		/* Every tool has an input schema: "" fails as a missing one. */
		schemas[n_tools] = tool_json(t, "input schema", t->input_schema ? t->input_schema : "");
		annotations[n_tools] = tool_json(t, "annotations", t->annotations);
		out_schemas[n_tools] = tool_json(t, "output schema", t->output_schema);
		families[n_tools] = family;
		tools[n_tools++] = t;
	}
	tools_text_clear();
}

void sg_tools_register(const struct sg_tool *list, size_t n)
{
	sg_tools_register_family(NULL, list, n);
}

void sg_tools_fini(void)
{
	sg_tools_env_fini();
	for (size_t i = 0; i < n_tools; i++) {
		json_decref(schemas[i]);
		json_decref(annotations[i]);
		json_decref(out_schemas[i]);
	}
	n_tools = 0;
	tools_text_clear();
}

/* [server] tools: all (the default), or the one family served. */
static bool served(size_t i)
{
	const char *profile = sg_config_get("server", "tools");

	return !families[i] || !profile || !*profile || !strcmp(profile, "all") ||
	       !strcmp(profile, families[i]);
}

const struct sg_tool *sg_tool_find(const char *name)
{
	for (size_t i = 0; i < n_tools; i++)
		if (strcmp(tools[i]->name, name) == 0)
			return served(i) ? tools[i] : NULL;
	return NULL;
}

const char *sg_tool_unserved_family(const char *name)
{
	for (size_t i = 0; i < n_tools; i++)
		if (strcmp(tools[i]->name, name) == 0)
			return served(i) ? NULL : families[i];
	return NULL;
}

static json_t *schema_of(const struct sg_tool *tool)
{
	for (size_t i = 0; i < n_tools; i++)
		if (tools[i] == tool)
			return schemas[i];
	return NULL;
}

/* A property's "default": {"config": "section.key"} becomes the value that
 * key has, typed as the property is: a default the operator configured is
 * the one the schema shows, and none is written twice. */
static void config_defaults(json_t *schema)
{
	json_t *props = json_object_get(schema, "properties"), *prop;
	const char *name;

	json_object_foreach(props, name, prop) {
		const char *ref = json_string_value(json_object_get(json_object_get(prop, "default"), "config"));
		const char *type = json_string_value(json_object_get(prop, "type"));
		const char *dot = ref ? strchr(ref, '.') : NULL, *v;
		char section[64];

		if (!dot || (size_t)(dot - ref) >= sizeof(section))
			continue;
		snprintf(section, sizeof(section), "%.*s", (int)(dot - ref), ref);
		v = sg_config_get(section, dot + 1);
		if (!v) {
			json_object_del(prop, "default");
		} else if (type && !strcmp(type, "integer")) {
			json_object_set_new(prop, "default", json_integer(sg_config_int(section, dot + 1, 0)));
		} else if (type && !strcmp(type, "boolean")) {
			json_object_set_new(prop, "default", json_boolean(sg_config_bool(section, dot + 1, false)));
		} else {
			json_object_set_new(prop, "default", json_string(v));
		}
	}
}

/* Called with tools_text_lock held. */
static json_t *list_locked(void)
{
	json_t *arr;

	if (tools_list)
		return tools_list;
	arr = json_array();
	for (size_t i = 0; i < n_tools; i++) {
		json_t *t;

		if (!served(i))
			continue;
		config_defaults(schemas[i]);
		if (tools[i]->schema_hook)
			tools[i]->schema_hook(schemas[i]);
		t = json_pack("{s:s, s:s, s:O}", "name", tools[i]->name, "description",
			      tools[i]->description, "inputSchema", schemas[i]);
		if (annotations[i])
			json_object_set(t, "annotations", annotations[i]);
		if (out_schemas[i])
			json_object_set(t, "outputSchema", out_schemas[i]);
		json_array_append_new(arr, t);
	}
	tools_list = json_pack("{s:o}", "tools", arr);
	return tools_list;
}

json_t *sg_tools_list(void)
{
	json_t *l;

	pthread_mutex_lock(&tools_text_lock);
	l = list_locked();
	pthread_mutex_unlock(&tools_text_lock);
	return l;
}

const char *sg_tools_list_text(size_t *len)
{
	const char *text;

	pthread_mutex_lock(&tools_text_lock);
	if (!tools_text) {
		tools_text = json_dumps(list_locked(), JSON_COMPACT);
		if (!tools_text)
			abort(); /* out of memory: the sg_xmalloc policy */
		tools_text_len = strlen(tools_text);
	}
	text = tools_text;
	*len = tools_text_len;
	pthread_mutex_unlock(&tools_text_lock);
	return text;
}

/* Unknown argument names are refused: a typo ("comand") would otherwise be
 * silently ignored and the call would do something else.  A tool whose
 * schema says additionalProperties: true checks its own (sandbox_env: an
 * action's params may come flat). */
static int check_known(const struct sg_tool *tool, json_t *args, struct sg_err *err)
{
	json_t *props = json_object_get(schema_of(tool), "properties");
	const char *key;
	json_t *v;

	if (json_is_true(json_object_get(schema_of(tool), "additionalProperties")))
		return 0;
	json_object_foreach(args, key, v) {
		char valid[512] = "";
		const char *k;
		json_t *pv;
		size_t o = 0;

		if (json_object_get(props, key))
			continue;
		json_object_foreach(props, k, pv) {
			int w = snprintf(valid + o, sizeof(valid) - o, "%s%s", o ? ", " : "", k);

			if (w > 0 && (size_t)w < sizeof(valid) - o)
				o += (size_t)w;
		}
		return sg_errf(err, SG_E_INVAL,
			       "unknown argument '%s' for %s: valid arguments are %s", key,
			       tool->name, o ? valid : "none");
	}
	return 0;
}

static json_t *text_block(const char *text)
{
	return json_pack("{s:s, s:s}", "type", "text", "text", text);
}

/* Slack over the budget for the markers of a field a tool cut itself. */
#define CUT_SLACK 4096
#define CUT_FIELDS_MAX 16

/* The backstop of doc/results.md: a top-level string a tool did not bound
 * itself (a patch's diff, a long error text) keeps its head, cut on a
 * UTF-8 boundary, and cut.FIELD says so (with no call for the rest).  A
 * call that set its own size (limit, max_output) gets what it asked for:
 * those tools cap it by their own keys. */
static void bound_result(json_t *result, json_t *args)
{
	char fields[CUT_FIELDS_MAX][64];
	const char *k;
	json_t *cut = json_object_get(result, "cut"), *v;
	size_t budget = sg_cut_budget(), n = 0;

	if (json_object_get(args, "limit") || json_object_get(args, "max_output"))
		return;
	json_object_foreach(result, k, v)
		if (n < CUT_FIELDS_MAX && strlen(k) < sizeof(fields[0]) && json_is_string(v) &&
		    json_string_length(v) > budget + CUT_SLACK && !json_object_get(cut, k))
			snprintf(fields[n++], sizeof(fields[0]), "%s", k);
	for (size_t i = 0; i < n; i++) {
		json_t *s = json_object_get(result, fields[i]);
		const char *text = json_string_value(s);
		size_t total = json_string_length(s), keep = budget;

		while (keep > 0 && ((unsigned char)text[keep] & 0xC0) == 0x80)
			keep--; /* not inside a character */
		sg_cut_note(result, fields[i],
			    sg_cut_desc(total, -1, keep, json_pack("[[II]]", (json_int_t)0, (json_int_t)keep), NULL));
		json_object_set_new(result, fields[i], json_stringn_nocheck(text, keep));
	}
}

static json_t *call_tool(struct sg_tool_ctx *t, const struct sg_tool *tool, json_t *args)
{
	json_t *result = NULL, *content, *extra;
	json_t *empty = NULL;
	struct sg_err err;

	sg_err_clear(&err);
	if (!args)
		args = empty = json_object();
	if (!json_is_object(args)) {
		sg_errf(&err, SG_E_INVAL, "arguments for %s must be a JSON object", tool->name);
		goto fail;
	}
	if (check_known(tool, args, &err) < 0)
		goto fail;
	if (tool->fn(t, args, &result, &err) < 0)
		goto fail;
	bound_result(result, args);
	json_decref(empty); /* args with it */
	extra = json_incref(json_object_get(result, "_content"));
	json_object_del(result, "_content");
	/* A result of only "_content" is exactly those blocks (the conformance
	 * fixtures, core/fixtures.c): no JSON text, no empty structuredContent. */
	if (json_is_array(extra) && json_object_size(result) == 0) {
		json_decref(result);
		return json_pack("{s:o}", "content", extra);
	}
	/* The text is written from structuredContent as the reply goes out
	 * (core/protocol/dump.h): never held apart from it. */
	content = json_array();
	json_array_append_new(content, json_pack("{s:s, s:o}", "type", "text", "text",
						 sg_text_of_structured()));
	if (json_is_array(extra))
		json_array_extend(content, extra);
	json_decref(extra);
	return json_pack("{s:o, s:o}", "content", content, "structuredContent", result);
fail:
	json_decref(empty);
	json_decref(result);
	if (err.code == SG_E_OK)
		sg_errf(&err, SG_E_INTERNAL, "%s failed", tool->name);
	return json_pack("{s:[o], s:b}", "content", text_block(err.msg), "isError", 1);
}

json_t *sg_tool_call(struct sg_tool_ctx *t, const struct sg_tool *tool, json_t *args)
{
	/* The result never holds a secret the caller passed (redact.h): most
	 * calls pass none, and pay one walk of their arguments. */
	json_t *secrets = json_is_object(args) ? sg_redact_secrets(args) : NULL;
	json_t *result = call_tool(t, tool, args);
	struct sg_bytes *held = t->call ? &t->call->held : NULL;
	size_t len;
	char *clean;

	/* once, over the whole result: its text block is written from the
	 * structuredContent scrubbed here as the reply goes out (dump.h) */
	sg_redact_scrub(result, secrets);
	/* the string held for the reply is not in result's strings */
	if (held && held->ph && (clean = sg_redact_text(held->data, held->len, secrets, &len))) {
		free(held->data);
		held->data = clean;
		held->len = len;
		held->plain = false; /* the mark put in may be anything */
	}
	json_decref(secrets);
	return result;
}

int sg_tool_text_arg(const struct sg_tool_ctx *t, json_t *args, const char *name, bool required,
		     const char **p, size_t *len, struct sg_err *err)
{
	const struct sg_bulk *b = t ? sg_bulk_find(t->bulk, name) : NULL;

	*len = 0;
	if (sg_arg_str(args, name, required, p, err) < 0)
		return -1;
	if (b && b->digest) /* taken (sg_tool_take_bulk): its bytes changed */
		return sg_errf(err, SG_E_INTERNAL, "argument '%s' was read twice", name);
	if (b) {
		*p = b->data;
		*len = b->len;
	} else if (*p) {
		*len = json_string_length(json_object_get(args, name));
	}
	return 0;
}

char *sg_tool_take_bulk(struct sg_tool_ctx *t, const char *name, size_t *len)
{
	struct sg_bulk *b = t ? t->bulk : NULL;

	for (; b && strcmp(b->key, name); b = b->next)
		;
	if (!b)
		return NULL;
	if (!b->digest)
		b->digest = sg_redact_digest(b->data, b->len);
	*len = b->len;
	return b->data;
}

/* ---- the session's default machine ---------------------------------------- */

static int create_default(struct sg_tool_ctx *t, struct sg_entry **out, struct sg_err *err)
{
	struct sg_create_req req = {
		.template_name = NULL,
		.lifetime_s = (unsigned)sg_config_int("sandbox", "timeout", 300),
		.owner = sg_machine_owner_label(),
		.session_hash = t->s->hash,
	};

	return sg_machine_create(t->s, NULL, &req, t->call, out, err);
}

/* The machine provisioned at startup ([default_machine]) is every
 * session's first default, while it exists. */
static bool startup_default(struct sg_session *s, struct sg_entry **out)
{
	char id[SG_ID_MAX];

	if (!sg_default_machine_id(id))
		return false;
	*out = sg_machine_get(s, id, NULL);
	if (!*out)
		return false;
	pthread_mutex_lock(&s->lock);
	if (!s->default_id[0])
		snprintf(s->default_id, sizeof(s->default_id), "%s", id);
	pthread_mutex_unlock(&s->lock);
	return true;
}

int sg_tool_machine(struct sg_tool_ctx *t, json_t *args, struct sg_entry **out,
		    bool *created, struct sg_err *err)
{
	struct sg_session *s = t->s;
	const char *id;
	char def[SG_ID_MAX];
	int r;

	*created = false;
	if (sg_arg_str(args, "sandbox_id", false, &id, err) < 0)
		return -1;
	if (id && *id) {
		*out = sg_machine_get(s, id, err);
		return *out ? 0 : -1;
	}
	for (;;) {
		pthread_mutex_lock(&s->lock);
		if (s->default_id[0]) {
			memcpy(def, s->default_id, sizeof(def));
			pthread_mutex_unlock(&s->lock);
			*out = sg_machine_get(s, def, NULL);
			if (*out)
				return 0;
			/* The default is gone (expired, killed): make a new one. */
			sg_session_default_clear(s, def);
			continue;
		}
		if (s->creating_default) {
			pthread_cond_wait(&s->cond, &s->lock);
			pthread_mutex_unlock(&s->lock);
			if (sg_call_cancelled(t->call))
				return sg_errf(err, SG_E_CANCELLED, "cancelled");
			continue;
		}
		pthread_mutex_unlock(&s->lock);
		if (startup_default(s, out))
			return 0;
		pthread_mutex_lock(&s->lock);
		if (s->default_id[0] || s->creating_default) {
			pthread_mutex_unlock(&s->lock);
			continue; /* another call got there first */
		}
		s->creating_default = true;
		pthread_mutex_unlock(&s->lock);
		r = create_default(t, out, err);
		pthread_mutex_lock(&s->lock);
		s->creating_default = false;
		if (r == 0)
			snprintf(s->default_id, sizeof(s->default_id), "%s", (*out)->m.id);
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
		if (r < 0) {
			sg_err_prefix(err, "cannot create the default sandbox: ");
			return -1;
		}
		*created = true;
		return 0;
	}
}

void sg_tool_result_machine(json_t *result, const struct sg_entry *e, bool created)
{
	json_object_set_new(result, "sandbox_id", json_string(e->m.id));
	if (created)
		json_object_set_new(result, "sandbox_created", json_true());
}
