/*
 * sandgate-runner on SSH hosts: its life per target (doc/runner-protocol.md).
 *
 * On the first command for a target ssh.so runs one small script (plain
 * exec) that reports `uname -m`, makes the runner's directory
 * ($XDG_RUNTIME_DIR/sandgate, else ~/.cache/sandgate, mode 0700) and removes
 * the files of other builds; uploads the static binary by SFTP to
 * <dir>/sandgate-runner-<build id> (temporary name, mode 0755, rename) unless
 * that build is there already; and starts `<path> --stdio` on one exec
 * channel.  From then on every command is a frame on that channel: a
 * fork+exec on the host instead of a channel open, an exec request and a
 * login shell per command.
 *
 * The channel is the runner's transport, used directly: the connection's
 * reader thread (plugins/runner/client_read.c) reads it in ssh_op_wait() like any
 * other op, so every libssh2 call happens under the connection's lock.
 *
 * Its life per target (started on the first call, again after it died,
 * plain exec for good where it cannot run) and the commands and streams
 * through it are the one runner client's (plugins/runner/rclient.h); this
 * file gives it the ops.  [ssh] runner = false forces plain exec
 * everywhere.  When sandgate closes the target for good (fini) the runner
 * gets EOF, ends, and its file is removed.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/ssh/ssh.h"
#include "plugins/runner/jailfilter.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/utsname.h>

#define RUNNER_HELLO_MS  15000
#define RUNNER_START_MS  30000  /* open + exec request of its channel */
#define RUNNER_SCRIPT_MS 30000  /* the prepare script */
#define RUNNER_RM_MS     5000   /* removing its file at the end */
#define RUNNER_WRITE_MS  30000  /* a frame must be taken within this */
#define RUNNER_CLOSE_MS  3000   /* after our EOF it ends within this */
#define RUNNER_DIRS      2
#define RUNNER_LINE_MAX  400

/* $1 the build id.  Prints "arch <uname -m>", then for each usable
 * directory "have <dir>" (this build is there) or "dir <dir>".  Files of
 * other builds go; so do temporary files of uploads that died an hour ago. */
static const char runner_prepare_script[] =
	"id=$1; printf 'arch %s\\n' \"$(uname -m)\"; "
	"for d in ${XDG_RUNTIME_DIR:+\"$XDG_RUNTIME_DIR/sandgate\"} "
	"${HOME:+\"$HOME/.cache/sandgate\"}; do "
	"case $d in /*) ;; *) continue;; esac; "
	"(umask 077 && mkdir -p -- \"$d\") 2>/dev/null || continue; "
	"chmod 700 -- \"$d\" 2>/dev/null; "
	"[ -d \"$d\" ] && [ -w \"$d\" ] && [ -x \"$d\" ] || continue; "
	"for f in \"$d\"/sandgate-runner-*; do "
	"[ \"$f\" = \"$d/sandgate-runner-$id\" ] || rm -f -- \"$f\"; done; "
	"find \"$d\" -maxdepth 1 -name '.sandgate-*.tmp' -mmin +60 -exec rm -f -- {} + "
	"2>/dev/null; "
	"if [ -f \"$d/sandgate-runner-$id\" ] && [ -x \"$d/sandgate-runner-$id\" ]; "
	"then printf 'have %s\\n' \"$d\"; else printf 'dir %s\\n' \"$d\"; fi; "
	"done; exit 0";

/* ---- the binary on this host ------------------------------------------------------ */

/* Reads the binary once (plugins/runner/binary.c finds it).  0, or -1 with why. */
static int runner_binary(struct ssh_ctx *ctx, char *why, size_t size)
{
	int rc;

	pthread_mutex_lock(&ctx->bin_lock);
	if (!ctx->bin_tried) {
		ctx->bin_tried = true;
		if (rn_binary_load(&ctx->bin, ctx->host->config_get("ssh", "runner_path"),
				   "[ssh] runner_path", ctx->bin_why, sizeof(ctx->bin_why)) == 0)
			ssh_log(ctx, SG_LOG_DEBUG, "runner binary %s, build %s, %zu bytes",
				ctx->bin.path, ctx->bin.id, ctx->bin.len);
	}
	rc = ctx->bin.data ? 0 : -1;
	if (rc < 0)
		snprintf(why, size, "%s", ctx->bin_why);
	pthread_mutex_unlock(&ctx->bin_lock);
	return rc;
}

void ssh_runner_setup(struct ssh_ctx *ctx)
{
	const char *v = ctx->host->config_get("ssh", "runner");
	const char *f = getenv("SANDGATE_RUNNER_FAULTS");

	ctx->runner_on = !v || !*v || !(strcasecmp(v, "false") == 0 || strcasecmp(v, "no") == 0 ||
					strcasecmp(v, "off") == 0 || strcmp(v, "0") == 0);
	/* Test hook: lets the runner break frames on purpose (runner.h). */
	ctx->runner_faults = f && strcmp(f, "1") == 0;
	pthread_mutex_init(&ctx->bin_lock, NULL);
	if (!ctx->runner_on)
		ssh_log(ctx, SG_LOG_INFO, "[ssh] runner = false: commands use plain exec");
}

