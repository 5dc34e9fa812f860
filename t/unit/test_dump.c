/*
 * Unit tests for writing a message out in pieces (core/protocol/dump.c):
 * the text block's placeholder written as the JSON text of the
 * structuredContent beside it, a string held by its call written where its
 * placeholder stands, every escape at every place in a word, and the
 * pieces themselves.  Each is compared with json_dumps() of the message
 * made the old way, byte for byte.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/protocol/call.h"
#include "core/protocol/dump.h"
#include "core/protocol/jsonrpc.h"

/* A tool result as sg_tool_call() makes it: the text block's text is the
 * placeholder for structured's JSON text.  structured is stolen. */
static json_t *result_of(json_t *structured)
{
	return json_pack("{s:[{s:s, s:o}, {s:s, s:s}], s:o}", "content", "type", "text", "text",
			 sg_text_of_structured(), "type", "text", "text", "second \"block\"",
			 "structuredContent", structured);
}

/* The same with the text made up front, as json_dumps() writes it. */
static json_t *result_made(json_t *structured)
{
	char *text = json_dumps(structured, JSON_COMPACT);
	json_t *r = json_pack("{s:[{s:s, s:s}, {s:s, s:s}], s:o}", "content", "type", "text", "text",
			      text, "type", "text", "text", "second \"block\"", "structuredContent",
			      structured);

	free(text);
	return r;
}

/* How many times needle occurs in s. */
static int count_of(const char *s, const char *needle)
{
	int k = 0;

	for (const char *p = s; (p = strstr(p, needle)) != NULL; p++)
		k++;
	return k;
}

/* Counts the pieces; stops after `stop` of them when stop > 0. */
struct pieces {
	int n, stop;
	size_t bytes;
};

static int count_piece(const char *p, size_t n, void *ud)
{
	struct pieces *c = ud;

	(void)p;
	assert_true(n > 0);
	c->bytes += n;
	return ++c->n == c->stop ? -1 : 0;
}

/* The reply of result s (borrowed), alone and in a batch, written with
 * the placeholder and with the text made up front: the same bytes. */
static void same_as_made(json_t *id, json_t *s)
{
	json_t *lazy, *made, *lb, *mb;
	char *got, *want;
	size_t len;

	lazy = sg_rpc_result(id, result_of(json_deep_copy(s)));
	made = sg_rpc_result(id, result_made(json_deep_copy(s)));
	got = sg_rpc_dump(lazy, &len);
	want = json_dumps(made, JSON_COMPACT);
	assert_non_null(want);
	assert_string_equal(got, want);
	assert_int_equal(len, strlen(want));
	free(got);
	free(want);
	lb = json_pack("[o, O, o]", lazy, made, sg_rpc_result(id, result_of(json_deep_copy(s))));
	mb = json_pack("[O, o, o]", made, made, sg_rpc_result(id, result_made(json_deep_copy(s))));
	got = sg_rpc_dump(lb, &len);
	want = json_dumps(mb, JSON_COMPACT);
	assert_string_equal(got, want);
	free(got);
	free(want);
	json_decref(lb);
	json_decref(mb);
}

/* sg_msg_dump() writes the placeholder as the JSON text of the
 * structuredContent beside it, byte for byte what json_dumps() writes for
 * the text made up front: quotes, backslashes, escapes, non-ASCII, NUL in
 * strings and in keys, nested values, an empty object, in a response and
 * in a batch of them. */
static void test_text_of_structured(void **state)
{
	const char *specs[] = {
		"{}",
		"{\"a\":1}",
		"{\"q\":\"say \\\"hi\\\" \\\\ back\\\\slash\",\"ctl\":\"\\n\\t\\u0001\\u001f\"}",
		"{\"u\":\"\u00fc \u2028 \u00e9t\u00e9 / </script>\",\"n\":null,\"b\":[true,false,1.5,-3]}",
		"{\"deep\":{\"a\":[{\"b\":{\"c\":[\"\\\"\"]}}]},\"e\":{},\"f\":[]}",
		("{\"k\\\"e\\\\y\\n\":\"\\b\\f\\n\\r\\t\\u0000\\u0001\\u001f\\u007f \\u00ff\\u20ac\\ud83d\\ude00\","
		 "\"l\":[\"\\u0000\\\"\",{\"m\":\"\\t\\\\\"}],\"n\":1e300,\"o\":-0.1}"),
	};
	json_t *id = json_integer(7), *s, *inner;

	(void)state;
	for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
		s = json_loads(specs[i], JSON_ALLOW_NUL, NULL);
		assert_non_null(s);
		same_as_made(id, s);
		json_decref(s);
	}
	/* keys with NUL: only json_object_setn makes them */
	s = json_object();
	inner = json_object();
	assert_int_equal(json_object_setn_new(inner, "c\0", 2, json_string("d")), 0);
	assert_int_equal(json_object_setn_new(s, "a\0b", 3, inner), 0);
	same_as_made(id, s);
	json_decref(s);
	json_decref(id);
}

