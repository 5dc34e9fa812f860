/*
 * Files: through the container's runner (capability "files": chunked,
 * atomic writes, see plugins/runner/rfiles.c) whenever it runs there; else
 * bytes move through the archive API (GET/PUT .../archive, tars built
 * and read with libarchive); everything that needs the container's own view
 * (rename, owner, mkdir) is a small fixed shell script run with exec, to
 * which paths are passed only as arguments ("$1"), never spliced in.  This
 * file: reading and writing, and what the file operations share (paths,
 * the scripts' runner; files_int.h).  Listing, stat and remove are in
 * files_meta.c.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/docker/docker.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "plugins/docker/files_int.h"
#include "plugins/docker/tar.h"

#define DOCKER_LINK_HOPS 8
#define DOCKER_TAR_SLACK (1024u * 1024u) /* tar headers and padding */

/* Go's os.FileMode bits in X-Docker-Container-Path-Stat. */
#define GO_MODE_DIR     (1u << 31)
#define GO_MODE_SYMLINK (1u << 27)
#define GO_MODE_TYPE    0x8F280000u /* dir|symlink|named pipe|socket|device|char|irregular */

/* ---- paths ---------------------------------------------------------------------- */

/* Makes path absolute (relative ones are under the workspace) and drops
 * trailing slashes, into out[DOCKER_PATH_MAX]. */
int docker_abs(struct docker_ctx *ctx, const struct sg_machine *m, const char *path,
	       char *out, struct sg_err *err)
{
	size_t n;
	int w;

	if (!path || !*path)
		return ctx->host->errf(err, SG_E_INVAL, "path is empty: give a file path");
	if (path[0] == '/')
		w = snprintf(out, DOCKER_PATH_MAX, "%s", path);
	else
		w = snprintf(out, DOCKER_PATH_MAX, "%s/%s",
			     m->workspace[0] ? m->workspace : DOCKER_WORKSPACE, path);
	if (w < 0 || w >= DOCKER_PATH_MAX)
		return ctx->host->errf(err, SG_E_INVAL, "path is longer than %d bytes: "
				       "%.64s...", DOCKER_PATH_MAX - 1, path);
	for (n = strlen(out); n > 1 && out[n - 1] == '/'; n--)
		out[n - 1] = '\0';
	return 0;
}

/* Splits abs into its directory (into dir[DOCKER_PATH_MAX]) and last name. */
static const char *docker_split(const char *abs, char *dir)
{
	const char *slash = strrchr(abs, '/');
	size_t n = (size_t)(slash - abs);

	if (n == 0)
		n = 1; /* "/name" lives in "/" */
	memcpy(dir, abs, n);
	dir[n] = '\0';
	return slash + 1;
}

/* Resolves a symlink target against the directory of the link. */
static int docker_link_join(const char *link_path, const char *target, char *out)
{
	char dir[DOCKER_PATH_MAX];
	int w;

	if (target[0] == '/')
		w = snprintf(out, DOCKER_PATH_MAX, "%s", target);
	else {
		docker_split(link_path, dir);
		w = snprintf(out, DOCKER_PATH_MAX, "%s/%s", strcmp(dir, "/") ? dir : "",
			     target);
	}
	return w < 0 || w >= DOCKER_PATH_MAX ? -1 : 0;
}

/* ---- scripts run with exec --------------------------------------------------------- */

/* Runs `sh -c script sg args...` in the machine, from "/", with the api
 * timeout; res is the caller's (zeroed, released by docker_res_free). */
int docker_script(struct docker_ctx *ctx, const struct sg_machine *m,
		  const char *script, const char *const *args, size_t cap,
		  struct sg_call *call, struct sg_exec_result *res,
		  struct sg_err *err)
{
	const char *argv[8] = { "/bin/sh", "-c", script, "sg" };
	struct docker_run r = { .argv = argv, .cwd = "/", .cap = cap, .group = true,
				.timeout_ms = ctx->api_timeout_s * 1000u };
	size_t i;

