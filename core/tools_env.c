/*
 * The sandbox_env tool family: persistent shells (sandbox_shell_exec,
 * sandbox_shell_read), files (sandbox_file_read/write/patch/search), the
 * sandbox_env discovery and management dispatcher, and sandbox_audit_query.
 *
 * Machines: `machine` takes a sandbox id from create_sandbox or a persistent
 * machine's name; without it the session's default machine is used, created
 * lazily exactly as the cloud tools do (one registry, one default).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/audit.h"
#include "core/call.h"
#include "core/conf.h"
#include "core/err.h"
#include "core/fileops.h"
#include "core/machine.h"
#include "core/patch.h"
#include "core/plugin.h"
#include "core/session.h"
#include "core/shell.h"
#include "core/tools.h"
#include "core/util.h"

#define DIFF_LINES_MAX 400

/* [files] max_file_size, else [sandbox] max_file_bytes. */
static size_t file_cap(void)
{
	long long v = sg_config_int("files", "max_file_size", -1);

	return (size_t)(v >= 0 ? v : sg_config_int("sandbox", "max_file_bytes", 64LL << 20));
}

static const char *file_cap_key(void)
{
	return sg_config_int("files", "max_file_size", -1) >= 0 ? "[files] max_file_size" : "[sandbox] max_file_bytes";
}

/* [files] limits; each at least 1. */
static unsigned files_limit(const char *key, long long def)
{
	long long v = sg_config_int("files", key, def);

	return v < 1 ? 1u : v > 1000000 ? 1000000u : (unsigned)v;
}

/* The machine a call names in `key` (an id or a persistent name), else the
 * session's default (created lazily).  A reference in *out. */
