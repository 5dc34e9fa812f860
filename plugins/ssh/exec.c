/*
 * One-shot commands.  Each runs on its own session channel: no pty (bytes
 * exact), stdin closed at once (EOF right after the exec request), stdout
 * and stderr drained together so neither can stall the other behind the
 * channel's shared window, output capped per stream while still drained.
 *
 * The remote line (quote.c) prints "<nonce> <pgid>" before it runs the
 * command; bytes before that line (a chatty .bashrc) are dropped, the line
 * itself is stripped.  The wrapper waits for the command and ends both
 * streams with "\n<nonce> end <status>\n" (stripped too): the command is
 * over when both came, even while a background job it left keeps the
 * channel open (the job is the sandbox's, killed with it).  A timeout or a
 * cancellation kills the whole process group from a second channel (TERM,
 * then KILL for what ignores it), drains for a grace period and returns the
 * partial output.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/ssh/ssh.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SSH_CHUNK        65536          /* one channel read */
#define SSH_BURST        16             /* reads per stream before checking the clock */
#define SSH_GRACE_MS     2000           /* drain after a kill, or wait for the pgid */
#define SSH_START_MS     30000          /* open + exec request, on top of connect_timeout */
#define SSH_NOISE_MAX    65536          /* login noise kept for when no marker comes */
#define SSH_KILL_MS      10000
#define SSH_SCRIPT_MS    60000

/* The kill: TERM to the group, up to 1 s for it to go, then KILL. */
static const char ssh_kill_script[] =
	"kill -TERM -\"$1\" 2>/dev/null || exit 0; i=0; "
	"while [ $i -lt 10 ] && kill -0 -\"$1\" 2>/dev/null; do sleep 0.1; i=$((i+1)); done; "
	"kill -KILL -\"$1\" 2>/dev/null; exit 0";

/* The end marker on one stream: "\n<nonce> end " matched byte by byte (its
 * bytes held back until it matches or fails), then the status digits and a
 * newline.  Once done, the rest of the stream is a background job's. */
struct ssh_tail {
	size_t m;             /* bytes of the pattern matched */
	char digits[8];
	size_t nd;
	int phase;            /* 0 looking, 1 reading the status, 2 done */
};

/* State of one command while its output is read. */
struct ssh_exec_state {
	const struct sg_host_api *host;
	struct sg_exec_result *res;
	size_t cap;
	const char *nonce;
	bool want_marker;     /* the "<nonce> <pgid>" line has not come yet */
	char line[128];       /* the stdout line being checked for the marker */
	size_t line_len;
	bool line_long;       /* longer than any marker: noise */
	struct sg_buf noise;  /* stdout before the marker (login output) */
	long pgid;            /* 0 until known */
	bool nocwd;           /* the wrapper could not cd */
	bool oom;
	char endpat[80];      /* "\n<nonce> end " */
	size_t endpat_len;
	struct ssh_tail tail[2]; /* stdout, stderr */
};

/* ---- the output sink ------------------------------------------------------------- */

static void ssh_keep(struct ssh_exec_state *st, struct sg_buf *b, bool *truncated,
		     const char *p, size_t n)
{
	size_t room = b->len < st->cap ? st->cap - b->len : 0;

	if (n > room) {
		*truncated = true;
		n = room;
	}
	if (n > 0 && st->host->buf_append(b, p, n) < 0)
		st->oom = true;
}

static void ssh_noise(struct ssh_exec_state *st, const char *p, size_t n)
{
	if (st->noise.len + n <= SSH_NOISE_MAX && st->host->buf_append(&st->noise, p, n) < 0)
		st->oom = true;
}

