/* The life of a runner at one place: see rclient.h. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/runner/rclient.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static long long rnc_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void rnc_site_init(struct rnc_site *s, const struct sg_host_api *host,
		   const struct rnc_ops *ops, void *ud, const char *where, bool on,
		   bool faults)
{
	memset(s, 0, sizeof(*s));
	s->host = host;
	s->ops = ops;
	s->ud = ud;
	snprintf(s->where, sizeof(s->where), "%s", where);
	s->faults = faults;
	s->start_ms_max = 30000;
	s->state = on ? RNC_IDLE : RNC_OFF;
	pthread_mutex_init(&s->lock, NULL);
}

void rnc_site_stop(struct rnc_site *s)
{
	struct rn_conn *c;

	pthread_mutex_lock(&s->lock);
	c = s->conn;
	s->conn = NULL;
	if (s->state == RNC_ACTIVE)
		s->state = RNC_IDLE;
	pthread_mutex_unlock(&s->lock);
	rn_conn_close(c); /* the runner sees EOF and exits */
}

static void overdue_clear_locked(struct rnc_site *s)
{
	rn_req_put(s->overdue);
	rn_conn_put(s->overdue_conn);
	s->overdue = NULL;
	s->overdue_conn = NULL;
}

void rnc_site_fini(struct rnc_site *s)
{
	rnc_site_stop(s);
	pthread_mutex_lock(&s->lock);
	if (s->overdue)
		overdue_clear_locked(s);
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_destroy(&s->lock);
}

/* Logs how the previous runner ended and lets it go; lock held. */
static void rnc_obituary(struct rnc_site *s)
{
	char why[200] = "", how[96] = "";

	rn_conn_alive(s->conn, why, sizeof(why));
	rn_conn_close(s->conn);
	s->conn = NULL;
	if (s->ops->ended)
		s->ops->ended(s->ud, how, sizeof(how));
	snprintf(s->why, sizeof(s->why), "%s", why);
	s->host->log(SG_LOG_WARNING, s->ops->tag, "runner %s ended (%s%s%s): starting a new one",
		     s->where, why, how[0] ? "; " : "", how);
	s->restarts++;
}

/* Lock held: a fresh runner (0), the plain way for this call (1: for good
 * when the runner cannot run here or was too slow to start RNC_SLOW_STARTS
 * times in a row, for this call when it was slow to start), or this call's
 * error (-1). */
static int rnc_restart_locked(struct rnc_site *s, struct sg_err *err)
{
	long long t0 = rnc_ms();
	struct sg_err e = { 0 };
	struct rn_hello h;

	if (s->conn)
		rnc_obituary(s);
	if (s->ops->start(s->ud, s->faults ? "--fault" : "--stdio", &s->conn, s->path,
			  sizeof(s->path), &e) < 0) {
		s->conn = NULL;
		if (e.code == SG_E_TIMEOUT && s->ops->plain && ++s->slow_starts < RNC_SLOW_STARTS) {
			/* A slow machine, not one where it cannot run: this call
			 * goes the plain way, the next tries the runner again. */
			s->state = RNC_IDLE;
			snprintf(s->why, sizeof(s->why), "did not start in time: %s", e.msg);
			s->host->log(SG_LOG_WARNING, s->ops->tag, "the runner did not start %s in "
				     "time, so this command uses %s; the next one tries again: %s",
				     s->where, s->ops->plain, e.msg);
			return 1;
		}
		if (e.code == SG_E_TIMEOUT && s->ops->plain) {
			/* as slow every time: not worth each call's wait */
			s->state = RNC_FALLBACK;
			snprintf(s->why, sizeof(s->why), "did not start in time %d times in a row: %s",
				 RNC_SLOW_STARTS, e.msg);
			s->host->log(SG_LOG_WARNING, s->ops->tag, "the runner %s %s, so its commands "
				     "use %s (slower)", s->where, s->why, s->ops->plain);
			return 1;
		}
		if (e.code != SG_E_TIMEOUT)
			s->slow_starts = 0; /* in a row only */
		if (e.code != SG_E_NOTSUP || !s->ops->plain) {
			if (err)
				*err = e;
			return -1;
		}
		s->state = RNC_FALLBACK;
		snprintf(s->why, sizeof(s->why), "%s", e.msg);
		s->host->log(SG_LOG_WARNING, s->ops->tag, "the runner cannot run %s, so its "
			     "commands use %s (slower): %s", s->where, s->ops->plain, e.msg);
		return 1;
	}
	s->state = RNC_ACTIVE;
	s->slow_starts = 0;
	s->why[0] = '\0';
	s->start_ms = rnc_ms() - t0;
	rn_conn_hello(s->conn, &h);
	s->host->log(SG_LOG_INFO, s->ops->tag, "runner %s %s: pid %ld, build %s, started in "
		     "%lld ms%s", s->path, s->where, h.pid, h.build_id, s->start_ms,
		     s->restarts ? " (restarted)" : "");
	return 0;
}

