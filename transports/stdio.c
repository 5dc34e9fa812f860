#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/base/conf.h"
#include "core/protocol/call.h"
#include "core/protocol/dump.h"
#include "core/protocol/jsonrpc.h"
#include "core/base/log.h"
#include "core/server/exec.h"
#include "core/server/mcp.h"
#include "core/server/stop.h"
#include "core/protocol/session.h"
#include "core/base/util.h"
#include "transports/lines.h"
#include "transports/transport.h"

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static bool out_broken;

/* A request at least this large widens stdin (widen_pipe); a reply that
 * overflows OUT_CHUNK widens stdout. */
#define WIDE_MESSAGE (1024 * 1024)

/* A pipe holds 64 KiB by default (pipe(7)): a 170 MB reply or an 85 MB
 * request crossed it in 2,700 or 1,300 writer-reader hand-overs, each a
 * wake-up of the other side.  1 MiB is the most an unprivileged process
 * may ask for by default (/proc/sys/fs/pipe-max-size).  Only a pipe that
 * carries a large message is widened, once: the pages count against the
 * user's pipe quota (pipe-user-pages-soft, 64 MiB), which many idle
 * sessions must not spend.  Anything else (not a pipe, a lower limit, the
 * quota spent) keeps the pipe as it is. */
static void widen_pipe(int fd, atomic_bool *done)
{
	if (!atomic_exchange(done, true))
		(void)fcntl(fd, F_SETPIPE_SZ, 1 << 20);
}

static atomic_bool in_wide, out_wide;

/* Writes the message and its newline in one writev, under the lock, so
 * concurrent replies never interleave and the client is woken once. */
static void write_line(const char *data, size_t len)
{
	static char newline[] = "\n";
	struct iovec iov[2] = { { (void *)data, len }, { newline, 1 } };
	int i = 0;

	while (i < 2 && !out_broken) {
		ssize_t w = writev(STDOUT_FILENO, iov + i, 2 - i);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			/* The client went away: nothing more can be said to it. */
			out_broken = true;
			return;
		}
		while (i < 2 && (size_t)w >= iov[i].iov_len)
			w -= (ssize_t)iov[i++].iov_len;
		if (i < 2) {
			iov[i].iov_base = (char *)iov[i].iov_base + w;
			iov[i].iov_len -= (size_t)w;
		}
	}
}

static void stdio_send(void *ctx, struct sg_call *call, const char *data, size_t len, bool final)
{
	(void)ctx;
	(void)call;
	(void)final;
	pthread_mutex_lock(&out_lock);
	write_line(data, len);
	pthread_mutex_unlock(&out_lock);
}

/* A message is written through this buffer (out_lock held): one that fits
 * goes out with its newline in one writev, so the client is woken once; a
 * larger one in pieces as it is dumped, never held whole. */
#define OUT_CHUNK (256 * 1024)
static char out_buf[OUT_CHUNK];
static size_t out_len;
static bool out_flushed;    /* part of the current message is out */

static void write_all(const char *p, size_t n)
{
	while (n && !out_broken) {
		ssize_t w = write(STDOUT_FILENO, p, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			out_broken = true;
			return;
		}
		p += w;
		n -= (size_t)w;
	}
}

static int out_piece(const char *p, size_t n, void *ud)
{
	(void)ud;
	if (out_len + n > OUT_CHUNK) {
		write_all(out_buf, out_len);
		out_len = 0;
		out_flushed = true;
		widen_pipe(STDOUT_FILENO, &out_wide);
		if (n >= OUT_CHUNK) {
			write_all(p, n);
			return out_broken ? -1 : 0;
		}
	}
	memcpy(out_buf + out_len, p, n);
	out_len += n;
	return out_broken ? -1 : 0;
}

