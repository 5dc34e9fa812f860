/*
 * Writing a message out in pieces: see dump.h.  The message's few top
 * levels (the batch, the message, its result, the content array and its
 * blocks) are walked here, in jansson's own order (an object's keys as
 * json_object_foreach gives them, which is the order json_dumps writes
 * them); everything below goes to jansson's json_dump_callback whole.
 */
#include "config.h"

#include <pthread.h>
#include <string.h>

#include "core/protocol/dump.h"

/* The levels walked: batch array, message, result, content, block. */
#define WALK_DEPTH 5

static json_t *placeholder;
static pthread_once_t placeholder_once = PTHREAD_ONCE_INIT;

static void placeholder_init(void)
{
	placeholder = json_string("");
}

json_t *sg_text_of_structured(void)
{
	pthread_once(&placeholder_once, placeholder_init);
	return json_incref(placeholder);
}

struct dump {
	sg_dump_fn out;
	void *ud;
	const json_t *structured; /* the structuredContent of the result being written */
};

static int put(struct dump *d, const char *p, size_t n)
{
	return n ? d->out(p, n, d->ud) : 0;
}

static int whole(struct dump *d, const json_t *v)
{
	return json_dump_callback(v, d->out, d->ud, JSON_COMPACT | JSON_ENCODE_ANY);
}

/* The text as a JSON string's contents: compact JSON holds no raw control
 * character (its strings escape them), so only '"' and '\' are escaped,
 * as jansson escapes them. */
static int escaped(const char *p, size_t n, void *ud)
{
	struct dump *d = ud;
	size_t run = 0;

	for (size_t i = 0; i < n; i++) {
		if (p[i] != '"' && p[i] != '\\')
			continue;
		if (put(d, p + run, i - run) < 0 || put(d, p[i] == '"' ? "\\\"" : "\\\\", 2) < 0)
			return -1;
		run = i + 1;
	}
	return put(d, p + run, n - run);
}

static int text_of_structured(struct dump *d)
{
	const json_t *s = d->structured;

	if (put(d, "\"", 1) < 0)
		return -1;
	if (s ? json_dump_callback(s, escaped, d, JSON_COMPACT) < 0 : put(d, "{}", 2) < 0)
		return -1;
	return put(d, "\"", 1);
}

static int value(struct dump *d, const json_t *v, int depth);

static int object(struct dump *d, const json_t *o, int depth)
{
	const json_t *saved = d->structured, *s = json_object_get(o, "structuredContent");
	const char *key;
	json_t *v;
	int first = 1, rc = 0;

	if (s && json_object_get(o, "content"))
		d->structured = s;
	if (put(d, "{", 1) < 0)
		return -1;
	json_object_foreach((json_t *)o, key, v) {
		json_t *k = json_string(key);

		rc = !k || (!first && put(d, ",", 1) < 0) || whole(d, k) < 0 || put(d, ":", 1) < 0 ||
		     value(d, v, depth + 1) < 0 ? -1 : 0;
		json_decref(k);
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

	if (v == placeholder)
		return text_of_structured(d);
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

int sg_msg_dump(const json_t *msg, sg_dump_fn out, void *ud)
{
	struct dump d = { .out = out, .ud = ud };

	return value(&d, msg, 0);
}
