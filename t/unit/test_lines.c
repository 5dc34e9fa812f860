/*
 * Unit tests for the stdio line framing (transports/lines.c): lines split
 * across reads anywhere, trimming and empty lines, the unterminated last
 * line, one report per line over max however it arrives, bytes searched
 * once, and a buffer that does not grow with a dropped line.
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

#include "transports/lines.h"

/* What came out of a feed, as text: each line in [], each report as '!'. */
struct out {
	char text[4096];
	size_t n;
};

static void put(struct out *o, const char *s, size_t n)
{
	assert_true(o->n + n < sizeof(o->text));
	memcpy(o->text + o->n, s, n);
	o->n += n;
	o->text[o->n] = '\0';
}

static void drain(struct sg_lines *l, struct out *o)
{
	const char *line;
	size_t n;
	enum sg_lines_result r;

	while ((r = sg_lines_next(l, &line, &n)) != SG_LINES_NONE) {
		if (r == SG_LINES_TOO_LONG) {
			/* its first bytes come along, for its id */
			assert_true(n > l->max && n <= SG_LINES_HEAD);
			assert_true(line[0] != '\n');
			put(o, "!", 1);
			continue;
		}
		put(o, "[", 1);
		put(o, line, n);
		put(o, "]", 1);
	}
}

static void add(struct sg_lines *l, const char *p, size_t n)
{
	size_t room;
	char *dst = sg_lines_room(l, n ? n : 1, &room);

	assert_true(room >= n);
	memcpy(dst, p, n);
	sg_lines_added(l, n);
}

/* Feeds text in pieces of `step` bytes (draining after each), then the end
 * of input; returns what came out. */
static const char *feed(const char *text, size_t max, size_t step)
{
	static struct out o;
	struct sg_lines l;
	size_t len = strlen(text);
	const char *line;
	size_t n;

	memset(&o, 0, sizeof(o));
	sg_lines_init(&l, max);
	for (size_t i = 0; i < len; i += step) {
		add(&l, text + i, len - i < step ? len - i : step);
		drain(&l, &o);
	}
	if (sg_lines_last(&l, &line, &n)) {
		put(&o, "<", 1);
		put(&o, line, n);
		put(&o, ">", 1);
	}
	sg_lines_free(&l);
	return o.text;
}

/* Every split gives the same lines. */
static void same_each_step(const char *text, size_t max, const char *want)
{
	for (size_t step = 1; step <= strlen(text) + 1; step++)
		if (strcmp(feed(text, max, step), want) != 0)
			fail_msg("step %zu: got '%s', want '%s'", step, feed(text, max, step), want);
}

static void test_lines(void **state)
{
	(void)state;
	same_each_step("a\nbb\n", 100, "[a][bb]");
	same_each_step("a\r\n \t\n\n\r\nb \t\r\n", 100, "[a][b]");
	same_each_step("a\nlast", 100, "[a]<last>");
	same_each_step("a\nlast \r", 100, "[a]<last>");
	same_each_step("a\n \r\t", 100, "[a]");
	same_each_step("", 100, "");
	same_each_step("\n\n\n", 100, "");
	same_each_step("x\ry\n", 100, "[x\ry]");
}

static void test_too_long(void **state)
{
	(void)state;
	/* max 4: "abcd" fits, "abcde" is over, told once whatever the split */
	same_each_step("abcd\nabcde\nok\n", 4, "[abcd]![ok]");
}

static void test_too_long_once(void **state)
{
	(void)state;
	same_each_step("abcd\nabcdefghijklmnopqrstuvwxyz0123456789\nok\n", 4, "[abcd]![ok]");
	same_each_step("0123456789\n0123456789\n", 4, "!!");
	/* a line of max bytes and its CR: the CR counts */
	same_each_step("abcd\r\nabc\r\n", 4, "![abc]");
	/* an unterminated one at the end: told once, nothing handled */
	same_each_step("ok\n0123456789", 4, "[ok]!");
	same_each_step("ok\n01234", 4, "[ok]!");
	same_each_step("ok\n0123", 4, "[ok]<0123>");
	/* max 0: every non-empty line is over */
	same_each_step("a\n\nb\n", 0, "!!");
}

