/*
 * The edit engine: replace with tolerant matching, unified-diff parsing and
 * application, and a small unified-diff writer for results.  Everything works
 * on whole lines once exact matching is given up, because that is what
 * whitespace tolerance means to a reader: the same lines, indented or
 * trailed differently.
 */
#include "config.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/err.h"
#include "core/tools/patch.h"
#include "core/base/util.h"

/* The largest line number or count a hunk header may give (a text of 100
 * million lines is past any file the tools handle). */
#define DIFF_LINE_MAX 100000000L

/* One line of a text: content p[0..len) without its terminator, and full,
 * the length with "\n" or "\r\n". */
struct line {
	const char *p;
	size_t len;
	size_t full;
};

/* Splits t into lines; a final piece without "\n" is a line too.  The array
 * is the caller's (free()); *n may be 0. */
static struct line *split_lines(const char *t, size_t n, size_t *count)
{
	struct line *v = NULL;
	size_t cap = 0, k = 0, i = 0;

	while (i < n) {
		const char *nl = memchr(t + i, '\n', n - i);
		size_t end = nl ? (size_t)(nl - t) + 1 : n;

		if (k == cap) {
			cap = cap ? cap * 2 : 64;
			v = sg_xrealloc(v, cap * sizeof(*v));
		}
		v[k].p = t + i;
		v[k].full = end - i;
		v[k].len = v[k].full;
		if (nl) {
			v[k].len--;
			if (v[k].len && v[k].p[v[k].len - 1] == '\r')
				v[k].len--;
		}
		k++;
		i = end;
	}
	*count = k;
	return v;
}

static bool has_eol(const struct line *l)
{
	return l->full > l->len;
}

/* ---- a small output builder ------------------------------------------------ */

struct out {
	char *p;
	size_t len, cap;
};

static void out_add(struct out *o, const void *p, size_t n)
{
	if (o->len + n + 1 > o->cap) {
		o->cap = (o->len + n + 1) * 2;
		o->p = sg_xrealloc(o->p, o->cap);
	}
	memcpy(o->p + o->len, p, n);
	o->len += n;
	o->p[o->len] = '\0';
}

static void out_str(struct out *o, const char *s)
{
	out_add(o, s, strlen(s));
}

static char *out_take(struct out *o, size_t *len)
{
	if (!o->p)
		out_add(o, "", 0);
	*len = o->len;
	return o->p;
}

void sg_patch_out_free(struct sg_patch_out *o)
{
	if (!o)
		return;
	free(o->text);
	o->text = NULL;
	o->len = 0;
}

/* ---- whitespace-tolerant line comparison ----------------------------------- */

enum level { LVL_EXACT = 0, LVL_TRAILING, LVL_WS };

static const char *level_name(int lvl)
{
	return lvl == LVL_EXACT ? "exact" : lvl == LVL_TRAILING ? "trailing-whitespace"
								  : "whitespace";
}

static size_t rstrip_len(const char *p, size_t n)
{
	while (n && isspace((unsigned char)p[n - 1]))
		n--;
	return n;
}

/* Compares with every run of whitespace counting as one space and leading
 * and trailing whitespace ignored. */
static bool eq_ws(const char *a, size_t an, const char *b, size_t bn)
{
	size_t i = 0, j = 0;

	for (;;) {
		bool wa = false, wb = false;

		while (i < an && isspace((unsigned char)a[i])) {
			i++;
			wa = true;
		}
		while (j < bn && isspace((unsigned char)b[j])) {
			j++;
			wb = true;
		}
		if (i == an || j == bn)
			return i == an && j == bn;
		/* Whitespace between words must exist on both sides. */
		if ((wa != wb) && i > 0 && j > 0)
			return false;
		if (a[i] != b[j])
			return false;
		i++;
		j++;
	}
}

static bool line_eq(int lvl, const char *a, size_t an, const char *b, size_t bn)
{
	switch (lvl) {
	case LVL_EXACT:
		return an == bn && memcmp(a, b, an) == 0;
	case LVL_TRAILING:
		an = rstrip_len(a, an);
		bn = rstrip_len(b, bn);
		return an == bn && memcmp(a, b, an) == 0;
	default:
		return eq_ws(a, an, b, bn);
	}
}

