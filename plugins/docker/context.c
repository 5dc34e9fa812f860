/*
 * The build context of docker_build: a directory beneath a machine's
 * workspace on the host, packed into a tar in memory.  The walk opens every
 * entry relative to its directory with O_NOFOLLOW: a symbolic link is put
 * in the tar as a link (the builder resolves it inside the context, as
 * docker build does) and never followed on the host.  The whole tar is
 * capped ([docker] build_context_max) while it grows.  When work_home is
 * only on the engine's host, the context comes from the machine instead
 * (GET .../archive of its directory), repacked under the context's root.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/docker/docker.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#define CTX_DEPTH_MAX 64
#define CTX_CHUNK     65536

struct ctx_pack {
	struct docker_ctx *ctx;
	struct archive *a;
	struct sg_buf *out;
	size_t max;
	bool too_big;
	struct sg_err *err;
};

static la_ssize_t ctx_write_cb(struct archive *a, void *ud, const void *p, size_t n)
{
	struct ctx_pack *k = ud;

	if (k->out->len + n > k->max) {
		k->too_big = true;
		archive_set_error(a, EFBIG, "the context is larger than [docker] build_context_max");
		return -1;
	}
	if (k->ctx->host->buf_append(k->out, p, n) < 0) {
		archive_set_error(a, ENOMEM, "out of memory");
		return -1;
	}
	return (la_ssize_t)n;
}

static int ctx_fail(struct ctx_pack *k, const char *path, const char *why)
{
	if (k->too_big)
		return k->ctx->host->errf(k->err, SG_E_TOOBIG, "the build context is larger than "
					  "[docker] build_context_max (%zu bytes): build from a "
					  "smaller context_dir", k->max);
	return k->ctx->host->errf(k->err, SG_E_IO, "the build context: %s: %s", path, why);
}

static struct archive_entry *ctx_entry(const char *path, const struct stat *st)
{
	struct archive_entry *e = archive_entry_new();

	if (!e)
		return NULL;
	archive_entry_set_pathname(e, path);
	archive_entry_set_perm(e, st->st_mode & 07777);
	archive_entry_set_mtime(e, st->st_mtime, 0);
	archive_entry_set_uid(e, 0);
	archive_entry_set_gid(e, 0);
	return e;
}

int docker_open_regular(int dfd, const char *name, const struct stat *was)
{
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	int e;

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0)
		e = errno;
	else if (!S_ISREG(st.st_mode))
		e = EINVAL;
	else if (was && (st.st_dev != was->st_dev || st.st_ino != was->st_ino))
		e = ESTALE;
	else if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0)
		e = errno;
	else
		return fd;
	close(fd);
	errno = e;
	return -1;
}

static int ctx_file(struct ctx_pack *k, int dfd, const char *name, const char *path,
		    const struct stat *st)
{
	struct archive_entry *e = ctx_entry(path, st);
	char *buf = malloc(CTX_CHUNK);
	int fd = docker_open_regular(dfd, name, st);
	ssize_t r = 0;
	int rc = -1;

	if (fd < 0 || !e || !buf) {
		rc = ctx_fail(k, path, fd < 0 ? strerror(errno) : "out of memory");
		goto out;
	}
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_size(e, st->st_size);
	if (archive_write_header(k->a, e) != ARCHIVE_OK) {
		rc = ctx_fail(k, path, archive_error_string(k->a) ?: "tar header");
		goto out;
	}
	while ((r = read(fd, buf, CTX_CHUNK)) > 0)
		if (archive_write_data(k->a, buf, (size_t)r) != r) {
			rc = ctx_fail(k, path, archive_error_string(k->a) ?: "tar data");
			goto out;
		}
	rc = r < 0 ? ctx_fail(k, path, strerror(errno)) : 0;
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	archive_entry_free(e);
	return rc;
}

static int ctx_link(struct ctx_pack *k, int dfd, const char *name, const char *path,
		    const struct stat *st)
{
	char target[PATH_MAX];
	ssize_t n = readlinkat(dfd, name, target, sizeof(target) - 1);
	struct archive_entry *e;
	int rc;

	if (n < 0)
		return ctx_fail(k, path, strerror(errno));
	target[n] = '\0';
	e = ctx_entry(path, st);
	if (!e)
		return ctx_fail(k, path, "out of memory");
	archive_entry_set_filetype(e, AE_IFLNK);
	archive_entry_set_symlink(e, target);
	rc = archive_write_header(k->a, e) == ARCHIVE_OK ? 0
		: ctx_fail(k, path, archive_error_string(k->a) ?: "tar header");
	archive_entry_free(e);
	return rc;
}

static int ctx_dir(struct ctx_pack *k, int dfd, const char *prefix, int depth);

static int ctx_one(struct ctx_pack *k, int dfd, const char *name, const char *prefix, int depth)
{
	char path[PATH_MAX];
	struct stat st;
	struct archive_entry *e;
	int sub, rc;

	if ((size_t)snprintf(path, sizeof(path), "%s%s", prefix, name) >= sizeof(path))
		return ctx_fail(k, name, "path too long");
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return ctx_fail(k, path, strerror(errno));
	if (S_ISREG(st.st_mode))
		return ctx_file(k, dfd, name, path, &st);
	if (S_ISLNK(st.st_mode))
		return ctx_link(k, dfd, name, path, &st);
	if (!S_ISDIR(st.st_mode))
		return 0; /* sockets, fifos, devices: not build input */
	if (depth >= CTX_DEPTH_MAX)
		return ctx_fail(k, path, "nested too deep");
	e = ctx_entry(path, &st);
	if (!e)
		return ctx_fail(k, path, "out of memory");
	archive_entry_set_filetype(e, AE_IFDIR);
	rc = archive_write_header(k->a, e) == ARCHIVE_OK ? 0
		: ctx_fail(k, path, archive_error_string(k->a) ?: "tar header");
	archive_entry_free(e);
	if (rc < 0)
		return -1;
	sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub < 0)
		return ctx_fail(k, path, strerror(errno));
	strncat(path, "/", sizeof(path) - strlen(path) - 1);
	rc = ctx_dir(k, sub, path, depth + 1);
	close(sub);
	return rc;
}

