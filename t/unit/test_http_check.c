/*
 * Unit tests for the Streamable HTTP request checks (transports/http_check.c):
 * Host and Origin parsed whole and compared with [server] allowed_hosts (the
 * prefix forms of issue 19 among many others), allowed_hosts itself, header
 * framing (repeated headers, Content-Length), bearer tokens, session and
 * event ids, and the order of the checks.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/sha.h>

#include "transports/http_check.h"

static struct sg_http_allow loopback;

static int group_setup(void **state)
{
	(void)state;
	return sg_http_allow_parse("localhost, 127.0.0.1 ,[::1]", &loopback, NULL);
}

static int group_teardown(void **state)
{
	(void)state;
	sg_http_allow_free(&loopback);
	return 0;
}

/* ---- parsing ------------------------------------------------------------------ */

static void host_ok(const char *s, const char *name, int port)
{
	struct sg_http_host h;

	if (sg_http_parse_host(s, strlen(s), &h) != 0)
		fail_msg("'%s' should parse", s);
	assert_string_equal(h.name, name);
	assert_int_equal(h.port, port);
}

static void test_parse_host(void **state)
{
	struct sg_http_host h;
	static const char *const bad[] = {
		"", ":80", "[::1].evil.com", "[::1]evil", "[::1]:", "[::1]:80x", "[::1", "[::1]]", "[]",
		"[::1]:80:80", "localhost:", "localhost:80:80", "localhost:-1", "localhost:+80",
		"localhost:65536", "localhost:123456", "localhost:080000", "local host", "localhost ",
		" localhost", "localhost/", "localhost/x", "user@localhost", "localhost?x", "localhost#x",
		"127.0.0.1%2e", "[fe80::1%25lo]", "[fe80::1%lo]", "[127.0.0.1]", "[v1.x]", "[::g]",
		"[::1 ]", "\xc3\xa9.com", "a\tb", "a,b", "a;b", "a:b:c", "[:::1]",
	};

	(void)state;
	host_ok("localhost", "localhost", -1);
	host_ok("LocalHost:8010", "localhost", 8010);
	host_ok("127.0.0.1:0", "127.0.0.1", 0);
	host_ok("127.0.0.1:65535", "127.0.0.1", 65535);
	host_ok("[::1]", "[::1]", -1);
	host_ok("[::1]:3000", "[::1]", 3000);
	host_ok("[0:0:0:0:0:0:0:1]:1", "[0:0:0:0:0:0:0:1]", 1);
	host_ok("[::ffff:127.0.0.1]", "[::ffff:127.0.0.1]", -1);
	host_ok("mcp.example.test:00080", "mcp.example.test", 80);
	host_ok("under_score.example~", "under_score.example~", -1);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (sg_http_parse_host(bad[i], strlen(bad[i]), &h) == 0)
			fail_msg("Host '%s' should not parse", bad[i]);
	/* Length-delimited: bytes past len are not read. */
	assert_int_equal(sg_http_parse_host("localhost.evil", 9, &h), 0);
	assert_string_equal(h.name, "localhost");
	/* An embedded NUL is not a host. */
	assert_int_equal(sg_http_parse_host("[::1\0]", 6, &h), -1);
	assert_int_equal(sg_http_parse_host("local\0host", 10, &h), -1);
	{
		char longname[300];

		memset(longname, 'a', sizeof(longname) - 1);
		longname[sizeof(longname) - 1] = '\0';
		assert_int_equal(sg_http_parse_host(longname, 255, &h), 0);
		assert_int_equal(sg_http_parse_host(longname, 256, &h), -1);
	}
}

