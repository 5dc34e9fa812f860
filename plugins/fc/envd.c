/*
 * envd files: the REST file API (ref. 4: GET and multipart POST /files) and
 * the Connect unary filesystem RPCs (ref. 5.5: ListDir, Stat, Remove,
 * Move), plus the unary-call helper process.c and stream.c use.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/fc/fc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/fc/connect.h"
#include "plugins/fc/http.h"

#define FC_MODE_NEW_FILE 0644 /* what envd gives a new file (umask 022) */

char *fc_data_url(const struct fc_machine *fm, int port, const char *path)
{
	char *u = NULL;
	int r;

	/* ref. 3.2: one gateway URL routed by headers, or the per-sandbox host. */
	if (fm->ctx->sandbox_url)
		r = asprintf(&u, "%s%s", fm->ctx->sandbox_url, path);
	else
		r = asprintf(&u, "https://%d-%s.%s%s", port, fm->id, fm->domain, path);
	return r < 0 ? NULL : u;
}

/* ref. 5.1: a Connect code, where present, says more than the status. */
static int fc_connect_code(const char *code, int def)
{
	static const struct { const char *name; int code; } map[] = {
		{ "not_found", SG_E_NOTFOUND }, { "invalid_argument", SG_E_INVAL },
		{ "already_exists", SG_E_EXISTS }, { "permission_denied", SG_E_PERM },
		{ "unauthenticated", SG_E_PERM }, { "deadline_exceeded", SG_E_TIMEOUT },
		{ "unavailable", SG_E_UNAVAILABLE }, { "resource_exhausted", SG_E_BUSY },
		{ "canceled", SG_E_CANCELLED }, { "failed_precondition", SG_E_INVAL },
		{ "unimplemented", SG_E_NOTSUP },
	};

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(code, map[i].name) == 0)
			return map[i].code;
	return def;
}

static void fc_resp_code(const struct fc_resp *rp, char *code, size_t size)
{
	json_t *j = rp->body.len && rp->body.len < FC_MAX_ERROR_BODY
			    ? json_loadb(rp->body.data, rp->body.len, 0, NULL) : NULL;
	const char *c = json_string_value(json_object_get(j, "code"));

	snprintf(code, size, "%s", c ? c : "");
	json_decref(j);
}

int fc_envd_unary(struct fc_machine *fm, const char *method, const json_t *body,
		  bool idempotent, struct sg_call *call, const char *what,
		  json_t **out, char *code, size_t code_size, struct sg_err *err)
{
	struct fc_ctx *ctx = fm->ctx;
	struct fc_req rq = { .what = what, .method = "POST", .idempotent = idempotent,
			     .timeout_ms = ctx->request_timeout_s * 1000u, .call = call,
			     .abort_fd = -1, .gone_id = fm->id, .secret = fm->token };
	struct fc_resp rp = { 0 };
	char path[96], ccode[48] = "", *text = json_dumps(body, JSON_COMPACT);
	int ret = -1;

	*out = NULL;
	snprintf(path, sizeof(path), "/%s", method);
	rq.url = fc_data_url(fm, FC_ENVD_PORT, path);
	rq.headers = fc_envd_headers(fm, FC_ENVD_PORT, "application/json", err);
	if (!text || !rq.url || !rq.headers) {
		if (!text || !rq.url)
			ctx->host->errf(err, SG_E_NOMEM, "fc: out of memory");
		goto out;
	}
	if (fc_hdr_add(&rq.headers, "Connect-Protocol-Version: 1") < 0) {
		ctx->host->errf(err, SG_E_NOMEM, "fc: out of memory");
		goto out;
	}
	rq.body = text;
	rq.body_len = strlen(text);
	if (fc_http_request(ctx, &rq, &rp, err) < 0)
		goto out;
	if (rp.status != 200) {
		fc_resp_code(&rp, ccode, sizeof(ccode));
		fc_http_fail(ctx, err, what, &rp, fm->token);
		if (ccode[0] && err)
			err->code = fc_connect_code(ccode, err->code);
		goto out;
	}
	*out = rp.body.len ? json_loadb(rp.body.data, rp.body.len, 0, NULL) : json_object();
	if (!json_is_object(*out)) {
		json_decref(*out);
		*out = NULL;
		ctx->host->errf(err, SG_E_PROTO, "fc: %s: the answer is not a JSON object", what);
		goto out;
	}
	ret = 0;
out:
	if (code)
		snprintf(code, code_size, "%s", ccode);
	free(text);
	free((char *)rq.url); /* ours: made above */
	curl_slist_free_all(rq.headers);
	fc_resp_free(ctx, &rp);
	return ret;
}

