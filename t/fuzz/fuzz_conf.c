/*
 * Fuzz target: the INI adapter (core/base/conf.c over inih).  The input is a
 * configuration file, optionally followed by a NUL and NUL-separated --set
 * assignments.  The file is loaded from a memfd by its /proc path, validated
 * against the core's keys and a wildcard section like ssh.so's, and every
 * value read back.
 *
 * Oracle: every value the file gave is on the line its source names, beside
 * its key (a quoted value as its escapes read): no line is split into two
 * settings or joined to another (inih reads at most 199 bytes of a line; its
 * continuation lines give a key the text of the next line).
 */
#define _GNU_SOURCE 1
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/base/conf.h"
#include "core/base/keys.h"
#include "core/base/log.h"
#include "t/fuzz/fuzz.h"

static int fd = -1;
static char path[64];

static const struct sg_config_key target_keys[] = {
	{ .key = "host", .help = "h" },
	{ .key = "port", .def = "22", .accepts = "uint", .help = "p" },
	{ .key = "password", .secret = true, .help = "s" },
	{ .key = "mode", .def = "a", .accepts = "a|b|c", .help = "m" },
	{ .key = "flag", .accepts = "bool", .help = "f" },
	{ .key = "env.*", .help = "e" },
	{ 0 }
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	sg_log_set_level(SG_LOG_EMERGENCY);
	/* A SANDGATE_* variable would override the file, and every key read
	 * scans the environment (getenv) several times: run without one, the
	 * same whoever starts the fuzzer. */
	if (clearenv() != 0)
		abort();
	sg_config_reset();
	fd = memfd_create("sandgate.ini", MFD_CLOEXEC);
	if (fd < 0 || fchmod(fd, 0600) < 0)
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return 0;
}

/* Line `no` (1-based) of text[0..n), or NULL; *len its length. */
static const char *nth_line(const char *text, size_t n, long no, size_t *len)
{
	const char *p = text, *end = text + n;

	for (long i = 1; p <= end; i++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));

		if (i == no) {
			*len = nl ? (size_t)(nl - p) : (size_t)(end - p);
			return p;
		}
		if (!nl)
			return NULL;
		p = nl + 1;
	}
	return NULL;
}

/* Whether value is in line[0..len) once both lose their backslashes and
 * double quotes: a quoted value is read without its quotes, and \" and \\
 * inside stand for " and \, so its other bytes are still the line's, in
 * order and together. */
static bool on_line_unquoted(const char *line, size_t len, const char *value)
{
	char *l = malloc(len + 1), *v = malloc(strlen(value) + 1);
	size_t ln = 0, vn = 0;
	bool found;

	FUZZ_ASSERT(l && v);
	for (size_t i = 0; i < len; i++)
		if (line[i] != '\\' && line[i] != '"')
			l[ln++] = line[i];
	for (const char *p = value; *p; p++)
		if (*p != '\\' && *p != '"')
			v[vn++] = *p;
	found = memmem(l, ln, v, vn) != NULL;
	free(l);
	free(v);
	return found;
}

struct check {
	const char *text;
	size_t n;
	const char *section;
};

static void check_key(const char *key, const char *value, void *ud)
{
	struct check *c = ud;
	const char *src = sg_config_source(c->section, key), *colon, *line;
	size_t len;
	long no;

	if (!value || !src || strncmp(src, path, strlen(path)) != 0)
		return; /* from --set */
	colon = strrchr(src, ':');
	FUZZ_ASSERT(colon);
	no = strtol(colon + 1, NULL, 10);
	line = nth_line(c->text, c->n, no, &len);
	FUZZ_ASSERT(line);
	FUZZ_ASSERT(memmem(line, len, key, strlen(key)));
	FUZZ_ASSERT(memmem(line, len, value, strlen(value)) || on_line_unquoted(line, len, value));
}

/* Each "[name]" of the text, checked once. */
static void check_sections(const char *text, size_t n)
{
	struct check c = { text, n, "" };
	const char *p = text, *end = text + n;
	char seen[32][256];
	size_t n_seen = 0;

	sg_config_each("", "", check_key, &c);
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p)), *e = nl ? nl : end;
		const char *q = p;
		char section[256];

		while (q < e && (*q == ' ' || *q == '\t'))
			q++;
		if (q < e && *q == '[') {
			const char *close = memchr(q, ']', (size_t)(e - q));

			if (close && (size_t)(close - q - 1) < sizeof(section)) {
				memcpy(section, q + 1, (size_t)(close - q - 1));
				section[close - q - 1] = '\0';
				bool done = false;

				for (size_t i = 0; i < n_seen && !done; i++)
					done = !strcmp(seen[i], section);
				if (!done && n_seen < 32)
					memcpy(seen[n_seen++], section, strlen(section) + 1);
				c.section = section;
				if (!done)
					sg_config_each(section, "", check_key, &c);
			}
		}
		p = e + 1;
	}
}

static void noop_key(const char *section, const struct sg_config_key *k, const char *value,
		     const char *source, void *ud)
{
	(void)section;
	(void)k;
	(void)value;
	(void)source;
	(void)ud;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data, *nul = memchr(data, '\0', size);
	size_t n = nul ? (size_t)(nul - text) : size;
	struct sg_err err = { 0 };

	/* reset at the end of the last input */
	sg_core_keys_register();
	sg_config_register("ssh.target.*", target_keys);
	if (ftruncate(fd, 0) < 0 || pwrite(fd, text, n, 0) != (ssize_t)n)
		abort();
	if (nul) {
		for (const char *p = nul + 1, *end = text + size; p < end;) {
			const char *z = memchr(p, '\0', (size_t)(end - p));
			size_t k = z ? (size_t)(z - p) : (size_t)(end - p);
			char *a = strndup(p, k);

			(void)sg_config_set_override(a, &err);
			free(a);
			p += k + 1;
		}
	}
	if (sg_config_load(path, &err) == 0) {
		(void)sg_config_validate(&err);
		check_sections(text, n);
		(void)sg_config_int("server", "port", 0);
		(void)sg_config_bool("server", "ephemeral_token", false);
		sg_config_each_key(noop_key, NULL);
		sg_config_freeze();
		(void)sg_config_get("server", "port");
		(void)sg_config_get("server", "port");
	}
	sg_config_reset();
	return 0;
}
