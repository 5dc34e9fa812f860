/*
 * Commands and streams through a container's runner (runner.c starts it).
 *
 * A one-shot command is one SPAWN on the shared connection; the runner does
 * the process group, the timeout (TERM, then KILL after the grace) and the
 * output cap, and this file waits on the request, hands cancellation on as a
 * KILL frame, and turns the EXIT into an sg_exec_result.  Many calls run at
 * once on one connection: the client's reader thread files each frame with
 * its request.
 *
 * When the connection breaks under a request, a command that never started
 * is tried once more on a fresh runner; one that did start had its process
 * group killed by a plain exec (a runner killed outright cannot do it) and
 * its call fails: running it twice could do harm.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/docker/docker.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RX_GRACE_MS      1000  /* TERM -> KILL, as the runner counts it */
#define RX_SLACK_MS      5000  /* beyond timeout + grace: the runner is stuck */
#define RX_CLOSE_WAIT_MS 1000  /* a stream's process may end by itself */

/* Milliseconds until deadline for a wait: -1 (none) stays -1, a deadline
 * just passed is 0, never a negative (poll would wait forever). */
static int rx_left(long long deadline)
{
	long long left;

	if (deadline < 0)
		return -1;
	left = deadline - docker_now_ms();
	return left <= 0 ? 0 : left > 60000 ? 60000 : (int)left;
}

/* Where one command's output goes. */
struct rx_sink {
	const struct sg_host_api *host;
	struct sg_exec_result *res;
	size_t cap;
	bool oom;
};

static void rx_keep(struct rx_sink *k, struct sg_buf *b, bool *trunc, const void *p,
		    size_t n)
{
	size_t room = b->len < k->cap ? k->cap - b->len : 0;

	if (n > room) {
		*trunc = true; /* the runner caps too; this guards against a bad one */
		n = room;
	}
	if (n > 0 && k->host->buf_append(b, p, n) < 0)
		k->oom = true;
}

static void rx_on_data(int chan, const void *p, size_t n, void *ud)
{
	struct rx_sink *k = ud;

	if (chan == RN_R_STDOUT)
		rx_keep(k, &k->res->out, &k->res->out_truncated, p, n);
	else if (chan == RN_R_STDERR)
		rx_keep(k, &k->res->err, &k->res->err_truncated, p, n);
}

/* An EXIT that says the command never started, worded like docker's own
 * failures (a missing cwd is SG_E_NOTFOUND). */
static int rx_start_fail(struct docker_ctx *ctx, const char *cid,
			 const struct docker_run *r, const char *command,
			 const struct rn_exit *ex, struct sg_err *err)
{
	const char *what = command ? "/bin/sh" : r->argv[0];

	if (ex->spawn_stage == RN_STAGE_CHDIR &&
	    (ex->spawn_errno == ENOENT || ex->spawn_errno == ENOTDIR))
		return ctx->host->errf(err, SG_E_NOTFOUND, "working directory %s does not "
				       "exist in container %.12s: create it or give "
				       "another cwd", r->cwd ? r->cwd : "?", cid);
	if (ex->spawn_stage == RN_STAGE_CHDIR)
		return ctx->host->errf(err, SG_E_PERM, "cannot enter the working "
				       "directory %s in container %.12s: %s",
				       r->cwd ? r->cwd : "?", cid, strerror(ex->spawn_errno));
	return ctx->host->errf(err, SG_E_BACKEND, "the runner could not start %s in "
			       "container %.12s: %s (exit %d)", what, cid,
			       strerror(ex->spawn_errno), ex->code);
}

static void rx_fill(struct sg_exec_result *res, const struct rn_exit *ex)
{
	res->exit_code = ex->signal ? -1 : ex->code;
	res->signal = ex->signal;
	res->timed_out = (ex->flags & RN_EXIT_TIMED_OUT) != 0;
	res->out_truncated |= (ex->flags & RN_EXIT_OUT_TRUNC) != 0;
	res->err_truncated |= (ex->flags & RN_EXIT_ERR_TRUNC) != 0;
}

