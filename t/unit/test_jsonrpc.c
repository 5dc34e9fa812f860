/*
 * Unit tests for JSON-RPC 2.0 framing (core/protocol/jsonrpc.c) and the MCP method
 * dispatch on top of it (core/server/mcp.c), through a fake transport that keeps
 * every line a session sends.
 *
 * Replies are compared as the exact serialised text, so an id comes back
 * with the same JSON type and value it was sent with (42 stays 42, "42"
 * stays "42").  Everything here is answered synchronously except tools/call,
 * which runs on its own thread: those tests wait with sg_exec_drain().
 */
#include "config.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/protocol/jsonrpc.h"
#include "core/server/exec.h"
#include "core/server/mcp.h"
#include "core/protocol/session.h"
#include "core/tools/registry.h"

/* ---- a transport that records ------------------------------------------- */

#define MAX_LINES 32

struct capture {
	pthread_mutex_t lock;
	char *lines[MAX_LINES];
	bool final[MAX_LINES];
	int n;
	int bad; /* sends with a raw newline, a wrong length or too many */
};

static void cap_send(void *ctx, struct sg_call *call, const char *data, size_t len, bool final)
{
	struct capture *c = ctx;

	(void)call;
	pthread_mutex_lock(&c->lock);
	if (memchr(data, '\n', len) || memchr(data, '\r', len) || strlen(data) != len ||
	    c->n == MAX_LINES) {
		c->bad++;
	} else {
		c->lines[c->n] = strndup(data, len);
		c->final[c->n] = final;
		c->n++;
	}
	pthread_mutex_unlock(&c->lock);
}

static const struct sg_transport_ops cap_ops = { .name = "test", .send = cap_send };

struct fixture {
	struct capture cap;
	struct sg_session *s;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	pthread_mutex_init(&f->cap.lock, NULL);
	f->s = sg_session_new(&cap_ops, &f->cap, "local:test");
	*state = f;
	return 0;
}

static void cap_clear(struct capture *c)
{
	pthread_mutex_lock(&c->lock);
	for (int i = 0; i < c->n; i++)
		free(c->lines[i]);
	c->n = 0;
	pthread_mutex_unlock(&c->lock);
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	sg_exec_drain();
	sg_session_unref(f->s);
	cap_clear(&f->cap);
	pthread_mutex_destroy(&f->cap.lock);
	free(f);
	return 0;
}

static int group_setup(void **state)
{
	(void)state;
	sg_tools_init();
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	sg_tools_fini();
	return 0;
}

/* Sends text, expects `replies` as the return value and `lines` lines sent;
 * returns the last line (or NULL).  Clears earlier lines first. */
static const char *roundtrip(struct fixture *f, const char *text, int replies, int lines)
{
	cap_clear(&f->cap);
	assert_int_equal(sg_mcp_handle(f->s, text, strlen(text), NULL), replies);
	sg_exec_drain();
	assert_int_equal(f->cap.bad, 0);
	assert_int_equal(f->cap.n, lines);
	for (int i = 0; i < f->cap.n; i++)
		assert_true(f->cap.final[i]);
	return f->cap.n ? f->cap.lines[f->cap.n - 1] : NULL;
}

/* Sends text and asserts the one reply is exactly `want`. */
static void expect_reply(struct fixture *f, const char *text, const char *want)
{
	assert_string_equal(roundtrip(f, text, 1, 1), want);
}

/* The exact error line for id (JSON text), code and message. */
static const char *error_line(const char *id, int code, const char *message)
{
	static char buf[2048];
	json_t *m = json_string(message);
	char *mt = json_dumps(m, JSON_ENCODE_ANY | JSON_COMPACT);

	snprintf(buf, sizeof(buf), "{\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":%d,\"message\":%s}}",
		 id, code, mt);
	free(mt);
	json_decref(m);
	return buf;
}

static void expect_error(struct fixture *f, const char *text, const char *id, int code,
			 const char *message)
{
	expect_reply(f, text, error_line(id, code, message));
}

