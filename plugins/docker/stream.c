/*
 * Interactive streams (persistent shells).  Through the container's runner
 * when it works there (plugins/runner/rclient.h: a SPAWN with stdin open, output merged, and
 * optionally a status fd), else an attached exec with stdin open, Tty=false,
 * stderr merged into stdout by the wrapper so the reader sees both in order.
 * Like one-shot execs the process runs in its own process group, whose id is
 * the first line of output, so stream_close() can end whatever is left of it.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/docker/docker.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "plugins/docker/demux.h"

#define DOCKER_STREAM_BUF 65536
#define DOCKER_CLOSE_GRACE_MS 1000

struct sg_stream {
	struct docker_ctx *ctx;       /* borrowed */
	struct rnc_stream *rs;        /* through the runner (owned), else NULL */
	char cid[DOCKER_ID_MAX];
	char eid[80];
	char sh[128];                 /* the machine's shell, "" for /bin/sh */
	int fd;                       /* the hijacked socket (owned) */
	long pgid;                    /* the process group, 0 when unknown */
	pthread_mutex_t rlock;        /* one reader at a time: guards below */
	struct docker_demux dmx;
	unsigned char in[DOCKER_STREAM_BUF]; /* raw bytes not yet demuxed */
	size_t in_pos, in_len;
	bool eof;
};

/* Copies buffered payload into p[0..n); never blocks.  Returns bytes copied or
 * -1 on a bad frame. */
static ssize_t docker_stream_take(struct sg_stream *s, unsigned char *p, size_t n)
{
	struct docker_demux_piece piece;
	size_t got = 0;
	ssize_t used;

	while (got < n && s->in_pos < s->in_len) {
		used = docker_demux_step(&s->dmx, s->in + s->in_pos,
					 s->in_len - s->in_pos, n - got, &piece);
		if (used < 0)
			return -1;
		s->in_pos += (size_t)used;
		if (piece.len > 0) {
			memcpy(p + got, piece.data, piece.len);
			got += piece.len;
		}
	}
	return (ssize_t)got;
}

/* Reads payload bytes: what is buffered, else waits up to timeout_ms (< 0:
 * forever) for more.  Returns bytes, 0 at EOF, -1 with err (SG_E_TIMEOUT). */
static ssize_t docker_stream_pull(struct sg_stream *s, unsigned char *p, size_t n,
				  int timeout_ms, struct sg_err *err)
{
	const struct sg_host_api *host = s->ctx->host;
	long long deadline = timeout_ms >= 0 ? docker_now_ms() + timeout_ms : -1;
	struct pollfd pfd = { .fd = s->fd, .events = POLLIN };
	ssize_t got, r;
	int pr, wait_ms;

	for (;;) {
		got = docker_stream_take(s, p, n);
		if (got != 0)
			return got < 0 ? host->errf(err, SG_E_PROTO, "docker stream: "
						    "bad frame header") : got;
		if (s->eof)
			return 0;
		wait_ms = -1;
		if (deadline >= 0) {
			long long left = deadline - docker_now_ms();

			wait_ms = left > 0 ? (int)left : 0;
		}
		pr = poll(&pfd, 1, wait_ms);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr < 0)
			return host->errf(err, SG_E_IO, "docker stream: poll: %s",
					  strerror(errno));
		if (pr == 0)
			return host->errf(err, SG_E_TIMEOUT, "docker stream: nothing to "
					  "read within %d ms", timeout_ms);
		r = read(s->fd, s->in, sizeof(s->in));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return host->errf(err, SG_E_IO, "docker stream: read: %s",
					  strerror(errno));
		s->in_pos = 0;
		s->in_len = (size_t)r;
		s->eof = r == 0;
	}
}

/* Reads the wrapper's "<pgid>\n" line off the front of the stream. */
static int docker_stream_pgid(struct sg_stream *s, struct sg_err *err)
{
	char text[256], *end;
	size_t len = 0;
	unsigned char c;
	ssize_t r;

	for (;;) {
		r = docker_stream_pull(s, &c, 1, (int)s->ctx->api_timeout_s * 1000, err);
		if (r < 0)
			return -1;
		if (r == 0)
			return s->ctx->host->errf(err, SG_E_BACKEND, "docker stream: the "
						  "process ended before it started");
		if (c == '\n')
			break;
		if (len + 1 < sizeof(text))
			text[len++] = (char)c;
	}
	text[len] = '\0';
	s->pgid = strtol(text, &end, 10);
	if (*end || end == text || s->pgid <= 1) {
		/* Not our wrapper's line: docker's own error (bad cwd, no sh). */
		s->pgid = 0;
		while (len && (text[len - 1] == '\r' || text[len - 1] == ' '))
			text[--len] = '\0';
		return s->ctx->host->errf(err, SG_E_BACKEND, "docker could not start "
					  "the stream in container %s: %s%s", s->cid, text,
					  strstr(text, "no such file") && !s->sh[0] ?
					  " (an image without /bin/sh needs a named machine made "
					  "with docker_run's `shell`)" : "");
	}
	return 0;
}

