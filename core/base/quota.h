/* Quotas per credential: how many sessions, calls in flight, sandboxes and
 * shells one credential (a bearer token over HTTP, the local user over
 * stdio) holds at once, each under a [server] quota_* key, so that one
 * credential at its quota never holds back another's requests.  The
 * server-wide caps (max_sessions, max_calls) stay above them.
 *
 * Counting is exact under concurrency: sg_quota_take() checks and counts in
 * one step under one lock. */
#ifndef SG_CORE_QUOTA_H
#define SG_CORE_QUOTA_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "core/base/err.h"

enum sg_quota_kind {
	SG_QUOTA_SESSIONS,
	SG_QUOTA_CALLS,
	SG_QUOTA_SANDBOXES, /* sandboxes and machines this process created */
	SG_QUOTA_SHELLS,
	SG_QUOTA_KINDS
};

/* Quotas are kept apart between credentials: a server that serves one
 * (stdio, an HTTP server with no token or with one) counts but does not
 * refuse, its server-wide caps being its only bound.  Set before serving
 * (the HTTP transport, from its tokens); off until then. */
void sg_quota_enforce(bool on);

/* The [server] key of a kind ("quota_sessions").  Static. */
const char *sg_quota_key(enum sg_quota_kind k);

/* Counts one `k` for the credential key `owner` ("token:HASH", "local:UID";
 * borrowed) when it holds fewer than its quota ([server] quota_*; 0: no
 * quota, or quotas not enforced: sg_quota_enforce).  Returns 0, or -1 with
 * err (SG_E_BUSY) naming the quota key, the
 * count and how to free one; nothing is counted then.  Each 0 is to be
 * matched by one sg_quota_give(). */
int sg_quota_take(const char *owner, enum sg_quota_kind k, struct sg_err *err);

/* Gives back one `k` taken by owner. */
void sg_quota_give(const char *owner, enum sg_quota_kind k);

/* How many `k` owner holds now. */
int sg_quota_count(const char *owner, enum sg_quota_kind k);

/* Changes so far: equal values mean nothing was taken nor given between. */
uint64_t sg_quota_generation(void);

/* Every credential holding something: [{"credential": first 16 hex digits
 * of the SHA-256 of the credential key (never the key), "sessions": n,
 * "calls": n, "sandboxes": n, "shells": n}].  New reference, the caller's. */
json_t *sg_quota_usage(void);

#endif
