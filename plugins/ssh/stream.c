/*
 * Interactive streams (persistent shells).  Through the target's runner
 * when it has one (plugins/runner/rclient.h): a SPAWN with stdin open and stderr merged, and
 * for stream_open_status a status fd of its own.  Otherwise a session
 * channel with stdin open, stderr merged into stdout by the wrapper
 * (`exec 2>&1`, so the reader sees both in order), no pty.  Either way the
 * process runs in its own process group (on the plain path its id is on
 * the wrapper's marker line), so stream_close() can end whatever is left of
 * it.  Reads and writes may come from different threads: each call is its
 * own op on the connection; one reader at a time.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/ssh/ssh.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SSH_STREAM_BUF 65536
#define SSH_STREAM_START_MS 30000
#define SSH_CLOSE_GRACE_MS 1000

struct sg_stream {
	struct ssh_pool *pool;        /* borrowed */
	struct rnc_stream *rs;        /* through the runner (owned), else NULL and: */
	struct ssh_conn *c;           /* a reference and a slot, given back at close */
	LIBSSH2_CHANNEL *ch;          /* owned */
	pthread_mutex_t rlock;        /* one reader at a time: guards below */
	char *buf;                    /* owned: bytes read but not yet returned */
	size_t pos, len;
	bool eof;
	long pgid;                    /* 0 when unknown */
};

/* Reads more into s->buf (s->pos == s->len).  Returns 1 with data, 0 at
 * EOF, -1 with err (SG_E_TIMEOUT when nothing came within timeout_ms). */
static int ssh_stream_fill(struct sg_stream *s, int timeout_ms, struct sg_err *err)
{
	const struct sg_host_api *host = s->pool->ctx->host;
	struct ssh_op op;
	ssize_t rc;
	int ret = -1;

	ssh_op_init(&op, s->c, NULL, timeout_ms >= 0 ? ssh_now_ms() + timeout_ms : -1);
	if (ssh_op_begin(&op) < 0)
		goto out;
	for (;;) {
		rc = ssh_chan_read(&op, s->ch, 0, s->buf, SSH_STREAM_BUF);
		if (rc > 0) {
			s->pos = 0;
			s->len = (size_t)rc;
			ret = 1;
			break;
		}
		if (rc == 0) {
			s->eof = true;
			ret = 0;
			break;
		}
		if (rc != LIBSSH2_ERROR_EAGAIN) {
			ssh_fail(&op, NULL, (int)rc, "reading the stream", err);
			break;
		}
		if (ssh_op_wait(&op) < 0)
			break;
	}
out:
	if (ret < 0 && op.stop == SSH_STOP_TIMEOUT)
		host->errf(err, SG_E_TIMEOUT, "ssh stream: nothing to read within %d ms", timeout_ms);
	else if (ret < 0 && op.stop == SSH_STOP_BROKEN)
		host->errf(err, SG_E_UNAVAILABLE, "ssh stream: the connection dropped: %s", s->c->broken_why);
	ssh_op_end(&op);
	return ret;
}

/* Reads the wrapper's "<nonce> <pgid>" line; login noise before it is
 * dropped, bytes after it stay buffered. */
static int ssh_stream_marker(struct sg_stream *s, const char *cwd, struct sg_err *err)
{
	const struct sg_host_api *host = s->pool->ctx->host;
	const char *nonce = s->pool->ctx->nonce;
	size_t k = strlen(nonce);
	char line[128];
	size_t ll = 0;
	bool longline = false;

	for (;;) {
		if (s->pos == s->len) {
			int r = ssh_stream_fill(s, SSH_STREAM_START_MS, err);

			if (r < 0)
				return -1;
			if (r == 0)
				return host->errf(err, SG_E_BACKEND, "ssh stream: the process ended before it started");
		}
		while (s->pos < s->len) {
			char ch = s->buf[s->pos++];

			if (ch != '\n') {
				if (ll + 1 < sizeof(line))
					line[ll++] = ch;
				else
					longline = true;
				continue;
			}
			line[ll] = '\0';
			if (!longline && ll > k + 1 && memcmp(line, nonce, k) == 0 && line[k] == ' ') {
				if (strcmp(line + k + 1, "cwd") == 0)
					return host->errf(err, SG_E_NOTFOUND,
							  "ssh stream: working directory '%s' is not usable", cwd);
				s->pgid = strtol(line + k + 1, NULL, 10);
				if (s->pgid <= 1)
					s->pgid = 0;
				return 0;
			}
			ll = 0;
			longline = false;
		}
	}
}

/* Checks req and merges the machine's env with its own (*env: the caller
 * frees it with ssh_strv_free).  Fills r; returns 0 or -1 with err. */
static int ssh_stream_req(struct sg_machine *m, struct ssh_machine *sm,
			  const struct sg_exec_req *req, char ***env, struct ssh_run *r,
			  struct sg_err *err)
{
	const struct sg_host_api *host = sm->ctx->host;

