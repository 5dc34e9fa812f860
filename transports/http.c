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
 * Lock order: srv.lock, then an hsess lock.  The core's session lock is
 * never taken while holding either.  MHD_resume_connection() is called
 * with no lock held.
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

#include "core/call.h"
#include "core/conf.h"
#include "core/jsonrpc.h"
#include "core/log.h"
#include "core/mcp.h"
#include "core/session.h"
#include "core/tools.h"
#include "core/util.h"
#include "transports/http_check.h"
#include "transports/transport.h"

#define HDR_SESSION "Mcp-Session-Id"
#define HDR_VERSION "MCP-Protocol-Version"

#define TICK_MS 250            /* janitor period: TTL, keep-alives, retention */
#define KEEPALIVE_MS 15000     /* a comment on an SSE stream silent this long */
#define RETAIN_MS 60000        /* a broken finished stream waits this long for a resume */
#define SSE_RETRY_MS 2000      /* the priming event's retry: field */
#define SSE_BLOCK 16384        /* bytes MHD asks the SSE reader for at once */
#define CONN_TIMEOUT_S 120     /* an idle keep-alive connection is closed */
#define DRAIN_MS 5000          /* shutdown: wait this long for requests to finish */

/* ---- state ------------------------------------------------------------------ */

struct http_conf {
	const char *host;        /* borrowed from the configuration */
	unsigned port;
	int64_t ttl_ms;
	int max_sessions;
	int grace_ms;
	size_t max_body;
	struct sg_http_allow allow; /* [server] allowed_hosts */
	unsigned char (*tokens)[SHA256_DIGEST_LENGTH]; /* SHA-256 of each token */
	size_t n_tokens;
	char local_owner[32];    /* owner of unauthenticated sessions */
};

struct stream;

struct hsess {
	struct sg_session *s;    /* owned: the reference sg_session_new() returned */
	struct hsess *next;      /* table chain (srv.lock), or the janitor's list */
	pthread_mutex_t lock;    /* guards what follows and every stream of the session */
	pthread_cond_t cond;     /* handling dropped to 0 */
	int refs;
	int handling;            /* requests inside sg_mcp_handle() */
	bool ended;              /* out of the table: no new message is handled */
	int64_t last_seen_ms;
	unsigned next_stream;
	struct stream *streams;  /* pending, attached and retained streams */
	struct stream *get;      /* the standalone GET stream (also in streams) */
};

enum stream_mode { MODE_PENDING, MODE_JSON, MODE_SSE };

struct stream {
	struct hsess *hs;        /* a reference */
	struct stream *next;     /* hs->streams */
	int refs;
	bool listed;
	bool owed;               /* the core still owes a final message (a reference) */
	bool retained;           /* its connection broke before the end (a reference) */
	bool is_get;
	bool done;               /* the final message is in, or none will come */
	bool closed;             /* the session ended: finish with what is there */
	bool suspended;          /* conn is suspended by us and nobody resumed it yet */
	enum stream_mode mode;
	struct MHD_Connection *conn; /* the connection writing it, or NULL */
	unsigned no, seq;        /* event ids are "no-seq", unique in the session */
	unsigned gen;            /* bumped when a resume takes the stream over */
	struct sg_buf out;       /* SSE text since the start (replayable) */
	size_t sent;             /* bytes of out handed to MHD */
	char *final;             /* JSON (or not yet decided) mode: the final message */
	size_t final_len;
	int64_t last_write_ms;
	int64_t detached_ms;
};

struct req {
	struct MHD_Connection *conn;
	struct hsess *hs;        /* a reference, or NULL (before initialize) */
	struct stream *st;       /* a reference, or NULL */
	struct sg_buf body;
	struct sg_http_verdict v; /* the checks' outcome: kind, owner, Accept, and an
				   * error found in the headers, answered after the body */
	bool responded;
	bool waiting;            /* DELETE: suspended until the session is closed */
	bool closed;             /* DELETE: the session is closed */
};

static struct {
	struct http_conf conf;
	struct MHD_Daemon *daemon;
	pthread_mutex_t lock;    /* the table, n_sessions, stopping, closers */
	pthread_cond_t cond;     /* closers dropped to 0 */
	struct hsess **table;
	size_t table_size;       /* a power of two */
	int n_sessions;
	atomic_bool stopping;
	int closers;
	atomic_int live_reqs;
	int sigpipe[2];
} srv = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
	.sigpipe = { -1, -1 },
};

