/*
 * Making an SSH connection and tearing it down: the TCP connect (non-blocking,
 * by a deadline, cancellable), the handshake, the host key check and the
 * sign-in (plugins/sshcommon), run as one op on the new connection (see
 * conn.c for ops and the pool that lists what this makes).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/ssh/ssh.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* libssh2 reads the socket through this, so we know when a call received
 * bytes that may hold packets for other ops.  Runs under conn->lock. */
static ssize_t ssh_recv_cb(libssh2_socket_t fd, void *buf, size_t len, int flags,
			   void **abstract)
{
	struct ssh_conn *c = *abstract;
	ssize_t n = recv(fd, buf, len, flags);

	if (n < 0)
		return -errno;
	if (n > 0) {
		c->rx += (uint64_t)n;
		c->ka_unanswered_ms = 0;
	}
	return n;
}

/* Tears the session down without ever blocking: a polite disconnect when
 * the socket takes it at once, then shutdown() so every further send fails
 * fast while libssh2 frees its channels. */
void ssh_conn_free(struct ssh_conn *c)
{
	if (!c)
		return;
	if (c->session) {
		if (!c->broken && !c->out_owner)
			libssh2_session_disconnect(c->session, "sandgate closes the connection");
		if (c->fd >= 0)
			shutdown(c->fd, SHUT_RDWR);
		libssh2_session_set_blocking(c->session, 1);
		if (c->sftp)
			libssh2_sftp_shutdown(c->sftp);
		libssh2_session_free(c->session);
	}
	if (c->fd >= 0)
		close(c->fd);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static int ssh_set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Waits for a non-blocking connect(). */
static int ssh_connect_wait(struct ssh_ctx *ctx, int fd, int64_t deadline,
			    const struct sg_call *call, int *soerr)
{
	struct pollfd pfd[2] = { { .fd = fd, .events = POLLOUT },
				 { .fd = call ? ctx->host->cancel_fd(call) : -1, .events = POLLIN } };
	socklen_t len = sizeof(*soerr);

	for (;;) {
		int64_t left = deadline - ssh_now_ms();
		int r;

		if (left <= 0)
			return SSH_STOP_TIMEOUT;
		r = poll(pfd, pfd[1].fd >= 0 ? 2 : 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			*soerr = errno;
			return SSH_GO;
		}
		if (pfd[1].fd >= 0 && pfd[1].revents)
			return SSH_STOP_CANCEL;
		if (pfd[0].revents)
			break;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, soerr, &len) < 0)
		*soerr = errno;
	return SSH_GO;
}

/* TCP keepalive at the keepalive interval keeps NAT state and finds dead
 * peers even on idle pooled connections; NODELAY because every call is a
 * few small request/response round trips. */
static void ssh_tune_socket(int fd, unsigned ka)
{
	int one = 1, idle = ka ? (int)ka : 60, cnt = 3;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

int ssh_tcp_connect(struct ssh_ctx *ctx, const struct ssh_target *t, int64_t deadline,
		    const struct sg_call *call, struct sg_err *err)
{
	const struct sg_host_api *host = ctx->host;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL;
	char port[16];
	int fd = -1, soerr = 0, gai;

	snprintf(port, sizeof(port), "%u", t->port);
	gai = getaddrinfo(t->host, port, &hints, &res);
	if (gai != 0)
		return host->errf(err, SG_E_UNAVAILABLE, "ssh: cannot resolve host '%s' of target '%s': %s",
				  t->host, t->name, gai_strerror(gai));
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		int stop;

		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0) {
			soerr = errno;
			continue;
		}
		if (ssh_set_nonblock(fd) < 0) {
			soerr = errno;
		} else if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
			soerr = 0;
		} else if (errno != EINPROGRESS) {
			soerr = errno;
		} else {
			stop = ssh_connect_wait(ctx, fd, deadline, call, &soerr);
			if (stop != SSH_GO) {
				close(fd);
				freeaddrinfo(res);
				if (stop == SSH_STOP_CANCEL)
					return host->errf(err, SG_E_CANCELLED, "ssh: cancelled while connecting to %s:%u",
							  t->host, t->port);
				return host->errf(err, SG_E_UNAVAILABLE,
						  "ssh: cannot connect to %s:%u (target '%s') within %u s: no answer (check the host and port, or raise [ssh] connect_timeout)",
						  t->host, t->port, t->name, t->connect_timeout_s);
			}
		}
		if (soerr == 0)
			break;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		errno = soerr;
		return host->errf(err, SG_E_UNAVAILABLE,
				  "ssh: cannot connect to %s:%u (target '%s'): %s (is sshd running there?)",
				  t->host, t->port, t->name, strerror(soerr ? soerr : EHOSTUNREACH));
	}
	ssh_tune_socket(fd, t->keepalive_s);
	return fd;
}

