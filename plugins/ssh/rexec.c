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
#include "plugins/runner/rexec_common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RX_START_MS 30000 /* a stream's STARTED */

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

/* An EXIT that says the command never started, as plain exec would have it:
 * a cwd that cannot be entered is an error, a program that cannot be run
 * is exit 126/127 with the shell's kind of message. */
static int rx_start_fail(struct ssh_pool *p, const struct ssh_run *r, const struct rn_exit *ex,
			 struct sg_exec_result *res, struct sg_err *err)
{
	const struct sg_host_api *host = p->ctx->host;
	const char *what = r->command ? "/bin/sh" : r->argv[0];
	char line[SSH_PATH_MAX + 64];
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
			       .grace_ms = RNX_GRACE_MS, .cap = r->cap };
	const char *sh[4];
	struct rnx_sink sink = { .host = host, .res = res,
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
	st = rnx_wait(host, q, r->timeout_ms, call, &sink, &ex, why, sizeof(why), &cancelled);
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
		rc = rnx_done(host, q, &ex, cancelled, res, err);
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
	struct rn_exit ex;

	switch (rnx_stream_started(rs->q, rnx_now_ms() + RX_START_MS, &ex, why, size)) {
	case RNX_STARTED:
		return 0;
	case RNX_REFUSED:
		if (ex.spawn_stage == RN_STAGE_CHDIR)
			return host->errf(err, SG_E_NOTFOUND, "ssh stream: working directory '%s' is not usable: %s",
					  r->cwd, strerror(ex.spawn_errno));
		return host->errf(err, SG_E_BACKEND, "ssh stream: the runner could not start %s: %s",
				  r->command ? "/bin/sh" : r->argv[0], strerror(ex.spawn_errno));
	case RNX_BROKEN:
		return RX_AGAIN;
	case RNX_LATE:
		break;
	}
	return host->errf(err, SG_E_TIMEOUT, "ssh stream: the runner did not start the stream in time");
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
	struct rn_spawn sp = { .env = r->env, .cwd = r->cwd, .grace_ms = RNX_GRACE_MS,
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
	return rnx_stream_write(rs->pool->ctx->host, rs->q, p, n, "ssh", SG_E_UNAVAILABLE, err);
}

ssize_t ssh_rstream_read(struct ssh_rstream *rs, void *p, size_t n, int timeout_ms, int *channel,
			 struct sg_err *err)
{
	return rnx_stream_read(rs->pool->ctx->host, rs->q, p, n, timeout_ms, channel, "ssh",
			       SG_E_UNAVAILABLE, err);
}

void ssh_rstream_close(struct ssh_rstream *rs, int *exit_code)
{
	int code;

	if (exit_code)
		*exit_code = -1;
	if (!rs)
		return;
	code = rnx_stream_close(rs->q);
	if (exit_code)
		*exit_code = code;
	rx_stream_free(rs);
}
