/* Audit row redaction (core/registry/redact.h): which values are secrets,
 * and their keyed hashes. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "core/base/log.h"
#include "core/base/util.h"
#include "core/registry/hostapi.h"
#include "core/registry/redact.h"

#define KEY_LEN 32

static unsigned char key[KEY_LEN];
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

/* Reads the key from fd: exactly KEY_LEN bytes.  Returns 0 or -1. */
static int key_read(int fd)
{
	size_t got = 0;

	while (got < KEY_LEN) {
		ssize_t n = read(fd, key + got, KEY_LEN - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

/* Makes the key file: written under a temporary name, then linked into
 * place, so that two sandgates starting at once agree on one key (the
 * second link fails and that one reads the first's).  Returns 0 or -1. */
static int key_create(const char *path)
{
	char *tmp = sg_xasprintf("%s.%ld.tmp", path, (long)getpid());
	int fd = -1, rc = -1;

	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || sg_random_bytes(key, KEY_LEN) < 0 ||
	    write(fd, key, KEY_LEN) != KEY_LEN || fsync(fd) < 0)
		goto out;
	if (link(tmp, path) == 0)
		rc = 0;
	else if (errno == EEXIST)
		rc = 1; /* another sandgate was first: read its key */
out:
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	free(tmp);
	return rc;
}

static int key_load(const char *path)
{
	int fd = -1, rc;

	for (int attempt = 0; attempt < 2; attempt++) {
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd >= 0)
			break;
		if (errno != ENOENT)
			return -1;
		rc = key_create(path);
		if (rc == 0)
			return 0;
		if (rc < 0)
			return -1;
	}
	if (fd < 0)
		return -1;
	rc = key_read(fd);
	{
		struct stat st;

		if (rc == 0 && fstat(fd, &st) == 0 && st.st_uid == geteuid() && (st.st_mode & 077))
			fchmod(fd, 0600);
	}
	close(fd);
	return rc;
}

/* The per-install key, or, without a state directory, one for this
 * process only (said once: its hashes match no other run's). */
static void key_init(void)
{
	const char *dir = sg_state_dir();
	char *path = dir ? sg_xasprintf("%s/audit.key", dir) : NULL;

	if (!path || key_load(path) < 0) {
		SG_WARN("audit: cannot read or create the key %s (%s): the hashes of this run use a key of their own and match no other run's",
			path ? path : "(no state directory)", strerror(errno));
		if (sg_random_bytes(key, KEY_LEN) < 0)
			abort(); /* no randomness at all: nothing safe to do */
	}
	free(path);
}

/* Content fields and names of secrets, compared with case, '-' and '_'
 * ignored ("API-Key" is "apikey"): one of `exact`, or a name holding one of
 * the parts below (each looked for only where its first letter is: this
 * runs for every key of every audited call). */
static const char *const exact[] = {
	"content", "code", "oldstring", "newstring", "patch", NULL
};

static bool part_at(const char *p)
{
	static const char *const parts[] = {
		"password", "passwd", "passphrase", "privatekey", "secret", "token", "apikey",
		"accesskey", "authorization", "credential", "cookie", NULL
	};

	for (size_t i = 0; parts[i]; i++)
		if (parts[i][0] == p[0] && !strncmp(p, parts[i], strlen(parts[i])))
			return true;
	return false;
}

bool sg_redact_key_is_secret(const char *k)
{
	char norm[64];
	size_t n = 0;

	for (; *k && n < sizeof(norm) - 1; k++)
		if (*k != '_' && *k != '-')
			norm[n++] = (char)tolower((unsigned char)*k);
	norm[n] = '\0';
	for (size_t i = 0; exact[i]; i++)
		if (norm[0] == exact[i][0] && !strcmp(norm, exact[i]))
			return true;
	for (size_t i = 0; i < n; i++)
		if (strchr("pstac", norm[i]) && part_at(norm + i))
			return true;
	return false;
}

json_t *sg_redact_digest(const void *p, size_t n)
{
	char hex[65];

	pthread_once(&key_once, key_init);
	sg_hmac_sha256_hex(key, KEY_LEN, p, n, hex);
	return json_pack("{s:s, s:I}", "hmac_sha256", hex, "len", (json_int_t)n);
}

static json_t *digest(const json_t *v)
{
	char hex[65], *text = NULL;
	const char *p;
	size_t n;

	pthread_once(&key_once, key_init);
	if (json_is_string(v)) {
		p = json_string_value(v);
		n = json_string_length(v);
	} else {
		text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		p = text ? text : "";
		n = strlen(p);
	}
	sg_hmac_sha256_hex(key, KEY_LEN, p, n, hex);
	free(text);
	return json_pack("{s:s, s:I}", "hmac_sha256", hex, "len", (json_int_t)n);
}

static json_t *redact(json_t *v, bool all_values)
{
	json_t *out, *x;
	const char *k;
	size_t i;

	if (all_values && !json_is_object(v))
		return digest(v);
	if (json_is_object(v)) {
		out = json_object();
		json_object_foreach(v, k, x) {
			bool env = !strcmp(k, "envs") || !strcmp(k, "env");

			json_object_set_new(out, k, sg_redact_key_is_secret(k) || (all_values && !json_is_object(x))
							    ? digest(x) : redact(x, env));
		}
		return out;
	}
	if (json_is_array(v)) {
		out = json_array();
		json_array_foreach(v, i, x)
			json_array_append_new(out, redact(x, false));
		return out;
	}
	return json_incref(v);
}

json_t *sg_redact(json_t *args)
{
	return args ? redact(args, false) : json_object();
}
