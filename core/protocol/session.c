#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/protocol/call.h"
#include "core/protocol/jsonrpc.h"
#include "core/base/log.h"
#include "core/protocol/session.h"
#include "core/base/util.h"

struct sg_session *sg_session_new(const struct sg_transport_ops *ops, void *ctx,
				  const char *owner)
{
	struct sg_session *s = sg_xcalloc(1, sizeof(*s));
	char hex[65];

	if (sg_random_hex(s->id, 32) < 0) {
		SG_ERROR("cannot read random bytes for a session id");
		abort();
	}
	sg_sha256_hex(s->id, strlen(s->id), hex);
	memcpy(s->hash, hex, 16);
	s->hash[16] = '\0';
	snprintf(s->owner, sizeof(s->owner), "%s", owner);
	sg_sha256_hex(s->owner, strlen(s->owner), hex);
	memcpy(s->cred_hash, hex, 16);
	s->cred_hash[16] = '\0';
	s->ops = ops;
	s->ctx = ctx;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	atomic_init(&s->log_level, SG_LOG_INFO);
	s->last_active_ms = sg_now_ms();
	s->refs = 1;
	return s;
}

void sg_session_ref(struct sg_session *s)
{
	pthread_mutex_lock(&s->lock);
	s->refs++;
	pthread_mutex_unlock(&s->lock);
}

void sg_session_unref(struct sg_session *s)
{
	int left;

	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	left = --s->refs;
	pthread_mutex_unlock(&s->lock);
	if (left > 0)
		return;
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	free(s);
}

static void (*end_hook)(struct sg_session *s);

void sg_session_set_end_hook(void (*fn)(struct sg_session *s))
{
	end_hook = fn;
}

/* Calls abandoned by every sg_session_close() so far. */
static atomic_int abandoned;

int sg_session_abandoned(void)
{
	return atomic_load(&abandoned);
}

/* now + ms on the realtime clock (pthread_cond_timedwait's). */
static struct timespec after_ms(int ms)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_sec += ms / 1000;
	t.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

int sg_session_close(struct sg_session *s, int grace_ms)
{
	struct timespec deadline = after_ms(grace_ms > 0 ? grace_ms : 0);
	int left;

	pthread_mutex_lock(&s->lock);
	/* Calls in flight get the grace period to finish and answer, then are
	 * cancelled (their commands killed). */
	while (s->inflight > 0 && grace_ms > 0 && !s->hurry &&
	       pthread_cond_timedwait(&s->cond, &s->lock, &deadline) == 0)
		;
	s->closing = true;
	for (struct sg_call *c = s->calls; c; c = c->next)
		sg_call_cancel(c);
	/* A call still running SG_CANCEL_WAIT_MS after its cancellation is
	 * stuck in its backend (one that does not poll the cancel fd, or does
	 * not answer): it is abandoned, and keeps its references to s. */
	deadline = after_ms(SG_CANCEL_WAIT_MS);
	while (s->inflight > 0 && pthread_cond_timedwait(&s->cond, &s->lock, &deadline) == 0)
		;
	left = s->inflight;
	pthread_mutex_unlock(&s->lock);
	if (left > 0) {
		atomic_fetch_add(&abandoned, left);
		SG_WARN("session %s: %d call(s) still running %d ms after their cancellation: abandoned",
			s->hash, left, SG_CANCEL_WAIT_MS);
	}
	if (end_hook)
		end_hook(s);
	return left;
}

