/*
 * The build context of docker_build: a directory beneath a machine's
 * workspace on the host, packed into a tar in memory.  The walk opens every
 * entry relative to its directory with O_NOFOLLOW: a symbolic link is put
 * in the tar as a link (the builder resolves it inside the context, as
 * docker build does) and never followed on the host.  The whole tar is
 * capped ([docker] build_context_max) while it grows.
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

static int ctx_file(struct ctx_pack *k, int dfd, const char *name, const char *path,
		    const struct stat *st)
{
	struct archive_entry *e = ctx_entry(path, st);
	char *buf = malloc(CTX_CHUNK);
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
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

int docker_context_pack(struct docker_ctx *ctx, int dirfd, const char *df_name, const void *df,
			size_t df_len, size_t max, struct sg_buf *out, struct sg_err *err)
{
	struct ctx_pack k = { .ctx = ctx, .out = out, .max = max, .err = err };
	struct stat st = { .st_mode = 0644, .st_mtime = time(NULL) };
	struct archive_entry *e = NULL;
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = -1;

	k.a = archive_write_new();
	if (fd < 0 || !k.a) {
		ctx->host->errf(err, fd < 0 ? SG_E_IO : SG_E_NOMEM, "the build context: %s",
				fd < 0 ? strerror(errno) : "out of memory");
		goto out;
	}
	if (archive_write_set_format_pax_restricted(k.a) != ARCHIVE_OK ||
	    archive_write_set_bytes_in_last_block(k.a, 1) != ARCHIVE_OK ||
	    archive_write_open(k.a, &k, NULL, ctx_write_cb, NULL) != ARCHIVE_OK) {
		ctx_fail(&k, ".", archive_error_string(k.a) ?: "tar");
		goto out;
	}
	if (ctx_dir(&k, fd, "", 0) < 0)
		goto out;
	/* The Dockerfile goes in under a name of its own: it may live outside
	 * the context (anywhere in the workspace). */
	e = ctx_entry(df_name, &st);
	if (!e) {
		ctx_fail(&k, df_name, "out of memory");
		goto out;
	}
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_size(e, (la_int64_t)df_len);
	if (archive_write_header(k.a, e) != ARCHIVE_OK ||
	    (df_len && archive_write_data(k.a, df, df_len) != (la_ssize_t)df_len) ||
	    archive_write_close(k.a) != ARCHIVE_OK) {
		ctx_fail(&k, df_name, archive_error_string(k.a) ?: "tar");
		goto out;
	}
	rc = 0;
out:
	archive_entry_free(e);
	if (k.a)
		archive_write_free(k.a);
	if (fd >= 0)
		close(fd);
	return rc;
}
