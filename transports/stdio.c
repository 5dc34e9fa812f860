#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "core/conf.h"
#include "core/jsonrpc.h"
#include "core/log.h"
#include "core/mcp.h"
#include "core/session.h"
#include "core/util.h"
#include "transports/transport.h"

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static bool out_broken;

static void write_all(int fd, const char *p, size_t n)
{
	while (n > 0 && !out_broken) {
		ssize_t w = write(fd, p, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			/* The client went away: nothing more can be said to it. */
			out_broken = true;
			return;
		}
		p += w;
		n -= (size_t)w;
	}
}

/* One message, one line: the newline goes out in the same locked write so
 * concurrent replies never interleave. */
static void stdio_send(void *ctx, struct sg_call *call, const char *data, size_t len, bool final)
{
	(void)ctx;
	(void)call;
	(void)final;
	pthread_mutex_lock(&out_lock);
	write_all(STDOUT_FILENO, data, len);
	write_all(STDOUT_FILENO, "\n", 1);
	pthread_mutex_unlock(&out_lock);
}

static const struct sg_transport_ops stdio_ops = { .name = "stdio", .send = stdio_send };

struct line_reader {
	char *buf;
	size_t len, cap;
	size_t max;      /* largest message accepted */
	bool discarding; /* inside an oversized line */
};

static void handle_line(struct sg_session *s, char *line, size_t n)
{
	while (n > 0 && (line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t'))
		n--;
	if (n == 0)
		return;
	sg_mcp_handle(s, line, n, NULL);
}

/* Takes the complete lines out of the buffer. */
static void drain_lines(struct sg_session *s, struct line_reader *r)
{
	size_t start = 0;

	for (;;) {
		char *nl = memchr(r->buf + start, '\n', r->len - start);

		if (!nl)
			break;
		if (r->discarding) {
			r->discarding = false;
		} else {
			handle_line(s, r->buf + start, (size_t)(nl - (r->buf + start)));
		}
		start = (size_t)(nl - r->buf) + 1;
	}
	memmove(r->buf, r->buf + start, r->len - start);
	r->len -= start;
	if (r->len > r->max) {
		char msg[160];

		snprintf(msg, sizeof(msg), "message larger than %zu bytes ([server] max_message_bytes): it was dropped",
			 r->max);
		sg_session_send(s, NULL, sg_rpc_error(NULL, SG_RPC_INVALID_REQUEST, msg, NULL), true);
		r->len = 0;
		r->discarding = true;
	}
}

static int read_some(struct sg_session *s, struct line_reader *r)
{
	ssize_t n;

	if (r->cap - r->len < 65536) {
		r->cap = r->cap ? r->cap * 2 : 131072;
		r->buf = sg_xrealloc(r->buf, r->cap);
	}
	n = read(STDIN_FILENO, r->buf + r->len, r->cap - r->len);
	if (n < 0)
		return errno == EINTR || errno == EAGAIN ? 1 : -1;
	if (n == 0)
		return 0;
	r->len += (size_t)n;
	drain_lines(s, r);
	return 1;
}

int sg_stdio_run(void)
{
	struct line_reader r = { 0 };
	struct sg_session *s;
	struct pollfd pfd[2];
	sigset_t mask;
	int sfd;
	char owner[64];

	/* No child may inherit the protocol channel. */
	fcntl(STDIN_FILENO, F_SETFD, FD_CLOEXEC);
	fcntl(STDOUT_FILENO, F_SETFD, FD_CLOEXEC);
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC);
	r.max = (size_t)sg_config_int("server", "max_message_bytes", 256LL << 20);
	snprintf(owner, sizeof(owner), "local:%ld", (long)getuid());
	s = sg_session_new(&stdio_ops, NULL, owner);
	SG_DEBUG("stdio session %s started", s->hash);
	pfd[0].fd = STDIN_FILENO;
	pfd[0].events = POLLIN;
	pfd[1].fd = sfd;
	pfd[1].events = POLLIN;
	int grace_ms = 0;

	for (;;) {
		int rc = poll(pfd, sfd >= 0 ? 2 : 1, -1);

		if (rc < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (sfd >= 0 && (pfd[1].revents & POLLIN)) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) == sizeof(si))
				SG_INFO("signal %u received, ending the session", si.ssi_signo);
			break;
		}
		if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			rc = read_some(s, &r);
			if (rc <= 0) {
				if (r.len > 0 && !r.discarding)
					handle_line(s, r.buf, r.len);
				SG_DEBUG("end of input, ending the session");
				grace_ms = (int)sg_config_int("server", "shutdown_grace", 10) * 1000;
				break;
			}
		}
	}
	sg_session_close(s, grace_ms);
	sg_mcp_drain();
	sg_session_unref(s);
	free(r.buf);
	if (sfd >= 0)
		close(sfd);
	return 0;
}
