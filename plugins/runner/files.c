/*
 * File operations in the runner (capability "files"): read a range, write a
 * whole file atomically, stat, list one level, mkdir, remove, rename, on
 * paths as the runner's own processes see them (inside a jail, the jail's
 * view).  doc/runner-protocol.md has the wire form.
 *
 * Each request is answered by one FILE answer frame.  Reads move at most
 * RN_FILE_CHUNK bytes and lists at most RN_LIST_BUDGET bytes of entries per
 * request, so a frame never grows past the cap; the client asks again from
 * where the answer ended.  A WRITE opens a temporary file in the target's
 * directory, takes its bytes from STDIN frames as they come (64 KiB each)
 * and commits at STDIN_CLOSE: mode and owner of the file it replaces (or
 * the requested mode), fsync, rename, fsync of the directory.  KILL, or the
 * runner's end, drops it and its temporary file; a runner killed outright
 * leaves it, and the write the client sends again (RN_FFLAG_SWEEP) has the
 * new runner remove it.
 *
 * Everything here is a plain system call on local storage, done inside the
 * event loop: an open() on a FIFO would block it, so files are opened
 * non-blocking and only regular files are read or replaced.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/runner/runner.h"

#include <dirent.h>
#include <sys/file.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A FILE request's fields. */
struct freq {
	uint32_t op, length, mode, flags;
	uint64_t offset;
	char *path, *path2;   /* malloc'd, freed by freq_free() */
	char *root;           /* ROOT or NULL: the paths must lead beneath it */
};

static void freq_free(struct freq *q)
{
	free(q->path);
	free(q->path2);
	free(q->root);
}

static int freq_parse(struct freq *q, const unsigned char *payload, size_t len)
{
	struct rn_iter it;
	struct rn_field f;
	int rc, bad = 0;

	memset(q, 0, sizeof(*q));
	q->length = RN_FILE_CHUNK; /* absent: a whole chunk */
	rn_iter_init(&it, payload, len);
	while ((rc = rn_iter_next(&it, &f)) > 0) {
		switch (f.tag) {
		case RN_F_FOP:
			bad |= rn_field_u32(&f, &q->op);
			break;
		case RN_F_PATH:
			free(q->path);
			bad |= !(q->path = rn_field_dup(&f));
			break;
		case RN_F_PATH2:
			free(q->path2);
			bad |= !(q->path2 = rn_field_dup(&f));
			break;
		case RN_F_ROOT:
			free(q->root);
			bad |= !(q->root = rn_field_dup(&f));
			break;
		case RN_F_OFFSET:
			bad |= rn_field_u64(&f, &q->offset);
			break;
		case RN_F_LENGTH:
			bad |= rn_field_u32(&f, &q->length);
			break;
		case RN_F_FMODE:
			bad |= rn_field_u32(&f, &q->mode);
			break;
		case RN_F_FFLAGS:
			bad |= rn_field_u32(&f, &q->flags);
			break;
		default:
			break;
		}
	}
	if (rc < 0 || bad || !q->path || !q->path[0] || (q->root && !q->root[0]))
		return -1;
	return q->op == RN_FOP_RENAME && (!q->path2 || !q->path2[0]) ? -1 : 0;
}

/* ---- answers -------------------------------------------------------------------- */

static void file_answer(struct runner *r, uint32_t id, struct rn_buf *b)
{
	if (b->oom) {
		rn_buf_free(b);
		rn_put_u32(b, RN_F_ERRNO, ENOMEM);
	}
	rn_send(r, RN_R_FILE, id, b->data, b->len);
	rn_buf_free(b);
}

/* A failure: errno e, and where (the path or step it happened on). */
static void file_fail(struct runner *r, uint32_t id, int e, const char *where)
{
	struct rn_buf b = { 0 };

	rn_put_u32(&b, RN_F_ERRNO, (uint32_t)e);
	if (where)
		rn_put_str(&b, RN_F_TEXT, where);
	file_answer(r, id, &b);
}

