/*
 * Commands and streams through a site's runner: see rclient.h.
 *
 * A one-shot command is one SPAWN on the site's shared connection; the
 * runner does the process group, the timeout (TERM, then KILL after the
 * grace) and the output cap, and this file waits on the request, hands a
 * cancellation on as a KILL frame, and turns the EXIT into an
 * sg_exec_result.  Many calls run at once on one connection: the client's
 * reader thread files each frame with its request.
 *
 * When the connection breaks under a request, a command that never started
 * is tried once more on a fresh runner (RNC_E_RETRY); one that did start had
 * its process group killed the plugin's way (a runner killed outright cannot
 * do it) and its call fails: running it twice could do harm.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/runner/rclient.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t rnc_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Milliseconds until deadline for a wait: -1 (none) stays -1, a passed
 * deadline is 0, never negative (poll would wait forever). */
static int rnc_left(int64_t deadline)
{
	int64_t left;

	if (deadline < 0)
		return -1;
	left = deadline - rnc_now_ms();
	return left <= 0 ? 0 : left > 60000 ? 60000 : (int)left;
}

/* The SPAWN of c: a command goes as the argv `/bin/sh -c <command>` ($0 is
 * then "/bin/sh", as on the plugins' plain paths), except under the test
 * hook, whose --fault switch looks at COMMAND only. */
static void rnc_spawn_of(const struct rnc_site *s, const struct rnc_cmd *c, const char *sh[4],
			 struct rn_spawn *sp)
{
	sh[0] = "/bin/sh";
	sh[1] = "-c";
	sh[2] = c->command;
	sh[3] = NULL;
	sp->command = s->faults ? c->command : NULL;
	sp->argv = c->command ? sh : c->argv;
	sp->env = c->env;
	sp->cwd = c->cwd;
	sp->grace_ms = RNC_GRACE_MS;
}

/* An EXIT that says the command never started, as a shell would have it: a
 * cwd that cannot be entered is an error, a program that cannot be run is
 * exit 126/127 with the shell's kind of message on stderr. */
static int rnc_start_fail(struct rnc_site *s, const struct rnc_cmd *c, const struct rn_exit *ex,
			  struct sg_exec_result *res, struct sg_err *err)
{
	const struct sg_host_api *host = s->host;
	/* A stream of a shell has no argv: it is /bin/sh too. */
	bool sh = c->command || !c->argv || !c->argv[0];
	const char *what = sh ? "/bin/sh" : c->argv[0];
	const char *cwd = c->cwd ? c->cwd : "(the runner's)";
	const char *hint = sh && ex->spawn_errno == ENOENT ? s->ops->no_sh : NULL;
	char line[1200];

	if (ex->spawn_stage == RN_STAGE_CHDIR && (ex->spawn_errno == ENOENT ||
						  ex->spawn_errno == ENOTDIR))
		return host->errf(err, SG_E_NOTFOUND, "%s: working directory %s does not exist %s: "
				  "create it or give another cwd", s->ops->tag, cwd, s->where);
	if (ex->spawn_stage == RN_STAGE_CHDIR)
		return host->errf(err, SG_E_PERM, "%s: cannot enter the working directory %s %s: %s",
				  s->ops->tag, cwd, s->where, strerror(ex->spawn_errno));
	if (ex->spawn_stage != RN_STAGE_EXEC || !res)
		return host->errf(err, SG_E_BACKEND, "%s: the runner could not start %s %s: %s%s%s",
				  s->ops->tag, what, s->where, strerror(ex->spawn_errno),
				  hint ? ": " : "", hint ? hint : "");
	snprintf(line, sizeof(line), "sh: %.1000s: %s\n", what, strerror(ex->spawn_errno));
	if (host->buf_append(&res->err, line, strlen(line)) < 0)
		return host->errf(err, SG_E_NOMEM, "%s: out of memory", s->ops->tag);
	res->exit_code = ex->code >= 0 ? ex->code : 127;
	return 0;
}

/* A request that does not fit in a frame: the plugin's plain path takes it
 * (1), or, where there is none, it is too big. */
