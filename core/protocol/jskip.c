/* Skipping through unparsed JSON text (core/protocol/jskip.h). */
#include "config.h"

#include <string.h>

#include "core/protocol/jskip.h"

void sg_jskip_ws(struct sg_jskip *k)
{
	while (k->p < k->end && (*k->p == ' ' || *k->p == '\t' || *k->p == '\n' || *k->p == '\r'))
		k->p++;
}

/* memchr to each quote: a file's content may be megabytes long. */
int sg_jskip_string(struct sg_jskip *k)
{
	const char *q = k->p + 1;

	for (;;) {
		const char *b;

		if (q >= k->end)
			return -1;
		q = memchr(q, '"', (size_t)(k->end - q));
		if (!q)
			return -1;
		for (b = q; b > k->p + 1 && b[-1] == '\\'; b--)
			;
		if ((q - b) % 2 == 0) { /* not escaped */
			k->p = q + 1;
			return 0;
		}
		q++;
	}
}

int sg_jskip_value(struct sg_jskip *k)
{
	size_t depth = 0;

	if (k->p < k->end && *k->p != '"' && *k->p != '{' && *k->p != '[') {
		while (k->p < k->end && !memchr(",}] \t\n\r", *k->p, 7))
			k->p++;
		return k->p < k->end ? 0 : -1;
	}
	do {
		if (k->p >= k->end)
			return -1;
		if (*k->p == '"') {
			if (sg_jskip_string(k) < 0)
				return -1;
			continue;
		}
		if (*k->p == '{' || *k->p == '[')
			depth++;
		else if (*k->p == '}' || *k->p == ']')
			depth--;
		k->p++;
	} while (depth > 0);
	return 0;
}