static int env_machine(struct sg_tool_ctx *t, json_t *args, const char *key, struct sg_entry **out,
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

#define label sg_machine_label

static void add_machine(json_t *result, const struct sg_entry *e, bool created)
{
	sg_tool_result_machine(result, e, created);
	json_object_set_new(result, "machine", json_string(label(e)));
}

/* ---- shells ------------------------------------------------------------------------ */

/* [shell] max_output, else the seed's [shell] default_max_output. */
static size_t default_max_output(void)
{
	const char *seed = sg_config_get("shell", "default_max_output");

	if (seed && *seed && !strcmp(sg_config_source("shell", "max_output"), "default"))
		return (size_t)sg_config_int("shell", "default_max_output", 50000);
	return (size_t)sg_config_int("shell", "max_output", 50000);
}

/* The shell a call means: shell_id, else the default shell of `machine`
 * (or of the session's default machine). */
static int env_shell(struct sg_tool_ctx *t, json_t *args, struct sg_shell **sh, bool *created,
		     struct sg_err *err)
{
	const char *id;
	struct sg_entry *e = NULL;

	*created = false;
	if (sg_arg_str(args, "shell_id", false, &id, err) < 0)
		return -1;
	if (id && *id) {
		*sh = sg_shell_get(t->s, id, err);
		return *sh ? 0 : -1;
	}
	if (env_machine(t, args, "machine", &e, created, err) < 0)
		return -1;
	*sh = sg_shell_default(e, t->call, err);
	sg_machine_put(e);
	return *sh ? 0 : -1;
}

static int tool_shell_exec(struct sg_tool_ctx *t, json_t *args, json_t **result, struct sg_err *err)
{
	struct sg_shell_exec req = { 0 };
	struct sg_shell *sh = NULL;
	unsigned timeout, max_output;
	bool created;
	int ret = -1;

	if (sg_arg_str(args, "command", true, &req.command, err) < 0 ||
	    sg_arg_bool(args, "wait", true, &req.wait, err) < 0 ||
	    sg_arg_uint(args, "timeout", (unsigned)sg_config_int("shell", "timeout", 30), 0, 86400, &timeout,
			err) < 0 ||
	    sg_arg_uint(args, "max_output", (unsigned)default_max_output(), 1, 16u << 20, &max_output, err) < 0)
		return -1;
	if (!*req.command)
		return sg_errf(err, SG_E_INVAL, "argument 'command' is empty: pass a shell command such as \"ls -la\"");
	if (env_shell(t, args, &sh, &created, err) < 0)
		return -1;
	req.timeout_ms = timeout * 1000;
	req.max_output = max_output;
	if (sg_shell_exec(sh, &req, t->call, result, err) < 0)
		goto out;
	add_machine(*result, sg_shell_machine(sh), created);
	ret = 0;
out:
	sg_shell_put(sh);
	return ret;
}

static int tool_shell_read(struct sg_tool_ctx *t, json_t *args, json_t **result, struct sg_err *err)
{
	struct sg_shell *sh = NULL;
	unsigned max_output;
	bool created;
	int ret;

	if (sg_arg_uint(args, "max_output", 0, 0, 16u << 20, &max_output, err) < 0)
		return -1;
	if (env_shell(t, args, &sh, &created, err) < 0)
		return -1;
	ret = sg_shell_read(sh, max_output, result, err);
	if (ret == 0)
		add_machine(*result, sg_shell_machine(sh), created);
	sg_shell_put(sh);
	return ret;
}

/* ---- files ------------------------------------------------------------------------ */

/* A text file larger than [files] max_file_size is reported, not shown. */
static void too_large(json_t *r, const char *path)
{
	json_int_t size = json_integer_value(json_object_get(r, "file_size"));

	if (strcmp(json_string_value(json_object_get(r, "status")) ?: "", "ok") || size <= (json_int_t)file_cap())
		return;
	json_object_clear(r);
	json_object_set_new(r, "status", json_string("too_large"));
	json_object_set_new(r, "path", json_string(path));
	json_object_set_new(r, "file_size", json_integer(size));
	json_object_set_new(r, "max_file_size", json_integer((json_int_t)file_cap()));
	json_object_set_new(r, "hint", json_string(
		"larger than [files] max_file_size: read parts with a command (head, tail, sed -n), or raise the limit"));
}

static int tool_file_read(struct sg_tool_ctx *t, json_t *args, json_t **result, struct sg_err *err)
{
	const char *path;
	unsigned offset, limit;
	struct sg_entry *e = NULL;
	char *full = NULL;
	bool created;
	int ret = -1;

	if (sg_arg_str(args, "path", true, &path, err) < 0 ||
	    sg_arg_uint(args, "offset", 1, 0, 2000000000u, &offset, err) < 0 ||
	    sg_arg_uint(args, "limit", files_limit("default_read_limit", 500), 1, 1000000, &limit, err) < 0)
		return -1;
	if (!*path)
		return sg_errf(err, SG_E_INVAL, "argument 'path' is empty: pass a file path such as /workspace/main.py");
	/* Like the reference: offset counts from 1, limit is capped. */
	if (offset < 1)
		offset = 1;
	if (limit > files_limit("max_read_limit", 2000))
		limit = files_limit("max_read_limit", 2000);
	if (env_machine(t, args, "machine", &e, &created, err) < 0)
		return -1;
	full = sg_fileops_path(e, path, t->call, err);
	if (!full || sg_fileops_read(e, full, offset, limit, t->call, result, err) < 0)
		goto out;
	too_large(*result, full);
	add_machine(*result, e, created);
	ret = 0;
out:
	free(full);
	sg_machine_put(e);
	return ret;
}

/* Validates and writes data to full; fills the common result fields. */
static int write_checked(struct sg_tool_ctx *t, struct sg_entry *e, const char *full, const char *data,
			 size_t len, json_t *result, struct sg_err *err)
{
	struct sg_write_opts opts = { 0 };
	json_t *lint = NULL;

	if (len > file_cap())
		return sg_errf(err, SG_E_TOOBIG, "the content is %zu bytes, more than %s (%zu)", len, file_cap_key(),
			       file_cap());
	if (sg_fileops_validate(e, full, data, len, t->call, &lint, err) < 0)
		return -1;
	if (sg_m_file_write(e, full, data, len, &opts, t->call, err) < 0) {
		json_decref(lint);
		return -1;
	}
	json_object_set_new(result, "bytes_written", json_integer((json_int_t)len));
	json_object_set_new(result, "lint", lint ? lint : json_null());
	return 0;
}

static int tool_file_write(struct sg_tool_ctx *t, json_t *args, json_t **result, struct sg_err *err)
{
	const char *path, *content;
	struct sg_entry *e = NULL;
	char *full = NULL;
	json_t *r = NULL;
	bool created;
	int ret = -1;

	if (sg_arg_str(args, "path", true, &path, err) < 0 ||
	    sg_arg_str(args, "content", true, &content, err) < 0)
		return -1;
	if (!*path)
		return sg_errf(err, SG_E_INVAL, "argument 'path' is empty: pass a file path such as /workspace/main.py");
	if (env_machine(t, args, "machine", &e, &created, err) < 0)
		return -1;
	full = sg_fileops_path(e, path, t->call, err);
	if (!full)
		goto out;
	r = json_pack("{s:s, s:s}", "status", "ok", "path", full);
	if (write_checked(t, e, full, content, json_string_length(json_object_get(args, "content")), r,
			  err) < 0)
		goto out;
	sg_fileops_advise(r, full, NULL);
	add_machine(r, e, created);
	*result = r;
	r = NULL;
	ret = 0;
out:
	json_decref(r);
	free(full);
	sg_machine_put(e);
	return ret;
}

/* Reads a whole file for editing; a BOM is taken off and reported. */
static int read_for_edit(struct sg_tool_ctx *t, struct sg_entry *e, const char *full,
			 struct sg_buf *buf, bool *bom, struct sg_err *err)
{
	*bom = false;
	if (sg_m_file_read(e, full, file_cap(), t->call, buf, err) < 0)
		return -1;
	if (buf->len && memchr(buf->data, '\0', buf->len))
		return sg_errf(err, SG_E_INVAL, "%s is a binary file (it holds NUL bytes): patch only edits text", full);
	if (buf->len >= 3 && !memcmp(buf->data, "\xEF\xBB\xBF", 3)) {
		memmove(buf->data, buf->data + 3, buf->len - 3);
		buf->len -= 3;
		buf->data[buf->len] = '\0';
		*bom = true;
	}
	return 0;
}

/* Puts a BOM back in front of text when the file had one.  New string. */
static char *with_bom(const char *text, size_t len, bool bom, size_t *outlen)
{
	char *s = sg_xmalloc(len + 4);

	if (bom)
		memcpy(s, "\xEF\xBB\xBF", 3);
	memcpy(s + (bom ? 3 : 0), text, len);
	*outlen = len + (bom ? 3 : 0);
	s[*outlen] = '\0';
	return s;
}

static int patch_replace(struct sg_tool_ctx *t, struct sg_entry *e, json_t *args, const char *full,
			 json_t *r, struct sg_err *err)
{
	const char *old_s, *new_s;
	bool all, bom;
	struct sg_buf buf = { 0 };
	struct sg_patch_out po = { 0 };
	char *data = NULL, *diff = NULL;
	size_t len;
	int ret = -1;

	if (sg_arg_str(args, "old_string", true, &old_s, err) < 0 ||
	    sg_arg_str(args, "new_string", false, &new_s, err) < 0 ||
	    sg_arg_bool(args, "replace_all", false, &all, err) < 0)
		return -1;
	if (read_for_edit(t, e, full, &buf, &bom, err) < 0)
		goto out;
	if (sg_patch_replace(buf.data ? buf.data : "", buf.len, old_s, new_s ? new_s : "", all, &po, err) < 0) {
		sg_err_prefix(err, full);
		sg_err_prefix(err, ": ");
		goto out;
	}
	data = with_bom(po.text, po.len, bom, &len);
	if (write_checked(t, e, full, data, len, r, err) < 0)
		goto out;
	diff = sg_patch_unified(buf.data ? buf.data : "", buf.len, po.text, po.len, full, DIFF_LINES_MAX);
	json_object_set_new(r, "matches", json_integer(po.matches));
	json_object_set_new(r, "fuzzy", json_boolean(strcmp(po.strategy, "exact") != 0));
	json_object_set_new(r, "strategy", json_string(po.strategy));
	json_object_set_new(r, "diff", sg_json_bytes(diff, strlen(diff)));
	ret = 0;
out:
	free(diff);
	free(data);
	sg_patch_out_free(&po);
	sg_buf_release(&buf);
	return ret;
}

/* One file of a diff, computed before anything is written. */
struct planned {
	char *path;
	char *data;
	size_t len;
	bool created, deleted;
	struct sg_patch_out po;
};

static void planned_free(struct planned *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(p[i].path);
		free(p[i].data);
		sg_patch_out_free(&p[i].po);
	}
	free(p);
}

