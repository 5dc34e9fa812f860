/*
 * Files through SFTP.  Each connection runs at most one SFTP session (one
 * channel of its MaxSessions), used by one operation at a time; libssh2
 * keeps per-session state for each request kind, so concurrent requests on
 * one session would trample each other.  Writes are atomic: a temporary file
 * in the same directory, fsync@openssh.com, the old file's mode, then a
 * rename.  OpenSSH's SFTP rename refuses to replace an existing file and
 * libssh2 1.10 cannot send posix-rename@openssh.com, so a replacement is an
 * `mv -f` (rename(2)) over an exec channel; a new file is renamed in SFTP
 * (OpenSSH links then unlinks, also atomic).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/ssh/ssh.h"
#include "plugins/ssh/sftp_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SSH_SFTP_CHUNK 65536
/* libssh2 (1.10 and later) keeps up to four times the buffer a read asks
 * for in flight: a large file is read with a larger buffer, so that many
 * requests overlap the round trip. */
#define SSH_SFTP_READ_MAX (1024u * 1024u)
#define SSH_SFTP_NONE 1   /* ssh_sftp_init: the subsystem was refused */
#define SSH_NAME_BUF 4096

/* ---- sessions -------------------------------------------------------------------------- */

/* A failure of the SFTP session itself (not of one request). */
static bool ssh_sftp_session_failed(int rc)
{
	return ssh_rc_is_transport(rc) || rc == LIBSSH2_ERROR_CHANNEL_CLOSED ||
	       rc == LIBSSH2_ERROR_CHANNEL_EOF_SENT || rc == LIBSSH2_ERROR_CHANNEL_FAILURE ||
	       rc == LIBSSH2_ERROR_CHANNEL_UNKNOWN;
}

/* libssh2 says CHANNEL_FAILURE both when the server refuses the channel
 * and when it refuses the subsystem on an open channel; only its message
 * ("Unable to request SFTP subsystem") tells them apart. */
static bool ssh_subsystem_refused(struct ssh_conn *c)
{
	char *text = NULL;

	libssh2_session_last_error(c->session, &text, NULL, 0);
	return text && strstr(text, "subsystem");
}

bool ssh_sftp_missing(struct ssh_pool *p, bool set)
{
	bool was;

	pthread_mutex_lock(&p->lock);
	was = p->no_sftp;
	if (set)
		p->no_sftp = true;
	pthread_mutex_unlock(&p->lock);
	if (set && !was)
		ssh_log(p->ctx, SG_LOG_WARNING, "%s:%u has no SFTP subsystem (no `Subsystem sftp` in "
			"its sshd_config): file tools go through the runner, or through exec with "
			"stdin when it cannot run", p->target.host, p->target.port);
	return was || set;
}

int ssh_sftp_skip(struct ssh_pool *p, int rc, const struct sg_err *err)
{
	return rc < 0 && err && err->code == SG_E_NOTSUP && ssh_sftp_missing(p, false) ? 1 : rc;
}

int ssh_sftp_refusal(struct ssh_pool *p, struct sg_err *err)
{
	return p->ctx->host->errf(err, SG_E_NOTSUP, "ssh: %s:%u refused the SFTP subsystem (the "
				  "channel opened; its sshd_config has no `Subsystem sftp`)",
				  p->target.host, p->target.port);
}

/* Starts the connection's SFTP session (lock held, this op holds busy).
 * Returns 0, SSH_SFTP_NONE (the subsystem refused), or the libssh2 result,
 * with err filled. */
static int ssh_sftp_init(struct ssh_sftp *so, struct sg_err *err)
{
	struct ssh_conn *c = so->c;
	int rc;

	if (ssh_gate_take(&so->op) < 0) {
		ssh_fail(&so->op, NULL, LIBSSH2_ERROR_EAGAIN, "starting SFTP", err);
		return LIBSSH2_ERROR_EAGAIN;
	}
	SSH_CALLP(&so->op, c->sftp, libssh2_sftp_init(c->session));
	ssh_gate_drop(&so->op);
	if (c->sftp) {
		ssh_sftp_opened(c);
		return 0;
	}
	rc = libssh2_session_last_errno(c->session);
	if (rc == LIBSSH2_ERROR_CHANNEL_FAILURE && ssh_subsystem_refused(c)) {
		ssh_sftp_missing(so->pool, true);
		ssh_sftp_refusal(so->pool, err);
		return SSH_SFTP_NONE;
	}
	ssh_fail(&so->op, NULL, rc, "starting the SFTP subsystem", err);
	return rc ? rc : LIBSSH2_ERROR_SOCKET_NONE;
}

