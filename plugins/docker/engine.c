/* Docker Engine API client (unix://, tcp:// with TLS, ssh://): see engine.h. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/docker/engine.h"
#include "plugins/docker/engine_int.h"
#include "plugins/docker/remote.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#define DOCKER_PLUGIN "docker"
#define DOCKER_BODY_MAX (16u * 1024u * 1024u) /* default reply cap */
#define DOCKER_HEAD_MAX 8192                  /* hijack answer head */
/* The newest API this client was written against, and the oldest it needs
 * (1.35: WorkingDir on exec create). */
#define DOCKER_API_MAJOR 1
#define DOCKER_API_MINOR 43
#define DOCKER_API_MIN_MINOR 35

/* ---- setup ---------------------------------------------------------------- */

struct docker_engine *docker_engine_new(const struct sg_host_api *host,
					const struct docker_engine_opts *o,
					struct sg_err *err)
{
	struct docker_engine *e;

	e = calloc(1, sizeof(*e)); /* freed by docker_engine_free() */
	if (!e) {
		host->errf(err, SG_E_NOMEM, "docker: out of memory");
		return NULL;
	}
	e->host = host;
	e->timeout_s = o->timeout_s > 0 ? (long)o->timeout_s : 60;
	pthread_mutex_init(&e->lock, NULL);
	if (docker_endpoint_setup(e, o, err) < 0)
		goto fail;
	return e;
fail:
	docker_engine_free(e);
	return NULL;
}

void docker_engine_free(struct docker_engine *e)
{
	size_t i;

	if (!e)
		return;
	for (i = 0; i < e->n_idle; i++)
		curl_easy_cleanup(e->idle[i]);
	docker_relay_free(e->relay);
	/* Pumps end when their streams' owners close them (fini closes them
	 * first); give stragglers a moment before curl's global cleanup. */
	for (i = 0; i < 200; i++) {
		int live;

		pthread_mutex_lock(&e->lock);
		live = e->pumps;
		pthread_mutex_unlock(&e->lock);
		if (!live)
			break;
		usleep(10000);
	}
	if (e->curl_started)
		curl_global_cleanup();
	pthread_mutex_destroy(&e->lock);
	free(e->unusable);
	free(e);
}

const char *docker_engine_socket(const struct docker_engine *e)
{
	return e->where;
}

/* ---- errors ----------------------------------------------------------------- */

/* The one place that words "cannot reach the daemon", from a connect errno. */
static int docker_connect_err(struct docker_engine *e, struct sg_err *err,
			      int sys)
{
	int rc;

	if (e->relay && docker_relay_take_error(e->relay, err))
		return -1;
	if (e->kind == DOCKER_TCP)
		rc = e->host->errf(err, SG_E_UNAVAILABLE,
				   "cannot connect to the docker engine at %s (%s): start dockerd "
				   "there with -H %s, or fix [docker] host / DOCKER_HOST", e->where,
				   strerror(sys ? sys : ECONNREFUSED), e->where);
	else if (sys == EACCES || sys == EPERM)
		rc = e->host->errf(err, SG_E_PERM,
				   "permission denied on the docker socket %s: add this "
				   "user to the docker group (usermod -aG docker USER, then "
				   "log in again) or run sandgate as a user allowed to use "
				   "docker", e->sock);
	else
		rc = e->host->errf(err, SG_E_UNAVAILABLE,
				   "cannot connect to the docker daemon at %s: dockerd is not "
				   "running (start it, e.g. systemctl start docker) or "
				   "[docker] host / DOCKER_HOST names the wrong socket (%s)",
				   e->sock, strerror(sys ? sys : ECONNREFUSED));
	if (err)
		err->sys_errno = sys;
	return rc;
}

static int docker_unusable_err(struct docker_engine *e, struct sg_err *err)
{
	return e->host->errf(err, SG_E_INVAL, "%s", e->unusable);
}

const char *docker_reply_message(const json_t *reply)
{
	const char *msg = json_string_value(json_object_get(reply, "message"));

	return msg ? msg : "";
}

