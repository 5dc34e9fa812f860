/*
 * Interactive streams (persistent shells): a Start with stdin:true (ref.
 * 5.2) whose event stream a thread of its own reads into a buffer, stdin
 * through SendInput, the end through CloseStdin and, when that is not
 * enough, SendSignal SIGKILL (ref. 5.3).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/fc/fc.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define FC_STREAM_BUF_MAX  (4u * 1024u * 1024u) /* unread output kept */
#define FC_STREAM_CLOSE_MS 3000

struct sg_stream {
	struct fc_machine *fm;       /* borrowed: the core keeps the machine */
	struct sg_exec_req req;      /* only argv/command/cwd/env are read, at open */
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct fc_proc_events pe;    /* owned, guarded by lock once the thread runs */
	struct sg_buf buf;           /* unread output, guarded by lock */
	size_t off;                  /* read offset into buf */
	bool done;                   /* the request is over */
	bool dropped;                /* output was dropped: the reader was too slow */
	int abort_fd;                /* eventfd that ends the request */
	struct sg_err err;           /* why the request failed, when it did */
	int result;                  /* fc_proc_start()'s return */
};

static void fc_stream_out(void *ud, int fd, const char *p, size_t n)
{
	struct sg_stream *s = ud;
	const struct sg_host_api *host = s->fm->ctx->host;

	(void)fd; /* merged in order, as plugin.h asks */
	/* called on the reader thread with s->lock held (pe.lock) */
	if (s->buf.len - s->off + n > FC_STREAM_BUF_MAX) {
		s->dropped = true;
		return;
	}
	host->buf_append(&s->buf, p, n);
}

static void fc_stream_event(void *ud)
{
	struct sg_stream *s = ud;

	pthread_cond_broadcast(&s->cond);
}