static void test_parse_origin(void **state)
{
	struct sg_http_host h;
	static const char *const bad[] = {
		"null", "", "localhost", "//localhost", "http:/localhost", "http:localhost", "http://",
		"1http://localhost", "ht tp://localhost", "-http://localhost", "http://localhost/",
		"http://localhost/path", "http://localhost:80/", "http://user@localhost",
		"http://user:pw@localhost", "http://[::1].evil.com", "http://[::1]evil",
		"http://localhost?x", "http://localhost#f", "http://localhost:80.evil.com",
		"http://localhost :80", "http:// localhost",
	};

	(void)state;
	assert_int_equal(sg_http_parse_origin("http://localhost:8010", &h), 0);
	assert_string_equal(h.name, "localhost");
	assert_int_equal(h.port, 8010);
	assert_int_equal(sg_http_parse_origin("HTTPS://[::1]", &h), 0);
	assert_true(h.is_v6);
	assert_int_equal(sg_http_parse_origin("vscode-webview://abc123", &h), 0);
	assert_string_equal(h.name, "abc123");
	assert_int_equal(sg_http_parse_origin("a+b.c-d://x", &h), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (sg_http_parse_origin(bad[i], &h) == 0)
			fail_msg("Origin '%s' should not parse", bad[i]);
}

/* ---- comparison ------------------------------------------------------------------ */

static void test_host_origin(void **state)
{
	static const char *const good_hosts[] = {
		"localhost", "LOCALHOST", "localhost:8010", "127.0.0.1", "127.0.0.1:1", "[::1]",
		"[::1]:8010", "[0::1]", "[0:0:0:0:0:0:0:1]:80", "[::0:1]",
	};
	static const char *const bad_hosts[] = {
		/* the four of issue 19, and more of their kind */
		"[::1].evil.com", "[::1]evil", "127.0.0.1.evil.com", "localhost.evil.com",
		"[::1].evil.com:80", "localhost.evil.com:8010", "localhost.", "127.0.0.1.",
		"localhostx", "xlocalhost", "127.0.0.10", "127.0.0.1x", "127.0.0.2", "0x7f.0.0.1",
		"2130706433", "127.1", "127.000.000.001", "[::2]", "[::ffff:127.0.0.1]", "[::]",
		"evil.com", "evil.com:8010", "localhost:80:80", "localhost:", "[::1]:", "",
		"localhost/", "localhost@evil.com", "evil.com@localhost", "local%68ost",
	};
	static const char *const good_origins[] = {
		"http://localhost", "https://localhost:8010", "http://127.0.0.1:9999", "http://[::1]:3000",
		"HTTPS://LOCALHOST", "http://[0:0::1]",
	};
	static const char *const bad_origins[] = {
		"http://[::1].evil.com", "http://127.0.0.1.evil.com", "http://[::1]evil",
		"http://localhost.evil.com", "http://evil.com", "null", "http://localhost/",
		"http://localhost:8010/x", "http://evil.com/http://localhost", "http://localhost@evil.com",
		"http://evil.com#http://localhost", "file://", "localhost", "http://127.0.0.1:80.evil.com",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(good_hosts) / sizeof(good_hosts[0]); i++)
		if (sg_http_check_host_origin(&loopback, good_hosts[i], NULL))
			fail_msg("Host '%s' should be allowed", good_hosts[i]);
	for (size_t i = 0; i < sizeof(bad_hosts) / sizeof(bad_hosts[0]); i++) {
		const char *why = sg_http_check_host_origin(&loopback, bad_hosts[i], NULL);

		if (!why)
			fail_msg("Host '%s' should be refused", bad_hosts[i]);
		assert_string_equal(why, "forbidden: the Host header names a host that is not in [server] allowed_hosts");
	}
	for (size_t i = 0; i < sizeof(good_origins) / sizeof(good_origins[0]); i++)
		if (sg_http_check_host_origin(&loopback, "localhost", good_origins[i]))
			fail_msg("Origin '%s' should be allowed", good_origins[i]);
	for (size_t i = 0; i < sizeof(bad_origins) / sizeof(bad_origins[0]); i++) {
		const char *why = sg_http_check_host_origin(&loopback, "localhost", bad_origins[i]);

		if (!why)
			fail_msg("Origin '%s' should be refused", bad_origins[i]);
		assert_string_equal(why, "forbidden: the Origin header names a host that is not in [server] allowed_hosts");
	}
	/* Absent headers are not checked. */
	assert_null(sg_http_check_host_origin(&loopback, NULL, NULL));
}

static void test_allow_list(void **state)
{
	struct sg_http_allow a;
	struct sg_err err = { 0 };

	(void)state;
	assert_int_equal(sg_http_allow_parse(" mcp.example.test:8010 ,, Other.Test\t", &a, &err), 0);
	assert_int_equal(a.n, 2);
	assert_false(a.any);
	assert_null(sg_http_check_host_origin(&a, "MCP.example.test:9", "https://other.test"));
	assert_non_null(sg_http_check_host_origin(&a, "localhost", NULL));
	assert_non_null(sg_http_check_host_origin(&a, "mcp.example.test.evil", NULL));
	sg_http_allow_free(&a);

	assert_int_equal(sg_http_allow_parse("localhost,*", &a, &err), 0);
	assert_true(a.any);
	assert_null(sg_http_check_host_origin(&a, "anything.example", "http://else.example:1"));
	/* Any host, but still a host. */
	assert_non_null(sg_http_check_host_origin(&a, "[::1].evil.com", NULL));
	assert_non_null(sg_http_check_host_origin(&a, "x", "null"));
	sg_http_allow_free(&a);

	assert_int_equal(sg_http_allow_parse("", &a, &err), 0);
	assert_int_equal(a.n, 0);
	assert_non_null(sg_http_check_host_origin(&a, "localhost", NULL));
	sg_http_allow_free(&a);

	assert_int_equal(sg_http_allow_parse("localhost,evil.com/x", &a, &err), -1);
	assert_int_equal(err.code, SG_E_INVAL);
	assert_string_equal(err.msg,
			    "[server] allowed_hosts: 'evil.com/x' is not a host name: use names such as localhost, 127.0.0.1 or [::1] (a port is ignored), or '*'");
	assert_int_equal(a.n, 0);
	assert_null(a.hosts);
	assert_int_equal(sg_http_allow_parse("[::1]x", &a, &err), -1);
	assert_int_equal(sg_http_allow_parse("http://localhost", &a, &err), -1);
}

/* ---- requests ------------------------------------------------------------------- */

static unsigned char digest_a[SG_HTTP_DIGEST];

static void policy(struct sg_http_policy *p, bool tokens)
{
	memset(p, 0, sizeof(*p));
	p->allow = &loopback;
	p->local_owner = "local:1000";
	p->max_body = 1000;
	if (tokens) {
		SHA256((const unsigned char *)"tok-a", 5, digest_a);
		p->tokens = (const unsigned char (*)[SG_HTTP_DIGEST])digest_a;
		p->n_tokens = 1;
	}
}

/* A request of "Name: value" pairs (NULL-terminated); returns the status
 * of the access and message checks (0 when both pass). */
static unsigned check(const struct sg_http_policy *p, const char *method, const char *path,
		      const char *const *headers, struct sg_http_verdict *v)
{
	struct sg_http_req r = { .method = method, .path = path };

	memset(v, 0, sizeof(*v));
	for (size_t i = 0; headers && headers[i]; i += 2)
		sg_http_req_header(&r, headers[i], headers[i + 1]);
	if (sg_http_check_access(p, &r, v) == 0)
		sg_http_check_message(p, &r, v);
	return v->status;
}

static void test_request_order(void **state)
{
	struct sg_http_policy p;
	struct sg_http_verdict v;
	const char *evil[] = { "Host", "evil.com", NULL };
	const char *dup[] = { "Host", "evil.com", "content-length", "1", "Content-Length", "2", NULL };

	(void)state;
	policy(&p, true);
	/* path before method before framing before Host before the token */
	assert_int_equal(check(&p, "PUT", "/other", dup, &v), 404);
	assert_int_equal(check(&p, "PUT", "/mcp", dup, &v), 405);
	assert_string_equal(v.why, "method PUT not allowed: use POST, GET or DELETE");
	assert_int_equal(check(&p, "POST", "/mcp", dup, &v), 400);
	assert_true(v.reply_now);
	assert_string_equal(v.why, "bad request: the Content-Length header appears more than once");
	assert_int_equal(check(&p, "POST", "/mcp", evil, &v), 403);
	assert_false(v.reply_now);
	assert_int_equal(check(&p, "POST", "/mcp", NULL, &v), 401);
	assert_false(v.bad_token);
	assert_string_equal(v.why, "unauthorized: send Authorization: Bearer <token>");
	p.n_tokens = 0;
	p.stopping = true;
	assert_int_equal(check(&p, "GET", "/mcp", NULL, &v), 503);
	p.stopping = false;
	{
		const char *h[] = { "MCP-Protocol-Version", "1999-01-01", NULL };

		assert_int_equal(check(&p, "DELETE", "/mcp", h, &v), 400);
		assert_string_equal(v.why,
				    "unsupported MCP-Protocol-Version '1999-01-01': use 2025-11-25, 2025-06-18, 2025-03-26 or 2024-11-05");
	}
	assert_int_equal(check(&p, "DELETE", "/mcp", NULL, &v), 0);
	assert_int_equal(v.kind, SG_HTTP_DELETE);
	assert_string_equal(v.owner, "local:1000");
	assert_true(v.want_json && v.want_sse);
}

static void test_framing(void **state)
{
	struct sg_http_policy p;
	struct sg_http_verdict v;
	static const struct {
		const char *h[9];
		const char *why;
	} cases[] = {
		{ { "Content-Length", "5", "Content-Length", "6" }, "the Content-Length header appears more than once" },
		{ { "Content-Length", "5", "CONTENT-LENGTH", "5" }, "the Content-Length header appears more than once" },
		{ { "Host", "localhost", "host", "localhost" }, "the Host header appears more than once" },
		{ { "Origin", "http://localhost", "Origin", "http://evil.com" }, "the Origin header appears more than once" },
		{ { "Authorization", "Bearer a", "Authorization", "Bearer b" }, "the Authorization header appears more than once" },
		{ { "Mcp-Session-Id", "a", "mcp-session-id", "b" }, "the Mcp-Session-Id header appears more than once" },
		{ { "Content-Type", "application/json", "Content-Type", "text/plain" }, "the Content-Type header appears more than once" },
		{ { "Content-Length", "" }, "Content-Length must be a decimal number of bytes" },
		{ { "Content-Length", "+5" }, "Content-Length must be a decimal number of bytes" },
		{ { "Content-Length", "5,5" }, "Content-Length must be a decimal number of bytes" },
		{ { "Content-Length", " 5" }, "Content-Length must be a decimal number of bytes" },
		{ { "Content-Length", "0x10" }, "Content-Length must be a decimal number of bytes" },
		{ { "Content-Length", "-1" }, "Content-Length must be a decimal number of bytes" },
		{ { "Content-Length", "5", "Transfer-Encoding", "chunked" }, "Content-Length and Transfer-Encoding together: send one of them" },
	};
	char want[200];

	(void)state;
	policy(&p, false);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(check(&p, "POST", "/mcp", cases[i].h, &v), 400);
		assert_true(v.reply_now);
		snprintf(want, sizeof(want), "bad request: %s", cases[i].why);
		assert_string_equal(v.why, want);
	}
	/* Repeated list-valued fields are fine; the first is read. */
	{
		const char *h[] = { "Accept", "text/plain", "Accept", "application/json", "Transfer-Encoding", "chunked",
				    "Transfer-Encoding", "identity", NULL };

		assert_int_equal(check(&p, "POST", "/mcp", h, &v), 406);
	}
	/* Content-Length: the cap (413 at once), digits beyond any number. */
	{
		const char *at[] = { "Content-Length", "1000", NULL };
		const char *over[] = { "Content-Length", "1001", NULL };
		const char *huge[] = { "Content-Length", "99999999999999999999999", NULL };
		const char *lead[] = { "Content-Length", "0000000000000000000000000005", NULL };

		assert_int_equal(check(&p, "POST", "/mcp", at, &v), 0);
		assert_int_equal(check(&p, "POST", "/mcp", over, &v), 413);
		assert_true(v.reply_now);
		assert_string_equal(v.why, "message larger than 1000 bytes ([server] max_message_bytes)");
		assert_int_equal(check(&p, "POST", "/mcp", huge, &v), 413);
		/* leading zeros are no size */
		assert_int_equal(check(&p, "POST", "/mcp", lead, &v), 0);
	}
}