static int plan_file(struct sg_tool_ctx *t, struct sg_entry *e, const struct sg_diff_file *f,
		     const char *given, struct planned *pl, struct sg_err *err)
{
	const char *target = given ? given : sg_diff_target(f);
	struct sg_buf buf = { 0 };
	bool bom = false;
	int ret = -1;

	if (!target || !*target)
		return sg_errf(err, SG_E_INVAL, "patch: a file in the diff names no path: add '--- a/file' and '+++ b/file' lines, or pass path");
	pl->path = sg_fileops_path(e, target, t->call, err);
	if (!pl->path)
		return -1;
	pl->created = f->old_path && !strcmp(f->old_path, "/dev/null");
	pl->deleted = f->new_path && !strcmp(f->new_path, "/dev/null");
	if (!pl->created && read_for_edit(t, e, pl->path, &buf, &bom, err) < 0)
		goto out;
	if (sg_diff_apply(f, buf.data, buf.len, &pl->po, err) < 0)
		goto out;
	pl->data = with_bom(pl->po.text, pl->po.len, bom, &pl->len);
	ret = 0;
out:
	sg_buf_release(&buf);
	return ret;
}

static int remove_file(struct sg_entry *e, const char *path, struct sg_call *call, struct sg_err *err)
{
	if (sg_m_file_remove(e, path, false, call, err) < 0) {
		sg_err_prefix(err, "cannot delete the file: ");
		return -1;
	}
	return 0;
}

/* A file the diff creates must not be there yet (it would be overwritten
 * unseen); one it deletes must be a file. */
static int check_planned(struct sg_tool_ctx *t, struct sg_entry *e, const struct planned *pl,
			 struct sg_err *err)
{
	struct sg_stat st;
	struct sg_err serr;

	if (!pl->created && !pl->deleted)
		return 0;
	if (sg_m_file_stat(e, pl->path, t->call, &st, &serr) < 0) {
		if (serr.code == SG_E_NOTFOUND && pl->created)
			return 0;
		*err = serr;
		return -1;
	}
	if (pl->created)
		return sg_errf(err, SG_E_EXISTS,
			       "patch: the diff creates %s (--- /dev/null), but it exists: patch it with a diff against its content, or remove it first",
			       pl->path);
	if (st.type == SG_FT_DIR)
		return sg_errf(err, SG_E_INVAL, "patch: the diff deletes %s, which is a directory", pl->path);
	return 0;
}

/* All files are computed first and checked, then written: a hunk that does
 * not apply leaves every file as it was. */
static int patch_diff(struct sg_tool_ctx *t, struct sg_entry *e, json_t *args, json_t *r,
		      struct sg_err *err)
{
	const char *text, *path;
	struct sg_diff *d = NULL;
	struct planned *pl = NULL;
	json_t *files = json_array(), *lint;
	int ret = -1;

	if (sg_arg_str(args, "patch", true, &text, err) < 0 || sg_arg_str(args, "path", false, &path, err) < 0)
		goto out;
	if (!*text || strspn(text, " \t\r\n") == strlen(text)) {
		sg_errf(err, SG_E_INVAL, "patch is empty: give a unified diff");
		goto out;
	}
	if (sg_diff_parse(text, &d, err) < 0)
		goto out;
	pl = sg_xcalloc(d->n, sizeof(*pl));
	for (size_t i = 0; i < d->n; i++)
		if (plan_file(t, e, &d->files[i], d->n == 1 && path && *path ? path : NULL, &pl[i], err) < 0 ||
		    check_planned(t, e, &pl[i], err) < 0)
			goto out;
	for (size_t i = 0; i < d->n; i++) {
		if (pl[i].deleted)
			continue;
		lint = NULL;
		if (sg_fileops_validate(e, pl[i].path, pl[i].data, pl[i].len, t->call, &lint, err) < 0)
			goto out;
		json_decref(lint);
	}
	for (size_t i = 0; i < d->n; i++) {
		struct sg_write_opts opts = { 0 };
		json_t *row;

		if (pl[i].deleted ? remove_file(e, pl[i].path, t->call, err) < 0
				  : sg_m_file_write(e, pl[i].path, pl[i].data, pl[i].len, &opts, t->call, err) < 0) {
			sg_err_prefix(err, i ? "patch: earlier files were written, then: " : "patch: ");
			goto out;
		}
		row = json_pack("{s:s, s:i, s:i, s:i}", "path", pl[i].path, "hunks", (int)pl[i].po.matches,
				"max_offset", pl[i].po.max_offset, "fuzzy_hunks", (int)pl[i].po.fuzzy_hunks);
		if (pl[i].created)
			json_object_set_new(row, "created", json_true());
		if (pl[i].deleted)
			json_object_set_new(row, "deleted", json_true());
		sg_fileops_advise(row, pl[i].path, NULL);
		json_array_append_new(files, row);
	}
	json_object_set_new(r, "files", files);
	files = NULL;
	ret = 0;
out:
	json_decref(files);
	if (pl)
		planned_free(pl, d->n);
	sg_diff_free(d);
	return ret;
}

