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
static int machine_failed(struct sg_tool_ctx *t, struct sg_entry *e, struct sg_err *err)
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
		machine_failed(t, e, err);
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

/* ---- run_code --------------------------------------------------------------- */

/* Runs code with whatever interpreter the machine has.  The script prints a
 * header line "<nonce> <interpreter>" first and a trailer "<nonce>" plus the
 * files the run created or changed under the working directory last; the
 * nonce is random per call, so program output cannot fake either. */
static const char run_code_script[] =
	"f=$1 n=$2 lang=$3\n"
	"if [ -n \"$4\" ]; then printf '%s' \"$4\" > \"$f\" || exit 126; fi\n"
	"stamp=/tmp/.sandgate-stamp-$n; : > \"$stamp\"\n"
	"case $lang in\n"
	"python) cands='python3 python' ;;\n"
	"javascript) cands='node nodejs' ;;\n"
	"typescript) cands='tsx ts-node deno bun' ;;\n"
	"shell) cands='bash sh' ;;\n"
	"r) cands='Rscript' ;;\n"
	"esac\n"
	"interp=\n"
	"for c in $cands; do if command -v \"$c\" >/dev/null 2>&1; then interp=$c; break; fi; done\n"
	"if [ -z \"$interp\" ] && [ \"$lang\" = typescript ] && command -v node >/dev/null 2>&1 &&"
	" node --experimental-strip-types -e 0 >/dev/null 2>&1; then interp=node-strip-types; fi\n"
	"printf '%s %s\\n' \"$n\" \"${interp:--}\"\n"
	"if [ -z \"$interp\" ]; then rm -f \"$stamp\" \"$f\"; exit 127; fi\n"
	"case $interp in\n"
	"deno) deno run -A \"$f\" ;;\n"
	"bun) bun run \"$f\" ;;\n"
	"node-strip-types) node --experimental-strip-types --no-warnings \"$f\" ;;\n"
	"*) \"$interp\" \"$f\" ;;\n"
	"esac\n"
	"rc=$?\n"
	"printf '%s\\n' \"$n\"\n"
	"find . -maxdepth 4 -newer \"$stamp\" -type f -printf '%s\\t%P\\n' 2>/dev/null | head -n 200\n"
	"rm -f \"$stamp\" \"$f\"\n"
	"exit $rc\n";

static const char *code_ext(const char *lang)
{
	if (!strcmp(lang, "python")) return "py";
	if (!strcmp(lang, "javascript")) return "js";
	if (!strcmp(lang, "typescript")) return "ts";
	if (!strcmp(lang, "r")) return "R";
	return "sh";
}

static const char *interp_names(const char *lang)
{
	if (!strcmp(lang, "python")) return "python3, python";
	if (!strcmp(lang, "javascript")) return "node, nodejs";
	if (!strcmp(lang, "typescript")) return "tsx, ts-node, deno, bun, node >= 22.6";
	if (!strcmp(lang, "r")) return "Rscript";
	return "bash, sh";
}

/* Memory search for needle in hay[0..n), the last occurrence. */
static const char *last_occurrence(const char *hay, size_t n, const char *needle)
{
	size_t k = strlen(needle);
	const char *found = NULL;

	for (const char *p = hay; n >= k && p <= hay + n - k; p++) {
		p = memmem(p, (size_t)(hay + n - p), needle, k);
		if (!p)
			break;
		found = p;
	}
	return found;
}

/* Splits the script's stdout into header, program output and trailer. */
static int parse_code_output(const char *nonce, struct sg_exec_result *res, char *interp,
			     size_t ilen, json_t *files, const char *cwd)
{
	const char *p = res->out.data ? res->out.data : "", *nl, *trail;
	size_t n = res->out.len, nlen = strlen(nonce);

	if (n < nlen + 2 || memcmp(p, nonce, nlen) != 0 || p[nlen] != ' ')
		return -1;
	nl = memchr(p, '\n', n);
	if (!nl)
		return -1;
	snprintf(interp, ilen, "%.*s", (int)(nl - p - (ptrdiff_t)nlen - 1), p + nlen + 1);
	p = nl + 1;
	n -= (size_t)(p - res->out.data);
	trail = last_occurrence(p, n, nonce);
	if (trail) {
		const char *line = trail + nlen + 1, *end = p + n;

		while (line < end) {
			const char *eol = memchr(line, '\n', (size_t)(end - line));
			const char *tab = memchr(line, '\t', eol ? (size_t)(eol - line) : (size_t)(end - line));

			if (!eol)
				eol = end;
			if (tab) {
				char *name = strndup(tab + 1, (size_t)(eol - tab - 1));
				char *full = sg_xasprintf("%s/%s", cwd, name);

				json_array_append_new(files, json_pack("{s:o, s:s, s:I}",
					"name", sg_json_bytes(name, strlen(name)), "path", full,
					"size", (json_int_t)strtoll(line, NULL, 10)));
				free(name);
				free(full);
			}
			line = eol + 1;
		}
		n = (size_t)(trail - p);
	}
	memmove(res->out.data, p, n);
	res->out.len = n;
	res->out.data[n] = '\0';
	return 0;
}

static int tool_run_code(struct sg_tool_ctx *t, json_t *args, json_t **result,
			 struct sg_err *err)
{
	const char *code, *lang;
	unsigned timeout;
	struct sg_entry *e = NULL;
	struct sg_exec_result res = { 0 };
	struct sg_exec_req req = { 0 };
	char nonce[33], *file = NULL, interp[128] = "";
	const char *argv[9];
	json_t *files = json_array();
	bool created, inline_code;
	int ret = -1;