static uint32_t file_type(mode_t m)
{
	return S_ISREG(m) ? RN_FT_FILE : S_ISDIR(m) ? RN_FT_DIR : S_ISLNK(m) ? RN_FT_SYMLINK :
	       RN_FT_OTHER;
}

static void put_stat(struct rn_buf *b, const struct stat *st)
{
	rn_put_u32(b, RN_F_FTYPE, file_type(st->st_mode));
	rn_put_u64(b, RN_F_SIZE, (uint64_t)st->st_size);
	rn_put_u32(b, RN_F_FMODE, st->st_mode & 07777);
	rn_put_u64(b, RN_F_MTIME, (uint64_t)(int64_t)st->st_mtime);
}

/* ---- helpers -------------------------------------------------------------------- */

/* mkdir -p of path (mode for what it makes).  Returns 0 or -1 (errno). */
static int mkdir_parents(const char *path, mode_t mode)
{
	char *p = strdup(path), *s;
	struct stat st;
	int rc = 0;

	if (!p)
		return -1;
	if (strcmp(p, "/") == 0) {
		free(p);
		return 0;
	}
	for (s = p + 1; rc == 0; s++) {
		bool end = *s == '\0';

		if (*s != '/' && !end)
			continue;
		*s = '\0';
		if (mkdir(p, mode) < 0 && errno != EEXIST)
			rc = -1;
		else if (stat(p, &st) < 0)
			rc = -1;
		else if (!S_ISDIR(st.st_mode))
			rc = (errno = ENOTDIR, -1);
		if (end)
			break;
		*s = '/';
	}
	free(p);
	return rc;
}

/* Splits path into a new directory string and its last component (borrowed
 * from path).  NULL (errno) for "/" or out of memory. */
static char *split_dir(const char *path, const char **base)
{
	const char *slash = strrchr(path, '/');
	char *dir;

	if (!slash) {
		*base = path;
		return strdup(".");
	}
	*base = slash + 1;
	if (!**base || strcmp(*base, ".") == 0 || strcmp(*base, "..") == 0) {
		errno = EINVAL;
		return NULL;
	}
	dir = slash == path ? strdup("/") : strndup(path, (size_t)(slash - path));
	if (!dir)
		errno = ENOMEM;
	return dir;
}

/* Removes what is at name in dirfd, a tree when it is a directory, never
 * following links (unlinkat on each entry).  depth bounds the recursion. */
static int remove_at(int dirfd, const char *name, int depth)
{
	struct dirent *de;
	int fd, rc = 0;
	DIR *d;

	if (unlinkat(dirfd, name, 0) == 0)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -1;
	if (depth > 256)
		return (errno = ELOOP), -1;
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -1;
	}
	while (rc == 0 && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		rc = remove_at(fd, de->d_name, depth + 1);
	}
	closedir(d);
	return rc == 0 ? unlinkat(dirfd, name, AT_REMOVEDIR) : -1;
}

/* ---- the simple operations ----------------------------------------------------------- */

