/*
 * Unit tests for large tool arguments decoded once (core/protocol/bulk.c)
 * and for the secrets kept out of results (core/registry/redact.c).
 *
 * Every large message is also parsed by jansson itself, and the two must
 * agree exactly: the same decoded bytes for the argument, the same message
 * once the bulk is put back, and a refusal (NULL) exactly where jansson
 * refuses.
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

#include "core/base/util.h"
#include "core/protocol/bulk.h"
#include "core/registry/redact.h"

/* ---- messages --------------------------------------------------------------- */

/* A tools/call line whose arguments.content is `piece` (raw JSON string
 * text, without quotes) repeated until the literal is over SG_BULK_MIN
 * bytes, followed by `tail` inside arguments (e.g. ",\"path\":\"a\"").
 * New buffer (the caller frees); its length in *len. */
static char *message(const char *piece, const char *tail, size_t *len)
{
	const char *head = "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\","
			   "\"params\":{\"name\":\"write_file\",\"arguments\":{\"path\":\"/w/a\",\"content\":\"";
	const char *end = "}}}";
	size_t n = strlen(piece), reps = SG_BULK_MIN / n + 1;
	size_t size = strlen(head) + reps * n + 1 + strlen(tail) + strlen(end) + 1;
	char *m = sg_xmalloc(size), *p = m;

	p += sprintf(p, "%s", head);
	for (size_t i = 0; i < reps; i++) {
		memcpy(p, piece, n);
		p += n;
	}
	p += sprintf(p, "\"%s%s", tail, end);
	*len = (size_t)(p - m);
	return m;
}

/* Parses m both ways and checks they agree.  Returns the bulk list (the
 * caller frees) or NULL when jansson refused the message too. */
static struct sg_bulk *agree(const char *piece, const char *tail, bool expect_bulk)
{
	size_t len;
	char *m = message(piece, tail, &len);
	json_t *ref = json_loadb(m, len, JSON_DECODE_ANY, NULL), *msg, *content;
	struct sg_bulk *bulk = NULL;
	char *copy = sg_xmalloc(len);

	memcpy(copy, m, len);
	msg = sg_rpc_parse_taking(copy, len, &bulk);
	free(copy);
	assert_int_equal(msg != NULL, ref != NULL);
	if (!ref) {
		assert_null(bulk);
		free(m);
		return NULL;
	}
	assert_int_equal(bulk != NULL, expect_bulk);
	if (bulk) {
		content = json_object_get(json_object_get(json_object_get(ref, "params"), "arguments"), "content");
		assert_string_equal(bulk->key, "content");
		assert_null(bulk->next);
		assert_int_equal(bulk->len, json_string_length(content));
		assert_memory_equal(bulk->data, json_string_value(content), bulk->len);
		assert_int_equal(bulk->data[bulk->len], '\0');
		/* the message without it holds "" there; put back, it is jansson's */
		assert_string_equal(json_string_value(json_object_get(
			json_object_get(json_object_get(msg, "params"), "arguments"), "content")), "");
		sg_bulk_restore(msg, bulk);
		bulk = sg_xcalloc(1, sizeof(*bulk)); /* a marker: the caller frees it */
		bulk->key = sg_xstrdup("content");
	}
	assert_true(json_equal(msg, ref));
	json_decref(msg);
	json_decref(ref);
	free(m);
	return bulk;
}

static void test_small_stays_with_jansson(void **state)
{
	const char *m = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"x\","
			"\"arguments\":{\"content\":\"abc\"}}}";
	char *copy = sg_xstrdup(m);
	struct sg_bulk *bulk = (struct sg_bulk *)1;
	json_t *msg = sg_rpc_parse_taking(copy, strlen(copy), &bulk);

	(void)state;
	assert_null(bulk);
	assert_string_equal(json_string_value(json_object_get(json_object_get(json_object_get(msg, "params"),
									       "arguments"), "content")), "abc");
	json_decref(msg);
	free(copy);
}

static void test_decoded_as_jansson(void **state)
{
	(void)state;
	/* plain ASCII */
	sg_bulk_free(agree("abcdefghij0123456789", "", true));
	/* every short escape, \u escapes (2, 3 bytes), a surrogate pair, raw UTF-8 */
	sg_bulk_free(agree("q\\\"b\\\\s\\/f\\bf\\fn\\nr\\rt\\t\\u00e9\\u20ac\\ud83d\\ude00\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80 ",
			   ",\"encoding\":\"utf-8\"", true));
	/* DEL (plain) and U+0080 (two bytes) at every place in a word: the
	 * plain runs are found eight bytes at a time */
	sg_bulk_free(agree("ab\x7f" "cd\xc2\x80" "ef", "", true));
	/* a literal ending in an escaped backslash, then more members */
	sg_bulk_free(agree("x\\\\", ",\"z\":[1,{\"a\":\"}\"}]", true));
	/* plain runs longer than a release step (decoded in steps), with
	 * escapes and UTF-8 on and around the steps' edges */
	{
		size_t n = 3 * 1024 * 1024 + 5;
		char *big = sg_xmalloc(n + 32);

		memset(big, 'a', n);
		memcpy(big + 1024 * 1024 - 1, "\\n", 2);
		memcpy(big + 2 * 1024 * 1024, "\xc3\xa9", 2);
		strcpy(big + n, "\\u20acz");
		sg_bulk_free(agree(big, "", true));
		free(big);
	}
}