int docker_engine_fail(struct docker_engine *e, struct sg_err *err, int code,
		       const char *what, long status, const json_t *reply)
{
	const char *msg = docker_reply_message(reply);

	return e->host->errf(err, code, "%s: docker answered HTTP %ld%s%s", what,
			     status, *msg ? ": " : "", msg);
}

/* ---- the curl pool ---------------------------------------------------------- */

static CURL *docker_pool_take(struct docker_engine *e)
{
	CURL *h = NULL;

	pthread_mutex_lock(&e->lock);
	if (e->n_idle > 0)
		h = e->idle[--e->n_idle];
	/* libcurl (and OpenSSL under it) starts at the first request, not at
	 * sandgate's start: its global init is thread-safe (7.84+) and counted. */
	if (!h && !e->curl_started)
		e->curl_started = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
	pthread_mutex_unlock(&e->lock);
	return h ? h : curl_easy_init();
}

/* Gives a handle back; reset keeps its live connection for the next call. */
static void docker_pool_give(struct docker_engine *e, CURL *h)
{
	curl_easy_reset(h);
	pthread_mutex_lock(&e->lock);
	if (e->n_idle < DOCKER_POOL_MAX) {
		e->idle[e->n_idle++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&e->lock);
	if (h)
		curl_easy_cleanup(h);
}

/* ---- one request ------------------------------------------------------------ */

struct docker_xfer {
	struct docker_engine *e;
	struct docker_reply *rp;
	const struct docker_http *rq;
	CURL *h;
	size_t max;
	bool oom;
	bool stopped;  /* on_body or the call's cancellation stopped it */
};

static size_t docker_on_body(char *p, size_t size, size_t n, void *ud)
{
	struct docker_xfer *x = ud;
	size_t len = size * n;

	long status = 0;

	if (x->rq->on_body)
		curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
	if (x->rq->on_body && status > 0 && status < 300) {
		if (x->rq->on_body(p, len, x->rq->ud) != 0) {
			x->stopped = true;
			return 0;
		}
		return len;
	}
	if (x->rp->body.len + len > x->max) {
		/* Returning short aborts the transfer: we never hold more than
		 * the caller allowed (file_read of a huge file). */
		x->rp->body_capped = true;
		return 0;
	}
	if (x->e->host->buf_append(&x->rp->body, p, len) < 0) {
		x->oom = true;
		return 0;
	}
	return len;
}

static size_t docker_on_header(char *p, size_t size, size_t n, void *ud)
{
	static const char name[] = "X-Docker-Container-Path-Stat:";
	struct docker_xfer *x = ud;
	size_t len = size * n, skip = sizeof(name) - 1;

	if (len > skip && strncasecmp(p, name, skip) == 0) {
		while (skip < len && (p[skip] == ' ' || p[skip] == '\t'))
			skip++;
		while (len > skip && (p[len - 1] == '\r' || p[len - 1] == '\n' ||
				      p[len - 1] == ' '))
			len--;
		free(x->rp->path_stat);
		x->rp->path_stat = strndup(p + skip, len - skip);
		if (!x->rp->path_stat)
			x->oom = true;
	}
	return size * n;
}

/* curl's progress callback: a cancelled call stops the transfer. */
static int docker_on_xfer(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	struct docker_xfer *x = ud;

	(void)dt, (void)dn, (void)ut, (void)un;
	if (x->rq->call && x->e->host->cancelled(x->rq->call)) {
		x->stopped = true;
		return 1;
	}
	return 0;
}

/* The deadline of this thread's command (docker_engine_deadline), 0 none.
 * initial-exec: eight bytes in each thread's static TLS block (glibc keeps
 * room for a dlopen'd module's), not a dynamic block made on a thread's
 * first use; LeakSanitizer's scan at exit, which walks the dynamic blocks
 * of threads that may be ending, crashed in it under load ("Tracer caught
 * signal 11" in ScanRangeForPointers, only in processes that used this
 * plugin). */
static _Thread_local long long docker_tl_deadline __attribute__((tls_model("initial-exec")));

static long long docker_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long long docker_engine_deadline(long long at_ms)
{
	long long old = docker_tl_deadline;

	docker_tl_deadline = at_ms;
	return old;
}

/* The time left before this thread's command deadline, when it is nearer
 * than `limit_ms`; else 0. */
static long docker_deadline_cut(long limit_ms)
{
	long long left;

	if (!docker_tl_deadline)
		return 0;
	left = docker_tl_deadline - docker_mono_ms();
	if (left >= limit_ms)
		return 0;
	return left > 1 ? (long)left : 1;
}

static long docker_timeout_ms(const struct docker_engine *e, const struct docker_http *rq)
{
	long limit = rq->timeout_ms ? (long)rq->timeout_ms : e->timeout_s * 1000;
	long cut = docker_deadline_cut(limit);

	return cut ? cut : limit;
}

/* Words a TLS failure: which certificate and what to change. */
static int docker_tls_err(struct docker_engine *e, CURLcode cc, const char *detail,
			  struct sg_err *err)
{
	const char *d = *detail ? detail : curl_easy_strerror(cc);

	switch (cc) {
	case CURLE_PEER_FAILED_VERIFICATION:
		return e->host->errf(err, SG_E_PERM, "TLS verification of the docker engine at %s "
				     "failed: its certificate is not signed by the CA %s (%s): set "
				     "[docker] cert_path / DOCKER_CERT_PATH to the directory whose "
				     "ca.pem signed the engine's certificate", e->where, e->ca, d);
	case CURLE_SSL_CACERT_BADFILE:
		return e->host->errf(err, SG_E_INVAL, "the CA certificate %s for the docker engine at "
				     "%s cannot be used (%s): put the PEM CA certificate in [docker] "
				     "cert_path / DOCKER_CERT_PATH as ca.pem", e->ca, e->where, d);
	case CURLE_SSL_CERTPROBLEM:
		return e->host->errf(err, SG_E_INVAL, "the client certificate %s or key %s for the "
				     "docker engine at %s cannot be used (%s): put a PEM certificate "
				     "and its key in [docker] cert_path as cert.pem and key.pem",
				     e->cert, e->key, e->where, d);
	default:
		if (!e->cert[0])
			return e->host->errf(err, SG_E_PERM, "the TLS handshake with the docker engine "
					     "at %s failed (%s): sandgate sent no client certificate "
					     "(no cert.pem and key.pem beside %s): put the client "
					     "certificate the engine trusts there", e->where, d, e->ca);
		return e->host->errf(err, SG_E_PERM, "the TLS handshake with the docker engine at "
				     "%s failed (%s): check that the engine trusts the client "
				     "certificate %s and that ca.pem is its CA", e->where, d, e->cert);
	}
}

static int docker_curl_err(struct docker_engine *e, CURL *h, CURLcode cc,
			   const struct docker_http *rq, const char *detail, struct sg_err *err)
{
	long sys = 0;

	/* With TLS 1.3 a server's refusal of the client (no or an untrusted
	 * certificate) arrives after our side of the handshake finished: as
	 * the first send or receive failing. */
	if (e->tls && (cc == CURLE_PEER_FAILED_VERIFICATION || cc == CURLE_SSL_CACERT_BADFILE ||
		       cc == CURLE_SSL_CERTPROBLEM || cc == CURLE_SSL_CONNECT_ERROR ||
		       ((cc == CURLE_RECV_ERROR || cc == CURLE_SEND_ERROR ||
			 cc == CURLE_GOT_NOTHING) && (strstr(detail, "alert") || !e->cert[0]))))
		return docker_tls_err(e, cc, detail, err);
	if (e->relay && docker_relay_take_error(e->relay, err))
		return -1;
	switch (cc) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
		curl_easy_getinfo(h, CURLINFO_OS_ERRNO, &sys);
		return docker_connect_err(e, err, (int)sys);
	case CURLE_OPERATION_TIMEDOUT:
		if (docker_tl_deadline && docker_mono_ms() + 5 >= docker_tl_deadline)
			return e->host->errf(err, SG_E_TIMEOUT,
					     "docker API %s %s on %s did not answer before the "
					     "command's timeout: the daemon is overloaded or hung "
					     "(each call may take [docker] api_timeout = %ld s)",
					     rq->method, rq->path, e->sock, e->timeout_s);
		return e->host->errf(err, SG_E_TIMEOUT,
				     "docker API %s %s on %s timed out after %ld ms: the "
				     "daemon is overloaded or hung (raise [docker] api_timeout)",
				     rq->method, rq->path, e->where, docker_timeout_ms(e, rq));
	case CURLE_OUT_OF_MEMORY:
		return e->host->errf(err, SG_E_NOMEM, "docker: out of memory");
	default:
		return e->host->errf(err, SG_E_IO, "docker API %s %s failed on %s: %s",
				     rq->method, rq->path, e->where,
				     curl_easy_strerror(cc));
	}
}

