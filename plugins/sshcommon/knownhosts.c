/*
 * Host keys against an OpenSSH known_hosts file, through libssh2's knownhost
 * API (sshcommon.h).  We read the file ourselves, line by line, because
 * libssh2 1.10's readfile() stops at the first line it cannot parse and does
 * not know the @revoked / @cert-authority markers: @revoked lines go into a
 * collection of their own (a match refuses), @cert-authority lines are
 * skipped (host certificates are not supported), unparsable lines are
 * skipped with a debug note.  We also remember each entry's line number for
 * messages.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/sshcommon/sshcommon.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define SSHC_PATH_MAX 4096
#define SSHC_NAME_MAX 300   /* "[host]:port" */

/* One append to a known_hosts file at a time in this plugin (flock() keeps
 * other processes, and the other plugin, out). */
static pthread_mutex_t sshc_kh_lock = PTHREAD_MUTEX_INITIALIZER;

struct sshc_kh_line {
	const struct libssh2_knownhost *entry; /* borrowed from kh */
	int line;
};

struct sshc_known {
	const struct sg_host_api *host;   /* borrowed */
	const char *plugin;               /* borrowed: the log module */
	const char *path;                 /* borrowed from the peer */
	LIBSSH2_KNOWNHOSTS *kh;           /* owned */
	LIBSSH2_KNOWNHOSTS *revoked;      /* owned: the @revoked lines */
	struct sshc_kh_line *lines;       /* owned */
	size_t n, cap;
};

/* The key types known_hosts names, in our order of preference. */
static const struct sshc_ktype {
	int kh;            /* LIBSSH2_KNOWNHOST_KEY_* */
	int hk;            /* LIBSSH2_HOSTKEY_TYPE_* */
	const char *alg;   /* host key algorithm */
	const char *label; /* as ssh-keygen -l prints it */
	const char *scan;  /* ssh-keyscan -t */
} sshc_ktypes[] = {
	{ LIBSSH2_KNOWNHOST_KEY_ED25519, LIBSSH2_HOSTKEY_TYPE_ED25519, "ssh-ed25519", "ED25519", "ed25519" },
	{ LIBSSH2_KNOWNHOST_KEY_ECDSA_256, LIBSSH2_HOSTKEY_TYPE_ECDSA_256, "ecdsa-sha2-nistp256", "ECDSA", "ecdsa" },
	{ LIBSSH2_KNOWNHOST_KEY_ECDSA_384, LIBSSH2_HOSTKEY_TYPE_ECDSA_384, "ecdsa-sha2-nistp384", "ECDSA", "ecdsa" },
	{ LIBSSH2_KNOWNHOST_KEY_ECDSA_521, LIBSSH2_HOSTKEY_TYPE_ECDSA_521, "ecdsa-sha2-nistp521", "ECDSA", "ecdsa" },
	{ LIBSSH2_KNOWNHOST_KEY_SSHRSA, LIBSSH2_HOSTKEY_TYPE_RSA, "ssh-rsa", "RSA", "rsa" },
	{ LIBSSH2_KNOWNHOST_KEY_SSHDSS, LIBSSH2_HOSTKEY_TYPE_DSS, "ssh-dss", "DSA", "dsa" },
};
#define SSHC_NKTYPES (sizeof(sshc_ktypes) / sizeof(sshc_ktypes[0]))

static const struct sshc_ktype *sshc_ktype_of(int hostkey_type)
{
	for (size_t i = 0; i < SSHC_NKTYPES; i++)
		if (sshc_ktypes[i].hk == hostkey_type)
			return &sshc_ktypes[i];
	return NULL;
}

static void sshc_debug(const struct sshc_known *k, const char *fmt, ...) SG_PRINTF(2, 3);

