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
 * the request's thread (post_handle), response mutex then hsess lock in
 * sse_read() on the same response.  It could not deadlock as it was (a
 * response is queued once, on its connection's own thread, before MHD reads
 * from it), but only that timing kept it so; now the order holds.
 * MHD_resume_connection() is called with no lock held.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <microhttpd.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "core/protocol/call.h"
#include "core/base/conf.h"
#include "core/protocol/jsonrpc.h"
#include "core/base/log.h"
#include "core/server/exec.h"
#include "core/server/mcp.h"
#include "core/server/stop.h"
#include "core/protocol/session.h"
#include "core/registry/provision.h"
#include "core/tools/registry.h"
#include "core/base/util.h"
#include "transports/http_check.h"
#include "transports/transport.h"

#include "transports/http_internal.h"

struct http_server http_srv = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
	.sigpipe = { -1, -1 },
};


static enum MHD_Result queue(struct req *r, unsigned status, struct MHD_Response *resp)
{
	enum MHD_Result ret;

	if (!resp)
		return MHD_NO;
	r->responded = true;
	http_conn_whole(r->conn); /* answered: its deadline no longer runs */
	ret = MHD_queue_response(r->conn, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* Responses are made by the *_response() functions and queued by queue(),
 * never while an hsess lock is held (see the lock order above). */

/* body (taken: freed by MHD) as application/json. */
static struct MHD_Response *json_response(char *body, size_t len, const char *session_id)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);

	if (!resp) {
		free(body);
		return NULL;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	if (session_id)
		MHD_add_response_header(resp, HDR_SESSION, session_id);
	return resp;
}

static struct MHD_Response *empty_response(void)
{
	return MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
}

/* An HTTP error with a JSON-RPC error body without id (MCP basic/transports:
 * "the HTTP response body MAY comprise a JSON-RPC error response that has
 * no id"); -32001 is what the SDKs use for an unknown session. */
static struct MHD_Response *error_response(const struct req *r, unsigned status, const char *msg)
{
	json_t *j = json_pack("{s:s, s:n, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", "error", "code",
			      status == MHD_HTTP_NOT_FOUND ? -32001 : -32000,
			      "message", msg);
	size_t len;
	char *body = sg_rpc_dump(j, &len);
	struct MHD_Response *resp;

	json_decref(j);
	resp = json_response(body, len, NULL);
	if (!resp)
		return NULL;
	if (status == MHD_HTTP_UNAUTHORIZED)
		/* RFC 6750 section 3. */
		MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
					r->v.bad_token ? "Bearer realm=\"sandgate\", error=\"invalid_token\""
						     : "Bearer realm=\"sandgate\"");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, POST, DELETE");
	if (status == MHD_HTTP_SERVICE_UNAVAILABLE)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "5");
	SG_DEBUG("http: %u %s", status, msg);
	return resp;
}

static enum MHD_Result reply_json(struct req *r, unsigned status, char *body, size_t len,
				  const char *session_id)
{
	return queue(r, status, json_response(body, len, session_id));
}

static enum MHD_Result reply_empty(struct req *r, unsigned status)
{
	return queue(r, status, empty_response());
}

static enum MHD_Result reply_error(struct req *r, unsigned status, const char *msg)
{
	return queue(r, status, error_response(r, status, msg));
}

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

/* ---- POST ------------------------------------------------------------------ */

/* A POST without Mcp-Session-Id must be initialize (MCP basic/transports
 * "Session Management": other requests without the header get 400).
 * Creates the session into r->hs.  Returns 0, or -1 after recording the
 * error. */
static int post_new_session(struct req *r)
{
	if (!sg_http_body_is_initialize(r->body.data, r->body.len)) {
		sg_http_fail(&r->v, MHD_HTTP_BAD_REQUEST,
		     "bad request: the Mcp-Session-Id header is missing (only initialize starts a session)");
		return -1;
	}
	if (http_table_full()) {
		sg_http_fail(&r->v, MHD_HTTP_SERVICE_UNAVAILABLE,
		     "too many sessions (%d, [server] max_sessions): end one with DELETE or retry later",
		     http_srv.conf.max_sessions);
		return -1;
	}
	r->hs = http_hsess_new(r->v.owner);
	return 0;
}

