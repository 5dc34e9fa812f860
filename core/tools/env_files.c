/*
 * sandbox_file_read, _write, _patch and _search (core/tools/env.h): paged
 * reads, checked writes, exact or fuzzy replacements and unified diffs
 * applied by sandgate (nothing written unless every hunk applies).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/conf.h"
#include "core/base/err.h"
#include "core/registry/machine.h"
#include "core/tools/cut.h"
#include "core/tools/env.h"
#include "core/tools/fileops.h"
#include "core/tools/patch.h"

#define DIFF_LINES_MAX 400

/* ---- files ------------------------------------------------------------------------ */

/* A text file larger than the file cap is reported, not shown. */
static void too_large(json_t *r, const char *path)
{
	json_int_t size = json_integer_value(json_object_get(r, "file_size"));
	const char *status = json_string_value(json_object_get(r, "status"));

	if (!status || strcmp(status, "ok") || size <= (json_int_t)sg_env_file_cap())
		return;
	json_object_clear(r);
	json_object_set_new(r, "status", json_string("too_large"));
	json_object_set_new(r, "path", json_string(path));
	json_object_set_new(r, "file_size", json_integer(size));
	json_object_set_new(r, "max_file_size", json_integer((json_int_t)sg_env_file_cap()));
	json_object_set_new(r, "hint", json_string(
		"larger than [files] max_file_size: read parts with a command (head, tail, sed -n), or raise the limit"));
}

