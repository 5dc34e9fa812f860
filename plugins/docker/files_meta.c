/*
 * Listing, stat and remove of files: through the container's runner
 * (capability "files", see plugins/runner/rfiles.c) whenever it runs there;
 * else a small fixed shell script run with exec (find, stat, rm), to which
 * paths are passed only as arguments ("$1"), never spliced in.  Reading and
 * writing, and the path and script helpers used here, are in files.c.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/docker/docker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/docker/files_int.h"

/* ---- list ------------------------------------------------------------------------------ */

/* Entries of $1 as NUL-separated name, type, size, mode, mtime. */
static const char docker_list_sh[] =
	"if [ ! -e \"$1\" ]; then exit 24; fi\n"
	"if [ ! -d \"$1\" ]; then exit 25; fi\n"
	"exec find -H \"$1\" -mindepth 1 -maxdepth 1 -printf '%P\\0%y\\0%s\\0%m\\0%T@\\0'\n";

static const char *docker_type_name(char y)
{
	switch (y) {
	case 'f':
		return "file";
	case 'd':
		return "dir";
	case 'l':
		return "symlink";
	default:
		return "other";
	}
}

/* A JSON string of bytes that may not be UTF-8: invalid bytes become '?'. */
static json_t *docker_json_name(const char *s)
{
	json_t *j = json_string(s);
	char *copy;
	size_t i;

	if (j)
		return j;
	copy = strdup(s); /* freed below */
	if (!copy)
		return NULL;
	for (i = 0; copy[i]; i++)
		if ((unsigned char)copy[i] >= 0x80)
			copy[i] = '?';
	j = json_string(copy);
	free(copy);
	return j;
}

/* Seconds from find's %T@ ("1700000000.123"), which the sandbox prints: a
 * number past int64 (or not a number) is 0, never an undefined
 * conversion. */
static json_int_t docker_mtime(const char *s)
{
	double t = strtod(s, NULL);

	return t > -9.2e18 && t < 9.2e18 ? (json_int_t)t : 0;
}

static json_t *docker_list_entry(const char *dir, const char *f[5])
{
	char full[DOCKER_PATH_MAX * 2];

	snprintf(full, sizeof(full), "%s/%s", strcmp(dir, "/") ? dir : "", f[0]);
	return json_pack("{s:o, s:o, s:s, s:I, s:i, s:I}",
			 "name", docker_json_name(f[0]),
			 "path", docker_json_name(full),
			 "type", docker_type_name(f[1][0]),
			 "size", (json_int_t)strtoll(f[2], NULL, 10),
			 "mode", (int)strtol(f[3], NULL, 8),
			 "mtime", docker_mtime(f[4]));
}

static int docker_by_name(const void *a, const void *b)
{
	const char *x = json_string_value(json_object_get(*(json_t *const *)a, "name"));
	const char *y = json_string_value(json_object_get(*(json_t *const *)b, "name"));

	return strcmp(x ? x : "", y ? y : "");
}

/* Turns find's NUL-separated records into a JSON array sorted by name. */
static json_t *docker_parse_list(const char *dir, const char *p, size_t len)
{
	const char *end = p + len, *f[5];
	json_t *arr = json_array(), **v = NULL, *e;
	size_t n = 0, i, k;

	while (arr && p < end) {
		for (k = 0; k < 5 && p < end; k++) {
			f[k] = p;
			p += strnlen(p, (size_t)(end - p)) + 1;
		}
		if (k < 5 || p > end)
			break; /* a cut record (never from find) */
		e = docker_list_entry(dir, f);
		if (!e || json_array_append_new(arr, e) < 0) {
			json_decref(arr);
			return NULL;
		}
	}
	if (!arr || json_array_size(arr) < 2)
		return arr;
	/* Sort: find returns directory order, callers want a stable list. */
	n = json_array_size(arr);
	v = malloc(n * sizeof(*v)); /* freed below */
	if (!v) {
		json_decref(arr);
		return NULL;
	}
	for (i = 0; i < n; i++)
		v[i] = json_incref(json_array_get(arr, i));
	qsort(v, n, sizeof(*v), docker_by_name);
	json_array_clear(arr);
	for (i = 0; i < n; i++)
		json_array_append_new(arr, v[i]);
	free(v);
	return arr;
}

