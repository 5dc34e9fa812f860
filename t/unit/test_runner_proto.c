/*
 * The runner protocol on bad input: the frame reader and field iterator
 * (plugins/runner/proto.c) and the plugins' client (plugins/runner/client.c)
 * facing a fake runner on a socketpair that sends corrupt, truncated,
 * oversized and misaddressed frames.  Every one must end the connection
 * with a reason, fail the requests in flight, and never crash (run under
 * ASan/UBSan in CI).  The kernel client (kernel_client.c) gets bad event
 * lines and over-long texts, which it must survive without losing the call.
 * And one good-input check at a boundary: a FILE WRITE of up to RN_CORK_MAX
 * bytes goes in one write, a larger one frame by frame, with the same frames.
 */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdatomic.h>
#include <stdbool.h>

#include <cmocka.h>

#include "plugins/runner/client.h"
#include "plugins/runner/kernel_client.h"
#include "plugins/runner/proto.h"

/* ---- the frame reader --------------------------------------------------------------- */

struct seen {
	int n;
	struct rn_hdr h[16];
	unsigned char data[16][64];
};

static int collect(const struct rn_hdr *h, const unsigned char *payload, void *ud)
{
	struct seen *s = ud;

	if (s->n < 16) {
		s->h[s->n] = *h;
		memcpy(s->data[s->n], payload, h->len < 64 ? h->len : 64);
		s->n++;
	}
	return 0;
}

static size_t frame(unsigned char *out, uint8_t type, uint32_t id, const char *payload)
{
	size_t n = strlen(payload);

	rn_hdr_put(out, type, id, (uint32_t)n);
	memcpy(out + RN_HDR_SIZE, payload, n);
	return RN_HDR_SIZE + n;
}

static void test_header(void **state)
{
	unsigned char h[RN_HDR_SIZE];
	struct rn_hdr d;

	(void)state;
	rn_hdr_put(h, RN_R_STDOUT, 0x01020304u, 77);
	assert_int_equal(rn_hdr_get(h, RN_MAX_PAYLOAD, &d), 0);
	assert_int_equal(d.type, RN_R_STDOUT);
	assert_int_equal(d.id, 0x01020304u);
	assert_int_equal(d.len, 77);
	assert_int_equal(rn_hdr_get(h, 76, &d), -1);      /* over the cap */
	for (int i = 5; i <= 7; i++) {
		rn_hdr_put(h, RN_R_STDOUT, 1, 1);
		h[i] = 1;
		assert_int_equal(rn_hdr_get(h, RN_MAX_PAYLOAD, &d), -1);
	}
	assert_true(rn_type_known(RN_R_EXIT, true));
	assert_false(rn_type_known(RN_SPAWN, true));
	assert_false(rn_type_known(0x89, true));
	assert_true(rn_type_known(RN_PING, false));
	assert_false(rn_type_known(0, false));
}

/* Frames split at every byte come out whole and in order. */
static void test_reader_split(void **state)
{
	unsigned char buf[256];
	size_t n = 0;
	struct rn_reader r;
	struct seen s = { 0 };

	(void)state;
	n += frame(buf + n, RN_R_STDOUT, 7, "hello");
	n += frame(buf + n, RN_R_EXIT, 7, "");
	n += frame(buf + n, RN_R_STDERR, 9, "x");
	rn_reader_init(&r, RN_MAX_PAYLOAD);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(rn_reader_feed(&r, buf + i, 1, collect, &s), 0);
	assert_true(rn_reader_idle(&r));
	assert_int_equal(s.n, 3);
	assert_int_equal(s.h[0].len, 5);
	assert_memory_equal(s.data[0], "hello", 5);
	assert_int_equal(s.h[1].type, RN_R_EXIT);
	assert_int_equal(s.h[1].len, 0);
	assert_int_equal(s.h[2].id, 9);
	/* All at once gives the same. */
	memset(&s, 0, sizeof(s));
	assert_int_equal(rn_reader_feed(&r, buf, n, collect, &s), 0);
	assert_int_equal(s.n, 3);
	/* A cut frame leaves the reader busy: an EOF there is a truncation. */
	assert_int_equal(rn_reader_feed(&r, buf, RN_HDR_SIZE + 2, collect, &s), 0);
	assert_false(rn_reader_idle(&r));
	rn_reader_free(&r);
}

