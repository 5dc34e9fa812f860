/*
 * One-shot commands through docker exec (Tty=false, stdin closed): the path
 * when the container's runner is not available (the fast one is the runner
 * client, plugins/runner/rclient.h).
 *
 * The Engine API cannot signal an exec, so every command runs under a small
 * wrapper in the same exec that starts it in a new session (hence a new
 * process group) and prints that group's id on the first stdout line; we strip
 * the line and, on timeout or cancellation, kill the whole group with a second
 * exec.  docker exec processes are already session leaders under runc, so
 * util-linux setsid has to fork: `setsid -f -w` always forks and waits, which
 * keeps the exit status, and when the command dies of a signal it exits with
 * the signal number and says "setsid: child N did not exit normally" on
 * stderr, which we turn back into res->signal.
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
#include <time.h>
#include <unistd.h>

#include "plugins/docker/demux.h"

#define DOCKER_SETSID_NOTE " did not exit normally"
#define DOCKER_TAIL 256             /* stderr bytes kept for setsid's note */
#define DOCKER_READ_CHUNK 65536
#define DOCKER_GRACE_MS 2000        /* drain after a kill; wait for the pgid */
#define DOCKER_INSPECT_MS 10000     /* wait for inspect to stop saying Running (ms after EOF
				       on an idle engine; seconds on a loaded one) */
#define DOCKER_KILL_TIMEOUT_MS 10000
#define DOCKER_DEADLINE_GRACE_MS 800 /* a timed-out command answers by then */
#define DOCKER_STATUS_MS 3000       /* the status calls after the output ended get at least this */
#define DOCKER_NO_STATUS_MS 2000    /* ... and, with none, asking what the container does */

/* State of one exec while its stream is read. */
struct docker_exec_state {
	const struct sg_host_api *host;
	struct sg_exec_result *res;
	size_t cap;
	bool want_pgid;        /* the wrapper's first stdout line is still coming */
	char pgid_text[256];   /* that line; docker's own error when runc failed */
	size_t pgid_len;
	long pgid;             /* the command's process group, 0 until known */
	char tail[DOCKER_TAIL];/* last stderr bytes, kept even past the cap */
	size_t tail_len;
	bool oom;
};

/* ---- time ---------------------------------------------------------------------- */

long long docker_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void docker_sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* ---- the output sink ----------------------------------------------------------- */

/* Appends to b up to the cap; the rest is counted as truncation. */
static int docker_keep(struct docker_exec_state *st, struct sg_buf *b,
		       bool *truncated, const char *p, size_t n)
{
	size_t room = b->len < st->cap ? st->cap - b->len : 0;

	if (n > room) {
		*truncated = true;
		n = room;
	}
	if (n > 0 && st->host->buf_append(b, p, n) < 0) {
		st->oom = true;
		return -1;
	}
	return 0;
}

static void docker_tail_add(struct docker_exec_state *st, const char *p, size_t n)
{
	if (n >= DOCKER_TAIL) {
		memcpy(st->tail, p + n - DOCKER_TAIL, DOCKER_TAIL);
		st->tail_len = DOCKER_TAIL;
		return;
	}
	if (st->tail_len + n > DOCKER_TAIL) {
		size_t drop = st->tail_len + n - DOCKER_TAIL;

		memmove(st->tail, st->tail + drop, st->tail_len - drop);
		st->tail_len -= drop;
	}
	memcpy(st->tail + st->tail_len, p, n);
	st->tail_len += n;
}

/* Eats the wrapper's "<pgid>\n" off the front of stdout; returns bytes used.
 * When runc cannot start the process at all, docker writes its own error
 * there instead: that line is kept as output. */
static size_t docker_eat_pgid(struct docker_exec_state *st, const char *p, size_t n)
{
	size_t i;
	char *end;

	for (i = 0; i < n; i++) {
		if (p[i] == '\n') {
			st->pgid_text[st->pgid_len] = '\0';
			st->want_pgid = false;
			st->pgid = strtol(st->pgid_text, &end, 10);
			/* Never 0, 1 (docker-init) or negative: kill -- -1 would
			 * hit every process. */
			if (*end || end == st->pgid_text || st->pgid <= 1) {
				st->pgid = 0;
				st->pgid_text[st->pgid_len++] = '\n';
				docker_keep(st, &st->res->out, &st->res->out_truncated,
					    st->pgid_text, st->pgid_len);
			}
			return i + 1;
		}
		if (st->pgid_len + 2 < sizeof(st->pgid_text))
			st->pgid_text[st->pgid_len++] = p[i];
	}
	return n;
}