	for (i = 0; args[i] && i + 5 < sizeof(argv) / sizeof(argv[0]); i++)
		argv[4 + i] = args[i];
	argv[4 + i] = NULL;
	docker_run_for(m, &r);
	if (docker_run_machine(ctx, m, &r, NULL, call, res, err) < 0)
		return -1;
	if (res->timed_out)
		return ctx->host->errf(err, SG_E_TIMEOUT, "file operation in %s took "
				       "longer than %u s ([docker] api_timeout)", m->id,
				       ctx->api_timeout_s);
	return 0;
}

void docker_res_free(struct docker_ctx *ctx, struct sg_exec_result *res)
{
	ctx->host->buf_release(&res->out);
	ctx->host->buf_release(&res->err);
}

/* Words a script's unexpected failure from its stderr. */
int docker_sh_fail(struct docker_ctx *ctx, const struct sg_exec_result *res,
		   const char *what, const char *path, struct sg_err *err)
{
	char line[256];
	int code = SG_E_IO;

	docker_first_line(res->err.data ? res->err.data : "", res->err.len, line,
			  sizeof(line));
	if (strstr(line, "Permission denied") || strstr(line, "Operation not permitted") ||
	    strstr(line, "Read-only file system"))
		code = SG_E_PERM;
	return ctx->host->errf(err, code, "%s %s failed (exit %d)%s%s", what, path,
			       res->exit_code, *line ? ": " : "", line);
}

/* ---- stat through the archive API ---------------------------------------------------- */

static int docker_b64(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+' || c == '-')
		return 62;
	if (c == '/' || c == '_')
		return 63;
	return -1;
}

/* Decodes base64 (padding optional) into a malloc'd NUL-terminated string. */
static char *docker_unbase64(const char *in, size_t *len)
{
	size_t n = strlen(in), o = 0;
	char *out = malloc(n * 3 / 4 + 4); /* caller frees */
	unsigned acc = 0;
	int bits = 0, v;

	if (!out)
		return NULL;
	for (; *in && *in != '='; in++) {
		v = docker_b64((unsigned char)*in);
		if (v < 0) {
			free(out);
			return NULL;
		}
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (char)((acc >> bits) & 0xff);
		}
	}
	out[o] = '\0';
	*len = o;
	return out;
}

/* What HEAD .../archive says about a path (lstat: a link is a link). */
struct docker_pstat {
	uint32_t go_mode;
	uint64_t size;
	char link[DOCKER_PATH_MAX]; /* linkTarget, "" when none */
};

/* Asks whether the container itself exists, to tell SG_E_GONE apart from a
 * missing file after a 404. */
static int docker_gone_or(struct docker_ctx *ctx, const struct sg_machine *m,
			  int code, const char *msg, const char *path,
			  struct sg_err *err)
{
	char p[DOCKER_ID_MAX + 32];
	json_t *reply = NULL;
	long status = 0;
	struct sg_err e;

	snprintf(p, sizeof(p), "/containers/%s/json", m->id);
	if (docker_engine_json(ctx->engine, "GET", p, NULL, &status, &reply, &e) == 0 &&
	    status == 404) {
		json_decref(reply);
		return ctx->host->errf(err, SG_E_GONE, "container %s is gone (removed "
				       "outside sandgate): create a new machine", m->id);
	}
	json_decref(reply);
	return ctx->host->errf(err, code, "%s: %s", msg, path);
}

static int docker_parse_pstat(struct docker_ctx *ctx, const char *b64,
			      struct docker_pstat *ps, const char *path,
			      struct sg_err *err)
{
	size_t len;
	char *text = b64 ? docker_unbase64(b64, &len) : NULL; /* freed below */
	json_t *j = text ? json_loadb(text, len, 0, NULL) : NULL;
	const char *link;
	int rc = -1;

	if (!j) {
		ctx->host->errf(err, SG_E_PROTO, "docker gave no readable path stat for %s",
				path);
		goto out;
	}
	ps->go_mode = (uint32_t)json_integer_value(json_object_get(j, "mode"));
	ps->size = (uint64_t)json_integer_value(json_object_get(j, "size"));
	link = json_string_value(json_object_get(j, "linkTarget"));
	snprintf(ps->link, sizeof(ps->link), "%s", link ? link : "");
	rc = 0;
out:
	json_decref(j);
	free(text);
	return rc;
}

/* The engine words a path it cannot stat (a link loop, a file where a
 * directory should be) as a bare HTTP 500: ask the container's own tools,
 * whose error says why, and name the path with it. */