/* Packs every entry of directory dfd (borrowed) under prefix. */
static int ctx_dir(struct ctx_pack *k, int dfd, const char *prefix, int depth)
{
	int fd = dup(dfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	int rc = 0;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return ctx_fail(k, *prefix ? prefix : ".", strerror(errno));
	}
	while (rc == 0 && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		rc = ctx_one(k, dirfd(d), de->d_name, prefix, depth);
	}
	closedir(d);
	return rc;
}

/* Opens the writer of k (pax, appended to k->out through ctx_write_cb). */
static int ctx_open(struct ctx_pack *k)
{
	k->a = archive_write_new();
	if (!k->a)
		return k->ctx->host->errf(k->err, SG_E_NOMEM, "the build context: out of memory");
	if (archive_write_set_format_pax_restricted(k->a) != ARCHIVE_OK ||
	    archive_write_set_bytes_in_last_block(k->a, 1) != ARCHIVE_OK ||
	    archive_write_open(k->a, k, NULL, ctx_write_cb, NULL) != ARCHIVE_OK)
		return ctx_fail(k, ".", archive_error_string(k->a) ?: "tar");
	return 0;
}

/* The Dockerfile goes in under a name of its own (it may live outside the
 * context, anywhere in the workspace), then the tar is closed. */
static int ctx_finish(struct ctx_pack *k, const char *df_name, const void *df, size_t df_len)
{
	struct stat st = { .st_mode = 0644, .st_mtime = time(NULL) };
	struct archive_entry *e = ctx_entry(df_name, &st);
	int rc = 0;

	if (!e)
		return ctx_fail(k, df_name, "out of memory");
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_size(e, (la_int64_t)df_len);
	if (archive_write_header(k->a, e) != ARCHIVE_OK ||
	    (df_len && archive_write_data(k->a, df, df_len) != (la_ssize_t)df_len) ||
	    archive_write_close(k->a) != ARCHIVE_OK)
		rc = ctx_fail(k, df_name, archive_error_string(k->a) ?: "tar");
	archive_entry_free(e);
	return rc;
}

int docker_context_pack(struct docker_ctx *ctx, int dirfd, const char *df_name, const void *df,
			size_t df_len, size_t max, struct sg_buf *out, struct sg_err *err)
{
	struct ctx_pack k = { .ctx = ctx, .out = out, .max = max, .err = err };
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = -1;

	if (fd < 0) {
		ctx->host->errf(err, SG_E_IO, "the build context: %s", strerror(errno));
		return -1;
	}
	if (ctx_open(&k) == 0 && ctx_dir(&k, fd, "", 0) == 0 &&
	    ctx_finish(&k, df_name, df, df_len) == 0)
		rc = 0;
	if (k.a)
		archive_write_free(k.a);
	close(fd);
	return rc;
}

/* ---- the context read from the engine ------------------------------------------------- */

/* Copies the entries of the engine's tar of a directory (r), each moved from
 * under the directory's own name (the first entry) to the context's root. */
