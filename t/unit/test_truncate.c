/*
 * Unit tests for the shell output truncation (sg_shell_truncate in
 * core/shell/shell.c): head and tail kept by bytes, each cut at a UTF-8 character
 * boundary, a line that says how many bytes were dropped from the middle.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/shell/shell.h"
#include "core/base/util.h"

static char *repeat(const char *unit, size_t times, size_t *len)
{
	size_t u = strlen(unit);
	char *s = malloc(u * times + 1);

	assert_non_null(s);
	for (size_t i = 0; i < times; i++)
		memcpy(s + i * u, unit, u);
	s[u * times] = '\0';
	*len = u * times;
	return s;
}

static void test_fits(void **state)
{
	size_t n;
	uint64_t dropped;
	char *s = sg_shell_truncate("hello\n", 6, 6, &n, &dropped);

	(void)state;
	assert_string_equal(s, "hello\n");
	assert_int_equal(n, 6);
	assert_int_equal(dropped, 0);
	free(s);
}

static void test_ascii(void **state)
{
	char text[1001], *s;
	size_t n;
	uint64_t dropped;

	(void)state;
	for (int i = 0; i < 1000; i++)
		text[i] = (char)('a' + i % 26);
	text[1000] = '\0';
	s = sg_shell_truncate(text, 1000, 100, &n, &dropped);
	assert_int_equal(dropped, 900);
	assert_memory_equal(s, text, 10);                       /* the head: a tenth */
	assert_memory_equal(s + n - 90, text + 910, 90);        /* the tail: the rest */
	assert_non_null(strstr(s, "[sandgate: 900 bytes dropped from the middle of the output]"));
	free(s);
}

static void test_utf8_boundaries(void **state)
{
	size_t len, n;
	uint64_t dropped;
	char *text = repeat("\xC3\xA9", 100, &len); /* é: 2 bytes */
	char *s;

	(void)state;
	/* head 5 bytes -> 4 (two whole é), tail 47 -> 46 (skips a continuation byte) */
	s = sg_shell_truncate(text, len, 52, &n, &dropped);
	assert_int_equal(dropped, 150);
	assert_true(sg_utf8_valid(s, n));
	assert_memory_equal(s, "\xC3\xA9\xC3\xA9\n[sandgate: 150", 15);
	free(s);
	free(text);

	text = repeat("\xF0\x9F\x98\x80", 50, &len); /* an emoji: 4 bytes */
	for (size_t max = 10; max < 60; max++) {
		s = sg_shell_truncate(text, len, max, &n, &dropped);
		assert_true(sg_utf8_valid(s, n));
		assert_int_equal(dropped % 4, 0);
		free(s);
	}
	free(text);
}

static void test_tiny_max(void **state)
{
	size_t n;
	uint64_t dropped;
	char *s = sg_shell_truncate("abcdef", 6, 1, &n, &dropped);

	(void)state;
	assert_int_equal(dropped, 5);
	assert_int_equal(s[n - 1], 'f');
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fits),
		cmocka_unit_test(test_ascii),
		cmocka_unit_test(test_utf8_boundaries),
		cmocka_unit_test(test_tiny_max),
	};

	return cmocka_run_group_tests_name("truncate", tests, NULL, NULL);
}
