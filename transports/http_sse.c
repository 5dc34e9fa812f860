/*
 * The way back of each HTTP request (transports/http_internal.h): a final
 * JSON reply, or an SSE stream whose events are kept so that a client that
 * lost the connection can resume it (Last-Event-ID); and the transport ops
 * through which the core sends what belongs to a call.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "core/base/mem.h"
#include "core/protocol/call.h"
#include "core/base/util.h"
#include "transports/http_internal.h"

/* ---- streams ---------------------------------------------------------------- */

/* Returns a new POST or GET stream of hs with one reference (the caller's).
 * hs->lock held. */
struct stream *http_stream_new_locked(struct hsess *hs, bool is_get)
{
	struct stream *st = sg_xcalloc(1, sizeof(*st));

	st->hs = hs;
	hs->refs++;
	st->refs = 1;
	st->is_get = is_get;
	st->no = ++hs->next_stream;
	st->last_write_ms = sg_now_ms();
	return st;
}

void http_stream_list_locked(struct stream *st)
{
	if (st->listed)
		return;
	st->next = st->hs->streams;
	st->hs->streams = st;
	st->listed = true;
}

static void stream_delist_locked(struct stream *st)
{
	struct hsess *hs = st->hs;

	if (hs->get == st)
		hs->get = NULL;
	if (!st->listed)
		return;
	for (struct stream **pp = &hs->streams; *pp; pp = &(*pp)->next) {
		if (*pp == st) {
			*pp = st->next;
			break;
		}
	}
	st->listed = false;
}

/* Drops a reference, hs->lock held.  Returns true when it was the last:
 * the stream is delisted and the caller frees it with http_stream_free() once
 * the lock is released. */
bool http_stream_put_locked(struct stream *st)
{
	if (--st->refs > 0)
		return false;
	stream_delist_locked(st);
	return true;
}

void http_stream_free(struct stream *st)
{
	struct hsess *hs = st->hs;

	sg_buf_release(&st->out);
	free(st->final);
	free(st);
	http_hsess_unref(hs);
}

void http_stream_unref(struct stream *st)
{
	struct hsess *hs = st->hs;
	bool dead;

	pthread_mutex_lock(&hs->lock);
	dead = http_stream_put_locked(st);
	pthread_mutex_unlock(&hs->lock);
	if (dead)
		http_stream_free(st);
}

/* hs->lock held.  Returns the connection to resume once the lock is
 * released, or NULL when it is not waiting. */
struct MHD_Connection *http_stream_wake_locked(struct stream *st)
{
	if (!st->suspended)
		return NULL;
	st->suspended = false;
	return st->conn;
}

/* Appends one SSE event (MCP basic/transports: ids unique across the
 * session's streams, encoding the stream).  Messages are compact JSON
 * without raw newlines (sg_rpc_dump), so one data: line each. */
void http_stream_event_locked(struct stream *st, const char *data, size_t len)
{
	char head[64];
	int n = snprintf(head, sizeof(head), "id: %u-%u\ndata: ", st->no, ++st->seq);

	http_buf_add(&st->out, head, (size_t)n);
	http_buf_add(&st->out, data, len);
	http_buf_add(&st->out, "\n\n", 2);
	st->last_write_ms = sg_now_ms();
	if (st->retained) { /* a call still running writes on: counted (the janitor trims) */
		size_t more = (size_t)n + len + 2;

		st->held += more;
		st->hs->retained_bytes += more;
		atomic_fetch_add(&http_srv.retained, more);
	}
}

/* ---- retention ------------------------------------------------------------ */

/* Retained streams may hold half the memory budget server-wide: a client
 * that drops its connections as soon as it has asked cannot make replies
 * pile up for RETAIN_MS past what the server may hold. */
static size_t retain_server_max(void)
{
	return sg_mem_budget() / 2;
}

bool http_retained_over_locked(const struct hsess *hs)
{
	return hs->retained_bytes > RETAIN_SESSION_MAX ||
	       atomic_load(&http_srv.retained) > retain_server_max();
}

