/* Docker archive API tars, in memory: see tar.h. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/docker/tar.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <archive.h>
#include <archive_entry.h>

#define DOCKER_TAR_CHUNK 65536

/* Puts a buffer back at an older length, keeping it NUL-terminated. */
static void docker_tar_truncate(struct sg_buf *b, size_t len)
{
	b->len = len;
	if (b->data)
		b->data[len] = '\0';
}

/* ---- writing ----------------------------------------------------------------- */

struct docker_tar_sink {
	const struct sg_host_api *host;
	struct sg_buf *out;
};

static la_ssize_t docker_tar_write_cb(struct archive *a, void *ud,
				      const void *p, size_t n)
{
	struct docker_tar_sink *sink = ud;

	if (sink->host->buf_append(sink->out, p, n) < 0) {
		archive_set_error(a, ENOMEM, "out of memory");
		return -1;
	}
	return (la_ssize_t)n;
}

int docker_tar_pack_file(const struct sg_host_api *host, const char *name,
			 const void *data, size_t len, unsigned mode,
			 struct sg_buf *out, struct sg_err *err)
{
	struct docker_tar_sink sink = { .host = host, .out = out };
	struct archive *a = archive_write_new();
	struct archive_entry *ent = archive_entry_new();
	size_t old = out->len;
	int rc = -1;

	if (!a || !ent) {
		host->errf(err, SG_E_NOMEM, "docker: out of memory");
		goto out;
	}
	/* pax keeps names of any length; no padding past the last block. */
	if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
	    archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK ||
	    archive_write_open(a, &sink, NULL, docker_tar_write_cb, NULL) != ARCHIVE_OK)
		goto fail;
	/* libarchive converts a name through the locale: in the C locale a
	 * byte above 0x7f fails ("Can't translate pathname") or, set as UTF-8,
	 * crashes archive_write_header (a NULL name).  Callers give ASCII names
	 * (a temporary name, renamed by exec with the real one as an argument). */
	for (const char *p = name; *p; p++)
		if ((unsigned char)*p >= 0x80) {
			host->errf(err, SG_E_INVAL, "docker: archive entry name '%s' is not ASCII",
				   name);
			goto out;
		}
	archive_entry_set_pathname(ent, name);
	archive_entry_set_filetype(ent, AE_IFREG);
	archive_entry_set_perm(ent, mode & 07777);
	archive_entry_set_size(ent, (la_int64_t)len);
	archive_entry_set_mtime(ent, time(NULL), 0);
	if (archive_write_header(a, ent) != ARCHIVE_OK)
		goto fail;
	if (len > 0 && archive_write_data(a, data, len) != (la_ssize_t)len)
		goto fail;
	if (archive_write_close(a) != ARCHIVE_OK)
		goto fail;
	rc = 0;
	goto out;
fail:
	host->errf(err, SG_E_INTERNAL, "docker: building the tar for %s failed: %s",
		   name, archive_error_string(a) ? archive_error_string(a) : "unknown");
	docker_tar_truncate(out, old);
out:
	archive_entry_free(ent);
	if (a)
		archive_write_free(a);
	return rc;
}

/* ---- reading ----------------------------------------------------------------- */

static int docker_tar_kind_of(mode_t type)
{
	switch (type) {
	case AE_IFREG:
		return DOCKER_TAR_FILE;
	case AE_IFDIR:
		return DOCKER_TAR_DIR;
	case AE_IFLNK:
		return DOCKER_TAR_SYMLINK;
	default:
		return DOCKER_TAR_OTHER;
	}
}

/* Copies the current entry's data (size bytes) into out. */
static int docker_tar_copy(const struct sg_host_api *host, struct archive *a,
			   const char *what, uint64_t size, struct sg_buf *out,
			   struct sg_err *err)
{
	char chunk[DOCKER_TAR_CHUNK];
	uint64_t got = 0;
	la_ssize_t r;

	while ((r = archive_read_data(a, chunk, sizeof(chunk))) > 0) {
		if (host->buf_append(out, chunk, (size_t)r) < 0)
			return host->errf(err, SG_E_NOMEM, "docker: out of memory reading %s",
					  what);
		got += (uint64_t)r;
	}
	if (r < 0)
		return host->errf(err, SG_E_PROTO, "docker: the tar of %s is damaged: %s",
				  what, archive_error_string(a));
	if (got != size)
		return host->errf(err, SG_E_PROTO, "docker: the tar of %s holds %llu of "
				  "%llu bytes", what, (unsigned long long)got,
				  (unsigned long long)size);
	return 0;
}