/* ---- EntryInfo (ref. 5.5) ---------------------------------------------------------- */

static const char *const fc_ftype_names[] = { "UNSPECIFIED", "FILE", "DIRECTORY", "SYMLINK" };

/* ref. 5.5: a directory is "FILE_TYPE_DIRECTORY", 2 or "directory". */
static int fc_entry_type(const json_t *e)
{
	const json_t *t = json_object_get(e, "type");
	const char *s = json_string_value(t);

	if (s && (!strcmp(s, "directory") || !strcmp(s, "dir")))
		return SG_FT_DIR;
	if (s && !strcmp(s, "file"))
		return SG_FT_FILE;
	switch (fc_json_enum(t, "FILE_TYPE_", fc_ftype_names, 4)) {
	case 1: return SG_FT_FILE;
	case 2: return SG_FT_DIR;
	case 3: return SG_FT_SYMLINK;
	default: return SG_FT_OTHER;
	}
}

static const char *fc_type_word(int t)
{
	static const char *const w[] = { "file", "dir", "symlink", "other" };

	return t >= 0 && t <= SG_FT_OTHER ? w[t] : "other";
}

static void fc_entry_stat(const json_t *e, struct sg_stat *st)
{
	memset(st, 0, sizeof(*st));
	st->type = fc_entry_type(e);
	st->size = (uint64_t)fc_json_int64(json_object_get(e, "size"), 0);
	st->mode = (uint32_t)fc_json_int64(json_object_get(e, "mode"), 0) & 07777;
	st->mtime = fc_rfc3339(json_string_value(json_object_get(e, "modifiedTime")));
}

static json_t *fc_entry_json(const json_t *e)
{
	struct sg_stat st;
	const char *name = json_string_value(json_object_get(e, "name"));
	const char *path = json_string_value(json_object_get(e, "path"));
	json_t *o;

	fc_entry_stat(e, &st);
	o = json_pack("{s:s, s:s, s:s, s:I, s:i, s:I}", "name", name ? name : "", "path",
		      path ? path : "", "type", fc_type_word(st.type), "size", (json_int_t)st.size,
		      "mode", (int)st.mode, "mtime", (json_int_t)st.mtime);
	if (o && st.type == SG_FT_SYMLINK && json_is_string(json_object_get(e, "symlinkTarget")))
		json_object_set(o, "target", json_object_get(e, "symlinkTarget"));
	return o;
}

/* ---- read --------------------------------------------------------------------------------- */

static char *fc_files_url(struct fc_machine *fm, const char *path)
{
	char *esc = fc_url_escape(path), *q = NULL, *u;
	int r;

	if (!esc)
		return NULL;
	if (fm->ctx->envd_user)
		r = asprintf(&q, "/files?path=%s&username=%s", esc, fm->ctx->envd_user);
	else
		r = asprintf(&q, "/files?path=%s", esc);
	free(esc);
	if (r < 0)
		return NULL;
	u = fc_data_url(fm, FC_ENVD_PORT, q);
	free(q);
	return u;
}

int fc_file_read(struct sg_machine *m, const char *path, size_t max, struct sg_call *call,
		 struct sg_buf *out, struct sg_err *err)
{
	struct fc_machine *fm = fc_machine_of(m, err);
	struct fc_req rq = { .what = "read file", .method = "GET", .idempotent = true,
			     .call = call, .abort_fd = -1, .max_body = max ? max : SIZE_MAX };
	struct fc_resp rp = { 0 };
	struct fc_ctx *ctx;
	int ret = -1;