static bool blank(const char *p, size_t n)
{
	return rstrip_len(p, n) == 0;
}

/* ---- replace ----------------------------------------------------------------- */

/* A copy of s with every lone "\n" made "\r\n".  Caller frees. */
static char *to_crlf(const char *s)
{
	struct out o = { 0 };
	size_t len;

	for (const char *p = s; *p; p++) {
		if (*p == '\n' && (p == s || p[-1] != '\r'))
			out_add(&o, "\r", 1);
		out_add(&o, p, 1);
	}
	return out_take(&o, &len);
}

/* "lines 3, 9 and 12" into buf. */
static void list_lines(char *buf, size_t size, const size_t *v, size_t n)
{
	size_t o = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && i < 20 && o + 24 < size; i++)
		o += (size_t)snprintf(buf + o, size - o, "%s%zu",
				      i == 0 ? "" : i + 1 == n ? " and " : ", ", v[i]);
	if (n > 20 && o + 8 < size)
		snprintf(buf + o, size - o, ", ...");
}

static int ambiguous(size_t *lines, size_t n, struct sg_err *err)
{
	char list[256];

	list_lines(list, sizeof(list), lines, n);
	free(lines);
	return sg_errf(err, SG_E_INVAL,
		       "old_string matches %zu places (lines %s): include more surrounding lines "
		       "in old_string to pick one, or pass replace_all=true to replace them all",
		       n, list);
}

static int replace_exact(const char *text, size_t len, const char *old_s, const char *new_s,
			 bool all, struct sg_patch_out *out, struct sg_err *err)
{
	size_t olen = strlen(old_s), nlen = strlen(new_s), n = 0, cap = 0;
	size_t *lines = NULL, line = 1, scanned = 0;
	struct out o = { 0 };
	const char *p = text, *end = text + len, *hit;

	while ((hit = memmem(p, (size_t)(end - p), old_s, olen)) != NULL) {
		for (; scanned < (size_t)(hit - text); scanned++)
			if (text[scanned] == '\n')
				line++;
		if (n == cap) {
			cap = cap ? cap * 2 : 8;
			lines = sg_xrealloc(lines, cap * sizeof(*lines));
		}
		lines[n++] = line;
		p = hit + olen;
	}
	if (n == 0) {
		free(lines);
		return 1;
	}
	if (n > 1 && !all)
		return ambiguous(lines, n, err);
	free(lines);
	p = text;
	while ((hit = memmem(p, (size_t)(end - p), old_s, olen)) != NULL) {
		out_add(&o, p, (size_t)(hit - p));
		out_add(&o, new_s, nlen);
		p = hit + olen;
	}
	out_add(&o, p, (size_t)(end - p));
	out->text = out_take(&o, &out->len);
	out->matches = (unsigned)n;
	out->strategy = "exact";
	return 0;
}

/* Leading whitespace of the first non-blank line of v[0..n), as (p, len). */
static void first_indent(const struct line *v, size_t n, const char **p, size_t *len)
{
	*p = "";
	*len = 0;
	for (size_t i = 0; i < n; i++) {
		size_t k = 0;

		if (blank(v[i].p, v[i].len))
			continue;
		while (k < v[i].len && (v[i].p[k] == ' ' || v[i].p[k] == '\t'))
			k++;
		*p = v[i].p;
		*len = k;
		return;
	}
}

/* Writes the replacement lines for a match of old (ol) at file lines
 * fl[at..at+k), re-indented from old's indentation to the file's. */
static size_t indent_len(const char *p, size_t n)
{
	size_t k = 0;

	while (k < n && (p[k] == ' ' || p[k] == '\t'))
		k++;
	return k;
}

/* Writes the replacement lines for a match of old (ol) at file lines
 * fl[at..at+k), re-indented from old's indentation to the file's: a new line
 * indented like the old line at the same position takes that file line's
 * indentation; any other takes the shift of the first non-blank line. */
