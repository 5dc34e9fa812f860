/* sandgate status: what this sandgate would run with, and whether it can. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cli/backends.h"
#include "core/cli/cli.h"
#include "core/cli/clients.h"
#include "core/cli/commands.h"
#include "core/cli/entry.h"
#include "core/cli/jsonfile.h"
#include "core/base/conf.h"
#include "core/base/err.h"
#include "core/registry/plugin.h"
#include "core/registry/usage.h"
#include "core/tools/registry.h"
#include "core/base/util.h"

static const char status_help[] =
	"usage: sandgate status [--json] [--workspace DIR]\n"
	"\n"
	"Prints the version; the configuration file read and where each key that is not\n"
	"at its default comes from (a secret only as set); the transports; the backend\n"
	"plugins loaded, with their version and ABI, and the ones that failed; the tools;\n"
	"whether each backend is usable now; and which MCP clients have a sandgate entry\n"
	"and whether it runs this binary (vscode and claude-code: in --workspace, default\n"
	"the current directory); and what each credential holds in each sandgate serving\n"
	"now (by the hash of the credential, never the token; updated once a second).\n"
	"sandgate never prints a secret.\n"
	"\n"
	"Exit status: 0 when the default backend ([sandbox] default_backend) is loaded\n"
	"and not known to be unusable, 1 when it is not, 3 when the configuration is\n"
	"not valid.\n";

/* ---- configuration ---------------------------------------------------------------- */

struct keys_ctx {
	json_t *arr;
	const char *section;
	const struct sg_config_key *k;
};

static void add_key(json_t *arr, const char *section, const char *key, bool secret,
		    const char *value, const char *source)
{
	json_t *o = json_pack("{s:s, s:s, s:s}", "section", section, "key", key, "source", source);

	if (secret)
		json_object_set_new(o, "set", json_boolean(value && *value));
	else
		json_object_set_new(o, "value", value ? json_string(value) : json_null());
	json_object_set_new(o, "secret", json_boolean(secret));
	json_array_append_new(arr, o);
}

/* A concrete key under a wildcard ("template.python" under "template.*"). */
static void wild_key(const char *key, const char *value, void *ud)
{
	struct keys_ctx *c = ud;

	add_key(c->arr, c->section, key, c->k->secret, value, sg_config_source(c->section, key));
}

static void each_key(const char *section, const struct sg_config_key *k, const char *value,
		     const char *source, void *ud)
{
	struct keys_ctx *c = ud;
	size_t n = strlen(k->key);

	if (strchr(section, '*'))
		return; /* sections such as [ssh.target.NAME] cannot be listed */
	if (n && k->key[n - 1] == '*') {
		char prefix[128];

		snprintf(prefix, sizeof(prefix), "%.*s", (int)n - 1, k->key);
		c->section = section;
		c->k = k;
		sg_config_each(section, prefix, wild_key, c);
		return;
	}
	if (strcmp(source, "default"))
		add_key(c->arr, section, k->key, k->secret, value, source);
}

static json_t *config_json(const char *invalid)
{
	struct keys_ctx c = { json_array(), NULL, NULL };
	const char *file = sg_config_file();

	sg_config_each_key(each_key, &c);
	return json_pack("{s:s?, s:b, s:s?, s:o}", "file", file, "valid", !invalid, "error", invalid,
			 "keys", c.arr);
}

/* ---- transports, plugins, tools ---------------------------------------------------- */