static void test_reader_corrupt(void **state)
{
	unsigned char buf[64];
	struct rn_reader r;
	struct seen s = { 0 };
	size_t n;

	(void)state;
	n = frame(buf, RN_R_STDOUT, 1, "abc");
	buf[6] = 0x5a;
	rn_reader_init(&r, RN_MAX_PAYLOAD);
	assert_int_equal(rn_reader_feed(&r, buf, n, collect, &s), -1);
	assert_non_null(strstr(r.why, "bad frame header"));
	assert_int_equal(s.n, 0);
	rn_reader_free(&r);

	rn_hdr_put(buf, RN_R_STDOUT, 1, RN_MAX_PAYLOAD + 1);
	rn_reader_init(&r, RN_MAX_PAYLOAD);
	assert_int_equal(rn_reader_feed(&r, buf, RN_HDR_SIZE, collect, &s), -1);
	rn_reader_free(&r);
}

static void test_fields(void **state)
{
	struct rn_buf b = { 0 };
	struct rn_iter it;
	struct rn_field f;
	uint32_t v;
	uint64_t w;
	char text[8];

	(void)state;
	rn_put_u32(&b, RN_F_PID, 42);
	rn_put_u64(&b, RN_F_CAP, 0x0102030405060708ull);
	rn_put_str(&b, RN_F_CWD, "/tmp");
	rn_put_bytes(&b, RN_F_ARG, "a\0b", 3);
	assert_false(b.oom);
	rn_iter_init(&it, b.data, b.len);
	assert_int_equal(rn_iter_next(&it, &f), 1);
	assert_int_equal(rn_field_u32(&f, &v), 0);
	assert_int_equal(v, 42);
	assert_int_equal(rn_field_u64(&f, &w), -1); /* wrong size for the type */
	assert_int_equal(rn_iter_next(&it, &f), 1);
	assert_int_equal(rn_field_u64(&f, &w), 0);
	assert_true(w == 0x0102030405060708ull);
	assert_int_equal(rn_iter_next(&it, &f), 1);
	assert_int_equal(rn_field_str(&f, text, sizeof(text)), 0);
	assert_string_equal(text, "/tmp");
	assert_int_equal(rn_field_str(&f, text, 4), -1); /* does not fit */
	assert_int_equal(rn_iter_next(&it, &f), 1);
	assert_int_equal(rn_field_str(&f, text, sizeof(text)), -1); /* holds a NUL */
	assert_int_equal(rn_iter_next(&it, &f), 0);
	/* A field that runs past the payload. */
	rn_iter_init(&it, b.data, b.len - 1);
	for (int i = 0; i < 3; i++)
		assert_int_equal(rn_iter_next(&it, &f), 1);
	assert_int_equal(rn_iter_next(&it, &f), -1);
	rn_iter_init(&it, b.data, 5); /* not even a field header */
	assert_int_equal(rn_iter_next(&it, &f), -1);
	rn_buf_free(&b);
	/* No payload at all (found by t/fuzz/fuzz_runner.c: NULL + 0 is
	 * undefined): an empty list of fields. */
	rn_iter_init(&it, NULL, 0);
	assert_int_equal(rn_iter_next(&it, &f), 0);
}

static int payload_not_null(const struct rn_hdr *h, const unsigned char *p, void *ud)
{
	(void)h;
	assert_non_null(p);
	++*(int *)ud;
	return 0;
}

/* A first frame with no payload: the reader has allocated nothing yet, and
 * still hands out a pointer. */
static void test_reader_empty_first(void **state)
{
	unsigned char h[RN_HDR_SIZE];
	struct rn_reader r;
	int n = 0;

	(void)state;
	rn_hdr_put(h, RN_R_EXIT, 1, 0);
	rn_reader_init(&r, RN_MAX_PAYLOAD);
	assert_int_equal(rn_reader_feed(&r, h, sizeof(h), payload_not_null, &n), 0);
	assert_int_equal(n, 1);
	assert_null(r.payload);
	rn_reader_free(&r);
}

static int count_only(const struct rn_hdr *h, const unsigned char *p, void *ud)
{
	struct rn_iter it;
	struct rn_field f;

	(void)h;
	++*(int *)ud;
	rn_iter_init(&it, p, h->len);
	while (rn_iter_next(&it, &f) > 0)
		;
	return 0;
}

