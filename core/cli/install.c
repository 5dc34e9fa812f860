/* sandgate install / uninstall: one server entry in an MCP client's
 * configuration file (doc/sandgate.1, INSTALL). */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cli/cli.h"
#include "core/cli/clients.h"
#include "core/cli/commands.h"
#include "core/cli/entry.h"
#include "core/cli/jsonfile.h"
#include "core/cli/snippet.h"
#include "core/base/conf.h"
#include "core/base/err.h"
#include "core/tools/registry.h"
#include "core/base/util.h"

static const char install_help[] =
	"usage: sandgate install --target CLIENT [OPTIONS] [-- SERVER-ARGS...]\n"
	"\n"
	"Adds (or updates) one stdio server entry for this sandgate to an MCP client's\n"
	"configuration file; every other entry and key is kept, in its order.\n"
	"\n"
	"Clients (--target):\n"
	"  cursor        ~/.cursor/mcp.json (mcpServers)\n"
	"  claude        Claude Desktop: claude_desktop_config.json (mcpServers) in\n"
	"                ~/Library/Application Support/Claude (macOS) or ~/.config/Claude\n"
	"  vscode        the workspace's .vscode/mcp.json (servers, type stdio)\n"
	"  claude-code   the project's .mcp.json (mcpServers, type stdio)\n"
	"  windsurf      ~/.codeium/windsurf/mcp_config.json (mcpServers)\n"
	"  gemini        ~/.gemini/settings.json (mcpServers)\n"
	"  codex         ~/.codex/config.toml: --print only, sandgate never edits TOML\n"
	"  hermes        ~/.hermes/config.yaml: --print only, sandgate never edits YAML\n"
	"\n"
	"Options:\n"
	"  --name NAME        the entry's name (default sandgate); another name adds a second entry\n"
	"  --args 'ARGS'      further server arguments, split at spaces (quotes group), e.g.\n"
	"                     --args '--set sandbox.default_backend=fc'; repeatable; the\n"
	"                     arguments after -- are added as they are\n"
	"  --workspace DIR    the workspace of vscode and claude-code (default: the current directory)\n"
	"  --dry-run          print what would change, change nothing\n"
	"  --print            print the entry to paste instead of editing the file\n"
	"  --json             print the result as JSON\n"
	"\n"
	"The entry runs the absolute path of this binary.  It carries the configuration\n"
	"file when one was given (--config, SANDGATE_CONFIG), the plugin directory when\n"
	"this build is not installed, and the keys this command took from its\n"
	"environment or --set (a client started from the desktop has neither); secrets\n"
	"(the FC API key) go into env, and only for clients whose file is private to the\n"
	"user: never into the vscode and claude-code workspace files.  A file that is not\n"
	"strict JSON (comments, trailing commas) is left byte-identical: the command says\n"
	"why, prints the entry to paste and exits 1.  sandgate never prints a secret.\n"
	"\n"
	"Exit status: 0 done (or nothing to do), 1 the file was not changed (see the\n"
	"message), 2 usage, 3 configuration, 4 a backend plugin could not be loaded.\n";

static const char uninstall_help[] =
	"usage: sandgate uninstall --target CLIENT [--name NAME] [--workspace DIR] [--dry-run] [--json]\n"
	"\n"
	"Removes the entry NAME (default sandgate) from the client's configuration file\n"
	"and nothing else.  Clients as for 'sandgate install'.  Exit status 0 when the\n"
	"entry is gone (or was not there), 1 when the file could not be changed.\n";

/* Entry names go into JSON keys, TOML table names and YAML keys alike. */
static bool name_ok(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > 64)
		return false;
	for (const char *p = name; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-')
			return false;
	return true;
}

/* Splits s at blanks into arr; quotes ('...', "...") group, a backslash
 * escapes the next character.  Returns 0 or -1 (an unclosed quote). */