/* A complete line: the marker, or noise. */
static bool ssh_marker_line(struct ssh_exec_state *st)
{
	size_t k = strlen(st->nonce);
	const char *rest = st->line + k + 1;
	char *end;
	long v;

	if (st->line_long || st->line_len <= k + 1 || memcmp(st->line, st->nonce, k) != 0 ||
	    st->line[k] != ' ')
		return false;
	st->line[st->line_len] = '\0';
	if (strcmp(rest, "cwd") == 0) {
		st->nocwd = true;
		return true;
	}
	v = strtol(rest, &end, 10);
	if (*end)
		return false;
	/* Never 0 or 1: kill -1 would reach every process of the user. */
	st->pgid = v > 1 ? v : 0;
	return true;
}

/* Eats stdout up to and including the marker line; returns bytes used. */
static size_t ssh_eat_marker(struct ssh_exec_state *st, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (p[i] == '\n') {
			if (ssh_marker_line(st)) {
				st->want_marker = false;
				return i + 1;
			}
			if (!st->line_long)
				ssh_noise(st, st->line, st->line_len);
			ssh_noise(st, "\n", 1);
			st->line_len = 0;
			st->line_long = false;
		} else if (st->line_len + 1 < sizeof(st->line) && !st->line_long) {
			st->line[st->line_len++] = p[i];
		} else {
			if (!st->line_long)
				ssh_noise(st, st->line, st->line_len);
			st->line_long = true;
			ssh_noise(st, p + i, 1);
		}
	}
	return n;
}

/* Gives back what a failed match held. */
static void ssh_tail_release(struct ssh_exec_state *st, struct ssh_tail *t, struct sg_buf *b,
			     bool *trunc)
{
	ssh_keep(st, b, trunc, st->endpat, t->m);
	ssh_keep(st, b, trunc, t->digits, t->nd);
	t->m = t->nd = 0;
	t->phase = 0;
}

/* Keeps p[0..n) minus the end marker (see struct ssh_tail). */
static void ssh_tail_feed(struct ssh_exec_state *st, struct ssh_tail *t, struct sg_buf *b,
			  bool *trunc, const char *p, size_t n)
{
	size_t run = 0; /* start of the plain bytes not yet kept */

	if (!st->endpat_len) {
		ssh_keep(st, b, trunc, p, n);
		return;
	}
	for (size_t i = 0; i < n && t->phase < 2; i++) {
		char c = p[i];

		if (t->phase == 1 && c >= '0' && c <= '9' && t->nd < sizeof(t->digits)) {
			t->digits[t->nd++] = c;
		} else if (t->phase == 1 && c == '\n' && t->nd > 0) {
			t->phase = 2;
		} else if (t->phase == 0 && c == st->endpat[t->m]) {
			if (t->m == 0)
				ssh_keep(st, b, trunc, p + run, i - run);
			if (++t->m == st->endpat_len)
				t->phase = 1;
		} else if (t->m > 0) {
			ssh_tail_release(st, t, b, trunc);
			if (c == st->endpat[0]) {
				t->m = 1;
			} else {
				run = i;
				continue;
			}
		} else {
			continue;
		}
		run = i + 1;
	}
	if (t->phase < 2 && t->m == 0 && run < n)
		ssh_keep(st, b, trunc, p + run, n - run);
}

/* The status the marker gave: a shell says 128+N for a command killed by
 * signal N, and so does the wrapper's $?. */
static bool ssh_tail_status(const struct ssh_exec_state *st, struct sg_exec_result *res)
{
	const struct ssh_tail *t = st->tail[0].phase == 2 ? &st->tail[0] : &st->tail[1];
	char num[sizeof(t->digits) + 1];
	long v;

	if (t->phase != 2)
		return false;
	memcpy(num, t->digits, t->nd);
	num[t->nd] = '\0';
	v = strtol(num, NULL, 10);
	res->signal = v > 128 && v <= 128 + 64 ? (int)(v - 128) : 0;
	res->exit_code = res->signal ? -1 : (int)v;
	return true;
}

