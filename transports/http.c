/*
 * MCP Streamable HTTP (MCP 2025-11-25 basic/transports, "Streamable HTTP";
 * the operator's view is doc/http.md).
 *
 * One endpoint, /mcp, served by libmicrohttpd with its own polling threads
 * (epoll) and suspend/resume: the MHD threads never wait for a tool call.
 *
 *   POST    one JSON-RPC message (a batch on a 2025-03-26 session).  A reply
 *           that is ready when sg_mcp_handle() returns goes back as
 *           application/json; a reply still being computed (tools/call runs
 *           on its own thread) goes back as text/event-stream, so progress
 *           and log notifications reach the client during the call.  Only
 *           notifications or responses: 202.
 *   GET     a standalone SSE stream for server-initiated messages; with
 *           Last-Event-ID, the resumption of a POST stream whose connection
 *           broke (replaying the events after that id).
 *   DELETE  ends the session (its ephemeral sandboxes are destroyed before
 *           the 200).
 *
 * This file holds the MHD callbacks, listening, signals and shutdown; each
 * method has its file (http_post.c, http_get.c, http_end.c for DELETE and
 * every other end of a session), replies are made in http_reply.c.
 *
 * Objects and who owns them:
 *   struct hsess   one MCP session: the core's sg_session plus its streams.
 *                  Reference counted; references are held by the session
 *                  table, by each request and stream of the session, and by
 *                  the job that closes it.
 *   struct stream  the way back for one POST (or one GET): the SSE text
 *                  written so far (kept, so a reconnecting client can be
 *                  replayed), or the final JSON.  Reference counted, under
 *                  its session's lock: the request, the MHD response, the
 *                  core (until the final message: "owed"), and a broken
 *                  connection's retention.
 *   struct req     one HTTP request (MHD's con_cls), freed when MHD reports
 *                  the request complete.
 *
 * Lock order: a thread holding one of these may take the ones after it,
 * never one before it:
 *   1. MHD's response mutex (MHD holds it while it calls sse_read()),
 *   2. srv.lock,
 *   3. an hsess lock, or the core's session lock (sg_session.lock; never
 *      both at once),
 *   4. MHD's daemon mutex (MHD_suspend_connection() takes it; it is called
 *      under an hsess lock so that the resume cannot come before it).
 * MHD_queue_response() takes the response's mutex (1), so a response is
 * queued only with no lock held.  Queueing the SSE response of a POST
 * under its hsess lock made ThreadSanitizer report a lock-order inversion
 * between libmicrohttpd and this file: hsess lock then response mutex on
 * the request's thread (http_post_handle), response mutex then hsess lock in
 * sse_read() on the same response.  It could not deadlock as it was (a
 * response is queued once, on its connection's own thread, before MHD reads
 * from it), but only that timing kept it so; now the order holds.
 * MHD_resume_connection() is called with no lock held.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>
#include <microhttpd.h>

#include "core/base/log.h"
#include "core/base/quota.h"
#include "core/base/util.h"
#include "core/protocol/jsonrpc.h"
#include "core/protocol/session.h"
#include "core/registry/provision.h"
#include "core/server/exec.h"
#include "core/server/mcp.h"
#include "core/server/stop.h"
#include "transports/http_check.h"
#include "transports/transport.h"

#include "transports/http_internal.h"

struct http_server http_srv = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
	.sigpipe = { -1, -1 },
};

/* ---- request checks (transports/http_check.c) ------------------------------ */

static enum MHD_Result header_cb(void *cls, enum MHD_ValueKind kind, const char *name,
				   const char *value)
{
	(void)kind;
	if (name && value)
		sg_http_req_header(cls, name, value);
	return MHD_YES;
}

/* The headers sandgate reads, every field of them (MHD's lookup would see
 * only the first of a repeated one). */
static void req_view(struct MHD_Connection *c, const char *url, const char *method,
		     struct sg_http_req *view)
{
	memset(view, 0, sizeof(*view));
	view->path = url;
	view->method = method;
	MHD_get_connection_values(c, MHD_HEADER_KIND, header_cb, view);
}

static void policy(struct sg_http_policy *p)
{
	memset(p, 0, sizeof(*p));
	p->allow = &http_srv.conf.allow;
	p->tokens = (const unsigned char (*)[SG_HTTP_DIGEST])http_srv.conf.tokens;
	p->n_tokens = http_srv.conf.n_tokens;
	p->local_owner = http_srv.conf.local_owner;
	p->tokens_local = http_srv.conf.token_is_local;
	p->max_body = http_srv.conf.max_body;
	p->stopping = atomic_load(&http_srv.stopping);
}