static int docker_head_cause(struct docker_ctx *ctx, const struct sg_machine *m,
			     const char *path, long status, struct sg_err *err)
{
	const char *args[] = { path, NULL };
	struct sg_exec_result res;
	struct sg_err e;
	const char *p, *why = NULL;
	char line[256];
	int code = SG_E_BACKEND;

	memset(&res, 0, sizeof(res));
	if (docker_script(ctx, m, "cat -- \"$1\" 2>&1 >/dev/null | head -n 1", args, 4096, NULL,
			  &res, &e) == 0 && res.out.len) {
		docker_first_line(res.out.data, res.out.len, line, sizeof(line));
		/* "cat: PATH: Cause": the cause after the last ": ". */
		for (p = line; (p = strstr(p, ": ")) != NULL; p += 2)
			why = p + 2;
	}
	if (why && strcasestr(why, "symbolic links"))
		code = SG_E_INVAL;
	else if (why && strcasestr(why, "permission denied"))
		code = SG_E_PERM;
	else if (why && strcasestr(why, "not a directory"))
		code = SG_E_INVAL; /* as the runner says it (rfiles.c) */
	else if (why && strcasestr(why, "no such file"))
		code = SG_E_NOTFOUND;
	if (why && *why) {
		char low[256];
		size_t i;

		for (i = 0; why[i] && i + 1 < sizeof(low); i++)
			low[i] = (char)tolower((unsigned char)why[i]);
		low[i] = '\0';
		ctx->host->errf(err, code, "%s: %s%s", path, low,
				strstr(low, "symbolic links") ? " (a symbolic link loop): fix or remove the link" :
				code != SG_E_PERM ? ": check each directory of the path" : "");
	} else {
		ctx->host->errf(err, SG_E_BACKEND, "docker stat %s: docker answered HTTP %ld",
				path, status);
	}
	docker_res_free(ctx, &res);
	return -1;
}

/* HEAD /containers/{id}/archive?path=.  Returns 0, 1 when there is no such
 * path, -1 on error. */
static int docker_head(struct docker_ctx *ctx, const struct sg_machine *m,
		       const char *path, struct docker_pstat *ps, struct sg_err *err)
{
	char *q = docker_engine_escape(path), url[DOCKER_PATH_MAX * 3 + DOCKER_ID_MAX + 64];
	struct docker_http rq = { .method = "HEAD", .path = url };
	struct docker_reply rp;
	int rc = -1;

	if (!q)
		return ctx->host->errf(err, SG_E_NOMEM, "docker: out of memory");
	snprintf(url, sizeof(url), "/containers/%s/archive?path=%s", m->id, q);
	free(q);
	if (docker_engine_call(ctx->engine, &rq, &rp, err) < 0)
		goto out;
	if (rp.status == 404) {
		rc = 1;
		goto out;
	}
	if (rp.status == 500) {
		docker_head_cause(ctx, m, path, rp.status, err);
		goto out;
	}
	if (rp.status != 200) {
		ctx->host->errf(err, rp.status == 403 ? SG_E_PERM : SG_E_BACKEND,
				"docker stat %s: docker answered HTTP %ld", path, rp.status);
		goto out;
	}
	rc = docker_parse_pstat(ctx, rp.path_stat, ps, path, err);
out:
	docker_reply_free(ctx->engine, &rp);
	return rc;
}

/* Follows symlinks from path (at most DOCKER_LINK_HOPS) into out; *ps is the
 * stat of the last one.  Returns 0, 1 when the final path does not exist
 * (out then names it), -1 on error. */
static int docker_follow(struct docker_ctx *ctx, const struct sg_machine *m,
			 const char *path, char *out, struct docker_pstat *ps,
			 struct sg_err *err)
{
	char next[DOCKER_PATH_MAX];
	int hop, rc;

	snprintf(out, DOCKER_PATH_MAX, "%s", path);
	for (hop = 0; hop <= DOCKER_LINK_HOPS; hop++) {
		rc = docker_head(ctx, m, out, ps, err);
		if (rc != 0 || !(ps->go_mode & GO_MODE_SYMLINK))
			return rc;
		if (!ps->link[0] || docker_link_join(out, ps->link, next) < 0)
			break;
		memcpy(out, next, DOCKER_PATH_MAX);
	}
	return ctx->host->errf(err, SG_E_INVAL, "%s: too many or broken symbolic links",
			       path);
}

