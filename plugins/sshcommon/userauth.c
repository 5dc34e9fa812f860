/*
 * User authentication (sshcommon.h): ssh-agent when SSH_AUTH_SOCK is set,
 * then the peer's identity file (or ~/.ssh/id_ed25519, id_ecdsa, id_rsa
 * when none is configured).  A failure says what was tried and why each
 * failed.  We look at a key file ourselves before libssh2 does, only to tell
 * "encrypted and no passphrase" from "not a key"; key material and the
 * passphrase are never logged, and the buffer holding the file is wiped.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/sshcommon/sshcommon.h"

#include <errno.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SSHC_KEYFILE_MAX (64 * 1024)
#define SSHC_PATH_MAX    4096

/* What a private key file looks like from the outside. */
struct sshc_keyinfo {
	bool readable;
	bool is_key;
	bool encrypted;
	char type[48];      /* "ssh-ed25519", "ssh-rsa", ... or "" */
	char why[160];      /* when !readable or !is_key */
};

/* The attempts so far, for the final message. */
struct sshc_report {
	char text[900];
	size_t len;
};

static void sshc_note(struct sshc_report *r, const char *fmt, ...) SG_PRINTF(2, 3);

static void sshc_note(struct sshc_report *r, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (r->len + 4 >= sizeof(r->text))
		return;
	if (r->len) {
		memcpy(r->text + r->len, "; ", 2);
		r->len += 2;
	}
	va_start(ap, fmt);
	n = vsnprintf(r->text + r->len, sizeof(r->text) - r->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		r->len += (size_t)n < sizeof(r->text) - r->len ? (size_t)n : sizeof(r->text) - r->len - 1;
}

/* ---- looking at key files --------------------------------------------------------- */

static int sshc_b64_val(int ch)
{
	if (ch >= 'A' && ch <= 'Z') return ch - 'A';
	if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
	if (ch >= '0' && ch <= '9') return ch - '0' + 52;
	if (ch == '+') return 62;
	if (ch == '/') return 63;
	return -1;
}

/* Decodes base64 from s up to end, skipping whitespace; returns bytes. */
static size_t sshc_b64_decode(const char *s, const char *end, unsigned char *out, size_t cap)
{
	unsigned v = 0;
	int bits = 0;
	size_t n = 0;

	for (; s < end && *s != '='; s++) {
		int d = sshc_b64_val((unsigned char)*s);

		if (d < 0)
			continue;
		v = (v << 6) | (unsigned)d;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (n < cap)
				out[n++] = (unsigned char)(v >> bits);
		}
	}
	return n;
}

/* Reads an SSH string at *p (length-prefixed); false when out of bounds. */
static bool sshc_str(const unsigned char **p, const unsigned char *end, const unsigned char **s,
		    uint32_t *len)
{
	uint32_t l;

	if (end - *p < 4)
		return false;
	l = (uint32_t)(*p)[0] << 24 | (uint32_t)(*p)[1] << 16 | (uint32_t)(*p)[2] << 8 | (*p)[3];
	if ((size_t)(end - *p - 4) < l)
		return false;
	*s = *p + 4;
	*len = l;
	*p += 4 + l;
	return true;
}

/* The openssh-key-v1 container: cipher name, then the public key's type. */
static void sshc_inspect_openssh(const char *begin, const char *end, struct sshc_keyinfo *ki)
{
	static const char magic[] = "openssh-key-v1";
	unsigned char *raw = malloc((size_t)(end - begin)); /* freed below, wiped */
	const unsigned char *p, *e, *s, *pub;
	size_t n;
	uint32_t len, publen;

	if (!raw)
		return;
	n = sshc_b64_decode(begin, end, raw, (size_t)(end - begin));
	p = raw;
	e = raw + n;
	if (n < sizeof(magic) || memcmp(p, magic, sizeof(magic)) != 0)
		goto out;
	p += sizeof(magic);
	if (!sshc_str(&p, e, &s, &len))
		goto out;
	ki->is_key = true;
	ki->encrypted = !(len == 4 && memcmp(s, "none", 4) == 0);
	if (!sshc_str(&p, e, &s, &len) || !sshc_str(&p, e, &s, &len) || e - p < 4)
		goto out; /* kdf name, kdf options */
	p += 4;   /* number of keys */
	if (!sshc_str(&p, e, &pub, &publen))
		goto out;
	e = pub + publen;
	if (sshc_str(&pub, e, &s, &len) && len < sizeof(ki->type)) {
		memcpy(ki->type, s, len);
		ki->type[len] = '\0';
	}
out:
	explicit_bzero(raw, (size_t)(end - begin));
	free(raw);
}

