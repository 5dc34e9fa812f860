/*
 * Connections.  One pool per target holds its live SSH connections; each
 * connection carries as many channels as the server allows (OpenSSH
 * MaxSessions, default 10): a refused channel open teaches the limit and the
 * pool opens another connection to the same target.  Making a connection
 * (TCP, handshake, host key, sign-in) and tearing one down are in
 * connect.c; here are the waiting, the pool and its channel accounting.
 *
 * Every libssh2 call on a connection runs with conn->lock held, in
 * non-blocking mode; the caller loops on EAGAIN through ssh_op_wait() (see
 * ssh.h for why waiters kick each other and why one op may own the socket's
 * send side).  Lock order: conn->lock before pool->lock, never the reverse.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/ssh/ssh.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define SSH_FLUSH_MS 10000      /* a partially sent packet must go out within this */
#define SSH_CLOSE_MS 5000       /* a channel must close within this */
#define SSH_OPEN_TRIES 6        /* refusals before giving up on a channel */
#define SSH_IDLE_KEEP 2         /* idle connections kept per target */

/* ---- waiting ----------------------------------------------------------------------- */

void ssh_op_init(struct ssh_op *op, struct ssh_conn *c, const struct sg_call *call,
		 int64_t deadline_ms)
{
	memset(op, 0, sizeof(*op));
	op->c = c;
	op->call = call;
	op->deadline_ms = deadline_ms;
	op->efd = -1;
}

void ssh_conn_kick(struct ssh_conn *c, const struct ssh_op *self)
{
	uint64_t one = 1;

	for (struct ssh_op *w = c->waiters; w; w = w->next)
		if (w != self && w->efd >= 0 && write(w->efd, &one, sizeof(one)) < 0)
			(void)0; /* a full counter already means "wake up" */
}

/* Bytes received by this thread's calls may hold packets other ops wait for. */
static void ssh_conn_settle(struct ssh_conn *c, const struct ssh_op *self)
{
	if (c->rx != c->rx_notified) {
		c->rx_notified = c->rx;
		ssh_conn_kick(c, self);
	}
}

/* Updates send-side ownership after op's last call (lock held). */
static void ssh_op_own(struct ssh_op *op)
{
	struct ssh_conn *c = op->c;
	int dirs = c->session ? libssh2_session_block_directions(c->session) : 0;

	if (dirs & LIBSSH2_SESSION_BLOCK_OUTBOUND) {
		if (!c->out_owner) {
			c->out_owner = op;
			op->flush_deadline_ms = ssh_now_ms() + SSH_FLUSH_MS;
		}
	} else if (c->out_owner == op) {
		c->out_owner = NULL;
		ssh_conn_kick(c, op);
	}
}

static void ssh_op_unregister(struct ssh_op *op)
{
	for (struct ssh_op **pp = &op->c->waiters; *pp; pp = &(*pp)->next) {
		if (*pp == op) {
			*pp = op->next;
			break;
		}
	}
	op->next = NULL;
}

static int ssh_op_stop(struct ssh_op *op, enum ssh_stop why)
{
	op->stop = why;
	return -1;
}

static bool ssh_op_cancelled(const struct ssh_op *op)
{
	const struct sg_host_api *host = op->c->pool->ctx->host;

	return op->call && host->cancelled(op->call);
}

/* Sends an SSH keepalive when one is due and the socket has room (a
 * keepalive that blocked half-way would leave libssh2 holding a packet that
 * only the same call could finish), and notices a server that stopped
 * answering.  Lock held, no op owns the send side. */
static void ssh_conn_keepalive(struct ssh_conn *c, int64_t now)
{
	unsigned ka = c->pool->target.keepalive_s;
	struct pollfd pfd = { .fd = c->fd, .events = POLLOUT };
	int next = 0;

	if (!ka || c->out_owner || c->broken)
		return;
	/* Only silence after a keepalive counts: an idle pooled connection
	 * is not a dead one. */
	if (c->ka_unanswered_ms && now - c->ka_unanswered_ms > (int64_t)ka * 3000 + 1000) {
		char why[128];

		snprintf(why, sizeof(why), "no answer from the server for %u s (3 keepalive intervals)",
			 (unsigned)((now - c->ka_unanswered_ms) / 1000));
		ssh_conn_break(c, why);
		return;
	}
	if (poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLOUT)) {
		libssh2_keepalive_send(c->session, &next);
		/* libssh2 sent one when `next` is a whole interval away. */
		if (next >= (int)ka && !c->ka_unanswered_ms)
			c->ka_unanswered_ms = now;
	}
}

