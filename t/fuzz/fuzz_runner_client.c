/*
 * Fuzz target: the plugins' client of a runner (plugins/runner/client.c,
 * its reader in client_read.c), reading what a runner says through an
 * in-memory transport.  The first byte picks:
 *
 *  - the greeting: the rest is what the runner says first (then EOF);
 *  - a request: the runner greets properly, sandgate sends SPAWN, and the
 *    rest is what the runner answers (then EOF).
 *
 * Invariants: the client ends every request (done or failed, with a
 * reason), never takes more data than arrived, and a HELLO it accepts has
 * the major version and build it asked for.  Each input starts the
 * client's reader thread: a slower target than the decoder's.
 */
#define _GNU_SOURCE 1
#include "config.h"

#include <pthread.h>
#include <string.h>

#include "plugins/runner/client.h"
#include "plugins/runner/proto.h"
#include "t/fuzz/fuzz.h"

/* Each input starts and ends the client's reader thread, and ASan's work at
 * a thread's end is most of a run: it clears the shadow of the thread's
 * stack, by mmap past 64 kB of shadow (an 8 MB default stack), and every
 * mmap and munmap flushes TLBs (slow in a VM).  A 256 kB default stack (the
 * reader needs a few kB) clears by memset; the client's code and what it is
 * fed are unchanged.  ASan's own records of a thread are still unmapped at
 * its end: two munmaps per input, about 60% of the time under ASan. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	pthread_attr_t a;

	(void)argc;
	(void)argv;
	if (pthread_attr_init(&a) == 0) {
		if (pthread_attr_setstacksize(&a, 256 * 1024) == 0)
			(void)pthread_setattr_default_np(&a);
		pthread_attr_destroy(&a);
	}
	return 0;
}

struct mem {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	const unsigned char *hello;  /* sent first (may be NULL) */
	size_t hello_len, hello_off;
	const unsigned char *rest;   /* sent once `gate` writes came */
	size_t rest_len, rest_off;
	int writes, gate;
	unsigned step;               /* read sizes */
	bool shut;
};

static ssize_t mem_read(void *ud, void *p, size_t n)
{
	struct mem *m = ud;
	ssize_t got = 0;
	size_t k;

	pthread_mutex_lock(&m->lock);
	for (;;) {
		if (m->shut) {
			got = 0;
			break;
		}
		if (m->hello_off < m->hello_len) {
			k = 1 + (m->step * 13u + m->hello_off) % 29u;
			k = k < m->hello_len - m->hello_off ? k : m->hello_len - m->hello_off;
			k = k < n ? k : n;
			memcpy(p, m->hello + m->hello_off, k);
			m->hello_off += k;
			got = (ssize_t)k;
			break;
		}
		if (m->writes >= m->gate) {
			if (m->rest_off == m->rest_len)
				break; /* EOF */
			k = 1 + (m->step * 7u + m->rest_off) % 101u;
			k = k < m->rest_len - m->rest_off ? k : m->rest_len - m->rest_off;
			k = k < n ? k : n;
			memcpy(p, m->rest + m->rest_off, k);
			m->rest_off += k;
			got = (ssize_t)k;
			break;
		}
		pthread_cond_wait(&m->cond, &m->lock);
	}
	pthread_mutex_unlock(&m->lock);
	return got;
}

static int mem_write(void *ud, const void *p, size_t n)
{
	struct mem *m = ud;

	(void)p;
	(void)n;
	pthread_mutex_lock(&m->lock);
	m->writes++;
	pthread_cond_broadcast(&m->cond);
	pthread_mutex_unlock(&m->lock);
	return 0;
}

static void mem_shutdown(void *ud)
{
	struct mem *m = ud;

	pthread_mutex_lock(&m->lock);
	m->shut = true;
	pthread_cond_broadcast(&m->cond);
	pthread_mutex_unlock(&m->lock);
}

static void mem_free(void *ud)
{
	struct mem *m = ud;

	pthread_mutex_destroy(&m->lock);
	pthread_cond_destroy(&m->cond);
	free(m);
}

static struct rn_transport transport(struct mem *m)
{
	struct rn_transport t = { mem_read, mem_write, mem_shutdown, mem_free, m };

	pthread_mutex_init(&m->lock, NULL);
	pthread_cond_init(&m->cond, NULL);
	return t;
}

struct taken {
	size_t bytes;
};

static void take(int chan, const void *p, size_t n, void *ud)
{
	struct taken *t = ud;

	(void)p;
	FUZZ_ASSERT(chan == RN_R_STDOUT || chan == RN_R_STDERR || chan == RN_R_STATUS);
	t->bytes += n;
}

static const struct rn_conn_opts opts = { .name = "fuzz", .build_id = "0123456789abcdef",
					  .hello_timeout_ms = 10000 };

static void greeting(unsigned mode, const unsigned char *p, size_t n)
{
	struct mem *m = calloc(1, sizeof(*m));
	struct rn_transport t = transport(m);
	struct rn_conn *c = NULL;
	char why[256] = "";

	m->rest = p;
	m->rest_len = n;
	m->gate = 0;
	m->step = mode;
	if (rn_conn_open(&t, &opts, &c, why, sizeof(why)) == 0) {
		struct rn_hello h;

		rn_conn_hello(c, &h);
		FUZZ_ASSERT(h.major == RN_VERSION_MAJOR && !strcmp(h.build_id, opts.build_id));
		rn_conn_close(c);
	} else {
		FUZZ_ASSERT(why[0]);
	}
}

static void request(unsigned mode, const unsigned char *p, size_t n)
{
	struct mem *m = calloc(1, sizeof(*m));
	struct rn_transport t = transport(m);
	struct rn_conn *c = NULL;
	struct rn_buf hello = { 0 };
	struct rn_spawn sp = { .command = "true", .mode = RN_MODE_STATUS, .status_fd = 3 };
	struct rn_req *r = NULL;
	struct rn_exit ex;
	struct taken tk = { 0 };
	enum rn_req_state st;
	char why[256] = "";
	size_t start;

	start = rn_frame_begin(&hello, RN_R_HELLO, 0);
	rn_put_u32(&hello, RN_F_VERSION, RN_VERSION_MAJOR << 16);
	rn_put_str(&hello, RN_F_BUILD_ID, opts.build_id);
	rn_put_u32(&hello, RN_F_PID, 1);
	FUZZ_ASSERT(rn_frame_end(&hello, start) == 0);
	m->hello = hello.data;
	m->hello_len = hello.len;
	m->rest = p;
	m->rest_len = n;
	m->gate = 2; /* sandgate's HELLO, then the SPAWN */
	m->step = mode;
	FUZZ_ASSERT(rn_conn_open(&t, &opts, &c, why, sizeof(why)) == 0);
	FUZZ_ASSERT(rn_spawn(c, &sp, &r, why, sizeof(why)) == 0);
	/* The stream ends after the input: the request ends too. */
	while ((st = rn_req_drain(r, take, &tk, &ex, why, sizeof(why))) == RN_REQ_RUNNING)
		rn_req_wait(r, 1000, -1);
	FUZZ_ASSERT(st == RN_REQ_DONE || why[0]);
	FUZZ_ASSERT(tk.bytes <= n);
	if (st == RN_REQ_DONE)
		FUZZ_ASSERT(ex.code >= -1 && ex.code <= 255);
	rn_req_put(r);
	rn_conn_close(c);
	rn_buf_free(&hello);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size };
	unsigned mode = fuzz_byte(&in);

	if (mode % 2 == 0)
		greeting(mode, in.p, in.n);
	else
		request(mode, in.p, in.n);
	return 0;
}