static void initialize(struct fixture *f, const char *version)
{
	char text[512];
	const char *line;
	json_t *r;

	snprintf(text, sizeof(text),
		 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"
		 "{\"protocolVersion\":\"%s\",\"capabilities\":{},"
		 "\"clientInfo\":{\"name\":\"test_jsonrpc\",\"version\":\"0\"}}}",
		 version);
	line = roundtrip(f, text, 1, 1);
	r = json_loads(line, 0, NULL);
	assert_non_null(r);
	assert_int_equal(json_integer_value(json_object_get(r, "id")), 1);
	json_decref(r);
	cap_clear(&f->cap);
}

/* ---- framing: sg_rpc_* --------------------------------------------------- */

static void classify_text(const char *text, struct sg_rpc_msg *m, json_t **keep)
{
	*keep = sg_rpc_parse(text, strlen(text));
	assert_non_null(*keep);
	sg_rpc_classify(*keep, m);
}

static void test_classify(void **state)
{
	struct sg_rpc_msg m;
	json_t *j;

	(void)state;
	classify_text("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\",\"params\":{}}", &m, &j);
	assert_int_equal(m.kind, SG_RPC_REQUEST);
	assert_int_equal(json_integer_value(m.id), 7);
	assert_string_equal(m.method, "ping");
	assert_true(json_is_object(m.params));
	assert_null(m.why);
	json_decref(j);

	classify_text("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &m, &j);
	assert_int_equal(m.kind, SG_RPC_NOTIFICATION);
	assert_null(m.id);
	assert_string_equal(m.method, "notifications/initialized");
	assert_null(m.params);
	json_decref(j);

	classify_text("{\"jsonrpc\":\"2.0\",\"id\":\"r1\",\"result\":{}}", &m, &j);
	assert_int_equal(m.kind, SG_RPC_RESPONSE);
	assert_string_equal(json_string_value(m.id), "r1");
	json_decref(j);

	classify_text("{\"jsonrpc\":\"2.0\",\"id\":8,\"error\":{\"code\":1,\"message\":\"x\"}}", &m, &j);
	assert_int_equal(m.kind, SG_RPC_RESPONSE);
	json_decref(j);

	/* Invalid, keeping a usable id. */
	classify_text("{\"jsonrpc\":\"1.0\",\"id\":\"k\",\"method\":\"ping\"}", &m, &j);
	assert_int_equal(m.kind, SG_RPC_INVALID);
	assert_string_equal(json_string_value(m.id), "k");
	assert_string_equal(m.why, "\"jsonrpc\" must be \"2.0\"");
	json_decref(j);

	/* Invalid, with an id that cannot be echoed. */
	classify_text("{\"jsonrpc\":\"2.0\",\"id\":2.5,\"method\":\"ping\"}", &m, &j);
	assert_int_equal(m.kind, SG_RPC_INVALID);
	assert_null(m.id);
	assert_string_equal(m.why, "\"id\" must be a string or an integer");
	json_decref(j);

	classify_text("[1]", &m, &j);
	assert_int_equal(m.kind, SG_RPC_INVALID);
	assert_string_equal(m.why, "a message must be a JSON object");
	json_decref(j);

	assert_null(sg_rpc_parse("{\"a\":", 5));
	assert_null(sg_rpc_parse("", 0));
	/* Length-delimited: bytes past len are not read. */
	j = sg_rpc_parse("{\"a\":1}garbage", 7);
	assert_non_null(j);
	json_decref(j);
}

static void test_builders_and_dump(void **state)
{
	json_t *id = json_string("a\nb");
	json_t *msg;
	char *text;
	size_t len;

	(void)state;
	/* no message (a json_pack that failed, as sg_rpc_result(NULL, ...)):
	 * the internal error, here before any tool result has made the text
	 * placeholder, and in test_dump_pieces after */
	text = sg_rpc_dump(NULL, &len);
	assert_string_equal(text, SG_RPC_CANNOT_SERIALISE);
	free(text);
	msg = sg_rpc_result(id, json_string("line1\nline2\r\n\tend \x01"));
	text = sg_rpc_dump(msg, &len);
	assert_int_equal(len, strlen(text));
	assert_null(memchr(text, '\n', len));
	assert_null(memchr(text, '\r', len));
	assert_string_equal(text,
			    "{\"jsonrpc\":\"2.0\",\"id\":\"a\\nb\",\"result\":\"line1\\nline2\\r\\n\\tend \\u0001\"}");
	free(text);
	json_decref(msg);
	assert_int_equal(id->refcount, 1); /* borrowed, not stolen */

	msg = sg_rpc_error(id, SG_RPC_INVALID_PARAMS, "bad\nfield", json_pack("{s:s}", "field", "x\ny"));
	text = sg_rpc_dump(msg, &len);
	assert_null(memchr(text, '\n', len));
	assert_string_equal(text,
			    "{\"jsonrpc\":\"2.0\",\"id\":\"a\\nb\",\"error\":{\"code\":-32602,"
			    "\"message\":\"bad\\nfield\",\"data\":{\"field\":\"x\\ny\"}}}");
	free(text);
	json_decref(msg);

	msg = sg_rpc_error(NULL, SG_RPC_PARSE_ERROR, "p", NULL);
	text = sg_rpc_dump(msg, &len);
	assert_string_equal(text, "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"p\"}}");
	free(text);
	json_decref(msg);

	msg = sg_rpc_notification("notifications/message",
				  json_pack("{s:s, s:s}", "level", "info", "data", "two\nlines"));
	text = sg_rpc_dump(msg, &len);
	assert_string_equal(text,
			    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\","
			    "\"params\":{\"level\":\"info\",\"data\":\"two\\nlines\"}}");
	free(text);
	json_decref(msg);

	msg = sg_rpc_notification("notifications/initialized", NULL);
	text = sg_rpc_dump(msg, &len);
	assert_string_equal(text, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
	free(text);
	json_decref(msg);
	json_decref(id);
}

/* The id of a message from its first bytes only (stdio: a line over
 * [server] max_message_bytes gets one error with it). */
static void peek_is(const char *text, const char *want)
{
	json_t *id = sg_rpc_peek_id(text, strlen(text));
	char *got = id ? json_dumps(id, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;

	if (!want) {
		if (got)
			fail_msg("'%s': peeked %s, want none", text, got);
	} else if (!got || strcmp(got, want)) {
		fail_msg("'%s': peeked %s, want %s", text, got ? got : "none", want);
	}
	free(got);
	json_decref(id);
}

static void test_peek_id(void **state)
{
	(void)state;
	peek_is("{\"jsonrpc\":\"2.0\",\"id\":4242,\"method\":\"ping\",\"params\":{\"pad\":\"xxxx", "4242");
	peek_is(" {\n \"id\" : \"a\\\"b\" , \"method\"", "\"a\\\"b\"");
	/* after other members, nested ones skipped (their "id" is not it) */
	peek_is("{\"params\":{\"id\":1,\"x\":[1,{\"id\":2},\"]}\"]},\"id\":3,", "3");
	peek_is("{\"\\u0069d\":7,", "7");
	peek_is("{\"jsonrpc\":\"2.0\",\"id\":-9223372036854775808}", "-9223372036854775808");
	/* not there, cut, or not usable */
	peek_is("{\"method\":\"ping\",\"params\":{\"pad\":\"xx", NULL);
	peek_is("{\"id\":42", NULL);           /* 42 may go on: 4242... */
	peek_is("{\"id\":\"abc", NULL);
	peek_is("{\"id\":1.5,", NULL);
	peek_is("{\"id\":null,", NULL);
	peek_is("{\"id\":true,", NULL);
	peek_is("{\"id\":[1],", NULL);
	peek_is("{\"id\":99999999999999999999,", NULL);
	peek_is("[{\"id\":1}]", NULL);
	peek_is("{\"i\\", NULL);
	peek_is("", NULL);
	peek_is("{}", NULL);
	peek_is("{\"a\" 1, \"id\": 2}", NULL);
}

/* ---- ids ------------------------------------------------------------------ */

static void test_ids_echoed(void **state)
{
	static const char *const ids[] = {
		"42", "\"req-abc\"", "0", "-1", "9007199254740991", "-9007199254740991",
		"9223372036854775807", "\"\"", "\"42\"", "\"a\\\"b\\\\c\\u00e9\"",
	};
	struct fixture *f = *state;
	char text[256], want[256];

	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		snprintf(text, sizeof(text), "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"ping\"}", ids[i]);
		snprintf(want, sizeof(want), "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{}}",
			 strcmp(ids[i], "\"a\\\"b\\\\c\\u00e9\"") ? ids[i] : "\"a\\\"b\\\\c\xc3\xa9\"");
		expect_reply(f, text, want);
	}
	/* Errors echo the id the same way. */
	expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":\"req-abc\",\"method\":\"nope\"}", "\"req-abc\"",
		     SG_RPC_METHOD_NOT_FOUND, "method not found: 'nope'");
	expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":9007199254740991,\"method\":\"nope\"}",
		     "9007199254740991", SG_RPC_METHOD_NOT_FOUND, "method not found: 'nope'");
}

