/*
 * The output a shell keeps for its caller (core/shell/headtail.h): a head
 * and a tail in the proportion [shell] head_size : tail_size (one tenth
 * head by default), what falls out of the middle counted, cut at character
 * boundaries.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/conf.h"
#include "core/base/util.h"
#include "core/shell/headtail.h"
#include "core/shell/shell.h"

static size_t utf8_len_of(unsigned char c)
{
	if (c < 0x80)
		return 1;
	if ((c & 0xE0) == 0xC0)
		return 2;
	if ((c & 0xF0) == 0xE0)
		return 3;
	if ((c & 0xF8) == 0xF0)
		return 4;
	return 1;
}

/* The longest prefix of p[0..n) that does not end inside a character. */
size_t sg_utf8_cut_back(const char *p, size_t n)
{
	size_t i = n;

	for (int back = 0; back < 4 && i > 0; back++, i--) {
		unsigned char c = (unsigned char)p[i - 1];

		if ((c & 0xC0) != 0x80)
			return (i - 1) + utf8_len_of(c) > n ? i - 1 : n;
	}
	return n;
}

/* Continuation bytes at the start of p (a character cut in the middle). */
static size_t utf8_skip(const char *p, size_t n)
{
	size_t k = 0;

	while (k < n && k < 3 && ((unsigned char)p[k] & 0xC0) == 0x80)
		k++;
	return k;
}

/* The head's share of max: [shell] head_size : tail_size (one tenth by
 * default). */
static size_t head_share(size_t max)
{
	long long hs = sg_config_int("shell", "head_size", 5120);
	long long ts = sg_config_int("shell", "tail_size", 46080);

	if (hs < 0 || ts < 0 || hs + ts <= 0)
		return max / 10;
	return (size_t)((double)max * (double)hs / (double)(hs + ts));
}

void sg_ht_reset(struct sg_headtail *h, size_t max)
{
	sg_buf_release(&h->head);
	sg_buf_release(&h->tail);
	h->hcap = head_share(max);
	h->tcap = max - h->hcap ? max - h->hcap : 1;
	h->dropped = h->total = 0;
}

void sg_ht_add(struct sg_headtail *h, const char *p, size_t n)
{
	h->total += n;
	if (h->dropped == 0 && h->tail.len == 0 && h->head.len < h->hcap) {
		size_t k = n < h->hcap - h->head.len ? n : h->hcap - h->head.len;

		if (sg_buf_append(&h->head, p, k) < 0)
			abort();
		p += k;
		n -= k;
	}
	if (n == 0)
		return;
	if (sg_buf_append(&h->tail, p, n) < 0)
		abort();
	if (h->tail.len > 2 * h->tcap) {
		size_t drop = h->tail.len - h->tcap;

		memmove(h->tail.data, h->tail.data + drop, h->tcap);
		h->tail.len = h->tcap;
		h->dropped += drop;
	}
}

/* head + a drop line + tail, cut at character boundaries.  New string. */
char *sg_ht_render(const struct sg_headtail *h, size_t *outlen, uint64_t *dropped)
{
	const char *head = h->head.data ? h->head.data : "", *tail = h->tail.data ? h->tail.data : "";
	size_t hl = h->head.len, tl = h->tail.len;
	uint64_t d = h->dropped;
	struct sg_buf b = { 0 };
	char line[96];

	if (tl > h->tcap) {
		d += tl - h->tcap;
		tail += tl - h->tcap;
		tl = h->tcap;
	}
	if (d > 0) {
		size_t keep = sg_utf8_cut_back(head, hl), skip = utf8_skip(tail, tl);

		d += (hl - keep) + skip;
		hl = keep;
		tail += skip;
		tl -= skip;
	}
	sg_buf_append(&b, head, hl);
	if (d > 0) {
		snprintf(line, sizeof(line), "\n[sandgate: %llu bytes dropped from the middle of the output]\n",
			 (unsigned long long)d);
		sg_buf_append(&b, line, strlen(line));
	}
	sg_buf_append(&b, tail, tl);
	if (!b.data)
		b.data = sg_xstrdup("");
	*outlen = b.len;
	*dropped = d;
	return b.data;
}

char *sg_shell_truncate(const char *p, size_t n, size_t max, size_t *outlen, uint64_t *dropped)
{
	struct sg_headtail h = { 0 };
	char *s;

	if (n <= max) {
		s = sg_xmalloc(n + 1);
		memcpy(s, p, n);
		s[n] = '\0';
		*outlen = n;
		*dropped = 0;
		return s;
	}
	sg_ht_reset(&h, max);
	sg_ht_add(&h, p, n);
	s = sg_ht_render(&h, outlen, dropped);
	sg_buf_release(&h.head);
	sg_buf_release(&h.tail);
	return s;
}