/* Random bytes never crash the reader or the iterator. */
static void test_fuzz(void **state)
{
	unsigned char buf[512];
	unsigned seed = 12345;
	int frames = 0;

	(void)state;
	for (int round = 0; round < 3000; round++) {
		struct rn_reader r;
		size_t n = (size_t)(rand_r(&seed) % sizeof(buf));

		for (size_t i = 0; i < n; i++)
			buf[i] = (unsigned char)rand_r(&seed);
		/* Often a plausible header, so payloads get parsed too. */
		if (n >= RN_HDR_SIZE && round % 2) {
			rn_hdr_put(buf, (uint8_t)buf[4], 1, (uint32_t)(n - RN_HDR_SIZE));
		}
		rn_reader_init(&r, 4096);
		rn_reader_feed(&r, buf, n, count_only, &frames);
		rn_reader_free(&r);
	}
	assert_true(frames > 0);
}

/* ---- the client against a fake runner ------------------------------------------------- */

struct fake {
	int peer;               /* our end: we are the runner */
	struct rn_conn *c;
	struct rn_reader rd;
	struct rn_hdr last;     /* the last frame the client sent */
	unsigned char last_payload[4096];
};

/* Best effort: after a bad frame the client may hang up before the rest of
 * what a test sends; what the client concluded is checked afterwards. */
static void send_raw(struct fake *f, const void *p, size_t n)
{
	ssize_t w = send(f->peer, p, n, MSG_NOSIGNAL);

	(void)w;
}

static void send_frame(struct fake *f, uint8_t type, uint32_t id, const struct rn_buf *b)
{
	unsigned char h[RN_HDR_SIZE];

	rn_hdr_put(h, type, id, b ? (uint32_t)b->len : 0);
	send_raw(f, h, sizeof(h));
	if (b && b->len)
		send_raw(f, b->data, b->len);
}

static const char *hello_cap; /* a capability the fake announces, or NULL */

static void send_hello(struct fake *f, unsigned major, const char *build)
{
	struct rn_buf b = { 0 };

	rn_put_u32(&b, RN_F_VERSION, major << 16);
	rn_put_str(&b, RN_F_BUILD_ID, build);
	rn_put_u32(&b, RN_F_PID, 4242);
	if (hello_cap) {
		rn_put_str(&b, RN_F_CAPABILITY, "future-thing");
		rn_put_str(&b, RN_F_CAPABILITY, hello_cap);
	}
	send_frame(f, RN_R_HELLO, 0, &b);
	rn_buf_free(&b);
}

static int keep_last(const struct rn_hdr *h, const unsigned char *p, void *ud)
{
	struct fake *f = ud;

	f->last = *h;
	memcpy(f->last_payload, p, h->len < sizeof(f->last_payload) ? h->len :
	       sizeof(f->last_payload));
	return 1; /* one frame at a time */
}

/* Reads the next frame the client sent (blocking, byte by byte: simple). */
static void next_frame(struct fake *f)
{
	unsigned char c;

	for (;;) {
		assert_int_equal(read(f->peer, &c, 1), 1);
		if (rn_reader_feed(&f->rd, &c, 1, keep_last, f) == 1)
			return;
	}
}

/* The client's writes to its transport, counted (the cork test). */
static atomic_int writes;
static int (*fd_write)(void *ud, const void *p, size_t n);

static int counted_write(void *ud, const void *p, size_t n)
{
	atomic_fetch_add(&writes, 1);
	return fd_write(ud, p, n);
}

/* A client connected to us; HELLO exchanged when `greet`. */
static void fake_open(struct fake *f, bool greet, const char *build, int *rc, char *why,
		      size_t size)
{
	struct rn_conn_opts o = { .name = "fake", .build_id = "0123456789abcdef",
				  .hello_timeout_ms = 2000 };
	struct rn_transport t;
	int sv[2];

	memset(f, 0, sizeof(*f));
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	f->peer = sv[1];
	rn_reader_init(&f->rd, RN_MAX_PAYLOAD);
	rn_fd_transport(sv[0], &t);
	fd_write = t.write;
	t.write = counted_write;
	if (greet)
		send_hello(f, RN_VERSION_MAJOR, build ? build : "0123456789abcdef");
	*rc = rn_conn_open(&t, &o, &f->c, why, size);
}

static void fake_close(struct fake *f)
{
	rn_conn_close(f->c);
	close(f->peer);
	rn_reader_free(&f->rd);
}

static struct fake *fake_ready(void)
{
	static struct fake f;
	char why[256];
	int rc;

	fake_open(&f, true, NULL, &rc, why, sizeof(why));
	assert_int_equal(rc, 0);
	next_frame(&f);
	assert_int_equal(f.last.type, RN_HELLO);
	return &f;
}