	*env = NULL;
	if (!req || (!req->command) == (!req->argv) || (req->argv && !req->argv[0]))
		return host->errf(err, SG_E_INVAL, "stream: give exactly one of command and argv (a non-empty vector)");
	if (ssh_env_check(host, req->env, err) < 0)
		return -1;
	if (req->env && !(*env = ssh_env_merge(NULL, req->env)))
		return host->errf(err, SG_E_NOMEM, "ssh: out of memory");
	*r = (struct ssh_run){ .command = req->command, .argv = req->argv,
			       .cwd = req->cwd && *req->cwd ? req->cwd : m->workspace,
			       .env = (const char *const *)*env, .group = true };
	return 0;
}

/* A stream through the runner: 0, -1, or 1 when the target has none. */
static int ssh_stream_runner(struct ssh_machine *sm, const struct ssh_run *r, int status_fd,
			     struct sg_stream **out, struct sg_err *err)
{
	struct rnc_stream *rs = NULL;
	struct sg_stream *s;
	struct rnc_cmd c;
	int rc;

	ssh_runner_cmd(r, &c);
	rc = rnc_stream_open(ssh_site_of(sm), &c, status_fd, &rs, err);
	if (rc != 0)
		return rc;
	s = calloc(1, sizeof(*s)); /* freed by ssh_stream_close() */
	if (!s) {
		rnc_stream_close(rs);
		return sm->ctx->host->errf(err, SG_E_NOMEM, "ssh: out of memory");
	}
	s->pool = sm->pool;
	s->rs = rs;
	pthread_mutex_init(&s->rlock, NULL);
	*out = s;
	return 0;
}

int ssh_stream_open_status(struct sg_machine *m, const struct sg_exec_req *req, int status_fd,
			   struct sg_stream **out, struct sg_err *err)
{
	struct ssh_machine *sm = ssh_machine_of(m, err);
	struct ssh_run r;
	char **env = NULL;
	int rc;

	*out = NULL;
	if (!sm || ssh_stream_req(m, sm, req, &env, &r, err) < 0)
		return -1;
	if (status_fd < 3 || status_fd > 9)
		rc = sm->ctx->host->errf(err, SG_E_INVAL, "stream: the status fd must be 3..9, not %d", status_fd);
	else
		rc = ssh_stream_runner(sm, &r, status_fd, out, err);
	if (rc == 1)
		rc = sm->ctx->host->errf(err, SG_E_NOTSUP,
					 "ssh: %s has no runner ([ssh] runner = false, or it cannot run there), so no status fd: use stream_open",
					 sm->pool->target.host);
	ssh_strv_free(env);
	return rc;
}

int ssh_stream_open(struct sg_machine *m, const struct sg_exec_req *req, struct sg_stream **out,
		    struct sg_err *err)
{
	struct ssh_machine *sm = ssh_machine_of(m, err);
	const struct sg_host_api *host;
	struct sg_stream *s = NULL;
	struct ssh_run r;
	struct ssh_op op;
	char **env = NULL;
	int rc;

	*out = NULL;
	if (!sm)
		return -1;
	host = sm->ctx->host;
	if (ssh_stream_req(m, sm, req, &env, &r, err) < 0)
		return -1;
	rc = ssh_stream_runner(sm, &r, -1, out, err);
	if (rc != 1) {
		ssh_strv_free(env);
		return rc;
	}
	s = calloc(1, sizeof(*s)); /* freed by ssh_stream_close() */
	if (!s || !(s->buf = malloc(SSH_STREAM_BUF))) {
		host->errf(err, SG_E_NOMEM, "ssh: out of memory");
		goto fail;
	}
	pthread_mutex_init(&s->rlock, NULL);
	s->pool = sm->pool;
	if (ssh_exec_start(sm->pool, &op, NULL, ssh_now_ms() + SSH_STREAM_START_MS, &r, true, false,
			   &s->c, &s->ch, err) < 0) {
		pthread_mutex_destroy(&s->rlock);
		goto fail;
	}
	/* Anything the login shell writes to stderr before the wrapper's
	 * `exec 2>&1` joins stdout, so no bytes wait unread in the window. */
	libssh2_channel_handle_extended_data2(s->ch, LIBSSH2_CHANNEL_EXTENDED_DATA_MERGE);
	ssh_op_end(&op);
	ssh_strv_free(env);
	env = NULL;
	if (ssh_stream_marker(s, r.cwd, err) < 0) {
		ssh_stream_close(s, NULL);
		return -1;
	}
	*out = s;
	return 0;
fail:
	ssh_strv_free(env);
	if (s)
		free(s->buf);
	free(s);
	return -1;
}

