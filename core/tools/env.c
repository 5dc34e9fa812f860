/*
 * The sandbox_env tools' table and what they share (core/tools/env.h).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/conf.h"
#include "core/base/err.h"
#include "core/registry/audit.h"
#include "core/registry/machine.h"
#include "core/shell/shell.h"
#include "core/tools/env.h"

size_t sg_env_file_cap(void)
{
	long long v = sg_config_int("files", "max_file_size", -1);

	return (size_t)(v >= 0 ? v : sg_config_int("sandbox", "max_file_bytes", 64LL << 20));
}

const char *sg_env_file_cap_key(void)
{
	return sg_config_int("files", "max_file_size", -1) >= 0 ? "[files] max_file_size"
								: "[sandbox] max_file_bytes";
}

unsigned sg_env_files_limit(const char *key, long long def)
{
	long long v = sg_config_int("files", key, def);

	return v < 1 ? 1u : v > 1000000 ? 1000000u : (unsigned)v;
}

size_t sg_env_default_max_output(void)
{
	const char *seed = sg_config_get("shell", "default_max_output");

	if (seed && *seed && !strcmp(sg_config_source("shell", "max_output"), "default"))
		return (size_t)sg_config_int("shell", "default_max_output", 50000);
	return (size_t)sg_config_int("shell", "max_output", 50000);
}

/* The machine a call names in `key` (an id or a persistent name), else the
 * session's default (created lazily).  A reference in *out. */
int sg_env_machine(struct sg_tool_ctx *t, json_t *args, const char *key, struct sg_entry **out,
		       bool *created, struct sg_err *err)
{
	const char *m;
	json_t *none;
	int r;

	*created = false;
	if (sg_arg_str(args, key, false, &m, err) < 0)
		return -1;
	if (m && *m) {
		*out = sg_machine_get(t->s, m, err);
		if (!*out)
			sg_errf(err, SG_E_NOTFOUND,
				"machine '%s' not found: sandbox_env machine_list shows yours; omit machine to use the session's default",
				m);
		return *out ? 0 : -1;
	}
	none = json_object();
	r = sg_tool_machine(t, none, out, created, err);
	json_decref(none);
	return r;
}

void sg_env_add_machine(json_t *result, const struct sg_entry *e, bool created)
{
	sg_tool_result_machine(result, e, created);
	json_object_set_new(result, "machine", json_string(sg_machine_label(e)));
}

static int tool_audit_query(struct sg_tool_ctx *t, json_t *args, json_t **result, struct sg_err *err)
{
	return sg_audit_query(t->s, args, result, err);
}


/* ---- the table ------------------------------------------------------------------------- */

/* Defaults and limits the configuration sets that a {"config": ...}
 * default cannot say (a key with a fallback, a clamped limit), shown in
 * the schemas as they apply. */
static void prop_set(json_t *schema, const char *prop, const char *key, json_int_t v)
{
	json_t *p = json_object_get(json_object_get(schema, "properties"), prop);

	if (json_is_object(p))
		json_object_set_new(p, key, json_integer(v));
}

static void exec_schema(json_t *schema)
{
	prop_set(schema, "max_output", "default", (json_int_t)sg_env_default_max_output());
}

static void read_schema(json_t *schema)
{
	prop_set(schema, "limit", "default", sg_env_files_limit("default_read_limit", 500));
	prop_set(schema, "limit", "maximum", sg_env_files_limit("max_read_limit", 2000));
}

static void search_schema(json_t *schema)
{
	prop_set(schema, "limit", "default", sg_env_files_limit("default_search_limit", 50));
}

#define MACHINE_PROP \
	"\"machine\": {\"type\": \"string\", \"description\": \"Machine: a sandbox_id from create_sandbox or a persistent machine's name; omitted uses the session's default machine (created on first use)\"}"

