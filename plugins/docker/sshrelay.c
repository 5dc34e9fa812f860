/*
 * ssh:// engines (remote.h).  docker.so speaks HTTP to a unix socket; for an
 * ssh:// engine that socket is this relay's, in a private 0700 directory.
 * Each connection to it becomes a channel on one SSH connection, running
 * `docker system dial-stdio` on the remote host (what the docker CLI does),
 * so libcurl's pooled connections and the attached streams need no change.
 * One thread drives the session non-blocking for every channel: libssh2
 * sessions are not safe across threads.  The SSH connection is made at the
 * first connection (blocking, bounded by the timeout), with the host key
 * checked against known_hosts and the sign-in done by plugins/sshcommon as
 * ssh.so does; it is dropped after RELAY_IDLE_S without channels and at free.
 * A connection the relay cannot serve is closed, and why is kept for the
 * engine's next error (docker_relay_take_error).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/docker/remote.h"
#include "plugins/sshcommon/sshcommon.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <libssh2.h>

#define RELAY_MAX     16          /* channels at once; more wait in the backlog */
#define RELAY_IDLE_S  30          /* the SSH connection without channels */
#define RELAY_BUF     32768
#define RELAY_CMD     "docker system dial-stdio"

enum rstate { R_OPEN, R_EXEC, R_LIVE, R_CLOSING, R_DEAD };

struct rconn {
	int fd;                       /* the accepted local connection (owned) */
	LIBSSH2_CHANNEL *ch;          /* owned */
	enum rstate st;
	char up[RELAY_BUF];           /* local -> channel */
	size_t up_len, up_off;
	char down[RELAY_BUF];         /* channel -> local */
	size_t down_len, down_off;
	char errtext[256];            /* the remote command's stderr, its tail */
	bool fd_eof, eof_sent, ch_eof, shut, got_any, close_sent;
	struct rconn *next;
};

struct docker_relay {
	const struct sg_host_api *host;
	char *rhost, *user, *key, *known;   /* owned */
	unsigned port, timeout_s;
	enum sshc_policy policy;
	char where[320];                    /* ssh://user@host:port */
	char dir[128], path[160];
	int lfd, wake[2];
	pthread_t th;
	bool started;

	pthread_mutex_t lock;               /* guards last/has_last */
	struct sg_err last;
	bool has_last;

	/* the relay thread's own */
	LIBSSH2_SESSION *s;
	int sock;
	struct rconn *conns;
	unsigned n;
	time_t idle_since;
	bool off_warned;
	bool moved;                         /* this pass moved bytes or a state */
};

static void relay_note(struct docker_relay *r, int code, const char *fmt, ...) SG_PRINTF(3, 4);

static void relay_note(struct docker_relay *r, int code, const char *fmt, ...)
{
	char msg[sizeof(r->last.msg)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&r->lock);
	r->host->errf(&r->last, code, "%s", msg);
	r->has_last = true;
	pthread_mutex_unlock(&r->lock);
	r->host->log(SG_LOG_WARNING, "docker", "%s", msg);
}

bool docker_relay_take_error(struct docker_relay *r, struct sg_err *err)
{
	bool had;

	pthread_mutex_lock(&r->lock);
	had = r->has_last;
	if (had && err)
		*err = r->last;
	r->has_last = false;
	pthread_mutex_unlock(&r->lock);
	return had;
}

const char *docker_relay_path(const struct docker_relay *r)
{
	return r->path;
}

/* ---- the SSH connection ------------------------------------------------------------ */

static bool relay_is_transport(int rc)
{
	return rc == LIBSSH2_ERROR_SOCKET_SEND || rc == LIBSSH2_ERROR_SOCKET_RECV ||
	       rc == LIBSSH2_ERROR_SOCKET_DISCONNECT || rc == LIBSSH2_ERROR_SOCKET_TIMEOUT ||
	       rc == LIBSSH2_ERROR_TIMEOUT || rc == LIBSSH2_ERROR_SOCKET_NONE;
}

static int relay_fatal(void *ud, int rc, const char *what, struct sg_err *err)
{
	struct docker_relay *r = ud;
	char *m = NULL;

	libssh2_session_last_error(r->s, &m, NULL, 0);
	return r->host->errf(err, rc == LIBSSH2_ERROR_TIMEOUT ? SG_E_TIMEOUT : SG_E_UNAVAILABLE,
			     "docker host %s: %s failed: %s", r->where, what, m ? m : "?");
}