static void http_send(void *ctx, struct sg_call *call, const char *data, size_t len, bool final);
static void http_dropped(void *ctx, struct sg_call *call);

static const struct sg_transport_ops http_ops = {
	.name = "http",
	.send = http_send,
	.dropped = http_dropped,
};

/* Allocation failures abort, as sg_xmalloc() does (HACKING: OOM policy). */
static void buf_add(struct sg_buf *b, const void *p, size_t n)
{
	if (sg_buf_append(b, p, n) < 0) {
		SG_ERROR("out of memory growing a %zu-byte HTTP buffer", b->len);
		abort();
	}
}

/* ---- sessions --------------------------------------------------------------- */

/* Returns a new session with one reference, owned by the caller. */
static struct hsess *hsess_new(const char *owner)
{
	struct hsess *hs = sg_xcalloc(1, sizeof(*hs));

	pthread_mutex_init(&hs->lock, NULL);
	pthread_cond_init(&hs->cond, NULL);
	hs->refs = 1;
	hs->last_seen_ms = sg_now_ms();
	hs->s = sg_session_new(&http_ops, hs, owner);
	return hs;
}

static void hsess_ref(struct hsess *hs)
{
	pthread_mutex_lock(&hs->lock);
	hs->refs++;
	pthread_mutex_unlock(&hs->lock);
}

/* The last reference frees it.  By then sg_session_close() has returned (or
 * the session never served a call), so no core thread can still send. */
static void hsess_unref(struct hsess *hs)
{
	int left;

	if (!hs)
		return;
	pthread_mutex_lock(&hs->lock);
	left = --hs->refs;
	pthread_mutex_unlock(&hs->lock);
	if (left > 0)
		return;
	sg_session_unref(hs->s);
	pthread_cond_destroy(&hs->cond);
	pthread_mutex_destroy(&hs->lock);
	free(hs);
}

/* Session ids are 64 random hex digits: the first eight index the table. */
static size_t table_slot(const char *id)
{
	size_t h = 0;

	for (int i = 0; i < 8 && id[i]; i++)
		h = h * 31 + (unsigned char)id[i];
	return h & (srv.table_size - 1);
}

/* Returns a reference to the session `id` when it exists and belongs to
 * `owner` (MCP basic/transports "Session Management": bind sessions to the
 * user; another user's id is unknown), else NULL. */
static struct hsess *table_find(const char *id, const char *owner)
{
	struct hsess *hs;

	if (strlen(id) != 64)
		return NULL;
	pthread_mutex_lock(&srv.lock);
	/* constant time: the id is the session's only secret part */
	for (hs = srv.table[table_slot(id)]; hs; hs = hs->next)
		if (CRYPTO_memcmp(hs->s->id, id, 64) == 0)
			break;
	if (hs && strcmp(hs->s->owner, owner) != 0)
		hs = NULL;
	if (hs)
		hsess_ref(hs);
	pthread_mutex_unlock(&srv.lock);
	return hs;
}

static bool table_full(void)
{
	bool full;

	pthread_mutex_lock(&srv.lock);
	full = srv.stopping || srv.n_sessions >= srv.conf.max_sessions;
	pthread_mutex_unlock(&srv.lock);
	return full;
}

/* Adds hs; the table takes a reference.  Returns -1 when full or stopping. */
static int table_add(struct hsess *hs)
{
	size_t i;

	pthread_mutex_lock(&srv.lock);
	if (srv.stopping || srv.n_sessions >= srv.conf.max_sessions) {
		pthread_mutex_unlock(&srv.lock);
		return -1;
	}
	i = table_slot(hs->s->id);
	hsess_ref(hs);
	hs->next = srv.table[i];
	srv.table[i] = hs;
	srv.n_sessions++;
	pthread_mutex_unlock(&srv.lock);
	return 0;
}

/* Unlinks hs.  Returns true when it was there: the table's reference then
 * belongs to the caller. */
