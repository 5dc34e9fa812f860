/*
 * fc.so's HTTP transport: see http.h for the pool, cancellation and the
 * retry policy.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/fc/http.h"

#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "0.0.0"
#endif

#define FC_POOL_MAX       16
#define FC_CONNECT_MS     10000L
#define FC_BACKOFF_MS     200L
#define FC_BACKOFF_MAX_MS 2000L

/* One pooled pair: the multi handle holds the connection cache. */
struct fc_conn {
	CURLM *multi;
	CURL *easy;
	struct fc_conn *next;
};

struct fc_http {
	const struct sg_host_api *host; /* borrowed */
	pthread_mutex_t lock;
	struct fc_conn *idle;           /* owned list */
	unsigned n_idle;
	bool curl_started;              /* curl_global_init() done (ended in free) */
};

/* What the curl callbacks see during one attempt. */
struct fc_xfer {
	const struct fc_req *rq;
	struct fc_resp *rp;
	const struct sg_host_api *host;
	CURL *easy;
	long status;  /* known once the first body byte arrives */
	size_t cap;
	size_t sent;  /* request body bytes handed to curl (read callback) */
	unsigned sends;          /* sends this attempt began (pre-request callback) */
	long sent_before;        /* CURLINFO_REQUEST_SIZE as the first began */
	bool resend_refused;     /* curl's silent re-send was stopped */
};

struct fc_http *fc_http_new(const struct sg_host_api *host)
{
	struct fc_http *h = calloc(1, sizeof(*h)); /* freed by fc_http_free() */

	if (!h)
		return NULL;
	h->host = host;
	pthread_mutex_init(&h->lock, NULL);
	return h;
}

static void fc_conn_free(struct fc_conn *c)
{
	if (!c)
		return;
	if (c->easy)
		curl_easy_cleanup(c->easy);
	if (c->multi)
		curl_multi_cleanup(c->multi);
	free(c);
}

void fc_http_free(struct fc_http *h)
{
	if (!h)
		return;
	while (h->idle) {
		struct fc_conn *c = h->idle;

		h->idle = c->next;
		fc_conn_free(c);
	}
	if (h->curl_started)
		curl_global_cleanup();
	pthread_mutex_destroy(&h->lock);
	free(h);
}

static struct fc_conn *fc_conn_get(struct fc_http *h)
{
	struct fc_conn *c;

	pthread_mutex_lock(&h->lock);
	c = h->idle;
	if (c) {
		h->idle = c->next;
		h->n_idle--;
	}
	/* libcurl (and OpenSSL under it) starts at the first request, not at
	 * sandgate's start: its global init is thread-safe (7.84+) and counted. */
	if (!c && !h->curl_started)
		h->curl_started = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
	pthread_mutex_unlock(&h->lock);
	if (c)
		return c;
	c = calloc(1, sizeof(*c)); /* back to the pool or fc_conn_free() */
	if (!c)
		return NULL;
	c->multi = curl_multi_init();
	c->easy = curl_easy_init();
	if (!c->multi || !c->easy) {
		fc_conn_free(c);
		return NULL;
	}
	return c;
}

/* A pair whose transfer broke is still reusable: curl drops a dead
 * connection by itself.  The pool only bounds how many idle pairs stay. */
static void fc_conn_put(struct fc_http *h, struct fc_conn *c)
{
	pthread_mutex_lock(&h->lock);
	if (h->n_idle < FC_POOL_MAX) {
		c->next = h->idle;
		h->idle = c;
		h->n_idle++;
		c = NULL;
	}
	pthread_mutex_unlock(&h->lock);
	fc_conn_free(c);
}

void fc_resp_free(struct fc_ctx *ctx, struct fc_resp *rp)
{
	ctx->host->buf_release(&rp->body);
	memset(rp, 0, sizeof(*rp));
}

/* ---- headers ----------------------------------------------------------------- */

int fc_hdr_add(struct curl_slist **list, const char *fmt, ...)
{
	char line[1024];
	struct curl_slist *n;
	va_list ap;
	int w;

	va_start(ap, fmt);
	w = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (w < 0 || (size_t)w >= sizeof(line))
		return -1;
	n = curl_slist_append(*list, line);
	explicit_bzero(line, sizeof(line)); /* may hold a key */
	if (!n)
		return -1;
	*list = n;
	return 0;
}