/* Waits for the end of q, killing it on cancellation.  Returns the final
 * state; *cancelled says whether the call was cancelled. */
static enum rn_req_state rx_wait(struct docker_ctx *ctx, struct rn_req *q,
				 const struct docker_run *r, struct sg_call *call,
				 struct rx_sink *sink, struct rn_exit *ex, char *why,
				 size_t size, bool *cancelled)
{
	const struct sg_host_api *host = ctx->host;
	int cfd = call ? host->cancel_fd(call) : -1, w;
	long long deadline = r->timeout_ms ? docker_now_ms() + r->timeout_ms +
			     RX_GRACE_MS + RX_SLACK_MS : -1;
	enum rn_req_state st;
	bool killed = false;

	*cancelled = false;
	for (;;) {
		st = rn_req_drain(q, rx_on_data, sink, ex, why, size);
		if (st != RN_REQ_RUNNING)
			return st;
		if (!killed && (*cancelled || (call && host->cancelled(call)))) {
			*cancelled = true;
			killed = true;
			rn_req_kill(q, 0);
			deadline = docker_now_ms() + RX_GRACE_MS + RX_SLACK_MS;
			cfd = -1; /* stays readable: stop watching it */
		}
		if (deadline >= 0 && docker_now_ms() >= deadline) {
			snprintf(why, size, "the runner did not report the end of the "
				 "command in time");
			return RN_REQ_FAILED;
		}
		w = rn_req_wait(q, rx_left(deadline), cfd);
		if (w == 2)
			*cancelled = true;
	}
}

/* One attempt.  Returns as docker_runner_exec; *retry when the command
 * surely never started and may run on a fresh runner. */
static int rx_run(struct docker_ctx *ctx, const struct sg_machine *m, struct rn_conn *c,
		  const struct docker_run *r, const char *command, struct sg_call *call,
		  struct sg_exec_result *res, struct sg_err *err, bool *retry)
{
	struct rn_spawn sp = { .command = command, .argv = command ? NULL : r->argv,
			       .env = r->env, .cwd = r->cwd, .timeout_ms = r->timeout_ms,
			       .grace_ms = RX_GRACE_MS, .cap = r->cap };
	struct rx_sink sink = { .host = ctx->host, .res = res,
				.cap = r->cap ? r->cap : SG_OUTPUT_CAP_DEFAULT };
	struct rn_req *q = NULL;
	struct rn_exit ex;
	char why[256];
	long pgid = 0;
	bool cancelled;
	enum rn_req_state st;
	int rc;

	*retry = false;
	rc = rn_spawn(c, &sp, &q, why, sizeof(why));
	if (rc != 0) {
		*retry = rc < 0;
		return rc < 0 ? ctx->host->errf(err, SG_E_IO, "runner: %s", why) : 1;
	}
	st = rx_wait(ctx, q, r, call, &sink, &ex, why, sizeof(why), &cancelled);
	if (st == RN_REQ_FAILED && !rn_req_started(q, NULL, &pgid)) {
		*retry = !cancelled;
		rn_req_kill(q, 0);
		rc = ctx->host->errf(err, cancelled ? SG_E_CANCELLED : SG_E_IO, "%s", why);
	} else if (st == RN_REQ_FAILED) {
		rn_req_kill(q, 0);
		/* The runner may be dead: end the group the way plain exec does. */
		docker_kill_group(ctx, m->id, pgid);
		rc = ctx->host->errf(err, cancelled ? SG_E_CANCELLED : SG_E_IO,
				     "%s (the command's process group was killed)", why);
	} else if (sink.oom) {
		rc = ctx->host->errf(err, SG_E_NOMEM, "docker: out of memory");
	} else if (ex.spawn_errno) {
		rc = rx_start_fail(ctx, m->id, r, command, &ex, err);
	} else {
		rx_fill(res, &ex);
		if (rn_req_overflowed(q)) /* more than RN_QUEUE_MAX waited at once */
			res->out_truncated = res->err_truncated = true;
		rc = cancelled ? ctx->host->errf(err, SG_E_CANCELLED, "cancelled: the "
						 "command's process group was killed") : 0;
	}
	rn_req_put(q);
	return rc;
}