void rnc_site_overdue(struct rnc_site *s, struct rn_conn *c, struct rn_req *q, unsigned after_ms)
{
	pthread_mutex_lock(&s->lock);
	if (!s->overdue) {
		rn_conn_ref(c);
		rn_req_ref(q);
		s->overdue_conn = c;
		s->overdue = q;
		s->overdue_by = rnc_ms() + after_ms;
	}
	pthread_mutex_unlock(&s->lock);
}

/* See rnc_site_overdue(). */
static void rnc_site_check_overdue(struct rnc_site *s)
{
	long pgid = 0;

	pthread_mutex_lock(&s->lock);
	if (!s->overdue ||
	    (rn_req_state(s->overdue, NULL, NULL, 0, NULL) == RN_REQ_RUNNING && rnc_ms() < s->overdue_by)) {
		pthread_mutex_unlock(&s->lock);
		return;
	}
	if (rn_req_state(s->overdue, NULL, NULL, 0, NULL) == RN_REQ_RUNNING) {
		/* No EXIT long after the runner's own timer: it is stuck.  Its
		 * command's group is killed only while that runner is the
		 * site's: a later runner's groups may reuse the number.  (Not
		 * asked with a PING first: under this lock, a PING's write can
		 * wait forever behind a write the frozen runner never reads.) */
		if (s->conn == s->overdue_conn) {
			char how[96] = "";

			rn_req_started(s->overdue, NULL, &pgid);
			rn_conn_close(s->conn); /* fails what it still holds */
			s->conn = NULL;
			if (s->ops->ended)
				s->ops->ended(s->ud, how, sizeof(how));
			snprintf(s->why, sizeof(s->why), "stuck: no end of a timed-out command "
				 "%d ms after its timeout", RNC_GRACE_MS + RNC_SLACK_MS);
			s->host->log(SG_LOG_WARNING, s->ops->tag, "runner %s %s%s%s: starting a "
				     "new one", s->where, s->why, how[0] ? "; " : "", how);
			s->restarts++;
		}
	}
	overdue_clear_locked(s);
	pthread_mutex_unlock(&s->lock);
	if (pgid > 1)
		s->ops->kill_group(s->ud, pgid);
}

void rnc_site_drop(struct rnc_site *s, struct rn_conn *c)
{
	pthread_mutex_lock(&s->lock);
	if (s->conn == c && !rn_conn_alive(c, NULL, 0))
		rnc_obituary(s);
	pthread_mutex_unlock(&s->lock);
}

void rnc_site_fallback(struct rnc_site *s, const char *why)
{
	pthread_mutex_lock(&s->lock);
	if (s->state == RNC_IDLE) {
		s->state = RNC_FALLBACK;
		snprintf(s->why, sizeof(s->why), "%s", why);
	}
	pthread_mutex_unlock(&s->lock);
}

int rnc_site_peek(struct rnc_site *s, struct rn_conn **out)
{
	int rc = 1;

	*out = NULL;
	pthread_mutex_lock(&s->lock);
	if (s->state == RNC_ACTIVE && s->conn && rn_conn_alive(s->conn, NULL, 0)) {
		rn_conn_ref(s->conn);
		*out = s->conn;
		rc = 0;
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

unsigned rnc_site_restarts(struct rnc_site *s)
{
	unsigned n;

	pthread_mutex_lock(&s->lock);
	n = s->restarts;
	pthread_mutex_unlock(&s->lock);
	return n;
}

int rnc_site_get(struct rnc_site *s, struct rn_conn **out, struct sg_err *err)
{
	int rc = 1;

	*out = NULL;
	rnc_site_check_overdue(s);
	pthread_mutex_lock(&s->lock);
	if (s->state == RNC_FALLBACK || s->state == RNC_OFF)
		goto out;
	if (!s->conn || !rn_conn_alive(s->conn, NULL, 0)) {
		rc = rnc_restart_locked(s, err);
		if (rc != 0)
			goto out;
	}
	rn_conn_ref(s->conn);
	*out = s->conn;
	rc = 0;
out:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static const char *rnc_state_name(enum rnc_state st)
{
	switch (st) {
	case RNC_ACTIVE:
		return "active";
	case RNC_FALLBACK:
		return "fallback";
	case RNC_OFF:
		return "off";
	default:
		return "not started";
	}
}

json_t *rnc_site_status(struct rnc_site *s)
{
	struct rn_hello h = { 0 };
	json_t *o;
	bool alive;

	pthread_mutex_lock(&s->lock);
	alive = s->conn && rn_conn_alive(s->conn, NULL, 0);
	if (alive)
		rn_conn_hello(s->conn, &h);
	o = json_pack("{s:s, s:b, s:s, s:s, s:I, s:I}",
		      "runner", rnc_state_name(s->state),
		      "connected", alive,
		      "path", s->path,
		      "reason", s->why,
		      "restarts", (json_int_t)s->restarts,
		      "start_ms", (json_int_t)s->start_ms);
	if (o)
		json_object_set_new(o, "file_ops", json_integer((json_int_t)s->file_ops));
	if (o && alive) {
		json_object_set_new(o, "pid", json_integer(h.pid));
		json_object_set_new(o, "build_id", json_string(h.build_id));
		json_object_set_new(o, "arch", json_string(h.arch));
	}
	pthread_mutex_unlock(&s->lock);
	return o;
}