static int rnc_unfit(struct rnc_site *s, const char *why, struct sg_err *err)
{
	if (s->ops->plain)
		return 1;
	return s->host->errf(err, SG_E_TOOBIG, "%s: %s: shorten the command or pass data "
			     "through a file", s->ops->tag, why);
}

/* ---- one-shot commands ----------------------------------------------------------- */

/* Where one command's output goes: at most cap bytes of each of stdout and
 * stderr in res (the rest flagged truncated); oom says an append failed. */
struct rnc_sink {
	const struct sg_host_api *host;
	struct sg_exec_result *res;
	size_t cap;
	bool oom;
};

static void rnc_keep(struct rnc_sink *k, struct sg_buf *b, bool *trunc, const void *p, size_t n)
{
	size_t room = b->len < k->cap ? k->cap - b->len : 0;

	if (n > room) {
		*trunc = true; /* the runner caps too; this guards against a bad one */
		n = room;
	}
	if (n > 0 && k->host->buf_append(b, p, n) < 0)
		k->oom = true;
}

static void rnc_on_data(int chan, const void *p, size_t n, void *ud)
{
	struct rnc_sink *k = ud;

	if (chan == RN_R_STDOUT)
		rnc_keep(k, &k->res->out, &k->res->out_truncated, p, n);
	else if (chan == RN_R_STDERR)
		rnc_keep(k, &k->res->err, &k->res->err_truncated, p, n);
}

/* Waits for the end of q (timeout_ms 0: none), killing it on cancellation.
 * Returns the final state; *cancelled says whether the call was cancelled.
 * A runner that does not report the end in time is RN_REQ_FAILED with why.
 * RN_REQ_RUNNING: the command's timeout passed by RNC_ANSWER_MS and the
 * runner has not said it ended (a process deaf to TERM, a runner or a
 * transport that froze): the caller is answered now, the runner ends the
 * group on its own (TERM, then KILL) after the reply. */
static enum rn_req_state rnc_wait(const struct sg_host_api *host, struct rn_req *q,
				  unsigned timeout_ms, const struct sg_call *call,
				  struct rnc_sink *sink, struct rn_exit *ex, char *why,
				  size_t size, bool *cancelled)
{
	int cfd = call ? host->cancel_fd(call) : -1, w;
	int64_t deadline = timeout_ms ? rnc_now_ms() + timeout_ms + RNC_ANSWER_MS : -1;
	enum rn_req_state st;
	bool killed = false;

	*cancelled = false;
	for (;;) {
		st = rn_req_drain(q, rnc_on_data, sink, ex, why, size);
		if (st != RN_REQ_RUNNING)
			return st;
		if (!killed && (*cancelled || (call && host->cancelled(call)))) {
			*cancelled = true;
			killed = true;
			rn_req_kill(q, 0);
			deadline = rnc_now_ms() + RNC_GRACE_MS + RNC_SLACK_MS;
			cfd = -1; /* stays readable: stop watching it */
		}
		if (!killed && deadline >= 0 && rnc_now_ms() >= deadline)
			return RN_REQ_RUNNING;
		if (deadline >= 0 && rnc_now_ms() >= deadline) {
			snprintf(why, size, "the runner did not report the end of the "
				 "command in time");
			return RN_REQ_FAILED;
		}
		w = rn_req_wait(q, rnc_left(deadline), cfd);
		if (w == 2)
			*cancelled = true;
	}
}

/* The command ran and ended (ex): fills res. */
static int rnc_done(struct rnc_site *s, struct rn_req *q, const struct rn_exit *ex,
		    bool cancelled, struct sg_exec_result *res, struct sg_err *err)
{
	res->exit_code = ex->signal ? -1 : ex->code;
	res->signal = ex->signal;
	res->timed_out = (ex->flags & RN_EXIT_TIMED_OUT) != 0;
	res->out_truncated |= (ex->flags & RN_EXIT_OUT_TRUNC) != 0;
	res->err_truncated |= (ex->flags & RN_EXIT_ERR_TRUNC) != 0;
	if (rn_req_overflowed(q)) /* more than RN_QUEUE_MAX waited at once */
		res->out_truncated = res->err_truncated = true;
	return cancelled ? s->host->errf(err, SG_E_CANCELLED, "cancelled: the command's "
					 "process group was killed") : 0;
}