static void op_read(struct runner *r, uint32_t id, const struct freq *q)
{
	size_t want = q->length < RN_FILE_CHUNK ? q->length : RN_FILE_CHUNK;
	struct rn_buf b = { 0 };
	unsigned char *buf;
	struct stat st;
	ssize_t got;
	int fd = open(q->path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

	if (fd < 0)
		return file_fail(r, id, errno, q->path);
	if (fstat(fd, &st) < 0) {
		int e = errno;

		close(fd);
		return file_fail(r, id, e, q->path);
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return file_fail(r, id, S_ISDIR(st.st_mode) ? EISDIR : EINVAL,
				 "not a regular file");
	}
	buf = malloc(want ? want : 1);
	if (!buf) {
		close(fd);
		return file_fail(r, id, ENOMEM, NULL);
	}
	do
		got = pread(fd, buf, want, (off_t)q->offset);
	while (got < 0 && errno == EINTR);
	if (got < 0) {
		int e = errno;

		free(buf);
		close(fd);
		return file_fail(r, id, e, q->path);
	}
	close(fd);
	rn_put_u64(&b, RN_F_SIZE, (uint64_t)st.st_size);
	rn_put_u64(&b, RN_F_INODE, (uint64_t)st.st_ino);
	rn_put_u64(&b, RN_F_DEV, (uint64_t)st.st_dev);
	rn_put_bytes(&b, RN_F_DATA, buf, (uint32_t)got);
	free(buf);
	file_answer(r, id, &b);
}

static void op_stat(struct runner *r, uint32_t id, const struct freq *q)
{
	struct rn_buf b = { 0 };
	struct stat st;

	if (lstat(q->path, &st) < 0)
		return file_fail(r, id, errno, q->path);
	put_stat(&b, &st);
	rn_put_u32(&b, RN_F_UID, (uint32_t)st.st_uid);
	rn_put_u32(&b, RN_F_GID, (uint32_t)st.st_gid);
	file_answer(r, id, &b);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in d (not . and ..), sorted, at most RN_LIST_MAX (*cut when
 * there were more).  NULL (errno) on failure. */
static char **list_names(DIR *d, size_t *n, bool *cut)
{
	size_t cap = 0;
	char **v = NULL, **nv;
	struct dirent *de;

	*n = 0;
	*cut = false;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (*n >= RN_LIST_MAX) {
			*cut = true;
			break;
		}
		if (*n == cap) {
			cap = cap ? cap * 2 : 64;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv)
				goto oom;
			v = nv;
		}
		if (!(v[*n] = strdup(de->d_name)))
			goto oom;
		(*n)++;
	}
	qsort(v, *n, sizeof(*v), name_cmp);
	return v ? v : calloc(1, sizeof(*v));
oom:
	while (*n > 0)
		free(v[--*n]);
	free(v);
	errno = ENOMEM;
	return NULL;
}

static void op_list(struct runner *r, uint32_t id, const struct freq *q)
{
	int fd = open(q->path, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC);
	struct rn_buf b = { 0 }, e = { 0 };
	uint32_t flags = 0;
	struct stat st;
	char **names;
	size_t n, i;
	bool cut;
	DIR *d;

	if (fd < 0)
		return file_fail(r, id, errno, q->path);
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return file_fail(r, id, errno, q->path);
	}
	names = list_names(d, &n, &cut);
	if (!names) {
		closedir(d);
		return file_fail(r, id, errno, q->path);
	}
	for (i = q->offset < n ? (size_t)q->offset : n; i < n; i++) {
		if (b.len >= RN_LIST_BUDGET) {
			flags |= RN_FFLAG_MORE;
			break;
		}
		e.len = 0;
		rn_put_str(&e, RN_F_NAME, names[i]);
		if (fstatat(dirfd(d), names[i], &st, AT_SYMLINK_NOFOLLOW) == 0)
			put_stat(&e, &st);
		else
			rn_put_u32(&e, RN_F_FTYPE, RN_FT_OTHER); /* gone meanwhile */
		rn_put_bytes(&b, RN_F_ENTRY, e.data, (uint32_t)e.len);
	}
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(d);
	rn_buf_free(&e);
	if (cut)
		flags |= RN_FFLAG_CUT;
	rn_put_u32(&b, RN_F_FFLAGS, flags);
	file_answer(r, id, &b);
}

static void op_mkdir(struct runner *r, uint32_t id, const struct freq *q)
{
	struct rn_buf b = { 0 };
	mode_t mode = q->mode ? q->mode & 07777 : 0755;
	int rc = q->flags & RN_FFLAG_PARENTS ? mkdir_parents(q->path, mode) : mkdir(q->path, mode);

	if (rc < 0)
		return file_fail(r, id, errno, q->path);
	file_answer(r, id, &b);
}

static void op_remove(struct runner *r, uint32_t id, const struct freq *q)
{
	struct rn_buf b = { 0 };
	struct stat st;
	const char *base;
	char *dir;
	int dfd, rc;

	if (lstat(q->path, &st) < 0)
		return file_fail(r, id, errno, q->path);
	if (!S_ISDIR(st.st_mode))
		rc = unlink(q->path);
	else if (!(q->flags & RN_FFLAG_RECURSIVE))
		rc = rmdir(q->path);
	else {
		dir = split_dir(q->path, &base);
		if (!dir)
			return file_fail(r, id, errno, q->path);
		dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		free(dir);
		if (dfd < 0)
			return file_fail(r, id, errno, q->path);
		rc = remove_at(dfd, base, 0);
		close(dfd);
	}
	if (rc < 0)
		return file_fail(r, id, errno, q->path);
	file_answer(r, id, &b);
}

