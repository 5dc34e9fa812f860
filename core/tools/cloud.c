/*
 * The seven cloud tools (create_sandbox, run_code, run_command, read_file,
 * write_file, list_files, kill_sandbox), with the default-sandbox rules of
 * the cloud-sandbox MCP server design: lazy creation, create makes default,
 * an explicit id leaves the default alone, kill without id kills the default.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/protocol/call.h"
#include "core/base/conf.h"
#include "core/base/err.h"
#include "core/registry/machine.h"
#include "core/registry/plugin.h"
#include "core/protocol/session.h"
#include "core/tools/registry.h"
#include "core/base/util.h"

#define WORKSPACE_NOTE \
	"Relative paths and the default working directory are the sandbox's workspace " \
	"(create_sandbox returns it; /workspace on most backends)."

/* Bytes a read or write may move, [sandbox] max_file_bytes. */
static size_t file_cap(void)
{
	return (size_t)sg_config_int("sandbox", "max_file_bytes", 64LL << 20);
}

static size_t output_cap(void)
{
	return (size_t)sg_config_int("sandbox", "output_cap", 1 << 20);
}

/* An absolute path inside the machine; relative ones are under workspace. */
static char *machine_path(const struct sg_entry *e, const char *path)
{
	if (!path || !*path)
		return sg_xstrdup(e->m.workspace);
	if (path[0] == '/')
		return sg_xstrdup(path);
	return sg_xasprintf("%s/%s", e->m.workspace, path);
}

/* A failure on the session's default that vanished on the backend makes it
 * stop being the default, so the next call creates a new one. */
int sg_tool_machine_failed(struct sg_tool_ctx *t, struct sg_entry *e, struct sg_err *err)
{
	if (err->code == SG_E_GONE) {
		sg_session_default_clear(t->s, e->m.id);
		sg_errf(err, SG_E_GONE,
			"sandbox '%s' expired or was killed outside sandgate: call again without sandbox_id to get a new default sandbox",
			e->m.id);
	}
	return -1;
}

/* ---- create_sandbox ------------------------------------------------------- */

static int tool_create(struct sg_tool_ctx *t, json_t *args, json_t **result, struct sg_err *err)
{
	const char *template_name, *backend;
	unsigned timeout;
	char **env = NULL;
	struct sg_entry *e = NULL;
	struct sg_create_req req = { 0 };
	int ret = -1;

	if (sg_arg_str(args, "template", false, &template_name, err) < 0 ||
	    sg_arg_str(args, "backend", false, &backend, err) < 0 ||
	    sg_arg_uint(args, "timeout", (unsigned)sg_config_int("sandbox", "timeout", 300), 1,
			7 * 86400, &timeout, err) < 0 ||
	    sg_arg_env(args, "envs", &env, err) < 0)
		goto out;
	req.template_name = template_name && *template_name ? template_name : NULL;
	req.lifetime_s = timeout;
	req.env = (const char *const *)env;
	req.owner = sg_machine_owner_label();
	req.session_hash = t->s->hash;
	if (sg_machine_create(t->s, backend && *backend ? backend : NULL, &req, t->call, &e,
			      err) < 0)
		goto out;
	sg_session_default_set(t->s, e->m.id);
	*result = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:i}", "sandbox_id", e->m.id,
			    "status", "running", "url", e->m.url, "backend", e->m.backend->name,
			    "template", e->m.template_name, "workspace", e->m.workspace,
			    "timeout", (int)timeout);
	if (e->report) /* the backend's facts: isolation, limits */
		json_object_set(*result, "details", e->report);
	ret = 0;
out:
	sg_machine_put(e);
	sg_strv_free(env);
	return ret;
}

/* ---- run_command ------------------------------------------------------------ */

static json_t *exec_result_json(const struct sg_exec_result *r)
{
	json_t *o = json_object();

	json_object_set_new(o, "stdout", sg_json_bytes(r->out.data, r->out.len));
	json_object_set_new(o, "stderr", sg_json_bytes(r->err.data, r->err.len));
	/* 124 is what timeout(1) reports for a command it killed. */
	json_object_set_new(o, "exit_code", json_integer(r->timed_out ? 124
							 : r->signal ? 128 + r->signal
								     : r->exit_code));
	json_object_set_new(o, "timed_out", json_boolean(r->timed_out));
	if (r->signal && !r->timed_out)
		json_object_set_new(o, "signal", json_integer(r->signal));
	if (r->out_truncated)
		json_object_set_new(o, "stdout_truncated", json_true());
	if (r->err_truncated)
		json_object_set_new(o, "stderr_truncated", json_true());
	return o;
}