ssize_t ssh_stream_write(struct sg_stream *s, const void *p, size_t n, struct sg_err *err)
{
	const struct sg_host_api *host = s->pool->ctx->host;
	const char *q = p;
	size_t done = 0;
	struct ssh_op op;
	ssize_t rc = 0;

	if (s->rs)
		return rnc_stream_write(s->rs, p, n, err);
	ssh_op_init(&op, s->c, NULL, -1);
	if (ssh_op_begin(&op) < 0) {
		ssh_op_end(&op);
		return host->errf(err, SG_E_UNAVAILABLE, "ssh stream: the connection dropped: %s",
				  s->c->broken_why);
	}
	while (done < n) {
		rc = libssh2_channel_write_ex(s->ch, 0, q + done, n - done);
		if (rc > 0) {
			done += (size_t)rc;
			continue;
		}
		if (rc == LIBSSH2_ERROR_EAGAIN && ssh_op_wait(&op) == 0)
			continue;
		break;
	}
	if (done < n) {
		if (rc == LIBSSH2_ERROR_CHANNEL_CLOSED || rc == LIBSSH2_ERROR_CHANNEL_EOF_SENT)
			host->errf(err, SG_E_GONE, "ssh stream: write: the process ended");
		else
			ssh_fail(&op, NULL, (int)rc, "writing to the stream", err);
		ssh_op_end(&op);
		return -1;
	}
	ssh_op_end(&op);
	return (ssize_t)n;
}

ssize_t ssh_stream_read(struct sg_stream *s, void *p, size_t n, int timeout_ms, struct sg_err *err)
{
	ssize_t got = -1;
	int r;

	if (n == 0)
		return 0;
	if (s->rs)
		return rnc_stream_read(s->rs, p, n, timeout_ms, NULL, err);
	pthread_mutex_lock(&s->rlock);
	if (s->pos == s->len) {
		if (s->eof) {
			got = 0;
			goto out;
		}
		r = ssh_stream_fill(s, timeout_ms, err);
		if (r <= 0) {
			got = r;
			goto out;
		}
	}
	got = (ssize_t)(s->len - s->pos < n ? s->len - s->pos : n);
	memcpy(p, s->buf + s->pos, (size_t)got);
	s->pos += (size_t)got;
out:
	pthread_mutex_unlock(&s->rlock);
	return got;
}

/* As ssh_stream_read, telling output from status bytes; a stream without
 * the runner has output only. */
ssize_t ssh_stream_read_ch(struct sg_stream *s, void *p, size_t n, int timeout_ms, int *channel,
			   struct sg_err *err)
{
	*channel = SG_STREAM_OUTPUT;
	if (s->rs)
		return rnc_stream_read(s->rs, p, n, timeout_ms, channel, err);
	return ssh_stream_read(s, p, n, timeout_ms, err);
}

/* Reads and drops output until EOF or the grace ends; true at EOF. */
static bool ssh_stream_drain(struct sg_stream *s, int grace_ms)
{
	int64_t until = ssh_now_ms() + grace_ms;
	struct sg_err e;

	while (!s->eof) {
		int64_t left = until - ssh_now_ms();

		if (left <= 0 || ssh_stream_fill(s, (int)left, &e) < 0)
			return false;
		s->pos = s->len;
	}
	return true;
}

/* Closes stdin, lets the process end (else kills its group), reports its
 * exit status, gives the channel back and frees s. */
int ssh_stream_close(struct sg_stream *s, int *exit_code)
{
	struct ssh_op op;
	int rc, code = -1;

	if (exit_code)
		*exit_code = -1;
	if (!s)
		return 0;
	if (s->rs) {
		code = rnc_stream_close(s->rs);
		if (exit_code)
			*exit_code = code;
		pthread_mutex_destroy(&s->rlock);
		free(s);
		return 0;
	}
	ssh_op_init(&op, s->c, NULL, ssh_now_ms() + SSH_CLOSE_GRACE_MS);
	op.stopping = true;
	if (ssh_op_begin(&op) == 0)
		SSH_CALL(&op, rc, libssh2_channel_send_eof(s->ch));
	ssh_op_end(&op);
	if (!ssh_stream_drain(s, SSH_CLOSE_GRACE_MS) && s->pgid > 0) {
		ssh_kill_group(s->pool, s->pgid);
		ssh_stream_drain(s, SSH_CLOSE_GRACE_MS);
	}
	ssh_op_init(&op, s->c, NULL, ssh_now_ms() + SSH_CLOSE_GRACE_MS);
	op.stopping = true;
	if (ssh_op_begin(&op) == 0 && s->eof) {
		SSH_CALL(&op, rc, libssh2_channel_wait_closed(s->ch));
		if (rc == 0) {
			char *sig = NULL;
			size_t siglen = 0;

			code = libssh2_channel_get_exit_status(s->ch);
			if (libssh2_channel_get_exit_signal(s->ch, &sig, &siglen, NULL, NULL, NULL, NULL) == 0 &&
			    sig) {
				code = 128 + ssh_signal_number(sig);
				libssh2_free(s->c->session, sig);
			}
		}
	}
	ssh_chan_done(&op, s->ch);
	if (exit_code)
		*exit_code = code;
	pthread_mutex_destroy(&s->rlock);
	free(s->buf);
	free(s);
	return 0;
}