/* After initialize: the session joins the table when the core accepted it. */
static bool post_register(struct req *r)
{
	struct sg_session *s = r->hs->s;
	bool ok;

	pthread_mutex_lock(&s->lock);
	ok = s->protocol[0] != '\0';
	pthread_mutex_unlock(&s->lock);
	if (!ok)
		return false;
	if (http_table_add(r->hs) < 0) {
		sg_http_fail(&r->v, MHD_HTTP_SERVICE_UNAVAILABLE,
		     "too many sessions (%d, [server] max_sessions): end one with DELETE or retry later",
		     http_srv.conf.max_sessions);
		return false;
	}
	SG_DEBUG("http: session %s started for %s", s->hash, s->owner);
	return true;
}

/* Chooses how the reply travels (hs->lock held, after sg_mcp_handle()):
 * SSE when the client takes it and the reply is not complete yet (or
 * notifications came first); JSON otherwise (doc/http.md).  Returns the
 * response for the caller to queue once the lock is released, its status
 * in *status; or NULL with *status 0 when the connection is parked until
 * the final message (JSON mode, still running); or NULL with *status set
 * when no response could be made. */
static struct MHD_Response *post_decide_locked(struct req *r, int n, const char *new_id, bool prime,
					       unsigned *status)
{
	struct stream *st = r->st;
	char *body;

	*status = MHD_HTTP_OK;
	/* 202: only notifications or responses, or a call cancelled already */
	if (!st->final && (n == 0 || st->done)) {
		*status = MHD_HTTP_ACCEPTED;
		return empty_response();
	}
	if (st->done && st->final && (!r->v.want_sse || (r->v.want_json && st->out.len == 0))) {
		body = st->final;
		st->final = NULL;
		return json_response(body, st->final_len, new_id);
	}
	if (r->v.want_sse) {
		st->mode = MODE_SSE;
		if (prime)
			http_stream_prime_locked(st);
		if (st->final) {
			http_stream_event_locked(st, st->final, st->final_len);
			free(st->final);
			st->final = NULL;
		}
		http_stream_list_locked(st);
		st->conn = r->conn;
		return http_sse_response_locked(st);
	}
	/* JSON, still running: park the connection until the final message.
	 * Suspended under the lock, so that the final message's resume
	 * (http_send(), under the same lock) cannot come before it. */
	st->mode = MODE_JSON;
	sg_buf_release(&st->out);
	http_stream_list_locked(st);
	st->conn = r->conn;
	st->suspended = true;
	MHD_suspend_connection(r->conn);
	*status = 0;
	return NULL;
}

static enum MHD_Result post_handle(struct req *r)
{
	bool is_new = false, registered = false, prime;
	struct MHD_Response *resp;
	struct hsess *hs;
	unsigned status;
	int n;

	if (!r->hs) {
		if (post_new_session(r) < 0)
			return reply_error(r, r->v.status, r->v.why);
		is_new = true;
	}
	hs = r->hs;
	pthread_mutex_lock(&hs->lock);
	if (hs->ended) {
		pthread_mutex_unlock(&hs->lock);
		return reply_error(r, MHD_HTTP_NOT_FOUND,
				   "session not found: it ended or expired; send initialize without Mcp-Session-Id");
	}
	hs->handling++;
	r->st = http_stream_new_locked(hs, false);
	r->st->refs++; /* owed by the core until its final message */
	r->st->owed = true;
	pthread_mutex_unlock(&hs->lock);

	/* The body is given away: a large argument is decoded from it once,
	 * its pages returned as they are read (core/protocol/bulk.h). */
	n = r->body.data ? sg_mcp_handle_taking(hs->s, r->body.data, r->body.len, r->st)
			 : sg_mcp_handle(hs->s, "", 0, r->st);
	sg_buf_release(&r->body);
	if (is_new)
		registered = post_register(r);
	prime = http_wants_priming(hs->s);

	pthread_mutex_lock(&hs->lock);
	if (--hs->handling == 0)
		pthread_cond_broadcast(&hs->cond);
	hs->last_seen_ms = sg_now_ms();
	/* Nothing is owed for notifications and responses; the request's own
	 * reference keeps the stream alive here. */
	if (n == 0 && r->st->owed)
		http_stream_settle_locked(r->st);
	if (r->v.status) { /* initialize answered, but no room for the session */
		status = r->v.status;
		resp = error_response(r, r->v.status, r->v.why);
	} else {
		resp = post_decide_locked(r, n, registered ? hs->s->id : NULL, prime, &status);
	}
	pthread_mutex_unlock(&hs->lock);
	/* Queued with no lock held: MHD_queue_response() takes the response's
	 * mutex, and MHD holds that mutex while it calls sse_read(), which
	 * takes hs->lock (the lock order above). */
	if (!resp)
		return status ? MHD_NO : MHD_YES;
	return queue(r, status, resp);
}

