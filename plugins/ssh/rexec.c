/*
 * Commands and streams through a target's runner (runner.c starts it).
 *
 * A one-shot command is one SPAWN on the shared runner connection; the
 * runner does the process group, the timeout (TERM, then KILL after the
 * grace) and the output cap.  This file waits on the request, hands a
 * cancellation on as a KILL frame and turns the EXIT into an
 * sg_exec_result shaped like plain exec's (exec.c): a missing cwd is
 * SG_E_NOTFOUND, a program that is not there exits 127.
 *
 * When the runner connection breaks under a request, a command that never
 * started is tried once more on a fresh runner; one that did start has its
 * process group killed by a plain exec (a runner killed outright cannot do
 * it) and its call fails: running it twice could do harm.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/ssh/ssh.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RX_GRACE_MS      1000   /* TERM -> KILL, as the runner counts it */
#define RX_SLACK_MS      5000   /* beyond timeout + grace: the runner is stuck */
#define RX_START_MS      30000  /* a stream's STARTED */
#define RX_CLOSE_WAIT_MS 1000   /* a stream's process may end by itself */

/* Milliseconds until deadline for a wait: -1 (none) stays -1, a passed
 * deadline is 0, never negative (poll would wait forever). */
static int rx_left(int64_t deadline)
{
	int64_t left;

	if (deadline < 0)
		return -1;
	left = deadline - ssh_now_ms();
	return left <= 0 ? 0 : left > 60000 ? 60000 : (int)left;
}

/* ---- one-shot commands ---------------------------------------------------------------- */

/* A command goes as the argv `/bin/sh -c <command>`, not as the runner's
 * COMMAND (`sh -c`): $0 is then "/bin/sh", as on the plain path.  The
 * runner's --fault hook looks at COMMAND only, so under that test hook a
 * command goes as COMMAND. */
static void rx_argv(const struct ssh_pool *p, const struct ssh_run *r, const char *sh[4],
		    struct rn_spawn *sp)
{
	sh[0] = "/bin/sh";
	sh[1] = "-c";
	sh[2] = r->command;
	sh[3] = NULL;
	sp->command = p->ctx->runner_faults ? r->command : NULL;
	sp->argv = r->command ? sh : r->argv;
}

/* Where one command's output goes. */
struct rx_sink {
	const struct sg_host_api *host;
	struct sg_exec_result *res;
	size_t cap;
	bool oom;
};

static void rx_keep(struct rx_sink *k, struct sg_buf *b, bool *trunc, const void *p, size_t n)
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

/* An EXIT that says the command never started, as plain exec would have it:
 * a cwd that cannot be entered is an error, a program that cannot be run
 * is exit 126/127 with the shell's kind of message. */
static int rx_start_fail(struct ssh_pool *p, const struct ssh_run *r, const struct rn_exit *ex,
			 struct sg_exec_result *res, struct sg_err *err)
{
	const struct sg_host_api *host = p->ctx->host;
	const char *what = r->command ? "/bin/sh" : r->argv[0];
	char line[SG_PATH_MAX + 64];
	int n;

	if (ex->spawn_stage == RN_STAGE_CHDIR)
		return host->errf(err, SG_E_NOTFOUND, "ssh: working directory '%s' is not usable on %s: %s",
				  r->cwd, p->target.host, strerror(ex->spawn_errno));
	if (ex->spawn_stage != RN_STAGE_EXEC)
		return host->errf(err, SG_E_BACKEND, "ssh: the runner could not start %s on %s: %s",
				  what, p->target.host, strerror(ex->spawn_errno));
	n = snprintf(line, sizeof(line), "sh: %s: %s\n", what, strerror(ex->spawn_errno));
	if (n > 0 && host->buf_append(&res->err, line, strlen(line)) < 0)
		return host->errf(err, SG_E_NOMEM, "ssh: out of memory");
	res->exit_code = ex->code >= 0 ? ex->code : 127;
	return 0;
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
static enum rn_req_state rx_wait(struct ssh_pool *p, struct rn_req *q, const struct ssh_run *r,
				 const struct sg_call *call, struct rx_sink *sink,
				 struct rn_exit *ex, char *why, size_t size, bool *cancelled)
{
	const struct sg_host_api *host = p->ctx->host;
	int cfd = call ? host->cancel_fd(call) : -1, w;
	int64_t deadline = r->timeout_ms ? ssh_now_ms() + r->timeout_ms + RX_GRACE_MS + RX_SLACK_MS : -1;
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
			deadline = ssh_now_ms() + RX_GRACE_MS + RX_SLACK_MS;
			cfd = -1; /* stays readable: stop watching it */
		}
		if (deadline >= 0 && ssh_now_ms() >= deadline) {
			snprintf(why, size, "the runner did not report the end of the command in time");
			return RN_REQ_FAILED;
		}
		w = rn_req_wait(q, rx_left(deadline), cfd);
		if (w == 2)
			*cancelled = true;
	}
}