void ssh_runner_teardown(struct ssh_ctx *ctx)
{
	rn_binary_free(&ctx->bin);
	pthread_mutex_destroy(&ctx->bin_lock);
}

/* ---- the transport: the runner's channel ---------------------------------------------- */

/* Owned by the runner connection (rn_conn) from rn_conn_open() on; freed by
 * its free(), after the reader thread ended. */
struct runner_chan {
	struct ssh_pool *pool;        /* borrowed: pools live until fini */
	struct ssh_rsite *rs;         /* borrowed: its site, which outlives it */
	struct ssh_conn *c;           /* a reference and a slot, given back by free() */
	LIBSSH2_CHANNEL *ch;          /* owned */
	bool closing;                 /* guarded by c->lock: shutdown() came */
	/* The reader thread's (and free()'s, which runs after it): */
	bool want_marker;             /* the wrapper's "<nonce> <pid>" line is ahead */
	char line[128];
	size_t line_len;
	bool line_long;
	char errline[RUNNER_LINE_MAX];
	size_t err_len;
	unsigned err_lines;           /* logged so far (RUNNER_LOG_LINES at most) */
	char who[SSH_USER_MAX + SSH_HOST_MAX + 16];
	char buf[4096];
};

/* Stores into the site's note or status (tlock: the starter reads them). */
static void rchan_store(struct runner_chan *t, char *dst, size_t n, const char *text)
{
	size_t len = strnlen(text, n - 1);

	pthread_mutex_lock(&t->rs->tlock);
	memcpy(dst, text, len); /* cut to fit: these are notes */
	dst[len] = '\0';
	pthread_mutex_unlock(&t->rs->tlock);
}

/* Lines of a runner's stderr that reach the log, a connection: a runner
 * says a few; what speaks there beyond is not sandgate's log to fill. */
#define RUNNER_LOG_LINES 64

/* One finished stderr line: the log, and the note for a failed start
 * ("exec: ...: Permission denied" says more than "EOF"). */
static void rchan_note_line(struct runner_chan *t)
{
	if (t->err_len == 0)
		return;
	t->errline[t->err_len] = '\0';
	t->err_len = 0;
	rchan_store(t, t->rs->note, sizeof(t->rs->note), t->errline);
	if (t->err_lines < RUNNER_LOG_LINES)
		ssh_log(t->pool->ctx, SG_LOG_INFO, "runner on %s: %s", t->who, t->errline);
	else if (t->err_lines == RUNNER_LOG_LINES)
		ssh_log(t->pool->ctx, SG_LOG_WARNING, "runner on %s: more than %u lines on stderr: "
			"the rest is not logged", t->who, RUNNER_LOG_LINES);
	if (t->err_lines <= RUNNER_LOG_LINES)
		t->err_lines++;
}

static void rchan_note(struct runner_chan *t, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)p[i];

		if (ch == '\n')
			rchan_note_line(t);
		else if (t->err_len + 1 < sizeof(t->errline)) /* no terminal escapes in the log */
			t->errline[t->err_len++] = ch < 0x20 || ch == 0x7f ? ' ' : (char)ch;
	}
}

/* Takes what the runner (or the login shell before it) wrote on stderr, so
 * it never holds the channel's window (lock held). */
static void rchan_drain_err(struct runner_chan *t, struct ssh_op *op)
{
	for (int i = 0; i < 16; i++) {
		ssize_t r = ssh_chan_read(op, t->ch, SSH_EXTENDED_DATA_STDERR, t->buf, sizeof(t->buf));

		if (r <= 0)
			return;
		rchan_note(t, t->buf, (size_t)r);
	}
}

/* Eats stdout up to and including the wrapper's line (what a chatty login
 * shell prints before it is dropped); returns the bytes eaten from p. */
static size_t rchan_marker(struct runner_chan *t, const char *p, size_t n)
{
	const char *nonce = t->pool->ctx->nonce;
	size_t k = strlen(nonce);

	for (size_t i = 0; i < n; i++) {
		bool ours;

		if (p[i] != '\n') {
			if (t->line_len + 1 < sizeof(t->line))
				t->line[t->line_len++] = p[i];
			else
				t->line_long = true;
			continue;
		}
		ours = !t->line_long && t->line_len > k + 1 && memcmp(t->line, nonce, k) == 0 &&
		       t->line[k] == ' ';
		t->line_len = 0;
		t->line_long = false;
		if (ours) {
			t->want_marker = false;
			return i + 1;
		}
	}
	return n;
}