static void test_bad_ids(void **state)
{
	struct fixture *f = *state;

	expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}", "null",
		     SG_RPC_INVALID_REQUEST, "\"id\" must not be null: use a string or an integer");
	expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", "null",
		     SG_RPC_INVALID_REQUEST, "\"id\" must be a string or an integer");
	expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":1.0,\"method\":\"ping\"}", "null",
		     SG_RPC_INVALID_REQUEST, "\"id\" must be a string or an integer");
	expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"ping\"}", "null",
		     SG_RPC_INVALID_REQUEST, "\"id\" must be a string or an integer");
	expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":[1],\"method\":\"ping\"}", "null",
		     SG_RPC_INVALID_REQUEST, "\"id\" must be a string or an integer");
	expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}", "null",
		     SG_RPC_INVALID_REQUEST, "\"id\" must be a string or an integer");
}

/* ---- invalid requests ------------------------------------------------------- */

static void test_invalid_requests(void **state)
{
	struct fixture *f = *state;

	expect_error(f, "{\"id\":7,\"method\":\"ping\"}", "7", SG_RPC_INVALID_REQUEST,
		     "\"jsonrpc\" must be \"2.0\"");
	expect_error(f, "{\"jsonrpc\":\"1.0\",\"id\":7,\"method\":\"ping\"}", "7",
		     SG_RPC_INVALID_REQUEST, "\"jsonrpc\" must be \"2.0\"");
	expect_error(f, "{\"jsonrpc\":2.0,\"id\":\"x\",\"method\":\"ping\"}", "\"x\"",
		     SG_RPC_INVALID_REQUEST, "\"jsonrpc\" must be \"2.0\"");
	expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":5}", "3", SG_RPC_INVALID_REQUEST,
		     "\"method\" must be a string");
	expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":null}", "3", SG_RPC_INVALID_REQUEST,
		     "\"method\" must be a string");
	expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":3}", "3", SG_RPC_INVALID_REQUEST,
		     "\"method\" is missing");
	expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\",\"params\":\"x\"}", "3",
		     SG_RPC_INVALID_REQUEST, "\"params\" must be an object or an array");
	/* Without an id it cannot be a request: still answered, with id null. */
	expect_error(f, "{\"jsonrpc\":\"2.0\",\"method\":5}", "null", SG_RPC_INVALID_REQUEST,
		     "\"method\" must be a string");
	expect_error(f, "5", "null", SG_RPC_INVALID_REQUEST, "a message must be a JSON object");
	expect_error(f, "\"ping\"", "null", SG_RPC_INVALID_REQUEST, "a message must be a JSON object");
	expect_error(f, "null", "null", SG_RPC_INVALID_REQUEST, "a message must be a JSON object");
}

