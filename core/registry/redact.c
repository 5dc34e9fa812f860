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

#include "core/base/buf.h"
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

/* k with case, '-' and '_' dropped into norm (cut at its size); its length. */
static size_t normalise(const char *k, char *norm, size_t size)
{
	size_t n = 0;

	for (; *k && n < size - 1; k++)
		if (*k != '_' && *k != '-')
			norm[n++] = (char)tolower((unsigned char)*k);
	norm[n] = '\0';
	return n;
}

/* A name of a secret, normalised: one holding a part above, or "key" or a
 * name ending in it (ssh_key, signing-key). */
static bool names_secret(const char *norm, size_t n)
{
	if (n >= 3 && !strcmp(norm + n - 3, "key"))
		return true;
	for (size_t i = 0; i < n; i++)
		if (strchr("pstac", norm[i]) && part_at(norm + i))
			return true;
	return false;
}

bool sg_redact_key_is_secret(const char *k)
{
	char norm[64];
	size_t n = normalise(k, norm, sizeof(norm));

	for (size_t i = 0; exact[i]; i++)
		if (norm[0] == exact[i][0] && !strcmp(norm, exact[i]))
			return true;
	return names_secret(norm, n);
}

bool sg_redact_key_names_secret(const char *k)
{
	char norm[64];

	return names_secret(norm, normalise(k, norm, sizeof(norm)));
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

/* ---- results ------------------------------------------------------------------ */

/* Appends to out every string under v (v itself included). */
static void strings_under(json_t *v, json_t *out)
{
	const char *k;
	json_t *x;
	size_t i;

	if (json_is_string(v) && json_string_length(v) >= SG_REDACT_MIN_SECRET)
		json_array_append(out, v);
	else if (json_is_object(v))
		json_object_foreach(v, k, x)
			strings_under(x, out);
	else if (json_is_array(v))
		json_array_foreach(v, i, x)
			strings_under(x, out);
}

static void collect(json_t *v, json_t *out)
{
	const char *k;
	json_t *x;
	size_t i;

	if (json_is_object(v)) {
		json_object_foreach(v, k, x) {
			if (sg_redact_key_names_secret(k))
				strings_under(x, out);
			else
				collect(x, out);
		}
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, x)
			collect(x, out);
	}
}

json_t *sg_redact_secrets(json_t *args)
{
	json_t *out = json_array();

	collect(args, out);
	if (json_array_size(out))
		return out;
	json_decref(out);
	return NULL;
}

/* s[0..n) with every occurrence of each secret replaced, or NULL when it
 * holds none.  New string (the caller's). */
static char *scrub_text(const char *s, size_t n, json_t *secrets, size_t *out_len)
{
	struct sg_buf b = { 0 };
	size_t i = 0, from = 0, k;
	json_t *x;
	bool hit = false;

	while (i < n) {
		size_t len = 0;

		json_array_foreach(secrets, k, x) {
			size_t l = json_string_length(x);

			if (l <= n - i && !memcmp(s + i, json_string_value(x), l)) {
				len = l;
				break;
			}
		}
		if (!len) {
			i++;
			continue;
		}
		hit = true;
		if (sg_buf_append(&b, s + from, i - from) < 0 ||
		    sg_buf_append(&b, SG_REDACTED, strlen(SG_REDACTED)) < 0)
			abort(); /* out of memory: the sg_xmalloc policy */
		i += len;
		from = i;
	}
	if (!hit)
		return NULL;
	if (sg_buf_append(&b, s + from, n - from) < 0)
		abort();
	*out_len = b.len;
	return b.data;
}

/* True when s[0..n) may hold a secret: the first byte of one is there. */
static bool may_hold(const char *s, size_t n, json_t *secrets)
{
	size_t k;
	json_t *x;

	json_array_foreach(secrets, k, x)
		if (memchr(s, json_string_value(x)[0], n))
			return true;
	return false;
}

char *sg_redact_text(const char *s, size_t n, json_t *secrets, size_t *out_len)
{
	return secrets && may_hold(s, n, secrets) ? scrub_text(s, n, secrets, out_len) : NULL;
}

/* x scrubbed: a new string when x is a string that held a secret, else
 * NULL (a container is scrubbed in place). */
static json_t *scrubbed(json_t *x, json_t *secrets)
{
	size_t n, len;
	char *t;
	json_t *out;

	if (!json_is_string(x)) {
		sg_redact_scrub(x, secrets);
		return NULL;
	}
	n = json_string_length(x);
	t = sg_redact_text(json_string_value(x), n, secrets, &len);
	out = t ? json_stringn_nocheck(t, len) : NULL;
	free(t);
	return out;
}

void sg_redact_scrub(json_t *v, json_t *secrets)
{
	const char *k;
	json_t *x, *y;
	size_t i;

	if (!secrets || !v)
		return;
	if (json_is_object(v)) {
		json_object_foreach(v, k, x)
			if ((y = scrubbed(x, secrets)))
				json_object_set_new(v, k, y);
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, x)
			if ((y = scrubbed(x, secrets)))
				json_array_set_new(v, i, y);
	}
}
