/* Atomic whole-file writes (core/cli/atomic.h). */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cli/atomic.h"
#include "core/base/err.h"
#include "core/base/util.h"

static int write_all(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The directory part of path ("." for a bare name).  Caller frees. */
static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		return sg_xstrdup(".");
	if (slash == path)
		return sg_xstrdup("/");
	return sg_xasprintf("%.*s", (int)(slash - path), path);
}

/* A rename is durable once the directory that holds it is on disk. */
static void sync_dir(const char *path)
{
	char *dir = dir_of(path);
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
	free(dir);
}

int sg_write_file_atomic(const char *path, const void *data, size_t len, mode_t mode,
			 struct sg_err *err)
{
	const char *base = strrchr(path, '/');
	char *dir = dir_of(path);
	/* hidden, and named after the file, so a leftover says where it came from */
	char *tmp = sg_xasprintf("%s/.%s.XXXXXX", dir, base ? base + 1 : path);
	int fd = mkostemp(tmp, O_CLOEXEC);
	struct stat old;
	bool had = stat(path, &old) == 0;
	int saved;

	free(dir);
	if (fd < 0) {
		sg_errf(err, SG_E_IO, "cannot write '%s': cannot create a temporary file next to it: %s",
			path, strerror(errno));
		free(tmp);
		return -1;
	}
	/* The replacement keeps the owner of the file it replaces (root editing
	 * a user's file); where that is not allowed, the writer owns it. */
	if (had && (old.st_uid != geteuid() || old.st_gid != getegid()) &&
	    fchown(fd, old.st_uid, old.st_gid) < 0) {
		/* EPERM: not root; the file is ours then */
	}
	if (write_all(fd, data, len) < 0 || fchmod(fd, mode & 07777) < 0 || fsync(fd) < 0) {
		saved = errno;
		close(fd);
		goto fail;
	}
	if (close(fd) < 0 || rename(tmp, path) < 0) {
		saved = errno;
		goto fail;
	}
	free(tmp);
	sync_dir(path);
	return 0;
fail:
	unlink(tmp);
	free(tmp);
	errno = saved;
	return sg_errf(err, SG_E_IO, "cannot write '%s': %s", path, strerror(saved));
}

int sg_mkdir_parents(const char *path, mode_t dir_mode, struct sg_err *err)
{
	char *dir = dir_of(path);
	struct stat st;
	int rc = 0;

	if (stat(dir, &st) == 0) {
		if (!S_ISDIR(st.st_mode))
			rc = sg_errf(err, SG_E_IO, "cannot write '%s': '%s' is not a directory", path, dir);
		free(dir);
		return rc;
	}
	if (strcmp(dir, ".") && strcmp(dir, "/"))
		rc = sg_mkdir_parents(dir, dir_mode, err);
	if (rc == 0 && mkdir(dir, dir_mode) < 0 && errno != EEXIST)
		rc = sg_errf(err, SG_E_IO, "cannot create the directory '%s': %s", dir, strerror(errno));
	free(dir);
	return rc;
}

mode_t sg_current_umask(void)
{
	mode_t m = umask(022);

	umask(m);
	return m;
}