static int tool_run_command(struct sg_tool_ctx *t, json_t *args, json_t **result,
			    struct sg_err *err)
{
	const char *command, *cwd;
	unsigned timeout;
	char **env = NULL, *dir = NULL;
	struct sg_entry *e = NULL;
	struct sg_exec_result res = { 0 };
	struct sg_exec_req req = { 0 };
	bool created;
	int ret = -1;

	if (sg_arg_str(args, "command", true, &command, err) < 0 ||
	    sg_arg_str(args, "cwd", false, &cwd, err) < 0 ||
	    sg_arg_uint(args, "timeout", (unsigned)sg_config_int("sandbox", "command_timeout", 60),
			1, 86400, &timeout, err) < 0 ||
	    sg_arg_env(args, "envs", &env, err) < 0)
		goto out;
	if (!*command) {
		sg_errf(err, SG_E_INVAL, "argument 'command' is empty: pass a shell command such as \"ls -la\"");
		goto out;
	}
	if (sg_tool_machine(t, args, &e, &created, err) < 0)
		goto out;
	dir = machine_path(e, cwd);
	req.command = command;
	req.cwd = dir;
	req.env = (const char *const *)env;
	req.timeout_ms = timeout * 1000;
	req.output_cap = output_cap();
	if (sg_m_exec(e, &req, t->call, &res, err) < 0) {
		sg_tool_machine_failed(t, e, err);
		goto out;
	}
	*result = exec_result_json(&res);
	sg_tool_result_machine(*result, e, created);
	ret = 0;
out:
	sg_buf_release(&res.out);
	sg_buf_release(&res.err);
	free(dir);
	sg_strv_free(env);
	sg_machine_put(e);
	return ret;
}

/* ---- files ------------------------------------------------------------------ */

static int tool_read_file(struct sg_tool_ctx *t, json_t *args, json_t **result,
			  struct sg_err *err)
{
	const char *path, *encoding;
	struct sg_entry *e = NULL;
	struct sg_buf buf = { 0 };
	char *full = NULL;
	bool created;
	int ret = -1;

	if (sg_arg_str(args, "path", true, &path, err) < 0 ||
	    sg_arg_enum(args, "encoding", "utf-8", "utf-8|utf8|base64", &encoding, err) < 0)
		goto out;
	if (!*path) {
		sg_errf(err, SG_E_INVAL, "argument 'path' is empty: pass a file path such as /workspace/main.py");
		goto out;
	}
	if (sg_tool_machine(t, args, &e, &created, err) < 0)
		goto out;
	full = machine_path(e, path);
	if (sg_m_file_read(e, full, file_cap(), t->call, &buf, err) < 0) {
		sg_tool_machine_failed(t, e, err);
		goto out;
	}
	/* Bytes that are not UTF-8 come back as base64, said so explicitly,
	 * rather than silently altered. */
	if (strcmp(encoding, "base64") == 0 || !sg_utf8_valid(buf.data, buf.len)) {
		char *b64 = sg_base64_encode(buf.data ? buf.data : "", buf.len);

		*result = json_pack("{s:s, s:s, s:s, s:I}", "path", full, "content", b64,
				    "encoding", "base64", "size", (json_int_t)buf.len);
		free(b64);
	} else {
		*result = json_pack("{s:s, s:s%, s:s, s:I}", "path", full, "content",
				    buf.data ? buf.data : "", buf.len, "encoding", "utf-8", "size",
				    (json_int_t)buf.len);
	}
	sg_tool_result_machine(*result, e, created);
	ret = 0;
out:
	sg_buf_release(&buf);
	free(full);
	sg_machine_put(e);
	return ret;
}

static int tool_write_file(struct sg_tool_ctx *t, json_t *args, json_t **result,
			   struct sg_err *err)
{
	const char *path, *encoding, *text;
	struct sg_entry *e = NULL;
	struct sg_write_opts opts = { 0 };
	void *decoded = NULL;
	const void *data;
	size_t len;
	char *full = NULL;
	bool created;
	int ret = -1;