static void op_rename(struct runner *r, uint32_t id, const struct freq *q)
{
	struct rn_buf b = { 0 };

	if (rename(q->path, q->path2) < 0)
		return file_fail(r, id, errno, q->path);
	file_answer(r, id, &b);
}

/* The canonical path of path or, where that does not exist (yet), of its
 * nearest existing ancestor, into real[PATH_MAX].  0, or -1 (errno; EINVAL
 * when ".." follows a part that does not exist: rn_path_climbs). */
static int near_real(const char *path, char *real)
{
	char *cur = strdup(path), *slash;
	bool climbs;

	if (!cur)
		return (errno = ENOMEM), -1;
	while (!realpath(cur, real)) {
		if ((errno != ENOENT && errno != ENOTDIR) || !(slash = strrchr(cur, '/')) ||
		    slash == cur) {
			int e = errno;

			free(cur);
			return (errno = e), -1;
		}
		*slash = '\0';
	}
	climbs = rn_path_climbs(path + strlen(cur));
	free(cur);
	return climbs ? (errno = EINVAL, -1) : 0;
}

/* ---- writes ------------------------------------------------------------------------ */

/* One WRITE in flight.  Owned by runner->writes; freed by write_end(). */
struct fwrite {
	uint32_t id;
	int dirfd;            /* the target's directory (O_RDONLY: fsync) */
	int fd;               /* the temporary file */
	int oldfd;            /* O_PATH: the file replaced, held past the answer */
	char *base;           /* the target's name in dirfd */
	char *tmp;            /* the temporary file's name in dirfd */
	mode_t mode;
	bool had_old;         /* a file is replaced: its owner is kept */
	uid_t uid;
	gid_t gid;
	uint64_t size;
	struct fwrite *next;
};

static struct fwrite *write_find(struct runner *r, uint32_t id)
{
	for (struct fwrite *w = r->writes; w; w = w->next)
		if (w->id == id)
			return w;
	return NULL;
}