/* Sleeps until this op should look again: the socket (when `sock`), its
 * eventfd, the cancel fd or the deadline.  Lock held on entry and exit. */
static int ssh_op_sleep(struct ssh_op *op, bool sock)
{
	struct ssh_conn *c = op->c;
	const struct sg_host_api *host = c->pool->ctx->host;
	bool owner = c->out_owner == op;
	/* A half-sent packet blocks every op on the connection: its owner
	 * finishes it whatever its deadline or a cancellation say, or gives
	 * the connection up. */
	bool quiet = owner || op->stopping;
	int64_t now = ssh_now_ms(), wait_ms = -1;
	int64_t deadline = owner ? op->flush_deadline_ms : op->deadline_ms;
	int n = 0, cfd = op->call && !quiet ? host->cancel_fd(op->call) : -1;
	struct pollfd pfd[3];
	uint64_t junk;

	if (c->broken)
		return ssh_op_stop(op, SSH_STOP_BROKEN);
	if (!quiet && ssh_op_cancelled(op))
		return ssh_op_stop(op, SSH_STOP_CANCEL);
	if (deadline >= 0 && now >= deadline) {
		if (owner)
			ssh_conn_break(c, "the server stopped reading (a packet could not be sent)");
		return ssh_op_stop(op, SSH_STOP_TIMEOUT);
	}
	if (op->efd < 0) {
		op->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (op->efd < 0) {
			ssh_conn_break(c, "out of file descriptors");
			return ssh_op_stop(op, SSH_STOP_BROKEN);
		}
	}
	if (sock && !c->out_owner)
		ssh_conn_keepalive(c, now);
	if (c->broken)
		return ssh_op_stop(op, SSH_STOP_BROKEN);
	/* This op's own calls may have taken in what it waits for: reading
	 * stderr queues stdout's data that came with it, and the socket is
	 * empty then.  The kicks spare the op that read, so look again. */
	if (sock && c->rx != op->rx_seen) {
		op->rx_seen = c->rx;
		ssh_conn_settle(c, op);
		return 0;
	}
	pfd[n++] = (struct pollfd){ .fd = op->efd, .events = POLLIN };
	/* While another op owns the send side this one may not call libssh2
	 * at all: watching the socket would only spin. */
	if (owner)
		pfd[n++] = (struct pollfd){ .fd = c->fd, .events = POLLOUT | POLLIN };
	else if (sock && !c->out_owner)
		pfd[n++] = (struct pollfd){ .fd = c->fd, .events = POLLIN };
	if (cfd >= 0)
		pfd[n++] = (struct pollfd){ .fd = cfd, .events = POLLIN };
	if (deadline >= 0)
		wait_ms = deadline - now;
	if (c->pool->target.keepalive_s && sock) {
		int64_t ka = (int64_t)c->pool->target.keepalive_s * 1000;

		if (wait_ms < 0 || wait_ms > ka)
			wait_ms = ka;
	}
	op->next = c->waiters;
	c->waiters = op;
	ssh_conn_settle(c, op);
	pthread_mutex_unlock(&c->lock);
	if (poll(pfd, (nfds_t)n, wait_ms > INT32_MAX ? INT32_MAX : (int)wait_ms) < 0 &&
	    errno != EINTR)
		usleep(1000); /* cannot happen with valid fds; never spin */
	pthread_mutex_lock(&c->lock);
	ssh_op_unregister(op);
	while (read(op->efd, &junk, sizeof(junk)) > 0)
		;
	/* What others took in meanwhile, they kicked us for: the retry sees it.
	 * (After a wait for the send side, our own earlier calls still count.) */
	if (sock)
		op->rx_seen = c->rx;
	return 0;
}

int ssh_op_wait(struct ssh_op *op)
{
	ssh_op_own(op);
	/* Ops that may not send wait here until the owner flushed. */
	while (op->c->out_owner && op->c->out_owner != op)
		if (ssh_op_sleep(op, false) < 0)
			return -1;
	return ssh_op_sleep(op, true);
}

int ssh_op_pend(struct ssh_op *op)
{
	return ssh_op_sleep(op, false);
}

