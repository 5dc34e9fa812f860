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
#include "core/shell/headtail.h"
#include "core/tools/cut.h"
#include "core/tools/registry.h"
#include "core/base/util.h"

/* Bytes a read or write may move, [sandbox] max_file_bytes. */
static size_t file_cap(void)
{
	return (size_t)sg_config_int("sandbox", "max_file_bytes", 64LL << 20);
}

static size_t output_cap(void)
{
	return (size_t)sg_config_int("sandbox", "output_cap", 16 << 20);
}

/* A byte count argument in [min, max_file_bytes]: def when absent. */
/* The largest offset: a page of a file past [sandbox] max_file_bytes is
 * read where the backend reads parts; 2^53 keeps it exact in JSON. */
#define OFFSET_MAX 9007199254740992.0

static int byte_arg(json_t *args, const char *name, double def, double min, double cap,
		    double *out, struct sg_err *err)
{
	json_t *v = json_object_get(args, name);

	*out = def;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < min || (double)json_integer_value(v) > cap)
		return sg_errf(err, SG_E_INVAL, "argument '%s' must be an integer from %.0f to %.0f%s",
			       name, min, cap, cap == OFFSET_MAX ? "" : " ([sandbox] max_file_bytes)");
	*out = (double)json_integer_value(v);
	return 0;
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
	char def[SG_ID_MAX];

	if (err->code != SG_E_GONE)
		return -1;
	/* The handler does not say whether the call named the machine: a call
	 * on the default is told nothing about sandbox_id (it had none). */
	if (sg_session_default_get(t->s, def) && !strcmp(def, e->m.id)) {
		sg_session_default_clear(t->s, e->m.id);
		sg_errf(err, SG_E_GONE,
			"the session's default sandbox '%s' expired or was killed outside sandgate: "
			"call again and a new default sandbox is created",
			e->m.id);
	} else {
		sg_errf(err, SG_E_GONE,
			"sandbox '%s' expired or was killed outside sandgate: call create_sandbox for a new one, "
			"or omit sandbox_id to use the session's default sandbox",
			e->m.id);
	}
	return -1;
}