static void docker_reply_init(struct docker_reply *rp)
{
	memset(rp, 0, sizeof(*rp));
}

void docker_reply_free(struct docker_engine *e, struct docker_reply *rp)
{
	e->host->buf_release(&rp->body);
	free(rp->path_stat);
	docker_reply_init(rp);
}

/* Where the read callback is in a body given in pieces. */
struct docker_pieces_at {
	const struct docker_piece *p;
	size_t n, i, off;
};

static size_t docker_on_read(char *buf, size_t size, size_t n, void *ud)
{
	struct docker_pieces_at *at = ud;
	size_t room = size * n, put = 0;

	while (room > 0 && at->i < at->n) {
		size_t left = at->p[at->i].len - at->off, k = left < room ? left : room;

		memcpy(buf + put, (const char *)at->p[at->i].data + at->off, k);
		put += k;
		room -= k;
		at->off += k;
		if (at->off == at->p[at->i].len) {
			at->i++;
			at->off = 0;
		}
	}
	return put;
}

/* curl rewinds a body it sends again (a reused connection that had closed). */
static int docker_on_seek(void *ud, curl_off_t offset, int origin)
{
	struct docker_pieces_at *at = ud;

	if (origin != SEEK_SET || offset != 0)
		return CURL_SEEKFUNC_CANTSEEK;
	at->i = at->off = 0;
	return CURL_SEEKFUNC_OK;
}

