/*
 * base64 (core/base/util.c, sg_base64_encode and sg_base64_decode, RFC 4648
 * section 4, with padding): every byte value round-trips at every length
 * modulo 3, and encodes in place the same; a decode takes only the alphabet, '=' only as the last one or
 * two characters, and a length that is a multiple of 4, and refuses the
 * rest with NULL (a write's content never decodes to bytes it did not say).
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/base/util.h"

static void test_round_trip(void **state)
{
	unsigned char all[256 + 2];

	(void)state;
	for (int i = 0; i < 256; i++)
		all[i] = (unsigned char)i;
	all[256] = 0;
	all[257] = 0xff;
	for (size_t n = 0; n <= sizeof(all); n += n < 8 ? 1 : 83) {
		char *enc = sg_base64_encode(all, n);
		size_t len = 99;
		unsigned char *dec = sg_base64_decode(enc, &len);

		assert_int_equal(strlen(enc), 4 * ((n + 2) / 3));
		assert_non_null(dec);
		assert_int_equal(len, n);
		assert_memory_equal(dec, all, n);
		free(dec);
		free(enc);
	}
}

/* In place: the bytes at the end of a buffer of their encoded size, with
 * the smallest gap allowed before them ((n + 2) / 3), come out as a
 * separate encoding does, every length modulo 3; decoded in place, the
 * bytes come back. */
static void test_in_place(void **state)
{
	unsigned char all[300];

	(void)state;
	for (size_t i = 0; i < sizeof(all); i++)
		all[i] = (unsigned char)(i * 7 + 3);
	for (size_t n = 0; n <= sizeof(all); n++) {
		size_t gap = (n + 2) / 3, size = 4 * gap;
		char *want = sg_base64_encode(all, n), *buf = malloc(size + 1);

		assert_true(gap + n <= size);
		memcpy(buf + gap, all, n);
		assert_int_equal(sg_base64_encode_to(buf, buf + gap, n), size);
		assert_memory_equal(buf, want, size);
		/* and back, decoded where it lies */
		assert_int_equal(sg_base64_decode_to(buf, buf, size), n);
		assert_memory_equal(buf, all, n);
		free(buf);
		free(want);
	}
}

static void test_known(void **state)
{
	size_t len;
	char *dec;

	(void)state;
	dec = sg_base64_decode("aGk=", &len);
	assert_int_equal(len, 2);
	assert_memory_equal(dec, "hi", 2);
	free(dec);
	dec = sg_base64_decode("aA==", &len);
	assert_int_equal(len, 1);
	assert_memory_equal(dec, "h", 1);
	free(dec);
	dec = sg_base64_decode("+/+/", &len);
	assert_int_equal(len, 3);
	assert_memory_equal(dec, "\xfb\xff\xbf", 3);
	free(dec);
	dec = sg_base64_decode("", &len);
	assert_non_null(dec);
	assert_int_equal(len, 0);
	free(dec);
}

static void test_refused(void **state)
{
	const char *bad[] = {
		"aGk", "aGk==", "a===", "====", "=aGk", "aG=k", "ab=c", "aGk=aGk=", "aG k",
		"aGk\n", "aGk-", "aGk_", "aGk\x80", "\xc3\xa9GkA",
	};
	size_t len;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		void *dec = sg_base64_decode(bad[i], &len);

		if (dec)
			fail_msg("'%s' decoded (%zu bytes)", bad[i], len);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_in_place),
		cmocka_unit_test(test_known),
		cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
