/*
 * Fuzz target: the stdio line framing (transports/lines.c).  The first
 * bytes choose the line cap and how the rest is cut into reads; the rest is
 * the input stream.
 *
 * The oracle is the whole stream split at every newline at once: however
 * the reads are cut, the framer gives the same lines (trimmed of trailing
 * '\r', ' ', '\t'; empty ones skipped), one SG_LINES_TOO_LONG per line over
 * the cap with its first bytes (for its id) and nothing else of it, the
 * unterminated last line at the end; the
 * buffer stays within the cap plus one read; sg_lines_ready() agrees with
 * sg_lines_next().
 */
#include "config.h"

#include <string.h>

#include "transports/lines.h"
#include "t/fuzz/fuzz.h"

#define MAX_READ 4096

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

/* How much of a dropped line the oracle compares: what is always there. */
static size_t head(size_t max)
{
	return max + 1 < 16 ? max + 1 : 16;
}

/* What the framer should give for the whole stream: each line as "L" +
 * text + "\n", each oversized one as "!" and its first bytes, the last
 * unterminated one as
 * "E" + text.  Returns the length written to out. */
static size_t expect(const char *p, size_t n, size_t max, char *out)
{
	size_t o = 0;

	while (n > 0) {
		const char *nl = memchr(p, '\n', n);
		size_t k = nl ? (size_t)(nl - p) : n, t = k;

		if (k > max) {
			out[o++] = '!';
			memcpy(out + o, p, head(max));
			o += head(max);
		} else {
			while (t > 0 && (p[t - 1] == '\r' || p[t - 1] == ' ' || p[t - 1] == '\t'))
				t--;
			if (t > 0) {
				out[o++] = nl ? 'L' : 'E';
				memcpy(out + o, p, t);
				o += t;
				if (nl)
					out[o++] = '\n';
			}
		}
		if (!nl)
			break;
		p += k + 1;
		n -= k + 1;
	}
	return o;
}

static size_t drain(struct sg_lines *l, char *out, size_t o)
{
	const char *line;
	size_t n;
	enum sg_lines_result r;
	bool ready = sg_lines_ready(l);

	r = sg_lines_next(l, &line, &n);
	/* not ready: next() has nothing to give without more bytes */
	FUZZ_ASSERT(ready || r == SG_LINES_NONE);
	for (; r != SG_LINES_NONE; r = sg_lines_next(l, &line, &n)) {
		if (r == SG_LINES_TOO_LONG) {
			/* the dropped line's first bytes, for its id */
			FUZZ_ASSERT(n >= l->max + 1 && n <= SG_LINES_HEAD);
			out[o++] = '!';
			memcpy(out + o, line, head(l->max));
			o += head(l->max);
			continue;
		}
		FUZZ_ASSERT(n > 0 && n <= l->max);
		FUZZ_ASSERT(!memchr(line, '\n', n));
		out[o++] = 'L';
		memcpy(out + o, line, n);
		o += n;
		out[o++] = '\n';
	}
	return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size };
	size_t max = fuzz_byte(&in) % 64;
	unsigned seed = fuzz_byte(&in);
	const char *p = (const char *)in.p;
	size_t n = in.n, off = 0, o = 0, want_n, room;
	char *got = malloc(3 * n + 8), *want = malloc(3 * n + 8);
	const char *line;
	struct sg_lines l;

	if (seed & 0x80)
		max = (max + 1) * 97; /* sometimes a cap beyond most lines */
	sg_lines_init(&l, max);
	while (off < n) {
		/* read sizes from 1 to MAX_READ, chosen by the seed */
		size_t k = 1 + (seed * 7919u + off * 31u) % (seed & 1 ? 7 : MAX_READ);
		char *dst;

		if (k > n - off)
			k = n - off;
		dst = sg_lines_room(&l, k, &room);
		FUZZ_ASSERT(room >= k);
		memcpy(dst, p + off, k);
		sg_lines_added(&l, k);
		off += k;
		o = drain(&l, got, o);
		/* what is kept is at most the cap and one read, plus a line the
		 * framer has not been asked about since */
		FUZZ_ASSERT(l.len - l.off <= max + k);
	}
	if (sg_lines_last(&l, &line, &room)) {
		got[o++] = 'E';
		memcpy(got + o, line, room);
		o += room;
	}
	want_n = expect(p, n, max, want);
	FUZZ_ASSERT(o == want_n && memcmp(got, want, o) == 0);
	sg_lines_free(&l);
	free(got);
	free(want);
	return 0;
}
