/* The context of one MCP request that is being served: its id, its progress
 * token, cancellation (a flag plus an eventfd that plugins can poll), and the
 * way to send notifications that belong to it.  Plugins see it as the opaque
 * struct sg_call of plugin.h. */
#ifndef SG_CORE_CALL_H
#define SG_CORE_CALL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include <jansson.h>

#include <sandgate/plugin.h>

#include "core/protocol/dump.h"

struct sg_session;

struct sg_call {
	struct sg_session *session;  /* borrowed; outlives the call */
	json_t *id;                  /* request id, owned reference */
	json_t *progress_token;      /* owned reference, or NULL */
	char method[64];
	char tool[64];
	atomic_bool cancelled;
	atomic_bool done;            /* the response was sent (or dropped) */
	int efd;                     /* eventfd, readable once cancelled */
	double last_progress;
	pthread_mutex_t lock;        /* guards last_progress */
	void *transport_ctx;         /* per-request transport state (HTTP SSE) */
	size_t mem_held;             /* bytes of [server] memory_budget held, given back by sg_call_free */
	bool pieces;                 /* its reply alone is written in pieces (send_json): it may hold bytes */
	struct sg_bytes held;        /* a result string held for the reply (sg_call_string), owned */
	struct sg_call *next;        /* session's in-flight list */
};

/* Returns a new call for request `id` of session s; the call holds its own
 * copies of id and progress_token (which may be NULL), so the caller's stay
 * the caller's.  Free with sg_call_free(). */
struct sg_call *sg_call_new(struct sg_session *s, json_t *id, json_t *progress_token,
			    const char *method);
void sg_call_free(struct sg_call *c);

/* Reserves n more bytes of the server's memory budget for c (core/base/mem.h:
 * waits briefly, then fails with SG_E_BUSY naming [server] memory_budget).
 * What c holds is given back when it is freed.  c may be NULL (a call of
 * no session): then nothing is reserved. */
int sg_call_mem_reserve(struct sg_call *c, size_t n, struct sg_err *err);

/* Counts n bytes c holds already against the budget, without waiting or
 * refusing (sg_mem_hold). */
void sg_call_mem_hold(struct sg_call *c, size_t n);

/* A JSON string of the len bytes at data (malloc'd, taken: the call frees
 * them, or this does at once), valid UTF-8 without NUL (base64, checked
 * text); plain when none of them is a byte JSON escapes (base64: the
 * writer then copies them without a scan, dump.h).  When c's reply is
 * written in pieces (c->pieces), nothing is held yet and len is at least SG_CALL_HOLD_MIN, the bytes stay where they
 * are: the value is c->held's placeholder, and the transport writes the
 * bytes in its place (core/protocol/dump.h).  Else a copy.  c may be NULL.
 * Returns a new reference (the sg_xmalloc policy: never NULL). */
json_t *sg_call_string(struct sg_call *c, char *data, size_t len, bool plain);

#define SG_CALL_HOLD_MIN (1024 * 1024)

/* Marks c cancelled and wakes anyone polling its eventfd.  Idempotent. */
void sg_call_cancel(struct sg_call *c);

/* Host API entries (see struct sg_host_api); those that reach the client
 * (progress, notify, credential) are the session's (session.h). */
bool sg_call_cancelled(const struct sg_call *c);
int sg_call_cancel_fd(const struct sg_call *c);

/* How many credentials the server serves (host->credentials): 1 unless a
 * transport with several (HTTP bearer tokens) says so at startup, before
 * any machine is made.  n = 0 counts as 1. */
void sg_credentials_set(unsigned n);
unsigned sg_credentials_count(void);

#endif
