/* Large tool arguments, decoded once (core/protocol/bulk.h). */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/base/util.h"
#include "core/protocol/bulk.h"
#include "core/protocol/jskip.h"

#define MAX_BULKS 8                 /* large arguments taken out of one message */
#define RELEASE_EVERY (1024 * 1024) /* bytes decoded between two page releases */

/* ---- finding the large arguments ---------------------------------------------- */

struct lit {
	char key[64];
	const char *start, *end; /* the literal, quotes included */
};

/* Reads a member's key, decoded as jansson decodes it ("\u0069d" is "id"),
 * into key (a longer one becomes "", which matches nothing), then its
 * colon.  Returns 0 or -1. */
static int member_key(struct sg_jskip *k, char *key, size_t size)
{
	const char *s = k->p;
	json_t *name;

	sg_jskip_ws(k);
	s = k->p;
	if (k->p >= k->end || *k->p != '"' || sg_jskip_string(k) < 0)
		return -1;
	key[0] = '\0';
	if ((size_t)(k->p - s) < size) {
		name = json_loadb(s, (size_t)(k->p - s), JSON_DECODE_ANY, NULL);
		if (json_is_string(name) && json_string_length(name) < size)
			memcpy(key, json_string_value(name), json_string_length(name) + 1);
		json_decref(name);
	}
	sg_jskip_ws(k);
	if (k->p >= k->end || *k->p++ != ':')
		return -1;
	sg_jskip_ws(k);
	return 0;
}

/* After a member's value: ',' (returns 1) or the object's '}' (returns 0);
 * -1 otherwise. */
static int member_next(struct sg_jskip *k)
{
	sg_jskip_ws(k);
	if (k->p >= k->end)
		return -1;
	if (*k->p == ',') {
		k->p++;
		return 1;
	}
	if (*k->p == '}') {
		k->p++;
		return 0;
	}
	return -1;
}

/* k->p at '{' (or not, and nothing is found): calls each(member key, k)
 * with k->p at the member's value; each moves past it.  Returns 0 or -1. */
static int members(struct sg_jskip *k, int (*each)(const char *key, struct sg_jskip *k, void *ud), void *ud)
{
	char key[64];
	int more;

	if (k->p >= k->end || *k->p != '{')
		return sg_jskip_value(k);
	k->p++;
	sg_jskip_ws(k);
	if (k->p < k->end && *k->p == '}') {
		k->p++;
		return 0;
	}
	do {
		if (member_key(k, key, sizeof(key)) < 0 || each(key, k, ud) < 0)
			return -1;
	} while ((more = member_next(k)) == 1);
	return more;
}

struct found {
	struct lit lits[MAX_BULKS];
	size_t n;
	int params, arguments;   /* how many times each was there */
	bool dup;                /* a large argument's key was there twice */
	char seen[32][64];       /* the keys of arguments, for duplicates */
	size_t n_seen;
};

static int in_arguments(const char *key, struct sg_jskip *k, void *ud)
{
	struct found *f = ud;
	const char *s = k->p;

	if (f->n_seen == sizeof(f->seen) / sizeof(f->seen[0]))
		f->dup = true; /* too many members to tell: jansson reads it all */
	else
		snprintf(f->seen[f->n_seen++], sizeof(f->seen[0]), "%s", key);
	if (k->p >= k->end || *k->p != '"')
		return sg_jskip_value(k);
	if (sg_jskip_string(k) < 0)
		return -1;
	if ((size_t)(k->p - s) < SG_BULK_MIN + 2)
		return 0;
	if (!key[0] || f->n == MAX_BULKS) {
		f->dup = true; /* a key too long to keep, or too many */
		return 0;
	}
	snprintf(f->lits[f->n].key, sizeof(f->lits[f->n].key), "%s", key);
	f->lits[f->n].start = s;
	f->lits[f->n].end = k->p;
	f->n++;
	return 0;
}

/* A large argument whose key comes twice: jansson keeps the last value,
 * which may be another one; it reads such a message itself. */
static void check_dups(struct found *f)
{
	for (size_t i = 0; i < f->n; i++) {
		size_t times = 0;

		for (size_t j = 0; j < f->n_seen; j++)
			times += !strcmp(f->seen[j], f->lits[i].key);
		if (times != 1)
			f->dup = true;
	}
}

static int in_params(const char *key, struct sg_jskip *k, void *ud)
{
	struct found *f = ud;

	if (strcmp(key, "arguments") != 0)
		return sg_jskip_value(k);
	f->arguments++;
	return members(k, in_arguments, f);
}

