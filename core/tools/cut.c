/*
 * Results that say what was cut: the budget of a result's inline text, the
 * "truncated"/"cut" fields (doc/results.md), and a command's output beyond
 * the budget saved in its machine for read_file.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/args.h"
#include "core/base/conf.h"
#include "core/base/err.h"
#include "core/base/util.h"
#include "core/registry/machine.h"
#include "core/shell/headtail.h"
#include "core/tools/cut.h"

#define CUT_BUDGET_MIN 1024
#define SPILL_DIR "/tmp/sandgate-output"

size_t sg_cut_budget(void)
{
	long long v = sg_config_int("server", "max_result_bytes", 81920);

	return v < CUT_BUDGET_MIN ? CUT_BUDGET_MIN : (size_t)v;
}

json_t *sg_cut_call(const char *tool, json_t *args)
{
	return json_pack("{s:s, s:o}", "tool", tool, "arguments", args ? args : json_object());
}

void sg_cut_note(json_t *result, const char *field, json_t *desc)
{
	json_t *cut = json_object_get(result, "cut");

	if (!json_is_object(cut)) {
		cut = json_object();
		json_object_set_new(result, "cut", cut);
	}
	json_object_set_new(result, "truncated", json_true());
	json_object_set_new(cut, field, desc);
}

json_t *sg_cut_desc(uint64_t total_bytes, long long total_lines, uint64_t kept_bytes,
		    json_t *kept, json_t *rest)
{
	json_t *d = json_pack("{s:I}", "total_bytes", (json_int_t)total_bytes);

	if (total_lines >= 0)
		json_object_set_new(d, "total_lines", json_integer(total_lines));
	json_object_set_new(d, "kept_bytes", json_integer((json_int_t)kept_bytes));
	json_object_set_new(d, "kept", kept ? kept : json_array());
	json_object_set_new(d, "rest", rest ? rest : json_null());
	return d;
}

/* Lines as wc -l counts them, plus an unterminated last one. */
static long long count_lines(const char *p, size_t n)
{
	long long k = 0;

	for (const char *q = p; (q = memchr(q, '\n', n - (size_t)(q - p))); q++)
		k++;
	return k + (n && p[n - 1] != '\n');
}

/* The head's share of a budget: [shell] head_size : tail_size. */
static size_t head_of(size_t budget)
{
	long long hs = sg_config_int("shell", "head_size", 5120);
	long long ts = sg_config_int("shell", "tail_size", 46080);

	if (hs < 0 || ts < 0 || hs + ts <= 0)
		return budget / 10;
	return (size_t)((double)budget * (double)hs / (double)(hs + ts));
}

/* Saves the whole stream in the machine; returns the path (caller frees)
 * or NULL with why. */
static char *spill(struct sg_entry *e, struct sg_call *call, const char *name,
		   const struct sg_buf *b, char *why, size_t whylen)
{
	struct sg_write_opts opts = { .mode = 0600 };
	struct sg_err err = { 0 };
	char rnd[17], *path;

	sg_random_hex(rnd, 8);
	path = sg_xasprintf(SPILL_DIR "/%s.%s", rnd, name);
	if (sg_m_file_write(e, path, b->data ? b->data : "", b->len, &opts, call, &err) == 0)
		return path;
	snprintf(why, whylen, "the output could not be saved in the sandbox: %s", err.msg);
	free(path);
	return NULL;
}

/* One stream into result[name], at most share bytes of it inline. */
static void one_stream(struct sg_entry *e, struct sg_call *call, json_t *result, const char *name,
		       const struct sg_buf *b, bool capped, size_t share)
{
	const char *p = b->data ? b->data : "";
	size_t n = b->len, h, t;
	struct sg_buf text = { 0 };
	char marker[200], why[SG_ERR_MSG_MAX + 64] = "", *path = NULL;
	json_t *kept, *desc, *rest = NULL;

	if (n <= share) {
		json_object_set_new(result, name, sg_json_bytes(p, n));
		if (capped) {
			desc = sg_cut_desc(n, count_lines(p, n), n, json_pack("[[I, I]]", (json_int_t)0,
				(json_int_t)n), NULL);
			json_object_set_new(desc, "output_cap_hit", json_true());
			sg_cut_note(result, name, desc);
		}
		return;
	}
	h = sg_utf8_cut_back(p, head_of(share));
	t = n - (share - h);
	while (t < n && ((unsigned char)p[t] & 0xC0) == 0x80)
		t++;
	path = spill(e, call, name, b, why, sizeof(why));
	if (path)
		snprintf(marker, sizeof(marker), "\n[sandgate: bytes %zu-%zu of %zu cut; all of it is in %s]\n",
			 h, t, n, path);
	else
		snprintf(marker, sizeof(marker), "\n[sandgate: bytes %zu-%zu of %zu cut]\n", h, t, n);
	sg_buf_append(&text, p, h);
	sg_buf_append(&text, marker, strlen(marker));
	sg_buf_append(&text, p + t, n - t);
	json_object_set_new(result, name, sg_json_bytes(text.data, text.len));
	sg_buf_release(&text);
	kept = json_pack("[[I, I], [I, I]]", (json_int_t)0, (json_int_t)h, (json_int_t)t, (json_int_t)n);
	if (path) {
		size_t lim = t - h < sg_cut_budget() ? t - h : sg_cut_budget();

		rest = sg_cut_call("read_file", json_pack("{s:s, s:I, s:I, s:s}", "path", path, "offset",
			(json_int_t)h, "limit", (json_int_t)lim, "sandbox_id", e->m.id));
	}
	desc = sg_cut_desc(n, count_lines(p, n), h + (n - t), kept, rest);
	if (path)
		json_object_set_new(desc, "path", json_string(path));
	else
		json_object_set_new(desc, "note", json_string(why));
	if (capped)
		json_object_set_new(desc, "output_cap_hit", json_true());
	sg_cut_note(result, name, desc);
	free(path);
}

void sg_cut_streams(struct sg_entry *e, struct sg_call *call, json_t *result,
		    const struct sg_buf *out, bool out_capped, const struct sg_buf *err,
		    bool err_capped)
{
	size_t budget = sg_cut_budget(), half = budget / 2, so = budget, se = budget;

	if (out->len + err->len > budget) {
		/* A stream that fits in half leaves the rest to the other. */
		so = err->len <= half ? budget - err->len : out->len <= half ? out->len : half;
		se = budget - so;
	}
	one_stream(e, call, result, "stdout", out, out_capped, so);
	one_stream(e, call, result, "stderr", err, err_capped, se);
}