static json_t *transports_json(void)
{
	const char *host = sg_config_get("server", "host"), *file;
	json_t *auth = json_array();
	char *url;
	json_t *t;

	file = sg_config_get("server", "auth_tokens_file");
	if (file && *file)
		json_array_append_new(auth, json_pack("s+", "file ", file));
	/* the names of the variables that hold tokens, never their values */
	if (getenv("SANDGATE_SERVER_AUTH_TOKENS"))
		json_array_append_new(auth, json_string("environment SANDGATE_SERVER_AUTH_TOKENS"));
	if (getenv("ABX_MCP_AUTH_TOKEN"))
		json_array_append_new(auth, json_string("environment ABX_MCP_AUTH_TOKEN"));
	if (sg_config_bool("server", "ephemeral_token", false))
		json_array_append_new(auth, json_string("ephemeral token (printed at startup)"));
	url = sg_xasprintf(strchr(host, ':') && host[0] != '[' ? "http://[%s]:%s/mcp" : "http://%s:%s/mcp",
			   host, sg_config_get("server", "port"));
	t = json_pack("[{s:s}, {s:s, s:s, s:o}]", "name", "stdio", "name", "http", "url", url,
		      "bearer_tokens", auth);
	free(url);
	return t;
}

/* Loads each backend on its own, so that one failure does not hide the
 * others; the failures go to *failed. */
static void load_plugins(json_t **failed)
{
	struct sg_err err;

	*failed = json_array();
	if (sg_plugin_load_configured(&err) < 0) {
		/* The loader's messages begin "plugin 'NAME'". */
		const char *q = strncmp(err.msg, "plugin '", 8) ? NULL : err.msg + 8;
		const char *end = q ? strchr(q, '\'') : NULL;

		json_array_append_new(*failed, json_pack("{s:s%, s:s}", "name", q && end ? q : "",
							 q && end ? (size_t)(end - q) : 0, "error",
							 err.msg));
	}
}

static json_t *plugins_json(json_t *failed)
{
	json_t *loaded = json_array(), *path = json_array();
	char **dirs = sg_plugin_path();

	for (struct sg_plugin *p = sg_plugin_first(); p; p = p->next) {
		char abi[32];

		snprintf(abi, sizeof(abi), "%u.%u", p->b->abi_major, p->b->abi_minor);
		json_array_append_new(loaded, json_pack("{s:s, s:s?, s:s, s:s}", "name", p->b->name,
							"version", p->b->version, "abi", abi, "path",
							p->path));
	}
	for (char **d = dirs; *d; d++)
		json_array_append_new(path, json_string(*d));
	sg_strv_free(dirs);
	return json_pack("{s:o, s:o, s:O}", "path", path, "loaded", loaded, "failed", failed);
}

static json_t *tools_json(void)
{
	json_t *tools = json_object_get(sg_tools_list(), "tools"), *names = json_array(), *t;
	size_t i;

	json_array_foreach(tools, i, t)
		json_array_append(names, json_object_get(t, "name"));
	return json_pack("{s:I, s:o}", "count", (json_int_t)json_array_size(names), "names", names);
}

/* ---- clients ---------------------------------------------------------------------- */

/* The entries that run a sandgate: named sandgate, or whose command is a
 * file called sandgate. */
static json_t *entries_of(json_t *servers, const char *self)
{
	json_t *arr = json_array(), *v;
	const char *name;

	json_object_foreach(servers, name, v) {
		const char *cmd = json_string_value(json_object_get(v, "command"));
		const char *base = cmd ? strrchr(cmd, '/') : NULL;
		char *real;

		base = base ? base + 1 : cmd;
		if (strcmp(name, "sandgate") && (!base || strcmp(base, "sandgate")))
			continue;
		real = cmd ? sg_cli_realpath(cmd) : NULL;
		json_array_append_new(arr, json_pack("{s:s, s:s?, s:b}", "name", name, "command", cmd,
						     "runs_this_binary", real && self && !strcmp(real, self)));
		free(real);
	}
	return arr;
}