static int split_args(const char *s, json_t *arr)
{
	struct sg_buf w = { 0 };
	bool in_word = false;
	char quote = 0;

	for (const char *p = s;; p++) {
		if (!*p || (!quote && isspace((unsigned char)*p))) {
			if (quote) {
				sg_buf_release(&w);
				return -1;
			}
			if (in_word)
				json_array_append_new(arr, json_string(w.data ? w.data : ""));
			sg_buf_release(&w);
			w = (struct sg_buf){ 0 };
			in_word = false;
			if (!*p)
				return 0;
			continue;
		}
		in_word = true;
		if (quote && *p == quote) {
			quote = 0;
		} else if (!quote && (*p == '\'' || *p == '"')) {
			quote = *p;
			sg_buf_append(&w, "", 0);
		} else if (*p == '\\' && p[1] && quote != '\'') {
			sg_buf_append(&w, ++p, 1);
		} else {
			sg_buf_append(&w, p, 1);
		}
	}
}

/* The target's client, or NULL after a usage error. */
static const struct sg_client *client_of(const char *cmd, const char *target, int *rc)
{
	const struct sg_client *c;

	if (!target) {
		*rc = sg_cli_usage(cmd, "%s needs --target: one of %s", cmd, sg_client_targets());
		return NULL;
	}
	c = sg_client_find(target);
	if (!c)
		*rc = sg_cli_usage(cmd, "unknown --target '%s': use one of %s", target,
				   sg_client_targets());
	return c;
}

/* The first sentence of a tool's description, for the list after install. */
static void print_tools(void)
{
	json_t *tools = json_object_get(sg_tools_list(), "tools"), *t;
	size_t i;

	printf("\nTools (%zu):\n", json_array_size(tools));
	json_array_foreach(tools, i, t) {
		const char *d = json_string_value(json_object_get(t, "description"));
		const char *end = strstr(d, ". ");
		int n = end ? (int)(end - d) : (int)strlen(d);

		printf("  %-22s %.*s%s\n", json_string_value(json_object_get(t, "name")),
		       n > 64 ? 61 : n, d, n > 64 ? "..." : "");
	}
}

static void print_notes(const json_t *notes)
{
	size_t i;
	json_t *n;

	json_array_foreach(notes, i, n)
		printf("  note: %s\n", json_string_value(n));
}

/* Prints the entry to paste (masked) with the reason the file was not
 * edited, in text or JSON.  Returns exit status rc. */
static int print_paste(const struct sg_client *c, const char *path, const char *name,
		       const struct sg_server_entry *e, const char *why, bool json, int rc)
{
	json_t *masked = sg_server_entry_json(e, c, true);
	char *snip = sg_snippet(c, name, masked);

	if (json) {
		json_t *o = json_pack("{s:s, s:s, s:s, s:s?, s:O, s:O, s:s}", "target", c->target,
				      "file", path, "action", why ? "not-changed" : "print", "why", why,
				      "entry", masked, "notes", e->notes, "snippet", snip);
		char *text = sg_json_text(o, 2);

		fputs(text, stdout);
		free(text);
		json_decref(o);
	} else {
		if (why)
			fprintf(stderr, "sandgate: %s is left as it is: %s.\n", sg_cli_pretty_path(path), why);
		printf("%s the entry '%s' to %s:\n\n%s\n", why ? "Add" : "Paste", name,
		       sg_cli_pretty_path(path), snip);
		print_notes(e->notes);
		if (json_array_size(e->secrets))
			printf("  note: replace each <NAME> in env with its value: sandgate never prints a secret\n");
	}
	free(snip);
	json_decref(masked);
	return rc;
}

/* Loads what the entry depends on: configuration, tools, backends.
 * Returns 0 or an exit status. */
static int load_server(const char *config)
{
	struct sg_err err;
	int rc = sg_cli_load_config(config);

	if (rc)
		return rc;
	sg_tools_init();
	if (sg_cli_load_plugins(true, &err) < 0) {
		fprintf(stderr, "sandgate: %s\n", err.msg);
		return SG_CLI_PLUGIN;
	}
	if (sg_config_validate(&err) < 0) {
		fprintf(stderr, "sandgate: %s\n", err.msg);
		return SG_CLI_CONFIG;
	}
	return 0;
}