static bool table_remove(struct hsess *hs)
{
	bool found = false;

	pthread_mutex_lock(&srv.lock);
	for (struct hsess **pp = &srv.table[table_slot(hs->s->id)]; *pp; pp = &(*pp)->next) {
		if (*pp == hs) {
			*pp = hs->next;
			hs->next = NULL;
			srv.n_sessions--;
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&srv.lock);
	return found;
}

/* ---- streams ---------------------------------------------------------------- */

/* Returns a new POST or GET stream of hs with one reference (the caller's).
 * hs->lock held. */
static struct stream *stream_new_locked(struct hsess *hs, bool is_get)
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

static void stream_list_locked(struct stream *st)
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
 * the stream is delisted and the caller frees it with stream_free() once
 * the lock is released. */
static bool stream_put_locked(struct stream *st)
{
	if (--st->refs > 0)
		return false;
	stream_delist_locked(st);
	return true;
}

static void stream_free(struct stream *st)
{
	struct hsess *hs = st->hs;

	sg_buf_release(&st->out);
	free(st->final);
	free(st);
	hsess_unref(hs);
}

static void stream_unref(struct stream *st)
{
	struct hsess *hs = st->hs;
	bool dead;

	pthread_mutex_lock(&hs->lock);
	dead = stream_put_locked(st);
	pthread_mutex_unlock(&hs->lock);
	if (dead)
		stream_free(st);
}

/* hs->lock held.  Returns the connection to resume once the lock is
 * released, or NULL when it is not waiting. */
static struct MHD_Connection *stream_wake_locked(struct stream *st)
{
	if (!st->suspended)
		return NULL;
	st->suspended = false;
	return st->conn;
}

/* Appends one SSE event (MCP basic/transports: ids unique across the
 * session's streams, encoding the stream).  Messages are compact JSON
 * without raw newlines (sg_rpc_dump), so one data: line each. */
static void stream_event_locked(struct stream *st, const char *data, size_t len)
{
	char head[64];
	int n = snprintf(head, sizeof(head), "id: %u-%u\ndata: ", st->no, ++st->seq);

	buf_add(&st->out, head, (size_t)n);
	buf_add(&st->out, data, len);
	buf_add(&st->out, "\n\n", 2);
	st->last_write_ms = sg_now_ms();
}

/* The priming event of MCP 2025-11-25 basic/transports (SEP-1699): an id and
 * empty data, so the client can resume from the start, and the retry delay
 * it must use.  Older revisions have neither, and older clients would try
 * to parse the empty data. */
static bool wants_priming(struct sg_session *s)
{
	bool yes;

	pthread_mutex_lock(&s->lock);
	yes = strcmp(s->protocol, "2025-11-25") >= 0;
	pthread_mutex_unlock(&s->lock);
	return yes;
}

/* Puts the priming event first in st->out (which may already hold events
 * sent before the stream's mode was decided).  hs->lock held. */
static void stream_prime_locked(struct stream *st)
{
	struct sg_buf b = { 0 };
	char head[96];
	int n = snprintf(head, sizeof(head), "id: %u-0\nretry: %d\ndata: \n\n", st->no, SSE_RETRY_MS);

	buf_add(&b, head, (size_t)n);
	if (st->out.len)
		buf_add(&b, st->out.data, st->out.len);
	sg_buf_release(&st->out);
	st->out = b;
}

/* The offset just after the event with id "no-seq" in st->out, or 0
 * (replay everything) when it is not there. */
static size_t stream_offset_after(const struct stream *st, unsigned seq)
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
		stream_event_locked(st, data, len);
	} else if (final) {
		st->final = sg_xmalloc(len + 1);
		memcpy(st->final, data, len);
		st->final[len] = '\0';
		st->final_len = len;
		st->last_write_ms = sg_now_ms();
	} else if (st->mode == MODE_PENDING) {
		stream_event_locked(st, data, len);
	}
}

/* The core will send nothing more for st: release its reference. */
static bool stream_settle_locked(struct stream *st)
{
	st->done = true;
	if (!st->owed)
		return false;
	st->owed = false;
	return stream_put_locked(st);
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
			wake = stream_wake_locked(st);
		if (final)
			dead = stream_settle_locked(st);
	}
	pthread_mutex_unlock(&hs->lock);
	if (wake)
		MHD_resume_connection(wake);
	if (dead)
		stream_free(st);
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
		wake = stream_wake_locked(st);
		dead = stream_settle_locked(st);
	}
	pthread_mutex_unlock(&hs->lock);
	if (wake)
		MHD_resume_connection(wake);
	if (dead)
		stream_free(st);
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

	stream_unref(att->st);
	free(att);
}

static enum MHD_Result queue(struct req *r, unsigned status, struct MHD_Response *resp)
{
	enum MHD_Result ret;

	if (!resp)
		return MHD_NO;
	r->responded = true;
	ret = MHD_queue_response(r->conn, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* Answers with body (taken: freed by MHD) as application/json. */
static enum MHD_Result reply_json(struct req *r, unsigned status, char *body, size_t len,
				  const char *session_id)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);