/* ---- read ---------------------------------------------------------------------------- */

/* Fetches the archive of a regular file and unpacks its bytes into out. */
static int docker_get_file(struct docker_ctx *ctx, const struct sg_machine *m,
			   const char *path, size_t max, struct sg_buf *out,
			   struct sg_err *err)
{
	char *q = docker_engine_escape(path), url[DOCKER_PATH_MAX * 3 + DOCKER_ID_MAX + 64];
	struct docker_http rq = { .method = "GET", .path = url,
				  .max_body = max + DOCKER_TAR_SLACK };
	struct docker_tar_entry ent = { 0 };
	struct docker_reply rp;
	int rc = -1;

	if (!q)
		return ctx->host->errf(err, SG_E_NOMEM, "docker: out of memory");
	snprintf(url, sizeof(url), "/containers/%s/archive?path=%s", m->id, q);
	free(q);
	if (docker_engine_call(ctx->engine, &rq, &rp, err) < 0)
		goto out;
	if (rp.status == 404) {
		docker_gone_or(ctx, m, SG_E_NOTFOUND, "no such file", path, err);
		goto out;
	}
	if (rp.status != 200) {
		ctx->host->errf(err, SG_E_BACKEND, "docker read %s: docker answered "
				"HTTP %ld", path, rp.status);
		goto out;
	}
	if (rp.body_capped) {
		/* It grew between the stat and the read. */
		ctx->host->errf(err, SG_E_TOOBIG, "%s is more than the %zu bytes allowed",
				path, max);
		goto out;
	}
	if (docker_tar_unpack_file(ctx->host, rp.body.data, rp.body.len, max, path,
				   out, &ent, err) < 0)
		goto out;
	if (ent.kind != DOCKER_TAR_FILE) {
		ctx->host->errf(err, SG_E_INVAL, "%s changed while it was read: read it "
				"again", path);
		goto out;
	}
	rc = 0;
out:
	free(ent.link);
	docker_reply_free(ctx->engine, &rp);
	return rc;
}

/* Reads a whole regular file, binary safe, following symlinks.  max 0 (or
 * more than [docker] file_cap) means file_cap. */
int docker_file_read(struct sg_machine *m, const char *path, size_t max,
		     struct sg_call *call, struct sg_buf *out, struct sg_err *err)
{
	struct docker_ctx *ctx = docker_ctx_of(m, err);
	struct rnc_site *site = ctx ? docker_runner_site(m) : NULL;
	char abs[DOCKER_PATH_MAX], real[DOCKER_PATH_MAX];
	struct docker_pstat ps;
	int rc;

	if (!ctx)
		return -1;
	if (max == 0 || max > ctx->file_cap)
		max = ctx->file_cap;
	if (docker_abs(ctx, m, path, abs, err) < 0)
		return -1;
	if (site && (rc = rnc_file_read(site, NULL, abs, 0, max, true, call, out, err)) <= 0)
		return rc;
	rc = docker_follow(ctx, m, abs, real, &ps, err);
	if (rc < 0)
		return -1;
	if (rc > 0)
		return docker_gone_or(ctx, m, SG_E_NOTFOUND, "no such file", abs, err);
	if (ps.go_mode & GO_MODE_DIR)
		return ctx->host->errf(err, SG_E_INVAL, "%s is a directory: list it "
				       "instead of reading it", abs);
	if (ps.go_mode & GO_MODE_TYPE)
		return ctx->host->errf(err, SG_E_INVAL, "%s is not a regular file "
				       "(device, pipe or socket)", abs);
	if (ps.size > max)
		return ctx->host->errf(err, SG_E_TOOBIG, "%s is %llu bytes, more than the "
				       "%zu allowed: read a part of it with a command "
				       "(head, tail, sed -n) or raise [docker] file_cap",
				       abs, (unsigned long long)ps.size, max);
	return docker_get_file(ctx, m, real, max, out, err);
}

