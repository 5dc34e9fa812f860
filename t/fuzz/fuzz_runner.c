/*
 * Fuzz target: the runner protocol's frame decoder (plugins/runner/proto.c),
 * which both sides use: the plugins on the runner's output, sandgate-runner
 * on sandgate's.  The first byte chooses the payload cap and how the rest,
 * a byte stream, is cut into reads.
 *
 * Invariants: frames cut anywhere decode as they do whole and are the
 * input's prefix; a bad header stops the reader with a reason; every
 * payload's fields are walked and read as numbers and text, and a field
 * never runs past its payload.  (The client on top: fuzz_runner_client.c.)
 */
#include "config.h"

#include <string.h>

#include "plugins/runner/proto.h"
#include "t/fuzz/fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

struct frames {
	unsigned char *all;  /* header + payload of each frame, as decoded */
	size_t len;
};

static void fields(const unsigned char *p, size_t n)
{
	struct rn_iter it;
	struct rn_field f;
	int rc;
	size_t walked = 0;

	rn_iter_init(&it, p, n);
	while ((rc = rn_iter_next(&it, &f)) > 0) {
		uint32_t u;
		uint64_t w;
		char text[64];

		FUZZ_ASSERT(f.val >= p && f.val + f.len <= p + n);
		walked += 6 + (size_t)f.len;
		if (rn_field_u32(&f, &u) == 0)
			FUZZ_ASSERT(f.len == 4);
		if (rn_field_u64(&f, &w) == 0)
			FUZZ_ASSERT(f.len == 8);
		if (rn_field_str(&f, text, sizeof(text)) == 0)
			FUZZ_ASSERT(strlen(text) == f.len);
	}
	FUZZ_ASSERT(rc == 0 ? walked == n : walked < n);
}

static int keep(const struct rn_hdr *h, const unsigned char *payload, void *ud)
{
	struct frames *f = ud;

	FUZZ_ASSERT(h->len <= RN_MAX_PAYLOAD);
	rn_hdr_put(f->all + f->len, h->type, h->id, h->len);
	if (h->len)
		memcpy(f->all + f->len + RN_HDR_SIZE, payload, h->len);
	f->len += RN_HDR_SIZE + h->len;
	fields(payload, h->len);
	return 0;
}

static void reader(unsigned mode, const unsigned char *p, size_t n)
{
	uint32_t max = (mode >> 3) ? (mode >> 3) * 8 : RN_MAX_PAYLOAD;
	struct rn_reader a, b;
	struct frames fa = { malloc(n + 1), 0 }, fb = { malloc(n + 1), 0 };
	int ra, rb = 0;

	rn_reader_init(&a, max);
	rn_reader_init(&b, max);
	ra = rn_reader_feed(&a, p, n, keep, &fa);
	for (size_t off = 0, k; off < n && rb == 0; off += k) {
		k = 1 + (mode * 37u + off) % (mode & 4 ? 3 : 61);
		if (k > n - off)
			k = n - off;
		rb = rn_reader_feed(&b, p + off, k, keep, &fb);
	}
	FUZZ_ASSERT(ra == rb);
	/* the frames are the input's prefix, whichever way it came */
	FUZZ_ASSERT(fa.len == fb.len && fa.len <= n);
	FUZZ_ASSERT(!fa.len || (!memcmp(fa.all, fb.all, fa.len) && !memcmp(fa.all, p, fa.len)));
	if (ra == 0)
		FUZZ_ASSERT(rn_reader_idle(&a) == (fa.len == n));
	else
		FUZZ_ASSERT(a.why[0]);
	rn_reader_free(&a);
	rn_reader_free(&b);
	free(fa.all);
	free(fb.all);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size };
	unsigned mode = fuzz_byte(&in);

	reader(mode, in.p, in.n);
	return 0;
}