/* The JSON-mode wait is over: the final message, or none (cancelled, or
 * the session ended). */
static enum MHD_Result post_resumed(struct req *r)
{
	struct hsess *hs = r->hs;
	struct stream *st = r->st;
	char *body;
	size_t len;
	bool ended;

	pthread_mutex_lock(&hs->lock);
	body = st->final;
	len = st->final_len;
	st->final = NULL;
	ended = hs->ended;
	pthread_mutex_unlock(&hs->lock);
	if (body)
		return reply_json(r, MHD_HTTP_OK, body, len, NULL);
	if (atomic_load(&http_srv.stopping))
		return reply_error(r, MHD_HTTP_SERVICE_UNAVAILABLE, "the server is shutting down");
	if (ended)
		return reply_error(r, MHD_HTTP_NOT_FOUND, "session not found: it ended while the request ran");
	/* A cancelled request gets no response (basic/utilities/cancellation). */
	return reply_empty(r, MHD_HTTP_ACCEPTED);
}

/* ---- GET ------------------------------------------------------------------- */

/* The stream a Last-Event-ID ("no-seq") names, if it is resumable.
 * hs->lock held. */
static struct stream *stream_find_locked(struct hsess *hs, unsigned no)
{
	for (struct stream *st = hs->streams; st; st = st->next)
		if (st->no == no && !st->is_get && st->mode == MODE_SSE && st->refs > 0)
			return st;
	return NULL;
}

/* Resumption (MCP basic/transports "Resumability and Redelivery"): the
 * events after Last-Event-ID of that stream only, then the rest live.  A
 * connection still attached is taken over: the client gave up on it, even
 * if MHD cannot see that yet (it does not watch suspended connections). */
static struct stream *get_resume_locked(struct req *r, struct stream *st, unsigned seq,
					struct MHD_Connection **wake)
{
	if (st->conn) {
		st->gen++;
		*wake = http_stream_wake_locked(st);
		st->conn = NULL;
	}
	st->sent = http_stream_offset_after(st, seq);
	st->refs++; /* the request's */
	if (st->retained) {
		st->retained = false;
		st->refs--;
	}
	SG_DEBUG("http: session %s resumes stream %u after event %u", r->hs->s->hash, st->no, seq);
	return st;
}

/* A new standalone stream; it replaces an older one, which may be a dead
 * connection MHD cannot see while it is suspended. */
static struct stream *get_new_locked(struct req *r, bool prime, struct MHD_Connection **wake)
{
	struct hsess *hs = r->hs;
	struct stream *st = http_stream_new_locked(hs, true);

	if (hs->get) {
		hs->get->closed = true;
		*wake = http_stream_wake_locked(hs->get);
	}
	st->mode = MODE_SSE;
	if (prime)
		http_stream_prime_locked(st);
	http_stream_list_locked(st);
	hs->get = st;
	return st;
}

static enum MHD_Result get_open(struct req *r)
{
	struct hsess *hs = r->hs;
	const char *last = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
						       MHD_HTTP_HEADER_LAST_EVENT_ID);
	struct MHD_Connection *wake = NULL;
	unsigned no, seq;
	struct MHD_Response *resp = NULL;
	bool prime = http_wants_priming(hs->s);
	struct stream *st;

	pthread_mutex_lock(&hs->lock);
	if (hs->ended) {
		pthread_mutex_unlock(&hs->lock);
		return reply_error(r, MHD_HTTP_NOT_FOUND, "session not found: it ended or expired");
	}
	/* An id that is not of our form names no stream: a new one. */
	st = last && sg_http_event_id_parse(last, &no, &seq) == 0 ? stream_find_locked(hs, no) : NULL;
	st = st ? get_resume_locked(r, st, seq, &wake) : get_new_locked(r, prime, &wake);
	r->st = st;
	st->conn = r->conn;
	resp = http_sse_response_locked(st);
	pthread_mutex_unlock(&hs->lock);
	if (wake)
		MHD_resume_connection(wake);
	return queue(r, MHD_HTTP_OK, resp);
}

/* ---- ending sessions (DELETE, idle TTL, shutdown) ---------------------------- */

struct close_job {
	struct hsess *hs;    /* the table's reference, consumed */
	struct req *del;     /* the DELETE waiting for the end, or NULL */
	int grace_ms;
};

