/*
 * An attached stream over tcp:// (remote.h).  libcurl owns the TLS session,
 * so callers cannot poll its socket themselves; this thread copies bytes
 * between the connection and one end of a socketpair, so exec, stream and
 * runner code treat every engine's stream as a plain fd.  The caller's
 * shutdown(SHUT_WR) cannot be passed on (libcurl has no TLS half-close):
 * the pump stops reading the caller and keeps delivering the answer.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/docker/remote.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PUMP_BUF 65536

struct pump {
	CURL *h;                 /* owned */
	int fd;                  /* our end of the socketpair (owned) */
	curl_socket_t net;       /* h's socket (borrowed from h) */
	int *live;
	pthread_mutex_t *lock;
};

static int pump_write_fd(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int pump_write_net(struct pump *pp, const char *p, size_t n)
{
	while (n > 0) {
		size_t sent = 0;
		CURLcode cc = curl_easy_send(pp->h, p, n, &sent);

		if (cc == CURLE_AGAIN) {
			struct pollfd w = { .fd = pp->net, .events = POLLOUT };

			if (poll(&w, 1, 30000) <= 0)
				return -1;
			continue;
		}
		if (cc != CURLE_OK)
			return -1;
		p += sent;
		n -= sent;
	}
	return 0;
}

/* Drains what the connection has (TLS may hold decrypted bytes the socket
 * does not show).  Returns 1 at the connection's end, -1 on error. */
static int pump_from_net(struct pump *pp, char *buf)
{
	for (;;) {
		size_t got = 0;
		CURLcode cc = curl_easy_recv(pp->h, buf, PUMP_BUF, &got);

		if (cc == CURLE_AGAIN)
			return 0;
		if (cc != CURLE_OK)
			return -1;
		if (got == 0)
			return 1;
		if (pump_write_fd(pp->fd, buf, got) < 0)
			return -1;
	}
}

static void *pump_main(void *arg)
{
	struct pump *pp = arg;
	char *buf = malloc(PUMP_BUF); /* freed below */
	bool caller_open = true, net_open = true;

	while (buf && (caller_open || net_open)) {
		struct pollfd p[2] = { { .fd = net_open ? pp->net : -1, .events = POLLIN },
				       { .fd = pp->fd, .events = caller_open ? POLLIN : 0 } };
		ssize_t r;
		int rc;

		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (net_open && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
			rc = pump_from_net(pp, buf);
			if (rc < 0)
				break;
			if (rc == 1) {
				net_open = false;
				shutdown(pp->fd, SHUT_WR);
			}
		}
		if (p[1].revents & (POLLHUP | POLLERR | POLLNVAL) && !(p[1].revents & POLLIN))
			break;
		if (caller_open && (p[1].revents & POLLIN)) {
			r = read(pp->fd, buf, PUMP_BUF);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0)
				break;
			if (r == 0) {
				caller_open = false;
				if (!net_open)
					break;
				continue;
			}
			if (pump_write_net(pp, buf, (size_t)r) < 0)
				break;
		}
		if (!caller_open && !net_open)
			break;
		/* The caller closed its end: nothing more can be delivered. */
		if (!caller_open && (p[1].revents & POLLHUP))
			break;
	}
	free(buf);
	curl_easy_cleanup(pp->h);
	close(pp->fd);
	pthread_mutex_lock(pp->lock);
	(*pp->live)--;
	pthread_mutex_unlock(pp->lock);
	free(pp);
	return NULL;
}

int docker_pump_start(const struct sg_host_api *host, CURL *h, int *live,
		      pthread_mutex_t *lock, int *fd, struct sg_err *err)
{
	struct pump *pp = calloc(1, sizeof(*pp)); /* freed by pump_main */
	int sv[2] = { -1, -1 };
	pthread_attr_t at;
	pthread_t th;
	int rc;

	*fd = -1;
	if (!pp) {
		curl_easy_cleanup(h);
		return host->errf(err, SG_E_NOMEM, "docker: out of memory");
	}
	if (curl_easy_getinfo(h, CURLINFO_ACTIVESOCKET, &pp->net) != CURLE_OK ||
	    pp->net == CURL_SOCKET_BAD ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		rc = host->errf(err, SG_E_IO, "docker: cannot set up the stream's pump: %s",
				strerror(errno));
		goto fail;
	}
	pp->h = h;
	pp->fd = sv[1];
	pp->live = live;
	pp->lock = lock;
	pthread_mutex_lock(lock);
	(*live)++;
	pthread_mutex_unlock(lock);
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&th, &at, pump_main, pp);
	pthread_attr_destroy(&at);
	if (rc != 0) {
		pthread_mutex_lock(lock);
		(*live)--;
		pthread_mutex_unlock(lock);
		rc = host->errf(err, SG_E_IO, "docker: cannot start the stream's pump: %s",
				strerror(rc));
		goto fail;
	}
	*fd = sv[0];
	return 0;
fail:
	if (sv[0] >= 0) {
		close(sv[0]);
		close(sv[1]);
	}
	curl_easy_cleanup(h);
	free(pp);
	return rc;
}