static const struct sg_tool env_tools[] = {
	{ "sandbox_shell_exec",
	  "Run a command in a persistent bash (cwd, exports and functions persist between calls; stderr is merged into "
	  "output in order). wait=true (default) blocks until it finishes or timeout: then status is \"running\" and the "
	  "command keeps going; follow it with sandbox_shell_read. wait=false returns once the command started. stdin is "
	  "/dev/null. Output keeps head and tail when longer than max_output bytes. Results carry shell_id and bash_pid "
	  "(a new bash_pid means a new shell: previous_shell says why).",
	  "{\"type\": \"object\", \"properties\": {"
	  "\"command\": {\"type\": \"string\", \"description\": \"Shell command (bash)\"},"
	  "\"shell_id\": {\"type\": \"string\", \"description\": \"Shell to run in; omitted uses the machine's default shell (machine is then ignored)\"},"
	  MACHINE_PROP ","
	  "\"wait\": {\"type\": \"boolean\", \"default\": true, \"description\": \"Wait for the command to finish (up to timeout)\"},"
	  "\"timeout\": {\"type\": \"integer\", \"minimum\": 0, \"default\": {\"config\": \"shell.timeout\"}, \"description\": \"Seconds to wait when wait=true; the command is not killed when it passes\"},"
	  "\"max_output\": {\"type\": \"integer\", \"minimum\": 1, \"default\": 50000, \"description\": \"Bytes of output returned; more keeps a head and the end\"}"
	  "}, \"required\": [\"command\"], \"additionalProperties\": false}",
	  sg_tool_shell_exec, exec_schema },
	{ "sandbox_shell_read",
	  "Read a shell's output that is new since the last exec or read, without blocking; status is idle, running, "
	  "completed (with exit_code) or terminated. Give shell_id, or machine for its default shell.",
	  "{\"type\": \"object\", \"properties\": {"
	  "\"shell_id\": {\"type\": \"string\", \"description\": \"Shell to read\"},"
	  MACHINE_PROP ","
	  "\"max_output\": {\"type\": \"integer\", \"minimum\": 1, \"description\": \"Bytes of output returned (default: the exec's max_output)\"}"
	  "}, \"additionalProperties\": false}",
	  sg_tool_shell_read },
	{ "sandbox_file_read",
	  "Read a text file with line numbers (\"N|line\"), a page at a time: offset (1-based) and limit lines; works on "
	  "files of any size. Binary files and images are reported, not dumped. Relative paths are under the machine's workspace.",
	  "{\"type\": \"object\", \"properties\": {"
	  "\"path\": {\"type\": \"string\", \"description\": \"File path\"},"
	  MACHINE_PROP ","
	  "\"offset\": {\"type\": \"integer\", \"minimum\": 1, \"default\": 1, \"description\": \"First line (1-based)\"},"
	  "\"limit\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 2000, \"default\": 500, \"description\": \"Lines to read (at most [files] max_read_limit)\"}"
	  "}, \"required\": [\"path\"], \"additionalProperties\": false}",
	  sg_tool_file_read, read_schema },
	{ "sandbox_file_write",
	  "Write a file atomically (a temporary name, then rename), creating parent directories; an existing file keeps "
	  "its mode and owner. .json, .yaml/.yml, .toml and .py content is checked first and an invalid one is not "
	  "written (the error gives line and column).",
	  "{\"type\": \"object\", \"properties\": {"
	  "\"path\": {\"type\": \"string\", \"description\": \"File path\"},"
	  "\"content\": {\"type\": \"string\", \"description\": \"The whole new content\"},"
	  MACHINE_PROP
	  "}, \"required\": [\"path\", \"content\"], \"additionalProperties\": false}",
	  sg_tool_file_write, .bulk_arg = "content" },
	{ "sandbox_file_patch",
	  "Edit a file. mode=replace: old_string -> new_string, matched exactly, else ignoring trailing whitespace, else "
	  "ignoring indentation (the new text is re-indented); several matches need replace_all or more context. "
	  "mode=patch: a unified diff (one or more files; hunks found at their line or nearby), applied by sandgate; "
	  "nothing is written unless every hunk applies. Returns a diff of the change.",
	  "{\"type\": \"object\", \"properties\": {"
	  "\"mode\": {\"type\": \"string\", \"enum\": [\"replace\", \"patch\"], \"description\": \"replace or patch\"},"
	  "\"path\": {\"type\": \"string\", \"description\": \"File to edit (replace mode; in patch mode it overrides the diff's path for a one-file diff)\"},"
	  "\"old_string\": {\"type\": \"string\", \"description\": \"Text to replace (replace mode)\"},"
	  "\"new_string\": {\"type\": \"string\", \"description\": \"Replacement (replace mode)\"},"
	  "\"replace_all\": {\"type\": \"boolean\", \"default\": false, \"description\": \"Replace every match\"},"
	  "\"patch\": {\"type\": \"string\", \"description\": \"Unified diff (patch mode)\"},"
	  MACHINE_PROP
	  "}, \"required\": [\"mode\"], \"additionalProperties\": false}",
	  sg_tool_file_patch },
	{ "sandbox_file_search",
	  "Search file contents (ripgrep, or grep when the machine has no rg) or find files by name. Symbolic links are "
	  "not followed. output_mode: content (path, line, snippet, context lines), files_only, count; paged with limit and offset.",
	  "{\"type\": \"object\", \"properties\": {"
	  "\"pattern\": {\"type\": \"string\", \"description\": \"Regular expression (content) or file name glob (files)\"},"
	  "\"search_type\": {\"type\": \"string\", \"enum\": [\"content\", \"files\"], \"default\": \"content\"},"
	  MACHINE_PROP ","
	  "\"path\": {\"type\": \"string\", \"default\": \".\", \"description\": \"Directory or file to search; . is the workspace\"},"
	  "\"file_glob\": {\"type\": \"string\", \"description\": \"Only files matching this glob, e.g. *.py\"},"
	  "\"limit\": {\"type\": \"integer\", \"minimum\": 1, \"default\": 50},"
	  "\"offset\": {\"type\": \"integer\", \"minimum\": 0, \"default\": 0},"
	  "\"output_mode\": {\"type\": \"string\", \"enum\": [\"content\", \"files_only\", \"count\"], \"default\": \"content\"},"
	  "\"context\": {\"type\": \"integer\", \"minimum\": 0, \"default\": 0, \"description\": \"Lines of context around each match\"}"
	  "}, \"required\": [\"pattern\"], \"additionalProperties\": false}",
	  sg_tool_file_search, search_schema },
	{ "sandbox_env",
	  "Environment management. action=help lists the operations (machines, shells) and one help topic per backend "
	  "(<backend>_help, with its own actions); action=status shows the default machine, your machines and shells.",
	  "{\"type\": \"object\", \"properties\": {"
	  "\"action\": {\"type\": \"string\", \"description\": \"help, status, or an action that help lists\"},"
	  "\"params\": {\"type\": \"object\", \"description\": \"The action's parameters; they may also be given flat, next to action\"}"
	  "}, \"required\": [\"action\"], \"additionalProperties\": true}",
	  sg_tool_env },
};