	if (!resp) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	if (session_id)
		MHD_add_response_header(resp, HDR_SESSION, session_id);
	return queue(r, status, resp);
}

static enum MHD_Result reply_empty(struct req *r, unsigned status)
{
	return queue(r, status,
		     MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT));
}

/* An HTTP error with a JSON-RPC error body without id (MCP basic/transports:
 * "the HTTP response body MAY comprise a JSON-RPC error response that has
 * no id"); -32001 is what the SDKs use for an unknown session. */
static enum MHD_Result reply_error(struct req *r, unsigned status, const char *msg)
{
	json_t *j = json_pack("{s:s, s:n, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", "error", "code",
			      status == MHD_HTTP_NOT_FOUND ? -32001 : -32000,
			      "message", msg);
	size_t len;
	char *body = sg_rpc_dump(j, &len);
	struct MHD_Response *resp;

	json_decref(j);
	resp = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
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
	return queue(r, status, resp);
}

/* Starts st's SSE response on r's connection; the response holds a stream
 * reference (released by sse_free).  hs->lock held. */
static struct MHD_Response *sse_response_locked(struct stream *st)
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
	p->allow = &srv.conf.allow;
	p->tokens = (const unsigned char (*)[SG_HTTP_DIGEST])srv.conf.tokens;
	p->n_tokens = srv.conf.n_tokens;
	p->local_owner = srv.conf.local_owner;
	p->max_body = srv.conf.max_body;
	p->stopping = atomic_load(&srv.stopping);
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
		r->hs = sg_http_session_id_valid(view.session_id) ? table_find(view.session_id, r->v.owner)
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
	if (table_full()) {
		sg_http_fail(&r->v, MHD_HTTP_SERVICE_UNAVAILABLE,
		     "too many sessions (%d, [server] max_sessions): end one with DELETE or retry later",
		     srv.conf.max_sessions);
		return -1;
	}
	r->hs = hsess_new(r->v.owner);
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
	if (table_add(r->hs) < 0) {
		sg_http_fail(&r->v, MHD_HTTP_SERVICE_UNAVAILABLE,
		     "too many sessions (%d, [server] max_sessions): end one with DELETE or retry later",
		     srv.conf.max_sessions);
		return false;
	}
	SG_DEBUG("http: session %s started for %s", s->hash, s->owner);
	return true;
}

/* Chooses how the reply travels (hs->lock held, after sg_mcp_handle()):
 * SSE when the client takes it and the reply is not complete yet (or
 * notifications came first); JSON otherwise (doc/http.md). */
static enum MHD_Result post_decide_locked(struct req *r, int n, const char *new_id, bool prime)
{
	struct stream *st = r->st;
	struct MHD_Response *resp;
	char *body;

	/* 202: only notifications or responses, or a call cancelled already */
	if (!st->final && (n == 0 || st->done))
		return reply_empty(r, MHD_HTTP_ACCEPTED);
	if (st->done && st->final && (!r->v.want_sse || (r->v.want_json && st->out.len == 0))) {
		body = st->final;
		st->final = NULL;
		return reply_json(r, MHD_HTTP_OK, body, st->final_len, new_id);
	}
	if (r->v.want_sse) {
		st->mode = MODE_SSE;
		if (prime)
			stream_prime_locked(st);
		if (st->final) {
			stream_event_locked(st, st->final, st->final_len);
			free(st->final);
			st->final = NULL;
		}
		stream_list_locked(st);
		st->conn = r->conn;
		resp = sse_response_locked(st);
		return queue(r, MHD_HTTP_OK, resp);
	}
	/* JSON, still running: park the connection until the final message. */
	st->mode = MODE_JSON;
	sg_buf_release(&st->out);
	stream_list_locked(st);
	st->conn = r->conn;
	st->suspended = true;
	MHD_suspend_connection(r->conn);
	return MHD_YES;
}

static enum MHD_Result post_handle(struct req *r)
{
	bool is_new = false, registered = false, prime;
	struct hsess *hs;
	enum MHD_Result ret;
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
	r->st = stream_new_locked(hs, false);
	r->st->refs++; /* owed by the core until its final message */
	r->st->owed = true;
	pthread_mutex_unlock(&hs->lock);

	n = sg_mcp_handle(hs->s, r->body.data ? r->body.data : "", r->body.len, r->st);
	sg_buf_release(&r->body);
	if (is_new)
		registered = post_register(r);
	prime = wants_priming(hs->s);

