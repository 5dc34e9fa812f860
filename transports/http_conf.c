/*
 * The [server] keys of sandgate http (transports/http_internal.h): where to
 * listen, the allowed hosts, the session limits, and the bearer tokens
 * (from a file of mode 0600, the environment, or generated), kept as
 * SHA-256 digests only.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "core/base/conf.h"
#include "core/base/quota.h"
#include "core/protocol/call.h"
#include "core/base/util.h"
#include "transports/http_internal.h"

/* ---- configuration ----------------------------------------------------------- */

static void add_token(struct http_conf *c, const char *tok, size_t len)
{
	c->tokens = sg_xrealloc(c->tokens, (c->n_tokens + 1) * sizeof(*c->tokens));
	SHA256((const unsigned char *)tok, len, c->tokens[c->n_tokens++]);
}

/* Adds the comma-separated tokens of list (leading and trailing blanks
 * trimmed, empty ones skipped).  Returns how many. */
static size_t add_token_list(struct http_conf *c, const char *list)
{
	size_t added = 0;

	while (list && *list) {
		size_t n = strcspn(list, ",");
		const char *p = list, *e = list + n;

		while (p < e && (*p == ' ' || *p == '\t'))
			p++;
		while (e > p && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n'))
			e--;
		if (e > p) {
			add_token(c, p, (size_t)(e - p));
			added++;
		}
		list += n + (list[n] ? 1 : 0);
	}
	return added;
}

/* The token a line of the tokens file holds (len bytes, as getline read
 * them), whole, blanks around it trimmed: a line is one token, never a
 * list (commas included).  Returns its length, 0 for none (blank, a
 * comment), or -1 when it holds a blank, a control byte or a NUL: a
 * bearer token is visible ASCII, as `sandgate deploy` takes one. */
static ssize_t token_line(const char *line, size_t len, const char **tok)
{
	const char *p = line, *e = line + len;

	while (p < e && (*p == ' ' || *p == '\t'))
		p++;
	while (e > p && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n'))
		e--;
	*tok = p;
	if (p == e || *p == '#')
		return 0;
	for (const char *q = p; q < e; q++)
		if (*q <= ' ' || *q > '~')
			return -1;
	return e - p;
}

/* [server] auth_tokens_file: one token per line ('#' comments).  A file
 * readable by group or others is refused (secrets, like the config file).
 * With eph (ephemeral_token = true, which makes a token anyway) a missing
 * or empty file is only noted. */
static int load_token_file(struct http_conf *c, const char *path, bool eph)
{
	struct stat stt;
	char *line = NULL;
	size_t cap = 0, before = c->n_tokens;
	ssize_t n;
	int rc = -1;
	FILE *f = fopen(path, "re");

	if (!f && eph && errno == ENOENT) {
		SG_INFO("http: [server] auth_tokens_file '%s' does not exist: only the ephemeral token is accepted", path);
		return 0;
	}
	if (!f) {
		SG_ERROR("cannot read [server] auth_tokens_file '%s': %s: fix the path or the file's permissions, or unset the key",
			 path, strerror(errno));
		return -1;
	}
	if (fstat(fileno(f), &stt) < 0 || !S_ISREG(stt.st_mode)) {
		SG_ERROR("[server] auth_tokens_file '%s' is not a regular file", path);
		goto out;
	}
	if (stt.st_mode & 077) {
		SG_ERROR("[server] auth_tokens_file '%s' is readable by group or others (mode %04o): run chmod 600 '%s'",
			 path, (unsigned)(stt.st_mode & 07777), path);
		goto out;
	}
	for (unsigned no = 1; (n = getline(&line, &cap, f)) >= 0; no++) {
		const char *tok;
		ssize_t len = token_line(line, (size_t)n, &tok);

		if (len > 0)
			add_token(c, tok, (size_t)len);
		OPENSSL_cleanse(line, cap);
		if (len < 0) {
			/* the line is not echoed: it may be a token with a typo */
			SG_ERROR("[server] auth_tokens_file '%s': line %u is not a bearer token (one token a "
				 "line, visible ASCII: no blank or control character inside): fix that line",
				 path, no);
			goto out;
		}
	}
	if (c->n_tokens == before && eph) {
		SG_INFO("http: [server] auth_tokens_file '%s' holds no token: only the ephemeral token is accepted", path);
	} else if (c->n_tokens == before) {
		SG_ERROR("[server] auth_tokens_file '%s' holds no token: write one per line, or set [server] ephemeral_token = true",
			 path);
		goto out;
	}
	rc = 0;
out:
	if (line)
		OPENSSL_cleanse(line, cap);
	free(line);
	fclose(f);
	return rc;
}

/* Generates a token, prints it once to stderr (nobody else knows it) and
 * adds its digest.  Returns 0 or -1 (logged). */
static int add_ephemeral(struct http_conf *c)
{
	char eph[65];

	if (sg_random_hex(eph, 32) < 0) {
		SG_ERROR("cannot read random bytes for the ephemeral token");
		return -1;
	}
	add_token(c, eph, 64);
	fprintf(stderr, "sandgate: ephemeral bearer token (valid until this server exits): %s\n", eph);
	OPENSSL_cleanse(eph, sizeof(eph));
	return 0;
}

/* Bearer tokens from every source (doc/http.md "Authentication").  The
 * plain text is never kept or logged.  No source at all and no explicit
 * [server] auth = none: a generated token, so that sandgate http is never
 * open by accident; it stands for the local user (sessions keep the owner
 * local:<uid>, so persistent machines outlive a restart and its new token). */
static int load_tokens(struct http_conf *c)
{
	const char *file = sg_config_get("server", "auth_tokens_file");
	bool eph = sg_config_bool("server", "ephemeral_token", false);
	size_t n;

	if (file && *file && load_token_file(c, file, eph) < 0)
		return -1;
	if ((n = add_token_list(c, getenv("SANDGATE_SERVER_AUTH_TOKENS"))))
		SG_INFO("http: %zu bearer token(s) from SANDGATE_SERVER_AUTH_TOKENS", n);
	if ((n = add_token_list(c, getenv("ABX_MCP_AUTH_TOKEN"))))
		SG_INFO("http: %zu bearer token(s) from ABX_MCP_AUTH_TOKEN", n);
	if (c->no_auth) {
		if (c->n_tokens || eph) {
			SG_ERROR("[server] auth = none, but bearer tokens are configured (auth_tokens_file, ephemeral_token, "
				 "SANDGATE_SERVER_AUTH_TOKENS or ABX_MCP_AUTH_TOKEN): remove them, or unset auth");
			return -1;
		}
		return 0;
	}
	if (!eph && c->n_tokens == 0) {
		SG_INFO("http: no bearer token configured: generating one ([server] auth_tokens_file sets yours; "
			"[server] auth = none serves loopback without authentication)");
		c->token_is_local = true;
	}
	if ((eph || c->n_tokens == 0) && add_ephemeral(c) < 0)
		return -1;
	return 0;
}

/* [server] allowed_hosts (default: the loopback names).  Returns 0 or -1
 * (logged). */
static int load_allowed(struct http_conf *c)
{
	const char *list = sg_config_get("server", "allowed_hosts");
	struct sg_err err = { 0 };

	if (sg_http_allow_parse(list ? list : "localhost,127.0.0.1,[::1]", &c->allow, &err) < 0) {
		SG_ERROR("%s", err.msg);
		return -1;
	}
	return 0;
}

/* True when every address host resolves to is a loopback address. */
static bool host_is_loopback(const char *host)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;
	bool loop = true;

	if (!host || !*host || getaddrinfo(host, NULL, &hints, &res) != 0)
		return false;
	for (ai = res; ai; ai = ai->ai_next) {
		if (ai->ai_family == AF_INET) {
			const struct sockaddr_in *a = (const void *)ai->ai_addr;

			loop &= (ntohl(a->sin_addr.s_addr) >> 24) == 127;
		} else if (ai->ai_family == AF_INET6) {
			const struct sockaddr_in6 *a = (const void *)ai->ai_addr;

			loop &= IN6_IS_ADDR_LOOPBACK(&a->sin6_addr);
		} else {
			loop = false;
		}
	}
	freeaddrinfo(res);
	return loop;
}

void http_conf_release(struct http_conf *c)
{
	if (c->tokens)
		OPENSSL_cleanse(c->tokens, c->n_tokens * sizeof(*c->tokens));
	free(c->tokens);
	sg_http_allow_free(&c->allow);
	memset(c, 0, sizeof(*c));
}

int http_conf_load(struct http_conf *c)
{
	long long port = sg_config_int("server", "port", 8010);
	bool loopback;

	c->host = sg_config_get("server", "host");
	if (!c->host)
		c->host = "127.0.0.1";
	if (port > 65535) {
		SG_ERROR("[server] port = %lld is not a TCP port: set it to 0 to 65535 (0: any free port)", port);
		return -1;
	}
	c->no_auth = !strcmp(sg_config_get("server", "auth") ? sg_config_get("server", "auth") : "token", "none");
	c->port = (unsigned)port;
	c->ttl_ms = sg_config_int("server", "session_idle_ttl", 3600) * 1000;
	c->max_sessions = (int)sg_config_int("server", "max_sessions", 100);
	c->grace_ms = (int)sg_config_int("server", "shutdown_grace", 10) * 1000;
	c->max_body = (size_t)sg_config_int("server", "max_message_bytes", 256LL << 20);
	snprintf(c->local_owner, sizeof(c->local_owner), "local:%ld", (long)getuid());
	if (c->max_sessions < 1) {
		SG_ERROR("[server] max_sessions = %d: set it to 1 or more", c->max_sessions);
		return -1;
	}
	c->conn_limit = (unsigned)c->max_sessions * 8 + 64;
	if (c->conn_limit < 1024)
		c->conn_limit = 1024;
	c->per_client = (unsigned)sg_config_int("server", "max_connections_per_client", 0);
	if (c->per_client == 0 || c->per_client > c->conn_limit)
		c->per_client = c->per_client ? c->conn_limit : c->conn_limit / 2;
	c->request_ms = sg_config_int("server", "request_timeout", 60) * 1000;
	if (c->request_ms < 1000) {
		SG_ERROR("[server] request_timeout must be at least 1 (seconds)");
		return -1;
	}
	if (load_allowed(c) < 0 || load_tokens(c) < 0)
		return -1;
	sg_credentials_set((unsigned)c->n_tokens); /* before any machine is made */
	sg_quota_enforce(c->n_tokens > 1); /* quotas keep credentials apart */
	loopback = host_is_loopback(c->host);
	if (c->no_auth && !loopback) {
		SG_ERROR("[server] auth = none is refused for host '%s', which is not a loopback address: "
			 "configure bearer tokens ([server] auth_tokens_file) or listen on 127.0.0.1",
			 c->host);
		return -1;
	}
	if (c->no_auth)
		SG_WARN("http: [server] auth = none: every local user and process can use this server without a token");
	if (!loopback && !strcmp(sg_config_source("server", "allowed_hosts"), "default")) {
		SG_ERROR("[server] host '%s' is not a loopback address: set [server] allowed_hosts to the host names clients will use (DNS-rebinding protection), or '*'",
			 c->host);
		return -1;
	}
	if (!loopback && c->n_tokens == 0) {
		SG_ERROR("[server] host '%s' is not a loopback address and no bearer token is configured: set [server] auth_tokens_file, SANDGATE_SERVER_AUTH_TOKENS or [server] ephemeral_token = true",
			 c->host);
		return -1;
	}
	return 0;
}
