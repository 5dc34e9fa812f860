/* The runner protocol's frames and fields: see proto.h. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "plugins/runner/proto.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What a payload of 0 bytes points to. */
static const unsigned char rn_empty[1];

/* ---- numbers ------------------------------------------------------------------ */

uint32_t rn_get_u32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
	       (uint32_t)p[3];
}

void rn_set_u32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

/* ---- headers -------------------------------------------------------------------- */

void rn_hdr_put(unsigned char out[RN_HDR_SIZE], uint8_t type, uint32_t id,
		uint32_t len)
{
	rn_set_u32(out, len);
	out[4] = type;
	out[5] = 0;
	out[6] = 0;
	out[7] = 0;
	rn_set_u32(out + 8, id);
}

int rn_hdr_get(const unsigned char in[RN_HDR_SIZE], uint32_t max, struct rn_hdr *h)
{
	/* Flags and reserved bytes are zero in version 1: anything else means
	 * the stream lost its framing, and guessing would misroute output. */
	if (in[5] != 0 || in[6] != 0 || in[7] != 0)
		return -1;
	h->len = rn_get_u32(in);
	h->type = in[4];
	h->id = rn_get_u32(in + 8);
	return h->len <= max ? 0 : -1;
}

bool rn_type_known(uint8_t type, bool from_runner)
{
	if (from_runner)
		return (type >= RN_R_HELLO && type <= RN_R_ERROR) || type == RN_R_KEVENT ||
		       type == RN_R_FILE;
	return (type >= RN_HELLO && type <= RN_PING) || type == RN_KEXEC || type == RN_FILE;
}

/* ---- the frame reader ----------------------------------------------------------- */

void rn_reader_init(struct rn_reader *r, uint32_t max)
{
	memset(r, 0, sizeof(*r));
	r->max = max;
}

void rn_reader_free(struct rn_reader *r)
{
	free(r->payload);
	r->payload = NULL;
	r->cap = 0;
}

bool rn_reader_idle(const struct rn_reader *r)
{
	return r->hdr_len == 0 && !r->in_payload;
}

/* Gathers header bytes; returns bytes used, or -1 on a bad header. */
static ssize_t rn_reader_hdr(struct rn_reader *r, const unsigned char *p, size_t n)
{
	size_t take = RN_HDR_SIZE - r->hdr_len;

	if (take > n)
		take = n;
	memcpy(r->hdr + r->hdr_len, p, take);
	r->hdr_len += take;
	if (r->hdr_len < RN_HDR_SIZE)
		return (ssize_t)take;
	if (rn_hdr_get(r->hdr, r->max, &r->h) < 0) {
		snprintf(r->why, sizeof(r->why), "bad frame header (length %u, bytes "
			 "5..7 %02x%02x%02x)", rn_get_u32(r->hdr), r->hdr[5], r->hdr[6],
			 r->hdr[7]);
		return -1;
	}
	if (r->h.len > r->cap) {
		unsigned char *np = realloc(r->payload, r->h.len);

		if (!np) {
			snprintf(r->why, sizeof(r->why), "out of memory for a %u-byte "
				 "frame", r->h.len);
			return -1;
		}
		r->payload = np;
		r->cap = r->h.len;
	}
	r->in_payload = true;
	r->got = 0;
	return (ssize_t)take;
}

