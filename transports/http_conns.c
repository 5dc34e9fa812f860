/*
 * HTTP connections (transports/http_internal.h): every accepted socket is
 * tracked from MHD's connection notifications, so that a request has to
 * arrive whole (headers and body) within [server] request_timeout of the
 * moment its connection was ready for it, however it trickles.
 * libmicrohttpd's own timeout (MHD_OPTION_CONNECTION_TIMEOUT) counts from
 * the last byte received, so one header line every 20 s kept a connection
 * forever; the janitor (main thread, every TICK_MS) shuts such sockets
 * down, and MHD then closes them as it would any connection whose peer
 * went away.  The per-address cap is MHD's (MHD_OPTION_PER_IP_CONNECTION_LIMIT).
 *
 * conns_lock is a leaf: nothing else is taken while it is held.  MHD calls
 * the "closed" notification before it closes the socket (checked on
 * 0.9.75), and the notification takes conns_lock, so a socket shut down
 * under the lock is still that connection's.
 */
#include "config.h"

#include <pthread.h>
#include <sys/socket.h>

#include "core/base/log.h"
#include "core/base/util.h"
#include "transports/http_internal.h"

struct conn {
	struct conn *prev, *next;
	MHD_socket fd;
	int64_t ready_ms;        /* accepted, or the previous request ended */
	bool busy;               /* a whole request is in: its response is due */
	bool cut;                /* shut down for its deadline */
};

static pthread_mutex_t conns_lock = PTHREAD_MUTEX_INITIALIZER;
static struct conn *conns;
static unsigned long long cut_total, cut_logged;
static int64_t cut_logged_ms;

void http_conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
		      enum MHD_ConnectionNotificationCode code)
{
	struct conn *k = *socket_context;
	const union MHD_ConnectionInfo *ci;

	(void)cls;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		k = sg_xcalloc(1, sizeof(*k));
		k->fd = ci ? ci->connect_fd : MHD_INVALID_SOCKET;
		k->ready_ms = sg_now_ms();
		pthread_mutex_lock(&conns_lock);
		k->next = conns;
		if (conns)
			conns->prev = k;
		conns = k;
		pthread_mutex_unlock(&conns_lock);
		*socket_context = k;
		return;
	}
	if (!k)
		return;
	pthread_mutex_lock(&conns_lock);
	if (k->prev)
		k->prev->next = k->next;
	else
		conns = k->next;
	if (k->next)
		k->next->prev = k->prev;
	pthread_mutex_unlock(&conns_lock);
	*socket_context = NULL;
	free(k);
}

static struct conn *conn_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

void http_conn_whole(struct MHD_Connection *c)
{
	struct conn *k = conn_of(c);

	if (!k)
		return;
	pthread_mutex_lock(&conns_lock);
	k->busy = true;
	pthread_mutex_unlock(&conns_lock);
}

void http_conn_ended(struct MHD_Connection *c)
{
	struct conn *k = conn_of(c);

	if (!k)
		return;
	pthread_mutex_lock(&conns_lock);
	k->busy = false;
	k->ready_ms = sg_now_ms();
	pthread_mutex_unlock(&conns_lock);
}

MHD_socket http_conn_fd(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);

	return ci ? ci->connect_fd : MHD_INVALID_SOCKET;
}

void http_conns_tick(int64_t now, int64_t timeout_ms)
{
	unsigned long long total, logged;
	bool say = false;

	pthread_mutex_lock(&conns_lock);
	for (struct conn *k = conns; k; k = k->next) {
		if (k->busy || k->cut || now - k->ready_ms < timeout_ms || k->fd == MHD_INVALID_SOCKET)
			continue;
		/* MHD sees end of input and closes the connection itself. */
		shutdown(k->fd, SHUT_RDWR);
		k->cut = true;
		cut_total++;
	}
	/* One line every few seconds, however many are cut. */
	if (cut_total != cut_logged && now - cut_logged_ms >= 5000) {
		say = true;
		total = cut_total;
		logged = cut_logged;
		cut_logged = cut_total;
		cut_logged_ms = now;
	}
	pthread_mutex_unlock(&conns_lock);
	if (say)
		SG_INFO("http: closed %llu connection(s) that sent no whole request within %lld s ([server] request_timeout; %llu since the start)",
			total - logged, (long long)(timeout_ms / 1000), total);
}
