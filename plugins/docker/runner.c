/*
 * The in-sandbox runner on Docker: its life per container.
 *
 * On the first command in a container docker.so puts the static binary
 * sandgate-runner into it (archive API PUT, as root, mode 0755) at
 * /tmp/.sandgate-runner-<build id>, or in /dev/shm, /run or /var/tmp when
 * that fails, and starts it with one exec whose stdin and stdout stay
 * attached: from then on every command is a frame on that one stream
 * (doc/runner-protocol.md), about a millisecond instead of a full exec round
 * trip.  The build id in the name and in the runner's HELLO makes sure the
 * file is the build this plugin carries.  Where the sandbox has a channel
 * (channel.c), the frames go on a Unix socket instead and the exec stays
 * attached for the runner's stderr.
 *
 * Its life per container (started on the first call, again after it died,
 * plain docker exec for good where it cannot run) and the commands and
 * streams through it are the one runner client's (plugins/runner/rclient.h);
 * this file gives it the ops: how to start a runner here, how to kill a
 * process group without one.  [docker] runner = false forces plain docker
 * exec everywhere.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/docker/docker.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "plugins/docker/demux.h"
#include "plugins/docker/tar.h"
#include "plugins/runner/binary.h"

#define RUNNER_HELLO_MS    15000
#define RUNNER_ERRLINE_MAX 400

/* Where the binary may go in a container, in order: the first must be a
 * writable, exec-allowed directory that exists in every image. */
static const char *const runner_dirs[] = { "/tmp", "/dev/shm", "/run", "/var/tmp" };

/* ---- the binary on this host -------------------------------------------------------- */

/* The binary, read on first use (plugins/runner/binary.c finds it).
 * Returns 0, or -1 with why. */
static int runner_binary(struct docker_ctx *ctx, char *why, size_t size)
{
	int rc;

	pthread_mutex_lock(&ctx->bin_lock);
	if (!ctx->bin_tried) {
		ctx->bin_tried = true;
		if (rn_binary_load(&ctx->bin, ctx->host->config_get("docker", "runner_path"),
				   "[docker] runner_path", ctx->bin_why,
				   sizeof(ctx->bin_why)) == 0)
			ctx->host->log(SG_LOG_DEBUG, DOCKER_PLUGIN, "runner binary %s, "
				       "build %s, %zu bytes", ctx->bin.path, ctx->bin.id,
				       ctx->bin.len);
	}
	rc = ctx->bin.data ? 0 : -1;
	if (rc < 0)
		snprintf(why, size, "%s", ctx->bin_why);
	pthread_mutex_unlock(&ctx->bin_lock);
	return rc;
}

void docker_runner_setup(struct docker_ctx *ctx)
{
	const char *v = ctx->host->config_get("docker", "runner");
	const char *f = getenv("SANDGATE_RUNNER_FAULTS");

	ctx->runner_on = !v || !*v || !(strcasecmp(v, "false") == 0 ||
					strcasecmp(v, "no") == 0 ||
					strcasecmp(v, "off") == 0 || strcmp(v, "0") == 0);
	/* Test hook: lets the runner break frames on purpose (runner.h). */
	ctx->runner_faults = f && strcmp(f, "1") == 0;
	pthread_mutex_init(&ctx->bin_lock, NULL);
	pthread_mutex_init(&ctx->chan_lock, NULL);
	if (!ctx->runner_on)
		ctx->host->log(SG_LOG_INFO, DOCKER_PLUGIN, "runner = false ([docker] runner): "
			       "commands use plain docker exec");
}

void docker_runner_teardown(struct docker_ctx *ctx)
{
	rn_binary_free(&ctx->bin);
	pthread_mutex_destroy(&ctx->bin_lock);
	pthread_mutex_destroy(&ctx->chan_lock);
}

/* ---- the transport: one attached exec ----------------------------------------------- */

/* The hijacked socket of the runner's exec.  Its output is Docker's
 * multiplexed stream: stdout carries the frames, stderr the runner's own
 * notes, which go to the log a line at a time. */
struct runner_sock {
	const struct sg_host_api *host; /* borrowed */
	char cid[DOCKER_ID_MAX];
	int fd;                         /* owned */
	struct docker_demux dmx;
	unsigned char in[RN_CHUNK];
	size_t in_pos, in_len;
	char errline[RUNNER_ERRLINE_MAX];
	size_t err_len;
	char *note;                     /* dm->rnote: the last line, for the
					   start-up failure message */
	size_t note_size;
};