static void stdio_send_json(void *ctx, struct sg_call *call, const json_t *msg, bool final)
{
	(void)ctx;
	(void)final;
	pthread_mutex_lock(&out_lock);
	out_len = 0;
	out_flushed = false;
	if (sg_msg_dump(msg, call ? &call->held : NULL, out_piece, NULL) == 0) {
		write_line(out_buf, out_len);
	} else if (!out_broken && !out_flushed) {
		/* jansson refused a value: nothing is out yet, so say so instead */
		SG_ERROR("stdio: a reply could not be serialised; sent an internal error instead");
		write_line(SG_RPC_CANNOT_SERIALISE, strlen(SG_RPC_CANNOT_SERIALISE));
	} else if (!out_broken) {
		write_line(out_buf, out_len); /* ends the broken line: the next one parses */
		SG_ERROR("stdio: a reply could not be serialised after part of it was written");
	}
	pthread_mutex_unlock(&out_lock);
}

static bool stdio_handoff(void *ctx);

static const struct sg_transport_ops stdio_ops = {
	.name = "stdio", .send = stdio_send, .send_json = stdio_send_json, .handoff = stdio_handoff,
};

/* Reading is a role that passes between threads (leader/follower).  The
 * thread that reads a tools/call runs it itself, and another thread, already
 * asleep on the same epoll set, reads the next message: a call's way in has
 * no thread wake-up (about 13 us for the waker here, plus the wakee's
 * latency).  Holding the input means holding in_lock; the input is handed
 * on by re-arming stdin (EPOLLONESHOT: one event, one thread), or, when
 * whole lines are still buffered, the kick eventfd.  The main thread only
 * waits for the end. */
#define READERS_IDLE_MAX 2
#define READER_STACK (1024 * 1024) /* calls run here too; jansson recurses */

enum { EV_INPUT, EV_KICK, EV_END };

static struct {
	pthread_mutex_t in_lock; /* held by the thread holding the input */
	struct sg_lines r;       /* the input's framing */
	bool pollable;           /* stdin works with epoll (not a regular file) */

	pthread_mutex_t lock;    /* guards what follows */
	pthread_cond_t gone;     /* ended, or a thread exited */
	atomic_bool ended;       /* end of input, read error or signal (the
				  * holder checks it between lines, unlocked) */
	bool last_line;          /* handling the unterminated last line */
	int grace_ms;            /* for calls in flight at the end */
	int waiting;             /* threads in epoll_wait, or about to be */
	int threads;             /* reader threads alive */

	struct sg_session *s;
	int ep, kfd, efd;        /* epoll set, kick and end eventfds */
} rd = {
	.in_lock = PTHREAD_MUTEX_INITIALIZER,
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.gone = PTHREAD_COND_INITIALIZER,
	.ep = -1, .kfd = -1, .efd = -1,
};

static __thread bool holds_input;

static int arm(int op, int fd, uint32_t events, uint32_t tag)
{
	struct epoll_event ev = { .events = events, .data.u32 = tag };

	return epoll_ctl(rd.ep, op, fd, &ev);
}

/* Gives the input up: the next event goes to one waiting thread.  Called
 * by the holder, which must not touch rd.r after. */
static void release_input(void)
{
	bool lines = sg_lines_ready(&rd.r);
	uint64_t one = 1;

	holds_input = false;
	pthread_mutex_unlock(&rd.in_lock);
	if (lines || !rd.pollable) {
		arm(EPOLL_CTL_MOD, rd.kfd, EPOLLIN | EPOLLONESHOT, EV_KICK);
		if (write(rd.kfd, &one, sizeof(one)) < 0) {
			/* only on overflow, and it is readable then */
		}
	} else {
		arm(EPOLL_CTL_MOD, STDIN_FILENO, EPOLLIN | EPOLLONESHOT, EV_INPUT);
	}
}

/* Returns false when the input had ended already. */
static bool end_input(int grace_ms)
{
	uint64_t one = 1;
	bool first;

	pthread_mutex_lock(&rd.lock);
	first = !rd.ended;
	if (first) {
		rd.ended = true;
		rd.grace_ms = grace_ms;
		/* Level-triggered and never read: every thread's epoll_wait
		 * returns from now on. */
		if (write(rd.efd, &one, sizeof(one)) < 0) {
			/* see release_input */
		}
		pthread_cond_broadcast(&rd.gone);
	}
	pthread_mutex_unlock(&rd.lock);
	return first;
}

/* Handles the complete lines in the buffer, up to the end of the session;
 * a line longer than max gets one error.  Returns false when a call took
 * this thread (the input went to another). */