static int ctx_copy(struct ctx_pack *k, struct archive *r, const char *dir)
{
	struct archive_entry *e;
	char *buf = NULL, prefix[PATH_MAX];
	size_t plen = 0;
	int rc = 0, first = 1, st;

	while (rc == 0 && (st = archive_read_next_header(r, &e)) == ARCHIVE_OK) {
		const char *name = archive_entry_pathname(e) ?: "";
		const char *hard = archive_entry_hardlink(e);
		la_ssize_t n;

		if (first) {
			first = 0;
			if (archive_entry_filetype(e) != AE_IFDIR)
				return k->ctx->host->errf(k->err, SG_E_INVAL, "context_dir %s is not a "
							  "directory", dir);
			plen = (size_t)snprintf(prefix, sizeof(prefix), "%s", name);
			if (plen >= sizeof(prefix) - 1)
				return ctx_fail(k, name, "path too long");
			if (!plen || prefix[plen - 1] != '/')
				prefix[plen++] = '/', prefix[plen] = '\0';
			continue;
		}
		if (strncmp(name, prefix, plen) != 0 || !name[plen])
			continue; /* not beneath the directory: not the context's */
		archive_entry_set_pathname(e, name + plen);
		if (hard && !strncmp(hard, prefix, plen))
			archive_entry_set_hardlink(e, hard + plen);
		archive_entry_set_uid(e, 0);
		archive_entry_set_gid(e, 0);
		if (archive_write_header(k->a, e) != ARCHIVE_OK) {
			rc = ctx_fail(k, name, archive_error_string(k->a) ?: "tar header");
			break;
		}
		if (!buf && !(buf = malloc(CTX_CHUNK))) {
			rc = ctx_fail(k, name, "out of memory");
			break;
		}
		while ((n = archive_read_data(r, buf, CTX_CHUNK)) > 0)
			if (archive_write_data(k->a, buf, (size_t)n) != n) {
				rc = ctx_fail(k, name, archive_error_string(k->a) ?: "tar data");
				break;
			}
		if (rc == 0 && n < 0)
			rc = ctx_fail(k, name, archive_error_string(r) ?: "the engine's tar");
	}
	free(buf);
	if (rc == 0 && first)
		return k->ctx->host->errf(k->err, SG_E_INVAL, "context_dir %s: the engine sent an "
					  "empty archive", dir);
	if (rc == 0 && st != ARCHIVE_EOF)
		rc = ctx_fail(k, dir, archive_error_string(r) ?: "the engine's tar");
	return rc;
}

int docker_context_fetch(struct docker_ctx *ctx, const char *id, const char *dir, const char *df_name,
			 const void *df, size_t df_len, size_t max, struct sg_buf *out,
			 struct sg_err *err)
{
	struct ctx_pack k = { .ctx = ctx, .out = out, .max = max, .err = err };
	char *q = docker_engine_escape(dir), url[DOCKER_PATH_MAX * 3 + DOCKER_ID_MAX + 64];
	/* The engine's tar carries headers and padding on top of the bytes:
	 * what passes max by more than that cannot make a context under max. */
	struct docker_http rq = { .method = "GET", .path = url, .max_body = max + max / 8 + 65536 };
	struct docker_reply rp;
	struct archive *r = NULL;
	int rc = -1;

	if (!q)
		return ctx->host->errf(err, SG_E_NOMEM, "docker: out of memory");
	snprintf(url, sizeof(url), "/containers/%s/archive?path=%s", id, q);
	free(q);
	if (docker_engine_call(ctx->engine, &rq, &rp, err) < 0)
		return -1;
	if (rp.status == 404)
		ctx->host->errf(err, SG_E_NOTFOUND, "context_dir %s: no such directory", dir);
	else if (rp.status != 200)
		ctx->host->errf(err, SG_E_BACKEND, "the build context %s: docker answered HTTP %ld",
				dir, rp.status);
	else if (rp.body_capped)
		ctx->host->errf(err, SG_E_TOOBIG, "the build context is larger than [docker] "
				"build_context_max (%zu bytes): build from a smaller context_dir", max);
	else if (!(r = archive_read_new()) || archive_read_support_format_tar(r) != ARCHIVE_OK ||
		 archive_read_open_memory(r, rp.body.data, rp.body.len) != ARCHIVE_OK)
		ctx->host->errf(err, SG_E_NOMEM, "the build context: %s",
				r ? archive_error_string(r) ?: "tar" : "out of memory");
	else if (ctx_open(&k) == 0 && ctx_copy(&k, r, dir) == 0 &&
		 ctx_finish(&k, df_name, df, df_len) == 0)
		rc = 0;
	if (k.a)
		archive_write_free(k.a);
	if (r)
		archive_read_free(r);
	docker_reply_free(ctx->engine, &rp);
	return rc;
}