static int docker_exec_sink(int stream, const void *data, size_t len, void *ud)
{
	struct docker_exec_state *st = ud;
	struct sg_exec_result *res = st->res;
	const char *p = data;
	size_t used;

	if (stream == DOCKER_STREAM_STDERR || stream == DOCKER_STREAM_SYSERR) {
		docker_tail_add(st, p, len);
		return docker_keep(st, &res->err, &res->err_truncated, p, len);
	}
	if (st->want_pgid) {
		used = docker_eat_pgid(st, p, len);
		p += used;
		len -= used;
		if (st->oom)
			return -1;
	}
	return docker_keep(st, &res->out, &res->out_truncated, p, len);
}

/* If stderr ends with setsid's "child <pgid> did not exit normally" line, the
 * command died of a signal: report it and drop the line from stderr.  The
 * pid in the line is the group leader's, which keeps a command that prints
 * such a line itself from being taken for a signal. */
static void docker_decode_signal(struct docker_exec_state *st, int code)
{
	struct sg_exec_result *res = st->res;
	const char *line, *end = st->tail + st->tail_len;
	char want[48];
	size_t n, wn;

	if (code <= 0 || st->pgid <= 0 || st->tail_len == 0 || end[-1] != '\n')
		return;
	for (line = end - 1; line > st->tail && line[-1] != '\n'; line--)
		;
	n = (size_t)(end - line);
	wn = (size_t)snprintf(want, sizeof(want), "setsid: child %ld" DOCKER_SETSID_NOTE,
			      st->pgid);
	if (n < wn || memcmp(line, want, wn) != 0)
		return;
	res->signal = code & 0x7f; /* the raw wait status: 0x80 is the core flag */
	res->exit_code = -1;
	if (res->err.len >= n && memcmp(res->err.data + res->err.len - n, line, n) == 0) {
		res->err.len -= n;
		res->err.data[res->err.len] = '\0';
	}
}

/* ---- the Engine calls ------------------------------------------------------------ */

/* Maps a failed exec create: a missing container is SG_E_GONE, and so is a
 * stopped sandbox; a stopped named machine is only stopped. */
static int docker_exec_create_fail(struct docker_ctx *ctx, const char *cid,
				   const struct docker_run *r, long status,
				   const json_t *reply, struct sg_err *err)
{
	if (status == 404)
		return ctx->host->errf(err, SG_E_GONE,
				       "container %s is gone (removed outside "
				       "sandgate): create a new machine", cid);
	if (status == 409 && r->persistent)
		return ctx->host->errf(err, SG_E_UNAVAILABLE,
				       "container %s is not running: start it with "
				       "sandbox_env docker_start (%s)", cid,
				       docker_reply_message(reply));
	if (status == 409)
		return ctx->host->errf(err, SG_E_GONE,
				       "container %s is not running (stopped outside "
				       "sandgate): %s", cid, docker_reply_message(reply));
	return docker_engine_fail(ctx->engine, err, SG_E_BACKEND, "docker exec create",
				  status, reply);
}

/* "/bin/sh" in what an exec runs, or the machine's own shell. */
static const char *docker_sh(const struct docker_run *r, const char *word)
{
	return r->sh && !strcmp(word, "/bin/sh") ? r->sh : word;
}