/* The runner's stdout: only the connection's reader thread calls this. */
static ssize_t rchan_read(void *ud, void *p, size_t n)
{
	struct runner_chan *t = ud;
	struct ssh_op op;
	struct sg_err e;
	ssize_t r = -1;
	size_t eaten;

	ssh_op_init(&op, t->c, NULL, -1);
	if (ssh_op_begin(&op) < 0)
		goto out;
	for (;;) {
		if (t->closing) {
			r = 0;
			break;
		}
		r = ssh_chan_read(&op, t->ch, 0, p, n);
		if (r > 0 && t->want_marker) {
			eaten = rchan_marker(t, p, (size_t)r);
			r -= (ssize_t)eaten;
			if (r == 0)
				continue;
			memmove(p, (char *)p + eaten, (size_t)r);
		}
		if (r > 0)
			break;
		rchan_drain_err(t, &op);
		if (r == 0)
			break;
		if (r != LIBSSH2_ERROR_EAGAIN) {
			/* A transport error breaks the connection (ssh_fail says
			 * so); any other means the channel is gone: its EOF. */
			if (ssh_rc_is_transport((int)r)) {
				ssh_fail(&op, NULL, (int)r, "reading from the runner", &e);
				r = -1;
			} else {
				r = 0;
			}
			break;
		}
		if (ssh_op_wait(&op) < 0) {
			r = -1;
			break;
		}
	}
	if (r == 0)
		rchan_note_line(t);
out:
	ssh_op_end(&op);
	if (r < 0)
		errno = ECONNRESET; /* the client words it; the lost op asks ssh_conn_dropped() */
	return r;
}

/* A frame to the runner's stdin (calls are serialised by the connection). */
static int rchan_write(void *ud, const void *p, size_t n)
{
	struct runner_chan *t = ud;
	const char *q = p;
	struct ssh_op op;
	struct sg_err e;
	ssize_t w;

	/* A runner that takes nothing for this long is as good as dead. */
	ssh_op_init(&op, t->c, NULL, ssh_now_ms() + RUNNER_WRITE_MS);
	if (ssh_op_begin(&op) < 0)
		goto out;
	while (n > 0 && !t->closing) {
		w = libssh2_channel_write_ex(t->ch, 0, q, n);
		if (w > 0) {
			q += w;
			n -= (size_t)w;
			continue;
		}
		if (w == LIBSSH2_ERROR_EAGAIN && ssh_op_wait(&op) == 0)
			continue;
		if (w != LIBSSH2_ERROR_EAGAIN)
			ssh_fail(&op, NULL, (int)w, "writing to the runner", &e);
		break;
	}
out:
	ssh_op_end(&op);
	return n == 0 ? 0 : -1;
}

/* Wakes the reader (it returns EOF) and fails later writes. */
static void rchan_shutdown(void *ud)
{
	struct runner_chan *t = ud;

	pthread_mutex_lock(&t->c->lock);
	t->closing = true;
	ssh_conn_kick(t->c, NULL);
	pthread_mutex_unlock(&t->c->lock);
}

/* How the channel ended, for the next start's log line (lock held). */
static void rchan_exit_status(struct runner_chan *t)
{
	char *sig = NULL, text[64];
	size_t siglen = 0;

	if (libssh2_channel_get_exit_signal(t->ch, &sig, &siglen, NULL, NULL, NULL, NULL) == 0 && sig) {
		snprintf(text, sizeof(text), "killed by SIG%.20s", sig);
		libssh2_free(t->c->session, sig);
	} else {
		snprintf(text, sizeof(text), "exit status %d", libssh2_channel_get_exit_status(t->ch));
	}
	rchan_store(t, t->rs->status, sizeof(t->rs->status), text);
}

/* Our EOF, then the runner's (it ends its commands and exits), then the
 * channel's close with its status; bounded by op's deadline. */
static void rchan_finish(struct runner_chan *t, struct ssh_op *op)
{
	ssize_t r;
	int rc;

	SSH_CALL(op, rc, libssh2_channel_send_eof(t->ch));
	for (;;) {
		r = ssh_chan_read(op, t->ch, 0, t->buf, sizeof(t->buf));
		rchan_drain_err(t, op);
		if (r == 0)
			break;
		/* Output still flowing counts against the deadline too. */
		if ((r < 0 && r != LIBSSH2_ERROR_EAGAIN) || ssh_now_ms() >= op->deadline_ms)
			return;
		if (r == LIBSSH2_ERROR_EAGAIN && ssh_op_wait(op) < 0)
			return;
	}
	SSH_CALL(op, rc, libssh2_channel_wait_closed(t->ch));
	if (rc == 0)
		rchan_exit_status(t);
}

static void rchan_free(void *ud)
{
	struct runner_chan *t = ud;
	struct ssh_op op;

	ssh_op_init(&op, t->c, NULL, ssh_now_ms() + RUNNER_CLOSE_MS);
	op.stopping = true;
	if (ssh_op_begin(&op) == 0)
		rchan_finish(t, &op);
	ssh_chan_done(&op, t->ch); /* ends op, gives back the slot and the reference */
	free(t);
}

/* ---- starting it ----------------------------------------------------------------------- */

static void runner_log_cb(void *ud, enum rn_log_level level, const char *msg)
{
	const struct ssh_ctx *ctx = ud;

	ssh_log(ctx, level == RN_LOG_WARNING ? SG_LOG_WARNING :
		level == RN_LOG_INFO ? SG_LOG_INFO : SG_LOG_DEBUG, "%s", msg);
}