static void ssh_sink(struct ssh_exec_state *st, int stream, const char *p, size_t n)
{
	struct sg_exec_result *res = st->res;

	if (stream == SSH_EXTENDED_DATA_STDERR) {
		ssh_tail_feed(st, &st->tail[1], &res->err, &res->err_truncated, p, n);
		return;
	}
	if (st->want_marker) {
		size_t used = ssh_eat_marker(st, p, n);

		p += used;
		n -= used;
	}
	ssh_tail_feed(st, &st->tail[0], &res->out, &res->out_truncated, p, n);
}

/* ---- reading ----------------------------------------------------------------------- */

/* One channel read that never leaves a half-sent window adjustment behind:
 * when the read blocked on sending, the same read is repeated once the
 * socket takes data. */
ssize_t ssh_chan_read(struct ssh_op *op, LIBSSH2_CHANNEL *ch, int stream, char *buf, size_t n)
{
	for (;;) {
		ssize_t rc = libssh2_channel_read_ex(ch, stream, buf, n);

		if (rc != LIBSSH2_ERROR_EAGAIN ||
		    !(libssh2_session_block_directions(op->c->session) & LIBSSH2_SESSION_BLOCK_OUTBOUND))
			return rc;
		if (ssh_op_wait(op) < 0)
			return LIBSSH2_ERROR_EAGAIN;
	}
}

enum { SSH_DRAIN_AGAIN = 0, SSH_DRAIN_MORE, SSH_DRAIN_EOF };

/* Reads a burst of one stream into the sink: SSH_DRAIN_EOF at its end,
 * SSH_DRAIN_MORE when data came, SSH_DRAIN_AGAIN when none, or an error. */
static int ssh_drain(struct ssh_op *op, LIBSSH2_CHANNEL *ch, int stream, char *buf,
		     struct ssh_exec_state *st, struct sg_err *err)
{
	int got = SSH_DRAIN_AGAIN;

	for (int i = 0; i < SSH_BURST; i++) {
		ssize_t rc = ssh_chan_read(op, ch, stream, buf, SSH_CHUNK);

		if (rc == LIBSSH2_ERROR_EAGAIN)
			return got;
		if (rc < 0)
			return ssh_fail(op, NULL, (int)rc, "reading the command's output", err);
		if (rc == 0)
			return SSH_DRAIN_EOF;
		ssh_sink(st, stream, buf, (size_t)rc);
		got = SSH_DRAIN_MORE;
	}
	return got;
}

/* ---- killing ------------------------------------------------------------------------ */

void ssh_kill_group(struct ssh_pool *p, long pgid)
{
	char num[24];
	const char *argv[] = { "/bin/sh", "-c", ssh_kill_script, "sg", num, NULL };
	struct ssh_run r = { .argv = argv, .cwd = "/", .timeout_ms = SSH_KILL_MS, .cap = 4096 };
	struct sg_exec_result res;
	struct sg_err e;

	if (pgid <= 1)
		return;
	memset(&res, 0, sizeof(res));
	snprintf(num, sizeof(num), "%ld", pgid);
	if (ssh_run(p, &r, NULL, &res, &e) < 0)
		ssh_log(p->ctx, SG_LOG_WARNING, "killing process group %ld on %s failed: %s", pgid,
			p->target.host, e.msg);
	p->ctx->host->buf_release(&res.out);
	p->ctx->host->buf_release(&res.err);
}

/* ---- starting -------------------------------------------------------------------------- */

int ssh_env_check(const struct sg_host_api *host, const char *const *env, struct sg_err *err)
{
	for (const char *const *e = env; e && *e; e++)
		if (!ssh_env_name_ok(*e))
			return host->errf(err, SG_E_INVAL,
					  "environment variable '%.60s' is not NAME=VALUE with a name of letters, digits and '_'",
					  *e);
	return 0;
}

