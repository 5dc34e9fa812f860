/*
 * The transports of remote engines, under engine.c:
 *   tlspump.c  an attached (hijacked) stream over tcp://, TLS or not: libcurl
 *              holds the connection, a thread copies it to one end of a
 *              socketpair so callers poll and read a plain fd as on unix://
 *   sshrelay.c ssh:// engines: a private unix socket whose every connection
 *              is a libssh2 channel running `docker system dial-stdio` on the
 *              remote host, all on one SSH connection (one thread per engine)
 */
#ifndef SG_DOCKER_REMOTE_H
#define SG_DOCKER_REMOTE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include <curl/curl.h>

#include <sandgate/plugin.h>

/* ---- tlspump.c ---------------------------------------------------------------------- */

/* Takes h (connected with CURLOPT_CONNECT_ONLY; owned from here on, cleaned up
 * by the thread) and starts a thread copying between it and a socketpair.
 * *fd gets the caller's end (caller closes; closing it ends the thread).
 * *live (under *lock) counts the threads running (engine_free waits for 0).
 * Returns 0, or -1 with err (SG_E_IO, SG_E_NOMEM; h is cleaned up). */
int docker_pump_start(const struct sg_host_api *host, CURL *h, int *live,
		      pthread_mutex_t *lock, int *fd, struct sg_err *err);

/* ---- sshrelay.c --------------------------------------------------------------------- */

struct docker_relay;

/* The remote host; strings borrowed for docker_relay_new. */
struct docker_relay_target {
	const char *host;
	unsigned port;           /* 22 by default */
	const char *user;        /* NULL: this process's user */
	const char *key;         /* identity file or NULL */
	const char *known_hosts; /* NULL: ~/.ssh/known_hosts */
	const char *policy;      /* "strict" (NULL), "accept-new", "off" */
	unsigned timeout_s;      /* connecting and signing in */
};

/* Makes the private socket (0700 directory under $XDG_RUNTIME_DIR or /tmp)
 * and starts the relay's thread; the SSH connection is made at the first
 * connection to the socket, and dropped when no channel is open for a
 * while and at free.  Returns a relay (free with docker_relay_free) or NULL
 * with err (SG_E_IO, SG_E_NOMEM, SG_E_INVAL for a bad policy). */
struct docker_relay *docker_relay_new(const struct sg_host_api *host,
				      const struct docker_relay_target *t, struct sg_err *err);

/* The socket path (borrowed, the relay's lifetime). */
const char *docker_relay_path(const struct docker_relay *r);

/* Why the relay last dropped a connection it accepted (the SSH connection
 * failed, the host key was refused, the remote docker command failed), into
 * err with its code; cleared as it is read.  Returns true when there was one. */
bool docker_relay_take_error(struct docker_relay *r, struct sg_err *err);

/* Closes every channel (the remote dial-stdio processes end), the SSH
 * connection, the socket and its directory, and stops the thread. */
void docker_relay_free(struct docker_relay *r);

#endif /* SG_DOCKER_REMOTE_H */