/* Waits until the connection is dead; returns its reason. */
static const char *dead_reason(struct fake *f)
{
	static char why[256];

	for (int i = 0; i < 200; i++) {
		if (!rn_conn_alive(f->c, why, sizeof(why)))
			return why;
		usleep(10000);
	}
	fail_msg("the connection is still alive");
	return NULL;
}

static struct rn_req *spawn_true(struct fake *f)
{
	struct rn_spawn sp = { .command = "true" };
	struct rn_req *r = NULL;
	char why[256];

	assert_int_equal(rn_spawn(f->c, &sp, &r, why, sizeof(why)), 0);
	next_frame(f);
	assert_int_equal(f->last.type, RN_SPAWN);
	return r;
}

static void send_started(struct fake *f, uint32_t id)
{
	struct rn_buf b = { 0 };

	rn_put_u32(&b, RN_F_PID, 100);
	rn_put_u32(&b, RN_F_PGID, 100);
	send_frame(f, RN_R_STARTED, id, &b);
	rn_buf_free(&b);
}

static void test_client_good(void **state)
{
	struct fake *f = fake_ready();
	struct rn_req *r = spawn_true(f);
	struct rn_buf b = { 0 };
	struct rn_exit ex;
	char out[16];
	int chan;
	size_t n;

	(void)state;
	send_started(f, f->last.id);
	rn_buf_add(&b, "hey", 3);
	send_frame(f, RN_R_STDOUT, f->last.id, &b);
	rn_buf_free(&b);
	rn_put_u32(&b, RN_F_CODE, 7);
	rn_put_u32(&b, 999, 1); /* an unknown field is skipped */
	send_frame(f, RN_R_EXIT, f->last.id, &b);
	rn_buf_free(&b);
	while (rn_req_state(r, &ex, NULL, 0, NULL) == RN_REQ_RUNNING)
		rn_req_wait(r, 100, -1);
	n = rn_req_take(r, out, sizeof(out), &chan);
	assert_int_equal(n, 3);
	assert_int_equal(chan, RN_R_STDOUT);
	assert_int_equal(ex.code, 7);
	rn_req_put(r);
	assert_true(rn_conn_alive(f->c, NULL, 0));
	fake_close(f);
}

/* Garbage instead of a HELLO: what it said is in the reason (the engine's
 * "exec format error" reaches the log this way). */
static void test_client_garbage_first(void **state)
{
	struct fake f;
	char why[256] = "";
	int rc;
	static const char junk[] = "OCI runtime exec failed: exec format error\r\n";

	(void)state;
	memset(&f, 0, sizeof(f));
	{
		struct rn_conn_opts o = { .name = "fake", .hello_timeout_ms = 2000 };
		struct rn_transport t;
		int sv[2];

		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
		f.peer = sv[1];
		rn_fd_transport(sv[0], &t);
		send_raw(&f, junk, sizeof(junk) - 1);
		rc = rn_conn_open(&t, &o, &f.c, why, sizeof(why));
	}
	assert_int_equal(rc, -1);
	assert_non_null(strstr(why, "exec format error"));
	close(f.peer);
}

static void test_client_bad_hello(void **state)
{
	struct fake f;
	char why[256] = "";
	int rc;

	(void)state;
	fake_open(&f, true, "fedcba9876543210", &rc, why, sizeof(why));
	assert_int_equal(rc, -1);
	assert_non_null(strstr(why, "not the uploaded build"));
	close(f.peer);
	rn_reader_free(&f.rd);

	memset(&f, 0, sizeof(f));
	{
		struct rn_conn_opts o = { .name = "fake", .hello_timeout_ms = 2000 };
		struct rn_transport t;
		int sv[2];

		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
		f.peer = sv[1];
		rn_fd_transport(sv[0], &t);
		send_hello(&f, RN_VERSION_MAJOR + 1, "x");
		rc = rn_conn_open(&t, &o, &f.c, why, sizeof(why));
	}
	assert_int_equal(rc, -1);
	assert_non_null(strstr(why, "protocol"));
	close(f.peer);

	/* Silence: the HELLO timeout. */
	memset(&f, 0, sizeof(f));
	{
		struct rn_conn_opts o = { .name = "fake", .hello_timeout_ms = 200 };
		struct rn_transport t;
		int sv[2];

		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
		f.peer = sv[1];
		rn_fd_transport(sv[0], &t);
		rc = rn_conn_open(&t, &o, &f.c, why, sizeof(why));
	}
	assert_int_equal(rc, -2); /* silent on a live connection: slow, try again */
	assert_non_null(strstr(why, "no HELLO"));
	close(f.peer);
}

