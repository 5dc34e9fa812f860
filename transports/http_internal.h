/*
 * The insides of the Streamable HTTP transport, shared by its files:
 * http.c (requests, the MHD callbacks, the janitor, listening and
 * shutdown), http_sessions.c (the session table), http_sse.c (the way back
 * of each request: JSON or an SSE stream, replayable), http_conf.c (the
 * [server] keys and bearer tokens), http_conns.c (connections and the
 * whole-request deadline).  The request checks are
 * transports/http_check.c.  Only transports/http*.c include this header.
 */
#ifndef SG_TRANSPORTS_HTTP_INTERNAL_H
#define SG_TRANSPORTS_HTTP_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include <microhttpd.h>
#include <openssl/sha.h>

#include "core/base/buf.h"
#include "core/base/log.h"
#include "core/protocol/session.h"
#include "transports/http_check.h"

#define HDR_SESSION "Mcp-Session-Id"
#define HDR_VERSION "MCP-Protocol-Version"

#define TICK_MS 250            /* janitor period: TTL, keep-alives, retention */
#define KEEPALIVE_MS 15000     /* a comment on an SSE stream silent this long */
#define RETAIN_MS 60000        /* a broken finished stream waits this long for a resume */
#define RETAIN_SESSION_MAX (64u << 20) /* bytes a session's retained streams hold at most */
#define SSE_RETRY_MS 2000      /* the priming event's retry: field */
#define SSE_BLOCK 16384        /* bytes MHD asks the SSE reader for at once */
#define CONN_TIMEOUT_S 120     /* an idle keep-alive connection is closed */
#define DRAIN_MS 5000          /* shutdown: wait this long for requests to finish */
#define REFUSE_LINGER_MS 1000  /* a body refused while it arrives: read on this long */

struct http_conf {
	const char *host;        /* borrowed from the configuration */
	unsigned port;
	int64_t ttl_ms;
	int max_sessions;
	int grace_ms;
	size_t max_body;
	unsigned conn_limit;     /* connections at once: max(1024, 8 x max_sessions + 64) */
	unsigned per_client;     /* [server] max_connections_per_client (0: half of conn_limit) */
	int64_t request_ms;      /* [server] request_timeout */
	struct sg_http_allow allow; /* [server] allowed_hosts */
	unsigned char (*tokens)[SHA256_DIGEST_LENGTH]; /* SHA-256 of each token */
	size_t n_tokens;
	char local_owner[32];    /* owner of unauthenticated sessions */
	bool no_auth;            /* [server] auth = none, explicitly */
	bool token_is_local;     /* the one token is generated for the local
				    user: its sessions are owned by local_owner */
};

struct stream;

struct hsess {
	struct sg_session *s;    /* owned: the reference sg_session_new() returned */
	struct hsess *next;      /* table chain (http_srv.lock), or the janitor's list */
	pthread_mutex_t lock;    /* guards what follows and every stream of the session */
	pthread_cond_t cond;     /* handling dropped to 0 */
	int refs;
	int handling;            /* requests inside sg_mcp_handle() */
	bool ended;              /* out of the table: no new message is handled */
	int64_t last_seen_ms;
	unsigned next_stream;
	struct stream *streams;  /* pending, attached and retained streams */
	struct stream *get;      /* the standalone GET stream (also in streams) */
	size_t retained_bytes;   /* held by its retained streams (http_stream_retain_locked) */
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
	size_t held;             /* bytes counted as retained (out and final) */
};

struct req {
	struct MHD_Connection *conn;
	struct hsess *hs;        /* a reference, or NULL (before initialize) */
	struct stream *st;       /* a reference, or NULL */
	struct sg_buf body;
	struct sg_http_verdict v; /* the checks' outcome: kind, owner, Accept, and an
				   * error found in the headers, answered after the body */
	bool responded;
	int64_t refused_ms;      /* a 413 went out while the body arrived (refuse_now) */
	bool waiting;            /* DELETE: suspended until the session is closed */
	bool closed;             /* DELETE: the session is closed */
};

struct http_server {
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
	atomic_size_t retained;  /* bytes all retained streams hold */
	int sigpipe[2];
};

extern struct http_server http_srv;

extern const struct sg_transport_ops http_ops;

/* Allocation failures abort, as sg_xmalloc() does (HACKING: OOM policy). */
static inline void http_buf_add(struct sg_buf *b, const void *p, size_t n)
{
	if (sg_buf_append(b, p, n) < 0) {
		SG_ERROR("out of memory growing a %zu-byte HTTP buffer", b->len);
		abort();
	}
}


