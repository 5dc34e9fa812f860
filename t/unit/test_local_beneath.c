/*
 * The host side of a local sandbox directory (plugins/local/beneath.c):
 * resolving beneath it in one step, and removing it without following a
 * link.  Built twice: with openat2 (RESOLVE_BENEATH) and with the O_PATH
 * walk that kernels before 5.6 get (LOCAL_BENEATH_NO_OPENAT2).
 *
 * Checked: ".." (openat2 lets through what stays inside, the walk refuses
 * it), absolute links, links out, a link as the last component, magic
 * links, absolute paths, and a race: a thread swaps a
 * directory for a link to an outside directory and back in a loop while
 * opens of a file through it run; not one open may reach the outside file.
 * Removal of a tree holding links to outside files and directories, and an
 * unwritable subdirectory, removes the tree and nothing outside.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "plugins/local/local.h"
#include "t/lib/fakehost.h"

static char top[256], inside[300], outside[300];

static int at(char *out, size_t n, const char *base, const char *name)
{
	return snprintf(out, n, "%s/%s", base, name);
}

static void put(const char *base, const char *name, const char *text)
{
	char p[600];
	int fd;

	at(p, sizeof(p), base, name);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0) {
		if (write(fd, text, strlen(text)) < 0)
			fakehost_ok(0, "write %s", p);
		close(fd);
	}
}

static void lnk(const char *target, const char *base, const char *name)
{
	char p[600];

	at(p, sizeof(p), base, name);
	if (symlink(target, p) < 0)
		fakehost_ok(0, "symlink %s: %s", p, strerror(errno));
}

/* Opens path beneath the inside dir: the fd's first bytes, or "" with errno. */
static int read_beneath(int dfd, const char *path, char *buf, size_t n)
{
	int fd = local_open_beneath(dfd, path, O_RDONLY, 0);
	ssize_t r;

	buf[0] = '\0';
	if (fd < 0)
		return -1;
	r = read(fd, buf, n - 1);
	buf[r > 0 ? r : 0] = '\0';
	close(fd);
	return 0;
}

static void test_resolution(int dfd)
{
	char buf[64];
	int rc;

	rc = read_beneath(dfd, "sub/file", buf, sizeof(buf));
	fakehost_ok(rc == 0 && strcmp(buf, "inside\n") == 0, "a file beneath opens");
	rc = read_beneath(dfd, "sub/../sub/file", buf, sizeof(buf));
#ifdef LOCAL_BENEATH_NO_OPENAT2
	fakehost_ok(rc < 0, "the walk refuses \"..\" (errno %d) even where it would stay inside", errno);
#else
	fakehost_ok(rc == 0 && strcmp(buf, "inside\n") == 0, "openat2 lets \"..\" that stays inside through");
#endif
	rc = read_beneath(dfd, "../outside/secret", buf, sizeof(buf));
	fakehost_ok(rc < 0 && !strstr(buf, "secret"), "../ out of the directory is refused");
	rc = read_beneath(dfd, "abs/secret", buf, sizeof(buf));
	fakehost_ok(rc < 0 && !strstr(buf, "secret"), "an absolute link out is refused");
	rc = read_beneath(dfd, "rel/secret", buf, sizeof(buf));
	fakehost_ok(rc < 0 && !strstr(buf, "secret"), "a relative link out is refused");
	rc = read_beneath(dfd, "filelink", buf, sizeof(buf));
	fakehost_ok(rc < 0 && !strstr(buf, "secret"), "a link as the last component is not followed");
	rc = read_beneath(dfd, "proc/self/root/etc/passwd", buf, sizeof(buf));
	fakehost_ok(rc < 0, "a magic link is refused");
	rc = read_beneath(dfd, "/etc/passwd", buf, sizeof(buf));
	fakehost_ok(rc < 0, "an absolute path is refused");
	rc = local_open_beneath(dfd, "sub", O_RDONLY | O_DIRECTORY, 0);
	fakehost_ok(rc >= 0, "a directory beneath opens");
	if (rc >= 0)
		close(rc);
}

struct swapper {
	char d[600], tmp[600];
	atomic_bool stop;
	atomic_ulong swaps;
};

/* d flips between a directory with a file and a link to outside. */
static void *swap_main(void *arg)
{
	struct swapper *s = arg;

	while (!atomic_load(&s->stop)) {
		char f[700];

		mkdir(s->tmp, 0755);
		snprintf(f, sizeof(f), "%s/secret", s->tmp);
		close(open(f, O_WRONLY | O_CREAT, 0644));
		rename(s->tmp, s->d); /* only onto an empty slot or a link? a dir replaces a dir */
		unlink(f);
		rmdir(s->tmp);
		snprintf(f, sizeof(f), "%s/secret", s->d);
		unlink(f);
		rmdir(s->d);
		if (symlink(outside, s->tmp) == 0)
			rename(s->tmp, s->d);
		atomic_fetch_add(&s->swaps, 1);
		unlink(s->d);
	}
	return NULL;
}