static int in_message(const char *key, struct sg_jskip *k, void *ud)
{
	struct found *f = ud;

	if (strcmp(key, "params") != 0)
		return sg_jskip_value(k);
	f->params++;
	return members(k, in_params, f);
}

/* ---- decoding, as jansson does ---------------------------------------------- */

/* The length of the UTF-8 sequence at p (1 to 4), or 0 when it is not one
 * jansson takes: overlong forms, surrogates and values past U+10FFFF are
 * refused. */
static size_t utf8_seq(const unsigned char *p, const unsigned char *end)
{
	unsigned c = p[0], v;
	size_t n;

	if (c < 0x80)
		return 1;
	if (c < 0xC2 || c > 0xF4)
		return 0;
	n = c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
	if ((size_t)(end - p) < n)
		return 0;
	v = c & (0xFF >> (n + 1));
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xC0) != 0x80)
			return 0;
		v = (v << 6) | (p[i] & 0x3F);
	}
	if ((n == 3 && v < 0x800) || (n == 4 && v < 0x10000) || v > 0x10FFFF ||
	    (v >= 0xD800 && v <= 0xDFFF))
		return 0;
	return n;
}

static int hex4(const unsigned char *p, const unsigned char *end, unsigned *v)
{
	*v = 0;
	if (end - p < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		unsigned c = p[i], d;

		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			return -1;
		*v = (*v << 4) | d;
	}
	return 0;
}

static size_t utf8_put(unsigned v, char *out)
{
	if (v < 0x80) {
		out[0] = (char)v;
		return 1;
	}
	if (v < 0x800) {
		out[0] = (char)(0xC0 | (v >> 6));
		out[1] = (char)(0x80 | (v & 0x3F));
		return 2;
	}
	if (v < 0x10000) {
		out[0] = (char)(0xE0 | (v >> 12));
		out[1] = (char)(0x80 | ((v >> 6) & 0x3F));
		out[2] = (char)(0x80 | (v & 0x3F));
		return 3;
	}
	out[0] = (char)(0xF0 | (v >> 18));
	out[1] = (char)(0x80 | ((v >> 12) & 0x3F));
	out[2] = (char)(0x80 | ((v >> 6) & 0x3F));
	out[3] = (char)(0x80 | (v & 0x3F));
	return 4;
}

/* Gives the whole pages of [*from, to) back to the system (their bytes are
 * read and never will be again) and moves *from to `to`. */
static void release(const char **from, const char *to)
{
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t a = ((uintptr_t)*from + (uintptr_t)pg - 1) & ~((uintptr_t)pg - 1);
	uintptr_t b = (uintptr_t)to & ~((uintptr_t)pg - 1);

	if (b > a)
		madvise((void *)a, b - a, MADV_DONTNEED);
	*from = to;
}

/* One escape at p (after its backslash): its bytes into out.  Returns how
 * many were written, with *p moved past it, or -1 when jansson would refuse
 * it (an unknown escape, a lone or broken surrogate, \u0000). */
static int escape(const unsigned char **p, const unsigned char *end, char *out)
{
	static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
	const char *m;
	unsigned v, v2;

	if (*p >= end)
		return -1;
	if (**p != 'u') {
		m = memchr(from, **p, sizeof(from) - 1);
		if (!m || !**p)
			return -1;
		out[0] = to[m - from];
		(*p)++;
		return 1;
	}
	if (hex4(*p + 1, end, &v) < 0)
		return -1;
	*p += 5;
	if (v >= 0xDC00 && v <= 0xDFFF)
		return -1;
	if (v >= 0xD800 && v <= 0xDBFF) {
		if (end - *p < 6 || (*p)[0] != '\\' || (*p)[1] != 'u' || hex4(*p + 2, end, &v2) < 0 ||
		    v2 < 0xDC00 || v2 > 0xDFFF)
			return -1;
		*p += 6;
		v = ((v - 0xD800) << 10) + (v2 - 0xDC00) + 0x10000;
	}
	if (v == 0)
		return -1; /* NUL: jansson refuses it without JSON_ALLOW_NUL */
	return (int)utf8_put(v, out);
}

/* Decodes the literal [start, end) (quotes included) into a new buffer,
 * releasing its pages as it goes.  Returns 0, or -1 when jansson would
 * refuse the string. */