/* Where, who and what (see sg_http_check_access), then which session (400,
 * 404), then what is accepted and sent (406, 415, 413).  Returns 0 or -1. */
static int check_request(struct req *r, const char *url, const char *method)
{
	struct sg_http_policy p;
	struct sg_http_req view;

	policy(&p);
	req_view(r->conn, url, method, &view);
	if (sg_http_check_access(&p, &view, &r->v) < 0)
		return -1;
	if (view.session_id) {
		/* An id of another form cannot be one of ours. */
		r->hs = sg_http_session_id_valid(view.session_id) ? http_table_find(view.session_id, r->v.owner)
								  : NULL;
		if (!r->hs)
			return sg_http_fail(&r->v, MHD_HTTP_NOT_FOUND,
				    "session not found: it ended or expired; send initialize without Mcp-Session-Id");
		pthread_mutex_lock(&r->hs->lock);
		r->hs->last_seen_ms = sg_now_ms();
		pthread_mutex_unlock(&r->hs->lock);
	} else if (r->v.kind != SG_HTTP_POST) {
		return sg_http_fail(&r->v, MHD_HTTP_BAD_REQUEST, "bad request: the Mcp-Session-Id header is missing");
	}
	return sg_http_check_message(&p, &view, &r->v);
}

/* ---- the MHD callbacks ------------------------------------------------------ */

static void req_free(struct req *r)
{
	if (r->st)
		http_stream_unref(r->st);
	if (r->hs) {
		pthread_mutex_lock(&r->hs->lock);
		r->hs->last_seen_ms = sg_now_ms();
		pthread_mutex_unlock(&r->hs->lock);
		http_hsess_unref(r->hs);
	}
	sg_buf_release(&r->body);
	free(r);
	atomic_fetch_sub(&http_srv.live_reqs, 1);
}

/* Set on an MHD thread just before it is told to close a connection on
 * purpose, so that mhd_log() leaves out MHD's "internal error" line. */
static __thread bool closing_on_purpose;

static enum MHD_Result close_on_purpose(void)
{
	closing_on_purpose = true;
	return MHD_NO;
}

/* A body that outgrows [server] max_message_bytes while it arrives
 * (chunked: no Content-Length to refuse it by) is refused at once.
 * libmicrohttpd 0.9.75 cannot queue a response while it hands out upload
 * data (microhttpd.h, MHD_AccessHandlerCallback), and nothing has been sent
 * on the connection yet, so the 413 is written to the socket here, with
 * Connection: close.  The rest of the body is then read and dropped for
 * REFUSE_LINGER_MS (a client still sending would otherwise get a reset
 * instead of the answer) and the connection closed.  Returns MHD_YES to
 * read on, MHD_NO when the answer could not be written (closed at once). */
static enum MHD_Result refuse_now(struct req *r, unsigned status, const char *msg)
{
	json_t *j = json_pack("{s:s, s:n, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", "error", "code",
			      -32000, "message", msg);
	size_t len, hlen, off = 0;
	char *body = sg_rpc_dump(j, &len), head[160];
	struct sg_buf out = { 0 };
	MHD_socket fd = http_conn_fd(r->conn);

	json_decref(j);
	hlen = (size_t)snprintf(head, sizeof(head),
				"HTTP/1.1 %u Content Too Large\r\nConnection: close\r\n"
				"Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
				status, len);
	http_buf_add(&out, head, hlen);
	http_buf_add(&out, body, len);
	free(body);
	while (fd != MHD_INVALID_SOCKET && off < out.len) {
		ssize_t w = send(fd, out.data + off, out.len - off, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (w <= 0)
			break;
		off += (size_t)w;
	}
	sg_buf_release(&out);
	r->responded = true;
	r->refused_ms = sg_now_ms();
	http_conn_whole(r->conn);
	SG_DEBUG("http: %u %s (while the body arrived)", status, msg);
	return off == hlen + len ? MHD_YES : close_on_purpose();
}

/* Takes n more bytes of the body.  Returns MHD_YES, or MHD_NO to close the
 * connection. */
static enum MHD_Result req_body(struct req *r, const char *data, size_t n)
{
	if (r->refused_ms)
		return sg_now_ms() - r->refused_ms < REFUSE_LINGER_MS ? MHD_YES : close_on_purpose();
	if (r->v.status || r->responded)
		return MHD_YES; /* an error is coming: the body is read and dropped */
	if (r->v.kind != SG_HTTP_POST) {
		sg_http_fail(&r->v, MHD_HTTP_BAD_REQUEST, "bad request: %s takes no body",
		     r->v.kind == SG_HTTP_GET ? "GET" : "DELETE");
		return MHD_YES;
	}
	/* The cap holds while the body grows, chunked or not. */
	if (n > http_srv.conf.max_body - r->body.len) {
		char msg[128];

		sg_buf_release(&r->body);
		snprintf(msg, sizeof(msg), "message larger than %zu bytes ([server] max_message_bytes)",
			 http_srv.conf.max_body);
		return refuse_now(r, MHD_HTTP_CONTENT_TOO_LARGE, msg);
	}
	http_buf_add(&r->body, data, n);
	return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	struct req *r = *con_cls;

