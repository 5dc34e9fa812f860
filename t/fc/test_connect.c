/*
 * Unit tests of plugins/fc/connect.c: Connect envelopes split anywhere,
 * caps on untrusted frames, proto3-JSON quirks and base64 (fc-protocol.md
 * 5.1).  cmocka, TAP output.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "plugins/fc/connect.h"

struct collected {
	int n;
	uint8_t flags[8];
	char msg[8][64];
};

static int collect(void *ud, uint8_t flags, const char *p, size_t n)
{
	struct collected *c = ud;

	if (c->n >= 8 || n >= 64)
		return -1;
	c->flags[c->n] = flags;
	memcpy(c->msg[c->n], p, n);
	c->msg[c->n][n] = '\0';
	c->n++;
	return 0;
}

static void test_envelope_encode(void **state)
{
	unsigned char *e = fc_envelope(0, "{\"a\":1}", 7);

	(void)state;
	assert_non_null(e);
	assert_memory_equal(e, "\x00\x00\x00\x00\x07{\"a\":1}", 12);
	free(e);
}

/* Two envelopes fed in every possible split: the same two messages. */
static void test_envelope_split_anywhere(void **state)
{
	unsigned char *a = fc_envelope(FC_ENV_DATA, "{\"event\":{}}", 12);
	unsigned char *b = fc_envelope(FC_ENV_END, "{}", 2);
	unsigned char *z = fc_envelope(FC_ENV_DATA, "", 0);
	char stream[64];
	size_t n = 0;

	(void)state;
	memcpy(stream + n, a, 17);
	n += 17;
	memcpy(stream + n, z, 5);
	n += 5;
	memcpy(stream + n, b, 7);
	n += 7;
	for (size_t cut1 = 0; cut1 <= n; cut1++) {
		for (size_t cut2 = cut1; cut2 <= n; cut2++) {
			struct fc_env_dec d;
			struct collected c = { 0 };

			fc_env_init(&d, 1024);
			assert_int_equal(fc_env_feed(&d, stream, cut1, collect, &c), 0);
			assert_int_equal(fc_env_feed(&d, stream + cut1, cut2 - cut1, collect, &c), 0);
			assert_int_equal(fc_env_feed(&d, stream + cut2, n - cut2, collect, &c), 0);
			assert_int_equal(c.n, 3);
			assert_string_equal(c.msg[0], "{\"event\":{}}");
			assert_string_equal(c.msg[1], "");
			assert_string_equal(c.msg[2], "{}");
			assert_int_equal(c.flags[2], FC_ENV_END);
			assert_true(fc_env_idle(&d));
			fc_env_free(&d);
		}
	}
	free(a);
	free(b);
	free(z);
}

static void test_envelope_caps(void **state)
{
	struct fc_env_dec d;
	struct collected c = { 0 };
	const char big[] = "\x00\x7f\xff\xff\xff";
	const char gz[] = "\x01\x00\x00\x00\x01x";
	const char odd[] = "\x80\x00\x00\x00\x01x";

	(void)state;
	fc_env_init(&d, 1024);
	assert_int_equal(fc_env_feed(&d, big, 5, collect, &c), -1);
	assert_non_null(strstr(d.why, "more than the 1024 allowed"));
	assert_int_equal(fc_env_feed(&d, "x", 1, collect, &c), -1); /* stays failed */
	fc_env_free(&d);
	fc_env_init(&d, 1024);
	assert_int_equal(fc_env_feed(&d, gz, 6, collect, &c), -1);
	assert_non_null(strstr(d.why, "compressed"));
	fc_env_free(&d);
	fc_env_init(&d, 1024);
	assert_int_equal(fc_env_feed(&d, odd, 6, collect, &c), -1);
	fc_env_free(&d);
	assert_int_equal(c.n, 0);
}