static int tool_file_patch(struct sg_tool_ctx *t, json_t *args, json_t **result, struct sg_err *err)
{
	const char *mode, *path;
	struct sg_entry *e = NULL;
	char *full = NULL;
	json_t *r = NULL;
	bool created;
	int ret = -1;

	if (sg_arg_enum(args, "mode", NULL, "replace|patch", &mode, err) < 0 ||
	    sg_arg_str(args, "path", false, &path, err) < 0)
		return -1;
	if (!mode)
		return sg_errf(err, SG_E_INVAL, "missing required argument 'mode': \"replace\" (old_string -> new_string) or \"patch\" (a unified diff)");
	if (!strcmp(mode, "replace") && (!path || !*path))
		return sg_errf(err, SG_E_INVAL, "mode \"replace\" needs 'path': the file to edit");
	if (env_machine(t, args, "machine", &e, &created, err) < 0)
		return -1;
	r = json_pack("{s:s}", "status", "ok");
	if (!strcmp(mode, "replace")) {
		full = sg_fileops_path(e, path, t->call, err);
		if (!full || patch_replace(t, e, args, full, r, err) < 0)
			goto out;
		json_object_set_new(r, "path", json_string(full));
		sg_fileops_advise(r, full, NULL);
	} else if (patch_diff(t, e, args, r, err) < 0) {
		goto out;
	}
	add_machine(r, e, created);
	*result = r;
	r = NULL;
	ret = 0;
out:
	json_decref(r);
	free(full);
	sg_machine_put(e);
	return ret;
}

static int tool_file_search(struct sg_tool_ctx *t, json_t *args, json_t **result, struct sg_err *err)
{
	struct sg_search q = { 0 };
	const char *path;
	struct sg_entry *e = NULL;
	char *full = NULL;
	bool created;
	int ret = -1;

	if (sg_arg_str(args, "pattern", true, &q.pattern, err) < 0 ||
	    sg_arg_enum(args, "search_type", "content", "content|files", &q.type, err) < 0 ||
	    sg_arg_str(args, "path", false, &path, err) < 0 ||
	    sg_arg_str(args, "file_glob", false, &q.glob, err) < 0 ||
	    sg_arg_uint(args, "limit", files_limit("default_search_limit", 50), 1, 10000, &q.limit, err) < 0 ||
	    sg_arg_uint(args, "offset", 0, 0, 1000000, &q.offset, err) < 0 ||
	    sg_arg_enum(args, "output_mode", "content", "content|files_only|count", &q.output_mode, err) < 0 ||
	    sg_arg_uint(args, "context", 0, 0, 50, &q.context, err) < 0)
		return -1;
	if (!*q.pattern)
		return sg_errf(err, SG_E_INVAL, "argument 'pattern' is empty: pass a regular expression (or a file name with search_type \"files\")");
	if (q.glob && !*q.glob)
		q.glob = NULL;
	if (env_machine(t, args, "machine", &e, &created, err) < 0)
		return -1;
	full = sg_fileops_path(e, path && *path && strcmp(path, ".") ? path : NULL, t->call, err);
	if (!full)
		goto out;
	q.path = full;
	if (sg_fileops_search(e, &q, t->call, result, err) < 0)
		goto out;
	json_object_set_new(*result, "path", json_string(full));
	add_machine(*result, e, created);
	ret = 0;
out:
	free(full);
	sg_machine_put(e);
	return ret;
}

/* ---- sandbox_env ----------------------------------------------------------------------- */

struct env_op {
	const char *name;
	const char *description;
	const char *params;  /* "name (required)..." for help */
	const char *example;
	int (*fn)(struct sg_tool_ctx *t, json_t *params, json_t **result, struct sg_err *err);
};

static json_t *machine_row(struct sg_tool_ctx *t, struct sg_entry *e)
{
	char def[SG_ID_MAX], up[32];
	int64_t age = sg_time_s() - e->created;
	bool is_def = sg_session_default_get(t->s, def) && !strcmp(def, e->m.id);

	if (age <= 60)
		snprintf(up, sizeof(up), "%llds", (long long)age);
	else
		snprintf(up, sizeof(up), "%lldh%lldm", (long long)(age / 3600), (long long)(age % 3600 / 60));
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:s, s:b, s:b, s:s}", "name",
			 label(e), "sandbox_id", e->m.id, "backend",
			 e->m.backend->name, "status", e->dead ? "gone" : "running", "purpose",
			 e->purpose, "shells", (int)sg_shell_count(e), "uptime", up, "persistent",
			 !e->ephemeral, "is_default", is_def, "template", e->m.template_name);
}

static json_t *machine_rows(struct sg_tool_ctx *t)
{
	struct sg_entry **v = NULL;
	size_t n = sg_machine_list_visible(t->s, &v);
	json_t *rows = json_array();

	for (size_t i = 0; i < n; i++) {
		json_array_append_new(rows, machine_row(t, v[i]));
		sg_machine_put(v[i]);
	}
	free(v);
	return rows;
}

static int op_machine_list(struct sg_tool_ctx *t, json_t *p, json_t **result, struct sg_err *err)
{
	(void)p;
	(void)err;
	*result = json_pack("{s:o}", "machines", machine_rows(t));
	return 0;
}

static int op_status(struct sg_tool_ctx *t, json_t *p, json_t **result, struct sg_err *err)
{
	char def[SG_ID_MAX];

	(void)p;
	(void)err;
	sg_machine_wait_ready(); /* backends load on a startup thread */
	*result = json_pack("{s:o, s:o, s:o}", "default_machine",
			    sg_session_default_get(t->s, def) ? json_string(def) : json_null(), "machines",
			    machine_rows(t), "shells", sg_shell_list(t->s, NULL));
	return 0;
}