/* The strings are scanned eight bytes at a time: every byte that needs an
 * escape (each below 0x20, '"', '\\'), and its neighbours that do not
 * (0x20, 0x7f, 0x80, 0xc3 of a two-byte letter), at each place in and
 * across a word, alone and in runs, are written as jansson writes them. */
static void test_escapes_everywhere(void **state)
{
	static const unsigned char odd[] = { '"', '\\', 0x1f, 0x00, '\n', 0x20, 0x7f };
	json_t *id = json_integer(9);

	(void)state;
	for (unsigned c = 0; c < 0x20 + sizeof(odd); c++) {
		unsigned char b = c < 0x20 ? (unsigned char)c : odd[c - 0x20];

		for (size_t len = 1; len <= 19; len++) {
			for (size_t at = 0; at < len; at++) {
				char text[24];
				json_t *s;

				memset(text, 'A', len);
				memcpy(text + (len > 4 ? len - 4 : 0), "\xc3\xbc", len > 4 ? 2 : 0);
				text[at] = (char)b;
				if (at + 9 < len)
					text[at + 8] = (char)b; /* the same in the next word */
				s = json_pack("{s:s%}", "v", text, len);
				if (!s)
					continue; /* half a letter: not UTF-8, jansson refuses it */
				same_as_made(id, s);
				json_decref(s);
			}
		}
	}
	json_decref(id);
}

/* A string held by its call (sg_call_string) is written where its
 * placeholder stands, in structuredContent and in the text block made
 * from it, as the string itself would be; a call whose reply is not
 * written in pieces, or a short string, gets a copy instead. */
static void test_held_string(void **state)
{
	size_t n = SG_CALL_HOLD_MIN + 5, len;
	char *bytes = malloc(n), *got, *want;
	json_t *id = json_integer(3), *v, *lazy, *made;
	struct sg_call *c = sg_call_new(NULL, id, NULL, "tools/call"); /* its own reference */

	(void)state;
	json_decref(id);
	for (size_t i = 0; i < n; i++)
		bytes[i] = "ab\"\\\n\tz"[i % 7];
	made = sg_rpc_result(c->id, result_made(json_pack("{s:s%, s:i}", "content", bytes, n, "size", 1)));
	c->pieces = true;
	v = sg_call_string(c, bytes, n, false);
	assert_ptr_equal(v, c->held.ph);
	assert_int_equal(json_string_length(v), 0);
	lazy = sg_rpc_result(c->id, result_of(json_pack("{s:o, s:i}", "content", v, "size", 1)));
	got = sg_rpc_dump_with(lazy, &c->held, &len);
	want = json_dumps(made, JSON_COMPACT);
	assert_int_equal(len, strlen(want));
	assert_string_equal(got, want);
	free(got);
	free(want);
	/* one per call: a second is a copy */
	bytes = malloc(n);
	memset(bytes, 'x', n);
	v = sg_call_string(c, bytes, n, false);
	assert_ptr_not_equal(v, c->held.ph);
	assert_int_equal(json_string_length(v), n);
	json_decref(v);
	json_decref(lazy);
	json_decref(made);
	sg_call_free(c);
	/* not in pieces, or short: copies */
	id = json_integer(4);
	c = sg_call_new(NULL, id, NULL, "tools/call");
	json_decref(id);
	v = sg_call_string(c, strdup("long enough? no, not in pieces"), 30, false);
	assert_null(c->held.ph);
	assert_string_equal(json_string_value(v), "long enough? no, not in pieces");
	json_decref(v);
	c->pieces = true;
	v = sg_call_string(c, strdup("short"), 5, true);
	assert_null(c->held.ph);
	assert_string_equal(json_string_value(v), "short");
	json_decref(v);
	v = sg_call_string(NULL, NULL, 0, false);
	assert_string_equal(json_string_value(v), "");
	json_decref(v);
	sg_call_free(c);
}

/* A plain held string (base64: nothing to escape) is copied as it is, in
 * structuredContent and in the text block, within the message's pieces:
 * the bytes on the wire are those of the string made the usual way. */
