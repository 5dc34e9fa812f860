/*
 * The HTTP session table (transports/http_internal.h): sessions by id, each
 * bound to the credential that made it; lookups compare the id whole.
 */
#include "config.h"

#include <string.h>

#include <openssl/crypto.h>

#include "core/base/quota.h"
#include "core/base/util.h"
#include "transports/http_internal.h"

/* ---- sessions --------------------------------------------------------------- */

/* Returns a new session with one reference, owned by the caller. */
struct hsess *http_hsess_new(const char *owner)
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
void http_hsess_unref(struct hsess *hs)
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
	return h & (http_srv.table_size - 1);
}

/* Returns a reference to the session `id` when it exists and belongs to
 * `owner` (MCP basic/transports "Session Management": bind sessions to the
 * user; another user's id is unknown), else NULL. */
struct hsess *http_table_find(const char *id, const char *owner)
{
	struct hsess *hs;

	if (strlen(id) != 64)
		return NULL;
	pthread_mutex_lock(&http_srv.lock);
	/* constant time: the id is the session's only secret part */
	for (hs = http_srv.table[table_slot(id)]; hs; hs = hs->next)
		if (CRYPTO_memcmp(hs->s->id, id, 64) == 0)
			break;
	if (hs && strcmp(hs->s->owner, owner) != 0)
		hs = NULL;
	if (hs)
		hsess_ref(hs);
	pthread_mutex_unlock(&http_srv.lock);
	return hs;
}

bool http_table_full(void)
{
	bool full;

	pthread_mutex_lock(&http_srv.lock);
	full = http_srv.stopping || http_srv.n_sessions >= http_srv.conf.max_sessions;
	pthread_mutex_unlock(&http_srv.lock);
	return full;
}

/* Adds hs; the table takes a reference and hs one of its credential's
 * [server] quota_sessions, given back where it leaves the table.  Returns
 * 0; -1 when full or stopping (err SG_E_UNAVAILABLE), or when the
 * credential is at its quota (err SG_E_BUSY, from sg_quota_take()). */
int http_table_add(struct hsess *hs, struct sg_err *err)
{
	size_t i;

	pthread_mutex_lock(&http_srv.lock);
	if (http_srv.stopping || http_srv.n_sessions >= http_srv.conf.max_sessions) {
		pthread_mutex_unlock(&http_srv.lock);
		return sg_errf(err, SG_E_UNAVAILABLE,
			       "too many sessions (%d, [server] max_sessions): end one with DELETE or retry later",
			       http_srv.conf.max_sessions);
	}
	if (sg_quota_take(hs->s->owner, SG_QUOTA_SESSIONS, err) < 0) {
		pthread_mutex_unlock(&http_srv.lock);
		return -1;
	}
	i = table_slot(hs->s->id);
	hsess_ref(hs);
	hs->next = http_srv.table[i];
	http_srv.table[i] = hs;
	http_srv.n_sessions++;
	pthread_mutex_unlock(&http_srv.lock);
	return 0;
}

/* Unlinks hs.  Returns true when it was there: the table's reference then
 * belongs to the caller. */
bool http_table_remove(struct hsess *hs)
{
	bool found = false;

	pthread_mutex_lock(&http_srv.lock);
	for (struct hsess **pp = &http_srv.table[table_slot(hs->s->id)]; *pp; pp = &(*pp)->next) {
		if (*pp == hs) {
			*pp = hs->next;
			hs->next = NULL;
			http_srv.n_sessions--;
			sg_quota_give(hs->s->owner, SG_QUOTA_SESSIONS);
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&http_srv.lock);
	return found;
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

/* Lets hs's oldest retained stream go (over its share: a call that still
 * writes on a stream nobody reads).  Returns false when none is left. */
static bool trim_oldest_locked(struct hsess *hs, struct chores *c)
{
	struct stream *old = NULL;

	for (struct stream *st = hs->streams; st; st = st->next)
		if (st->retained && !st->conn && (!old || st->detached_ms < old->detached_ms))
			old = st;
	if (!old)
		return false;
	SG_DEBUG("http: session %s: retained stream %u (%zu bytes) let go: over the limit",
		 hs->s->hash, old->no, old->held);
	http_stream_unretain_locked(old);
	if (http_stream_put_locked(old))
		chores_dead(c, old);
	return true;
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
			http_buf_add(&st->out, ": keep-alive\n\n", 14);
			st->last_write_ms = now;
			chores_wake(c, http_stream_wake_locked(st));
		}
		if (st->retained && !st->conn && st->done &&
		    now - (st->detached_ms > st->last_write_ms ? st->detached_ms : st->last_write_ms) >= RETAIN_MS) {
			http_stream_unretain_locked(st);
			if (http_stream_put_locked(st))
				chores_dead(c, st);
		}
	}
	while (http_retained_over_locked(hs) && trim_oldest_locked(hs, c))
		;
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
	return inflight == 0 && now - last >= http_srv.conf.ttl_ms;
}

void http_janitor_tick(void)
{
	struct chores c = { 0 };
	struct hsess *expired = NULL;
	int64_t now = sg_now_ms();

	pthread_mutex_lock(&http_srv.lock);
	for (size_t i = 0; i < http_srv.table_size; i++) {
		for (struct hsess **pp = &http_srv.table[i]; *pp;) {
			struct hsess *hs = *pp;

			if (!session_expired(hs, now, &c)) {
				pp = &hs->next;
				continue;
			}
			*pp = hs->next;
			hs->next = expired;
			expired = hs;
			http_srv.n_sessions--;
			sg_quota_give(hs->s->owner, SG_QUOTA_SESSIONS);
		}
	}
	pthread_mutex_unlock(&http_srv.lock);
	for (size_t i = 0; i < c.nw; i++)
		MHD_resume_connection(c.wake[i]);
	for (size_t i = 0; i < c.nd; i++)
		http_stream_free(c.dead[i]);
	free(c.wake);
	free(c.dead);
	while (expired) {
		struct hsess *hs = expired;

		expired = hs->next;
		hs->next = NULL;
		SG_INFO("http: session %s idle for %lld s ([server] session_idle_ttl): ending it",
			hs->s->hash, (long long)(http_srv.conf.ttl_ms / 1000));
		http_close_start(hs, NULL, 0);
	}
}