	if (sg_arg_str(args, "code", true, &code, err) < 0 ||
	    sg_arg_enum(args, "language", "python", "python|javascript|shell|typescript|r", &lang,
			err) < 0 ||
	    sg_arg_uint(args, "timeout", (unsigned)sg_config_int("sandbox", "code_timeout", 30), 1,
			86400, &timeout, err) < 0)
		goto out;
	if (sg_tool_machine(t, args, &e, &created, err) < 0)
		goto out;
	if (e->m.backend->run_code) {
		struct sg_code_req creq = { .language = lang, .code = code,
					    .timeout_ms = timeout * 1000, .output_cap = output_cap() };
		struct sg_code_result cres = { 0 };

		if (sg_m_run_code(e, &creq, t->call, &cres, err) < 0) {
			/* A failed run may have collected output already. */
			sg_buf_release(&cres.out);
			sg_buf_release(&cres.err);
			json_decref(cres.results);
			json_decref(cres.error);
			machine_failed(t, e, err);
			goto out;
		}
		*result = json_pack("{s:o, s:o, s:i, s:s, s:s, s:o}",
				    "stdout", sg_json_bytes(cres.out.data, cres.out.len),
				    "stderr", sg_json_bytes(cres.err.data, cres.err.len),
				    "exit_code", cres.exit_code, "language", lang,
				    "interpreter", cres.interpreter, "output_files", json_incref(files));
		json_object_set_new(*result, "timed_out", json_boolean(cres.timed_out));
		if (cres.results) {
			/* Rich results may carry MCP content blocks (png and jpeg as
			 * image blocks): lift them into the result's extra content. */
			json_t *blocks = json_array(), *r;
			size_t i;

			json_array_foreach(cres.results, i, r) {
				json_array_extend(blocks, json_object_get(r, "_content"));
				json_object_del(r, "_content");
			}
			json_object_set_new(*result, "results", cres.results);
			if (json_array_size(blocks))
				json_object_set_new(*result, "_content", blocks);
			else
				json_decref(blocks);
		}
		if (cres.error)
			json_object_set_new(*result, "error", cres.error);
		sg_buf_release(&cres.out);
		sg_buf_release(&cres.err);
		goto done;
	}
	sg_random_hex(nonce, 16);
	file = sg_xasprintf("/tmp/.sandgate-code-%s.%s", nonce, code_ext(lang));
	/* One argument holds at most 128 KiB (MAX_ARG_STRLEN): larger code goes
	 * through a file write first. */
	inline_code = strlen(code) <= 64 * 1024;
	if (!inline_code) {
		struct sg_write_opts wo = { .mode = 0600 };

		if (sg_m_file_write(e, file, code, strlen(code), &wo, t->call, err) < 0) {
			machine_failed(t, e, err);
			goto out;
		}
	}
	argv[0] = "/bin/sh";
	argv[1] = "-c";
	argv[2] = run_code_script;
	argv[3] = "sandgate-run-code";
	argv[4] = file;
	argv[5] = nonce;
	argv[6] = lang;
	argv[7] = inline_code ? code : "";
	argv[8] = NULL;
	req.argv = argv;
	req.cwd = e->m.workspace;
	req.timeout_ms = timeout * 1000;
	req.output_cap = output_cap() + 64 * 1024;
	if (sg_m_exec(e, &req, t->call, &res, err) < 0) {
		machine_failed(t, e, err);
		goto out;
	}
	if (parse_code_output(nonce, &res, interp, sizeof(interp), files, e->m.workspace) < 0 &&
	    !res.timed_out) {
		sg_errf(err, SG_E_BACKEND, "run_code: the sandbox did not run the code (exit %d): %.200s",
			res.exit_code, res.err.data ? res.err.data : "");
		goto out;
	}
	if (strcmp(interp, "-") == 0) {
		sg_errf(err, SG_E_NOTFOUND,
			"run_code: no %s interpreter in sandbox '%s' (looked for %s): use a template whose image has one, or install it with run_command",
			lang, e->m.id, interp_names(lang));
		goto out;
	}
	*result = exec_result_json(&res);
	json_object_set_new(*result, "language", json_string(lang));
	json_object_set_new(*result, "interpreter", json_string(interp[0] ? interp : "unknown"));
	json_object_set_new(*result, "output_files", json_incref(files));
done:
	sg_tool_result_machine(*result, e, created);
	ret = 0;
out:
	json_decref(files);
	sg_buf_release(&res.out);
	sg_buf_release(&res.err);
	free(file);
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
		machine_failed(t, e, err);
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
		machine_failed(t, e, err);
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
		machine_failed(t, e, err);
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
	  "Run code in the sandbox with its interpreter (python, javascript, typescript, shell, r). "
	  "Returns stdout, stderr, exit_code, the interpreter that ran, and output_files: the files the run "
	  "created or changed in the workspace. Uses the default sandbox when sandbox_id is omitted.",
	  "{\"type\": \"object\", \"properties\": {"
	  "\"code\": {\"type\": \"string\", \"description\": \"Code to run\"},"
	  "\"language\": {\"type\": \"string\", \"enum\": [\"python\", \"javascript\", \"shell\", \"typescript\", \"r\"], \"default\": \"python\", \"description\": \"Programming language\"},"
	  SANDBOX_ID_PROP ","
	  "\"timeout\": {\"type\": \"integer\", \"minimum\": 1, \"default\": {\"config\": \"sandbox.code_timeout\"}, \"description\": \"Timeout in seconds\"}"
	  "}, \"required\": [\"code\"], \"additionalProperties\": false}",
	  tool_run_code },
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