int ssh_op_begin(struct ssh_op *op)
{
	pthread_mutex_lock(&op->c->lock);
	op->rx_seen = op->c->rx;
	while (op->c->out_owner && op->c->out_owner != op)
		if (ssh_op_sleep(op, false) < 0)
			return -1;
	return op->c->broken ? ssh_op_stop(op, SSH_STOP_BROKEN) : 0;
}

void ssh_op_end(struct ssh_op *op)
{
	struct ssh_conn *c = op->c;

	if (c->session)
		ssh_op_own(op);
	if (c->out_owner == op) {
		/* Nobody can finish this op's packet now. */
		c->out_owner = NULL;
		ssh_conn_break(c, "an operation gave up with a packet half sent");
		ssh_conn_kick(c, op);
	}
	ssh_gate_drop(op);
	ssh_conn_settle(c, op);
	pthread_mutex_unlock(&c->lock);
	if (op->efd >= 0)
		close(op->efd);
	op->efd = -1;
}

void ssh_op_pause(struct ssh_op *op)
{
	ssh_op_own(op);
	ssh_conn_settle(op->c, op);
	pthread_mutex_unlock(&op->c->lock);
}

int ssh_op_resume(struct ssh_op *op)
{
	return ssh_op_begin(op);
}

/* ---- connections (made and freed in connect.c) ----------------------------------- */

void ssh_conn_break(struct ssh_conn *c, const char *why)
{
	struct ssh_pool *p = c->pool;

	if (!c->broken) {
		c->broken = true;
		snprintf(c->broken_why, sizeof(c->broken_why), "%s", why);
		ssh_log(p->ctx, SG_LOG_INFO, "connection to %s@%s:%u dropped: %s", p->target.user,
			p->target.host, p->target.port, why);
	}
	ssh_conn_kick(c, NULL);
	pthread_mutex_lock(&p->lock);
	if (c->listed) {
		for (struct ssh_conn **pp = &p->conns; *pp; pp = &(*pp)->next) {
			if (*pp == c) {
				*pp = c->next;
				break;
			}
		}
		c->listed = false;
		c->refs--; /* the pool's; the caller holds another */
	}
	pthread_mutex_unlock(&p->lock);
}

void ssh_conn_get(struct ssh_conn *c)
{
	pthread_mutex_lock(&c->pool->lock);
	c->refs++;
	pthread_mutex_unlock(&c->pool->lock);
}

void ssh_conn_put(struct ssh_conn *c)
{
	unsigned left;

	if (!c)
		return;
	pthread_mutex_lock(&c->pool->lock);
	left = --c->refs;
	pthread_mutex_unlock(&c->pool->lock);
	if (left == 0)
		ssh_conn_free(c);
}

/* ---- the pool ------------------------------------------------------------------------ */

struct ssh_pool *ssh_pool_get(struct ssh_ctx *ctx, const char *name, struct sg_err *err)
{
	const char *key = name && *name ? name : "default";
	struct ssh_pool *p;

	pthread_mutex_lock(&ctx->lock);
	for (p = ctx->pools; p; p = p->next)
		if (strcmp(p->target.name, key) == 0)
			goto out;
	p = calloc(1, sizeof(*p)); /* freed by ssh_pool_free() from fini */
	if (!p) {
		ctx->host->errf(err, SG_E_NOMEM, "ssh: out of memory");
		goto out;
	}
	if (ssh_target_resolve(ctx, key, &p->target, err) < 0) {
		free(p);
		p = NULL;
		goto out;
	}
	p->ctx = ctx;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	ssh_runner_pool_init(p);
	p->next = ctx->pools;
	ctx->pools = p;
out:
	pthread_mutex_unlock(&ctx->lock);
	return p;
}

void ssh_pool_free(struct ssh_pool *p)
{
	while (p->conns) {
		struct ssh_conn *c = p->conns;

		p->conns = c->next;
		ssh_conn_free(c); /* machines were released before fini */
	}
	for (size_t i = 0; i < SSH_STALE_MAX; i++)
		free(p->stale[i]);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
	free(p);
}

/* True when an idle connection's socket says the server went away (EOF or
 * an error): peeking consumes nothing, so it is safe beside other users. */
static bool ssh_conn_gone(const struct ssh_conn *c)
{
	char b;
	ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);

	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