/* Through the runner only: the archive API moves whole files. */
int docker_file_read_at(struct sg_machine *m, const char *path, uint64_t offset, size_t len,
			struct sg_call *call, struct sg_buf *out, uint64_t *size, struct sg_err *err)
{
	struct docker_ctx *ctx = docker_ctx_of(m, err);
	struct rnc_site *site = ctx ? docker_runner_site(m) : NULL;
	char abs[DOCKER_PATH_MAX];
	int rc;

	if (!ctx || docker_abs(ctx, m, path, abs, err) < 0)
		return -1;
	if (len > ctx->file_cap)
		len = ctx->file_cap;
	if (site && (rc = rnc_file_read_at(site, NULL, abs, offset, len, call, out, size, err)) <= 0)
		return rc;
	return ctx->host->errf(err, SG_E_NOTSUP, "%s: no runner: the file is read whole", abs);
}

/* ---- write --------------------------------------------------------------------------- */

/* Moves the uploaded temp file $1 over $2, keeping an existing file's owner
 * and mode; removes $1 on any failure.  stat -c works with GNU and busybox. */
static const char docker_replace_sh[] =
	"t=$1 f=$2\n"
	"if [ -d \"$f\" ] && [ ! -L \"$f\" ]; then rm -f -- \"$t\"; exit 21; fi\n"
	"if [ -e \"$f\" ] && [ ! -L \"$f\" ]; then\n"
	"  s=$(stat -c '%u:%g %a' -- \"$f\") &&\n"
	"  chown -- \"${s% *}\" \"$t\" && chmod -- \"${s#* }\" \"$t\" ||\n"
	"    { rm -f -- \"$t\"; exit 22; }\n"
	"fi\n"
	"mv -f -- \"$t\" \"$f\" || { rm -f -- \"$t\"; exit 23; }\n";

static const char docker_mkdir_p_sh[] =
	"if [ -e \"$1\" ] && [ ! -d \"$1\" ]; then exit 20; fi\n"
	"exec mkdir -p -- \"$1\"\n";

/* A hidden name next to the target: ".sg-<random>". */
static int docker_temp_name(struct docker_ctx *ctx, char *out, size_t size,
			    struct sg_err *err)
{
	unsigned char rnd[8];
	size_t i;
	int w;

	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return ctx->host->errf(err, SG_E_IO, "docker: no random bytes for a "
				       "temporary name");
	/* ASCII only, whatever the target's name: the archive carries this
	 * name (docker_tar_pack_file), the rename script the real one. */
	w = snprintf(out, size, ".sg-");
	for (i = 0; i < sizeof(rnd) && w > 0 && (size_t)w + 3 < size; i++)
		w += snprintf(out + w, size - (size_t)w, "%02x", rnd[i]);
	return 0;
}

/* PUTs the tar (head, content, tail: never joined) into dir.  Returns 0, 1 when dir does not exist, -1 on error. */
static int docker_put(struct docker_ctx *ctx, const struct sg_machine *m,
		      const char *dir, const struct docker_piece tar[3], struct sg_err *err)
{
	char *q = docker_engine_escape(dir), url[DOCKER_PATH_MAX * 3 + DOCKER_ID_MAX + 64];
	struct docker_http rq = { .method = "PUT", .path = url, .pieces = tar, .npieces = 3,
				  .content_type = "application/x-tar" };
	struct docker_reply rp;
	json_t *j = NULL;
	int rc = -1;

	if (!q)
		return ctx->host->errf(err, SG_E_NOMEM, "docker: out of memory");
	/* copyUIDGID: the new file belongs to the container's user, not to
	 * whoever the tar header names. */
	snprintf(url, sizeof(url), "/containers/%s/archive?path=%s&copyUIDGID=1",
		 m->id, q);
	free(q);
	if (docker_engine_call(ctx->engine, &rq, &rp, err) < 0)
		goto out;
	if (rp.status == 200) {
		rc = 0;
		goto out;
	}
	if (rp.status == 404) {
		rc = 1;
		goto out;
	}
	if (rp.body.len)
		j = json_loadb(rp.body.data, rp.body.len, 0, NULL);
	if (rp.status == 400)
		ctx->host->errf(err, SG_E_INVAL, "cannot write into %s: it is not a "
				"directory", dir);
	else
		docker_engine_fail(ctx->engine, err,
				   rp.status == 403 ? SG_E_PERM : SG_E_BACKEND,
				   "docker upload", rp.status, j);
out:
	json_decref(j);
	docker_reply_free(ctx->engine, &rp);
	return rc;
}