int ssh_machine_env(const struct ssh_machine *sm, const char *const *env, char ***out)
{
	char mark[SSH_PATH_MAX + 32];
	const char *const marks[] = { mark, NULL };

	/* A jail ends with every process in it; a plain directory's processes
	 * are found by this mark when the sandbox ends (ssh_machine_kill). */
	snprintf(mark, sizeof(mark), "%s=%s", SSH_MARK_VAR, sm->dir);
	*out = ssh_env_merge(sm->jail ? NULL : marks, env);
	return *out || (sm->jail && !(env && *env)) ? 0 : -1;
}

char **ssh_env_merge(const char *const *a, const char *const *b)
{
	size_t n = 0, i = 0;
	char **v;

	for (const char *const *p = a; p && *p; p++)
		n++;
	for (const char *const *p = b; p && *p; p++)
		n++;
	if (n == 0)
		return NULL;
	v = calloc(n + 1, sizeof(*v)); /* the caller frees with ssh_strv_free() */
	if (!v)
		return NULL;
	for (const char *const *p = a; p && *p; p++)
		if (!(v[i++] = strdup(*p)))
			goto fail;
	for (const char *const *p = b; p && *p; p++)
		if (!(v[i++] = strdup(*p)))
			goto fail;
	return v;
fail:
	ssh_strv_free(v);
	return NULL;
}

/* Sends the env requests sshd takes (AcceptEnv); the rest go into *prefix
 * (borrowed strings, the vector is the caller's to free). */
static int ssh_setenv(struct ssh_op *op, LIBSSH2_CHANNEL *ch, const char *const *env,
		      const char ***prefix, struct sg_err *err)
{
	const struct sg_host_api *host = op->c->pool->ctx->host;
	size_t n = 0, k = 0;
	int rc;

	*prefix = NULL;
	for (const char *const *e = env; e && *e; e++) {
		if (!ssh_env_name_ok(*e))
			return host->errf(err, SG_E_INVAL,
					  "environment variable '%.60s' is not NAME=VALUE with a name of letters, digits and '_'",
					  *e);
		n++;
	}
	if (n == 0)
		return 0;
	*prefix = calloc(n + 1, sizeof(**prefix)); /* freed by the caller */
	if (!*prefix)
		return host->errf(err, SG_E_NOMEM, "ssh: out of memory");
	for (const char *const *e = env; *e; e++) {
		const char *eq = strchr(*e, '=');

		if (op->c->setenv_refused) {
			(*prefix)[k++] = *e;
			continue;
		}
		SSH_CALL(op, rc, libssh2_channel_setenv_ex(ch, *e, (unsigned)(eq - *e), eq + 1,
							   (unsigned)strlen(eq + 1)));
		if (rc == LIBSSH2_ERROR_CHANNEL_REQUEST_DENIED) {
			/* Remembered per connection: later commands skip the
			 * round trips that would be refused anyway. */
			op->c->setenv_refused = true;
			(*prefix)[k++] = *e;
		} else if (rc) {
			return ssh_fail(op, NULL, rc, "setting the environment", err);
		}
	}
	return 0;
}

int ssh_exec_start(struct ssh_pool *p, struct ssh_op *op, const struct sg_call *call,
		   int64_t deadline_ms, const struct ssh_run *r, bool merge, bool send_eof,
		   struct ssh_conn **cp, LIBSSH2_CHANNEL **chp, struct sg_err *err)
{
	const struct sg_host_api *host = p->ctx->host;
	struct ssh_cmdspec spec = { .command = r->command, .argv = r->argv, .cwd = r->cwd,
				    .nonce = p->ctx->nonce, .merge_stderr = merge,
				    .end_mark = r->end_mark };
	const char **prefix = NULL;
	struct sg_buf line = { 0 };
	int rc;