/* Each kind of broken frame ends the connection and fails the request. */
static void check_broken(void (*send_bad)(struct fake *, uint32_t), const char *want)
{
	struct fake *f = fake_ready();
	struct rn_req *r = spawn_true(f);
	uint32_t id = f->last.id;
	char why[256];
	const char *reason;

	send_started(f, id);
	send_bad(f, id);
	reason = dead_reason(f);
	if (!strstr(reason, want))
		fail_msg("reason '%s' lacks '%s'", reason, want);
	assert_int_equal(rn_req_state(r, NULL, why, sizeof(why), NULL), RN_REQ_FAILED);
	assert_non_null(strstr(why, "connection broke"));
	/* A new request on a dead connection is refused at once. */
	{
		struct rn_spawn sp = { .command = "true" };
		struct rn_req *r2 = NULL;

		assert_int_equal(rn_spawn(f->c, &sp, &r2, why, sizeof(why)), -1);
		assert_null(r2);
	}
	rn_req_put(r);
	fake_close(f);
}

static void bad_reserved(struct fake *f, uint32_t id)
{
	unsigned char h[RN_HDR_SIZE];

	rn_hdr_put(h, RN_R_STDOUT, id, 1);
	h[7] = 9;
	send_raw(f, h, sizeof(h));
	send_raw(f, "x", 1);
}

static void bad_huge(struct fake *f, uint32_t id)
{
	unsigned char h[RN_HDR_SIZE];

	rn_hdr_put(h, RN_R_STDOUT, id, RN_MAX_PAYLOAD + 1);
	send_raw(f, h, sizeof(h));
}

static void bad_unknown_id(struct fake *f, uint32_t id)
{
	struct rn_buf b = { 0 };

	rn_buf_add(&b, "x", 1);
	send_frame(f, RN_R_STDOUT, id + 1000, &b);
	rn_buf_free(&b);
}

static void bad_type(struct fake *f, uint32_t id)
{
	send_frame(f, 0x99, id, NULL);
}

static void bad_request_type(struct fake *f, uint32_t id)
{
	send_frame(f, RN_SPAWN, id, NULL); /* a sandgate->runner type */
}

static void bad_truncated(struct fake *f, uint32_t id)
{
	unsigned char h[RN_HDR_SIZE];

	rn_hdr_put(h, RN_R_STDOUT, id, 100);
	send_raw(f, h, sizeof(h));
	send_raw(f, "only a few", 10);
	shutdown(f->peer, SHUT_WR);
}

static void bad_exit_fields(struct fake *f, uint32_t id)
{
	unsigned char h[RN_HDR_SIZE], p[5] = { 0, RN_F_CODE, 0, 0, 0 };

	rn_hdr_put(h, RN_R_EXIT, id, sizeof(p));
	send_raw(f, h, sizeof(h));
	send_raw(f, p, sizeof(p));
}

static void bad_exit_code_size(struct fake *f, uint32_t id)
{
	struct rn_buf b = { 0 };

	rn_put_bytes(&b, RN_F_CODE, "\1\2", 2);
	send_frame(f, RN_R_EXIT, id, &b);
	rn_buf_free(&b);
}

static void bad_second_hello(struct fake *f, uint32_t id)
{
	(void)id;
	send_hello(f, RN_VERSION_MAJOR, "0123456789abcdef");
}

static void bad_fatal_error(struct fake *f, uint32_t id)
{
	struct rn_buf b = { 0 };

	(void)id;
	rn_put_str(&b, RN_F_TEXT, "gave up on purpose");
	send_frame(f, RN_R_ERROR, 0, &b);
	rn_buf_free(&b);
}

static void test_client_broken(void **state)
{
	(void)state;
	check_broken(bad_reserved, "bad frame header");
	check_broken(bad_huge, "bad frame header");
	check_broken(bad_unknown_id, "not running");
	check_broken(bad_type, "unknown frame type");
	check_broken(bad_request_type, "unknown frame type");
	check_broken(bad_truncated, "truncated");
	check_broken(bad_exit_fields, "malformed EXIT");
	check_broken(bad_exit_code_size, "malformed EXIT");
	check_broken(bad_second_hello, "second HELLO");
	check_broken(bad_fatal_error, "gave up on purpose");
}

