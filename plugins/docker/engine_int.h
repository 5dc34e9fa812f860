/*
 * Inside the Engine API client (engine.c and engine_endpoint.c only): the
 * engine's state, and the endpoint setup that engine_endpoint.c keeps apart
 * from the requests (parsing [docker] host / DOCKER_HOST, the TLS files, the
 * ssh relay, and the libcurl options that point a handle there).
 */
#ifndef SG_DOCKER_ENGINE_INT_H
#define SG_DOCKER_ENGINE_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <sys/un.h>

#include <curl/curl.h>

#include "plugins/docker/engine.h"

#define DOCKER_POOL_MAX 8                     /* idle easy handles kept */

enum docker_kind { DOCKER_UNIX, DOCKER_TCP, DOCKER_SSH };

struct docker_engine {
	const struct sg_host_api *host;  /* borrowed, process lifetime */
	enum docker_kind kind;
	char sock[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* unix://, ssh://'s relay */
	char where[320];                 /* the endpoint for messages */
	char base[300];                  /* tcp://: "https://H:P" or "http://H:P" */
	bool tls;
	char ca[4096], cert[4096], key[4096]; /* tcp:// with TLS; cert/key "" when absent */
	char *unusable;                  /* why every call fails (owned), or NULL */
	struct docker_relay *relay;      /* ssh:// (owned) */
	int pumps;                       /* tlspump threads alive (under lock) */
	long timeout_s;                  /* per API call */

	pthread_mutex_t lock;            /* guards everything below */
	CURL *idle[DOCKER_POOL_MAX];     /* reusable handles with live connections */
	size_t n_idle;
	char api[16];                    /* negotiated "1.41", "" until then */
	bool curl_started;               /* curl_global_init() done (ended in free) */
};

/* Fills e's endpoint (kind, sock, where, base, tls files, relay) from o->url
 * (NULL or "": unix:///var/run/docker.sock); e->host and e->timeout_s are
 * set.  A remote address that cannot work as configured only sets
 * e->unusable (see docker_engine_new).  Returns 0, or -1 with err:
 * SG_E_INVAL (not a docker address, a bad socket path), SG_E_NOMEM, or the
 * relay's error (SG_E_IO).  What it made is freed by docker_engine_free. */
int docker_endpoint_setup(struct docker_engine *e, const struct docker_engine_opts *o,
			  struct sg_err *err);

/* Points libcurl handle h at e's endpoint: the unix socket (or the ssh
 * relay's), or tcp with e's TLS files. */
void docker_transport_opts(struct docker_engine *e, CURL *h);

#endif /* SG_DOCKER_ENGINE_INT_H */