static const char *runner_who(const struct ssh_pool *p, char *buf, size_t n)
{
	return ssh_target_str(&p->target, buf, n);
}

/* Starts `path --stdio` on a new channel and greets it.  Returns 0 with
 * *out and a reference on its SSH connection in *scp; 1 when it did not
 * run (why); -1 with err when the connection failed. */
/* ---- the jail of a jailed sandbox ------------------------------------------------------ */

/* Host files a jail's /etc gets read-only where they exist (as local.so's). */
static const char *const jail_etc[] = {
	"/etc/alternatives", "/etc/ssl/certs", "/etc/ssl/openssl.cnf", "/etc/ca-certificates",
	"/etc/ca-certificates.conf", "/etc/resolv.conf", "/etc/nsswitch.conf", "/etc/host.conf",
	"/etc/gai.conf", "/etc/protocols", "/etc/services", "/etc/localtime", "/etc/timezone",
	"/etc/locale.alias", "/etc/default/locale", "/etc/ld.so.cache", "/etc/ld.so.conf",
	"/etc/ld.so.conf.d", "/etc/mime.types", "/etc/bash.bashrc", "/etc/profile", "/etc/inputrc",
	"/etc/os-release", NULL
};

#define JAIL_ARGS_MAX 200

/* The argv of a jail whose first process is the runner at path (on the
 * host), run as `/.sandgate-runner arg`.  Strings live in bufs. */
struct jail_argv {
	const char *v[JAIL_ARGS_MAX];
	int n;
	char bufs[8][SSH_PATH_MAX + 32];
	int nb;
	char filter[4 * 512 + 1];        /* the seccomp filter as printf's \ooo escapes */
};

/* bwrap takes its seccomp filter on a descriptor (--seccomp 9): a shell
 * writes it beside the jail's /etc files at each start (a sandbox made by
 * an older sandgate has none yet) and hands it over.  $1 the /etc files'
 * directory, $2 the filter as octal escapes (every byte: no '%' for
 * printf to take as a conversion), then bwrap's argv. */
static const char jail_start_script[] =
	"f=$1/seccomp && printf \"$2\" > \"$f\" && shift 2 && exec \"$@\" 9< \"$f\"";

/* The filter (plugins/runner/jailfilter.c) as \ooo escapes in a->filter. */
static void ja_filter(struct jail_argv *a)
{
	size_t len, n = 0;
	const unsigned char *p = rn_jail_filter(&len);

	for (size_t i = 0; i < len && n + 5 <= sizeof(a->filter); i++)
		n += (size_t)snprintf(a->filter + n, sizeof(a->filter) - n, "\\%03o", p[i]);
}

static void ja_add(struct jail_argv *a, const char *s)
{
	if (a->n < JAIL_ARGS_MAX - 1)
		a->v[a->n++] = s;
	a->v[a->n] = NULL;
}

static const char *ja_fmt(struct jail_argv *a, const char *dir, const char *name)
{
	char *b = a->bufs[a->nb < 7 ? a->nb++ : 7];

	snprintf(b, sizeof(a->bufs[0]), "%s%s%s", dir, name ? "/" : "", name ? name : "");
	return b;
}