/* Output before STARTED, and a second STARTED, are protocol errors too. */
static void test_client_order(void **state)
{
	struct fake *f = fake_ready();
	struct rn_req *r = spawn_true(f);
	struct rn_buf b = { 0 };

	(void)state;
	rn_buf_add(&b, "early", 5);
	send_frame(f, RN_R_STDOUT, f->last.id, &b);
	rn_buf_free(&b);
	assert_non_null(strstr(dead_reason(f), "before it started"));
	rn_req_put(r);
	fake_close(f);

	f = fake_ready();
	r = spawn_true(f);
	send_started(f, f->last.id);
	send_started(f, f->last.id);
	assert_non_null(strstr(dead_reason(f), "second STARTED"));
	rn_req_put(r);
	fake_close(f);

	/* A FILE answer belongs to a FILE request only, and the other way. */
	f = fake_ready();
	r = spawn_true(f);
	send_started(f, f->last.id);
	rn_put_u64(&b, RN_F_SIZE, 1);
	send_frame(f, RN_R_FILE, f->last.id, &b);
	rn_buf_free(&b);
	assert_non_null(strstr(dead_reason(f), "is not a file operation"));
	rn_req_put(r);
	fake_close(f);

	/* A kernel's event belongs to a kernel call only (fuzz finding 7). */
	f = fake_ready();
	r = spawn_true(f);
	send_started(f, f->last.id);
	rn_buf_add(&b, "{}\n", 3);
	send_frame(f, RN_R_KEVENT, f->last.id, &b);
	rn_buf_free(&b);
	assert_non_null(strstr(dead_reason(f), "which is a command"));
	rn_req_put(r);
	fake_close(f);

	f = fake_ready();
	{
		char why[128];

		rn_put_u32(&b, RN_F_FOP, RN_FOP_STAT);
		rn_put_str(&b, RN_F_PATH, "/x");
		assert_int_equal(rn_request(f->c, RN_FILE, b.data, b.len, &r, why, sizeof(why)), 0);
		rn_buf_free(&b);
		next_frame(f);
		assert_int_equal(f->last.type, RN_FILE);
	}
	rn_buf_add(&b, "x", 1);
	send_frame(f, RN_R_STDOUT, f->last.id, &b);
	rn_buf_free(&b);
	assert_non_null(strstr(dead_reason(f), "is a file operation"));
	rn_req_put(r);
	fake_close(f);
}

/* A request dropped by its caller stays known until its EXIT: late output
 * for it is no protocol error, and an ERROR frame ends just that request. */
static void test_client_abandoned(void **state)
{
	struct fake *f = fake_ready();
	struct rn_req *r = spawn_true(f), *r2;
	uint32_t id = f->last.id;
	struct rn_buf b = { 0 };
	char why[256];

	(void)state;
	rn_req_put(r);
	send_started(f, id);
	rn_buf_add(&b, "late", 4);
	send_frame(f, RN_R_STDOUT, id, &b);
	rn_buf_free(&b);
	rn_put_u32(&b, RN_F_CODE, 0);
	send_frame(f, RN_R_EXIT, id, &b);
	rn_buf_free(&b);
	usleep(100000); /* lets the reader file them */
	r2 = spawn_true(f);
	rn_put_str(&b, RN_F_TEXT, "no");
	send_frame(f, RN_R_ERROR, f->last.id, &b);
	rn_buf_free(&b);
	while (rn_req_state(r2, NULL, why, sizeof(why), NULL) == RN_REQ_RUNNING)
		rn_req_wait(r2, 100, -1);
	assert_non_null(strstr(why, "refused the request: no"));
	assert_true(rn_conn_alive(f->c, NULL, 0));
	/* And now output for the ended id is an error. */
	rn_buf_add(&b, "x", 1);
	send_frame(f, RN_R_STDOUT, id, &b);
	rn_buf_free(&b);
	assert_non_null(strstr(dead_reason(f), "not running"));
	rn_req_put(r2);
	fake_close(f);
}

struct kthread {
	struct rn_conn *c;
	struct rn_kernel_result res;
	int rc;
	char why[256];
};

static void *krun(void *arg)
{
	struct kthread *k = arg;
	struct rn_kernel_call kc = { .language = "python", .code = "1", .rich_cap = 100,
				     .timeout_ms = 5000, .cancel_fd = -1 };

	k->rc = rn_kernel_run(k->c, &kc, &k->res, k->why, sizeof(k->why));
	return NULL;
}