static json_t *docker_exec_body(const struct docker_run *r)
{
	json_t *body, *cmd, *env;
	char *wrapper = NULL;
	size_t i;

	body = json_pack("{s:b, s:b, s:b, s:b}", "AttachStdin", r->attach_stdin,
			 "AttachStdout", 1,
			 "AttachStderr", 1, "Tty", 0);
	cmd = json_array();
	if (!body || !cmd)
		goto fail;
	if (json_object_set_new(body, "Cmd", cmd) < 0) {
		cmd = NULL;
		goto fail;
	}
	if (r->group) {
		/* $0 is "sg", "$@" the command.  Without setsid (minimal images)
		 * the exec's own process is the group leader under runc, so $$
		 * still names the group.  setsid runs a shell too: the
		 * machine's own. */
		if (asprintf(&wrapper, "%sif command -v setsid >/dev/null 2>&1; then "
			     "exec setsid -f -w %s -c 'echo $$; exec \"$@\"' sg \"$@\"; fi; "
			     "echo $$; exec \"$@\"", r->merge_stderr ? "exec 2>&1; " : "",
			     docker_sh(r, "/bin/sh")) < 0) {
			wrapper = NULL;
			goto fail;
		}
		if (json_array_append_new(cmd, json_string(docker_sh(r, "/bin/sh"))) < 0 ||
		    json_array_append_new(cmd, json_string("-c")) < 0 ||
		    json_array_append_new(cmd, json_string(wrapper)) < 0 ||
		    json_array_append_new(cmd, json_string("sg")) < 0)
			goto fail;
	}
	for (i = 0; r->argv[i]; i++)
		if (json_array_append_new(cmd, json_string(i ? r->argv[i] : docker_sh(r, r->argv[i]))) < 0)
			goto fail;
	if (r->env) {
		env = json_array();
		if (json_object_set_new(body, "Env", env) < 0)
			goto fail;
		for (i = 0; r->env[i]; i++)
			if (json_array_append_new(env, json_string(r->env[i])) < 0)
				goto fail;
	}
	if (r->cwd && *r->cwd &&
	    json_object_set_new(body, "WorkingDir", json_string(r->cwd)) < 0)
		goto fail;
	free(wrapper);
	return body;
fail:
	free(wrapper);
	json_decref(body);
	return NULL;
}

/* After a 409 to exec create: starts a sandbox's container cid again when it
 * is merely stopped (an engine restart without live-restore stops every
 * container; attach does the same after a reboot).  A named machine stays
 * stopped: its user stops and starts it.  True when the exec may be created
 * again. */
static bool docker_exec_restarted(struct docker_ctx *ctx, const char *cid,
				  const json_t *reply, struct sg_err *err)
{
	if (!strstr(docker_reply_message(reply), "is not running"))
		return false;
	if (docker_container_start_raw(ctx, cid, err) < 0) {
		ctx->host->log(SG_LOG_WARNING, DOCKER_PLUGIN, "container %s is stopped "
			       "and does not start again: %s", cid, err->msg);
		return false;
	}
	ctx->host->log(SG_LOG_WARNING, DOCKER_PLUGIN, "container %s was stopped "
		       "(an engine restart, or docker stop): started it again; its "
		       "processes did not survive", cid);
	return true;
}

int docker_exec_create(struct docker_ctx *ctx, const char *cid,
			      const struct docker_run *r, char *eid, size_t size,
			      struct sg_err *err)
{
	json_t *body = docker_exec_body(r), *reply = NULL;
	char path[DOCKER_ID_MAX + 32];
	const char *id;
	long status;
	int rc = -1;
	struct sg_err serr;

	if (!body)
		return ctx->host->errf(err, SG_E_INVAL, "docker exec: the command, env or "
				       "cwd is not valid UTF-8 text");
	snprintf(path, sizeof(path), "/containers/%s/exec", cid);
	if (docker_engine_json(ctx->engine, "POST", path, body, &status, &reply, err) < 0)
		goto out;
	if (status == 409 && !r->persistent && !r->keep_stopped &&
	    docker_exec_restarted(ctx, cid, reply, &serr)) {
		json_decref(reply);
		reply = NULL;
		if (docker_engine_json(ctx->engine, "POST", path, body, &status, &reply,
				       err) < 0)
			goto out;
	}
	if (status != 201) {
		docker_exec_create_fail(ctx, cid, r, status, reply, err);
		goto out;
	}
	id = json_string_value(json_object_get(reply, "Id"));
	if (!id || strlen(id) >= size) {
		ctx->host->errf(err, SG_E_PROTO, "docker exec create gave no exec id");
		goto out;
	}
	strcpy(eid, id);
	rc = 0;
out:
	json_decref(body);
	json_decref(reply);
	return rc;
}

/* Asks whether the exec still runs; fills *code when it ended. */
static int docker_exec_inspect(struct docker_ctx *ctx, const char *eid,
			       bool *running, int *code, struct sg_err *err)
{
	char path[128];
	json_t *reply = NULL;
	long status;
	int rc = -1;

	snprintf(path, sizeof(path), "/exec/%s/json", eid);
	if (docker_engine_json(ctx->engine, "GET", path, NULL, &status, &reply, err) < 0)
		return -1;
	if (status != 200) {
		docker_engine_fail(ctx->engine, err, SG_E_BACKEND, "docker exec inspect",
				   status, reply);
		goto out;
	}
	*running = json_is_true(json_object_get(reply, "Running"));
	*code = (int)json_integer_value(json_object_get(reply, "ExitCode"));
	rc = 0;
out:
	json_decref(reply);
	return rc;
}