/* A backend's "no such file" says what failed, not what to do: add it. */
static void file_failed_fix(struct sg_err *err, const char *fix)
{
	char why[SG_ERR_MSG_MAX];

	if (err->code != SG_E_NOTFOUND && err->code != SG_E_PERM)
		return;
	snprintf(why, sizeof(why), "%s", err->msg);
	sg_errf(err, err->code, "%s: %s", why,
		err->code == SG_E_PERM ? "the sandbox user may not touch that path; use one under the workspace" : fix);
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

static json_t *exec_result_json(struct sg_entry *e, struct sg_call *call,
				const struct sg_exec_result *r)
{
	json_t *o = json_object();

	sg_cut_streams(e, call, o, &r->out, r->out_truncated, &r->err, r->err_truncated);
	/* 124 is what timeout(1) reports for a command it killed. */
	json_object_set_new(o, "exit_code", json_integer(r->timed_out ? 124
							 : r->signal ? 128 + r->signal
								     : r->exit_code));
	json_object_set_new(o, "timed_out", json_boolean(r->timed_out));
	if (r->signal && !r->timed_out)
		json_object_set_new(o, "signal", json_integer(r->signal));
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
	/* The output is held already (up to [sandbox] output_cap a stream):
	 * counted, so other calls wait for it, but never refused after the
	 * command ran. */
	sg_call_mem_hold(t->call, res.out.len + res.err.len);
	*result = exec_result_json(e, t->call, &res);
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

/* A page's k bytes, at buf->data + at, as the result's content string:
 * base64 when b64, else the text (valid UTF-8, no NUL).  The buffer
 * becomes the string where it can (sg_call_string: held for the reply,
 * not copied): base64 is encoded in place when the bytes lie far enough
 * from the buffer's start (read_file_page puts them there), text is moved
 * to its start.  *buf is left empty then; else it stays the caller's. */
static json_t *page_content(struct sg_call *call, struct sg_buf *buf, size_t at, size_t k,
			    bool b64)
{
	size_t groups = (k + 2) / 3;
	char *data;

	if (b64 && !(buf->data && at >= groups && buf->cap >= 4 * groups))
		return sg_call_string(call, sg_base64_encode(buf->data ? buf->data + at : "", k),
				      4 * groups, true);
	data = buf->data;
	*buf = (struct sg_buf){ 0 };
	if (b64)
		return sg_call_string(call, data, sg_base64_encode_to(data, data + at, k), true);
	if (data && at)
		memmove(data, data + at, k);
	return sg_call_string(call, data, k, false);
}

/* The page of a file of n bytes that starts at byte off: its first k bytes
 * are at buf->data + at (k at most the limit).  A utf-8 page ends on a
 * character boundary unless that would leave it empty.  May take the
 * buffer (page_content). */
static json_t *read_page(struct sg_tool_ctx *t, struct sg_entry *e, const char *full,
			 struct sg_buf *buf, size_t at, size_t k, size_t off, size_t n, size_t limit,
			 bool b64)
{
	const char *p = buf->data ? buf->data + at : "";
	bool as64 = b64;
	json_t *r;

	if (!b64 && off + k < n && sg_utf8_cut_back(p, k))
		k = sg_utf8_cut_back(p, k);
	/* Bytes that are not UTF-8 come back as base64, said so explicitly,
	 * rather than silently altered. */
	if (!b64 && !sg_utf8_valid(p, k))
		as64 = true;
	r = json_pack("{s:s, s:o, s:s, s:I}", "path", full, "content",
		      page_content(t->call, buf, at, k, as64), "encoding", as64 ? "base64" : "utf-8",
		      "size", (json_int_t)n);
	if (off)
		json_object_set_new(r, "offset", json_integer((json_int_t)off));
	if (off + k < n) {
		json_t *args = json_pack("{s:s, s:I, s:I, s:s}", "path", full, "offset",
					 (json_int_t)(off + k), "limit", (json_int_t)limit, "sandbox_id", e->m.id);

		if (b64)
			json_object_set_new(args, "encoding", json_string("base64"));
		sg_cut_note(r, "content", sg_cut_desc(n, -1, k, json_pack("[[I, I]]", (json_int_t)off,
			(json_int_t)(off + k)), sg_cut_call("read_file", args)));
	}
	return r;
}

/* Reserves what a read holds ([server] memory_budget): what the backend
 * reads (the page where it reads parts, else the whole file), and the page
 * twice where the reply is written in pieces (the page's string, held for
 * the reply without a copy when it is large, else encoded apart and copied
 * into jansson), six times otherwise (the result's string, the reply's
 * text, the message's two copies of it (the text and structuredContent)
 * and the transport's copy of the message; measured: 8 MiB pages, three
 * calls at once, held 175 MiB over idle on HTTP), base64 a third more.  A file that cannot be
 * looked at first counts as the most a read moves.  *rest: what a whole
 * read would hold beyond that, for the fallback to reserve; *page: the
 * page's size when the file could be looked at, else 0. */
static int reserve_read(struct sg_tool_ctx *t, struct sg_entry *e, const char *full,
			size_t offset, size_t limit, bool b64, bool ranged, size_t *rest,
			size_t *page_out, struct sg_err *err)
{
	struct sg_stat st = { 0 };
	struct sg_err serr = { 0 };
	uint64_t size = file_cap();
	size_t whole, page, copies = t->call && t->call->pieces ? 2 : 6;

	*rest = *page_out = 0;
	if (sg_m_file_stat(e, full, t->call, &st, &serr) == 0)
		size = st.size;
	else if (serr.code == SG_E_NOTFOUND)
		return 0; /* the read says so, not the budget */
	whole = size < file_cap() ? (size_t)size : file_cap();
	page = offset >= size ? 0 : size - offset < limit ? (size_t)(size - offset) : limit;
	if (serr.code == SG_E_OK)
		*page_out = page;
	if (ranged)
		*rest = whole > page ? whole - page : 0;
	whole = ranged ? page : whole;
	if (b64)
		page += page / 3 + 4;
	return sg_call_mem_reserve(t->call, whole + copies * page, err);
}

/* A buffer for a base64 page of `page` bytes, read where it is encoded in
 * place (page_content): the backend appends the bytes after a gap of a
 * third of their size, and the encoding fills the buffer from its start.
 * The raw page and its base64 are never held apart. */
static void b64_page_buf(struct sg_buf *buf, size_t page)
{
	size_t gap = (page + 2) / 3;

	buf->cap = 4 * gap + 1;
	buf->data = sg_xmalloc(buf->cap);
	buf->len = gap;
	buf->data[gap] = '\0';
}

/* The page of path from offset: only the page where the backend reads
 * parts, else the whole file and its page.  Returns 0, -1 with err (the
 * read failed), or -2 with err (the memory budget refused). */
static int read_file_page(struct sg_tool_ctx *t, struct sg_entry *e, const char *full,
			  size_t offset, size_t limit, bool b64, json_t **result, struct sg_err *err)
{
	struct sg_buf buf = { 0 };
	bool ranged = SG_HAS(e->m.backend, file_read_at);
	uint64_t size = 0;
	size_t rest, page, at = 0;
	int rc;

	if (reserve_read(t, e, full, offset, limit, b64, ranged, &rest, &page, err) < 0)
		return -2;
	if (ranged && b64 && page >= SG_CALL_HOLD_MIN) {
		b64_page_buf(&buf, page);
		at = buf.len;
	}
	rc = ranged ? sg_m_file_read_at(e, full, offset, limit, t->call, &buf, &size, err) : -1;
	if (rc == 0 && buf.len < at) /* the plugin did not append (plugin.h) */
		rc = sg_errf(err, SG_E_PROTO, "%s: the backend's file_read_at replaced the buffer "
			     "it was to append to", full);
	if (rc == 0) {
		size_t got = buf.len - at, k = got < limit ? got : limit;
		/* A file whose size says 0 (/proc) still has its bytes from offset. */
		size_t off = k || offset < size ? offset : (size_t)size;

		*result = read_page(t, e, full, &buf, at, k, off,
				    size > off + k ? (size_t)size : off + k, limit, b64);
	} else if (!ranged || err->code == SG_E_NOTSUP) {
		sg_buf_release(&buf);
		/* The whole file is held now: what the page left out counts too. */
		if (sg_call_mem_reserve(t->call, rest, err) < 0)
			return -2;
		rc = sg_m_file_read(e, full, file_cap(), t->call, &buf, err);
		if (rc == 0) {
			size_t off = offset < buf.len ? offset : buf.len;
			size_t k = buf.len - off < limit ? buf.len - off : limit;

			*result = read_page(t, e, full, &buf, off, k, off, buf.len, limit, b64);
		}
	}
	sg_buf_release(&buf);
	return rc;
}

static int tool_read_file(struct sg_tool_ctx *t, json_t *args, json_t **result,
			  struct sg_err *err)
{
	const char *path, *encoding;
	struct sg_entry *e = NULL;
	char *full = NULL;
	double offset, limit;
	bool created, b64;
	int ret = -1, rc;

	if (sg_arg_str(args, "path", true, &path, err) < 0 ||
	    sg_arg_enum(args, "encoding", "utf-8", "utf-8|utf8|base64", &encoding, err) < 0 ||
	    byte_arg(args, "offset", 0, 0, OFFSET_MAX, &offset, err) < 0)
		goto out;
	b64 = strcmp(encoding, "base64") == 0;
	/* The default page fits the result budget once encoded. */
	if (byte_arg(args, "limit", (double)(b64 ? sg_cut_budget() / 4 * 3 : sg_cut_budget()), 1,
		     (double)file_cap(), &limit, err) < 0)
		goto out;
	if (!*path) {
		sg_errf(err, SG_E_INVAL, "argument 'path' is empty: pass a file path such as /workspace/main.py");
		goto out;
	}
	if (sg_tool_machine(t, args, &e, &created, err) < 0)
		goto out;
	full = machine_path(e, path);
	rc = read_file_page(t, e, full, (size_t)offset, (size_t)limit, b64, result, err);
	if (rc == -2)
		goto out; /* the memory budget said no, not the machine */
	if (rc < 0) {
		file_failed_fix(err, "list_files shows what is there");
		sg_tool_machine_failed(t, e, err);
		goto out;
	}
	sg_tool_result_machine(*result, e, created);
	ret = 0;
out:
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
		char *bulk = sg_tool_take_bulk(t, "content", &len);

		/* a large content is decoded where it lies: no second buffer */
		if (bulk)
			len = sg_base64_decode_to(bulk, bulk, len);
		else if ((decoded = sg_base64_decode(data, &len)))
			data = decoded;
		if (!decoded && (!bulk || len == (size_t)-1)) {
			sg_errf(err, SG_E_INVAL, "argument 'content' is not valid base64 (RFC 4648): encode the bytes, or use \"encoding\": \"utf-8\" for text");
			goto out;
		}
	}
	if (len > file_cap()) {
		sg_errf(err, SG_E_TOOBIG, "argument 'content' is %zu bytes, more than [sandbox] max_file_bytes (%zu)",
			len, file_cap());
		goto out;
	}
	/* The content is held already; reserving it keeps other calls from
	 * growing past the budget while this one moves it. */
	if (sg_call_mem_reserve(t->call, len + (decoded ? len : 0), err) < 0)
		goto out;
	if (sg_tool_machine(t, args, &e, &created, err) < 0)
		goto out;
	full = machine_path(e, path);
	if (sg_m_file_write(e, full, data, len, &opts, t->call, err) < 0) {
		file_failed_fix(err, "check that the directory can be made there (list_files shows what is there)");
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

/* The entries from offset that fit the result's budget (one at least);
 * files is stolen.  A cut names the entries, not bytes: total_entries,
 * kept_entries [first, end). */
static void list_page(struct sg_entry *e, json_t *result, const char *full, json_t *files,
		      unsigned offset)
{
	size_t n = json_array_size(files), budget = sg_cut_budget(), used = 0, i;
	json_t *page = json_array(), *d;

	for (i = offset; i < n; i++) {
		size_t sz = json_dumpb(json_array_get(files, i), NULL, 0, JSON_COMPACT) + 1;

		if (i > offset && used + sz > budget)
			break;
		used += sz;
		json_array_append(page, json_array_get(files, i));
	}
	json_object_set_new(result, "files", page);
	if (offset)
		json_object_set_new(result, "offset", json_integer(offset));
	if (i < n) {
		d = json_pack("{s:I, s:[I, I], s:o}", "total_entries", (json_int_t)n, "kept_entries",
			      (json_int_t)offset, (json_int_t)i, "rest",
			      sg_cut_call("list_files", json_pack("{s:s, s:I, s:s}", "path", full, "offset",
							       (json_int_t)i, "sandbox_id", e->m.id)));
		sg_cut_note(result, "files", d);
	}
	json_decref(files);
}

static int tool_list_files(struct sg_tool_ctx *t, json_t *args, json_t **result,
			   struct sg_err *err)
{
	unsigned offset;
	const char *path;
	struct sg_entry *e = NULL;
	json_t *files = NULL;
	char *full = NULL;
	bool created;
	int ret = -1;

	if (sg_arg_str(args, "path", false, &path, err) < 0 ||
	    sg_arg_uint(args, "offset", 0, 0, 2000000000u, &offset, err) < 0)
		goto out;
	if (sg_tool_machine(t, args, &e, &created, err) < 0)
		goto out;
	full = machine_path(e, path);
	if (sg_m_file_list(e, full, t->call, &files, err) < 0) {
		file_failed_fix(err, "list_files of a parent directory shows what is there");
		sg_tool_machine_failed(t, e, err);
		goto out;
	}
	*result = json_pack("{s:s}", "path", full);
	list_page(e, *result, full, files, offset);
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
	if (sg_machine_kill_by(t->s, e, id, t->call, err) < 0)
		return -1;
	sg_session_default_clear(t->s, killed);
	*result = json_pack("{s:b, s:s}", "success", 1, "sandbox_id", killed);
	return 0;
}

/* ---- the table ---------------------------------------------------------------- */

/* The backend property: an enum of the plugins actually loaded (their
 * summaries are in sandbox_env's help, not paid for on every turn). */
static void create_schema(json_t *schema)
{
	json_t *props = json_object_get(schema, "properties"), *names = json_array(), *prop;

	for (struct sg_plugin *p = sg_plugin_first(); p; p = p->next)
		json_array_append_new(names, json_string(p->b->name));
	prop = json_pack("{s:s, s:s}", "type", "string", "description", "Omit for default");
	if (json_array_size(names))
		json_object_set(prop, "enum", names);
	json_object_set_new(props, "backend", prop);
	json_decref(names);
}

/* The schemas are compact JSON: tools/list is read by the model on every
 * turn (issue budget: 8 KiB for all tools, doc/tools.md). */
#define STR(d) "{\"type\":\"string\",\"description\":\"" d "\"}"
#define SANDBOX_ID "\"sandbox_id\":" STR("Omit for default")
#define ENVS(d) "{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"},\"description\":\"" d "\"}"
#define ENCODING(d) "{\"type\":\"string\",\"enum\":[\"utf-8\",\"base64\"],\"default\":\"utf-8\",\"description\":\"" d "\"}"
#define CLOSED "},\"additionalProperties\":false}"
#define OUT(props) "{\"type\":\"object\",\"properties\":{" props ",\"sandbox_id\":{\"type\":\"string\"}}}"
#define T_STR "{\"type\":\"string\"}"
#define T_INT "{\"type\":\"integer\"}"
#define T_BOOL "{\"type\":\"boolean\"}"
#define T_ARR "{\"type\":\"array\"}"
#define READ_ONLY "{\"readOnlyHint\":true,\"openWorldHint\":false}"
#define OUT_RUN "\"stdout\":" T_STR ",\"stderr\":" T_STR ",\"exit_code\":" T_INT ",\"timed_out\":" T_BOOL

static const struct sg_tool cloud_tools[] = {
	{ .name = "create_sandbox",
	  .description = "Create a sandbox; it becomes the session's default.",
	  .input_schema = "{\"type\":\"object\",\"properties\":{"
			  "\"template\":" STR("Omit for default") ","
			  "\"timeout\":{\"type\":\"integer\",\"default\":{\"config\":\"sandbox.timeout\"},\"description\":\"Idle lifetime (s)\"},"
			  "\"envs\":" ENVS("Env of every command") ","
			  "\"backend\":" STR("Omit for default") CLOSED,
	  .fn = tool_create,
	  .schema_hook = create_schema,
	  .annotations = "{\"destructiveHint\":false,\"openWorldHint\":false}",
	  .output_schema = OUT("\"backend\":" T_STR ",\"workspace\":" T_STR) },
	{ .name = "run_code",
	  .description = "Run code in a sandbox; python and javascript keep state between calls.",
	  .input_schema = "{\"type\":\"object\",\"properties\":{"
			  "\"code\":" STR("Code to run") ","
			  "\"language\":{\"type\":\"string\",\"enum\":[\"python\",\"javascript\",\"shell\",\"typescript\",\"r\"],\"default\":\"python\","
			  "\"description\":\"python, javascript: stateful; typescript needs Node 22.6+, r Rscript\"},"
			  SANDBOX_ID ","
			  "\"timeout\":{\"type\":\"integer\",\"default\":{\"config\":\"sandbox.code_timeout\"},\"description\":\"Seconds\"},"
			  "\"reset\":{\"type\":\"boolean\",\"description\":\"Fresh state first\"}"
			  "},\"required\":[\"code\"],\"additionalProperties\":false}",
	  .fn = sg_tool_run_code,
	  .output_schema = OUT(OUT_RUN ",\"stateful\":" T_BOOL ",\"results\":" T_ARR) },
	{ .name = "run_command",
	  .description = "Run a shell command (/bin/sh -c) in a sandbox.",
	  .input_schema = "{\"type\":\"object\",\"properties\":{"
			  "\"command\":" STR("Shell command") ","
			  SANDBOX_ID ","
			  "\"cwd\":" STR("Default workspace") ","
			  "\"timeout\":{\"type\":\"integer\",\"default\":{\"config\":\"sandbox.command_timeout\"},\"description\":\"Seconds\"},"
			  "\"envs\":" ENVS("Extra env") "},\"required\":[\"command\"],\"additionalProperties\":false}",
	  .fn = tool_run_command,
	  .output_schema = OUT(OUT_RUN) },
	{ .name = "read_file",
	  .description = "Read a file from a sandbox (base64 if not UTF-8).",
	  .input_schema = "{\"type\":\"object\",\"properties\":{"
			  "\"path\":" STR("File path") ","
			  SANDBOX_ID ","
			  "\"encoding\":" ENCODING("utf-8 or base64") ","
			  "\"offset\":{\"type\":\"integer\",\"description\":\"First byte\"},"
			  "\"limit\":{\"type\":\"integer\",\"description\":\"Bytes\"}"
			  "},\"required\":[\"path\"],\"additionalProperties\":false}",
	  .fn = tool_read_file,
	  .annotations = READ_ONLY,
	  .output_schema = OUT("\"path\":" T_STR ",\"content\":" T_STR ",\"encoding\":" T_STR) },
	{ .name = "write_file",
	  .description = "Write a file in a sandbox, atomically.",
	  .input_schema = "{\"type\":\"object\",\"properties\":{"
			  "\"path\":" STR("File path") ","
			  "\"content\":" STR("The whole content") ","
			  SANDBOX_ID ","
			  "\"encoding\":" ENCODING("utf-8 or base64") "},\"required\":[\"path\",\"content\"],\"additionalProperties\":false}",
	  .fn = tool_write_file,
	  .bulk_arg = "content",
	  .annotations = "{\"idempotentHint\":true,\"openWorldHint\":false}",
	  .output_schema = OUT("\"path\":" T_STR ",\"bytes_written\":" T_INT) },
	{ .name = "list_files",
	  .description = "List a directory in a sandbox.",
	  .input_schema = "{\"type\":\"object\",\"properties\":{"
			  "\"path\":" STR("Default workspace") ","
			  SANDBOX_ID ","
			  "\"offset\":{\"type\":\"integer\",\"description\":\"Entries to skip\"}" CLOSED,
	  .fn = tool_list_files,
	  .annotations = READ_ONLY,
	  .output_schema = OUT("\"path\":" T_STR ",\"files\":" T_ARR) },
	{ .name = "kill_sandbox",
	  .description = "Destroy a sandbox.",
	  .input_schema = "{\"type\":\"object\",\"properties\":{" SANDBOX_ID CLOSED,
	  .fn = tool_kill,
	  .annotations = "{\"idempotentHint\":true,\"openWorldHint\":false}",
	  .output_schema = OUT("\"success\":" T_BOOL) },
};

void sg_tools_init(void)
{
	sg_tools_register_family(SG_TOOLS_CLOUD, cloud_tools, sizeof(cloud_tools) / sizeof(cloud_tools[0]));
	sg_tools_env_init();
}