static void report(const struct sg_client *c, const char *path, const char *name,
		   const char *action, const json_t *entry, const json_t *notes, bool json)
{
	if (json) {
		json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:O?, s:O?}", "target", c->target, "file",
				      path, "name", name, "action", action, "entry", entry, "notes", notes);
		char *text = sg_json_text(o, 2);

		fputs(text, stdout);
		free(text);
		json_decref(o);
		return;
	}
	printf("%s: %s entry '%s' in %s\n", c->title, action, name, sg_cli_pretty_path(path));
}

struct install {
	const struct sg_client *c;
	const char *name;
	char *path;
	bool dry, json;
	struct sg_server_entry e;
	struct sg_jsonfile f;
};

/* Merges the entry into the file (or says why not).  Returns the exit status. */
static int merge(struct install *in)
{
	struct sg_err err;
	json_t *servers, *old, *entry, *masked;
	const char *action;
	int rc = 0;

	if (sg_jsonfile_read(in->path, &in->f, &err) < 0) {
		fprintf(stderr, "sandgate: %s\n", err.msg);
		return SG_CLI_FAIL;
	}
	if (!in->f.root)
		return print_paste(in->c, in->path, in->name, &in->e, in->f.why, in->json, SG_CLI_FAIL);
	servers = json_object_get(in->f.root, in->c->servers);
	if (servers && !json_is_object(servers)) {
		char why[128];

		snprintf(why, sizeof(why), "its \"%s\" is not a JSON object", in->c->servers);
		return print_paste(in->c, in->path, in->name, &in->e, why, in->json, SG_CLI_FAIL);
	}
	entry = sg_server_entry_json(&in->e, in->c, false);
	masked = sg_server_entry_json(&in->e, in->c, true);
	old = servers ? json_object_get(servers, in->name) : NULL;
	if (old && json_equal(old, entry)) {
		action = "unchanged";
	} else {
		action = in->dry ? (old ? "would replace" : "would add") : (old ? "replaced" : "added");
		if (!servers) {
			servers = json_object();
			json_object_set_new(in->f.root, in->c->servers, servers);
		}
		/* an existing key keeps its place: jansson replaces the value in place */
		json_object_set(servers, in->name, entry);
		if (!in->dry && sg_jsonfile_write(&in->f, in->c->workspace ? 0644 : 0600,
						  in->c->workspace ? 0755 : 0700, &err) < 0) {
			fprintf(stderr, "sandgate: %s\n", err.msg);
			rc = SG_CLI_FAIL;
			goto out;
		}
	}
	report(in->c, in->path, in->name, action, masked, in->e.notes, in->json);
	if (!in->json) {
		char *text = sg_json_text(masked, 2);

		printf("\n%s", text);
		free(text);
		print_notes(in->e.notes);
		if (!in->dry && strcmp(action, "unchanged")) {
			print_tools();
			printf("\nRestart %s to apply the change.\n", in->c->title);
		}
	}
out:
	json_decref(entry);
	json_decref(masked);
	return rc;
}