/* Inspect may still say Running for a moment after the stream ended (the exit
 * event comes later than EOF), so ask again with a short backoff. */
int docker_exec_wait(struct docker_ctx *ctx, const char *eid)
{
	long long until = docker_now_ms() + DOCKER_INSPECT_MS;
	long pause = 1;
	bool running = true;
	int code = -1;
	struct sg_err e;

	for (;;) {
		if (docker_exec_inspect(ctx, eid, &running, &code, &e) < 0) {
			ctx->host->log(SG_LOG_WARNING, DOCKER_PLUGIN,
				       "exec %s: no exit code: %s", eid, e.msg);
			return -1;
		}
		if (!running)
			return code;
		if (docker_now_ms() >= until)
			return -1;
		docker_sleep_ms(pause);
		if (pause < 50)
			pause *= 2;
	}
}

void docker_kill_group(struct docker_ctx *ctx, const char *cid, long pgid, const char *sh)
{
	char num[24];
	const char *argv[] = { "/bin/sh", "-c",
			       "kill -s KILL -- -\"$1\" 2>/dev/null; exit 0", "sg",
			       num, NULL };
	struct docker_run r = { .argv = argv, .timeout_ms = DOCKER_KILL_TIMEOUT_MS,
				.cap = 4096, .cwd = "/", .sh = sh, .keep_stopped = true };
	struct sg_exec_result res;
	struct sg_err e;

	if (pgid <= 1)
		return; /* kill -- -1 would signal every process */
	memset(&res, 0, sizeof(res));
	snprintf(num, sizeof(num), "%ld", pgid);
	if (docker_run(ctx, cid, &r, NULL, &res, &e) < 0)
		ctx->host->log(SG_LOG_WARNING, DOCKER_PLUGIN,
			       "killing process group %ld in %s failed: %s", pgid,
			       cid, e.msg);
	ctx->host->buf_release(&res.out);
	ctx->host->buf_release(&res.err);
}

/* Explains an exec that docker could not start, with docker's own words
 * when it gave some (on stdout) and a check whether the cwd exists. */
static int docker_start_fail(struct docker_ctx *ctx, const char *cid,
			     const struct docker_run *r, int code,
			     const struct sg_exec_result *got, struct sg_err *err)
{
	const char *argv[] = { "/bin/sh", "-c", "test -d \"$1\"", "sg", r->cwd, NULL };
	struct docker_run check = { .argv = argv, .cwd = "/", .cap = 4096,
				    .timeout_ms = DOCKER_KILL_TIMEOUT_MS, .sh = r->sh,
				    .keep_stopped = true };
	struct sg_exec_result res;
	struct sg_err e;
	char why[256];
	int missing = 0;

	if (r->cwd && *r->cwd && strcmp(r->cwd, "/") != 0) {
		memset(&res, 0, sizeof(res));
		missing = docker_run(ctx, cid, &check, NULL, &res, &e) == 0 &&
			  res.exit_code == 1;
		ctx->host->buf_release(&res.out);
		ctx->host->buf_release(&res.err);
	}
	if (missing)
		return ctx->host->errf(err, SG_E_NOTFOUND, "working directory %s does not "
				       "exist in container %s: create it or give "
				       "another cwd", r->cwd, cid);
	docker_first_line(got->out.data ? got->out.data : "", got->out.len, why,
			  sizeof(why));
	if (!*why)
		docker_first_line(got->err.data ? got->err.data : "", got->err.len, why,
				  sizeof(why));
	/* The container stopped between the exec's create and its start. */
	if (strstr(why, "stopped container") || strstr(why, "is not running"))
		return ctx->host->errf(err, r->persistent ? SG_E_UNAVAILABLE : SG_E_GONE,
				       "container %s is not running%s", cid, r->persistent ?
				       ": start it with sandbox_env docker_start" :
				       " (stopped outside sandgate)");
	return ctx->host->errf(err, SG_E_BACKEND, "docker could not start the command "
			       "in container %s (exit %d)%s%s: the image needs "
			       "%s (or make the machine with a `shell` it has), and cwd "
			       "must be a directory", cid, code, *why ? ": " : "", why,
			       docker_sh(r, "/bin/sh"));
}