	if (!fm)
		return -1;
	ctx = fm->ctx;
	rq.timeout_ms = ctx->request_timeout_s * 1000u;
	rq.gone_id = fm->id;
	rq.secret = fm->token;
	rq.url = fc_files_url(fm, path);
	rq.headers = fc_envd_headers(fm, FC_ENVD_PORT, NULL, err);
	if (!rq.url || !rq.headers) {
		if (!rq.url)
			ctx->host->errf(err, SG_E_NOMEM, "fc: out of memory");
		goto out;
	}
	if (fc_http_request(ctx, &rq, &rp, err) < 0)
		goto out;
	if (rp.status == 200 && rp.capped) {
		ctx->host->errf(err, SG_E_TOOBIG, "fc: read_file: '%s' is larger than %zu bytes", path,
				max);
		goto out;
	}
	if (rp.status == 404) {
		ctx->host->errf(err, SG_E_NOTFOUND, "fc: read_file: no such file '%s' in sandbox %s",
				path, fm->id);
		goto out;
	}
	if (rp.status != 200) {
		fc_http_fail(ctx, err, "read file", &rp, fm->token); /* 400: a directory */
		goto out;
	}
	/* ownership of the bytes moves to the caller's buffer */
	if (rp.body.len && ctx->host->buf_append(out, rp.body.data, rp.body.len) < 0) {
		ctx->host->errf(err, SG_E_NOMEM, "fc: out of memory");
		goto out;
	}
	ret = 0;
out:
	free((char *)rq.url); /* ours: made above */
	curl_slist_free_all(rq.headers);
	fc_resp_free(ctx, &rp);
	return ret;
}

/* ---- stat, list, remove ------------------------------------------------------------------- */

/* Stat of path: 0 and *st, or -1 with err (SG_E_NOTFOUND when missing). */
static int fc_stat(struct fc_machine *fm, const char *path, struct sg_call *call,
		   struct sg_stat *st, struct sg_err *err)
{
	json_t *req = json_pack("{s:s}", "path", path), *out = NULL;
	int r;

	r = fc_envd_unary(fm, "filesystem.Filesystem/Stat", req, true, call, "stat", &out, NULL,
			  0, err);
	json_decref(req);
	if (r == 0)
		fc_entry_stat(json_object_get(out, "entry"), st);
	json_decref(out);
	return r;
}

int fc_file_stat(struct sg_machine *m, const char *path, struct sg_call *call,
		 struct sg_stat *st, struct sg_err *err)
{
	struct fc_machine *fm = fc_machine_of(m, err);

	return fm ? fc_stat(fm, path, call, st, err) : -1;
}

int fc_file_list(struct sg_machine *m, const char *path, struct sg_call *call,
		 json_t **entries, struct sg_err *err)
{
	struct fc_machine *fm = fc_machine_of(m, err);
	json_t *req, *out = NULL, *arr, *e;
	size_t i;

	if (!fm)
		return -1;
	/* ref. 7.6: depth 1, as E2B always sends */
	req = json_pack("{s:s, s:i}", "path", path, "depth", 1);
	if (fc_envd_unary(fm, "filesystem.Filesystem/ListDir", req, true, call, "list files",
			  &out, NULL, 0, err) < 0) {
		json_decref(req);
		return -1;
	}
	json_decref(req);
	arr = json_array();
	json_array_foreach(json_object_get(out, "entries"), i, e)
		json_array_append_new(arr, fc_entry_json(e));
	json_decref(out);
	*entries = arr;
	return 0;
}

static char *fc_parent(const char *path)
{
	const char *slash = strrchr(path, '/');

	if (!slash || slash == path)
		return strdup("/");
	return strndup(path, (size_t)(slash - path));
}

int fc_file_remove(struct sg_machine *m, const char *path, bool recursive,
		   struct sg_call *call, struct sg_err *err)
{
	struct fc_machine *fm = fc_machine_of(m, err);
	struct sg_stat st;
	json_t *req, *out = NULL;
	int r;

	if (!fm)
		return -1;
	/* envd's Remove is recursive: refuse a non-empty directory ourselves. */
	if (!recursive) {
		json_t *list = NULL;

		if (fc_stat(fm, path, call, &st, err) < 0)
			return -1;
		if (st.type == SG_FT_DIR) {
			if (fc_file_list(m, path, call, &list, err) < 0)
				return -1;
			r = json_array_size(list) > 0;
			json_decref(list);
			if (r)
				return fm->ctx->host->errf(err, SG_E_INVAL,
							   "fc: remove: directory '%s' is not empty (pass recursive)",
							   path);
		}
	}
	req = json_pack("{s:s}", "path", path);
	r = fc_envd_unary(fm, "filesystem.Filesystem/Remove", req, false, call, "remove", &out,
			  NULL, 0, err);
	json_decref(req);
	json_decref(out);
	return r;
}

/* ---- write ------------------------------------------------------------------------------ */