/* http_conf.c: configuration, tokens */
int http_conf_load(struct http_conf *c);
void http_conf_release(struct http_conf *c);

/* http_conns.c: connections, the whole-request deadline.  The notification
 * is MHD_OPTION_NOTIFY_CONNECTION's; http_conn_whole() says a request has
 * arrived whole (its deadline no longer runs), http_conn_ended() that it
 * was answered (the next one's starts); http_conns_tick() shuts down the
 * sockets past the deadline (the janitor, every TICK_MS). */
void http_conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
		      enum MHD_ConnectionNotificationCode code);
void http_conn_whole(struct MHD_Connection *c);
void http_conn_ended(struct MHD_Connection *c);
MHD_socket http_conn_fd(struct MHD_Connection *c);
void http_conns_tick(int64_t now, int64_t timeout_ms);

/* http_sessions.c: the session table */
struct hsess *http_hsess_new(const char *owner);
void http_hsess_unref(struct hsess *hs);
int http_table_add(struct hsess *hs, struct sg_err *err);
struct hsess *http_table_find(const char *id, const char *owner);
bool http_table_full(void);
bool http_table_remove(struct hsess *hs);

/* http_sse.c: response streams and SSE */
struct MHD_Response *http_sse_response_locked(struct stream *st);
void http_stream_event_locked(struct stream *st, const char *data, size_t len);
void http_stream_free(struct stream *st);
void http_stream_list_locked(struct stream *st);
struct stream *http_stream_new_locked(struct hsess *hs, bool is_get);
size_t http_stream_offset_after(const struct stream *st, unsigned seq);
void http_stream_prime_locked(struct stream *st);
bool http_stream_put_locked(struct stream *st);
bool http_stream_settle_locked(struct stream *st);
/* Retention: a POST stream whose connection broke before its end is kept
 * (a reference) for a resume with Last-Event-ID, its bytes counted against
 * RETAIN_SESSION_MAX for its session and half of [server] memory_budget for
 * the server: past either it is not kept (returns false).  unretain ends
 * that and its count; the caller drops the reference.  hs->lock held. */
bool http_stream_retain_locked(struct stream *st);
void http_stream_unretain_locked(struct stream *st);
/* Whether hs's retained streams hold more than their share: the janitor
 * then lets the oldest go.  hs->lock held. */
bool http_retained_over_locked(const struct hsess *hs);
void http_stream_unref(struct stream *st);
struct MHD_Connection *http_stream_wake_locked(struct stream *st);
bool http_wants_priming(struct sg_session *s);

/* http_sessions.c: the janitor, run by the main thread every TICK_MS:
 * idle sessions past their TTL are closed, streams kept alive, broken ones
 * retained for a while. */
void http_janitor_tick(void);

/* http_reply.c: responses.  The *_response() functions make one (NULL when
 * MHD cannot; a taken body is freed either way); http_queue() queues resp on
 * r's connection and destroys its own reference, never with an hsess lock
 * held.  The http_reply_*() functions do both.  Each returns MHD's verdict
 * (MHD_NO closes the connection). */
enum MHD_Result http_queue(struct req *r, unsigned status, struct MHD_Response *resp);
/* body: taken (freed by MHD); session_id: copied, or NULL. */
struct MHD_Response *http_json_response(char *body, size_t len, const char *session_id);
struct MHD_Response *http_empty_response(void);
/* A JSON-RPC error without id; msg is copied. */
struct MHD_Response *http_error_response(const struct req *r, unsigned status, const char *msg);
enum MHD_Result http_reply_json(struct req *r, unsigned status, char *body, size_t len,
				const char *session_id);
enum MHD_Result http_reply_empty(struct req *r, unsigned status);
enum MHD_Result http_reply_error(struct req *r, unsigned status, const char *msg);

/* http_post.c: a POST whose body is whole (r->body), and a JSON-mode POST
 * resumed once its final message is in. */
enum MHD_Result http_post_handle(struct req *r);
enum MHD_Result http_post_resumed(struct req *r);

/* http_get.c: a GET after the checks passed. */
enum MHD_Result http_get_open(struct req *r);

/* http_end.c: ends hs on a thread of its own (its calls get grace_ms, its
 * machines are destroyed); `del` is the DELETE request that asked for it,
 * or NULL.  http_delete() answers a DELETE once the session is closed. */
void http_close_start(struct hsess *hs, struct req *del, int grace_ms);
enum MHD_Result http_delete(struct req *r);

#endif