/* The stream ended but the engine gives no exit status: not a result.
 * Either the container stopped under the command (docker drops a stopped
 * container's exec instances, so inspect answers 404), or the engine is
 * too slow to record the end, or it died or restarted; the container's own
 * state, and whether the engine answers, tell which.
 * Returns -1. */
static int docker_no_status(struct docker_ctx *ctx, const char *cid,
			    const struct docker_run *r, struct sg_err *err)
{
	struct sg_err e;
	bool running = true;
	int rc = docker_container_running(ctx, cid, &running, &e);

	if (rc < 0 && e.code == SG_E_NOTFOUND)
		return docker_exec_create_fail(ctx, cid, r, 404, NULL, err);
	if (rc < 0 && e.code == SG_E_TIMEOUT)
		return ctx->host->errf(err, SG_E_UNAVAILABLE, "docker exec in %.12s: the engine "
				       "gave no exit status and did not answer an inspect in time (it "
				       "is overloaded); call again", cid);
	if (rc == 0 && !running)
		return ctx->host->errf(err, r->persistent ? SG_E_UNAVAILABLE : SG_E_GONE,
				       "container %.12s is not running: it stopped while the command "
				       "ran (its main process ended, or docker stop)%s", cid,
				       r->persistent ? "; start it with sandbox_env docker_start" : "");
	if (rc == 0)
		return ctx->host->errf(err, SG_E_UNAVAILABLE, "docker exec in %.12s: the command's "
				       "output ended but the engine went on reporting it running, so "
				       "its exit status is unknown (the engine is overloaded); call "
				       "again", cid);
	return ctx->host->errf(err, SG_E_UNAVAILABLE, "docker exec in %.12s: the connection to the "
			       "docker engine broke before the command ended (no exit status): the "
			       "engine died or restarted; call again once it is back", cid);
}

/* ---- the read loop ------------------------------------------------------------- */

enum docker_stop { DOCKER_RUNNING = 0, DOCKER_TIMED_OUT, DOCKER_CANCELLED };

/* poll() timeout until deadline (< 0: none). */
static int docker_wait_ms(long long deadline)
{
	long long left;

	if (deadline < 0)
		return -1;
	left = deadline - docker_now_ms();
	return left > 0 ? (int)(left < 60000 ? left : 60000) : 0;
}

/* Reads and demuxes the stream until EOF.  On timeout or cancellation kills
 * the group (once its id is known), then drains for a grace period. */
static int docker_exec_pump(struct docker_ctx *ctx, const char *cid, int fd,
			    const struct docker_run *r, struct sg_call *call,
			    struct docker_exec_state *st, struct docker_demux *dmx,
			    enum docker_stop *stop, struct sg_err *err)
{
	const struct sg_host_api *host = ctx->host;
	long long deadline = r->timeout_ms ? docker_now_ms() + r->timeout_ms : -1;
	/* The drain after the kill ends by then, whatever the daemon does (the
	 * kill itself goes on apart: docker_kill_group_later). */
	long long hard = deadline < 0 ? -1 : deadline + DOCKER_DEADLINE_GRACE_MS;
	char *buf = malloc(DOCKER_READ_CHUNK); /* freed below */
	struct pollfd pfd[2];
	bool killed = false;
	int rc = -1, wait_ms;
	ssize_t n;