static void test_b64(void **state)
{
	size_t n;
	unsigned char *p;
	char *e;

	(void)state;
	p = fc_b64_decode("aGkK", 4, &n);
	assert_int_equal(n, 3);
	assert_memory_equal(p, "hi\n", 3);
	free(p);
	p = fc_b64_decode("aGk", 3, &n); /* no padding */
	assert_int_equal(n, 2);
	assert_memory_equal(p, "hi", 2);
	free(p);
	p = fc_b64_decode("-_8=", 4, &n); /* URL-safe */
	assert_int_equal(n, 2);
	assert_int_equal(p[0], 0xfb);
	assert_int_equal(p[1], 0xff);
	free(p);
	assert_null(fc_b64_decode("a$==", 4, &n));
	assert_null(fc_b64_decode("a", 1, &n));
	assert_null(fc_b64_decode("aGk=aGk=", 8, &n)); /* data after padding */
	p = fc_b64_decode("", 0, &n);
	assert_int_equal(n, 0);
	free(p);
	e = fc_b64_encode("\x00\xff\xfe", 3);
	assert_string_equal(e, "AP/+");
	free(e);
	e = fc_b64_encode("ab", 2);
	assert_string_equal(e, "YWI=");
	free(e);
}

static void test_proto3_json(void **state)
{
	static const char *const names[] = { "UNSPECIFIED", "FILE", "DIRECTORY", "SYMLINK" };
	json_t *v;

	(void)state;
	v = json_string("1234");
	assert_int_equal(fc_json_int64(v, -1), 1234);
	json_decref(v);
	v = json_integer(77);
	assert_int_equal(fc_json_int64(v, -1), 77);
	json_decref(v);
	v = json_string("12x");
	assert_int_equal(fc_json_int64(v, -1), -1);
	json_decref(v);
	assert_int_equal(fc_json_int64(NULL, 5), 5); /* omitted: the default */
	/* Outside int64: the default, never an undefined conversion (found by
	 * t/fuzz/fuzz_fc.c with a real 1e300). */
	v = json_real(1e300);
	assert_int_equal(fc_json_int64(v, -1), -1);
	json_decref(v);
	v = json_real(9223372036854775808.0);
	assert_int_equal(fc_json_int64(v, -1), -1);
	json_decref(v);
	v = json_real(-9223372036854775808.0);
	assert_true(fc_json_int64(v, -1) == INT64_MIN);
	json_decref(v);
	v = json_real(-42.9);
	assert_int_equal(fc_json_int64(v, -1), -42);
	json_decref(v);
	v = json_string("9223372036854775808");
	assert_int_equal(fc_json_int64(v, -1), -1);
	json_decref(v);
	v = json_string("-9223372036854775808");
	assert_true(fc_json_int64(v, -1) == INT64_MIN);
	json_decref(v);
	v = json_string("FILE_TYPE_DIRECTORY");
	assert_int_equal(fc_json_enum(v, "FILE_TYPE_", names, 4), 2);
	json_decref(v);
	v = json_integer(3);
	assert_int_equal(fc_json_enum(v, "FILE_TYPE_", names, 4), 3);
	json_decref(v);
	v = json_string("FILE_TYPE_SOCKET");
	assert_int_equal(fc_json_enum(v, "FILE_TYPE_", names, 4), -1);
	json_decref(v);
	v = json_integer(9);
	assert_int_equal(fc_json_enum(v, "FILE_TYPE_", names, 4), -1);
	json_decref(v);
}

static void test_rfc3339(void **state)
{
	(void)state;
	assert_int_equal(fc_rfc3339("2025-01-02T03:04:05Z"), 1735787045);
	assert_int_equal(fc_rfc3339("2025-01-02T03:04:05.123456789Z"), 1735787045);
	assert_int_equal(fc_rfc3339("2025-01-02T11:04:05+08:00"), 1735787045);
	assert_int_equal(fc_rfc3339("garbage"), 0);
	assert_int_equal(fc_rfc3339(NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_envelope_encode),
		cmocka_unit_test(test_envelope_split_anywhere),
		cmocka_unit_test(test_envelope_caps),
		cmocka_unit_test(test_b64),
		cmocka_unit_test(test_proto3_json),
		cmocka_unit_test(test_rfc3339),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