int rn_reader_feed(struct rn_reader *r, const void *in, size_t n, rn_frame_fn *fn,
		   void *ud)
{
	const unsigned char *p = in;
	ssize_t used;
	size_t take;
	int rc;

	while (n > 0 || (r->in_payload && r->got == r->h.len)) {
		if (!r->in_payload) {
			used = rn_reader_hdr(r, p, n);
			if (used < 0)
				return -1;
			p += used;
			n -= (size_t)used;
			continue;
		}
		take = r->h.len - r->got;
		if (take > n)
			take = n;
		if (take > 0)
			memcpy(r->payload + r->got, p, take);
		r->got += take;
		p += take;
		n -= take;
		if (r->got < r->h.len)
			return 0;
		r->in_payload = false;
		r->hdr_len = 0;
		/* Never NULL, even before any payload was allocated: callers do
		 * pointer arithmetic and memcpy with it (both undefined on NULL,
		 * even for 0 bytes). */
		rc = fn(&r->h, r->payload ? r->payload : rn_empty, ud);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* ---- building --------------------------------------------------------------------- */

void rn_buf_free(struct rn_buf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

void rn_buf_add(struct rn_buf *b, const void *p, size_t n)
{
	size_t cap;
	unsigned char *np;

	if (b->oom || n == 0)
		return;
	if (b->len + n > b->cap) {
		cap = b->cap ? b->cap : 256;
		while (cap < b->len + n)
			cap *= 2;
		np = realloc(b->data, cap);
		if (!np) {
			b->oom = true;
			return;
		}
		b->data = np;
		b->cap = cap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

size_t rn_frame_begin(struct rn_buf *b, uint8_t type, uint32_t id)
{
	unsigned char hdr[RN_HDR_SIZE];
	size_t start = b->len;

	rn_hdr_put(hdr, type, id, 0);
	rn_buf_add(b, hdr, sizeof(hdr));
	return start;
}

int rn_frame_end(struct rn_buf *b, size_t start)
{
	size_t len;

	if (b->oom)
		return -1;
	len = b->len - start - RN_HDR_SIZE;
	if (len > RN_MAX_PAYLOAD)
		return -1;
	rn_set_u32(b->data + start, (uint32_t)len);
	return 0;
}

void rn_put_bytes(struct rn_buf *b, uint16_t tag, const void *v, uint32_t len)
{
	unsigned char h[6];

	h[0] = (unsigned char)(tag >> 8);
	h[1] = (unsigned char)tag;
	rn_set_u32(h + 2, len);
	rn_buf_add(b, h, sizeof(h));
	rn_buf_add(b, v, len);
}

void rn_put_str(struct rn_buf *b, uint16_t tag, const char *s)
{
	size_t n = strlen(s);

	if (n > RN_MAX_PAYLOAD) {
		b->oom = true; /* cannot fit any frame: fail the build */
		return;
	}
	rn_put_bytes(b, tag, s, (uint32_t)n);
}

void rn_put_u32(struct rn_buf *b, uint16_t tag, uint32_t v)
{
	unsigned char x[4];

	rn_set_u32(x, v);
	rn_put_bytes(b, tag, x, sizeof(x));
}

void rn_put_u64(struct rn_buf *b, uint16_t tag, uint64_t v)
{
	unsigned char x[8];

	rn_set_u32(x, (uint32_t)(v >> 32));
	rn_set_u32(x + 4, (uint32_t)v);
	rn_put_bytes(b, tag, x, sizeof(x));
}

/* ---- reading fields ---------------------------------------------------------------- */

void rn_iter_init(struct rn_iter *it, const void *payload, size_t len)
{
	it->p = payload ? payload : rn_empty;
	it->end = it->p + (payload ? len : 0);
}

int rn_iter_next(struct rn_iter *it, struct rn_field *f)
{
	size_t left = (size_t)(it->end - it->p);

	if (left == 0)
		return 0;
	if (left < 6)
		return -1;
	f->tag = (uint16_t)(it->p[0] << 8 | it->p[1]);
	f->len = rn_get_u32(it->p + 2);
	if (f->len > left - 6)
		return -1;
	f->val = it->p + 6;
	it->p += 6 + (size_t)f->len;
	return 1;
}

int rn_field_u32(const struct rn_field *f, uint32_t *v)
{
	if (f->len != 4)
		return -1;
	*v = rn_get_u32(f->val);
	return 0;
}

int rn_field_u64(const struct rn_field *f, uint64_t *v)
{
	if (f->len != 8)
		return -1;
	*v = (uint64_t)rn_get_u32(f->val) << 32 | rn_get_u32(f->val + 4);
	return 0;
}

int rn_field_str(const struct rn_field *f, char *out, size_t size)
{
	if ((size_t)f->len >= size || memchr(f->val, '\0', f->len))
		return -1;
	memcpy(out, f->val, f->len);
	out[f->len] = '\0';
	return 0;
}

/* ---- build ids ----------------------------------------------------------------------- */

#define RN_FNV_OFFSET 0xcbf29ce484222325ull
#define RN_FNV_PRIME  0x100000001b3ull

static uint64_t rn_fnv(uint64_t h, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= RN_FNV_PRIME;
	}
	return h;
}

void rn_build_id_bytes(const void *p, size_t n, char out[RN_BUILD_ID_LEN + 1])
{
	snprintf(out, RN_BUILD_ID_LEN + 1, "%016llx",
		 (unsigned long long)rn_fnv(RN_FNV_OFFSET, p, n));
}

int rn_build_id_file(const char *path, char out[RN_BUILD_ID_LEN + 1])
{
	unsigned char buf[65536];
	uint64_t h = RN_FNV_OFFSET;
	ssize_t r;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	while ((r = read(fd, buf, sizeof(buf))) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;

			close(fd);
			errno = e;
			return -1;
		}
		h = rn_fnv(h, buf, (size_t)r);
	}
	close(fd);
	snprintf(out, RN_BUILD_ID_LEN + 1, "%016llx", (unsigned long long)h);
	return 0;
}

bool rn_path_climbs(const char *rest)
{
	size_t n;

	for (; *rest; rest += n) {
		rest += strspn(rest, "/");
		n = strcspn(rest, "/");
		if (n == 2 && rest[0] == '.' && rest[1] == '.')
			return true;
	}
	return false;
}

bool rn_path_beneath(const char *canon, const char *dir)
{
	size_t n = strlen(dir);

	if (n == 1 && dir[0] == '/')
		return true;
	return strncmp(canon, dir, n) == 0 && (canon[n] == '\0' || canon[n] == '/');
}