static bool drain_lines(struct sg_lines *r)
{
	const char *line;
	size_t n;
	enum sg_lines_result got;

	while (!atomic_load(&rd.ended) && (got = sg_lines_next(r, &line, &n)) != SG_LINES_NONE) {
		if (got == SG_LINES_TOO_LONG) {
			/* One error, with the id when its first bytes hold it. */
			json_t *id = sg_rpc_peek_id(line, n);
			char msg[160];

			snprintf(msg, sizeof(msg),
				 "message larger than %zu bytes ([server] max_message_bytes): it was dropped",
				 r->max);
			sg_session_send(rd.s, NULL, sg_rpc_error(id, SG_RPC_INVALID_REQUEST, msg, NULL), true);
			json_decref(id);
			continue;
		}
		/* The line is taken already: the next holder starts after it,
		 * and its bytes are given away (a large argument is decoded from
		 * them once, core/protocol/bulk.h). */
		sg_mcp_handle_taking(rd.s, (char *)line, n, NULL);
		if (!holds_input)
			return false;
	}
	return true;
}

/* Reads what stdin has.  Returns 1 after reading, 0 at the end of input
 * (or a read error). */
static int read_some(struct sg_lines *r)
{
	size_t room;
	char *p = sg_lines_room(r, 65536, &room);
	ssize_t n;

	do
		n = read(STDIN_FILENO, p, room);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return 1;
	if (n <= 0)
		return 0;
	sg_lines_added(r, (size_t)n);
	if (r->len - r->off >= WIDE_MESSAGE)
		widen_pipe(STDIN_FILENO, &in_wide);
	return 1;
}

/* Runs with the input held after an EV_INPUT or EV_KICK event: reads when
 * no whole line is buffered (so a regular file is read as fast as it is
 * handled, max_message_bytes applying), handles the lines, and gives the
 * input up again, unless a call took it along. */
static void hold_input(uint32_t tag)
{
	struct sg_lines *r = &rd.r;
	const char *line;
	size_t len;
	uint64_t n;

	pthread_mutex_lock(&rd.in_lock);
	holds_input = true;
	if (tag == EV_KICK && read(rd.kfd, &n, sizeof(n)) < 0) {
		/* already drained: nothing to undo */
	}
	if (!sg_lines_ready(r) && read_some(r) == 0) {
		/* The end: at most an unterminated last line is left. */
		if (sg_lines_last(r, &line, &len)) {
			/* Nobody would read after it: no hand-off. */
			pthread_mutex_lock(&rd.lock);
			rd.last_line = true;
			pthread_mutex_unlock(&rd.lock);
			sg_mcp_handle_taking(rd.s, (char *)line, len, NULL);
		}
		SG_DEBUG("end of input, ending the session");
		end_input((int)sg_config_int("server", "shutdown_grace", 10) * 1000);
		holds_input = false;
		pthread_mutex_unlock(&rd.in_lock);
		return;
	}
	if (drain_lines(r))
		release_input();
}

static void *reader_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&rd.lock);
	while (!rd.ended) {
		struct epoll_event ev;
		int n;

		if (rd.waiting >= READERS_IDLE_MAX)
			break; /* enough threads wait already */
		rd.waiting++;
		pthread_mutex_unlock(&rd.lock);
		n = epoll_wait(rd.ep, &ev, 1, -1);
		pthread_mutex_lock(&rd.lock);
		rd.waiting--;
		if (n <= 0 || rd.ended || ev.data.u32 == EV_END) {
			if (n < 0 && errno != EINTR) {
				SG_ERROR("stdio: epoll_wait: %s", strerror(errno));
				pthread_mutex_unlock(&rd.lock);
				end_input(0);
				pthread_mutex_lock(&rd.lock);
				break;
			}
			continue;
		}
		pthread_mutex_unlock(&rd.lock);
		hold_input(ev.data.u32);
		pthread_mutex_lock(&rd.lock);
	}
	rd.threads--;
	pthread_cond_broadcast(&rd.gone);
	pthread_mutex_unlock(&rd.lock);
	return NULL;
}