/* The head of a dropped line: its first bytes, complete or not. */
static void test_too_long_head(void **state)
{
	struct sg_lines l;
	const char *line;
	size_t n;

	(void)state;
	sg_lines_init(&l, 8);
	add(&l, "{\"id\":42,\"pad\":1}\nok\n", 21);
	assert_int_equal(sg_lines_next(&l, &line, &n), SG_LINES_TOO_LONG);
	assert_int_equal(n, 17);
	assert_memory_equal(line, "{\"id\":42,\"pad\":1}", 17);
	assert_int_equal(sg_lines_next(&l, &line, &n), SG_LINES_LINE);
	assert_memory_equal(line, "ok", 2);
	/* not terminated yet: what has arrived */
	add(&l, "{\"id\":7,\"x", 10);
	assert_int_equal(sg_lines_next(&l, &line, &n), SG_LINES_TOO_LONG);
	assert_int_equal(n, 10);
	assert_memory_equal(line, "{\"id\":7,\"x", 10);
	add(&l, "yz\n", 3);
	assert_int_equal(sg_lines_next(&l, &line, &n), SG_LINES_NONE);
	sg_lines_free(&l);
}

/* A dropped line does not make the buffer grow, and bytes already searched
 * are not searched again. */
static void test_bounded(void **state)
{
	struct sg_lines l;
	char chunk[1000];
	struct out o = { 0 };

	(void)state;
	memset(chunk, 'x', sizeof(chunk));
	sg_lines_init(&l, 5000);
	for (int i = 0; i < 20000; i++) {
		add(&l, chunk, sizeof(chunk));
		(void)sg_lines_ready(&l);
		/* nothing before off + scanned is searched again */
		assert_int_equal(l.scanned, l.len - l.off);
		drain(&l, &o);
		assert_true(l.cap <= 262144);
	}
	assert_string_equal(o.text, "!");
	add(&l, "\nnext\n", 6);
	drain(&l, &o);
	assert_string_equal(o.text, "![next]");
	sg_lines_free(&l);
}

/* A long partial line under max is not copied on every read: off is
 * reclaimed only when that moves no more than it frees. */
static void test_room(void **state)
{
	struct sg_lines l;
	struct out o = { 0 };
	size_t room;

	(void)state;
	sg_lines_init(&l, 1 << 20);
	add(&l, "a\n", 2);
	drain(&l, &o);
	assert_int_equal(l.off, 0); /* all taken: reset */
	assert_int_equal(l.len, 0);
	add(&l, "b\ncccccccccc", 12);
	drain(&l, &o);
	assert_int_equal(l.off, 2);
	(void)sg_lines_room(&l, 1, &room);
	assert_int_equal(l.off, 2); /* 10 bytes to move for 2 freed: not yet */
	assert_string_equal(o.text, "[a][b]");
	(void)sg_lines_room(&l, l.cap, &room); /* no room without growing */
	assert_int_equal(l.off, 0);
	assert_true(room >= l.cap / 2);
	assert_memory_equal(l.buf, "cccccccccc", 10);
	assert_true(sg_lines_ready(&l) == false);
	add(&l, "\n", 1);
	assert_true(sg_lines_ready(&l));
	drain(&l, &o);
	assert_string_equal(o.text, "[a][b][cccccccccc]");
	sg_lines_free(&l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lines),
		cmocka_unit_test(test_too_long),
		cmocka_unit_test(test_too_long_once),
		cmocka_unit_test(test_too_long_head),
		cmocka_unit_test(test_bounded),
		cmocka_unit_test(test_room),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