struct curl_slist *fc_platform_headers(struct fc_ctx *ctx, bool json_body,
				       struct sg_err *err)
{
	struct curl_slist *l = NULL;

	if (!ctx->api_key || !*ctx->api_key) {
		ctx->host->errf(err, SG_E_PERM,
				"fc: no API key: set [fc] api_key, or SANDGATE_FC_API_KEY, "
				"ABX_SANDBOX_API_KEY or E2B_API_KEY in the environment");
		return NULL;
	}
	/* ref. 2.1: FC accepts both; send both. */
	if (fc_hdr_add(&l, "X-API-Key: %s", ctx->api_key) < 0 ||
	    fc_hdr_add(&l, "Authorization: Bearer %s", ctx->api_key) < 0 ||
	    fc_hdr_add(&l, "Accept: application/json") < 0 ||
	    fc_hdr_add(&l, "Expect:") < 0 ||
	    (json_body && fc_hdr_add(&l, "Content-Type: application/json") < 0)) {
		curl_slist_free_all(l);
		ctx->host->errf(err, SG_E_NOMEM, "fc: out of memory");
		return NULL;
	}
	return l;
}

struct curl_slist *fc_envd_headers(const struct fc_machine *fm, int port,
				   const char *content_type, struct sg_err *err)
{
	struct fc_ctx *ctx = fm->ctx;
	struct curl_slist *l = NULL;

	/* ref. 3.1: the token, and the routing headers E2B always sends. */
	if ((fm->token[0] && fc_hdr_add(&l, "X-Access-Token: %s", fm->token) < 0) ||
	    fc_hdr_add(&l, "E2b-Sandbox-Id: %s", fm->id) < 0 ||
	    fc_hdr_add(&l, "E2b-Sandbox-Port: %d", port) < 0 ||
	    fc_hdr_add(&l, "Expect:") < 0 ||
	    (ctx->envd_basic && fc_hdr_add(&l, "Authorization: Basic %s", ctx->envd_basic) < 0) ||
	    (content_type && fc_hdr_add(&l, "Content-Type: %s", content_type) < 0)) {
		curl_slist_free_all(l);
		ctx->host->errf(err, SG_E_NOMEM, "fc: out of memory");
		return NULL;
	}
	return l;
}

char *fc_url_escape(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	char *out = malloc(3 * n + 1), *o = out; /* caller frees */

	if (!out)
		return NULL;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (isalnum(*p) || *p == '-' || *p == '_' || *p == '.' || *p == '~' || *p == '/') {
			*o++ = (char)*p;
		} else {
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 15];
		}
	}
	*o = '\0';
	return out;
}

/* ---- messages ---------------------------------------------------------------- */

static void fc_replace_all(char *msg, size_t size, const char *needle)
{
	static const char red[] = "[redacted]";
	size_t nl, rl = sizeof(red) - 1;
	char *p;

	if (!needle || (nl = strlen(needle)) < 4)
		return;
	while ((p = strstr(msg, needle)) != NULL) {
		size_t tail = strlen(p + nl);

		if ((size_t)(p - msg) + rl + tail + 1 > size)
			tail = size - 1 - (size_t)(p - msg) - rl;
		memmove(p + rl, p + nl, tail);
		p[rl + tail] = '\0';
		memcpy(p, red, rl);
	}
}

void fc_scrub(const struct fc_ctx *ctx, char *msg, size_t size, const char *secret)
{
	fc_replace_all(msg, size, ctx->api_key);
	fc_replace_all(msg, size, secret);
}

static void fc_clean_text(const char *p, size_t n, char *out, size_t size)
{
	size_t o = 0;

	while (n > 0 && isspace((unsigned char)*p)) {
		p++;
		n--;
	}
	for (size_t i = 0; i < n && o + 1 < size && o < 300; i++) {
		unsigned char c = (unsigned char)p[i];

		if (c == '\n' || c == '\r')
			break;
		out[o++] = c < 0x20 || c == 0x7f ? ' ' : (char)c;
	}
	while (o > 0 && out[o - 1] == ' ')
		o--;
	out[o] = '\0';
}