	pthread_mutex_lock(&hs->lock);
	if (--hs->handling == 0)
		pthread_cond_broadcast(&hs->cond);
	hs->last_seen_ms = sg_now_ms();
	/* Nothing is owed for notifications and responses; the request's own
	 * reference keeps the stream alive here. */
	if (n == 0 && r->st->owed)
		stream_settle_locked(r->st);
	if (r->v.status) /* initialize answered, but no room for the session */
		ret = reply_error(r, r->v.status, r->v.why);
	else
		ret = post_decide_locked(r, n, registered ? hs->s->id : NULL, prime);
	pthread_mutex_unlock(&hs->lock);
	return ret;
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
	if (atomic_load(&srv.stopping))
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
		*wake = stream_wake_locked(st);
		st->conn = NULL;
	}
	st->sent = stream_offset_after(st, seq);
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
	struct stream *st = stream_new_locked(hs, true);

	if (hs->get) {
		hs->get->closed = true;
		*wake = stream_wake_locked(hs->get);
	}
	st->mode = MODE_SSE;
	if (prime)
		stream_prime_locked(st);
	stream_list_locked(st);
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
	bool prime = wants_priming(hs->s);
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
	resp = sse_response_locked(st);
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
		if ((wake[nw] = stream_wake_locked(st)))
			nw++;
		if (st->retained) {
			st->retained = false;
			if (stream_put_locked(st))
				dead[nd++] = st;
		}
	}
	pthread_mutex_unlock(&hs->lock);
	for (size_t i = 0; i < nw; i++)
		MHD_resume_connection(wake[i]);
	for (size_t i = 0; i < nd; i++)
		stream_free(dead[i]);
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
	hsess_unref(hs);
	free(job);
	pthread_mutex_lock(&srv.lock);
	if (--srv.closers == 0)
		pthread_cond_broadcast(&srv.cond);
	pthread_mutex_unlock(&srv.lock);
	return NULL;
}

/* Ends hs (already out of the table; its table reference is consumed). */
static void close_start(struct hsess *hs, struct req *del, int grace_ms)
{
	struct close_job *job = sg_xcalloc(1, sizeof(*job));
	pthread_attr_t attr;
	pthread_t th;
	int rc;

	job->hs = hs;
	job->del = del;
	job->grace_ms = grace_ms;
	pthread_mutex_lock(&srv.lock);
	srv.closers++;
	pthread_mutex_unlock(&srv.lock);
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
	if (!table_remove(hs))
		return reply_error(r, MHD_HTTP_NOT_FOUND, "session not found: it already ended");
	SG_INFO("http: session %s ended by DELETE", hs->s->hash);
	pthread_mutex_lock(&hs->lock);
	r->waiting = true;
	MHD_suspend_connection(r->conn);
	pthread_mutex_unlock(&hs->lock);
	close_start(hs, r, srv.conf.grace_ms);
	return MHD_YES;
}

/* ---- the MHD callbacks ------------------------------------------------------ */

static void req_free(struct req *r)
{
	if (r->st)
		stream_unref(r->st);
	if (r->hs) {
		pthread_mutex_lock(&r->hs->lock);
		r->hs->last_seen_ms = sg_now_ms();
		pthread_mutex_unlock(&r->hs->lock);
		hsess_unref(r->hs);
	}
	sg_buf_release(&r->body);
	free(r);
	atomic_fetch_sub(&srv.live_reqs, 1);
}

static void req_body(struct req *r, const char *data, size_t n)
{
	if (r->v.status || r->responded)
		return; /* an error is coming: the body is read and dropped */
	if (r->v.kind != SG_HTTP_POST) {
		sg_http_fail(&r->v, MHD_HTTP_BAD_REQUEST, "bad request: %s takes no body",
		     r->v.kind == SG_HTTP_GET ? "GET" : "DELETE");
		return;
	}
	if (r->body.len + n > srv.conf.max_body) {
		sg_buf_release(&r->body);
		sg_http_fail(&r->v, MHD_HTTP_CONTENT_TOO_LARGE,
		     "message larger than %zu bytes ([server] max_message_bytes)", srv.conf.max_body);
		reply_error(r, r->v.status, r->v.why);
		return;
	}
	buf_add(&r->body, data, n);
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
		atomic_fetch_add(&srv.live_reqs, 1);
		check_request(r, url, method);
		/* A body too large to read, or whose length has two readings,
		 * is refused at once (MHD then closes the connection). */
		if (r->v.status && r->v.reply_now)
			return reply_error(r, r->v.status, r->v.why);
		return MHD_YES;
	}
	if (*upload_size) {
		req_body(r, upload, *upload_size);
		*upload_size = 0;
		return MHD_YES;
	}
	if (r->responded)
		return MHD_YES;
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

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	size_t n;

	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
		msg[--n] = '\0';
	SG_WARN("http: libmicrohttpd: %s", msg);
}

