/*
 * Unit tests for the Docker attach-stream demultiplexer (plugins/docker/demux.c):
 * frames split at every byte and in random chunks must give back the exact
 * stdout and stderr bytes, never a header byte, and bad headers are refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "plugins/docker/demux.h"

/* A growable byte string for the expected and collected streams. */
struct bytes {
	unsigned char *p;
	size_t len;
};

static void bytes_add(struct bytes *b, const void *p, size_t n)
{
	unsigned char *q = realloc(b->p, b->len + n + 1);

	if (!q)
		abort(); /* out of memory in a test: nothing to report */
	b->p = q;
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

/* What the sink collected, per stream. */
struct sink {
	struct bytes out, err;
	int pieces;
};

static int collect(int stream, const void *data, size_t len, void *ud)
{
	struct sink *s = ud;

	assert_true(len > 0);
	s->pieces++;
	if (stream == DOCKER_STREAM_STDERR)
		bytes_add(&s->err, data, len);
	else
		bytes_add(&s->out, data, len);
	return 0;
}

/* A multiplexed wire image and the streams it encodes. */
struct wire {
	struct bytes raw, out, err;
};

static void wire_frame(struct wire *w, int stream, const void *p, size_t n)
{
	unsigned char h[8] = { (unsigned char)stream, 0, 0, 0,
			       (unsigned char)(n >> 24), (unsigned char)(n >> 16),
			       (unsigned char)(n >> 8), (unsigned char)n };

	bytes_add(&w->raw, h, sizeof(h));
	if (n > 0)
		bytes_add(&w->raw, p, n);
	if (stream == DOCKER_STREAM_STDERR)
		bytes_add(&w->err, p, n);
	else
		bytes_add(&w->out, p, n);
}

static void wire_free(struct wire *w)
{
	free(w->raw.p);
	free(w->out.p);
	free(w->err.p);
}

static void sink_free(struct sink *s)
{
	free(s->out.p);
	free(s->err.p);
}

static void assert_same(const struct bytes *want, const struct bytes *got)
{
	assert_int_equal(want->len, got->len);
	if (want->len > 0)
		assert_memory_equal(want->p, got->p, want->len);
}

/* Feeds w->raw in chunks of the sizes chunk(i) returns and checks the result. */
static void feed_in_chunks(const struct wire *w, size_t (*chunk)(size_t i))
{
	struct docker_demux d;
	struct sink s = { 0 };
	size_t off = 0, i = 0, n;

	docker_demux_init(&d);
	while (off < w->raw.len) {
		n = chunk(i++);
		if (n > w->raw.len - off)
			n = w->raw.len - off;
		assert_int_equal(docker_demux_feed(&d, w->raw.p + off, n, collect, &s), 0);
		off += n;
	}
	assert_true(docker_demux_idle(&d));
	assert_same(&w->out, &s.out);
	assert_same(&w->err, &s.err);
	sink_free(&s);
}

static size_t one_byte(size_t i)
{
	(void)i;
	return 1;
}

static size_t random_size(size_t i)
{
	(void)i;
	return 1 + (size_t)(rand() % 23);
}

static size_t whole(size_t i)
{
	(void)i;
	return SIZE_MAX;
}

/* A mix of frames: text, binary with header-like bytes, empty frames, and one
 * frame longer than 65535 bytes so every length byte is used. */
static void make_mixed(struct wire *w)
{
	unsigned char bin[256], *big;
	size_t i, big_len = 70000 + 3;

	for (i = 0; i < sizeof(bin); i++)
		bin[i] = (unsigned char)i;
	wire_frame(w, DOCKER_STREAM_STDOUT, "hello\n", 6);
	wire_frame(w, DOCKER_STREAM_STDERR, "oops\n", 5);
	wire_frame(w, DOCKER_STREAM_STDOUT, "", 0);
	wire_frame(w, DOCKER_STREAM_STDOUT, bin, sizeof(bin));
	wire_frame(w, DOCKER_STREAM_STDERR, "\x01\0\0\0\0\0\0\x02", 8);
	big = malloc(big_len);
	assert_non_null(big);
	for (i = 0; i < big_len; i++)
		big[i] = (unsigned char)(i * 7 + 1);
	wire_frame(w, DOCKER_STREAM_STDOUT, big, big_len);
	free(big);
	wire_frame(w, DOCKER_STREAM_STDERR, "", 0);
	wire_frame(w, DOCKER_STREAM_STDOUT, "tail", 4);
}

static void test_one_byte_at_a_time(void **state)
{
	struct wire w = { 0 };

	(void)state;
	make_mixed(&w);
	feed_in_chunks(&w, one_byte);
	wire_free(&w);
}

static void test_random_chunks(void **state)
{
	struct wire w = { 0 };
	int round;

	(void)state;
	make_mixed(&w);
	srand(20240601);
	for (round = 0; round < 200; round++)
		feed_in_chunks(&w, random_size);
	feed_in_chunks(&w, whole);
	wire_free(&w);
}

/* The case that once lost bytes: a 51-byte stdout frame, then a stderr line,
 * then a stdout line, split at every possible point in two reads. */
static void test_51_stderr_stdout(void **state)
{
	struct wire w = { 0 };
	const char *line51 = "01234567890123456789012345678901234567890123456789\n";
	struct docker_demux d;
	size_t cut;

	(void)state;
	assert_int_equal(strlen(line51), 51);
	wire_frame(&w, DOCKER_STREAM_STDOUT, line51, 51);
	wire_frame(&w, DOCKER_STREAM_STDERR, "to stderr\n", 10);
	wire_frame(&w, DOCKER_STREAM_STDOUT, "to stdout\n", 10);
	for (cut = 0; cut <= w.raw.len; cut++) {
		struct sink s = { 0 };

		docker_demux_init(&d);
		assert_int_equal(docker_demux_feed(&d, w.raw.p, cut, collect, &s), 0);
		assert_int_equal(docker_demux_feed(&d, w.raw.p + cut,
						   w.raw.len - cut, collect, &s), 0);
		assert_true(docker_demux_idle(&d));
		assert_same(&w.out, &s.out);
		assert_same(&w.err, &s.err);
		sink_free(&s);
	}
	feed_in_chunks(&w, one_byte);
	wire_free(&w);
}

/* step() never hands out more than max payload bytes, and a reader that pulls
 * small pieces still sees the exact stream. */
static void test_step_max(void **state)
{
	struct wire w = { 0 };
	struct docker_demux d;
	struct docker_demux_piece piece;
	struct sink s = { 0 };
	size_t off = 0;
	ssize_t used;

	(void)state;
	make_mixed(&w);
	docker_demux_init(&d);
	while (off < w.raw.len) {
		used = docker_demux_step(&d, w.raw.p + off, w.raw.len - off, 3, &piece);
		assert_true(used > 0);
		assert_true(piece.len <= 3);
		if (piece.len > 0) {
			assert_ptr_equal(piece.data, w.raw.p + off);
			collect(piece.stream, piece.data, piece.len, &s);
		}
		off += (size_t)used;
	}
	assert_true(docker_demux_idle(&d));
	assert_same(&w.out, &s.out);
	assert_same(&w.err, &s.err);
	sink_free(&s);
	wire_free(&w);
}

static void test_idle_only_between_frames(void **state)
{
	struct docker_demux d;
	struct sink s = { 0 };
	const unsigned char frame[] = { 1, 0, 0, 0, 0, 0, 0, 2, 'o', 'k' };

	(void)state;
	docker_demux_init(&d);
	assert_true(docker_demux_idle(&d));
	assert_int_equal(docker_demux_feed(&d, frame, 3, collect, &s), 0);
	assert_false(docker_demux_idle(&d));
	assert_int_equal(docker_demux_feed(&d, frame + 3, 6, collect, &s), 0);
	assert_false(docker_demux_idle(&d));
	assert_int_equal(docker_demux_feed(&d, frame + 9, 1, collect, &s), 0);
	assert_true(docker_demux_idle(&d));
	assert_int_equal(s.out.len, 2);
	assert_memory_equal(s.out.p, "ok", 2);
	sink_free(&s);
}

static void test_bad_headers(void **state)
{
	const unsigned char bad_stream[] = { 4, 0, 0, 0, 0, 0, 0, 1, 'x' };
	const unsigned char bad_pad[] = { 1, 0, 1, 0, 0, 0, 0, 1, 'x' };
	const unsigned char tty_text[] = "total 0\n";
	struct docker_demux d;
	struct sink s = { 0 };

	(void)state;
	docker_demux_init(&d);
	assert_int_equal(docker_demux_feed(&d, bad_stream, sizeof(bad_stream),
					   collect, &s), -1);
	docker_demux_init(&d);
	assert_int_equal(docker_demux_feed(&d, bad_pad, sizeof(bad_pad),
					   collect, &s), -1);
	docker_demux_init(&d);
	assert_int_equal(docker_demux_feed(&d, tty_text, sizeof(tty_text) - 1,
					   collect, &s), -1);
	assert_int_equal(s.pieces, 0);
	sink_free(&s);
}

static int stop_at_first(int stream, const void *data, size_t len, void *ud)
{
	(void)stream;
	(void)data;
	(void)len;
	(*(int *)ud)++;
	return 7;
}

static void test_sink_stops_feed(void **state)
{
	const unsigned char two[] = { 1, 0, 0, 0, 0, 0, 0, 1, 'a',
				      2, 0, 0, 0, 0, 0, 0, 1, 'b' };
	struct docker_demux d;
	int calls = 0;

	(void)state;
	docker_demux_init(&d);
	assert_int_equal(docker_demux_feed(&d, two, sizeof(two), stop_at_first,
					   &calls), 7);
	assert_int_equal(calls, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_byte_at_a_time),
		cmocka_unit_test(test_random_chunks),
		cmocka_unit_test(test_51_stderr_stdout),
		cmocka_unit_test(test_step_max),
		cmocka_unit_test(test_idle_only_between_frames),
		cmocka_unit_test(test_bad_headers),
		cmocka_unit_test(test_sink_stops_feed),
	};

	return cmocka_run_group_tests_name("demux", tests, NULL, NULL);
}