/* The connection broke while the command ran: its group is killed the
 * plugin's way, the dead connection is let go (its runner, if alive, ends
 * what it still runs), and the error says whether the site went too. */
static int rnc_broken(struct rnc_site *s, struct rn_conn *rc, long pgid, bool cancelled,
		      const char *why, struct sg_err *err)
{
	bool lost;

	if (pgid > 1)
		s->ops->kill_group(s->ud, pgid);
	lost = s->ops->lost && s->ops->lost(s->ud, err);
	rnc_site_drop(s, rc);
	if (lost) {
		if (cancelled && err)
			err->code = SG_E_CANCELLED;
		return -1;
	}
	return s->host->errf(err, cancelled ? SG_E_CANCELLED : SG_E_IO,
			     "%s: the runner %s ended while the command ran (%s): the command's "
			     "process group was killed; the next call starts a new runner",
			     s->ops->tag, s->where, why);
}

/* One attempt on connection rc.  Returns as rnc_exec; err->code RNC_E_RETRY
 * when the command surely never started. */
static int rnc_run(struct rnc_site *s, struct rn_conn *rc, const struct rnc_cmd *c,
		   const struct sg_call *call, struct sg_exec_result *res, struct sg_err *err)
{
	const struct sg_host_api *host = s->host;
	struct rn_spawn sp = { .timeout_ms = c->timeout_ms, .cap = c->cap,
			       .quiet_start = true }; /* rnc_wait wants output and the end */
	struct rnc_sink sink = { .host = host, .res = res,
				 .cap = c->cap ? c->cap : SG_OUTPUT_CAP_DEFAULT };
	const char *sh[4];
	struct rn_req *q = NULL;
	struct rn_exit ex;
	enum rn_req_state st;
	char why[256];
	long pgid = 0;
	bool cancelled;
	int rc_;

	res->exit_code = -1;
	res->signal = 0;
	rnc_spawn_of(s, c, sh, &sp);
	rc_ = rn_spawn(rc, &sp, &q, why, sizeof(why));
	if (rc_ < 0)
		return host->errf(err, RNC_E_RETRY, "%s: runner: %s", s->ops->tag, why);
	if (rc_ > 0)
		return rnc_unfit(s, why, err);
	st = rnc_wait(host, q, c->timeout_ms, call, &sink, &ex, why, sizeof(why), &cancelled);
	if (st == RN_REQ_RUNNING) {
		/* Asks once more (the runner's own timer has fired already);
		 * the EXIT, when it comes, goes to a request nobody holds. */
		rn_req_kill(q, 0);
		if (!rn_req_started(q, NULL, NULL))
			rc_ = host->errf(err, SG_E_TIMEOUT, "%s: the runner %s did not start the "
					 "command within its timeout of %u ms", s->ops->tag,
					 s->where, c->timeout_ms);
		else if (sink.oom)
			rc_ = host->errf(err, SG_E_NOMEM, "%s: out of memory", s->ops->tag);
		else
			rc_ = 0;
		res->timed_out = rc_ == 0;
		/* Watched: no EXIT long after the runner's own timer means it
		 * is stuck, and the next call replaces it. */
		rnc_site_overdue(s, rc, q, RNC_GRACE_MS + RNC_SLACK_MS);
	} else if (st == RN_REQ_FAILED && !rn_req_started(q, NULL, &pgid)) {
		rn_req_kill(q, 0);
		rc_ = host->errf(err, cancelled ? SG_E_CANCELLED : RNC_E_RETRY, "%s: %s", s->ops->tag,
				 why);
	} else if (st == RN_REQ_FAILED) {
		rn_req_kill(q, 0);
		rc_ = rnc_broken(s, rc, pgid, cancelled, why, err);
	} else if (sink.oom) {
		rc_ = host->errf(err, SG_E_NOMEM, "%s: out of memory", s->ops->tag);
	} else if (ex.spawn_errno) {
		rc_ = rnc_start_fail(s, c, &ex, res, err);
	} else {
		rc_ = rnc_done(s, q, &ex, cancelled, res, err);
	}
	rn_req_put(q);
	return rc_;
}

