/*
 * MCP over JSON-RPC 2.0: the method table (initialize, ping, tools/list,
 * tools/call, logging/setLevel, notifications/initialized and /cancelled),
 * version negotiation and batches (MCP 2025-11-25 basic/lifecycle, basic/
 * index; batches only on a 2025-03-26 session).
 *
 * Concurrency: everything but tools/call is answered on the caller's thread
 * at once; tools/call runs on its own thread (up to [server] max_calls at a
 * time), so a long run_command never holds up ping or another call.
 */
#ifndef SG_CORE_MCP_H
#define SG_CORE_MCP_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

struct sg_session;

#define SG_MCP_LATEST "2025-11-25"

/* Handles one received message text (a line over stdio, a POST body over
 * HTTP).  Replies go out through the session's transport; `transport_ctx`
 * is stored in each call it starts (HTTP: the request's stream).  Returns
 * the number of responses that will be sent (0 for only notifications or
 * responses: HTTP answers 202).  `data` is parsed before anything else
 * happens, so when the transport's handoff runs the caller's buffer is
 * free to be reused. */
int sg_mcp_handle(struct sg_session *s, const char *data, size_t len, void *transport_ctx);

/* The same for a message whose buffer the transport gives away: a large
 * tool argument is decoded from it once, and its pages are given back to
 * the system as they are read (core/protocol/bulk.h).  The caller must
 * not read data afterwards; it still frees it. */
int sg_mcp_handle_taking(struct sg_session *s, char *data, size_t len, void *transport_ctx);

/* True when `version` is a protocol revision sandgate speaks. */
bool sg_mcp_version_supported(const char *version);



#endif