static json_t *client_json(const struct sg_client *c, const char *workspace, const char *self)
{
	struct sg_jsonfile f;
	struct sg_err err;
	char *path = sg_client_path(c, workspace, &err);
	json_t *o, *servers;

	if (!path)
		return json_pack("{s:s, s:n, s:n, s:s}", "target", c->target, "file", "installed", "why",
				 err.msg);
	o = json_pack("{s:s, s:s}", "target", c->target, "file", path);
	free(path);
	if (c->format != SG_CLIENT_JSON) {
		json_object_set_new(o, "installed", json_null());
		json_object_set_new(o, "why", json_string("sandgate does not read TOML or YAML files"));
		return o;
	}
	if (sg_jsonfile_read(json_string_value(json_object_get(o, "file")), &f, &err) < 0) {
		json_object_set_new(o, "installed", json_null());
		json_object_set_new(o, "why", json_string(err.msg));
		return o;
	}
	json_object_set_new(o, "exists", json_boolean(f.exists));
	if (!f.root) {
		json_object_set_new(o, "installed", json_null());
		json_object_set_new(o, "why", json_sprintf("the file is left unread: %s", f.why));
	} else {
		servers = json_object_get(f.root, c->servers);
		json_object_set_new(o, "entries", entries_of(json_is_object(servers) ? servers : NULL, self));
		json_object_set_new(o, "installed",
				    json_boolean(json_array_size(json_object_get(o, "entries")) > 0));
	}
	sg_jsonfile_free(&f);
	return o;
}

static json_t *clients_json(const char *workspace)
{
	char *self = sg_cli_self_exe();
	json_t *arr = json_array();
	const struct sg_client *cs;
	size_t n;

	cs = sg_clients(&n);
	for (size_t i = 0; i < n; i++)
		json_array_append_new(arr, client_json(&cs[i], workspace, self));
	free(self);
	return arr;
}

/* ---- the default backend and the exit status ---------------------------------------- */

/* The default backend, as a call without `backend` would get it: the
 * configured one, or the usable plugin with the highest preference. */
static json_t *default_backend(json_t *backends)
{
	const char *conf = sg_config_get("sandbox", "default_backend");
	json_t *rep = sg_plugin_default_report(), *b, *out;
	const char *name = json_string_value(json_object_get(rep, "backend"));
	json_t *usable = json_false();
	size_t i;

	if (!name && conf && *conf)
		name = conf; /* configured, but no such plugin is loaded */
	json_array_foreach(backends, i, b)
		if (name && !strcmp(json_string_value(json_object_get(b, "name")), name))
			usable = json_object_get(b, "usable");
	out = json_pack("{s:s?, s:b, s:O, s:O, s:O, s:b}", "name", name, "loaded",
			name && sg_plugin_find(name), "usable", usable, "source",
			json_object_get(rep, "source"), "why", json_object_get(rep, "why"), "ok",
			name && json_is_true(usable));
	json_decref(rep);
	return out;
}

/* ---- text output -------------------------------------------------------------------- */

static const char *tri(const json_t *v)
{
	return json_is_true(v) ? "yes" : json_is_false(v) ? "no" : "unknown";
}

static void print_entries(const json_t *es)
{
	const json_t *v;
	size_t j;

	json_array_foreach(es, j, v)
		printf("%s'%s' %s", j ? ", " : "", json_string_value(json_object_get(v, "name")),
		       json_is_true(json_object_get(v, "runs_this_binary")) ? "runs this binary"
									 : "runs another binary");
	putchar('\n');
}

/* The probe's facts of a backend (its endpoint first when it says one),
 * as the plugin named them: the core knows no backend's keys. */
static void print_details(const json_t *d)
{
	const char *k;
	const json_t *v;
	int n = 0;

	if (!json_is_object(d))
		return;
	if (json_is_string(json_object_get(d, "endpoint")))
		n = printf("                     endpoint: %s", json_string_value(json_object_get(d, "endpoint")));
	json_object_foreach((json_t *)d, k, v) {
		if (!strcmp(k, "endpoint") || !(json_is_string(v) || json_is_integer(v)))
			continue;
		if (json_is_string(v))
			n += printf("%s%s: %s", n ? ", " : "                     ", k, json_string_value(v));
		else
			n += printf("%s%s: %lld", n ? ", " : "                     ", k,
				    (long long)json_integer_value(v));
	}
	if (n)
		putchar('\n');
}