void fc_http_message(const struct fc_resp *rp, char *out, size_t size)
{
	const char *p = rp->body.data ? rp->body.data : "";
	size_t n = rp->body.len;
	json_t *j = NULL, *m, *c;

	out[0] = '\0';
	if (n > 0 && n < FC_MAX_ERROR_BODY)
		j = json_loadb(p, n, 0, NULL);
	if (json_is_object(j)) {
		m = json_object_get(j, "message");
		if (!json_is_string(m))
			m = json_object_get(j, "Message"); /* FC's gateway (ref. 2.2) */
		c = json_object_get(j, "code");
		if (!c)
			c = json_object_get(j, "Code");
		if (json_is_string(m) && json_is_string(c))
			snprintf(out, size, "%s: %s", json_string_value(c), json_string_value(m));
		else if (json_is_string(m))
			snprintf(out, size, "%s", json_string_value(m));
		json_decref(j);
		if (out[0]) {
			char tmp[512];

			fc_clean_text(out, strlen(out), tmp, sizeof(tmp));
			snprintf(out, size, "%s", tmp);
			return;
		}
	} else {
		json_decref(j);
	}
	fc_clean_text(p, n, out, size);
	if (!out[0])
		snprintf(out, size, "(no message)");
}

/* ref. 2.2, 5.1: statuses mapped to the project's error codes. */
static int fc_status_code(long status)
{
	switch (status) {
	case 400: return SG_E_INVAL;
	case 401: case 403: return SG_E_PERM;
	case 404: return SG_E_NOTFOUND;
	case 409: return SG_E_EXISTS;
	case 429: return SG_E_BUSY;
	case 502: case 503: return SG_E_UNAVAILABLE;
	case 504: return SG_E_TIMEOUT;
	case 507: return SG_E_TOOBIG;
	default: return SG_E_BACKEND;
	}
}

/* What to do about a refusal.  The platform API (no sandbox secret) checks
 * the API key; a sandbox's own daemon checks its access token, and refuses
 * a path outside what it serves, which no key would fix. */
static const char *fc_http_hint(long status, bool in_sandbox)
{
	if (status != 401 && status != 403)
		return "";
	if (!in_sandbox)
		return ": check [fc] api_key (or ABX_SANDBOX_API_KEY)";
	if (status == 403)
		return ": the sandbox refused it; for a file, give a path inside the sandbox's filesystem";
	return ": the sandbox no longer takes its access token; create a new sandbox";
}

int fc_http_fail(struct fc_ctx *ctx, struct sg_err *err, const char *what,
		 const struct fc_resp *rp, const char *secret)
{
	char msg[400];

	fc_http_message(rp, msg, sizeof(msg));
	fc_scrub(ctx, msg, sizeof(msg), secret);
	ctx->host->errf(err, fc_status_code(rp->status), "fc: %s: HTTP %ld: %s%s", what,
			rp->status, msg, fc_http_hint(rp->status, secret != NULL));
	return -1;
}

/* ---- one attempt ------------------------------------------------------------------ */

static size_t fc_on_body(char *p, size_t size, size_t nmemb, void *ud)
{
	struct fc_xfer *x = ud;
	size_t n = size * nmemb;

	if (x->rq->on_data && !x->status)
		curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->status);
	/* Only a 200 is a stream; an error answer is kept to be quoted. */
	if (x->rq->on_data && x->status != 200) {
		if (x->rp->body.len + n <= FC_MAX_ERROR_BODY)
			x->host->buf_append(&x->rp->body, p, n);
		return n;
	}
	if (x->rq->on_data) {
		if (x->rq->on_data(x->rq->ud, p, n) < 0) {
			x->rp->stopped = true;
			return 0;
		}
		return n;
	}
	if (x->rp->body.len + n > x->cap) {
		x->rp->capped = true;
		return 0;
	}
	if (x->host->buf_append(&x->rp->body, p, n) < 0)
		return 0;
	return n;
}

static size_t fc_on_header(char *p, size_t size, size_t nmemb, void *ud)
{
	struct fc_xfer *x = ud;
	size_t n = size * nmemb;
	char line[256];
	char *v;

	if (n >= sizeof(line))
		return n;
	memcpy(line, p, n);
	line[n] = '\0';
	line[strcspn(line, "\r\n")] = '\0';
	v = strchr(line, ':');
	if (!v)
		return n;
	*v++ = '\0';
	while (*v == ' ')
		v++;
	if (strcasecmp(line, "Content-Type") == 0) {
		snprintf(x->rp->content_type, sizeof(x->rp->content_type), "%s", v);
	} else if (strcasecmp(line, "Retry-After") == 0) {
		char *end;
		long s = strtol(v, &end, 10);

		/* Only delta-seconds count, as in E2B's client (ref. 2.2). */
		x->rp->retry_after_s = (end != v && *end == '\0' && s >= 0) ? s : -1;
	}
	return n;
}

