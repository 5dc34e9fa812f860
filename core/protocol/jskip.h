/*
 * Skipping through JSON text that jansson has not parsed yet: the stdio
 * reader's peek at a message's id (jsonrpc.c) and the search for a message's
 * large arguments (bulk.c) move over values without building them.  They
 * check only what they need to find the end of a value; jansson checks the
 * rest when it parses.
 */
#ifndef SG_CORE_JSKIP_H
#define SG_CORE_JSKIP_H

/* A cursor: p moves towards end (exclusive); neither is owned. */
struct sg_jskip {
	const char *p, *end;
};

/* Skips JSON whitespace. */
void sg_jskip_ws(struct sg_jskip *k);
/* k->p at a string's opening quote: moves past its closing one.  Returns 0,
 * or -1 when the string does not close within the bytes. */
int sg_jskip_string(struct sg_jskip *k);
/* Skips one value: a string or container to its end, a scalar to the
 * delimiter after it, which must be within the bytes (a number cut there
 * could go on).  Returns 0, or -1. */
int sg_jskip_value(struct sg_jskip *k);

#endif
