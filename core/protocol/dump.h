/*
 * Writing a message out in pieces (core/protocol/dump.c).
 *
 * A tool's result says the same thing twice (MCP 2025-11-25 server/tools,
 * "Structured Content": a tool returning structuredContent SHOULD also
 * return it serialised in a TextContent block): built up front, a 64 MiB
 * file read as base64 was held as its 85 MiB string, that string's JSON
 * text, the text's JSON string and the whole message's text at once.  The
 * text block's "text" is therefore a placeholder, sg_text_of_structured(),
 * that sg_msg_dump() replaces with the JSON text of the structuredContent
 * next to it while it writes, and the message goes to its writer in pieces
 * rather than as one string.  The bytes written are exactly those of
 * json_dumps(JSON_COMPACT) of the message with the text made up front.
 */
#ifndef SG_CORE_DUMP_H
#define SG_CORE_DUMP_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* Receives the next n bytes of the text (n > 0); ud is the writer's.
 * Returns 0, or -1 to stop the dump. */
typedef int (*sg_dump_fn)(const char *p, size_t n, void *ud);

/* The placeholder for a text block's "text" in a tool result
 * {"content": [{"type": "text", "text": PLACEHOLDER}, ...],
 *  "structuredContent": {...}}: it stands for the JSON text (compact) of
 * that structuredContent, as it is when the message is written.  Returns
 * one shared, immortal value (recognised by identity; its own string is "",
 * what a reader of the unwritten message sees): a reference to it needs no
 * json_decref, and one is harmless. */
json_t *sg_text_of_structured(void);

/* A string of a result too large to copy into jansson (a file read whole:
 * jansson's copy of its 85 MB of base64 was a third of the read's memory
 * and time): a value of its own, `ph` (a JSON string "", recognised by
 * identity), stands in the result where the string belongs, and the
 * writer writes the bytes in its place.  data[0..len) is valid UTF-8
 * without NUL, as a *_nocheck string must be.  plain: no byte of it is
 * one JSON escapes (base64's alphabet), so the writer copies it as it is
 * into the string and into the text block's copy, without scanning it.
 * The holder (struct sg_call) owns ph's reference and data. */
struct sg_bytes {
	json_t *ph;
	char *data;
	size_t len;
	bool plain;
};

/* Writes msg (borrowed: a message, or an array of them) compact, in pieces
 * to out, the placeholders replaced: the text block's, and bytes->ph by
 * bytes->data when bytes is not NULL (ph must be a member of a result or
 * of its structuredContent: deeper, it would be written as "").  Returns
 * 0, or -1 when out stopped it or jansson refused a value (what was
 * written by then stays written). */
int sg_msg_dump(const json_t *msg, const struct sg_bytes *bytes, sg_dump_fn out, void *ud);

#endif
