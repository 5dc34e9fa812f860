/* Commands and streams through a runner, the part docker.so and ssh.so
 * share: see rexec_common.h. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/runner/rexec_common.h"

#include <stdio.h>
#include <time.h>

int64_t rnx_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int rnx_left(int64_t deadline)
{
	int64_t left;

	if (deadline < 0)
		return -1;
	left = deadline - rnx_now_ms();
	return left <= 0 ? 0 : left > 60000 ? 60000 : (int)left;
}

static void rnx_keep(struct rnx_sink *k, struct sg_buf *b, bool *trunc, const void *p,
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

void rnx_on_data(int chan, const void *p, size_t n, void *ud)
{
	struct rnx_sink *k = ud;

	if (chan == RN_R_STDOUT)
		rnx_keep(k, &k->res->out, &k->res->out_truncated, p, n);
	else if (chan == RN_R_STDERR)
		rnx_keep(k, &k->res->err, &k->res->err_truncated, p, n);
}

enum rn_req_state rnx_wait(const struct sg_host_api *host, struct rn_req *q,
			   unsigned timeout_ms, const struct sg_call *call,
			   struct rnx_sink *sink, struct rn_exit *ex, char *why,
			   size_t size, bool *cancelled)
{
	int cfd = call ? host->cancel_fd(call) : -1, w;
	int64_t deadline = timeout_ms ? rnx_now_ms() + timeout_ms + RNX_GRACE_MS +
			   RNX_SLACK_MS : -1;
	enum rn_req_state st;
	bool killed = false;

	*cancelled = false;
	for (;;) {
		st = rn_req_drain(q, rnx_on_data, sink, ex, why, size);
		if (st != RN_REQ_RUNNING)
			return st;
		if (!killed && (*cancelled || (call && host->cancelled(call)))) {
			*cancelled = true;
			killed = true;
			rn_req_kill(q, 0);
			deadline = rnx_now_ms() + RNX_GRACE_MS + RNX_SLACK_MS;
			cfd = -1; /* stays readable: stop watching it */
		}
		if (deadline >= 0 && rnx_now_ms() >= deadline) {
			snprintf(why, size, "the runner did not report the end of the "
				 "command in time");
			return RN_REQ_FAILED;
		}
		w = rn_req_wait(q, rnx_left(deadline), cfd);
		if (w == 2)
			*cancelled = true;
	}
}

int rnx_done(const struct sg_host_api *host, struct rn_req *q, const struct rn_exit *ex,
	     bool cancelled, struct sg_exec_result *res, struct sg_err *err)
{
	res->exit_code = ex->signal ? -1 : ex->code;
	res->signal = ex->signal;
	res->timed_out = (ex->flags & RN_EXIT_TIMED_OUT) != 0;
	res->out_truncated |= (ex->flags & RN_EXIT_OUT_TRUNC) != 0;
	res->err_truncated |= (ex->flags & RN_EXIT_ERR_TRUNC) != 0;
	if (rn_req_overflowed(q)) /* more than RN_QUEUE_MAX waited at once */
		res->out_truncated = res->err_truncated = true;
	return cancelled ? host->errf(err, SG_E_CANCELLED, "cancelled: the command's "
				      "process group was killed") : 0;
}

/* ---- streams ------------------------------------------------------------------ */

enum rnx_start rnx_stream_started(struct rn_req *q, int64_t until, struct rn_exit *ex,
				  char *why, size_t size)
{
	enum rn_req_state st;

	while (!rn_req_started(q, NULL, NULL)) {
		st = rn_req_state(q, ex, why, size, NULL);
		if (st == RN_REQ_DONE)
			return RNX_REFUSED;
		if (st == RN_REQ_FAILED)
			return RNX_BROKEN;
		if (rnx_now_ms() >= until)
			return RNX_LATE;
		rn_req_wait(q, 100, -1);
	}
	return RNX_STARTED;
}

ssize_t rnx_stream_write(const struct sg_host_api *host, struct rn_req *q, const void *p,
			 size_t n, const char *name, int broken, struct sg_err *err)
{
	if (rn_req_stdin(q, p, n) == 0)
		return (ssize_t)n;
	if (rn_req_state(q, NULL, NULL, 0, NULL) == RN_REQ_DONE)
		return host->errf(err, SG_E_GONE, "%s stream: write: the process ended", name);
	return host->errf(err, broken, "%s stream: write: the runner connection broke", name);
}

ssize_t rnx_stream_read(const struct sg_host_api *host, struct rn_req *q, void *p, size_t n,
			int timeout_ms, int *channel, const char *name, int broken,
			struct sg_err *err)
{
	int64_t deadline = timeout_ms >= 0 ? rnx_now_ms() + timeout_ms : -1;
	enum rn_req_state st;
	char why[256];
	size_t got, queued;
	int chan, left;

	if (n == 0)
		return 0;
	for (;;) {
		got = rn_req_take(q, p, n, &chan);
		if (got > 0) {
			if (channel)
				*channel = chan == RN_R_STATUS ? SG_STREAM_STATUS :
					   SG_STREAM_OUTPUT;
			return (ssize_t)got;
		}
		st = rn_req_state(q, NULL, why, sizeof(why), &queued);
		if (st == RN_REQ_DONE && queued == 0)
			return 0;
		if (st == RN_REQ_FAILED && queued == 0)
			return host->errf(err, broken, "%s stream: %s", name, why);
		if (queued > 0)
			continue;
		left = rnx_left(deadline);
		if (left == 0)
			return host->errf(err, SG_E_TIMEOUT, "%s stream: nothing to read "
					  "within %d ms", name, timeout_ms);
		rn_req_wait(q, left, -1);
	}
}

/* Waits up to ms for the process to end, dropping unread output (the stream
 * is being closed); true when it did. */
static bool rnx_stream_ended(struct rn_req *q, int ms, struct rn_exit *ex)
{
	int64_t until = rnx_now_ms() + ms;
	char sink[4096];
	int chan;

	for (;;) {
		while (rn_req_take(q, sink, sizeof(sink), &chan) > 0)
			;
		if (rn_req_state(q, ex, NULL, 0, NULL) != RN_REQ_RUNNING)
			return true;
		if (rnx_now_ms() >= until)
			return false;
		rn_req_wait(q, rnx_left(until), -1);
	}
}

int rnx_stream_close(struct rn_req *q)
{
	struct rn_exit ex = { .code = -1 };

	rn_req_stdin_close(q);
	if (!rnx_stream_ended(q, RNX_CLOSE_WAIT_MS, &ex)) {
		rn_req_kill(q, 0);
		rnx_stream_ended(q, RNX_GRACE_MS + RNX_SLACK_MS, &ex);
	}
	return ex.code >= 0 ? ex.code : ex.signal ? 128 + ex.signal : -1;
}
