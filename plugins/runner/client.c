/* The sandgate side of a runner connection: see client.h. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/runner/client.h"

#include <ctype.h>
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

#define RN_WHY_MAX    200
#define RN_PREFIX_MAX 160 /* bytes kept of a stream that never said HELLO */

/* Data that arrived for a request, in order.  Owned by the request's queue. */
struct rn_chunk {
	struct rn_chunk *next;
	int chan;
	size_t len, off;
	unsigned char data[];
};

struct rn_req {
	struct rn_conn *c;          /* a reference */
	uint32_t id;
	int efd;                    /* eventfd: news for the waiter */
	uint8_t type;               /* RN_SPAWN, RN_KEXEC, RN_FILE or RN_PING */
	bool ping;
	bool file;                  /* a FILE request: one FILE answer ends it */
	bool quiet_start;           /* STARTED is filed without waking the waiter */
	/* Guarded by c->lock: */
	int refs;                   /* the table's (while running) + the caller's */
	bool in_table;
	enum rn_req_state state;
	struct rn_exit ex;
	char why[RN_WHY_MAX];
	bool started;
	long pid, pgid;
	struct rn_chunk *head, *tail;
	size_t queued;
	bool overflow;
	struct rn_req *next;        /* in the table */
};

struct rn_conn {
	struct rn_transport t;
	struct rn_conn_opts o;
	char name[64];
	char want_id[RN_BUILD_ID_LEN + 1];
	pthread_t reader;
	bool reader_started, reader_joined;
	struct rn_reader rd;        /* used by the reader thread only */
	unsigned char prefix[RN_PREFIX_MAX];
	size_t prefix_len;          /* reader thread only, until HELLO */
	bool greeted;               /* reader thread only: HELLO came */
	bool hello_frame;           /* reader thread only: a HELLO was parsed */

	pthread_mutex_t wlock;      /* one frame at a time on the transport */

	pthread_mutex_t lock;       /* guards everything below */
	pthread_cond_t cond;        /* HELLO or death */
	int refs;
	bool hello;
	struct rn_hello h;
	bool dead;
	char why[RN_WHY_MAX];
	uint32_t next_id;
	struct rn_req *table;
};

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

static void rn_wake(struct rn_req *r)
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

static void rn_req_free(struct rn_req *r)
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
static bool rn_unlink_locked(struct rn_conn *c, struct rn_req *r)
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
static void rn_conn_fail(struct rn_conn *c, const char *why)
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

/* The printable start of what came instead of a HELLO: often the engine's
 * own error ("exec format error", "permission denied"). */
static void rn_prefix_text(struct rn_conn *c, char *out, size_t size)
{
	size_t n = 0;

	for (size_t i = 0; i < c->prefix_len && n + 1 < size; i++) {
		unsigned char ch = c->prefix[i];

		out[n++] = isprint(ch) ? (char)ch : ' ';
	}
	while (n > 0 && out[n - 1] == ' ')
		n--;
	out[n] = '\0';
}

/* ---- frames from the runner ------------------------------------------------------- */

/* Each returns 0, or -1 with c->why-to-be in *why. */

/* Appends a capability name to h->caps; names that do not fit are left out
 * (a runner of the future may know more than sandgate asks for). */
static int rn_add_cap(struct rn_hello *h, const struct rn_field *f)
{
	size_t have = strlen(h->caps);

	if (f->len == 0 || memchr(f->val, '\0', f->len) || memchr(f->val, ' ', f->len))
		return -1;
	if (have + 1 + f->len >= sizeof(h->caps))
		return 0;
	if (have)
		h->caps[have++] = ' ';
	memcpy(h->caps + have, f->val, f->len);
	h->caps[have + f->len] = '\0';
	return 0;
}