/* Every stream of an ended session finishes with what it has; retained
 * ones are let go. */
static void session_end_streams(struct hsess *hs)
{
	struct MHD_Connection **wake = NULL;
	struct stream **dead = NULL;
	size_t nw = 0, nd = 0, n = 0;

	pthread_mutex_lock(&hs->lock);
	for (struct stream *st = hs->streams; st; st = st->next)
		n++;
	wake = sg_xcalloc(n + 1, sizeof(*wake));
	dead = sg_xcalloc(n + 1, sizeof(*dead));
	for (struct stream *st = hs->streams, *next; st; st = next) {
		next = st->next;
		st->closed = true;
		if ((wake[nw] = http_stream_wake_locked(st)))
			nw++;
		if (st->retained) {
			st->retained = false;
			if (http_stream_put_locked(st))
				dead[nd++] = st;
		}
	}
	pthread_mutex_unlock(&hs->lock);
	for (size_t i = 0; i < nw; i++)
		MHD_resume_connection(wake[i]);
	for (size_t i = 0; i < nd; i++)
		http_stream_free(dead[i]);
	free(wake);
	free(dead);
}

/* sg_session_close() can take seconds (sandboxes are destroyed), so it runs
 * on a thread of its own, never on an MHD thread. */
static void *closer_main(void *arg)
{
	struct close_job *job = arg;
	struct hsess *hs = job->hs;
	struct MHD_Connection *wake = NULL;

	pthread_mutex_lock(&hs->lock);
	hs->ended = true;
	while (hs->handling > 0)
		pthread_cond_wait(&hs->cond, &hs->lock);
	pthread_mutex_unlock(&hs->lock);
	sg_session_close(hs->s, job->grace_ms);
	session_end_streams(hs);
	SG_DEBUG("http: session %s ended", hs->s->hash);
	if (job->del) {
		pthread_mutex_lock(&hs->lock);
		job->del->closed = true;
		if (job->del->waiting)
			wake = job->del->conn;
		job->del->waiting = false;
		pthread_mutex_unlock(&hs->lock);
		if (wake)
			MHD_resume_connection(wake);
	}
	http_hsess_unref(hs);
	free(job);
	pthread_mutex_lock(&http_srv.lock);
	if (--http_srv.closers == 0)
		pthread_cond_broadcast(&http_srv.cond);
	pthread_mutex_unlock(&http_srv.lock);
	return NULL;
}

/* Ends hs (already out of the table; its table reference is consumed). */
void http_close_start(struct hsess *hs, struct req *del, int grace_ms)
{
	struct close_job *job = sg_xcalloc(1, sizeof(*job));
	pthread_attr_t attr;
	pthread_t th;
	int rc;

	job->hs = hs;
	job->del = del;
	job->grace_ms = grace_ms;
	pthread_mutex_lock(&http_srv.lock);
	http_srv.closers++;
	pthread_mutex_unlock(&http_srv.lock);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	rc = pthread_create(&th, &attr, closer_main, job);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		SG_WARN("cannot start a thread to end session %s: ending it inline", hs->s->hash);
		closer_main(job);
	}
}

/* DELETE (MCP basic/transports "Session Management" 5): the session is out
 * of the table at once (later requests get 404); the 200 waits until its
 * sandboxes are gone. */
static enum MHD_Result delete_session(struct req *r)
{
	struct hsess *hs = r->hs;

	if (r->closed)
		return reply_empty(r, MHD_HTTP_OK);
	if (!http_table_remove(hs))
		return reply_error(r, MHD_HTTP_NOT_FOUND, "session not found: it already ended");
	SG_INFO("http: session %s ended by DELETE", hs->s->hash);
	pthread_mutex_lock(&hs->lock);
	r->waiting = true;
	MHD_suspend_connection(r->conn);
	pthread_mutex_unlock(&hs->lock);
	http_close_start(hs, r, http_srv.conf.grace_ms);
	return MHD_YES;
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
			return reply_error(r, r->v.status, r->v.why);
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
		return reply_error(r, r->v.status, r->v.why);
	switch (r->v.kind) {
	case SG_HTTP_POST:
		return r->st ? post_resumed(r) : post_handle(r);
	case SG_HTTP_GET:
		return get_open(r);
	case SG_HTTP_DELETE:
		return delete_session(r);
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
			    !st->is_get && !st->closed && !st->retained && st->listed) {
				st->retained = true;
				st->refs++;
				st->detached_ms = sg_now_ms();
			}
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
