/*
 * Where the engine is (engine_int.h): [docker] host / DOCKER_HOST parsed into
 * a unix socket, tcp:// with its TLS files, or ssh:// with its relay; and the
 * libcurl options that send a request there.  No network here: an address
 * that cannot work is kept as the message of every later call.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/docker/engine_int.h"
#include "plugins/docker/remote.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Keeps a message for every later call; the engine still starts. */
static int docker_unusable(struct docker_engine *e, const char *fmt, ...) SG_PRINTF(2, 3);

static int docker_unusable(struct docker_engine *e, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&e->unusable, fmt, ap);
	va_end(ap);
	if (n < 0)
		e->unusable = NULL;
	return n < 0 ? -1 : 0;
}

/* Splits "[USER@]HOST[:PORT]" (HOST may be "[v6]") of url; a path after it
 * is refused. */
static int docker_split_hostport(const char *rest, char *user, size_t un, char *hostname,
				 size_t hn, unsigned *port)
{
	const char *at = strchr(rest, '@'), *h = at ? at + 1 : rest, *colon, *end;
	size_t len;

	user[0] = '\0';
	if (at && (size_t)(at - rest) < un) {
		memcpy(user, rest, (size_t)(at - rest));
		user[at - rest] = '\0';
	} else if (at) {
		return -1;
	}
	if (*h == '[') {
		end = strchr(h, ']');
		if (!end)
			return -1;
		len = (size_t)(end - h - 1);
		h++;
		colon = end[1] == ':' ? end + 1 : NULL;
		if (end[1] && !colon)
			return -1;
	} else {
		colon = strchr(h, ':');
		len = colon ? (size_t)(colon - h) : strcspn(h, "/");
		if (h[len] == '/' && !(h[len + 1] == '\0'))
			return -1;
	}
	if (len == 0 || len >= hn)
		return -1;
	memcpy(hostname, h, len);
	hostname[len] = '\0';
	if (colon) {
		char *pend;
		unsigned long p = strtoul(colon + 1, &pend, 10);

		if (pend == colon + 1 || (*pend && strcmp(pend, "/")) || p == 0 || p > 65535)
			return -1;
		*port = (unsigned)p;
	}
	return 0;
}

