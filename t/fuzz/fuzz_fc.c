/*
 * Fuzz target: what fc.so reads off the network (plugins/fc): Connect
 * envelopes (connect.c), the process event stream in them (process.c), the
 * code interpreter's NDJSON lines (interp.c), base64 and the proto3-JSON
 * helpers.  The first byte picks the
 * parser and how the rest is cut into network reads.
 *
 * Oracles: a stream cut anywhere parses as it does whole (same envelopes,
 * same events, same output bytes and results); an envelope longer than the
 * cap or with unknown flags stops the decoder for good; base64 decodes what
 * it encodes.
 */
#include "config.h"

#include <string.h>

#include "plugins/fc/connect.h"
#include "plugins/fc/fc.h"
#include "t/fuzz/fuzz.h"
#include "t/lib/fakehost.h"

static const char *h_config_get(const char *section, const char *key)
{
	(void)section;
	(void)key;
	return NULL;
}

static const char *h_state_dir(void)
{
	return "/nonexistent";
}

static void h_log(enum sg_log_level level, const char *plugin, const char *fmt, ...)
{
	(void)level;
	(void)plugin;
	(void)fmt;
}

static const struct sg_host_api host = FAKEHOST_API(h_log, h_config_get, h_state_dir);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

/* The size of the next read: 1..97 bytes, chosen by mode and position. */
static size_t cut(unsigned mode, size_t off, size_t left)
{
	size_t k = 1 + (mode * 131u + off * 7u) % (mode & 8 ? 5 : 97);

	return k < left ? k : left;
}

/* ---- envelopes ------------------------------------------------------------------- */

struct msgs {
	struct sg_buf all; /* flags byte, 4-byte length, payload, per envelope */
};

static int keep(void *ud, uint8_t flags, const char *p, size_t n)
{
	struct msgs *m = ud;
	unsigned char h[5] = { flags, (unsigned char)(n >> 24), (unsigned char)(n >> 16),
			       (unsigned char)(n >> 8), (unsigned char)n };

	FUZZ_ASSERT(p[n] == '\0');
	FUZZ_ASSERT(!(flags & ~FC_ENV_END));
	sg_buf_append(&m->all, h, 5);
	sg_buf_append(&m->all, p, n);
	return 0;
}

static void envelopes(unsigned mode, const char *p, size_t n)
{
	size_t max = (mode >> 4) * 16;
	struct fc_env_dec a, b;
	struct msgs whole = { { 0 } }, cuts = { { 0 } };
	int ra, rb = 0;

	fc_env_init(&a, max);
	fc_env_init(&b, max);
	ra = fc_env_feed(&a, p, n, keep, &whole);
	for (size_t off = 0, k; off < n && rb == 0; off += k) {
		k = cut(mode, off, n - off);
		rb = fc_env_feed(&b, p + off, k, keep, &cuts);
	}
	FUZZ_ASSERT(ra == rb);
	FUZZ_ASSERT(whole.all.len == cuts.all.len);
	FUZZ_ASSERT(!whole.all.len || !memcmp(whole.all.data, cuts.all.data, whole.all.len));
	if (ra < 0) {
		FUZZ_ASSERT(a.failed && a.why[0]);
		FUZZ_ASSERT(fc_env_feed(&a, "x", 1, keep, &whole) == -1);
	} else {
		FUZZ_ASSERT(fc_env_idle(&a) == fc_env_idle(&b));
	}
	/* What was decoded encodes back to the input's prefix. */
	FUZZ_ASSERT(whole.all.len <= n && (!whole.all.len || !memcmp(whole.all.data, p, whole.all.len)));
	fc_env_free(&a);
	fc_env_free(&b);
	sg_buf_release(&whole.all);
	sg_buf_release(&cuts.all);
}

/* ---- process events ------------------------------------------------------------------ */

static void proc_out(void *ud, int fd, const char *p, size_t n)
{
	struct sg_buf *b = ud;

	FUZZ_ASSERT(fd == 1 || fd == 2);
	FUZZ_ASSERT(n > 0);
	sg_buf_append(b, fd == 1 ? "1" : "2", 1);
	sg_buf_append(b, p, n);
}

static int proc_run(unsigned mode, const char *p, size_t n, bool whole, struct fc_proc_events *pe,
		    struct sg_buf *out)
{
	int rc = 0;

	memset(pe, 0, sizeof(*pe));
	FUZZ_ASSERT(fc_proc_init(pe) == 0);
	pe->out = proc_out;
	pe->ud = out;
	if (whole)
		return fc_proc_feed(pe, p, n);
	for (size_t off = 0, k; off < n && rc == 0; off += k) {
		k = cut(mode, off, n - off);
		rc = fc_proc_feed(pe, p + off, k);
	}
	return rc;
}