static int op_default_set(struct sg_tool_ctx *t, json_t *p, json_t **result, struct sg_err *err)
{
	const char *m, *id;
	struct sg_entry *e;
	struct sg_shell *sh;

	if (sg_arg_str(p, "machine", false, &m, err) < 0 || sg_arg_str(p, "shell_id", false, &id, err) < 0)
		return -1;
	if ((m && *m) == (id && *id))
		return sg_errf(err, SG_E_INVAL, "Pass exactly one of machine or shell_id");
	if (id && *id) {
		sh = sg_shell_get(t->s, id, err);
		if (!sh)
			return -1;
		sg_shell_make_default(sh);
		e = sg_shell_machine(sh);
		*result = json_pack("{s:{s:s, s:s}}", "default_shell", "machine", label(e),
				    "shell_id", id);
		sg_shell_put(sh);
		return 0;
	}
	e = sg_machine_get(t->s, m, err);
	if (!e)
		return -1;
	sg_session_default_set(t->s, e->m.id);
	*result = json_pack("{s:s, s:s}", "default_machine", e->m.id, "machine", label(e));
	sg_machine_put(e);
	return 0;
}

static int op_shell_new(struct sg_tool_ctx *t, json_t *p, json_t **result, struct sg_err *err)
{
	const char *purpose;
	struct sg_entry *e = NULL;
	struct sg_shell *sh;
	bool created;

	if (sg_arg_str(p, "purpose", false, &purpose, err) < 0 ||
	    env_machine(t, p, "machine", &e, &created, err) < 0)
		return -1;
	sh = sg_shell_new(e, purpose, t->call, err);
	if (sh) {
		json_t *r = NULL;

		sg_shell_read(sh, 0, &r, err);
		*result = json_pack("{s:s, s:s, s:O}", "shell_id", sg_shell_id(sh), "machine",
				    label(e), "bash_pid", json_object_get(r, "bash_pid"));
		json_decref(r);
		add_machine(*result, e, created);
		sg_shell_put(sh);
	}
	sg_machine_put(e);
	return sh ? 0 : -1;
}

static int op_shell_remove(struct sg_tool_ctx *t, json_t *p, json_t **result, struct sg_err *err)
{
	const char *id;
	struct sg_shell *sh;

	if (sg_arg_str(p, "shell_id", false, &id, err) < 0)
		return -1;
	if (!id || !*id)
		return sg_errf(err, SG_E_INVAL, "Missing required param: shell_id");
	sh = sg_shell_get(t->s, id, err);
	if (!sh || sg_shell_remove(sh, err) < 0)
		return -1;
	*result = json_pack("{s:s, s:s}", "shell_id", id, "status", "removed");
	return 0;
}

static int op_shell_list(struct sg_tool_ctx *t, json_t *p, json_t **result, struct sg_err *err)
{
	const char *m;

	if (sg_arg_str(p, "machine", false, &m, err) < 0)
		return -1;
	/* An object, not the reference's bare array: structuredContent is one. */
	*result = json_pack("{s:o}", "shells", sg_shell_list(t->s, m));
	return 0;
}

static int op_shell_interrupt(struct sg_tool_ctx *t, json_t *p, json_t **result, struct sg_err *err)
{
	struct sg_shell *sh = NULL;
	bool created;
	int r;

	if (env_shell(t, p, &sh, &created, err) < 0)
		return -1;
	r = sg_shell_interrupt(sh, result, err);
	if (r == 0)
		add_machine(*result, sg_shell_machine(sh), created);
	sg_shell_put(sh);
	return r;
}

/* A persistent machine: it belongs to the caller's credential and outlives
 * the session. */
static int create_persistent(struct sg_tool_ctx *t, const char *backend, const char *name,
			     const char *tmpl, const char *purpose, json_t *options, json_t **result,
			     struct sg_err *err)
{
	struct sg_create_req req = { 0 };
	struct sg_entry *e;

	req.template_name = tmpl && *tmpl ? tmpl : NULL;
	req.name = name;
	req.options = options;
	if (sg_machine_create_persistent(t->s, backend, &req, purpose, t->call, &e, err) < 0)
		return -1;
	*result = sg_machine_summary(e);
	sg_machine_put(e);
	return 0;
}

/* The backend's create options: params.options and every parameter the
 * core does not know (a backend's own, such as docker's image or ports:
 * the backend checks them and names any it does not take).  New object. */
static int create_options(json_t *p, json_t **out, struct sg_err *err)
{
	static const char *const core_keys[] = { "name", "backend", "template", "purpose", "options", NULL };
	json_t *options = json_object_get(p, "options"), *v;
	const char *k;

	*out = NULL;
	if (options && !json_is_object(options) && !json_is_null(options))
		return sg_errf(err, SG_E_INVAL, "params.options must be an object");
	*out = json_is_object(options) ? json_copy(options) : json_object();
	json_object_foreach(p, k, v) {
		bool core = false;

		for (size_t i = 0; core_keys[i]; i++)
			core |= !strcmp(k, core_keys[i]);
		if (core)
			continue;
		if (json_object_get(*out, k)) {
			json_decref(*out);
			*out = NULL;
			return sg_errf(err, SG_E_INVAL, "'%s' is given both in options and as a parameter: give it once", k);
		}
		json_object_set(*out, k, v);
	}
	return 0;
}

static int op_machine_create(struct sg_tool_ctx *t, json_t *p, json_t **result, struct sg_err *err)
{
	const char *name, *backend, *tmpl, *purpose;
	json_t *options = NULL;
	int r;

	if (sg_arg_str(p, "name", true, &name, err) < 0 || sg_arg_str(p, "backend", false, &backend, err) < 0 ||
	    sg_arg_str(p, "template", false, &tmpl, err) < 0 || sg_arg_str(p, "purpose", false, &purpose, err) < 0 ||
	    create_options(p, &options, err) < 0)
		return -1;
	r = create_persistent(t, backend && *backend ? backend : NULL, name, tmpl, purpose,
			      json_object_size(options) ? options : NULL, result, err);
	json_decref(options);
	return r;
}