static void emit_block(struct out *o, const struct line *fl, size_t at, size_t k,
		       const struct line *ol, size_t on, const struct line *nl, size_t nn,
		       const char *eol)
{
	const char *oi, *fi;
	size_t oilen, filen;
	bool last_eol = has_eol(&fl[at + k - 1]);

	first_indent(ol, on, &oi, &oilen);
	first_indent(fl + at, k, &fi, &filen);
	for (size_t i = 0; i < nn; i++) {
		const char *p = nl[i].p;
		size_t len = nl[i].len, ni = indent_len(p, len);

		if (blank(p, len)) {
			out_add(o, p, len);
		} else if (i < on && ni == indent_len(ol[i].p, ol[i].len) &&
			   memcmp(p, ol[i].p, ni) == 0) {
			out_add(o, fl[at + i].p, indent_len(fl[at + i].p, fl[at + i].len));
			out_add(o, p + ni, len - ni);
		} else if (len >= oilen && memcmp(p, oi, oilen) == 0) {
			out_add(o, fi, filen);
			out_add(o, p + oilen, len - oilen);
		} else {
			out_add(o, p, len);
		}
		if (i + 1 < nn || last_eol)
			out_str(o, eol);
	}
}

/* Line-wise matching at lvl.  Returns 0 (done), 1 (no match), -1 (err). */
static int replace_lines(const char *text, size_t len, const char *old_s, const char *new_s,
			 bool all, int lvl, struct sg_patch_out *out, struct sg_err *err)
{
	size_t fn, on, nn, n = 0, cap = 0, *lines = NULL, *at = NULL;
	struct line *fl = split_lines(text, len, &fn);
	struct line *ol = split_lines(old_s, strlen(old_s), &on);
	struct line *nl = split_lines(new_s, strlen(new_s), &nn);
	const char *eol = memmem(text, len, "\r\n", 2) ? "\r\n" : "\n";
	struct out o = { 0 };
	size_t i, j, prev = 0;
	bool any = false;
	int ret = 1;

	for (j = 0; j < on; j++)
		any |= !blank(ol[j].p, ol[j].len);
	if (!any || on == 0 || on > fn)
		goto out;
	for (i = 0; i + on <= fn; i++) {
		for (j = 0; j < on; j++)
			if (!line_eq(lvl, fl[i + j].p, fl[i + j].len, ol[j].p, ol[j].len))
				break;
		if (j < on)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 8;
			lines = sg_xrealloc(lines, cap * sizeof(*lines));
			at = sg_xrealloc(at, cap * sizeof(*at));
		}
		lines[n] = i + 1;
		at[n++] = i;
		i += on - 1;
	}
	if (n == 0)
		goto out;
	if (n > 1 && !all) {
		ret = ambiguous(lines, n, err);
		lines = NULL;
		goto out;
	}
	for (size_t m = 0; m < n; m++) {
		for (i = prev; i < at[m]; i++)
			out_add(&o, fl[i].p, fl[i].full);
		emit_block(&o, fl, at[m], on, ol, on, nl, nn, eol);
		prev = at[m] + on;
	}
	for (i = prev; i < fn; i++)
		out_add(&o, fl[i].p, fl[i].full);
	out->text = out_take(&o, &out->len);
	out->matches = (unsigned)n;
	out->strategy = level_name(lvl);
	ret = 0;
out:
	free(lines);
	free(at);
	free(fl);
	free(ol);
	free(nl);
	return ret;
}