/* Each running sandgate's use per credential (by hash, never the token). */
static void print_usage(const json_t *servers)
{
	const json_t *srv, *c;
	size_t i, j;

	printf("in use:     %s\n", json_array_size(servers) ? "(per credential: sessions, calls in flight, sandboxes, shells; [server] quota_*)"
							: "no sandgate serving");
	json_array_foreach(servers, i, srv) {
		printf("  pid %lld:%s\n", (long long)json_integer_value(json_object_get(srv, "pid")),
		       json_array_size(json_object_get(srv, "credentials")) ? "" : " nothing held");
		json_array_foreach(json_object_get(srv, "credentials"), j, c)
			printf("    credential %s: %lld sessions, %lld calls, %lld sandboxes, %lld shells\n",
			       json_string_value(json_object_get(c, "credential")),
			       (long long)json_integer_value(json_object_get(c, "sessions")),
			       (long long)json_integer_value(json_object_get(c, "calls")),
			       (long long)json_integer_value(json_object_get(c, "sandboxes")),
			       (long long)json_integer_value(json_object_get(c, "shells")));
	}
}

static void print_text(const json_t *st)
{
	const json_t *cfg = json_object_get(st, "config"), *v, *x;
	size_t i, j;

	printf("sandgate %s (plugin ABI %s)\n", json_string_value(json_object_get(st, "version")),
	       json_string_value(json_object_get(st, "plugin_abi")));
	printf("binary:     %s%s\n", json_string_value(json_object_get(st, "binary")),
	       json_is_true(json_object_get(st, "installed")) ? "" : " (not installed)");
	v = json_object_get(cfg, "file");
	printf("config:     %s\n", json_is_string(v) ? json_string_value(v) : "no file (built-in defaults)");
	if (json_is_false(json_object_get(cfg, "valid")))
		printf("            NOT VALID: %s\n", json_string_value(json_object_get(cfg, "error")));
	json_array_foreach(json_object_get(cfg, "keys"), i, v) {
		const json_t *val = json_object_get(v, "value");

		printf("            %s.%s = %s\t(%s)\n", json_string_value(json_object_get(v, "section")),
		       json_string_value(json_object_get(v, "key")),
		       json_is_true(json_object_get(v, "secret"))
			       ? (json_is_true(json_object_get(v, "set")) ? "(secret, set)" : "(secret, empty)")
			       : (json_string_value(val) ? json_string_value(val) : ""),
		       json_string_value(json_object_get(v, "source")));
	}
	json_array_foreach(json_object_get(st, "transports"), i, v) {
		printf("%s %s", i ? "           " : "transports:", json_string_value(json_object_get(v, "name")));
		if ((x = json_object_get(v, "url"))) {
			printf(" %s, bearer tokens: ", json_string_value(x));
			if (!json_array_size(json_object_get(v, "bearer_tokens")))
				printf("none (loopback only)");
			json_array_foreach(json_object_get(v, "bearer_tokens"), j, x)
				printf("%s%s", j ? ", " : "", json_string_value(x));
		}
		putchar('\n');
	}
	v = json_object_get(st, "plugins");
	printf("plugins:    path");
	json_array_foreach(json_object_get(v, "path"), i, x)
		printf("%s%s", i ? ":" : " ", json_string_value(x));
	putchar('\n');
	json_array_foreach(json_object_get(v, "loaded"), i, x)
		printf("            %s %s (ABI %s) from %s\n", json_string_value(json_object_get(x, "name")),
		       json_string_value(json_object_get(x, "version")),
		       json_string_value(json_object_get(x, "abi")),
		       json_string_value(json_object_get(x, "path")));
	json_array_foreach(json_object_get(v, "failed"), i, x)
		printf("            NOT LOADED: %s\n", json_string_value(json_object_get(x, "error")));
	v = json_object_get(st, "tools");
	printf("tools:      %lld:", (long long)json_integer_value(json_object_get(v, "count")));
	json_array_foreach(json_object_get(v, "names"), i, x)
		printf("%s %s", i ? "," : "", json_string_value(x));
	putchar('\n');
	json_array_foreach(json_object_get(st, "backends"), i, x) {
		printf("%s %-8s usable: %s (%s)\n", i ? "           " : "backends:  ",
		       json_string_value(json_object_get(x, "name")), tri(json_object_get(x, "usable")),
		       json_string_value(json_object_get(x, "why")));
		print_details(json_object_get(x, "details"));
	}
	v = json_object_get(st, "default_backend");
	printf("default:    %s: %s (%s)\n", json_string_value(json_object_get(v, "name")) ?: "none",
	       json_is_true(json_object_get(v, "ok")) ? "usable" : "not usable",
	       json_string_value(json_object_get(v, "why")));
	printf("clients:\n");
	json_array_foreach(json_object_get(st, "clients"), i, x) {
		const json_t *es = json_object_get(x, "entries");

		printf("  %-12s %s: ", json_string_value(json_object_get(x, "target")),
		       json_string_value(json_object_get(x, "file")) ?
			       sg_cli_pretty_path(json_string_value(json_object_get(x, "file"))) : "?");
		if (json_is_null(json_object_get(x, "installed")))
			printf("unknown (%s)\n", json_string_value(json_object_get(x, "why")));
		else if (!json_array_size(es))
			printf("%s\n", json_is_false(json_object_get(x, "exists")) ? "no file" : "not installed");
		else
			print_entries(es);
	}
	print_usage(json_object_get(st, "servers"));
}

