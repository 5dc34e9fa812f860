/*
 * Docker Engine API client: a unix socket, tcp:// (TLS by libcurl, see
 * struct docker_engine_opts) or ssh:// (remote.h: a local relay socket whose
 * connections are libssh2 channels running `docker system dial-stdio`).
 *
 * Ordinary calls go through libcurl with a small mutex-protected pool of easy
 * handles, so keep-alive connections are reused between calls (latency).  The
 * attached exec stream is a raw AF_UNIX socket on which we write the HTTP
 * request ourselves and, after the 101 response, read the multiplexed stream.
 *
 * The API version is negotiated lazily on the first call (GET /version, capped
 * at what this client speaks) and then prefixes every path: creating an
 * engine never touches the network.  All functions are thread-safe.
 */
#ifndef SG_DOCKER_ENGINE_H
#define SG_DOCKER_ENGINE_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include <sandgate/plugin.h>

struct docker_engine;

/* One API request.  All pointers borrowed for the call. */
struct docker_http {
	const char *method;       /* "GET", "POST", "PUT", "DELETE", "HEAD" */
	const char *path;         /* after the version prefix, with its query:
				     "/containers/json?all=1" */
	const void *body;         /* request body, or NULL */
	size_t body_len;
	const char *content_type; /* of body, or NULL */
	size_t max_body;          /* cut the response body past this; 0: 16 MiB */
	unsigned timeout_ms;      /* this request's limit; 0: [docker] api_timeout */
	/* Optional: the response body of a 2xx answer goes to on_body as it
	 * arrives instead of into the reply (streamed answers: build output);
	 * a non-zero return stops the transfer (SG_E_IO). */
	int (*on_body)(const char *p, size_t n, void *ud);
	void *ud;
	/* Optional: the MCP call whose cancellation aborts the request
	 * (SG_E_CANCELLED); NULL: none. */
	struct sg_call *call;
};

/* The answer to one request; release with docker_reply_free(). */
struct docker_reply {
	long status;          /* HTTP status */
	struct sg_buf body;   /* response body (owned, freed by docker_reply_free) */
	char *path_stat;      /* X-Docker-Container-Path-Stat value (malloc'd) or NULL */
	bool body_capped;     /* the body passed max_body and was cut there */
};

/* Where the engine is and how to reach it; strings borrowed for the call. */
struct docker_engine_opts {
	const char *url;          /* [docker] host / DOCKER_HOST: unix:///PATH, /PATH,
				     tcp://HOST[:PORT], ssh://[USER@]HOST[:PORT] */
	unsigned timeout_s;       /* per API call; 0: 60 */
	bool tls_verify;          /* tcp://: TLS, the engine's certificate checked
				     against cert_path/ca.pem ([docker] tls_verify,
				     DOCKER_TLS_VERIFY) */
	const char *cert_path;    /* directory of ca.pem, cert.pem, key.pem; NULL or
				     "": ~/.docker ([docker] cert_path, DOCKER_CERT_PATH) */
	bool allow_plain_tcp;     /* tcp:// without TLS to a host that is not loopback */
	/* ssh://: the identity file ("" or NULL: agent, then ~/.ssh/id_*), the
	 * known_hosts file (NULL: ~/.ssh/known_hosts) and the policy ("strict",
	 * "accept-new", "off"; NULL: strict). */
	const char *ssh_key;
	const char *ssh_known_hosts;
	const char *ssh_policy;
};

/* Parses o->url without connecting.  A remote address that cannot work as
 * configured (plain tcp to another host, a missing ca.pem, an ssh:// without
 * a host) is accepted here but every later call fails with SG_E_INVAL naming
 * the key and the fix, so a bad [docker] host does not stop sandgate's other
 * backends.  Returns NULL (err filled) only when out of memory, when the url
 * is not a docker address at all, or when the ssh relay's local socket
 * cannot be made (SG_E_IO).  Caller frees with docker_engine_free(), which
 * closes every remote connection. */
struct docker_engine *docker_engine_new(const struct sg_host_api *host,
					const struct docker_engine_opts *o,
					struct sg_err *err);
void docker_engine_free(struct docker_engine *e);

/* The endpoint, for messages: the socket path, tcp://H:P or ssh://U@H:P. */
const char *docker_engine_socket(const struct docker_engine *e);

/* Sends one request and fills *rp (always initialised, also on failure).
 * Returns 0 when the daemon answered, whatever the status; -1 (err filled)
 * when it could not be reached: SG_E_UNAVAILABLE (dockerd not running),
 * SG_E_PERM (no access to the socket), SG_E_TIMEOUT, SG_E_IO, SG_E_NOTSUP. */
int docker_engine_call(struct docker_engine *e, const struct docker_http *rq,
		       struct docker_reply *rp, struct sg_err *err);
void docker_reply_free(struct docker_engine *e, struct docker_reply *rp);

/* A JSON request: body (may be NULL) is sent as application/json, the answer
 * parsed into *out (caller's reference; NULL for an empty body).  Returns 0
 * when the daemon answered, with *status set; -1 as docker_engine_call() or
 * when a 2xx answer is not JSON (SG_E_PROTO). */
int docker_engine_json(struct docker_engine *e, const char *method,
		       const char *path, const json_t *body, long *status,
		       json_t **out, struct sg_err *err);

/* Asks the engine for GET /version (unversioned) within timeout_ms, for the
 * probe: *version gets the answer (caller's reference).  Returns 0, or -1
 * with err: SG_E_UNAVAILABLE (not running, or not a docker engine),
 * SG_E_PERM, SG_E_TIMEOUT, SG_E_NOTSUP (an endpoint this client lacks). */
int docker_engine_probe(struct docker_engine *e, unsigned timeout_ms, json_t **version,
			struct sg_err *err);

/* Fills err for an unexpected HTTP status: the daemon's own message (the
 * "message" field of reply, or text) after `what`.  Returns -1. */
int docker_engine_fail(struct docker_engine *e, struct sg_err *err, int code,
		       const char *what, long status, const json_t *reply);

/* The daemon's "message" text in an error reply, or "". */
const char *docker_reply_message(const json_t *reply);

/* Opens an attached (hijacked) stream: POST `path` with the JSON body on a new
 * connection and waits for the 101/200 answer (api timeout).  On success *fd
 * is the connected socket (caller closes) and any stream bytes that came with
 * the answer were appended to *early.  On an HTTP error, returns -1 with
 * *status set and err filled with the daemon's message (SG_E_BACKEND; callers
 * remap by status); on a transport error *status is 0. */
int docker_engine_hijack(struct docker_engine *e, const char *path,
			 const json_t *body, int *fd, struct sg_buf *early,
			 long *status, struct sg_err *err);

/* Sets the deadline (CLOCK_MONOTONIC ms, 0: none) of the calling thread's
 * command: until it is reset, every request of this thread gives up by then
 * when that is sooner than its own limit (a frozen daemon cannot hold a
 * command's timeout off).  Returns the previous deadline, to restore. */
long long docker_engine_deadline(long long at_ms);

/* Percent-encodes s for a query value.  Returns a malloc'd string (caller
 * frees) or NULL when out of memory. */
char *docker_engine_escape(const char *s);

#endif /* SG_DOCKER_ENGINE_H */