/* Lists a directory: array of {name, path, type, size, mode, mtime}. */
/* True when find failed only because entries vanished between its readdir
 * and its stat (a concurrent write's temporary file renamed away): those are
 * simply not listed, which is what a listing a moment later would show. */
static bool docker_list_raced(const struct sg_exec_result *res)
{
	const char *p = res->err.data, *end = p ? p + res->err.len : NULL, *nl;
	bool any = false;

	if (res->exit_code != 1 || !p || res->err_truncated)
		return false;
	for (; p < end; p = nl + 1) {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			nl = end;
		if (nl == p)
			continue;
		if (!memmem(p, (size_t)(nl - p), "No such file or directory", 25))
			return false;
		any = true;
	}
	return any;
}

int docker_file_list(struct sg_machine *m, const char *path, struct sg_call *call,
		     json_t **entries, struct sg_err *err)
{
	struct docker_ctx *ctx = docker_ctx_of(m, err);
	char abs[DOCKER_PATH_MAX];
	const char *args[] = { abs, NULL };
	struct rnc_site *site = ctx ? docker_runner_site(m) : NULL;
	struct sg_exec_result res;
	int rc = -1;

	*entries = NULL;
	if (!ctx)
		return -1;
	if (docker_abs(ctx, m, path && *path ? path : m->workspace, abs, err) < 0)
		return -1;
	if (site && (rc = rnc_file_list(site, NULL, abs, call, entries, err)) <= 0)
		return rc;
	memset(&res, 0, sizeof(res));
	if (docker_script(ctx, m, docker_list_sh, args, ctx->file_cap, call, &res, err) < 0)
		goto out;
	if (res.exit_code == DOCKER_X_NOENT) {
		ctx->host->errf(err, SG_E_NOTFOUND, "no such directory: %s", abs);
		goto out;
	}
	if (res.exit_code == DOCKER_X_NOTDIR) {
		ctx->host->errf(err, SG_E_INVAL, "%s is not a directory: read it instead",
				abs);
		goto out;
	}
	if (res.exit_code != 0 && !docker_list_raced(&res)) {
		docker_sh_fail(ctx, &res, "listing", abs, err);
		goto out;
	}
	if (res.out_truncated) {
		ctx->host->errf(err, SG_E_TOOBIG, "%s has too many entries to list "
				"(more than %zu bytes): list it with a command", abs,
				ctx->file_cap);
		goto out;
	}
	*entries = docker_parse_list(abs, res.out.data ? res.out.data : "", res.out.len);
	if (!*entries) {
		ctx->host->errf(err, SG_E_NOMEM, "docker: out of memory");
		goto out;
	}
	rc = 0;
out:
	docker_res_free(ctx, &res);
	return rc;
}

/* ---- stat, remove ------------------------------------------------------------------------ */

/* lstat of $1: raw mode (hex, with type bits), size, mtime, uid, gid. */
static const char docker_stat_sh[] =
	DOCKER_SH_NOENT_UNLESS_LINK
	"exec stat -c '%f %s %Y %u %g' -- \"$1\"\n";

/* Removes $1 (a directory only when $2 is 1, else DOCKER_X_ISDIR). */
static const char docker_remove_sh[] =
	DOCKER_SH_NOENT_UNLESS_LINK
	"if [ -d \"$1\" ] && [ ! -L \"$1\" ]; then\n"
	"  [ \"$2\" = 1 ] || exit 21\n"
	"  exec rm -rf -- \"$1\"\n"
	"fi\n"
	"exec rm -f -- \"$1\"\n";

