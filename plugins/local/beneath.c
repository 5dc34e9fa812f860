/*
 * The host side of a sandbox directory.  Its contents belong to the
 * sandbox: any name in it may be a link, and may be swapped for one while
 * sandgate looks, so sandgate (root, as likely as not) never resolves a
 * path in it by string.  A path is resolved beneath the directory in one
 * step, by the kernel (openat2 with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS
 * | RESOLVE_NO_XDEV), or, where the kernel lacks openat2 (before 5.6), by a
 * walk of O_PATH | O_NOFOLLOW opens, one component at a time from the
 * directory's own fd, that refuses "..", links and mount points: either
 * way no component can lead out of it.  Removing a sandbox walks its tree
 * with openat(O_NOFOLLOW) and unlinkat from the directory's fd.
 *
 * Everything a sandbox does with its files happens inside its jail (the
 * runner's file operations); this is only for what sandgate itself does
 * there (removing it).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/local/local.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* LOCAL_BENEATH_NO_OPENAT2: the walk only (a test builds it so, to check
 * the path older kernels take). */
#if defined(SYS_openat2) && !defined(LOCAL_BENEATH_NO_OPENAT2)
#define LOCAL_HAVE_OPENAT2 1
#include <linux/openat2.h>
#endif

#define BENEATH_DEPTH 1024 /* directories deep, removing a tree */

/* The O_PATH walk: every component but the last opened O_PATH|O_NOFOLLOW
 * from the previous one's fd; ".." and links refused, and so is crossing
 * into another mount (a bind mount could lead anywhere). */
static int beneath_walk(int dirfd, const char *path, int flags, mode_t mode)
{
	char *copy = strdup(path), *p, *slash;
	struct stat top, st;
	int fd = -1, next, e = 0;

	if (!copy)
		return (errno = ENOMEM), -1;
	if (fstat(dirfd, &top) < 0 || (fd = dup(dirfd)) < 0) {
		free(copy);
		return -1;
	}
	for (p = copy;; p = slash + 1) {
		while (*p == '/')
			p++;
		slash = strchr(p, '/');
		if (slash)
			*slash = '\0';
		if (strcmp(p, "..") == 0) {
			e = EXDEV;
			break;
		}
		if (!slash || !slash[1]) { /* the last component */
			next = *p ? openat(fd, p, flags | O_NOFOLLOW | O_CLOEXEC, mode) :
			       openat(fd, ".", flags | O_CLOEXEC, mode);
			e = next < 0 ? errno : 0;
			close(fd);
			fd = next;
			break;
		}
		if (!*p || strcmp(p, ".") == 0)
			continue;
		next = openat(fd, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0 || fstat(next, &st) < 0 || st.st_dev != top.st_dev) {
			e = next < 0 ? (errno == ENOTDIR ? ELOOP : errno) : EXDEV;
			if (next >= 0)
				close(next);
			break;
		}
		close(fd);
		fd = next;
	}
	free(copy);
	if (e) {
		if (fd >= 0)
			close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

int local_open_beneath(int dirfd, const char *path, int flags, mode_t mode)
{
#ifdef LOCAL_HAVE_OPENAT2
	struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC), .mode = mode,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS |
					   RESOLVE_NO_XDEV };
	long fd;

	if (!(flags & (O_CREAT | O_TMPFILE)))
		how.mode = 0;
	fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
	if (fd >= 0 || errno != ENOSYS)
		return (int)fd;
#endif
	return beneath_walk(dirfd, path, flags, mode);
}

/* Removes what dirfd holds, one level at a time (fd is dirfd's own). */
static int remove_contents(int fd, int depth)
{
	struct dirent *de;
	int dup_fd, rc = 0;
	DIR *d;

	if (depth > BENEATH_DEPTH)
		return (errno = ELOOP), -1;
	dup_fd = dup(fd);
	if (dup_fd < 0)
		return -1;
	d = fdopendir(dup_fd);
	if (!d) {
		close(dup_fd);
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		int sub;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (unlinkat(fd, de->d_name, 0) == 0 || errno == ENOENT)
			continue;
		if (errno != EISDIR && errno != EPERM) {
			rc = -1;
			continue;
		}
		/* A directory: never a link (O_NOFOLLOW), never another mount. */
		sub = local_open_beneath(fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
		if (sub < 0) {
			rc = -1;
			continue;
		}
		/* The sandbox may have made it unwritable; it is ours to remove. */
		fchmod(sub, 0700);
		if (remove_contents(sub, depth + 1) < 0)
			rc = -1;
		close(sub);
		if (unlinkat(fd, de->d_name, AT_REMOVEDIR) < 0 && errno != ENOENT)
			rc = -1;
	}
	closedir(d);
	return rc;
}

int local_remove_tree(int pfd, const char *name)
{
	int fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), rc, e;

	if (fd < 0)
		return -1;
	fchmod(fd, 0700);
	rc = remove_contents(fd, 0);
	e = errno;
	close(fd);
	if (rc == 0 && unlinkat(pfd, name, AT_REMOVEDIR) < 0)
		return -1;
	errno = e;
	return rc;
}