/* A request that is not idempotent must not go out twice, yet libcurl
 * silently re-sends a request on a fresh connection when a reused one dies
 * before any answer (Curl_retry_request).
 *
 * libcurl >= 7.80: the body goes out as POSTFIELDS, in the same write as the
 * headers (one segment, one wake-up of the server, no extra turn of the
 * transfer loop), and the pre-request callback, which libcurl calls before
 * every send of the request, refuses a second send once bytes of the first
 * went out (CURLINFO_REQUEST_SIZE counts what was written).  This also
 * covers multipart bodies, which libcurl rewinds by itself.
 *
 * Older libcurl: the body goes through a read callback, and the rewind a
 * re-send needs is refused once bytes went out; libcurl then writes the body
 * after the headers, in a second write. */
#if LIBCURL_VERSION_NUM >= 0x075000
#define FC_HAVE_PREREQ 1

static int fc_prereq(void *ud, char *remote_ip, char *local_ip, int remote_port, int local_port)
{
	struct fc_xfer *x = ud;
	long size = 0;

	(void)remote_ip;
	(void)local_ip;
	(void)remote_port;
	(void)local_port;
	curl_easy_getinfo(x->easy, CURLINFO_REQUEST_SIZE, &size);
	if (x->sends++ == 0) {
		x->sent_before = size;
		return CURL_PREREQFUNC_OK;
	}
	if (size == x->sent_before)
		return CURL_PREREQFUNC_OK; /* nothing went out: a plain reconnect */
	x->resend_refused = true;
	return CURL_PREREQFUNC_ABORT;
}
#else
static size_t fc_read_body(char *buf, size_t size, size_t nmemb, void *ud)
{
	struct fc_xfer *x = ud;
	size_t left = x->rq->body_len - x->sent, n = size * nmemb;

	if (n > left)
		n = left;
	memcpy(buf, (const char *)x->rq->body + x->sent, n);
	x->sent += n;
	return n;
}

static int fc_seek_body(void *ud, curl_off_t offset, int origin)
{
	struct fc_xfer *x = ud;

	if (origin != SEEK_SET || offset != 0 || x->sent > 0)
		return CURL_SEEKFUNC_CANTSEEK;
	return CURL_SEEKFUNC_OK;
}
#endif

static int fc_set_method(CURL *e, const struct fc_req *rq, struct fc_xfer *x)
{
#ifdef FC_HAVE_PREREQ
	if (!rq->idempotent && strcmp(rq->method, "GET") != 0) {
		curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, fc_prereq);
		curl_easy_setopt(e, CURLOPT_PREREQDATA, x);
	}
#endif
	if (strcmp(rq->method, "GET") == 0)
		return curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
	if (rq->mime)
		return curl_easy_setopt(e, CURLOPT_MIMEPOST, rq->mime);
	if (strcmp(rq->method, "POST") != 0 &&
	    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, rq->method) != CURLE_OK)
		return -1;
	if (strcmp(rq->method, "DELETE") == 0 && !rq->body)
		return 0;
	curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
#ifndef FC_HAVE_PREREQ
	if (!rq->idempotent && rq->body) {
		curl_easy_setopt(e, CURLOPT_POST, 1L);
		curl_easy_setopt(e, CURLOPT_READFUNCTION, fc_read_body);
		curl_easy_setopt(e, CURLOPT_READDATA, x);
		curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, fc_seek_body);
		return curl_easy_setopt(e, CURLOPT_SEEKDATA, x);
	}
#else
	(void)x;
#endif
	return curl_easy_setopt(e, CURLOPT_POSTFIELDS, rq->body ? rq->body : "");
}