bool http_stream_retain_locked(struct stream *st)
{
	size_t size = st->out.len + (st->final ? st->final_len : 0);

	if (st->hs->retained_bytes + size > RETAIN_SESSION_MAX ||
	    atomic_load(&http_srv.retained) + size > retain_server_max()) {
		SG_DEBUG("http: session %s: stream %u (%zu bytes) not kept for a resume: the retained "
			 "streams are at their limit", st->hs->s->hash, st->no, size);
		return false;
	}
	st->retained = true;
	st->refs++;
	st->detached_ms = sg_now_ms();
	st->held = size;
	st->hs->retained_bytes += size;
	atomic_fetch_add(&http_srv.retained, size);
	return true;
}

void http_stream_unretain_locked(struct stream *st)
{
	st->retained = false;
	st->hs->retained_bytes -= st->held;
	atomic_fetch_sub(&http_srv.retained, st->held);
	st->held = 0;
}

/* The priming event of MCP 2025-11-25 basic/transports (SEP-1699): an id and
 * empty data, so the client can resume from the start, and the retry delay
 * it must use.  Older revisions have neither, and older clients would try
 * to parse the empty data. */
bool http_wants_priming(struct sg_session *s)
{
	bool yes;

	pthread_mutex_lock(&s->lock);
	yes = strcmp(s->protocol, "2025-11-25") >= 0;
	pthread_mutex_unlock(&s->lock);
	return yes;
}

/* Puts the priming event first in st->out (which may already hold events
 * sent before the stream's mode was decided).  hs->lock held. */
void http_stream_prime_locked(struct stream *st)
{
	struct sg_buf b = { 0 };
	char head[96];
	int n = snprintf(head, sizeof(head), "id: %u-0\nretry: %d\ndata: \n\n", st->no, SSE_RETRY_MS);

	http_buf_add(&b, head, (size_t)n);
	if (st->out.len)
		http_buf_add(&b, st->out.data, st->out.len);
	sg_buf_release(&st->out);
	st->out = b;
}

/* The offset just after the event with id "no-seq" in st->out, or 0
 * (replay everything) when it is not there. */
size_t http_stream_offset_after(const struct stream *st, unsigned seq)
{
	char pat[80];
	const char *p, *end;
	int n = snprintf(pat, sizeof(pat), "id: %u-%u\n", st->no, seq);

	if (!st->out.len || n <= 0 || (size_t)n >= sizeof(pat))
		return 0;
	p = memmem(st->out.data, st->out.len, pat, (size_t)n);
	if (!p)
		return 0;
	end = memmem(p, st->out.len - (size_t)(p - st->out.data), "\n\n", 2);
	return end ? (size_t)(end + 2 - st->out.data) : 0;
}

/* ---- the transport ops (any thread) -------------------------------------- */

/* Takes the message into st: an SSE event, or the final JSON while the mode
 * is JSON or not decided yet.  Notifications on a JSON-mode request are
 * dropped: the client did not accept an event stream.  hs->lock held. */
static void stream_take_locked(struct stream *st, const char *data, size_t len, bool final)
{
	if (st->mode == MODE_SSE) {
		http_stream_event_locked(st, data, len);
	} else if (final) {
		st->final = sg_xmalloc(len + 1);
		memcpy(st->final, data, len);
		st->final[len] = '\0';
		st->final_len = len;
		st->last_write_ms = sg_now_ms();
	} else if (st->mode == MODE_PENDING) {
		http_stream_event_locked(st, data, len);
	}
}

/* The core will send nothing more for st: release its reference. */
bool http_stream_settle_locked(struct stream *st)
{
	st->done = true;
	if (!st->owed)
		return false;
	st->owed = false;
	return http_stream_put_locked(st);
}