/* The runner connection broke while the command ran: its group is killed
 * the plain way, and the error says whether the SSH connection went too. */
static int rx_broken(struct ssh_pool *p, struct ssh_rlink *l, long pgid, bool cancelled,
		     const char *why, struct sg_err *err)
{
	const struct sg_host_api *host = p->ctx->host;
	char dropped[256];

	/* On a new connection (if the host is there); by then a server that
	 * went away has surely closed the old one too. */
	ssh_kill_group(p, pgid);
	if (ssh_rlink_dropped(l, dropped, sizeof(dropped)))
		return host->errf(err, cancelled ? SG_E_CANCELLED : SG_E_UNAVAILABLE,
				  "ssh: the connection to %s:%u dropped while the command ran (%s): it may have been interrupted; the next call reconnects",
				  p->target.host, p->target.port, dropped);
	return host->errf(err, cancelled ? SG_E_CANCELLED : SG_E_IO,
			  "ssh: the runner on %s ended while the command ran (%s): the command's process group was killed; the next call starts a new runner",
			  p->target.host, why);
}

/* One attempt.  Returns as ssh_rexec; *retry when the command surely never
 * started and may run on a fresh runner. */
static int rx_run(struct ssh_pool *p, struct ssh_rlink *l, const struct ssh_run *r,
		  const struct sg_call *call, struct sg_exec_result *res, struct sg_err *err,
		  bool *retry)
{
	const struct sg_host_api *host = p->ctx->host;
	struct rn_spawn sp = { .env = r->env, .cwd = r->cwd, .timeout_ms = r->timeout_ms,
			       .grace_ms = RX_GRACE_MS, .cap = r->cap };
	const char *sh[4];
	struct rx_sink sink = { .host = host, .res = res,
				.cap = r->cap ? r->cap : SG_OUTPUT_CAP_DEFAULT };
	struct rn_req *q = NULL;
	struct rn_exit ex;
	enum rn_req_state st;
	char why[256];
	long pgid = 0;
	bool cancelled;
	int rc;

	*retry = false;
	res->exit_code = -1;
	res->signal = 0;
	rx_argv(p, r, sh, &sp);
	rc = rn_spawn(l->rc, &sp, &q, why, sizeof(why));
	if (rc != 0) {
		*retry = rc < 0;
		return rc < 0 ? host->errf(err, SG_E_IO, "ssh: runner: %s", why) : 1;
	}
	st = rx_wait(p, q, r, call, &sink, &ex, why, sizeof(why), &cancelled);
	if (st == RN_REQ_FAILED && !rn_req_started(q, NULL, &pgid)) {
		*retry = !cancelled;
		rn_req_kill(q, 0);
		rc = host->errf(err, cancelled ? SG_E_CANCELLED : SG_E_IO, "ssh: %s", why);
	} else if (st == RN_REQ_FAILED) {
		rn_req_kill(q, 0);
		rc = rx_broken(p, l, pgid, cancelled, why, err);
	} else if (sink.oom) {
		rc = host->errf(err, SG_E_NOMEM, "ssh: out of memory");
	} else if (ex.spawn_errno) {
		rc = rx_start_fail(p, r, &ex, res, err);
	} else {
		rx_fill(res, &ex);
		if (rn_req_overflowed(q)) /* more than RN_QUEUE_MAX waited at once */
			res->out_truncated = res->err_truncated = true;
		rc = cancelled ? host->errf(err, SG_E_CANCELLED, "cancelled: the command's process group was killed") : 0;
	}
	rn_req_put(q);
	return rc;
}

