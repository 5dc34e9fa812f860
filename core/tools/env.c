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

struct sg_entry *sg_env_machine_named(struct sg_tool_ctx *t, const char *key, const char *value,
				      struct sg_err *err)
{
	struct sg_entry *e = sg_machine_get(t->s, value, err);

	if (!e && err->code == SG_E_NOTFOUND)
		sg_errf(err, SG_E_NOTFOUND,
			"%s '%s' not found: no machine of yours has that name or id (it was removed or expired, or never existed); "
			"sandbox_env machine_list shows the names and ids you can use",
			key, value);
	return e;
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
		*out = sg_env_machine_named(t, key, m, err);
		if (!*out && err->code == SG_E_NOTFOUND) {
			char why[SG_ERR_MSG_MAX];

			snprintf(why, sizeof(why), "%s", err->msg);
			sg_errf(err, SG_E_NOTFOUND, "%s; or omit %s to use the session's default machine", why, key);
		}
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

/* Compact JSON, as the cloud tools' (core/tools/cloud.c): every byte of
 * tools/list is read by the model on every turn. */
#define STR(d) "{\"type\":\"string\",\"description\":\"" d "\"}"
#define INT(d) "{\"type\":\"integer\",\"description\":\"" d "\"}"
#define MACHINE "\"machine\":" STR("Omit for default")
#define CLOSED "},\"additionalProperties\":false}"
#define OUT(props) "{\"type\":\"object\",\"properties\":{" props "}}"
#define T_STR "{\"type\":\"string\"}"
#define READ_ONLY "{\"readOnlyHint\":true,\"openWorldHint\":false}"
#define OUT_SHELL OUT("\"output\":" T_STR ",\"status\":" T_STR ",\"shell_id\":" T_STR)

static const struct sg_tool env_tools[] = {
	{ .name = "sandbox_shell_exec",
	  .description = "Run a command in a persistent bash; past timeout see sandbox_shell_read.",
	  .input_schema = "{\"type\":\"object\",\"properties\":{"
			  "\"command\":" STR("Bash command") ","
			  "\"shell_id\":" STR("Omit for default") ","
			  MACHINE ","
			  "\"wait\":{\"type\":\"boolean\",\"default\":true,\"description\":\"Wait up to timeout\"},"
			  "\"timeout\":{\"type\":\"integer\",\"default\":{\"config\":\"shell.timeout\"},\"description\":\"Seconds to wait\"},"
			  "\"max_output\":{\"type\":\"integer\",\"default\":50000,\"description\":\"Output bytes\"}"
			  "},\"required\":[\"command\"],\"additionalProperties\":false}",
	  .fn = sg_tool_shell_exec,
	  .schema_hook = exec_schema,
	  .output_schema = OUT_SHELL },
	{ .name = "sandbox_shell_read",
	  .description = "Read a shell's new output without blocking.",
	  .input_schema = "{\"type\":\"object\",\"properties\":{"
			  "\"shell_id\":" STR("Omit for default") ","
			  MACHINE ","
			  "\"max_output\":" INT("Bytes returned") CLOSED,
	  .fn = sg_tool_shell_read,
	  .annotations = READ_ONLY,
	  .output_schema = OUT_SHELL },
	{ .name = "sandbox_file_read",
	  .description = "Read a text file as numbered lines (\"N|line\"), a page at a time.",
	  .input_schema = "{\"type\":\"object\",\"properties\":{"
			  "\"path\":" STR("File path") ","
			  MACHINE ","
			  "\"offset\":{\"type\":\"integer\",\"default\":1,\"description\":\"First line\"},"
			  "\"limit\":{\"type\":\"integer\",\"maximum\":2000,\"default\":500,\"description\":\"Lines\"}"
			  "},\"required\":[\"path\"],\"additionalProperties\":false}",
	  .fn = sg_tool_file_read,
	  .schema_hook = read_schema,
	  .annotations = READ_ONLY,
	  .output_schema = OUT("\"status\":" T_STR ",\"path\":" T_STR) },
	{ .name = "sandbox_file_write",
	  .description = "Write a file atomically; invalid .json, .yaml, .toml or .py is refused.",
	  .input_schema = "{\"type\":\"object\",\"properties\":{"
			  "\"path\":" STR("File path") ","
			  "\"content\":" STR("The whole content") ","
			  MACHINE "},\"required\":[\"path\",\"content\"],\"additionalProperties\":false}",
	  .fn = sg_tool_file_write,
	  .bulk_arg = "content",
	  .annotations = "{\"idempotentHint\":true,\"openWorldHint\":false}",
	  .output_schema = OUT("\"status\":" T_STR ",\"path\":" T_STR ",\"bytes_written\":{\"type\":\"integer\"}") },
	{ .name = "sandbox_file_patch",
	  .description = "Edit a file: replace a string, or apply a unified diff.",
	  .input_schema = "{\"type\":\"object\",\"properties\":{"
			  "\"mode\":{\"type\":\"string\",\"enum\":[\"replace\",\"patch\"],\"description\":\"replace or patch\"},"
			  "\"path\":" STR("File") ","
			  "\"old_string\":" STR("Text to replace") ","
			  "\"new_string\":" STR("Replacement") ","
			  "\"replace_all\":{\"type\":\"boolean\",\"description\":\"Every match\"},"
			  "\"patch\":" STR("Unified diff") ","
			  MACHINE "},\"required\":[\"mode\"],\"additionalProperties\":false}",
	  .fn = sg_tool_file_patch,
	  .annotations = "{\"openWorldHint\":false}",
	  .output_schema = OUT("\"status\":" T_STR) },
	{ .name = "sandbox_file_search",
	  .description = "Search file contents by regex, or find files by name glob.",
	  .input_schema = "{\"type\":\"object\",\"properties\":{"
			  "\"pattern\":" STR("Regex, or name glob") ","
			  "\"search_type\":{\"type\":\"string\",\"enum\":[\"content\",\"files\"],\"default\":\"content\",\"description\":\"Pattern kind\"},"
			  MACHINE ","
			  "\"path\":" STR("Directory or file") ","
			  "\"file_glob\":" STR("Like *.py") ","
			  "\"limit\":{\"type\":\"integer\",\"default\":50,\"description\":\"Results\"},"
			  "\"offset\":{\"type\":\"integer\",\"description\":\"Results skipped\"},"
			  "\"output_mode\":{\"type\":\"string\",\"enum\":[\"content\",\"files_only\",\"count\"],\"default\":\"content\",\"description\":\"Result form\"},"
			  "\"context\":{\"type\":\"integer\",\"description\":\"Context lines\"}"
			  "},\"required\":[\"pattern\"],\"additionalProperties\":false}",
	  .fn = sg_tool_file_search,
	  .schema_hook = search_schema,
	  .annotations = READ_ONLY,
	  .output_schema = OUT("\"status\":" T_STR ",\"type\":" T_STR) },
	{ .name = "sandbox_env",
	  .description = "Manage machines and shells; action help lists the actions.",
	  .input_schema = "{\"type\":\"object\",\"properties\":{"
			  "\"action\":" STR("help, status or another") ","
			  "\"params\":{\"type\":\"object\",\"description\":\"Action params\"}"
			  "},\"required\":[\"action\"],\"additionalProperties\":true}",
	  .fn = sg_tool_env,
	  .output_schema = "{\"type\":\"object\"}" },
};

static const struct sg_tool audit_tool[] = {
	{ .name = "sandbox_audit_query",
	  .description = "Read the audit log of tool calls.",
	  .input_schema = "{\"type\":\"object\",\"properties\":{"
			  "\"tail\":{\"type\":\"integer\",\"default\":5000,\"description\":\"Rows searched\"},"
			  "\"start\":{\"type\":\"integer\",\"description\":\"First row\"},"
			  "\"end\":" INT("Default start+100") ","
			  "\"action\":" STR("Action") ","
			  "\"machine\":" STR("Machine") ","
			  "\"status\":" STR("Status") ","
			  "\"tool\":" STR("Tool") ","
			  "\"since\":{\"type\":\"number\",\"description\":\"From (unix s)\"},"
			  "\"until\":{\"type\":\"number\",\"description\":\"Before (unix s)\"}" CLOSED,
	  .fn = tool_audit_query,
	  .annotations = READ_ONLY,
	  .output_schema = OUT("\"records\":{\"type\":\"array\"},\"total\":{\"type\":\"integer\"}") },
};

void sg_tools_env_init(void)
{
	sg_shell_init();
	sg_tools_register_family(SG_TOOLS_ENV, env_tools, sizeof(env_tools) / sizeof(env_tools[0]));
	if (sg_audit_file_backed())
		sg_tools_register_family(SG_TOOLS_ENV, audit_tool, 1);
}

void sg_tools_env_fini(void)
{
	sg_shell_fini();
	sg_audit_close();
}
