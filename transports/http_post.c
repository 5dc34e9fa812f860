/*
 * POST /mcp: one JSON-RPC message (MCP 2025-11-25 basic/transports,
 * "Sending Messages to the Server").  A reply ready when sg_mcp_handle()
 * returns goes back as application/json; one still being computed goes back
 * as text/event-stream (transports/http_sse.c).
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include <microhttpd.h>

#include "core/base/util.h"
#include "core/protocol/session.h"
#include "core/server/mcp.h"
#include "transports/http_check.h"

#include "transports/http_internal.h"

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
	struct sg_err err;
	bool ok;

	pthread_mutex_lock(&s->lock);
	ok = s->protocol[0] != '\0';
	pthread_mutex_unlock(&s->lock);
	if (!ok)
		return false;
	if (http_table_add(r->hs, &err) < 0) {
		/* 429 for the credential's own quota (it can free one), 503 for
		 * the server's cap (doc/http.md) */
		sg_http_fail(&r->v, err.code == SG_E_BUSY ? MHD_HTTP_TOO_MANY_REQUESTS
							  : MHD_HTTP_SERVICE_UNAVAILABLE, "%s", err.msg);
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
	struct MHD_Response *resp;
	char *body;

	*status = MHD_HTTP_OK;
	/* 202: only notifications or responses, or a call cancelled already */
	if (!st->final && (n == 0 || st->done)) {
		*status = MHD_HTTP_ACCEPTED;
		return http_empty_response();
	}
	if (st->done && st->final && (!r->v.want_sse || (r->v.want_json && st->out.len == 0))) {
		body = st->final;
		st->final = NULL;
		return http_json_response(body, st->final_len, new_id);
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
		resp = http_sse_response_locked(st);
		/* an initialize answered as events names its session too */
		if (resp && new_id)
			MHD_add_response_header(resp, HDR_SESSION, new_id);
		return resp;
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

enum MHD_Result http_post_handle(struct req *r)
{
	bool is_new = false, registered = false, prime;
	struct MHD_Response *resp;
	struct hsess *hs;
	unsigned status;
	int n;

	if (!r->hs) {
		if (post_new_session(r) < 0)
			return http_reply_error(r, r->v.status, r->v.why);
		is_new = true;
	}
	hs = r->hs;
	pthread_mutex_lock(&hs->lock);
	if (hs->ended) {
		pthread_mutex_unlock(&hs->lock);
		return http_reply_error(r, MHD_HTTP_NOT_FOUND,
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
		resp = http_error_response(r, r->v.status, r->v.why);
	} else {
		resp = post_decide_locked(r, n, registered ? hs->s->id : NULL, prime, &status);
	}
	pthread_mutex_unlock(&hs->lock);
	/* Queued with no lock held: MHD_queue_response() takes the response's
	 * mutex, and MHD holds that mutex while it calls sse_read(), which
	 * takes hs->lock (the lock order above). */
	if (!resp)
		return status ? MHD_NO : MHD_YES;
	return http_queue(r, status, resp);
}

/* The JSON-mode wait is over: the final message, or none (cancelled, or
 * the session ended). */
enum MHD_Result http_post_resumed(struct req *r)
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
		return http_reply_json(r, MHD_HTTP_OK, body, len, NULL);
	if (atomic_load(&http_srv.stopping))
		return http_reply_error(r, MHD_HTTP_SERVICE_UNAVAILABLE, "the server is shutting down");
	if (ended)
		return http_reply_error(r, MHD_HTTP_NOT_FOUND, "session not found: it ended while the request ran");
	/* A cancelled request gets no response (basic/utilities/cancellation). */
	return http_reply_empty(r, MHD_HTTP_ACCEPTED);
}