int docker_runner_exec(struct docker_ctx *ctx, const struct sg_machine *m,
		       const struct docker_run *r, const char *command,
		       struct sg_call *call, struct sg_exec_result *res,
		       struct sg_err *err)
{
	struct rn_conn *c;
	bool retry = false;
	int rc;

	for (int attempt = 0; attempt < 2; attempt++) {
		rc = docker_runner_get(ctx, m, &c, err);
		if (rc != 0)
			return rc;
		rc = rx_run(ctx, m, c, r, command, call, res, err, &retry);
		rn_conn_put(c);
		if (!retry)
			return rc;
	}
	return rc;
}

/* ---- streams --------------------------------------------------------------------- */

struct docker_rstream {
	struct docker_ctx *ctx;  /* borrowed */
	struct rn_conn *c;       /* a reference */
	struct rn_req *q;        /* the caller's reference on the request */
	char cid[SG_ID_MAX];
};

/* Waits until the runner said STARTED (or refused).  Returns 0, -1 with err,
 * or 1 when the connection broke before the start (try another runner). */
static int rx_stream_started(struct docker_rstream *rs, const struct docker_run *r,
			     struct sg_err *err)
{
	long long until = docker_now_ms() + (long long)rs->ctx->api_timeout_s * 1000;
	struct rn_exit ex;
	enum rn_req_state st;
	char why[256];

	while (!rn_req_started(rs->q, NULL, NULL)) {
		st = rn_req_state(rs->q, &ex, why, sizeof(why), NULL);
		if (st == RN_REQ_DONE)
			return rx_start_fail(rs->ctx, rs->cid, r, NULL, &ex, err);
		if (st == RN_REQ_FAILED)
			return 1;
		if (docker_now_ms() >= until)
			return rs->ctx->host->errf(err, SG_E_TIMEOUT, "the runner did not "
						   "start the stream in time");
		rn_req_wait(rs->q, 100, -1);
	}
	return 0;
}

static void rx_stream_free(struct docker_rstream *rs)
{
	rn_req_put(rs->q);
	rn_conn_put(rs->c);
	free(rs);
}

/* One attempt at opening.  Returns 0, -1, or 1 (no runner / try again). */
static int rx_stream_try(struct docker_ctx *ctx, const struct sg_machine *m,
			 const struct sg_exec_req *req, int status_fd,
			 struct docker_rstream **out, struct sg_err *err)
{
	const char *cwd = req->cwd ? req->cwd : m->workspace;
	struct docker_run r = { .argv = req->argv, .cwd = cwd };
	struct rn_spawn sp = { .command = req->command, .argv = req->argv,
			       .env = req->env, .cwd = cwd, .grace_ms = RX_GRACE_MS,
			       .mode = RN_MODE_STDIN | RN_MODE_MERGE |
				       (status_fd >= 3 ? RN_MODE_STATUS : 0),
			       .status_fd = status_fd };
	struct docker_rstream *rs = calloc(1, sizeof(*rs)); /* docker_rstream_close() */
	char why[256];
	int rc;

	if (!rs)
		return ctx->host->errf(err, SG_E_NOMEM, "docker: out of memory");
	rs->ctx = ctx;
	snprintf(rs->cid, sizeof(rs->cid), "%s", m->id);
	rc = docker_runner_get(ctx, m, &rs->c, err);
	if (rc != 0) {
		free(rs);
		return rc;
	}
	rc = rn_spawn(rs->c, &sp, &rs->q, why, sizeof(why));
	if (rc == 0)
		rc = rx_stream_started(rs, &r, err);
	if (rc == 0) {
		*out = rs;
		return 0;
	}
	if (rs->q)
		rn_req_kill(rs->q, 0);
	rx_stream_free(rs);
	return rc;
}