int ssh_rexec(struct ssh_pool *p, const struct ssh_run *r, const struct sg_call *call,
	      struct sg_exec_result *res, struct sg_err *err)
{
	struct ssh_rlink l;
	bool retry = false;
	int rc = 1;

	for (int attempt = 0; attempt < 2; attempt++) {
		rc = ssh_runner_get(p, &l, err);
		if (rc != 0)
			return rc;
		rc = rx_run(p, &l, r, call, res, err, &retry);
		ssh_runner_put(&l);
		if (!retry)
			return rc;
	}
	return rc;
}

/* ---- streams -------------------------------------------------------------------------- */

struct ssh_rstream {
	struct ssh_pool *pool;        /* borrowed */
	struct ssh_rlink l;           /* references, dropped at close */
	struct rn_req *q;             /* the caller's reference on the request */
};

#define RX_AGAIN 2 /* the runner connection broke before the start */

/* Waits until the runner said STARTED (or refused).  Returns 0, -1 with err,
 * or RX_AGAIN when the connection broke before the start (why). */
static int rx_stream_started(struct ssh_rstream *rs, const struct ssh_run *r, char *why,
			     size_t size, struct sg_err *err)
{
	const struct sg_host_api *host = rs->pool->ctx->host;
	int64_t until = ssh_now_ms() + RX_START_MS;
	struct rn_exit ex;
	enum rn_req_state st;

	while (!rn_req_started(rs->q, NULL, NULL)) {
		st = rn_req_state(rs->q, &ex, why, size, NULL);
		if (st == RN_REQ_DONE && ex.spawn_stage == RN_STAGE_CHDIR)
			return host->errf(err, SG_E_NOTFOUND, "ssh stream: working directory '%s' is not usable: %s",
					  r->cwd, strerror(ex.spawn_errno));
		if (st == RN_REQ_DONE)
			return host->errf(err, SG_E_BACKEND, "ssh stream: the runner could not start %s: %s",
					  r->command ? "/bin/sh" : r->argv[0], strerror(ex.spawn_errno));
		if (st == RN_REQ_FAILED)
			return RX_AGAIN;
		if (ssh_now_ms() >= until)
			return host->errf(err, SG_E_TIMEOUT, "ssh stream: the runner did not start the stream in time");
		rn_req_wait(rs->q, 100, -1);
	}
	return 0;
}

static void rx_stream_free(struct ssh_rstream *rs)
{
	rn_req_put(rs->q);
	ssh_runner_put(&rs->l);
	free(rs);
}

/* One attempt at opening.  Returns 0, -1, 1 (no runner) or RX_AGAIN (why). */
static int rx_stream_try(struct ssh_pool *p, const struct ssh_run *r, int status_fd,
			 struct ssh_rstream **out, char *why, size_t size, struct sg_err *err)
{
	struct rn_spawn sp = { .env = r->env, .cwd = r->cwd, .grace_ms = RX_GRACE_MS,
			       .mode = RN_MODE_STDIN | RN_MODE_MERGE |
				       (status_fd >= 3 ? RN_MODE_STATUS : 0),
			       .status_fd = status_fd };
	struct ssh_rstream *rs = calloc(1, sizeof(*rs)); /* freed by ssh_rstream_close() */
	const char *sh[4];
	int rc;