static int relay_tcp(struct docker_relay *r, struct sg_err *err)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL, *ai;
	char port[8];
	int fd = -1, e = 0, rc;

	snprintf(port, sizeof(port), "%u", r->port);
	rc = getaddrinfo(r->rhost, port, &hints, &res);
	if (rc != 0)
		return r->host->errf(err, SG_E_UNAVAILABLE, "docker host %s: cannot resolve %s: %s: "
				     "fix [docker] host / DOCKER_HOST", r->where, r->rhost,
				     gai_strerror(rc));
	for (ai = res; ai; ai = ai->ai_next) {
		struct pollfd p;
		socklen_t len = sizeof(e);

		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			continue;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		e = errno;
		if (e == EINPROGRESS) {
			p = (struct pollfd){ .fd = fd, .events = POLLOUT };
			e = poll(&p, 1, (int)r->timeout_s * 1000) == 1 ? 0 : ETIMEDOUT;
			if (!e && getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
				e = errno;
			if (!e)
				break;
		}
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return r->host->errf(err, SG_E_UNAVAILABLE, "cannot connect to the SSH server of "
				     "docker host %s: %s: check that sshd runs there and the port "
				     "in [docker] host / DOCKER_HOST", r->where,
				     strerror(e ? e : ECONNREFUSED));
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	r->sock = fd;
	return 0;
}

static void relay_peer(struct docker_relay *r, struct sshc_peer *p)
{
	*p = (struct sshc_peer){ .host = r->rhost, .port = r->port, .user = r->user,
		.key = r->key, .known_hosts = r->known, .policy = r->policy,
		.passphrase = getenv("SANDGATE_SSH_PASSPHRASE"), .plugin = "docker",
		.label = r->where, .policy_key = "[docker] ssh_host_key_policy",
		.known_key = "[docker] ssh_known_hosts",
		.passphrase_key = "SANDGATE_SSH_PASSPHRASE",
		.identity_key = "[docker] ssh_key" };
}

static void relay_drop_session(struct docker_relay *r, bool polite)
{
	if (!r->s)
		return;
	if (polite) {
		libssh2_session_set_blocking(r->s, 1);
		libssh2_session_set_timeout(r->s, 2000);
		libssh2_session_disconnect(r->s, "sandgate: done");
	}
	libssh2_session_free(r->s);
	r->s = NULL;
	close(r->sock);
	r->sock = -1;
}

/* Connects and signs in (blocking); the session is non-blocking after. */
static int relay_connect(struct docker_relay *r, struct sg_err *err)
{
	struct sshc_io io = { .host = r->host, .fatal = relay_fatal,
			      .is_transport = relay_is_transport, .ud = r };
	struct sshc_known *known = NULL;
	struct sshc_peer peer;
	int rc;

	if (relay_tcp(r, err) < 0)
		return -1;
	r->s = libssh2_session_init();
	if (!r->s) {
		close(r->sock);
		r->sock = -1;
		return r->host->errf(err, SG_E_NOMEM, "docker: out of memory");
	}
	io.s = r->s;
	libssh2_session_set_blocking(r->s, 1);
	libssh2_session_set_timeout(r->s, (long)r->timeout_s * 1000);
	relay_peer(r, &peer);
	known = sshc_known_load(r->host, r->s, &peer, err);
	if (!known)
		goto fail;
	sshc_known_prefer(known, r->s, &peer);
	rc = libssh2_session_handshake(r->s, r->sock);
	if (rc) {
		relay_fatal(r, rc, "the SSH handshake", err);
		goto fail;
	}
	if (sshc_known_verify(known, r->s, &peer, &r->off_warned, err) < 0 ||
	    sshc_userauth(&io, &peer, err) < 0)
		goto fail;
	sshc_known_free(known);
	libssh2_keepalive_config(r->s, 0, 30);
	libssh2_session_set_blocking(r->s, 0);
	r->host->log(SG_LOG_INFO, "docker", "connected to docker host %s", r->where);
	return 0;
fail:
	sshc_known_free(known);
	relay_drop_session(r, false);
	return -1;
}

/* ---- channels ------------------------------------------------------------------------ */

static void relay_conn_fail(struct docker_relay *r, struct rconn *c, const char *what)
{
	char *m = NULL;
	int rc = libssh2_session_last_error(r->s, &m, NULL, 0);

	relay_note(r, relay_is_transport(rc) ? SG_E_UNAVAILABLE : SG_E_BACKEND,
		   "docker host %s: %s failed: %s", r->where, what, m ? m : "?");
	c->st = R_CLOSING;
	shutdown(c->fd, SHUT_RDWR);
}

/* Local -> channel; returns -1 when the channel failed. */
static int relay_up(struct docker_relay *r, struct rconn *c)
{
	ssize_t n;

	if (c->up_len == 0 && !c->fd_eof) {
		n = read(c->fd, c->up, sizeof(c->up));
		if (n > 0) {
			c->up_len = (size_t)n;
			c->up_off = 0;
			r->moved = true;
		} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
			c->fd_eof = true;
		}
	}
	while (c->up_off < c->up_len) {
		n = libssh2_channel_write(c->ch, c->up + c->up_off, c->up_len - c->up_off);
		if (n == LIBSSH2_ERROR_EAGAIN)
			return 0;
		if (n < 0) {
			relay_conn_fail(r, c, "writing to the docker system dial-stdio channel");
			return -1;
		}
		c->up_off += (size_t)n;
		r->moved = true;
	}
	c->up_len = c->up_off = 0;
	if (c->fd_eof && !c->eof_sent) {
		n = libssh2_channel_send_eof(c->ch);
		if (n == 0)
			c->eof_sent = true;
	}
	return 0;
}