/* After the last attempt: a retry that is left is an I/O failure. */
static int rnc_final(struct sg_err *err, int rc)
{
	if (rc < 0 && err && err->code == RNC_E_RETRY)
		err->code = SG_E_IO;
	return rc;
}

int rnc_exec(struct rnc_site *s, const struct rnc_cmd *c, const struct sg_call *call,
	     struct sg_exec_result *res, struct sg_err *err)
{
	struct sg_err e = { 0 };
	struct rn_conn *rc;
	int r = 1;

	for (int attempt = 0; attempt < 2; attempt++) {
		r = rnc_site_get(s, &rc, err);
		if (r != 0)
			return r;
		e.code = SG_E_OK;
		r = rnc_run(s, rc, c, call, res, &e);
		rn_conn_put(rc);
		if (r >= 0 || e.code != RNC_E_RETRY)
			break;
	}
	if (r < 0 && err)
		*err = e;
	return rnc_final(err, r);
}

/* ---- streams -------------------------------------------------------------------- */

struct rnc_stream {
	struct rnc_site *site;   /* borrowed: sites outlive their streams */
	struct rn_conn *c;       /* a reference */
	struct rn_req *q;        /* the caller's reference on the request */
};

/* Waits until the runner said STARTED for st (or refused). */
static int rnc_stream_started(struct rnc_stream *st, const struct rnc_cmd *c,
			      struct sg_err *err)
{
	struct rnc_site *s = st->site;
	int64_t until = rnc_now_ms() + s->start_ms_max;
	enum rn_req_state rs;
	struct rn_exit ex;
	char why[256];

	while (!rn_req_started(st->q, NULL, NULL)) {
		rs = rn_req_state(st->q, &ex, why, sizeof(why), NULL);
		if (rs == RN_REQ_DONE)
			return rnc_start_fail(s, c, &ex, NULL, err);
		if (rs == RN_REQ_FAILED)
			return s->host->errf(err, RNC_E_RETRY, "%s stream: %s", s->ops->tag, why);
		if (rnc_now_ms() >= until)
			return s->host->errf(err, SG_E_TIMEOUT, "%s stream: the runner did not "
					     "start the stream in time", s->ops->tag);
		rn_req_wait(st->q, 100, -1);
	}
	return 0;
}

static void rnc_stream_free(struct rnc_stream *st)
{
	rn_req_put(st->q);
	rn_conn_put(st->c);
	free(st);
}

/* One attempt at opening.  Returns as rnc_stream_open; err->code
 * RNC_E_RETRY when the connection broke before the start. */
static int rnc_stream_try(struct rnc_site *s, const struct rnc_cmd *c, int status_fd,
			  struct rnc_stream **out, struct sg_err *err)
{
	struct rn_spawn sp = { .mode = RN_MODE_STDIN | RN_MODE_MERGE |
				       (status_fd >= 3 ? RN_MODE_STATUS : 0),
			       .status_fd = status_fd };
	struct rnc_stream *st = calloc(1, sizeof(*st)); /* rnc_stream_close() */
	const char *sh[4];
	char why[256];
	int rc;

	if (!st)
		return s->host->errf(err, SG_E_NOMEM, "%s: out of memory", s->ops->tag);
	st->site = s;
	rc = rnc_site_get(s, &st->c, err);
	if (rc != 0) {
		free(st);
		return rc;
	}
	rnc_spawn_of(s, c, sh, &sp);
	rc = rn_spawn(st->c, &sp, &st->q, why, sizeof(why));
	if (rc < 0)
		rc = s->host->errf(err, RNC_E_RETRY, "%s stream: %s", s->ops->tag, why);
	else if (rc > 0)
		rc = rnc_unfit(s, why, err);
	else if (rc == 0)
		rc = rnc_stream_started(st, c, err);
	if (rc == 0) {
		*out = st;
		return 0;
	}
	if (st->q)
		rn_req_kill(st->q, 0);
	rnc_stream_free(st);
	return rc;
}

