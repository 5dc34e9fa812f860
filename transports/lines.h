/*
 * Line framing of the stdio transport (MCP basic/transports "stdio": one
 * JSON-RPC message per line), apart from its threads and file descriptors so
 * the unit test and the fuzzer (t/fuzz/fuzz_stdio.c) drive it directly.
 *
 * Bytes are read into the buffer (sg_lines_room, sg_lines_added) and lines
 * taken out (sg_lines_next).  Every byte is searched for a newline once, and
 * the buffer never holds more than one line's worth beyond max: a line
 * longer than max is reported once (SG_LINES_TOO_LONG) and its bytes are
 * dropped as they come, up to its newline.
 *
 * Not thread-safe: one holder at a time (transports/stdio.c: the thread
 * holding the input).
 */
#ifndef SG_TRANSPORTS_LINES_H
#define SG_TRANSPORTS_LINES_H

#include <stdbool.h>
#include <stddef.h>

struct sg_lines {
	char *buf;          /* owned: freed by sg_lines_free() */
	size_t off, len;    /* buf[off, len) is not taken yet */
	size_t cap;
	size_t scanned;     /* buf[off, off + scanned) holds no newline */
	size_t max;         /* longest line taken, in bytes without its newline */
	bool discarding;    /* inside a line longer than max */
};

enum sg_lines_result {
	SG_LINES_NONE = 0,  /* no complete line (yet) */
	SG_LINES_LINE,      /* *line, *n: the next line */
	SG_LINES_TOO_LONG   /* a line longer than max: dropped (told once per line);
			     * *line, *n: its first bytes, at most SG_LINES_HEAD, to
			     * read its id from */
};

#define SG_LINES_HEAD 65536

/* An empty reader for lines of at most max bytes; the buffer is allocated
 * at once (memchr and memmove want one). */
void sg_lines_init(struct sg_lines *l, size_t max);
void sg_lines_free(struct sg_lines *l);

/* Room for at least min bytes at the end of the buffer, which may move.
 * Returns where to write and *room, how many bytes fit there. */
char *sg_lines_room(struct sg_lines *l, size_t min, size_t *room);

/* Records n bytes written at the pointer sg_lines_room() returned. */
void sg_lines_added(struct sg_lines *l, size_t n);

/* Takes the next line: without its newline and trailing '\r', ' ', '\t';
 * empty lines are skipped.  The line points into the buffer, valid until
 * the next sg_lines_room(); it is consumed already, so another holder
 * continues after it. */
enum sg_lines_result sg_lines_next(struct sg_lines *l, const char **line, size_t *n);

/* True when a complete line (or the end of a dropped one) is buffered:
 * sg_lines_next() would not need more bytes. */
bool sg_lines_ready(struct sg_lines *l);

/* At the end of input: the unterminated last line, trimmed like a line,
 * unless it is empty or part of a dropped one.  Takes it. */
bool sg_lines_last(struct sg_lines *l, const char **line, size_t *n);

#endif
