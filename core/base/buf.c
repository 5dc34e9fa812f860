/* Growable byte buffers (struct sg_buf, include/sandgate/plugin.h): the
 * host API's buf_append and buf_release.  Only libc, so that the test
 * programs that drive a plugin without the daemon (t/lib/fakehost.c) use
 * these very functions. */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/base/buf.h"

void sg_buf_advise(void *p, size_t n)
{
#ifdef MADV_HUGEPAGE
	long v = sysconf(_SC_PAGESIZE);
	uintptr_t page = v > 0 ? (uintptr_t)v : 4096, a, b;

	if (n < SG_BUF_HUGE_MIN || !p)
		return;
	a = ((uintptr_t)p + page - 1) & ~(page - 1);
	b = ((uintptr_t)p + n) & ~(page - 1);
	if (b > a)
		(void)madvise((void *)a, b - a, MADV_HUGEPAGE);
#else
	(void)p;
	(void)n;
#endif
}

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
		sg_buf_advise(d + b->len, cap - b->len);
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
