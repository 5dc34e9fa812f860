/* Entry snippets in JSON, TOML and YAML (core/cli/snippet.h). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "core/base/buf.h"
#include "core/cli/clients.h"
#include "core/cli/jsonfile.h"
#include "core/cli/snippet.h"
#include "core/base/util.h"

/* A JSON string literal is also a TOML basic string and a YAML
 * double-quoted scalar: the same escapes (jansson never writes "\/"). */
static void put_str(struct sg_buf *b, const char *s)
{
	json_t *j = json_string(s);
	char *q = json_dumps(j, JSON_ENCODE_ANY);

	sg_buf_append(b, q, strlen(q));
	free(q);
	json_decref(j);
}

static void put(struct sg_buf *b, const char *s)
{
	sg_buf_append(b, s, strlen(s));
}

static void put_args(struct sg_buf *b, const json_t *args)
{
	size_t i;
	json_t *a;

	put(b, "[");
	json_array_foreach(args, i, a) {
		if (i)
			put(b, ", ");
		put_str(b, json_string_value(a));
	}
	put(b, "]\n");
}

static void toml(struct sg_buf *b, const char *servers, const char *name, const json_t *e)
{
	json_t *env = json_object_get(e, "env"), *v;
	const char *k;

	put(b, "[");
	put(b, servers);
	put(b, ".");
	put(b, name);
	put(b, "]\ncommand = ");
	put_str(b, json_string_value(json_object_get(e, "command")));
	put(b, "\nargs = ");
	put_args(b, json_object_get(e, "args"));
	if (!env)
		return;
	put(b, "\n[");
	put(b, servers);
	put(b, ".");
	put(b, name);
	put(b, ".env]\n");
	json_object_foreach(env, k, v) {
		put_str(b, k);
		put(b, " = ");
		put_str(b, json_string_value(v));
		put(b, "\n");
	}
}

static void yaml(struct sg_buf *b, const char *servers, const char *name, const json_t *e)
{
	json_t *env = json_object_get(e, "env"), *v;
	const char *k;

	put(b, servers);
	put(b, ":\n  ");
	put(b, name);
	put(b, ":\n    command: ");
	put_str(b, json_string_value(json_object_get(e, "command")));
	put(b, "\n    args: ");
	put_args(b, json_object_get(e, "args"));
	if (!env)
		return;
	put(b, "    env:\n");
	json_object_foreach(env, k, v) {
		put(b, "      ");
		put_str(b, k);
		put(b, ": ");
		put_str(b, json_string_value(v));
		put(b, "\n");
	}
}

char *sg_snippet(const struct sg_client *c, const char *name, const json_t *entry)
{
	struct sg_buf b = { 0 };

	if (c->format == SG_CLIENT_TOML) {
		toml(&b, c->servers, name, entry);
	} else if (c->format == SG_CLIENT_YAML) {
		yaml(&b, c->servers, name, entry);
	} else {
		json_t *wrap = json_pack("{s:{s:O}}", c->servers, name, entry);
		char *text = sg_json_text(wrap, 2);

		json_decref(wrap);
		return text;
	}
	return b.data;
}