bool ssh_conn_dropped(struct ssh_conn *c, char *why, size_t n)
{
	bool gone;

	pthread_mutex_lock(&c->lock);
	/* A server that went away while nobody read the socket: say so now,
	 * not at the next call. */
	if (!c->broken && ssh_conn_gone(c))
		ssh_conn_break(c, "the server closed the connection");
	gone = c->broken;
	if (gone && why)
		snprintf(why, n, "%s", c->broken_why);
	pthread_mutex_unlock(&c->lock);
	return gone;
}

bool ssh_pool_connected(struct ssh_pool *p)
{
	bool any = false;

	pthread_mutex_lock(&p->lock);
	/* Listed connections are not broken: ssh_conn_break() delists. */
	for (struct ssh_conn *c = p->conns; c && !any; c = c->next)
		any = !ssh_conn_gone(c);
	pthread_mutex_unlock(&p->lock);
	return any;
}

/* Takes c off the list (pool lock held); returns it when that dropped the
 * last reference, for the caller to free after unlocking. */
static struct ssh_conn *ssh_pool_delist(struct ssh_pool *p, struct ssh_conn *c)
{
	for (struct ssh_conn **pp = &p->conns; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	c->listed = false;
	return --c->refs == 0 ? c : NULL;
}

/* A listed connection with a free slot (pool lock held). */
static struct ssh_conn *ssh_pool_pick(struct ssh_pool *p, struct ssh_conn **dead)
{
	for (struct ssh_conn *c = p->conns, *next; c; c = next) {
		next = c->next;
		if (ssh_conn_gone(c)) {
			struct ssh_conn *d = ssh_pool_delist(p, c);

			/* Only the pool held it; freed by the caller, unlocked.
			 * Otherwise its holders free it; it is broken for them
			 * when they next call libssh2. */
			if (d) {
				d->next = *dead;
				*dead = d;
			}
			continue;
		}
		if (!c->max_slots || c->slots < c->max_slots)
			return c;
	}
	return NULL;
}

static void ssh_free_list(struct ssh_conn *list)
{
	while (list) {
		struct ssh_conn *c = list;

		list = c->next;
		c->broken = true;
		ssh_conn_free(c);
	}
}

/* Waits on the pool's condition for a connect in flight, in slices so a
 * cancellation or the deadline is noticed (pool lock held). */
static int ssh_pool_wait(struct ssh_pool *p, int64_t deadline, const struct sg_call *call,
			 struct sg_err *err)
{
	const struct sg_host_api *host = p->ctx->host;
	struct timespec ts;

	if (call && host->cancelled(call))
		return host->errf(err, SG_E_CANCELLED, "ssh: cancelled while waiting for a connection");
	if (deadline >= 0 && ssh_now_ms() >= deadline)
		return host->errf(err, SG_E_TIMEOUT, "ssh: timed out waiting for a connection to %s:%u",
				  p->target.host, p->target.port);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += 50 * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&p->cond, &p->lock, &ts);
	return 0;
}

/* Connects a new listed connection for the pool (pool lock held on entry
 * and exit, dropped while connecting).  NULL with err. */
static struct ssh_conn *ssh_pool_connect(struct ssh_pool *p, const struct sg_call *call,
					 struct sg_err *err)
{
	struct ssh_conn *c;

	p->connecting = true;
	pthread_mutex_unlock(&p->lock);
	c = ssh_conn_connect(p, call, err);
	pthread_mutex_lock(&p->lock);
	p->connecting = false;
	pthread_cond_broadcast(&p->cond);
	if (c) {
		c->listed = true;
		c->max_slots = p->max_slots;
		c->refs = 2; /* the pool's and the caller's */
		c->next = p->conns;
		p->conns = c;
	}
	return c;
}

static struct ssh_conn *ssh_slot_reserve_ex(struct ssh_pool *p, int64_t deadline,
					    const struct sg_call *call, bool fresh,
					    struct sg_err *err)
{
	struct ssh_conn *c = NULL, *dead = NULL;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		c = fresh ? NULL : ssh_pool_pick(p, &dead);
		if (c) {
			c->slots++;
			c->refs++;
			pthread_mutex_unlock(&p->lock);
			ssh_free_list(dead);
			return c;
		}
		if (!p->connecting)
			break;
		if (ssh_pool_wait(p, deadline, call, err) < 0) {
			pthread_mutex_unlock(&p->lock);
			ssh_free_list(dead);
			return NULL;
		}
		fresh = false; /* someone else just connected: use theirs */
	}
	c = ssh_pool_connect(p, call, err);
	if (c)
		c->slots = 1;
	pthread_mutex_unlock(&p->lock);
	ssh_free_list(dead);
	return c;
}