/* Gets an SFTP session to use alone; reconnects once when the connection
 * turns out dead, and moves on when the server refuses another channel. */
static int ssh_sftp_begin(struct ssh_pool *p, const struct sg_call *call, struct ssh_sftp *so,
			  struct sg_err *err)
{
	bool fresh = false, reconnected = false;

	memset(so, 0, sizeof(*so));
	so->pool = p;
	if (ssh_sftp_missing(p, false))
		return ssh_sftp_refusal(p, err);
	for (int tries = 0; tries < 6; tries++) {
		struct ssh_conn *c = ssh_sftp_reserve(p, call, fresh, err);
		bool had;
		int rc = 0;

		if (!c)
			return -1;
		so->c = c;
		ssh_op_init(&so->op, c, call, -1);
		if (ssh_op_begin(&so->op) < 0)
			goto dropped;
		while (c->sftp_busy)
			if (ssh_op_pend(&so->op) < 0)
				goto dropped;
		c->sftp_busy = true;
		had = c->sftp != NULL;
		if (!had && (rc = ssh_sftp_init(so, err)) != 0) {
			c->sftp_busy = false;
			ssh_conn_kick(c, &so->op);
			ssh_op_end(&so->op);
			ssh_sftp_unreserve(c, true, false);
			if (rc == SSH_SFTP_NONE)
				return -1;
			if (rc == LIBSSH2_ERROR_CHANNEL_FAILURE && !c->broken) {
				ssh_slot_refused(c);
				continue;
			}
			if (reconnected || !(c->broken || ssh_rc_is_transport(rc)))
				return -1;
			reconnected = fresh = true;
			continue;
		}
		so->sftp = c->sftp;
		return 0;
dropped:
		if (so->op.stop != SSH_STOP_BROKEN) {
			ssh_fail(&so->op, NULL, LIBSSH2_ERROR_EAGAIN, "waiting for SFTP", err);
			ssh_op_end(&so->op);
			ssh_sftp_unreserve(c, false, false);
			return -1;
		}
		ssh_op_end(&so->op);
		ssh_sftp_unreserve(c, false, false);
		if (reconnected)
			return p->ctx->host->errf(err, SG_E_UNAVAILABLE, "ssh: the connection to %s:%u dropped",
						  p->target.host, p->target.port);
		reconnected = fresh = true;
	}
	return p->ctx->host->errf(err, SG_E_UNAVAILABLE, "ssh: no SFTP session on %s:%u: the server refused "
				  "every channel for it (MaxSessions)",
				  p->target.host, p->target.port);
}

/* Releases the session; a failed one is shut down and its slot freed. */
static void ssh_sftp_end(struct ssh_sftp *so)
{
	struct ssh_conn *c = so->c;
	bool drop = so->dead || c->broken;
	int rc;

	if (drop && c->sftp && !c->broken) {
		so->op.stopping = true;
		so->op.deadline_ms = ssh_now_ms() + 5000;
		SSH_CALL(&so->op, rc, libssh2_sftp_shutdown(c->sftp));
		if (rc == LIBSSH2_ERROR_EAGAIN)
			ssh_conn_break(c, "the SFTP session did not close");
		else
			c->sftp = NULL;
	}
	if (c->broken)
		drop = false; /* the session goes with the connection */
	c->sftp_busy = false;
	ssh_conn_kick(c, &so->op);
	ssh_op_end(&so->op);
	ssh_sftp_unreserve(c, drop, drop);
}

/* Fails an SFTP request through the adapter and notes a dead session. */
int ssh_sftp_fail(struct ssh_sftp *so, int rc, const char *what, struct sg_err *err)
{
	/* A request abandoned half-way (cancelled, timed out) leaves replies
	 * and handles in the session: start a fresh one next time. */
	if (rc == LIBSSH2_ERROR_EAGAIN ||
	    (rc != LIBSSH2_ERROR_SFTP_PROTOCOL && ssh_sftp_session_failed(rc)))
		so->dead = true;
	return ssh_fail(&so->op, so->sftp, rc, what, err);
}

static int ssh_sftp_last(struct ssh_sftp *so)
{
	return libssh2_session_last_errno(so->c->session);
}

/* Remembers tmp for ssh_stale_drop(); false when the list is full. */
bool ssh_stale_add(struct ssh_pool *p, const char *tmp)
{
	bool kept = false;

	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < SSH_STALE_MAX && !kept; i++)
		if (!p->stale[i])
			kept = (p->stale[i] = strdup(tmp)) != NULL;
	pthread_mutex_unlock(&p->lock);
	return kept;
}