/* Takes w off the list and frees it; with drop, its temporary file goes. */
static void write_end(struct runner *r, struct fwrite *w, bool drop)
{
	for (struct fwrite **pp = &r->writes; *pp; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	if (w->fd >= 0)
		close(w->fd);
	if (w->oldfd >= 0)
		close(w->oldfd);
	if (drop && w->tmp)
		unlinkat(w->dirfd, w->tmp, 0);
	if (w->dirfd >= 0)
		close(w->dirfd);
	free(w->base);
	free(w->tmp);
	free(w);
}

/* The file a WRITE replaces: path itself or, when that is a link, where
 * the link points, dangling or not (a dangling link's target is made), one
 * link at a time up to 40 (ELOOP). */
static char *write_target(const char *path)
{
	char *cur = strdup(path), *next, buf[PATH_MAX];
	struct stat st;
	ssize_t n;

	for (int hops = 0; cur && hops < 40; hops++) {
		if (lstat(cur, &st) < 0 || !S_ISLNK(st.st_mode))
			return cur;
		n = readlink(cur, buf, sizeof(buf) - 1);
		if (n <= 0) {
			free(cur);
			return NULL;
		}
		buf[n] = '\0';
		if (buf[0] == '/') {
			next = strdup(buf);
		} else {
			char *slash = strrchr(cur, '/');
			size_t dl = slash ? (size_t)(slash - cur) + 1 : 0;

			next = malloc(dl + (size_t)n + 1);
			if (next) {
				memcpy(next, cur, dl);
				memcpy(next + dl, buf, (size_t)n + 1);
			}
		}
		free(cur);
		cur = next;
	}
	if (cur) {
		free(cur);
		errno = ELOOP;
	} else {
		errno = ENOMEM;
	}
	return NULL;
}

/* Opens the temporary file of w next to the target. */
static int write_open(struct fwrite *w, const struct freq *q)
{
	static unsigned seq;
	char name[NAME_MAX + 1];
	struct stat st;

	if (fstatat(w->dirfd, w->base, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISDIR(st.st_mode))
			return (errno = EISDIR), -1;
		if (!S_ISREG(st.st_mode))
			return (errno = EINVAL), -1;
		w->had_old = true;
		w->mode = st.st_mode & 07777;
		w->uid = st.st_uid;
		w->gid = st.st_gid;
	} else if (errno != ENOENT) {
		return -1;
	} else {
		w->mode = q->mode ? q->mode & 07777 : 0644;
	}
	snprintf(name, sizeof(name), ".sg-%ld-%u-%u.tmp", (long)getpid(), w->id, ++seq);
	w->tmp = strdup(name);
	if (!w->tmp)
		return (errno = ENOMEM), -1;
	w->fd = openat(w->dirfd, w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (w->fd < 0) {
		free(w->tmp);
		w->tmp = NULL;
		return -1;
	}
	/* Held until the rename or the runner's end: a sweep (write_sweep)
	 * leaves a locked file alone, in whatever pid namespace its writer. */
	(void)flock(w->fd, LOCK_EX | LOCK_NB);
	return 0;
}

/* Whether process pid is gone: none, or a zombie not reaped yet. */
static bool pid_gone(long pid)
{
	char st;

	if (pid <= 0 || (kill((pid_t)pid, 0) < 0 && errno == ESRCH))
		return true;
	return rn_proc_stat(pid, &st, NULL) == 0 && st == 'Z';
}

/* Whether name is the temporary file of one of our writes in flight. */
static bool write_is_ours(struct runner *r, const char *name)
{
	for (struct fwrite *w = r->writes; w; w = w->next)
		if (w->tmp && strcmp(w->tmp, name) == 0)
			return true;
	return false;
}

/* Whether no writer holds the lock of temporary file name in dirfd (its
 * writer, whatever its pid namespace, is gone: locks end with it). */
static bool tmp_unlocked(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	bool free_ = false;

	if (fd < 0)
		return false;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		free_ = flock(fd, LOCK_EX | LOCK_NB) == 0;
	close(fd);
	return free_;
}

/* RN_FFLAG_SWEEP: removes from dirfd the temporary files (".sg-PID-ID-SEQ.tmp",
 * write_open()) of runners that are gone, as one killed outright (SIGKILL)
 * leaves them: unlocked, and of a pid no process has, or ours but for the
 * writes in flight (in a new jail the new runner may have the dead one's
 * pid).  The lock keeps a live writer's file when pids say nothing (two
 * jails, each runner pid 2, writing in one directory).  A runner that
 * lives on keeps its files; a failure only leaves a file. */
static void write_sweep(struct runner *r, int dirfd)
{
	int fd = dup(dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	long pid;
	unsigned id, seq;
	int end;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((e = readdir(d)) != NULL) {
		end = 0;
		if (sscanf(e->d_name, ".sg-%ld-%u-%u.tmp%n", &pid, &id, &seq, &end) != 3 ||
		    end == 0 || e->d_name[end] != '\0')
			continue;
		if (pid == (long)getpid() ? write_is_ours(r, e->d_name) : !pid_gone(pid))
			continue;
		if (tmp_unlocked(dirfd, e->d_name))
			unlinkat(dirfd, e->d_name, 0);
	}
	closedir(d);
}

/* SWEEP: write_sweep on the directory q->path, for a client whose write
 * broke with its runner and whose next operation is not a write there
 * (which would sweep by its flag).  Only temporary files of runners that
 * are gone are removed, wherever the path leads. */
static void op_sweep(struct runner *r, uint32_t id, const struct freq *q)
{
	struct rn_buf b = { 0 };
	int dfd = open(q->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (dfd < 0)
		return file_fail(r, id, errno, q->path);
	write_sweep(r, dfd);
	close(dfd);
	file_answer(r, id, &b);
}

static void op_write(struct runner *r, uint32_t id, const struct freq *q)
{
	struct fwrite *w = calloc(1, sizeof(*w)); /* write_end() */
	char *target = NULL, *dir = NULL;
	const char *base, *where = q->path;

	if (!w)
		return file_fail(r, id, ENOMEM, NULL);
	w->id = id;
	w->dirfd = w->fd = w->oldfd = -1;
	target = write_target(q->path);
	if (!target)
		goto fail;
	dir = split_dir(target, &base);
	if (!dir)
		goto fail;
	if ((q->flags & RN_FFLAG_PARENTS) && mkdir_parents(dir, 0755) < 0) {
		where = dir;
		goto fail;
	}
	w->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	w->base = strdup(base);
	if (w->dirfd < 0 || !w->base) {
		where = dir;
		goto fail;
	}
	if (q->flags & RN_FFLAG_SWEEP)
		write_sweep(r, w->dirfd);
	if (write_open(w, q) < 0)
		goto fail;
	w->next = r->writes;
	r->writes = w;
	free(target);
	free(dir);
	return;
fail:
	{
		int e = errno ? errno : EIO;

		write_end(r, w, true); /* not listed yet: freed, before the answer */
		file_fail(r, id, e, where);
	}
	free(target);
	free(dir);
}

/* Writes all of p to w's file; -1 (errno) on failure. */
static int write_all_fd(int fd, const unsigned char *p, size_t n)
{
	ssize_t k;

	while (n > 0) {
		k = write(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

bool file_stdin(struct runner *r, uint32_t id, const unsigned char *data, size_t len)
{
	struct fwrite *w = write_find(r, id);

	if (!w)
		return false;
	if (write_all_fd(w->fd, data, len) < 0) {
		int e = errno ? errno : EIO;

		/* gone before the answer says so: a client that looks next
		 * finds no temporary file */
		write_end(r, w, true);
		file_fail(r, id, e, "writing the temporary file");
		return true;
	}
	w->size += len;
	return true;
}

/* STDIN_CLOSE: mode, owner, fsync, rename, fsync of the directory. */
bool file_stdin_close(struct runner *r, uint32_t id)
{
	struct fwrite *w = write_find(r, id);
	struct rn_buf b = { 0 };
	const char *step = "fsync";

	if (!w)
		return false;
	if (fchmod(w->fd, w->mode) < 0) {
		step = "chmod";
		goto fail;
	}
	/* Only root can give a file away; anyone else keeps writing as itself. */
	if (w->had_old && fchown(w->fd, w->uid, w->gid) < 0 && errno != EPERM) {
		step = "chown";
		goto fail;
	}
	if (fsync(w->fd) < 0)
		goto fail;
	step = "rename";
	/* The replaced file's last reference goes with oldfd, after the
	 * answer: freeing its blocks is then off the caller's clock. */
	if (w->had_old)
		w->oldfd = openat(w->dirfd, w->base, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (renameat(w->dirfd, w->tmp, w->dirfd, w->base) < 0)
		goto fail;
	free(w->tmp);
	w->tmp = NULL; /* it is the file now */
	fsync(w->dirfd);
	rn_put_u64(&b, RN_F_SIZE, w->size);
	file_answer(r, id, &b);
	write_end(r, w, false);
	return true;
fail:
	{
		int e = errno ? errno : EIO;

		write_end(r, w, true); /* before the answer, as in file_stdin */
		file_fail(r, id, e, step);
	}
	return true;
}

bool file_kill(struct runner *r, uint32_t id)
{
	struct fwrite *w = write_find(r, id);

	if (!w)
		return false;
	write_end(r, w, true);
	file_fail(r, id, ECANCELED, "the write was dropped");
	return true;
}

void file_stop_all(struct runner *r)
{
	while (r->writes)
		write_end(r, r->writes, true);
}

bool file_has_id(struct runner *r, uint32_t id)
{
	return write_find(r, id) != NULL;
}

/* ---- ROOT (capability "files-beneath") ----------------------------------------- */

/* What of a path an operation touches. */
enum touch {
	TOUCH_SELF,   /* the path, links followed: READ, LIST, MKDIR, SWEEP */
	TOUCH_NAME,   /* its directory: the operation acts on the name itself, a
			 link there is not followed (STAT, REMOVE, RENAME) */
	TOUCH_WRITE   /* the directory of the file a WRITE replaces (write_target:
			 a link there is followed) */
};

/* The canonical path of what `how` of path touches (near_real: a part not
 * made yet counts as its nearest existing ancestor) into real[PATH_MAX].
 * 0, or -1 (errno; EINVAL for a name of "." or ".."). */
static int touched(const char *path, enum touch how, char *real)
{
	char *own = NULL, *dir;
	const char *p = path, *base;
	int rc;

	if (how == TOUCH_WRITE && !(p = own = write_target(path)))
		return -1;
	if (how != TOUCH_SELF) {
		dir = split_dir(p, &base);
		free(own);
		if (!dir)
			return -1;
		p = own = dir;
	}
	rc = near_real(p, real);
	free(own);
	return rc;
}

/* A request with ROOT runs only when every path its operation touches
 * leads beneath ROOT (a client keeping an unjailed sandbox's file tools in
 * its directory, in the same round trip).  Otherwise answers (EPERM with
 * PATH, where the path leads; or why it could not be resolved) and returns
 * false.  Checked on paths, just before the operation: a process of the
 * sandbox racing it with a link swap could lead it out, as its own commands
 * can go there anyway (no jail). */
static bool beneath_root(struct runner *r, uint32_t id, const struct freq *q)
{
	enum touch how = q->op == RN_FOP_WRITE ? TOUCH_WRITE :
			 q->op == RN_FOP_STAT || q->op == RN_FOP_REMOVE ||
			 q->op == RN_FOP_RENAME ? TOUCH_NAME : TOUCH_SELF;
	const char *paths[2] = { q->path, q->op == RN_FOP_RENAME ? q->path2 : NULL };
	char root[PATH_MAX], real[PATH_MAX];
	struct rn_buf b = { 0 };

	if (!realpath(q->root, root)) {
		file_fail(r, id, errno, q->root);
		return false;
	}
	for (int i = 0; i < 2 && paths[i]; i++) {
		if (touched(paths[i], how, real) < 0) {
			file_fail(r, id, errno, errno == EINVAL ? "a name of . or .., or .. past a "
				  "part that is not there yet" : paths[i]);
			return false;
		}
		if (!rn_path_beneath(real, root)) {
			rn_put_u32(&b, RN_F_ERRNO, EPERM);
			rn_put_str(&b, RN_F_TEXT, "outside ROOT");
			rn_put_str(&b, RN_F_PATH, real);
			file_answer(r, id, &b);
			return false;
		}
	}
	return true;
}

/* ---- dispatch -------------------------------------------------------------------- */

void file_op(struct runner *r, uint32_t id, const unsigned char *payload, size_t len)
{
	struct freq q;

	if (id == 0 || proc_find(r, id) || kernel_has_id(r, id) || file_has_id(r, id)) {
		rn_send_error(r, id, "request id %u is 0 or already running", id);
		return;
	}
	if (freq_parse(&q, payload, len) < 0) {
		freq_free(&q);
		rn_send_error(r, id, "malformed FILE request");
		return;
	}
	if (q.root && !beneath_root(r, id, &q)) {
		freq_free(&q);
		return;
	}
	errno = 0;
	switch (q.op) {
	case RN_FOP_READ:
		op_read(r, id, &q);
		break;
	case RN_FOP_WRITE:
		op_write(r, id, &q);
		break;
	case RN_FOP_STAT:
		op_stat(r, id, &q);
		break;
	case RN_FOP_LIST:
		op_list(r, id, &q);
		break;
	case RN_FOP_MKDIR:
		op_mkdir(r, id, &q);
		break;
	case RN_FOP_REMOVE:
		op_remove(r, id, &q);
		break;
	case RN_FOP_RENAME:
		op_rename(r, id, &q);
		break;
	case RN_FOP_SWEEP:
		op_sweep(r, id, &q);
		break;
	default:
		rn_send_error(r, id, "unknown file operation %u", q.op);
		break;
	}
	freq_free(&q);
}
