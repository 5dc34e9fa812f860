/* The server entry of an MCP client (core/cli/entry.h). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "core/cli/cli.h"
#include "core/cli/clients.h"
#include "core/cli/entry.h"
#include "core/base/conf.h"
#include "core/base/err.h"
#include "core/base/util.h"

static bool same_dir(const char *a, const char *b)
{
	char *ra = sg_cli_realpath(a), *rb = sg_cli_realpath(b);
	bool same = !strcmp(ra, rb);

	free(ra);
	free(rb);
	return same;
}

bool sg_server_installed(void)
{
	char *exe = sg_cli_self_exe();
	const char *pdir = sg_cli_plugin_dir();
	bool yes;

	if (!exe)
		return false;
	*strrchr(exe, '/') = '\0';
	yes = same_dir(exe, BINDIR) && (!pdir || same_dir(pdir, PLUGINDIR));
	free(exe);
	return yes;
}

struct carry {
	struct sg_server_entry *e;
	bool with_secrets;
};

static void carry_key(const char *section, const struct sg_config_key *k, const char *value,
		      const char *source, void *ud)
{
	struct carry *c = ud;
	char var[256];
	const char *v;

	(void)value; /* NULL for a secret: read it below */
	if (strchr(section, '*') || strchr(k->key, '*') ||
	    (!strcmp(section, "plugin") && !strcmp(k->key, "dir")))
		return;
	if (strcmp(source, "--set") && strncmp(source, "environment ", 12))
		return;
	v = sg_config_get(section, k->key);
	if (!v)
		return;
	if (!sg_utf8_valid(v, strlen(v))) {
		json_array_append_new(c->e->notes, json_pack("s+++", section, ".", k->key,
							       ": its value is not UTF-8 and cannot be written"));
		return;
	}
	if (!k->secret) {
		char *set = sg_xasprintf("%s.%s=%s", section, k->key, v);

		json_array_append_new(c->e->args, json_string("--set"));
		json_array_append_new(c->e->args, json_string(set));
		free(set);
		json_array_append_new(c->e->notes, json_pack("s+++++", section, ".", k->key,
							       ": from ", source, " (in args)"));
		return;
	}
	if (!c->with_secrets) {
		json_array_append_new(c->e->notes,
				      json_pack("s+++", section, ".", k->key,
						" is a secret and this file is shared: it is left out; the server "
						"reads it from its own environment or configuration file"));
		return;
	}
	if (!strcmp(source, "--set"))
		sg_config_env_name(section, k->key, var, sizeof(var));
	else
		snprintf(var, sizeof(var), "%s", source + 12);
	json_object_set_new(c->e->env, var, json_string(v));
	json_array_append_new(c->e->secrets, json_string(var));
	json_array_append_new(c->e->notes, json_pack("s+++++", section, ".", k->key, ": from ",
						       source, " (a secret, in env)"));
}

int sg_server_entry_build(const char *config, const json_t *extra, bool with_secrets,
			  struct sg_server_entry *e, struct sg_err *err)
{
	struct carry c = { e, with_secrets };
	const char *cfg_env = getenv("SANDGATE_CONFIG");
	const char *pdir = sg_cli_plugin_dir();

	memset(e, 0, sizeof(*e));
	e->command = sg_cli_self_exe();
	if (!e->command)
		return sg_errf(err, SG_E_IO, "cannot find the running binary (/proc/self/exe): is /proc mounted?");
	e->args = json_array();
	e->env = json_object();
	e->secrets = json_array();
	e->notes = json_array();
	if ((config || (cfg_env && *cfg_env)) && sg_config_file()) {
		char *abs = sg_cli_realpath(sg_config_file());

		json_array_append_new(e->args, json_string("--config"));
		json_array_append_new(e->args, json_string(abs));
		free(abs);
	}
	if (pdir && !sg_server_installed()) {
		json_array_append_new(e->args, json_string("--set"));
		json_array_append_new(e->args, json_pack("s+", "plugin.dir=", pdir));
		json_array_append_new(e->notes, json_pack("s+", "plugin.dir: this build is not installed, "
							  "its backends are in ", pdir));
	}
	sg_config_each_key(carry_key, &c);
	json_array_append_new(e->args, json_string("stdio"));
	if (extra)
		json_array_extend(e->args, (json_t *)extra);
	return 0;
}

json_t *sg_server_entry_json(const struct sg_server_entry *e, const struct sg_client *c,
			     bool masked)
{
	json_t *o = json_object(), *env;
	const char *k;
	json_t *v;

	if (c && c->type_stdio)
		json_object_set_new(o, "type", json_string("stdio"));
	json_object_set_new(o, "command", json_string(e->command));
	json_object_set(o, "args", e->args);
	if (json_object_size(e->env) == 0)
		return o;
	env = json_object();
	json_object_foreach(e->env, k, v) {
		bool secret = false;
		size_t i;
		json_t *s;

		json_array_foreach(e->secrets, i, s)
			secret |= !strcmp(json_string_value(s), k);
		if (masked && secret)
			json_object_set_new(env, k, json_pack("s++", "<", k, ">"));
		else
			json_object_set(env, k, v);
	}
	json_object_set_new(o, "env", env);
	return o;
}

void sg_server_entry_free(struct sg_server_entry *e)
{
	free(e->command);
	json_decref(e->args);
	json_decref(e->env);
	json_decref(e->secrets);
	json_decref(e->notes);
	memset(e, 0, sizeof(*e));
}