static int op_machine_remove(struct sg_tool_ctx *t, json_t *p, json_t **result, struct sg_err *err)
{
	const char *m;
	struct sg_entry *e;
	char id[SG_ID_MAX];

	if (sg_arg_str(p, "machine", true, &m, err) < 0)
		return -1;
	e = sg_machine_get(t->s, m, err);
	if (!e)
		return -1;
	snprintf(id, sizeof(id), "%s", e->m.id);
	if (sg_machine_kill(e, t->call, err) < 0)
		return -1;
	sg_session_default_clear(t->s, id);
	*result = json_pack("{s:s, s:s}", "machine", m, "status", "removed");
	return 0;
}

static int op_help(struct sg_tool_ctx *t, json_t *p, json_t **result, struct sg_err *err);

static const struct env_op core_ops[] = {
	{ "help", "the operations and help topics", NULL, NULL, op_help },
	{ "status", "the default machine, your machines and their shells", NULL, NULL, op_status },
	{ "machine_list", "your machines (and shared ones): name, backend, status, purpose, shells, uptime",
	  NULL, "{\"action\":\"machine_list\"}", op_machine_list },
	{ "default_set", "make a machine the session's default, or a shell its machine's default shell",
	  "exactly one of machine, shell_id", "{\"action\":\"default_set\",\"params\":{\"machine\":\"dev\"}}",
	  op_default_set },
	{ "shell_new", "open another persistent shell (it does not become the default)",
	  "machine (optional), purpose (optional)",
	  "{\"action\":\"shell_new\",\"params\":{\"purpose\":\"server\"}}", op_shell_new },
	{ "shell_remove", "kill a shell, what it runs and its background jobs",
	  "shell_id (required)", "{\"action\":\"shell_remove\",\"params\":{\"shell_id\":\"sh_0123456789ab\"}}",
	  op_shell_remove },
	{ "shell_list", "your shells: id, machine, purpose, status, last command, bash_pid",
	  "machine (optional)", "{\"action\":\"shell_list\"}", op_shell_list },
	{ "shell_interrupt", "stop the command a shell runs (its process groups); the shell stays",
	  "shell_id or machine (its default shell)",
	  "{\"action\":\"shell_interrupt\",\"params\":{\"shell_id\":\"sh_0123456789ab\"}}", op_shell_interrupt },
	{ "machine_create", "a persistent machine: kept after the session, reachable only with your credential",
	  "name (required), backend, template, purpose, options (an object, or the backend's own parameters given beside these: see <backend>_help)",
	  "{\"action\":\"machine_create\",\"params\":{\"name\":\"dev\"}}", op_machine_create },
	{ "machine_remove", "destroy a machine (persistent or not) and its shells", "machine (required)",
	  "{\"action\":\"machine_remove\",\"params\":{\"machine\":\"dev\"}}", op_machine_remove },
};

static const size_t n_core_ops = sizeof(core_ops) / sizeof(core_ops[0]);

/* ---- discovery ---------------------------------------------------------------------------- */

/* The action `name` of a loaded plugin, or NULL. */
static const struct sg_action *plugin_action(const char *name, struct sg_plugin **owner)
{
	for (struct sg_plugin *pl = sg_plugin_first(); pl; pl = pl->next) {
		const struct sg_backend *b = pl->b;

		for (size_t i = 0; b->actions && i < b->n_actions; i++) {
			if (b->actions[i].name && !strcmp(b->actions[i].name, name)) {
				*owner = pl;
				return &b->actions[i];
			}
		}
	}
	return NULL;
}

static json_t *op_json(const struct env_op *op)
{
	json_t *o = json_pack("{s:s, s:s}", "action", op->name, "description", op->description);

	if (op->params)
		json_object_set_new(o, "params", json_string(op->params));
	if (op->example)
		json_object_set_new(o, "example", json_string(op->example));
	return o;
}

static int op_help(struct sg_tool_ctx *t, json_t *p, json_t **result, struct sg_err *err)
{
	json_t *ops = json_array(), *more = json_object();

	(void)t;
	(void)p;
	(void)err;
	/* Backends load on a startup thread: an early help would miss their
	 * topics (and read the plugin list while it grows). */
	sg_machine_wait_ready();
	for (size_t i = 0; i < n_core_ops; i++) {
		const char *n = core_ops[i].name;

		if (strcmp(n, "help") && strcmp(n, "status"))
			json_array_append_new(ops, op_json(&core_ops[i]));
	}
	for (struct sg_plugin *pl = sg_plugin_first(); pl; pl = pl->next) {
		char topic[80];

		snprintf(topic, sizeof(topic), "%s_help", pl->b->name);
		json_object_set_new(more, topic, json_string_nocheck(pl->b->summary ? pl->b->summary : pl->b->name));
	}
	*result = json_pack("{s:[{s:s, s:s}, {s:s, s:s}], s:o, s:o, s:s}", "default_actions", "action", "help",
			    "description", "this list", "action", "status", "description",
			    "the default machine, your machines and their shells",
			    "operations", ops, "more_help", more, "note",
			    "Run commands with sandbox_shell_exec (a persistent bash per shell: cwd and exports stay), "
			    "follow long ones with sandbox_shell_read; edit files with sandbox_file_read/write/patch/search. "
			    "machine takes a sandbox_id from create_sandbox or a persistent machine's name; without it the "
			    "session's default machine is used (created on first use). <backend>_help lists a backend's own actions.");
	return 0;
}

/* The <backend>_help topic: the plugin's own action table and help text,
 * plus the core's actions for that backend. */