static void test_unknown_method(void **state)
{
	struct fixture *f = *state;

	expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"resources/list\"}", "4",
		     SG_RPC_METHOD_NOT_FOUND, "method not found: 'resources/list'");
	expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"\"}", "4",
		     SG_RPC_METHOD_NOT_FOUND, "method not found: ''");
	/* Method names are case-sensitive. */
	expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"Ping\"}", "4",
		     SG_RPC_METHOD_NOT_FOUND, "method not found: 'Ping'");
}

static void test_parse_error(void **state)
{
	struct fixture *f = *state;
	static const char *const bad[] = {
		"{not json", "", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"", "[1,",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"} trailing", "\xff\xfe",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xc3\"}",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_error(f, bad[i], "null", SG_RPC_PARSE_ERROR,
			     "parse error: the message is not valid JSON");
	/* Only `len` bytes are parsed. */
	{
		const char buf[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}XYZ";

		cap_clear(&f->cap);
		assert_int_equal(sg_mcp_handle(f->s, buf, sizeof(buf) - 4, NULL), 1);
		assert_int_equal(f->cap.n, 1);
		assert_string_equal(f->cap.lines[0], "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}");
	}
}

static void test_no_reply(void **state)
{
	struct fixture *f = *state;

	/* Notifications, known or not, are never answered. */
	assert_false(f->s->initialized);
	assert_null(roundtrip(f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", 0, 0));
	assert_true(f->s->initialized);
	assert_null(roundtrip(f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/whatever\",\"params\":{}}",
			      0, 0));
	assert_null(roundtrip(f, "{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}", 0, 0));
	assert_null(roundtrip(f,
			      "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
			      "\"params\":{\"requestId\":99,\"reason\":\"no such request\"}}",
			      0, 0));
	/* Responses (to requests sandgate never sent) are not answered. */
	assert_null(roundtrip(f, "{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}", 0, 0));
	assert_null(roundtrip(f, "{\"jsonrpc\":\"2.0\",\"id\":\"s\",\"result\":null}", 0, 0));
	assert_null(roundtrip(f,
			      "{\"jsonrpc\":\"2.0\",\"id\":6,\"error\":{\"code\":-32601,\"message\":\"no\"}}",
			      0, 0));
	/* A peer's error about a message it could not parse carries id null:
	 * answering it would start an endless exchange of errors. */
	assert_null(roundtrip(f,
			      "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"Parse error\"}}",
			      0, 0));
}

/* ---- initialize --------------------------------------------------------------- */

static void check_initialize(struct fixture *f, const char *asked, const char *want)
{
	char text[512];
	const char *line;
	json_t *r, *res;

	snprintf(text, sizeof(text),
		 "{\"jsonrpc\":\"2.0\",\"id\":\"init\",\"method\":\"initialize\",\"params\":"
		 "{\"protocolVersion\":\"%s\",\"capabilities\":{},"
		 "\"clientInfo\":{\"name\":\"t\",\"version\":\"0\"}}}",
		 asked);
	line = roundtrip(f, text, 1, 1);
	r = json_loads(line, 0, NULL);
	assert_non_null(r);
	assert_int_equal(json_object_size(r), 3);
	assert_string_equal(json_string_value(json_object_get(r, "jsonrpc")), "2.0");
	assert_string_equal(json_string_value(json_object_get(r, "id")), "init");
	res = json_object_get(r, "result");
	assert_string_equal(json_string_value(json_object_get(res, "protocolVersion")), want);
	assert_string_equal(json_string_value(json_object_get(json_object_get(res, "serverInfo"), "name")),
			    "sandgate");
	assert_string_equal(json_string_value(json_object_get(json_object_get(res, "serverInfo"), "version")),
			    PACKAGE_VERSION);
	assert_true(json_is_false(json_object_get(json_object_get(json_object_get(res, "capabilities"),
								  "tools"),
						  "listChanged")));
	assert_true(json_is_object(json_object_get(json_object_get(res, "capabilities"), "logging")));
	assert_true(json_is_string(json_object_get(res, "instructions")));
	json_decref(r);
	assert_string_equal(f->s->protocol, want);
}

static void test_initialize_versions(void **state)
{
	struct fixture *f = *state;

	static const char *const asked_want[][2] = {
		{ "2025-11-25", "2025-11-25" }, { "2025-06-18", "2025-06-18" },
		{ "2025-03-26", "2025-03-26" }, { "2024-11-05", "2024-11-05" },
		{ "1999-01-01", "2025-11-25" }, { "2025-11-25x", "2025-11-25" },
	};

	/* a session is initialized once: each version in a session of its own */
	for (size_t i = 0; i < sizeof(asked_want) / sizeof(asked_want[0]); i++) {
		sg_session_unref(f->s);
		cap_clear(&f->cap);
		f->s = sg_session_new(&cap_ops, &f->cap, "local:test");
		assert_string_equal(f->s->protocol, "");
		check_initialize(f, asked_want[i][0], asked_want[i][1]);
	}
	expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":"
		     "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"0\"}}}",
		     "2", SG_RPC_INVALID_REQUEST,
		     "initialize was already answered in this session (protocol 2025-11-25): a session is initialized once; "
		     "to start over, open a new session (stdio: a new process; HTTP: initialize without Mcp-Session-Id)");
	assert_string_equal(f->s->protocol, "2025-11-25");
	assert_true(sg_mcp_version_supported("2024-11-05"));
	assert_false(sg_mcp_version_supported("2024-10-07"));
	assert_false(sg_mcp_version_supported(""));
	assert_string_equal(SG_MCP_LATEST, "2025-11-25");
}

static void test_initialize_bad_params(void **state)
{
	struct fixture *f = *state;
	const char *msg = "initialize needs params.protocolVersion (a string such as \"2025-11-25\")";

	expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}", "1",
		     SG_RPC_INVALID_PARAMS, msg);
	expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":\"i\",\"method\":\"initialize\",\"params\":{}}",
		     "\"i\"", SG_RPC_INVALID_PARAMS, msg);
	expect_error(f,
		     "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":{\"protocolVersion\":20251125}}",
		     "2", SG_RPC_INVALID_PARAMS, msg);
	expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"initialize\",\"params\":[\"2025-11-25\"]}",
		     "3", SG_RPC_INVALID_PARAMS, msg);
	assert_string_equal(f->s->protocol, "");
}