static void http_send(void *ctx, struct sg_call *call, const char *data, size_t len, bool final)
{
	struct hsess *hs = ctx;
	struct stream *st = call ? call->transport_ctx : NULL;
	struct MHD_Connection *wake = NULL;
	bool dead = false;

	pthread_mutex_lock(&hs->lock);
	/* A message unrelated to any request belongs on the GET stream (MCP
	 * basic/transports "Listening for Messages"); without one it is lost. */
	if (!st) {
		st = hs->get;
		final = false;
	}
	if (st && !st->done) {
		if (!st->closed)
			stream_take_locked(st, data, len, final);
		/* a JSON-mode request waits for its final message only */
		if (final || st->mode != MODE_JSON)
			wake = http_stream_wake_locked(st);
		if (final)
			dead = http_stream_settle_locked(st);
	}
	pthread_mutex_unlock(&hs->lock);
	if (wake)
		MHD_resume_connection(wake);
	if (dead)
		http_stream_free(st);
}

static void http_dropped(void *ctx, struct sg_call *call)
{
	struct hsess *hs = ctx;
	struct stream *st = call ? call->transport_ctx : NULL;
	struct MHD_Connection *wake = NULL;
	bool dead = false;

	if (!st)
		return;
	pthread_mutex_lock(&hs->lock);
	if (!st->done) {
		wake = http_stream_wake_locked(st);
		dead = http_stream_settle_locked(st);
	}
	pthread_mutex_unlock(&hs->lock);
	if (wake)
		MHD_resume_connection(wake);
	if (dead)
		http_stream_free(st);
}

/* ---- MHD responses ------------------------------------------------------- */

/* One SSE response's view of its stream: a resume on another connection
 * takes the stream over, and this response then ends. */
struct sse_att {
	struct stream *st;       /* a reference */
	unsigned gen;
};

/* The SSE body: what st->out holds beyond `sent`; nothing yet suspends the
 * connection until http_send() resumes it (libmicrohttpd: returning 0 is
 * only allowed together with MHD_suspend_connection()). */
static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct sse_att *att = cls;
	struct stream *st = att->st;
	ssize_t n;

	(void)pos;
	pthread_mutex_lock(&st->hs->lock);
	if (att->gen != st->gen) {
		n = MHD_CONTENT_READER_END_OF_STREAM;
	} else if (st->sent < st->out.len) {
		size_t k = st->out.len - st->sent;

		if (k > max)
			k = max;
		memcpy(buf, st->out.data + st->sent, k);
		st->sent += k;
		n = (ssize_t)k;
		/* a GET stream is never replayed: what is sent can go */
		if (st->is_get && st->sent == st->out.len) {
			st->out.len = st->sent = 0;
			st->out.data[0] = '\0';
		}
	} else if (st->closed || (st->done && !st->is_get)) {
		/* After the response the server ends the stream (2025-11-25
		 * basic/transports "Sending Messages to the Server" 6). */
		n = MHD_CONTENT_READER_END_OF_STREAM;
	} else {
		st->suspended = true;
		MHD_suspend_connection(st->conn);
		n = 0;
	}
	pthread_mutex_unlock(&st->hs->lock);
	return n;
}

static void sse_free(void *cls)
{
	struct sse_att *att = cls;

	http_stream_unref(att->st);
	free(att);
}

/* Starts st's SSE response on r's connection; the response holds a stream
 * reference (released by sse_free).  hs->lock held. */
struct MHD_Response *http_sse_response_locked(struct stream *st)
{
	struct sse_att *att = sg_xcalloc(1, sizeof(*att));
	struct MHD_Response *resp;

	att->st = st;
	att->gen = st->gen;
	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, SSE_BLOCK, sse_read, att, sse_free);
	if (!resp) {
		free(att);
		return NULL;
	}
	st->refs++;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
	/* Reverse proxies (nginx) would otherwise buffer the events. */
	MHD_add_response_header(resp, "X-Accel-Buffering", "no");
	return resp;
}


const struct sg_transport_ops http_ops = {
	.name = "http",
	.send = http_send,
	.dropped = http_dropped,
};