static void *fc_stream_main(void *arg)
{
	struct sg_stream *s = arg;
	long status;
	int r;

	r = fc_proc_start(s->fm, &s->req, true, &s->pe, NULL, s->abort_fd, &status, &s->err);
	pthread_mutex_lock(&s->lock);
	s->result = r;
	s->done = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

static void fc_deadline(struct timespec *ts, int ms)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

/* Waits (lock held) until pred or the deadline; false on timeout.  A
 * negative ms waits without a deadline. */
static bool fc_wait(struct sg_stream *s, bool (*pred)(struct sg_stream *), int ms)
{
	struct timespec ts;

	fc_deadline(&ts, ms < 0 ? 0 : ms);
	while (!pred(s)) {
		if (ms == 0)
			return false;
		if (ms < 0)
			pthread_cond_wait(&s->cond, &s->lock);
		else if (pthread_cond_timedwait(&s->cond, &s->lock, &ts) == ETIMEDOUT)
			return pred(s);
	}
	return true;
}

static bool fc_started_or_done(struct sg_stream *s)
{
	return s->pe.started || s->done;
}

static bool fc_readable(struct sg_stream *s)
{
	return s->buf.len > s->off || s->done || s->pe.ended;
}

static bool fc_finished(struct sg_stream *s)
{
	return s->done;
}

static void fc_stream_free(struct sg_stream *s)
{
	const struct sg_host_api *host = s->fm->ctx->host;

	fc_proc_free(&s->pe);
	host->buf_release(&s->buf);
	if (s->abort_fd >= 0)
		close(s->abort_fd);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* Ends the request thread and joins it. */
static void fc_stream_stop(struct sg_stream *s)
{
	uint64_t one = 1;

	if (write(s->abort_fd, &one, sizeof(one)) < 0)
		s->fm->ctx->host->log(SG_LOG_DEBUG, FC_PLUGIN, "stream abort: %s", strerror(errno));
	pthread_join(s->thread, NULL);
}

int fc_stream_open(struct sg_machine *m, const struct sg_exec_req *req, struct sg_stream **out,
		   struct sg_err *err)
{
	struct fc_machine *fm = fc_machine_of(m, err);
	const struct sg_host_api *host;
	struct sg_stream *s;
	bool ok;

	if (!fm)
		return -1;
	host = fm->ctx->host;
	s = calloc(1, sizeof(*s)); /* freed by fc_stream_close() */
	if (!s)
		return host->errf(err, SG_E_NOMEM, "fc: out of memory");
	s->fm = fm;
	s->req = *req; /* borrowed pointers, read only before the start event */
	s->req.timeout_ms = 0; /* a shell lives until closed */
	s->abort_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	s->pe.out = fc_stream_out;
	s->pe.on_event = fc_stream_event;
	s->pe.ud = s;
	s->pe.lock = &s->lock; /* chunks are parsed under it */
	if (s->abort_fd < 0 || fc_proc_init(&s->pe) < 0) {
		fc_stream_free(s);
		return host->errf(err, SG_E_NOMEM, "fc: cannot set up a stream");
	}
	if (pthread_create(&s->thread, NULL, fc_stream_main, s) != 0) {
		fc_stream_free(s);
		return host->errf(err, SG_E_INTERNAL, "fc: cannot start the stream thread");
	}
	pthread_mutex_lock(&s->lock);
	ok = fc_wait(s, fc_started_or_done, (int)fm->ctx->request_timeout_s * 1000) && s->pe.started;
	if (!ok && s->done && err)
		*err = s->err;
	pthread_mutex_unlock(&s->lock);
	if (!ok) {
		long pid = s->pe.pid;

		fc_stream_stop(s);
		fc_process_kill(fm, pid);
		if (!s->done || s->err.code == SG_E_OK)
			host->errf(err, SG_E_TIMEOUT, "fc: stream: the process did not start");
		fc_stream_free(s);
		return -1;
	}
	*out = s;
	return 0;
}

ssize_t fc_stream_write(struct sg_stream *s, const void *p, size_t n, struct sg_err *err)
{
	long pid;

	pthread_mutex_lock(&s->lock);
	pid = s->pe.ended || s->done ? 0 : s->pe.pid;
	pthread_mutex_unlock(&s->lock);
	if (!pid)
		return s->fm->ctx->host->errf(err, SG_E_IO, "fc: stream: the process has ended");
	if (n > FC_MAX_ENVELOPE / 2)
		n = FC_MAX_ENVELOPE / 2; /* a short write; the caller sends the rest */
	if (fc_process_send_input(s->fm, pid, p, n, err) < 0)
		return -1;
	return (ssize_t)n;
}

/* Fills the stream's error (lock held) after the request ended. */
static ssize_t fc_stream_fail(struct sg_stream *s, struct sg_err *err)
{
	const struct sg_host_api *host = s->fm->ctx->host;

	if (s->result < 0 && s->err.code != SG_E_CANCELLED) {
		if (err)
			*err = s->err;
		return -1;
	}
	if (s->pe.tcode[0] && strcmp(s->pe.tcode, "deadline_exceeded") != 0)
		return host->errf(err, SG_E_BACKEND, "fc: stream: envd ended it with %s: %.200s",
				  s->pe.tcode, s->pe.tmsg);
	if (!s->pe.ended)
		return host->errf(err, SG_E_IO, "fc: stream: the connection dropped before the process ended");
	return 0; /* EOF */
}

ssize_t fc_stream_read(struct sg_stream *s, void *p, size_t n, int timeout_ms,
		       struct sg_err *err)
{
	ssize_t got = 0;

	pthread_mutex_lock(&s->lock);
	if (!fc_wait(s, fc_readable, timeout_ms)) {
		pthread_mutex_unlock(&s->lock);
		return s->fm->ctx->host->errf(err, SG_E_TIMEOUT, "fc: stream: nothing to read within %d ms",
					      timeout_ms);
	}
	if (s->buf.len > s->off) {
		size_t k = s->buf.len - s->off < n ? s->buf.len - s->off : n;

		memcpy(p, s->buf.data + s->off, k);
		s->off += k;
		if (s->off == s->buf.len)
			s->buf.len = s->off = 0; /* reuse the buffer */
		got = (ssize_t)k;
	} else if (!s->pe.ended) {
		got = fc_stream_fail(s, err);
	}
	pthread_mutex_unlock(&s->lock);
	return got;
}

int fc_stream_close(struct sg_stream *s, int *exit_code)
{
	struct sg_err err;
	long pid;
	bool ended;

	if (!s)
		return 0;
	pthread_mutex_lock(&s->lock);
	pid = s->pe.pid;
	ended = s->pe.ended || s->done;
	pthread_mutex_unlock(&s->lock);
	/* EOF on stdin ends a shell; what ignores it is killed. */
	if (!ended && fc_process_close_stdin(s->fm, pid, &err) == 0) {
		pthread_mutex_lock(&s->lock);
		ended = fc_wait(s, fc_finished, FC_STREAM_CLOSE_MS);
		pthread_mutex_unlock(&s->lock);
	}
	if (!ended)
		fc_process_kill(s->fm, pid);
	pthread_mutex_lock(&s->lock);
	fc_wait(s, fc_finished, FC_STREAM_CLOSE_MS);
	pthread_mutex_unlock(&s->lock);
	fc_stream_stop(s);
	if (exit_code)
		*exit_code = s->pe.ended ? (s->pe.signal ? -1 : s->pe.exit_code) : -1;
	fc_stream_free(s);
	return 0;
}