/* Removes tmp, a failed write's temporary file, on so; when the session
 * cannot (it died: the connection dropped, the write was cancelled
 * half-way), the pool's next session does. */
static void ssh_drop_temp(struct ssh_sftp *so, const char *tmp)
{
	int rc = LIBSSH2_ERROR_SOCKET_SEND;

	if (!so->dead && !so->c->broken)
		SSH_CALL(&so->op, rc, libssh2_sftp_unlink_ex(so->sftp, tmp, (unsigned)strlen(tmp)));
	if (rc == 0 || (rc == LIBSSH2_ERROR_SFTP_PROTOCOL && !so->dead))
		return; /* removed, or not there (or not ours to remove) */
	if (!ssh_stale_add(so->pool, tmp))
		ssh_log(so->pool->ctx, SG_LOG_WARNING, "could not remove %s, the temporary file "
			"of a failed write", tmp);
}

/* Takes the pool's list of temporary files to remove into paths (each
 * freed by the caller).  Returns how many. */
size_t ssh_stale_take(struct ssh_pool *p, char **paths)
{
	size_t n = 0;

	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < SSH_STALE_MAX; i++)
		if (p->stale[i]) {
			paths[n++] = p->stale[i];
			p->stale[i] = NULL;
		}
	pthread_mutex_unlock(&p->lock);
	return n;
}

/* Removes the temporary files earlier sessions could not (ssh_drop_temp). */
static void ssh_stale_drop(struct ssh_sftp *so)
{
	char *paths[SSH_STALE_MAX];
	size_t n = ssh_stale_take(so->pool, paths);

	for (size_t i = 0; i < n; i++) {
		ssh_drop_temp(so, paths[i]);
		free(paths[i]);
	}
}

/* Runs fn on an SFTP session; once more on a new connection when the first
 * one died under it (every operation here is safe to repeat). */
int ssh_sftp_with(struct ssh_pool *p, const struct sg_call *call,
			 int (*fn)(struct ssh_sftp *, void *, struct sg_err *), void *ud,
			 struct sg_err *err)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		struct ssh_sftp so;
		bool retry;
		int rc;

		if (ssh_sftp_begin(p, call, &so, err) < 0)
			return -1;
		ssh_stale_drop(&so);
		rc = fn(&so, ud, err);
		retry = rc < 0 && so.c->broken && err && err->code == SG_E_UNAVAILABLE;
		ssh_sftp_end(&so);
		if (!retry)
			return rc;
	}
	return -1;
}

/* ---- small requests ---------------------------------------------------------------------- */

static int ssh_sftp_stat(struct ssh_sftp *so, const char *path, int how,
			 LIBSSH2_SFTP_ATTRIBUTES *a, int *rcp)
{
	int rc;

	SSH_CALL(&so->op, rc, libssh2_sftp_stat_ex(so->sftp, path, (unsigned)strlen(path), how, a));
	*rcp = rc;
	return rc == 0 ? 0 : -1;
}

static bool ssh_sftp_notfound(struct ssh_sftp *so, int rc)
{
	unsigned long st = ssh_sftp_status(so->sftp, rc);

	return st == LIBSSH2_FX_NO_SUCH_FILE || st == LIBSSH2_FX_NO_SUCH_PATH;
}

int ssh_ftype(const LIBSSH2_SFTP_ATTRIBUTES *a)
{
	unsigned long m = a->permissions;

	if (!(a->flags & LIBSSH2_SFTP_ATTR_PERMISSIONS))
		return SG_FT_OTHER;
	if (LIBSSH2_SFTP_S_ISREG(m))
		return SG_FT_FILE;
	if (LIBSSH2_SFTP_S_ISDIR(m))
		return SG_FT_DIR;
	if (LIBSSH2_SFTP_S_ISLNK(m))
		return SG_FT_SYMLINK;
	return SG_FT_OTHER;
}

/* mkdir -p: the whole path first (usually there), else component by
 * component from the root. */