int sg_patch_replace(const char *text, size_t len, const char *old_s, const char *new_s,
		     bool replace_all, struct sg_patch_out *out, struct sg_err *err)
{
	char *o2 = NULL, *n2 = NULL;
	int r;

	memset(out, 0, sizeof(*out));
	if (!*old_s)
		return sg_errf(err, SG_E_INVAL,
			       "old_string is empty: give the exact text to replace (to write a whole file use sandbox_file_write)");
	if (strcmp(old_s, new_s) == 0)
		return sg_errf(err, SG_E_INVAL,
			       "old_string and new_string are the same: there is nothing to change");
	/* The file's line endings win: an LF edit of a CRLF file stays CRLF. */
	if (memmem(text, len, "\r\n", 2) && strchr(old_s, '\n') && !strstr(old_s, "\r\n")) {
		o2 = to_crlf(old_s);
		n2 = to_crlf(new_s);
		old_s = o2;
		new_s = n2;
	}
	r = replace_exact(text, len, old_s, new_s, replace_all, out, err);
	for (int lvl = LVL_TRAILING; r == 1 && lvl <= LVL_WS; lvl++)
		r = replace_lines(text, len, old_s, new_s, replace_all, lvl, out, err);
	free(o2);
	free(n2);
	if (r == 1)
		return sg_errf(err, SG_E_NOTFOUND,
			       "old_string was not found, neither exactly nor ignoring whitespace and indentation: "
			       "read the file again (sandbox_file_read) and copy the text exactly");
	return r;
}

/* ---- unified diff: parsing ------------------------------------------------- */

void sg_diff_free(struct sg_diff *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n; i++) {
		struct sg_diff_file *f = &d->files[i];

		for (size_t h = 0; h < f->n; h++) {
			for (size_t k = 0; k < f->hunks[h].n; k++)
				free(f->hunks[h].lines[k]);
			free(f->hunks[h].lines);
			free(f->hunks[h].no_eol);
		}
		free(f->hunks);
		free(f->old_path);
		free(f->new_path);
	}
	free(d->files);
	free(d);
}

/* The path of a "--- " or "+++ " line: up to a tab (a timestamp follows),
 * trailing spaces dropped. */
static char *header_path(const char *p, size_t n)
{
	size_t k = 0;

	while (k < n && p[k] != '\t')
		k++;
	while (k && p[k - 1] == ' ')
		k--;
	if (k >= 2 && p[0] == '"' && p[k - 1] == '"') {
		p++;
		k -= 2;
	}
	return strndup(p, k);
}

static struct sg_diff_file *add_file(struct sg_diff *d)
{
	d->files = sg_xrealloc(d->files, (d->n + 1) * sizeof(*d->files));
	memset(&d->files[d->n], 0, sizeof(d->files[0]));
	return &d->files[d->n++];
}

/* One number of a hunk header: digits only, at most DIFF_LINE_MAX, so the
 * offsets computed from them cannot overflow. */
static bool parse_line_number(const char **s, long *out)
{
	const char *p = *s;
	long n = 0;

	if (*p < '0' || *p > '9')
		return false;
	for (; *p >= '0' && *p <= '9'; p++) {
		n = n * 10 + (*p - '0');
		if (n > DIFF_LINE_MAX)
			return false;
	}
	*out = n;
	*s = p;
	return true;
}

static bool parse_range(const char **s, long *start, long *count)
{
	if (!parse_line_number(s, start))
		return false;
	*count = 1;
	if (**s == ',') {
		(*s)++;
		if (!parse_line_number(s, count))
			return false;
	}
	return true;
}

static bool parse_hunk_header(const char *p, size_t n, struct sg_diff_hunk *h)
{
	char buf[256];
	const char *s = buf;

	snprintf(buf, sizeof(buf), "%.*s", (int)(n < 255 ? n : 255), p);
	snprintf(h->header, sizeof(h->header), "%.*s", (int)(n < 90 ? n : 90), p);
	if (strncmp(s, "@@ -", 4) != 0)
		return false;
	s += 4;
	if (!parse_range(&s, &h->old_start, &h->old_count))
		return false;
	if (strncmp(s, " +", 2) != 0)
		return false;
	s += 2;
	if (!parse_range(&s, &h->new_start, &h->new_count))
		return false;
	return strncmp(s, " @@", 3) == 0;
}

static void hunk_add(struct sg_diff_hunk *h, const char *p, size_t n)
{
	h->lines = sg_xrealloc(h->lines, (h->n + 1) * sizeof(*h->lines));
	h->no_eol = sg_xrealloc(h->no_eol, (h->n + 1) * sizeof(*h->no_eol));
	h->lines[h->n] = n ? strndup(p, n) : strdup(" ");
	if (!h->lines[h->n])
		abort();
	h->no_eol[h->n++] = false;
}