/* Performs rq against the full path `vpath` (already versioned). */
static int docker_perform(struct docker_engine *e, const struct docker_http *rq,
			  const char *vpath, struct docker_reply *rp,
			  struct sg_err *err)
{
	struct docker_xfer x = { .e = e, .rp = rp, .rq = rq };
	struct docker_pieces_at at = { .p = rq->pieces, .n = rq->npieces };
	struct curl_slist *hdrs = NULL, *tmp;
	char url[4096], ctype[128], detail[CURL_ERROR_SIZE] = "";
	CURLcode cc;
	CURL *h;
	int rc = -1;

	x.max = rq->max_body ? rq->max_body : DOCKER_BODY_MAX;
	if ((size_t)snprintf(url, sizeof(url), "%s%s",
			     e->kind == DOCKER_TCP ? e->base : "http://docker", vpath) >= sizeof(url))
		return e->host->errf(err, SG_E_INVAL, "docker API path too long: %.64s...",
				     vpath);
	h = docker_pool_take(e);
	if (!h)
		return e->host->errf(err, SG_E_NOMEM, "docker: out of memory");
	x.h = h;
	/* An empty Expect: stops curl from waiting for 100-continue on larger
	 * bodies (up to a second per upload otherwise). */
	tmp = curl_slist_append(hdrs, "Expect:");
	if (!tmp)
		goto nomem;
	hdrs = tmp;
	if (rq->content_type) {
		snprintf(ctype, sizeof(ctype), "Content-Type: %s", rq->content_type);
		tmp = curl_slist_append(hdrs, ctype);
		if (!tmp)
			goto nomem;
		hdrs = tmp;
	}
	docker_transport_opts(e, h);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, detail);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, docker_timeout_ms(e, rq));
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, docker_timeout_ms(e, rq));
	curl_easy_setopt(h, CURLOPT_USERAGENT, "sandgate");
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, docker_on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, docker_on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, &x);
	if (rq->call) {
		curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, docker_on_xfer);
		curl_easy_setopt(h, CURLOPT_XFERINFODATA, &x);
	}
	if (strcmp(rq->method, "HEAD") == 0) {
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	} else if (strcmp(rq->method, "GET") != 0) {
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, rq->method);
		if (rq->pieces) {
			curl_off_t total = 0;

			for (size_t i = 0; i < rq->npieces; i++)
				total += (curl_off_t)rq->pieces[i].len;
			curl_easy_setopt(h, CURLOPT_POST, 1L);
			curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, total);
			curl_easy_setopt(h, CURLOPT_READFUNCTION, docker_on_read);
			curl_easy_setopt(h, CURLOPT_READDATA, &at);
			curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, docker_on_seek);
			curl_easy_setopt(h, CURLOPT_SEEKDATA, &at);
		} else if (rq->body || strcmp(rq->method, "POST") == 0) {
			curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
					 (curl_off_t)(rq->body ? rq->body_len : 0));
			curl_easy_setopt(h, CURLOPT_POSTFIELDS, rq->body ? rq->body : "");
		}
	}
	cc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &rp->status);
	if (x.oom)
		goto nomem;
	if (x.stopped) {
		/* The connection is in the middle of an answer: never reuse it. */
		curl_easy_cleanup(h);
		h = NULL;
		if (rq->call && e->host->cancelled(rq->call))
			e->host->errf(err, SG_E_CANCELLED, "docker API %s %s: cancelled", rq->method, rq->path);
		else
			e->host->errf(err, SG_E_IO, "docker API %s %s: the answer's reader stopped it",
				      rq->method, rq->path);
		goto out;
	}
	if (cc != CURLE_OK && !(cc == CURLE_WRITE_ERROR && rp->body_capped)) {
		docker_curl_err(e, h, cc, rq, detail, err);
		goto out;
	}
	rc = 0;
	goto out;