/* A stream around a runner stream; 0, -1, or 1 when there is no runner. */
static int docker_stream_runner(struct docker_ctx *ctx, struct sg_machine *m,
				const struct sg_exec_req *req, int status_fd,
				struct sg_stream **out, struct sg_err *err)
{
	struct docker_machine *dm = m->handle;
	struct rnc_cmd c = { .command = req->command, .argv = req->argv, .env = req->env,
			     .cwd = req->cwd ? req->cwd : m->workspace };
	struct rnc_stream *rs = NULL;
	struct sg_stream *s;
	int rc;

	if (!dm)
		return 1;
	rc = rnc_stream_open(&dm->site, &c, status_fd, &rs, err);
	if (rc != 0)
		return rc;
	s = calloc(1, sizeof(*s)); /* freed by docker_stream_close() */
	if (!s) {
		rnc_stream_close(rs);
		return ctx->host->errf(err, SG_E_NOMEM, "docker: out of memory");
	}
	s->ctx = ctx;
	s->rs = rs;
	s->fd = -1;
	pthread_mutex_init(&s->rlock, NULL);
	*out = s;
	return 0;
}

static int docker_stream_check(struct docker_ctx *ctx, const struct sg_exec_req *req,
			       struct sg_err *err)
{
	if (!req || (!req->command) == (!req->argv) || (req->argv && !req->argv[0]))
		return ctx->host->errf(err, SG_E_INVAL, "stream: give exactly one of "
				       "command and argv (a non-empty vector)");
	return docker_check_env(ctx, req->env, err);
}

/* The process also gets a status fd: only the runner can do that. */
int docker_stream_open_status(struct sg_machine *m, const struct sg_exec_req *req,
			      int status_fd, struct sg_stream **out, struct sg_err *err)
{
	struct docker_ctx *ctx = docker_ctx_of(m, err);
	int rc;

	*out = NULL;
	if (!ctx || docker_stream_check(ctx, req, err) < 0)
		return -1;
	if (status_fd < 3 || status_fd > 9)
		return ctx->host->errf(err, SG_E_INVAL, "stream: the status fd must be "
				       "3..9, not %d", status_fd);
	rc = docker_stream_runner(ctx, m, req, status_fd, out, err);
	if (rc == 1)
		return ctx->host->errf(err, SG_E_NOTSUP, "container %s has no runner "
				       "([docker] runner = false, or it cannot run "
				       "there), so no status fd: use stream_open", m->id);
	return rc;
}

/* Starts req in the machine with stdin open; *out is the caller's until
 * stream_close(). */
int docker_stream_open(struct sg_machine *m, const struct sg_exec_req *req,
		       struct sg_stream **out, struct sg_err *err)
{
	struct docker_ctx *ctx = docker_ctx_of(m, err);
	const char *shell[] = { "/bin/sh", "-c", req ? req->command : NULL, NULL };
	json_t *start = NULL;
	struct sg_buf early = { 0 };
	struct sg_stream *s = NULL;
	struct docker_run r;
	char path[128];
	long status;

	int rc;