static void test_held_plain(void **state)
{
	size_t n = SG_CALL_HOLD_MIN + 7, len;
	char *bytes = malloc(n), *got, *want;
	json_t *id = json_integer(5), *v, *lazy, *made, *batch;
	struct sg_call *c = sg_call_new(NULL, id, NULL, "tools/call");
	struct pieces p = { 0 };

	(void)state;
	json_decref(id);
	for (size_t i = 0; i < n; i++)
		bytes[i] = "ABCz09+/="[i % 9];
	made = sg_rpc_result(c->id, result_made(json_pack("{s:s%, s:s}", "content", bytes, n,
							   "encoding", "base64")));
	c->pieces = true;
	v = sg_call_string(c, bytes, n, true);
	assert_ptr_equal(v, c->held.ph);
	assert_true(c->held.plain);
	lazy = sg_rpc_result(c->id, result_of(json_pack("{s:o, s:s}", "content", v,
							"encoding", "base64")));
	want = json_dumps(made, JSON_COMPACT);
	got = sg_rpc_dump_with(lazy, &c->held, &len);
	assert_int_equal(len, strlen(want));
	assert_string_equal(got, want);
	free(got);
	/* written in pieces: as many bytes */
	assert_int_equal(sg_msg_dump(lazy, &c->held, count_piece, &p), 0);
	assert_int_equal(p.bytes, strlen(want));
	free(want);
	/* inside a batch, one level deeper */
	batch = json_pack("[O]", lazy);
	got = sg_rpc_dump_with(batch, &c->held, &len);
	json_decref(batch);
	batch = json_pack("[O]", made);
	want = json_dumps(batch, JSON_COMPACT);
	assert_string_equal(got, want);
	free(got);
	free(want);
	json_decref(batch);
	json_decref(lazy);
	json_decref(made);
	sg_call_free(c);
	/* white box: plain bytes are not looked at, so a quote (which a plain
	 * string never holds) goes out as it is, in both places; the same
	 * bytes not plain are escaped */
	for (int k = 0; k < 2; k++) {
		bool plain = k == 0;

		id = json_integer(6);
		c = sg_call_new(NULL, id, NULL, "tools/call");
		json_decref(id);
		c->pieces = true;
		bytes = malloc(n);
		memset(bytes, 'Q', n);
		memcpy(bytes + 7, "a\"b", 3);
		v = sg_call_string(c, bytes, n, plain);
		lazy = sg_rpc_result(c->id, result_of(json_pack("{s:o}", "content", v)));
		got = sg_rpc_dump_with(lazy, &c->held, &len);
		assert_int_equal(count_of(got, "QQa\"bQQ"), plain ? 2 : 0);
		assert_int_equal(count_of(got, "QQa\\\"bQQ"), plain ? 0 : 1);
		free(got);
		json_decref(lazy);
		sg_call_free(c);
	}
}

/* The pieces: a large text goes out in more than one, each non-empty, all
 * of it; a writer that stops the dump stops it (-1). */
static void test_dump_pieces(void **state)
{
	json_t *big = json_object(), *msg;
	struct pieces c = { 0 };
	char *whole;
	size_t len;

	(void)state;
	for (int i = 0; i < 1000; i++) {
		char k[16];

		snprintf(k, sizeof(k), "k%d", i);
		json_object_set_new(big, k, json_string("value with a \" quote"));
	}
	msg = sg_rpc_result(json_null(), result_of(big));
	whole = sg_rpc_dump(msg, &len);
	assert_int_equal(sg_msg_dump(msg, NULL, count_piece, &c), 0);
	assert_true(c.n > 1);
	assert_int_equal(c.bytes, len);
	free(whole);
	c = (struct pieces){ .stop = 3 };
	assert_int_equal(sg_msg_dump(msg, NULL, count_piece, &c), -1);
	assert_int_equal(c.n, 3);
	/* no message (a json_pack that failed) is refused, not written as
	 * anything, before or after the placeholder exists */
	c = (struct pieces){ 0 };
	assert_int_equal(sg_msg_dump(NULL, NULL, count_piece, &c), -1);
	assert_int_equal(c.n, 0);
	whole = sg_rpc_dump(NULL, &len);
	assert_string_equal(whole, SG_RPC_CANNOT_SERIALISE);
	free(whole);
	json_decref(msg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_text_of_structured),
		cmocka_unit_test(test_escapes_everywhere),
		cmocka_unit_test(test_held_string),
		cmocka_unit_test(test_held_plain),
		cmocka_unit_test(test_dump_pieces),
	};

	return cmocka_run_group_tests_name("dump", tests, NULL, NULL);
}