nomem:
	e->host->errf(err, SG_E_NOMEM, "docker: out of memory");
out:
	curl_slist_free_all(hdrs);
	if (h)
		docker_pool_give(e, h);
	return rc;
}

/* ---- API version ------------------------------------------------------------- */

/* Parses "1.41" into minor 41; -1 when it is not 1.x. */
static int docker_api_minor(const char *v)
{
	char *end;
	long major, minor;

	if (!v)
		return -1;
	major = strtol(v, &end, 10);
	if (*end != '.')
		return -1;
	minor = strtol(end + 1, &end, 10);
	if (*end || major != DOCKER_API_MAJOR || minor < 0 || minor > 999)
		return -1;
	return (int)minor;
}

/* Fills e->api once: min(server ApiVersion, what we speak). */
static int docker_negotiate(struct docker_engine *e, struct sg_err *err)
{
	struct docker_http rq = { .method = "GET", .path = "/version" };
	struct docker_reply rp;
	json_t *v = NULL;
	const char *server;
	int minor, rc = -1;

	pthread_mutex_lock(&e->lock);
	rc = e->api[0] ? 0 : -1;
	pthread_mutex_unlock(&e->lock);
	if (rc == 0)
		return 0;
	/* Two threads may race here: both ask, both store the same answer. */
	docker_reply_init(&rp);
	if (docker_perform(e, &rq, "/version", &rp, err) < 0)
		goto out;
	if (rp.status != 200 ||
	    !(v = json_loadb(rp.body.data ? rp.body.data : "", rp.body.len, 0, NULL))) {
		e->host->errf(err, SG_E_PROTO,
			      "%s does not answer GET /version like a docker daemon "
			      "(HTTP %ld): check [docker] host / DOCKER_HOST", e->where,
			      rp.status);
		goto out;
	}
	server = json_string_value(json_object_get(v, "ApiVersion"));
	minor = docker_api_minor(server);
	if (minor < DOCKER_API_MIN_MINOR) {
		e->host->errf(err, SG_E_NOTSUP,
			      "docker engine API %s at %s is too old: sandgate needs "
			      "1.%d or newer (docker 17.12+), upgrade docker",
			      server ? server : "?", e->where, DOCKER_API_MIN_MINOR);
		goto out;
	}
	if (minor > DOCKER_API_MINOR)
		minor = DOCKER_API_MINOR;
	pthread_mutex_lock(&e->lock);
	snprintf(e->api, sizeof(e->api), "%d.%d", DOCKER_API_MAJOR, minor);
	pthread_mutex_unlock(&e->lock);
	e->host->log(SG_LOG_DEBUG, DOCKER_PLUGIN, "docker engine API %d.%d at %s",
		     DOCKER_API_MAJOR, minor, e->where);
	rc = 0;
out:
	json_decref(v);
	docker_reply_free(e, &rp);
	return rc;
}