static int backend_help(struct sg_plugin *pl, json_t **result)
{
	const struct sg_backend *b = pl->b;
	json_t *ops = json_array();

	for (size_t i = 0; b->actions && i < b->n_actions; i++) {
		const struct sg_action *a = &b->actions[i];
		json_t *o = json_pack("{s:s, s:s, s:b}", "action", a->name, "description",
				      a->summary ? a->summary : "", "needs_machine", a->needs_machine);
		json_t *schema = a->params_schema ? json_loads(a->params_schema, 0, NULL) : NULL;

		json_object_set_new(o, "params", schema ? schema : json_object());
		if (a->example)
			json_object_set_new(o, "example", json_string(a->example));
		json_array_append_new(ops, o);
	}
	json_array_append_new(ops, json_pack("{s:s, s:s, s:s++}", "action", "machine_create", "description",
		"a persistent machine on this backend (kept after the session; yours only)",
		"example", "{\"action\":\"machine_create\",\"params\":{\"name\":\"dev\",\"backend\":\"", b->name,
		"\"}}"));
	*result = json_pack("{s:s, s:s, s:s, s:o}", "backend", b->name, "summary", b->summary ? b->summary : "",
			    "help", b->help ? b->help : "", "operations", ops);
	return 0;
}

/* The params of an action against its declared schema: every required
 * property given, and no unknown one where the schema says so (a typo
 * would otherwise be silently ignored). */
static int check_params(const struct sg_plugin *pl, const struct sg_action *a, json_t *p,
			struct sg_err *err)
{
	json_t *schema = json_loads(a->params_schema, 0, NULL), *props, *v;
	const char *key;
	size_t i;
	int r = 0;

	props = json_object_get(schema, "properties");
	json_array_foreach(json_object_get(schema, "required"), i, v) {
		const char *k = json_string_value(v);

		if (k && !json_object_get(p, k)) {
			r = sg_errf(err, SG_E_INVAL, "%s needs params.%s: see sandbox_env action=%s_help for its params",
				    a->name, k, pl->b->name);
			goto out;
		}
	}
	if (!json_is_false(json_object_get(schema, "additionalProperties")))
		goto out;
	json_object_foreach(p, key, v) {
		if (!json_object_get(props, key)) {
			char *valid = NULL;
			const char *k;
			json_t *pv;

			json_object_foreach(props, k, pv) {
				char *prev = valid;

				valid = prev ? sg_xasprintf("%s, %s", prev, k) : sg_xstrdup(k);
				free(prev);
			}
			r = sg_errf(err, SG_E_INVAL, "%s has no parameter '%s': valid ones are %s", a->name, key,
				    valid ? valid : "(none)");
			free(valid);
			goto out;
		}
	}
out:
	json_decref(schema);
	return r;
}

static int run_plugin_action(struct sg_tool_ctx *t, struct sg_plugin *pl, const struct sg_action *a,
			     json_t *p, json_t **result, struct sg_err *err)
{
	struct sg_entry *e = NULL;
	bool created = false;
	int r;

	if (check_params(pl, a, p, err) < 0)
		return -1;
	if (a->needs_machine && env_machine(t, p, "machine", &e, &created, err) < 0)
		return -1;
	if (e && e->m.backend != pl->b) {
		sg_errf(err, SG_E_INVAL, "%s only works on %s machines; '%s' is on %s", a->name, pl->b->name,
			label(e), e->m.backend->name);
		sg_machine_put(e);
		return -1;
	}
	sg_err_clear(err);
	r = a->handler(pl->priv, e ? &e->m : NULL, p, t->call, result, err);
	if (r < 0 && err->code == SG_E_OK)
		sg_errf(err, SG_E_BACKEND, "%s failed", a->name);
	if (r == 0 && !json_is_object(*result)) {
		json_t *v = *result;

		*result = json_pack("{s:o}", "result", v ? v : json_null());
	}
	if (r == 0 && e)
		add_machine(*result, e, created);
	sg_machine_put(e);
	return r;
}


static char *valid_actions(void)
{
	struct sg_buf b = { 0 };

	for (size_t i = 0; i < n_core_ops; i++) {
		sg_buf_append(&b, i ? ", " : "", i ? 2 : 0);
		sg_buf_append(&b, core_ops[i].name, strlen(core_ops[i].name));
	}
	for (struct sg_plugin *pl = sg_plugin_first(); pl; pl = pl->next) {
		char *topic = sg_xasprintf(", %s_help", pl->b->name);

		sg_buf_append(&b, topic, strlen(topic));
		free(topic);
		for (size_t i = 0; pl->b->actions && i < pl->b->n_actions; i++) {
			sg_buf_append(&b, ", ", 2);
			sg_buf_append(&b, pl->b->actions[i].name, strlen(pl->b->actions[i].name));
		}
	}
	return b.data;
}

/* The action's parameters: those under `params` and those given flat next
 * to `action` (what the seed's agents send), merged; one given both ways is
 * an error.  A new object in *out. */
static int env_params(json_t *args, json_t **out, struct sg_err *err)
{
	json_t *p = json_object_get(args, "params"), *v;
	const char *k;

	*out = NULL;
	if (p && !json_is_object(p) && !json_is_null(p))
		return sg_errf(err, SG_E_INVAL, "argument 'params' must be an object, e.g. {\"shell_id\": \"sh_...\"}");
	*out = json_is_object(p) ? json_copy(p) : json_object();
	json_object_foreach(args, k, v) {
		if (!strcmp(k, "action") || !strcmp(k, "params"))
			continue;
		if (json_object_get(*out, k)) {
			json_decref(*out);
			*out = NULL;
			return sg_errf(err, SG_E_INVAL,
				       "parameter '%s' is given both flat and under params: give it once", k);
		}
		json_object_set(*out, k, v);
	}
	return 0;
}