/* ---- batches --------------------------------------------------------------- */

static void test_batch_2025_03_26(void **state)
{
	struct fixture *f = *state;

	initialize(f, "2025-03-26");
	expect_reply(f,
		     "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"},"
		     "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"},"
		     "{\"jsonrpc\":\"2.0\",\"id\":\"b\",\"method\":\"ping\"},"
		     "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{}}]",
		     "[{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}},{\"jsonrpc\":\"2.0\",\"id\":\"b\",\"result\":{}}]");
	assert_true(f->s->initialized);
	/* Errors inside a batch are elements of the answer. */
	expect_reply(f,
		     "[1,{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"nope\"},{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}]",
		     "[{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,\"message\":\"a message must be a JSON object\"}},"
		     "{\"jsonrpc\":\"2.0\",\"id\":5,\"error\":{\"code\":-32601,\"message\":\"method not found: 'nope'\"}},"
		     "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,\"message\":\"\\\"id\\\" must not be null: use a string or an integer\"}}]");
	/* Only notifications and responses: nothing at all. */
	assert_null(roundtrip(f,
			      "[{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"},"
			      "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"},"
			      "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}]",
			      0, 0));
	/* An empty array: one error object, not an array. */
	expect_error(f, "[]", "null", SG_RPC_INVALID_REQUEST, "empty batch");
}