struct ssh_conn *ssh_slot_reserve(struct ssh_pool *p, int64_t deadline,
				  const struct sg_call *call, struct sg_err *err)
{
	return ssh_slot_reserve_ex(p, deadline, call, false, err);
}

static struct ssh_conn *ssh_sftp_pick(struct ssh_pool *p, struct ssh_conn **dead)
{
	struct ssh_conn *busy = NULL;

	for (struct ssh_conn *c = p->conns, *next; c; c = next) {
		next = c->next;
		if (ssh_conn_gone(c)) {
			struct ssh_conn *d = ssh_pool_delist(p, c);

			if (d) {
				d->next = *dead;
				*dead = d;
			}
			continue;
		}
		if (c->sftp_slot && c->sftp_users == 0)
			return c;
		if (c->sftp_slot && (!busy || c->sftp_users < busy->sftp_users))
			busy = c;
	}
	for (struct ssh_conn *c = p->conns; c; c = c->next) {
		if (!c->sftp_slot && (!c->max_slots || c->slots < c->max_slots)) {
			c->sftp_slot = true;
			c->slots++;
			return c;
		}
	}
	return busy;
}

struct ssh_conn *ssh_sftp_reserve(struct ssh_pool *p, const struct sg_call *call, bool fresh,
				  struct sg_err *err)
{
	struct ssh_conn *c = NULL, *dead = NULL;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		c = fresh ? NULL : ssh_sftp_pick(p, &dead);
		if (c || !p->connecting)
			break;
		if (ssh_pool_wait(p, -1, call, err) < 0)
			goto out;
		fresh = false;
	}
	if (!c) {
		c = ssh_pool_connect(p, call, err);
		if (!c)
			goto out;
		c->slots = 1;
		c->sftp_slot = true;
		c->refs--; /* ssh_pool_connect counted the caller's: counted below */
	}
	c->sftp_users++;
	c->refs++;
out:
	pthread_mutex_unlock(&p->lock);
	ssh_free_list(dead);
	return c;
}

void ssh_sftp_opened(struct ssh_conn *c)
{
	pthread_mutex_lock(&c->pool->lock);
	c->open++;
	pthread_mutex_unlock(&c->pool->lock);
}

void ssh_sftp_unreserve(struct ssh_conn *c, bool drop, bool was_open)
{
	struct ssh_pool *p = c->pool;
	unsigned left;

	pthread_mutex_lock(&p->lock);
	c->sftp_users--;
	if (drop && c->sftp_slot) {
		c->sftp_slot = false;
		c->slots--;
		if (was_open)
			c->open--;
	}
	left = --c->refs;
	pthread_mutex_unlock(&p->lock);
	if (left == 0)
		ssh_conn_free(c);
}

void ssh_slot_release(struct ssh_conn *c, bool was_open)
{
	struct ssh_pool *p = c->pool;
	unsigned left;

	pthread_mutex_lock(&p->lock);
	c->slots--;
	if (was_open)
		c->open--;
	/* Keep a few idle connections per target; close the extra ones a
	 * burst of concurrent calls opened. */
	if (c->listed && c->slots == 0) {
		unsigned idle = 0;

		for (struct ssh_conn *o = p->conns; o; o = o->next)
			if (o != c && o->slots == 0)
				idle++;
		if (idle >= SSH_IDLE_KEEP)
			(void)ssh_pool_delist(p, c); /* never the last: ours is counted */
	}
	left = --c->refs;
	pthread_mutex_unlock(&p->lock);
	if (left == 0)
		ssh_conn_free(c);
}

void ssh_slot_refused(struct ssh_conn *c)
{
	struct ssh_pool *p = c->pool;

	pthread_mutex_lock(&p->lock);
	if (c->open > 0 && (!c->max_slots || c->open < c->max_slots)) {
		c->max_slots = c->open;
		/* The same sshd_config rules every connection to the target. */
		if (!p->max_slots || c->max_slots < p->max_slots)
			p->max_slots = c->max_slots;
	}
	pthread_mutex_unlock(&p->lock);
}