int sg_tool_file_read(struct sg_tool_ctx *t, json_t *args, json_t **result, struct sg_err *err)
{
	const char *path;
	unsigned offset, limit;
	struct sg_entry *e = NULL;
	char *full = NULL;
	bool created;
	int ret = -1;

	if (sg_arg_str(args, "path", true, &path, err) < 0 ||
	    sg_arg_uint(args, "offset", 1, 0, 2000000000u, &offset, err) < 0 ||
	    sg_arg_uint(args, "limit", sg_env_files_limit("default_read_limit", 500), 1, 1000000, &limit, err) < 0)
		return -1;
	if (!*path)
		return sg_errf(err, SG_E_INVAL, "argument 'path' is empty: pass a file path such as /workspace/main.py");
	/* Like the reference: offset counts from 1, limit is capped. */
	if (offset < 1)
		offset = 1;
	if (limit > sg_env_files_limit("max_read_limit", 2000))
		limit = sg_env_files_limit("max_read_limit", 2000);
	if (sg_env_machine(t, args, "machine", &e, &created, err) < 0)
		return -1;
	full = sg_fileops_path(e, path, t->call, err);
	if (!full || sg_fileops_read(e, full, offset, limit, t->call, result, err) < 0)
		goto out;
	too_large(*result, full);
	sg_env_add_machine(*result, e, created);
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

	if (len > sg_env_file_cap())
		return sg_errf(err, SG_E_TOOBIG, "the content is %zu bytes, more than %s (%zu)", len,
			       sg_env_file_cap_key(), sg_env_file_cap());
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

int sg_tool_file_write(struct sg_tool_ctx *t, json_t *args, json_t **result, struct sg_err *err)
{
	const char *path, *content;
	struct sg_entry *e = NULL;
	char *full = NULL;
	json_t *r = NULL;
	size_t len;
	bool created;
	int ret = -1;

	if (sg_arg_str(args, "path", true, &path, err) < 0 ||
	    sg_tool_text_arg(t, args, "content", true, &content, &len, err) < 0)
		return -1;
	if (!*path)
		return sg_errf(err, SG_E_INVAL, "argument 'path' is empty: pass a file path such as /workspace/main.py");
	if (sg_env_machine(t, args, "machine", &e, &created, err) < 0)
		return -1;
	full = sg_fileops_path(e, path, t->call, err);
	if (!full)
		goto out;
	r = json_pack("{s:s, s:s}", "status", "ok", "path", full);
	if (write_checked(t, e, full, content, len, r, err) < 0)
		goto out;
	sg_fileops_advise(r, full, NULL);
	sg_env_add_machine(r, e, created);
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
	if (sg_m_file_read(e, full, sg_env_file_cap(), t->call, buf, err) < 0)
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
		/* prefixes go on in reverse: the path, then ": " before the message */
		sg_err_prefix(err, ": ");
		sg_err_prefix(err, full);
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

int sg_tool_file_patch(struct sg_tool_ctx *t, json_t *args, json_t **result, struct sg_err *err)
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
	if (sg_env_machine(t, args, "machine", &e, &created, err) < 0)
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
	sg_env_add_machine(r, e, created);
	*result = r;
	r = NULL;
	ret = 0;
out:
	json_decref(r);
	free(full);
	sg_machine_put(e);
	return ret;
}

/* Results past the result's budget (one at least) are left for the next
 * call: cut.results names the entries kept and the call from there, as it
 * does when the page (limit) ended before the matches did. */
static void search_cut(json_t *r, json_t *args, unsigned offset)
{
	json_t *res = json_object_get(r, "results"), *next, *v;
	size_t budget = sg_cut_budget(), used = 0, k = 0;
	bool more = json_is_true(json_object_get(r, "truncated"));
	const char *key;
	void *tmp;

	if (json_is_array(res)) {
		for (; k < json_array_size(res); k++) {
			size_t sz = json_dumpb(json_array_get(res, k), NULL, 0, JSON_COMPACT) + 1;

			if (k && used + sz > budget)
				break;
			used += sz;
		}
		more |= k < json_array_size(res);
		while (json_array_size(res) > k)
			json_array_remove(res, k);
	} else if (json_is_object(res)) {
		json_object_foreach_safe(res, tmp, key, v) {
			size_t sz = strlen(key) + json_dumpb(v, NULL, 0, JSON_COMPACT) + 4;

			if (k && used + sz > budget) {
				json_object_del(res, key);
				more = true;
				continue;
			}
			used += sz;
			k++;
		}
	}
	if (!more)
		return;
	next = json_deep_copy(args);
	json_object_set_new(next, "offset", json_integer((json_int_t)(offset + k)));
	sg_cut_note(r, "results", json_pack("{s:[I, I], s:o}", "kept_entries", (json_int_t)offset,
					    (json_int_t)(offset + k), "rest",
					    sg_cut_call("sandbox_file_search", next)));
}

int sg_tool_file_search(struct sg_tool_ctx *t, json_t *args, json_t **result, struct sg_err *err)
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
	    sg_arg_uint(args, "limit", sg_env_files_limit("default_search_limit", 50), 1, 10000, &q.limit, err) < 0 ||
	    sg_arg_uint(args, "offset", 0, 0, 1000000, &q.offset, err) < 0 ||
	    sg_arg_enum(args, "output_mode", "content", "content|files_only|count", &q.output_mode, err) < 0 ||
	    sg_arg_uint(args, "context", 0, 0, 50, &q.context, err) < 0)
		return -1;
	if (!*q.pattern)
		return sg_errf(err, SG_E_INVAL, "argument 'pattern' is empty: pass a regular expression (or a file name with search_type \"files\")");
	if (q.glob && !*q.glob)
		q.glob = NULL;
	if (sg_env_machine(t, args, "machine", &e, &created, err) < 0)
		return -1;
	full = sg_fileops_path(e, path && *path && strcmp(path, ".") ? path : NULL, t->call, err);
	if (!full)
		goto out;
	q.path = full;
	if (sg_fileops_search(e, &q, t->call, result, err) < 0)
		goto out;
	search_cut(*result, args, q.offset);
	json_object_set_new(*result, "path", json_string(full));
	sg_env_add_machine(*result, e, created);
	ret = 0;
out:
	free(full);
	sg_machine_put(e);
	return ret;
}