	(void)cls;
	(void)version;
	if (!r) {
		r = sg_xcalloc(1, sizeof(*r));
		r->conn = conn;
		*con_cls = r;
		atomic_fetch_add(&http_srv.live_reqs, 1);
		check_request(r, url, method);
		/* A body too large to read, or whose length has two readings,
		 * is refused at once (MHD then closes the connection). */
		if (r->v.status && r->v.reply_now)
			return http_reply_error(r, r->v.status, r->v.why);
		return MHD_YES;
	}
	if (*upload_size) {
		enum MHD_Result go = req_body(r, upload, *upload_size);

		*upload_size = 0;
		return go;
	}
	if (r->refused_ms) /* answered already, on the socket */
		return close_on_purpose();
	if (r->responded)
		return MHD_YES;
	http_conn_whole(conn); /* all in: the deadline stops */
	if (r->v.status)
		return http_reply_error(r, r->v.status, r->v.why);
	switch (r->v.kind) {
	case SG_HTTP_POST:
		return r->st ? http_post_resumed(r) : http_post_handle(r);
	case SG_HTTP_GET:
		return http_get_open(r);
	case SG_HTTP_DELETE:
		return http_delete(r);
	}
	return MHD_NO;
}

/* A broken SSE connection (not a normal end) leaves a POST stream that can
 * still be resumed with Last-Event-ID: it is retained for a while. */
static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct req *r = *con_cls;
	struct stream *st;

	(void)cls;
	http_conn_ended(conn); /* the next request's deadline starts */
	if (!r)
		return;
	*con_cls = NULL;
	st = r->st;
	if (st) {
		pthread_mutex_lock(&st->hs->lock);
		if (st->conn == conn) {
			st->conn = NULL;
			st->suspended = false;
			if (st->hs->get == st)
				st->hs->get = NULL;
			if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && st->mode == MODE_SSE &&
			    !st->is_get && !st->closed && !st->retained && st->listed)
				http_stream_retain_locked(st);
		}
		pthread_mutex_unlock(&st->hs->lock);
	}
	req_free(r);
}

/* libmicrohttpd's messages, each text at most once every LOG_EVERY_MS with
 * how many were left out (a flood of connections would otherwise write a
 * line each: "Server reached connection limit"). */
#define LOG_EVERY_MS 5000
#define LOG_KINDS 8

static struct {
	pthread_mutex_t lock;
	struct { char text[96]; int64_t at; unsigned skipped; } kind[LOG_KINDS];
	unsigned next;
} mlog = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Returns how many like msg were left out since the last one written, or
 * -1 to leave this one out too. */
static long mhd_log_turn(const char *msg)
{
	int64_t now = sg_now_ms();
	long skipped = 0;
	unsigned i;

	pthread_mutex_lock(&mlog.lock);
	for (i = 0; i < LOG_KINDS; i++)
		if (!strncmp(mlog.kind[i].text, msg, sizeof(mlog.kind[i].text) - 1))
			break;
	if (i == LOG_KINDS) {
		i = mlog.next++ % LOG_KINDS;
		snprintf(mlog.kind[i].text, sizeof(mlog.kind[i].text), "%s", msg);
		mlog.kind[i].skipped = 0;
		mlog.kind[i].at = now;
	} else if (now - mlog.kind[i].at < LOG_EVERY_MS) {
		mlog.kind[i].skipped++;
		skipped = -1;
	} else {
		skipped = (long)mlog.kind[i].skipped;
		mlog.kind[i].skipped = 0;
		mlog.kind[i].at = now;
	}
	pthread_mutex_unlock(&mlog.lock);
	return skipped;
}

