/* An MCP session: one stdio connection, or one Mcp-Session-Id over HTTP.
 * It owns its ephemeral sandboxes, has one default machine, a log level and
 * the calls in flight (for cancellation). */
#ifndef SG_CORE_SESSION_H
#define SG_CORE_SESSION_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include <sandgate/plugin.h>

#include "core/base/util.h"

struct sg_call;

/* How a session's messages leave the process.  Compiled in (no ABI). */
struct sg_transport_ops {
	const char *name; /* "stdio", "http" */
	/* Sends one serialised message (no newline).  `call` is the request it
	 * belongs to (a response or a notification about it), or NULL.  `final`
	 * is true for the response that ends the call.  Thread-safe. */
	void (*send)(void *ctx, struct sg_call *call, const char *data, size_t len,
		     bool final);
	/* Optional: sends one message (borrowed) by writing it out itself
	 * with sg_msg_dump() (core/protocol/dump.h), so the whole text is
	 * never held; used instead of send when set.  Same arguments and
	 * guarantees otherwise. */
	void (*send_json)(void *ctx, struct sg_call *call, const json_t *msg, bool final);
	/* Optional: nothing will be sent for `call` after all (a cancelled
	 * request gets no response, MCP basic/utilities/cancellation), so a
	 * transport waiting for its final response can stop waiting. */
	void (*dropped)(void *ctx, struct sg_call *call);
	/* Optional: called from sg_mcp_handle() on the thread that gave it a
	 * lone tools/call, once the call is accepted.  Returns true when the
	 * transport has passed reading on to another thread, so the call runs
	 * on this one and sg_mcp_handle() returns when it is answered; false
	 * to have a worker thread run it (the default). */
	bool (*handoff)(void *ctx);
};

struct sg_session {
	char id[65];             /* 64 hex digits from the CSPRNG */
	char hash[17];           /* SHA-256 prefix of id: labels and audit rows */
	char owner[96];          /* credential key: "local:UID" or "token:HASH" */
	char cred_hash[17];      /* SHA-256 prefix of owner (host->call_credential) */
	const struct sg_transport_ops *ops;
	void *ctx;

	pthread_mutex_t lock;    /* guards everything below */
	pthread_cond_t cond;
	char protocol[16];       /* negotiated MCP revision, "" before initialize */
	bool initialized;
	atomic_int log_level;    /* notifications/message threshold */
	char default_id[SG_ID_MAX];
	bool creating_default;   /* a lazy creation is under way */
	struct sg_call *calls;   /* in flight */
	int inflight;
	bool closing;
	bool hurry;              /* sg_session_hurry(): the grace period is over */
	int64_t last_active_ms;
	int refs;                /* transport + in-flight calls */
};

/* Returns a new session with a fresh id, owned by the caller (free with
 * sg_session_unref()).  owner is the credential key. */
struct sg_session *sg_session_new(const struct sg_transport_ops *ops, void *ctx,
				  const char *owner);

/* How long a cancelled call may take to return before it is abandoned. */
#define SG_CANCEL_WAIT_MS 2000

/* Ends the session: gives the calls in flight up to grace_ms to finish,
 * cancels the rest and waits up to SG_CANCEL_WAIT_MS for them, then
 * destroys every ephemeral sandbox it created (persistent machines are
 * kept).  Returns how many calls were still running then: abandoned, they
 * keep their references to s (the process is to end without them, see
 * core/server/stop.h). */
int sg_session_close(struct sg_session *s, int grace_ms);

/* Ends the grace period of a sg_session_close() under way, or of the next
 * one: its calls are cancelled at once (a signal during the grace of an
 * end of input). */
void sg_session_hurry(struct sg_session *s);

/* The calls every sg_session_close() abandoned so far. */
int sg_session_abandoned(void);

/* Called by sg_session_close() once the calls are done, to end what the
 * session owns above this layer (its ephemeral machines).  One hook. */
void sg_session_set_end_hook(void (*fn)(struct sg_session *s));

void sg_session_ref(struct sg_session *s);
void sg_session_unref(struct sg_session *s);

/* Serialises msg (stolen) and hands it to the transport. */
void sg_session_send(struct sg_session *s, struct sg_call *call, json_t *msg, bool final);

/* Sends a notification (params stolen) tied to call (or NULL). */
void sg_session_notify(struct sg_session *s, struct sg_call *call, const char *method,
		       json_t *params);

/* Sends notifications/message when level passes the session's threshold. */
void sg_session_log(struct sg_session *s, struct sg_call *call, enum sg_log_level level,
		    const char *logger, const char *text);
int sg_session_log_level(const struct sg_session *s);

/* In-flight bookkeeping.  add takes a session reference; remove drops it. */
void sg_session_call_add(struct sg_session *s, struct sg_call *c);
void sg_session_call_remove(struct sg_session *s, struct sg_call *c);
/* Cancels the in-flight call whose id equals `id`; unknown ids are ignored
 * (MCP basic/utilities/cancellation).  Returns true when one was found. */
bool sg_session_cancel(struct sg_session *s, json_t *id);

/* Default machine: copies the id into out (SG_ID_MAX) and returns true when
 * one is set. */
bool sg_session_default_get(struct sg_session *s, char *out);
void sg_session_default_set(struct sg_session *s, const char *id);
/* Clears the default when it is `id`. */
void sg_session_default_clear(struct sg_session *s, const char *id);

/* Host API entries of a call (see struct sg_host_api): progress and log
 * notifications to its client, and its credential's hash. */
void sg_call_progress(struct sg_call *c, double progress, double total, const char *message);
void sg_call_notify(struct sg_call *c, enum sg_log_level level, const char *fmt, ...)
	SG_PRINTF(3, 4);
const char *sg_call_credential(const struct sg_call *c);

#endif
