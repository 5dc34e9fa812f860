/*
 * Fuzz target: the Docker attach-stream demultiplexer
 * (plugins/docker/demux.c).  The first byte chooses how the rest, a stream
 * from the engine, is cut into reads and how much payload one step may
 * take; the stream goes through docker_demux_step() in those pieces and
 * through docker_demux_feed() whole.
 *
 * Oracle: a reference reading of the frames (8-byte header, stream byte 0
 * to 3, three zero bytes, big-endian length): both ways give the same bytes
 * per stream, stop at the same malformed header, and end idle exactly when
 * the stream ends between frames.
 */
#include <string.h>

#include "plugins/docker/demux.h"
#include "t/fuzz/fuzz.h"

struct acc {
	unsigned char *out[4];
	size_t len[4];
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

static void acc_add(struct acc *a, int stream, const void *p, size_t n)
{
	FUZZ_ASSERT(stream >= 0 && stream <= 3);
	memcpy(a->out[stream] + a->len[stream], p, n);
	a->len[stream] += n;
}

static int sink(int stream, const void *data, size_t len, void *ud)
{
	acc_add(ud, stream, data, len);
	return 0;
}

/* Returns 0 (idle at the end), 1 (a frame cut short) or -1 (bad header). */
static int reference(const unsigned char *p, size_t n, struct acc *a)
{
	while (n > 0) {
		uint32_t len;
		size_t take;

		if (n < 8)
			return 1;
		if (p[0] > 3 || p[1] || p[2] || p[3])
			return -1;
		len = (uint32_t)p[4] << 24 | (uint32_t)p[5] << 16 | (uint32_t)p[6] << 8 | p[7];
		take = len < n - 8 ? len : n - 8;
		acc_add(a, p[0], p + 8, take);
		if (take < len)
			return 1;
		p += 8 + len;
		n -= 8 + len;
	}
	return 0;
}

static void acc_init(struct acc *a, size_t n)
{
	for (int i = 0; i < 4; i++) {
		a->out[i] = malloc(n + 1);
		a->len[i] = 0;
	}
}

static void acc_same(const struct acc *a, const struct acc *b)
{
	for (int i = 0; i < 4; i++)
		FUZZ_ASSERT(a->len[i] == b->len[i] && !memcmp(a->out[i], b->out[i], a->len[i]));
}

static void acc_free(struct acc *a)
{
	for (int i = 0; i < 4; i++)
		free(a->out[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size };
	unsigned mode = fuzz_byte(&in);
	const unsigned char *p = in.p;
	size_t n = in.n, off = 0;
	struct acc want, step, whole;
	struct docker_demux d;
	int ref, rc = 0;

	acc_init(&want, n);
	acc_init(&step, n);
	acc_init(&whole, n);
	ref = reference(p, n, &want);

	docker_demux_init(&d);
	while (off < n && rc == 0) {
		size_t k = 1 + (mode * 131u + off) % (mode & 1 ? 3 : 97), used = 0;

		if (k > n - off)
			k = n - off;
		while (used < k) {
			struct docker_demux_piece piece;
			ssize_t u = docker_demux_step(&d, p + off + used, k - used, mode >> 4, &piece);

			if (u < 0) {
				rc = -1;
				break;
			}
			FUZZ_ASSERT(u > 0 && (size_t)u <= k - used);
			if (piece.data) {
				FUZZ_ASSERT(piece.data == p + off + used && piece.len == (size_t)u);
				if ((mode >> 4) > 0)
					FUZZ_ASSERT(piece.len <= (mode >> 4));
				acc_add(&step, piece.stream, piece.data, piece.len);
			}
			used += (size_t)u;
		}
		off += k;
	}
	FUZZ_ASSERT(rc == (ref < 0 ? -1 : 0));
	if (rc == 0)
		FUZZ_ASSERT(docker_demux_idle(&d) == (ref == 0));
	acc_same(&want, &step);

	docker_demux_init(&d);
	rc = docker_demux_feed(&d, p, n, sink, &whole);
	FUZZ_ASSERT(rc == (ref < 0 ? -1 : 0));
	acc_same(&want, &whole);
	acc_free(&want);
	acc_free(&step);
	acc_free(&whole);
	return 0;
}
