/*
 * A shell's output buffer: bounded however much a command writes.  Owned by
 * its shell (guarded by the shell's lock); sg_ht_reset() frees what it held.
 */
#ifndef SG_CORE_SHELL_HEADTAIL_H
#define SG_CORE_SHELL_HEADTAIL_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/buf.h"

/* Output not yet delivered: the first hcap bytes, and the last bytes in a
 * buffer trimmed to tcap whenever it doubles; what falls out is counted. */
struct sg_headtail {
	size_t hcap, tcap;
	struct sg_buf head, tail;
	uint64_t dropped, total;
};

/* Empties h (freeing its buffers) and sets its bound to max bytes. */
void sg_ht_reset(struct sg_headtail *h, size_t max);
/* Adds n bytes of output. */
void sg_ht_add(struct sg_headtail *h, const char *p, size_t n);
/* head + a line saying how many bytes were dropped + tail, cut at
 * character boundaries: a new string (caller frees), its length in
 * *outlen, the bytes dropped in *dropped. */
char *sg_ht_render(const struct sg_headtail *h, size_t *outlen, uint64_t *dropped);
/* The longest prefix of p[0..n) that does not end inside a UTF-8
 * character. */
size_t sg_utf8_cut_back(const char *p, size_t n);

#endif