	rx_argv(p, r, sh, &sp);
	if (!rs)
		return p->ctx->host->errf(err, SG_E_NOMEM, "ssh: out of memory");
	rs->pool = p;
	rc = ssh_runner_get(p, &rs->l, err);
	if (rc != 0) {
		free(rs);
		return rc;
	}
	rc = rn_spawn(rs->l.rc, &sp, &rs->q, why, size);
	if (rc < 0)
		rc = RX_AGAIN;
	else if (rc == 0)
		rc = rx_stream_started(rs, r, why, size, err);
	if (rc == 0) {
		*out = rs;
		return 0;
	}
	if (rs->q)
		rn_req_kill(rs->q, 0);
	rx_stream_free(rs);
	return rc;
}

int ssh_rstream_open(struct ssh_pool *p, const struct ssh_run *r, int status_fd,
		     struct ssh_rstream **out, struct sg_err *err)
{
	char why[256] = "";
	int rc = RX_AGAIN;

	*out = NULL;
	/* A connection that broke before the start: once more, on a new runner. */
	for (int attempt = 0; attempt < 2 && rc == RX_AGAIN; attempt++)
		rc = rx_stream_try(p, r, status_fd, out, why, sizeof(why), err);
	if (rc == RX_AGAIN)
		return p->ctx->host->errf(err, SG_E_UNAVAILABLE, "ssh stream: %s", why);
	return rc;
}

ssize_t ssh_rstream_write(struct ssh_rstream *rs, const void *p, size_t n, struct sg_err *err)
{
	const struct sg_host_api *host = rs->pool->ctx->host;

	if (rn_req_stdin(rs->q, p, n) == 0)
		return (ssize_t)n;
	if (rn_req_state(rs->q, NULL, NULL, 0, NULL) == RN_REQ_DONE)
		return host->errf(err, SG_E_GONE, "ssh stream: write: the process ended");
	return host->errf(err, SG_E_UNAVAILABLE, "ssh stream: write: the runner connection broke");
}

ssize_t ssh_rstream_read(struct ssh_rstream *rs, void *p, size_t n, int timeout_ms, int *channel,
			 struct sg_err *err)
{
	const struct sg_host_api *host = rs->pool->ctx->host;
	int64_t deadline = timeout_ms >= 0 ? ssh_now_ms() + timeout_ms : -1;
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
				*channel = chan == RN_R_STATUS ? SG_STREAM_STATUS : SG_STREAM_OUTPUT;
			return (ssize_t)got;
		}
		st = rn_req_state(rs->q, NULL, why, sizeof(why), &queued);
		if (st == RN_REQ_DONE && queued == 0)
			return 0;
		if (st == RN_REQ_FAILED && queued == 0)
			return host->errf(err, SG_E_UNAVAILABLE, "ssh stream: %s", why);
		if (queued > 0)
			continue;
		left = rx_left(deadline);
		if (left == 0)
			return host->errf(err, SG_E_TIMEOUT, "ssh stream: nothing to read within %d ms", timeout_ms);
		rn_req_wait(rs->q, left, -1);
	}
}

/* Waits up to ms for the process to end, dropping unread output; true
 * when it did. */
static bool rx_stream_ended(struct ssh_rstream *rs, int ms, struct rn_exit *ex)
{
	int64_t until = ssh_now_ms() + ms;
	char sink[4096];
	int chan;

	for (;;) {
		while (rn_req_take(rs->q, sink, sizeof(sink), &chan) > 0)
			;
		if (rn_req_state(rs->q, ex, NULL, 0, NULL) != RN_REQ_RUNNING)
			return true;
		if (ssh_now_ms() >= until)
			return false;
		rn_req_wait(rs->q, rx_left(until), -1);
	}
}

void ssh_rstream_close(struct ssh_rstream *rs, int *exit_code)
{
	struct rn_exit ex = { .code = -1 };

	if (exit_code)
		*exit_code = -1;
	if (!rs)
		return;
	rn_req_stdin_close(rs->q);
	if (!rx_stream_ended(rs, RX_CLOSE_WAIT_MS, &ex)) {
		rn_req_kill(rs->q, 0);
		rx_stream_ended(rs, RX_GRACE_MS + RX_SLACK_MS, &ex);
	}
	if (exit_code)
		*exit_code = ex.code >= 0 ? ex.code : ex.signal ? 128 + ex.signal : -1;
	rx_stream_free(rs);
}