static void sshc_debug(const struct sshc_known *k, const char *fmt, ...)
{
	char line[SSHC_PATH_MAX + 200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	k->host->log(SG_LOG_DEBUG, k->plugin, "%s", line);
}

/* ---- fingerprints ------------------------------------------------------------------ */

/* Base64 without padding, as OpenSSH prints SHA256 fingerprints. */
static void sshc_b64_nopad(const unsigned char *p, size_t n, char *out, size_t size)
{
	static const char tbl[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t o = 0;

	for (size_t i = 0; i < n && o + 5 < size; i += 3) {
		unsigned v = (unsigned)p[i] << 16;

		if (i + 1 < n)
			v |= (unsigned)p[i + 1] << 8;
		if (i + 2 < n)
			v |= p[i + 2];
		out[o++] = tbl[(v >> 18) & 63];
		out[o++] = tbl[(v >> 12) & 63];
		if (i + 1 < n)
			out[o++] = tbl[(v >> 6) & 63];
		if (i + 2 < n)
			out[o++] = tbl[v & 63];
	}
	out[o] = '\0';
}

void sshc_fingerprint(LIBSSH2_SESSION *s, char *out, size_t n)
{
	const char *h = libssh2_hostkey_hash(s, LIBSSH2_HOSTKEY_HASH_SHA256);
	char b64[64];

	if (!h) {
		snprintf(out, n, "(no SHA256 fingerprint)");
		return;
	}
	sshc_b64_nopad((const unsigned char *)h, 32, b64, sizeof(b64));
	snprintf(out, n, "SHA256:%s", b64);
}

/* ---- loading ------------------------------------------------------------------------ */

static int sshc_known_note(struct sshc_known *k, const struct libssh2_knownhost *e, int line)
{
	if (k->n == k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 32;
		struct sshc_kh_line *nl = realloc(k->lines, cap * sizeof(*nl));

		if (!nl)
			return -1;
		k->lines = nl;
		k->cap = cap;
	}
	k->lines[k->n].entry = e;
	k->lines[k->n].line = line;
	k->n++;
	return 0;
}

static int sshc_known_line_of(const struct sshc_known *k, const struct libssh2_knownhost *e)
{
	for (size_t i = 0; i < k->n; i++)
		if (k->lines[i].entry == e)
			return k->lines[i].line;
	return 0;
}

/* Feeds one line to kh and records the entries it added. */
static void sshc_known_feed(struct sshc_known *k, const char *line, size_t len, int lineno,
			    struct libssh2_knownhost **last)
{
	struct libssh2_knownhost *e;

	if (libssh2_knownhost_readline(k->kh, line, len, LIBSSH2_KNOWNHOST_FILE_OPENSSH) != 0) {
		sshc_debug(k, "%s:%d: line skipped (libssh2 cannot parse it)", k->path, lineno);
		return;
	}
	while (libssh2_knownhost_get(k->kh, &e, *last) == 0) {
		if (sshc_known_note(k, e, lineno) < 0)
			return;
		*last = e;
	}
}

static void sshc_known_parse(struct sshc_known *k, FILE *fp)
{
	struct libssh2_knownhost *last = NULL;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int lineno = 0;

	while ((len = getline(&line, &cap, fp)) >= 0) {
		char *p = line;

		lineno++;
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p || *p == '#' || *p == '\n' || *p == '\r')
			continue;
		if (strncmp(p, "@revoked", 8) == 0 && (p[8] == ' ' || p[8] == '\t')) {
			p += 9;
			if (libssh2_knownhost_readline(k->revoked, p, strlen(p),
						       LIBSSH2_KNOWNHOST_FILE_OPENSSH) != 0)
				sshc_debug(k, "%s:%d: @revoked line not understood", k->path, lineno);
			continue;
		}
		if (*p == '@') {
			sshc_debug(k, "%s:%d: marker line skipped (host certificates are not supported)",
				   k->path, lineno);
			continue;
		}
		sshc_known_feed(k, p, strlen(p), lineno, &last);
	}
	free(line);
}

struct sshc_known *sshc_known_load(const struct sg_host_api *host, LIBSSH2_SESSION *s,
				   const struct sshc_peer *p, struct sg_err *err)
{
	struct sshc_known *k = calloc(1, sizeof(*k)); /* freed by sshc_known_free() */
	FILE *fp;

	if (!k) {
		host->errf(err, SG_E_NOMEM, "%s: out of memory", p->plugin);
		return NULL;
	}
	k->host = host;
	k->plugin = p->plugin;
	k->path = p->known_hosts;
	k->kh = libssh2_knownhost_init(s);
	k->revoked = libssh2_knownhost_init(s);
	if (!k->kh || !k->revoked) {
		sshc_known_free(k);
		host->errf(err, SG_E_NOMEM, "%s: out of memory", p->plugin);
		return NULL;
	}
	fp = fopen(p->known_hosts, "re");
	if (!fp) {
		if (errno == ENOENT || p->policy == SSHC_OFF)
			return k; /* nothing is known yet */
		host->errf(err, SG_E_IO, "%s: cannot read known_hosts file '%s': %s (set %s)", p->plugin,
			   p->known_hosts, strerror(errno), p->known_key);
		sshc_known_free(k);
		return NULL;
	}
	sshc_known_parse(k, fp);
	fclose(fp);
	return k;
}

void sshc_known_free(struct sshc_known *k)
{
	if (!k)
		return;
	if (k->kh)
		libssh2_knownhost_free(k->kh);
	if (k->revoked)
		libssh2_knownhost_free(k->revoked);
	free(k->lines);
	free(k);
}

/* ---- algorithm preference ------------------------------------------------------------ */

/* True when known_hosts holds a key of type kt for the peer: a check with a
 * key that cannot match says MISMATCH exactly then. */
static bool sshc_known_has_type(const struct sshc_known *k, const struct sshc_peer *p, int kt)
{
	int r = libssh2_knownhost_checkp(k->kh, p->host, (int)p->port, "AAAA", 0,
					 LIBSSH2_KNOWNHOST_TYPE_PLAIN |
					 LIBSSH2_KNOWNHOST_KEYENC_BASE64 | kt, NULL);

	return r == LIBSSH2_KNOWNHOST_CHECK_MISMATCH;
}

static bool sshc_alg_supported(const char **algs, int n, const char *alg)
{
	for (int i = 0; i < n; i++)
		if (strcmp(algs[i], alg) == 0)
			return true;
	return false;
}

static void sshc_pref_add(char *pref, size_t size, const char *alg)
{
	size_t len = strlen(pref), an = strlen(alg);
	const char *p = pref;

	while ((p = strstr(p, alg)) != NULL) {
		if ((p == pref || p[-1] == ',') && (p[an] == ',' || p[an] == '\0'))
			return; /* already there */
		p += an;
	}
	if (len + an + 2 > size)
		return;
	if (len)
		pref[len++] = ',';
	memcpy(pref + len, alg, an + 1);
}

void sshc_known_prefer(struct sshc_known *k, LIBSSH2_SESSION *s, const struct sshc_peer *p)
{
	const char **algs = NULL;
	char pref[512] = "";
	int n = libssh2_session_supported_algs(s, LIBSSH2_METHOD_HOSTKEY, &algs);

	if (n <= 0)
		return;
	for (size_t i = 0; i < SSHC_NKTYPES; i++)
		if (sshc_alg_supported(algs, n, sshc_ktypes[i].alg) &&
		    sshc_known_has_type(k, p, sshc_ktypes[i].kh))
			sshc_pref_add(pref, sizeof(pref), sshc_ktypes[i].alg);
	for (size_t i = 0; i < SSHC_NKTYPES; i++)
		if (sshc_alg_supported(algs, n, sshc_ktypes[i].alg))
			sshc_pref_add(pref, sizeof(pref), sshc_ktypes[i].alg);
	if (pref[0] && libssh2_session_method_pref(s, LIBSSH2_METHOD_HOSTKEY, pref) != 0)
		sshc_debug(k, "host key preference '%s' not accepted by libssh2", pref);
	libssh2_free(s, (void *)algs);
}

/* ---- verification --------------------------------------------------------------------- */

/* How known_hosts names the peer: "host" on port 22, else "[host]:port". */
static void sshc_known_name(const struct sshc_peer *p, char *out, size_t n)
{
	if (p->port == 22)
		snprintf(out, n, "%s", p->host);
	else
		snprintf(out, n, "[%s]:%u", p->host, p->port);
}

static int sshc_mkdir_parent(const char *path)
{
	char dir[SSHC_PATH_MAX];
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -1;
	return 0;
}

/* Appends the line for the session's key (accept-new), under a process lock
 * and flock() so concurrent writers (threads, other sandgates, ssh) do not
 * interleave. */
static int sshc_known_append(struct sshc_known *k, const struct sshc_peer *p, const char *key,
			     size_t keylen, int kt, struct sg_err *err)
{
	struct libssh2_knownhost *e = NULL;
	char name[SSHC_NAME_MAX], line[8192];
	size_t outlen = 0;
	struct stat st;
	int fd, rc = -1;

	sshc_known_name(p, name, sizeof(name));
	if (libssh2_knownhost_addc(k->kh, name, NULL, key, keylen, NULL, 0,
				   LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW | kt,
				   &e) != 0 ||
	    libssh2_knownhost_writeline(k->kh, e, line, sizeof(line) - 1, &outlen,
					LIBSSH2_KNOWNHOST_FILE_OPENSSH) != 0)
		return k->host->errf(err, SG_E_INTERNAL, "%s: cannot format a known_hosts line for %s",
				     p->plugin, name);
	if (outlen == 0 || line[outlen - 1] != '\n')
		line[outlen++] = '\n';
	pthread_mutex_lock(&sshc_kh_lock);
	sshc_mkdir_parent(p->known_hosts);
	fd = open(p->known_hosts, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		k->host->errf(err, SG_E_IO, "%s: cannot record the host key of %s in '%s': %s",
			      p->plugin, name, p->known_hosts, strerror(errno));
		goto out;
	}
	flock(fd, LOCK_EX);
	/* A file that does not end with a newline would glue our line to its
	 * last one. */
	if (fstat(fd, &st) == 0 && st.st_size > 0) {
		char last = '\n';

		if (pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n' &&
		    write(fd, "\n", 1) != 1)
			goto werr;
	}
	if (write(fd, line, outlen) != (ssize_t)outlen || fsync(fd) < 0)
		goto werr;
	rc = 0;
	goto closeit;
werr:
	k->host->errf(err, SG_E_IO, "%s: cannot record the host key of %s in '%s': %s", p->plugin,
		      name, p->known_hosts, strerror(errno));
closeit:
	close(fd);
out:
	pthread_mutex_unlock(&sshc_kh_lock);
	return rc;
}

static int sshc_refuse_unknown(struct sshc_known *k, const struct sshc_peer *p,
			       const struct sshc_ktype *ty, const char *fp, struct sg_err *err)
{
	char name[SSHC_NAME_MAX], port[16] = "";

	sshc_known_name(p, name, sizeof(name));
	if (p->port != 22)
		snprintf(port, sizeof(port), "-p %u ", p->port);
	return k->host->errf(err, SG_E_PERM,
		"%s: host key of %s is not known: %s %s is not in %s (host_key_policy strict). "
		"Verify it (ssh-keygen -lf /etc/ssh/ssh_host_%s_key.pub on the host), then trust it: "
		"ssh-keyscan %s-t %s %s >> %s; or set %s = accept-new",
		p->plugin, name, ty->label, fp, p->known_hosts, ty->scan, port, ty->scan, p->host,
		p->known_hosts, p->policy_key);
}

static int sshc_refuse_changed(struct sshc_known *k, const struct sshc_peer *p,
			       const struct sshc_ktype *ty, const char *fp,
			       const struct libssh2_knownhost *old, struct sg_err *err)
{
	char name[SSHC_NAME_MAX], where[SSHC_PATH_MAX + 16];
	int line = sshc_known_line_of(k, old);

	sshc_known_name(p, name, sizeof(name));
	if (line)
		snprintf(where, sizeof(where), "%s:%d", p->known_hosts, line);
	else
		snprintf(where, sizeof(where), "%s", p->known_hosts);
	return k->host->errf(err, SG_E_PERM,
		"%s: WARNING: host key of %s has CHANGED: the server offers %s %s but %s holds "
		"another key. Someone may be intercepting the connection, or the host was "
		"reinstalled; refusing. If expected: ssh-keygen -R '%s' -f %s, then trust the new key",
		p->plugin, name, ty->label, fp, where, name, p->known_hosts);
}

int sshc_known_verify(struct sshc_known *k, LIBSSH2_SESSION *s, const struct sshc_peer *p,
		      bool *off_warned, struct sg_err *err)
{
	const struct sshc_ktype *ty;
	struct libssh2_knownhost *found = NULL;
	size_t len = 0;
	int type = 0, mask, r;
	const char *key = libssh2_session_hostkey(s, &len, &type);
	char fp[80], name[SSHC_NAME_MAX];

	sshc_fingerprint(s, fp, sizeof(fp));
	sshc_known_name(p, name, sizeof(name));
	ty = sshc_ktype_of(type);
	if (!key || !ty)
		return k->host->errf(err, SG_E_PROTO, "%s: %s offered a host key of an unknown type (%d)",
				     p->plugin, name, type);
	if (p->policy == SSHC_OFF) {
		if (!off_warned || !*off_warned) {
			if (off_warned)
				*off_warned = true;
			k->host->log(SG_LOG_WARNING, p->plugin,
				     "host key checking is OFF for %s (%s = off): accepting %s key %s of %s without checking",
				     p->label, p->policy_key, ty->label, fp, name);
		}
		return 0;
	}
	mask = LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW | ty->kh;
	if (libssh2_knownhost_checkp(k->revoked, p->host, (int)p->port, key, len, mask, NULL) ==
	    LIBSSH2_KNOWNHOST_CHECK_MATCH)
		return k->host->errf(err, SG_E_PERM,
			"%s: the %s host key %s of %s is marked @revoked in '%s': refusing to connect (the host needs a new host key)",
			p->plugin, ty->label, fp, name, p->known_hosts);
	r = libssh2_knownhost_checkp(k->kh, p->host, (int)p->port, key, len, mask, &found);
	switch (r) {
	case LIBSSH2_KNOWNHOST_CHECK_MATCH:
		return 0;
	case LIBSSH2_KNOWNHOST_CHECK_MISMATCH:
		return sshc_refuse_changed(k, p, ty, fp, found, err);
	case LIBSSH2_KNOWNHOST_CHECK_NOTFOUND:
		if (p->policy != SSHC_ACCEPT_NEW)
			return sshc_refuse_unknown(k, p, ty, fp, err);
		if (sshc_known_append(k, p, key, len, ty->kh, err) < 0)
			return -1;
		k->host->log(SG_LOG_NOTICE, p->plugin, "recorded the new %s host key %s of %s in %s (accept-new)",
			     ty->label, fp, name, p->known_hosts);
		return 0;
	default:
		return k->host->errf(err, SG_E_INTERNAL, "%s: checking the host key of %s failed",
				     p->plugin, name);
	}
}