	if (ssh_chan_open(p, op, call, deadline_ms, cp, chp, err) < 0)
		return -1;
	if (ssh_setenv(op, *chp, r->env, &prefix, err) < 0)
		goto fail;
	spec.env_prefix = prefix;
	if (ssh_cmdline(host, &spec, &line) < 0) {
		host->errf(err, SG_E_NOMEM, "ssh: out of memory");
		goto fail;
	}
	SSH_CALL(op, rc, libssh2_channel_process_startup(*chp, "exec", 4, line.data,
							  (unsigned)line.len));
	if (rc) {
		ssh_fail(op, NULL, rc, "starting the command (exec request)", err);
		goto fail;
	}
	/* The replies this op waited for are in: others may send requests. */
	ssh_gate_drop(op);
	if (send_eof) {
		SSH_CALL(op, rc, libssh2_channel_send_eof(*chp));
		if (rc) {
			ssh_fail(op, NULL, rc, "closing the command's stdin", err);
			goto fail;
		}
	}
	free(prefix);
	host->buf_release(&line);
	return 0;
fail:
	free(prefix);
	host->buf_release(&line);
	ssh_chan_done(op, *chp);
	*chp = NULL;
	*cp = NULL;
	return -1;
}

/* ---- the pump ------------------------------------------------------------------------ */

/* How a command run ended, beyond its exit status. */
struct ssh_pump {
	enum ssh_stop stop;   /* SSH_GO, or why we killed it */
	bool closed;          /* the server closed the channel: the status is known */
	bool ended;           /* both end markers came, the channel stays open */
};

/* A stream that ended without its end marker gives back what it held. */
static void ssh_tail_eof(struct ssh_exec_state *st, bool out_eof, bool err_eof)
{
	if (out_eof && st->tail[0].phase < 2 && st->tail[0].m)
		ssh_tail_release(st, &st->tail[0], &st->res->out, &st->res->out_truncated);
	if (err_eof && st->tail[1].phase < 2 && st->tail[1].m)
		ssh_tail_release(st, &st->tail[1], &st->res->err, &st->res->err_truncated);
}

static bool ssh_cancelled(struct ssh_pool *p, const struct sg_call *call)
{
	return call && p->ctx->host->cancelled(call);
}

/* Reads both streams until the channel closes; on timeout or cancellation
 * kills the group (once its id is known) and drains for a grace period. */
static int ssh_pump(struct ssh_pool *p, struct ssh_op *op, LIBSSH2_CHANNEL *ch,
		    const struct ssh_run *r, const struct sg_call *call,
		    struct ssh_exec_state *st, struct ssh_pump *pm, struct sg_err *err)
{
	int64_t deadline = r->timeout_ms ? ssh_now_ms() + r->timeout_ms : -1, grace = -1;
	char *buf = malloc(SSH_CHUNK); /* freed below */
	bool out_eof = false, err_eof = false, killed = false;
	int ret = -1;

