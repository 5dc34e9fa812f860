/* The runner binary on this host: see binary.h. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/runner/binary.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef RUNNERDIR
#define RUNNERDIR "/usr/local/libexec/sandgate"
#endif

static bool rn_file_ok(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111);
}

/* dir/sandgate-runner into out; false when it does not fit. */
static bool rn_join(char *out, size_t size, const char *dir)
{
	int n = snprintf(out, size, "%s/" RN_BINARY_NAME, dir);

	return n > 0 && (size_t)n < size;
}

static void rn_find(const char *configured, char *out, size_t size)
{
	static const char anchor; /* any object of this .so tells where it is */
	char dir[4096], *slash;
	Dl_info info;

	if (configured && *configured) {
		snprintf(out, size, "%s", configured);
		return;
	}
	if (dladdr(&anchor, &info) && info.dli_fname &&
	    snprintf(dir, sizeof(dir), "%s", info.dli_fname) < (int)sizeof(dir) &&
	    (slash = strrchr(dir, '/'))) {
		*slash = '\0';
		if (rn_join(out, size, dir) && rn_file_ok(out))
			return;
		slash = strrchr(dir, '/');
		if (slash && strcmp(slash, "/.libs") == 0) {
			*slash = '\0';
			if (rn_join(out, size, dir) && rn_file_ok(out))
				return;
		}
	}
	rn_join(out, size, RUNNERDIR);
}

/* Reads all of fd (size bytes) into b->data. */
static int rn_read_all(int fd, struct rn_binary *b, size_t size)
{
	size_t got = 0;
	ssize_t r;

	b->data = malloc(size); /* freed by rn_binary_free() */
	while (b->data && got < size) {
		r = read(fd, b->data + got, size - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	if (!b->data || got != size) {
		free(b->data);
		b->data = NULL;
		return -1;
	}
	b->len = got;
	return 0;
}

int rn_binary_load(struct rn_binary *b, const char *configured, const char *key_hint,
		   char *why, size_t size)
{
	struct stat st;
	int fd, rc;

	memset(b, 0, sizeof(*b));
	rn_find(configured, b->path, sizeof(b->path));
	fd = open(b->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
	    (size_t)st.st_size > RN_BINARY_MAX) {
		snprintf(why, size, "no runner binary at %.160s (%s): build it (make) or "
			 "set %s", b->path, fd < 0 ? strerror(errno) : "not a usable file",
			 key_hint);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	rc = rn_read_all(fd, b, (size_t)st.st_size);
	close(fd);
	if (rc < 0) {
		snprintf(why, size, "cannot read the runner binary %.200s", b->path);
		return -1;
	}
	rn_build_id_bytes(b->data, b->len, b->id);
	return 0;
}

void rn_binary_free(struct rn_binary *b)
{
	free(b->data);
	b->data = NULL;
	b->len = 0;
}
