/* Growable byte buffers: struct sg_buf (include/sandgate/plugin.h), always
 * NUL-terminated past len. */
#ifndef SG_CORE_BUF_H
#define SG_CORE_BUF_H

#include <stddef.h>

#include <sandgate/plugin.h>

/* Appends n bytes to b.  Returns 0, or -1 when the size overflows or the
 * allocation fails (b unchanged). */
int sg_buf_append(struct sg_buf *b, const void *p, size_t n);
/* Frees b's storage and zeroes it.  NULL is fine. */
void sg_buf_release(struct sg_buf *b);

#endif /* SG_CORE_BUF_H */
