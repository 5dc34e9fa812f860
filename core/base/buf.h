/* Growable byte buffers: struct sg_buf (include/sandgate/plugin.h), always
 * NUL-terminated past len. */
#ifndef SG_CORE_BUF_H
#define SG_CORE_BUF_H

#include <stddef.h>

#include <sandgate/plugin.h>

/* Appends n bytes to b.  Returns 0, or -1 when the size overflows or the
 * allocation fails (b unchanged). */
int sg_buf_append(struct sg_buf *b, const void *p, size_t n);
/* Asks for transparent huge pages over the whole pages of [p, p + n) when
 * n is at least SG_BUF_HUGE_MIN bytes; smaller ranges are left alone.  For
 * memory not touched yet: glibc maps a block past its mmap threshold
 * (1 MiB, set by sg_mem_init) afresh, and on a VM each 4 KiB page fault
 * costs tens of microseconds, so a 64 MiB buffer took about 1 s of faults
 * here against a few ms in 2 MiB pages.  Never fails: where the kernel
 * has no THP (or it is off) the memory stays as it was. */
#define SG_BUF_HUGE_MIN (4u << 20)
void sg_buf_advise(void *p, size_t n);
/* Frees b's storage and zeroes it.  NULL is fine. */
void sg_buf_release(struct sg_buf *b);

#endif /* SG_CORE_BUF_H */