void ssh_peer_of(const struct ssh_pool *p, struct sshc_peer *peer, char *label, size_t size)
{
	const struct ssh_target *t = &p->target;

	snprintf(label, size, "target '%s'", t->name);
	*peer = (struct sshc_peer){
		.host = t->host, .port = t->port, .user = t->user, .key = t->key,
		.known_hosts = t->known_hosts, .passphrase = t->passphrase,
		.policy = t->policy == SSH_POLICY_OFF ? SSHC_OFF :
			  t->policy == SSH_POLICY_ACCEPT_NEW ? SSHC_ACCEPT_NEW : SSHC_STRICT,
		.plugin = SSH_PLUGIN, .label = label,
		.policy_key = "[ssh] host_key_policy", .known_key = "[ssh] known_hosts",
		.passphrase_key = "[ssh] passphrase or SANDGATE_SSH_PASSPHRASE",
		.identity_key = "[ssh] default_key or the target's key",
	};
}

/* sshcommon's ways to wait and to fail: this op's. */
static int ssh_io_again(void *ud)
{
	return ssh_op_wait(ud);
}

static int ssh_io_fatal(void *ud, int rc, const char *what, struct sg_err *err)
{
	return ssh_fail(ud, NULL, rc, what, err);
}

/* Exchanges keys, checks the host key and authenticates (op begun). */
static int ssh_conn_setup(struct ssh_conn *c, struct ssh_op *op, struct sg_err *err)
{
	struct ssh_pool *p = c->pool;
	struct sshc_io io = { .host = p->ctx->host, .s = c->session, .again = ssh_io_again,
			      .fatal = ssh_io_fatal, .is_transport = ssh_rc_is_transport, .ud = op };
	struct sshc_known *known;
	struct sshc_peer peer;
	char label[SSH_NAME_MAX + 16];
	int rc, ret = -1;

	ssh_peer_of(p, &peer, label, sizeof(label));
	known = sshc_known_load(p->ctx->host, c->session, &peer, err);
	if (!known)
		return -1;
	sshc_known_prefer(known, c->session, &peer);
	SSH_CALL(op, rc, libssh2_session_handshake(c->session, c->fd));
	if (rc == LIBSSH2_ERROR_EAGAIN) {
		p->ctx->host->errf(err, op->stop == SSH_STOP_CANCEL ? SG_E_CANCELLED : SG_E_UNAVAILABLE,
				   "ssh: %s:%u did not finish the SSH handshake within %u s (is it an SSH server?)",
				   p->target.host, p->target.port, p->target.connect_timeout_s);
		goto out;
	}
	if (rc) {
		ssh_fail(op, NULL, rc, "SSH handshake", err);
		goto out;
	}
	/* The pool's flag under the pool's lock: connections of one target
	 * are set up one at a time (p->connecting). */
	if (sshc_known_verify(known, c->session, &peer, &p->off_warned, err) < 0)
		goto out;
	if (sshc_userauth(&io, &peer, err) < 0)
		goto out;
	if (p->target.keepalive_s)
		libssh2_keepalive_config(c->session, 1, p->target.keepalive_s);
	ret = 0;
out:
	sshc_known_free(known);
	return ret;
}

/* Makes a new authenticated connection to the pool's target.  The result is
 * not listed yet and nobody else sees it. */
struct ssh_conn *ssh_conn_connect(struct ssh_pool *p, const struct sg_call *call,
					 struct sg_err *err)
{
	const struct ssh_target *t = &p->target;
	int64_t deadline = ssh_now_ms() + (int64_t)t->connect_timeout_s * 1000;
	struct ssh_conn *c = calloc(1, sizeof(*c)); /* freed by ssh_conn_free() */
	struct ssh_op op;
	int64_t t0 = ssh_now_ms();
	char who[SSH_USER_MAX + SSH_HOST_MAX + 16];

	if (!c) {
		p->ctx->host->errf(err, SG_E_NOMEM, "ssh: out of memory");
		return NULL;
	}
	if (ssh_lib_start(p->ctx, err) < 0) {
		free(c);
		return NULL;
	}
	c->pool = p;
	c->fd = -1;
	pthread_mutex_init(&c->lock, NULL);
	c->fd = ssh_tcp_connect(p->ctx, &p->target, deadline, call, err);
	if (c->fd < 0)
		goto fail;
	c->session = libssh2_session_init_ex(NULL, NULL, NULL, c);
	if (!c->session) {
		p->ctx->host->errf(err, SG_E_NOMEM, "ssh: cannot make a libssh2 session");
		goto fail;
	}
	libssh2_session_callback_set(c->session, LIBSSH2_CALLBACK_RECV, (void *)ssh_recv_cb);
	libssh2_session_set_blocking(c->session, 0);
	ssh_op_init(&op, c, call, deadline);
	if (ssh_op_begin(&op) < 0 || ssh_conn_setup(c, &op, err) < 0) {
		ssh_op_end(&op);
		goto fail;
	}
	ssh_op_end(&op);
	ssh_log(p->ctx, SG_LOG_DEBUG, "connected to %s in %lld ms",
		ssh_target_str(t, who, sizeof(who)), (long long)(ssh_now_ms() - t0));
	return c;
fail:
	c->broken = true;
	ssh_conn_free(c);
	return NULL;
}