static void sshc_inspect_text(const char *buf, struct sshc_keyinfo *ki)
{
	static const struct { const char *begin; const char *type; } pem[] = {
		{ "-----BEGIN RSA PRIVATE KEY-----", "ssh-rsa" },
		{ "-----BEGIN EC PRIVATE KEY-----", "ecdsa" },
		{ "-----BEGIN DSA PRIVATE KEY-----", "ssh-dss" },
		{ "-----BEGIN PRIVATE KEY-----", "" },
		{ "-----BEGIN ENCRYPTED PRIVATE KEY-----", "" },
	};
	const char *b = strstr(buf, "-----BEGIN OPENSSH PRIVATE KEY-----"), *e;

	if (b) {
		b += strlen("-----BEGIN OPENSSH PRIVATE KEY-----");
		e = strstr(b, "-----END");
		sshc_inspect_openssh(b, e ? e : b + strlen(b), ki);
		if (!ki->is_key)
			snprintf(ki->why, sizeof(ki->why), "its OpenSSH key block is damaged");
		return;
	}
	for (size_t i = 0; i < sizeof(pem) / sizeof(pem[0]); i++) {
		if (!strstr(buf, pem[i].begin))
			continue;
		ki->is_key = true;
		snprintf(ki->type, sizeof(ki->type), "%s", pem[i].type);
		ki->encrypted = i == 4 || strstr(buf, "Proc-Type: 4,ENCRYPTED") != NULL;
		return;
	}
	snprintf(ki->why, sizeof(ki->why), "not a private key file (a .pub file?)");
}

static void sshc_key_inspect(const char *path, struct sshc_keyinfo *ki)
{
	FILE *fp = fopen(path, "re");
	char *buf;
	size_t n;

	memset(ki, 0, sizeof(*ki));
	if (!fp) {
		snprintf(ki->why, sizeof(ki->why), "cannot read it: %s", strerror(errno));
		return;
	}
	ki->readable = true;
	buf = malloc(SSHC_KEYFILE_MAX + 1); /* freed below, wiped */
	if (!buf) {
		fclose(fp);
		ki->is_key = true; /* let libssh2 judge */
		return;
	}
	n = fread(buf, 1, SSHC_KEYFILE_MAX, fp);
	fclose(fp);
	buf[n] = '\0';
	sshc_inspect_text(buf, ki);
	explicit_bzero(buf, SSHC_KEYFILE_MAX + 1);
	free(buf);
}

/* ---- home ----------------------------------------------------------------------------- */

int sshc_expand_home(const char *in, char *out, size_t n)
{
	const char *home;
	int len;

	if (strncmp(in, "~/", 2) != 0 && strcmp(in, "~") != 0) {
		len = snprintf(out, n, "%s", in);
		return len < 0 || (size_t)len >= n ? -1 : 0;
	}
	home = getenv("HOME");
	if (!home || !*home) {
		struct passwd pw, *res = NULL;
		char buf[1024];

		if (getpwuid_r(getuid(), &pw, buf, sizeof(buf), &res) != 0 || !res)
			return -1;
		len = snprintf(out, n, "%s%s", pw.pw_dir, in + 1);
	} else {
		len = snprintf(out, n, "%s%s", home, in + 1);
	}
	return len < 0 || (size_t)len >= n ? -1 : 0;
}

/* ---- methods ------------------------------------------------------------------------- */

enum { SSHC_AUTH_NO = 0, SSHC_AUTH_OK = 1 };

static bool sshc_rejected(int rc)
{
	return rc == LIBSSH2_ERROR_AUTHENTICATION_FAILED || rc == LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED;
}

static int sshc_auth_agent(const struct sshc_io *io, const struct sshc_peer *p, struct sshc_report *r,
			   struct sg_err *err)
{
	const char *sock = getenv("SSH_AUTH_SOCK");
	LIBSSH2_AGENT *agent;
	struct libssh2_agent_publickey *id = NULL, *prev = NULL;
	int rc, tried = 0, ret = SSHC_AUTH_NO;

	if (!sock || !*sock) {
		sshc_note(r, "ssh-agent: none (SSH_AUTH_SOCK is not set)");
		return SSHC_AUTH_NO;
	}
	agent = libssh2_agent_init(io->s); /* freed below */
	if (!agent) {
		sshc_note(r, "ssh-agent: libssh2 cannot use it");
		return SSHC_AUTH_NO;
	}
	if (libssh2_agent_connect(agent) != 0) {
		sshc_note(r, "ssh-agent: cannot connect to SSH_AUTH_SOCK=%s (is the agent running?)", sock);
		goto out;
	}
	if (libssh2_agent_list_identities(agent) != 0) {
		sshc_note(r, "ssh-agent: cannot list its keys");
		goto disconnect;
	}
	while (libssh2_agent_get_identity(agent, &id, prev) == 0) {
		prev = id;
		tried++;
		SSHC_CALL(io, rc, libssh2_agent_userauth(agent, p->user, id));
		if (rc == 0) {
			ret = SSHC_AUTH_OK;
			goto disconnect;
		}
		if (!sshc_rejected(rc) && rc != LIBSSH2_ERROR_AGENT_PROTOCOL) {
			ret = io->fatal(io->ud, rc, "authenticating with ssh-agent", err);
			goto disconnect;
		}
	}
	if (tried == 0)
		sshc_note(r, "ssh-agent: it holds no keys (ssh-add one)");
	else
		sshc_note(r, "ssh-agent: the server rejected its %d key(s)", tried);
disconnect:
	libssh2_agent_disconnect(agent);
out:
	libssh2_agent_free(agent);
	return ret;
}