	if (sg_arg_str(args, "path", true, &path, err) < 0 ||
	    sg_arg_enum(args, "encoding", "utf-8", "utf-8|utf8|base64", &encoding, err) < 0)
		goto out;
	if (!json_object_get(args, "content")) {
		sg_errf(err, SG_E_INVAL, "missing required argument 'content': pass the file's text (or base64 with \"encoding\": \"base64\")");
		goto out;
	}
	if (sg_tool_text_arg(t, args, "content", true, &text, &len, err) < 0)
		goto out;
	if (!*path) {
		sg_errf(err, SG_E_INVAL, "argument 'path' is empty: pass a file path such as /workspace/main.py");
		goto out;
	}
	data = text;
	if (strcmp(encoding, "base64") == 0) {
		decoded = sg_base64_decode(data, &len);
		if (!decoded) {
			sg_errf(err, SG_E_INVAL, "argument 'content' is not valid base64 (RFC 4648): encode the bytes, or use \"encoding\": \"utf-8\" for text");
			goto out;
		}
		data = decoded;
	}
	if (len > file_cap()) {
		sg_errf(err, SG_E_TOOBIG, "argument 'content' is %zu bytes, more than [sandbox] max_file_bytes (%zu)",
			len, file_cap());
		goto out;
	}
	if (sg_tool_machine(t, args, &e, &created, err) < 0)
		goto out;
	full = machine_path(e, path);
	if (sg_m_file_write(e, full, data, len, &opts, t->call, err) < 0) {
		sg_tool_machine_failed(t, e, err);
		goto out;
	}
	*result = json_pack("{s:b, s:s, s:I}", "success", 1, "path", full, "bytes_written",
			    (json_int_t)len);
	sg_tool_result_machine(*result, e, created);
	ret = 0;
out:
	free(decoded);
	free(full);
	sg_machine_put(e);
	return ret;
}

static int tool_list_files(struct sg_tool_ctx *t, json_t *args, json_t **result,
			   struct sg_err *err)
{
	const char *path;
	struct sg_entry *e = NULL;
	json_t *files = NULL;
	char *full = NULL;
	bool created;
	int ret = -1;

	if (sg_arg_str(args, "path", false, &path, err) < 0)
		goto out;
	if (sg_tool_machine(t, args, &e, &created, err) < 0)
		goto out;
	full = machine_path(e, path);
	if (sg_m_file_list(e, full, t->call, &files, err) < 0) {
		sg_tool_machine_failed(t, e, err);
		goto out;
	}
	*result = json_pack("{s:s, s:o}", "path", full, "files", files);
	sg_tool_result_machine(*result, e, created);
	ret = 0;
out:
	free(full);
	sg_machine_put(e);
	return ret;
}

static int tool_kill(struct sg_tool_ctx *t, json_t *args, json_t **result, struct sg_err *err)
{
	const char *id;
	char def[SG_ID_MAX], killed[SG_ID_MAX];
	struct sg_entry *e;

	if (sg_arg_str(args, "sandbox_id", false, &id, err) < 0)
		return -1;
	if (!id || !*id) {
		if (!sg_session_default_get(t->s, def))
			return sg_errf(err, SG_E_INVAL,
				       "no default sandbox to kill: pass sandbox_id, or create one with create_sandbox first");
		id = def;
	}
	e = sg_machine_get(t->s, id, err);
	if (!e)
		return -1;
	snprintf(killed, sizeof(killed), "%s", e->m.id);
	if (sg_machine_kill(e, t->call, err) < 0)
		return -1;
	sg_session_default_clear(t->s, killed);
	*result = json_pack("{s:b, s:s}", "success", 1, "sandbox_id", killed);
	return 0;
}

/* ---- the table ---------------------------------------------------------------- */

/* The backend property names the plugins actually loaded, each with its
 * one-line summary. */
