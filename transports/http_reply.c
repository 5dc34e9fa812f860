/*
 * HTTP replies: making a response and queueing it (transports/http.c).
 * Responses are queued with no hsess lock held (see the lock order in
 * transports/http.c).
 */
#include "config.h"

#include <stdlib.h>

#include <jansson.h>
#include <microhttpd.h>

#include "core/base/log.h"
#include "core/protocol/jsonrpc.h"

#include "transports/http_internal.h"

enum MHD_Result http_queue(struct req *r, unsigned status, struct MHD_Response *resp)
{
	enum MHD_Result ret;

	if (!resp)
		return MHD_NO;
	r->responded = true;
	http_conn_whole(r->conn); /* answered: its deadline no longer runs */
	ret = MHD_queue_response(r->conn, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* Responses are made by the *_response() functions and queued by http_queue(),
 * never while an hsess lock is held (see the lock order above). */

/* body (taken: freed by MHD) as application/json. */
struct MHD_Response *http_json_response(char *body, size_t len, const char *session_id)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);

	if (!resp) {
		free(body);
		return NULL;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	if (session_id)
		MHD_add_response_header(resp, HDR_SESSION, session_id);
	return resp;
}

struct MHD_Response *http_empty_response(void)
{
	return MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
}

/* An HTTP error with a JSON-RPC error body without id (MCP basic/transports:
 * "the HTTP response body MAY comprise a JSON-RPC error response that has
 * no id"); -32001 is what the SDKs use for an unknown session. */
struct MHD_Response *http_error_response(const struct req *r, unsigned status, const char *msg)
{
	json_t *j = json_pack("{s:s, s:n, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", "error", "code",
			      status == MHD_HTTP_NOT_FOUND ? -32001 : -32000,
			      "message", msg);
	size_t len;
	char *body = sg_rpc_dump(j, &len);
	struct MHD_Response *resp;

	json_decref(j);
	resp = http_json_response(body, len, NULL);
	if (!resp)
		return NULL;
	if (status == MHD_HTTP_UNAUTHORIZED)
		/* RFC 6750 section 3. */
		MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
					r->v.bad_token ? "Bearer realm=\"sandgate\", error=\"invalid_token\""
						     : "Bearer realm=\"sandgate\"");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, POST, DELETE");
	if (status == MHD_HTTP_SERVICE_UNAVAILABLE)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "5");
	SG_DEBUG("http: %u %s", status, msg);
	return resp;
}

enum MHD_Result http_reply_json(struct req *r, unsigned status, char *body, size_t len,
				  const char *session_id)
{
	return http_queue(r, status, http_json_response(body, len, session_id));
}

enum MHD_Result http_reply_empty(struct req *r, unsigned status)
{
	return http_queue(r, status, http_empty_response());
}

enum MHD_Result http_reply_error(struct req *r, unsigned status, const char *msg)
{
	return http_queue(r, status, http_error_response(r, status, msg));
}