/* Uploads the tar into dir, creating dir (mkdir -p, as the container's user)
 * when it is missing and mkdir is allowed. */
static int docker_upload(struct docker_ctx *ctx, const struct sg_machine *m,
			 const char *dir, const struct docker_piece tar[3], bool mkdir,
			 struct sg_call *call, struct sg_err *err)
{
	const char *args[] = { dir, NULL };
	struct sg_exec_result res;
	int rc;

	rc = docker_put(ctx, m, dir, tar, err);
	if (rc <= 0)
		return rc;
	if (!mkdir)
		return docker_gone_or(ctx, m, SG_E_NOTFOUND, "no such directory", dir, err);
	memset(&res, 0, sizeof(res));
	rc = docker_script(ctx, m, docker_mkdir_p_sh, args, DOCKER_SCRIPT_CAP, call, &res, err);
	if (rc == 0 && res.exit_code == DOCKER_X_EXISTS)
		rc = ctx->host->errf(err, SG_E_EXISTS, "cannot create directory %s: a "
				     "file of that name exists", dir);
	else if (rc == 0 && res.exit_code != 0)
		rc = docker_sh_fail(ctx, &res, "mkdir -p", dir, err);
	docker_res_free(ctx, &res);
	if (rc < 0)
		return -1;
	rc = docker_put(ctx, m, dir, tar, err);
	return rc > 0 ? ctx->host->errf(err, SG_E_NOTFOUND, "no such directory: %s",
					dir) : rc;
}

/* Remembers tmp for docker_stale_drop(); false when the list is full. */
static bool docker_stale_add(const struct sg_machine *m, const char *tmp)
{
	struct docker_machine *dm = m->handle;
	bool kept = false;

	pthread_mutex_lock(&dm->slock);
	for (size_t i = 0; i < DOCKER_STALE_MAX && !kept; i++)
		if (!dm->stale[i])
			kept = (dm->stale[i] = strdup(tmp)) != NULL;
	pthread_mutex_unlock(&dm->slock);
	return kept;
}

/* Best effort: the replace script removes its temp itself, this covers an
 * exec that never ran and an upload that failed half-way.  When even this
 * cannot reach the container (the engine is down), the machine remembers
 * the file and its next exec removes it. */
static void docker_drop_temp(struct docker_ctx *ctx, const struct sg_machine *m,
			     const char *tmp)
{
	static const char rm_sh[] = "exec rm -f -- \"$1\"";
	const char *args[] = { tmp, NULL };
	struct sg_exec_result res;
	struct sg_err e;

	memset(&res, 0, sizeof(res));
	if (docker_script(ctx, m, rm_sh, args, DOCKER_SCRIPT_CAP, NULL, &res, &e) < 0) {
		bool later = e.code != SG_E_GONE && docker_stale_add(m, tmp);

		ctx->host->log(SG_LOG_WARNING, DOCKER_PLUGIN, "could not remove the "
			       "temporary file %s of a failed write in %s%s: %s", tmp,
			       m->id, later ? " (the next call will)" : "", e.msg);
	}
	docker_res_free(ctx, &res);
}

void docker_stale_drop(struct docker_ctx *ctx, const struct sg_machine *m)
{
	struct docker_machine *dm = m->handle;
	char *paths[DOCKER_STALE_MAX];
	size_t n = 0;

	if (!dm)
		return;
	pthread_mutex_lock(&dm->slock);
	for (size_t i = 0; i < DOCKER_STALE_MAX; i++)
		if (dm->stale[i]) {
			paths[n++] = dm->stale[i];
			dm->stale[i] = NULL;
		}
	pthread_mutex_unlock(&dm->slock);
	/* One at a time through docker_drop_temp(), which keeps a failure. */
	for (size_t i = 0; i < n; i++) {
		docker_drop_temp(ctx, m, paths[i]);
		free(paths[i]);
	}
}

/* Renames the uploaded temp over the target in one exec. */
static int docker_replace(struct docker_ctx *ctx, const struct sg_machine *m,
			  const char *tmp, const char *target, struct sg_call *call,
			  struct sg_err *err)
{
	const char *args[] = { tmp, target, NULL };
	struct sg_exec_result res;
	int rc;