/* Starts a reader thread; called with rd.lock held. */
static bool start_reader(void)
{
	pthread_attr_t attr;
	pthread_t th;
	bool ok;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, READER_STACK);
	ok = pthread_create(&th, &attr, reader_main, NULL) == 0;
	pthread_attr_destroy(&attr);
	if (ok)
		rd.threads++;
	return ok;
}

/* Gives the input to a waiting thread so that this one can run a call (see
 * handoff in struct sg_transport_ops); starts a thread when none waits. */
static bool stdio_handoff(void *ctx)
{
	bool ok;

	(void)ctx;
	if (!holds_input)
		return false;
	pthread_mutex_lock(&rd.lock);
	ok = !rd.last_line && !rd.ended && (rd.waiting > 0 || start_reader());
	pthread_mutex_unlock(&rd.lock);
	if (ok)
		release_input();
	return ok;
}

/* The first SIGTERM, SIGINT or SIGHUP (core/server/stop.c's thread): calls
 * in flight are cancelled at once. */
static void on_signal(int sig)
{
	SG_INFO("signal %d received, ending the session (a second signal ends sandgate at once)", sig);
	if (!end_input(0))
		sg_session_hurry(rd.s); /* the end of input came first: no more grace */
}

/* The epoll set every reader thread waits on.  Returns 0, or -1 (logged). */
static int open_events(void)
{
	rd.kfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	rd.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	rd.ep = epoll_create1(EPOLL_CLOEXEC);
	if (rd.kfd < 0 || rd.efd < 0 || rd.ep < 0 ||
	    arm(EPOLL_CTL_ADD, rd.kfd, EPOLLONESHOT, EV_KICK) < 0 ||
	    arm(EPOLL_CTL_ADD, rd.efd, EPOLLIN, EV_END) < 0) {
		SG_ERROR("stdio: cannot set up epoll: %s", strerror(errno));
		return -1;
	}
	rd.pollable = arm(EPOLL_CTL_ADD, STDIN_FILENO, EPOLLIN | EPOLLONESHOT, EV_INPUT) == 0;
	if (!rd.pollable) {
		/* A regular file (EPERM) is always readable: kick instead. */
		uint64_t one = 1;

		arm(EPOLL_CTL_MOD, rd.kfd, EPOLLIN | EPOLLONESHOT, EV_KICK);
		if (write(rd.kfd, &one, sizeof(one)) < 0)
			return -1;
	}
	return 0;
}

static void close_events(void)
{
	int *fds[] = { &rd.ep, &rd.kfd, &rd.efd };

	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
}

int sg_stdio_run(void)
{
	char owner[64];
	bool started = false;

	/* No child may inherit the protocol channel. */
	fcntl(STDIN_FILENO, F_SETFD, FD_CLOEXEC);
	fcntl(STDOUT_FILENO, F_SETFD, FD_CLOEXEC);
	sg_lines_init(&rd.r, (size_t)sg_config_int("server", "max_message_bytes", 256LL << 20));
	snprintf(owner, sizeof(owner), "local:%ld", (long)getuid());
	rd.s = sg_session_new(&stdio_ops, NULL, owner);
	SG_DEBUG("stdio session %s started", rd.s->hash);
	pthread_mutex_lock(&rd.lock);
	if (open_events() == 0 && sg_stop_signals_start(on_signal) == 0)
		started = start_reader();
	while (started && !rd.ended)
		pthread_cond_wait(&rd.gone, &rd.lock);
	pthread_mutex_unlock(&rd.lock);
	if (!started)
		SG_ERROR("stdio: cannot start reading");
	sg_stop_begin(rd.grace_ms);
	if (sg_session_close(rd.s, rd.grace_ms) > 0)
		return 0; /* a call is stuck on a reader thread: main ends the process */
	/* Threads that ran calls come back, see the end and exit; after them
	 * no call can start, and the drain waits for the worker threads. */
	pthread_mutex_lock(&rd.lock);
	while (rd.threads > 0)
		pthread_cond_wait(&rd.gone, &rd.lock);
	pthread_mutex_unlock(&rd.lock);
	sg_exec_drain();
	sg_session_unref(rd.s);
	sg_lines_free(&rd.r);
	close_events();
	return started ? 0 : 1;
}