static void test_message(void **state)
{
	struct sg_http_policy p;
	struct sg_http_verdict v;

	(void)state;
	policy(&p, false);
	{
		const char *h[] = { "Accept", "text/plain", NULL };

		assert_int_equal(check(&p, "POST", "/mcp", h, &v), 406);
	}
	{
		const char *h[] = { "Accept", "application/json", NULL };

		assert_int_equal(check(&p, "GET", "/mcp", h, &v), 406);
		assert_string_equal(v.why, "not acceptable: GET serves text/event-stream");
		assert_int_equal(check(&p, "POST", "/mcp", h, &v), 0);
		assert_true(v.want_json);
		assert_false(v.want_sse);
	}
	{
		const char *h[] = { "Accept", "text/*", "Content-Type", "application/json; charset=utf-8", NULL };

		assert_int_equal(check(&p, "POST", "/mcp", h, &v), 0);
		assert_false(v.want_json);
		assert_true(v.want_sse);
	}
	{
		const char *h[] = { "Content-Type", "text/plain", NULL };

		assert_int_equal(check(&p, "POST", "/mcp", h, &v), 415);
		/* GET and DELETE have no body to type */
		assert_int_equal(check(&p, "GET", "/mcp", h, &v), 0);
	}
	/* Media types are compared whole, never by prefix or substring. */
	{
		static const char *const bad[] = { "application/jsonp", "application/json-seq",
						   "application/json5; x", "xapplication/json", NULL };

		for (size_t i = 0; bad[i]; i++) {
			const char *h[] = { "Content-Type", bad[i], NULL };

			assert_int_equal(check(&p, "POST", "/mcp", h, &v), 415);
		}
	}
	{
		const char *h[] = { "Content-Type", " APPLICATION/JSON ;charset=utf-8", NULL };

		assert_int_equal(check(&p, "POST", "/mcp", h, &v), 0);
	}
	{
		const char *h[] = { "Accept", "application/jsonp, text/event-streams", NULL };

		assert_int_equal(check(&p, "POST", "/mcp", h, &v), 406);
	}
	{
		const char *h[] = { "Accept", "application/json;q=0, text/event-stream;q=0.5", NULL };

		assert_int_equal(check(&p, "POST", "/mcp", h, &v), 0);
		assert_false(v.want_json); /* q=0: not acceptable */
		assert_true(v.want_sse);
	}
	{
		const char *h[] = { "Accept", "*/*;q=0.1", NULL };

		assert_int_equal(check(&p, "POST", "/mcp", h, &v), 0);
		assert_true(v.want_json && v.want_sse);
	}
}

