/* JSON-RPC 2.0 framing (https://www.jsonrpc.org/specification, and MCP
 * 2025-11-25 basic/index): classify a parsed message, build responses and
 * errors, serialise one message per line. */
#ifndef SG_CORE_JSONRPC_H
#define SG_CORE_JSONRPC_H

#include <stddef.h>

#include <jansson.h>

/* JSON-RPC 2.0 section 5.1 error codes. */
#define SG_RPC_PARSE_ERROR      (-32700)
#define SG_RPC_INVALID_REQUEST  (-32600)
#define SG_RPC_METHOD_NOT_FOUND (-32601)
#define SG_RPC_INVALID_PARAMS   (-32602)
#define SG_RPC_INTERNAL_ERROR   (-32603)

enum sg_rpc_kind {
	SG_RPC_REQUEST,      /* method and id */
	SG_RPC_NOTIFICATION, /* method, no id */
	SG_RPC_RESPONSE,     /* result or error with an id: a reply to us */
	SG_RPC_INVALID       /* *error_id and *why say what to answer */
};

struct sg_rpc_msg {
	enum sg_rpc_kind kind;
	json_t *id;          /* borrowed from the message, or NULL */
	const char *method;  /* borrowed */
	json_t *params;      /* borrowed, or NULL */
	const char *why;     /* for SG_RPC_INVALID: what is wrong */
};

/* Classifies msg (borrowed).  An id must be a string or an integer (MCP:
 * not null); an invalid message keeps its id when that id is usable, so the
 * error can echo it, else m->id is NULL (answered with id null). */
void sg_rpc_classify(json_t *msg, struct sg_rpc_msg *m);

/* Parses one message.  Returns a new reference, or NULL for invalid JSON
 * (JSON-RPC: answer -32700 with id null). */
json_t *sg_rpc_parse(const char *data, size_t len);

/* The id of a message of which only the first len bytes are at hand (one
 * too large to parse whole): the top-level "id" member when it comes
 * complete within them and is a string or an integer.  Returns a new
 * reference, or NULL (no usable id there: answer with id null). */
json_t *sg_rpc_peek_id(const char *data, size_t len);

/* {"jsonrpc":"2.0","id":id,"result":result}.  id is borrowed (incref'd),
 * result is stolen.  Returns a new reference. */
json_t *sg_rpc_result(json_t *id, json_t *result);

/* {"jsonrpc":"2.0","id":id|null,"error":{"code","message","data"?}}.  id is
 * borrowed and may be NULL; data is stolen and may be NULL. */
json_t *sg_rpc_error(json_t *id, int code, const char *message, json_t *data);

/* {"jsonrpc":"2.0","method":method,"params":params}; params stolen. */
json_t *sg_rpc_notification(const char *method, json_t *params);

/* Compact one-line serialisation (no raw newline can appear: JSON escapes
 * it), with sg_msg_dump()'s placeholders replaced (core/protocol/dump.h).
 * Returns a malloc'd string and its length; caller frees.  A message
 * jansson refuses becomes an internal error with id null. */
char *sg_rpc_dump(const json_t *msg, size_t *len);

struct sg_bytes;
/* The same, with bytes (may be NULL) written where its placeholder is
 * (sg_msg_dump()). */
char *sg_rpc_dump_with(const json_t *msg, const struct sg_bytes *bytes, size_t *len);

/* What is sent instead of a message jansson refuses to serialise. */
#define SG_RPC_CANNOT_SERIALISE \
	"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32603,\"message\":\"cannot serialise the reply\"}}"

/* json_dumps() for large values: the text grows in one buffer by realloc
 * (glibc moves a large block by remapping it, not copying), where jansson's
 * own buffer copies itself at every doubling.  flags as json_dumps().
 * Returns the text (malloc'd, the caller frees) and, when len is not NULL,
 * its length; NULL when jansson refuses the value or memory runs out. */
char *sg_json_dump(const json_t *j, size_t flags, size_t *len);

#endif