int rnc_stream_open(struct rnc_site *s, const struct rnc_cmd *c, int status_fd,
		    struct rnc_stream **out, struct sg_err *err)
{
	struct sg_err e = { 0 };
	int rc = 1;

	*out = NULL;
	/* A connection that broke before the start: once more, on a new runner. */
	for (int attempt = 0; attempt < 2; attempt++) {
		e.code = SG_E_OK;
		rc = rnc_stream_try(s, c, status_fd, out, &e);
		if (rc >= 0 || e.code != RNC_E_RETRY)
			break;
	}
	if (rc < 0 && e.code == RNC_E_RETRY)
		e.code = SG_E_UNAVAILABLE;
	if (rc < 0 && err)
		*err = e;
	return rc;
}

ssize_t rnc_stream_write(struct rnc_stream *st, const void *p, size_t n, struct sg_err *err)
{
	struct rnc_site *s = st->site;

	if (rn_req_stdin(st->q, p, n) == 0)
		return (ssize_t)n;
	if (rn_req_state(st->q, NULL, NULL, 0, NULL) == RN_REQ_DONE)
		return s->host->errf(err, SG_E_GONE, "%s stream: write: the process ended",
				     s->ops->tag);
	return s->host->errf(err, SG_E_UNAVAILABLE, "%s stream: write: the runner connection "
			     "broke", s->ops->tag);
}

ssize_t rnc_stream_read(struct rnc_stream *st, void *p, size_t n, int timeout_ms,
			int *channel, struct sg_err *err)
{
	struct rnc_site *s = st->site;
	int64_t deadline = timeout_ms >= 0 ? rnc_now_ms() + timeout_ms : -1;
	enum rn_req_state rs;
	char why[256];
	size_t got, queued;
	int chan, left;

	if (n == 0)
		return 0;
	for (;;) {
		got = rn_req_take(st->q, p, n, &chan);
		if (got > 0) {
			if (channel)
				*channel = chan == RN_R_STATUS ? SG_STREAM_STATUS :
					   SG_STREAM_OUTPUT;
			return (ssize_t)got;
		}
		rs = rn_req_state(st->q, NULL, why, sizeof(why), &queued);
		if (rs == RN_REQ_DONE && queued == 0)
			return 0;
		if (rs == RN_REQ_FAILED && queued == 0)
			return s->host->errf(err, SG_E_UNAVAILABLE, "%s stream: %s", s->ops->tag,
					     why);
		if (queued > 0)
			continue;
		left = rnc_left(deadline);
		if (left == 0)
			return s->host->errf(err, SG_E_TIMEOUT, "%s stream: nothing to read "
					     "within %d ms", s->ops->tag, timeout_ms);
		rn_req_wait(st->q, left, -1);
	}
}

/* Waits up to ms for the process to end, dropping unread output (the stream
 * is being closed); true when it did. */
static bool rnc_stream_ended(struct rn_req *q, int ms, struct rn_exit *ex)
{
	int64_t until = rnc_now_ms() + ms;
	char sink[4096];
	int chan;

	for (;;) {
		while (rn_req_take(q, sink, sizeof(sink), &chan) > 0)
			;
		if (rn_req_state(q, ex, NULL, 0, NULL) != RN_REQ_RUNNING)
			return true;
		if (rnc_now_ms() >= until)
			return false;
		rn_req_wait(q, rnc_left(until), -1);
	}
}

int rnc_stream_close(struct rnc_stream *st)
{
	struct rn_exit ex = { .code = -1 };

	if (!st)
		return -1;
	rn_req_stdin_close(st->q);
	if (!rnc_stream_ended(st->q, RNC_CLOSE_WAIT_MS, &ex)) {
		rn_req_kill(st->q, 0);
		rnc_stream_ended(st->q, RNC_GRACE_MS + RNC_SLACK_MS, &ex);
	}
	rnc_stream_free(st);
	return ex.code >= 0 ? ex.code : ex.signal ? 128 + ex.signal : -1;
}