/* Keeps the tail of the remote command's stderr (for the error message). */
static void relay_stderr(struct rconn *c)
{
	char buf[1024];
	ssize_t n;

	while ((n = libssh2_channel_read_stderr(c->ch, buf, sizeof(buf))) > 0) {
		size_t keep = (size_t)n < sizeof(c->errtext) - 1 ? (size_t)n : sizeof(c->errtext) - 1;

		memcpy(c->errtext, buf + n - keep, keep);
		c->errtext[keep] = '\0';
	}
}

/* Channel -> local; returns -1 when either side failed. */
static int relay_down(struct docker_relay *r, struct rconn *c)
{
	ssize_t n;

	relay_stderr(c);
	for (;;) {
		if (c->down_len == 0 && !c->ch_eof) {
			n = libssh2_channel_read(c->ch, c->down, sizeof(c->down));
			if (n == LIBSSH2_ERROR_EAGAIN)
				break;
			if (n < 0) {
				relay_conn_fail(r, c, "reading the docker system dial-stdio channel");
				return -1;
			}
			if (n == 0) {
				if (libssh2_channel_eof(c->ch))
					c->ch_eof = true;
				break;
			}
			c->down_len = (size_t)n;
			c->down_off = 0;
			c->got_any = true;
			r->moved = true;
		}
		if (c->down_len == 0)
			break;
		n = send(c->fd, c->down + c->down_off, c->down_len - c->down_off,
			 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;
		if (n < 0) {
			c->st = R_CLOSING;   /* the local side is gone */
			return -1;
		}
		c->down_off += (size_t)n;
		r->moved = true;
		if (c->down_off == c->down_len)
			c->down_len = c->down_off = 0;
	}
	if (c->ch_eof && c->down_len == 0 && !c->shut) {
		c->shut = true;
		shutdown(c->fd, SHUT_WR);
		if (!c->got_any)
			relay_note(r, SG_E_UNAVAILABLE, "docker host %s: `" RELAY_CMD "` ended at once "
				   "on the remote host%s%s: install the docker CLI there and let %s "
				   "use the engine (docker group)", r->where, *c->errtext ? ": " : "",
				   c->errtext, r->user);
	}
	if (c->shut && c->fd_eof)
		c->st = R_CLOSING;
	return 0;
}

static void relay_step(struct docker_relay *r, struct rconn *c)
{
	int rc;

	switch (c->st) {
	case R_OPEN:
		c->ch = libssh2_channel_open_session(r->s);
		if (!c->ch) {
			if (libssh2_session_last_errno(r->s) != LIBSSH2_ERROR_EAGAIN)
				relay_conn_fail(r, c, "opening an SSH channel");
			return;
		}
		c->st = R_EXEC;
		r->moved = true;
		__attribute__((fallthrough)); /* the next step may go at once */
	case R_EXEC:
		rc = libssh2_channel_exec(c->ch, RELAY_CMD);
		if (rc == LIBSSH2_ERROR_EAGAIN)
			return;
		if (rc < 0) {
			relay_conn_fail(r, c, "starting `" RELAY_CMD "`");
			return;
		}
		c->st = R_LIVE;
		r->moved = true;
		__attribute__((fallthrough)); /* the next step may go at once */
	case R_LIVE:
		if (relay_up(r, c) < 0 || relay_down(r, c) < 0)
			return;
		return;
	case R_CLOSING:
		if (c->ch && !c->close_sent) {
			rc = libssh2_channel_close(c->ch);
			if (rc == LIBSSH2_ERROR_EAGAIN)
				return;
			c->close_sent = true;
		}
		if (c->ch) {
			rc = libssh2_channel_free(c->ch);
			if (rc == LIBSSH2_ERROR_EAGAIN)
				return;
			c->ch = NULL;
		}
		c->st = R_DEAD;
		return;
	case R_DEAD:
		return;
	}
}

static void relay_reap(struct docker_relay *r)
{
	struct rconn **pp = &r->conns, *c;

	while ((c = *pp)) {
		if (c->st == R_DEAD) {
			*pp = c->next;
			close(c->fd);
			free(c);
			r->n--;
			if (!r->n)
				r->idle_since = time(NULL);
		} else {
			pp = &c->next;
		}
	}
}

/* The session is gone: every channel with it (nothing to send). */
static void relay_lost(struct docker_relay *r)
{
	for (struct rconn *c = r->conns; c; c = c->next) {
		c->ch = NULL;   /* freed with the session */
		c->st = R_DEAD;
	}
	relay_drop_session(r, false);
	relay_reap(r);
}

static void relay_accept(struct docker_relay *r)
{
	struct sg_err err = { 0 };
	struct rconn *c;
	int fd = accept4(r->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0)
		return;
	if (!r->s && relay_connect(r, &err) < 0) {
		relay_note(r, err.code, "%s", err.msg);
		close(fd);
		return;
	}
	c = calloc(1, sizeof(*c)); /* freed by relay_reap */
	if (!c) {
		close(fd);
		return;
	}
	c->fd = fd;
	r->moved = true;
	c->next = r->conns;
	r->conns = c;
	r->n++;
}

static void *relay_main(void *arg)
{
	struct docker_relay *r = arg;
	struct pollfd p[RELAY_MAX + 3];
	int idle = 0;

	for (;;) {
		struct rconn *c;
		int np = 0, dir, timeout;

		p[np++] = (struct pollfd){ .fd = r->wake[0], .events = POLLIN };
		p[np++] = (struct pollfd){ .fd = r->n < RELAY_MAX ? r->lfd : -1, .events = POLLIN };
		for (c = r->conns; c; c = c->next)
			p[np++] = (struct pollfd){ .fd = c->fd,
				.events = (short)((c->st == R_LIVE && !c->up_len && !c->fd_eof ? POLLIN : 0) |
						  (c->down_len ? POLLOUT : 0)) };
		if (r->s) {
			dir = libssh2_session_block_directions(r->s);
			p[np++] = (struct pollfd){ .fd = r->sock, .events = (short)(POLLIN |
				((dir & LIBSSH2_SESSION_BLOCK_OUTBOUND) ? POLLOUT : 0)) };
		}
		/* libssh2 buffers whole packets, so one channel's read may take
		 * another's data off the socket: after a pass that moved
		 * something, pass again at once; then twice more shortly (which
		 * empties those buffers); then wait for a socket to stir. */
		timeout = r->moved ? 0 : idle < 2 ? 20 : 1000;
		idle = r->moved ? 0 : idle + 1;
		r->moved = false;
		if (poll(p, (nfds_t)np, timeout) < 0 && errno != EINTR)
			break;
		if (p[0].revents)
			break;
		if (p[1].revents & POLLIN)
			relay_accept(r);
		for (c = r->conns; c && r->s; c = c->next)
			relay_step(r, c);
		if (r->s) {
			int last = libssh2_session_last_errno(r->s);

			if (relay_is_transport(last) || last == LIBSSH2_ERROR_SOCKET_DISCONNECT) {
				relay_lost(r);
				continue;
			}
		}
		relay_reap(r);
		if (r->s && !r->n && time(NULL) - r->idle_since >= RELAY_IDLE_S)
			relay_drop_session(r, true);
	}
	/* Closing: every channel politely, so no dial-stdio stays behind. */
	if (r->s) {
		libssh2_session_set_blocking(r->s, 1);
		libssh2_session_set_timeout(r->s, 2000);
		for (struct rconn *c = r->conns; c; c = c->next) {
			if (c->ch) {
				libssh2_channel_send_eof(c->ch);
				libssh2_channel_close(c->ch);
				libssh2_channel_free(c->ch);
				c->ch = NULL;
			}
			c->st = R_DEAD;
		}
		relay_drop_session(r, true);
	}
	for (struct rconn *c = r->conns; c; c = c->next)
		c->st = R_DEAD;
	relay_reap(r);
	return NULL;
}

/* ---- setup ---------------------------------------------------------------------------- */

static int relay_policy(const char *v, enum sshc_policy *out)
{
	if (!v || !*v || !strcmp(v, "strict"))
		*out = SSHC_STRICT;
	else if (!strcmp(v, "accept-new"))
		*out = SSHC_ACCEPT_NEW;
	else if (!strcmp(v, "off"))
		*out = SSHC_OFF;
	else
		return -1;
	return 0;
}

static int relay_socket(struct docker_relay *r, struct sg_err *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *base = getenv("XDG_RUNTIME_DIR");

	if (!base || !*base || strlen(base) > 80 || access(base, W_OK) != 0)
		base = "/tmp";
	snprintf(r->dir, sizeof(r->dir), "%s/sg-docker-ssh-XXXXXX", base);
	if (!mkdtemp(r->dir))
		return r->host->errf(err, SG_E_IO, "docker: cannot make the ssh relay's directory "
				     "%s: %s", r->dir, strerror(errno));
	snprintf(r->path, sizeof(r->path), "%s/engine.sock", r->dir);
	memcpy(sa.sun_path, r->path, strlen(r->path) + 1);
	r->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (r->lfd < 0 || bind(r->lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(r->lfd, 64) < 0)
		return r->host->errf(err, SG_E_IO, "docker: cannot listen on %s for the ssh "
				     "relay: %s", r->path, strerror(errno));
	return 0;
}

struct docker_relay *docker_relay_new(const struct sg_host_api *host,
				      const struct docker_relay_target *t, struct sg_err *err)
{
	struct docker_relay *r = calloc(1, sizeof(*r)); /* freed by docker_relay_free */
	char known[4096];
	struct passwd *pw;
	int rc;

	if (!r) {
		host->errf(err, SG_E_NOMEM, "docker: out of memory");
		return NULL;
	}
	r->host = host;
	r->lfd = r->wake[0] = r->wake[1] = r->sock = -1;
	pthread_mutex_init(&r->lock, NULL);
	r->port = t->port ? t->port : 22;
	r->timeout_s = t->timeout_s ? t->timeout_s : 30;
	pw = t->user ? NULL : getpwuid(getuid());
	if (sshc_expand_home(t->known_hosts && *t->known_hosts ? t->known_hosts :
			     "~/.ssh/known_hosts", known, sizeof(known)) < 0) {
		host->errf(err, SG_E_INVAL, "docker: [docker] ssh_known_hosts: no home directory "
			   "for ~: set an absolute path");
		goto fail;
	}
	r->rhost = strdup(t->host);
	r->user = strdup(t->user ? t->user : pw ? pw->pw_name : "root");
	r->key = strdup(t->key ? t->key : "");
	r->known = strdup(known);
	if (!r->rhost || !r->user || !r->key || !r->known) {
		host->errf(err, SG_E_NOMEM, "docker: out of memory");
		goto fail;
	}
	snprintf(r->where, sizeof(r->where), "ssh://%s@%s:%u", r->user, r->rhost, r->port);
	if (relay_policy(t->policy, &r->policy) < 0) {
		host->errf(err, SG_E_INVAL, "[docker] ssh_host_key_policy = '%s' is not valid: use "
			   "strict, accept-new or off", t->policy);
		goto fail;
	}
	if (relay_socket(r, err) < 0 || pipe2(r->wake, O_CLOEXEC) < 0)
		goto fail;
	libssh2_init(0);
	r->idle_since = time(NULL);
	rc = pthread_create(&r->th, NULL, relay_main, r);
	if (rc) {
		libssh2_exit();
		host->errf(err, SG_E_IO, "docker: cannot start the ssh relay: %s", strerror(rc));
		goto fail;
	}
	r->started = true;
	return r;
fail:
	docker_relay_free(r);
	return NULL;
}

void docker_relay_free(struct docker_relay *r)
{
	if (!r)
		return;
	if (r->started) {
		if (write(r->wake[1], "x", 1) < 0)
			r->host->log(SG_LOG_WARNING, "docker", "ssh relay: wake: %s", strerror(errno));
		pthread_join(r->th, NULL);
		libssh2_exit();
	}
	if (r->lfd >= 0)
		close(r->lfd);
	if (r->wake[0] >= 0) {
		close(r->wake[0]);
		close(r->wake[1]);
	}
	if (r->path[0])
		unlink(r->path);
	if (r->dir[0] && strstr(r->dir, "sg-docker-ssh-"))
		rmdir(r->dir);
	pthread_mutex_destroy(&r->lock);
	free(r->rhost);
	free(r->user);
	free(r->key);
	free(r->known);
	free(r);
}