/* ---- channels ----------------------------------------------------------------------- */

static void ssh_chan_mark_open(struct ssh_conn *c)
{
	pthread_mutex_lock(&c->pool->lock);
	c->open++;
	pthread_mutex_unlock(&c->pool->lock);
}

int ssh_gate_take(struct ssh_op *op)
{
	while (op->c->gate && op->c->gate != op)
		if (ssh_op_sleep(op, false) < 0)
			return -1;
	op->c->gate = op;
	return 0;
}

void ssh_gate_drop(struct ssh_op *op)
{
	if (op->c->gate == op) {
		op->c->gate = NULL;
		ssh_conn_kick(op->c, op);
	}
}

int ssh_chan_open(struct ssh_pool *p, struct ssh_op *op, const struct sg_call *call,
		  int64_t deadline_ms, struct ssh_conn **cp, LIBSSH2_CHANNEL **chp,
		  struct sg_err *err)
{
	bool reconnected = false, fresh = false;
	int refusals = 0;

	*cp = NULL;
	*chp = NULL;
	for (;;) {
		struct ssh_conn *c = ssh_slot_reserve_ex(p, deadline_ms, call, fresh, err);
		LIBSSH2_CHANNEL *ch = NULL;
		bool was_first;
		int rc;

		if (!c)
			return -1;
		ssh_op_init(op, c, call, deadline_ms);
		if (ssh_op_begin(op) < 0 || ssh_gate_take(op) < 0) {
			rc = LIBSSH2_ERROR_EAGAIN;
			goto failed;
		}
		SSH_CALLP(op, ch, libssh2_channel_open_session(c->session));
		if (ch) {
			ssh_chan_mark_open(c);
			*cp = c;
			*chp = ch;
			return 0;
		}
		rc = libssh2_session_last_errno(c->session);
failed:
		if (rc == LIBSSH2_ERROR_EAGAIN && op->stop != SSH_STOP_BROKEN) {
			ssh_fail(op, NULL, rc, "opening a channel", err);
			ssh_op_end(op);
			ssh_slot_release(c, false);
			return -1;
		}
		if (rc == LIBSSH2_ERROR_CHANNEL_FAILURE && !c->broken) {
			/* MaxSessions reached (administratively prohibited):
			 * this connection is full, another one takes the rest. */
			pthread_mutex_lock(&p->lock);
			was_first = c->open == 0;
			pthread_mutex_unlock(&p->lock);
			ssh_fail(op, NULL, rc, "opening a session channel", err);
			ssh_slot_refused(c);
			ssh_op_end(op);
			ssh_slot_release(c, false);
			if (was_first || ++refusals > SSH_OPEN_TRIES)
				return -1;
			fresh = false;
			continue;
		}
		if (op->stop == SSH_STOP_BROKEN || c->broken || ssh_rc_is_transport(rc)) {
			ssh_fail(op, NULL, rc, "opening a session channel", err);
			ssh_op_end(op);
			ssh_slot_release(c, false);
			if (reconnected)
				return -1;
			/* The server dropped the connection (restart, idle
			 * timeout): once, transparently, on a new one. */
			reconnected = true;
			fresh = true;
			continue;
		}
		ssh_fail(op, NULL, rc, "opening a session channel", err);
		ssh_op_end(op);
		ssh_slot_release(c, false);
		return -1;
	}
}

void ssh_chan_done(struct ssh_op *op, LIBSSH2_CHANNEL *ch)
{
	struct ssh_conn *c = op->c;
	int rc = 0;

	if (ch && !c->broken) {
		/* Cleanup runs whatever happened to the call: ignore the
		 * cancellation, bound the wait for the server's close. */
		op->stopping = true;
		op->deadline_ms = ssh_now_ms() + SSH_CLOSE_MS;
		SSH_CALL(op, rc, libssh2_channel_free(ch));
		if (rc == LIBSSH2_ERROR_EAGAIN && !c->broken)
			ssh_conn_break(c, "a channel did not close in time");
		/* Left to libssh2_session_free() when that failed. */
	} else if (ch) {
		/* A dead session cannot send the close; free it locally. */
		libssh2_channel_free(ch);
	}
	ssh_op_end(op);
	ssh_slot_release(c, true);
}