static const struct sg_tool audit_tool[] = {
	{ "sandbox_audit_query",
	  "Read the audit log (one row per tool call; file contents are stored only as SHA-256 and length). tail bounds "
	  "the newest rows considered, the filters apply inside that window, start/end page the filtered rows (oldest first).",
	  "{\"type\": \"object\", \"properties\": {"
	  "\"tail\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 100000, \"default\": 5000},"
	  "\"start\": {\"type\": \"integer\", \"minimum\": 0, \"default\": 0},"
	  "\"end\": {\"type\": \"integer\", \"minimum\": 1, \"description\": \"Default start+100\"},"
	  "\"action\": {\"type\": \"string\"}, \"machine\": {\"type\": \"string\"}, \"status\": {\"type\": \"string\"},"
	  "\"tool\": {\"type\": \"string\"},"
	  "\"since\": {\"type\": \"number\", \"description\": \"ts >= since (unix seconds)\"},"
	  "\"until\": {\"type\": \"number\", \"description\": \"ts < until (unix seconds)\"}"
	  "}, \"additionalProperties\": false}",
	  tool_audit_query },
};

void sg_tools_env_init(void)
{
	sg_shell_init();
	sg_tools_register(env_tools, sizeof(env_tools) / sizeof(env_tools[0]));
	if (sg_audit_file_backed())
		sg_tools_register(audit_tool, 1);
}

void sg_tools_env_fini(void)
{
	sg_shell_fini();
	sg_audit_close();
}
