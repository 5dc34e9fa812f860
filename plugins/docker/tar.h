/*
 * The tar side of Docker's archive API (GET/PUT /containers/{id}/archive),
 * built and read with libarchive, entirely in memory.
 */
#ifndef SG_DOCKER_TAR_H
#define SG_DOCKER_TAR_H

#include <stddef.h>
#include <stdint.h>

#include <sandgate/plugin.h>

enum docker_tar_kind {
	DOCKER_TAR_FILE = 0,
	DOCKER_TAR_DIR,
	DOCKER_TAR_SYMLINK,
	DOCKER_TAR_OTHER
};

/* Appends to *out (grown with host->buf_append, owned by the caller) a tar
 * archive (pax) that holds one regular file `name` (relative, no leading '/')
 * with permission bits `mode` and the bytes data[0..len).  Returns 0, or -1
 * with err filled. */
int docker_tar_pack_file(const struct sg_host_api *host, const char *name,
			 const void *data, size_t len, unsigned mode,
			 struct sg_buf *out, struct sg_err *err);

/* The bytes around a one-file archive that is sent in pieces, the
 * content never copied: head (one ustar block), then the content, then
 * tail[0..tail_len) (padding to the block and the two end blocks). */
struct docker_tar_frame {
	char head[512];
	char tail[512 + 1024];
	size_t tail_len;
};

/* Fills *fr for a regular file `name` (ASCII, under 100 bytes, no leading
 * '/') of len bytes with permission bits `mode`.  Returns 0, or -1 with err
 * (SG_E_INVAL: a name that does not fit; SG_E_TOOBIG: 8 GiB or more). */
int docker_tar_frame_file(const struct sg_host_api *host, const char *name, size_t len,
			  unsigned mode, struct docker_tar_frame *fr, struct sg_err *err);

/* What the first entry of an archive was. */
struct docker_tar_entry {
	int kind;       /* enum docker_tar_kind */
	uint64_t size;  /* from the header */
	char *link;     /* a symlink's target (malloc'd, caller frees), or NULL */
};

/* Reads the first entry of the archive tar[0..len).  A regular file of at most
 * `max` bytes has its exact bytes appended to *out; its size is checked from
 * the header before any byte is read, and a larger one fails SG_E_TOOBIG.
 * Other kinds only fill *ent.  `what` names the file in messages.  Returns 0,
 * or -1 with err filled (out is then back at its old length). */
int docker_tar_unpack_file(const struct sg_host_api *host, const void *tar,
			   size_t len, size_t max, const char *what,
			   struct sg_buf *out, struct docker_tar_entry *ent,
			   struct sg_err *err);

#endif /* SG_DOCKER_TAR_H */