	if (!buf)
		return host->errf(err, SG_E_NOMEM, "docker: out of memory");
	pfd[0] = (struct pollfd){ .fd = fd, .events = POLLIN };
	pfd[1] = (struct pollfd){ .fd = call ? host->cancel_fd(call) : -1,
				  .events = POLLIN };
	for (;;) {
		if (*stop && !killed && (st->pgid > 0 || !r->group)) {
			/* Not on this thread: the command's deadline is all
			 * but spent, and a kill cut short by it leaves the
			 * group running (killer.c). */
			if (r->group)
				docker_kill_group_later(ctx, cid, st->pgid, r->sh);
			killed = true;
			/* Orphans that left the group may hold the stream
			 * open: drain a little, then give up on it. */
			deadline = docker_now_ms() + DOCKER_GRACE_MS;
			if (*stop == DOCKER_TIMED_OUT && hard >= 0 && hard < deadline)
				deadline = hard;
		}
		/* Checked before every read, so a flood of output cannot
		 * hold the timeout off. */
		if (deadline >= 0 && docker_now_ms() >= deadline) {
			if (*stop)
				break; /* grace over: stop reading */
			*stop = DOCKER_TIMED_OUT;
			deadline = docker_now_ms() + DOCKER_GRACE_MS;
			if (hard >= 0 && hard < deadline)
				deadline = hard;
			continue;
		}
		wait_ms = docker_wait_ms(deadline);
		if (poll(pfd, *stop ? 1 : 2, wait_ms) < 0) {
			if (errno == EINTR)
				continue;
			host->errf(err, SG_E_IO, "docker exec: poll: %s", strerror(errno));
			goto out;
		}
		if (!*stop && (pfd[1].revents || (call && host->cancelled(call)))) {
			*stop = DOCKER_CANCELLED;
			deadline = docker_now_ms() + DOCKER_GRACE_MS;
			continue;
		}
		if (!(pfd[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		n = read(fd, buf, DOCKER_READ_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			host->errf(err, SG_E_IO, "docker exec: reading the stream: %s",
				   strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		if (docker_demux_feed(dmx, buf, (size_t)n, docker_exec_sink, st) != 0) {
			if (st->oom)
				host->errf(err, SG_E_NOMEM, "docker: out of memory");
			else
				host->errf(err, SG_E_PROTO, "docker exec: the output stream "
					   "is not multiplexed (bad frame header)");
			goto out;
		}
	}
	if (!docker_demux_idle(dmx) && !*stop)
		host->log(SG_LOG_WARNING, DOCKER_PLUGIN,
			  "exec in %s: the stream ended inside a frame", cid);
	rc = 0;
out:
	free(buf);
	return rc;
}

int docker_run(struct docker_ctx *ctx, const char *cid, const struct docker_run *r,
	       struct sg_call *call, struct sg_exec_result *res,
	       struct sg_err *err)
{
	struct docker_exec_state st = { .host = ctx->host, .res = res,
					.cap = r->cap ? r->cap : SG_OUTPUT_CAP_DEFAULT,
					.want_pgid = r->group };
	json_t *start = json_pack("{s:b, s:b}", "Detach", 0, "Tty", 0);
	struct sg_buf early = { 0 };
	struct docker_demux dmx;
	enum docker_stop stop = DOCKER_RUNNING;
	char eid[80], path[128];
	long status;
	int fd = -1, rc = -1, code;
	/* Every engine call of the command ends by its timeout and a grace,
	 * however long [docker] api_timeout is: a hung daemon cannot hold the
	 * caller.  A nested run (the kill) keeps the outer, nearer, deadline. */
	long long until = r->timeout_ms ? docker_now_ms() + r->timeout_ms + DOCKER_DEADLINE_GRACE_MS : 0;
	long long outer = docker_engine_deadline(0);

	docker_engine_deadline(outer && (!until || outer < until) ? outer : until);
	res->exit_code = -1;
	res->signal = 0;
	docker_demux_init(&dmx);
	if (!start) {
		docker_engine_deadline(outer);
		return ctx->host->errf(err, SG_E_NOMEM, "docker: out of memory");
	}
	if (docker_exec_create(ctx, cid, r, eid, sizeof(eid), err) < 0)
		goto out;
	snprintf(path, sizeof(path), "/exec/%s/start", eid);
	if (docker_engine_hijack(ctx->engine, path, start, &fd, &early, &status, err) < 0) {
		if (status == 404 || status == 409)
			docker_exec_create_fail(ctx, cid, r, status, NULL, err);
		goto out;
	}
	if (early.len > 0 &&
	    docker_demux_feed(&dmx, early.data, early.len, docker_exec_sink, &st) != 0) {
		ctx->host->errf(err, SG_E_PROTO, "docker exec: bad first frame");
		goto out;
	}
	if (docker_exec_pump(ctx, cid, fd, r, call, &st, &dmx, &stop, err) < 0) {
		/* We stop listening: do not leave the command running. */
		if (r->group && st.pgid > 0)
			docker_kill_group_later(ctx, cid, st.pgid, r->sh);
		goto out;
	}
	close(fd);
	fd = -1;
	/* The output ended by itself: the calls for the command's status get
	 * at least DOCKER_STATUS_MS, even when the command ended near its
	 * timeout (then its deadline is all but spent), and asking what the
	 * container does when there is no status DOCKER_NO_STATUS_MS more: a
	 * hung engine holds the caller some 5 s longer at most.  A timed-out or
	 * cancelled command keeps its deadline, and a nested run the outer
	 * one. */
	if (!outer && until && stop == DOCKER_RUNNING && until < docker_now_ms() + DOCKER_STATUS_MS)
		docker_engine_deadline(docker_now_ms() + DOCKER_STATUS_MS);
	code = docker_exec_wait(ctx, eid);
	res->exit_code = code;
	if (code < 0 && stop == DOCKER_RUNNING) {
		if (!outer && until)
			docker_engine_deadline(docker_now_ms() + DOCKER_NO_STATUS_MS);
		docker_no_status(ctx, cid, r, err);
		goto out;
	}
	if (r->group && code >= 0)
		docker_decode_signal(&st, code);
	res->timed_out = stop == DOCKER_TIMED_OUT;
	/* No pgid and 126/127: runc never started the wrapper. */
	if (r->group && st.pgid == 0 && stop == DOCKER_RUNNING &&
	    (code == 126 || code == 127)) {
		docker_start_fail(ctx, cid, r, code, res, err);
		goto out;
	}
	if (stop == DOCKER_CANCELLED) {
		ctx->host->errf(err, SG_E_CANCELLED, "cancelled: the command's process "
				"group was killed");
		goto out;
	}
	rc = 0;
out:
	docker_engine_deadline(outer);
	if (fd >= 0)
		close(fd);
	ctx->host->buf_release(&early);
	json_decref(start);
	return rc;
}

int docker_check_env(struct docker_ctx *ctx, const char *const *env,
		     struct sg_err *err)
{
	size_t i;

	for (i = 0; env && env[i]; i++)
		if (env[i][0] == '=' || !strchr(env[i], '='))
			return ctx->host->errf(err, SG_E_INVAL, "env entry \"%.64s\" is "
					       "not KEY=VALUE", env[i]);
	return 0;
}

void docker_run_for(const struct sg_machine *m, struct docker_run *r)
{
	const struct docker_machine *dm = m ? m->handle : NULL;

	r->sh = dm && dm->shell[0] ? dm->shell : NULL;
	r->persistent = dm && dm->persistent;
}

int docker_run_machine(struct docker_ctx *ctx, const struct sg_machine *m,
		       const struct docker_run *r, const char *command,
		       struct sg_call *call, struct sg_exec_result *res,
		       struct sg_err *err)
{
	int rc;

	docker_stale_drop(ctx, m);
	rc = docker_runner_exec(ctx, m, r, command, call, res, err);

	return rc == 1 ? docker_run(ctx, m->id, r, call, res, err) : rc;
}

/* ---- the exec slot ------------------------------------------------------------- */

/* Runs req in the machine: stdin closed, stdout and stderr apart and capped,
 * cwd defaulting to the workspace, a timeout killing the whole process group
 * (success with res->timed_out and the partial output). */
int docker_exec(struct sg_machine *m, const struct sg_exec_req *req,
		struct sg_call *call, struct sg_exec_result *res,
		struct sg_err *err)
{
	struct docker_ctx *ctx = docker_ctx_of(m, err);
	const char *shell[] = { "/bin/sh", "-c", req ? req->command : NULL, NULL };
	struct docker_run r;
	long long t0;
	int rc;

	if (!ctx)
		return -1;
	if (!req || (!req->command) == (!req->argv) || (req->argv && !req->argv[0]))
		return ctx->host->errf(err, SG_E_INVAL, "exec: give exactly one of "
				       "command and argv (a non-empty vector)");
	if (docker_check_env(ctx, req->env, err) < 0)
		return -1;
	r = (struct docker_run){
		.argv = req->command ? shell : req->argv,
		.cwd = req->cwd ? req->cwd : m->workspace,
		.env = req->env,
		.timeout_ms = req->timeout_ms,
		.cap = req->output_cap ? req->output_cap : SG_OUTPUT_CAP_DEFAULT,
		.group = true,
	};
	docker_run_for(m, &r);
	t0 = docker_now_ms();
	rc = docker_run_machine(ctx, m, &r, req->command, call, res, err);
	ctx->host->log(SG_LOG_DEBUG, DOCKER_PLUGIN,
		       "exec in %s: %s, exit %d, signal %d, %zu+%zu bytes, %lld ms%s",
		       m->id, rc < 0 ? "failed" : "ran", res->exit_code, res->signal,
		       res->out.len, res->err.len, docker_now_ms() - t0,
		       res->timed_out ? ", timed out" : "");
	return rc;
}
