/*
 * Fuzz target: JSON-RPC 2.0 framing (core/protocol/jsonrpc.c).  The input is one
 * message text: parsed, classified, and answered the way core/server/mcp.c does
 * (an error echoing a usable id, a result), every answer serialised.
 *
 * Also the id read from the first bytes of a message too large to parse
 * (sg_rpc_peek_id), from the input and from the parsed message written
 * out again.
 *
 * Invariants: a message classified as a request or notification has a
 * string method and object/array params; a request's id is a string or an
 * integer; an invalid one says why; every serialised answer is one line of
 * JSON that parses back to an object with "jsonrpc": "2.0" and the same id;
 * a peeked id is a string or an integer, and a whole object's is its id.
 */
#include "config.h"

#include <string.h>

#include <jansson.h>

#include "core/protocol/jsonrpc.h"
#include "t/fuzz/fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

/* The dump of msg (stolen) is one line, parses back, keeps id. */
static void check_dump(json_t *msg, json_t *id)
{
	size_t len;
	char *text = sg_rpc_dump(msg, &len);
	json_t *back;

	FUZZ_ASSERT(text && strlen(text) == len);
	FUZZ_ASSERT(!memchr(text, '\n', len) && !memchr(text, '\r', len));
	back = sg_rpc_parse(text, len);
	FUZZ_ASSERT(json_is_object(back));
	FUZZ_ASSERT(!strcmp(json_string_value(json_object_get(back, "jsonrpc")), "2.0"));
	if (id)
		FUZZ_ASSERT(json_equal(json_object_get(back, "id"), id));
	else
		FUZZ_ASSERT(json_is_null(json_object_get(back, "id")));
	json_decref(back);
	free(text);
	json_decref(msg);
}

static void one(json_t *msg)
{
	struct sg_rpc_msg m;

	sg_rpc_classify(msg, &m);
	if (m.id)
		FUZZ_ASSERT(json_is_string(m.id) || json_is_integer(m.id));
	switch (m.kind) {
	case SG_RPC_REQUEST:
	case SG_RPC_NOTIFICATION:
		FUZZ_ASSERT(m.method && !m.why);
		FUZZ_ASSERT(!m.params || json_is_object(m.params) || json_is_array(m.params));
		FUZZ_ASSERT((m.kind == SG_RPC_REQUEST) == (m.id != NULL));
		check_dump(sg_rpc_result(m.id, json_pack("{s:s}", "method", m.method)), m.id);
		check_dump(sg_rpc_error(m.id, SG_RPC_METHOD_NOT_FOUND, m.method, json_incref(m.params)), m.id);
		break;
	case SG_RPC_INVALID:
		FUZZ_ASSERT(m.why);
		check_dump(sg_rpc_error(m.id, SG_RPC_INVALID_REQUEST, m.why, NULL), m.id);
		break;
	case SG_RPC_RESPONSE:
		break;
	}
}

/* The id read from a message's first bytes: a usable one or none, from
 * any prefix; from a whole serialised object, its own id. */
static void check_peek(const char *data, size_t size, json_t *msg)
{
	json_t *id = sg_rpc_peek_id(data, size), *want;
	char *text;

	FUZZ_ASSERT(!id || json_is_string(id) || json_is_integer(id));
	json_decref(id);
	if (!json_is_object(msg))
		return;
	text = json_dumps(msg, JSON_COMPACT);
	if (!text)
		return;
	want = json_object_get(msg, "id");
	id = sg_rpc_peek_id(text, strlen(text));
	if (json_is_string(want) || json_is_integer(want))
		FUZZ_ASSERT(id && json_equal(id, want));
	else
		FUZZ_ASSERT(!id);
	json_decref(id);
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *msg = sg_rpc_parse((const char *)data, size);
	size_t i;
	json_t *v;

	check_peek((const char *)data, size, msg);
	if (!msg) {
		check_dump(sg_rpc_error(NULL, SG_RPC_PARSE_ERROR, "parse error", NULL), NULL);
		return 0;
	}
	if (json_is_array(msg))
		json_array_foreach(msg, i, v)
			one(v);
	else
		one(msg);
	json_decref(msg);
	return 0;
}