static void fc_setup(CURL *e, const struct fc_req *rq, struct fc_xfer *x)
{
	long connect_ms = FC_CONNECT_MS;

	if (rq->timeout_ms && rq->timeout_ms < (unsigned long)connect_ms)
		connect_ms = (long)rq->timeout_ms;
	curl_easy_reset(e); /* keeps the multi's connections */
	curl_easy_setopt(e, CURLOPT_URL, rq->url);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "sandgate/" PACKAGE_VERSION);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, rq->headers);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)rq->timeout_ms);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, fc_on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, fc_on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
}

/* Drives the transfer in c->multi until done, the call is cancelled or the
 * abort fd fires.  Returns the CURLcode, or -1 when cancelled. */
static int fc_drive(struct fc_ctx *ctx, struct fc_conn *c, const struct fc_req *rq)
{
	const struct sg_host_api *host = ctx->host;
	int64_t start = fc_now_ms(), last_tick = start;
	int cfd = rq->call ? host->cancel_fd(rq->call) : -1;
	CURLMsg *msg;
	int left, running = 1;

	while (running) {
		struct curl_waitfd w[2];
		unsigned nw = 0;

		if (curl_multi_perform(c->multi, &running) != CURLM_OK)
			return CURLE_FAILED_INIT;
		if (!running)
			break;
		if (cfd >= 0)
			w[nw++] = (struct curl_waitfd){ .fd = cfd, .events = CURL_WAIT_POLLIN };
		if (rq->abort_fd >= 0)
			w[nw++] = (struct curl_waitfd){ .fd = rq->abort_fd, .events = CURL_WAIT_POLLIN };
		if (curl_multi_poll(c->multi, w, nw, 1000, NULL) != CURLM_OK)
			return CURLE_FAILED_INIT;
		for (unsigned i = 0; i < nw; i++)
			if (w[i].revents)
				return -1;
		if (rq->call && host->cancelled(rq->call))
			return -1;
		if (rq->tick && fc_now_ms() - last_tick >= 1000) {
			last_tick = fc_now_ms();
			rq->tick(rq->ud, (double)(last_tick - start) / 1000.0);
		}
	}
	while ((msg = curl_multi_info_read(c->multi, &left)) != NULL)
		if (msg->msg == CURLMSG_DONE)
			return (int)msg->data.result;
	return CURLE_OK;
}

static int fc_transport_error(struct fc_ctx *ctx, const struct fc_req *rq, int rc,
			      bool resend_refused, bool *no_connect, struct sg_err *err)
{
	const struct sg_host_api *host = ctx->host;

	if (resend_refused)
		rc = CURLE_SEND_FAIL_REWIND; /* fc_prereq stopped it: the same story */
	switch (rc) {
	case -1:
		return host->errf(err, SG_E_CANCELLED, "fc: %s: cancelled", rq->what);
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_COULDNT_CONNECT:
		*no_connect = true;
		return host->errf(err, SG_E_UNAVAILABLE, "fc: %s: cannot connect: %s", rq->what,
				  curl_easy_strerror((CURLcode)rc));
	case CURLE_OPERATION_TIMEDOUT:
		return host->errf(err, SG_E_TIMEOUT, "fc: %s: no complete answer within %u s",
				  rq->what, (rq->timeout_ms + 999) / 1000);
	case CURLE_OUT_OF_MEMORY:
		return host->errf(err, SG_E_NOMEM, "fc: %s: out of memory", rq->what);
	case CURLE_SEND_FAIL_REWIND:
		return host->errf(err, SG_E_IO,
				  "fc: %s: the connection broke after the request went out; it was not re-sent "
				  "(not idempotent): check the sandbox before trying again", rq->what);
	default:
		return host->errf(err, SG_E_IO, "fc: %s: connection failed: %s", rq->what,
				  curl_easy_strerror((CURLcode)rc));
	}
}