static int rn_on_hello(struct rn_conn *c, const unsigned char *p, size_t len,
		       char *why, size_t size)
{
	struct rn_hello h = { 0 };
	struct rn_iter it;
	struct rn_field f;
	uint32_t v = 0, pid = 0;
	int rc, bad = 0;

	rn_iter_init(&it, p, len);
	while ((rc = rn_iter_next(&it, &f)) > 0) {
		if (f.tag == RN_F_VERSION)
			bad |= rn_field_u32(&f, &v);
		else if (f.tag == RN_F_BUILD_ID)
			bad |= rn_field_str(&f, h.build_id, sizeof(h.build_id));
		else if (f.tag == RN_F_PID)
			bad |= rn_field_u32(&f, &pid);
		else if (f.tag == RN_F_ARCH)
			bad |= rn_field_str(&f, h.arch, sizeof(h.arch));
		else if (f.tag == RN_F_CAPABILITY)
			bad |= rn_add_cap(&h, &f);
	}
	if (rc < 0 || bad)
		return snprintf(why, size, "malformed HELLO"), -1;
	h.major = v >> 16;
	h.minor = v & 0xffff;
	h.pid = (long)pid;
	if (h.major != RN_VERSION_MAJOR)
		return snprintf(why, size, "runner speaks protocol %u.%u, sandgate %u.%u",
				h.major, h.minor, RN_VERSION_MAJOR, RN_VERSION_MINOR), -1;
	if (c->want_id[0] && strcmp(h.build_id, c->want_id) != 0)
		return snprintf(why, size, "runner build %s is not the uploaded build %s",
				h.build_id, c->want_id), -1;
	pthread_mutex_lock(&c->lock);
	c->h = h;
	c->hello = true;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

static int rn_on_started(struct rn_req *r, const unsigned char *p, size_t len,
			 char *why, size_t size)
{
	struct rn_iter it;
	struct rn_field f;
	uint32_t pid = 0, pgid = 0;
	int rc, bad = 0;

	if (r->started)
		return snprintf(why, size, "second STARTED for request %u", r->id), -1;
	rn_iter_init(&it, p, len);
	while ((rc = rn_iter_next(&it, &f)) > 0) {
		if (f.tag == RN_F_PID)
			bad |= rn_field_u32(&f, &pid);
		else if (f.tag == RN_F_PGID)
			bad |= rn_field_u32(&f, &pgid);
	}
	if (rc < 0 || bad)
		return snprintf(why, size, "malformed STARTED"), -1;
	r->started = true;
	r->pid = (long)pid;
	r->pgid = (long)pgid;
	return 0;
}

static int rn_on_data(struct rn_req *r, int chan, const unsigned char *p, size_t len,
		      char *why, size_t size)
{
	struct rn_chunk *k;

	if (r->file != (chan == RN_R_FILE))
		return snprintf(why, size, "frame 0x%02x for request %u, which %s a file "
				"operation", chan, r->id, r->file ? "is" : "is not"), -1;
	if (!r->file && (!r->started || r->ping))
		return snprintf(why, size, "output for request %u before it started",
				r->id), -1;
	if (len == 0)
		return 0;
	if (r->queued + len > RN_QUEUE_MAX) {
		r->overflow = true; /* nobody takes it: drop, never grow without end */
		return 0;
	}
	k = malloc(sizeof(*k) + len); /* freed when taken or with the request */
	if (!k)
		return snprintf(why, size, "out of memory for output"), -1;
	k->next = NULL;
	k->chan = chan;
	k->len = len;
	k->off = 0;
	memcpy(k->data, p, len);
	if (r->tail)
		r->tail->next = k;
	else
		r->head = k;
	r->tail = k;
	r->queued += len;
	return 0;
}

/* A text field into out[size], cut to fit, NULs and controls as spaces:
 * the runner's own words, never worth a broken connection. */
static void rn_field_text(const struct rn_field *f, char *out, size_t size)
{
	size_t n = f->len < size - 1 ? f->len : size - 1;

	for (size_t i = 0; i < n; i++)
		out[i] = f->val[i] < 0x20 ? ' ' : (char)f->val[i];
	out[n] = '\0';
}

static int rn_on_exit(struct rn_req *r, const unsigned char *p, size_t len,
		      char *why, size_t size)
{
	struct rn_exit ex = { .code = -1 };
	struct rn_iter it;
	struct rn_field f;
	uint32_t v;
	int rc, bad = 0;

	rn_iter_init(&it, p, len);
	while ((rc = rn_iter_next(&it, &f)) > 0) {
		if (f.tag == RN_F_RESTARTED || f.tag == RN_F_DIED) {
			rn_field_text(&f, f.tag == RN_F_DIED ? ex.died : ex.restarted,
				      sizeof(ex.died));
			continue;
		}
		if (f.tag < RN_F_CODE || f.tag > RN_F_STAGE)
			continue;
		if (rn_field_u32(&f, &v) < 0) {
			bad = 1;
			continue;
		}
		if (f.tag == RN_F_CODE)
			ex.code = v <= 255 ? (int)v : -1;
		else if (f.tag == RN_F_SIGNAL)
			ex.signal = v < 128 ? (int)v : 0;
		else if (f.tag == RN_F_FLAGS)
			ex.flags = v;
		else if (f.tag == RN_F_ERRNO)
			ex.spawn_errno = (int)(v & 0xffff);
		else
			ex.spawn_stage = (int)(v & 0xff);
	}
	if (rc < 0 || bad)
		return snprintf(why, size, "malformed EXIT"), -1;
	r->ex = ex;
	r->state = RN_REQ_DONE;
	return 0;
}

/* The TEXT of an ERROR frame. */
static void rn_error_text(const unsigned char *p, size_t len, char *text, size_t size)
{
	struct rn_iter it;
	struct rn_field f;

	snprintf(text, size, "no reason given");
	rn_iter_init(&it, p, len);
	while (rn_iter_next(&it, &f) > 0)
		if (f.tag == RN_F_TEXT && rn_field_str(&f, text, size) < 0)
			snprintf(text, size, "unreadable reason");
}

static void rn_on_error(struct rn_req *r, const unsigned char *p, size_t len)
{
	char text[160];

	rn_error_text(p, len, text, sizeof(text));
	r->state = RN_REQ_FAILED;
	snprintf(r->why, sizeof(r->why), "the runner refused the request: %s", text);
}

static struct rn_req *rn_find_locked(struct rn_conn *c, uint32_t id)
{
	for (struct rn_req *r = c->table; r; r = r->next)
		if (r->id == id)
			return r;
	return NULL;
}

/* A frame for a request: filed with it under the lock. */
/* Whether a frame of type t belongs to a request of r's kind.  A runner that
 * sends one kind's frame to another (a kernel's KEVENT to a command, output
 * to a file operation) is broken: its connection ends, as for any frame
 * that makes no sense (fuzz finding 7, doc/fuzzing.md). */
static bool rn_frame_fits(const struct rn_req *r, uint8_t t)
{
	switch (t) {
	case RN_R_ERROR:
		return true;
	case RN_R_PONG:
		return r->type == RN_PING;
	case RN_R_FILE:
		return r->type == RN_FILE;
	case RN_R_KEVENT:
		return r->type == RN_KEXEC;
	case RN_R_STATUS:
		return r->type == RN_SPAWN;
	case RN_R_STARTED:
	case RN_R_STDOUT:
	case RN_R_STDERR:
	case RN_R_EXIT:
		return r->type == RN_SPAWN || r->type == RN_KEXEC;
	default:
		return false;
	}
}

static int rn_on_req_frame(struct rn_conn *c, const struct rn_hdr *h,
			   const unsigned char *p, char *why, size_t size)
{
	struct rn_req *r, *gone = NULL;
	int rc = 0;

	pthread_mutex_lock(&c->lock);
	r = rn_find_locked(c, h->id);
	if (!r) {
		pthread_mutex_unlock(&c->lock);
		return snprintf(why, size, "frame 0x%02x for request %u, which is not "
				"running", h->type, h->id), -1;
	}
	if (!rn_frame_fits(r, h->type)) {
		const char *kind = r->type == RN_FILE ? "a file operation" :
				   h->type == RN_R_FILE ? "not a file operation" :
				   r->type == RN_KEXEC ? "a kernel call" :
				   r->type == RN_PING ? "a PING" : "a command";

		pthread_mutex_unlock(&c->lock);
		return snprintf(why, size, "frame 0x%02x for request %u, which is %s", h->type,
				h->id, kind), -1;
	}
	switch (h->type) {
	case RN_R_STARTED:
		rc = rn_on_started(r, p, h->len, why, size);
		break;
	case RN_R_STDOUT:
	case RN_R_STDERR:
	case RN_R_STATUS:
	case RN_R_KEVENT:
		rc = rn_on_data(r, h->type, p, h->len, why, size);
		break;
	case RN_R_FILE:
		rc = rn_on_data(r, h->type, p, h->len, why, size);
		if (rc == 0)
			r->state = RN_REQ_DONE;
		break;
	case RN_R_PONG:
		rc = r->ping ? 0 : (snprintf(why, size, "PONG for a command"), -1);
		r->state = RN_REQ_DONE;
		break;
	case RN_R_EXIT:
		rc = r->ping || r->file ? (snprintf(why, size, "EXIT for a PING or a file "
						    "operation"), -1) :
		     rn_on_exit(r, p, h->len, why, size);
		break;
	case RN_R_ERROR:
		rn_on_error(r, p, h->len);
		break;
	default:
		snprintf(why, size, "frame type 0x%02x for a request", h->type);
		rc = -1;
		break;
	}
	if (rc == 0 && r->state != RN_REQ_RUNNING && rn_unlink_locked(c, r))
		gone = r;
	/* A one-shot command's waiter needs its output and its end, not its
	 * start: a wake-up for nothing is a thread hand-off on the path of
	 * every command, and on a loaded machine a scheduling wait. */
	if (h->type != RN_R_STARTED || rc != 0 || !r->quiet_start)
		rn_wake(r);
	pthread_mutex_unlock(&c->lock);
	if (gone)
		rn_req_free(gone);
	return rc;
}

/* The reader's frame callback.  Returns -1 to end the connection (the reason
 * is in c->rd.why). */
static int rn_on_frame(const struct rn_hdr *h, const unsigned char *p, void *ud)
{
	struct rn_conn *c = ud;
	char *why = c->rd.why, text[160];
	size_t size = sizeof(c->rd.why);

	if (!rn_type_known(h->type, true))
		return snprintf(why, size, "unknown frame type 0x%02x", h->type), -1;
	if (!c->greeted && h->type == RN_R_HELLO && h->id == 0) {
		c->hello_frame = true;
		c->greeted = rn_on_hello(c, p, h->len, why, size) == 0;
		return c->greeted ? 0 : -1;
	}
	if (!c->greeted)
		return snprintf(why, size, "frame 0x%02x before HELLO", h->type), -1;
	if (h->type == RN_R_HELLO)
		return snprintf(why, size, "a second HELLO"), -1;
	if (h->id == 0 && h->type == RN_R_ERROR) {
		rn_error_text(p, h->len, text, sizeof(text));
		return snprintf(why, size, "the runner gave up: %.70s", text), -1;
	}
	if (h->id == 0)
		return snprintf(why, size, "frame 0x%02x for request 0", h->type), -1;
	return rn_on_req_frame(c, h, p, why, size);
}

/* ---- the reader thread ---------------------------------------------------------------- */

static void rn_keep_prefix(struct rn_conn *c, const unsigned char *p, size_t n)
{
	size_t room = RN_PREFIX_MAX - c->prefix_len;

	if (n > room)
		n = room;
	memcpy(c->prefix + c->prefix_len, p, n);
	c->prefix_len += n;
}

/* Words why the stream ended, with what came instead of a HELLO. */
static void rn_end_reason(struct rn_conn *c, ssize_t n, int rc, char *out, size_t size)
{
	char text[RN_PREFIX_MAX + 1];
	bool hello = c->greeted;

	if (!hello && c->prefix_len > 0 && !c->hello_frame) {
		rn_prefix_text(c, text, sizeof(text));
		snprintf(out, size, "no HELLO; the stream said: %.160s", text);
	} else if (rc != 0) {
		snprintf(out, size, "%s", c->rd.why[0] ? c->rd.why : "bad frame");
	} else if (n < 0) {
		snprintf(out, size, "read error: %s", strerror(errno));
	} else if (!rn_reader_idle(&c->rd)) {
		snprintf(out, size, "the stream ended inside a frame (truncated)");
	} else {
		snprintf(out, size, "the runner exited (EOF)%s", hello ? "" :
			 " before its HELLO");
	}
}

static void *rn_reader_main(void *arg)
{
	struct rn_conn *c = arg;
	unsigned char *buf = malloc(RN_CHUNK); /* freed below */
	char why[RN_WHY_MAX];
	ssize_t n = 0;
	int rc = 0;

	if (!buf) {
		rn_conn_fail(c, "out of memory");
		return NULL;
	}
	for (;;) {
		n = c->t.read(c->t.ud, buf, RN_CHUNK);
		if (n <= 0)
			break;
		if (c->prefix_len < RN_PREFIX_MAX && !c->greeted)
			rn_keep_prefix(c, buf, (size_t)n);
		rc = rn_reader_feed(&c->rd, buf, (size_t)n, rn_on_frame, c);
		if (rc != 0)
			break;
	}
	rn_end_reason(c, n, rc, why, sizeof(why));
	rn_conn_fail(c, why);
	free(buf);
	return NULL;
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

/* Waits for HELLO or death; returns 0 when the runner greeted us. */
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
	rc = c->hello && !c->dead ? 0 : -1;
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
	int sent;

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
	if (rn_wait_hello(c, why, size) < 0 || sent < 0) {
		/* The reader may have failed the connection (a bad HELLO) while
		 * our HELLO was being sent: its reason is the one that counts. */
		if (!why[0]) {
			pthread_mutex_lock(&c->lock);
			snprintf(why, size, "%s", c->why[0] ? c->why : "cannot send HELLO to the runner");
			pthread_mutex_unlock(&c->lock);
		}
		rn_conn_close(c);
		return -1;
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
	bool last;

	if (!r)
		return;
	pthread_mutex_lock(&r->c->lock);
	last = --r->refs == 0;
	pthread_mutex_unlock(&r->c->lock);
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