void sg_session_hurry(struct sg_session *s)
{
	pthread_mutex_lock(&s->lock);
	s->hurry = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

void sg_session_send(struct sg_session *s, struct sg_call *call, json_t *msg, bool final)
{
	size_t len;
	char *data;

	if (s->ops->send_json) {
		s->ops->send_json(s->ctx, call, msg, final);
		json_decref(msg);
		return;
	}
	data = sg_rpc_dump_with(msg, call ? &call->held : NULL, &len);
	s->ops->send(s->ctx, call, data, len, final);
	/* Freed after the send: the message is on its way meanwhile. */
	free(data);
	json_decref(msg);
}

void sg_session_notify(struct sg_session *s, struct sg_call *call, const char *method,
		       json_t *params)
{
	sg_session_send(s, call, sg_rpc_notification(method, params), false);
}

int sg_session_log_level(const struct sg_session *s)
{
	return atomic_load(&((struct sg_session *)s)->log_level);
}

void sg_session_log(struct sg_session *s, struct sg_call *call, enum sg_log_level level,
		    const char *logger, const char *text)
{
	bool replaced;
	char *clean;

	if ((int)level < sg_session_log_level(s))
		return;
	clean = sg_utf8_sanitize(text, strlen(text), &replaced);
	sg_session_notify(s, call, "notifications/message",
			  json_pack("{s:s, s:s, s:s}", "level", sg_log_level_name(level),
				    "logger", logger, "data", clean));
	free(clean);
}

void sg_session_call_add(struct sg_session *s, struct sg_call *c)
{
	pthread_mutex_lock(&s->lock);
	c->next = s->calls;
	s->calls = c;
	s->inflight++;
	s->refs++;
	if (s->closing)
		sg_call_cancel(c);
	pthread_mutex_unlock(&s->lock);
}

void sg_session_call_remove(struct sg_session *s, struct sg_call *c)
{
	pthread_mutex_lock(&s->lock);
	for (struct sg_call **pp = &s->calls; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	s->inflight--;
	s->last_active_ms = sg_now_ms();
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	sg_session_unref(s);
}

bool sg_session_cancel(struct sg_session *s, json_t *id)
{
	bool found = false;

	pthread_mutex_lock(&s->lock);
	for (struct sg_call *c = s->calls; c; c = c->next) {
		if (json_equal(c->id, id)) {
			sg_call_cancel(c);
			found = true;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return found;
}

bool sg_session_default_get(struct sg_session *s, char *out)
{
	bool set;

	pthread_mutex_lock(&s->lock);
	set = s->default_id[0] != '\0';
	memcpy(out, s->default_id, SG_ID_MAX);
	pthread_mutex_unlock(&s->lock);
	return set;
}

void sg_session_default_set(struct sg_session *s, const char *id)
{
	pthread_mutex_lock(&s->lock);
	snprintf(s->default_id, sizeof(s->default_id), "%s", id);
	pthread_mutex_unlock(&s->lock);
}

void sg_session_default_clear(struct sg_session *s, const char *id)
{
	pthread_mutex_lock(&s->lock);
	if (strcmp(s->default_id, id) == 0)
		s->default_id[0] = '\0';
	pthread_mutex_unlock(&s->lock);
}

/* ---- the host API entries of a call: what goes to its client ------------ */

void sg_call_progress(struct sg_call *c, double progress, double total, const char *message)
{
	json_t *params;

	if (!c || !c->progress_token || atomic_load(&c->done))
		return;
	pthread_mutex_lock(&c->lock);
	/* MCP basic/utilities/progress: progress MUST increase. */
	if (progress <= c->last_progress) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	c->last_progress = progress;
	pthread_mutex_unlock(&c->lock);
	/* a copy: the notification may be freed on the transport's thread
	 * while the call drops its token on this one (call.c) */
	params = json_pack("{s:o, s:f}", "progressToken", json_deep_copy(c->progress_token),
			   "progress", progress);
	if (total > 0)
		json_object_set_new(params, "total", json_real(total));
	if (message)
		json_object_set_new(params, "message", json_string(message));
	sg_session_notify(c->session, c, "notifications/progress", params);
}

void sg_call_notify(struct sg_call *c, enum sg_log_level level, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (!c || atomic_load(&c->done) || (int)level < sg_session_log_level(c->session))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	sg_session_log(c->session, c, level, "sandgate", msg);
}

const char *sg_call_credential(const struct sg_call *c)
{
	return c && c->session ? c->session->cred_hash : "";
}
