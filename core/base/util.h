/* Small helpers shared by the core: allocation that aborts on OOM, byte
 * buffers (core/base/buf.h), hashing, randomness, UTF-8 and base64, clocks. */
#ifndef SG_CORE_UTIL_H
#define SG_CORE_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sandgate/plugin.h>

#include "core/base/buf.h"

/* Core buffers: a machine id (host->machine_set refuses longer ones) and a
 * path on this host. */
#define SG_ID_MAX   256
#define SG_PATH_MAX 4096

/* Internal allocations abort on OOM (the git and glib policy): sizes that
 * come from outside are bounded before they reach these. */
void *sg_xmalloc(size_t n);
void *sg_xcalloc(size_t n, size_t size);
void *sg_xrealloc(void *p, size_t n);
char *sg_xstrdup(const char *s);
char *sg_xasprintf(const char *fmt, ...) SG_PRINTF(1, 2);


/* Writes the lowercase hex SHA-256 of data into hex (65 bytes). */
void sg_sha256_hex(const void *data, size_t len, char hex[65]);

/* Writes the lowercase hex HMAC-SHA256 of data under key into hex. */
void sg_hmac_sha256_hex(const void *key, size_t key_len, const void *data, size_t len,
			char hex[65]);

/* Opens path with flags (O_RDONLY, O_RDWR, O_WRONLY | O_APPEND, ...),
 * creating it mode 0600 when it is missing, never through a symbolic link,
 * close-on-exec.  With `tighten`, a file of ours that group or others may
 * read or write is made 0600 first.  Returns the descriptor (the caller
 * closes it), or -1 with errno set. */
int sg_file_open_private(const char *path, int flags, bool tighten);

/* Fills p with n bytes from the kernel's CSPRNG.  Returns 0 or -1. */
int sg_random_bytes(void *p, size_t n);
/* Writes 2*n random hex digits and a NUL into out (2*n+1 bytes). */
int sg_random_hex(char *out, size_t n);

/* Returns a new NUL-terminated string holding p[0..n) as valid UTF-8: each
 * invalid sequence becomes U+FFFD, and so does a NUL byte (which would cut
 * a C string short).  Caller frees.  *replaced (may be NULL) says whether
 * anything was replaced. */
char *sg_utf8_sanitize(const char *p, size_t n, bool *replaced);

/* The same, keeping NUL bytes (JSON can carry them as \u0000): *outlen gets
 * the length of the result, which may hold NULs.  Caller frees. */
char *sg_utf8_sanitize_keep_nul(const char *p, size_t n, size_t *outlen);
/* True when p[0..n) is valid UTF-8 without NUL bytes. */
bool sg_utf8_valid(const char *p, size_t n);

/* How many of the n bytes at s stand in a JSON string as they are: none
 * below 0x20, '"' or '\\' (RFC 8259 section 7), nor, with ascii, 0x80 or
 * above (where a reader checks UTF-8 itself).  Eight bytes at a time: a
 * file's content is tens of megabytes of such bytes. */
size_t sg_json_plain(const char *s, size_t n, bool ascii);

/* Base64 (RFC 4648 section 4).  encode returns a new string (caller frees).
 * decode returns a new buffer and its length in *len, or NULL when the input
 * is not base64. */
char *sg_base64_encode(const void *p, size_t n);
/* Writes the base64 of the n bytes at src to dst: 4 * ((n + 2) / 3) bytes,
 * no NUL; returns that count.  dst may lie before src in the same buffer
 * when src - dst >= (n + 2) / 3: each run of three or six bytes is read
 * before its characters are written, and the writing never catches up
 * with the reading (after the first m bytes it has written 4m / 3, the
 * next unread is at (src - dst) + m), so a buffer of the encoded size
 * holding the bytes at its end is encoded in place. */
size_t sg_base64_encode_to(char *dst, const void *src, size_t n);
void *sg_base64_decode(const char *s, size_t *len);
/* Decodes the n characters at s into dst (at most n / 4 * 3 bytes); dst
 * may be s itself (each group of four is read before its three are
 * written, behind it).  Returns the byte count, or (size_t)-1 when s is
 * not base64 (dst then holds a part of the bytes: the caller drops it). */
size_t sg_base64_decode_to(void *dst, const char *s, size_t n);

/* Clocks: monotonic milliseconds, and wall-clock unix seconds. */
int64_t sg_now_ms(void);
int64_t sg_time_s(void);

/* Frees a NULL-terminated vector of strings and the vector. */
void sg_strv_free(char **v);

#endif
