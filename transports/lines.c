/* Line framing of the stdio transport: see lines.h. */
#include "config.h"

#include <string.h>

#include "core/base/util.h"
#include "transports/lines.h"

#define LINES_FIRST_CAP 4096 /* grown by the first sg_lines_room() of a read */

void sg_lines_init(struct sg_lines *l, size_t max)
{
	memset(l, 0, sizeof(*l));
	l->max = max;
	l->cap = LINES_FIRST_CAP;
	l->buf = sg_xmalloc(l->cap);
}

void sg_lines_free(struct sg_lines *l)
{
	free(l->buf);
	memset(l, 0, sizeof(*l));
}

/* Moves the untaken bytes to the front. */
static void compact(struct sg_lines *l)
{
	memmove(l->buf, l->buf + l->off, l->len - l->off);
	l->len -= l->off;
	l->off = 0;
}

char *sg_lines_room(struct sg_lines *l, size_t min, size_t *room)
{
	/* Moving costs what it frees at most: a long partial line is not
	 * copied on every read. */
	if (l->off > 0 && l->len - l->off <= l->off)
		compact(l);
	if (l->cap - l->len < min && l->off > 0)
		compact(l);
	if (l->cap - l->len < min) {
		while (l->cap - l->len < min)
			l->cap *= 2;
		l->buf = sg_xrealloc(l->buf, l->cap);
	}
	*room = l->cap - l->len;
	return l->buf + l->len;
}

void sg_lines_added(struct sg_lines *l, size_t n)
{
	l->len += n;
}

/* The first newline in the untaken bytes, searching only bytes not searched
 * before; NULL when there is none (l->scanned then covers them all). */
static char *find_newline(struct sg_lines *l)
{
	char *from = l->buf + l->off + l->scanned;
	char *nl = memchr(from, '\n', l->len - l->off - l->scanned);

	l->scanned = nl ? (size_t)(nl - (l->buf + l->off)) : l->len - l->off;
	return nl;
}

/* Drops every untaken byte (part of an oversized line). */
static void drop_all(struct sg_lines *l)
{
	l->off = l->len = 0;
	l->scanned = 0;
}

/* Takes the bytes up to and including nl. */
static void take_through(struct sg_lines *l, const char *nl)
{
	l->off = (size_t)(nl - l->buf) + 1;
	l->scanned = 0;
	if (l->off == l->len)
		drop_all(l);
}

static size_t trim(const char *p, size_t n)
{
	while (n > 0 && (p[n - 1] == '\r' || p[n - 1] == ' ' || p[n - 1] == '\t'))
		n--;
	return n;
}

enum sg_lines_result sg_lines_next(struct sg_lines *l, const char **line, size_t *n)
{
	for (;;) {
		char *start = l->buf + l->off, *nl = find_newline(l);
		size_t k;

		if (l->discarding) {
			if (!nl) {
				drop_all(l);
				return SG_LINES_NONE;
			}
			l->discarding = false;
			take_through(l, nl);
			continue;
		}
		if (!nl) {
			if (l->len - l->off <= l->max)
				return SG_LINES_NONE;
			/* Too long already, whatever follows.  Its head stays
			 * readable until the next sg_lines_room(). */
			*line = start;
			*n = l->len - l->off < SG_LINES_HEAD ? l->len - l->off : SG_LINES_HEAD;
			l->discarding = true;
			drop_all(l);
			return SG_LINES_TOO_LONG;
		}
		k = (size_t)(nl - start);
		take_through(l, nl);
		if (k > l->max) {
			*line = start;
			*n = k < SG_LINES_HEAD ? k : SG_LINES_HEAD;
			return SG_LINES_TOO_LONG;
		}
		k = trim(start, k);
		if (k == 0)
			continue;
		*line = start;
		*n = k;
		return SG_LINES_LINE;
	}
}

bool sg_lines_ready(struct sg_lines *l)
{
	if (find_newline(l))
		return true;
	return !l->discarding && l->len - l->off > l->max;
}

bool sg_lines_last(struct sg_lines *l, const char **line, size_t *n)
{
	size_t k = l->len - l->off;
	const char *start = l->buf + l->off;

	if (l->discarding || k > l->max) {
		drop_all(l);
		return false;
	}
	k = trim(start, k);
	drop_all(l);
	if (k == 0)
		return false;
	*line = start;
	*n = k;
	return true;
}