int docker_tar_unpack_file(const struct sg_host_api *host, const void *tar,
			   size_t len, size_t max, const char *what,
			   struct sg_buf *out, struct docker_tar_entry *ent,
			   struct sg_err *err)
{
	struct archive *a = archive_read_new();
	struct archive_entry *e;
	size_t old = out->len;
	int rc = -1, r;

	memset(ent, 0, sizeof(*ent));
	if (!a)
		return host->errf(err, SG_E_NOMEM, "docker: out of memory");
	archive_read_support_format_tar(a);
	if (archive_read_open_memory(a, tar, len) != ARCHIVE_OK) {
		host->errf(err, SG_E_PROTO, "docker: the archive of %s is not a tar: %s",
			   what, archive_error_string(a));
		goto out;
	}
	r = archive_read_next_header(a, &e);
	if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
		host->errf(err, SG_E_PROTO, "docker: the archive of %s has no entry: %s",
			   what, r == ARCHIVE_EOF ? "empty" : archive_error_string(a));
		goto out;
	}
	ent->kind = docker_tar_kind_of(archive_entry_filetype(e));
	ent->size = archive_entry_size(e) > 0 ? (uint64_t)archive_entry_size(e) : 0;
	if (ent->kind == DOCKER_TAR_SYMLINK && archive_entry_symlink(e)) {
		ent->link = strdup(archive_entry_symlink(e)); /* caller frees */
		if (!ent->link) {
			host->errf(err, SG_E_NOMEM, "docker: out of memory");
			goto out;
		}
	}
	if (ent->kind != DOCKER_TAR_FILE) {
		rc = 0;
		goto out;
	}
	/* The size check comes from the header, before any data is read. */
	if (ent->size > max) {
		host->errf(err, SG_E_TOOBIG, "%s is %llu bytes, more than the %zu allowed: "
			   "read a part of it with a command (head, tail, sed -n) or "
			   "raise [docker] file_cap", what,
			   (unsigned long long)ent->size, max);
		goto out;
	}
	if (docker_tar_copy(host, a, what, ent->size, out, err) < 0) {
		docker_tar_truncate(out, old);
		goto out;
	}
	rc = 0;
out:
	archive_read_free(a);
	if (rc < 0) {
		free(ent->link);
		ent->link = NULL;
	}
	return rc;
}

int docker_tar_frame_file(const struct sg_host_api *host, const char *name, size_t len,
			  unsigned mode, struct docker_tar_frame *fr, struct sg_err *err)
{
	size_t nlen = strlen(name), pad = (512 - len % 512) % 512;
	unsigned sum = 0;
	char *h = fr->head;

	if (nlen == 0 || nlen >= 100 || name[0] == '/')
		return host->errf(err, SG_E_INVAL, "docker: archive entry name '%s' does not fit "
				  "a ustar header", name);
	for (const char *p = name; *p; p++)
		if ((unsigned char)*p >= 0x80)
			return host->errf(err, SG_E_INVAL, "docker: archive entry name '%s' is not "
					  "ASCII", name);
	if ((unsigned long long)len > 077777777777ULL)
		return host->errf(err, SG_E_TOOBIG, "docker: %zu bytes do not fit one archive "
				  "entry (8 GiB)", len);
	memset(fr, 0, sizeof(*fr));
	memcpy(h, name, nlen);
	snprintf(h + 100, 8, "%07o", mode & 07777);
	snprintf(h + 108, 8, "%07o", 0);
	snprintf(h + 116, 8, "%07o", 0);
	snprintf(h + 124, 12, "%011llo", (unsigned long long)len);
	snprintf(h + 136, 12, "%011llo", (unsigned long long)time(NULL) & 077777777777ULL);
	memset(h + 148, ' ', 8);
	h[156] = '0';
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	for (size_t i = 0; i < 512; i++)
		sum += (unsigned char)h[i];
	snprintf(h + 148, 8, "%06o", sum & 0777777);
	h[155] = ' ';
	fr->tail_len = pad + 1024;
	return 0;
}