	*out = NULL;
	if (!ctx || docker_stream_check(ctx, req, err) < 0)
		return -1;
	rc = docker_stream_runner(ctx, m, req, -1, out, err);
	if (rc != 1)
		return rc;
	r = (struct docker_run){ .argv = req->command ? shell : req->argv,
				 .cwd = req->cwd ? req->cwd : m->workspace,
				 .env = req->env, .group = true,
				 .attach_stdin = true, .merge_stderr = true };
	docker_run_for(m, &r);
	s = calloc(1, sizeof(*s)); /* freed by docker_stream_close() */
	start = json_pack("{s:b, s:b}", "Detach", 0, "Tty", 0);
	if (!s || !start) {
		ctx->host->errf(err, SG_E_NOMEM, "docker: out of memory");
		goto fail;
	}
	s->ctx = ctx;
	s->fd = -1;
	pthread_mutex_init(&s->rlock, NULL);
	docker_demux_init(&s->dmx);
	snprintf(s->cid, sizeof(s->cid), "%s", m->id);
	snprintf(s->sh, sizeof(s->sh), "%s", r.sh ? r.sh : "");
	if (docker_exec_create(ctx, m->id, &r, s->eid, sizeof(s->eid), err) < 0)
		goto fail;
	snprintf(path, sizeof(path), "/exec/%s/start", s->eid);
	if (docker_engine_hijack(ctx->engine, path, start, &s->fd, &early, &status,
				 err) < 0)
		goto fail;
	if (early.len > sizeof(s->in)) {
		ctx->host->errf(err, SG_E_PROTO, "docker stream: too much early data");
		goto fail;
	}
	if (early.len > 0)
		memcpy(s->in, early.data, early.len);
	s->in_len = early.len;
	if (docker_stream_pgid(s, err) < 0)
		goto fail;
	ctx->host->buf_release(&early);
	json_decref(start);
	*out = s;
	return 0;
fail:
	ctx->host->buf_release(&early);
	json_decref(start);
	if (s) {
		if (s->fd >= 0)
			docker_stream_close(s, NULL);
		else {
			pthread_mutex_destroy(&s->rlock);
			free(s);
		}
	}
	return -1;
}

/* Writes all n bytes to the process's stdin. */
ssize_t docker_stream_write(struct sg_stream *s, const void *p, size_t n,
			    struct sg_err *err)
{
	const char *q = p;
	size_t left = n;
	ssize_t w;

	if (s->rs)
		return rnc_stream_write(s->rs, p, n, err);
	while (left > 0) {
		/* MSG_NOSIGNAL: a process that exited must not SIGPIPE us. */
		w = send(s->fd, q, left, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return s->ctx->host->errf(err, errno == EPIPE ? SG_E_GONE : SG_E_IO,
						  "docker stream: write: %s%s",
						  strerror(errno), errno == EPIPE ?
						  " (the process ended)" : "");
		q += w;
		left -= (size_t)w;
	}
	return (ssize_t)n;
}

/* Returns up to n bytes of output (stdout and stderr merged in order), 0 at
 * EOF, -1 with SG_E_TIMEOUT when nothing came within timeout_ms. */
ssize_t docker_stream_read(struct sg_stream *s, void *p, size_t n, int timeout_ms,
			   struct sg_err *err)
{
	ssize_t r;

	if (n == 0)
		return 0;
	if (s->rs)
		return rnc_stream_read(s->rs, p, n, timeout_ms, NULL, err);
	pthread_mutex_lock(&s->rlock);
	r = docker_stream_pull(s, p, n, timeout_ms, err);
	pthread_mutex_unlock(&s->rlock);
	return r;
}

/* As docker_stream_read, telling output from status bytes.  A stream without
 * a runner has output only. */
ssize_t docker_stream_read_ch(struct sg_stream *s, void *p, size_t n, int timeout_ms,
			      int *channel, struct sg_err *err)
{
	*channel = SG_STREAM_OUTPUT;
	if (s->rs)
		return rnc_stream_read(s->rs, p, n, timeout_ms, channel, err);
	return docker_stream_read(s, p, n, timeout_ms, err);
}

/* Reads and drops output until EOF or the grace ends; true at EOF. */
static bool docker_stream_drain(struct sg_stream *s, int grace_ms)
{
	long long until = docker_now_ms() + grace_ms;
	unsigned char sink[4096];
	struct sg_err e;
	ssize_t r;

	for (;;) {
		long long left = until - docker_now_ms();

		if (left <= 0)
			return false;
		r = docker_stream_pull(s, sink, sizeof(sink), (int)left, &e);
		if (r == 0)
			return true;
		if (r < 0)
			return false;
	}
}

/* Closes stdin, lets the process end (else kills its group), reports the
 * exit code from exec inspect, and frees s. */
int docker_stream_close(struct sg_stream *s, int *exit_code)
{
	int code = -1;

	if (exit_code)
		*exit_code = -1;
	if (!s)
		return 0;
	if (s->rs)
		code = rnc_stream_close(s->rs);
	if (s->fd >= 0) {
		shutdown(s->fd, SHUT_WR);
		if (!docker_stream_drain(s, DOCKER_CLOSE_GRACE_MS) && s->pgid > 0) {
			docker_kill_group(s->ctx, s->cid, s->pgid, s->sh[0] ? s->sh : NULL);
			docker_stream_drain(s, DOCKER_CLOSE_GRACE_MS);
		}
		close(s->fd);
		code = docker_exec_wait(s->ctx, s->eid);
	}
	if (exit_code)
		*exit_code = code;
	pthread_mutex_destroy(&s->rlock);
	free(s);
	return 0;
}