/* fmt comes from libmicrohttpd, as its printf-style log callback. */
static void mhd_log(void *cls, const char *fmt, va_list ap) SG_PRINTF(2, 0);
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	size_t n;
	long skipped;

	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
		msg[--n] = '\0';
	if (closing_on_purpose && strstr(msg, "internal error")) {
		closing_on_purpose = false;
		return; /* refuse_now() or a lingering refused body: said already */
	}
	skipped = mhd_log_turn(msg);
	if (skipped < 0)
		return;
	if (skipped > 0)
		SG_WARN("http: libmicrohttpd: %s (%ld more like it in the last %d s)", msg, skipped,
			LOG_EVERY_MS / 1000);
	else
		SG_WARN("http: libmicrohttpd: %s", msg);
}

/* ---- listening, signals, shutdown --------------------------------------------- */

/* Binds [server] host:port itself (clear errors, port 0 for tests) and
 * hands the socket to MHD.  Fills url with the address clients use. */
static int listen_socket(const struct http_conf *c, char *url, size_t n, bool *v6)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *res, *ai;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char port[8], addr[INET6_ADDRSTRLEN];
	int fd = -1, err = 0, one = 1, rc;

	snprintf(port, sizeof(port), "%u", c->port);
	rc = getaddrinfo(*c->host ? c->host : NULL, port, &hints, &res);
	if (rc != 0) {
		SG_ERROR("cannot resolve [server] host '%s': %s", c->host, gai_strerror(rc));
		return -1;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0) {
			err = errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 1024) == 0)
			break;
		err = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		SG_ERROR("cannot listen on %s port %u ([server] host, port): %s", c->host, c->port,
			 strerror(err));
		return -1;
	}
	getsockname(fd, (struct sockaddr *)&ss, &sl);
	*v6 = ss.ss_family == AF_INET6;
	if (*v6) {
		const struct sockaddr_in6 *a = (const void *)&ss;

		inet_ntop(AF_INET6, &a->sin6_addr, addr, sizeof(addr));
		snprintf(url, n, "http://[%s]:%u%s", addr, ntohs(a->sin6_port), SG_HTTP_PATH);
	} else {
		const struct sockaddr_in *a = (const void *)&ss;

		inet_ntop(AF_INET, &a->sin_addr, addr, sizeof(addr));
		snprintf(url, n, "http://%s:%u%s", addr, ntohs(a->sin_port), SG_HTTP_PATH);
	}
	return fd;
}

/* The first SIGTERM, SIGINT or SIGHUP (core/server/stop.c's thread) wakes
 * serve() through a pipe: the stop runs on the main thread. */
static void on_signal(int sig)
{
	unsigned char b = (unsigned char)sig;

	if (write(http_srv.sigpipe[1], &b, 1) < 0) {
		/* the pipe is full: a signal is already pending */
	}
}

