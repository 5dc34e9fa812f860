/* The runner client's reader thread (see client.h): one per connection, it
 * decodes the runner's frames, checks each (HELLO first, known types, a
 * request of the right kind that is still running) and files it with its
 * request, waking the waiter; a frame that breaks a rule ends the
 * connection.  The requests themselves are in client.c. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/runner/client_int.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
	if (len == 0 || (r->in_table && r->refs == 1))
		return 0; /* nobody will take it: its caller gave up (rn_req_put) */
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

/* Keeps what fits of p[n] in c->prefix (cut at RN_PREFIX_MAX). */
static void rn_keep_prefix(struct rn_conn *c, const unsigned char *p, size_t n)
{
	size_t take = n < RN_PREFIX_MAX - c->prefix_len ? n : RN_PREFIX_MAX - c->prefix_len;

	memcpy(c->prefix + c->prefix_len, p, take);
	c->prefix_len += take;
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

void *rn_reader_main(void *arg)
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
