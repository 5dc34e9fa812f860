/*
 * The checks of one Streamable HTTP request that need only its method, path
 * and headers (transports/http.c runs them; doc/http.md is the operator's
 * view).  Free of libmicrohttpd and of the session table, so the unit test
 * (t/unit/test_http_check.c) and the fuzzer (t/fuzz/fuzz_http.c) drive them
 * directly.
 *
 *  - Host and Origin are parsed whole (RFC 9110 7.2 and RFC 3986 3.2.2:
 *    reg-name, IPv4 or [IPv6], optional port; RFC 6454 7: scheme "://"
 *    host [":" port] and nothing else) and their host compared whole with
 *    [server] allowed_hosts: a name that only begins with an allowed host
 *    ("[::1].evil.com", "127.0.0.1.evil.com") is another host.
 *  - a header that may appear once (Host, Origin, Content-Length, ...) and
 *    came twice, a Content-Length that is not digits, or one beside
 *    Transfer-Encoding, is a 400 (RFC 9112 6.3: two readings of one body's
 *    length are how requests are smuggled).
 *  - bearer tokens (RFC 6750) are compared by SHA-256 digest in constant
 *    time: the timing says nothing about which token or how much of it
 *    matched.
 *  - Mcp-Session-Id and Last-Event-ID syntax, Accept and Content-Type.
 *
 * Nothing here allocates except sg_http_allow_parse(); every result is in a
 * caller-owned struct.
 */
#ifndef SG_TRANSPORTS_HTTP_CHECK_H
#define SG_TRANSPORTS_HTTP_CHECK_H

#include <stdbool.h>
#include <stddef.h>

#include <sandgate/plugin.h>

#define SG_HTTP_PATH "/mcp"
#define SG_HTTP_HOST_MAX 255     /* RFC 1035: a DNS name is at most 255 bytes */
#define SG_HTTP_DIGEST 32        /* SHA-256 */
#define SG_HTTP_SESSION_ID_LEN 64

/* ---- hosts ----------------------------------------------------------------- */

/* One parsed host.  name is lower-case; an IPv6 literal keeps its brackets
 * there and its 16 bytes in v6, which is what is compared ("[::1]" and
 * "[0:0::1]" are one host). */
struct sg_http_host {
	char name[SG_HTTP_HOST_MAX + 1];
	bool is_v6;
	unsigned char v6[16];
	int port;                /* 0..65535, or -1 when none was given */
};

/* Parses s[0..len), a Host header value: host [":" port] where host is a
 * DNS name or IPv4 address (letters, digits, '-', '.', '_', '~') or an IPv6
 * address in brackets, and port 1 to 5 digits up to 65535.  Anything
 * before, between or after those parts makes it invalid.  Returns 0 and
 * fills *out, or -1. */
int sg_http_parse_host(const char *s, size_t len, struct sg_http_host *out);

/* Parses an Origin header value (RFC 6454 7): scheme "://" host [":" port]
 * with nothing after (no path, no user info); the scheme is letters, digits,
 * '+', '-', '.', starting with a letter.  "null" and anything else invalid
 * give -1.  Returns 0 and fills *out (the host; the scheme is not kept). */
int sg_http_parse_origin(const char *s, struct sg_http_host *out);

/* [server] allowed_hosts: hosts compared whole, ports ignored. */
struct sg_http_allow {
	bool any;                   /* "*": every host */
	struct sg_http_host *hosts; /* owned; freed by sg_http_allow_free() */
	size_t n;
};

/* Parses a comma-separated list (blanks around entries ignored, empty
 * entries skipped); each entry is a Host value ("localhost:8010" allows
 * "localhost" on any port), "*" allows any host.  Returns 0, or -1 with err
 * naming the entry that is not a host.  *out is the caller's to free. */
int sg_http_allow_parse(const char *list, struct sg_http_allow *out, struct sg_err *err);
void sg_http_allow_free(struct sg_http_allow *a);

/* True when h is one of a's hosts (or a allows any). */
bool sg_http_allowed(const struct sg_http_allow *a, const struct sg_http_host *h);