int docker_engine_probe(struct docker_engine *e, unsigned timeout_ms, json_t **version,
			struct sg_err *err)
{
	struct docker_http rq = { .method = "GET", .path = "/version", .max_body = 65536,
				  .timeout_ms = timeout_ms ? timeout_ms : 1 };
	struct docker_reply rp;
	int rc = -1;

	*version = NULL;
	if (e->unusable)
		return docker_unusable_err(e, err);
	docker_reply_init(&rp);
	if (docker_perform(e, &rq, "/version", &rp, err) < 0)
		goto out;
	*version = json_loadb(rp.body.data ? rp.body.data : "", rp.body.len, 0, NULL);
	if (rp.status != 200 || !json_is_object(*version)) {
		json_decref(*version);
		*version = NULL;
		e->host->errf(err, SG_E_UNAVAILABLE,
			      "%s does not answer GET /version like a Docker engine (HTTP %ld): "
			      "check [docker] host / DOCKER_HOST", e->where, rp.status);
		goto out;
	}
	rc = 0;
out:
	docker_reply_free(e, &rp);
	return rc;
}

/* Writes "/v1.41<path>" into buf. */
static int docker_vpath(struct docker_engine *e, const char *path, char *buf,
			size_t size, struct sg_err *err)
{
	char api[sizeof(e->api)];

	if (e->unusable)
		return docker_unusable_err(e, err);
	if (docker_negotiate(e, err) < 0)
		return -1;
	pthread_mutex_lock(&e->lock);
	memcpy(api, e->api, sizeof(api));
	pthread_mutex_unlock(&e->lock);
	if ((size_t)snprintf(buf, size, "/v%s%s", api, path) >= size)
		return e->host->errf(err, SG_E_INVAL, "docker API path too long: %.64s...",
				     path);
	return 0;
}

int docker_engine_call(struct docker_engine *e, const struct docker_http *rq,
		       struct docker_reply *rp, struct sg_err *err)
{
	char vpath[4096];

	docker_reply_init(rp);
	if (docker_vpath(e, rq->path, vpath, sizeof(vpath), err) < 0)
		return -1;
	return docker_perform(e, rq, vpath, rp, err);
}

int docker_engine_json(struct docker_engine *e, const char *method,
		       const char *path, const json_t *body, long *status,
		       json_t **out, struct sg_err *err)
{
	struct docker_http rq = { .method = method, .path = path };
	struct docker_reply rp;
	char *text = NULL; /* the encoded body, freed here */
	int rc = -1;

	*out = NULL;
	*status = 0;
	if (body) {
		text = json_dumps(body, JSON_COMPACT);
		if (!text)
			return e->host->errf(err, SG_E_NOMEM, "docker: out of memory");
		rq.body = text;
		rq.body_len = strlen(text);
		rq.content_type = "application/json";
	}
	if (docker_engine_call(e, &rq, &rp, err) < 0)
		goto out;
	*status = rp.status;
	if (rp.body.len > 0) {
		*out = json_loadb(rp.body.data, rp.body.len, 0, NULL);
		/* Error answers are JSON too, but tolerate plain text there. */
		if (!*out && rp.status < 300) {
			e->host->errf(err, SG_E_PROTO,
				      "docker API %s %s answered something that is not "
				      "JSON", method, path);
			goto out;
		}
		if (!*out)
			*out = json_pack("{s:s%}", "message", rp.body.data, rp.body.len);
	}
	rc = 0;
out:
	docker_reply_free(e, &rp);
	free(text);
	return rc;
}

/* ---- hijacked streams ------------------------------------------------------- */

static int docker_unix_connect(struct docker_engine *e, int *fd,
			       struct sg_err *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int s;

	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return e->host->errf(err, SG_E_IO, "docker: socket(): %s",
				     strerror(errno));
	memcpy(sa.sun_path, e->sock, strlen(e->sock) + 1);
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int sys = errno;

		close(s);
		return docker_connect_err(e, err, sys);
	}
	*fd = s;
	return 0;
}

