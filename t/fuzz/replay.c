/*
 * main() for a fuzz target built without libFuzzer: replays every input of
 * the target's corpus in the tree (t/fuzz/corpus/FUZZ_NAME, found through
 * SG_TEST_SRCDIR) or the files and folders given as arguments, one TAP test
 * point each.  An input that breaks a target's invariant aborts the program,
 * which the TAP driver reports as an error after the last "ok".
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "t/fuzz/fuzz.h"

#define REPLAY_MAX_INPUT (16u << 20)

struct names {
	char **v;
	size_t n, cap;
};

static void names_add(struct names *s, const char *path)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 64;
		s->v = realloc(s->v, s->cap * sizeof(*s->v));
		if (!s->v)
			abort();
	}
	s->v[s->n] = strdup(path);
	if (!s->v[s->n])
		abort();
	s->n++;
}

static int cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Adds path, or every regular file in it when it is a folder.  Returns 0,
 * or -1 when it cannot be read. */
static int collect(struct names *s, const char *path)
{
	struct stat st;
	DIR *d;
	struct dirent *e;

	if (stat(path, &st) < 0) {
		printf("Bail out! %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		names_add(s, path);
		return 0;
	}
	d = opendir(path);
	if (!d) {
		printf("Bail out! %s: %s\n", path, strerror(errno));
		return -1;
	}
	while ((e = readdir(d))) {
		char full[4096];

		if (e->d_name[0] == '.')
			continue;
		snprintf(full, sizeof(full), "%s/%s", path, e->d_name);
		if (stat(full, &st) == 0 && S_ISREG(st.st_mode))
			names_add(s, full);
	}
	closedir(d);
	return 0;
}

/* Reads a whole file into a malloc'd buffer of exactly its size (ASan then
 * sees a read past the end, as under libFuzzer).  Returns NULL on error. */
static uint8_t *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long len;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && (size_t)len <= REPLAY_MAX_INPUT &&
	    fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc(len ? (size_t)len : 1);
		if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) {
			free(buf);
			buf = NULL;
		}
		*n = (size_t)len;
	}
	fclose(f);
	return buf;
}

int main(int argc, char **argv)
{
	struct names s = { 0 };
	const char *srcdir = getenv("SG_TEST_SRCDIR");
	char dir[4096];
	int failed = 0;

	if (argc > 1) {
		for (int i = 1; i < argc; i++)
			if (collect(&s, argv[i]) < 0)
				return 1;
	} else {
		snprintf(dir, sizeof(dir), "%s/t/fuzz/corpus/%s", srcdir ? srcdir : ".", FUZZ_NAME);
		if (collect(&s, dir) < 0)
			return 1;
	}
	if (s.n == 0) {
		printf("Bail out! no input for fuzz target %s: the corpus is empty\n", FUZZ_NAME);
		return 1;
	}
	qsort(s.v, s.n, sizeof(*s.v), cmp);
	LLVMFuzzerInitialize(&argc, &argv);
	printf("1..%zu\n", s.n);
	for (size_t i = 0; i < s.n; i++) {
		size_t n = 0;
		uint8_t *data = slurp(s.v[i], &n);
		const char *base = strrchr(s.v[i], '/');

		if (!data) {
			printf("not ok %zu - %s: cannot read it\n", i + 1, s.v[i]);
			failed = 1;
			continue;
		}
		fflush(stdout);
		LLVMFuzzerTestOneInput(data, n);
		printf("ok %zu - %s %s (%zu bytes)\n", i + 1, FUZZ_NAME, base ? base + 1 : s.v[i], n);
		free(data);
		free(s.v[i]);
	}
	free(s.v);
	return failed;
}