/* DNS-rebinding protection (MCP basic/transports "Security Warning"): host
 * and origin are the header values or NULL when absent (a request without
 * Origin is not from a browser page).  Returns NULL when both are allowed,
 * else the message for the 403. */
const char *sg_http_check_host_origin(const struct sg_http_allow *a, const char *host,
				      const char *origin);

/* ---- requests -------------------------------------------------------------- */

enum sg_http_kind { SG_HTTP_POST, SG_HTTP_GET, SG_HTTP_DELETE };

/* What a request carries, all borrowed (NULL when absent).  Fill it with
 * sg_http_req_header() once per header field as received. */
struct sg_http_req {
	const char *method;
	const char *path;
	const char *host, *origin, *authorization, *session_id, *protocol_version;
	const char *accept, *content_type, *content_length, *transfer_encoding;
	const char *last_event_id;
	const char *repeated;       /* a single-valued header that came twice */
};

/* Records one header field (name case-insensitive); the first of a repeated
 * list-valued field (Accept, Transfer-Encoding) is kept, a repeated
 * single-valued one is noted in r->repeated. */
void sg_http_req_header(struct sg_http_req *r, const char *name, const char *value);

/* What the server enforces, borrowed. */
struct sg_http_policy {
	const struct sg_http_allow *allow;
	const unsigned char (*tokens)[SG_HTTP_DIGEST]; /* digests; none: no authentication */
	size_t n_tokens;
	const char *local_owner;    /* owner of unauthenticated requests, and of
				       authenticated ones when tokens_local */
	bool tokens_local;          /* the tokens stand for the local user (a
				       generated token): owner local_owner */
	size_t max_body;            /* [server] max_message_bytes */
	bool stopping;              /* shutting down: 503 */
};

/* The outcome of the checks so far. */
struct sg_http_verdict {
	unsigned status;            /* 0, or the HTTP status to answer */
	char why[200];              /* the message for status */
	bool reply_now;             /* answer before reading the body (and close) */
	bool bad_token;             /* 401 for a wrong token, not a missing one */
	enum sg_http_kind kind;
	char owner[96];             /* credential key once authenticated */
	bool want_json, want_sse;   /* from Accept, after sg_http_check_message() */
};

/* Where and who, in this order: path (404), method (405), header framing
 * (400: repeated single header, bad Content-Length, Content-Length with
 * Transfer-Encoding), Host and Origin (403), bearer token (401), shutdown
 * (503), MCP-Protocol-Version (400).  Returns 0, or -1 with v->status. */
int sg_http_check_access(const struct sg_http_policy *p, const struct sg_http_req *r,
			 struct sg_http_verdict *v);

/* What is sent, after the session was found: Accept (406; a GET needs
 * text/event-stream), and for a POST Content-Type (415) and
 * Content-Length (413, with reply_now).  Returns 0, or -1 with v->status. */
int sg_http_check_message(const struct sg_http_policy *p, const struct sg_http_req *r,
			  struct sg_http_verdict *v);

/* Records status and a message in v unless an earlier one is there.
 * Returns -1. */
int sg_http_fail(struct sg_http_verdict *v, unsigned status, const char *fmt, ...) SG_PRINTF(3, 4);

/* Bearer authentication (RFC 6750 2.1) of an Authorization value (or NULL)
 * against p's token digests.  Fills owner ("token:" and 16 hex digits of
 * the token's digest, the same for every session of one credential; or
 * p->local_owner when no token is configured).  Returns 0; -1 with
 * *bad_token false when no bearer token was sent, true when it is wrong. */
int sg_http_authenticate(const struct sg_http_policy *p, const char *authorization,
			 char owner[96], bool *bad_token);

/* True when id has the form of a session id sandgate gives out: 64
 * lower-case hex digits. */
bool sg_http_session_id_valid(const char *id);

/* Parses a Last-Event-ID of sandgate's form "STREAM-SEQ" (decimal, no sign
 * or blank, each at most 4294967295).  Returns 0, or -1. */
int sg_http_event_id_parse(const char *s, unsigned *stream, unsigned *seq);

/* True when body[0..len) is a JSON object that is an initialize request
 * (a method "initialize" and an id): only that starts a session. */
bool sg_http_body_is_initialize(const char *body, size_t len);

#endif
