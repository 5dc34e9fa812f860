/*
 * Fuzz target: the edit engine (core/tools/patch.c).  The input holds up to three
 * parts separated by NUL bytes: a file's text, a second text, a third.  The
 * first byte picks:
 *
 *  - a unified diff (the second part) parsed and applied, file by file, to
 *    the text (the first part);
 *  - a replace of the second part by the third in the text, once and all;
 *  - a round trip: the diff that sg_patch_unified() writes from the first
 *    text to the second, parsed and applied to the first.
 *
 * Invariants: results are NUL-terminated at their length and count what
 * was done; a diff written by sg_patch_unified() turns its old text into
 * its new one (texts without NUL and CR, which it does not claim to carry);
 * an exact replace of all counts every occurrence.
 */
#include "config.h"

#include <string.h>

#include "core/tools/patch.h"
#include "t/fuzz/fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

static void check_out(const struct sg_patch_out *o)
{
	FUZZ_ASSERT(o->text && o->text[o->len] == '\0');
	FUZZ_ASSERT(o->strategy);
}

static void apply_all(const struct sg_diff *d, const char *text, size_t len)
{
	for (size_t i = 0; i < d->n; i++) {
		struct sg_patch_out o;
		struct sg_err err = { 0 };

		(void)sg_diff_target(&d->files[i]);
		if (sg_diff_apply(&d->files[i], text, len, &o, &err) == 0) {
			check_out(&o);
			FUZZ_ASSERT(o.matches == d->files[i].n);
			sg_patch_out_free(&o);
		} else {
			FUZZ_ASSERT(err.msg[0]);
		}
	}
}

static void diff(const char *text, size_t len, const char *patch)
{
	struct sg_diff *d = NULL;
	struct sg_err err = { 0 };

	if (sg_diff_parse(patch, &d, &err) < 0) {
		FUZZ_ASSERT(!d && err.msg[0]);
		return;
	}
	FUZZ_ASSERT(d && d->n > 0);
	apply_all(d, text, len);
	apply_all(d, NULL, 0);
	sg_diff_free(d);
}

static size_t count(const char *text, size_t len, const char *s)
{
	size_t n = 0, k = strlen(s);

	if (!k)
		return 0;
	for (const char *p = text; (p = memmem(p, len - (size_t)(p - text), s, k)); p += k)
		n++;
	return n;
}

static void replace(const char *text, size_t len, const char *old_s, const char *new_s)
{
	for (int all = 0; all < 2; all++) {
		struct sg_patch_out o;
		struct sg_err err = { 0 };

		if (sg_patch_replace(text, len, old_s, new_s, all, &o, &err) < 0) {
			FUZZ_ASSERT(err.msg[0]);
			continue;
		}
		check_out(&o);
		FUZZ_ASSERT(o.matches >= 1);
		if (!all)
			FUZZ_ASSERT(o.matches == 1);
		/* exact, without the CRLF conversion: every occurrence, left
		 * to right, not overlapping */
		if (all && !strcmp(o.strategy, "exact") && !memchr(text, '\r', len))
			FUZZ_ASSERT(o.matches == count(text, len, old_s));
		sg_patch_out_free(&o);
	}
}

static void round_trip(const char *a, size_t alen, const char *b, size_t blen)
{
	char *text = sg_patch_unified(a, alen, b, blen, "dir/file", (size_t)-1);
	struct sg_diff *d = NULL;
	struct sg_err err = { 0 };
	struct sg_patch_out o;

	FUZZ_ASSERT(text);
	if (alen == blen && !memcmp(a, b, alen)) {
		FUZZ_ASSERT(text[0] == '\0');
		free(text);
		return;
	}
	FUZZ_ASSERT(sg_diff_parse(text, &d, &err) == 0);
	FUZZ_ASSERT(d->n == 1 && !strcmp(sg_diff_target(&d->files[0]), "dir/file"));
	FUZZ_ASSERT(sg_diff_apply(&d->files[0], a, alen, &o, &err) == 0);
	FUZZ_ASSERT(o.len == blen && !memcmp(o.text, b, blen));
	FUZZ_ASSERT(o.max_offset == 0 && o.fuzzy_hunks == 0);
	sg_patch_out_free(&o);
	sg_diff_free(d);
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size };
	unsigned mode = fuzz_byte(&in);
	char *buf = malloc(in.n + 3), *part[3];
	size_t len[3], k = 0;

	/* three NUL-terminated parts (missing ones empty) */
	memcpy(buf, in.p, in.n);
	buf[in.n] = buf[in.n + 1] = buf[in.n + 2] = '\0';
	for (size_t i = 0; i < 3; i++) {
		part[i] = buf + k;
		len[i] = strlen(part[i]);
		k = k + len[i] + 1 <= in.n + 2 ? k + len[i] + 1 : in.n + 2;
	}
	switch (mode % 3) {
	case 0:
		diff(part[0], len[0], part[1]);
		break;
	case 1:
		replace(part[0], len[0], part[1], part[2]);
		break;
	default:
		if (!memchr(part[0], '\r', len[0]) && !memchr(part[1], '\r', len[1]))
			round_trip(part[0], len[0], part[1], len[1]);
		break;
	}
	free(buf);
	return 0;
}
