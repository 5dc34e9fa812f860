/*
 * User authentication: ssh-agent when SSH_AUTH_SOCK is set, then the
 * target's identity file (or ~/.ssh/id_ed25519, id_ecdsa, id_rsa when none
 * is configured).  A failure says what was tried and why each failed.  We
 * look at a key file ourselves before libssh2 does, only to tell "encrypted
 * and no passphrase" from "not a key"; key material and the passphrase are
 * never logged, and the buffer holding the file is wiped.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/ssh/ssh.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SSH_KEYFILE_MAX (64 * 1024)

/* What a private key file looks like from the outside. */
struct ssh_keyinfo {
	bool readable;
	bool is_key;
	bool encrypted;
	char type[48];      /* "ssh-ed25519", "ssh-rsa", ... or "" */
	char why[160];      /* when !readable or !is_key */
};

/* The attempts so far, for the final message. */
struct ssh_report {
	char text[900];
	size_t len;
};

static void ssh_note(struct ssh_report *r, const char *fmt, ...) SG_PRINTF(2, 3);

static void ssh_note(struct ssh_report *r, const char *fmt, ...)
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

static int ssh_b64_val(int ch)
{
	if (ch >= 'A' && ch <= 'Z') return ch - 'A';
	if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
	if (ch >= '0' && ch <= '9') return ch - '0' + 52;
	if (ch == '+') return 62;
	if (ch == '/') return 63;
	return -1;
}