static int sshc_auth_keyfile(const struct sshc_io *io, const struct sshc_peer *p, const char *path,
			     struct sshc_report *r, struct sg_err *err)
{
	struct sshc_keyinfo ki;
	const char *pass = p->passphrase && *p->passphrase ? p->passphrase : NULL;
	char *msg = NULL;
	int rc, mlen = 0;

	sshc_key_inspect(path, &ki);
	if (!ki.readable || !ki.is_key) {
		sshc_note(r, "key %s: %s", path, ki.why);
		return SSHC_AUTH_NO;
	}
	if (ki.encrypted && !pass) {
		sshc_note(r, "key %s: it is encrypted and no passphrase is set (%s)", path,
			  p->passphrase_key);
		return SSHC_AUTH_NO;
	}
	SSHC_CALL(io, rc, libssh2_userauth_publickey_fromfile_ex(io->s, p->user, (unsigned)strlen(p->user),
								  NULL, path, ki.encrypted ? pass : NULL));
	if (rc == 0)
		return SSHC_AUTH_OK;
	if (rc == LIBSSH2_ERROR_EAGAIN || io->is_transport(rc))
		return io->fatal(io->ud, rc, "authenticating", err);
	libssh2_session_last_error(io->s, &msg, &mlen, 0);
	if (sshc_rejected(rc))
		sshc_note(r, "key %s%s%s%s: rejected by the server (its public key is not in %s's authorized_keys there)%s",
			  path, ki.type[0] ? " (" : "", ki.type, ki.type[0] ? ")" : "", p->user,
			  strcmp(ki.type, "ssh-rsa") == 0 ?
			  "; libssh2 1.10 signs RSA keys with SHA-1 only, which OpenSSH 8.8+ refuses: use an ed25519 or ECDSA key" : "");
	else if (rc == LIBSSH2_ERROR_FILE && ki.encrypted)
		sshc_note(r, "key %s: the passphrase is wrong (or libssh2 cannot decrypt this key format)", path);
	else
		sshc_note(r, "key %s: libssh2 cannot use it: %.*s", path, mlen > 120 ? 120 : mlen,
			  msg ? msg : "");
	return SSHC_AUTH_NO;
}

/* The identity files to try: the configured one, else the usual ones. */
static int sshc_auth_keys(const struct sshc_io *io, const struct sshc_peer *p, struct sshc_report *r,
			  struct sg_err *err)
{
	static const char *const defaults[] = { "~/.ssh/id_ed25519", "~/.ssh/id_ecdsa", "~/.ssh/id_rsa" };
	char path[SSHC_PATH_MAX];
	int found = 0, rc;

	if (p->key && p->key[0])
		return sshc_auth_keyfile(io, p, p->key, r, err);
	for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++) {
		if (sshc_expand_home(defaults[i], path, sizeof(path)) < 0 || access(path, F_OK) != 0)
			continue;
		found++;
		rc = sshc_auth_keyfile(io, p, path, r, err);
		if (rc != SSHC_AUTH_NO)
			return rc;
	}
	if (!found)
		sshc_note(r, "identity files: none configured (%s) and no ~/.ssh/id_ed25519, id_ecdsa or id_rsa",
			  p->identity_key);
	return SSHC_AUTH_NO;
}

int sshc_userauth(const struct sshc_io *io, const struct sshc_peer *p, struct sg_err *err)
{
	struct sshc_report r = { .len = 0 };
	char methods[256];
	const char *list;
	int rc;

	do {
		list = libssh2_userauth_list(io->s, p->user, (unsigned)strlen(p->user));
	} while (!list && libssh2_session_last_errno(io->s) == LIBSSH2_ERROR_EAGAIN && io->again &&
		 io->again(io->ud) == 0);
	if (!list) {
		if (libssh2_userauth_authenticated(io->s))
			return 0; /* the server took "none" */
		return io->fatal(io->ud, libssh2_session_last_errno(io->s), "asking for auth methods", err);
	}
	snprintf(methods, sizeof(methods), "%s", list);
	if (!strstr(methods, "publickey"))
		return io->host->errf(err, SG_E_PERM,
				      "%s: %s@%s:%u accepts only '%s' authentication; sandgate signs in with keys (ssh-agent or an identity file): allow publickey and add the key to authorized_keys there",
				      p->plugin, p->user, p->host, p->port, methods);
	rc = sshc_auth_agent(io, p, &r, err);
	if (rc == SSHC_AUTH_NO)
		rc = sshc_auth_keys(io, p, &r, err);
	if (rc < 0)
		return -1;
	if (rc == SSHC_AUTH_OK)
		return 0;
	return io->host->errf(err, SG_E_PERM, "%s: authentication as %s@%s:%u failed; tried: %s",
			      p->plugin, p->user, p->host, p->port, r.text);
}