/* ---- tokens and ids -------------------------------------------------------------------- */

static void test_bearer(void **state)
{
	struct sg_http_policy p;
	char owner[96];
	bool bad;
	static const char *const wrong[] = {
		"Bearer tok-b", "Bearer tok-", "Bearer tok-aa", "Bearer TOK-A", "Bearer  tok-a x",
		"Bearer ", "Bearer \t",
	};
	static const char *const missing[] = { "Basic dG9rLWE=", "Bearer", "Bearertok-a", "tok-a", "" };

	(void)state;
	policy(&p, true);
	assert_int_equal(sg_http_authenticate(&p, "Bearer tok-a", owner, &bad), 0);
	assert_false(bad);
	assert_int_equal(strncmp(owner, "token:", 6), 0);
	assert_int_equal(strlen(owner), 22);
	{
		char again[96];

		/* case of the scheme, blanks around the token: the same credential */
		assert_int_equal(sg_http_authenticate(&p, "bEARER   tok-a \t", again, &bad), 0);
		assert_string_equal(again, owner);
	}
	for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++) {
		assert_int_equal(sg_http_authenticate(&p, wrong[i], owner, &bad), -1);
		assert_true(bad);
	}
	for (size_t i = 0; i < sizeof(missing) / sizeof(missing[0]); i++) {
		assert_int_equal(sg_http_authenticate(&p, missing[i], owner, &bad), -1);
		assert_false(bad);
	}
	assert_int_equal(sg_http_authenticate(&p, NULL, owner, &bad), -1);
	assert_false(bad);
	/* Without configured tokens every request is the local owner's. */
	p.n_tokens = 0;
	assert_int_equal(sg_http_authenticate(&p, "Bearer whatever", owner, &bad), 0);
	assert_string_equal(owner, "local:1000");
}