/* Decodes base64 from s up to end, skipping whitespace; returns bytes. */
static size_t ssh_b64_decode(const char *s, const char *end, unsigned char *out, size_t cap)
{
	unsigned v = 0;
	int bits = 0;
	size_t n = 0;

	for (; s < end && *s != '='; s++) {
		int d = ssh_b64_val((unsigned char)*s);

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
static bool ssh_str(const unsigned char **p, const unsigned char *end, const unsigned char **s,
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
static void ssh_inspect_openssh(const char *begin, const char *end, struct ssh_keyinfo *ki)
{
	static const char magic[] = "openssh-key-v1";
	unsigned char *raw = malloc((size_t)(end - begin)); /* freed below, wiped */
	const unsigned char *p, *e, *s, *pub;
	size_t n;
	uint32_t len, publen;

	if (!raw)
		return;
	n = ssh_b64_decode(begin, end, raw, (size_t)(end - begin));
	p = raw;
	e = raw + n;
	if (n < sizeof(magic) || memcmp(p, magic, sizeof(magic)) != 0)
		goto out;
	p += sizeof(magic);
	if (!ssh_str(&p, e, &s, &len))
		goto out;
	ki->is_key = true;
	ki->encrypted = !(len == 4 && memcmp(s, "none", 4) == 0);
	if (!ssh_str(&p, e, &s, &len) || !ssh_str(&p, e, &s, &len) || e - p < 4)
		goto out; /* kdf name, kdf options */
	p += 4;   /* number of keys */
	if (!ssh_str(&p, e, &pub, &publen))
		goto out;
	e = pub + publen;
	if (ssh_str(&pub, e, &s, &len) && len < sizeof(ki->type)) {
		memcpy(ki->type, s, len);
		ki->type[len] = '\0';
	}
out:
	explicit_bzero(raw, (size_t)(end - begin));
	free(raw);
}

static void ssh_inspect_text(const char *buf, struct ssh_keyinfo *ki)
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
		ssh_inspect_openssh(b, e ? e : b + strlen(b), ki);
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

static void ssh_key_inspect(const char *path, struct ssh_keyinfo *ki)
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
	buf = malloc(SSH_KEYFILE_MAX + 1); /* freed below, wiped */
	if (!buf) {
		fclose(fp);
		ki->is_key = true; /* let libssh2 judge */
		return;
	}
	n = fread(buf, 1, SSH_KEYFILE_MAX, fp);
	fclose(fp);
	buf[n] = '\0';
	ssh_inspect_text(buf, ki);
	explicit_bzero(buf, SSH_KEYFILE_MAX + 1);
	free(buf);
}

/* ---- methods ------------------------------------------------------------------------- */

enum { SSH_AUTH_NO = 0, SSH_AUTH_OK = 1 };

static bool ssh_rejected(int rc)
{
	return rc == LIBSSH2_ERROR_AUTHENTICATION_FAILED || rc == LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED;
}

/* A fatal result of an auth call (the connection is gone, or we timed out). */
static int ssh_auth_fatal(struct ssh_op *op, int rc, const char *what, struct sg_err *err)
{
	return ssh_fail(op, NULL, rc, what, err);
}

static int ssh_auth_agent(struct ssh_op *op, const struct ssh_target *t, struct ssh_report *r,
			  struct sg_err *err)
{
	const char *sock = getenv("SSH_AUTH_SOCK");
	LIBSSH2_SESSION *s = op->c->session;
	LIBSSH2_AGENT *agent;
	struct libssh2_agent_publickey *id = NULL, *prev = NULL;
	int rc, tried = 0, ret = SSH_AUTH_NO;

	if (!sock || !*sock) {
		ssh_note(r, "ssh-agent: none (SSH_AUTH_SOCK is not set)");
		return SSH_AUTH_NO;
	}
	agent = libssh2_agent_init(s); /* freed below */
	if (!agent) {
		ssh_note(r, "ssh-agent: libssh2 cannot use it");
		return SSH_AUTH_NO;
	}
	if (libssh2_agent_connect(agent) != 0) {
		ssh_note(r, "ssh-agent: cannot connect to SSH_AUTH_SOCK=%s (is the agent running?)", sock);
		goto out;
	}
	if (libssh2_agent_list_identities(agent) != 0) {
		ssh_note(r, "ssh-agent: cannot list its keys");
		goto disconnect;
	}
	while (libssh2_agent_get_identity(agent, &id, prev) == 0) {
		prev = id;
		tried++;
		SSH_CALL(op, rc, libssh2_agent_userauth(agent, t->user, id));
		if (rc == 0) {
			ret = SSH_AUTH_OK;
			goto disconnect;
		}
		if (!ssh_rejected(rc) && rc != LIBSSH2_ERROR_AGENT_PROTOCOL) {
			ret = ssh_auth_fatal(op, rc, "authenticating with ssh-agent", err);
			goto disconnect;
		}
	}
	if (tried == 0)
		ssh_note(r, "ssh-agent: it holds no keys (ssh-add one)");
	else
		ssh_note(r, "ssh-agent: the server rejected its %d key(s)", tried);
disconnect:
	libssh2_agent_disconnect(agent);
out:
	libssh2_agent_free(agent);
	return ret;
}

static int ssh_auth_keyfile(struct ssh_op *op, const struct ssh_target *t, const char *path,
			    struct ssh_report *r, struct sg_err *err)
{
	LIBSSH2_SESSION *s = op->c->session;
	struct ssh_keyinfo ki;
	const char *pass = t->passphrase && *t->passphrase ? t->passphrase : NULL;
	char *msg = NULL;
	int rc, mlen = 0;

	ssh_key_inspect(path, &ki);
	if (!ki.readable || !ki.is_key) {
		ssh_note(r, "key %s: %s", path, ki.why);
		return SSH_AUTH_NO;
	}
	if (ki.encrypted && !pass) {
		ssh_note(r, "key %s: it is encrypted and no passphrase is set ([ssh] passphrase or SANDGATE_SSH_PASSPHRASE)",
			 path);
		return SSH_AUTH_NO;
	}
	SSH_CALL(op, rc, libssh2_userauth_publickey_fromfile_ex(s, t->user, (unsigned)strlen(t->user),
								 NULL, path, ki.encrypted ? pass : NULL));
	if (rc == 0)
		return SSH_AUTH_OK;
	if (rc == LIBSSH2_ERROR_EAGAIN || ssh_rc_is_transport(rc))
		return ssh_auth_fatal(op, rc, "authenticating", err);
	libssh2_session_last_error(s, &msg, &mlen, 0);
	if (ssh_rejected(rc))
		ssh_note(r, "key %s%s%s%s: rejected by the server (its public key is not in %s's authorized_keys there)%s",
			 path, ki.type[0] ? " (" : "", ki.type, ki.type[0] ? ")" : "", t->user,
			 strcmp(ki.type, "ssh-rsa") == 0 ?
			 "; libssh2 1.10 signs RSA keys with SHA-1 only, which OpenSSH 8.8+ refuses: use an ed25519 or ECDSA key" : "");
	else if (rc == LIBSSH2_ERROR_FILE && ki.encrypted)
		ssh_note(r, "key %s: the passphrase is wrong (or libssh2 cannot decrypt this key format)", path);
	else
		ssh_note(r, "key %s: libssh2 cannot use it: %.*s", path, mlen > 120 ? 120 : mlen,
			 msg ? msg : "");
	return SSH_AUTH_NO;
}

/* The identity files to try: the configured one, else the usual ones. */
static int ssh_auth_keys(struct ssh_op *op, const struct ssh_target *t, struct ssh_report *r,
			 struct sg_err *err)
{
	static const char *const defaults[] = { "~/.ssh/id_ed25519", "~/.ssh/id_ecdsa", "~/.ssh/id_rsa" };
	char path[SSH_PATH_MAX];
	int found = 0, rc;

	if (t->key[0])
		return ssh_auth_keyfile(op, t, t->key, r, err);
	for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++) {
		if (ssh_expand_home(defaults[i], path, sizeof(path)) < 0 || access(path, F_OK) != 0)
			continue;
		found++;
		rc = ssh_auth_keyfile(op, t, path, r, err);
		if (rc != SSH_AUTH_NO)
			return rc;
	}
	if (!found)
		ssh_note(r, "identity files: none configured ([ssh] default_key or the target's key) and no ~/.ssh/id_ed25519, id_ecdsa or id_rsa");
	return SSH_AUTH_NO;
}

int ssh_auth(struct ssh_op *op, const struct ssh_target *t, struct sg_err *err)
{
	const struct sg_host_api *host = op->c->pool->ctx->host;
	LIBSSH2_SESSION *s = op->c->session;
	struct ssh_report r = { .len = 0 };
	char methods[256], who[SSH_USER_MAX + SSH_HOST_MAX + 16];
	const char *list;
	int rc;

	ssh_target_str(t, who, sizeof(who));
	SSH_CALLP(op, list, libssh2_userauth_list(s, t->user, (unsigned)strlen(t->user)));
	if (!list) {
		if (libssh2_userauth_authenticated(s))
			return 0; /* the server took "none" */
		return ssh_fail(op, NULL, libssh2_session_last_errno(s), "asking for auth methods", err);
	}
	snprintf(methods, sizeof(methods), "%s", list);
	if (!strstr(methods, "publickey"))
		return host->errf(err, SG_E_PERM,
				  "ssh: %s accepts only '%s' authentication; sandgate signs in with keys (ssh-agent or an identity file): allow publickey and add the key to authorized_keys there",
				  who, methods);
	rc = ssh_auth_agent(op, t, &r, err);
	if (rc == SSH_AUTH_NO)
		rc = ssh_auth_keys(op, t, &r, err);
	if (rc < 0)
		return -1;
	if (rc == SSH_AUTH_OK)
		return 0;
	return host->errf(err, SG_E_PERM, "ssh: authentication as %s failed; tried: %s", who, r.text);
}
