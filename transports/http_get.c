/*
 * GET /mcp: a standalone SSE stream, or the resumption of a broken POST
 * stream with Last-Event-ID (MCP 2025-11-25 basic/transports, "Listening for
 * Messages from the Server", "Resumability and Redelivery").
 */
#include "config.h"

#include <pthread.h>

#include <microhttpd.h>

#include "transports/http_check.h"

#include "transports/http_internal.h"

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
		http_stream_unretain_locked(st);
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

enum MHD_Result http_get_open(struct req *r)
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
		return http_reply_error(r, MHD_HTTP_NOT_FOUND, "session not found: it ended or expired");
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
	return http_queue(r, MHD_HTTP_OK, resp);
}