int sg_cmd_status(int argc, char **argv, const char *config, bool json)
{
	struct sg_cli_common com = { .config = config, .json = json };
	const char *workspace = NULL;
	char abi[32], *self, *text, invalid[SG_ERR_MSG_MAX] = "";
	json_t *failed, *backends = NULL, *st, *def;
	struct sg_err err;
	int rc;
	struct sg_cli_opt opts[] = {
		{ .name = "--workspace", .str = &workspace },
		{ .name = NULL },
	};

	rc = sg_cli_parse("status", argc, argv, opts, status_help, &com);
	if (rc || (rc = sg_cli_load_config(com.config)))
		return rc;
	if (com.rest)
		return sg_cli_usage("status", "%s", "status takes no arguments");
	sg_tools_init();
	load_plugins(&failed);
	if (sg_config_validate(&err) < 0)
		snprintf(invalid, sizeof(invalid), "%s", err.msg);
	if (sg_status_backends(&backends) < 0)
		backends = json_array();
	def = default_backend(backends);
	snprintf(abi, sizeof(abi), "%u.%u", SG_PLUGIN_ABI_MAJOR, SG_PLUGIN_ABI_MINOR);
	self = sg_cli_self_exe();
	st = json_pack("{s:s, s:s, s:s?, s:b, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "version",
		       PACKAGE_VERSION, "plugin_abi", abi, "binary", self, "installed",
		       sg_server_installed(), "config", config_json(*invalid ? invalid : NULL),
		       "transports", transports_json(), "plugins", plugins_json(failed), "tools",
		       tools_json(), "backends", backends, "default_backend", def, "clients",
		       clients_json(workspace));
	rc = *invalid ? SG_CLI_CONFIG : json_is_true(json_object_get(def, "ok")) ? SG_CLI_OK : SG_CLI_FAIL;
	json_object_set_new(st, "exit_status", json_integer(rc));
	json_object_set_new(st, "servers", sg_usage_read_all());
	if (com.json) {
		text = sg_json_text(st, 2);
		fputs(text, stdout);
		free(text);
	} else {
		print_text(st);
	}
	json_decref(st);
	json_decref(failed);
	free(self);
	return rc;
}