static void test_refused_as_jansson(void **state)
{
	(void)state;
	assert_null(agree("a\\ud800b", "", true));         /* a lone high surrogate */
	assert_null(agree("a\\udc00b", "", true));         /* a lone low surrogate */
	assert_null(agree("a\\u0000b", "", true));         /* NUL */
	assert_null(agree("a\\xb", "", true));             /* an unknown escape */
	assert_null(agree("a\x01" "b", "", true));         /* a raw control character */
	for (int k = 0; k < 16; k++) {                   /* the same, at each place in a word */
		char piece[24];

		snprintf(piece, sizeof(piece), "%.*s\x1f" "b", k, "aaaaaaaaaaaaaaaa");
		assert_null(agree(piece, "", true));
	}
	assert_null(agree("a\xc0\xafz", "", true));        /* overlong UTF-8 */
	assert_null(agree("a\xed\xa0\x80z", "", true));    /* a UTF-8 surrogate */
	assert_null(agree("abc", ",\"path\":}", true));    /* the rest is not JSON */
}

static void test_left_to_jansson(void **state)
{
	(void)state;
	/* the key twice: jansson keeps the last value, and reads it all */
	sg_bulk_free(agree("abcdefgh", ",\"content\":\"small\"", false));
	/* other members after it, strings in an array among them: it still
	 * comes apart, and they stay in the message */
	sg_bulk_free(agree("abcdefgh", ",\"more\":[\"x\",\"content\"]", true));
}

/* ---- secrets out of results ------------------------------------------------- */

static void test_secret_names(void **state)
{
	(void)state;
	assert_true(sg_redact_key_names_secret("api_key"));
	assert_true(sg_redact_key_names_secret("API-Key"));
	assert_true(sg_redact_key_names_secret("key"));
	assert_true(sg_redact_key_names_secret("ssh_key"));
	assert_true(sg_redact_key_names_secret("GITHUB_TOKEN"));
	assert_true(sg_redact_key_names_secret("db_password"));
	assert_true(sg_redact_key_names_secret("passphrase"));
	assert_true(sg_redact_key_names_secret("client_secret"));
	assert_false(sg_redact_key_names_secret("content"));
	assert_false(sg_redact_key_names_secret("path"));
	assert_false(sg_redact_key_names_secret("keep"));
	assert_false(sg_redact_key_names_secret("keys_file"));
	/* contents are hashed in audit rows, but are no secrets for results */
	assert_true(sg_redact_key_is_secret("content"));
	assert_true(sg_redact_key_is_secret("token"));
}

static void test_scrub(void **state)
{
	json_t *args = json_pack("{s:s, s:{s:s, s:s}, s:{s:s, s:s}, s:s, s:s, s:[{s:s}]}",
				 "path", "/w/a",
				 "options", "api_key", "AK-123456", "image", "alpine",
				 "envs", "GH_TOKEN", "ghp-secret", "PATH", "/bin",
				 "content", "file text",
				 "password", "abc", /* shorter than SG_REDACT_MIN_SECRET */
				 "list", "passphrase", "pass phrase 1");
	json_t *secrets = sg_redact_secrets(args);
	json_t *result = json_pack("{s:[{s:s, s:s}], s:{s:s, s:[s, s], s:s, s:s, s:s}}",
				   "content", "type", "text", "text", "options {\"api_key\":\"AK-123456\"}",
				   "structuredContent",
				   "stdout", "t=ghp-secret;ghp-secretghp-secret AK-123456",
				   "list", "pass phrase 1", "/bin",
				   "path", "/w/a", "content", "file text", "short", "abc");
	char *dump;

	(void)state;
	dump = json_dumps(secrets, JSON_COMPACT);
	assert_string_equal(dump, "[\"AK-123456\",\"ghp-secret\",\"pass phrase 1\"]");
	free(dump);
	sg_redact_scrub(result, secrets);
	dump = json_dumps(result, JSON_COMPACT | JSON_SORT_KEYS);
	assert_string_equal(dump, "{\"content\":[{\"text\":\"options {\\\"api_key\\\":\\\"[redacted]\\\"}\",\"type\":\"text\"}],"
			    "\"structuredContent\":{\"content\":\"file text\",\"list\":[\"[redacted]\",\"/bin\"],"
			    "\"path\":\"/w/a\",\"short\":\"abc\","
			    "\"stdout\":\"t=[redacted];[redacted][redacted] [redacted]\"}}");
	free(dump);
	json_decref(secrets);
	json_decref(result);
	json_decref(args);
	/* none: NULL, and scrubbing with NULL changes nothing */
	args = json_pack("{s:s, s:{s:s}}", "command", "ls", "envs", "HOME", "/root");
	assert_null(sg_redact_secrets(args));
	sg_redact_scrub(args, NULL);
	json_decref(args);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_small_stays_with_jansson),
		cmocka_unit_test(test_decoded_as_jansson),
		cmocka_unit_test(test_refused_as_jansson),
		cmocka_unit_test(test_left_to_jansson),
		cmocka_unit_test(test_secret_names),
		cmocka_unit_test(test_scrub),
	};

	return cmocka_run_group_tests_name("bulk", tests, NULL, NULL);
}