/* A connection for an attached stream: the socket, or over tcp:// a
 * socketpair that a pump copies to the connection libcurl holds. */
static int docker_stream_connect(struct docker_engine *e, int *fd, struct sg_err *err)
{
	struct docker_http rq = { .method = "POST", .path = "(attach)" };
	char detail[CURL_ERROR_SIZE] = "";
	CURLcode cc;
	CURL *h;

	if (e->kind != DOCKER_TCP)
		return docker_unix_connect(e, fd, err);
	/* A handle of its own (not the pool's, whose cached connections belong
	 * to requests): the pump owns it until the stream closes. */
	h = curl_easy_init();
	if (!h)
		return e->host->errf(err, SG_E_NOMEM, "docker: out of memory");
	docker_transport_opts(e, h);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, detail);
	curl_easy_setopt(h, CURLOPT_URL, e->base);
	curl_easy_setopt(h, CURLOPT_CONNECT_ONLY, 1L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, e->timeout_s * 1000);
	cc = curl_easy_perform(h);
	if (cc != CURLE_OK) {
		docker_curl_err(e, h, cc, &rq, detail, err);
		curl_easy_cleanup(h);
		return -1;
	}
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
	return docker_pump_start(e->host, h, &e->pumps, &e->lock, fd, err);
}

static int docker_send_all(int fd, const char *p, size_t n)
{
	ssize_t w;

	while (n > 0) {
		w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static long docker_ms_left(const struct timespec *deadline)
{
	struct timespec now;
	long ms;

	clock_gettime(CLOCK_MONOTONIC, &now);
	ms = (deadline->tv_sec - now.tv_sec) * 1000 +
	     (deadline->tv_nsec - now.tv_nsec) / 1000000;
	return ms > 0 ? ms : 0;
}

/* Reads what is available into buf[*len..cap) before the deadline.  Returns
 * bytes read, 0 at EOF, -1 on error or timeout (errno ETIMEDOUT). */
static ssize_t docker_read_until(int fd, char *buf, size_t cap, size_t *len,
				 const struct timespec *deadline)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	ssize_t r;
	int pr;

	for (;;) {
		pr = poll(&pfd, 1, (int)docker_ms_left(deadline));
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr == 0)
			errno = ETIMEDOUT;
		if (pr <= 0)
			return -1;
		r = read(fd, buf + *len, cap - *len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r > 0)
			*len += (size_t)r;
		return r;
	}
}

/* Pulls the daemon's message out of an error answer's body (JSON, maybe
 * chunked, maybe plain text) into err. */
static int docker_hijack_fail(struct docker_engine *e, const char *path,
			      long status, const char *body, size_t len,
			      struct sg_err *err)
{
	const char *open = memchr(body, '{', len), *close = NULL;
	json_t *j = NULL;
	int rc;

	for (size_t i = len; open && i > (size_t)(open - body); i--)
		if (body[i - 1] == '}') {
			close = body + i;
			break;
		}
	if (open && close)
		j = json_loadb(open, (size_t)(close - open), 0, NULL);
	rc = e->host->errf(err, SG_E_BACKEND, "docker API POST %s: docker answered "
			   "HTTP %ld%s%s", path, status, j ? ": " : "",
			   j ? docker_reply_message(j) : "");
	json_decref(j);
	return rc;
}

/* Reads the answer head into head[0..*len) (NUL-terminated) and parses its
 * status; *hlen is where the stream (or error body) starts. */
static int docker_hijack_head(struct docker_engine *e, int s, const char *path,
			      char *head, size_t *len, size_t *hlen, long *status,
			      struct sg_err *err)
{
	struct timespec deadline;
	char *end;

	long cut = docker_deadline_cut(e->timeout_s * 1000);