static void send_line(struct fake *f, uint32_t id, const char *line)
{
	struct rn_buf b = { 0 };

	rn_buf_add(&b, line, strlen(line));
	send_frame(f, RN_R_KEVENT, id, &b);
	rn_buf_free(&b);
}

/* A kernel call against a runner that says odd things: lines that are not
 * JSON, words nobody knows, results over the cap, long and dirty texts. */
static void test_client_kernel(void **state)
{
	struct kthread k = { 0 };
	struct rn_buf b = { 0 };
	struct rn_iter it;
	struct rn_field fl;
	char *big, dirty[400];
	struct fake *f = fake_ready();
	pthread_t th;
	bool lang = false;
	uint32_t id;

	(void)state;
	/* No capability in its HELLO: refused before anything is sent. */
	assert_false(rn_conn_has_cap(f->c, RN_CAP_KERNEL));
	k.c = f->c;
	krun(&k);
	assert_int_equal(k.rc, -1);
	assert_non_null(strstr(k.why, "no \"kernel\" capability"));
	rn_kernel_result_free(&k.res);
	fake_close(f);

	hello_cap = RN_CAP_KERNEL;
	f = fake_ready();
	hello_cap = NULL;
	assert_true(rn_conn_has_cap(f->c, RN_CAP_KERNEL));
	assert_false(rn_conn_has_cap(f->c, "future"));
	memset(&k, 0, sizeof(k));
	k.c = f->c;
	assert_int_equal(pthread_create(&th, NULL, krun, &k), 0);
	next_frame(f);
	assert_int_equal(f->last.type, RN_KEXEC);
	id = f->last.id;
	rn_iter_init(&it, f->last_payload, f->last.len);
	while (rn_iter_next(&it, &fl) > 0)
		if (fl.tag == RN_F_LANG)
			lang = fl.len == 6 && memcmp(fl.val, "python", 6) == 0;
	assert_true(lang);
	send_started(f, id);
	send_line(f, id, "hello {\"interpreter\": \"python3 9.9.9\"}");
	send_line(f, id, "result not json");
	send_line(f, id, "result {\"text\": \"2\", \"is_main_result\": true}");
	big = malloc(70000);
	assert_non_null(big);
	memset(big, 'x', 70000);
	memcpy(big, "result {\"text\": \"", 17);
	memcpy(big + 69997, "\"}", 3);
	big[69999] = '\0';
	send_line(f, id, big); /* over rich_cap + slack: one note instead */
	send_line(f, id, big);
	free(big);
	send_line(f, id, "mystery {}");
	send_line(f, id, "");
	send_line(f, id, "error {\"name\": \"E\", \"value\": \"v\", \"traceback\": \"\"}");
	send_line(f, id, "files [{\"name\": \"a\", \"path\": \"/w/a\", \"size\": 1}]");
	rn_buf_add(&b, "out", 3);
	send_frame(f, RN_R_STDOUT, id, &b);
	rn_buf_free(&b);
	memset(dirty, 'd', sizeof(dirty));
	dirty[5] = '\n';
	dirty[6] = '\0';
	rn_put_u32(&b, RN_F_FLAGS, RN_EXIT_TIMED_OUT | RN_EXIT_KERNEL_DIED);
	rn_put_bytes(&b, RN_F_RESTARTED, "was\tgone", 8);
	rn_put_bytes(&b, RN_F_DIED, dirty, sizeof(dirty));
	send_frame(f, RN_R_EXIT, id, &b);
	rn_buf_free(&b);
	pthread_join(th, NULL);
	assert_int_equal(k.rc, 0);
	assert_string_equal(k.res.interpreter, "python3 9.9.9");
	assert_int_equal(json_array_size(k.res.results), 3);
	assert_non_null(json_object_get(json_array_get(k.res.results, 0), "omitted"));
	assert_string_equal(json_string_value(json_object_get(json_array_get(k.res.results, 1),
							      "text")), "2");
	assert_non_null(strstr(json_string_value(json_object_get(json_array_get(k.res.results, 2),
								     "omitted")), "cap"));
	assert_string_equal(json_string_value(json_object_get(k.res.error, "name")), "E");
	assert_int_equal(json_array_size(k.res.output_files), 1);
	assert_string_equal(k.res.out, "out");
	assert_string_equal(k.res.err, "");
	assert_true(k.res.timed_out);
	assert_true(k.res.kernel_died);
	assert_true(k.res.kernel_restarted);
	assert_string_equal(k.res.restart_reason, "was gone");
	assert_int_equal(strlen(k.res.died_reason), sizeof(k.res.died_reason) - 1);
	assert_int_equal(k.res.died_reason[5], ' ');
	assert_int_equal(k.res.died_reason[6], ' ');
	rn_kernel_result_free(&k.res);
	assert_true(rn_conn_alive(f->c, NULL, 0));
	fake_close(f);
}