static void runner_sock_note(struct runner_sock *s, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (p[i] != '\n' && s->err_len + 1 < sizeof(s->errline)) {
			s->errline[s->err_len++] = p[i];
			continue;
		}
		if (p[i] != '\n')
			continue;
		s->errline[s->err_len] = '\0';
		snprintf(s->note, s->note_size, "%s", s->errline);
		s->host->log(SG_LOG_INFO, DOCKER_PLUGIN, "runner in %s: %s", s->cid,
			     s->errline);
		s->err_len = 0;
	}
}

static ssize_t runner_sock_read(void *ud, void *p, size_t n)
{
	struct runner_sock *s = ud;
	struct docker_demux_piece piece;
	ssize_t used, r;

	for (;;) {
		while (s->in_pos < s->in_len) {
			used = docker_demux_step(&s->dmx, s->in + s->in_pos,
						 s->in_len - s->in_pos, n, &piece);
			if (used < 0) {
				errno = EPROTO;
				return -1;
			}
			s->in_pos += (size_t)used;
			if (piece.len == 0)
				continue;
			if (piece.stream == DOCKER_STREAM_STDERR ||
			    piece.stream == DOCKER_STREAM_SYSERR) {
				runner_sock_note(s, piece.data, piece.len);
				continue;
			}
			memcpy(p, piece.data, piece.len);
			return (ssize_t)piece.len;
		}
		r = read(s->fd, s->in, sizeof(s->in));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r;
		s->in_pos = 0;
		s->in_len = (size_t)r;
	}
}

static int runner_sock_write(void *ud, const void *p, size_t n)
{
	struct runner_sock *s = ud;

	return rn_send_all(s->fd, p, n);
}

static void runner_sock_shutdown(void *ud)
{
	struct runner_sock *s = ud;

	/* The daemon closes the runner's stdin: it kills what is in flight
	 * and exits. */
	shutdown(s->fd, SHUT_RDWR);
}

static void runner_sock_free(void *ud)
{
	struct runner_sock *s = ud;

	close(s->fd);
	free(s);
}

/* A transport around fd, primed with the bytes that came with the answer. */
static struct runner_sock *runner_sock_new(struct docker_ctx *ctx,
					   struct docker_machine *dm, const char *cid,
					   int fd, const struct sg_buf *early)
{
	struct runner_sock *s;

	if (early->len > RN_CHUNK)
		return NULL;
	s = calloc(1, sizeof(*s)); /* freed by runner_sock_free(), via the connection */
	if (!s)
		return NULL;
	s->host = ctx->host;
	snprintf(s->cid, sizeof(s->cid), "%s", cid);
	s->fd = fd;
	/* Only this runner's reader writes it, and a failed start joins that
	 * reader before the note is read. */
	s->note = dm->rnote;
	s->note_size = sizeof(dm->rnote);
	docker_demux_init(&s->dmx);
	if (early->len)
		memcpy(s->in, early->data, early->len);
	s->in_len = early->len;
	return s;
}

/* Reads what the exec stream has once: the runner's stderr lines go to the
 * log; anything on its stdout is dropped (on the channel it has nothing to
 * say there).  Returns -1 at its end. */