static int ssh_sftp_mkdirs(struct ssh_sftp *so, const char *path, long mode, struct sg_err *err)
{
	const struct sg_host_api *host = so->pool->ctx->host;
	LIBSSH2_SFTP_ATTRIBUTES a;
	char part[SSH_PATH_MAX], what[SSH_WHAT_MAX];
	size_t n = strlen(path);
	int rc;

	if (n >= sizeof(part))
		return host->errf(err, SG_E_INVAL, "path '%.80s...' is too long", path);
	if (ssh_sftp_stat(so, path, LIBSSH2_SFTP_STAT, &a, &rc) == 0)
		return ssh_ftype(&a) == SG_FT_DIR ? 0 :
		       host->errf(err, SG_E_INVAL, "'%s' exists and is not a directory", path);
	if (!ssh_sftp_notfound(so, rc))
		return ssh_sftp_fail(so, rc, "looking at a directory", err);
	for (size_t i = 1; i <= n; i++) {
		if (i < n && path[i] != '/')
			continue;
		memcpy(part, path, i);
		part[i] = '\0';
		if (ssh_sftp_stat(so, part, LIBSSH2_SFTP_STAT, &a, &rc) == 0) {
			if (ssh_ftype(&a) != SG_FT_DIR)
				return host->errf(err, SG_E_INVAL, "'%s' exists and is not a directory", part);
			continue;
		}
		if (!ssh_sftp_notfound(so, rc))
			return ssh_sftp_fail(so, rc, "looking at a directory", err);
		SSH_CALL(&so->op, rc, libssh2_sftp_mkdir_ex(so->sftp, part, (unsigned)i, mode));
		if (rc && ssh_sftp_stat(so, part, LIBSSH2_SFTP_STAT, &a, &rc) != 0) {
			snprintf(what, sizeof(what), "creating directory '%s'", part);
			return ssh_sftp_fail(so, rc, what, err);
		}
	}
	return 0;
}

/* ---- read ----------------------------------------------------------------------------- */

static int ssh_read_body(struct ssh_sftp *so, LIBSSH2_SFTP_HANDLE *h, struct ssh_read_args *ra,
			 struct sg_err *err)
{
	const struct sg_host_api *host = so->pool->ctx->host;
	size_t chunk = ra->size_hint > SSH_SFTP_READ_MAX ? SSH_SFTP_READ_MAX
		     : ra->size_hint > SSH_SFTP_CHUNK ? ra->size_hint : SSH_SFTP_CHUNK;
	char *buf = malloc(chunk); /* freed below */
	char what[SSH_WHAT_MAX];
	ssize_t n;
	int ret = -1;

	if (!buf)
		return host->errf(err, SG_E_NOMEM, "ssh: out of memory");
	for (;;) {
		SSH_CALL(&so->op, n, libssh2_sftp_read(h, buf, chunk));
		if (n == 0)
			break;
		if (n < 0) {
			snprintf(what, sizeof(what), "reading '%s'", ra->path);
			ssh_sftp_fail(so, (int)n, what, err);
			goto out;
		}
		if (ra->out->len + (size_t)n > ra->max) {
			host->errf(err, SG_E_TOOBIG, "'%s' is larger than the %zu bytes a read may move",
				   ra->path, ra->max);
			goto out;
		}
		if (host->buf_append(ra->out, buf, (size_t)n) < 0) {
			host->errf(err, SG_E_NOMEM, "ssh: out of memory");
			goto out;
		}
	}
	ret = 0;
out:
	free(buf);
	return ret;
}

int ssh_read_fn(struct ssh_sftp *so, void *ud, struct sg_err *err)
{
	struct ssh_read_args *ra = ud;
	const struct sg_host_api *host = so->pool->ctx->host;
	LIBSSH2_SFTP_HANDLE *h;
	LIBSSH2_SFTP_ATTRIBUTES a;
	char what[SSH_WHAT_MAX];
	int rc, ret = -1;

	ra->out->len = 0;
	snprintf(what, sizeof(what), "reading '%s'", ra->path);
	SSH_CALLP(&so->op, h, libssh2_sftp_open_ex(so->sftp, ra->path, (unsigned)strlen(ra->path),
						   LIBSSH2_FXF_READ, 0, LIBSSH2_SFTP_OPENFILE));
	if (!h)
		return ssh_sftp_fail(so, ssh_sftp_last(so), what, err);
	SSH_CALL(&so->op, rc, libssh2_sftp_fstat_ex(h, &a, 0));
	if (rc) {
		ssh_sftp_fail(so, rc, what, err);
		goto out;
	}
	if (ssh_ftype(&a) == SG_FT_DIR) {
		host->errf(err, SG_E_INVAL, "'%s' is a directory: use list_files", ra->path);
		goto out;
	}
	if ((a.flags & LIBSSH2_SFTP_ATTR_SIZE) && a.filesize > ra->max) {
		host->errf(err, SG_E_TOOBIG, "'%s' is %llu bytes, larger than the %zu bytes a read may move",
			   ra->path, (unsigned long long)a.filesize, ra->max);
		goto out;
	}
	ra->size_hint = (a.flags & LIBSSH2_SFTP_ATTR_SIZE) ? (size_t)a.filesize : 0;
	ret = ssh_read_body(so, h, ra, err);
out:
	SSH_CALL(&so->op, rc, libssh2_sftp_close_handle(h));
	return ret;
}