/* The filename of the multipart part: path with '"', CR, LF and '\\'
 * percent-encoded, so the header cannot be broken.  malloc'd, or NULL. */
static char *fc_part_filename(const char *path)
{
	char *out = malloc(3 * strlen(path) + 1), *o = out; /* caller frees */

	if (!out)
		return NULL;
	for (const char *p = path; *p; p++) {
		if (*p == '"' || *p == '\r' || *p == '\n' || *p == '\\')
			o += sprintf(o, "%%%02X", (unsigned char)*p);
		else
			*o++ = *p;
	}
	*o = '\0';
	return out;
}

/* ref. 4.2: multipart/form-data, one part named "file" whose filename is
 * the path, as E2B sends it; envd 0.5.2 on FC accepts nothing else.
 * Returns the malloc'd body (caller frees) and boundary[33], or NULL. */
static char *fc_multipart(const char *path, const void *data, size_t len, char *boundary,
			  size_t *out_len)
{
	char *fname = fc_part_filename(path), *head = NULL, tail[64], *body = NULL;
	int hl, tl;

	fc_random_hex(boundary, 16);
	if (!fname)
		return NULL;
	hl = asprintf(&head, "--sandgate%s\r\nContent-Disposition: form-data; name=\"file\"; "
			     "filename=\"%s\"\r\nContent-Type: application/octet-stream\r\n\r\n",
		      boundary, fname);
	free(fname);
	if (hl < 0)
		return NULL;
	tl = snprintf(tail, sizeof(tail), "\r\n--sandgate%s--\r\n", boundary);
	body = malloc((size_t)hl + len + (size_t)tl);
	if (body) {
		memcpy(body, head, (size_t)hl);
		if (len)
			memcpy(body + hl, data, len);
		memcpy(body + (size_t)hl + len, tail, (size_t)tl);
		*out_len = (size_t)hl + len + (size_t)tl;
	}
	free(head);
	return body;
}

/* POST /files once: never re-sent once the body went out. */
static int fc_upload(struct fc_machine *fm, const char *path, const void *data, size_t len,
		     struct sg_call *call, struct sg_err *err)
{
	struct fc_ctx *ctx = fm->ctx;
	struct fc_req rq = { .what = "write file", .method = "POST", .idempotent = false,
			     .call = call, .abort_fd = -1, .gone_id = fm->id, .secret = fm->token };
	struct fc_resp rp = { 0 };
	char boundary[40], ctype[80];
	size_t blen = 0;
	char *body = fc_multipart(path, data, len, boundary, &blen);
	int ret = -1;

	/* large files need longer than one request timeout: about 10 MB/s */
	rq.timeout_ms = (ctx->request_timeout_s + (unsigned)(len / (10u << 20))) * 1000u;
	snprintf(ctype, sizeof(ctype), "multipart/form-data; boundary=sandgate%s", boundary);
	rq.url = fc_files_url(fm, path);
	rq.headers = fc_envd_headers(fm, FC_ENVD_PORT, ctype, err);
	if (!body || !rq.url || !rq.headers) {
		if (!body || !rq.url)
			ctx->host->errf(err, SG_E_NOMEM, "fc: out of memory");
		goto out;
	}
	rq.body = body;
	rq.body_len = blen;
	if (fc_http_request(ctx, &rq, &rp, err) < 0)
		goto out;
	/* ref. 4.2: any 2xx; FC answers 201, E2B's spec 200 */
	if (rp.status < 200 || rp.status >= 300) {
		fc_http_fail(ctx, err, "write file", &rp, fm->token);
		goto out;
	}
	ret = 0;
out:
	free(body);
	free((char *)rq.url); /* ours: made above */
	curl_slist_free_all(rq.headers);
	fc_resp_free(ctx, &rp);
	return ret;
}

static int fc_move(struct fc_machine *fm, const char *from, const char *to,
		   struct sg_call *call, struct sg_err *err)
{
	json_t *req = json_pack("{s:s, s:s}", "source", from, "destination", to), *out = NULL;
	int r = fc_envd_unary(fm, "filesystem.Filesystem/Move", req, false, call, "write file (rename)",
			      &out, NULL, 0, err);

	json_decref(req);
	json_decref(out);
	return r;
}

/* Gives tmp the mode (and owner) the file must end with, through a command:
 * envd has no chmod RPC.  Only needed when that differs from a new file's. */
