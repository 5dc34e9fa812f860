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
#include "plugins/runner/rexec_common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An EXIT that says the command never started, worded like docker's own
 * failures (a missing cwd is SG_E_NOTFOUND). */
static int rx_start_fail(struct docker_ctx *ctx, const char *cid,
			 const struct docker_run *r, const char *command,
			 const struct rn_exit *ex, struct sg_err *err)
{
	/* A stream of a command has no argv: it is /bin/sh too. */
	const char *what = command || !r->argv || !r->argv[0] ? "/bin/sh" : r->argv[0];

	if (ex->spawn_stage == RN_STAGE_CHDIR &&
	    (ex->spawn_errno == ENOENT || ex->spawn_errno == ENOTDIR))
		return ctx->host->errf(err, SG_E_NOTFOUND, "working directory %s does not "
				       "exist in container %s: create it or give "
				       "another cwd", r->cwd ? r->cwd : "?", cid);
	if (ex->spawn_stage == RN_STAGE_CHDIR)
		return ctx->host->errf(err, SG_E_PERM, "cannot enter the working "
				       "directory %s in container %s: %s",
				       r->cwd ? r->cwd : "?", cid, strerror(ex->spawn_errno));
	return ctx->host->errf(err, SG_E_BACKEND, "the runner could not start %s in "
			       "container %s: %s (exit %d)%s", what, cid,
			       strerror(ex->spawn_errno), ex->code,
			       ex->spawn_errno == ENOENT ? ": an image without it needs a named "
			       "machine made with docker_run's `shell`" : "");
}

/* One attempt.  Returns as docker_runner_exec; *retry when the command
 * surely never started and may run on a fresh runner. */
static int rx_run(struct docker_ctx *ctx, const struct sg_machine *m, struct rn_conn *c,
		  const struct docker_run *r, const char *command, struct sg_call *call,
		  struct sg_exec_result *res, struct sg_err *err, bool *retry)
{
	struct rn_spawn sp = { .command = command, .argv = command ? NULL : r->argv,
			       .env = r->env, .cwd = r->cwd, .timeout_ms = r->timeout_ms,
			       .grace_ms = RNX_GRACE_MS, .cap = r->cap };
	struct rnx_sink sink = { .host = ctx->host, .res = res,
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
	st = rnx_wait(ctx->host, q, r->timeout_ms, call, &sink, &ex, why, sizeof(why),
		      &cancelled);
	if (st == RN_REQ_FAILED && !rn_req_started(q, NULL, &pgid)) {
		*retry = !cancelled;
		rn_req_kill(q, 0);
		rc = ctx->host->errf(err, cancelled ? SG_E_CANCELLED : SG_E_IO, "%s", why);
	} else if (st == RN_REQ_FAILED) {
		rn_req_kill(q, 0);
		/* The runner may be dead: end the group the way plain exec does. */
		docker_kill_group(ctx, m->id, pgid, NULL); /* the runner runs only with /bin/sh */
		rc = ctx->host->errf(err, cancelled ? SG_E_CANCELLED : SG_E_IO,
				     "%s (the command's process group was killed)", why);
	} else if (sink.oom) {
		rc = ctx->host->errf(err, SG_E_NOMEM, "docker: out of memory");
	} else if (ex.spawn_errno) {
		rc = rx_start_fail(ctx, m->id, r, command, &ex, err);
	} else {
		rc = rnx_done(ctx->host, q, &ex, cancelled, res, err);
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
	char cid[DOCKER_ID_MAX];
};

/* Waits until the runner said STARTED (or refused).  Returns 0, -1 with err,
 * or 1 when the connection broke before the start (try another runner). */
static int rx_stream_started(struct docker_rstream *rs, const struct docker_run *r,
			     struct sg_err *err)
{
	int64_t until = rnx_now_ms() + (int64_t)rs->ctx->api_timeout_s * 1000;
	struct rn_exit ex;
	char why[256];

	switch (rnx_stream_started(rs->q, until, &ex, why, sizeof(why))) {
	case RNX_STARTED:
		return 0;
	case RNX_REFUSED:
		return rx_start_fail(rs->ctx, rs->cid, r, NULL, &ex, err);
	case RNX_BROKEN:
		return 1;
	case RNX_LATE:
		break;
	}
	return rs->ctx->host->errf(err, SG_E_TIMEOUT, "the runner did not start the "
				   "stream in time");
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
			       .env = req->env, .cwd = cwd, .grace_ms = RNX_GRACE_MS,
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
	return rnx_stream_write(rs->ctx->host, rs->q, p, n, "docker", SG_E_IO, err);
}

ssize_t docker_rstream_read(struct docker_rstream *rs, void *p, size_t n,
			    int timeout_ms, int *channel, struct sg_err *err)
{
	return rnx_stream_read(rs->ctx->host, rs->q, p, n, timeout_ms, channel, "docker",
			       SG_E_IO, err);
}

int docker_rstream_close(struct docker_rstream *rs, int *exit_code)
{
	int code;

	if (exit_code)
		*exit_code = -1;
	if (!rs)
		return 0;
	code = rnx_stream_close(rs->q);
	if (exit_code)
		*exit_code = code;
	rx_stream_free(rs);
	return 0;
}