/* ---- write ---------------------------------------------------------------------------- */

/*
 * SFTP version 3 (OpenSSH's sftp-server) has no status for a full disk: a
 * write that hit ENOSPC comes back as the generic FX_FAILURE.  The file
 * system's free space (the fstatvfs@openssh.com extension) tells that cause
 * apart: with less room than the len bytes still to write, say so.
 * Returns -1 with err set when it was the disk, 0 when that is not known.
 */
static int ssh_write_nospace(struct ssh_sftp *so, LIBSSH2_SFTP_HANDLE *h, int rc, size_t len,
			     const char *what, struct sg_err *err)
{
	const struct ssh_target *t = &so->pool->target;
	LIBSSH2_SFTP_STATVFS st;
	unsigned long long room;
	int vrc;

	if (ssh_sftp_status(so->sftp, rc) != LIBSSH2_FX_FAILURE)
		return 0;
	SSH_CALL(&so->op, vrc, libssh2_sftp_fstatvfs(h, &st));
	if (vrc)
		return 0;
	room = (unsigned long long)st.f_bavail * st.f_frsize;
	if (room >= len)
		return 0;
	return so->pool->ctx->host->errf(err, SG_E_IO,
		"ssh: %s: No space left on device (its file system has %llu bytes free, %zu more were to be written) on %s:%u",
		what, room, len, t->host, t->port);
}