static int tool_env(struct sg_tool_ctx *t, json_t *args, json_t **result, struct sg_err *err)
{
	const char *action;
	json_t *p = NULL, *empty = NULL;
	struct sg_plugin *pl = NULL;
	const struct sg_action *a;
	char *valid;
	size_t n;
	int r = -1;

	if (sg_arg_str(args, "action", true, &action, err) < 0)
		return -1;
	if (env_params(args, &empty, err) < 0)
		return -1;
	p = empty;
	for (size_t i = 0; i < n_core_ops; i++) {
		if (!strcmp(core_ops[i].name, action)) {
			r = core_ops[i].fn(t, p, result, err);
			goto out;
		}
	}
	/* Past the core: <backend>_help, plugin actions and the list of valid
	 * ones all need every backend loaded. */
	sg_machine_wait_ready();
	n = strlen(action);
	if (n > 5 && !strcmp(action + n - 5, "_help")) {
		char name[64];

		snprintf(name, sizeof(name), "%.*s", (int)(n - 5), action);
		if ((pl = sg_plugin_find(name)) != NULL) {
			r = backend_help(pl, result);
			goto out;
		}
	}
	a = plugin_action(action, &pl);
	if (a) {
		r = run_plugin_action(t, pl, a, p, result, err);
		goto out;
	}
	valid = valid_actions();
	sg_errf(err, SG_E_NOTFOUND, "Unknown action: %.64s. Valid actions: %s. Call action=help for what they do.",
		action, valid ? valid : "help, status");
	free(valid);
out:
	json_decref(empty);
	return r;
}

static int tool_audit_query(struct sg_tool_ctx *t, json_t *args, json_t **result, struct sg_err *err)
{
	return sg_audit_query(t->s, args, result, err);
}

/* ---- the table ------------------------------------------------------------------------- */

#define MACHINE_PROP \
	"\"machine\": {\"type\": \"string\", \"description\": \"Machine: a sandbox_id from create_sandbox or a persistent machine's name; omitted uses the session's default machine (created on first use)\"}"

/* Defaults and limits the configuration sets ([shell], [files]), shown in
 * the schemas as they apply. */
static void prop_set(json_t *schema, const char *prop, const char *key, json_int_t v)
{
	json_t *p = json_object_get(json_object_get(schema, "properties"), prop);

	if (json_is_object(p))
		json_object_set_new(p, key, json_integer(v));
}

static void exec_schema(json_t *schema)
{
	prop_set(schema, "max_output", "default", (json_int_t)default_max_output());
	prop_set(schema, "timeout", "default", sg_config_int("shell", "timeout", 30));
}

static void read_schema(json_t *schema)
{
	prop_set(schema, "limit", "default", files_limit("default_read_limit", 500));
	prop_set(schema, "limit", "maximum", files_limit("max_read_limit", 2000));
}

static void search_schema(json_t *schema)
{
	prop_set(schema, "limit", "default", files_limit("default_search_limit", 50));
}

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
	  "\"timeout\": {\"type\": \"integer\", \"minimum\": 0, \"default\": 30, \"description\": \"Seconds to wait when wait=true; the command is not killed when it passes\"},"
	  "\"max_output\": {\"type\": \"integer\", \"minimum\": 1, \"default\": 50000, \"description\": \"Bytes of output returned; more keeps the first tenth and the end\"}"
	  "}, \"required\": [\"command\"], \"additionalProperties\": false}",
	  tool_shell_exec, exec_schema },
	{ "sandbox_shell_read",
	  "Read a shell's output that is new since the last exec or read, without blocking; status is idle, running, "
	  "completed (with exit_code) or terminated. Give shell_id, or machine for its default shell.",
	  "{\"type\": \"object\", \"properties\": {"
	  "\"shell_id\": {\"type\": \"string\", \"description\": \"Shell to read\"},"
	  MACHINE_PROP ","
	  "\"max_output\": {\"type\": \"integer\", \"minimum\": 1, \"description\": \"Bytes of output returned (default: the exec's max_output)\"}"
	  "}, \"additionalProperties\": false}",
	  tool_shell_read },
	{ "sandbox_file_read",
	  "Read a text file with line numbers (\"N|line\"), a page at a time: offset (1-based) and limit lines; works on "
	  "files of any size. Binary files and images are reported, not dumped. Relative paths are under the machine's workspace.",
	  "{\"type\": \"object\", \"properties\": {"
	  "\"path\": {\"type\": \"string\", \"description\": \"File path\"},"
	  MACHINE_PROP ","
	  "\"offset\": {\"type\": \"integer\", \"minimum\": 1, \"default\": 1, \"description\": \"First line (1-based)\"},"
	  "\"limit\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 2000, \"default\": 500, \"description\": \"Lines to read (at most [files] max_read_limit)\"}"
	  "}, \"required\": [\"path\"], \"additionalProperties\": false}",
	  tool_file_read, read_schema },
	{ "sandbox_file_write",
	  "Write a file atomically (a temporary name, then rename), creating parent directories; an existing file keeps "
	  "its mode and owner. .json, .yaml/.yml, .toml and .py content is checked first and an invalid one is not "
	  "written (the error gives line and column).",
	  "{\"type\": \"object\", \"properties\": {"
	  "\"path\": {\"type\": \"string\", \"description\": \"File path\"},"
	  "\"content\": {\"type\": \"string\", \"description\": \"The whole new content\"},"
	  MACHINE_PROP
	  "}, \"required\": [\"path\", \"content\"], \"additionalProperties\": false}",
	  tool_file_write },
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
	  tool_file_patch },
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
	  tool_file_search, search_schema },
	{ "sandbox_env",
	  "Environment management. action=help lists the operations (machines, shells) and one help topic per backend "
	  "(<backend>_help, with its own actions); action=status shows the default machine, your machines and shells.",
	  "{\"type\": \"object\", \"properties\": {"
	  "\"action\": {\"type\": \"string\", \"description\": \"help, status, or an action that help lists\"},"
	  "\"params\": {\"type\": \"object\", \"description\": \"The action's parameters; they may also be given flat, next to action\"}"
	  "}, \"required\": [\"action\"], \"additionalProperties\": true}",
	  tool_env },
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