static void jail_argv(struct ssh_rsite *rs, const char *path, const char *arg, struct jail_argv *a)
{
	static const char *const ns[] = { "--unshare-user", "--unshare-pid", "--unshare-ipc",
					   "--unshare-uts", "--unshare-cgroup-try", NULL };
	static const char *const tops[] = { "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", NULL };
	static const char *const etc_files[] = { "passwd", "group", "hosts", "hostname", NULL };
	struct ssh_pool *p = rs->pool;

	a->n = a->nb = 0;
	ja_filter(a);
	ja_add(a, "/bin/sh");
	ja_add(a, "-c");
	ja_add(a, jail_start_script);
	ja_add(a, "sh");
	ja_add(a, rs->etc);
	ja_add(a, a->filter);
	if (!p->bwrap_clearenv) { /* before bwrap 0.5: bwrap starts with none */
		ja_add(a, "env");
		ja_add(a, "-i");
		ja_add(a, "PATH=/usr/bin:/bin");
	}
	ja_add(a, "bwrap");
	for (int i = 0; ns[i]; i++)
		ja_add(a, ns[i]);
	if (!p->target.network_host)
		ja_add(a, "--unshare-net");
	if (p->bwrap_disable_userns)
		ja_add(a, "--disable-userns");
	ja_add(a, "--die-with-parent");
	ja_add(a, "--new-session");
	/* The runner is the pid namespace's init (no SIGSTOP or SIGKILL from
	 * inside: a command froze it, and the shared connection's teardown
	 * waited on it), and no capability of a root SSH user's stays. */
	ja_add(a, "--as-pid-1");
	ja_add(a, "--cap-drop");
	ja_add(a, "ALL");
	ja_add(a, "--hostname");
	ja_add(a, rs->hostname);
	ja_add(a, "--ro-bind");
	ja_add(a, "/usr");
	ja_add(a, "/usr");
	for (int i = 0; tops[i]; i++) {
		ja_add(a, "--ro-bind-try");
		ja_add(a, tops[i]);
		ja_add(a, tops[i]);
	}
	for (int i = 0; jail_etc[i]; i++) {
		ja_add(a, "--ro-bind-try");
		ja_add(a, jail_etc[i]);
		ja_add(a, jail_etc[i]);
	}
	for (int i = 0; etc_files[i]; i++) {
		ja_add(a, "--ro-bind");
		ja_add(a, ja_fmt(a, rs->etc, etc_files[i]));
		ja_add(a, ja_fmt(a, "/etc", etc_files[i]));
	}
	ja_add(a, "--proc");
	ja_add(a, "/proc");
	ja_add(a, "--dev");
	ja_add(a, "/dev");
	ja_add(a, "--tmpfs");
	ja_add(a, "/tmp");
	ja_add(a, "--bind");
	ja_add(a, rs->dir);
	ja_add(a, "/workspace");
	ja_add(a, "--ro-bind");
	ja_add(a, path);
	ja_add(a, "/.sandgate-runner");
	ja_add(a, "--remount-ro");
	ja_add(a, "/");
	ja_add(a, "--chdir");
	ja_add(a, "/workspace");
	/* Not sshd's session environment (SetEnv, pam_env: a proxy's
	 * credentials, SSH_CONNECTION): what a local jail gets. */
	if (p->bwrap_clearenv)
		ja_add(a, "--clearenv");
	ja_add(a, "--setenv");
	ja_add(a, "USER");
	ja_add(a, p->target.user);
	ja_add(a, "--setenv");
	ja_add(a, "LOGNAME");
	ja_add(a, p->target.user);
	ja_add(a, "--setenv");
	ja_add(a, "PATH");
	ja_add(a, "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	ja_add(a, "--setenv");
	ja_add(a, "LANG");
	ja_add(a, "C.UTF-8");
	ja_add(a, "--setenv");
	ja_add(a, "HOME");
	ja_add(a, "/workspace");
	ja_add(a, "--setenv");
	ja_add(a, "TMPDIR");
	ja_add(a, "/tmp");
	if (a->filter[0]) { /* the keyrings: doc/local.md */
		ja_add(a, "--seccomp");
		ja_add(a, "9");
	}
	ja_add(a, "--");
	ja_add(a, "/.sandgate-runner");
	ja_add(a, arg);
}

static int runner_launch(struct ssh_rsite *rs, const char *path, const char *arg,
			 struct rn_conn **out, struct ssh_conn **scp, char *why, size_t size,
			 struct sg_err *err)
{
	struct ssh_pool *p = rs->pool;
	struct ssh_ctx *ctx = p->ctx;
	const char *plain[] = { path, arg, NULL };
	struct jail_argv *ja = rs->jailed ? calloc(1, sizeof(*ja)) : NULL; /* freed below */
	struct ssh_run r = { .argv = plain, .cwd = "/" };
	struct runner_chan *t = calloc(1, sizeof(*t)); /* owned by the connection once opened */
	struct rn_conn_opts o = { .build_id = ctx->bin.id, .hello_timeout_ms = RUNNER_HELLO_MS,
				  .log = runner_log_cb, .log_ud = ctx };
	struct rn_transport tr;
	struct ssh_op op;
	struct ssh_conn *c;
	LIBSSH2_CHANNEL *ch;
	char dropped[256];
	int rc;

	if (!t || (rs->jailed && !ja)) {
		free(t);
		return ctx->host->errf(err, SG_E_NOMEM, "ssh: out of memory");
	}
	if (ja) {
		jail_argv(rs, path, arg, ja);
		r.argv = ja->v;
	}
	rc = ssh_exec_start(p, &op, NULL, ssh_now_ms() + RUNNER_START_MS, &r, false, false, &c, &ch,
			    err);
	free(ja);
	if (rc < 0) {
		free(t);
		return -1;
	}
	t->pool = p;
	t->rs = rs;
	t->c = c;
	t->ch = ch;
	t->want_marker = true;
	runner_who(p, t->who, sizeof(t->who));
	ssh_op_end(&op);
	ssh_conn_get(c); /* for *scp, or dropped below */
	pthread_mutex_lock(&rs->tlock);
	rs->note[0] = rs->status[0] = '\0';
	pthread_mutex_unlock(&rs->tlock);
	tr = (struct rn_transport){ .read = rchan_read, .write = rchan_write,
				    .shutdown = rchan_shutdown, .free = rchan_free, .ud = t };
	o.name = t->who;
	rc = rn_conn_open(&tr, &o, out, why, size); /* t is the connection's now */
	if (rc == 0) {
		*scp = c;
		return 0;
	}
	if (ssh_conn_dropped(c, dropped, sizeof(dropped))) {
		rc = ctx->host->errf(err, SG_E_UNAVAILABLE, "ssh: the connection to %s:%u dropped while "
				     "the runner started (%s)", p->target.host, p->target.port, dropped);
	} else if (rc == -2) {
		/* Slow, not impossible: the next call tries again. */
		rc = ctx->host->errf(err, SG_E_TIMEOUT, "ssh: the runner on %s:%u did not start in "
				     "time (%s)", p->target.host, p->target.port, why);
	} else {
		rc = 1;
		pthread_mutex_lock(&rs->tlock);
		if (rs->note[0]) /* the shell's own words say more than "EOF" */
			snprintf(why + strlen(why), size - strlen(why), ": %s", rs->note);
		pthread_mutex_unlock(&rs->tlock);
	}
	ssh_conn_put(c);
	return rc;
}

/* What the prepare script found. */
struct runner_plan {
	char arch[64];
	char dir[RUNNER_DIRS][SSH_PATH_MAX];
	bool have[RUNNER_DIRS];
	int n;
};

static void runner_plan_parse(struct runner_plan *pl, const struct sg_buf *out)
{
	const char *p = out->data, *end = out->data + out->len;

	memset(pl, 0, sizeof(*pl));
	while (p && p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);

		if (len > 5 && memcmp(p, "arch ", 5) == 0 && len - 5 < sizeof(pl->arch)) {
			memcpy(pl->arch, p + 5, len - 5);
		} else if (pl->n < RUNNER_DIRS && len > 5 && len - 5 < SSH_PATH_MAX &&
			   (memcmp(p, "have ", 5) == 0 || memcmp(p, "dir ", 4) == 0)) {
			size_t off = p[0] == 'h' ? 5 : 4;

			memcpy(pl->dir[pl->n], p + off, len - off);
			pl->have[pl->n++] = p[0] == 'h';
		}
		p = nl ? nl + 1 : end;
	}
}