static int ssh_write_all(struct ssh_sftp *so, LIBSSH2_SFTP_HANDLE *h, const char *p, size_t len,
			 const char *what, struct sg_err *err)
{
	while (len > 0) {
		ssize_t n;

		SSH_CALL(&so->op, n, libssh2_sftp_write(h, p, len));
		if (n < 0 && ssh_write_nospace(so, h, (int)n, len, what, err) < 0)
			return -1;
		if (n < 0)
			return ssh_sftp_fail(so, (int)n, what, err);
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Mode (and, best effort, owner) of the replaced file on the temporary. */
static int ssh_write_attrs(struct ssh_sftp *so, LIBSSH2_SFTP_HANDLE *h,
			   const LIBSSH2_SFTP_ATTRIBUTES *old, unsigned long mode, const char *what,
			   struct sg_err *err)
{
	LIBSSH2_SFTP_ATTRIBUTES a = { .flags = LIBSSH2_SFTP_ATTR_PERMISSIONS, .permissions = mode };
	int rc;

	if (old && (old->flags & LIBSSH2_SFTP_ATTR_UIDGID)) {
		LIBSSH2_SFTP_ATTRIBUTES o = { .flags = LIBSSH2_SFTP_ATTR_UIDGID, .uid = old->uid,
					      .gid = old->gid };

		/* Fails unless we may chown to them: then the writer owns it. */
		SSH_CALL(&so->op, rc, libssh2_sftp_fsetstat(h, &o));
		if (rc && rc != LIBSSH2_ERROR_SFTP_PROTOCOL)
			return ssh_sftp_fail(so, rc, what, err);
	}
	SSH_CALL(&so->op, rc, libssh2_sftp_fsetstat(h, &a));
	return rc ? ssh_sftp_fail(so, rc, what, err) : 0;
}

/* Writes the temporary file and closes it. */
static int ssh_write_tmp(struct ssh_sftp *so, const char *tmp, struct ssh_write_args *wa,
			 const LIBSSH2_SFTP_ATTRIBUTES *old, unsigned long mode, struct sg_err *err)
{
	LIBSSH2_SFTP_HANDLE *h;
	char what[SSH_WHAT_MAX];
	int rc, ret = -1;

	snprintf(what, sizeof(what), "writing '%s'", wa->path);
	SSH_CALLP(&so->op, h, libssh2_sftp_open_ex(so->sftp, tmp, (unsigned)strlen(tmp),
						   LIBSSH2_FXF_WRITE | LIBSSH2_FXF_CREAT |
						   LIBSSH2_FXF_EXCL, 0600, LIBSSH2_SFTP_OPENFILE));
	if (!h)
		return ssh_sftp_fail(so, ssh_sftp_last(so), what, err);
	if (ssh_write_all(so, h, wa->data, wa->len, what, err) < 0)
		goto out;
	/* Durable before it replaces anything; a server without the
	 * extension simply cannot promise it. */
	SSH_CALL(&so->op, rc, libssh2_sftp_fsync(h));
	if (rc && !(rc == LIBSSH2_ERROR_SFTP_PROTOCOL &&
		    ssh_sftp_status(so->sftp, rc) == LIBSSH2_FX_OP_UNSUPPORTED)) {
		ssh_sftp_fail(so, rc, what, err);
		goto out;
	}
	if (ssh_write_attrs(so, h, old, mode, what, err) < 0)
		goto out;
	ret = 0;
out:
	SSH_CALL(&so->op, rc, libssh2_sftp_close_handle(h));
	if (ret == 0 && rc) {
		ssh_sftp_fail(so, rc, what, err);
		ret = -1;
	}
	return ret;
}

/* rename(2) through `mv -f` on an exec channel (the SFTP lock stays ours). */
static int ssh_write_mv(struct ssh_sftp *so, const char *tmp, struct ssh_write_args *wa,
			struct sg_err *err)
{
	const char *argv[] = { "mv", "-f", "--", tmp, wa->path, NULL };
	int rc;

	ssh_op_pause(&so->op);
	rc = ssh_script(so->pool, argv, wa->call, "replacing the file", err);
	if (ssh_op_resume(&so->op) < 0)
		so->dead = true;
	return rc;
}

static int ssh_write_rename(struct ssh_sftp *so, const char *tmp, struct ssh_write_args *wa,
			    bool existed, struct sg_err *err)
{
	int rc;

	if (!existed) {
		SSH_CALL(&so->op, rc, libssh2_sftp_rename_ex(so->sftp, tmp, (unsigned)strlen(tmp), wa->path,
							     (unsigned)strlen(wa->path),
							     LIBSSH2_SFTP_RENAME_OVERWRITE |
							     LIBSSH2_SFTP_RENAME_ATOMIC |
							     LIBSSH2_SFTP_RENAME_NATIVE));
		if (rc == 0)
			return 0;
		if (rc != LIBSSH2_ERROR_SFTP_PROTOCOL)
			return ssh_sftp_fail(so, rc, "renaming the new file into place", err);
		/* Someone created it meanwhile: replace it the other way. */
	}
	return ssh_write_mv(so, tmp, wa, err);
}

static void ssh_dirname(const char *path, char *out, size_t n)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		snprintf(out, n, ".");
	else if (slash == path)
		snprintf(out, n, "/");
	else
		snprintf(out, n, "%.*s", (int)(slash - path), path);
}

int ssh_write_fn(struct ssh_sftp *so, void *ud, struct sg_err *err)
{
	struct ssh_write_args *wa = ud;
	const struct sg_host_api *host = so->pool->ctx->host;
	LIBSSH2_SFTP_ATTRIBUTES old;
	char dir[SSH_PATH_MAX], tmp[SSH_PATH_MAX + 48], rnd[17], what[SSH_WHAT_MAX];
	unsigned long mode = wa->opts && wa->opts->mode ? wa->opts->mode : 0644;
	bool existed;
	int rc;

	ssh_dirname(wa->path, dir, sizeof(dir));
	if ((!wa->opts || !wa->opts->no_mkdir) && ssh_sftp_mkdirs(so, dir, 0755, err) < 0)
		return -1;
	existed = ssh_sftp_stat(so, wa->path, LIBSSH2_SFTP_STAT, &old, &rc) == 0;
	if (!existed && !ssh_sftp_notfound(so, rc)) {
		snprintf(what, sizeof(what), "writing '%s'", wa->path);
		return ssh_sftp_fail(so, rc, what, err);
	}
	if (existed && ssh_ftype(&old) == SG_FT_DIR)
		return host->errf(err, SG_E_INVAL, "'%s' is a directory", wa->path);
	if (existed && (old.flags & LIBSSH2_SFTP_ATTR_PERMISSIONS))
		mode = old.permissions & 07777;
	if (ssh_random_hex(rnd, 8) < 0)
		return host->errf(err, SG_E_INTERNAL, "ssh: no randomness");
	snprintf(tmp, sizeof(tmp), "%s%s.sandgate-%s.tmp", dir, strcmp(dir, "/") ? "/" : "", rnd);
	if (ssh_write_tmp(so, tmp, wa, existed ? &old : NULL, mode, err) < 0 ||
	    ssh_write_rename(so, tmp, wa, existed, err) < 0) {
		ssh_drop_temp(so, tmp);
		return -1;
	}
	return 0;
}

/* ---- list ----------------------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at p (RFC 3629: no overlongs, no
 * surrogates, at most U+10FFFF), or 0. */
static size_t ssh_utf8_len(const unsigned char *p, size_t n)
{
	unsigned char c = p[0];
	size_t len;

	if (c < 0x80)
		return c ? 1 : 0;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t k = 1; k < len; k++)
		if ((p[k] & 0xc0) != 0x80)
			return 0;
	if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0) ||
	    (c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90))
		return 0;
	return len;
}