static void test_ids(void **state)
{
	char id[80];
	unsigned a, b;
	static const char *const bad_events[] = {
		"", "-", "1", "1-", "-1", "1-2-3", " 1-2", "1 -2", "1-2 ", "+1-2", "1--2", "1-+2",
		"4294967296-0", "0-4294967296", "99999999999999999999-1", "a-1", "1-a", "0x1-1",
	};

	(void)state;
	memset(id, 'a', 64);
	id[64] = '\0';
	assert_true(sg_http_session_id_valid(id));
	memcpy(id, "0123456789abcdef", 16);
	assert_true(sg_http_session_id_valid(id));
	id[3] = 'A';
	assert_false(sg_http_session_id_valid(id));
	id[3] = 'g';
	assert_false(sg_http_session_id_valid(id));
	id[3] = '3';
	id[63] = '\0';
	assert_false(sg_http_session_id_valid(id));
	id[63] = 'a';
	id[64] = 'a';
	id[65] = '\0';
	assert_false(sg_http_session_id_valid(id));
	assert_false(sg_http_session_id_valid(""));
	assert_false(sg_http_session_id_valid("nope"));

	assert_int_equal(sg_http_event_id_parse("3-0", &a, &b), 0);
	assert_int_equal(a, 3);
	assert_int_equal(b, 0);
	assert_int_equal(sg_http_event_id_parse("4294967295-4294967295", &a, &b), 0);
	assert_int_equal(a, 4294967295u);
	assert_int_equal(b, 4294967295u);
	assert_int_equal(sg_http_event_id_parse("007-08", &a, &b), 0);
	assert_int_equal(a, 7);
	assert_int_equal(b, 8);
	for (size_t i = 0; i < sizeof(bad_events) / sizeof(bad_events[0]); i++)
		if (sg_http_event_id_parse(bad_events[i], &a, &b) == 0)
			fail_msg("Last-Event-ID '%s' should not parse", bad_events[i]);
}

static void test_body_initialize(void **state)
{
	static const char init[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}";

	(void)state;
	assert_true(sg_http_body_is_initialize(init, strlen(init)));
	assert_false(sg_http_body_is_initialize(init, strlen(init) - 1));
	assert_false(sg_http_body_is_initialize("{\"jsonrpc\":\"2.0\",\"method\":\"initialize\"}", 38));
	assert_false(sg_http_body_is_initialize("{\"id\":1,\"method\":\"ping\"}", 24));
	assert_false(sg_http_body_is_initialize("[{\"id\":1,\"method\":\"initialize\"}]", 32));
	assert_false(sg_http_body_is_initialize(NULL, 0));
	assert_false(sg_http_body_is_initialize("", 0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_host),
		cmocka_unit_test(test_parse_origin),
		cmocka_unit_test(test_host_origin),
		cmocka_unit_test(test_allow_list),
		cmocka_unit_test(test_request_order),
		cmocka_unit_test(test_framing),
		cmocka_unit_test(test_message),
		cmocka_unit_test(test_bearer),
		cmocka_unit_test(test_ids),
		cmocka_unit_test(test_body_initialize),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