	clock_gettime(CLOCK_MONOTONIC, &deadline);
	if (cut) {
		deadline.tv_sec += cut / 1000;
		deadline.tv_nsec += (cut % 1000) * 1000000;
		if (deadline.tv_nsec >= 1000000000) {
			deadline.tv_sec++;
			deadline.tv_nsec -= 1000000000;
		}
	} else {
		deadline.tv_sec += e->timeout_s;
	}
	for (;;) {
		head[*len] = '\0';
		end = strstr(head, "\r\n\r\n");
		if (end)
			break;
		if (*len == DOCKER_HEAD_MAX)
			return e->host->errf(err, SG_E_PROTO, "docker API POST %s: answer "
					     "head longer than %d bytes", path,
					     DOCKER_HEAD_MAX);
		if (docker_read_until(s, head, DOCKER_HEAD_MAX, len, &deadline) <= 0)
			return e->host->errf(err, errno == ETIMEDOUT ? SG_E_TIMEOUT : SG_E_IO,
					     "docker API POST %s: no answer from %s (%s)%s",
					     path, e->where, *len ? "cut short" :
					     errno == ETIMEDOUT ? "timed out" : "closed",
					     errno == ETIMEDOUT ? ": the daemon is overloaded or hung "
					     "([docker] api_timeout)" : "");
	}
	*hlen = (size_t)(end - head) + 4;
	if (sscanf(head, "HTTP/1.%*d %ld", status) != 1)
		return e->host->errf(err, SG_E_PROTO, "docker API POST %s: bad answer "
				     "line", path);
	return 0;
}

int docker_engine_hijack(struct docker_engine *e, const char *path,
			 const json_t *body, int *fd, struct sg_buf *early,
			 long *status, struct sg_err *err)
{
	char vpath[4096], head[DOCKER_HEAD_MAX + 1], *req = NULL, *json = NULL;
	struct timespec soon;
	size_t len = 0, hlen = 0;
	int s = -1, n;

	*fd = -1;
	*status = 0;
	if (docker_vpath(e, path, vpath, sizeof(vpath), err) < 0)
		return -1;
	json = json_dumps(body, JSON_COMPACT); /* freed below */
	if (!json)
		return e->host->errf(err, SG_E_NOMEM, "docker: out of memory");
	/* Upgrade: tcp makes the daemon answer 101 and hand the connection
	 * over to the exec's streams. */
	n = asprintf(&req, "POST %s HTTP/1.1\r\nHost: docker\r\nUser-Agent: sandgate\r\n"
		     "Content-Type: application/json\r\nContent-Length: %zu\r\n"
		     "Connection: Upgrade\r\nUpgrade: tcp\r\n\r\n%s",
		     vpath, strlen(json), json);
	if (n < 0) {
		req = NULL;
		e->host->errf(err, SG_E_NOMEM, "docker: out of memory");
		goto out;
	}
	if (docker_stream_connect(e, &s, err) < 0)
		goto out;
	if (docker_send_all(s, req, (size_t)n) < 0) {
		e->host->errf(err, SG_E_IO, "docker API POST %s: write to %s: %s",
			      path, e->where, strerror(errno));
		goto out;
	}
	if (docker_hijack_head(e, s, path, head, &len, &hlen, status, err) < 0) {
		/* ssh://: the relay closed it and knows why. */
		if (e->relay)
			docker_relay_take_error(e->relay, err);
		goto out;
	}
	if (*status != 101 && *status != 200) {
		/* An error body is short: take what comes before EOF or 1 s. */
		clock_gettime(CLOCK_MONOTONIC, &soon);
		soon.tv_sec += 1;
		while (len < DOCKER_HEAD_MAX &&
		       docker_read_until(s, head, DOCKER_HEAD_MAX, &len, &soon) > 0)
			;
		docker_hijack_fail(e, path, *status, head + hlen, len - hlen, err);
		goto out;
	}
	if (len > hlen && e->host->buf_append(early, head + hlen, len - hlen) < 0) {
		e->host->errf(err, SG_E_NOMEM, "docker: out of memory");
		goto out;
	}
	*fd = s;
	s = -1;
out:
	if (s >= 0)
		close(s);
	free(req);
	free(json);
	return *fd >= 0 ? 0 : -1;
}

/* ---- helpers ------------------------------------------------------------------ */

char *docker_engine_escape(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s), i, o = 0;
	char *out = malloc(n * 3 + 1); /* caller frees */

	if (!out)
		return NULL;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' ||
		    c == '~' || c == '/') {
			out[o++] = (char)c;
		} else {
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	out[o] = '\0';
	return out;
}