static void test_batch_with_tool_call(void **state)
{
	struct fixture *f = *state;
	const char *line;
	json_t *arr, *a, *b;
	char *ta, *tb;

	initialize(f, "2025-03-26");
	/* The tools/call element finishes on its thread; the array goes out
	 * once, when the last reply is in. */
	line = roundtrip(f,
			 "[{\"jsonrpc\":\"2.0\",\"id\":\"call\",\"method\":\"tools/call\",\"params\":"
			 "{\"name\":\"kill_sandbox\",\"arguments\":{\"sandbox\":\"x\"}}},"
			 "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}]",
			 1, 1);
	arr = json_loads(line, 0, NULL);
	assert_true(json_is_array(arr));
	assert_int_equal(json_array_size(arr), 2);
	a = json_array_get(arr, 0);
	b = json_array_get(arr, 1);
	if (json_is_integer(json_object_get(a, "id"))) { /* the order is not fixed */
		json_t *t = a;

		a = b;
		b = t;
	}
	ta = json_dumps(a, JSON_COMPACT);
	tb = json_dumps(b, JSON_COMPACT);
	assert_string_equal(ta,
			    "{\"jsonrpc\":\"2.0\",\"id\":\"call\",\"result\":{\"content\":[{\"type\":\"text\","
			    "\"text\":\"unknown argument 'sandbox' for kill_sandbox: valid arguments are sandbox_id\"}],"
			    "\"isError\":true}}");
	assert_string_equal(tb, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}");
	free(ta);
	free(tb);
	json_decref(arr);
}