static int docker_type_of(unsigned long raw)
{
	switch (raw & 0170000) {
	case 0100000:
		return SG_FT_FILE;
	case 0040000:
		return SG_FT_DIR;
	case 0120000:
		return SG_FT_SYMLINK;
	default:
		return SG_FT_OTHER;
	}
}

/* Stats the path itself (a link is a link) with one exec, for the owner. */
int docker_file_stat(struct sg_machine *m, const char *path, struct sg_call *call,
		     struct sg_stat *st, struct sg_err *err)
{
	struct docker_ctx *ctx = docker_ctx_of(m, err);
	char abs[DOCKER_PATH_MAX];
	const char *args[] = { abs, NULL };
	struct sg_exec_result res;
	unsigned long raw, uid, gid;
	unsigned long long size;
	long long mtime;
	struct rnc_site *site = ctx ? docker_runner_site(m) : NULL;
	int rc = -1;

	if (!ctx)
		return -1;
	if (docker_abs(ctx, m, path, abs, err) < 0)
		return -1;
	if (site && (rc = rnc_file_stat(site, NULL, abs, call, st, err)) <= 0)
		return rc;
	memset(&res, 0, sizeof(res));
	if (docker_script(ctx, m, docker_stat_sh, args, DOCKER_SCRIPT_CAP, call, &res, err) < 0)
		goto out;
	if (res.exit_code == DOCKER_X_NOENT) {
		ctx->host->errf(err, SG_E_NOTFOUND, "no such file or directory: %s", abs);
		goto out;
	}
	if (res.exit_code != 0) {
		docker_sh_fail(ctx, &res, "stat", abs, err);
		goto out;
	}
	if (!res.out.data || sscanf(res.out.data, "%lx %llu %lld %lu %lu", &raw, &size,
				    &mtime, &uid, &gid) != 5) {
		ctx->host->errf(err, SG_E_PROTO, "stat %s: unexpected output from stat",
				abs);
		goto out;
	}
	memset(st, 0, sizeof(*st));
	st->type = docker_type_of(raw);
	st->size = size;
	st->mode = (uint32_t)(raw & 07777);
	st->mtime = mtime;
	st->uid = (uint32_t)uid;
	st->gid = (uint32_t)gid;
	rc = 0;
out:
	docker_res_free(ctx, &res);
	return rc;
}

/* rm -f, or rm -rf when recursive; a missing path is SG_E_NOTFOUND so a
 * mistyped path does not pass silently. */
int docker_file_remove(struct sg_machine *m, const char *path, bool recursive,
		       struct sg_call *call, struct sg_err *err)
{
	struct docker_ctx *ctx = docker_ctx_of(m, err);
	char abs[DOCKER_PATH_MAX];
	const char *args[] = { abs, recursive ? "1" : "0", NULL };
	struct rnc_site *site = ctx ? docker_runner_site(m) : NULL;
	struct sg_exec_result res;
	int rc = -1;

	if (!ctx)
		return -1;
	if (docker_abs(ctx, m, path, abs, err) < 0)
		return -1;
	if (strcmp(abs, "/") == 0)
		return ctx->host->errf(err, SG_E_INVAL, "refusing to remove /: destroy the "
				       "machine instead");
	if (site && (rc = rnc_file_remove(site, NULL, abs, recursive, call, err)) <= 0)
		return rc;
	memset(&res, 0, sizeof(res));
	if (docker_script(ctx, m, docker_remove_sh, args, DOCKER_SCRIPT_CAP, call, &res,
			  err) < 0)
		goto out;
	switch (res.exit_code) {
	case 0:
		rc = 0;
		break;
	case DOCKER_X_NOENT:
		ctx->host->errf(err, SG_E_NOTFOUND, "no such file or directory: %s", abs);
		break;
	case DOCKER_X_ISDIR:
		ctx->host->errf(err, SG_E_INVAL, "%s is a directory: remove it with "
				"recursive", abs);
		break;
	default:
		docker_sh_fail(ctx, &res, "rm", abs, err);
		break;
	}
out:
	docker_res_free(ctx, &res);
	return rc;
}