	if (!buf)
		return p->ctx->host->errf(err, SG_E_NOMEM, "ssh: out of memory");
	for (;;) {
		int a = SSH_DRAIN_EOF, b = SSH_DRAIN_EOF, rc;
		int64_t now;

		if ((!out_eof && (a = ssh_drain(op, ch, 0, buf, st, err)) < 0) ||
		    (!err_eof && (b = ssh_drain(op, ch, SSH_EXTENDED_DATA_STDERR, buf, st, err)) < 0))
			goto dropped;
		out_eof = a == SSH_DRAIN_EOF;
		err_eof = b == SSH_DRAIN_EOF;
		ssh_tail_eof(st, out_eof, err_eof);
		if (st->oom) {
			p->ctx->host->errf(err, SG_E_NOMEM, "ssh: out of memory");
			goto out;
		}
		if (!pm->stop && (out_eof || st->tail[0].phase == 2) &&
		    (err_eof || st->tail[1].phase == 2) &&
		    (st->tail[0].phase == 2 || st->tail[1].phase == 2) && !(out_eof && err_eof)) {
			/* The command ended; a background job holds the pipes.
			 * It is the sandbox's: killed with it (ssh_machine_kill). */
			pm->ended = true;
			break;
		}
		if (out_eof && err_eof) {
			rc = libssh2_channel_wait_closed(ch);
			if (rc == 0) {
				pm->closed = true;
				break;
			}
			if (rc != LIBSSH2_ERROR_EAGAIN) {
				ssh_fail(op, NULL, rc, "waiting for the command to end", err);
				goto dropped;
			}
		}
		now = ssh_now_ms();
		if (!pm->stop && deadline >= 0 && now >= deadline)
			pm->stop = SSH_STOP_TIMEOUT;
		else if (!pm->stop && ssh_cancelled(p, call))
			pm->stop = SSH_STOP_CANCEL;
		if (pm->stop && grace < 0)
			grace = now + SSH_GRACE_MS;
		if (pm->stop && !killed && (st->pgid > 0 || !r->group || now >= grace)) {
			killed = true;
			if (r->group && st->pgid > 0) {
				ssh_op_pause(op);
				ssh_kill_group(p, st->pgid);
				ssh_op_resume(op);
			}
			grace = ssh_now_ms() + SSH_GRACE_MS;
			continue;
		}
		if (pm->stop && killed && now >= grace)
			break; /* orphans that left the group may hold the channel open */
		if (a == SSH_DRAIN_MORE || b == SSH_DRAIN_MORE)
			continue;
		op->stop = SSH_GO;
		op->stopping = pm->stop != SSH_GO;
		op->deadline_ms = pm->stop ? grace : deadline;
		if (ssh_op_wait(op) < 0 && op->stop == SSH_STOP_BROKEN)
			goto dropped;
		if (op->stop == SSH_STOP_CANCEL)
			pm->stop = SSH_STOP_CANCEL;
	}
	ret = 0;
	goto out;
dropped:
	/* A dead connection is worth its own words: the command may or may
	 * not have finished on the host. */
	if (op->c->broken)
		p->ctx->host->errf(err, SG_E_UNAVAILABLE,
				   "ssh: the connection to %s:%u dropped while the command ran (%s): it may have been interrupted; the next call reconnects",
				   p->target.host, p->target.port, op->c->broken_why);
out:
	free(buf);
	return ret;
}

/* Exit status or signal from a closed channel. */
static void ssh_status(struct ssh_op *op, LIBSSH2_CHANNEL *ch, struct sg_exec_result *res)
{
	char *sig = NULL;
	size_t siglen = 0;

	res->exit_code = libssh2_channel_get_exit_status(ch);
	if (libssh2_channel_get_exit_signal(ch, &sig, &siglen, NULL, NULL, NULL, NULL) == 0 && sig) {
		res->signal = ssh_signal_number(sig);
		res->exit_code = -1;
		if (!res->signal)
			res->signal = 1; /* an unknown name still means "killed" */
		libssh2_free(op->c->session, sig);
	}
}

int ssh_signal_number(const char *name)
{
	static const char *const names[] = {
		NULL, "HUP", "INT", "QUIT", "ILL", "TRAP", "ABRT", "BUS", "FPE", "KILL", "USR1",
		"SEGV", "USR2", "PIPE", "ALRM", "TERM", "STKFLT", "CHLD", "CONT", "STOP", "TSTP",
		"TTIN", "TTOU", "URG", "XCPU", "XFSZ", "VTALRM", "PROF", "WINCH", "IO", "PWR", "SYS",
	};

	if (!name)
		return 0;
	if (strncmp(name, "SIG", 3) == 0)
		name += 3;
	for (int i = 1; i < (int)(sizeof(names) / sizeof(names[0])); i++)
		if (strcmp(names[i], name) == 0)
			return i;
	return 0;
}

/* Sends r->in as the command's stdin, then EOF (op held).  Our scripts
 * print nothing before stdin ends, so nothing stalls behind the window. */
static int ssh_feed(struct ssh_op *op, LIBSSH2_CHANNEL *ch, const struct ssh_run *r,
		    struct sg_err *err)
{
	const char *q = r->in;
	size_t done = 0;
	ssize_t n = 0;
	int rc;