static void test_batch_refused(void **state)
{
	struct fixture *f = *state;
	const char *batch = "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]";
	const char *msg = "batches are only part of MCP 2025-03-26: send one message at a time";

	/* Before initialize, and on every other revision. */
	expect_error(f, batch, "null", SG_RPC_INVALID_REQUEST, msg);
	initialize(f, "2025-11-25");
	expect_error(f, batch, "null", SG_RPC_INVALID_REQUEST, msg);
	expect_error(f, "[{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}]", "null",
		     SG_RPC_INVALID_REQUEST, msg);
	expect_error(f, "[]", "null", SG_RPC_INVALID_REQUEST, "empty batch");
	initialize(f, "2025-06-18");
	expect_error(f, batch, "null", SG_RPC_INVALID_REQUEST, msg);
	initialize(f, "2024-11-05");
	expect_error(f, batch, "null", SG_RPC_INVALID_REQUEST, msg);
}

/* ---- logging/setLevel -------------------------------------------------------- */

static void test_set_level(void **state)
{
	struct fixture *f = *state;
	const char *msg = "logging/setLevel needs params.level: one of debug, info, notice, warning, "
			  "error, critical, alert, emergency";

	assert_int_equal(sg_session_log_level(f->s), SG_LOG_INFO);
	expect_error(f,
		     "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"logging/setLevel\",\"params\":{\"level\":\"verbose\"}}",
		     "1", SG_RPC_INVALID_PARAMS, msg);
	expect_error(f,
		     "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"logging/setLevel\",\"params\":{\"level\":\"warn\"}}",
		     "2", SG_RPC_INVALID_PARAMS, msg);
	expect_error(f,
		     "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"logging/setLevel\",\"params\":{\"level\":3}}",
		     "3", SG_RPC_INVALID_PARAMS, msg);
	expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"logging/setLevel\"}", "4",
		     SG_RPC_INVALID_PARAMS, msg);
	assert_int_equal(sg_session_log_level(f->s), SG_LOG_INFO);
	expect_reply(f,
		     "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"logging/setLevel\",\"params\":{\"level\":\"debug\"}}",
		     "{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}");
	assert_int_equal(sg_session_log_level(f->s), SG_LOG_DEBUG);
	expect_reply(f,
		     "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"logging/setLevel\",\"params\":{\"level\":\"emergency\"}}",
		     "{\"jsonrpc\":\"2.0\",\"id\":6,\"result\":{}}");
	assert_int_equal(sg_session_log_level(f->s), SG_LOG_EMERGENCY);
}

/* ---- tools ------------------------------------------------------------------- */

