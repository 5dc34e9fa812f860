/*
 * Large tool arguments, decoded once (core/protocol/bulk.c).
 *
 * jansson turns a JSON string into a value through two buffers of its
 * size: the lexer keeps the raw text of the token and decodes it into a
 * second buffer, the value's; with the message itself that made three
 * copies of a file's content at once (a 60 MB write_file peaked at three
 * times its size).  A string of at least SG_BULK_MIN bytes among a
 * tools/call's params.arguments is therefore decoded here, straight from
 * the message into a buffer of its own (the "bulk"), while the pages of
 * the message it was read from are given back to the system; the message
 * jansson parses holds "" in its place.  The router hands the bulk to the
 * tool when the tool takes that argument that way (struct sg_tool's
 * bulk_arg), and puts it back as a JSON string otherwise, so every other
 * reader sees the message as it was sent.  Decoding follows jansson's
 * rules (escapes, surrogate pairs, UTF-8, no NUL), and a message it
 * refuses is refused as jansson would: a parse error.
 */
#ifndef SG_CORE_BULK_H
#define SG_CORE_BULK_H

#include <stddef.h>

#include <jansson.h>

#define SG_BULK_MIN (1024 * 1024)

struct sg_bulk {
	char *key;               /* the member of params.arguments, owned */
	char *data;              /* its decoded bytes, NUL-terminated, owned */
	size_t len;
	/* The audit's digest of data as it came (sg_redact_digest()), taken
	 * by a tool that then changed data in place (sg_tool_take_bulk()),
	 * or NULL; owned.  Once it is set, data and len are the tool's: no
	 * one reads them as the argument again. */
	json_t *digest;
	struct sg_bulk *next;
};

/* Parses one JSON-RPC message as sg_rpc_parse() does, taking its large
 * arguments out into *bulk (NULL when there are none; the caller frees
 * the list with sg_bulk_free()).  The pages of data[0..len) that were read
 * may be given back to the system as they are: the caller must not read
 * data after the call (it may free or reuse the buffer).  Returns a new
 * reference, or NULL when the message is not valid JSON. */
json_t *sg_rpc_parse_taking(char *data, size_t len, struct sg_bulk **bulk);

/* Puts every bulk back into msg's params.arguments as a JSON string (a
 * copy) and frees the list. */
void sg_bulk_restore(json_t *msg, struct sg_bulk *bulk);

/* The bulk taken for argument `key`, or NULL. */
const struct sg_bulk *sg_bulk_find(const struct sg_bulk *bulk, const char *key);

void sg_bulk_free(struct sg_bulk *bulk);

#endif