	op->deadline_ms = r->timeout_ms ? ssh_now_ms() + r->timeout_ms : -1;
	while (done < r->in_len) {
		n = libssh2_channel_write_ex(ch, 0, q + done, r->in_len - done);
		if (n > 0)
			done += (size_t)n;
		else if (n != LIBSSH2_ERROR_EAGAIN || libssh2_channel_eof(ch) || ssh_op_wait(op) < 0)
			break; /* an EOF: the command ended without reading the rest */
	}
	if (done < r->in_len)
		return ssh_fail(op, NULL, (int)n, "sending the command's stdin", err);
	SSH_CALL(op, rc, libssh2_channel_send_eof(ch));
	return rc ? ssh_fail(op, NULL, rc, "closing the command's stdin", err) : 0;
}

/* The first line of b, for messages (ssh.h). */
void ssh_first_line(const struct sg_buf *b, char *out, size_t n)
{
	size_t len = 0;

	while (b->data && len < b->len && len + 1 < n && b->data[len] != '\n')
		len++;
	if (len)
		memcpy(out, b->data, len);
	out[len] = '\0';
}

int ssh_run(struct ssh_pool *p, const struct ssh_run *r, const struct sg_call *call,
	    struct sg_exec_result *res, struct sg_err *err)
{
	const struct sg_host_api *host = p->ctx->host;
	struct ssh_exec_state st = { .host = host, .res = res, .nonce = p->ctx->nonce,
				     .cap = r->cap ? r->cap : SG_OUTPUT_CAP_DEFAULT,
				     .want_marker = true };
	struct ssh_pump pm = { .stop = SSH_GO };
	int64_t start = ssh_now_ms() + (r->start_ms ? (int64_t)r->start_ms :
					(int64_t)p->target.connect_timeout_s * 1000 + SSH_START_MS);
	LIBSSH2_CHANNEL *ch = NULL;
	struct ssh_conn *c = NULL;
	struct ssh_op op;
	char line[200];
	struct ssh_run rr = *r;
	struct sg_err feed_err = { 0 }, pump_err = { 0 };
	bool fed = true;
	int ret = -1;

	res->exit_code = -1;
	res->signal = 0;
	rr.end_mark = true;
	st.endpat_len = (size_t)snprintf(st.endpat, sizeof(st.endpat), "\n%s end ", st.nonce);
	if (st.endpat_len >= sizeof(st.endpat))
		return host->errf(err, SG_E_INTERNAL, "ssh: the nonce is too long");
	if (ssh_exec_start(p, &op, call, start, &rr, false, !r->in, &c, &ch, err) < 0)
		return -1;
	/* A command that ends before reading all its stdin (a script refusing
	 * its target) closes the channel under the feed: its status, when it
	 * came, says why, and is the answer unless it claims success. */
	if (r->in && ssh_feed(&op, ch, r, &feed_err) < 0)
		fed = false;
	if (ssh_pump(p, &op, ch, r, call, &st, &pm, fed ? err : &pump_err) < 0) {
		if (!fed && err)
			*err = feed_err;
		goto out;
	}
	/* The marker's status, when it came, is the command's; the channel's
	 * is the wrapper's (the same, or its death by our kill). */
	if (pm.stop || !ssh_tail_status(&st, res)) {
		if (pm.closed)
			ssh_status(&op, ch, res);
	}
	if (!fed && (res->exit_code <= 0 || res->signal)) {
		if (err)
			*err = feed_err;
		goto out;
	}
	if (st.want_marker && st.noise.len) {
		/* No marker: the wrapper never ran (no /bin/sh, a login shell
		 * that refuses).  What it printed is the only clue. */
		ssh_keep(&st, &res->out, &res->out_truncated, st.noise.data, st.noise.len);
	}
	if (st.nocwd) {
		ssh_first_line(&res->err, line, sizeof(line));
		host->errf(err, SG_E_NOTFOUND, "ssh: working directory '%s' is not usable on %s: %s",
			   r->cwd, p->target.host, line[0] ? line : "no such directory");
		goto out;
	}
	res->timed_out = pm.stop == SSH_STOP_TIMEOUT;
	if (pm.stop == SSH_STOP_CANCEL) {
		host->errf(err, SG_E_CANCELLED, "cancelled: the command's process group was killed");
		goto out;
	}
	ret = 0;
out:
	ssh_chan_done(&op, ch);
	host->buf_release(&st.noise);
	return ret;
}