/* Runs the prepare script.  0 with the plan, 1 (why) when the host cannot
 * take the runner, -1 with err when the host is unreachable. */
static int runner_prepare(struct ssh_pool *p, struct runner_plan *pl, char *why, size_t size,
			  struct sg_err *err)
{
	const struct sg_host_api *host = p->ctx->host;
	const char *argv[] = { "/bin/sh", "-c", runner_prepare_script, "sg", p->ctx->bin.id, NULL };
	struct ssh_run r = { .argv = argv, .cwd = "/", .timeout_ms = RUNNER_SCRIPT_MS, .cap = 65536 };
	struct sg_exec_result res;
	int rc = 0;

	memset(&res, 0, sizeof(res));
	if (ssh_run(p, &r, NULL, &res, err) < 0) {
		rc = -1;
	} else if (res.exit_code != 0) {
		snprintf(why, size, "preparing its directory failed (exit %d): %.150s", res.exit_code,
			 res.err.data ? res.err.data : "no message");
		rc = 1;
	} else {
		runner_plan_parse(pl, &res.out);
	}
	host->buf_release(&res.out);
	host->buf_release(&res.err);
	return rc;
}

/* The file is ours to upload: 0, 1 (why: try another place), -1 (err). */
static int runner_upload(struct ssh_pool *p, const char *path, char *why, size_t size,
			 struct sg_err *err)
{
	struct ssh_ctx *ctx = p->ctx;
	struct sg_err e = { 0 };

	if (ssh_sftp_put(p, path, ctx->bin.data, ctx->bin.len, 0755, &e) == 0)
		return 0;
	if (e.code == SG_E_UNAVAILABLE || e.code == SG_E_CANCELLED) {
		*err = e;
		return -1;
	}
	snprintf(why, size, "uploading: %.200s", e.msg);
	return 1;
}

/* Best effort: a file that could not run is no use to anyone. */
static void runner_remove(struct ssh_pool *p, const char *path)
{
	const char *argv[] = { "rm", "-f", "--", path, NULL };
	struct ssh_run r = { .argv = argv, .cwd = "/", .timeout_ms = RUNNER_RM_MS,
			     .cap = 4096, .start_ms = RUNNER_RM_MS };
	struct sg_exec_result res;
	struct sg_err e;

	memset(&res, 0, sizeof(res));
	if (ssh_run(p, &r, NULL, &res, &e) < 0 || res.exit_code != 0)
		ssh_log(p->ctx, SG_LOG_INFO, "could not remove the runner %s on %s: %s", path,
			p->target.host, res.err.len ? res.err.data : e.msg);
	else
		ssh_log(p->ctx, SG_LOG_DEBUG, "removed the runner %s on %s", path, p->target.host);
	p->ctx->host->buf_release(&res.out);
	p->ctx->host->buf_release(&res.err);
}

/* Tries one directory: upload when needed, start.  Returns as runner_launch;
 * *uploaded when this call put the file there. */
static int runner_try_dir(struct ssh_rsite *rs, const char *path, bool have, const char *arg,
			  struct rn_conn **out, struct ssh_conn **scp, bool *uploaded, char *why,
			  size_t size, struct sg_err *err)
{
	struct ssh_pool *p = rs->pool;
	int rc = 1;

	for (int attempt = 0; attempt < 2; attempt++) {
		if (!have || attempt > 0) {
			rc = runner_upload(p, path, why, size, err);
			if (rc != 0)
				return rc;
			*uploaded = true;
		}
		why[0] = '\0';
		rc = runner_launch(rs, path, arg, out, scp, why, size, err);
		/* Removed under us (another sandgate of this build ended its
		 * connection): once more with a fresh upload. */
		if (rc <= 0 || !(strstr(why, "not found") || strstr(why, "No such file")))
			return rc;
	}
	return rc;
}