int sg_cmd_install(int argc, char **argv, const char *config, bool json)
{
	struct sg_cli_common com = { .config = config, .json = json };
	const char *target = NULL, *workspace = NULL;
	struct install in = { .name = "sandgate" };
	json_t *args_opts = NULL, *extra = json_array(), *a;
	bool print = false;
	struct sg_err err;
	size_t i;
	int rc;
	struct sg_cli_opt opts[] = {
		{ .name = "--target", .str = &target },
		{ .name = "--name", .str = &in.name },
		{ .name = "--workspace", .str = &workspace },
		{ .name = "--args", .list = &args_opts },
		{ .name = "--dry-run", .flag = &in.dry },
		{ .name = "--print", .flag = &print },
		{ .name = NULL },
	};

	rc = sg_cli_parse("install", argc, argv, opts, install_help, &com);
	if (rc || !(in.c = client_of("install", target, &rc)))
		goto out;
	in.json = com.json;
	if (!name_ok(in.name)) {
		rc = sg_cli_usage("install", "--name '%s': use 1 to 64 letters, digits, '_' or '-'", in.name);
		goto out;
	}
	json_array_foreach(args_opts, i, a) {
		if (split_args(json_string_value(a), extra) < 0) {
			rc = sg_cli_usage("install", "--args '%s': a quote is not closed", json_string_value(a));
			goto out;
		}
	}
	if (com.rest)
		json_array_extend(extra, com.rest);
	if (!(in.path = sg_client_path(in.c, workspace, &err))) {
		fprintf(stderr, "sandgate: %s\n", err.msg);
		rc = SG_CLI_FAIL;
		goto out;
	}
	if (in.c->format != SG_CLIENT_JSON && !print) {
		rc = sg_cli_usage("install", "%s keeps its configuration in %s, which sandgate does not edit: "
				  "run 'sandgate install --target %s --print' and paste the entry into %s",
				  in.c->title, in.c->format == SG_CLIENT_TOML ? "TOML" : "YAML",
				  in.c->target, sg_cli_pretty_path(in.path));
		goto out;
	}
	if ((rc = load_server(com.config)))
		goto out;
	if (sg_server_entry_build(com.config, extra, !in.c->workspace, &in.e, &err) < 0) {
		fprintf(stderr, "sandgate: %s\n", err.msg);
		rc = SG_CLI_FAIL;
		goto out;
	}
	rc = print ? print_paste(in.c, in.path, in.name, &in.e, NULL, in.json, 0) : merge(&in);
out:
	sg_server_entry_free(&in.e);
	sg_jsonfile_free(&in.f);
	free(in.path);
	json_decref(args_opts);
	json_decref(extra);
	json_decref(com.rest);
	return rc;
}

int sg_cmd_uninstall(int argc, char **argv, const char *config, bool json)
{
	struct sg_cli_common com = { .config = config, .json = json };
	const char *target = NULL, *workspace = NULL, *name = "sandgate", *action;
	const struct sg_client *c;
	struct sg_jsonfile f = { 0 };
	bool dry = false;
	char *path = NULL;
	struct sg_err err;
	json_t *servers;
	int rc;
	struct sg_cli_opt opts[] = {
		{ .name = "--target", .str = &target },
		{ .name = "--name", .str = &name },
		{ .name = "--workspace", .str = &workspace },
		{ .name = "--dry-run", .flag = &dry },
		{ .name = NULL },
	};

	rc = sg_cli_parse("uninstall", argc, argv, opts, uninstall_help, &com);
	if (rc || !(c = client_of("uninstall", target, &rc)))
		goto out;
	if (com.rest) {
		rc = sg_cli_usage("uninstall", "%s", "uninstall takes no server arguments");
		goto out;
	}
	if (!(path = sg_client_path(c, workspace, &err))) {
		fprintf(stderr, "sandgate: %s\n", err.msg);
		rc = SG_CLI_FAIL;
		goto out;
	}
	if (c->format != SG_CLIENT_JSON) {
		fprintf(stderr, "sandgate: sandgate does not edit %s: remove the table [%s.%s] from it by hand\n",
			sg_cli_pretty_path(path), c->servers, name);
		rc = SG_CLI_FAIL;
		goto out;
	}
	if (sg_jsonfile_read(path, &f, &err) < 0) {
		fprintf(stderr, "sandgate: %s\n", err.msg);
		rc = SG_CLI_FAIL;
		goto out;
	}
	if (!f.root) {
		fprintf(stderr, "sandgate: %s is left as it is: %s.  Remove the entry \"%s\" from \"%s\" by hand.\n",
			sg_cli_pretty_path(path), f.why, name, c->servers);
		rc = SG_CLI_FAIL;
		goto out;
	}
	servers = json_object_get(f.root, c->servers);
	if (!f.exists || !json_is_object(servers) || !json_object_get(servers, name)) {
		action = "no such";
	} else if (dry) {
		action = "would remove";
	} else {
		json_object_del(servers, name);
		if (sg_jsonfile_write(&f, 0600, 0700, &err) < 0) {
			fprintf(stderr, "sandgate: %s\n", err.msg);
			rc = SG_CLI_FAIL;
			goto out;
		}
		action = "removed";
	}
	report(c, path, name, action, NULL, NULL, com.json);
	if (!com.json && !strcmp(action, "removed"))
		printf("Restart %s to apply the change.\n", c->title);
out:
	sg_jsonfile_free(&f);
	free(path);
	json_decref(com.rest);
	return rc;
}