/* One try.  Returns 0 when answered, -1 (err filled) otherwise. */
static int fc_attempt(struct fc_ctx *ctx, const struct fc_req *rq, struct fc_resp *rp,
		      bool *no_connect, struct sg_err *err)
{
	struct fc_xfer x = { .rq = rq, .rp = rp, .host = ctx->host,
			     .cap = rq->max_body ? rq->max_body : FC_MAX_JSON_BODY };
	struct fc_conn *c = fc_conn_get(ctx->http);
	int rc;

	*no_connect = false;
	if (!c)
		return ctx->host->errf(err, SG_E_NOMEM, "fc: %s: cannot start libcurl", rq->what);
	x.easy = c->easy;
	fc_setup(c->easy, rq, &x);
	if (fc_set_method(c->easy, rq, &x) != CURLE_OK ||
	    curl_multi_add_handle(c->multi, c->easy) != CURLM_OK) {
		fc_conn_free(c);
		return ctx->host->errf(err, SG_E_INTERNAL, "fc: %s: libcurl refused the request",
				       rq->what);
	}
	rc = fc_drive(ctx, c, rq);
	curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &rp->status);
	curl_multi_remove_handle(c->multi, c->easy);
	fc_conn_put(ctx->http, c);
	if (rc == CURLE_OK || (rc == CURLE_WRITE_ERROR && (rp->capped || rp->stopped)))
		return 0;
	return fc_transport_error(ctx, rq, rc, x.resend_refused, no_connect, err);
}

/* ---- retries ------------------------------------------------------------------------ */

int fc_sleep(struct fc_ctx *ctx, struct sg_call *call, long ms)
{
	struct pollfd p = { .fd = call ? ctx->host->cancel_fd(call) : -1, .events = POLLIN };
	int64_t end = fc_now_ms() + ms;

	for (;;) {
		int64_t left = end - fc_now_ms();

		if (call && ctx->host->cancelled(call))
			return -1;
		if (left <= 0)
			return 0;
		if (poll(&p, 1, (int)left) > 0 && (p.revents & POLLIN))
			return -1;
	}
}

static long fc_backoff_ms(unsigned attempt)
{
	long ms = FC_BACKOFF_MS << (attempt < 4 ? attempt : 4);
	char r[3];

	if (ms > FC_BACKOFF_MAX_MS)
		ms = FC_BACKOFF_MAX_MS;
	fc_random_hex(r, 1);
	return ms + strtol(r, NULL, 16) % (ms / 4 + 1); /* jitter */
}

/* How long to wait before the next try of an answered request, or -1 for
 * "no retry: the answer stands". */
static long fc_retry_wait(struct fc_ctx *ctx, const struct fc_req *rq,
			  const struct fc_resp *rp, unsigned attempt)
{
	if (!rq->idempotent || rq->on_data)
		return -1;
	if (rp->status == 502 || rp->status == 503)
		return fc_backoff_ms(attempt);
	if (rp->status == 429) {
		if (rp->retry_after_s < 0)
			return fc_backoff_ms(attempt);
		if ((unsigned long)rp->retry_after_s > ctx->retry_after_max_s)
			return -1;
		return rp->retry_after_s * 1000L;
	}
	return -1;
}

int fc_http_request(struct fc_ctx *ctx, const struct fc_req *rq, struct fc_resp *rp,
		    struct sg_err *err)
{
	for (unsigned attempt = 0;; attempt++) {
		bool last = rq->once || attempt >= ctx->retries, no_connect;
		long wait;

		fc_resp_free(ctx, rp);
		rp->retry_after_s = -1;
		if (fc_attempt(ctx, rq, rp, &no_connect, err) < 0) {
			if (err && (err->code == SG_E_CANCELLED || err->code == SG_E_TIMEOUT))
				return -1;
			if (rq->gone_id && fc_api_gone(ctx, rq->gone_id) == 1)
				return fc_gone(ctx, err, rq->gone_id);
			/* The body never went out without a connection. */
			if (last || rq->on_data || !(rq->idempotent || no_connect))
				return -1;
			wait = fc_backoff_ms(attempt);
		} else if (rp->status == 502 && rq->gone_id) {
			int g = fc_api_gone(ctx, rq->gone_id);

			if (g == 1)
				return fc_gone(ctx, err, rq->gone_id);
			wait = last ? -1 : fc_retry_wait(ctx, rq, rp, attempt);
			if (wait < 0)
				return 0;
		} else {
			wait = last ? -1 : fc_retry_wait(ctx, rq, rp, attempt);
			if (wait < 0)
				return 0;
		}
		ctx->host->log(SG_LOG_DEBUG, FC_PLUGIN, "%s: HTTP %ld, retry %u in %ld ms",
			       rq->what, rp->status, attempt + 1, wait);
		if (fc_sleep(ctx, rq->call, wait) < 0)
			return ctx->host->errf(err, SG_E_CANCELLED, "fc: %s: cancelled", rq->what);
	}
}