/* Removes trailing empty context lines that were only the diff text's final
 * blank lines, beyond what the header counts. */
static void hunk_trim(struct sg_diff_hunk *h)
{
	long o = 0, nw = 0;

	for (size_t i = 0; i < h->n; i++) {
		o += h->lines[i][0] != '+';
		nw += h->lines[i][0] != '-';
	}
	while (h->n && strcmp(h->lines[h->n - 1], " ") == 0 && o > h->old_count &&
	       nw > h->new_count) {
		free(h->lines[--h->n]);
		o--;
		nw--;
	}
}

int sg_diff_parse(const char *text, struct sg_diff **out, struct sg_err *err)
{
	struct sg_diff *d = sg_xcalloc(1, sizeof(*d));
	struct sg_diff_file *f = NULL;
	struct sg_diff_hunk *h = NULL;
	size_t tn, ln;
	struct line *tl = split_lines(text, strlen(text), &tn);
	long left_old = 0, left_new = 0;

	*out = NULL;
	for (ln = 0; ln < tn; ln++) {
		const char *p = tl[ln].p;
		size_t n = tl[ln].len;
		bool header_pair = n >= 4 && !strncmp(p, "--- ", 4) && ln + 1 < tn &&
				   tl[ln + 1].len >= 4 && !strncmp(tl[ln + 1].p, "+++ ", 4);

		if (h && n > 0 && *p == '\\') {
			/* "\ No newline at end of file" */
		} else if (h && (left_old > 0 || left_new > 0) &&
			   (n == 0 || *p == ' ' || *p == '-' || *p == '+')) {
			/* Inside a hunk by its counts: "--- x" is a removed line. */
		} else if (h && left_old <= 0 && left_new <= 0 && n > 0 && !header_pair &&
			   (*p == ' ' || *p == '+' || (*p == '-' && strncmp(p, "--- ", 4)))) {
			/* Counts were too small: keep reading body lines. */
		} else {
			if (header_pair) {
				f = add_file(d);
				f->old_path = header_path(p + 4, n - 4);
				f->new_path = header_path(tl[ln + 1].p + 4, tl[ln + 1].len - 4);
				h = NULL;
				ln++;
				continue;
			}
			if (n >= 2 && !strncmp(p, "@@", 2)) {
				if (!f)
					f = add_file(d);
				f->hunks = sg_xrealloc(f->hunks, (f->n + 1) * sizeof(*f->hunks));
				h = &f->hunks[f->n++];
				memset(h, 0, sizeof(*h));
				if (!parse_hunk_header(p, n, h)) {
					sg_errf(err, SG_E_INVAL,
						"patch line %zu: '%.60s' is not a hunk header like '@@ -12,7 +12,8 @@' "
						"(line numbers and counts from 0 to %ld)",
						ln + 1, p, DIFF_LINE_MAX);
					goto fail;
				}
				left_old = h->old_count;
				left_new = h->new_count;
				continue;
			}
			h = NULL; /* anything else between hunks: git headers, prose */
			continue;
		}
		if (n > 0 && *p == '\\') {
			if (h->n)
				h->no_eol[h->n - 1] = true;
			continue;
		}
		hunk_add(h, n ? p : " ", n ? n : 1);
		if (n == 0 || *p == ' ') {
			left_old--;
			left_new--;
		} else if (*p == '-') {
			left_old--;
		} else {
			left_new--;
		}
	}
	free(tl);
	for (size_t i = 0; i < d->n; i++)
		for (size_t k = 0; k < d->files[i].n; k++)
			hunk_trim(&d->files[i].hunks[k]);
	for (size_t i = 0; i < d->n; i++) {
		if (d->files[i].n == 0) {
			sg_errf(err, SG_E_INVAL, "patch: the diff for '%s' has no hunks ('@@ -a,b +c,d @@' lines)",
				d->files[i].new_path ? d->files[i].new_path : "?");
			goto fail2;
		}
	}
	if (d->n == 0) {
		sg_errf(err, SG_E_INVAL,
			"patch has no hunks: give a unified diff ('--- a/file', '+++ b/file', '@@ -a,b +c,d @@' and lines starting with ' ', '-' or '+')");
		goto fail2;
	}
	*out = d;
	return 0;
fail:
	free(tl);
fail2:
	sg_diff_free(d);
	return -1;
}