/* Finds a place and starts the runner.  0 (*out, *scp, rpath), 1 when it
 * cannot run here (why), -1 with err. */
static int runner_start(struct ssh_rsite *rs, const char *arg, struct rn_conn **out,
			struct ssh_conn **scp, char *rpath, size_t rsize, char *why, size_t size,
			struct sg_err *err)
{
	struct ssh_pool *p = rs->pool;
	struct runner_plan pl;
	struct utsname un;
	char path[SSH_PATH_MAX], step[320];
	bool uploaded;
	int rc;

	if (runner_binary(p->ctx, why, size) < 0)
		return 1;
	rc = runner_prepare(p, &pl, why, size, err);
	if (rc != 0)
		return rc;
	if (uname(&un) == 0 && strcmp(pl.arch, un.machine) != 0)
		return snprintf(why, size, "the host is %s, the runner binary is built for %s",
				pl.arch[0] ? pl.arch : "of an unknown architecture", un.machine), 1;
	if (pl.n == 0)
		return snprintf(why, size, "no writable directory for it ($XDG_RUNTIME_DIR/sandgate "
				"or ~/.cache/sandgate)"), 1;
	why[0] = '\0';
	for (int i = 0; i < pl.n; i++) {
		if ((size_t)snprintf(path, sizeof(path), "%s/sandgate-runner-%s", pl.dir[i],
				     p->ctx->bin.id) >= sizeof(path))
			continue; /* a $HOME that long is not worth a message */
		uploaded = false;
		rc = runner_try_dir(rs, path, pl.have[i], arg, out, scp, &uploaded, step, sizeof(step),
				    err);
		if (rc == 0)
			snprintf(rpath, rsize, "%s", path);
		if (rc <= 0)
			return rc;
		snprintf(why + strlen(why), size - strlen(why), "%s%s: %.200s", i ? "; " : "",
			 pl.dir[i], step);
		if (uploaded)
			runner_remove(p, path);
	}
	return 1;
}

/* ---- the ops ----------------------------------------------------------------------------- */

/* The start op: SG_E_NOTSUP when it cannot run on this host (plain exec for
 * good), SG_E_UNAVAILABLE and the like when the host is unreachable. */
static int rsite_start(void *ud, const char *arg, struct rn_conn **out, char *rpath, size_t rsize,
		       struct sg_err *err)
{
	struct ssh_rsite *rs = ud;
	struct ssh_conn *sc = NULL, *old;
	char why[640];
	int rc = runner_start(rs, arg, out, &sc, rpath, rsize, why, sizeof(why), err);

	if (rc < 0)
		return -1;
	if (rc > 0)
		return rs->pool->ctx->host->errf(err, SG_E_NOTSUP, "%s", why);
	pthread_mutex_lock(&rs->tlock);
	old = rs->sc;
	rs->sc = sc;
	pthread_mutex_unlock(&rs->tlock);
	if (old)
		ssh_conn_put(old);
	return 0;
}

/* After the connection closed: how its channel ended; the SSH connection
 * under it is let go. */
static void rsite_ended(void *ud, char *how, size_t size)
{
	struct ssh_rsite *rs = ud;
	struct ssh_conn *sc;

	pthread_mutex_lock(&rs->tlock);
	sc = rs->sc;
	rs->sc = NULL;
	snprintf(how, size, "%s", rs->status);
	pthread_mutex_unlock(&rs->tlock);
	if (sc)
		ssh_conn_put(sc);
}

static void rsite_kill_group(void *ud, long pgid)
{
	struct ssh_rsite *rs = ud;

	/* On a new connection (if the host is there); by then a server that
	 * went away has surely closed the old one too. */
	ssh_kill_group(rs->pool, pgid);
}

/* The SSH connection under the runner dropped: the host went, not just the
 * runner. */
static bool rsite_lost(void *ud, struct sg_err *err)
{
	struct ssh_rsite *rs = ud;
	struct ssh_pool *p = rs->pool;
	struct ssh_conn *sc;
	char dropped[256];
	bool gone;

	pthread_mutex_lock(&rs->tlock);
	sc = rs->sc;
	if (sc)
		ssh_conn_get(sc);
	pthread_mutex_unlock(&rs->tlock);
	if (!sc)
		return false;
	gone = ssh_conn_dropped(sc, dropped, sizeof(dropped));
	ssh_conn_put(sc);
	if (gone)
		p->ctx->host->errf(err, SG_E_UNAVAILABLE, "ssh: the connection to %s:%u dropped while "
				   "the command ran (%s): it may have been interrupted; the next call "
				   "reconnects", p->target.host, p->target.port, dropped);
	return gone;
}

