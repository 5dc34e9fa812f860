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
 * with openat(O_NOFOLLOW) and unlinkat from the directory's fd, a level at
 * a time with its subdirectories moved up (below).
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
#include <stdio.h>
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

/* Removing a tree holds a bounded number of descriptors however deep the
 * sandbox made it (a recursion held two a level: a chain of 1,000
 * directories ran sandgate out of descriptors, and the directory stayed on
 * the host for good): what a directory below the top holds is emptied, its
 * own subdirectories moved up to the top under new names, and the top is
 * gone over again until it is empty.  Each directory is moved once at most.
 * Nothing runs in the sandbox by then (its jail ended). */

/* Moves dirfd's entry `name` to the top as a name of its own. */
static int hoist(int dirfd, const char *name, int top, unsigned long *seq)
{
	char to[48];

	for (;;) {
		snprintf(to, sizeof(to), ".sg-removing-%lu", ++*seq);
#ifdef SYS_renameat2
		if (syscall(SYS_renameat2, dirfd, name, top, to, 1 /* RENAME_NOREPLACE */) == 0)
			return 0;
		if (errno == EEXIST)
			continue;
		if (errno != ENOSYS && errno != EINVAL)
			return -1;
#endif
		if (faccessat(top, to, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
			continue;
		return renameat(dirfd, name, top, to);
	}
}

/* Calls fn for each entry of the directory fd (not "." and ".."); the
 * first error's errno is kept in *err.  Returns how many entries fn made
 * go (its 1s), or -1 when fd cannot be read. */
static long each_entry(int fd, int (*fn)(int fd, const char *name, void *ud), void *ud, int *err)
{
	int dup_fd = dup(fd);
	struct dirent *de;
	long gone = 0;
	DIR *d;

	if (dup_fd < 0 || !(d = fdopendir(dup_fd))) {
		if (dup_fd >= 0)
			close(dup_fd);
		if (!*err)
			*err = errno;
		return -1;
	}
	rewinddir(d);
	while ((de = readdir(d)) != NULL) {
		int r;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		r = fn(fd, de->d_name, ud);
		if (r > 0)
			gone++;
		else if (r < 0 && !*err)
			*err = errno;
	}
	closedir(d);
	return gone;
}

struct rm { int top; unsigned long seq; int err; };

/* Below the top: a file goes, a directory moves up.  1 done, -1 error. */
static int rm_below(int fd, const char *name, void *ud)
{
	struct rm *rm = ud;

	if (unlinkat(fd, name, 0) == 0 || errno == ENOENT)
		return 1;
	if (errno != EISDIR && errno != EPERM)
		return -1;
	/* A directory (a link would have gone): moving it rewrites its "..",
	 * which needs it writable unless sandgate is root. */
	fchmodat(fd, name, 0700, 0);
	return hoist(fd, name, rm->top, &rm->seq) == 0 ? 1 : -1;
}

/* At the top: a file goes; a directory is emptied (rm_below) and goes. */
static int rm_top(int fd, const char *name, void *ud)
{
	struct rm *rm = ud;
	int sub;

	if (unlinkat(fd, name, 0) == 0 || errno == ENOENT)
		return 1;
	if (errno != EISDIR && errno != EPERM)
		return -1;
	/* A directory: never a link (O_NOFOLLOW), never another mount. */
	sub = local_open_beneath(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
	if (sub < 0)
		return -1;
	/* The sandbox may have made it unwritable; it is ours to remove. */
	fchmod(sub, 0700);
	each_entry(sub, rm_below, rm, &rm->err);
	close(sub);
	return unlinkat(fd, name, AT_REMOVEDIR) == 0 || errno == ENOENT ? 1 : -1;
}

/* Empties the directory fd; 0, or -1 with the first error's errno once a
 * pass makes no progress. */
static int remove_contents(int fd)
{
	struct rm rm = { .top = fd };
	long gone;

	do {
		rm.err = 0;
		gone = each_entry(fd, rm_top, &rm, &rm.err);
	} while (gone > 0);
	if (gone < 0 || rm.err) {
		errno = rm.err ? rm.err : EIO;
		return -1;
	}
	return 0;
}

int local_remove_tree(int pfd, const char *name)
{
	int fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), rc, e;

	if (fd < 0)
		return -1;
	fchmod(fd, 0700);
	rc = remove_contents(fd);
	e = errno;
	close(fd);
	if (rc == 0 && unlinkat(pfd, name, AT_REMOVEDIR) < 0)
		return -1;
	errno = e;
	return rc;
}