/* What a FILE WRITE put on the wire: the request's fields, then its
 * stdin joined, up to its STDIN_CLOSE. */
struct wire {
	unsigned char fields[64];
	size_t fields_len;
	unsigned char *data;
	size_t len;
	int stdin_frames;
	bool closed;
};

static int wire_frame(const struct rn_hdr *h, const unsigned char *p, void *ud)
{
	struct wire *w = ud;

	if (h->type == RN_FILE) {
		assert_true(h->len <= sizeof(w->fields));
		memcpy(w->fields, p, h->len);
		w->fields_len = h->len;
	} else if (h->type == RN_STDIN) {
		assert_true(h->len > 0); /* no empty STDIN frame */
		w->data = realloc(w->data, w->len + h->len);
		assert_non_null(w->data);
		memcpy(w->data + w->len, p, h->len);
		w->len += h->len;
		w->stdin_frames++;
	} else {
		assert_int_equal(h->type, RN_STDIN_CLOSE);
		w->closed = true;
		return 1;
	}
	return 0;
}

/* Sends a FILE WRITE of n data bytes after `len` bytes of fields; returns
 * how many transport writes it took, and checks the frames are the same
 * either way: the fields, the bytes exactly, STDIN_CLOSE. */
static int write_counted(struct fake *f, size_t len, size_t n)
{
	unsigned char fields[64], *data = malloc(n ? n : 1);
	struct wire w = { 0 };
	struct rn_reader rd;
	struct rn_req *r = NULL;
	char why[128];
	unsigned char c;
	int before, rc;

	assert_true(len <= sizeof(fields) && data);
	memset(fields, 'f', len);
	for (size_t i = 0; i < n; i++)
		data[i] = (unsigned char)(i * 7 + 1);
	before = atomic_load(&writes);
	assert_int_equal(rn_request_stdin(f->c, RN_FILE, fields, len, data, n, &r, why,
					  sizeof(why)), 0);
	rc = atomic_load(&writes) - before;
	rn_reader_init(&rd, RN_MAX_PAYLOAD);
	while (!w.closed) {
		assert_int_equal(read(f->peer, &c, 1), 1);
		assert_true(rn_reader_feed(&rd, &c, 1, wire_frame, &w) >= 0);
	}
	rn_reader_free(&rd);
	assert_int_equal(w.fields_len, len);
	assert_memory_equal(w.fields, fields, len);
	assert_int_equal(w.len, n);
	if (n)
		assert_memory_equal(w.data, data, n);
	assert_int_equal(w.stdin_frames, n ? 1 : 0);
	rn_req_put(r);
	free(w.data);
	free(data);
	return rc;
}

/* A FILE WRITE whose fields and data come to RN_CORK_MAX bytes goes in one
 * write (the cork); one byte more goes frame by frame (header and payload
 * of the large STDIN frame apart, plus the two small frames); an empty file
 * is one write of two frames.  The wire is the same either way. */
static void test_client_cork(void **state)
{
	struct fake *f = fake_ready();

	(void)state;
	assert_int_equal(write_counted(f, 40, RN_CORK_MAX - 40), 1);
	assert_int_equal(write_counted(f, 40, RN_CORK_MAX - 39), 4);
	assert_int_equal(write_counted(f, 40, 0), 1);
	assert_int_equal(write_counted(f, 0, RN_CORK_MAX), 1);
	assert_true(rn_conn_alive(f->c, NULL, 0));
	fake_close(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_header),
		cmocka_unit_test(test_reader_split),
		cmocka_unit_test(test_reader_corrupt),
		cmocka_unit_test(test_fields),
		cmocka_unit_test(test_reader_empty_first),
		cmocka_unit_test(test_fuzz),
		cmocka_unit_test(test_client_good),
		cmocka_unit_test(test_client_garbage_first),
		cmocka_unit_test(test_client_bad_hello),
		cmocka_unit_test(test_client_broken),
		cmocka_unit_test(test_client_order),
		cmocka_unit_test(test_client_abandoned),
		cmocka_unit_test(test_client_kernel),
		cmocka_unit_test(test_client_cork),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