static const struct rnc_ops rsite_ops = {
	.tag = SSH_PLUGIN,
	.plain = "plain exec",
	.start = rsite_start,
	.ended = rsite_ended,
	.kill_group = rsite_kill_group,
	.lost = rsite_lost,
};

/* A jailed sandbox: the same start, refused rather than run another way. */
static int jail_site_start(void *ud, const char *arg, struct rn_conn **out, char *rpath,
			   size_t rsize, struct sg_err *err)
{
	struct ssh_rsite *rs = ud;
	struct ssh_pool *p = rs->pool;
	char who[SSH_USER_MAX + SSH_HOST_MAX + 16], msg[sizeof(err->msg)];

	if (rsite_start(ud, arg, out, rpath, rsize, err) == 0)
		return 0;
	if (!err || err->code != SG_E_NOTSUP)
		return -1;
	snprintf(msg, sizeof(msg), "%s", err->msg);
	return p->ctx->host->errf(err, SG_E_UNAVAILABLE, "ssh: the jail of this sandbox did not "
				  "start on %s (%.300s): bubblewrap must be able to make unprivileged "
				  "user namespaces there (sysctl kernel.unprivileged_userns_clone=1, "
				  "user.max_user_namespaces > 0, an AppArmor profile for bwrap), and "
				  "the runner must run there; a jailed sandbox never runs unconfined",
				  ssh_target_str(&p->target, who, sizeof(who)), msg);
}

/* A jail's commands live in its pid namespace, which ends with its runner:
 * there is no group to kill from outside (and a group number from inside
 * means nothing on the host). */
static void jail_kill_group(void *ud, long pgid)
{
	(void)ud;
	(void)pgid;
}

static const struct rnc_ops jail_ops = {
	.tag = SSH_PLUGIN,
	.plain = NULL, /* no way around the jail */
	.start = jail_site_start,
	.ended = rsite_ended,
	.kill_group = jail_kill_group,
	.lost = rsite_lost,
};

struct ssh_rsite *ssh_jail_new(struct ssh_pool *p, const char *id, const char *dir,
			       const char *etc, struct sg_err *err)
{
	struct ssh_rsite *rs = calloc(1, sizeof(*rs)); /* ssh_jail_free() */
	char who[SSH_USER_MAX + SSH_HOST_MAX + 16], where[sizeof(who) + SSH_ID_MAX + 8];

	if (!rs) {
		p->ctx->host->errf(err, SG_E_NOMEM, "ssh: out of memory");
		return NULL;
	}
	rs->pool = p;
	rs->jailed = true;
	snprintf(rs->dir, sizeof(rs->dir), "%s", dir);
	snprintf(rs->etc, sizeof(rs->etc), "%s", etc);
	snprintf(rs->hostname, sizeof(rs->hostname), "%s", id);
	pthread_mutex_init(&rs->tlock, NULL);
	snprintf(where, sizeof(where), "in %s on %s", id, ssh_target_str(&p->target, who, sizeof(who)));
	/* On even with [ssh] runner = false: a jail has no other way in. */
	rnc_site_init(&rs->site, p->ctx->host, &jail_ops, rs, where, true, p->ctx->runner_faults);
	return rs;
}

void ssh_jail_free(struct ssh_rsite *rs)
{
	char how[64];

	if (!rs)
		return;
	rnc_site_fini(&rs->site); /* EOF: the runner ends, and its jail with it */
	rsite_ended(rs, how, sizeof(how));
	pthread_mutex_destroy(&rs->tlock);
	free(rs);
}

struct rnc_site *ssh_site_of(struct ssh_machine *sm)
{
	return sm->jail ? &sm->jail->site : &sm->pool->runner.site;
}

/* ---- per target --------------------------------------------------------------------------- */

void ssh_runner_pool_init(struct ssh_pool *p)
{
	char who[SSH_USER_MAX + SSH_HOST_MAX + 16], where[sizeof(who) + 4];

	snprintf(where, sizeof(where), "on %s", ssh_target_str(&p->target, who, sizeof(who)));
	p->runner.pool = p;
	pthread_mutex_init(&p->runner.tlock, NULL);
	rnc_site_init(&p->runner.site, p->ctx->host, &rsite_ops, &p->runner, where,
		      p->ctx->runner_on, p->ctx->runner_faults);
}

void ssh_runner_pool_fini(struct ssh_pool *p)
{
	struct ssh_rsite *rs = &p->runner;
	char how[64];

	/* EOF: it kills what still runs and exits; its channel closes. */
	rnc_site_fini(&rs->site);
	rsite_ended(rs, how, sizeof(how));
	/* The connection is closed for good: the file is no use any more.
	 * Without a live connection it stays for the next one to reuse. */
	if (rs->site.path[0] && ssh_pool_connected(p))
		runner_remove(p, rs->site.path);
	pthread_mutex_destroy(&rs->tlock);
}

void ssh_runner_cmd(const struct ssh_run *r, struct rnc_cmd *c)
{
	*c = (struct rnc_cmd){ .command = r->command, .argv = r->argv, .env = r->env,
			       .cwd = r->cwd, .timeout_ms = r->timeout_ms, .cap = r->cap };
}