const char *sg_diff_target(const struct sg_diff_file *f)
{
	const char *p = f->new_path;

	if (!p || !strcmp(p, "/dev/null"))
		p = f->old_path;
	if (!p)
		return NULL;
	if ((p[0] == 'a' || p[0] == 'b') && p[1] == '/')
		p += 2;
	return p;
}

/* ---- unified diff: applying ------------------------------------------------- */

/* Does the hunk's old side match file lines from pos at lvl? */
static bool hunk_at(const struct sg_diff_hunk *h, const struct line *fl, size_t fn, size_t pos,
		    int lvl)
{
	size_t j = pos;

	for (size_t i = 0; i < h->n; i++) {
		const char *l = h->lines[i];

		if (l[0] == '+')
			continue;
		if (j >= fn || !line_eq(lvl, fl[j].p, fl[j].len, l + 1, strlen(l + 1)))
			return false;
		j++;
	}
	return true;
}

static size_t hunk_old_len(const struct sg_diff_hunk *h)
{
	size_t k = 0;

	for (size_t i = 0; i < h->n; i++)
		k += h->lines[i][0] != '+';
	return k;
}

/* Finds where hunk h applies: nearest to `want`, not before `min`.  Returns
 * the line index or -1; *lvl_out the tolerance used. */
static long hunk_find(const struct sg_diff_hunk *h, const struct line *fl, size_t fn, long want,
		      size_t min, int *lvl_out)
{
	size_t k = hunk_old_len(h);
	long hi = (long)fn - (long)k;

	if (k == 0) {
		*lvl_out = LVL_EXACT;
		return want < (long)min ? (long)min : want > (long)fn ? (long)fn : want;
	}
	for (int lvl = LVL_EXACT; lvl <= LVL_WS; lvl++) {
		for (long d = 0; d <= (long)fn; d++) {
			long c[2] = { want - d, want + d };

			for (int s = 0; s < (d ? 2 : 1); s++) {
				if (c[s] < (long)min || c[s] > hi)
					continue;
				if (hunk_at(h, fl, fn, (size_t)c[s], lvl)) {
					*lvl_out = lvl;
					return c[s];
				}
			}
			if (want - d < (long)min && want + d > hi)
				break;
		}
	}
	return -1;
}

static void hunk_emit(struct out *o, const struct sg_diff_hunk *h, const struct line *fl,
		      size_t pos, const char *eol)
{
	size_t j = pos;
	bool open = false; /* the last line written has no terminator yet */

	for (size_t i = 0; i < h->n; i++) {
		const char *l = h->lines[i];

		if (l[0] == '-') {
			j++;
			continue;
		}
		if (open)
			out_str(o, eol);
		if (l[0] == ' ') {
			/* The file's own bytes: a tolerated difference stays. */
			out_add(o, fl[j].p, fl[j].full);
			open = !has_eol(&fl[j]);
			j++;
			continue;
		}
		out_add(o, l + 1, strlen(l + 1));
		open = h->no_eol[i];
		if (!open)
			out_str(o, eol);
	}
}

int sg_diff_apply(const struct sg_diff_file *f, const char *text, size_t len,
		  struct sg_patch_out *out, struct sg_err *err)
{
	size_t fn, next = 0;
	struct line *fl = split_lines(text ? text : "", text ? len : 0, &fn);
	const char *eol = text && memmem(text, len, "\r\n", 2) ? "\r\n" : "\n";
	struct out o = { 0 };
	long offset = 0;