int ssh_script(struct ssh_pool *p, const char *const *argv, const struct sg_call *call,
	       const char *what, struct sg_err *err)
{
	const struct sg_host_api *host = p->ctx->host;
	struct ssh_run r = { .argv = argv, .cwd = "/", .timeout_ms = SSH_SCRIPT_MS, .cap = 65536 };
	struct sg_exec_result res;
	char line[240];
	int ret = -1;

	memset(&res, 0, sizeof(res));
	if (ssh_run(p, &r, call, &res, err) < 0)
		goto out;
	if (res.timed_out || res.exit_code != 0) {
		ssh_first_line(&res.err, line, sizeof(line));
		host->errf(err, SG_E_BACKEND, "ssh: %s on %s failed (%s%d): %s", what, p->target.host,
			   res.timed_out ? "timed out, exit " : res.signal ? "signal " : "exit ",
			   res.signal ? res.signal : res.exit_code, line[0] ? line : "no message");
		goto out;
	}
	ret = 0;
out:
	host->buf_release(&res.out);
	host->buf_release(&res.err);
	return ret;
}

/* ---- the exec slot ------------------------------------------------------------------ */

int ssh_exec(struct sg_machine *m, const struct sg_exec_req *req, struct sg_call *call,
	     struct sg_exec_result *res, struct sg_err *err)
{
	struct ssh_machine *sm = ssh_machine_of(m, err);
	const struct sg_host_api *host;
	struct ssh_run r;
	struct rnc_cmd c;
	char **env = NULL;
	int64_t t0 = ssh_now_ms();
	int rc;

	if (!sm)
		return -1;
	host = sm->ctx->host;
	if (!req || (!req->command) == (!req->argv) || (req->argv && !req->argv[0]))
		return host->errf(err, SG_E_INVAL, "exec: give exactly one of command and argv (a non-empty vector)");
	/* Checked here so that the runner and plain exec refuse the same. */
	if (ssh_env_check(host, req->env, err) < 0)
		return -1;
	if (ssh_machine_env(sm, req->env, &env) < 0)
		return host->errf(err, SG_E_NOMEM, "ssh: out of memory");
	r = (struct ssh_run){
		.command = req->command,
		.argv = req->argv,
		.cwd = req->cwd && *req->cwd ? req->cwd : m->workspace,
		.env = (const char *const *)env,
		.timeout_ms = req->timeout_ms,
		.cap = req->output_cap ? req->output_cap : SG_OUTPUT_CAP_DEFAULT,
		.group = true,
	};
	ssh_runner_cmd(&r, &c);
	rc = rnc_exec(ssh_site_of(sm), &c, call, res, err);
	if (rc == 1)
		rc = ssh_run(sm->pool, &r, call, res, err);
	if (rc < 0 && err && err->code == SG_E_NOTFOUND && strcmp(r.cwd, m->workspace) == 0)
		host->errf(err, SG_E_GONE,
			   "ssh: the working directory %s of sandbox '%s' is gone from %s (removed outside sandgate)",
			   m->workspace, m->id, sm->pool->target.host);
	ssh_log(sm->ctx, SG_LOG_DEBUG, "exec in %s: %s, exit %d, signal %d, %zu+%zu bytes, %lld ms%s",
		m->id, rc < 0 ? "failed" : "ran", res->exit_code, res->signal, res->out.len,
		res->err.len, (long long)(ssh_now_ms() - t0), res->timed_out ? ", timed out" : "");
	ssh_strv_free(env);
	return rc;
}