static int signals_catch(void)
{
	if (pipe2(http_srv.sigpipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return -1;
	return sg_stop_signals_start(on_signal);
}

static void signals_release(void)
{
	for (int i = 0; i < 2; i++) {
		if (http_srv.sigpipe[i] >= 0)
			close(http_srv.sigpipe[i]);
		http_srv.sigpipe[i] = -1;
	}
}

/* Sessions, sockets and calls use descriptors: take what the hard limit
 * allows. */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static unsigned pool_size(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : n > 4 ? 4 : (unsigned)n;
}

/* Every option here is in libmicrohttpd 0.9.75 (configure's minimum):
 * PER_IP_CONNECTION_LIMIT and NOTIFY_CONNECTION long before it (0.9.x
 * headers without an "available since" note), and the connection info
 * kinds http_conns.c reads (CONNECTION_FD, SOCKET_CONTEXT) as well. */
static struct MHD_Daemon *daemon_start(int fd, bool v6)
{
	const struct http_conf *c = &http_srv.conf;

	return MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME |
				MHD_USE_ERROR_LOG | (v6 ? MHD_USE_IPv6 : 0),
				0, NULL, NULL, on_request, NULL,
				/* first, so MHD logs nothing before it */
				MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
				MHD_OPTION_LISTEN_SOCKET, fd,
				MHD_OPTION_THREAD_POOL_SIZE, pool_size(),
				MHD_OPTION_CONNECTION_LIMIT, c->conn_limit,
				MHD_OPTION_PER_IP_CONNECTION_LIMIT, c->per_client,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONN_TIMEOUT_S,
				MHD_OPTION_NOTIFY_CONNECTION, http_conn_notify, NULL,
				MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
				MHD_OPTION_END);
}

/* Waits for a signal, tending sessions meanwhile. */
static void serve(void)
{
	for (;;) {
		struct pollfd p = { .fd = http_srv.sigpipe[0], .events = POLLIN };
		unsigned char sig;

		if (poll(&p, 1, TICK_MS) > 0 && read(http_srv.sigpipe[0], &sig, 1) == 1) {
			SG_INFO("http: signal %u received: not accepting new connections; calls in flight get up to %d s ([server] shutdown_grace); a second signal exits at once",
				sig, http_srv.conf.grace_ms / 1000);
			return;
		}
		http_janitor_tick();
		http_conns_tick(sg_now_ms(), http_srv.conf.request_ms);
	}
}

/* SIGTERM/SIGINT: stop accepting, end every session (calls in flight get
 * the grace period, then are cancelled; sandboxes are destroyed), then let
 * the last responses go out and stop MHD. */
static void shutdown_server(void)
{
	struct hsess *all = NULL;
	MHD_socket lfd;
	int64_t until;

	sg_stop_begin(http_srv.conf.grace_ms);
	pthread_mutex_lock(&http_srv.lock);
	http_srv.stopping = true;
	for (size_t i = 0; i < http_srv.table_size; i++) {
		while (http_srv.table[i]) {
			struct hsess *hs = http_srv.table[i];

			http_srv.table[i] = hs->next;
			sg_quota_give(hs->s->owner, SG_QUOTA_SESSIONS);
			hs->next = all;
			all = hs;
		}
	}
	http_srv.n_sessions = 0;
	pthread_mutex_unlock(&http_srv.lock);
	lfd = MHD_quiesce_daemon(http_srv.daemon);
	if (lfd != MHD_INVALID_SOCKET)
		close(lfd);
	while (all) {
		struct hsess *hs = all;

		all = hs->next;
		hs->next = NULL;
		http_close_start(hs, NULL, http_srv.conf.grace_ms);
	}
	pthread_mutex_lock(&http_srv.lock);
	while (http_srv.closers > 0)
		pthread_cond_wait(&http_srv.cond, &http_srv.lock);
	pthread_mutex_unlock(&http_srv.lock);
	/* Every stream is finished now; MHD must not be stopped while one of
	 * its connections is still suspended (libmicrohttpd API contract). */
	until = sg_now_ms() + DRAIN_MS;
	while (atomic_load(&http_srv.live_reqs) > 0 && sg_now_ms() < until)
		poll(NULL, 0, 20);
	MHD_stop_daemon(http_srv.daemon);
	http_srv.daemon = NULL;
	/* A call that was abandoned never gives its slot back: no drain then
	 * (main ends the process without it, core/server/stop.h). */
	if (!sg_session_abandoned())
		sg_exec_drain();
}

int sg_http_run(void)
{
	char url[128];
	bool v6 = false;
	int fd = -1, rc = 3;

	if (http_conf_load(&http_srv.conf) < 0)
		goto out;
	rc = 1;
	if (sg_default_machine_provision() < 0) /* before any client is served */
		goto out;
	for (http_srv.table_size = 64; http_srv.table_size < (size_t)http_srv.conf.max_sessions * 2;)
		http_srv.table_size *= 2;
	http_srv.table = sg_xcalloc(http_srv.table_size, sizeof(*http_srv.table));
	raise_nofile();
	fd = listen_socket(&http_srv.conf, url, sizeof(url), &v6);
	if (fd < 0 || signals_catch() < 0)
		goto out;
	http_srv.daemon = daemon_start(fd, v6);
	if (!http_srv.daemon) {
		SG_ERROR("cannot start the HTTP server on %s", url);
		goto out;
	}
	fd = -1; /* MHD's now; MHD_quiesce_daemon() hands it back */
	SG_INFO("http: listening on %s (%s, %d sessions at most, idle TTL %lld s, %u connections, %u per client address, %lld s per request)",
		url, http_srv.conf.n_tokens ? "bearer tokens required" : "no authentication ([server] auth = none): loopback only",
		http_srv.conf.max_sessions, (long long)(http_srv.conf.ttl_ms / 1000),
		http_srv.conf.conn_limit, http_srv.conf.per_client,
		(long long)(http_srv.conf.request_ms / 1000));
	serve();
	shutdown_server();
	rc = 0;
out:
	signals_release();
	if (fd >= 0)
		close(fd);
	free(http_srv.table);
	http_srv.table = NULL;
	http_conf_release(&http_srv.conf);
	return rc;
}
