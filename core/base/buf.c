/* Growable byte buffers (struct sg_buf, include/sandgate/plugin.h): the
 * host API's buf_append and buf_release.  Only libc, so that the test
 * programs that drive a plugin without the daemon (t/lib/fakehost.c) use
 * these very functions. */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/buf.h"

int sg_buf_append(struct sg_buf *b, const void *p, size_t n)
{
	size_t need;

	if (n > SIZE_MAX - b->len - 1)
		return -1;
	need = b->len + n + 1;
	if (need > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		char *d;

		while (cap < need)
			cap = cap > SIZE_MAX / 2 ? need : cap * 2;
		d = realloc(b->data, cap);
		if (!d)
			return -1;
		b->data = d;
		b->cap = cap;
	}
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

void sg_buf_release(struct sg_buf *b)
{
	if (!b)
		return;
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}
