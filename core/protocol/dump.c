/*
 * Writing a message out in pieces: see dump.h.  The message's few top
 * levels (the batch, the message, its result, the content array and its
 * blocks, structuredContent and its members) are walked here, in jansson's
 * own order (an object's keys as json_object_foreach gives them, which is
 * the order json_dumps writes them), and their strings written here too:
 * jansson decodes a string character by character as it escapes it, which
 * for a file's 85 MB of base64 cost more than the rest of the reply.
 * Everything deeper goes to jansson's json_dump_callback whole.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/util.h"
#include "core/protocol/dump.h"

/* The levels walked: batch array, message, result, content or
 * structuredContent, block or member. */
#define WALK_DEPTH 5

static json_t *placeholder;
static pthread_once_t placeholder_once = PTHREAD_ONCE_INIT;

/* Immortal, as jansson's own json_null(): a count of (size_t)-1 makes
 * json_incref and json_decref leave it alone (jansson.h), so the threads
 * that put it in their results share it without writing to it (its
 * count's atomic updates beside json_incref's plain read of it are a data
 * race to ThreadSanitizer).  Never freed. */
static void placeholder_init(void)
{
	placeholder = json_string("");
	if (!placeholder)
		abort(); /* out of memory: the sg_xmalloc policy */
	placeholder->refcount = (size_t)-1;
}

json_t *sg_text_of_structured(void)
{
	pthread_once(&placeholder_once, placeholder_init);
	return placeholder;
}

struct dump {
	sg_dump_fn out;
	void *ud;
	const json_t *structured; /* the structuredContent of the result being written */
	const struct sg_bytes *bytes; /* a string held apart, or NULL */
	struct dump *outer; /* the dump a text copy is written into, or NULL */
};

static int put(struct dump *d, const char *p, size_t n)
{
	return n ? d->out(p, n, d->ud) : 0;
}

static int whole(struct dump *d, const json_t *v)
{
	return json_dump_callback(v, d->out, d->ud, JSON_COMPACT | JSON_ENCODE_ANY);
}

/* A JSON string of the n bytes at s, escaped as jansson's dump_string escapes with
 * JSON_COMPACT: '"', '\\', \b \f \n \r \t, other bytes below 0x20 as
 * \u00XX (upper-case hex); everything else as it is.  The bytes are valid
 * UTF-8: jansson checks a value's when it is made, and each maker of a
 * *_nocheck string in sandgate has them valid by construction (base64, a
 * cut on a character boundary, a checked decode); jansson would refuse to
 * write an invalid one, this passes it on. */
static int string(struct dump *d, const char *s, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t run = 0;

	if (put(d, "\"", 1) < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		unsigned char c;
		char seq[6] = { '\\', 0 };
		size_t k = 2;

		i += sg_json_plain(s + i, n - i, false);
		if (i == n)
			break;
		c = (unsigned char)s[i];
		switch (c) {
		case '"': seq[1] = '"'; break;
		case '\\': seq[1] = '\\'; break;
		case '\b': seq[1] = 'b'; break;
		case '\f': seq[1] = 'f'; break;
		case '\n': seq[1] = 'n'; break;
		case '\r': seq[1] = 'r'; break;
		case '\t': seq[1] = 't'; break;
		default:
			memcpy(seq + 1, "u00", 3);
			seq[4] = hex[c >> 4];
			seq[5] = hex[c & 15];
			k = 6;
		}
		if (put(d, s + run, i - run) < 0 || put(d, seq, k) < 0)
			return -1;
		run = i + 1;
	}
	if (put(d, s + run, n - run) < 0)
		return -1;
	return put(d, "\"", 1);
}

/* Held bytes that need no escape: their JSON string is the bytes between
 * quotes, and a text copy's escaping leaves them as they are too, so they
 * go to the outermost writer whole; only the quotes go through d. */
static int plain_string(struct dump *d, const char *s, size_t n)
{
	struct dump *root = d;

	while (root->outer)
		root = root->outer;
	if (put(d, "\"", 1) < 0 || put(root, s, n) < 0)
		return -1;
	return put(d, "\"", 1);
}

static int value(struct dump *d, const json_t *v, int depth);

/* The text copy: a writer that puts what it is given inside a JSON string
 * on the dump in ud.  Compact JSON holds no raw control character (its
 * strings escape them), so only '"' and '\\' are escaped, as jansson
 * escapes them. */
static int escaped(const char *p, size_t n, void *ud)
{
	struct dump *d = ud;
	size_t run = 0;

	for (size_t i = 0; i < n; i++) {
		i += sg_json_plain(p + i, n - i, false); /* compact JSON: no control bytes */
		if (i == n)
			break;
		if (p[i] != '"' && p[i] != '\\')
			continue;
		if (put(d, p + run, i - run) < 0 || put(d, p[i] == '"' ? "\\\"" : "\\\\", 2) < 0)
			return -1;
		run = i + 1;
	}
	return put(d, p + run, n - run);
}

/* structuredContent's JSON text as a JSON string, walked as the message is
 * (it sits at the depth of the content array). */
static int text_of_structured(struct dump *d)
{
	struct dump inner = { .out = escaped, .ud = d, .bytes = d->bytes, .outer = d };
	const json_t *s = d->structured;

	if (put(d, "\"", 1) < 0)
		return -1;
	if (s ? value(&inner, s, 2) < 0 : put(d, "{}", 2) < 0)
		return -1;
	return put(d, "\"", 1);
}

static int object(struct dump *d, const json_t *o, int depth)
{
	const json_t *saved = d->structured, *s = json_object_get(o, "structuredContent");
	const char *key;
	size_t klen;
	json_t *v;
	int first = 1, rc = 0;

	if (s && json_object_get(o, "content"))
		d->structured = s;
	if (put(d, "{", 1) < 0)
		return -1;
	/* a key may hold NUL (json_object_setn): its length, not strlen */
	json_object_keylen_foreach((json_t *)o, key, klen, v) {
		rc = (!first && put(d, ",", 1) < 0) || string(d, key, klen) < 0 ||
		     put(d, ":", 1) < 0 || value(d, v, depth + 1) < 0 ? -1 : 0;
		if (rc < 0)
			return -1;
		first = 0;
	}
	d->structured = saved;
	return put(d, "}", 1);
}

static int value(struct dump *d, const json_t *v, int depth)
{
	size_t i;
	json_t *e;

	if (!v)
		return -1; /* as jansson: no value to write (a failed json_pack) */
	if (v == placeholder)
		return text_of_structured(d);
	if (d->bytes && v == d->bytes->ph)
		return (d->bytes->plain ? plain_string : string)(d, d->bytes->data, d->bytes->len);
	if (json_is_string(v))
		return string(d, json_string_value(v), json_string_length(v));
	if (depth >= WALK_DEPTH)
		return whole(d, v);
	if (json_is_object(v))
		return object(d, v, depth);
	if (!json_is_array(v))
		return whole(d, v);
	if (put(d, "[", 1) < 0)
		return -1;
	json_array_foreach(v, i, e) {
		if ((i && put(d, ",", 1) < 0) || value(d, e, depth + 1) < 0)
			return -1;
	}
	return put(d, "]", 1);
}

int sg_msg_dump(const json_t *msg, const struct sg_bytes *bytes, sg_dump_fn out, void *ud)
{
	struct dump d = { .out = out, .ud = ud, .bytes = bytes && bytes->ph ? bytes : NULL };

	return value(&d, msg, 0);
}