static int fc_fix_mode(struct sg_machine *m, const char *tmp, const char *dest, uint32_t mode,
		       struct sg_call *call, struct sg_err *err)
{
	struct sg_exec_result res = { 0 };
	char modestr[16];
	const char *argv[] = { "/bin/bash", "-c",
			       "if [ -e \"$2\" ]; then chown --reference=\"$2\" \"$3\" 2>/dev/null;"
			       " chmod --reference=\"$2\" \"$3\"; else chmod \"$1\" \"$3\"; fi",
			       "sandgate-chmod", modestr, dest, tmp, NULL };
	struct sg_exec_req req = { .argv = argv, .timeout_ms = 30000, .output_cap = 4096 };
	struct fc_machine *fm = m->handle;
	int r;

	snprintf(modestr, sizeof(modestr), "%o", mode & 07777);
	r = fc_exec(m, &req, call, &res, err);
	if (r == 0 && res.exit_code != 0)
		r = fm->ctx->host->errf(err, SG_E_BACKEND, "fc: write file: cannot set the mode of '%s': %.200s",
					dest, res.err.data ? res.err.data : "");
	fm->ctx->host->buf_release(&res.out);
	fm->ctx->host->buf_release(&res.err);
	return r;
}

/* Removes the temporary file of a write that failed; its own failure is not
 * the call's (the call already failed), so it is not reported. */
static void fc_remove_tmp(struct fc_machine *fm, const char *tmp)
{
	struct sg_err rerr;
	json_t *req = json_pack("{s:s}", "path", tmp), *o = NULL;

	fc_envd_unary(fm, "filesystem.Filesystem/Remove", req, false, NULL, "remove", &o, NULL, 0,
		      &rerr);
	json_decref(req);
	json_decref(o);
}

/* Atomic from sandgate's view: the bytes go to a temporary name beside the
 * file, which is then renamed over it (Move is a rename in one directory),
 * so a reader sees the old or the new content, never a torn one. */
int fc_file_write(struct sg_machine *m, const char *path, const void *data, size_t len,
		  const struct sg_write_opts *opts, struct sg_call *call, struct sg_err *err)
{
	struct fc_machine *fm = fc_machine_of(m, err);
	uint32_t want = opts && opts->mode ? opts->mode : FC_MODE_NEW_FILE;
	struct sg_stat st = { .type = -1 };
	struct sg_err serr;
	char *parent = NULL, *tmp = NULL, rnd[17];
	bool exists, fix;
	int ret = -1;

	if (!fm)
		return -1;
	exists = fc_stat(fm, path, call, &st, &serr) == 0;
	if (!exists && serr.code != SG_E_NOTFOUND) {
		if (err)
			*err = serr;
		return -1;
	}
	if (exists && st.type == SG_FT_DIR)
		return fm->ctx->host->errf(err, SG_E_INVAL, "fc: write_file: '%s' is a directory", path);
	parent = fc_parent(path);
	if (!parent)
		return fm->ctx->host->errf(err, SG_E_NOMEM, "fc: out of memory");
	if (opts && opts->no_mkdir && !exists) {
		struct sg_stat pst;

		if (fc_stat(fm, parent, call, &pst, err) < 0 || pst.type != SG_FT_DIR) {
			fm->ctx->host->errf(err, SG_E_NOTFOUND, "fc: write_file: directory '%s' does not exist",
					    parent);
			goto out;
		}
	}
	fc_random_hex(rnd, 8);
	if (asprintf(&tmp, "%s/.sandgate-%s.tmp", strcmp(parent, "/") ? parent : "", rnd) < 0) {
		tmp = NULL;
		fm->ctx->host->errf(err, SG_E_NOMEM, "fc: out of memory");
		goto out;
	}
	fix = exists ? st.mode != FC_MODE_NEW_FILE : want != FC_MODE_NEW_FILE;
	/* A failed upload may have left part of the bytes under tmp (envd
	 * answers 507 on a full disk after writing what fitted), so tmp goes
	 * whichever step failed. */
	if (fc_upload(fm, tmp, data, len, call, err) < 0 ||
	    (fix && fc_fix_mode(m, tmp, path, want, call, err) < 0) ||
	    fc_move(fm, tmp, path, call, err) < 0) {
		fc_remove_tmp(fm, tmp);
		goto out;
	}
	ret = 0;
out:
	free(parent);
	free(tmp);
	return ret;
}