static int runner_sock_drain(struct runner_sock *s)
{
	struct docker_demux_piece piece;
	ssize_t r = read(s->fd, s->in, sizeof(s->in)), used;
	size_t pos = 0;

	if (r < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (r <= 0)
		return -1;
	while (pos < (size_t)r) {
		used = docker_demux_step(&s->dmx, s->in + pos, (size_t)r - pos, sizeof(s->in),
					 &piece);
		if (used < 0)
			return -1;
		pos += (size_t)used;
		if (piece.len && (piece.stream == DOCKER_STREAM_STDERR ||
				  piece.stream == DOCKER_STREAM_SYSERR))
			runner_sock_note(s, piece.data, piece.len);
	}
	return 0;
}

/* The runner on its direct channel (channel.c): frames on the socket, the
 * exec still attached for its stderr. */
struct runner_chan {
	struct runner_sock *x; /* the exec; owned */
	int fd;                /* the accepted socket; owned */
	bool x_done;           /* the exec stream ended (the engine may have
				  restarted: the runner lives on) */
};

static ssize_t runner_chan_read(void *ud, void *p, size_t n)
{
	struct runner_chan *c = ud;

	for (;;) {
		struct pollfd pfd[2] = { { .fd = c->fd, .events = POLLIN },
					 { .fd = c->x_done ? -1 : c->x->fd, .events = POLLIN } };
		ssize_t r;

		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (pfd[1].revents && runner_sock_drain(c->x) < 0)
			c->x_done = true;
		if (!pfd[0].revents)
			continue;
		r = read(c->fd, p, n);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		return r;
	}
}

static int runner_chan_write(void *ud, const void *p, size_t n)
{
	struct runner_chan *c = ud;

	return rn_send_all(c->fd, p, n);
}

static void runner_chan_shutdown(void *ud)
{
	struct runner_chan *c = ud;

	/* EOF on its channel: the runner kills what is in flight and exits */
	shutdown(c->fd, SHUT_RDWR);
	shutdown(c->x->fd, SHUT_RDWR);
}

static void runner_chan_free(void *ud)
{
	struct runner_chan *c = ud;

	close(c->fd);
	runner_sock_free(c->x);
	free(c);
}

/* ---- putting it into the container and starting it ------------------------------------- */

/* Is path there already?  (Same name, same build: the name holds the id.) */
static bool runner_present(struct docker_ctx *ctx, const char *cid, const char *path)
{
	char *q = docker_engine_escape(path), url[DOCKER_PATH_MAX * 3 + DOCKER_ID_MAX + 64];
	struct docker_http rq = { .method = "HEAD", .path = url };
	struct docker_reply rp;
	struct sg_err e;
	bool there;

	if (!q)
		return false;
	snprintf(url, sizeof(url), "/containers/%s/archive?path=%s", cid, q);
	free(q);
	there = docker_engine_call(ctx->engine, &rq, &rp, &e) == 0 && rp.status == 200;
	docker_reply_free(ctx->engine, &rp);
	return there;
}

/* PUTs the binary into dir as name (root-owned, 0755: the tar says so).
 * e->code says why the engine could not be asked (SG_E_UNAVAILABLE: it is
 * down). */
static int runner_upload(struct docker_ctx *ctx, const char *cid, const char *dir,
			 const char *name, char *why, size_t size, struct sg_err *e)
{
	char *q = docker_engine_escape(dir), url[DOCKER_PATH_MAX * 3 + DOCKER_ID_MAX + 64];
	struct docker_http rq = { .method = "PUT", .path = url,
				  .content_type = "application/x-tar" };
	struct sg_buf tar = { 0 };
	struct docker_reply rp = { 0 };
	int rc = -1;

	if (!q)
		return snprintf(why, size, "out of memory"), -1;
	snprintf(url, sizeof(url), "/containers/%s/archive?path=%s", cid, q);
	free(q);
	if (docker_tar_pack_file(ctx->host, name, ctx->bin.data, ctx->bin.len, 0755, &tar,
				 e) < 0) {
		snprintf(why, size, "%.200s", e->msg);
		return -1;
	}
	rq.body = tar.data;
	rq.body_len = tar.len;
	if (docker_engine_call(ctx->engine, &rq, &rp, e) < 0)
		snprintf(why, size, "%.200s", e->msg);
	else if (rp.status != 200)
		snprintf(why, size, "uploading to %s: docker answered HTTP %ld", dir,
			 rp.status);
	else
		rc = 0;
	docker_reply_free(ctx->engine, &rp);
	ctx->host->buf_release(&tar);
	return rc;
}

static void runner_log_cb(void *ud, enum rn_log_level level, const char *msg)
{
	const struct sg_host_api *host = ud;

	host->log(level == RN_LOG_WARNING ? SG_LOG_WARNING :
		  level == RN_LOG_INFO ? SG_LOG_INFO : SG_LOG_DEBUG, DOCKER_PLUGIN,
		  "%s", msg);
}

/* A fresh one-time token, as hex, and its line for the exec's stdin. */
static int runner_token(char *hex, size_t size)
{
	unsigned char rnd[DOCKER_CHAN_TOKEN_BYTES];

	if (size < 2 * sizeof(rnd) + 1 || getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return -1;
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(hex + 2 * i, 3, "%02x", rnd[i]);
	return 0;
}

/* The exec stream can be read while sandgate waits for the runner's
 * connection (docker_chan_accept's xready): a whole stderr frame is taken
 * and logged (0: keep waiting); anything else is left for the exec's
 * transport (1: stdout speaks, so the runner is on stdio; or the end).
 * Only whole frames are taken, so its demultiplexer starts at a header. */
static int runner_sock_ready(void *ud)
{
	struct runner_sock *s = ud;
	unsigned char h[8];
	size_t len, got = 0;

	if (recv(s->fd, h, sizeof(h), MSG_PEEK) != (ssize_t)sizeof(h) ||
	    h[0] != DOCKER_STREAM_STDERR)
		return 1;
	len = (size_t)h[4] << 24 | (size_t)h[5] << 16 | (size_t)h[6] << 8 | h[7];
	if (len + sizeof(h) > sizeof(s->in))
		return 1;
	while (got < len + sizeof(h)) {
		struct pollfd p = { .fd = s->fd, .events = POLLIN };
		ssize_t r = poll(&p, 1, 1000) > 0 ? read(s->fd, s->in + got, len + sizeof(h) - got) : 0;

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			/* what was taken stays the transport's, from its header */
			s->in_pos = 0;
			s->in_len = got;
			return 1;
		}
		got += (size_t)r;
	}
	runner_sock_note(s, (const char *)s->in + sizeof(h), len);
	return 0;
}

/* The transport for the runner just started: on the channel when it came
 * there with the token by end_ms (lfd >= 0), else the exec stream.
 * Returns 1 on the channel, 0 on the exec stream (also when out of memory). */
static int runner_transport(struct docker_ctx *ctx, struct docker_machine *dm,
			    struct runner_sock *s, int lfd, const char *token,
			    long long end_ms, struct rn_transport *t)
{
	char line[2 * DOCKER_CHAN_TOKEN_BYTES + 2];
	struct runner_chan *c = NULL;
	int cfd = -1;

	if (lfd >= 0 && (c = calloc(1, sizeof(*c)))) { /* freed by runner_chan_free() */
		snprintf(line, sizeof(line), "%s\n", token);
		if (rn_send_all(s->fd, line, strlen(line)) == 0)
			cfd = docker_chan_accept(lfd, s->fd, token, end_ms, runner_sock_ready, s);
		explicit_bzero(line, sizeof(line));
	}
	if (lfd >= 0)
		docker_chan_unlisten(ctx, dm->chan, lfd);
	if (cfd >= 0) {
		c->x = s;
		c->fd = cfd;
		*t = (struct rn_transport){ .read = runner_chan_read, .write = runner_chan_write,
					    .shutdown = runner_chan_shutdown,
					    .free = runner_chan_free, .ud = c };
		return 1;
	}
	free(c);
	*t = (struct rn_transport){ .read = runner_sock_read, .write = runner_sock_write,
				    .shutdown = runner_sock_shutdown,
				    .free = runner_sock_free, .ud = s };
	return 0;
}

/* Starts `path --stdio` with attached stdin/stdout (and `--dial` when the
 * machine has a channel) and greets it. */
static int runner_launch(struct docker_ctx *ctx, struct docker_machine *dm,
			 const char *cid, const char *path, const char *arg,
			 struct rn_conn **out, char *why, size_t size, struct sg_err *err)
{
	const char *argv[] = { path, arg, "--dial", DOCKER_CHAN_PATH, NULL };
	struct docker_run r = { .argv = argv, .cwd = "/", .attach_stdin = true,
				.persistent = dm->persistent };
	json_t *start = json_pack("{s:b, s:b}", "Detach", 0, "Tty", 0);
	struct sg_buf early = { 0 };
	struct rn_transport t;
	struct rn_conn_opts o = { .build_id = ctx->bin.id,
				  .hello_timeout_ms = RUNNER_HELLO_MS,
				  .log = runner_log_cb, .log_ud = (void *)ctx->host };
	struct runner_sock *s;
	char name[DOCKER_ID_MAX + 16], url[128], token[2 * DOCKER_CHAN_TOKEN_BYTES + 1];
	long long end, left;
	long status;
	int fd = -1, rc = -1, lfd = -1, direct;
	bool dialed;

	if (!start)
		return snprintf(why, size, "out of memory"), -1;
	if (dm->chan[0] && runner_token(token, sizeof(token)) == 0)
		lfd = docker_chan_listen(ctx, dm->chan);
	if (lfd < 0)
		argv[2] = NULL; /* on the exec stream */
	if (docker_exec_create(ctx, cid, &r, dm->reid, sizeof(dm->reid), err) < 0) {
		snprintf(why, size, "%.200s", err->msg);
		goto out;
	}
	snprintf(url, sizeof(url), "/exec/%s/start", dm->reid);
	if (docker_engine_hijack(ctx->engine, url, start, &fd, &early, &status, err) < 0) {
		snprintf(why, size, "%.200s", err->msg);
		goto out;
	}
	dm->rnote[0] = '\0';
	s = runner_sock_new(ctx, dm, cid, fd, &early);
	if (!s) {
		snprintf(why, size, "out of memory");
		close(fd);
		goto out;
	}
	/* early bytes already came on the exec stream: the runner is there */
	dialed = lfd >= 0 && !early.len;
	end = docker_now_ms() + RUNNER_HELLO_MS;
	direct = runner_transport(ctx, dm, s, dialed ? lfd : -1, token, end, &t);
	if (!dialed && lfd >= 0)
		docker_chan_unlisten(ctx, dm->chan, lfd);
	lfd = -1;
	ctx->host->log(SG_LOG_DEBUG, DOCKER_PLUGIN, "runner in %.12s: %s", cid, direct ?
		       "on its channel" : "on the exec stream");
	snprintf(name, sizeof(name), "container %s", cid);
	o.name = name;
	/* one deadline for the connection and the HELLO */
	left = end - docker_now_ms();
	if (dialed)
		o.hello_timeout_ms = (int)(left > 2000 ? left : 2000);
	rc = rn_conn_open(&t, &o, out, why, size); /* owns s from here */
	if (rc == -2)
		ctx->host->errf(err, SG_E_TIMEOUT, "%s", why);
	/* a failure counts only where no sandbox code could have faked it */
	if (rc == 0 && dialed && (direct || dm->chan_fresh))
		docker_chan_result(ctx, direct, cid);
	if (rc == 0)
		dm->chan_fresh = false;
out:
	if (lfd >= 0)
		docker_chan_unlisten(ctx, dm->chan, lfd);
	explicit_bzero(token, sizeof(token));
	ctx->host->buf_release(&early);
	json_decref(start);
	return rc;
}

/* Cuts the engine's preamble off an exec failure ("OCI runtime exec failed:
 * exec failed: unable to start container process: exec: ..."). */
static void runner_shorten(char *msg)
{
	const char *x = strstr(msg, "container process: ");

	if (x)
		memmove(msg, x + 19, strlen(x + 19) + 1);
}

/* Whether container id runs (inspect says so). */
static bool runner_running(struct docker_ctx *ctx, const char *id)
{
	struct sg_err e;
	bool running = true; /* unknown: let the start say what is wrong */

	docker_container_running(ctx, id, &running, &e);
	return running;
}

/* The start op: tries each directory in turn.  SG_E_NOTSUP when the runner
 * cannot run in this container (the site falls back to plain docker exec),
 * SG_E_GONE when the container itself is gone, SG_E_UNAVAILABLE when a
 * named machine's is stopped (it starts again with the machine),
 * SG_E_TIMEOUT when a step did not finish in time (a slow engine). */
static int runner_start(void *ud, const char *arg, struct rn_conn **out, char *rpath,
			size_t rsize, struct sg_err *err)
{
	struct docker_machine *dm = ud;
	struct docker_ctx *ctx = dm->ctx;
	char name[64], path[DOCKER_PATH_MAX], step[256] = "", why[640] = "";
	struct sg_err e;
	size_t i;

	if (runner_binary(ctx, why, sizeof(why)) < 0)
		return ctx->host->errf(err, SG_E_NOTSUP, "%s", why);
	if (dm->persistent && !runner_running(ctx, dm->cid))
		return ctx->host->errf(err, SG_E_UNAVAILABLE, "container %s is not running: start "
				       "it with sandbox_env docker_start", dm->cid);
	snprintf(name, sizeof(name), ".sandgate-runner-%s", ctx->bin.id);
	for (i = 0; i < sizeof(runner_dirs) / sizeof(runner_dirs[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", runner_dirs[i], name);
		e.code = SG_E_OK;
		if (!runner_present(ctx, dm->cid, path) &&
		    runner_upload(ctx, dm->cid, runner_dirs[i], name, step, sizeof(step), &e) < 0)
			goto next;
		if (runner_launch(ctx, dm, dm->cid, path, arg, out, step, sizeof(step), &e) == 0) {
			snprintf(rpath, rsize, "%s", path);
			return 0;
		}
		if (dm->rnote[0]) /* the engine's own words say more than "EOF" */
			snprintf(step, sizeof(step), "%s", dm->rnote);
		runner_shorten(step);
next:
		if (e.code == SG_E_GONE || e.code == SG_E_UNAVAILABLE)
			return ctx->host->errf(err, e.code, "%s", e.msg);
		/* Slow, not impossible: the next call tries again. */
		if (e.code == SG_E_TIMEOUT)
			return ctx->host->errf(err, e.code, "%s: %.200s", runner_dirs[i], step);
		snprintf(why + strlen(why), sizeof(why) - strlen(why), "%s%s: %.120s",
			 i ? "; " : "", runner_dirs[i], step);
		/* Another directory will not help another CPU. */
		if (strstr(step, "exec format error"))
			break;
	}
	return ctx->host->errf(err, SG_E_NOTSUP, "%s", why);
}

/* ---- the ops ------------------------------------------------------------------------------ */

/* How the last runner's exec ended. */
static void runner_ended(void *ud, char *how, size_t size)
{
	struct docker_machine *dm = ud;

	snprintf(how, size, "exit status %d", dm->reid[0] ? docker_exec_wait(dm->ctx, dm->reid) : -1);
}

static void runner_kill_group(void *ud, long pgid)
{
	struct docker_machine *dm = ud;

	docker_kill_group(dm->ctx, dm->cid, pgid, NULL); /* the runner runs only with /bin/sh */
}

static const struct rnc_ops runner_ops = {
	.tag = DOCKER_PLUGIN,
	.plain = "plain docker exec",
	.no_sh = "an image without it needs a named machine made with docker_run's `shell`",
	.start = runner_start,
	.ended = runner_ended,
	.kill_group = runner_kill_group,
};

/* ---- per machine ----------------------------------------------------------------------- */

void docker_runner_machine_init(struct docker_machine *dm, const char *cid)
{
	char where[DOCKER_ID_MAX + 16];

	snprintf(dm->cid, sizeof(dm->cid), "%s", cid);
	snprintf(where, sizeof(where), "in container %s", cid);
	rnc_site_init(&dm->site, dm->ctx->host, &runner_ops, dm, where, dm->ctx->runner_on,
		      dm->ctx->runner_faults);
	dm->site.start_ms_max = dm->ctx->api_timeout_s * 1000u;
	rnc_kstate_init(&dm->code);
}

void docker_runner_machine_fini(struct docker_machine *dm)
{
	rnc_site_fini(&dm->site);
	rnc_kstate_fini(&dm->code);
}

unsigned docker_runner_generation(const struct sg_machine *m)
{
	struct docker_machine *dm = m->handle;

	return rnc_site_restarts(&dm->site);
}

/* ---- commands and status ------------------------------------------------------------------ */

int docker_runner_exec(struct docker_ctx *ctx, const struct sg_machine *m,
		       const struct docker_run *r, const char *command,
		       struct sg_call *call, struct sg_exec_result *res,
		       struct sg_err *err)
{
	struct docker_machine *dm = m->handle;
	struct rnc_cmd c = { .command = command, .argv = command ? NULL : r->argv,
			     .env = r->env, .cwd = r->cwd, .timeout_ms = r->timeout_ms,
			     .cap = r->cap };
	long long outer;
	int rc;

	if (!dm || !ctx->runner_on)
		return 1;
	/* The engine calls of the command (a runner start, the kill of a
	 * runner that stopped answering) end when the runner client gives up
	 * on it, plus a little: a hung daemon cannot hold the caller longer. */
	outer = docker_engine_deadline(r->timeout_ms ? docker_now_ms() + r->timeout_ms +
				       RNC_GRACE_MS + RNC_SLACK_MS + 800 : 0);
	rc = rnc_exec(&dm->site, &c, call, res, err);
	docker_engine_deadline(outer);
	return rc;
}

struct rnc_site *docker_runner_site(const struct sg_machine *m)
{
	struct docker_machine *dm = m->handle;

	return dm && dm->ctx->runner_on ? &dm->site : NULL;
}

json_t *docker_runner_status(struct sg_machine *m)
{
	struct docker_machine *dm = m->handle;

	if (!dm)
		return json_pack("{s:s}", "runner", "unknown");
	return rnc_site_status(&dm->site);
}

int docker_action_runner(void *priv, struct sg_machine *m, const json_t *params,
			 struct sg_call *call, json_t **result, struct sg_err *err)
{
	struct docker_ctx *ctx = priv;

	(void)params;
	(void)call;
	*result = m ? docker_runner_status(m) : NULL;
	if (!*result)
		return ctx->host->errf(err, SG_E_NOMEM, "docker: out of memory");
	return 0;
}
