/* The sandgate side of a runner connection (see client.h): opening and
 * closing it, and the requests on it; the reader thread that files the
 * runner's frames with them is in client_read.c. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/runner/client_int.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- small things -------------------------------------------------------------- */

static void rn_log(struct rn_conn *c, enum rn_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void rn_log(struct rn_conn *c, enum rn_log_level level, const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	if (!c->o.log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->o.log(c->o.log_ud, level, msg);
}

void rn_wake(struct rn_req *r)
{
	uint64_t one = 1;
	ssize_t w = write(r->efd, &one, sizeof(one));

	(void)w; /* a full counter still wakes the waiter */
}

void rn_conn_ref(struct rn_conn *c)
{
	pthread_mutex_lock(&c->lock);
	c->refs++;
	pthread_mutex_unlock(&c->lock);
}

void rn_conn_put(struct rn_conn *c)
{
	bool last;

	pthread_mutex_lock(&c->lock);
	last = --c->refs == 0;
	pthread_mutex_unlock(&c->lock);
	if (!last)
		return;
	c->t.free(c->t.ud);
	rn_reader_free(&c->rd);
	pthread_mutex_destroy(&c->wlock);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
	free(c);
}

void rn_req_free(struct rn_req *r)
{
	struct rn_chunk *k;

	while ((k = r->head)) {
		r->head = k->next;
		free(k);
	}
	if (r->efd >= 0)
		close(r->efd);
	rn_conn_put(r->c);
	free(r);
}

/* Takes r out of the table; called with c->lock held.  Returns true when
 * that was the last reference (the caller frees after unlocking). */
bool rn_unlink_locked(struct rn_conn *c, struct rn_req *r)
{
	for (struct rn_req **pp = &c->table; *pp; pp = &(*pp)->next) {
		if (*pp == r) {
			*pp = r->next;
			r->in_table = false;
			return --r->refs == 0;
		}
	}
	return false;
}

/* ---- death ------------------------------------------------------------------------- */

/* Marks the connection dead and fails every request in flight. */
void rn_conn_fail(struct rn_conn *c, const char *why)
{
	struct rn_req *gone = NULL, *r;

	pthread_mutex_lock(&c->lock);
	if (!c->dead) {
		c->dead = true;
		snprintf(c->why, sizeof(c->why), "%s", why);
	}
	while ((r = c->table)) {
		c->table = r->next;
		r->in_table = false;
		if (r->state == RN_REQ_RUNNING) {
			r->state = RN_REQ_FAILED;
			snprintf(r->why, sizeof(r->why), "the runner connection broke: %.160s",
				 c->why);
		}
		rn_wake(r);
		if (--r->refs == 0) {
			r->next = gone;
			gone = r;
		}
	}
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	while ((r = gone)) {
		gone = r->next;
		rn_req_free(r);
	}
	c->t.shutdown(c->t.ud);
}

/* ---- opening and closing -------------------------------------------------------------- */

static int rn_write_frame(struct rn_conn *c, uint8_t type, uint32_t id,
			  const void *payload, size_t len)
{
	unsigned char small[RN_HDR_SIZE + 512];
	int rc;

	rn_hdr_put(small, type, id, (uint32_t)len);
	pthread_mutex_lock(&c->wlock);
	if (len <= sizeof(small) - RN_HDR_SIZE) {
		/* One write for small frames: the common case is latency bound. */
		if (len)
			memcpy(small + RN_HDR_SIZE, payload, len);
		rc = c->t.write(c->t.ud, small, RN_HDR_SIZE + len);
	} else {
		rc = c->t.write(c->t.ud, small, RN_HDR_SIZE);
		if (rc == 0)
			rc = c->t.write(c->t.ud, payload, len);
	}
	pthread_mutex_unlock(&c->wlock);
	if (rc < 0)
		rn_conn_fail(c, "writing to the runner failed");
	return rc;
}

static int rn_send_hello(struct rn_conn *c)
{
	struct rn_buf b = { 0 };
	int rc;

	rn_put_u32(&b, RN_F_VERSION, RN_VERSION_MAJOR << 16 | RN_VERSION_MINOR);
	if (c->want_id[0])
		rn_put_str(&b, RN_F_BUILD_ID, c->want_id);
	rc = b.oom ? -1 : rn_write_frame(c, RN_HELLO, 0, b.data, b.len);
	rn_buf_free(&b);
	return rc;
}

static void rn_deadline(struct timespec *ts, int ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

/* Waits for HELLO or death: 0 on the runner's HELLO, -2 when none came in time and the connection
 * is still up (a slow start), -1 when it ended. */
static int rn_wait_hello(struct rn_conn *c, char *why, size_t size)
{
	struct timespec until;
	int rc = 0;

	rn_deadline(&until, c->o.hello_timeout_ms > 0 ? c->o.hello_timeout_ms : 10000);
	pthread_mutex_lock(&c->lock);
	while (!c->hello && !c->dead && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&c->cond, &c->lock, &until);
	if (c->dead)
		snprintf(why, size, "%s", c->why);
	else if (!c->hello)
		snprintf(why, size, "no HELLO from the runner within %d ms",
			 c->o.hello_timeout_ms);
	rc = c->hello && !c->dead ? 0 : c->dead ? -1 : -2;
	pthread_mutex_unlock(&c->lock);
	return rc;
}

static struct rn_conn *rn_conn_new(const struct rn_transport *t,
				   const struct rn_conn_opts *o)
{
	struct rn_conn *c = calloc(1, sizeof(*c)); /* freed by the last rn_conn_put() */
	pthread_condattr_t ca;

	if (!c)
		return NULL;
	c->t = *t;
	c->o = *o;
	snprintf(c->name, sizeof(c->name), "%s", o->name ? o->name : "runner");
	c->o.name = c->name;
	if (o->build_id)
		snprintf(c->want_id, sizeof(c->want_id), "%s", o->build_id);
	c->o.build_id = NULL;
	c->refs = 1;
	c->next_id = 1;
	rn_reader_init(&c->rd, RN_MAX_PAYLOAD);
	pthread_mutex_init(&c->wlock, NULL);
	pthread_mutex_init(&c->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cond, &ca);
	pthread_condattr_destroy(&ca);
	return c;
}

int rn_conn_open(const struct rn_transport *t, const struct rn_conn_opts *o,
		 struct rn_conn **out, char *why, size_t size)
{
	struct rn_conn *c = rn_conn_new(t, o);
	int sent, waited;

	*out = NULL;
	if (size)
		why[0] = '\0'; /* a failed send below leaves it to c->why */
	if (!c) {
		t->shutdown(t->ud);
		t->free(t->ud);
		return snprintf(why, size, "out of memory"), -1;
	}
	if (pthread_create(&c->reader, NULL, rn_reader_main, c) != 0) {
		snprintf(why, size, "cannot start the reader thread");
		c->t.shutdown(c->t.ud);
		rn_conn_put(c);
		return -1;
	}
	c->reader_started = true;
	sent = rn_send_hello(c);
	waited = rn_wait_hello(c, why, size);
	if (waited < 0 || sent < 0) {
		/* The reader may have failed the connection (a bad HELLO) while
		 * our HELLO was being sent: its reason is the one that counts. */
		if (!why[0]) {
			pthread_mutex_lock(&c->lock);
			snprintf(why, size, "%s", c->why[0] ? c->why : "cannot send HELLO to the runner");
			pthread_mutex_unlock(&c->lock);
		}
		rn_conn_close(c);
		return sent < 0 ? -1 : waited;
	}
	rn_log(c, RN_LOG_DEBUG, "%s: runner %ld (build %s, %s) speaks protocol %u.%u",
	       c->name, c->h.pid, c->h.build_id, c->h.arch, c->h.major, c->h.minor);
	*out = c;
	return 0;
}

void rn_conn_close(struct rn_conn *c)
{
	if (!c)
		return;
	rn_conn_fail(c, "closed by sandgate");
	if (c->reader_started && !c->reader_joined) {
		pthread_join(c->reader, NULL);
		c->reader_joined = true;
	}
	rn_conn_put(c);
}

bool rn_conn_alive(struct rn_conn *c, char *why, size_t size)
{
	bool alive;

	pthread_mutex_lock(&c->lock);
	alive = !c->dead;
	if (!alive && why)
		snprintf(why, size, "%s", c->why);
	pthread_mutex_unlock(&c->lock);
	return alive;
}

void rn_conn_hello(struct rn_conn *c, struct rn_hello *h)
{
	pthread_mutex_lock(&c->lock);
	*h = c->h;
	pthread_mutex_unlock(&c->lock);
}

bool rn_conn_has_cap(struct rn_conn *c, const char *name)
{
	size_t n = strlen(name);
	bool has = false;

	pthread_mutex_lock(&c->lock);
	for (const char *p = c->h.caps; *p && !has;) {
		size_t len = strcspn(p, " ");

		has = len == n && strncmp(p, name, n) == 0;
		p += len + (p[len] ? 1 : 0);
	}
	pthread_mutex_unlock(&c->lock);
	return has;
}

/* ---- requests ------------------------------------------------------------------------ */

/* A new request in the table: refs = table + caller; type is the frame
 * that asks (RN_PING, RN_SPAWN, ...), quiet_start as in struct rn_spawn.
 * NULL when the connection is dead (why) or out of memory. */
static struct rn_req *rn_req_new(struct rn_conn *c, uint8_t type, bool quiet_start,
				 char *why, size_t size)
{
	struct rn_req *r = calloc(1, sizeof(*r)); /* freed by rn_req_free() */

	if (!r)
		return snprintf(why, size, "out of memory"), NULL;
	r->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (r->efd < 0) {
		snprintf(why, size, "eventfd: %s", strerror(errno));
		free(r);
		return NULL;
	}
	r->c = c;
	r->type = type;
	r->ping = type == RN_PING;
	r->file = type == RN_FILE;
	/* Set before the request is in the table, where the reader sees it. */
	r->quiet_start = quiet_start || type == RN_KEXEC;
	r->refs = 2;
	r->ex.code = -1;
	pthread_mutex_lock(&c->lock);
	if (c->dead) {
		snprintf(why, size, "%s", c->why);
		pthread_mutex_unlock(&c->lock);
		close(r->efd);
		free(r);
		return NULL;
	}
	c->refs++;
	r->id = c->next_id++;
	if (c->next_id == 0)
		c->next_id = 1; /* 0 is the connection's own id */
	r->in_table = true;
	r->next = c->table;
	c->table = r;
	pthread_mutex_unlock(&c->lock);
	return r;
}

/* Takes a request that was never sent out of the table again. */
static void rn_req_abort(struct rn_req *r)
{
	struct rn_conn *c = r->c;
	bool last;

	pthread_mutex_lock(&c->lock);
	if (r->in_table)
		rn_unlink_locked(c, r);
	last = --r->refs == 0;
	pthread_mutex_unlock(&c->lock);
	if (last)
		rn_req_free(r);
}

static void rn_spawn_fields(struct rn_buf *b, const struct rn_spawn *sp)
{
	if (sp->command)
		rn_put_str(b, RN_F_COMMAND, sp->command);
	for (size_t i = 0; !sp->command && sp->argv && sp->argv[i]; i++)
		rn_put_str(b, RN_F_ARG, sp->argv[i]);
	for (size_t i = 0; sp->env && sp->env[i]; i++)
		rn_put_str(b, RN_F_ENV, sp->env[i]);
	if (sp->cwd)
		rn_put_str(b, RN_F_CWD, sp->cwd);
	if (sp->timeout_ms)
		rn_put_u32(b, RN_F_TIMEOUT_MS, sp->timeout_ms);
	rn_put_u32(b, RN_F_GRACE_MS, sp->grace_ms);
	if (sp->cap)
		rn_put_u64(b, RN_F_CAP, sp->cap);
	if (sp->mode)
		rn_put_u32(b, RN_F_MODE, sp->mode);
	if (sp->mode & RN_MODE_STATUS)
		rn_put_u32(b, RN_F_STATUS_FD, (uint32_t)sp->status_fd);
}

static int rn_request_as(struct rn_conn *c, uint8_t type, const void *payload, size_t len,
			 bool quiet_start, struct rn_req **out, char *why, size_t size)
{
	struct rn_req *r;

	*out = NULL;
	if (len > RN_MAX_PAYLOAD)
		return snprintf(why, size, "the request takes more than %u bytes",
				RN_MAX_PAYLOAD), 1;
	r = rn_req_new(c, type, quiet_start, why, size);
	if (!r)
		return -1;
	if (rn_write_frame(c, type, r->id, payload, len) < 0) {
		rn_conn_alive(c, why, size);
		rn_req_abort(r);
		return -1;
	}
	*out = r;
	return 0;
}

int rn_request(struct rn_conn *c, uint8_t type, const void *payload, size_t len,
	       struct rn_req **out, char *why, size_t size)
{
	return rn_request_as(c, type, payload, len, false, out, why, size);
}

/* The request's frame, its stdin's and STDIN_CLOSE in b (total bytes, as
 * rn_request_stdin sizes it), sent in one write: frames of one writer are
 * never interleaved (wlock).  Frees b. */
static int rn_write_corked(struct rn_conn *c, unsigned char *b, size_t total, uint8_t type,
			   uint32_t id, const void *payload, size_t len, const void *data, size_t n)
{
	unsigned char *o = b;
	int rc;

	rn_hdr_put(o, type, id, (uint32_t)len);
	if (len)
		memcpy(o + RN_HDR_SIZE, payload, len);
	o += RN_HDR_SIZE + len;
	if (n) {
		rn_hdr_put(o, RN_STDIN, id, (uint32_t)n);
		memcpy(o + RN_HDR_SIZE, data, n);
		o += RN_HDR_SIZE + n;
	}
	rn_hdr_put(o, RN_STDIN_CLOSE, id, 0);
	pthread_mutex_lock(&c->wlock);
	rc = c->t.write(c->t.ud, b, total);
	pthread_mutex_unlock(&c->wlock);
	free(b);
	if (rc < 0)
		rn_conn_fail(c, "writing to the runner failed");
	return rc;
}

int rn_request_stdin(struct rn_conn *c, uint8_t type, const void *payload, size_t len,
		     const void *data, size_t n, struct rn_req **out, char *why, size_t size)
{
	size_t total = RN_HDR_SIZE + len + (n ? RN_HDR_SIZE + n : 0) + RN_HDR_SIZE;
	unsigned char *b = len + n <= RN_CORK_MAX ? malloc(total) : NULL; /* rn_write_corked */
	struct rn_req *r;
	int rc;

	if (!b) { /* large, or no memory for the one buffer: frame by frame */
		rc = rn_request_as(c, type, payload, len, false, out, why, size);
		if (rc == 0 && (n ? rn_req_stdin(*out, data, n) : 0) == 0)
			rn_req_stdin_close(*out);
		return rc;
	}
	*out = NULL;
	r = rn_req_new(c, type, false, why, size);
	if (!r) {
		free(b);
		return -1;
	}
	if (rn_write_corked(c, b, total, type, r->id, payload, len, data, n) < 0) {
		rn_conn_alive(c, why, size);
		rn_req_abort(r);
		return -1;
	}
	*out = r;
	return 0;
}

int rn_spawn(struct rn_conn *c, const struct rn_spawn *sp, struct rn_req **out,
	     char *why, size_t size)
{
	struct rn_buf b = { 0 };
	int rc;

	*out = NULL;
	rn_spawn_fields(&b, sp);
	if (b.oom || b.len > RN_MAX_PAYLOAD) {
		rn_buf_free(&b);
		snprintf(why, size, "the command and its environment take more than "
			 "%u bytes", RN_MAX_PAYLOAD);
		return 1;
	}
	rc = rn_request_as(c, RN_SPAWN, b.data, b.len, sp->quiet_start, out, why, size);
	rn_buf_free(&b);
	return rc;
}

int rn_req_wait(struct rn_req *r, int timeout_ms, int extra_fd)
{
	struct pollfd pfd[2] = { { .fd = r->efd, .events = POLLIN },
				 { .fd = extra_fd, .events = POLLIN } };
	uint64_t v;
	int n;

	do
		n = poll(pfd, extra_fd >= 0 ? 2 : 1, timeout_ms);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return 0;
	if (pfd[0].revents) {
		ssize_t got = read(r->efd, &v, sizeof(v));

		(void)got; /* resets the counter; EAGAIN is fine */
		return 1;
	}
	return 2;
}

static enum rn_req_state rn_state_locked(struct rn_req *r, struct rn_exit *ex,
					 char *why, size_t size)
{
	if (ex)
		*ex = r->ex;
	if (why && size)
		snprintf(why, size, "%s", r->why);
	return r->state;
}

enum rn_req_state rn_req_drain(struct rn_req *r, rn_data_fn *fn, void *ud,
			       struct rn_exit *ex, char *why, size_t size)
{
	struct rn_conn *c = r->c;
	enum rn_req_state st;
	struct rn_chunk *k;

	pthread_mutex_lock(&c->lock);
	/* The state first: data filed before an EXIT is in the queue now. */
	st = rn_state_locked(r, ex, why, size);
	while ((k = r->head)) {
		r->head = k->next;
		fn(k->chan, k->data + k->off, k->len - k->off, ud);
		r->queued -= k->len - k->off;
		free(k);
	}
	r->tail = NULL;
	pthread_mutex_unlock(&c->lock);
	return st;
}

size_t rn_req_take(struct rn_req *r, void *p, size_t n, int *chan)
{
	struct rn_conn *c = r->c;
	struct rn_chunk *k;
	size_t got = 0;

	pthread_mutex_lock(&c->lock);
	k = r->head;
	if (k) {
		*chan = k->chan;
		/* Merge following chunks of the same channel into one read. */
		while (k && k->chan == *chan && got < n) {
			size_t take = k->len - k->off;

			if (take > n - got)
				take = n - got;
			memcpy((unsigned char *)p + got, k->data + k->off, take);
			got += take;
			k->off += take;
			r->queued -= take;
			if (k->off < k->len)
				break;
			r->head = k->next;
			free(k);
			k = r->head;
		}
		if (!r->head)
			r->tail = NULL;
	}
	pthread_mutex_unlock(&c->lock);
	return got;
}

enum rn_req_state rn_req_state(struct rn_req *r, struct rn_exit *ex, char *why,
			       size_t size, size_t *queued)
{
	enum rn_req_state st;

	pthread_mutex_lock(&r->c->lock);
	st = rn_state_locked(r, ex, why, size);
	if (queued)
		*queued = r->queued;
	pthread_mutex_unlock(&r->c->lock);
	return st;
}

bool rn_req_started(struct rn_req *r, long *pid, long *pgid)
{
	bool started;

	pthread_mutex_lock(&r->c->lock);
	started = r->started;
	if (pid)
		*pid = r->pid;
	if (pgid)
		*pgid = r->pgid;
	pthread_mutex_unlock(&r->c->lock);
	return started;
}

bool rn_req_overflowed(struct rn_req *r)
{
	bool o;

	pthread_mutex_lock(&r->c->lock);
	o = r->overflow;
	pthread_mutex_unlock(&r->c->lock);
	return o;
}

/* Frames about a request that ended are pointless, and harmless. */
static bool rn_req_running(struct rn_req *r)
{
	return rn_req_state(r, NULL, NULL, 0, NULL) == RN_REQ_RUNNING;
}

int rn_req_stdin(struct rn_req *r, const void *p, size_t n)
{
	const unsigned char *q = p;

	while (n > 0) {
		size_t take = n < RN_CHUNK ? n : RN_CHUNK;

		if (!rn_req_running(r) ||
		    rn_write_frame(r->c, RN_STDIN, r->id, q, take) < 0)
			return -1;
		q += take;
		n -= take;
	}
	return 0;
}

int rn_req_stdin_close(struct rn_req *r)
{
	if (!rn_req_running(r))
		return -1;
	return rn_write_frame(r->c, RN_STDIN_CLOSE, r->id, NULL, 0);
}

int rn_req_kill(struct rn_req *r, int sig)
{
	unsigned char v[4];

	if (!rn_req_running(r))
		return 0;
	if (sig <= 0)
		return rn_write_frame(r->c, RN_KILL, r->id, NULL, 0);
	rn_set_u32(v, (uint32_t)sig);
	return rn_write_frame(r->c, RN_KILL, r->id, v, sizeof(v));
}

void rn_req_ref(struct rn_req *r)
{
	pthread_mutex_lock(&r->c->lock);
	r->refs++;
	pthread_mutex_unlock(&r->c->lock);
}

void rn_req_put(struct rn_req *r)
{
	struct rn_chunk *drop = NULL;
	bool last;

	if (!r)
		return;
	pthread_mutex_lock(&r->c->lock);
	last = --r->refs == 0;
	if (!last && r->refs == 1 && r->in_table) {
		/* Only the table holds it now: what it queued, and what comes
		 * later (rn_on_data), has no taker.  A runner that kept sending
		 * for requests whose callers gave up held up to RN_QUEUE_MAX
		 * each, for as long as the connection lived. */
		drop = r->head;
		r->head = r->tail = NULL;
		r->queued = 0;
	}
	pthread_mutex_unlock(&r->c->lock);
	while (drop) {
		struct rn_chunk *k = drop;

		drop = k->next;
		free(k);
	}
	if (last)
		rn_req_free(r);
}

long rn_ping(struct rn_conn *c, int timeout_ms)
{
	struct timespec t0, t1;
	struct rn_req *r;
	char why[RN_WHY_MAX];
	long us = -1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	r = rn_req_new(c, RN_PING, false, why, sizeof(why));
	if (!r)
		return -1;
	if (rn_write_frame(c, RN_PING, r->id, NULL, 0) < 0) {
		rn_req_abort(r);
		return -1;
	}
	while (rn_req_running(r))
		if (rn_req_wait(r, timeout_ms, -1) == 0)
			break;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (rn_req_state(r, NULL, NULL, 0, NULL) == RN_REQ_DONE)
		us = (t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000;
	rn_req_put(r);
	return us;
}

/* ---- a socket transport ------------------------------------------------------------- */

static ssize_t rn_fd_read(void *ud, void *p, size_t n)
{
	int fd = (int)(intptr_t)ud;
	ssize_t r;

	do
		r = read(fd, p, n);
	while (r < 0 && errno == EINTR);
	return r;
}

int rn_send_all(int fd, const void *p, size_t n)
{
	const unsigned char *q = p;
	ssize_t w;

	while (n > 0) {
		/* MSG_NOSIGNAL: a dead runner must not SIGPIPE sandgate. */
		w = send(fd, q, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		q += w;
		n -= (size_t)w;
	}
	return 0;
}

static int rn_fd_write(void *ud, const void *p, size_t n)
{
	return rn_send_all((int)(intptr_t)ud, p, n);
}

static void rn_fd_shutdown(void *ud)
{
	shutdown((int)(intptr_t)ud, SHUT_RDWR);
}

static void rn_fd_free(void *ud)
{
	close((int)(intptr_t)ud);
}

void rn_fd_transport(int fd, struct rn_transport *t)
{
	*t = (struct rn_transport){ .read = rn_fd_read, .write = rn_fd_write,
				    .shutdown = rn_fd_shutdown, .free = rn_fd_free,
				    .ud = (void *)(intptr_t)fd };
}