	memset(out, 0, sizeof(*out));
	out->strategy = "exact";
	for (size_t i = 0; i < f->n; i++) {
		const struct sg_diff_hunk *h = &f->hunks[i];
		long want = (h->old_count == 0 ? h->old_start : h->old_start - 1) + offset;
		int lvl;
		long at = hunk_find(h, fl, fn, want, next, &lvl);

		if (at < 0) {
			sg_errf(err, SG_E_NOTFOUND,
				"hunk %zu of %zu (%s) does not apply to %s: its %zu context and removed lines were not found "
				"near line %ld, nor anywhere after the previous hunk, even ignoring whitespace; "
				"nothing was written: read the file again and make the diff against its current text",
				i + 1, f->n, h->header, sg_diff_target(f) ? sg_diff_target(f) : "the file",
				hunk_old_len(h), h->old_start);
			free(fl);
			free(o.p);
			return -1;
		}
		for (size_t k = next; k < (size_t)at; k++)
			out_add(&o, fl[k].p, fl[k].full);
		hunk_emit(&o, h, fl, (size_t)at, eol);
		if (labs(at - want) > out->max_offset)
			out->max_offset = labs(at - want) < INT_MAX ? (int)labs(at - want) : INT_MAX;
		if (lvl != LVL_EXACT) {
			out->fuzzy_hunks++;
			out->strategy = level_name(lvl);
		}
		offset += at - want;
		next = (size_t)at + hunk_old_len(h);
		out->matches++;
	}
	for (size_t k = next; k < fn; k++)
		out_add(&o, fl[k].p, fl[k].full);
	free(fl);
	out->text = out_take(&o, &out->len);
	return 0;
}

/* ---- writing a unified diff --------------------------------------------------- */

static bool full_eq(const struct line *a, const struct line *b)
{
	return a->full == b->full && memcmp(a->p, b->p, a->full) == 0;
}

static void diff_line(struct out *o, char sign, const struct line *l)
{
	out_add(o, &sign, 1);
	out_add(o, l->p, l->len);
	out_str(o, "\n");
	if (!has_eol(l))
		out_str(o, "\\ No newline at end of file\n");
}

char *sg_patch_unified(const char *a, size_t alen, const char *b, size_t blen,
		       const char *path, size_t max_lines)
{
	size_t an, bn, pre = 0, suf = 0, a0, a1, b1, body = 0, len;
	struct line *al = split_lines(a, alen, &an);
	struct line *bl = split_lines(b, blen, &bn);
	struct out o = { 0 };
	char hdr[128];

	while (pre < an && pre < bn && full_eq(&al[pre], &bl[pre]))
		pre++;
	while (suf < an - pre && suf < bn - pre && full_eq(&al[an - 1 - suf], &bl[bn - 1 - suf]))
		suf++;
	if (pre == an && pre == bn)
		goto done;
	while (path && *path == '/')
		path++;
	out_str(&o, "--- a/");
	out_str(&o, path ? path : "file");
	out_str(&o, "\n+++ b/");
	out_str(&o, path ? path : "file");
	out_str(&o, "\n");
	a0 = pre > 3 ? pre - 3 : 0;
	a1 = an - suf + 3 < an ? an - suf + 3 : an;
	b1 = bn - suf + 3 < bn ? bn - suf + 3 : bn;
	snprintf(hdr, sizeof(hdr), "@@ -%zu,%zu +%zu,%zu @@\n", a1 > a0 ? a0 + 1 : a0, a1 - a0,
		 b1 > a0 ? a0 + 1 : a0, b1 - a0);
	out_str(&o, hdr);
	for (size_t i = a0; i < pre && body < max_lines; i++, body++)
		diff_line(&o, ' ', &al[i]);
	for (size_t i = pre; i < an - suf && body < max_lines; i++, body++)
		diff_line(&o, '-', &al[i]);
	for (size_t i = pre; i < bn - suf && body < max_lines; i++, body++)
		diff_line(&o, '+', &bl[i]);
	for (size_t i = an - suf; i < a1 && body < max_lines; i++, body++)
		diff_line(&o, ' ', &al[i]);
	if (body >= max_lines)
		out_str(&o, "... (diff cut short)\n");
done:
	free(al);
	free(bl);
	return out_take(&o, &len);
}