	memset(&res, 0, sizeof(res));
	rc = docker_script(ctx, m, docker_replace_sh, args, DOCKER_SCRIPT_CAP, call, &res, err);
	if (rc < 0) {
		/* The script did not finish, so it did not clean up. */
		if (!err || err->code != SG_E_GONE)
			docker_drop_temp(ctx, m, tmp);
		goto out;
	}
	switch (res.exit_code) {
	case 0:
		break;
	case DOCKER_X_ISDIR:
		rc = ctx->host->errf(err, SG_E_INVAL, "%s is a directory: give a file "
				     "path", target);
		break;
	case DOCKER_X_OWNER:
		rc = docker_sh_fail(ctx, &res, "keeping the owner and mode of", target, err);
		break;
	default:
		rc = docker_sh_fail(ctx, &res, "replacing", target, err);
		break;
	}
out:
	docker_res_free(ctx, &res);
	return rc;
}

/* Atomic replace: upload as a temp name in the same directory, then rename
 * over the target, which keeps its owner and mode.  A symlink is written
 * through (its target is replaced, the link stays). */
int docker_file_write(struct sg_machine *m, const char *path, const void *data,
		      size_t len, const struct sg_write_opts *opts,
		      struct sg_call *call, struct sg_err *err)
{
	struct docker_ctx *ctx = docker_ctx_of(m, err);
	char abs[DOCKER_PATH_MAX], real[DOCKER_PATH_MAX], dir[DOCKER_PATH_MAX], tmp[256];
	char tmp_path[DOCKER_PATH_MAX + 256];
	struct docker_tar_frame fr;
	struct docker_piece tar[3];
	struct docker_pstat ps;
	struct rnc_site *site = ctx ? docker_runner_site(m) : NULL;
	const char *base;
	unsigned mode = opts && opts->mode ? opts->mode & 07777 : 0644;
	int rc = -1, found;

	if (!ctx)
		return -1;
	if (len > ctx->file_cap)
		return ctx->host->errf(err, SG_E_TOOBIG, "%zu bytes are more than the %zu "
				       "a write may move ([docker] file_cap)", len,
				       ctx->file_cap);
	if (docker_abs(ctx, m, path, abs, err) < 0)
		return -1;
	if (site && (rc = rnc_file_write(site, NULL, abs, data, len, opts ? opts->mode : 0,
					 !(opts && opts->no_mkdir), call, err)) <= 0)
		return rc;
	found = docker_follow(ctx, m, abs, real, &ps, err);
	if (found < 0)
		return -1;
	if (found == 0 && (ps.go_mode & GO_MODE_DIR))
		return ctx->host->errf(err, SG_E_INVAL, "%s is a directory: give a file "
				       "path", abs);
	base = docker_split(real, dir);
	if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
		return ctx->host->errf(err, SG_E_INVAL, "%s does not name a file", abs);
	if (docker_temp_name(ctx, tmp, sizeof(tmp), err) < 0)
		return -1;
	snprintf(tmp_path, sizeof(tmp_path), "%s/%s", strcmp(dir, "/") ? dir : "", tmp);
	/* The content goes to the engine from the caller's buffer: a tar
	 * built in memory would be a second whole copy of it. */
	if (docker_tar_frame_file(ctx->host, tmp, len, mode, &fr, err) < 0)
		goto out;
	tar[0] = (struct docker_piece){ fr.head, sizeof(fr.head) };
	tar[1] = (struct docker_piece){ data, len };
	tar[2] = (struct docker_piece){ fr.tail, fr.tail_len };
	if (docker_upload(ctx, m, dir, tar, !(opts && opts->no_mkdir), call, err) < 0) {
		/* The engine may have written part of the temp before it failed
		 * (a full disk) or before its answer was lost. */
		if (err && err->code != SG_E_NOTFOUND && err->code != SG_E_INVAL &&
		    err->code != SG_E_EXISTS && err->code != SG_E_GONE)
			docker_drop_temp(ctx, m, tmp_path);
		goto out;
	}
	if (docker_replace(ctx, m, tmp_path, real, call, err) < 0)
		goto out;
	rc = 0;
out:
	return rc;
}