/* JSON text of bytes that should be UTF-8 (file names): invalid bytes
 * become U+FFFD rather than failing the whole listing. */
json_t *ssh_json_text(const char *p, size_t n)
{
	char *out = malloc(n * 3 + 1); /* freed below */
	size_t o = 0, i = 0;
	json_t *j;

	if (!out)
		return NULL;
	while (i < n) {
		size_t len = ssh_utf8_len((const unsigned char *)p + i, n - i);

		if (len) {
			memcpy(out + o, p + i, len);
			o += len;
			i += len;
		} else {
			memcpy(out + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		}
	}
	j = json_stringn(out, o);
	free(out);
	return j;
}

static int ssh_dirent_cmp(const void *x, const void *y)
{
	const struct ssh_dirent *a = x, *b = y;
	int c = memcmp(a->name, b->name, a->len < b->len ? a->len : b->len);

	return c ? c : (a->len > b->len) - (a->len < b->len);
}

static json_t *ssh_dirent_json(const char *dir, const struct ssh_dirent *d)
{
	static const char *const types[] = { "file", "dir", "symlink", "other" };
	size_t dl = strlen(dir);
	char *full = malloc(dl + d->len + 2); /* freed below */
	json_t *o;

	if (!full)
		return NULL;
	memcpy(full, dir, dl);
	if (!dl || dir[dl - 1] != '/')
		full[dl++] = '/';
	memcpy(full + dl, d->name, d->len);
	o = json_pack("{s:o?, s:o?, s:s, s:I, s:i, s:I}", "name", ssh_json_text(d->name, d->len),
		      "path", ssh_json_text(full, dl + d->len), "type", types[ssh_ftype(&d->a)],
		      "size", (json_int_t)((d->a.flags & LIBSSH2_SFTP_ATTR_SIZE) ? d->a.filesize : 0),
		      "mode", (int)(d->a.permissions & 07777),
		      "mtime", (json_int_t)((d->a.flags & LIBSSH2_SFTP_ATTR_ACMODTIME) ? d->a.mtime : 0));
	free(full);
	return o;
}

json_t *ssh_dirents_json(const char *dir, struct ssh_dirent *ents, size_t n)
{
	json_t *arr = json_array();

	qsort(ents, n, sizeof(*ents), ssh_dirent_cmp);
	for (size_t i = 0; arr && i < n; i++) {
		json_t *o = ssh_dirent_json(dir, &ents[i]);

		if (!o || json_array_append_new(arr, o) < 0) {
			json_decref(arr);
			arr = NULL;
		}
	}
	return arr;
}

/* Reads every entry but . and .. into *ents (owned by the caller). */
static int ssh_list_read(struct ssh_sftp *so, LIBSSH2_SFTP_HANDLE *h, const char *what,
			 struct ssh_dirent **ents, size_t *n, struct sg_err *err)
{
	const struct sg_host_api *host = so->pool->ctx->host;
	char *name = malloc(SSH_NAME_BUF); /* freed below */
	size_t cap = 0;
	int rc, ret = -1;

	if (!name)
		return host->errf(err, SG_E_NOMEM, "ssh: out of memory");
	for (;;) {
		LIBSSH2_SFTP_ATTRIBUTES a;

		SSH_CALL(&so->op, rc, libssh2_sftp_readdir_ex(h, name, SSH_NAME_BUF, NULL, 0, &a));
		if (rc == 0)
			break;
		if (rc < 0) {
			ssh_sftp_fail(so, rc, what, err);
			goto out;
		}
		if ((rc == 1 && name[0] == '.') || (rc == 2 && name[0] == '.' && name[1] == '.'))
			continue;
		if (*n == cap) {
			struct ssh_dirent *ne = realloc(*ents, (cap ? cap * 2 : 64) * sizeof(*ne));

			if (!ne)
				goto oom;
			*ents = ne;
			cap = cap ? cap * 2 : 64;
		}
		(*ents)[*n].name = malloc((size_t)rc);
		if (!(*ents)[*n].name)
			goto oom;
		memcpy((*ents)[*n].name, name, (size_t)rc);
		(*ents)[*n].len = (size_t)rc;
		(*ents)[*n].a = a;
		(*n)++;
	}
	ret = 0;
	goto out;
oom:
	host->errf(err, SG_E_NOMEM, "ssh: out of memory");
out:
	free(name);
	return ret;
}

/* Why opendir failed: a file is SG_E_INVAL, the rest as the server said. */
static int ssh_list_fail(struct ssh_sftp *so, int rc, const char *path, const char *what,
			 struct sg_err *err)
{
	LIBSSH2_SFTP_ATTRIBUTES a;
	int src;

	/* OpenSSH says "no such file" for ENOTDIR too: look before failing,
	 * then report the opendir error itself. */
	if (rc == LIBSSH2_ERROR_SFTP_PROTOCOL) {
		unsigned long st = ssh_sftp_status(so->sftp, rc);

		if (ssh_sftp_stat(so, path, LIBSSH2_SFTP_STAT, &a, &src) == 0 && ssh_ftype(&a) != SG_FT_DIR)
			return so->pool->ctx->host->errf(err, SG_E_INVAL, "'%s' is not a directory: use read_file",
							 path);
		if (st == LIBSSH2_FX_NO_SUCH_FILE)
			return so->pool->ctx->host->errf(err, SG_E_NOTFOUND, "ssh: listing '%s': no such directory",
							 path);
	}
	return ssh_sftp_fail(so, rc, what, err);
}

int ssh_list_fn(struct ssh_sftp *so, void *ud, struct sg_err *err)
{
	struct ssh_list_args *la = ud;
	const struct sg_host_api *host = so->pool->ctx->host;
	struct ssh_dirent *ents = NULL;
	LIBSSH2_SFTP_HANDLE *h;
	char what[SSH_WHAT_MAX];
	size_t n = 0;
	int rc, crc, ret = -1;

	snprintf(what, sizeof(what), "listing '%s'", la->path);
	SSH_CALLP(&so->op, h, libssh2_sftp_open_ex(so->sftp, la->path, (unsigned)strlen(la->path), 0, 0,
						   LIBSSH2_SFTP_OPENDIR));
	if (!h)
		return ssh_list_fail(so, ssh_sftp_last(so), la->path, what, err);
	rc = ssh_list_read(so, h, what, &ents, &n, err);
	SSH_CALL(&so->op, crc, libssh2_sftp_close_handle(h));
	if (rc < 0)
		goto out;
	if (!(la->arr = ssh_dirents_json(la->path, ents, n))) {
		host->errf(err, SG_E_NOMEM, "ssh: out of memory");
		goto out;
	}
	ret = 0;
out:
	for (size_t i = 0; i < n; i++)
		free(ents[i].name);
	free(ents);
	return ret;
}

/* ---- stat, mkdir, remove ---------------------------------------------------------------- */

int ssh_stat_fn(struct ssh_sftp *so, void *ud, struct sg_err *err)
{
	struct ssh_path_args *pa = ud;
	LIBSSH2_SFTP_ATTRIBUTES a;
	char what[SSH_WHAT_MAX];
	int rc;

	snprintf(what, sizeof(what), "stat '%s'", pa->path);
	if (ssh_sftp_stat(so, pa->path, LIBSSH2_SFTP_LSTAT, &a, &rc) < 0)
		return ssh_sftp_fail(so, rc, what, err);
	memset(pa->st, 0, sizeof(*pa->st));
	pa->st->type = ssh_ftype(&a);
	pa->st->size = (a.flags & LIBSSH2_SFTP_ATTR_SIZE) ? a.filesize : 0;
	pa->st->mode = (uint32_t)(a.permissions & 07777);
	pa->st->mtime = (a.flags & LIBSSH2_SFTP_ATTR_ACMODTIME) ? (int64_t)a.mtime : 0;
	pa->st->uid = (uint32_t)a.uid;
	pa->st->gid = (uint32_t)a.gid;
	return 0;
}

int ssh_remove_fn(struct ssh_sftp *so, void *ud, struct sg_err *err)
{
	struct ssh_path_args *pa = ud;
	LIBSSH2_SFTP_ATTRIBUTES a;
	char what[SSH_WHAT_MAX];
	size_t n = strlen(pa->path);
	int rc;

	snprintf(what, sizeof(what), "removing '%s'", pa->path);
	if (ssh_sftp_stat(so, pa->path, LIBSSH2_SFTP_LSTAT, &a, &rc) < 0)
		return ssh_sftp_fail(so, rc, what, err);
	if (ssh_ftype(&a) == SG_FT_DIR)
		SSH_CALL(&so->op, rc, libssh2_sftp_rmdir_ex(so->sftp, pa->path, (unsigned)n));
	else
		SSH_CALL(&so->op, rc, libssh2_sftp_unlink_ex(so->sftp, pa->path, (unsigned)n));
	return rc ? ssh_sftp_fail(so, rc, what, err) : 0;
}