static void create_schema(json_t *schema)
{
	json_t *props = json_object_get(schema, "properties"), *names = json_array(), *prop;
	struct sg_buf d = { 0 };
	static const char tail[] = "; omitted: the server's default backend";

	sg_buf_append(&d, "Backend plugin: ", 16);
	for (struct sg_plugin *p = sg_plugin_first(); p; p = p->next) {
		char *one = sg_xasprintf("%s%s (%s)", json_array_size(names) ? "; " : "", p->b->name,
					 p->b->summary ? p->b->summary : "no summary");

		json_array_append_new(names, json_string(p->b->name));
		sg_buf_append(&d, one, strlen(one));
		free(one);
	}
	sg_buf_append(&d, tail, sizeof(tail) - 1);
	prop = json_pack("{s:s, s:s%}", "type", "string", "description", d.data, d.len);
	if (json_array_size(names))
		json_object_set(prop, "enum", names);
	json_object_set_new(props, "backend", prop);
	json_decref(names);
	sg_buf_release(&d);
}

#define SANDBOX_ID_PROP \
	"\"sandbox_id\": {\"type\": \"string\", \"description\": \"Sandbox ID; omitted uses the session's default sandbox (created on first use)\"}"

static const struct sg_tool cloud_tools[] = {
	{ "create_sandbox",
	  "Create a sandbox and make it the session's default. Later calls that omit sandbox_id use it; "
	  "earlier sandboxes stay alive until kill_sandbox or the end of the session. " WORKSPACE_NOTE,
	  "{\"type\": \"object\", \"properties\": {"
	  "\"template\": {\"type\": \"string\", \"description\": \"Template name (Docker: an image alias from [docker] template.NAME); omitted uses the server's default template\"},"
	  "\"timeout\": {\"type\": \"integer\", \"minimum\": 1, \"default\": {\"config\": \"sandbox.timeout\"}, \"description\": \"Idle lifetime in seconds: each use moves the expiry to now plus this\"},"
	  "\"envs\": {\"type\": \"object\", \"additionalProperties\": {\"type\": \"string\"}, \"description\": \"Environment variables for every command in the sandbox\"},"
	  "\"backend\": {\"type\": \"string\", \"description\": \"Backend plugin; omitted uses the server's default backend\"}"
	  "}, \"additionalProperties\": false}",
	  tool_create, create_schema },
	{ "run_code",
	  "Run code in the sandbox. python and javascript run in a kernel kept per sandbox and language: "
	  "names, imports, functions and the working directory persist from call to call (stateful), the value "
	  "of the last expression comes back in results as text (E2B's execute_result), matplotlib figures as "
	  "images (png), an exception in error {name, value, traceback}. shell runs in the sandbox's persistent "
	  "bash (the one sandbox_shell_exec uses: cwd, variables and functions persist). typescript (Node >= 22.6 "
	  "with type stripping, or tsx, ts-node, deno, bun) and r (Rscript) run once per call, not stateful; a "
	  "sandbox without what a language needs gets an error naming it. Where the sandbox has no kernel "
	  "(a backend without one, its runner turned off) the code runs once per call too: the result says "
	  "stateful: false. timeout interrupts the code and keeps the state (timed_out: true); reset: true "
	  "discards the state first; a kernel that died (os._exit, out of memory) is replaced on the next call, "
	  "which says kernel_restarted: true and why. Returns stdout, stderr, exit_code (0, 1 for an error, 124 "
	  "for a timeout), results, error, output_files (files the code wrote in the workspace), kernel_restarted, "
	  "timed_out, stateful, interpreter. Uses the default sandbox when sandbox_id is omitted.",
	  "{\"type\": \"object\", \"properties\": {"
	  "\"code\": {\"type\": \"string\", \"description\": \"Code to run\"},"
	  "\"language\": {\"type\": \"string\", \"enum\": [\"python\", \"javascript\", \"shell\", \"typescript\", \"r\"], \"default\": \"python\", "
	  "\"description\": \"python (stateful kernel; needs python3 >= 3.8, figures need matplotlib), javascript (stateful kernel; needs node >= 18), "
	  "shell (the persistent bash), typescript (one run per call; needs Node >= 22.6 or tsx, ts-node, deno, bun), r (one run per call; needs Rscript)\"},"
	  SANDBOX_ID_PROP ","
	  "\"timeout\": {\"type\": \"integer\", \"minimum\": 1, \"default\": {\"config\": \"sandbox.code_timeout\"}, \"description\": \"Seconds; then the code is interrupted and the state kept\"},"
	  "\"reset\": {\"type\": \"boolean\", \"default\": false, \"description\": \"Discard the language's state (a fresh kernel or shell) before running\"}"
	  "}, \"required\": [\"code\"], \"additionalProperties\": false}",
	  sg_tool_run_code },
	{ "run_command",
	  "Run a shell command (/bin/sh -c) in the sandbox. A non-zero exit is reported in exit_code, not as an error; "
	  "on timeout the command's whole process group is killed and timed_out is true with the partial output. "
	  "Uses the default sandbox when sandbox_id is omitted. " WORKSPACE_NOTE,
	  "{\"type\": \"object\", \"properties\": {"
	  "\"command\": {\"type\": \"string\", \"description\": \"Shell command\"},"
	  SANDBOX_ID_PROP ","
	  "\"cwd\": {\"type\": \"string\", \"description\": \"Working directory; omitted uses the workspace\"},"
	  "\"timeout\": {\"type\": \"integer\", \"minimum\": 1, \"default\": {\"config\": \"sandbox.command_timeout\"}, \"description\": \"Timeout in seconds\"},"
	  "\"envs\": {\"type\": \"object\", \"additionalProperties\": {\"type\": \"string\"}, \"description\": \"Extra environment variables for this command\"}"
	  "}, \"required\": [\"command\"], \"additionalProperties\": false}",
	  tool_run_command },
	{ "read_file",
	  "Read a file from the sandbox. Text comes back as UTF-8; bytes that are not valid UTF-8 come back "
	  "base64-encoded with encoding \"base64\". Uses the default sandbox when sandbox_id is omitted. " WORKSPACE_NOTE,
	  "{\"type\": \"object\", \"properties\": {"
	  "\"path\": {\"type\": \"string\", \"description\": \"File path (absolute, or relative to the workspace)\"},"
	  SANDBOX_ID_PROP ","
	  "\"encoding\": {\"type\": \"string\", \"enum\": [\"utf-8\", \"base64\"], \"default\": \"utf-8\", \"description\": \"utf-8 for text, base64 for bytes\"}"
	  "}, \"required\": [\"path\"], \"additionalProperties\": false}",
	  tool_read_file },
	{ "write_file",
	  "Create or overwrite a file in the sandbox, atomically (readers see the old or the new content, never a mix); "
	  "missing parent directories are created and an existing file keeps its mode and owner. "
	  "Uses the default sandbox when sandbox_id is omitted. " WORKSPACE_NOTE,
	  "{\"type\": \"object\", \"properties\": {"
	  "\"path\": {\"type\": \"string\", \"description\": \"File path (absolute, or relative to the workspace)\"},"
	  "\"content\": {\"type\": \"string\", \"description\": \"File content\"},"
	  SANDBOX_ID_PROP ","
	  "\"encoding\": {\"type\": \"string\", \"enum\": [\"utf-8\", \"base64\"], \"default\": \"utf-8\", \"description\": \"How content is encoded: utf-8 text or base64 bytes\"}"
	  "}, \"required\": [\"path\", \"content\"], \"additionalProperties\": false}",
	  tool_write_file, .bulk_arg = "content" },
	{ "list_files",
	  "List the files and subdirectories of a directory in the sandbox. Uses the default sandbox when "
	  "sandbox_id is omitted. " WORKSPACE_NOTE,
	  "{\"type\": \"object\", \"properties\": {"
	  "\"path\": {\"type\": \"string\", \"description\": \"Directory path; omitted lists the workspace\"},"
	  SANDBOX_ID_PROP
	  "}, \"additionalProperties\": false}",
	  tool_list_files },
	{ "kill_sandbox",
	  "Destroy a sandbox: the one given by sandbox_id, or the session's default when omitted (an error when "
	  "there is none).",
	  "{\"type\": \"object\", \"properties\": {"
	  "\"sandbox_id\": {\"type\": \"string\", \"description\": \"Sandbox ID to destroy; omitted destroys the default sandbox\"}"
	  "}, \"additionalProperties\": false}",
	  tool_kill },
};

void sg_tools_init(void)
{
	sg_tools_register(cloud_tools, sizeof(cloud_tools) / sizeof(cloud_tools[0]));
	sg_tools_env_init();
}