int docker_rstream_open(struct docker_ctx *ctx, const struct sg_machine *m,
			const struct sg_exec_req *req, int status_fd,
			struct docker_rstream **out, struct sg_err *err)
{
	int rc = 1;

	*out = NULL;
	/* A connection that broke before the start: once more, on a new runner. */
	for (int attempt = 0; attempt < 2 && rc == 1; attempt++)
		rc = rx_stream_try(ctx, m, req, status_fd, out, err);
	return rc;
}

ssize_t docker_rstream_write(struct docker_rstream *rs, const void *p, size_t n,
			     struct sg_err *err)
{
	if (rn_req_stdin(rs->q, p, n) == 0)
		return (ssize_t)n;
	if (rn_req_state(rs->q, NULL, NULL, 0, NULL) == RN_REQ_DONE)
		return rs->ctx->host->errf(err, SG_E_GONE, "docker stream: write: the "
					   "process ended");
	return rs->ctx->host->errf(err, SG_E_IO, "docker stream: write: the runner "
				   "connection broke");
}

ssize_t docker_rstream_read(struct docker_rstream *rs, void *p, size_t n,
			    int timeout_ms, int *channel, struct sg_err *err)
{
	long long deadline = timeout_ms >= 0 ? docker_now_ms() + timeout_ms : -1;
	enum rn_req_state st;
	char why[256];
	size_t got, queued;
	int chan, left;

	if (n == 0)
		return 0;
	for (;;) {
		got = rn_req_take(rs->q, p, n, &chan);
		if (got > 0) {
			if (channel)
				*channel = chan == RN_R_STATUS ? SG_STREAM_STATUS :
					   SG_STREAM_OUTPUT;
			return (ssize_t)got;
		}
		st = rn_req_state(rs->q, NULL, why, sizeof(why), &queued);
		if (st == RN_REQ_DONE && queued == 0)
			return 0;
		if (st == RN_REQ_FAILED && queued == 0)
			return rs->ctx->host->errf(err, SG_E_IO, "docker stream: %s", why);
		if (queued > 0)
			continue;
		left = rx_left(deadline);
		if (left == 0)
			return rs->ctx->host->errf(err, SG_E_TIMEOUT, "docker stream: nothing "
						   "to read within %d ms", timeout_ms);
		rn_req_wait(rs->q, left, -1);
	}
}

/* Waits up to ms for the process to end; true when it did. */
static bool rx_stream_ended(struct docker_rstream *rs, int ms, struct rn_exit *ex)
{
	long long until = docker_now_ms() + ms;
	char sink[4096];
	int chan;

	for (;;) {
		/* Unread output is dropped: the stream is being closed. */
		while (rn_req_take(rs->q, sink, sizeof(sink), &chan) > 0)
			;
		if (rn_req_state(rs->q, ex, NULL, 0, NULL) != RN_REQ_RUNNING)
			return true;
		if (docker_now_ms() >= until)
			return false;
		rn_req_wait(rs->q, rx_left(until), -1);
	}
}

int docker_rstream_close(struct docker_rstream *rs, int *exit_code)
{
	struct rn_exit ex = { .code = -1 };

	if (exit_code)
		*exit_code = -1;
	if (!rs)
		return 0;
	rn_req_stdin_close(rs->q);
	if (!rx_stream_ended(rs, RX_CLOSE_WAIT_MS, &ex)) {
		rn_req_kill(rs->q, 0);
		rx_stream_ended(rs, RX_GRACE_MS + RX_SLACK_MS, &ex);
	}
	if (exit_code)
		*exit_code = ex.code >= 0 ? ex.code : ex.signal ? 128 + ex.signal : -1;
	rx_stream_free(rs);
	return 0;
}