/* ---- the janitor (main thread, every TICK_MS) -------------------------------- */

struct chores {
	struct MHD_Connection **wake;
	struct stream **dead;
	size_t nw, nd, cap_w, cap_d;
};

static void chores_wake(struct chores *c, struct MHD_Connection *conn)
{
	if (!conn)
		return;
	if (c->nw == c->cap_w) {
		c->cap_w = c->cap_w ? 2 * c->cap_w : 16;
		c->wake = sg_xrealloc(c->wake, c->cap_w * sizeof(*c->wake));
	}
	c->wake[c->nw++] = conn;
}

static void chores_dead(struct chores *c, struct stream *st)
{
	if (c->nd == c->cap_d) {
		c->cap_d = c->cap_d ? 2 * c->cap_d : 16;
		c->dead = sg_xrealloc(c->dead, c->cap_d * sizeof(*c->dead));
	}
	c->dead[c->nd++] = st;
}

/* Keep-alive comments on silent streams (so a dead peer is noticed: MHD
 * does not watch a suspended connection, and proxies drop idle ones) and
 * the end of retention.  Returns whether a stream is being delivered,
 * which keeps the session from being idle.  hs->lock held. */
static bool tend_streams_locked(struct hsess *hs, int64_t now, struct chores *c)
{
	bool busy = false;

	for (struct stream *st = hs->streams, *next; st; st = next) {
		next = st->next;
		if (st->conn && !st->is_get)
			busy = true;
		if (st->conn && st->mode == MODE_SSE && !st->closed && st->suspended &&
		    now - st->last_write_ms >= KEEPALIVE_MS) {
			buf_add(&st->out, ": keep-alive\n\n", 14);
			st->last_write_ms = now;
			chores_wake(c, stream_wake_locked(st));
		}
		if (st->retained && !st->conn && st->done &&
		    now - (st->detached_ms > st->last_write_ms ? st->detached_ms : st->last_write_ms) >= RETAIN_MS) {
			st->retained = false;
			if (stream_put_locked(st))
				chores_dead(c, st);
		}
	}
	return busy;
}

/* MCP sessions end after [server] session_idle_ttl without a request, a call
 * in flight, or a response being written. */
static bool session_expired(struct hsess *hs, int64_t now, struct chores *c)
{
	struct sg_session *s = hs->s;
	int64_t last;
	bool busy;
	int inflight;

	pthread_mutex_lock(&hs->lock);
	busy = tend_streams_locked(hs, now, c) || hs->handling > 0;
	last = hs->last_seen_ms;
	pthread_mutex_unlock(&hs->lock);
	if (busy)
		return false;
	pthread_mutex_lock(&s->lock);
	inflight = s->inflight;
	if (s->last_active_ms > last)
		last = s->last_active_ms;
	pthread_mutex_unlock(&s->lock);
	return inflight == 0 && now - last >= srv.conf.ttl_ms;
}

static void janitor_tick(void)
{
	struct chores c = { 0 };
	struct hsess *expired = NULL;
	int64_t now = sg_now_ms();

	pthread_mutex_lock(&srv.lock);
	for (size_t i = 0; i < srv.table_size; i++) {
		for (struct hsess **pp = &srv.table[i]; *pp;) {
			struct hsess *hs = *pp;

			if (!session_expired(hs, now, &c)) {
				pp = &hs->next;
				continue;
			}
			*pp = hs->next;
			hs->next = expired;
			expired = hs;
			srv.n_sessions--;
		}
	}
	pthread_mutex_unlock(&srv.lock);
	for (size_t i = 0; i < c.nw; i++)
		MHD_resume_connection(c.wake[i]);
	for (size_t i = 0; i < c.nd; i++)
		stream_free(c.dead[i]);
	free(c.wake);
	free(c.dead);
	while (expired) {
		struct hsess *hs = expired;

		expired = hs->next;
		hs->next = NULL;
		SG_INFO("http: session %s idle for %lld s ([server] session_idle_ttl): ending it",
			hs->s->hash, (long long)(srv.conf.ttl_ms / 1000));
		close_start(hs, NULL, 0);
	}
}

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