static bool docker_is_loopback(const char *h)
{
	struct in_addr a4;

	if (!strcmp(h, "localhost") || !strcmp(h, "::1"))
		return true;
	return inet_pton(AF_INET, h, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127;
}

/* cert_path/name into out when readable; "" when absent and optional. */
static int docker_cert_file(struct docker_engine *e, const char *dir, const char *name,
			    char *out, size_t n, bool required)
{
	snprintf(out, n, "%s/%s", dir, name);
	if (access(out, R_OK) == 0)
		return 0;
	if (required)
		return docker_unusable(e, "docker host %s: TLS needs the CA certificate %s (%s): "
				       "set [docker] cert_path or DOCKER_CERT_PATH to the directory "
				       "holding ca.pem, cert.pem and key.pem", e->where, out,
				       strerror(errno)) < 0 ? -1 : 1;
	out[0] = '\0';
	return 0;
}

static int docker_setup_tcp(struct docker_engine *e, const struct docker_engine_opts *o,
			    const char *rest)
{
	char user[64], hostname[256], dir[4096];
	const char *cp = o->cert_path, *home = getenv("HOME");
	unsigned port = o->tls_verify ? 2376 : 2375;
	bool v6;

	e->kind = DOCKER_TCP;
	if (docker_split_hostport(rest, user, sizeof(user), hostname, sizeof(hostname), &port) < 0 ||
	    user[0])
		return docker_unusable(e, "docker host tcp://%.200s is not HOST:PORT: set [docker] "
				       "host or DOCKER_HOST to tcp://HOST:2376", rest);
	v6 = strchr(hostname, ':') != NULL;
	snprintf(e->where, sizeof(e->where), "tcp://%s%s%s:%u", v6 ? "[" : "", hostname,
		 v6 ? "]" : "", port);
	e->tls = o->tls_verify;
	snprintf(e->base, sizeof(e->base), "%s://%s%s%s:%u", e->tls ? "https" : "http",
		 v6 ? "[" : "", hostname, v6 ? "]" : "", port);
	if (!e->tls) {
		if (!docker_is_loopback(hostname) && !o->allow_plain_tcp)
			return docker_unusable(e, "docker host %s without TLS would let anyone on the "
					       "network run containers as root there: set [docker] "
					       "tls_verify = true (DOCKER_TLS_VERIFY=1) with cert_path, "
					       "or [docker] allow_plain_tcp = true to accept the risk",
					       e->where);
		return 0;
	}
	if (!cp || !*cp) {
		if (!home)
			return docker_unusable(e, "docker host %s: no HOME for the default "
					       "cert_path ~/.docker: set [docker] cert_path", e->where);
		snprintf(dir, sizeof(dir), "%s/.docker", home);
		cp = dir;
	}
	if (docker_cert_file(e, cp, "ca.pem", e->ca, sizeof(e->ca), true) != 0)
		return 0;
	docker_cert_file(e, cp, "cert.pem", e->cert, sizeof(e->cert), false);
	docker_cert_file(e, cp, "key.pem", e->key, sizeof(e->key), false);
	if (!e->cert[0] != !e->key[0])
		return docker_unusable(e, "docker host %s: %s/%s is missing (the client "
				       "certificate needs both cert.pem and key.pem): put it in "
				       "[docker] cert_path / DOCKER_CERT_PATH", e->where, cp,
				       e->cert[0] ? "key.pem" : "cert.pem");
	return 0;
}

static int docker_setup_ssh(struct docker_engine *e, const struct docker_engine_opts *o,
			    const char *rest, struct sg_err *err)
{
	char user[64], hostname[256];
	unsigned port = 22;
	struct docker_relay_target t = { 0 };

	e->kind = DOCKER_SSH;
	if (docker_split_hostport(rest, user, sizeof(user), hostname, sizeof(hostname), &port) < 0)
		return docker_unusable(e, "docker host ssh://%.200s is not [USER@]HOST[:PORT]: set "
				       "[docker] host or DOCKER_HOST to ssh://user@host", rest);
	snprintf(e->where, sizeof(e->where), "ssh://%.63s%s%.200s:%u", user, *user ? "@" : "",
		 hostname, port);
	t = (struct docker_relay_target){ .host = hostname, .port = port,
		.user = *user ? user : NULL, .key = o->ssh_key, .known_hosts = o->ssh_known_hosts,
		.policy = o->ssh_policy, .timeout_s = (unsigned)e->timeout_s };
	e->relay = docker_relay_new(e->host, &t, err);
	if (!e->relay)
		return -2;
	snprintf(e->sock, sizeof(e->sock), "%s", docker_relay_path(e->relay));
	return 0;
}

int docker_endpoint_setup(struct docker_engine *e, const struct docker_engine_opts *o,
			  struct sg_err *err)
{
	const char *url = o->url, *path = NULL;
	int rc = 0;

	if (!url || !*url)
		url = "unix:///var/run/docker.sock";
	if (strncmp(url, "unix://", 7) == 0)
		path = url + 7;
	else if (url[0] == '/')
		path = url;
	else if (strncmp(url, "tcp://", 6) == 0)
		rc = docker_setup_tcp(e, o, url + 6);
	else if (strncmp(url, "ssh://", 6) == 0)
		rc = docker_setup_ssh(e, o, url + 6, err);
	else if (strstr(url, "://")) {
		snprintf(e->where, sizeof(e->where), "%.300s", url);
		rc = docker_unusable(e, "docker host %s: this scheme is not supported: use "
				     "unix:///PATH, tcp://HOST:PORT or ssh://USER@HOST", url);
	} else {
		e->host->errf(err, SG_E_INVAL,
			      "docker host %s is not a docker address: set [docker] host "
			      "or DOCKER_HOST to unix:///var/run/docker.sock", url);
		return -1;
	}
	if (rc == -2)
		return -1;
	if (rc < 0)
		return e->host->errf(err, SG_E_NOMEM, "docker: out of memory");
	if (!path)
		return 0;
	if (path[0] != '/' || strlen(path) >= sizeof(e->sock)) {
		e->host->errf(err, SG_E_INVAL,
			      "docker host %s: the socket path must be absolute and shorter "
			      "than %zu bytes", url, sizeof(e->sock));
		return -1;
	}
	strcpy(e->sock, path);
	snprintf(e->where, sizeof(e->where), "%s", path);
	return 0;
}

/* Where a handle goes: the unix socket (or ssh relay), or tcp with TLS. */
void docker_transport_opts(struct docker_engine *e, CURL *h)
{
	if (e->kind != DOCKER_TCP) {
		curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, e->sock);
		return;
	}
	if (!e->tls)
		return;
	curl_easy_setopt(h, CURLOPT_CAINFO, e->ca);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
	/* No session resumption: TLS fronts that ask for client certificates
	 * without a session id context (socat, stunnel setups) abort resumed
	 * handshakes, and connections are pooled anyway. */
	curl_easy_setopt(h, CURLOPT_SSL_SESSIONID_CACHE, 0L);
	if (e->cert[0]) {
		curl_easy_setopt(h, CURLOPT_SSLCERT, e->cert);
		curl_easy_setopt(h, CURLOPT_SSLKEY, e->key);
	}
}