static void test_tools_list(void **state)
{
	/* The seven cloud tools, then the sandbox_env tools (with the audit
	 * query, since the audit log is file-backed by default). */
	static const char *const names[] = { "create_sandbox", "run_code", "run_command",
					     "read_file", "write_file", "list_files",
					     "kill_sandbox", "sandbox_shell_exec",
					     "sandbox_shell_read", "sandbox_file_read",
					     "sandbox_file_write", "sandbox_file_patch",
					     "sandbox_file_search", "sandbox_env",
					     "sandbox_audit_query" };
	struct fixture *f = *state;
	const char *line;
	json_t *r, *tools, *t;
	size_t i;

	line = roundtrip(f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}", 1, 1);
	r = json_loads(line, 0, NULL);
	assert_non_null(r);
	assert_int_equal(json_object_size(json_object_get(r, "result")), 1); /* no nextCursor */
	tools = json_object_get(json_object_get(r, "result"), "tools");
	assert_int_equal(json_array_size(tools), sizeof(names) / sizeof(names[0]));
	json_array_foreach(tools, i, t) {
		assert_string_equal(json_string_value(json_object_get(t, "name")), names[i]);
		assert_true(json_is_string(json_object_get(t, "description")));
		assert_string_equal(json_string_value(json_object_get(json_object_get(t, "inputSchema"),
								      "type")),
				    "object");
	}
	json_decref(r);
	/* A null cursor is the first page; the same page again. */
	line = roundtrip(f, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\",\"params\":{\"cursor\":null}}",
			 1, 1);
	assert_non_null(strstr(line, "\"tools\":[{\"name\":\"create_sandbox\""));
	/* Any cursor is invalid: there is only one page. */
	expect_error(f,
		     "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\",\"params\":{\"cursor\":\"abc\"}}",
		     "3", SG_RPC_INVALID_PARAMS,
		     "invalid cursor: tools/list has a single page; call it without a cursor");
	expect_error(f,
		     "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/list\",\"params\":{\"cursor\":\"\"}}",
		     "4", SG_RPC_INVALID_PARAMS,
		     "invalid cursor: tools/list has a single page; call it without a cursor");
}

static void test_tools_call_errors(void **state)
{
	struct fixture *f = *state;

	expect_error(f,
		     "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"no_such_tool\",\"arguments\":{}}}",
		     "1", SG_RPC_INVALID_PARAMS,
		     "unknown tool 'no_such_tool': call tools/list for the available tools");
	expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":\"c\",\"method\":\"tools/call\",\"params\":{}}",
		     "\"c\"", SG_RPC_INVALID_PARAMS,
		     "tools/call needs params.name (a string): call tools/list for the names");
	expect_error(f, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\"}", "2",
		     SG_RPC_INVALID_PARAMS,
		     "tools/call needs params.name (a string): call tools/list for the names");
	expect_error(f,
		     "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"run_command\",\"arguments\":[1]}}",
		     "3", SG_RPC_INVALID_PARAMS, "tools/call params.arguments must be an object");
	/* A known tool with a misspelt argument fails in the tool, on its
	 * thread, as an isError result (not a protocol error). */
	expect_reply(f,
		     "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"run_command\",\"arguments\":{\"comand\":\"ls\"}}}",
		     "{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{\"content\":[{\"type\":\"text\",\"text\":"
		     "\"unknown argument 'comand' for run_command: valid arguments are command, sandbox_id, "
		     "cwd, timeout, envs\"}],\"isError\":true}}");
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_classify),
		cmocka_unit_test(test_builders_and_dump),
		cmocka_unit_test(test_peek_id),
		T(test_ids_echoed),
		T(test_bad_ids),
		T(test_invalid_requests),
		T(test_unknown_method),
		T(test_parse_error),
		T(test_no_reply),
		T(test_initialize_versions),
		T(test_initialize_bad_params),
		T(test_batch_2025_03_26),
		T(test_batch_with_tool_call),
		T(test_batch_refused),
		T(test_set_level),
		T(test_tools_list),
		T(test_tools_call_errors),
	};
#undef T

	return cmocka_run_group_tests_name("jsonrpc", tests, group_setup, group_teardown);
}