/* [server] auth_tokens_file: one token per line ('#' comments).  A file
 * readable by group or others is refused (secrets, like the config file). */
static int load_token_file(struct http_conf *c, const char *path)
{
	struct stat stt;
	char *line = NULL;
	size_t cap = 0, before = c->n_tokens;
	ssize_t n;
	int rc = -1;
	FILE *f = fopen(path, "re");

	if (!f) {
		SG_ERROR("cannot read [server] auth_tokens_file '%s': %s", path, strerror(errno));
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
	while ((n = getline(&line, &cap, f)) >= 0) {
		char *p = line;

		while (*p == ' ' || *p == '\t')
			p++;
		if (*p != '#')
			add_token_list(c, p);
		OPENSSL_cleanse(line, cap);
	}
	if (c->n_tokens == before) {
		SG_ERROR("[server] auth_tokens_file '%s' holds no token: write one per line", path);
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

/* Bearer tokens from every source (doc/http.md "Authentication").  The
 * plain text is never kept or logged; only the ephemeral token is shown,
 * once, on stderr, because nobody else knows it. */
static int load_tokens(struct http_conf *c)
{
	const char *file = sg_config_get("server", "auth_tokens_file");
	char eph[65];
	size_t n;

	if (file && *file && load_token_file(c, file) < 0)
		return -1;
	if ((n = add_token_list(c, getenv("SANDGATE_SERVER_AUTH_TOKENS"))))
		SG_INFO("http: %zu bearer token(s) from SANDGATE_SERVER_AUTH_TOKENS", n);
	if ((n = add_token_list(c, getenv("ABX_MCP_AUTH_TOKEN"))))
		SG_INFO("http: %zu bearer token(s) from ABX_MCP_AUTH_TOKEN", n);
	if (sg_config_bool("server", "ephemeral_token", false)) {
		if (sg_random_hex(eph, 32) < 0) {
			SG_ERROR("cannot read random bytes for the ephemeral token");
			return -1;
		}
		add_token(c, eph, 64);
		fprintf(stderr, "sandgate: ephemeral bearer token (valid until this server exits): %s\n", eph);
		OPENSSL_cleanse(eph, sizeof(eph));
	}
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

static void conf_release(struct http_conf *c)
{
	if (c->tokens)
		OPENSSL_cleanse(c->tokens, c->n_tokens * sizeof(*c->tokens));
	free(c->tokens);
	sg_http_allow_free(&c->allow);
	memset(c, 0, sizeof(*c));
}

static int conf_load(struct http_conf *c)
{
	long long port = sg_config_int("server", "port", 8010);
	bool loopback;

	c->host = sg_config_get("server", "host");
	if (!c->host)
		c->host = "127.0.0.1";
	if (port > 65535) {
		SG_ERROR("[server] port %lld is not a TCP port (0 to 65535)", port);
		return -1;
	}
	c->port = (unsigned)port;
	c->ttl_ms = sg_config_int("server", "session_idle_ttl", 3600) * 1000;
	c->max_sessions = (int)sg_config_int("server", "max_sessions", 100);
	c->grace_ms = (int)sg_config_int("server", "shutdown_grace", 10) * 1000;
	c->max_body = (size_t)sg_config_int("server", "max_message_bytes", 256LL << 20);
	snprintf(c->local_owner, sizeof(c->local_owner), "local:%ld", (long)getuid());
	if (c->max_sessions < 1) {
		SG_ERROR("[server] max_sessions must be at least 1");
		return -1;
	}
	if (load_allowed(c) < 0 || load_tokens(c) < 0)
		return -1;
	loopback = host_is_loopback(c->host);
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

static void on_signal(int sig)
{
	unsigned char b = (unsigned char)sig;
	int saved = errno;

	if (write(srv.sigpipe[1], &b, 1) < 0) {
		/* the pipe is full: a signal is already pending */
	}
	errno = saved;
}

/* A handler rather than a blocked mask: threads started before this one
 * (the reaper, plugin loaders) do not block the signals. */
static int signals_catch(void)
{
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESTART };

	if (pipe2(srv.sigpipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return -1;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	return 0;
}

/* After the first signal: a second one ends the process at once. */
static void signals_default(void)
{
	struct sigaction sa = { .sa_handler = SIG_DFL };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
}

static void signals_release(void)
{
	signals_default();
	for (int i = 0; i < 2; i++) {
		if (srv.sigpipe[i] >= 0)
			close(srv.sigpipe[i]);
		srv.sigpipe[i] = -1;
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

static struct MHD_Daemon *daemon_start(int fd, bool v6)
{
	unsigned limit = (unsigned)srv.conf.max_sessions * 8 + 64;

	return MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME |
				MHD_USE_ERROR_LOG | (v6 ? MHD_USE_IPv6 : 0),
				0, NULL, NULL, on_request, NULL,
				/* first, so MHD logs nothing before it */
				MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
				MHD_OPTION_LISTEN_SOCKET, fd,
				MHD_OPTION_THREAD_POOL_SIZE, pool_size(),
				MHD_OPTION_CONNECTION_LIMIT, limit < 1024 ? 1024u : limit,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONN_TIMEOUT_S,
				MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
				MHD_OPTION_END);
}

/* Waits for a signal, tending sessions meanwhile. */
static void serve(void)
{
	for (;;) {
		struct pollfd p = { .fd = srv.sigpipe[0], .events = POLLIN };
		unsigned char sig;

		if (poll(&p, 1, TICK_MS) > 0 && read(srv.sigpipe[0], &sig, 1) == 1) {
			signals_default();
			SG_INFO("http: signal %u received: not accepting new connections; calls in flight get up to %d s ([server] shutdown_grace); a second signal exits at once",
				sig, srv.conf.grace_ms / 1000);
			return;
		}
		janitor_tick();
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

	pthread_mutex_lock(&srv.lock);
	srv.stopping = true;
	for (size_t i = 0; i < srv.table_size; i++) {
		while (srv.table[i]) {
			struct hsess *hs = srv.table[i];

			srv.table[i] = hs->next;
			hs->next = all;
			all = hs;
		}
	}
	srv.n_sessions = 0;
	pthread_mutex_unlock(&srv.lock);
	lfd = MHD_quiesce_daemon(srv.daemon);
	if (lfd != MHD_INVALID_SOCKET)
		close(lfd);
	while (all) {
		struct hsess *hs = all;

		all = hs->next;
		hs->next = NULL;
		close_start(hs, NULL, srv.conf.grace_ms);
	}
	pthread_mutex_lock(&srv.lock);
	while (srv.closers > 0)
		pthread_cond_wait(&srv.cond, &srv.lock);
	pthread_mutex_unlock(&srv.lock);
	/* Every stream is finished now; MHD must not be stopped while one of
	 * its connections is still suspended (libmicrohttpd API contract). */
	until = sg_now_ms() + DRAIN_MS;
	while (atomic_load(&srv.live_reqs) > 0 && sg_now_ms() < until)
		poll(NULL, 0, 20);
	MHD_stop_daemon(srv.daemon);
	srv.daemon = NULL;
	sg_mcp_drain();
}

int sg_http_run(void)
{
	char url[128];
	bool v6 = false;
	int fd = -1, rc = 3;
	size_t n;

	if (conf_load(&srv.conf) < 0)
		goto out;
	rc = 1;
	if (sg_config_bool("server", "conformance_fixtures", false)) {
		SG_WARN("http: [server] conformance_fixtures is on: the MCP conformance suite's test tools are listed");
		sg_mcp_enable_conformance_fixtures();
	}
	/* Built now, on one thread: sg_tools_list() caches without a lock. */
	(void)sg_tools_list_text(&n);
	for (srv.table_size = 64; srv.table_size < (size_t)srv.conf.max_sessions * 2;)
		srv.table_size *= 2;
	srv.table = sg_xcalloc(srv.table_size, sizeof(*srv.table));
	raise_nofile();
	fd = listen_socket(&srv.conf, url, sizeof(url), &v6);
	if (fd < 0 || signals_catch() < 0)
		goto out;
	srv.daemon = daemon_start(fd, v6);
	if (!srv.daemon) {
		SG_ERROR("cannot start the HTTP server on %s", url);
		goto out;
	}
	fd = -1; /* MHD's now; MHD_quiesce_daemon() hands it back */
	SG_INFO("http: listening on %s (%s, %d sessions at most, idle TTL %lld s)", url,
		srv.conf.n_tokens ? "bearer tokens required" : "no authentication: loopback only",
		srv.conf.max_sessions, (long long)(srv.conf.ttl_ms / 1000));
	serve();
	shutdown_server();
	rc = 0;
out:
	signals_release();
	if (fd >= 0)
		close(fd);
	free(srv.table);
	srv.table = NULL;
	conf_release(&srv.conf);
	return rc;
}