static void test_race(int dfd)
{
	struct swapper s = { .stop = false };
	struct stat out_st, st;
	char secret[600];
	pthread_t th;
	int leaks = 0, opened = 0;

	at(s.d, sizeof(s.d), inside, "race");
	at(s.tmp, sizeof(s.tmp), inside, "race.tmp");
	at(secret, sizeof(secret), outside, "secret");
	stat(secret, &out_st);
	pthread_create(&th, NULL, swap_main, &s);
	/* 200000 opens, and on a loaded machine (the swapper starved) on until
	 * it has swapped 200 times, for a minute at most */
	for (long i = 0, until = time(NULL) + 60;
	     i < 200000 || (atomic_load(&s.swaps) < 200 && time(NULL) < until); i++) {
		int fd = local_open_beneath(dfd, "race/secret", O_RDONLY, 0);

		if (fd < 0)
			continue;
		opened++;
		if (fstat(fd, &st) == 0 && st.st_ino == out_st.st_ino && st.st_dev == out_st.st_dev)
			leaks++;
		close(fd);
	}
	atomic_store(&s.stop, true);
	pthread_join(th, NULL);
	fakehost_ok(leaks == 0 && atomic_load(&s.swaps) > 100, "200000 opens and more through a name "
		    "swapped %lu times between a directory and a link out: %d opened inside, %d reached "
		    "outside", atomic_load(&s.swaps), opened, leaks);
}

static void test_remove(void)
{
	char tree[300], p[600];
	struct stat st;
	int pfd = open(top, O_RDONLY | O_DIRECTORY);

	at(tree, sizeof(tree), top, "tree");
	mkdir(tree, 0755);
	at(p, sizeof(p), tree, "deep");
	mkdir(p, 0755);
	at(p, sizeof(p), tree, "deep/er");
	mkdir(p, 0755);
	lnk(outside, tree, "deep/er/dirlink");
	lnk(outside, tree, "dirlink");
	at(p, sizeof(p), outside, "secret");
	lnk(p, tree, "filelink");
	lnk("/", tree, "rootlink");
	at(p, sizeof(p), tree, "ro");
	mkdir(p, 0755);
	put(p, "f", "x");
	chmod(p, 0500);
	fakehost_ok(local_remove_tree(pfd, "tree") == 0 && stat(tree, &st) < 0,
		    "a tree with links out and an unwritable directory is removed");
	at(p, sizeof(p), outside, "secret");
	fakehost_ok(stat(p, &st) == 0 && stat(outside, &st) == 0 && stat("/usr/bin", &st) == 0,
		    "... and nothing its links point to");
	lnk(outside, top, "toplink");
	fakehost_ok(local_remove_tree(pfd, "toplink") < 0 && stat(outside, &st) == 0,
		    "removing a link as if it were the tree fails, following nothing");
	close(pfd);
}

/* A chain of `depth` directories in dir, the last holding a file and an
 * unwritable directory; built by descriptors (its path is far longer than
 * PATH_MAX). */
static void make_chain(int dir, int depth)
{
	int fd = dup(dir);

	for (int i = 0; i < depth && fd >= 0; i++) {
		int next;

		mkdirat(fd, "d", 0755);
		next = openat(fd, "d", O_RDONLY | O_DIRECTORY);
		close(fd);
		fd = next;
	}
	if (fd >= 0) {
		close(openat(fd, "f", O_WRONLY | O_CREAT, 0644));
		mkdirat(fd, "ro", 0500);
		close(fd);
	}
}

/* A sandbox's chain of 3,000 directories is removed with 32 descriptors
 * allowed (a recursion held two a level and gave up past 1,024 deep: the
 * directory stayed on the host for good). */
static void test_remove_deep(void)
{
	struct rlimit old, low;
	char tree[300];
	struct stat st;
	int pfd = open(top, O_RDONLY | O_DIRECTORY), tfd, rc;

	at(tree, sizeof(tree), top, "chain");
	mkdir(tree, 0755);
	tfd = open(tree, O_RDONLY | O_DIRECTORY);
	make_chain(tfd, 3000);
	close(tfd);
	getrlimit(RLIMIT_NOFILE, &old);
	low = old;
	low.rlim_cur = 32;
	setrlimit(RLIMIT_NOFILE, &low);
	rc = local_remove_tree(pfd, "chain");
	setrlimit(RLIMIT_NOFILE, &old);
	fakehost_ok(rc == 0 && stat(tree, &st) < 0 && errno == ENOENT,
		    "a chain of 3000 directories is removed within 32 descriptors (rc %d)", rc);
	close(pfd);
}

int main(void)
{
	char p[600], cmd[700];
	int dfd;

	snprintf(top, sizeof(top), "/tmp/sg-beneath-XXXXXX");
	if (!mkdtemp(top)) {
		printf("Bail out! mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	at(inside, sizeof(inside), top, "inside");
	at(outside, sizeof(outside), top, "outside");
	mkdir(inside, 0755);
	mkdir(outside, 0755);
	put(outside, "secret", "secret\n");
	at(p, sizeof(p), inside, "sub");
	mkdir(p, 0755);
	put(p, "file", "inside\n");
	lnk(outside, inside, "abs");
	lnk("../outside", inside, "rel");
	at(p, sizeof(p), outside, "secret");
	lnk(p, inside, "filelink");
	lnk("/proc", inside, "proc");
	dfd = open(inside, O_RDONLY | O_DIRECTORY);
	test_resolution(dfd);
	test_race(dfd);
	close(dfd);
	test_remove();
	test_remove_deep();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", top);
	return fakehost_done();
}