static int decode(const char *start, const char *end, struct sg_bulk *b)
{
	const unsigned char *p = (const unsigned char *)start + 1, *e = (const unsigned char *)end - 1;
	const char *released = start;
	char *out = sg_xmalloc((size_t)(e - p) + 1);
	size_t n = 0, since = 0;

	while (p < e) {
		/* A plain run stops every RELEASE_EVERY bytes too: content
		 * without escapes is one run, and its pages must go as it is
		 * copied, not after (the message and the copy would be two
		 * whole copies at the peak). */
		const unsigned char *run = p, *stop = e - p > RELEASE_EVERY ? p + RELEASE_EVERY : e;
		size_t k;
		int w;

		p += sg_json_plain((const char *)p, (size_t)(stop - p), true);
		memcpy(out + n, run, (size_t)(p - run));
		n += (size_t)(p - run);
		since += (size_t)(p - run);
		if (p == e)
			break;
		if (p == stop) {
			/* only the release below */
		} else if (*p == '\\') {
			p++;
			if ((w = escape(&p, e, out + n)) < 0)
				goto bad;
			n += (size_t)w;
		} else if (*p < 0x20 || *p == '"' || !(k = utf8_seq(p, e))) {
			goto bad;
		} else {
			memcpy(out + n, p, k);
			n += k;
			p += k;
		}
		if (since >= RELEASE_EVERY) {
			release(&released, (const char *)p);
			since = 0;
		}
		continue;
	}
	release(&released, (const char *)p);
	out[n] = '\0';
	b->data = sg_xrealloc(out, n + 1);
	b->len = n;
	return 0;
bad:
	free(out);
	return -1;
}

/* ---- the message ---------------------------------------------------------------- */

void sg_bulk_free(struct sg_bulk *b)
{
	while (b) {
		struct sg_bulk *next = b->next;

		free(b->key);
		free(b->data);
		json_decref(b->digest);
		free(b);
		b = next;
	}
}

const struct sg_bulk *sg_bulk_find(const struct sg_bulk *b, const char *key)
{
	for (; b; b = b->next)
		if (!strcmp(b->key, key))
			return b;
	return NULL;
}

void sg_bulk_restore(json_t *msg, struct sg_bulk *bulk)
{
	json_t *args = json_object_get(json_object_get(msg, "params"), "arguments");

	for (struct sg_bulk *b = bulk; b; b = b->next)
		json_object_set_new(args, b->key, json_stringn_nocheck(b->data, b->len));
	sg_bulk_free(bulk);
}

/* The message with each large literal replaced by "" (a new buffer). */
static char *without(const char *data, size_t len, const struct found *f, size_t *out_len)
{
	size_t cut = 0, n = 0;
	const char *from = data;
	char *s;

	for (size_t i = 0; i < f->n; i++)
		cut += (size_t)(f->lits[i].end - f->lits[i].start) - 2;
	s = sg_xmalloc(len - cut + 1);
	for (size_t i = 0; i < f->n; i++) {
		memcpy(s + n, from, (size_t)(f->lits[i].start - from));
		n += (size_t)(f->lits[i].start - from);
		memcpy(s + n, "\"\"", 2);
		n += 2;
		from = f->lits[i].end;
	}
	memcpy(s + n, from, (size_t)(data + len - from));
	n += (size_t)(data + len - from);
	s[n] = '\0';
	*out_len = n;
	return s;
}

json_t *sg_rpc_parse_taking(char *data, size_t len, struct sg_bulk **bulk)
{
	struct found *f;
	struct sg_jskip k = { data, data + len };
	json_t *msg = NULL;
	char *small;
	size_t small_len;

	*bulk = NULL;
	if (len < SG_BULK_MIN)
		return json_loadb(data, len, JSON_DECODE_ANY, NULL);
	f = sg_xcalloc(1, sizeof(*f));
	sg_jskip_ws(&k);
	/* Anything unexpected, and jansson reads the message as it is (and
	 * says what is wrong with it). */
	if (k.p < k.end && *k.p == '{' && members(&k, in_message, f) == 0)
		check_dups(f);
	else
		f->n = 0;
	if (f->n == 0 || f->params != 1 || f->arguments != 1 || f->dup) {
		free(f);
		return json_loadb(data, len, JSON_DECODE_ANY, NULL);
	}
	/* The rest first: when it is not JSON, neither is the message. */
	small = without(data, len, f, &small_len);
	msg = json_loadb(small, small_len, JSON_DECODE_ANY, NULL);
	free(small);
	for (size_t i = 0; msg && i < f->n; i++) {
		struct sg_bulk *b = sg_xcalloc(1, sizeof(*b));

		b->key = sg_xstrdup(f->lits[i].key);
		b->next = *bulk;
		*bulk = b;
		if (decode(f->lits[i].start, f->lits[i].end, b) < 0) {
			json_decref(msg);
			msg = NULL;
		}
	}
	if (!msg) {
		sg_bulk_free(*bulk);
		*bulk = NULL;
	}
	free(f);
	return msg;
}