static void process(unsigned mode, const char *p, size_t n)
{
	struct fc_proc_events a, b;
	struct sg_buf oa = { 0 }, ob = { 0 };
	int ra = proc_run(mode, p, n, true, &a, &oa), rb = proc_run(mode, p, n, false, &b, &ob);

	FUZZ_ASSERT(ra == rb);
	FUZZ_ASSERT(oa.len == ob.len && (!oa.len || !memcmp(oa.data, ob.data, oa.len)));
	FUZZ_ASSERT(a.started == b.started && a.ended == b.ended && a.trailer == b.trailer);
	FUZZ_ASSERT(a.pid == b.pid && a.exit_code == b.exit_code && a.signal == b.signal);
	FUZZ_ASSERT(!strcmp(a.tcode, b.tcode) && !strcmp(a.tmsg, b.tmsg));
	FUZZ_ASSERT((ra < 0) == (a.perr[0] != '\0'));
	if (a.signal)
		FUZZ_ASSERT(a.exit_code == -1 && a.signal > 0 && a.signal < 16);
	fc_proc_free(&a);
	fc_proc_free(&b);
	sg_buf_release(&oa);
	sg_buf_release(&ob);
}

/* ---- the interpreter's NDJSON ---------------------------------------------------------- */

static void run_init(struct fc_run *r, struct sg_code_result *res, size_t cap)
{
	memset(r, 0, sizeof(*r));
	memset(res, 0, sizeof(*res));
	r->host = &host;
	r->res = res;
	r->cap = cap;
}

static void run_free(struct fc_run *r)
{
	sg_buf_release(&r->line);
	sg_buf_release(&r->res->out);
	sg_buf_release(&r->res->err);
	json_decref(r->res->results);
	json_decref(r->res->error);
}

static bool same_buf(const struct sg_buf *a, const struct sg_buf *b)
{
	return a->len == b->len && (!a->len || !memcmp(a->data, b->data, a->len));
}

static void ndjson(unsigned mode, const char *p, size_t n)
{
	struct sg_code_result ra, rb;
	struct fc_run a, b;
	size_t cap = 1 + (mode >> 4) * 64;
	int ca, cb = 0;

	run_init(&a, &ra, cap);
	run_init(&b, &rb, cap);
	ca = fc_run_data(&a, p, n);
	for (size_t off = 0, k; off < n && cb == 0; off += k) {
		k = cut(mode, off, n - off);
		cb = fc_run_data(&b, p + off, k);
	}
	FUZZ_ASSERT(ca == cb && a.ended == b.ended && !strcmp(a.perr, b.perr));
	FUZZ_ASSERT(same_buf(&ra.out, &rb.out) && same_buf(&ra.err, &rb.err));
	FUZZ_ASSERT(ra.out.len <= cap && ra.err.len <= cap);
	FUZZ_ASSERT(json_equal(ra.results, rb.results) || (!ra.results && !rb.results));
	FUZZ_ASSERT(json_equal(ra.error, rb.error) || (!ra.error && !rb.error));
	FUZZ_ASSERT(ra.exit_code == rb.exit_code);
	run_free(&a);
	run_free(&b);
}

/* ---- base64 and proto3 JSON ------------------------------------------------------------ */

static void base64(const char *p, size_t n)
{
	size_t k, k2;
	unsigned char *raw = fc_b64_decode(p, n, &k), *again;
	char *text = fc_b64_encode(p, n);

	FUZZ_ASSERT(text);
	again = fc_b64_decode(text, strlen(text), &k2);
	FUZZ_ASSERT(again && k2 == n && !memcmp(again, p, n));
	FUZZ_ASSERT(again[k2] == '\0');
	free(again);
	free(text);
	if (raw) {
		FUZZ_ASSERT(raw[k] == '\0');
		text = fc_b64_encode(raw, k);
		again = fc_b64_decode(text, strlen(text), &k2);
		FUZZ_ASSERT(again && k2 == k && !memcmp(again, raw, k));
		free(again);
		free(text);
		free(raw);
	}
}

static void values(const char *p, size_t n)
{
	static const char *const names[] = { "UNSPECIFIED", "FILE", "DIRECTORY", "SYMLINK" };
	json_t *v = json_loadb(p, n, JSON_DECODE_ANY, NULL);
	char *s = strndup(p, n);
	int e = fc_json_enum(v, "FILE_TYPE_", names, 4);

	FUZZ_ASSERT(e >= -1 && e < 4);
	(void)fc_json_int64(v, -7);
	(void)fc_rfc3339(s);
	if (json_is_string(v))
		(void)fc_rfc3339(json_string_value(v));
	json_decref(v);
	free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size };
	unsigned mode = fuzz_byte(&in);
	const char *p = (const char *)in.p;

	switch (mode % 5) {
	case 0:
		envelopes(mode, p, in.n);
		break;
	case 1:
		process(mode, p, in.n);
		break;
	case 2:
		ndjson(mode, p, in.n);
		break;
	case 3:
		base64(p, in.n);
		break;
	default:
		values(p, in.n);
		break;
	}
	return 0;
}
