/*
 * The plugin side of running commands and streams through a runner
 * connection (client.h), shared by docker.so and ssh.so: waiting on a
 * one-shot command with cancellation, collecting its output under the cap,
 * turning its EXIT into an sg_exec_result, and reading, writing and closing
 * a stream.  What differs by backend (getting a connection, the wording of
 * a command that never started, killing a group when the runner is gone)
 * stays in each plugin's rexec.c.
 */
#ifndef SG_RUNNER_REXEC_COMMON_H
#define SG_RUNNER_REXEC_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <sandgate/plugin.h>

#include "plugins/runner/client.h"

#define RNX_GRACE_MS      1000  /* TERM -> KILL, as the runner counts it */
#define RNX_SLACK_MS      5000  /* beyond timeout + grace: the runner is stuck */
#define RNX_CLOSE_WAIT_MS 1000  /* a stream's process may end by itself */

/* The monotonic clock in milliseconds. */
int64_t rnx_now_ms(void);

/* Milliseconds until deadline for a wait: -1 (none) stays -1, a passed
 * deadline is 0, never negative (poll would wait forever). */
int rnx_left(int64_t deadline);

/* Where one command's output goes: rnx_on_data() keeps at most cap bytes
 * of each of stdout and stderr in res (flagging the rest truncated); oom
 * says an append failed. */
struct rnx_sink {
	const struct sg_host_api *host;
	struct sg_exec_result *res;
	size_t cap;
	bool oom;
};

rn_data_fn rnx_on_data; /* ud: struct rnx_sink */

/* Waits for the end of q (a command with timeout_ms, 0: none), killing it on
 * cancellation.  Returns the final state; *cancelled says whether the call
 * was cancelled.  A runner that does not report the end in time is
 * RN_REQ_FAILED with why. */
enum rn_req_state rnx_wait(const struct sg_host_api *host, struct rn_req *q,
			   unsigned timeout_ms, const struct sg_call *call,
			   struct rnx_sink *sink, struct rn_exit *ex, char *why,
			   size_t size, bool *cancelled);

/* The command ran and ended (ex): fills res from ex.  Returns 0, or -1
 * with SG_E_CANCELLED when the call was cancelled. */
int rnx_done(const struct sg_host_api *host, struct rn_req *q, const struct rn_exit *ex,
	     bool cancelled, struct sg_exec_result *res, struct sg_err *err);

/* ---- streams ------------------------------------------------------------------ */

enum rnx_start {
	RNX_STARTED = 0,
	RNX_REFUSED,  /* EXIT before STARTED: ex says why */
	RNX_BROKEN,   /* the connection broke before the start: why */
	RNX_LATE      /* no STARTED by the deadline */
};

/* Waits until the runner said STARTED for q, or refused, up to until
 * (rnx_now_ms() time). */
enum rnx_start rnx_stream_started(struct rn_req *q, int64_t until, struct rn_exit *ex,
				  char *why, size_t size);

/* A stream's write and read; name ("docker", "ssh") starts the messages and
 * broken is the error code when the runner connection broke. */
ssize_t rnx_stream_write(const struct sg_host_api *host, struct rn_req *q, const void *p,
			 size_t n, const char *name, int broken, struct sg_err *err);
ssize_t rnx_stream_read(const struct sg_host_api *host, struct rn_req *q, void *p, size_t n,
			int timeout_ms, int *channel, const char *name, int broken,
			struct sg_err *err);

/* Closes q's stdin, waits a little for the process to end (killing its group
 * if it does not), drops unread output.  Returns the exit code: the code, or
 * 128 + signal, or -1 when unknown. */
int rnx_stream_close(struct rn_req *q);

#endif /* SG_RUNNER_REXEC_COMMON_H */
