/*
 * fc.so's HTTP transport on libcurl.
 *
 * Every request runs on a pooled {multi, easy} pair so keep-alive
 * connections are reused between calls (latency: one tool call is one or two
 * requests), and waits in curl_multi_poll() beside the call's cancel fd, so
 * an MCP cancellation ends any request at once.
 *
 * Retry policy (one place): only requests marked idempotent are re-sent, on
 * 429 with a Retry-After within [fc] retry_after_max, on 502 and 503 with
 * backoff, and on transport failures other than a timeout.  A request that
 * is not idempotent (create, file write, process start, /execute) is re-sent
 * only when the connection could not be made at all, so its body never went
 * out.  A data-plane request that gets 502 or no connection first asks the
 * platform whether the sandbox still exists (ref. 4.1, 6: E2B maps 502 to
 * "sandbox timed out"), so an expired sandbox is SG_E_GONE at once.
 */
#ifndef SG_FC_HTTP_H
#define SG_FC_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include <curl/curl.h>

#include "plugins/fc/fc.h"

/* One request.  All pointers borrowed for the call. */
struct fc_req {
	const char *what;          /* for messages: "create sandbox" */
	const char *method;        /* "GET", "POST", "DELETE" */
	const char *url;
	struct curl_slist *headers;
	const void *body;          /* POST body, or NULL */
	size_t body_len;
	curl_mime *mime;           /* multipart POST body instead of body */
	unsigned timeout_ms;       /* the whole request; 0: none */
	size_t max_body;           /* response body cap; 0: FC_MAX_JSON_BODY */
	bool idempotent;           /* may be re-sent (see above) */
	bool once;                 /* never re-sent, whatever happens (a probe
				      that must end within its timeout) */
	/* Streaming: response body bytes go here instead of the buffer; return
	 * -1 to stop the transfer (the answer then counts as received). */
	int (*on_data)(void *ud, const char *p, size_t n);
	/* Called about once a second while waiting, with the seconds waited. */
	void (*tick)(void *ud, double elapsed_s);
	void *ud;
	const char *gone_id;       /* data-plane request of this sandbox, or NULL */
	const char *secret;        /* a token to keep out of messages, or NULL */
	struct sg_call *call;      /* cancellation, or NULL */
	int abort_fd;              /* readable ends the request (SG_E_CANCELLED); -1 none */
};

/* The answer.  Initialise with {0}; release with fc_resp_free(). */
struct fc_resp {
	long status;               /* HTTP status, 0 when none came */
	struct sg_buf body;        /* the body, unless streamed */
	char content_type[96];
	long retry_after_s;        /* delta-seconds Retry-After, -1 when absent */
	bool capped;               /* the body passed max_body: transfer stopped */
	bool stopped;              /* on_data asked to stop */
};

struct fc_http *fc_http_new(const struct sg_host_api *host);
void fc_http_free(struct fc_http *h);

/* Sends rq with the retry policy above.  Returns 0 when the server answered
 * (any status: rp holds the last answer); -1 with err filled when it did not:
 * SG_E_CANCELLED, SG_E_TIMEOUT, SG_E_UNAVAILABLE (no connection), SG_E_IO
 * (the connection broke; rp->status may be set when a stream broke),
 * SG_E_GONE (gone_id vanished). */
int fc_http_request(struct fc_ctx *ctx, const struct fc_req *rq, struct fc_resp *rp,
		    struct sg_err *err);

void fc_resp_free(struct fc_ctx *ctx, struct fc_resp *rp);

/* Fills err for an unexpected answer: "fc: <what>: HTTP <status>: <server's
 * message>", the code mapped from the status, secrets scrubbed, and for a
 * 401 or 403 what to do.  secret: NULL for the platform API (the hint names
 * [fc] api_key), else the sandbox's access token (a sandbox daemon's
 * refusal, which no API key fixes).  Returns -1. */
int fc_http_fail(struct fc_ctx *ctx, struct sg_err *err, const char *what,
		 const struct fc_resp *rp, const char *secret);

/* The server's message in an error body: JSON "message"/"Message", or the
 * text's first line, at most size-1 bytes, control characters dropped. */
void fc_http_message(const struct fc_resp *rp, char *out, size_t size);

/* Replaces each occurrence of the API key and of secret (may be NULL) in msg
 * with "[redacted]", in place. */
void fc_scrub(const struct fc_ctx *ctx, char *msg, size_t size, const char *secret);

/* Appends a printf-formatted header.  Returns 0, or -1 (list unchanged) when
 * out of memory. */
int fc_hdr_add(struct curl_slist **list, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Headers of a platform request (ref. 2.1): both key headers, JSON accept,
 * and the JSON content type when json_body.  NULL when out of memory or no
 * API key (err filled).  Caller frees with curl_slist_free_all(). */
struct curl_slist *fc_platform_headers(struct fc_ctx *ctx, bool json_body,
				       struct sg_err *err);

/* Headers of a data-plane request (ref. 3.1): access token, sandbox id and
 * port, optional Basic user, and content_type when not NULL. */
struct curl_slist *fc_envd_headers(const struct fc_machine *fm, int port,
				   const char *content_type, struct sg_err *err);

/* Percent-encodes s for a query value.  malloc'd, NULL when out of memory. */
char *fc_url_escape(const char *s);

/* Waits ms milliseconds or until call is cancelled (then -1). */
int fc_sleep(struct fc_ctx *ctx, struct sg_call *call, long ms);

#endif /* SG_FC_HTTP_H */
